//! Counter state: written only by the data thread, read by the control thread.
//!
//! Every counter is an `AtomicU64` updated with a plain load + store (no read-modify-
//! write: there is one writer), which compiles to ordinary moves on x86-64 and lets the
//! control thread read without tearing. Each bearer's counters fill one cache line of
//! their own, so the control thread reading them never shares a line with data-thread
//! writes to another bearer.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

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

#[repr(C, align(64))]
#[derive(Default, Debug)]
pub struct BearerCounters {
    pub ul_packets: AtomicU64,
    pub ul_bytes: AtomicU64,
    pub dl_packets: AtomicU64,
    pub dl_bytes: AtomicU64,
    pub ul_dropped: AtomicU64,
    pub dl_dropped: AtomicU64,
    /// Data-thread clock (ns) of the last packet, for idle eviction.
    pub last_active_ns: AtomicU64,
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

impl BearerCounters {
    pub fn snapshot(&self) -> Usage {
        Usage {
            ul_packets: self.ul_packets.load(Relaxed),
            ul_bytes: self.ul_bytes.load(Relaxed),
            dl_packets: self.dl_packets.load(Relaxed),
            dl_bytes: self.dl_bytes.load(Relaxed),
            ul_dropped: self.ul_dropped.load(Relaxed),
            dl_dropped: self.dl_dropped.load(Relaxed),
        }
    }

    /// Set from a snapshot (a restored UE). Data thread only, like [`Self::reset`].
    pub(crate) fn restore(&self, u: &Usage) {
        self.ul_packets.store(u.ul_packets, Relaxed);
        self.ul_bytes.store(u.ul_bytes, Relaxed);
        self.dl_packets.store(u.dl_packets, Relaxed);
        self.dl_bytes.store(u.dl_bytes, Relaxed);
        self.ul_dropped.store(u.ul_dropped, Relaxed);
        self.dl_dropped.store(u.dl_dropped, Relaxed);
    }

    /// Reset when a slot is reused. Called by the data thread only (it installs new
    /// bearers), keeping the single-writer rule.
    pub(crate) fn reset(&self) {
        for c in [
            &self.ul_packets,
            &self.ul_bytes,
            &self.dl_packets,
            &self.dl_bytes,
            &self.ul_dropped,
            &self.dl_dropped,
            &self.last_active_ns,
        ] {
            c.store(0, Relaxed);
        }
    }
}

/// Rule sets per slice and rules per set, bounding the rule counter table.
pub const MAX_RULE_SETS: usize = 256;
pub const MAX_RULES_PER_SET: usize = 32;

/// All counters of one slice.
pub struct SliceCounters {
    pub bearers: Box<[BearerCounters]>,
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
    pub fn new(bearer_slots: usize) -> Self {
        SliceCounters {
            bearers: crate::mem::zeroed_slice(bearer_slots),
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

    #[inline]
    pub fn drop_count(&self, r: DropReason) -> u64 {
        self.drops[r as usize].load(Relaxed)
    }

    pub fn total_drops(&self) -> u64 {
        self.drops.iter().map(|d| d.load(Relaxed)).sum()
    }

    #[inline]
    pub fn rule(&self, set: u16, idx: u16) -> &RuleCounters {
        &self.rules[set as usize * MAX_RULES_PER_SET + idx as usize]
    }
}
