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
use crate::counters::{bump, DropReason, SliceCounters};
use crate::ids::MAX_PDNS;
use crate::ids::{IdLayout, IotPool};
use crate::pcef::RuleSet;
use crate::qos::TokenBucket;
use crate::spsc::{Consumer, Producer};
use crate::update::{DpRequest, DpUpdate};
use pepc_wire::flow::five_tuple;
use pepc_wire::gtpu::{self, GtpuPacket};
use pepc_wire::ipv4::Ipv4Packet;
use pepc_wire::{Batch, PacketBuf, Verdict, BATCH_SIZE};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

#[repr(C, align(64))]
#[derive(Default)]
struct PrimaryBearer {
    rec: DpBearerRecord,
    valid: bool,
    mbr_ul: TokenBucket,
    mbr_dl: TokenBucket,
}

#[repr(C, align(64))]
#[derive(Default)]
struct PrimaryUe {
    rec: DpUeRecord,
    valid: bool,
    ambr_ul: TokenBucket,
    ambr_dl: TokenBucket,
}

// SAFETY: integers, bools and integer arrays only.
unsafe impl crate::mem::Zeroable for PrimaryBearer {}
unsafe impl crate::mem::Zeroable for PrimaryUe {}
unsafe impl crate::mem::Zeroable for u32 {}
unsafe impl crate::mem::Zeroable for u8 {}

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

struct PendingUe {
    ue_slot: u32,
    since_ns: u64,
    requested: bool,
    count: usize,
    bufs: [(u16, bool); PENDING_PER_UE], // (pool index, uplink?)
}

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
}

/// The data thread's state. Owned by that thread alone.
pub struct DataPlane {
    cfg: DataPlaneConfig,
    bearers: Box<[PrimaryBearer]>,
    ues: Box<[PrimaryUe]>,
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
    pending: Vec<PendingUe>,
    pool: Vec<PacketBuf>,
    pool_free: Vec<u16>,
    ready: Vec<(u16, bool)>,
    /// Packets the data thread originates (End Markers), sent on S1-U by the driver.
    pub generated: Batch,
    ei_tokens: u32,
    ei_window_start: u64,
    scratch: [Scratch; BATCH_SIZE],
}

#[inline(always)]
fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; any address is allowed.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            p as *const T as *const i8,
            core::arch::x86_64::_MM_HINT_T0,
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
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
        let iot_size = cfg.iot.map(|p| p.size as usize).unwrap_or(0);
        DataPlane {
            bearers: crate::mem::zeroed_slice(bearer_slots),
            ues: crate::mem::zeroed_slice(ue_slots),
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
            pending: Vec::with_capacity(PENDING_UES),
            pool: (0..PENDING_POOL).map(|_| PacketBuf::new()).collect(),
            pool_free: (0..PENDING_POOL as u16).rev().collect(),
            ready: Vec::with_capacity(PENDING_POOL),
            generated: Batch::new(GENERATED_CAPACITY),
            ei_tokens: cfg.error_indication_rate,
            ei_window_start: 0,
            scratch: [Scratch::default(); BATCH_SIZE],
            cfg,
        }
    }

    pub fn counters(&self) -> &Arc<SliceCounters> {
        &self.counters
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

    // ---------------------------------------------------------------- sync stage

    /// Apply pending control updates (called before every batch: the paper's sync every
    /// 32 packets) and retry requests the ring could not take.
    pub fn sync(&mut self, now_ns: u64) {
        if !self.request_backlog.is_empty() {
            let backlog = std::mem::take(&mut self.request_backlog);
            for r in backlog {
                if let Err(r) = self.requests.push(r) {
                    self.request_backlog.push(r);
                }
            }
        }
        if !self.updates.is_empty() {
            let mut n = 0;
            // Stop early if originated packets (End Markers) would not fit: the rest
            // of the updates wait for the next sync instead of losing an End Marker.
            while n < self.cfg.max_updates_per_sync
                && self.generated.len < self.generated.capacity()
            {
                let Some(u) = self.updates.pop() else { break };
                self.apply(u);
                n += 1;
            }
            bump(&self.counters.updates_applied, n as u64);
        }
        if !self.pending.is_empty() {
            self.expire_pending(now_ns);
        }
    }

    fn apply(&mut self, u: DpUpdate) {
        match u {
            DpUpdate::Ue { slot, rec } => {
                let Some(e) = self.ues.get_mut(slot as usize) else {
                    return;
                };
                if !e.valid || !e.ambr_ul.same_rate(&TokenBucket::new(rec.ambr_ul)) {
                    e.ambr_ul = TokenBucket::new(rec.ambr_ul);
                }
                if !e.valid || !e.ambr_dl.same_rate(&TokenBucket::new(rec.ambr_dl)) {
                    e.ambr_dl = TokenBucket::new(rec.ambr_dl);
                }
                e.rec = rec;
                e.valid = true;
                self.release_pending(slot);
            }
            DpUpdate::Bearer { slot, rec } => {
                let Some(e) = self.bearers.get_mut(slot as usize) else {
                    return;
                };
                let moved = e.valid
                    && e.rec.enb_teid != 0
                    && (e.rec.enb_teid, e.rec.enb_addr) != (rec.enb_teid, rec.enb_addr);
                let (old_teid, old_addr) = (e.rec.enb_teid, e.rec.enb_addr);
                if !e.valid || !e.mbr_ul.same_rate(&TokenBucket::new(rec.mbr_ul)) {
                    e.mbr_ul = TokenBucket::new(rec.mbr_ul);
                }
                if !e.valid || !e.mbr_dl.same_rate(&TokenBucket::new(rec.mbr_dl)) {
                    e.mbr_dl = TokenBucket::new(rec.mbr_dl);
                }
                e.rec = rec;
                e.valid = true;
                if moved {
                    self.emit_end_marker(old_teid, old_addr);
                }
                if rec.enb_teid != 0 {
                    // A downlink tunnel now exists: buffered downlink can flow.
                    self.release_pending(rec.ue_slot);
                }
            }
            DpUpdate::EvictUe { slot } => {
                if let Some(e) = self.ues.get_mut(slot as usize) {
                    e.valid = false;
                }
            }
            DpUpdate::EvictBearer { slot } => {
                if let Some(e) = self.bearers.get_mut(slot as usize) {
                    e.valid = false;
                }
            }
            DpUpdate::BearerExists { slot, teid } => {
                if let Some(k) = self.known_teid.get_mut(slot as usize) {
                    *k = teid.unwrap_or(0);
                    if teid.is_some() {
                        // A new bearer in a reused slot starts from zero.
                        self.counters.bearers[slot as usize].reset();
                    }
                }
            }
            DpUpdate::UeExists { slot, pdns } => {
                if let Some(k) = self.known_pdns.get_mut(slot as usize) {
                    *k = pdns;
                }
                if pdns == 0 {
                    self.refuse_pending(slot);
                }
            }
            DpUpdate::RuleSet { id, rules } => {
                if let Some(s) = self.rule_sets.get_mut(id as usize) {
                    *s = Some(rules);
                }
            }
            DpUpdate::IotTunnel {
                index,
                enb_teid,
                enb_addr,
            } => {
                let i = index as usize * 2;
                if i + 1 < self.iot_tunnels.len() {
                    self.iot_tunnels[i] = enb_teid;
                    self.iot_tunnels[i + 1] = enb_addr;
                }
            }
            DpUpdate::ExceptionTeid { teid, slot } => match slot {
                Some(s) => {
                    self.exc_teid.insert(teid, s);
                }
                None => {
                    self.exc_teid.remove(&teid);
                }
            },
            DpUpdate::ExceptionIp { ip, slot } => match slot {
                Some(s) => {
                    self.exc_ip.insert(ip, s);
                }
                None => {
                    self.exc_ip.remove(&ip);
                }
            },
            DpUpdate::PromotionRefused { ue_slot } => self.refuse_pending(ue_slot),
        }
    }

    fn emit_end_marker(&mut self, teid: u32, addr: u32) {
        let g = &mut self.generated;
        if g.len == g.capacity() {
            bump(&self.counters.drops[DropReason::TxFailed as usize], 1);
            return;
        }
        let buf = &mut g.bufs[g.len];
        buf.reset();
        let mut tmp = [0u8; 16];
        let Ok(n) = gtpu::end_marker(teid, &mut tmp) else {
            return;
        };
        buf.fill(&tmp[..n]);
        buf.meta.peer = SocketAddrV4::new(Ipv4Addr::from(addr), gtpu::GTPU_PORT);
        buf.meta.verdict = Verdict::ToS1u;
        g.len += 1;
        bump(&self.counters.end_markers, 1);
    }

    // ------------------------------------------------------------ uplink pipeline

    /// Process a batch received on S1-U. Afterwards each packet's verdict says where it
    /// goes: `ToSgi` (decapsulated), `ToS1u` (Echo Response / Error Indication back to
    /// the sender), `Drop` or `Consumed` (buffered).
    pub fn uplink(&mut self, batch: &mut Batch, now_ns: u64) {
        self.sync(now_ns);
        let n = batch.len.min(BATCH_SIZE);
        for i in 0..n {
            self.scratch[i] = self.ul_parse(&mut batch.bufs[i]);
        }
        for i in 0..n {
            self.ul_classify(i);
        }
        for i in 0..n {
            let s = self.scratch[i];
            if s.kind == Kind::Ue && s.slot != NO_SLOT {
                let ue = self.bearers[s.slot as usize].rec.ue_slot as usize;
                if let Some(u) = self.ues.get(ue) {
                    prefetch(u);
                }
            }
        }
        for i in 0..n {
            let s = self.scratch[i];
            match s.kind {
                Kind::Ue => self.ul_forward(&mut batch.bufs[i], s, now_ns),
                Kind::Iot => self.ul_iot(&mut batch.bufs[i], s, now_ns),
                Kind::Done => {}
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
    fn ul_classify(&mut self, i: usize) {
        let s = &mut self.scratch[i];
        if s.kind != Kind::Ue {
            return;
        }
        let slot = match self.cfg.layout.split_teid(s.teid) {
            Some((slice, slot, _)) if slice == self.cfg.slice => Some(slot),
            Some(_) => None,
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
            Some(slot) if (slot as usize) < self.bearers.len() => {
                s.slot = slot;
                prefetch(&self.bearers[slot as usize]);
                prefetch(&self.counters.bearers[slot as usize]);
            }
            _ => {
                s.slot = NO_SLOT;
            }
        }
    }

    /// Stages 3-6 for a UE bearer: state, policy, QoS, count, decap.
    #[inline]
    fn ul_forward(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) {
        if s.slot == NO_SLOT {
            return self.unknown_teid(buf, s.teid, DropReason::UnknownTeid, now);
        }
        let b = &self.bearers[s.slot as usize];
        if !b.valid || b.rec.teid_ul != s.teid {
            let known = self.known_teid[s.slot as usize];
            if known == s.teid {
                // Exists in the secondary table: promote it, keep the packet meanwhile.
                let ue_slot = if b.valid { b.rec.ue_slot } else { NO_SLOT };
                return self.buffer(
                    buf,
                    ue_slot,
                    true,
                    DpRequest::PromoteBearer {
                        slot: s.slot,
                        teid: s.teid,
                    },
                    now,
                );
            }
            let why = if known != 0 {
                DropReason::StaleTeid
            } else {
                DropReason::UnknownTeid
            };
            return self.unknown_teid(buf, s.teid, why, now);
        }
        let ue_slot = b.rec.ue_slot as usize;
        let Some(u) = self.ues.get_mut(ue_slot).filter(|u| u.valid) else {
            return self.buffer(
                buf,
                ue_slot as u32,
                true,
                DpRequest::PromoteBearer {
                    slot: s.slot,
                    teid: s.teid,
                },
                now,
            );
        };
        let hdr = s.hdr as usize;
        let inner = &buf.as_slice()[hdr..];
        let (ip_len, src, ft) = match Ipv4Packet::new_checked(inner) {
            Ok(ip) => (ip.total_len() as usize, ip.src_addr(), five_tuple(inner)),
            Err(_) => return self.drop(buf, DropReason::MalformedIp),
        };
        // The source must be the address of the PDN connection the bearer belongs to.
        let pdn_ip = u.rec.ips.get(b.rec.pdn as usize).copied().unwrap_or(0);
        if u32::from(src) != pdn_ip || pdn_ip == 0 {
            return self.drop(buf, DropReason::SpoofedSource);
        }
        let Ok(ft) = ft else {
            return self.drop(buf, DropReason::MalformedIp);
        };
        // PCEF
        let decision = match self.rule_sets.get_mut(u.rec.rule_set as usize) {
            Some(Some(rs)) => rs.apply(true, &ft, ip_len, now),
            _ => crate::pcef::RuleSet::default_decision(),
        };
        let c = &self.counters;
        let bc = &c.bearers[s.slot as usize];
        if !decision.forward {
            bump(&bc.ul_dropped, 1);
            let why = if decision.rule.is_some_and(|r| {
                self.rule_sets[u.rec.rule_set as usize]
                    .as_ref()
                    .is_some_and(|rs| {
                        matches!(
                            rs.rules[r as usize].action,
                            crate::pcef::Action::RateLimit { .. }
                        )
                    })
            }) {
                DropReason::RuleRateLimit
            } else {
                DropReason::PolicyDrop
            };
            return self.drop(buf, why);
        }
        // QoS
        if !u.ambr_ul.allow(ip_len, now) {
            bump(&bc.ul_dropped, 1);
            return self.drop(buf, DropReason::AmbrExceeded);
        }
        let b = &mut self.bearers[s.slot as usize];
        if !b.mbr_ul.allow(ip_len, now) {
            bump(&bc.ul_dropped, 1);
            return self.drop(buf, DropReason::MbrExceeded);
        }
        // count
        bump(&bc.ul_packets, 1);
        bump(&bc.ul_bytes, ip_len as u64);
        bc.last_active_ns.store(now, Relaxed);
        if let Some(r) = decision.rule {
            let rc = c.rule(u.rec.rule_set, r);
            bump(&rc.ul_packets, 1);
            bump(&rc.ul_bytes, ip_len as u64);
        }
        bump(&c.ul_forwarded, 1);
        // decap
        buf.strip(hdr);
        buf.truncate(ip_len);
        buf.meta.verdict = Verdict::ToSgi;
    }

    fn ul_iot(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) {
        let Some(pool) = self.cfg.iot else { return };
        let hdr = s.hdr as usize;
        let inner = &buf.as_slice()[hdr..];
        let (ip_len, src, ft) = match Ipv4Packet::new_checked(inner) {
            Ok(ip) => (ip.total_len() as usize, ip.src_addr(), five_tuple(inner)),
            Err(_) => return self.drop(buf, DropReason::MalformedIp),
        };
        if src != pool.ip(s.slot) {
            return self.drop(buf, DropReason::SpoofedSource);
        }
        let Ok(ft) = ft else {
            return self.drop(buf, DropReason::MalformedIp);
        };
        if !self.iot_rules.apply(true, &ft, ip_len, now).forward {
            return self.drop(buf, DropReason::PolicyDrop);
        }
        let c = &self.counters.iot;
        bump(&c.ul_packets, 1);
        bump(&c.ul_bytes, ip_len as u64);
        bump(&self.counters.ul_forwarded, 1);
        buf.strip(hdr);
        buf.truncate(ip_len);
        buf.meta.verdict = Verdict::ToSgi;
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
        self.sync(now_ns);
        let n = batch.len.min(BATCH_SIZE);
        for i in 0..n {
            self.scratch[i] = self.dl_classify(&mut batch.bufs[i]);
        }
        // Second lookup stage: with the UE lines arriving, prefetch each packet's default
        // bearer and its counters so the forward stage finds them in cache.
        for i in 0..n {
            let s = self.scratch[i];
            if s.kind == Kind::Ue {
                let u = &self.ues[s.slot as usize];
                let b = u.rec.default_slot(s.pdn as usize) as usize;
                if let Some(bearer) = self.bearers.get(b) {
                    prefetch(bearer);
                    prefetch(&self.counters.bearers[b]);
                }
            }
        }
        for i in 0..n {
            let s = self.scratch[i];
            match s.kind {
                Kind::Ue => self.dl_forward(&mut batch.bufs[i], s, now_ns),
                Kind::Iot => self.dl_iot(&mut batch.bufs[i], s, now_ns),
                Kind::Done => {}
            }
        }
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
            Some((pdn, slot)) if (slot as usize) < self.ues.len() => {
                prefetch(&self.ues[slot as usize]);
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
    #[inline]
    fn dl_forward(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) {
        let ue_slot = s.slot as usize;
        let u = &mut self.ues[ue_slot];
        // Exception-table addresses carry no PDN index: find it in the record.
        let pdn = if s.pdn == NO_PDN {
            u.rec
                .ips
                .iter()
                .position(|a| *a == s.teid)
                .unwrap_or(MAX_PDNS)
        } else {
            s.pdn as usize
        };
        let ip_ok = u.rec.ips.get(pdn).is_some_and(|a| *a == s.teid && *a != 0);
        if !u.valid || !ip_ok {
            // Evicted (or not yet installed) but the PDN exists: promote, keep the packet.
            let known = self.known_pdns[ue_slot];
            let exists = if s.pdn == NO_PDN {
                known != 0
            } else {
                known & (1 << (s.pdn as u32 & 7)) != 0
            };
            // A valid record is authoritative: an address it lacks is gone.
            if exists && !u.valid {
                return self.buffer(
                    buf,
                    s.slot,
                    false,
                    DpRequest::DownlinkData { ue_slot: s.slot },
                    now,
                );
            }
            return self.drop(buf, DropReason::UnknownUeIp);
        }
        let data = buf.as_slice();
        let (ip_len, ft) = match Ipv4Packet::new_checked(data) {
            Ok(ip) => (ip.total_len() as usize, five_tuple(data)),
            Err(_) => return self.drop(buf, DropReason::MalformedIp),
        };
        let Ok(ft) = ft else {
            return self.drop(buf, DropReason::MalformedIp);
        };
        let rule_set = u.rec.rule_set;
        let decision = match self.rule_sets.get_mut(rule_set as usize) {
            Some(Some(rs)) => rs.apply(false, &ft, ip_len, now),
            _ => RuleSet::default_decision(),
        };
        // Bearer binding within the destination's PDN connection: a rule naming a
        // bearer of another PDN (or none) falls back to this PDN's default bearer.
        let mut bslot = match decision.bearer {
            Some(ebi) => u.rec.bearer_slot_in(pdn, ebi),
            None => NO_SLOT,
        };
        if bslot == NO_SLOT {
            bslot = u.rec.default_slot(pdn);
        }
        if bslot == NO_SLOT || bslot as usize >= self.bearers.len() {
            return self.drop(buf, DropReason::NoDownlinkTunnel);
        }
        let c = &self.counters;
        let bc = &c.bearers[bslot as usize];
        if !decision.forward {
            bump(&bc.dl_dropped, 1);
            return self.drop(buf, DropReason::PolicyDrop);
        }
        let b = &mut self.bearers[bslot as usize];
        if !b.valid || b.rec.enb_teid == 0 {
            // No downlink tunnel (idle or not yet set up): hold the packet, page/promote.
            return self.buffer(
                buf,
                s.slot,
                false,
                DpRequest::DownlinkData { ue_slot: s.slot },
                now,
            );
        }
        if !u.ambr_dl.allow(ip_len, now) {
            bump(&bc.dl_dropped, 1);
            return self.drop(buf, DropReason::AmbrExceeded);
        }
        if !b.mbr_dl.allow(ip_len, now) {
            bump(&bc.dl_dropped, 1);
            return self.drop(buf, DropReason::MbrExceeded);
        }
        bump(&bc.dl_packets, 1);
        bump(&bc.dl_bytes, ip_len as u64);
        bc.last_active_ns.store(now, Relaxed);
        if let Some(r) = decision.rule {
            let rc = c.rule(rule_set, r);
            bump(&rc.dl_packets, 1);
            bump(&rc.dl_bytes, ip_len as u64);
        }
        bump(&c.dl_forwarded, 1);
        let (teid, addr) = (b.rec.enb_teid, b.rec.enb_addr);
        buf.truncate(ip_len);
        if gtpu::encap_gpdu(buf, teid).is_err() {
            return self.drop(buf, DropReason::TxFailed);
        }
        buf.meta.peer = SocketAddrV4::new(Ipv4Addr::from(addr), gtpu::GTPU_PORT);
        buf.meta.verdict = Verdict::ToS1u;
    }

    fn dl_iot(&mut self, buf: &mut PacketBuf, s: Scratch, now: u64) {
        let data = buf.as_slice();
        let (ip_len, ft) = match Ipv4Packet::new_checked(data) {
            Ok(ip) => (ip.total_len() as usize, five_tuple(data)),
            Err(_) => return self.drop(buf, DropReason::MalformedIp),
        };
        let Ok(ft) = ft else {
            return self.drop(buf, DropReason::MalformedIp);
        };
        if !self.iot_rules.apply(false, &ft, ip_len, now).forward {
            return self.drop(buf, DropReason::PolicyDrop);
        }
        let i = s.slot as usize * 2;
        let (teid, addr) = match self.iot_tunnels.get(i..i + 2) {
            Some(&[t, a]) if t != 0 => (t, a),
            _ => return self.drop(buf, DropReason::NoDownlinkTunnel),
        };
        let c = &self.counters.iot;
        bump(&c.dl_packets, 1);
        bump(&c.dl_bytes, ip_len as u64);
        bump(&self.counters.dl_forwarded, 1);
        buf.truncate(ip_len);
        if gtpu::encap_gpdu(buf, teid).is_err() {
            return self.drop(buf, DropReason::TxFailed);
        }
        buf.meta.peer = SocketAddrV4::new(Ipv4Addr::from(addr), gtpu::GTPU_PORT);
        buf.meta.verdict = Verdict::ToS1u;
    }

    // ------------------------------------------------------ promotion buffering

    fn request(&mut self, r: DpRequest) {
        if let Err(r) = self.requests.push(r) {
            if self.request_backlog.len() < 4096 {
                self.request_backlog.push(r);
            }
        }
    }

    /// Keep a packet for a UE being promoted (swapping buffers: no copy), and ask the
    /// control thread once per UE.
    fn buffer(
        &mut self,
        buf: &mut PacketBuf,
        ue_slot: u32,
        uplink: bool,
        req: DpRequest,
        now: u64,
    ) {
        // Uplink misses on an evicted bearer don't know the UE slot yet: key by the
        // request's bearer slot with the high bit set until the UE is installed.
        let key = match (ue_slot, req) {
            (NO_SLOT, DpRequest::PromoteBearer { slot, .. }) => slot | 0x8000_0000,
            _ => ue_slot,
        };
        let idx = match self.pending.iter().position(|p| p.ue_slot == key) {
            Some(i) => i,
            None if self.pending.len() < PENDING_UES => {
                self.pending.push(PendingUe {
                    ue_slot: key,
                    since_ns: now,
                    requested: false,
                    count: 0,
                    bufs: [(0, false); PENDING_PER_UE],
                });
                self.pending.len() - 1
            }
            None => return self.drop(buf, DropReason::BufferFull),
        };
        if self.pending[idx].count == PENDING_PER_UE {
            return self.drop(buf, DropReason::BufferFull);
        }
        let Some(free) = self.pool_free.pop() else {
            return self.drop(buf, DropReason::BufferFull);
        };
        std::mem::swap(buf, &mut self.pool[free as usize]);
        buf.reset();
        buf.meta.verdict = Verdict::Consumed;
        let p = &mut self.pending[idx];
        p.bufs[p.count] = (free, uplink);
        p.count += 1;
        bump(&self.counters.buffered, 1);
        if !p.requested {
            p.requested = true;
            self.request(req);
        }
    }

    /// A UE (or its bearer) was installed: its buffered packets become ready to re-run.
    fn release_pending(&mut self, ue_slot: u32) {
        let mut i = 0;
        while i < self.pending.len() {
            let key = self.pending[i].ue_slot;
            let hit = key == ue_slot
                || (key & 0x8000_0000 != 0
                    && self
                        .ues
                        .get(ue_slot as usize)
                        .is_some_and(|u| u.valid && u.rec.bearers.contains(&(key & 0x7fff_ffff))));
            if hit {
                let p = self.pending.swap_remove(i);
                self.ready.extend_from_slice(&p.bufs[..p.count]);
            } else {
                i += 1;
            }
        }
    }

    fn refuse_pending(&mut self, ue_slot: u32) {
        if let Some(i) = self.pending.iter().position(|p| p.ue_slot == ue_slot) {
            let p = self.pending.swap_remove(i);
            for &(b, _) in &p.bufs[..p.count] {
                self.pool_free.push(b);
            }
            bump(
                &self.counters.drops[DropReason::PromotionFailed as usize],
                p.count as u64,
            );
        }
    }

    fn expire_pending(&mut self, now: u64) {
        let mut i = 0;
        while i < self.pending.len() {
            if now.saturating_sub(self.pending[i].since_ns) > PENDING_TIMEOUT_NS {
                let key = self.pending[i].ue_slot;
                self.refuse_pending(key);
            } else {
                i += 1;
            }
        }
    }

    /// How many buffered packets are ready to re-run.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Move ready buffered packets of one direction into `batch` (swapping buffers) so
    /// the driver runs them through the pipeline again; returns how many.
    pub fn take_ready(&mut self, batch: &mut Batch, uplink: bool) -> usize {
        batch.len = 0;
        let mut i = 0;
        while i < self.ready.len() && batch.len < batch.capacity() {
            let (idx, ul) = self.ready[i];
            if ul != uplink {
                i += 1;
                continue;
            }
            self.ready.swap_remove(i);
            std::mem::swap(&mut batch.bufs[batch.len], &mut self.pool[idx as usize]);
            self.pool[idx as usize].reset();
            self.pool_free.push(idx);
            batch.len += 1;
        }
        bump(&self.counters.drained, batch.len as u64);
        batch.len
    }

    /// Buffered packets currently held (for tests and stats).
    pub fn buffered_now(&self) -> usize {
        PENDING_POOL - self.pool_free.len()
    }
}
