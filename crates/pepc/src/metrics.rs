//! What a node exposes at `/metrics` (`pepc_*`), read at each scrape from what the
//! single writers publish: the data threads' and the demux's atomics, the control
//! threads' gauges and the copy of their MME counters they refresh every 100 ms, the
//! S1AP endpoint's gauges. Nothing here takes a lock on the data path.
//!
//! The keys, their defaults and what each means: `crates/pepc/pepc.toml` (the
//! one source; `pepc config default` prints it, docs/configuration.md is made
//! from it).

use pepc_mgmt::{Exposition, MetricsSource};
use pepc_node::io::PortInfo;
use pepc_node::node::StatsReader;
use pepc_node::s1mme::{EndpointGauges, SliceGauges};
use pepc_node::stats::SocketOwner;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;

pub struct NodeMetrics {
    pub(crate) data: StatsReader,
    pub(crate) slices: Vec<Arc<SliceGauges>>,
    pub(crate) endpoint: Option<Arc<EndpointGauges>>,
    pub(crate) started: Instant,
    /// What S1-U and SGi run on (fixed at start).
    pub(crate) ports: [(&'static str, PortInfo); 2],
    /// The checkpointer's figures, when UEs are checkpointed.
    pub(crate) checkpoints: Option<Arc<pepc_store::CheckpointStats>>,
}

fn slice(s: usize) -> (&'static str, String) {
    ("slice", s.to_string())
}

impl MetricsSource for NodeMetrics {
    fn collect(&self, out: &mut Exposition) {
        out.gauge(
            "pepc_uptime_seconds",
            "Seconds since the node started",
            &[],
            self.started.elapsed().as_secs() as i64,
        );
        if let Some(c) = &self.checkpoints {
            for (name, help, v) in [
                (
                    "pepc_checkpoint_records",
                    "UE checkpoints written (one per procedure end of a registered UE)",
                    c.records.load(Relaxed),
                ),
                (
                    "pepc_checkpoint_deletes",
                    "UE checkpoints removed (the UE's context went)",
                    c.deletes.load(Relaxed),
                ),
                (
                    "pepc_checkpoint_commits",
                    "Durable transactions (fsync) of the checkpointer's group commit",
                    c.commits.load(Relaxed),
                ),
                (
                    "pepc_checkpoint_errors",
                    "Checkpoint transactions that failed",
                    c.errors.load(Relaxed),
                ),
                (
                    "pepc_checkpoint_set_aside",
                    "Checkpoints a slice held back because the checkpointer's queue was full (a store slower than the procedures); each UE's latest goes on when there is room",
                    c.set_aside.load(Relaxed),
                ),
            ] {
                out.counter(name, help, &[], v);
            }
            out.gauge(
                "pepc_checkpoint_max_delay_us",
                "Longest time from a procedure's end to its checkpoint being durable, in µs: what a kill -9 can lose",
                &[],
                c.max_delay_us.load(Relaxed) as i64,
            );
        }
        for (port, info) in &self.ports {
            let mut labels = vec![
                ("port", port.to_string()),
                ("io", info.io.to_string()),
                ("interface", info.interface.clone()),
            ];
            if let Some(x) = &info.afxdp {
                labels.extend([
                    ("queue", x.queue.to_string()),
                    (
                        "xdp_mode",
                        if x.native { "native" } else { "generic" }.into(),
                    ),
                    ("zero_copy", x.zero_copy.to_string()),
                    ("ring_size", x.ring_size.to_string()),
                ]);
            }
            out.gauge(
                "pepc_port_info",
                "What a user-plane port runs on (always 1): io is udp, udp_sink, tun or afxdp; for AF_XDP also its queue, XDP mode, zero-copy (false: copy mode) and ring size",
                &labels,
                1,
            );
        }
        let st = self.data.read();
        for d in &st.slices {
            let s = d.slice;
            for (dir, v, b) in [
                ("uplink", d.ul_forwarded, d.ul_bytes),
                ("downlink", d.dl_forwarded, d.dl_bytes),
            ] {
                out.counter(
                    "pepc_packets_forwarded",
                    "Packets the slice's data thread forwarded, by direction",
                    &[slice(s), ("direction", dir.into())],
                    v,
                );
                out.counter(
                    "pepc_bytes_forwarded",
                    "IP bytes the slice's data thread forwarded, by direction",
                    &[slice(s), ("direction", dir.into())],
                    b,
                );
            }
            for (reason, v) in &d.drops_by_reason {
                out.counter(
                    "pepc_packets_dropped",
                    "Packets the slice's data path dropped, by reason",
                    &[slice(s), ("reason", (*reason).into())],
                    *v,
                );
            }
            for (port, p) in [("s1u", &d.s1u), ("sgi", &d.sgi)] {
                for (dir, v) in [("rx", p.rx_packets), ("tx", p.tx_packets)] {
                    out.counter(
                        "pepc_port_packets",
                        "Packets through the slice's S1-U and SGi ports",
                        &[slice(s), ("port", port.into()), ("direction", dir.into())],
                        v,
                    );
                }
                out.counter(
                    "pepc_port_tx_failed",
                    "Packets a port failed to send",
                    &[slice(s), ("port", port.into())],
                    p.tx_failed,
                );
                out.counter(
                    "pepc_port_handoff_packets",
                    "Queue mode: packets a slice's socket received for another slice and handed to it",
                    &[slice(s), ("port", port.into())],
                    p.handed_off,
                );
                out.counter(
                    "pepc_port_handoff_dropped",
                    "Queue mode: packets for another slice dropped because its ring was full",
                    &[slice(s), ("port", port.into())],
                    p.handoff_full,
                );
            }
            for (dir, v) in [
                ("uplink", d.egress_bypassed[0]),
                ("downlink", d.egress_bypassed[1]),
            ] {
                out.counter(
                    "pepc_egress_bypassed_packets",
                    "Packets that left in the batch they came with (the egress was not congested), by direction",
                    &[slice(s), ("direction", dir.into())],
                    v,
                );
            }
            for e in &d.egress {
                let l = [
                    slice(s),
                    ("direction", e.direction.into()),
                    ("qci", e.qci.to_string()),
                ];
                out.gauge(
                    "pepc_egress_queue_depth",
                    "Packets waiting in an egress class (qci 0: GBR traffic beyond its GBR)",
                    &l,
                    e.depth as i64,
                );
                out.counter(
                    "pepc_egress_sent_packets",
                    "Packets an egress class queued and sent",
                    &l,
                    e.sent,
                );
                out.counter(
                    "pepc_egress_sent_bytes",
                    "Bytes an egress class queued and sent",
                    &l,
                    e.sent_bytes,
                );
                out.counter(
                    "pepc_egress_pushed_back_packets",
                    "Packets the port pushed back into an egress class (its socket buffer or TX ring was full): they waited there for the port, in QoS order",
                    &l,
                    e.pushed_back,
                );
                for (reason, v) in &e.dropped {
                    let mut l = l.to_vec();
                    l.push(("reason", (*reason).into()));
                    out.counter(
                        "pepc_egress_dropped_packets",
                        "Packets an egress class dropped, by reason (queue_full, pool_empty)",
                        &l,
                        *v,
                    );
                }
                let bounds: Vec<f64> = (0..e.delay.len() - 1).map(|k| (1u64 << k) as f64).collect();
                out.histogram(
                    "pepc_egress_delay_us",
                    "Time packets waited in an egress class, microseconds (log2 buckets; the sum is not kept)",
                    &l,
                    &bounds,
                    &e.delay,
                    0.0,
                );
            }
            for (what, v) in [
                ("echo_replies", d.echo_replies),
                ("error_indications", d.error_indications),
                ("end_markers", d.end_markers),
                ("buffered", d.buffered),
                ("updates_applied", d.updates_applied),
            ] {
                out.counter(
                    "pepc_datapath_events",
                    "Data-path events: GTP-U echo replies, error indications, end markers, packets buffered for idle UEs, control updates applied",
                    &[slice(s), ("event", what.into())],
                    v,
                );
            }
            if let Some(dm) = &d.demux {
                for (dir, v, full) in [
                    ("uplink", dm.ul, dm.ul_ring_full),
                    ("downlink", dm.dl, dm.dl_ring_full),
                ] {
                    out.counter(
                        "pepc_demux_packets",
                        "Packets the demux steered to the slice",
                        &[slice(s), ("direction", dir.into())],
                        v,
                    );
                    out.counter(
                        "pepc_demux_ring_full",
                        "Packets dropped because the slice's ring was full",
                        &[slice(s), ("direction", dir.into())],
                        full,
                    );
                }
            }
        }
        if let Some(dm) = &st.demux {
            for (reason, v) in [
                ("malformed_gtpu", dm.malformed_gtpu),
                ("unknown_ue_ip", dm.unknown_ue_ip),
                ("unknown_teid", dm.unknown_teid),
                ("rx_errors", dm.rx_errors),
            ] {
                out.counter(
                    "pepc_demux_dropped",
                    "Packets the demux dropped before any slice, by reason",
                    &[("reason", reason.into())],
                    v,
                );
            }
        }
        for k in &st.sockets {
            let owner: Vec<(&'static str, String)> = match k.owner {
                SocketOwner::Demux => vec![("owner", "demux".into())],
                SocketOwner::Slice(s) => vec![("owner", "slice".into()), slice(s)],
            };
            for (why, v) in k.drops.by_reason() {
                let mut labels = vec![
                    ("port", k.port.to_string()),
                    ("by", if why.by_kernel() { "kernel" } else { "port" }.into()),
                    ("reason", why.as_str().into()),
                ];
                labels.extend(owner.iter().cloned());
                out.counter(
                    "pepc_socket_dropped",
                    "Packets dropped at a socket of the node, by the kernel (AF_XDP rings, a UDP socket's buffer) before the node read them, or by the port (frames not ours, no next-hop MAC, TX ring full); owner is the thread that owns the socket",
                    &labels,
                    v,
                );
            }
            if k.drops.fill_ring_empty > 0 {
                let mut labels = vec![("port", k.port.to_string())];
                labels.extend(owner.iter().cloned());
                out.counter(
                    "pepc_socket_fill_ring_empty",
                    "AF_XDP: times the kernel found the socket's fill ring empty (not a packet count; a sign the owner returns frames too slowly)",
                    &labels,
                    k.drops.fill_ring_empty,
                );
            }
        }
        for (s, g) in self.slices.iter().enumerate() {
            out.gauge(
                "pepc_ue_contexts",
                "UE contexts in the slice's MME (registered or in a procedure)",
                &[slice(s)],
                g.ues.load(Relaxed) as i64,
            );
            out.gauge(
                "pepc_ue_registered",
                "UEs holding a PDN session (EMM-REGISTERED, or an attach past its session); registered ECM-IDLE UEs are these less the connected ones",
                &[slice(s)],
                g.sessions.load(Relaxed) as i64,
            );
            out.gauge(
                "pepc_ue_connected",
                "UEs with an S1 connection (ECM-CONNECTED)",
                &[slice(s)],
                g.connected.load(Relaxed) as i64,
            );
            out.counter(
                "pepc_restored_ues",
                "UEs restored from the state store at start",
                &[slice(s)],
                g.restored.load(Relaxed),
            );
            let Some(m) = g.live_stats() else {
                continue;
            };
            // The ledger: per procedure, started = succeeded + failed + in progress.
            let l = &m.procedures;
            for (name, started, ok, failed) in procedure_counts(&m) {
                for (result, v) in [("started", started), ("succeeded", ok), ("failed", failed)] {
                    out.counter(
                        "pepc_procedures",
                        "UE procedures by name and result: every one started ends once as succeeded or failed (started = succeeded + failed + pepc_procedures_in_progress)",
                        &[slice(s), ("procedure", name.into()), ("result", result.into())],
                        v,
                    );
                }
                out.gauge(
                    "pepc_procedures_in_progress",
                    "UE procedures started and not ended yet, by name",
                    &[slice(s), ("procedure", name.into())],
                    (started - ok - failed) as i64,
                );
            }
            let bounds: Vec<f64> = pepc_mme::mme::LATENCY_BUCKETS_MS
                .iter()
                .map(|ms| *ms as f64 / 1000.0)
                .collect();
            for (p, why, n) in l.failures() {
                use pepc_mme::mme::ProcFailure;
                let reason = match why {
                    ProcFailure::Rejected(c) if p.esm() => pepc_mme::EsmCause::try_from(c)
                        .map(|c| c.text())
                        .unwrap_or("unknown"),
                    ProcFailure::Rejected(c) => pepc_mme::EmmCause::try_from(c)
                        .map(|c| c.text())
                        .unwrap_or("unknown"),
                    ProcFailure::Timeout => "the UE stopped answering (its timer ran out)",
                    ProcFailure::AuthenticationRejected => "the UE failed authentication",
                    ProcFailure::Superseded => "the same procedure started again",
                    ProcFailure::ConnectionReleased => "the S1 connection was released",
                    ProcFailure::ContextRemoved => "the UE context went",
                    ProcFailure::S1ap(_) => "refused or cancelled by S1AP",
                };
                out.counter(
                    "pepc_procedure_failures",
                    "Failed UE procedures by name and cause: a reject's cause value (EMM; ESM for pdn_connect, pdn_disconnect and bearer_resource_*), an S1AP cause, or timeout, authentication_rejected, superseded, connection_released, context_removed; they sum to pepc_procedures_total{result=\"failed\"}",
                    &[
                        slice(s),
                        ("procedure", p.name().into()),
                        ("cause", why.label()),
                        ("reason", reason.into()),
                    ],
                    n,
                );
            }
            for (p, h) in [
                ("attach", &m.attach_latency),
                ("service_request", &m.service_request_latency),
                ("tau", &m.tau_latency),
                ("s1_handover", &m.handover_latency),
            ] {
                out.histogram(
                    "pepc_procedure_duration_seconds",
                    "How long UE procedures took, by name (attach: Attach Request to Attach Complete; service_request: to the Initial Context Setup Response; tau: Request (or its re-authentication) to Accept; s1_handover: Handover Required to Notify)",
                    &[slice(s), ("procedure", p.into())],
                    &bounds,
                    &h.counts,
                    h.sum_us as f64 / 1e6,
                );
            }
            if let Some(h) = g.live_vector_latency() {
                out.histogram(
                    "pepc_hss_vector_duration_seconds",
                    "From an authentication vector request (AIR) to its answer, as the slice's HSS proxy saw it",
                    &[slice(s)],
                    &bounds,
                    &h.counts,
                    h.sum_us as f64 / 1e6,
                );
            }
            for (event, v) in m.named() {
                out.counter(
                    "pepc_mme_events",
                    "Every counter of the slice's MME, by name (crates/mme MmeStats)",
                    &[slice(s), ("event", event.into())],
                    v,
                );
            }
        }
        // S1-MME SCTP: the endpoint thread's transport, or the one slice's that runs
        // the endpoint inline.
        let sctp = match &self.endpoint {
            Some(e) => Some(e.sctp.clone()),
            None => self.slices.first().map(|g| g.sctp.clone()),
        };
        if let Some(g) = sctp {
            sctp_metrics(out, &g);
        }
        let enbs = match &self.endpoint {
            Some(e) => e.enbs.load(Relaxed),
            None => self.slices.iter().map(|g| g.enbs.load(Relaxed)).sum(),
        };
        out.gauge(
            "pepc_enbs",
            "eNBs whose S1 Setup succeeded",
            &[],
            enbs as i64,
        );
        if let Some(e) = &self.endpoint {
            out.counter(
                "pepc_s1ap_steered",
                "S1AP messages the node's endpoint steered to slices",
                &[],
                e.demuxed.load(Relaxed),
            );
            out.counter(
                "pepc_s1ap_decode_errors",
                "S1AP PDUs the node's endpoint could not decode (each answered with an Error Indication)",
                &[],
                e.s1ap_decode_errors.load(Relaxed),
            );
            out.counter(
                "pepc_s1ap_unknown_ue_ids",
                "S1AP messages the node's endpoint got for UE IDs no slice has (answered with an Error Indication)",
                &[],
                e.unknown_ue_ids.load(Relaxed),
            );
            out.counter(
                "pepc_s1ap_dropped",
                "S1AP messages dropped because a slice's ring and backlog were full",
                &[],
                e.dropped_inputs.load(Relaxed),
            );
            for (sl, d) in e
                .backlogs
                .get()
                .map_or(&[][..], |b| &b[..])
                .iter()
                .enumerate()
            {
                out.gauge(
                    "pepc_signaling_backlog",
                    "S1AP messages waiting for the slice's MME (ring and backlog)",
                    &[slice(sl)],
                    d.load(Relaxed) as i64,
                );
            }
            out.gauge(
                "pepc_overloaded",
                "1 while the eNBs are told OVERLOAD START",
                &[],
                i64::from(e.overloaded.load(Relaxed)),
            );
            out.counter(
                "pepc_overload_starts",
                "Overload periods begun",
                &[],
                e.overload_starts.load(Relaxed),
            );
        }
        for k in pepc_ratelog::Kind::ALL {
            out.counter(
                "pepc_log_suppressed",
                "Log lines about what a peer caused (malformed S1AP or NAS, unknown UE IDs, unexpected messages) not written because their kind was over its rate",
                &[("kind", k.name().into())],
                pepc_ratelog::suppressed(k),
            );
        }
    }
}

/// The S1-MME associations: node-wide totals, and each association by its ID and peer.
fn sctp_metrics(out: &mut Exposition, g: &pepc_node::s1mme::SctpGauges) {
    out.gauge(
        "pepc_sctp_associations",
        "S1-MME SCTP associations up now",
        &[],
        g.up.load(Relaxed) as i64,
    );
    if let Some(c) = g.totals.lock().ok().and_then(|c| *c) {
        for (name, help, v) in [
            ("pepc_sctp_data_chunks_received", "SCTP DATA chunks received on S1-MME (userspace SCTP; republished every second)", c.data_chunks_rx),
            ("pepc_sctp_duplicate_tsns", "SCTP DATA chunks received again (retransmitted or duplicated by the network), never delivered twice", c.dup_tsns_rx),
            ("pepc_sctp_data_chunks_sent", "SCTP DATA chunks sent on S1-MME", c.data_chunks_tx),
            ("pepc_sctp_retransmissions", "SCTP DATA chunks sent again (T3-rtx or fast retransmit)", c.retransmissions),
            ("pepc_sctp_t3_expiries", "SCTP retransmission timer (T3-rtx) expiries", c.t3_expiries),
            ("pepc_sctp_fast_retransmits", "SCTP fast retransmissions", c.fast_retransmits),
            ("pepc_sctp_heartbeats_sent", "SCTP HEARTBEATs sent on S1-MME", c.heartbeats_sent),
            ("pepc_sctp_heartbeat_acks", "SCTP HEARTBEATs the peers answered", c.heartbeat_acks),
            ("pepc_sctp_peer_restarts", "S1-MME associations their peer restarted", c.peer_restarts),
        ] {
            out.counter(name, help, &[], v);
        }
    }
    let assocs = g.assocs.lock().map(|a| a.clone()).unwrap_or_default();
    for a in &assocs {
        let l = [("assoc", a.id.to_string()), ("peer", a.peer.to_string())];
        let with_state = [
            l[0].clone(),
            l[1].clone(),
            ("state", a.state.name().to_string()),
        ];
        out.gauge(
            "pepc_sctp_association_state",
            "1 per open S1-MME association, labelled with its RFC 9260 state",
            &with_state,
            1,
        );
        out.gauge(
            "pepc_sctp_association_rto_ms",
            "The association's retransmission timeout now (ms)",
            &l,
            a.rto.as_millis() as i64,
        );
        out.gauge(
            "pepc_sctp_association_srtt_us",
            "The association's smoothed round-trip time (us; -1 before the first measurement)",
            &l,
            a.srtt.map_or(-1, |d| d.as_micros() as i64),
        );
        let c = &a.counters;
        for (name, help, v) in [
            (
                "pepc_sctp_association_retransmissions",
                "DATA chunks this association sent again",
                c.retransmissions,
            ),
            (
                "pepc_sctp_association_heartbeats_sent",
                "HEARTBEATs this association sent",
                c.heartbeats_sent,
            ),
            (
                "pepc_sctp_association_heartbeat_acks",
                "HEARTBEATs its peer answered",
                c.heartbeat_acks,
            ),
            (
                "pepc_sctp_association_peer_restarts",
                "Times the peer restarted this association",
                c.peer_restarts,
            ),
            (
                "pepc_sctp_association_data_chunks_received",
                "DATA chunks this association received",
                c.data_chunks_rx,
            ),
            (
                "pepc_sctp_association_data_chunks_sent",
                "DATA chunks this association sent",
                c.data_chunks_tx,
            ),
        ] {
            out.counter(name, help, &l, v);
        }
    }
}

/// UE procedures of an MME's ledger as (name, started, succeeded, failed): what
/// `pepc_procedures_total` exposes and the management API's slice view shows.
pub(crate) fn procedure_counts(m: &pepc_mme::MmeStats) -> Vec<(&'static str, u64, u64, u64)> {
    let l = &m.procedures;
    pepc_mme::mme::Proc::ALL
        .iter()
        .map(|&p| (p.name(), l.started(p), l.succeeded(p), l.failed(p)))
        .collect()
}
