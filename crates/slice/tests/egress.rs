//! The egress scheduler on its own, in virtual time: flows offer packets
//! every millisecond, the scheduler admits them as the data thread would after
//! policing and drains what the egress rate allows. No clock is read, so every figure
//! here is exact and repeatable.

use pepc_slice::datapath::egress::{
    class_qci, Egress, EgressConfig, EgressCounters, EgressDrop, EXCESS,
};
use pepc_wire::{Batch, PacketBuf, Verdict, BATCH_SIZE};
use std::sync::Arc;

const MS: u64 = 1_000_000;

#[derive(Clone)]
struct Flow {
    bearer: u32,
    qci: u8,
    /// GBR of its bearer, bit/s (0: non-GBR).
    gbr: u64,
    /// Offered, bit/s.
    rate: u64,
    len: usize,
    credit: f64,
    next_id: u32,
}

fn flow(bearer: u32, qci: u8, gbr: u64, rate: u64, len: usize) -> Flow {
    Flow {
        bearer,
        qci,
        gbr,
        rate,
        len,
        credit: 0.0,
        next_id: 0,
    }
}

/// A packet of `len` bytes on `bearer`, its sequence number in its first bytes.
fn packet(bearer: u32, id: u32, len: usize) -> PacketBuf {
    let mut p = PacketBuf::new();
    let mut bytes = vec![0u8; len.max(8)];
    bytes[..4].copy_from_slice(&bearer.to_be_bytes());
    bytes[4..8].copy_from_slice(&id.to_be_bytes());
    assert!(p.fill(&bytes));
    p.meta.bearer = bearer;
    p.meta.verdict = Verdict::ToS1u;
    p
}

fn ids(p: &PacketBuf) -> (u32, u32) {
    let s = p.as_slice();
    (
        u32::from_be_bytes(s[..4].try_into().unwrap()),
        u32::from_be_bytes(s[4..8].try_into().unwrap()),
    )
}

/// What left the egress: (bearer, id, bytes, time) in sending order.
type Sent = Vec<(u32, u32, usize, u64)>;

struct Sim {
    e: Egress,
    flows: Vec<Flow>,
    sent: Sent,
    out: Batch,
}

impl Sim {
    fn new(cfg: EgressConfig, flows: Vec<Flow>) -> Self {
        cfg.check().unwrap();
        Sim {
            e: Egress::new(&cfg, Arc::new(EgressCounters::default())),
            flows,
            sent: Vec::new(),
            out: Batch::new(BATCH_SIZE),
        }
    }

    /// Admit one batch of packets at `now`; what stays in it leaves at once.
    fn admit(&mut self, pkts: Vec<PacketBuf>, now: u64) {
        let mut b = Batch::new(BATCH_SIZE);
        b.len = pkts.len();
        for (i, p) in pkts.into_iter().enumerate() {
            b.bufs[i] = p;
        }
        let flows = self.flows.clone();
        self.e.admit(&mut b, Verdict::ToS1u, now, |bearer| {
            let f = flows.iter().find(|f| f.bearer == bearer).unwrap();
            (f.qci, f.gbr)
        });
        for p in &b.bufs[..b.len] {
            assert_ne!(p.meta.verdict, Verdict::ToSgi);
            if p.meta.verdict == Verdict::ToS1u {
                let (bearer, id) = ids(p);
                self.sent.push((bearer, id, p.len(), now));
            }
        }
    }

    fn drain(&mut self, now: u64) {
        while self.e.drain(&mut self.out, Verdict::ToS1u, now) > 0 {
            for p in &self.out.bufs[..self.out.len] {
                assert_eq!(p.meta.verdict, Verdict::ToS1u);
                let (bearer, id) = ids(p);
                self.sent.push((bearer, id, p.len(), now));
            }
        }
    }

    /// Offer every flow's rate for `ms` milliseconds from `start`, draining each ms.
    fn run(&mut self, start: u64, ms: u64) {
        for t in 0..ms {
            let now = start + t * MS;
            let mut pkts = Vec::new();
            for f in &mut self.flows {
                f.credit += f.rate as f64 / 8.0 / 1000.0;
                while f.credit >= f.len as f64 {
                    f.credit -= f.len as f64;
                    pkts.push(packet(f.bearer, f.next_id, f.len));
                    f.next_id += 1;
                }
            }
            for chunk in pkts.chunks_mut(BATCH_SIZE) {
                let v: Vec<PacketBuf> = chunk.iter_mut().map(std::mem::take).collect();
                self.admit(v, now);
            }
            self.drain(now);
        }
    }

    /// Bits per second each bearer got between `from` and `to` (ns).
    fn rate_of(&self, bearer: u32, from: u64, to: u64) -> f64 {
        let bytes: usize = self
            .sent
            .iter()
            .filter(|s| s.0 == bearer && s.3 >= from && s.3 < to)
            .map(|s| s.2)
            .sum();
        bytes as f64 * 8.0 / ((to - from) as f64 / 1e9)
    }
}

fn cfg(mbps: u64) -> EgressConfig {
    EgressConfig {
        rate_mbps: mbps,
        ..EgressConfig::default()
    }
}

#[test]
fn uncongested_batches_stay_whole() {
    // No rate of its own: nothing is ever looked at.
    let mut s = Sim::new(cfg(0), vec![flow(1, 9, 0, 50_000_000, 1400)]);
    assert!(s.e.passes_all());
    s.run(0, 100);
    assert_eq!(s.e.backlog(), 0);
    // A rate above the offered load: every packet stays in its batch (bypassed).
    let mut s = Sim::new(cfg(100), vec![flow(1, 9, 0, 50_000_000, 1400)]);
    s.run(0, 100);
    let c = s.e.counters();
    assert_eq!(
        c.bypassed.load(std::sync::atomic::Ordering::Relaxed),
        s.sent.len() as u64
    );
    assert!(c
        .classes
        .iter()
        .all(|c| c.sent.load(std::sync::atomic::Ordering::Relaxed) == 0));
}

#[test]
fn strict_priority_order_under_a_backlog() {
    let flows = vec![
        flow(1, 9, 0, 0, 1500),
        flow(2, 5, 0, 0, 1500),
        flow(3, 69, 0, 0, 1500),
        flow(4, 1, 1_000_000_000, 0, 1500),
    ];
    let mut s = Sim::new(cfg(10), flows);
    // One batch fits the egress's burst and leaves; the rest wait.
    s.admit((0..32).map(|i| packet(1, i, 1500)).collect(), 0);
    assert_eq!(s.sent.len(), 32);
    s.admit((32..40).map(|i| packet(1, i, 1500)).collect(), 0);
    let mixed = (0..8)
        .flat_map(|i| [packet(2, i, 1500), packet(3, i, 1500), packet(4, i, 1500)])
        .collect::<Vec<_>>();
    s.admit(mixed, 0);
    assert_eq!(s.e.backlog(), 32);
    s.sent.clear();
    s.drain(1000 * MS);
    let order: Vec<u32> = s.sent.iter().map(|x| x.0).collect();
    // GBR (QCI 1), then QCI 69 (priority 0.5), QCI 5 (1), QCI 9.
    let want: Vec<u32> = [4, 3, 2, 1].iter().flat_map(|&b| [b; 8]).collect();
    assert_eq!(order, want);
}

#[test]
fn gbr_gets_its_rate_and_not_beyond_while_non_gbr_waits() {
    // 10 Mbit/s egress; a QCI 1 bearer with a GBR of 2 Mbit/s offers 4; a QCI 9
    // download offers 20.
    let flows = vec![
        flow(1, 1, 2_000_000, 4_000_000, 200),
        flow(2, 9, 0, 20_000_000, 1400),
    ];
    let mut s = Sim::new(cfg(10), flows);
    s.run(0, 3000);
    // After the GBR bucket's initial burst (100 ms at the GBR).
    let (from, to) = (1000 * MS, 3000 * MS);
    let gbr = s.rate_of(1, from, to);
    let bulk = s.rate_of(2, from, to);
    assert!(
        (1_980_000.0..=2_020_000.0).contains(&gbr),
        "GBR bearer {gbr}"
    );
    assert!(
        (9_700_000.0..=10_050_000.0).contains(&(gbr + bulk)),
        "work-conserving: {gbr} + {bulk}"
    );
    // The excess waited behind the download, and overflowed its class's queue.
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    let c = s.e.counters();
    let qci1 = s.e.class_of(1);
    assert!(load(&c.classes[qci1].dropped[EgressDrop::QueueFull as usize]) > 0);
    assert_eq!(load(&c.classes[EXCESS].sent), 0);
}

#[test]
fn weighted_classes_share_in_proportion() {
    let mut c = cfg(10);
    c.weights = vec![(7, 3), (9, 1)];
    let flows = vec![
        flow(1, 7, 0, 20_000_000, 1000),
        flow(2, 9, 0, 20_000_000, 1000),
    ];
    let mut s = Sim::new(c, flows);
    s.run(0, 2000);
    let (a, b) = (
        s.rate_of(1, 500 * MS, 2000 * MS),
        s.rate_of(2, 500 * MS, 2000 * MS),
    );
    let ratio = a / b;
    assert!((2.9..=3.1).contains(&ratio), "{a} / {b} = {ratio}");
}

#[test]
fn the_lowest_class_is_not_starved_when_higher_ones_are_below_their_share() {
    // Strict and GBR classes use 5 of 10 Mbit/s; QCI 9 (lowest) gets the other 5.
    let flows = vec![
        flow(1, 1, 2_000_000, 2_000_000, 200),
        flow(2, 5, 0, 3_000_000, 500),
        flow(3, 9, 0, 30_000_000, 1400),
    ];
    let mut s = Sim::new(cfg(10), flows);
    s.run(0, 2000);
    let (from, to) = (500 * MS, 2000 * MS);
    let low = s.rate_of(3, from, to);
    assert!((4_800_000.0..=5_100_000.0).contains(&low), "QCI 9: {low}");
    assert!(s.rate_of(2, from, to) > 2_950_000.0);
    assert!(s.rate_of(1, from, to) > 1_950_000.0);
}

#[test]
fn queues_and_the_pool_are_bounded() {
    let mut c = cfg(1);
    c.queue_packets = 16;
    c.pool_packets = 24;
    let flows = vec![flow(1, 9, 0, 0, 1500), flow(2, 8, 0, 0, 1500)];
    let mut s = Sim::new(c, flows);
    for k in 0..4 {
        s.admit((0..32).map(|i| packet(1, k * 32 + i, 1500)).collect(), 0);
    }
    // One batch left on the burst; 16 of the next wait; the rest were tail-dropped.
    assert_eq!(s.e.backlog(), 16);
    s.admit((0..32).map(|i| packet(2, i, 1500)).collect(), 0);
    // The pool holds 24: QCI 8 got 8 of its 16.
    assert_eq!(s.e.backlog(), 24);
    let counters = s.e.counters();
    let class = |qci: u8| {
        (0..EXCESS)
            .find(|&i| class_qci(i) == qci)
            .map(|i| &counters.classes[i])
            .unwrap()
    };
    let load = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        load(&class(9).dropped[EgressDrop::QueueFull as usize]),
        16 + 32 + 32
    );
    assert_eq!(load(&class(8).dropped[EgressDrop::PoolEmpty as usize]), 24);
    assert_eq!(load(&class(9).depth), 16);
    assert_eq!(counters.dropped(), 80 + 24);
}

#[test]
fn a_bearer_keeps_its_order() {
    // A GBR bearer above its GBR (part of it in the excess class), two non-GBR ones.
    let flows = vec![
        flow(1, 1, 1_000_000, 3_000_000, 300),
        flow(2, 9, 0, 8_000_000, 1400),
        flow(3, 6, 0, 4_000_000, 700),
    ];
    let mut s = Sim::new(cfg(10), flows);
    s.run(0, 1000);
    s.drain(10_000 * MS);
    for bearer in 1..=3 {
        let ids: Vec<u32> = s
            .sent
            .iter()
            .filter(|x| x.0 == bearer)
            .map(|x| x.1)
            .collect();
        assert!(!ids.is_empty());
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "bearer {bearer} out of order"
        );
    }
}

#[test]
fn operator_qcis_join_their_mapped_class_and_bad_config_is_refused() {
    let mut c = cfg(10);
    c.operator_qcis = vec![(130, 5)];
    let e = Egress::new(&c, Arc::new(EgressCounters::default()));
    assert_eq!(class_qci(e.class_of(130)), 5);
    assert_eq!(class_qci(e.class_of(200)), 9);
    for bad in [
        EgressConfig {
            weights: vec![(1, 2)],
            ..cfg(1)
        },
        EgressConfig {
            weights: vec![(9, 0)],
            ..cfg(1)
        },
        EgressConfig {
            operator_qcis: vec![(20, 9)],
            ..cfg(1)
        },
        EgressConfig {
            operator_qcis: vec![(140, 10)],
            ..cfg(1)
        },
    ] {
        assert!(bad.check().is_err(), "{bad:?}");
    }
}

/// A port that takes `bytes_per_ms` a millisecond (a link with a buffer of a few
/// milliseconds) and pushes back the rest: what it took, and the indexes of the
/// selected packets it did not (in batch order).
struct Port {
    bytes_per_ms: usize,
    room: usize,
    at: u64,
}

impl Port {
    fn send(&mut self, b: &Batch, now: u64, sent: &mut Sent, held: &mut Vec<u16>) {
        if now != self.at {
            let ms = if self.at == u64::MAX {
                1
            } else {
                (now - self.at) / MS
            };
            let room = self.room + self.bytes_per_ms * ms as usize;
            (self.at, self.room) = (now, room.min(4 * self.bytes_per_ms));
        }
        held.clear();
        for (i, p) in b.bufs[..b.len].iter().enumerate() {
            if p.meta.verdict != Verdict::ToS1u {
                continue;
            }
            if held.is_empty() && p.len() <= self.room {
                self.room -= p.len();
                let (bearer, id) = ids(p);
                sent.push((bearer, id, p.len(), now));
            } else {
                held.push(i as u16);
            }
        }
    }
}

/// Without a rate of its own, the egress is the port's: what a full port pushes
/// back waits in the scheduler and leaves in QoS order as the port takes it. A GBR
/// voice bearer keeps its rate and a short delay under 3x overload of bulk traffic,
/// the port stays busy, every bearer keeps its order, nothing is sent twice, and the
/// counters count each packet once.
#[test]
fn a_port_that_pushes_back_gets_qos_order() {
    use std::sync::atomic::Ordering::Relaxed;
    // 10 Mbit/s port: 1,250 bytes a millisecond.
    let mut port = Port {
        bytes_per_ms: 1250,
        room: 0,
        at: u64::MAX,
    };
    let flows = vec![
        flow(1, 1, 1_000_000, 1_000_000, 200),
        flow(2, 9, 0, 30_000_000, 1400),
    ];
    let mut s = Sim::new(cfg(0), flows.clone());
    let mut flows = flows;
    let mut held = Vec::new();
    let key = |fl: &[Flow], bearer: u32| {
        let f = fl.iter().find(|f| f.bearer == bearer).unwrap();
        (f.qci, f.gbr)
    };
    let ms = 2000;
    for t in 0..ms {
        let now = t * MS;
        let mut b = Batch::new(BATCH_SIZE);
        for f in &mut flows {
            f.credit += f.rate as f64 / 8.0 / 1000.0;
            while f.credit >= f.len as f64 && b.len < BATCH_SIZE {
                f.credit -= f.len as f64;
                b.bufs[b.len] = packet(f.bearer, f.next_id, f.len);
                b.len += 1;
                f.next_id += 1;
            }
        }
        // As the data thread does: the scheduler is asked only when it may queue.
        if !s.e.passes_all() {
            s.e.admit(&mut b, Verdict::ToS1u, now, |x| key(&flows, x));
        }
        port.send(&b, now, &mut s.sent, &mut held);
        if !held.is_empty() {
            s.e.hold(&mut b, &held, now, |x| key(&flows, x));
        }
        while s.e.drain(&mut s.out, Verdict::ToS1u, now) > 0 {
            port.send(&s.out, now, &mut s.sent, &mut held);
            if !held.is_empty() {
                s.e.unsend(&mut s.out, &held, now);
                break;
            }
        }
    }
    let offered = |bearer: u32| flows.iter().find(|f| f.bearer == bearer).unwrap().next_id;
    // Voice: every packet out, within its GBR, in order.
    let voice: Vec<&(u32, u32, usize, u64)> = s.sent.iter().filter(|x| x.0 == 1).collect();
    assert!(
        voice.len() as f64 >= 0.999 * offered(1) as f64 - 1.0,
        "{} of {}",
        voice.len(),
        offered(1)
    );
    // Voice has no gap; bulk loses what its bounded queue could not hold (tail
    // drop, counted below); both keep their order and nothing goes twice.
    for (bearer, gapless) in [(1, true), (2, false)] {
        let ids: Vec<u32> = s
            .sent
            .iter()
            .filter(|x| x.0 == bearer)
            .map(|x| x.1)
            .collect();
        assert!(
            ids.windows(2)
                .all(|w| w[0] < w[1] && (!gapless || w[0] + 1 == w[1])),
            "bearer {bearer}: out of order, twice, or a gap"
        );
    }
    // Work-conserving: the port was kept busy (each ms at most a packet short).
    let bytes: usize = s.sent.iter().map(|x| x.2).sum();
    let capacity = port.bytes_per_ms * ms as usize;
    assert!(
        bytes as f64 >= 0.97 * capacity as f64,
        "{bytes} of {capacity}"
    );
    // Counters: what the scheduler counts as sent is what left through it, once.
    let c = s.e.counters();
    let through: u64 = c.classes.iter().map(|k| k.sent.load(Relaxed)).sum();
    let pushed: u64 = c.classes.iter().map(|k| k.pushed_back.load(Relaxed)).sum();
    assert!(pushed > 0);
    let queued_now = s.e.backlog() as u64;
    let dropped = c.dropped();
    assert_eq!(
        s.sent.len() as u64 + queued_now + dropped,
        offered(1) as u64 + offered(2) as u64
    );
    assert!(through <= s.sent.len() as u64);
    // Voice that had to wait waited under 2 ms (its class's delay histogram: bucket
    // k holds delays below 2^k µs).
    let voice_class = s.e.class_of(1);
    let late: u64 = c.classes[voice_class].delay[12..]
        .iter()
        .map(|d| d.load(Relaxed))
        .sum();
    assert_eq!(late, 0, "voice delayed 2 ms or more");
}
