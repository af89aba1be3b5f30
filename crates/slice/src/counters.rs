//! Counter state: written only by the data thread, read by the control thread.
//!
//! Every counter is an `AtomicU64` updated with a plain load + store (no read-modify-
//! write: there is one writer), which compiles to ordinary moves on x86-64 and lets the
//! control thread read without tearing. A bearer's counters share its slot's lines
//! ([`UplinkLine`], [`DownlinkLine`]) with the data thread's own records of that
//! slot, so a packet touches one line.

use crate::qos::AmbrBucket;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

/// Why the data path dropped a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum DropReason {
    /// GTP-U header invalid (version, flags, lengths, extension chain).
    MalformedGtpu,
    /// Inner or downlink IPv4 header invalid.
    MalformedIp,
    /// GTP-U message type the S1-U data path does not handle.
    UnsupportedGtpuMessage,
    /// TEID names no bearer (unknown or pool space with no exception entry).
    UnknownTeid,
    /// TEID names a reused slot with an older generation.
    StaleTeid,
    /// Downlink address outside the UE pools or with no UE.
    UnknownUeIp,
    /// Uplink inner source address is not the UE's.
    SpoofedSource,
    /// A PCEF rule said drop.
    PolicyDrop,
    /// PCEF rate-limit rule out of tokens.
    RuleRateLimit,
    /// UE-AMBR exceeded.
    AmbrExceeded,
    /// Bearer MBR exceeded.
    MbrExceeded,
    /// Downlink bearer has no eNB tunnel (UE idle, not yet re-established).
    NoDownlinkTunnel,
    /// Promotion buffer full (per UE or slice-wide).
    BufferFull,
    /// Buffered packets discarded because the UE could not be promoted.
    PromotionFailed,
    /// Error Indications suppressed by the rate limit (the packet itself is counted
    /// under UnknownTeid/StaleTeid as well).
    ErrorIndicationSuppressed,
    /// Transmit queue refused the packet.
    TxFailed,
}

pub const DROP_REASONS: usize = 16;

impl DropReason {
    pub const ALL: [DropReason; DROP_REASONS] = [
        DropReason::MalformedGtpu,
        DropReason::MalformedIp,
        DropReason::UnsupportedGtpuMessage,
        DropReason::UnknownTeid,
        DropReason::StaleTeid,
        DropReason::UnknownUeIp,
        DropReason::SpoofedSource,
        DropReason::PolicyDrop,
        DropReason::RuleRateLimit,
        DropReason::AmbrExceeded,
        DropReason::MbrExceeded,
        DropReason::NoDownlinkTunnel,
        DropReason::BufferFull,
        DropReason::PromotionFailed,
        DropReason::ErrorIndicationSuppressed,
        DropReason::TxFailed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::MalformedGtpu => "malformed_gtpu",
            DropReason::MalformedIp => "malformed_ip",
            DropReason::UnsupportedGtpuMessage => "unsupported_gtpu_message",
            DropReason::UnknownTeid => "unknown_teid",
            DropReason::StaleTeid => "stale_teid",
            DropReason::UnknownUeIp => "unknown_ue_ip",
            DropReason::SpoofedSource => "spoofed_source",
            DropReason::PolicyDrop => "policy_drop",
            DropReason::RuleRateLimit => "rule_rate_limit",
            DropReason::AmbrExceeded => "ambr_exceeded",
            DropReason::MbrExceeded => "mbr_exceeded",
            DropReason::NoDownlinkTunnel => "no_downlink_tunnel",
            DropReason::BufferFull => "buffer_full",
            DropReason::PromotionFailed => "promotion_failed",
            DropReason::ErrorIndicationSuppressed => "error_indication_suppressed",
            DropReason::TxFailed => "tx_failed",
        }
    }
}

/// Single-writer increment (only the data thread writes its counters).
#[inline(always)]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// The data thread's uplink record of a bearer: TEID check, owner, source check.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BearerHot {
    pub teid_ul: u32,
    pub ue_slot: u32,
    /// Address of the bearer's PDN connection: the only valid inner source.
    pub src_ip: u32,
    /// The data path's hot flags (installed, has an MBR).
    pub flags: u8,
}

/// The data thread's downlink record of a UE: its first PDN connection (the one in
/// the hot path) and that connection's default bearer tunnel.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UeDown {
    /// Address of PDN connection `pdn` (the first in pool order).
    pub ip: u32,
    /// eNB tunnel of that PDN's default bearer (`enb_teid` 0: none, UE idle, or the
    /// bearer not in the primary table or not in the UE's own slot).
    pub enb_teid: u32,
    pub enb_addr: u32,
    pub rule_set: u16,
    pub pdn: u8,
    /// EBI of that default bearer: a PCEF rule binding to it stays on the hot path.
    pub ebi: u8,
    /// Hot flags (installed; the default bearer is this slot's and has an MBR).
    pub flags: u8,
}

/// One direction's UE-AMBR bucket as stored in a line.
#[repr(C)]
#[derive(Default, Debug)]
struct AmbrCell {
    tokens: AtomicU64,
    last: AtomicU64,
}

impl AmbrCell {
    /// Take `len` bytes at the rate in `rate` (bytes/s, 0 = unlimited: nothing is
    /// written, the line stays clean).
    #[inline(always)]
    fn allow(&self, rate: &AtomicU32, len: usize, now: u64) -> bool {
        let rate = rate.load(Relaxed);
        if rate == 0 {
            return true;
        }
        let mut b =
            AmbrBucket::from_parts(self.tokens.load(Relaxed), self.last.load(Relaxed), rate);
        let ok = b.allow(len, now);
        let (tokens, last, _) = b.parts();
        self.tokens.store(tokens, Relaxed);
        self.last.store(last, Relaxed);
        ok
    }

    /// Install a bucket at `bits_per_s`; one already at that rate is kept unless
    /// `reset` (re-publishing must not refill it).
    fn install(&self, rate: &AtomicU32, bits_per_s: u64, reset: bool) {
        let (tokens, last, r) = AmbrBucket::new(bits_per_s).parts();
        if reset || r != rate.load(Relaxed) {
            self.tokens.store(tokens, Relaxed);
            self.last.store(last, Relaxed);
            rate.store(r, Relaxed);
        }
    }
}

/// Slot `i`'s uplink line: bearer `i`'s uplink counters and record ([`BearerHot`]),
/// and UE `i`'s uplink policy (rule set, UE-AMBR uplink bucket). A UE's first
/// default bearer has the UE's own slot ([`crate::control`]), so its uplink packet
/// reads and writes this one line.
#[repr(C, align(64))]
#[derive(Default, Debug)]
pub struct UplinkLine {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Data-thread clock (ns) of the bearer's last uplink packet (idle eviction).
    pub last_active_ns: AtomicU64,
    ambr: AmbrCell,
    teid: AtomicU32,
    owner: AtomicU32,
    src_ip: AtomicU32,
    ambr_rate: AtomicU32,
    /// Bearer flags | UE flags << 8 | UE rule set << 16.
    meta: AtomicU32,
}

/// Slot `i`'s downlink line: UE `i`'s downlink record ([`UeDown`]) and UE-AMBR
/// downlink bucket, and bearer `i`'s downlink counters: a downlink packet to a UE's
/// first PDN connection reads and writes this one line.
#[repr(C, align(64))]
#[derive(Default, Debug)]
pub struct DownlinkLine {
    pub packets: AtomicU64,
    pub bytes: AtomicU64,
    /// Data-thread clock (ns) of the bearer's last downlink packet (idle eviction).
    pub last_active_ns: AtomicU64,
    ambr: AmbrCell,
    ip: AtomicU32,
    enb_teid: AtomicU32,
    enb_addr: AtomicU32,
    ambr_rate: AtomicU32,
    /// UE flags | PDN << 8 | EBI << 16.
    meta: AtomicU32,
    rule_set: AtomicU32,
}

// The data thread alone writes every field below (single writer): the atomics let
// the control thread read the counters in the same lines without tearing, and
// compile to plain moves.
impl UplinkLine {
    #[inline(always)]
    pub(crate) fn bearer(&self) -> BearerHot {
        BearerHot {
            teid_ul: self.teid.load(Relaxed),
            ue_slot: self.owner.load(Relaxed),
            src_ip: self.src_ip.load(Relaxed),
            flags: self.meta.load(Relaxed) as u8,
        }
    }

    pub(crate) fn set_bearer(&self, h: BearerHot) {
        self.teid.store(h.teid_ul, Relaxed);
        self.owner.store(h.ue_slot, Relaxed);
        self.src_ip.store(h.src_ip, Relaxed);
        self.set_bearer_flags(h.flags);
    }

    #[inline(always)]
    pub(crate) fn bearer_flags(&self) -> u8 {
        self.meta.load(Relaxed) as u8
    }

    pub(crate) fn set_bearer_flags(&self, f: u8) {
        let m = self.meta.load(Relaxed);
        self.meta.store((m & !0xff) | f as u32, Relaxed);
    }

    /// UE `i`'s flags and rule set.
    #[inline(always)]
    pub(crate) fn ue(&self) -> (u8, u16) {
        let m = self.meta.load(Relaxed);
        ((m >> 8) as u8, (m >> 16) as u16)
    }

    pub(crate) fn set_ue(&self, flags: u8, rule_set: u16) {
        let m = self.meta.load(Relaxed);
        self.meta.store(
            (m & 0xff) | (flags as u32) << 8 | (rule_set as u32) << 16,
            Relaxed,
        );
    }

    #[inline(always)]
    pub(crate) fn ambr_allow(&self, len: usize, now: u64) -> bool {
        self.ambr.allow(&self.ambr_rate, len, now)
    }

    /// UE-AMBR uplink at `bits_per_s` (see [`AmbrCell::install`]).
    pub(crate) fn set_ambr(&self, bits_per_s: u64, reset: bool) {
        self.ambr.install(&self.ambr_rate, bits_per_s, reset)
    }
}

impl DownlinkLine {
    #[inline(always)]
    pub(crate) fn ue(&self) -> UeDown {
        let m = self.meta.load(Relaxed);
        UeDown {
            ip: self.ip.load(Relaxed),
            enb_teid: self.enb_teid.load(Relaxed),
            enb_addr: self.enb_addr.load(Relaxed),
            rule_set: self.rule_set.load(Relaxed) as u16,
            pdn: (m >> 8) as u8,
            ebi: (m >> 16) as u8,
            flags: m as u8,
        }
    }

    #[inline(always)]
    pub(crate) fn flags(&self) -> u8 {
        self.meta.load(Relaxed) as u8
    }

    /// (flags, hot PDN): what decides whether a packet stays on the hot path.
    #[inline(always)]
    pub(crate) fn flags_pdn(&self) -> (u8, u8) {
        let m = self.meta.load(Relaxed);
        (m as u8, (m >> 8) as u8)
    }

    pub(crate) fn set_ue(&self, u: UeDown) {
        self.ip.store(u.ip, Relaxed);
        self.enb_teid.store(u.enb_teid, Relaxed);
        self.enb_addr.store(u.enb_addr, Relaxed);
        self.rule_set.store(u.rule_set as u32, Relaxed);
        self.meta.store(
            u.flags as u32 | (u.pdn as u32) << 8 | (u.ebi as u32) << 16,
            Relaxed,
        );
    }

    #[inline(always)]
    pub(crate) fn ambr_allow(&self, len: usize, now: u64) -> bool {
        self.ambr.allow(&self.ambr_rate, len, now)
    }

    /// UE-AMBR downlink at `bits_per_s` (see [`AmbrCell::install`]).
    pub(crate) fn set_ambr(&self, bits_per_s: u64, reset: bool) {
        self.ambr.install(&self.ambr_rate, bits_per_s, reset)
    }
}

const _: () = assert!(std::mem::size_of::<UplinkLine>() == 64);
const _: () = assert!(std::mem::size_of::<DownlinkLine>() == 64);

/// A bearer's dropped packets by direction (apart from its lines: touched
/// only by drops, four to a cache line).
#[repr(C, align(16))]
#[derive(Default, Debug)]
pub struct BearerDrops {
    pub ul: AtomicU64,
    pub dl: AtomicU64,
}

#[repr(C, align(64))]
#[derive(Default, Debug)]
pub struct RuleCounters {
    pub ul_packets: AtomicU64,
    pub ul_bytes: AtomicU64,
    pub dl_packets: AtomicU64,
    pub dl_bytes: AtomicU64,
}

/// Per-rule volumes of one bearer: bytes of up to [`RULE_COUNTERS_PER_BEARER`] of
/// the PCC rules bound to it, by direction (a rule's `counter` picks its pair). In
/// a table beside the slots' lines (those are full): touched only
/// by packets a counted rule matched. Never reset: whoever assigns a pair reads its
/// values first and counts from them.
#[repr(C, align(64))]
#[derive(Default, Debug)]
pub struct BearerRuleCounters {
    pub ul_bytes: [AtomicU64; RULE_COUNTERS_PER_BEARER],
    pub dl_bytes: [AtomicU64; RULE_COUNTERS_PER_BEARER],
}

/// Rules of one bearer whose volumes are counted apart.
pub const RULE_COUNTERS_PER_BEARER: usize = 4;

/// A plain snapshot of a bearer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
    pub ul_dropped: u64,
    pub dl_dropped: u64,
}

/// Rule sets per slice and rules per set, bounding the rule counter table.
pub const MAX_RULE_SETS: usize = 256;
pub const MAX_RULES_PER_SET: usize = 32;

/// All counters of one slice.
pub struct SliceCounters {
    /// Slot `i`'s uplink line and downlink line, one table per direction: a packet
    /// touches one line, and its direction's lines are packed densely (one page maps
    /// twice the slots it would with the two lines side by side).
    pub(crate) ul: Box<[UplinkLine]>,
    pub(crate) dl: Box<[DownlinkLine]>,
    pub bearer_drops: Box<[BearerDrops]>,
    /// Per-rule volumes by bearer slot (pages untouched until a counted rule matches).
    pub bearer_rules: Box<[BearerRuleCounters]>,
    pub rules: Box<[RuleCounters]>,
    pub drops: [AtomicU64; DROP_REASONS],
    /// Aggregate charging of the stateless-IoT class.
    pub iot: RuleCounters,
    /// Packets forwarded, by direction (uplink, downlink).
    pub ul_forwarded: AtomicU64,
    pub dl_forwarded: AtomicU64,
    /// IP bytes forwarded, by direction.
    pub ul_bytes: AtomicU64,
    pub dl_bytes: AtomicU64,
    /// Packets buffered waiting for promotion, and buffered packets later delivered.
    pub buffered: AtomicU64,
    pub drained: AtomicU64,
    pub echo_replies: AtomicU64,
    pub error_indications: AtomicU64,
    pub end_markers: AtomicU64,
    pub updates_applied: AtomicU64,
    /// The egress schedulers' counters: toward SGi (uplink), toward S1-U (downlink).
    pub egress: [std::sync::Arc<crate::datapath::egress::EgressCounters>; 2],
}

impl SliceCounters {
    /// Counters for bearer slots `0..bearer_slots`, with the hot lines of UE slots
    /// `0..ue_slots` beside them.
    pub fn new(bearer_slots: usize, ue_slots: usize) -> Self {
        SliceCounters {
            ul: crate::mem::zeroed_slice(bearer_slots.max(ue_slots)),
            dl: crate::mem::zeroed_slice(bearer_slots.max(ue_slots)),
            bearer_drops: crate::mem::zeroed_slice(bearer_slots),
            bearer_rules: crate::mem::zeroed_slice(bearer_slots),
            rules: crate::mem::zeroed_slice(MAX_RULE_SETS * MAX_RULES_PER_SET),
            drops: Default::default(),
            iot: RuleCounters::default(),
            ul_forwarded: AtomicU64::new(0),
            ul_bytes: AtomicU64::new(0),
            dl_bytes: AtomicU64::new(0),
            dl_forwarded: AtomicU64::new(0),
            buffered: AtomicU64::new(0),
            drained: AtomicU64::new(0),
            echo_replies: AtomicU64::new(0),
            error_indications: AtomicU64::new(0),
            end_markers: AtomicU64::new(0),
            updates_applied: AtomicU64::new(0),
            egress: Default::default(),
        }
    }

    /// Slot `slot`'s lines (`None` out of range).
    #[inline]
    pub fn lines(&self, slot: u32) -> Option<(&UplinkLine, &DownlinkLine)> {
        Some((self.ul.get(slot as usize)?, self.dl.get(slot as usize)?))
    }

    /// Bearer slots (and UE slots) the tables hold.
    pub fn slots(&self) -> usize {
        self.ul.len()
    }

    /// Data-thread clock (ns) of bearer `slot`'s last packet either way (0: none).
    pub fn last_active_ns(&self, slot: u32) -> u64 {
        self.lines(slot).map_or(0, |(ul, dl)| {
            ul.last_active_ns
                .load(Relaxed)
                .max(dl.last_active_ns.load(Relaxed))
        })
    }

    #[inline]
    pub fn drop_count(&self, r: DropReason) -> u64 {
        self.drops[r as usize].load(Relaxed)
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().map(|d| d.load(Relaxed)).sum()
    }

    /// A bearer's usage (zero for a slot out of range).
    pub fn bearer_usage(&self, slot: u32) -> Usage {
        let (Some((ul, dl)), Some(d)) = (self.lines(slot), self.bearer_drops.get(slot as usize))
        else {
            return Usage::default();
        };
        Usage {
            ul_packets: ul.packets.load(Relaxed),
            ul_bytes: ul.bytes.load(Relaxed),
            dl_packets: dl.packets.load(Relaxed),
            dl_bytes: dl.bytes.load(Relaxed),
            ul_dropped: d.ul.load(Relaxed),
            dl_dropped: d.dl.load(Relaxed),
        }
    }

    /// Set a bearer's usage from a snapshot (a restored UE). Data thread only, like
    /// [`Self::reset_bearer`].
    pub(crate) fn restore_bearer(&self, slot: u32, u: &Usage) {
        let (Some((ul, dl)), Some(d)) = (self.lines(slot), self.bearer_drops.get(slot as usize))
        else {
            return;
        };
        ul.packets.store(u.ul_packets, Relaxed);
        ul.bytes.store(u.ul_bytes, Relaxed);
        dl.packets.store(u.dl_packets, Relaxed);
        dl.bytes.store(u.dl_bytes, Relaxed);
        d.ul.store(u.ul_dropped, Relaxed);
        d.dl.store(u.dl_dropped, Relaxed);
    }

    /// Zero a bearer's counters when its slot is reused (its record stays: the data
    /// thread keeps that). Called by the data thread only (it installs new bearers),
    /// keeping the single-writer rule.
    pub(crate) fn reset_bearer(&self, slot: u32) {
        self.restore_bearer(slot, &Usage::default());
        if let Some((ul, dl)) = self.lines(slot) {
            ul.last_active_ns.store(0, Relaxed);
            dl.last_active_ns.store(0, Relaxed);
        }
    }

    #[inline]
    pub fn rule(&self, set: u16, idx: u16) -> &RuleCounters {
        &self.rules[set as usize * MAX_RULES_PER_SET + idx as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slot `i`'s uplink line holds bearer `i`'s record and UE `i`'s policy, which may
    /// belong to two different UEs (a restored bearer kept its slot): writing one
    /// never changes the other.
    #[test]
    fn a_lines_bearer_and_ue_parts_are_written_apart() {
        let l = UplinkLine::default();
        l.set_ue(0x01, 0xbeef);
        l.set_bearer(BearerHot {
            teid_ul: 7,
            ue_slot: 9,
            src_ip: 11,
            flags: 0x03,
        });
        assert_eq!(l.ue(), (0x01, 0xbeef));
        l.set_bearer_flags(0);
        l.set_ue(0x05, 3);
        assert_eq!(l.ue(), (0x05, 3));
        let b = l.bearer();
        assert_eq!((b.teid_ul, b.ue_slot, b.src_ip, b.flags), (7, 9, 11, 0));
        let d = DownlinkLine::default();
        let u = UeDown {
            ip: 1,
            enb_teid: 2,
            enb_addr: 3,
            rule_set: 0xffff,
            pdn: 4,
            ebi: 15,
            flags: 0x07,
        };
        d.set_ue(u);
        assert_eq!(d.ue(), u);
        assert_eq!(d.flags_pdn(), (0x07, 4));
    }

    /// The AMBR bucket in a line behaves as [`AmbrBucket`]; re-installing the same rate
    /// keeps the tokens, a new rate or a reset refills them; unlimited writes nothing.
    #[test]
    fn a_lines_ambr_bucket_is_the_plain_bucket() {
        let l = DownlinkLine::default();
        l.set_ambr(8_000_000, true);
        let mut plain = AmbrBucket::new(8_000_000);
        let mut t = 0;
        for i in 0..5000u64 {
            let len = 100 + (i as usize * 131) % 1400;
            assert_eq!(l.ambr_allow(len, t), plain.allow(len, t), "packet {i}");
            t += 20_000;
        }
        let drained = l.ambr.tokens.load(Relaxed);
        l.set_ambr(8_000_000, false);
        assert_eq!(l.ambr.tokens.load(Relaxed), drained, "same rate: kept");
        l.set_ambr(16_000_000, false);
        assert!(l.ambr.tokens.load(Relaxed) > drained, "new rate: refilled");
        l.set_ambr(0, false);
        let before = (l.ambr.tokens.load(Relaxed), l.ambr.last.load(Relaxed));
        assert!(l.ambr_allow(usize::MAX / 2_000_000_000, 1 << 40));
        assert_eq!(
            (l.ambr.tokens.load(Relaxed), l.ambr.last.load(Relaxed)),
            before
        );
    }
}
