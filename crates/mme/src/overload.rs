//! MME overload control (TS 36.413 §8.7.6-8.7.7, TS 24.301 §5.5.1.2.5 / T3346;
//! TS 23.401 §4.3.7.4).
//!
//! The node's drivers report each slice's signaling backlog (messages waiting for the
//! slice's MME). A slice whose backlog passes `high` is *congested*: its MME rejects
//! new non-emergency attaches with EMM cause #22 (congestion) and a T3346 back-off,
//! which costs it a fraction of an attach. While any slice is congested the node is
//! *overloaded*: every eNB gets OVERLOAD START (reject new non-emergency signaling at
//! the RRC level, so the load stops at the source); once every slice's backlog is
//! back under `low` (and at least `hold` after the start, so it does not flap) the
//! eNBs get OVERLOAD STOP. Sans-IO: backlogs and time in, transitions out.

use pepc_s1ap::msg::OverloadAction;
use std::time::{Duration, Instant};

/// Thresholds and what is asked of eNBs and UEs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverloadConfig {
    /// Backlog (messages) above which a slice is congested; 0 turns overload control off.
    pub high: usize,
    /// Backlog under which a congested slice is relieved.
    pub low: usize,
    /// Back-off given to rejected UEs (T3346, TS 24.301 §10.2).
    pub t3346: Duration,
    /// What eNBs are asked to reject while the node is overloaded.
    pub action: OverloadAction,
    /// The shortest overload period (no OVERLOAD STOP sooner after the START).
    pub hold: Duration,
}

impl Default for OverloadConfig {
    fn default() -> Self {
        OverloadConfig {
            high: 8192,
            low: 1024,
            t3346: Duration::from_secs(60),
            action: OverloadAction::PermitEmergencyAndMtOnly,
            hold: Duration::from_millis(500),
        }
    }
}

/// What overload control did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OverloadStats {
    /// Times the node entered overload (OVERLOAD START sent to the eNBs).
    pub starts: u64,
    pub stops: u64,
    /// Times a slice became congested.
    pub slice_congestions: u64,
    /// Total time overloaded, completed periods only.
    pub overloaded_ms: u64,
    /// The largest backlog seen.
    pub peak_backlog: u64,
}

/// A transition to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Slice `slice` became congested (`on`) or relieved.
    Slice { slice: usize, on: bool },
    /// The node entered (`on`) or left overload.
    Node { on: bool },
}

/// The per-node overload state.
#[derive(Debug, Clone)]
pub struct OverloadControl {
    cfg: OverloadConfig,
    /// Per slice: congested by its backlog; congested by its MME's own measure.
    congested: Vec<bool>,
    by_mme: Vec<bool>,
    since: Option<Instant>,
    pub stats: OverloadStats,
}

impl OverloadControl {
    pub fn new(cfg: OverloadConfig, slices: usize) -> Self {
        OverloadControl {
            cfg,
            congested: vec![false; slices.max(1)],
            by_mme: vec![false; slices.max(1)],
            since: None,
            stats: OverloadStats::default(),
        }
    }

    pub fn config(&self) -> &OverloadConfig {
        &self.cfg
    }

    /// Whether the eNBs are currently told to hold back.
    pub fn overloaded(&self) -> bool {
        self.since.is_some()
    }

    pub fn slice_congested(&self, slice: usize) -> bool {
        self.congested.get(slice).copied().unwrap_or(false)
    }

    /// Slice `slice`'s MME says it is congested by its own measure (contexts awaiting
    /// authentication near their bound) or relieved; the node is overloaded while
    /// any slice is, by either measure. Applied at the next [`Self::observe`].
    pub fn mme_congested(&mut self, slice: usize, on: bool) {
        if let Some(c) = self.by_mme.get_mut(slice) {
            *c = on;
        }
    }

    /// Slice `slice` has `backlog` messages waiting at `now`.
    pub fn observe(&mut self, now: Instant, slice: usize, backlog: usize, out: &mut Vec<Change>) {
        if self.cfg.high == 0 || slice >= self.congested.len() {
            return;
        }
        self.stats.peak_backlog = self.stats.peak_backlog.max(backlog as u64);
        let was = self.congested[slice];
        if !was && backlog > self.cfg.high {
            self.congested[slice] = true;
            self.stats.slice_congestions += 1;
            out.push(Change::Slice { slice, on: true });
        } else if was && backlog < self.cfg.low {
            self.congested[slice] = false;
            out.push(Change::Slice { slice, on: false });
        }
        let any = self.congested.iter().chain(&self.by_mme).any(|c| *c);
        match self.since {
            None if any => {
                self.since = Some(now);
                self.stats.starts += 1;
                out.push(Change::Node { on: true });
            }
            Some(t) if !any && now.saturating_duration_since(t) >= self.cfg.hold => {
                self.since = None;
                self.stats.stops += 1;
                self.stats.overloaded_ms += now.saturating_duration_since(t).as_millis() as u64;
                out.push(Change::Node { on: false });
            }
            _ => {}
        }
    }
}

/// T3346 as GPRS timer 2 can carry it (TS 24.008 §10.5.7.4): 2 s steps up to 62 s,
/// minutes up to 31 min, then 6-minute steps (at most 186 min); to the nearest step
/// (so a spread value stays near what was asked), never 0.
pub fn t3346_encodable(d: Duration) -> u64 {
    let s = d.as_secs_f64().max(2.0);
    let near = |unit: f64| ((s / unit).round() * unit) as u64;
    if s < 63.0 {
        near(2.0).max(2)
    } else if s < 31.5 * 60.0 {
        near(60.0).max(60)
    } else {
        near(360.0).min(31 * 360)
    }
}

/// Is this NAS PDU (plain or integrity protected) an Attach Request other than an
/// emergency attach (EPS attach type 6, TS 24.301 §9.9.3.11)?
pub fn non_emergency_attach(nas: &[u8]) -> bool {
    let plain = match nas.first().map(|b| (b >> 4, b & 0x0f)) {
        Some((0, 7)) => nas,
        // Security protected: 6-octet header, then the plain message.
        Some((1..=4, 7)) => nas.get(6..).unwrap_or(&[]),
        _ => return false,
    };
    match plain {
        [h, 0x41, t, ..] if h & 0x0f == 7 => t & 0x07 != 6,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn t3346_values_are_encodable() {
        for (s, want) in [
            (0, 2),
            (1, 2),
            (3, 4),
            (62, 62),
            (63, 60),
            (75, 60),
            (95, 120),
            (1800, 1800),
            (1900, 1800),
            (2000, 2160),
        ] {
            assert_eq!(t3346_encodable(Duration::from_secs(s)), want, "{s}");
        }
        assert_eq!(t3346_encodable(Duration::from_secs(1 << 20)), 31 * 360);
    }

    #[test]
    fn emergency_attach_is_not_turned_away() {
        // Plain Attach Request, EPS attach type 1 (EPS attach) / 6 (emergency).
        assert!(non_emergency_attach(&[0x07, 0x41, 0x71, 0x08]));
        assert!(!non_emergency_attach(&[0x07, 0x41, 0x76, 0x08]));
        // Integrity protected (SHT 1).
        let mut p = vec![0x17, 1, 2, 3, 4, 0];
        p.extend_from_slice(&[0x07, 0x41, 0x02]);
        assert!(non_emergency_attach(&p));
        // Not an attach: TAU Request, Service Request, garbage.
        assert!(!non_emergency_attach(&[0x07, 0x48, 0x01]));
        assert!(!non_emergency_attach(&[0xc7, 0, 0, 0]));
        assert!(!non_emergency_attach(&[]));
    }
}
