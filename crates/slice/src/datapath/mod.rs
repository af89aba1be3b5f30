//! The slice's data thread: S-GW/P-GW user-plane work as a pipeline of stages over
//! batches (NetBricks/BESS style).
//!
//! ```text
//! uplink:   sync → parse GTP-U → classify TEID → lookup bearer, UE → PCEF → AMBR/MBR
//!           → count → decap → SGi
//! downlink: sync → parse IPv4 → classify UE IP → lookup UE → PCEF (bearer binding)
//!           → lookup bearer → AMBR/MBR → count → encap → S1-U
//! ```
//! The *primary* table is this thread's own, indexed directly by the slot carried in the
//! TEID / UE address (see [`crate::ids`]); only promoted (active) UEs are present and
//! only their entries are ever touched, so the cache footprint follows the active set.
//! A miss on a UE that exists (the secondary index says so) buffers the packet and asks
//! the control thread to promote the UE; a miss on an identifier that does not exist
//! gets an Error Indication (uplink) or is dropped (downlink). Nothing here allocates
//! per packet or takes a lock.

use crate::context::{DpBearerRecord, DpUeRecord, NO_SLOT};
use crate::counters::{
    bump, BearerHot, DownlinkLine, DropReason, RuleCounters, SliceCounters, UeDown, UplinkLine,
};
use crate::ids::{IdLayout, IotPool};
use crate::mem::prefetch;
use crate::pcef::{Decision, RuleSet};
use crate::qos::TokenBucket;
use crate::spsc::{Consumer, Producer};
use crate::update::{DpRequest, DpUpdate};
use pepc_wire::flow::{five_tuple, FiveTuple};
use pepc_wire::gtpu::{self, GtpuPacket};
use pepc_wire::ipv4::Ipv4Packet;
use pepc_wire::{Batch, PacketBuf, Verdict, BATCH_SIZE};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

pub mod egress;
mod pending;
mod updates;

use egress::{Egress, EgressConfig};

use pending::PendingUe;

// The hot records: per slot `i` an uplink line (bearer `i`'s record and counters,
// UE `i`'s rule set and uplink AMBR) and a downlink line (UE `i`'s first PDN
// connection, its default bearer's tunnel, downlink AMBR, bearer `i`'s downlink
// counters), one table per direction in `counters`. A UE's first default bearer has
// the UE's own slot, so the common packet (that PDN, that bearer) reads and writes
// one line. Everything else (other PDNs, dedicated bearers, MBR buckets) is in the
// cold records, read only when a packet needs it. Rebuilt from the published records
// by [`DataPlane::apply`].

/// Hot flags: the entry is installed (UE / bearer in the primary table).
const HOT_VALID: u8 = 1;
/// Hot flags: the bearer has an MBR, enforced from its cold record.
const HOT_MBR: u8 = 2;
/// Downlink hot flags: the UE's hot default bearer is in the UE's own slot, so its
/// tunnel is in the downlink line (else downlink takes the cold records).
const HOT_PAIRED: u8 = 4;

/// Per-bearer cold record: the published record and MBR buckets.
#[derive(Default)]
struct BearerCold {
    rec: DpBearerRecord,
    mbr_ul: TokenBucket,
    mbr_dl: TokenBucket,
}

// SAFETY: integers, bools and integer arrays only.
unsafe impl crate::mem::Zeroable for BearerCold {}
unsafe impl crate::mem::Zeroable for DpUeRecord {}
unsafe impl crate::mem::Zeroable for u32 {}
unsafe impl crate::mem::Zeroable for u8 {}

/// How many packets `forward` runs behind `next` (see [`DataPlane::run_stages`]).
const FORWARD_LAG: usize = 2;
// `run_stages` keeps a bit per packet of a batch in a u64.
const _: () = assert!(BATCH_SIZE <= 64);

/// Per-packet scratch carried between stages.
#[derive(Clone, Copy, Default)]
struct Scratch {
    /// What stage 1 found.
    kind: Kind,
    /// G-PDU header length (uplink) to strip at decap.
    hdr: u16,
    teid: u32,
    slot: u32,
    /// Downlink: PDN index of the destination address ([`NO_PDN`]: not from the
    /// layout, found at the forward stage).
    pdn: u8,
}

/// Scratch `pdn` of a downlink address that came from the exception table.
const NO_PDN: u8 = u8::MAX;

#[derive(Clone, Copy, Default, PartialEq, Eq)]
enum Kind {
    /// Already decided (answered, dropped, consumed).
    #[default]
    Done,
    /// Uplink G-PDU for a structured TEID / downlink packet for a UE slot.
    Ue,
    /// Stateless-IoT pool member.
    Iot,
}

/// Slice-wide limits of the promotion buffer.
/// Originated packets (End Markers) held per sync until the driver sends them.
pub const GENERATED_CAPACITY: usize = 256;
pub const PENDING_UES: usize = 256;
pub const PENDING_PER_UE: usize = 16;
pub const PENDING_POOL: usize = 2048;
/// Buffered packets whose UE was not promoted within this long are dropped.
pub const PENDING_TIMEOUT_NS: u64 = 5_000_000_000;

/// Data-thread configuration.
#[derive(Debug, Clone)]
pub struct DataPlaneConfig {
    pub slice: u32,
    pub layout: IdLayout,
    pub iot: Option<IotPool>,
    /// Our S1-U address (the GTP-U Peer Address in Error Indications).
    pub s1u_addr: Ipv4Addr,
    /// Error Indications per second (slice-wide).
    pub error_indication_rate: u32,
    /// Control updates applied per sync at most (bounds the pause between batches).
    pub max_updates_per_sync: usize,
    /// Packet buffers for UEs awaiting promotion or paging (default [`PENDING_POOL`]).
    pub pending_pool: usize,
    /// The egress schedulers: toward SGi (uplink), toward S1-U (downlink).
    pub egress: [EgressConfig; 2],
}

/// The data thread's state. Owned by that thread alone.
pub struct DataPlane {
    cfg: DataPlaneConfig,
    /// Primary table, by bearer slot / UE slot: the hot records are the slots' uplink
    /// and downlink lines in `counters` ([`UplinkLine`], [`DownlinkLine`]); the cold
    /// ones are read when a packet leaves the common case.
    bearer_cold: Box<[BearerCold]>,
    /// UE slots: their hot records are `counters.ul[..ue_slots]`, `counters.dl[..ue_slots]`.
    ue_slots: usize,
    ue_cold: Box<[DpUeRecord]>,
    /// Secondary index: uplink TEID of each existing bearer slot (0 = none), PDN pools
    /// in use by each existing UE slot (bitmask, 0 = no UE).
    known_teid: Box<[u32]>,
    known_pdns: Box<[u8]>,
    exc_teid: HashMap<u32, u32>,
    exc_ip: HashMap<u32, u32>,
    rule_sets: Vec<Option<Box<RuleSet>>>,
    iot_rules: RuleSet,
    iot_tunnels: Box<[u32]>, // pairs (enb_teid, enb_addr)
    counters: Arc<SliceCounters>,
    updates: Consumer<DpUpdate>,
    requests: Producer<DpRequest>,
    /// Requests that did not fit in the ring, retried at the next sync.
    request_backlog: Vec<DpRequest>,
    /// Requests that reached the ring so far (a driver compares it to wake the
    /// control thread).
    requests_pushed: u64,
    pending: Vec<PendingUe>,
    pool: Vec<PacketBuf>,
    pool_free: Vec<u16>,
    ready: Vec<(u16, bool)>,
    /// Packets the data thread originates (End Markers), sent on S1-U by the driver.
    pub generated: Batch,
    ei_tokens: u32,
    ei_window_start: u64,
    scratch: [Scratch; BATCH_SIZE],
    /// Egress schedulers: toward SGi (uplink), toward S1-U (downlink). Boxed: cold
    /// state (queues, class tables) kept out of the hot struct's lines; a batch reads
    /// one line of it when nothing is congested.
    egress: Box<[Egress; 2]>,
}

/// Inner IPv4 packet: (total length, source, 5-tuple), or why it is malformed.
/// [`five_tuple`] validates version, IHL and lengths against the buffer, so the header
/// is parsed once.
#[inline(always)]
fn inner_packet(data: &[u8]) -> Result<(usize, u32, FiveTuple), DropReason> {
    let ft = five_tuple(data).map_err(|_| DropReason::MalformedIp)?;
    let total = u16::from_be_bytes([data[2], data[3]]) as usize;
    Ok((total, u32::from(ft.src), ft))
}

/// Decapsulate: strip the GTP-U header, trim link padding, hand to SGi.
#[inline(always)]
fn to_sgi(buf: &mut PacketBuf, hdr: usize, ip_len: usize) {
    buf.strip(hdr);
    buf.truncate(ip_len);
    buf.meta.verdict = Verdict::ToSgi;
}

#[inline(always)]
fn count_rule(c: &RuleCounters, uplink: bool, len: usize) {
    let (p, b) = if uplink {
        (&c.ul_packets, &c.ul_bytes)
    } else {
        (&c.dl_packets, &c.dl_bytes)
    };
    bump(p, 1);
    bump(b, len as u64);
}

/// Count a packet on a bearer's line of its direction.
#[inline(always)]
fn count_bearer(packets: &AtomicU64, bytes: &AtomicU64, last: &AtomicU64, len: usize, now: u64) {
    bump(packets, 1);
    bump(bytes, len as u64);
    last.store(now, Relaxed);
}

impl DataPlane {
    pub fn new(
        cfg: DataPlaneConfig,
        bearer_slots: usize,
        ue_slots: usize,
        counters: Arc<SliceCounters>,
        updates: Consumer<DpUpdate>,
        requests: Producer<DpRequest>,
    ) -> Self {
        // The bearers' hot records live in their counters (one line per bearer).
        assert!(
            counters.slots() >= bearer_slots.max(ue_slots)
                && counters.bearer_drops.len() >= bearer_slots,
            "slice counters for {} slots, data plane for {bearer_slots} bearers, {ue_slots} UEs",
            counters.slots()
        );
        let iot_size = cfg.iot.map(|p| p.size as usize).unwrap_or(0);
        // Buffers are indexed by u16.
        let pool = cfg.pending_pool.clamp(1, u16::MAX as usize);
        let counters_egress = counters.egress.clone();
        DataPlane {
            bearer_cold: crate::mem::zeroed_slice(bearer_slots),
            ue_slots,
            ue_cold: crate::mem::zeroed_slice(ue_slots),
            known_teid: crate::mem::zeroed_slice(bearer_slots),
            known_pdns: crate::mem::zeroed_slice(ue_slots),
            exc_teid: HashMap::new(),
            exc_ip: HashMap::new(),
            rule_sets: (0..crate::counters::MAX_RULE_SETS).map(|_| None).collect(),
            iot_rules: RuleSet::empty(),
            iot_tunnels: crate::mem::zeroed_slice(iot_size * 2),
            counters,
            updates,
            requests,
            request_backlog: Vec::with_capacity(64),
            requests_pushed: 0,
            pending: Vec::with_capacity(PENDING_UES),
            pool: (0..pool).map(|_| PacketBuf::new()).collect(),
            pool_free: (0..pool as u16).rev().collect(),
            ready: Vec::with_capacity(pool),
            generated: Batch::new(GENERATED_CAPACITY),
            ei_tokens: cfg.error_indication_rate,
            ei_window_start: 0,
            scratch: [Scratch::default(); BATCH_SIZE],
            // Toward S1-U packets are queued as G-PDUs (8-byte header, no options).
            egress: Box::new([0, 1].map(|d| {
                Egress::new(&cfg.egress[d], counters_egress[d].clone())
                    .with_encapsulation(d * gtpu::HEADER_LEN)
            })),
            cfg,
        }
    }

    /// Slot `slot`'s uplink line: bearer `slot`'s record and counters, UE `slot`'s
    /// uplink policy.
    #[inline(always)]
    fn ul_line(&self, slot: u32) -> Option<&UplinkLine> {
        self.counters.ul.get(slot as usize)
    }

    /// Slot `slot`'s downlink line, for a UE slot (`None` beyond the UE slots).
    #[inline(always)]
    fn dl_line(&self, ue_slot: u32) -> Option<&DownlinkLine> {
        if (ue_slot as usize) < self.ue_slots {
            Some(&self.counters.dl[ue_slot as usize])
        } else {
            None
        }
    }

    pub fn counters(&self) -> &Arc<SliceCounters> {
        &self.counters
    }

    /// Requests (promotion, paging, Error Indication reports) pushed to the control
    /// thread so far, retries from the backlog included.
    pub fn requests_pushed(&self) -> u64 {
        self.requests_pushed
    }

    /// Set the rule set applied to stateless-IoT traffic.
    pub fn set_iot_rules(&mut self, rules: RuleSet) {
        self.iot_rules = rules;
    }

    #[inline]
    fn drop(&self, buf: &mut PacketBuf, why: DropReason) {
        bump(&self.counters.drops[why as usize], 1);
        buf.meta.verdict = Verdict::Drop;
    }

    // Between batches: the control thread's updates (`updates.rs`).

    // ------------------------------------------------------------ uplink pipeline

    /// Process a batch received on S1-U. Afterwards each packet's verdict says where it
    /// goes: `ToSgi` (decapsulated), `ToS1u` (Echo Response / Error Indication back to
    /// the sender), `Drop` or `Consumed` (buffered).
    pub fn uplink(&mut self, batch: &mut Batch, now_ns: u64) {
        self.run_stages(
            batch,
            now_ns,
            |dp, buf| {
                let mut s = dp.ul_parse(buf);
                dp.ul_classify(&mut s);
                s
            },
            // A bearer above the UE slots is not a UE's first default bearer (those
            // take the slot of their UE): its owner's line is a second miss, so its
            // `next` runs a whole batch ahead of its `forward`. (IoT devices' and
            // unknown packets may be picked too: their `next` does nothing.)
            |dp, s| s.slot as usize >= dp.ue_slots,
            // With the bearer's line arriving, prefetch its owner's uplink line unless
            // it is the same line (a UE's first default bearer, the common case).
            |dp, s| {
                if s.kind == Kind::Ue && s.slot != NO_SLOT {
                    let owner = dp.counters.ul[s.slot as usize].bearer().ue_slot;
                    if owner != s.slot {
                        if let Some(l) = dp.ul_line(owner) {
                            prefetch(l);
                        }
                    }
                }
            },
            Self::ul_forward,
        );
        self.egress_admit(batch, true, now_ns);
    }

    /// The pipeline over one batch: sync, then `lookup` (parse, classify, prefetch the
    /// first record) over the whole batch, then per packet `next` (prefetch what the
    /// first record points to) with `forward` a few packets behind. Packets `early`
    /// picks (whose `next` starts a second miss) run `next` before any `forward`.
    #[inline(always)]
    fn run_stages(
        &mut self,
        batch: &mut Batch,
        now_ns: u64,
        lookup: impl Fn(&mut Self, &mut PacketBuf) -> Scratch,
        early: impl Fn(&Self, &Scratch) -> bool,
        next: impl Fn(&Self, Scratch),
        forward: impl Fn(&mut Self, &mut PacketBuf, Scratch, u64),
    ) {
        self.sync(now_ns);
        let n = batch.len.min(BATCH_SIZE);
        // A software pipeline over the batch. Every `lookup` (each prefetching its
        // packet's line) runs before the first `next`, which is the first to read a
        // line: the whole batch's fetches are in flight by then. Packet i's `next`
        // runs with packet i - FORWARD_LAG's `forward`, which reads what `next`
        // prefetched. Measured at 1M users, with one line per packet (AMD EPYC VM,
        // 32 MB L3, median of 4 alternating runs; `next` lag / `forward` lag): 10/10
        // 31.3 Mpps per core, 20/4 39.2, 24/4 40.8, 28/4 41.7, the whole batch/2 41.8
        // (`pepc bench dataplane --users 1000000`). Earlier, with a UE's state in 3
        // lines (Intel Xeon VM): 13.0 running each stage over the whole batch in turn,
        // 21.3 with both lags at 10.
        // Packets whose `next` runs early, a bit each (a batch is at most 64).
        let mut early_set = 0u64;
        for i in 0..n {
            let s = lookup(self, &mut batch.bufs[i]);
            early_set |= u64::from(early(self, &s)) << i;
            self.scratch[i] = s;
        }
        // A second miss (a dedicated bearer's owner) started FORWARD_LAG packets
        // ahead is still in flight at `forward` (at 10M users, uplink on dedicated
        // bearers ran 25-29 Mpps against 30-42 on default ones); started here it has
        // the batch's time. Running every packet's `next` here instead slowed the
        // common case (34.5 against ~40 Mpps at 10M).
        let mut rest = early_set;
        while rest != 0 {
            next(self, self.scratch[rest.trailing_zeros() as usize]);
            rest &= rest - 1;
        }
        for i in 0..n + FORWARD_LAG {
            if i < n {
                // Again for an early packet: its lines are in the cache by now, and
                // not testing the bit spares the common case.
                next(self, self.scratch[i]);
            }
            if i >= FORWARD_LAG {
                let j = i - FORWARD_LAG;
                let s = self.scratch[j];
                if s.kind != Kind::Done {
                    forward(self, &mut batch.bufs[j], s, now_ns);
                }
            }
        }
    }

    /// Stage 1: validate GTP-U, answer path management in place.
    #[inline]
    fn ul_parse(&mut self, buf: &mut PacketBuf) -> Scratch {
        let (msg_type, teid, hdr) = match GtpuPacket::new_checked(buf.as_slice()) {
            Ok(p) => (p.msg_type(), p.teid(), p.header_len()),
            Err(_) => {
                self.drop(buf, DropReason::MalformedGtpu);
                return Scratch::default();
            }
        };
        match msg_type {
            gtpu::G_PDU => {
                return Scratch {
                    kind: Kind::Ue,
                    hdr: hdr as u16,
                    teid,
                    slot: 0,
                    pdn: 0,
                }
            }
            gtpu::ECHO_REQUEST => {
                let mut tmp = [0u8; 32];
                let len = match GtpuPacket::new_checked(buf.as_slice()) {
                    Ok(p) => gtpu::echo_response(&p, &mut tmp).unwrap_or(0),
                    Err(_) => 0,
                };
                if len > 0 && buf.fill(&tmp[..len]) {
                    buf.meta.verdict = Verdict::ToS1u;
                    bump(&self.counters.echo_replies, 1);
                } else {
                    self.drop(buf, DropReason::MalformedGtpu);
                }
            }
            gtpu::ERROR_INDICATION => {
                if let Ok(p) = GtpuPacket::new_checked(buf.as_slice()) {
                    if let Ok(ei) = gtpu::parse_error_indication(&p) {
                        if let std::net::IpAddr::V4(a) = ei.peer {
                            self.request(DpRequest::ErrorIndication {
                                enb_teid: ei.teid_data_i,
                                enb_addr: a,
                            });
                        }
                    }
                }
                buf.meta.verdict = Verdict::Consumed;
            }
            gtpu::ECHO_RESPONSE => buf.meta.verdict = Verdict::Consumed,
            _ => self.drop(buf, DropReason::UnsupportedGtpuMessage),
        }
        Scratch::default()
    }

    /// Stage 2: TEID → bearer slot (structured, exception table) or IoT pool index.
    #[inline]
    fn ul_classify(&self, s: &mut Scratch) {
        if s.kind != Kind::Ue {
            return;
        }
        let slot = match self.cfg.layout.split_teid(s.teid) {
            Some((slice, slot, _)) if slice == self.cfg.slice => Some(slot),
            // Another slice's TEID: a UE restored here from that slice kept it.
            Some(_) => self.exc_teid.get(&s.teid).copied(),
            None => {
                if let Some(idx) = self.cfg.iot.and_then(|p| p.index_of_teid(s.teid)) {
                    s.kind = Kind::Iot;
                    s.slot = idx;
                    return;
                }
                self.exc_teid.get(&s.teid).copied()
            }
        };
        match slot {
            Some(slot) if (slot as usize) < self.counters.slots() => {
                s.slot = slot;
                // The bearer's uplink line, which is also its owner's when this is the
                // UE's first default bearer (the common case).
                prefetch(&self.counters.ul[slot as usize]);
            }
            _ => {
                s.slot = NO_SLOT;
            }
        }
    }

    /// Stages 3-6: state, source check, policy, QoS, count, decap. A UE bearer reads
    /// its hot bearer record, its UE's hot line and its counter line; a stateless-IoT
    /// device (`Kind::Iot`) only its pool address and the aggregate counters.
    #[inline]
    fn ul_forward(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) {
        let hdr = s.hdr as usize;
        let (ue_slot, src_ip, mbr, rule_set) = match s.kind {
            Kind::Iot => match self.cfg.iot {
                Some(pool) => (NO_SLOT, u32::from(pool.ip(s.slot)), false, None),
                None => return,
            },
            _ => match self.ul_bearer(buf, s, now) {
                Some((b, rules)) => (b.ue_slot, b.src_ip, b.flags & HOT_MBR != 0, Some(rules)),
                None => return,
            },
        };
        let (ip_len, src, ft) = match inner_packet(&buf.as_slice()[hdr..]) {
            Ok(p) => p,
            Err(why) => return self.drop(buf, why),
        };
        // The source must be the address of the PDN connection the bearer belongs to.
        if src != src_ip || src_ip == 0 {
            return self.drop(buf, DropReason::SpoofedSource);
        }
        let decision = self.pcef(rule_set, true, &ft, ip_len, now);
        if ue_slot == NO_SLOT {
            // Stateless IoT: policy and aggregate charging only.
            if !decision.forward {
                return self.drop(buf, self.policy_drop_reason(None, decision));
            }
            count_rule(&self.counters.iot, true, ip_len);
            bump(&self.counters.ul_forwarded, 1);
            bump(&self.counters.ul_bytes, ip_len as u64);
            buf.meta.bearer = pepc_wire::NO_BEARER;
            return to_sgi(buf, hdr, ip_len);
        }
        if self.qos_and_count(
            buf, true, ue_slot, s.slot, mbr, rule_set, decision, ip_len, now,
        ) {
            to_sgi(buf, hdr, ip_len);
        }
    }

    /// Policy verdict, UE-AMBR (hot line), bearer MBR (cold, only if it has one), then
    /// bearer and rule counters. `false`: dropped and counted.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn qos_and_count(
        &mut self,
        buf: &mut PacketBuf,
        uplink: bool,
        ue_slot: u32,
        bslot: u32,
        mbr: bool,
        rule_set: Option<u16>,
        decision: Decision,
        ip_len: usize,
        now: u64,
    ) -> bool {
        let why = if !decision.forward {
            Some(self.policy_drop_reason(rule_set, decision))
        } else if !if uplink {
            // (The owner's slot was checked by `ul_bearer`, a UE slot by `dl_classify`.)
            self.counters.ul[ue_slot as usize].ambr_allow(ip_len, now)
        } else {
            self.counters.dl[ue_slot as usize].ambr_allow(ip_len, now)
        } {
            Some(DropReason::AmbrExceeded)
        } else if mbr
            && !{
                let b = &mut self.bearer_cold[bslot as usize];
                if uplink { &mut b.mbr_ul } else { &mut b.mbr_dl }.allow(ip_len, now)
            }
        {
            Some(DropReason::MbrExceeded)
        } else {
            None
        };
        let c = &self.counters;
        if let Some(why) = why {
            let d = &c.bearer_drops[bslot as usize];
            bump(if uplink { &d.ul } else { &d.dl }, 1);
            self.drop(buf, why);
            return false;
        }
        let b = bslot as usize;
        if uplink {
            let l = &c.ul[b];
            count_bearer(&l.packets, &l.bytes, &l.last_active_ns, ip_len, now);
        } else {
            let l = &c.dl[b];
            count_bearer(&l.packets, &l.bytes, &l.last_active_ns, ip_len, now);
        }
        if let (Some(set), Some(r)) = (rule_set, decision.rule) {
            count_rule(c.rule(set, r), uplink, ip_len);
            if let Some(k) = decision.counter {
                // This UE's volume of this rule (the set's counters are shared).
                let rc = &c.bearer_rules[bslot as usize];
                let k = k as usize % crate::counters::RULE_COUNTERS_PER_BEARER;
                bump(
                    if uplink {
                        &rc.ul_bytes[k]
                    } else {
                        &rc.dl_bytes[k]
                    },
                    ip_len as u64,
                );
            }
        }
        let (pkts, bytes) = if uplink {
            (&c.ul_forwarded, &c.ul_bytes)
        } else {
            (&c.dl_forwarded, &c.dl_bytes)
        };
        bump(pkts, 1);
        bump(bytes, ip_len as u64);
        // The egress scheduler's key to the packet's class (read only when congested).
        buf.meta.bearer = bslot;
        true
    }

    /// Stage 3 for a structured/exception TEID: the bearer's hot record, or the packet
    /// is answered (Error Indication), buffered for promotion, or dropped (`None`).
    #[inline(always)]
    fn ul_bearer(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) -> Option<(BearerHot, u16)> {
        if s.slot == NO_SLOT {
            self.unknown_teid(buf, s.teid, DropReason::UnknownTeid, now);
            return None;
        }
        let b = self.counters.ul[s.slot as usize].bearer();
        let promote = DpRequest::PromoteBearer {
            slot: s.slot,
            teid: s.teid,
        };
        if b.flags & HOT_VALID == 0 || b.teid_ul != s.teid {
            let known = self.known_teid[s.slot as usize];
            if known == s.teid {
                // Exists in the secondary table: promote it, keep the packet meanwhile.
                let ue_slot = if b.flags & HOT_VALID != 0 {
                    b.ue_slot
                } else {
                    NO_SLOT
                };
                self.buffer(buf, ue_slot, true, promote, now);
                return None;
            }
            let why = if known != 0 {
                DropReason::StaleTeid
            } else {
                DropReason::UnknownTeid
            };
            self.unknown_teid(buf, s.teid, why, now);
            return None;
        }
        // The owner's uplink policy: the same line when this is its first default bearer.
        match self.ul_line(b.ue_slot).map(|l| l.ue()) {
            Some((flags, rule_set))
                if (b.ue_slot as usize) < self.ue_slots && flags & HOT_VALID != 0 =>
            {
                Some((b, rule_set))
            }
            _ => {
                self.buffer(buf, b.ue_slot, true, promote, now);
                None
            }
        }
    }

    /// PCEF over the UE's rule set (`None`: the stateless-IoT rules).
    #[inline(always)]
    fn pcef(
        &mut self,
        rule_set: Option<u16>,
        uplink: bool,
        ft: &FiveTuple,
        len: usize,
        now: u64,
    ) -> Decision {
        match rule_set {
            None => self.iot_rules.apply(uplink, ft, len, now),
            Some(id) => match self.rule_sets.get_mut(id as usize) {
                Some(Some(rs)) => rs.apply(uplink, ft, len, now),
                _ => RuleSet::default_decision(),
            },
        }
    }

    /// A rule said no: out of rate-limit tokens, or a drop rule.
    #[cold]
    fn policy_drop_reason(&self, rule_set: Option<u16>, d: Decision) -> DropReason {
        let rules = match rule_set {
            None => Some(&self.iot_rules),
            Some(id) => self.rule_sets.get(id as usize).and_then(|r| r.as_deref()),
        };
        match (rules, d.rule) {
            (Some(rs), Some(r))
                if matches!(
                    rs.rules.get(r as usize).map(|r| r.action),
                    Some(crate::pcef::Action::RateLimit { .. })
                ) =>
            {
                DropReason::RuleRateLimit
            }
            _ => DropReason::PolicyDrop,
        }
    }

    /// Unknown or stale TEID: drop, and answer with a rate-limited Error Indication
    /// (TS 29.281 §7.3.1) so the eNB tears the tunnel down.
    fn unknown_teid(&mut self, buf: &mut PacketBuf, teid: u32, why: DropReason, now: u64) {
        bump(&self.counters.drops[why as usize], 1);
        if now.saturating_sub(self.ei_window_start) >= 1_000_000_000 {
            self.ei_window_start = now;
            self.ei_tokens = self.cfg.error_indication_rate;
        }
        if self.ei_tokens == 0 {
            bump(
                &self.counters.drops[DropReason::ErrorIndicationSuppressed as usize],
                1,
            );
            buf.meta.verdict = Verdict::Drop;
            return;
        }
        self.ei_tokens -= 1;
        let mut tmp = [0u8; 64];
        let Ok(n) = gtpu::error_indication(teid, self.cfg.s1u_addr, gtpu::GTPU_PORT, &mut tmp)
        else {
            return self.drop(buf, DropReason::TxFailed);
        };
        buf.fill(&tmp[..n]);
        buf.meta.verdict = Verdict::ToS1u;
        bump(&self.counters.error_indications, 1);
    }

    // ---------------------------------------------------------- downlink pipeline

    /// Process a batch received on SGi. Afterwards `ToS1u` packets are encapsulated
    /// toward their eNB (`meta.peer`).
    pub fn downlink(&mut self, batch: &mut Batch, now_ns: u64) {
        self.run_stages(
            batch,
            now_ns,
            Self::dl_classify,
            // Which packets leave the common case is known only from the UE's line.
            |_, _| false,
            // With the UE's downlink line arriving: a packet that will leave the
            // common case (another PDN, a bearer not in the UE's slot) reads the cold
            // UE record next.
            |dp, s| {
                if s.kind != Kind::Ue {
                    return;
                }
                let (flags, pdn) = dp.counters.dl[s.slot as usize].flags_pdn();
                if flags & HOT_VALID != 0 && (pdn != s.pdn || flags & HOT_PAIRED == 0) {
                    prefetch(&dp.ue_cold[s.slot as usize]);
                }
            },
            Self::dl_forward,
        );
        self.egress_admit(batch, false, now_ns);
    }

    // ------------------------------------------------------------------ egress

    /// The egress scheduler's per-batch step (see [`egress`]): without congestion the
    /// batch stays as it is; else its forwarded packets are queued by class.
    #[inline(always)]
    fn egress_admit(&mut self, batch: &mut Batch, uplink: bool, now: u64) {
        let e = &mut self.egress[usize::from(!uplink)];
        if e.passes_all() {
            return;
        }
        let select = if uplink {
            Verdict::ToSgi
        } else {
            Verdict::ToS1u
        };
        e.admit(batch, select, now, egress_key(&self.bearer_cold, uplink));
    }

    /// Packets waiting in the egress scheduler of a direction.
    #[inline]
    pub fn egress_backlog(&self, uplink: bool) -> usize {
        self.egress[usize::from(!uplink)].backlog()
    }

    /// Move what the egress of a direction may send now into `out` (verdict `ToSgi`
    /// uplink, `ToS1u` downlink); returns how many. The driver sends `out` next.
    pub fn egress_drain(&mut self, uplink: bool, out: &mut Batch, now: u64) -> usize {
        let select = if uplink {
            Verdict::ToSgi
        } else {
            Verdict::ToS1u
        };
        self.egress[usize::from(!uplink)].drain(out, select, now)
    }

    /// The port of a direction pushed back the packets at `held` of `batch`: the
    /// batch came from [`DataPlane::egress_drain`] at `now` (`drained`) or from the
    /// pipeline. They wait in the egress scheduler for the port's room, in QoS order.
    pub fn egress_pushback(
        &mut self,
        uplink: bool,
        batch: &mut Batch,
        held: &[u16],
        drained: bool,
        now: u64,
    ) {
        let e = &mut self.egress[usize::from(!uplink)];
        if drained {
            return e.unsend(batch, held, now);
        }
        e.hold(batch, held, now, egress_key(&self.bearer_cold, uplink));
    }

    /// A direction's scheduler (tests, benchmarks).
    pub fn egress(&self, uplink: bool) -> &Egress {
        &self.egress[usize::from(!uplink)]
    }

    /// Stages 1-2: parse IPv4, destination → UE slot or IoT index.
    #[inline]
    fn dl_classify(&mut self, buf: &mut PacketBuf) -> Scratch {
        let dst = match Ipv4Packet::new_checked(buf.as_slice()) {
            Ok(ip) => u32::from(ip.dst_addr()),
            Err(_) => {
                self.drop(buf, DropReason::MalformedIp);
                return Scratch::default();
            }
        };
        let slot = match self.cfg.layout.split_pdn_ip(dst) {
            Some((pdn, slice, slot)) if slice == self.cfg.slice => Some((pdn, slot)),
            _ => {
                if let Some(idx) = self.cfg.iot.and_then(|p| p.index_of_ip(dst)) {
                    // The device's tunnel: a random line of a table as large as the
                    // pool, read by `dl_forward` (at 10M devices, a DRAM miss).
                    if let Some(t) = self.iot_tunnels.get(idx as usize * 2) {
                        prefetch(t);
                    }
                    return Scratch {
                        kind: Kind::Iot,
                        hdr: 0,
                        teid: dst,
                        slot: idx,
                        pdn: 0,
                    };
                }
                self.exc_ip.get(&dst).map(|s| (NO_PDN, *s))
            }
        };
        match slot {
            Some((pdn, slot)) if (slot as usize) < self.ue_slots => {
                // The UE's downlink line, which also counts its first default bearer.
                prefetch(&self.counters.dl[slot as usize]);
                Scratch {
                    kind: Kind::Ue,
                    hdr: 0,
                    teid: dst,
                    slot,
                    pdn,
                }
            }
            _ => {
                self.drop(buf, DropReason::UnknownUeIp);
                Scratch::default()
            }
        }
    }

    /// Stages 3-7: UE state, PCEF with bearer binding, bearer, QoS, count, encap.
    /// The common case (first PDN, default bearer) reads and writes the UE's downlink
    /// line only; a stateless-IoT device its pool tunnel.
    #[inline]
    fn dl_forward(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) {
        let (ip_len, ft) = match inner_packet(buf.as_slice()) {
            Ok((len, _, ft)) => (len, ft),
            Err(why) => return self.drop(buf, why),
        };
        if s.kind == Kind::Iot {
            let decision = self.pcef(None, false, &ft, ip_len, now);
            if !decision.forward {
                return self.drop(buf, self.policy_drop_reason(None, decision));
            }
            let i = s.slot as usize * 2;
            let (teid, addr) = match self.iot_tunnels.get(i..i + 2) {
                Some(&[t, a]) if t != 0 => (t, a),
                _ => return self.drop(buf, DropReason::NoDownlinkTunnel),
            };
            count_rule(&self.counters.iot, false, ip_len);
            bump(&self.counters.dl_forwarded, 1);
            buf.meta.bearer = pepc_wire::NO_BEARER;
            return self.to_s1u(buf, ip_len, teid, addr);
        }
        let ue_slot = s.slot as usize;
        let u = self.counters.dl[ue_slot].ue();
        if u.flags & HOT_VALID == 0 {
            // Evicted (or not yet installed) but the PDN exists: promote, keep the packet.
            let known = self.known_pdns[ue_slot];
            let exists = if s.pdn == NO_PDN {
                known != 0
            } else {
                known & (1 << (s.pdn as u32 & 7)) != 0
            };
            if exists {
                let req = DpRequest::DownlinkData { ue_slot: s.slot };
                return self.buffer(buf, s.slot, false, req, now);
            }
            return self.drop(buf, DropReason::UnknownUeIp);
        }
        // Hot PDN: its address is in the hot line. Others (and exception-table
        // addresses, which carry no PDN index) are checked against the cold record,
        // which is authoritative: an address it lacks is gone.
        let hot = s.pdn == u.pdn && s.teid == u.ip && u.ip != 0;
        let pdn = if hot {
            s.pdn as usize
        } else {
            match self.cold_pdn(s) {
                Some(p) => p,
                None => return self.drop(buf, DropReason::UnknownUeIp),
            }
        };
        let rule_set = u.rule_set;
        let decision = self.pcef(Some(rule_set), false, &ft, ip_len, now);
        // Bearer binding within the destination's PDN connection: a rule naming a
        // bearer of another PDN (or none) falls back to this PDN's default bearer.
        let paired = u.flags & HOT_PAIRED != 0;
        let (bslot, teid, addr, mbr) =
            if hot && paired && decision.bearer.is_none_or(|e| e == u.ebi) {
                (s.slot, u.enb_teid, u.enb_addr, u.flags & HOT_MBR != 0)
            } else {
                self.cold_bearer(ue_slot, pdn, decision.bearer)
            };
        if bslot == NO_SLOT || bslot as usize >= self.bearer_cold.len() {
            return self.drop(buf, DropReason::NoDownlinkTunnel);
        }
        if decision.forward && teid == 0 {
            // No downlink tunnel (idle or not yet set up): hold the packet, page/promote.
            let req = DpRequest::DownlinkData { ue_slot: s.slot };
            return self.buffer(buf, s.slot, false, req, now);
        }
        let rule_set = Some(rule_set);
        if self.qos_and_count(
            buf,
            false,
            ue_slot as u32,
            bslot,
            mbr,
            rule_set,
            decision,
            ip_len,
            now,
        ) {
            self.to_s1u(buf, ip_len, teid, addr);
        }
    }

    /// PDN index of a downlink destination outside the hot PDN, from the cold record.
    #[cold]
    fn cold_pdn(&self, s: Scratch) -> Option<usize> {
        let rec = &self.ue_cold[s.slot as usize];
        let pdn = if s.pdn == NO_PDN {
            rec.ips.iter().position(|a| *a == s.teid)?
        } else {
            s.pdn as usize
        };
        rec.ips
            .get(pdn)
            .is_some_and(|a| *a == s.teid && *a != 0)
            .then_some(pdn)
    }

    /// Downlink bearer outside the hot case: (slot, eNB TEID, eNB address, has MBR);
    /// TEID 0 when the bearer has no tunnel or is out of the primary table.
    #[cold]
    fn cold_bearer(&self, ue_slot: usize, pdn: usize, ebi: Option<u8>) -> (u32, u32, u32, bool) {
        let rec = &self.ue_cold[ue_slot];
        let mut slot = ebi.map_or(NO_SLOT, |e| rec.bearer_slot_in(pdn, e));
        if slot == NO_SLOT {
            slot = rec.default_slot(pdn);
        }
        match (
            self.ul_line(slot).map(|l| l.bearer()),
            self.bearer_cold.get(slot as usize),
        ) {
            (Some(h), Some(c)) if h.flags & HOT_VALID != 0 => {
                (slot, c.rec.enb_teid, c.rec.enb_addr, h.flags & HOT_MBR != 0)
            }
            _ => (slot, 0, 0, false),
        }
    }

    /// Encapsulate toward the eNB and hand to S1-U.
    #[inline(always)]
    fn to_s1u(&self, buf: &mut PacketBuf, ip_len: usize, teid: u32, addr: u32) {
        buf.truncate(ip_len);
        if gtpu::encap_gpdu(buf, teid).is_err() {
            return self.drop(buf, DropReason::TxFailed);
        }
        buf.meta.peer = SocketAddrV4::new(Ipv4Addr::from(addr), gtpu::GTPU_PORT);
        buf.meta.verdict = Verdict::ToS1u;
    }

    // ------------------------------------------------------ requests to control

    /// Ask the control thread (promote a UE, page it); the promotion buffer itself
    /// is in `pending.rs`.
    fn request(&mut self, r: DpRequest) {
        match self.requests.push(r) {
            Ok(()) => self.requests_pushed += 1,
            Err(r) => {
                if self.request_backlog.len() < 4096 {
                    self.request_backlog.push(r);
                }
            }
        }
    }
}

/// The egress scheduler's key of a bearer slot: its QCI and GBR in the direction
/// (bit/s); QCI 9 without a GBR for a slot not in use.
fn egress_key(cold: &[BearerCold], uplink: bool) -> impl Fn(u32) -> (u8, u64) + '_ {
    move |b| {
        cold.get(b as usize).map_or((9, 0), |c| {
            (c.rec.qci, if uplink { c.rec.gbr_ul } else { c.rec.gbr_dl })
        })
    }
}
