//! Logs of what a peer causes (malformed S1AP or NAS, unknown UE IDs, unexpected
//! messages) are a flood channel: one line per bad message let 30 s of garbage write
//! 8.3 MB. Each [`Kind`] has a token bucket ([`BURST`] lines, then [`PER_SECOND`]);
//! a line past it is counted instead of written, and the next line written says how
//! many were suppressed ("suppressed N similar"). The totals are exported as
//! `pepc_log_suppressed_total{kind}`.
//!
//! ```
//! use pepc_ratelog::{peer_warn, Kind};
//! let assoc = 3;
//! peer_warn!(Kind::S1apUndecodable, "assoc {assoc}: undecodable S1AP");
//! ```
//!
//! Also here: [`outln!`], [`errln!`], lines on stdout and stderr that are never a
//! panic when the reader has gone.
//!
//! Costs nothing when WARN is off (tracing's level check comes first) and a lock of
//! this kind's bucket otherwise, on paths that are already error paths.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Lines of a kind written at once before the rate applies.
pub const BURST: u32 = 20;
/// Lines of a kind written per second once the burst is spent.
pub const PER_SECOND: u32 = 5;

/// What a peer caused; each has its own budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Kind {
    /// An S1AP PDU that does not decode.
    S1apUndecodable,
    /// An S1AP message the MME does not take in its state (or at all).
    S1apUnexpected,
    /// An S1AP message for a UE ID the MME does not know.
    UnknownUeId,
    /// An Error Indication from an eNB.
    ErrorIndication,
    /// A Reset past the pending bound.
    ResetRefused,
    /// A NAS message that does not decode or is not protected as it must be.
    NasUndecodable,
    /// A NAS message whose MAC does not verify, or that replays a COUNT.
    NasIntegrity,
    /// An eNB's report about something we do not have (a TEID, an undelivered NAS).
    EnbReport,
    /// A UE that stopped answering (its NAS procedure timed out).
    ProcedureTimeout,
}

impl Kind {
    pub const ALL: [Kind; 9] = [
        Kind::S1apUndecodable,
        Kind::S1apUnexpected,
        Kind::UnknownUeId,
        Kind::ErrorIndication,
        Kind::ResetRefused,
        Kind::NasUndecodable,
        Kind::NasIntegrity,
        Kind::EnbReport,
        Kind::ProcedureTimeout,
    ];

    /// The metric's label.
    pub fn name(self) -> &'static str {
        match self {
            Kind::S1apUndecodable => "s1ap_undecodable",
            Kind::S1apUnexpected => "s1ap_unexpected",
            Kind::UnknownUeId => "unknown_ue_id",
            Kind::ErrorIndication => "error_indication",
            Kind::ResetRefused => "reset_refused",
            Kind::NasUndecodable => "nas_undecodable",
            Kind::NasIntegrity => "nas_integrity",
            Kind::EnbReport => "enb_report",
            Kind::ProcedureTimeout => "procedure_timeout",
        }
    }
}

/// One kind's bucket.
struct Bucket {
    /// Tokens (lines) left, and when they were last counted (ms since the epoch).
    state: Mutex<(u32, u64)>,
    /// Suppressed since the last line written (said with the next one).
    pending: AtomicU64,
    /// Suppressed since the process started (the metric).
    total: AtomicU64,
}

const fn bucket() -> Bucket {
    Bucket {
        state: Mutex::new((BURST, 0)),
        pending: AtomicU64::new(0),
        total: AtomicU64::new(0),
    }
}

static BUCKETS: [Bucket; Kind::ALL.len()] = [
    bucket(),
    bucket(),
    bucket(),
    bucket(),
    bucket(),
    bucket(),
    bucket(),
    bucket(),
    bucket(),
];

fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Whether a line of `kind` may be written now: `Some(n)` with the lines suppressed
/// since the last one written, `None` when this one is suppressed (and counted).
pub fn admit(kind: Kind) -> Option<u64> {
    admit_at(kind, now_ms())
}

fn admit_at(kind: Kind, now: u64) -> Option<u64> {
    let b = &BUCKETS[kind as usize];
    let ok = {
        // A poisoned lock (a panic while held: none can happen in here) still counts.
        let mut s = b.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, last) = *s;
        let earned = now.saturating_sub(last) * u64::from(PER_SECOND) / 1000;
        let tokens = (u64::from(tokens) + earned).min(u64::from(BURST)) as u32;
        // Time is credited only in whole tokens, so a slow trickle still earns them.
        let last = if earned > 0 {
            last + earned * 1000 / u64::from(PER_SECOND)
        } else {
            last
        };
        let last = if tokens == BURST { now } else { last };
        if tokens > 0 {
            *s = (tokens - 1, last);
            true
        } else {
            *s = (0, last);
            false
        }
    };
    if ok {
        Some(b.pending.swap(0, Ordering::Relaxed))
    } else {
        b.pending.fetch_add(1, Ordering::Relaxed);
        b.total.fetch_add(1, Ordering::Relaxed);
        None
    }
}

/// Lines of `kind` suppressed since the process started.
pub fn suppressed(kind: Kind) -> u64 {
    BUCKETS[kind as usize].total.load(Ordering::Relaxed)
}

/// A WARN line about what a peer caused, rate-limited per [`Kind`].
#[macro_export]
macro_rules! peer_warn {
    ($kind:expr, $($arg:tt)+) => {
        if ::tracing::enabled!(::tracing::Level::WARN) {
            let kind: $crate::Kind = $kind;
            if let Some(n) = $crate::admit(kind) {
                if n > 0 {
                    ::tracing::warn!("suppressed {n} similar ({})", kind.name());
                }
                ::tracing::warn!($($arg)+);
            }
        }
    };
}

/// [`peer_warn!`] at INFO.
#[macro_export]
macro_rules! peer_info {
    ($kind:expr, $($arg:tt)+) => {
        if ::tracing::enabled!(::tracing::Level::INFO) {
            let kind: $crate::Kind = $kind;
            if let Some(n) = $crate::admit(kind) {
                if n > 0 {
                    ::tracing::info!("suppressed {n} similar ({})", kind.name());
                }
                ::tracing::info!($($arg)+);
            }
        }
    };
}

/// A line on stdout that is never a panic. Rust ignores SIGPIPE, so `println!` panics
/// once the reader has closed the pipe (`pepc ctl ues | head -1`); the reader has what
/// it wanted, so the rest is dropped instead.
///
/// These write through the unlocked handle: its `write_fmt` takes the lock after the
/// arguments are evaluated. A `.lock()` first would hold stdout/stderr while they
/// are, and `errln!("{}", epc.stop())` then deadlocked with any thread that logged
/// while the node stopped.
#[macro_export]
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        // A failed write means the reader is gone: nothing is left to tell it.
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}

/// A line on stderr that is never a panic: `eprintln!` panics once the reader has
/// closed the pipe (`pepc demo 2>&1 | head`); the line is dropped then.
#[macro_export]
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        // As above: a closed stderr drops the line.
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

/// [`errln!`] without the newline.
#[macro_export]
macro_rules! errln_nonl {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        // As above: a closed stderr drops the text.
        let _ = write!(std::io::stderr(), $($t)*);
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_the_rate_then_the_count_of_what_was_suppressed() {
        // Its own kind: the buckets are process-wide and other tests log.
        let k = Kind::ResetRefused;
        let t0 = 1_000_000;
        let written = (0..1000).filter(|_| admit_at(k, t0).is_some()).count();
        assert_eq!(written, BURST as usize);
        assert_eq!(suppressed(k), 1000 - u64::from(BURST));
        // One second later: PER_SECOND more, the first saying what was suppressed.
        let later: Vec<Option<u64>> = (0..100).map(|_| admit_at(k, t0 + 1000)).collect();
        let ok: Vec<u64> = later.iter().flatten().copied().collect();
        assert_eq!(ok.len(), PER_SECOND as usize);
        assert_eq!(ok[0], 1000 - u64::from(BURST));
        assert!(ok[1..].iter().all(|&n| n == 0), "{ok:?}");
        // A long quiet spell refills the burst, not more.
        let after = (0..1000)
            .filter(|_| admit_at(k, t0 + 3_600_000).is_some())
            .count();
        assert_eq!(after, BURST as usize);
    }
}
