#!/usr/bin/env python3
"""Writes docs/grafana/pepc-node.json, the Grafana dashboard of a pepc node's /metrics.

Edit the panels here and run it again; crates/pepc/tests/metrics.rs checks that every
pepc_* name the dashboard's queries use is served by a running node.
"""
import os
os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import json
DS = {"type": "prometheus", "uid": "${datasource}"}
panels = []
def panel(title, targets, unit="short", kind="timeseries", w=12, h=8, desc=""):
    i = len(panels)
    panels.append({
        "id": i + 1,
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "gridPos": {"x": (i % 2) * 12 if w == 12 else 0, "y": (i // 2) * h, "w": w, "h": h},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
        "targets": [{"refId": chr(65 + k), "datasource": DS, "expr": e, "legendFormat": l} for k, (e, l) in enumerate(targets)],
    })
panel("Attaches per second, by result",
      [('sum by (result) (rate(pepc_procedures_total{procedure="attach",result!="started"}[1m]))', "{{result}}")], "ops",
      desc="Attaches that succeeded and failed (rejects, timeouts, connections released, contexts gone).")
panel("Procedures per second, by procedure",
      [('sum by (procedure) (rate(pepc_procedures_total{result="succeeded"}[1m]))', "{{procedure}}")], "ops")
panel("Failed procedures by cause",
      [('sum by (procedure, reason) (rate(pepc_procedure_failures_total[5m]))', "{{procedure}}: {{reason}}")], "ops")
panel("Procedures in progress",
      [('sum by (procedure) (pepc_procedures_in_progress)', "{{procedure}}")])
panel("Procedure latency (p50, p99)",
      [('histogram_quantile(0.5, sum by (le, procedure) (rate(pepc_procedure_duration_seconds_bucket[5m])))', "{{procedure}} p50"),
       ('histogram_quantile(0.99, sum by (le, procedure) (rate(pepc_procedure_duration_seconds_bucket[5m])))', "{{procedure}} p99")], "s")
panel("HSS authentication vectors: latency (p99)",
      [('histogram_quantile(0.99, sum by (le) (rate(pepc_hss_vector_duration_seconds_bucket[5m])))', "p99")], "s")
panel("UEs by state",
      [("sum(pepc_ue_contexts)", "contexts"), ("sum(pepc_ue_registered)", "registered"),
       ("sum(pepc_ue_connected)", "connected"), ("sum(pepc_ue_registered) - sum(pepc_ue_connected)", "idle")])
panel("Packets per second, by slice and direction",
      [('sum by (slice, direction) (rate(pepc_packets_forwarded_total[1m]))', "slice {{slice}} {{direction}}")], "pps")
panel("Throughput, by direction",
      [('sum by (direction) (rate(pepc_bytes_forwarded_total[1m])) * 8', "{{direction}}")], "bps")
panel("Data path drops, by slice and reason",
      [('sum by (slice, reason) (rate(pepc_packets_dropped_total[1m]))', "slice {{slice}}: {{reason}}")], "pps")
panel("Ports: packets per second",
      [('sum by (port, direction) (rate(pepc_port_packets_total[1m]))', "{{port}} {{direction}}")], "pps")
panel("Ports: drops and failed sends",
      [('sum by (port, reason) (rate(pepc_socket_dropped_total[1m]))', "{{port}}: {{reason}}"),
       ('sum by (port) (rate(pepc_port_tx_failed_total[1m]))', "{{port}}: send failed"),
       ('sum by (port) (rate(pepc_port_handoff_dropped_total[1m]))', "{{port}}: hand-off to a slice dropped")], "pps")
panel("Overload control",
      [("pepc_overloaded", "overloaded (OVERLOAD START in force)"),
       ("increase(pepc_overload_starts_total[5m])", "periods begun (5 min)"),
       ('sum by (slice) (pepc_signaling_backlog)', "backlog, slice {{slice}}")])
panel("S1-MME: eNBs and SCTP",
      [("pepc_enbs", "eNBs set up"), ("pepc_sctp_associations", "associations"),
       ("rate(pepc_sctp_retransmissions_total[1m])", "retransmissions/s"),
       ("increase(pepc_sctp_peer_restarts_total[5m])", "peer restarts (5 min)")])
panel("S1-MME: RTO per association",
      [("pepc_sctp_association_rto_ms", "{{peer}}")], "ms")
panel("S1AP endpoint",
      [("rate(pepc_s1ap_steered_total[1m])", "steered/s"), ("rate(pepc_s1ap_decode_errors_total[1m])", "undecodable/s"),
       ("rate(pepc_s1ap_unknown_ue_ids_total[1m])", "unknown UE IDs/s"), ("rate(pepc_s1ap_dropped_total[1m])", "dropped/s")], "ops")
panel("Egress schedulers: packets that left with their batch (not congested)",
      [('sum by (direction) (rate(pepc_egress_bypassed_packets_total[1m]))', "{{direction}}")], "pps")
panel("Checkpoints",
      [("rate(pepc_checkpoint_records_total[1m])", "records/s"), ("rate(pepc_checkpoint_commits_total[1m])", "commits/s"),
       ("pepc_checkpoint_max_delay_us / 1000", "longest end-to-durable (ms)"), ("rate(pepc_checkpoint_errors_total[1m])", "errors/s")])
panel("Logs held back (rate-limited)",
      [('sum by (kind) (rate(pepc_log_suppressed_total[1m]))', "{{kind}}")], "ops")
dash = {
    "title": "pepc node",
    "uid": "pepc-node",
    "description": "One pepc node: signaling, UEs, the data path, ports, overload, S1-MME, checkpoints. Made for Prometheus scraping the node's [metrics] listen address.",
    "tags": ["pepc", "lte", "epc"],
    "timezone": "browser",
    "schemaVersion": 39,
    "version": 1,
    "refresh": "5s",
    "time": {"from": "now-15m", "to": "now"},
    "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"}]},
    "panels": panels,
}
json.dump(dash, open("docs/grafana/pepc-node.json", "w"), indent=1)
print(f"docs/grafana/pepc-node.json: {len(panels)} panels, {sum(len(p['targets']) for p in panels)} queries")
