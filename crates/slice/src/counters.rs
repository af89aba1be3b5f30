//! Counter state: written only by the data thread, read by the control thread.
//!
//! Every counter is an `AtomicU64` updated with a plain load + store (no read-modify-
//! write: there is one writer), which compiles to ordinary moves on x86-64 and lets the
//! control thread read without tearing. Each bearer's counters fill one cache line of
//! their own, so the control thread reading them never shares a line with data-thread
//! writes to another bearer.

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

/// Single-writer increment.
#[inline(always)]
pub(crate) fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// A bearer's counters, and in the same cache line the data thread's own uplink
/// record of it ([`BearerHot`]): an uplink packet checks its TEID and source and
/// counts itself with one line fetched (the drop counters, written only when a packet
/// is dropped, are in [`SliceCounters::bearer_drops`]).
#[repr(C, align(64))]
#[derive(Default, Debug)]
pub struct BearerCounters {
    pub ul_packets: AtomicU64,
    pub ul_bytes: AtomicU64,
    pub dl_packets: AtomicU64,
    pub dl_bytes: AtomicU64,
    /// Data-thread clock (ns) of the last packet, for idle eviction.
    pub last_active_ns: AtomicU64,
    /// Read and written by the data thread only (atomics so the line can be shared
    /// with the control thread's counter reads; relaxed, they compile to moves).
    pub(crate) hot: BearerHotCell,
}

const _: () = assert!(std::mem::size_of::<BearerCounters>() == 64);

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

/// [`BearerHot`] as stored in [`BearerCounters`].
#[repr(C, align(16))]
#[derive(Default, Debug)]
pub(crate) struct BearerHotCell {
    teid_ul: AtomicU32,
    ue_slot: AtomicU32,
    src_ip: AtomicU32,
    flags: AtomicU32,
}

impl BearerHotCell {
    #[inline(always)]
    pub fn load(&self) -> BearerHot {
        BearerHot {
            teid_ul: self.teid_ul.load(Relaxed),
            ue_slot: self.ue_slot.load(Relaxed),
            src_ip: self.src_ip.load(Relaxed),
            flags: self.flags.load(Relaxed) as u8,
        }
    }

    #[inline(always)]
    pub fn flags(&self) -> u8 {
        self.flags.load(Relaxed) as u8
    }

    pub fn store(&self, h: BearerHot) {
        self.teid_ul.store(h.teid_ul, Relaxed);
        self.ue_slot.store(h.ue_slot, Relaxed);
        self.src_ip.store(h.src_ip, Relaxed);
        self.flags.store(h.flags as u32, Relaxed);
    }

    pub fn set_flags(&self, flags: u8) {
        self.flags.store(flags as u32, Relaxed);
    }
}

/// The data thread's per-UE hot record (`UeHot` in [`crate::datapath`]) as eight
/// words: atomics so the line can sit beside the shared counters, read and written by
/// the data thread only (relaxed, they compile to moves).
#[repr(C, align(64))]
#[derive(Default, Debug)]
pub(crate) struct UeHotCell(pub [AtomicU64; 8]);

/// Slot `i`'s two lines, 128-byte aligned: bearer `i`'s counters and hot record, and
/// UE `i`'s hot record. A UE's first default bearer takes the bearer slot equal to its
/// UE slot ([`crate::control`]), so the common packet's two records are one aligned
/// pair of lines on one page, both prefetched from the identifier alone: one page
/// walk and no wait for the first line to learn where the second is.
#[repr(C, align(128))]
#[derive(Default, Debug)]
pub struct SlotLines {
    pub bearer: BearerCounters,
    pub(crate) ue: UeHotCell,
}

const _: () = assert!(std::mem::size_of::<SlotLines>() == 128);

/// A bearer's dropped packets by direction (apart from [`BearerCounters`]: touched
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
/// a table beside [`BearerCounters`] (that one's cache line is full): touched only
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
    /// Bearer and UE slot `i` (see [`SlotLines`]).
    pub(crate) lines: Box<[SlotLines]>,
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
}

impl SliceCounters {
    /// Counters for bearer slots `0..bearer_slots`, with the hot lines of UE slots
    /// `0..ue_slots` beside them.
    pub fn new(bearer_slots: usize, ue_slots: usize) -> Self {
        SliceCounters {
            lines: crate::mem::zeroed_slice(bearer_slots.max(ue_slots)),
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
        }
    }

    /// Bearer `slot`'s counters (`None` out of range).
    #[inline]
    pub fn bearer(&self, slot: u32) -> Option<&BearerCounters> {
        self.lines.get(slot as usize).map(|l| &l.bearer)
    }

    /// Bearer slots (and UE slots) the table holds.
    pub fn slots(&self) -> usize {
        self.lines.len()
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
        let (Some(c), Some(d)) = (self.bearer(slot), self.bearer_drops.get(slot as usize)) else {
            return Usage::default();
        };
        Usage {
            ul_packets: c.ul_packets.load(Relaxed),
            ul_bytes: c.ul_bytes.load(Relaxed),
            dl_packets: c.dl_packets.load(Relaxed),
            dl_bytes: c.dl_bytes.load(Relaxed),
            ul_dropped: d.ul.load(Relaxed),
            dl_dropped: d.dl.load(Relaxed),
        }
    }

    /// Set a bearer's usage from a snapshot (a restored UE). Data thread only, like
    /// [`Self::reset_bearer`].
    pub(crate) fn restore_bearer(&self, slot: u32, u: &Usage) {
        let (Some(c), Some(d)) = (self.bearer(slot), self.bearer_drops.get(slot as usize)) else {
            return;
        };
        c.ul_packets.store(u.ul_packets, Relaxed);
        c.ul_bytes.store(u.ul_bytes, Relaxed);
        c.dl_packets.store(u.dl_packets, Relaxed);
        c.dl_bytes.store(u.dl_bytes, Relaxed);
        d.ul.store(u.ul_dropped, Relaxed);
        d.dl.store(u.dl_dropped, Relaxed);
    }

    /// Zero a bearer's counters when its slot is reused (its hot record stays: the
    /// data thread keeps that). Called by the data thread only (it installs new
    /// bearers), keeping the single-writer rule.
    pub(crate) fn reset_bearer(&self, slot: u32) {
        self.restore_bearer(slot, &Usage::default());
        if let Some(c) = self.bearer(slot) {
            c.last_active_ns.store(0, Relaxed);
        }
    }

    #[inline]
    pub fn rule(&self, set: u16, idx: u16) -> &RuleCounters {
        &self.rules[set as usize * MAX_RULES_PER_SET + idx as usize]
    }
}
