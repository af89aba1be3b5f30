//! The web console in headless Chromium (Debian's `chromium`, driven by Playwright):
//! against a running node loaded by the emulator (attaches, then traffic both ways
//! until the page is done), the page's charts draw the attach storm, the packets per
//! slice and the UEs by state; a screenshot of the overview under load is saved (its
//! path printed); a UE's page, opened from the UE list, shows its bearers and their
//! counters; a subscriber added through the page attaches afterwards. Needs
//! `chromium` and `npm ci` in tests/console (scripts/test.sh does both); without them
//! the test says so and skips.

mod common;

use common::node::{emulator, node};
use pepc_emulator::config::{SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

/// Where the screenshots go: `console-test/` in the integration tests' scratch
/// directory (`target/tmp` of the build).
fn screenshots() -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join("console-test");
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn the_console_charts_the_node_under_load_shows_a_ue_and_adds_a_subscriber() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console");
    if !Path::new("/usr/bin/chromium").exists()
        || !dir.join("node_modules/playwright-core").exists()
    {
        eprintln!("SKIP: chromium or playwright-core missing (scripts/test.sh installs both)");
        return;
    }
    let n = 55u8;
    let ues = 4;
    let epc = node(
        n,
        ues,
        &format!("[metrics]\nlisten = \"\"\n[api]\nlisten = \"127.0.{n}.1:0\"\n"),
    );
    let api = epc.api.as_ref().unwrap().local_addr();
    let keys = SubscriberKeys::default();
    let shots = screenshots();

    // The page first, so that its charts see the attach storm.
    let fifth = keys.imsi(ues).unwrap();
    let known = keys.imsi(0).unwrap();
    let mut page = Command::new("node")
        .current_dir(&dir)
        .args([
            "console.mjs",
            &format!("http://{api}/"),
            &ues.to_string(),
            &fifth,
            &keys.k,
            &keys.opc,
            &known,
            shots.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("node (Node.js)");
    let (tx, lines) = mpsc::channel();
    let stdout = page.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stdout).lines() {
            if tx.send(l.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let first = lines.recv_timeout(Duration::from_secs(90));
    if first.as_deref() != Ok("loaded") {
        let _ = page.kill();
        let _ = page.wait();
        panic!("the page did not load: {first:?}");
    }

    // The load: the UEs attach at 2/s, then send and receive until the page is done.
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (stop, keys) = (stop.clone(), keys.clone());
        std::thread::spawn(move || {
            let ecfg = EmulatorConfig {
                subscribers: keys,
                ..emulator(n, 2)
            };
            let scen = Scenario {
                ues,
                attach_rate: 2.0,
                traffic: Traffic {
                    profile: TrafficProfile::Pepc,
                    rate_pps: 400.0,
                },
                ..Scenario::default()
            };
            pepc_emulator::run_until(ecfg, scen, stop, &mut || {})
        })
    };
    let mut text = String::new();
    let done = std::time::Instant::now() + Duration::from_secs(240);
    while let Ok(l) = lines.recv_timeout(done.saturating_duration_since(std::time::Instant::now()))
    {
        text = l;
    }
    let _ = page.kill();
    let status = page.wait().unwrap();
    stop.store(true, Ordering::Relaxed);
    let report = load.join().unwrap().expect("the emulator's run");
    let seen: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: the page's last line {text:?} ({status})"));
    assert!(seen["errors"].as_array().unwrap().is_empty(), "{seen:#}");

    // The overview under load, and its screenshot.
    let png = seen["overview_png"].as_str().unwrap();
    println!("console overview under load: {png}");
    println!("console UE page: {}", seen["ue_png"].as_str().unwrap());
    let bytes = std::fs::read(png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 10_000,
        "{png}"
    );
    assert_eq!(seen["ue_count"], ues.to_string(), "{seen:#}");
    assert_eq!(seen["enb_count"], "2", "{seen:#}");
    assert_eq!(seen["slices_rows"], 2, "{seen:#}");
    let line = seen["node"].as_str().unwrap();
    assert!(
        line.contains("S1-U: ") && line.contains("UDP socket") && line.contains("SGi: "),
        "{seen:#}"
    );
    let charts = &seen["charts"];
    for c in ["procedures", "pps", "ues"] {
        let canvas = charts[c]["canvas"]
            .as_array()
            .unwrap_or_else(|| panic!("{c}: {seen:#}"));
        assert!(canvas[0].as_u64().unwrap() > 0 && canvas[1].as_u64().unwrap() > 0);
    }
    assert!(charts["procedures"]["max"]["attach/s"].as_f64().unwrap() > 0.0);
    assert!(charts["procedures"]["max"]["succeeded/s"].as_f64().unwrap() > 0.0);
    assert_eq!(charts["procedures"]["max"]["failed/s"], 0.0, "{seen:#}");
    let pps = charts["pps"]["last"].as_object().unwrap();
    for dir in ["uplink", "downlink"] {
        let now: f64 = pps
            .iter()
            .filter(|(l, _)| l.ends_with(dir))
            .filter_map(|(_, v)| v.as_f64())
            .sum();
        assert!(now > 0.0, "{dir}: {seen:#}");
    }
    assert_eq!(pps["drops/s"], 0.0, "{seen:#}");
    assert_eq!(charts["ues"]["last"]["connected"], ues, "{seen:#}");
    assert!(
        seen["procedures"].as_str().unwrap().contains("attach"),
        "{seen:#}"
    );

    // The UE page: its bearer, the node's TEID and the UE's address, counters that
    // grew both ways, and a throughput chart.
    assert_eq!(seen["ue_hash"], format!("#ue/{known}"), "{seen:#}");
    assert_eq!(seen["ue_overview_hidden"], true, "{seen:#}");
    let ue = &seen["ue"];
    assert_eq!(ue["imsi"], known, "{seen:#}");
    assert!(seen["ue_title"].as_str().unwrap().contains(&known));
    assert!(
        seen["ue_summary"].as_str().unwrap().contains("registered"),
        "{seen:#}"
    );
    let b = &ue["bearers"][0];
    let row = seen["ue_bearer_rows"][0].as_array().unwrap();
    let cells: Vec<&str> = row.iter().map(|c| c.as_str().unwrap()).collect();
    assert_eq!(cells[0], b["ebi"].to_string(), "{seen:#}");
    assert_eq!(cells[1], "default", "{seen:#}");
    assert_eq!(cells[2], "internet", "{seen:#}");
    assert_eq!(cells[3], ue["pdns"][0]["address"], "{seen:#}");
    assert_eq!(cells[6], b["teid_ul"].to_string(), "{seen:#}");
    assert_eq!(cells[7], b["enb_teid"].to_string(), "{seen:#}");
    for (i, counter) in [
        (9, "ul_packets"),
        (10, "ul_bytes"),
        (11, "dl_packets"),
        (12, "dl_bytes"),
    ] {
        let v = b["usage"][counter].as_u64().unwrap();
        assert!(v > 0, "{counter}: {seen:#}");
        assert_eq!(cells[i].replace(',', ""), v.to_string(), "{seen:#}");
    }
    assert_eq!(seen["ue_chart"]["canvas"], true, "{seen:#}");
    assert!(
        seen["ue_missing"].as_str().unwrap().contains("no UE"),
        "{seen:#}"
    );

    // The load itself went through: every UE attached and detached, nothing lost.
    assert_eq!(report.attached, u64::from(ues), "{}", report.to_json());
    assert_eq!(report.lost, 0, "{}", report.to_json());
    assert_eq!(
        report.procedures.get("detach").map(|d| d.ok),
        Some(u64::from(ues)),
        "{}",
        report.to_json()
    );

    // The subscriber added in the page attaches.
    assert_eq!(seen["sub_status"], format!("added {fifth}"), "{seen:#}");
    let only_fifth = SubscriberKeys {
        imsi_start: fifth.clone(),
        ..keys
    };
    let ecfg = EmulatorConfig {
        subscribers: only_fifth,
        leave_associations: true,
        ..emulator(n, 2)
    };
    let r = common::node::attach_and_stay(ecfg, 1);
    assert_eq!(r.attached, 1, "{}", r.to_json());
    assert!(epc.hss.get(&fifth).unwrap().is_some());
    epc.stop();
}
