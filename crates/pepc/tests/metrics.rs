//! The Prometheus endpoint end to end: a node with the emulator attached, its
//! `/metrics` read over HTTP and parsed by an independent OpenMetrics parser (PyPI's
//! `prometheus_client`), the figures checked against the emulator's own counts.

mod common;

use pepc_emulator::EmulatorConfig;

use common::node::{emulator, node};
use pepc_emulator::config::{Traffic, TrafficProfile};
use pepc_emulator::Scenario;
use serde_json::Value;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The samples as the independent parser reads them: [name, labels, value].
fn parse(text: &str) -> Vec<(String, serde_json::Map<String, Value>, f64)> {
    let py = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = []
for fam in text_string_to_metric_families(sys.stdin.read()):
    for s in fam.samples:
        out.append([s.name, s.labels, s.value])
print(json.dumps(out))
"#;
    let mut p = Command::new("python3")
        .args(["-c", py])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 (scripts/test.sh installs prometheus_client)");
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "the OpenMetrics parser refused the text: {}\n{text}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: Vec<(String, serde_json::Map<String, Value>, f64)> =
        serde_json::from_slice(&o.stdout).unwrap();
    v
}

fn sum(
    samples: &[(String, serde_json::Map<String, Value>, f64)],
    name: &str,
    want: &[(&str, &str)],
) -> f64 {
    samples
        .iter()
        .filter(|(n, l, _)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| l.get(*k).and_then(|x| x.as_str()) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

#[test]
fn metrics_match_what_the_emulator_saw() {
    let n = 49u8;
    let ues = 24;
    let epc = node(
        n,
        ues,
        &format!("[metrics]\nlisten = \"127.0.{n}.1:0\"\n[api]\nlisten = \"\"\n"),
    );
    let addr = epc.metrics.as_ref().expect("metrics on").local_addr();
    // The node is looked at as the run left it: the eNBs stay associated.
    let ecfg = EmulatorConfig {
        leave_associations: true,
        ..emulator(n, 2)
    };
    let scen = Scenario {
        ues,
        attach_rate: 500.0,
        duration_s: 1.0,
        event_rate: 0.0,
        traffic: Traffic {
            profile: TrafficProfile::Pepc,
            rate_pps: 400.0,
        },
        detach_at_end: false,
        ..Scenario::default()
    };
    let r = pepc_emulator::run(ecfg, scen).unwrap();
    assert_eq!(r.attached, u64::from(ues));
    // The control threads publish their MME counters every 100 ms.
    std::thread::sleep(Duration::from_millis(300));
    let text = common::scrape(&addr.to_string());
    let s = parse(&text);
    let j = r.to_json();
    let attach_ok = sum(
        &s,
        "pepc_procedures_total",
        &[("procedure", "attach"), ("result", "succeeded")],
    );
    assert_eq!(attach_ok as u64, r.procedures["attach"].ok, "{j}\n{text}");
    assert_eq!(
        sum(
            &s,
            "pepc_procedures_total",
            &[("procedure", "attach"), ("result", "failed")]
        ),
        0.0
    );
    // Every procedure's ledger sums: started = succeeded + failed + in progress, and
    // the failures by cause sum to the failed.
    for p in pepc_mme::mme::Proc::ALL {
        let n = p.name();
        let got = |result| {
            sum(
                &s,
                "pepc_procedures_total",
                &[("procedure", n), ("result", result)],
            )
        };
        let open = sum(&s, "pepc_procedures_in_progress", &[("procedure", n)]);
        assert_eq!(
            got("started"),
            got("succeeded") + got("failed") + open,
            "{n}\n{text}"
        );
        let by_cause = sum(&s, "pepc_procedure_failures_total", &[("procedure", n)]);
        assert_eq!(by_cause, got("failed"), "{n}\n{text}");
    }
    assert_eq!(
        sum(
            &s,
            "pepc_procedures_total",
            &[("procedure", "attach"), ("result", "started")]
        ) as u64,
        r.procedures["attach"].ok,
        "{text}"
    );
    assert_eq!(sum(&s, "pepc_enbs", &[]), 2.0, "{text}");
    assert_eq!(
        sum(&s, "pepc_ue_contexts", &[]) as u64,
        u64::from(ues),
        "{text}"
    );
    assert_eq!(
        sum(&s, "pepc_ue_registered", &[]) as u64,
        u64::from(ues),
        "{text}"
    );
    // Every UE's uplink that reached the PDN side went through a slice's data thread.
    let ul = sum(
        &s,
        "pepc_packets_forwarded_total",
        &[("direction", "uplink")],
    ) as u64;
    assert_eq!(ul, r.ul_packets, "{j}\n{text}");
    let dl = sum(
        &s,
        "pepc_packets_forwarded_total",
        &[("direction", "downlink")],
    ) as u64;
    assert_eq!(dl, r.dl_packets, "{j}\n{text}");
    assert!(ul > 0 && dl > 0, "{j}");
    // Attach latency: one observation per attach, in the +Inf bucket's count.
    let n_obs = sum(
        &s,
        "pepc_procedure_duration_seconds_count",
        &[("procedure", "attach")],
    );
    assert_eq!(n_obs as u64, r.procedures["attach"].ok, "{text}");
    let inf = sum(
        &s,
        "pepc_procedure_duration_seconds_bucket",
        &[("procedure", "attach"), ("le", "+Inf")],
    );
    assert_eq!(inf, n_obs, "{text}");
    // One vector per attach, timed by the HSS proxy.
    let vectors = sum(&s, "pepc_hss_vector_duration_seconds_count", &[]);
    assert_eq!(vectors as u64, r.procedures["attach"].ok, "{text}");
    // Bytes: IP bytes, at least a header's worth per packet.
    let ulb = sum(&s, "pepc_bytes_forwarded_total", &[("direction", "uplink")]) as u64;
    assert!(ulb >= 28 * ul, "{text}");
    // Both slices took part, and every name is ours.
    for sl in ["0", "1"] {
        assert!(
            sum(&s, "pepc_ue_contexts", &[("slice", sl)]) > 0.0,
            "{text}"
        );
    }
    assert!(s.iter().all(|(n, _, _)| n.starts_with("pepc_")), "{text}");
    // The kernel's drops at each slice's own S1-U socket (two slices on kernel
    // sockets: a socket each) are exported; at this rate there are none.
    for sl in ["0", "1"] {
        assert!(
            s.iter().any(|(n, l, _)| n == "pepc_socket_dropped_total"
                && l.get("port").and_then(Value::as_str) == Some("s1u")
                && l.get("owner").and_then(Value::as_str) == Some("slice")
                && l.get("slice").and_then(Value::as_str) == Some(sl)
                && l.get("reason").and_then(Value::as_str) == Some("socket_buffer_full")),
            "{text}"
        );
    }
    assert_eq!(sum(&s, "pepc_socket_dropped_total", &[]), 0.0, "{text}");
    // What each user-plane port runs on: here a UDP socket and a UDP sink or TUN.
    let info = |port: &str| {
        s.iter()
            .find(|(n, l, _)| {
                n == "pepc_port_info" && l.get("port").and_then(Value::as_str) == Some(port)
            })
            .map(|(_, l, v)| (l.get("io").and_then(Value::as_str).map(str::to_string), *v))
    };
    assert_eq!(info("s1u"), Some((Some("udp".into()), 1.0)), "{text}");
    let sgi = info("sgi").unwrap_or_else(|| panic!("no SGi port info: {text}"));
    assert!(
        matches!(sgi.0.as_deref(), Some("tun" | "udp_sink")) && sgi.1 == 1.0,
        "{text}"
    );
    // The stop summary says the same ledger, per slice.
    let stop = epc.stop();
    let attaches: u64 = stop
        .lines()
        .filter_map(|l| l.strip_prefix("procedures slice "))
        .filter_map(|l| {
            l.split("attach ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    assert_eq!(attaches, r.procedures["attach"].ok, "{stop}");
}

/// The Grafana dashboard in the repository (docs/grafana/pepc-node.json) queries only
/// what a running node serves: every `pepc_*` name in its expressions is in /metrics
/// after a run that attached UEs, moved traffic and had attaches refused.
#[test]
fn the_dashboard_queries_only_served_metrics() {
    let n = 58u8;
    let ues = 8;
    // As common::node's, with a state store (checkpoints).
    let dir = std::env::temp_dir().join(format!("pepc-dash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = pepc::epc::EpcConfig::parse(&format!(
        "[node]\nmax_users = 1024\nslices = 2\n\
         [s1u]\nbind = \"127.0.{n}.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{n}.1:5202\"\nsink_peer = \"127.0.{n}.2:5201\"\n\
         [s1mme]\ntransport = \"udp\"\nbind = \"127.0.{n}.1\"\n\
         [hss]\ndb = \":memory:\"\n[state]\npath = \"{}\"\n\
         [metrics]\nlisten = \"127.0.{n}.1:0\"\n[api]\nlisten = \"\"\n",
        dir.join("state.redb").display()
    ))
    .expect("node config");
    let hss = pepc::epc::open_hss(&cfg.hss).expect("HSS");
    hss.add_many(
        &pepc::demo::emulator_subscribers(&pepc_emulator::config::SubscriberKeys::default(), ues)
            .unwrap(),
    )
    .unwrap();
    let epc = pepc::epc::Epc::start(&cfg, hss).expect("node start");
    let addr = epc.metrics.as_ref().expect("metrics on").local_addr();
    let scen = Scenario {
        ues,
        attach_rate: 200.0,
        duration_s: 1.0,
        event_rate: 20.0,
        traffic: Traffic {
            profile: TrafficProfile::Pepc,
            rate_pps: 200.0,
        },
        detach_at_end: false,
        ..Scenario::default()
    };
    let ecfg = EmulatorConfig {
        leave_associations: true,
        ..emulator(n, 1)
    };
    let r = pepc_emulator::run(ecfg.clone(), scen.clone()).unwrap();
    assert_eq!(r.attached, u64::from(ues), "{}", r.to_json());
    // Subscribers the HSS does not know: their attaches are refused (a failure cause).
    let strangers = EmulatorConfig {
        subscribers: pepc_emulator::config::SubscriberKeys {
            imsi_start: "001010000900000".into(),
            ..Default::default()
        },
        leave_associations: true,
        ..emulator(n, 1)
    };
    let r = pepc_emulator::run(
        strangers,
        Scenario {
            ues: 2,
            duration_s: 0.0,
            traffic: Traffic {
                profile: TrafficProfile::Pepc,
                rate_pps: 0.0,
            },
            ..scen
        },
    )
    .unwrap();
    assert_eq!(r.attached, 0, "{}", r.to_json());
    // G-PDUs for a TEID nobody holds: data path drops, by reason.
    let s = std::net::UdpSocket::bind(format!("127.0.{n}.2:0")).unwrap();
    let mut gpdu = vec![0x30, 0xff, 0, 20, 0, 0, 0, 7];
    gpdu.extend_from_slice(&[0x45; 20]);
    for _ in 0..5 {
        s.send_to(&gpdu, format!("127.0.{n}.1:2152")).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1200));
    let text = common::scrape(&addr.to_string());
    let served: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/pepc-node.json");
    let dash: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    assert!(exprs.len() >= 15, "{} queries", exprs.len());
    let mut missing = Vec::new();
    let mut used = std::collections::BTreeSet::new();
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(i) = rest.find("pepc_") {
            let name: String = rest[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            rest = &rest[i + name.len()..];
            used.insert(name.clone());
            if !served.contains(name.as_str()) {
                missing.push(format!("{name} (in {e})"));
            }
        }
    }
    epc.stop();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        missing.is_empty(),
        "not served:\n{}\n\nserved:\n{text}",
        missing.join("\n")
    );
    eprintln!(
        "{} queries over {} metrics, all served",
        exprs.len(),
        used.len()
    );
}
