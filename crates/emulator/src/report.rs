//! Measures: per-procedure completion times and outcomes, end-to-end packet counts,
//! and the final report (table and JSON).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::ue::{Failure, Procedure};

/// Running counters, owned by the driver.
#[derive(Debug, Default)]
pub struct Metrics {
    lat_us: BTreeMap<Procedure, Vec<u64>>,
    failed: BTreeMap<Procedure, u64>,
    causes: BTreeMap<String, u64>,
    pub ul_sent: u64,
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_sent: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
    pub end_markers: u64,
    /// Pagings of an emulated UE: the first Paging of each episode (until the UE is
    /// connected again), the one it answers with a Service Request.
    pub pagings: u64,
    /// Paging messages again in an episode already counted: the same Paging through
    /// another eNB of the UE's TAIs, or the MME's repeat when T3413 ran out before the
    /// UE's Service Request reached it.
    pub paging_repeats: u64,
    /// Uplink packets sent on a PDN connection other than the attach one.
    pub ul_sent_extra_pdn: u64,
    /// Events the scenario wanted but no UE was eligible for, or not supported.
    pub skipped: u64,
    /// The most events the steady state was behind its schedule (the emulator's
    /// own lag: more than a few hundred means it did not keep up with the rate).
    pub events_behind_max: u64,
    pub errors: BTreeMap<String, u64>,
    pub back_off: BackOffStats,
    pub sctp: SctpFigures,
}

/// The eNBs' S1-MME associations (userspace SCTP): what the network's faults cost.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SctpFigures {
    pub data_chunks_rx: u64,
    /// DATA chunks received twice (lost SACKs, network duplicates): never delivered twice.
    pub dup_tsns_rx: u64,
    /// S1AP messages handed to the eNBs.
    pub delivered: u64,
    pub data_chunks_tx: u64,
    pub retransmissions: u64,
}

/// What the network's overload control did to this run (TS 36.413 §8.7.6, TS 24.301
/// T3346).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BackOffStats {
    /// OVERLOAD START / STOP received (all eNBs).
    pub overload_starts: u64,
    pub overload_stops: u64,
    /// RRC connections an overloaded eNB refused.
    pub rrc_rejects: u64,
    /// EMM #22 rejects carrying T3346.
    pub t3346_rejects: u64,
    /// Total and longest back-off (ms).
    pub waited_ms: u64,
    pub longest_ms: u64,
}

impl Metrics {
    pub fn record(&mut self, p: Procedure, took_us: u64, result: &Result<(), Failure>) {
        match result {
            Ok(()) => self.lat_us.entry(p).or_default().push(took_us),
            Err(f) => {
                *self.failed.entry(p).or_default() += 1;
                *self.causes.entry(format!("{}: {f}", p.name())).or_default() += 1;
            }
        }
    }

    pub fn error(&mut self, what: &str) {
        // Keep the key set small: the message up to the first digit-bearing detail.
        let key: String = what.chars().take(60).collect();
        *self.errors.entry(key).or_default() += 1;
    }

    pub fn ok(&self, p: Procedure) -> u64 {
        self.lat_us.get(&p).map_or(0, |v| v.len() as u64)
    }

    /// Failed procedures of every type so far (for live progress).
    pub fn total_failures(&self) -> u64 {
        self.failed.values().sum()
    }

    pub fn failures(&self, p: Procedure) -> u64 {
        self.failed.get(&p).copied().unwrap_or(0)
    }

    /// Build the report.
    pub fn report(&self, ues: u32, attached: u64, failed: u64, duration_s: f64) -> Report {
        let mut procedures = BTreeMap::new();
        let keys: std::collections::BTreeSet<Procedure> = self
            .lat_us
            .keys()
            .chain(self.failed.keys())
            .copied()
            .collect();
        for p in keys {
            let mut v = self.lat_us.get(&p).cloned().unwrap_or_default();
            v.sort_unstable();
            procedures.insert(
                p.name().to_string(),
                ProcedureStats {
                    ok: v.len() as u64,
                    failed: self.failures(p),
                    p50_us: percentile(&v, 50.0),
                    p99_us: percentile(&v, 99.0),
                    max_us: v.last().copied().unwrap_or(0),
                },
            );
        }
        Report {
            ues,
            attached,
            failed,
            ul_sent: self.ul_sent,
            ul_packets: self.ul_packets,
            ul_bytes: self.ul_bytes,
            dl_sent: self.dl_sent,
            dl_packets: self.dl_packets,
            dl_bytes: self.dl_bytes,
            lost: self.ul_sent.saturating_sub(self.ul_packets)
                + self.dl_sent.saturating_sub(self.dl_packets),
            end_markers: self.end_markers,
            pagings: self.pagings,
            paging_repeats: self.paging_repeats,
            ul_sent_extra_pdn: self.ul_sent_extra_pdn,
            skipped_events: self.skipped,
            events_behind_max: self.events_behind_max,
            duration_s,
            procedures,
            failures: self.causes.clone(),
            errors: self.errors.clone(),
            back_off: self.back_off.clone(),
            sctp: self.sctp.clone(),
        }
    }
}

/// Nearest-rank percentile of sorted values; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Outcome of one procedure type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcedureStats {
    pub ok: u64,
    pub failed: u64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// The final report of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub ues: u32,
    /// UEs attached after the attach phase.
    pub attached: u64,
    /// UEs whose attach failed.
    pub failed: u64,
    pub ul_sent: u64,
    /// Uplink packets that reached the PDN side.
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_sent: u64,
    /// Downlink packets that reached the eNBs.
    pub dl_packets: u64,
    pub dl_bytes: u64,
    pub lost: u64,
    pub end_markers: u64,
    /// Pagings of an emulated UE: the first Paging of each episode (until the UE is
    /// connected again), the one it answers with a Service Request.
    pub pagings: u64,
    /// Paging messages again in an episode already counted: the same Paging through
    /// another eNB of the UE's TAIs, or the MME's repeat when T3413 ran out before the
    /// UE's Service Request reached it.
    pub paging_repeats: u64,
    /// Uplink packets sent on a PDN connection other than the attach one.
    pub ul_sent_extra_pdn: u64,
    pub skipped_events: u64,
    /// The most signalling events the steady state was behind its schedule.
    pub events_behind_max: u64,
    pub duration_s: f64,
    pub procedures: BTreeMap<String, ProcedureStats>,
    /// Failures by procedure and cause.
    pub failures: BTreeMap<String, u64>,
    /// Protocol errors seen (undecodable messages, unknown UEs).
    pub errors: BTreeMap<String, u64>,
    pub back_off: BackOffStats,
    pub sctp: SctpFigures,
}

impl Report {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    pub fn to_table(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "UEs {}  attached {}  failed {}  duration {:.2} s",
            self.ues, self.attached, self.failed, self.duration_s
        );
        let _ = writeln!(
            s,
            "{:<18} {:>8} {:>8} {:>10} {:>10} {:>10}",
            "procedure", "ok", "failed", "p50 us", "p99 us", "max us"
        );
        for (name, p) in &self.procedures {
            let _ = writeln!(
                s,
                "{:<18} {:>8} {:>8} {:>10} {:>10} {:>10}",
                name, p.ok, p.failed, p.p50_us, p.p99_us, p.max_us
            );
        }
        let _ = writeln!(
            s,
            "uplink   sent {:>10}  delivered {:>10}  bytes {:>12}",
            self.ul_sent, self.ul_packets, self.ul_bytes
        );
        let _ = writeln!(
            s,
            "downlink sent {:>10}  delivered {:>10}  bytes {:>12}",
            self.dl_sent, self.dl_packets, self.dl_bytes
        );
        let _ = writeln!(
            s,
            "lost {}  end markers {}  pagings {} ({} repeated)  uplink on extra PDNs {}  skipped events {}  events behind (max) {}",
            self.lost,
            self.end_markers,
            self.pagings,
            self.paging_repeats,
            self.ul_sent_extra_pdn,
            self.skipped_events,
            self.events_behind_max
        );
        let b = &self.back_off;
        if b.overload_starts + b.rrc_rejects + b.t3346_rejects > 0 {
            let _ = writeln!(
                s,
                "overload: {} starts, {} stops; backed off: {} RRC rejects, {} #22 with T3346, {} ms in all (longest {} ms)",
                b.overload_starts, b.overload_stops, b.rrc_rejects, b.t3346_rejects, b.waited_ms, b.longest_ms
            );
        }
        for (cause, n) in &self.failures {
            let _ = writeln!(s, "failure {cause}: {n}");
        }
        for (e, n) in &self.errors {
            let _ = writeln!(s, "error {e}: {n}");
        }
        s
    }
}
