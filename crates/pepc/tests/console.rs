//! The web console in headless Chromium (Debian's `chromium`, driven by Playwright):
//! against a running node with the emulator attached, the page shows the node's UE
//! and eNB counts, a UE found by IMSI, and a subscriber added through the page
//! attaches afterwards. Needs `chromium` and `npm ci` in tests/console
//! (scripts/test.sh does both); without them the test says so and skips.

mod common;

use common::node::{emulator, node};
use pepc_emulator::config::{SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};
use std::path::Path;
use std::process::Command;

#[test]
fn the_console_shows_the_node_and_adds_a_subscriber_that_attaches() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/console");
    if !Path::new("/usr/bin/chromium").exists()
        || !dir.join("node_modules/playwright-core").exists()
    {
        eprintln!("SKIP: chromium or playwright-core missing (scripts/test.sh installs both)");
        return;
    }
    let n = 55u8;
    let epc = node(
        n,
        4,
        &format!("[metrics]\nlisten = \"\"\n[api]\nlisten = \"127.0.{n}.1:0\"\n"),
    );
    let api = epc.api.as_ref().unwrap().local_addr();
    let keys = SubscriberKeys::default();
    let emulate = |keys: SubscriberKeys, ues: u32| {
        // The page is read after the run: its eNBs stay connected.
        let ecfg = EmulatorConfig {
            subscribers: keys,
            leave_associations: true,
            ..emulator(n, 2)
        };
        let scen = Scenario {
            ues,
            traffic: Traffic {
                profile: TrafficProfile::None,
                rate_pps: 0.0,
            },
            detach_at_end: false,
            ..Scenario::default()
        };
        pepc_emulator::run(ecfg, scen).unwrap()
    };
    assert_eq!(emulate(keys.clone(), 4).attached, 4);

    // A fifth subscriber, added in the page.
    let fifth = keys.imsi(4).unwrap();
    let out = Command::new("node")
        .current_dir(&dir)
        .args([
            "console.mjs",
            &format!("http://{api}/"),
            "4",
            &fifth,
            &keys.k,
            &keys.opc,
            &keys.imsi(0).unwrap(),
        ])
        .output()
        .expect("node (Node.js)");
    let text = String::from_utf8_lossy(&out.stdout);
    let seen: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&out.stderr)));
    assert!(seen["errors"].as_array().unwrap().is_empty(), "{seen}");
    assert_eq!(seen["ue_count"], "4", "{seen}");
    assert_eq!(seen["enb_count"], "2", "{seen}");
    assert_eq!(seen["slices_rows"], 2, "{seen}");
    // The node line says what the user-plane ports run on.
    let line = seen["node"].as_str().unwrap();
    assert!(
        line.contains("S1-U: ") && line.contains("UDP socket") && line.contains("SGi: "),
        "{seen}"
    );
    assert_eq!(seen["sub_status"], format!("added {fifth}"), "{seen}");
    let detail = seen["ue_detail"].as_str().unwrap();
    assert!(
        detail.contains(&keys.imsi(0).unwrap()) && detail.contains("registered"),
        "{seen}"
    );

    // The subscriber added in the page attaches.
    let only_fifth = SubscriberKeys {
        imsi_start: fifth.clone(),
        ..keys
    };
    let r = emulate(only_fifth, 1);
    assert_eq!(r.attached, 1, "{}", r.to_json());
    assert!(epc.hss.get(&fifth).unwrap().is_some());
    epc.stop();
}
