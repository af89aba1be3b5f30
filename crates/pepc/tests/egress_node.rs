//! The egress scheduler of a running node, seen as an operator sees it: with
//! `[s1u] egress_mbps` below the downlink the emulator offers, the slices queue and
//! drop at their S1-U egress, and `/metrics`, the API's slice view and `pepc ctl
//! slices` show it per class; the UEs' signaling is not disturbed.

mod common;

use common::node::{emulator, node_with_s1u};
use pepc_emulator::config::{Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};
use std::process::Command;

/// The sum of counter `name`'s samples whose labels contain every `(key, value)`.
fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> u64 {
    text.lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .filter(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[test]
fn a_shaped_s1u_egress_queues_and_drops_per_class_and_shows_it() {
    let n = 59u8;
    let ues = 8;
    let epc = node_with_s1u(
        n,
        ues,
        "egress_mbps = 1",
        &format!("[metrics]\nlisten = \"127.0.{n}.1:0\"\n[api]\nlisten = \"127.0.{n}.1:0\"\n"),
    );
    let metrics = epc.metrics.as_ref().unwrap().local_addr().to_string();
    let api = format!("http://{}", epc.api.as_ref().unwrap().local_addr());
    let ecfg = EmulatorConfig {
        leave_associations: true,
        ..emulator(n, 1)
    };
    // 12,000 downlink packets a second (64-byte packets in 72-byte G-PDUs), ~3.5
    // Mbit/s per slice, into each slice's 1 Mbit/s egress.
    let scen = Scenario {
        ues,
        attach_rate: 200.0,
        duration_s: 2.0,
        traffic: Traffic {
            profile: TrafficProfile::Pepc,
            rate_pps: 16000.0,
        },
        detach_at_end: false,
        ..Scenario::default()
    };
    let r = pepc_emulator::run(ecfg, scen).unwrap();
    assert_eq!(r.attached, u64::from(ues), "{}", r.to_table());
    assert_eq!(r.failed, 0, "{}", r.to_table());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let text = common::scrape(&metrics);
    let dl = [("direction", "downlink")];
    let sent = sum(&text, "pepc_egress_sent_packets_total", &dl);
    let dropped = sum(&text, "pepc_egress_dropped_packets_total", &dl);
    assert!(sent > 0, "the egress queued and sent:\n{text}");
    assert!(dropped > 0, "at 3x its rate the egress drops:\n{text}");
    // What reached the eNBs is what the egress let through, not what was offered.
    assert!(r.dl_packets < r.dl_sent, "{}", r.to_table());
    // The API's slice view and `pepc ctl slices` say the same, per class.
    let o = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(["ctl", "--api", &api, "slices"])
            .env_remove("RUST_LOG"),
        std::time::Duration::from_secs(30),
    );
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{table}");
    assert!(
        table.contains("EGRESS") && table.contains("downlink") && table.contains("PUSHED-BACK"),
        "{table}"
    );
    let o = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(["ctl", "--api", &api, "--json", "slices"])
            .env_remove("RUST_LOG"),
        std::time::Duration::from_secs(30),
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let api_sent: u64 = v
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["egress"].as_array().cloned().unwrap_or_default())
        .filter(|e| e["direction"] == "downlink")
        .map(|e| e["sent"].as_u64().unwrap_or(0))
        .sum();
    assert!(api_sent >= sent, "API {api_sent} against /metrics {sent}");
    epc.stop();
}
