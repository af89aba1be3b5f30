//! `pepc demo` end to end: a node (MME over userspace SCTP, slice data path, embedded
//! HSS) driven by the emulator on loopback. Attaches, traffic, detaches all succeed
//! with no loss. Uses the demo's fixed loopback ports (9899, 2152, 5201, 5202).

mod common;

use std::process::Command;

#[test]
fn demo_attaches_exchanges_traffic_and_detaches() {
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc")).args([
            "demo",
            "--ues",
            "20",
            "--seconds",
            "1",
            "--events",
            "0",
            "--pps",
            "500",
            "--json",
        ]),
        std::time::Duration::from_secs(300),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {}\n{}",
        stdout,
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON report");
    assert_eq!(r["ues"], 20);
    assert_eq!(r["attached"], 20, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["lost"], 0, "{r}");
    assert!(r["ul_packets"].as_u64().unwrap() > 0, "{r}");
    assert!(r["dl_packets"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["procedures"]["attach"]["ok"], 20, "{r}");
    assert_eq!(r["procedures"]["detach"]["ok"], 20, "{r}");
}
