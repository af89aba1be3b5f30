//! The egress scheduler of one slice and direction (PEPC §3.3-4): after
//! policing, before the port. Packets wait per class, one class per standardized QCI
//! (TS 23.203 Table 6.1.7; operator QCIs 128-254 are mapped onto one of them), and
//! leave in this order:
//!
//! 1. GBR classes, by priority level, for the traffic within each bearer's GBR;
//! 2. non-GBR classes without a weight (strict: QCI 69, 5, 70 by default), by
//!    priority level;
//! 3. non-GBR classes with a weight, deficit round robin in proportion to the weights;
//! 4. what GBR bearers send beyond their GBR (served only when nothing else waits).
//!
//! Work-conserving: whenever the egress has room, the first non-empty class in this
//! order sends. The egress rate is `rate_mbps` (an operator shaping to a backhaul it
//! knows), or the port's own: what a full port pushes back (its socket buffer or TX
//! ring) is queued here ([`Egress::hold`], [`Egress::unsend`]) and leaves in this
//! order as the port takes it. A bounded queue per class tail-drops, and
//! all classes share one bounded pool of buffers; drops are counted per class and
//! reason.
//!
//! Zero cost without congestion: while nothing waits and the batch fits in the
//! egress's tokens, [`Egress::admit`] takes the batch's bytes and leaves its packets
//! where they are (one check per batch; without a configured rate, one branch). A
//! packet is moved (a buffer swap, never a copy) only when the egress is congested.
//! The scheduler is sans-IO: the data thread owns it and feeds it time.

use crate::counters::bump;
use crate::qos::TokenBucket;
use pepc_wire::{Batch, PacketBuf, Verdict, BATCH_SIZE, NO_BEARER};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// The standardized QCIs (TS 23.203 Table 6.1.7, Rel-15): (QCI, GBR, priority level
/// x10). A class's index in this table is its index in the counters.
pub const STANDARD_QCIS: [(u8, bool, u16); 26] = [
    (1, true, 20),
    (2, true, 40),
    (3, true, 30),
    (4, true, 50),
    (65, true, 7),
    (66, true, 20),
    (67, true, 15),
    (71, true, 56),
    (72, true, 56),
    (73, true, 56),
    (74, true, 56),
    (75, true, 25),
    (76, true, 56),
    (82, true, 19),
    (83, true, 22),
    (84, true, 24),
    (85, true, 21),
    (5, false, 10),
    (6, false, 60),
    (7, false, 70),
    (8, false, 80),
    (9, false, 90),
    (69, false, 5),
    (70, false, 55),
    (79, false, 65),
    (80, false, 68),
];

/// Classes: the standardized QCIs, then GBR traffic beyond its GBR.
pub const CLASSES: usize = STANDARD_QCIS.len() + 1;
/// The counters of GBR traffic sent beyond its bearer's GBR (reported as QCI 0; such
/// packets wait, and are dropped, in their own class).
pub const EXCESS: usize = STANDARD_QCIS.len();
/// Unknown QCIs (and packets on no bearer) go to QCI 9's class.
const DEFAULT_QCI: u8 = 9;

/// Delay histogram buckets: bucket k counts delays below 2^k µs (the last: the rest).
pub const DELAY_BUCKETS: usize = 16;

/// Drop reasons of the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EgressDrop {
    /// The class's queue was full (tail drop).
    QueueFull = 0,
    /// The direction's buffer pool was exhausted.
    PoolEmpty = 1,
}

impl EgressDrop {
    pub const ALL: [EgressDrop; 2] = [EgressDrop::QueueFull, EgressDrop::PoolEmpty];
    pub fn name(self) -> &'static str {
        match self {
            EgressDrop::QueueFull => "queue_full",
            EgressDrop::PoolEmpty => "pool_empty",
        }
    }
}

/// The QCI a class reports ([`EXCESS`]: 0).
pub fn class_qci(class: usize) -> u8 {
    STANDARD_QCIS.get(class).map_or(0, |q| q.0)
}

/// One class's counters, read by `/metrics` and the API (the data thread writes).
#[derive(Debug, Default)]
pub struct ClassCounters {
    /// Packets waiting now.
    pub depth: AtomicU64,
    /// Packets and bytes the scheduler queued and later sent.
    pub sent: AtomicU64,
    /// Packets the port pushed back (its socket buffer or TX ring was full): queued
    /// again, at the head of their class or bearer.
    pub pushed_back: AtomicU64,
    pub sent_bytes: AtomicU64,
    /// By [`EgressDrop`].
    pub dropped: [AtomicU64; 2],
    /// Time queued, by [`DELAY_BUCKETS`].
    pub delay: [AtomicU64; DELAY_BUCKETS],
}

/// One direction's scheduler counters.
#[derive(Debug, Default)]
pub struct EgressCounters {
    /// Packets that left in the batch they came with (no congestion).
    pub bypassed: AtomicU64,
    pub classes: [ClassCounters; CLASSES],
}

impl EgressCounters {
    pub fn dropped(&self) -> u64 {
        self.classes
            .iter()
            .flat_map(|c| c.dropped.iter())
            .map(|d| d.load(Relaxed))
            .sum()
    }
}

/// One direction's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressConfig {
    /// Egress rate in Mbit/s (`[s1u] egress_mbps`, `[sgi] egress_mbps`); 0: the port's.
    pub rate_mbps: u64,
    /// Packets per class queue at most.
    pub queue_packets: usize,
    /// Packets queued over all classes at most (buffers are taken as needed).
    pub pool_packets: usize,
    /// Weights of non-GBR QCIs served by weighted round robin; a non-GBR QCI without
    /// one is served by strict priority.
    pub weights: Vec<(u8, u32)>,
    /// Operator QCIs (128-254) and the standardized QCI whose class they join.
    pub operator_qcis: Vec<(u8, u8)>,
}

impl Default for EgressConfig {
    fn default() -> Self {
        EgressConfig {
            rate_mbps: 0,
            queue_packets: 1024,
            pool_packets: 8192,
            weights: vec![(6, 8), (79, 6), (80, 6), (7, 4), (8, 2), (9, 1)],
            operator_qcis: Vec::new(),
        }
    }
}

/// What is wrong with an egress configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressConfigError {
    #[error("QCI {0} is not a standardized non-GBR QCI (weights are for non-GBR classes)")]
    NotWeighted(u8),
    #[error("QCI {0} is not an operator QCI (128-254)")]
    NotOperator(u8),
    #[error("QCI {0} is not a standardized QCI")]
    NotStandard(u8),
    #[error("weight 0 for QCI {0} (leave it out for strict priority)")]
    ZeroWeight(u8),
    #[error("queue_packets must be at least 1")]
    NoQueue,
}

impl EgressConfig {
    pub fn check(&self) -> Result<(), EgressConfigError> {
        let standard = |q: u8| STANDARD_QCIS.iter().position(|s| s.0 == q);
        for &(q, w) in &self.weights {
            match standard(q) {
                Some(i) if !STANDARD_QCIS[i].1 => {}
                _ => return Err(EgressConfigError::NotWeighted(q)),
            }
            if w == 0 {
                return Err(EgressConfigError::ZeroWeight(q));
            }
        }
        for &(op, std) in &self.operator_qcis {
            if !(128..=254).contains(&op) {
                return Err(EgressConfigError::NotOperator(op));
            }
            if standard(std).is_none() {
                return Err(EgressConfigError::NotStandard(std));
            }
        }
        if self.queue_packets == 0 {
            return Err(EgressConfigError::NoQueue);
        }
        Ok(())
    }
}

/// The egress's own token bucket: bytes in nano-bytes as in [`TokenBucket`], with a
/// burst of a batch of full-size packets or 1 ms at the rate, whichever is more (the
/// 100 ms of a policing bucket would let the egress overrun the link by that much).
#[derive(Debug, Clone, Copy)]
struct Shaper {
    /// Bytes per second (0: unlimited).
    rate: u64,
    burst_nb: u64,
    tokens_nb: u64,
    last_ns: u64,
}

const NANO: u64 = 1_000_000_000;

impl Shaper {
    fn new(rate_mbps: u64) -> Self {
        let rate = rate_mbps.saturating_mul(1_000_000) / 8;
        let burst = (rate / 1000).max((BATCH_SIZE * 1600) as u64);
        Shaper {
            rate,
            burst_nb: burst.saturating_mul(NANO),
            tokens_nb: burst.saturating_mul(NANO),
            last_ns: 0,
        }
    }

    #[inline]
    fn refill(&mut self, now: u64) {
        let dt = now.saturating_sub(self.last_ns);
        self.last_ns = self.last_ns.max(now);
        self.tokens_nb = self
            .tokens_nb
            .saturating_add(dt.saturating_mul(self.rate))
            .min(self.burst_nb);
    }

    #[inline]
    fn has(&self, bytes: u64) -> bool {
        self.rate == 0 || self.tokens_nb >= bytes.saturating_mul(NANO)
    }

    fn refund(&mut self, bytes: u64) {
        if self.rate != 0 {
            let back = bytes.saturating_mul(NANO);
            self.tokens_nb = self.tokens_nb.saturating_add(back).min(self.burst_nb);
        }
    }

    #[inline]
    fn take(&mut self, bytes: u64) -> bool {
        let need = bytes.saturating_mul(NANO);
        if self.rate == 0 {
            return true;
        }
        if self.tokens_nb >= need {
            self.tokens_nb -= need;
            true
        } else {
            false
        }
    }
}

/// A GBR bearer's state while it has traffic here: its GBR bucket, taken as its
/// packets leave, and its own queue (one per bearer, so that a packet beyond the GBR
/// waits without holding up another bearer's, and a bearer's packets keep their order).
struct Gbr {
    bucket: TokenBucket,
    queue: VecDeque<u32>,
    last_ns: u64,
}

/// What [`Egress::pick`] chose.
#[derive(Clone, Copy)]
enum Pick {
    /// The head of a non-GBR class's queue.
    Class(usize),
    /// The head of a GBR bearer's queue (of class `.0`, at `.1` in its list of
    /// bearers), within its GBR (`.2` false) or beyond it.
    Gbr(usize, usize, bool),
}

struct Class {
    /// Non-GBR: the queued packets. GBR classes queue per bearer (`bearers`).
    queue: VecDeque<u32>,
    /// GBR: bearers with packets queued, in round-robin order.
    bearers: VecDeque<u32>,
    /// Packets queued in the class.
    len: usize,
    /// Deficit round robin (weighted classes): bytes it may still send this round.
    deficit: u64,
    quantum: u64,
}

/// The delay histogram's bucket of a packet queued at `enq_ns` and sent at `now`.
fn delay_bucket(now: u64, enq_ns: u64) -> usize {
    let us = now.saturating_sub(enq_ns) / 1000;
    (64 - us.leading_zeros() as usize).min(DELAY_BUCKETS - 1)
}

/// One direction's scheduler.
pub struct Egress {
    shaper: Shaper,
    /// Bytes of a queued packet that are not the bearer's IP packet (the G-PDU header
    /// toward S1-U): a bearer's GBR is of IP bytes.
    encap: usize,
    queue_packets: usize,
    pool_packets: usize,
    /// QCI → class.
    class_of_qci: [u8; 256],
    classes: Vec<Class>,
    /// Service order: GBR by priority level, then strict non-GBR by priority level.
    strict: Vec<usize>,
    /// Weighted classes, in round-robin order, and the one whose turn it is.
    weighted: Vec<usize>,
    rr: usize,
    /// The class at `rr` got its quantum this turn.
    rr_topped: bool,
    /// Buffers of queued packets (taken from the pool as needed, up to
    /// `pool_packets`), their arrival times and bearers, and the free ones.
    pool: Vec<PacketBuf>,
    enq_ns: Vec<u64>,
    free: Vec<u32>,
    backlog: usize,
    gbr: HashMap<u32, Gbr>,
    counters: std::sync::Arc<EgressCounters>,
    /// What the last [`Egress::drain`] put at each index of its batch, so that what
    /// the port pushes back goes back where it was ([`Egress::unsend`]).
    drained: Vec<Drained>,
}

/// One packet of the last drain: its class, the class its sending was counted in
/// (beyond-GBR traffic counts apart), its enqueue time, the bearer of a GBR pick
/// and whether the pick was within the GBR (its bucket was taken).
#[derive(Debug, Clone, Copy)]
struct Drained {
    class: u8,
    counted: u8,
    enq_ns: u64,
    bearer: Option<(u32, bool)>,
}

impl Egress {
    /// A scheduler for a checked configuration ([`EgressConfig::check`]).
    pub fn new(cfg: &EgressConfig, counters: std::sync::Arc<EgressCounters>) -> Self {
        let mut class_of_qci = [0u8; 256];
        let default = STANDARD_QCIS
            .iter()
            .position(|q| q.0 == DEFAULT_QCI)
            .unwrap_or(0) as u8;
        class_of_qci.fill(default);
        for (i, q) in STANDARD_QCIS.iter().enumerate() {
            class_of_qci[q.0 as usize] = i as u8;
        }
        for &(op, std) in &cfg.operator_qcis {
            class_of_qci[op as usize] = class_of_qci[std as usize];
        }
        let weight = |qci: u8| cfg.weights.iter().find(|w| w.0 == qci).map(|w| w.1);
        let mut strict: Vec<usize> = (0..STANDARD_QCIS.len())
            .filter(|&i| STANDARD_QCIS[i].1 || weight(STANDARD_QCIS[i].0).is_none())
            .collect();
        // GBR first, then by priority level (a lower value is served first).
        strict.sort_by_key(|&i| (!STANDARD_QCIS[i].1, STANDARD_QCIS[i].2, i));
        let mut weighted: Vec<usize> = (0..STANDARD_QCIS.len())
            .filter(|&i| !strict.contains(&i))
            .collect();
        weighted.sort_by_key(|&i| (STANDARD_QCIS[i].2, i));
        let classes = (0..CLASSES)
            .map(|i| Class {
                queue: VecDeque::new(),
                bearers: VecDeque::new(),
                len: 0,
                deficit: 0,
                // A quantum of at least a whole buffer: each turn sends a packet.
                quantum: u64::from(STANDARD_QCIS.get(i).and_then(|q| weight(q.0)).unwrap_or(1))
                    * pepc_wire::BUF_SIZE as u64,
            })
            .collect();
        Egress {
            shaper: Shaper::new(cfg.rate_mbps),
            encap: 0,
            queue_packets: cfg.queue_packets.max(1),
            pool_packets: cfg.pool_packets.max(1),
            class_of_qci,
            classes,
            strict,
            weighted,
            rr: 0,
            rr_topped: false,
            pool: Vec::new(),
            enq_ns: Vec::new(),
            free: Vec::new(),
            backlog: 0,
            gbr: HashMap::new(),
            counters,
            drained: Vec::new(),
        }
    }

    /// Packets are queued with `bytes` of encapsulation in front of the bearer's IP
    /// packet (the G-PDU header toward S1-U), left out of GBR accounting.
    pub fn with_encapsulation(mut self, bytes: usize) -> Self {
        self.encap = bytes;
        self
    }

    /// The class of a QCI (operator QCIs as configured, unknown ones as QCI 9).
    pub fn class_of(&self, qci: u8) -> usize {
        self.class_of_qci[qci as usize] as usize
    }

    /// Packets waiting.
    #[inline]
    pub fn backlog(&self) -> usize {
        self.backlog
    }

    pub fn counters(&self) -> &std::sync::Arc<EgressCounters> {
        &self.counters
    }

    /// Nothing can wait: no rate of its own and nothing queued. The data thread's
    /// per-batch test (one branch when the egress is the port's).
    #[inline(always)]
    pub fn passes_all(&self) -> bool {
        self.shaper.rate == 0 && self.backlog == 0
    }

    /// After policing: the packets of `batch` whose verdict is `select` either stay
    /// (the egress has room for the whole batch and nothing waits) or are queued by
    /// class and leave the batch (verdict `Consumed`, their buffer swapped for a free
    /// one); [`Egress::drain`] sends them. `bearer` gives a bearer slot's (QCI, GBR in
    /// bit/s), asked only for queued packets.
    pub fn admit(
        &mut self,
        batch: &mut Batch,
        select: Verdict,
        now: u64,
        bearer: impl Fn(u32) -> (u8, u64),
    ) {
        let n = batch.len.min(batch.bufs.len());
        if self.backlog == 0 {
            self.shaper.refill(now);
            let (mut bytes, mut pkts) = (0u64, 0u64);
            for b in &batch.bufs[..n] {
                if b.meta.verdict == select {
                    bytes += b.len() as u64;
                    pkts += 1;
                }
            }
            if self.shaper.take(bytes) {
                bump(&self.counters.bypassed, pkts);
                return;
            }
        }
        for i in 0..n {
            if batch.bufs[i].meta.verdict != select {
                continue;
            }
            let b = batch.bufs[i].meta.bearer;
            let (qci, gbr_bps) = if b == NO_BEARER {
                (DEFAULT_QCI, 0)
            } else {
                bearer(b)
            };
            self.enqueue(&mut batch.bufs[i], qci, gbr_bps, now);
        }
    }

    /// Queue one packet (its buffer is swapped for a free one, verdict `Consumed`).
    fn enqueue(&mut self, buf: &mut PacketBuf, qci: u8, gbr_bps: u64, now: u64) {
        let class = self.class_of(qci);
        let bearer = buf.meta.bearer;
        let gbr = STANDARD_QCIS[class].1 && gbr_bps > 0 && bearer != NO_BEARER;
        let why = if self.classes[class].len >= self.queue_packets {
            Some(EgressDrop::QueueFull)
        } else if self.free.is_empty() && self.pool.len() >= self.pool_packets {
            Some(EgressDrop::PoolEmpty)
        } else {
            None
        };
        if let Some(why) = why {
            buf.meta.verdict = Verdict::Drop;
            bump(&self.counters.classes[class].dropped[why as usize], 1);
            return;
        }
        let slot = self.take_slot();
        std::mem::swap(buf, &mut self.pool[slot as usize]);
        buf.meta.verdict = Verdict::Consumed;
        self.enq_ns[slot as usize] = now;
        if gbr && self.gbr.len() > 4096 {
            self.prune_gbr(now);
        }
        let cl = &mut self.classes[class];
        cl.len += 1;
        if gbr {
            let g = self.gbr.entry(bearer).or_insert_with(|| Gbr {
                bucket: TokenBucket::new(gbr_bps),
                queue: VecDeque::new(),
                last_ns: now,
            });
            g.last_ns = now;
            if g.queue.is_empty() {
                cl.bearers.push_back(bearer);
            }
            g.queue.push_back(slot);
        } else {
            cl.queue.push_back(slot);
        }
        self.backlog += 1;
        bump(&self.counters.classes[class].depth, 1);
    }

    /// Forget GBR bearers idle for a second with nothing queued (their buckets would
    /// be full again by now).
    #[cold]
    fn prune_gbr(&mut self, now: u64) {
        self.gbr
            .retain(|_, g| !g.queue.is_empty() || now.saturating_sub(g.last_ns) < NANO);
    }

    /// The next packet to send, in service order (see the module's doc); `None` when
    /// nothing waits or the egress has no room for the packet whose turn it is.
    fn pick(&mut self, now: u64) -> Option<Pick> {
        // 1. GBR bearers within their GBR, 2. strict non-GBR classes.
        for i in 0..self.strict.len() {
            let c = self.strict[i];
            if self.classes[c].len == 0 {
                continue;
            }
            if !STANDARD_QCIS[c].1 {
                return Some(Pick::Class(c));
            }
            for k in 0..self.classes[c].bearers.len() {
                let g = &mut self.gbr.get_mut(&self.classes[c].bearers[k])?;
                let len = self.pool[*g.queue.front()? as usize].len();
                if !self.shaper.has(len as u64) {
                    return None;
                }
                if g.bucket.allow(len.saturating_sub(self.encap), now) {
                    return Some(Pick::Gbr(c, k, false));
                }
            }
        }
        // 3. Weighted non-GBR classes (deficit round robin).
        if self.weighted.iter().any(|&c| self.classes[c].len > 0) {
            loop {
                let c = self.weighted[self.rr];
                let head = self.classes[c].queue.front().copied();
                let cl = &mut self.classes[c];
                match head {
                    Some(h) => {
                        let len = self.pool[h as usize].len() as u64;
                        if cl.deficit >= len {
                            return Some(Pick::Class(c));
                        }
                        if !self.rr_topped {
                            cl.deficit += cl.quantum;
                            self.rr_topped = true;
                            continue;
                        }
                    }
                    // An empty class keeps no credit (DRR).
                    None => cl.deficit = 0,
                }
                self.rr = (self.rr + 1) % self.weighted.len();
                self.rr_topped = false;
            }
        }
        // 4. GBR bearers beyond their GBR, by the priority of their class.
        self.strict
            .iter()
            .find(|&&c| STANDARD_QCIS[c].1 && !self.classes[c].bearers.is_empty())
            .map(|&c| Pick::Gbr(c, 0, true))
    }

    /// Move the packets the egress has room for now into `out` (from its start, verdict
    /// `select`), in service order; returns how many (also `out.len`).
    pub fn drain(&mut self, out: &mut Batch, select: Verdict, now: u64) -> usize {
        self.shaper.refill(now);
        let cap = out.bufs.len();
        let mut k = 0;
        self.drained.clear();
        while k < cap && self.backlog > 0 {
            let Some(pick) = self.pick(now) else { break };
            let (class, counted, slot, bearer) = match pick {
                Pick::Class(c) => {
                    let Some(&slot) = self.classes[c].queue.front() else {
                        break;
                    };
                    let len = self.pool[slot as usize].len() as u64;
                    if !self.shaper.take(len) {
                        break;
                    }
                    self.classes[c].queue.pop_front();
                    if self.weighted.contains(&c) {
                        self.classes[c].deficit -= len;
                    }
                    (c, c, slot, None)
                }
                Pick::Gbr(c, i, beyond) => {
                    let cl = &mut self.classes[c];
                    let Some(g) = cl.bearers.get(i).and_then(|b| self.gbr.get_mut(b)) else {
                        break;
                    };
                    let Some(&slot) = g.queue.front() else { break };
                    if !self.shaper.take(self.pool[slot as usize].len() as u64) {
                        break;
                    }
                    g.queue.pop_front();
                    // The bearer goes to the back of its class's turn.
                    let b = cl.bearers.remove(i).unwrap_or(NO_BEARER);
                    if !g.queue.is_empty() {
                        cl.bearers.push_back(b);
                    }
                    (c, if beyond { EXCESS } else { c }, slot, Some((b, !beyond)))
                }
            };
            let len = self.pool[slot as usize].len() as u64;
            std::mem::swap(&mut out.bufs[k], &mut self.pool[slot as usize]);
            out.bufs[k].meta.verdict = select;
            self.free.push(slot);
            self.backlog -= 1;
            self.classes[class].len -= 1;
            self.counters.classes[class]
                .depth
                .store(self.classes[class].len as u64, Relaxed);
            let cc = &self.counters.classes[counted];
            bump(&cc.sent, 1);
            bump(&cc.sent_bytes, len);
            let enq_ns = self.enq_ns[slot as usize];
            bump(&cc.delay[delay_bucket(now, enq_ns)], 1);
            self.drained.push(Drained {
                class: class as u8,
                counted: counted as u8,
                enq_ns,
                bearer,
            });
            k += 1;
        }
        out.len = k;
        k
    }

    /// The packets at `held` of the batch the last [`Egress::drain`] filled (at this
    /// `now`) did not leave: the port pushed back. They go back to the head of their
    /// class or bearer in their order, with their enqueue time, and what their drain
    /// took (the rate's and the GBR's tokens, the sent counts) is given back, so a
    /// pushed-back packet is sent, counted and delayed once.
    pub fn unsend(&mut self, out: &mut Batch, held: &[u16], now: u64) {
        for &i in held.iter().rev() {
            let i = usize::from(i);
            let (Some(d), Some(buf)) = (self.drained.get(i).copied(), out.bufs.get_mut(i)) else {
                continue;
            };
            let len = buf.len() as u64;
            let c = usize::from(d.class);
            let cc = &self.counters.classes[usize::from(d.counted)];
            cc.sent.fetch_sub(1, Relaxed);
            cc.sent_bytes.fetch_sub(len, Relaxed);
            cc.delay[delay_bucket(now, d.enq_ns)].fetch_sub(1, Relaxed);
            bump(&self.counters.classes[c].pushed_back, 1);
            self.shaper.refund(len);
            let slot = self.take_slot();
            std::mem::swap(buf, &mut self.pool[slot as usize]);
            buf.meta.verdict = Verdict::Consumed;
            self.enq_ns[slot as usize] = d.enq_ns;
            let cl = &mut self.classes[c];
            match d
                .bearer
                .and_then(|(b, within)| Some((b, within, self.gbr.get_mut(&b)?)))
            {
                Some((b, within, g)) => {
                    if within {
                        g.bucket
                            .refund(len.saturating_sub(self.encap as u64) as usize);
                    }
                    if g.queue.is_empty() {
                        cl.bearers.push_front(b);
                    }
                    g.queue.push_front(slot);
                }
                None => {
                    if self.weighted.contains(&c) {
                        cl.deficit += len;
                    }
                    cl.queue.push_front(slot);
                }
            }
            cl.len += 1;
            self.backlog += 1;
            self.counters.classes[c].depth.store(cl.len as u64, Relaxed);
        }
    }

    /// The packets at `held` of a batch [`Egress::admit`] let through did not leave:
    /// the port pushed back. They are queued (by class, after nothing: the egress had
    /// no backlog when it let them through), and from now on the batches behind them
    /// queue too until the backlog is sent.
    pub fn hold(
        &mut self,
        batch: &mut Batch,
        held: &[u16],
        now: u64,
        bearer: impl Fn(u32) -> (u8, u64),
    ) {
        for &i in held {
            let Some(buf) = batch.bufs.get_mut(usize::from(i)) else {
                continue;
            };
            let b = buf.meta.bearer;
            let (qci, gbr_bps) = if b == NO_BEARER {
                (DEFAULT_QCI, 0)
            } else {
                bearer(b)
            };
            if self.shaper.rate != 0 {
                // Counted as let through by `admit` (without a rate of its own, the
                // data path does not call it while nothing waits).
                self.counters.bypassed.fetch_sub(1, Relaxed);
            }
            bump(&self.counters.classes[self.class_of(qci)].pushed_back, 1);
            self.enqueue(buf, qci, gbr_bps, now);
        }
    }

    /// A free buffer slot of the pool (a new one if none is free).
    fn take_slot(&mut self) -> u32 {
        match self.free.pop() {
            Some(s) => s,
            None => {
                self.pool.push(PacketBuf::new());
                self.enq_ns.push(0);
                (self.pool.len() - 1) as u32
            }
        }
    }
}
