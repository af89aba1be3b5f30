//! The MME's counters and procedure latency histograms (exported by the node's metrics).

/// Upper bounds (ms) of the procedure latency buckets; the last bucket is +Inf.
pub const LATENCY_BUCKETS_MS: [u64; 13] =
    [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000];

/// How long a procedure took, in fixed buckets (the control thread counts; the
/// metrics endpoint exposes it as a Prometheus histogram).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LatencyHistogram {
    /// Per bucket of [`LATENCY_BUCKETS_MS`], then above the last (not cumulative).
    pub counts: [u64; 14],
    pub sum_us: u64,
}

impl LatencyHistogram {
    pub fn observe(&mut self, d: std::time::Duration) {
        // A bucket holds what is at most its bound (`le`).
        let us = d.as_micros() as u64;
        let i = LATENCY_BUCKETS_MS
            .iter()
            .position(|b| us <= b * 1000)
            .unwrap_or(LATENCY_BUCKETS_MS.len());
        self.counts[i] += 1;
        self.sum_us += d.as_micros() as u64;
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

/// Counters. Read by the driver for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MmeStats {
    /// From the Attach Request to the Attach Complete.
    pub attach_latency: LatencyHistogram,
    /// From a verified Service Request to the Initial Context Setup Response.
    pub service_request_latency: LatencyHistogram,
    /// From a Tracking Area Update Request (or its re-authentication) to the Accept.
    pub tau_latency: LatencyHistogram,
    /// From Handover Required to Handover Notify (S1 handover).
    pub handover_latency: LatencyHistogram,
    /// Every UE procedure started, succeeded, and failed by cause.
    pub procedures: super::ledger::Ledger,
    pub s1ap_decode_errors: u64,
    pub unknown_ue_ids: u64,
    pub attach_requests: u64,
    pub attaches: u64,
    pub attach_rejects: u64,
    /// Attaches that ended because the UE stopped answering (the NAS timer ran out
    /// on its last retransmission): failed, as rejects are, without a reject.
    pub attach_timeouts: u64,
    pub auth_rejects: u64,
    pub resyncs: u64,
    pub nas_bad_mac: u64,
    pub nas_replays: u64,
    pub nas_unprotected_dropped: u64,
    pub nas_decode_errors: u64,
    pub service_requests: u64,
    pub service_rejects: u64,
    pub tau: u64,
    pub detaches: u64,
    pub implicit_detaches: u64,
    pub pagings: u64,
    pub paging_failures: u64,
    pub path_switches: u64,
    pub s1_handovers: u64,
    pub retransmissions: u64,
    pub procedure_timeouts: u64,
    pub nas_non_delivery: u64,
    pub releases: u64,
    pub pdn_connects: u64,
    pub pdn_connect_rejects: u64,
    pub pdn_disconnects: u64,
    pub pdn_disconnect_rejects: u64,
    /// UE-requested bearer resource allocation and modification requests (§6.5.3/4).
    pub bearer_resource_allocations: u64,
    pub bearer_resource_rejects: u64,
    /// Attaches accepted under the parked EPS security context of a detached UE
    /// (no identity request, no AKA).
    pub parked_contexts_reused: u64,
    /// Requests sent to the HSS ([`super::Output::Hss`]).
    pub hss_requests: u64,
    /// HSS answers that made a procedure fail (unknown subscriber, HSS unavailable).
    pub hss_failures: u64,
    /// HSS requests unanswered within `MmeConfig::hss_timeout` (the attach is rejected).
    pub hss_timeouts: u64,
    /// HSS answers dropped: their context was gone, or waited no more for them
    /// (superseded, restarted by a different Attach Request, timed out).
    pub hss_late_answers: u64,
    /// NAS messages dropped because their UE waited for the HSS (TS 24.301 allows
    /// only a new Attach Request or a Detach Request then), including Attach
    /// Requests that repeat the one being served (§5.5.1.2.7 e).
    pub nas_dropped_awaiting_hss: u64,
    /// First messages of UEs not served: the slice's UE table was full.
    pub no_ue_entry: u64,
    /// Uplink NAS messages the security gate discarded (unverified where only
    /// verified ones may change the UE's state; see `gate.rs`).
    pub nas_gate_discards: u64,
    /// Re-authentications the gate started before an unverified message could act.
    pub nas_reauthentications: u64,
    /// Those that failed (wrong RES, no answer, security mode rejected): the
    /// connection was released and the UE's context left as it was.
    pub nas_reauth_failures: u64,
    /// UE Context Release Commands never completed: released locally at
    /// `release_guard`.
    pub release_guard_expiries: u64,
    /// Contexts that never got a security context within `unauth_context_ttl`.
    pub unauth_expired: u64,
    /// New UEs refused at the per-slice or per-eNB bound on unauthenticated contexts.
    pub unauth_refused: u64,
    /// Cancel Locations that removed (or detached) a context of this slice.
    pub hss_cancels: u64,
    /// Insert Subscriber Data applied to a context of this slice.
    pub hss_subscription_updates: u64,
    /// Purges sent to the HSS ([`crate::hss::HssRequest::Purge`]).
    pub hss_purges: u64,
    /// Attaches turned away with #22 (congestion) and T3346 while the slice was
    /// congested (overload control, `crate::overload`).
    pub congestion_rejects: u64,
    /// Requests to the PCRF for new sessions (CCR-I).
    pub pcrf_requests: u64,
    /// CCR-I refused, failed or unanswered (then Failure-Handling applies), and
    /// CCA-U failures.
    pub pcrf_failures: u64,
    /// PCRF answers for contexts gone.
    pub pcrf_late_answers: u64,
    /// PCRF-initiated policy changes applied (RAR).
    pub pcrf_updates: u64,
    /// Sessions ended at the PCRF (CCR-T).
    pub pcrf_terminations: u64,
    /// PCC rules not taken (invalid, over the bounds, no bearer or rule set left).
    pub pcc_rule_failures: u64,
    /// Dedicated bearers activated for PCC rules.
    pub pcc_bearers_activated: u64,
    /// Usage reports sent (CCR-U) when a monitoring grant was reached.
    pub usage_reports: u64,
    /// Usage records (CDRs) written.
    pub usage_records: u64,
}

impl MmeStats {
    /// Every counter with its field name (the metrics endpoint exposes them all).
    pub fn named(&self) -> [(&'static str, u64); 57] {
        [
            ("s1ap_decode_errors", self.s1ap_decode_errors),
            ("unknown_ue_ids", self.unknown_ue_ids),
            ("attach_requests", self.attach_requests),
            ("attaches", self.attaches),
            ("attach_rejects", self.attach_rejects),
            ("attach_timeouts", self.attach_timeouts),
            ("auth_rejects", self.auth_rejects),
            ("resyncs", self.resyncs),
            ("nas_bad_mac", self.nas_bad_mac),
            ("nas_replays", self.nas_replays),
            ("nas_unprotected_dropped", self.nas_unprotected_dropped),
            ("nas_decode_errors", self.nas_decode_errors),
            ("service_requests", self.service_requests),
            ("service_rejects", self.service_rejects),
            ("tau", self.tau),
            ("detaches", self.detaches),
            ("implicit_detaches", self.implicit_detaches),
            ("pagings", self.pagings),
            ("paging_failures", self.paging_failures),
            ("path_switches", self.path_switches),
            ("s1_handovers", self.s1_handovers),
            ("retransmissions", self.retransmissions),
            ("procedure_timeouts", self.procedure_timeouts),
            ("nas_non_delivery", self.nas_non_delivery),
            ("releases", self.releases),
            ("pdn_connects", self.pdn_connects),
            ("pdn_connect_rejects", self.pdn_connect_rejects),
            ("pdn_disconnects", self.pdn_disconnects),
            ("pdn_disconnect_rejects", self.pdn_disconnect_rejects),
            (
                "bearer_resource_allocations",
                self.bearer_resource_allocations,
            ),
            ("bearer_resource_rejects", self.bearer_resource_rejects),
            ("parked_contexts_reused", self.parked_contexts_reused),
            ("hss_requests", self.hss_requests),
            ("hss_failures", self.hss_failures),
            ("hss_timeouts", self.hss_timeouts),
            ("hss_late_answers", self.hss_late_answers),
            ("nas_dropped_awaiting_hss", self.nas_dropped_awaiting_hss),
            ("no_ue_entry", self.no_ue_entry),
            ("nas_gate_discards", self.nas_gate_discards),
            ("nas_reauthentications", self.nas_reauthentications),
            ("nas_reauth_failures", self.nas_reauth_failures),
            ("release_guard_expiries", self.release_guard_expiries),
            ("unauth_expired", self.unauth_expired),
            ("unauth_refused", self.unauth_refused),
            ("hss_cancels", self.hss_cancels),
            ("hss_subscription_updates", self.hss_subscription_updates),
            ("hss_purges", self.hss_purges),
            ("congestion_rejects", self.congestion_rejects),
            ("pcrf_requests", self.pcrf_requests),
            ("pcrf_failures", self.pcrf_failures),
            ("pcrf_late_answers", self.pcrf_late_answers),
            ("pcrf_updates", self.pcrf_updates),
            ("pcrf_terminations", self.pcrf_terminations),
            ("pcc_rule_failures", self.pcc_rule_failures),
            ("pcc_bearers_activated", self.pcc_bearers_activated),
            ("usage_reports", self.usage_reports),
            ("usage_records", self.usage_records),
        ]
    }
}
