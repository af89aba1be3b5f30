//! An HSS peer fails during an attach storm: a node with `[hss] mode = "diameter"`
//! and two test HSSes (Python on pycrate, real Milenage vectors: tests/py/diam.py
//! in its bench mode) on loopback; the emulator offers 1,000 attaches at 4,000/s,
//! and the primary HSS is killed while they run. The requests it held are sent again
//! to the second peer (RFC 6733 §5.5.4): every UE attaches, none fails.
//!
//! Skips (says so) when python3 with pycrate is missing; scripts/test.sh installs it.

mod common;

use common::diameter::PyPeer;
use pepc_emulator::config::{Traffic, TrafficProfile};
use pepc_emulator::Scenario;
use std::time::{Duration, Instant};

#[test]
fn the_storm_survives_the_primary_hss_dying() {
    let dir = std::env::temp_dir().join(format!("pepc-s6a-storm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(primary) = PyPeer::start(&dir, "hss", "bench") else {
        return;
    };
    let Some(second) = PyPeer::start(&dir, "hss", "bench") else {
        return;
    };
    let n = 57u8;
    let ues = 1000;
    let epc = common::node::node(
        n,
        0,
        &format!(
            "mode = \"diameter\"\npeers = [\"127.0.0.1:{}\", \"127.0.0.1:{}\"]\n\
             destination_realm = \"test\"\nrequest_timeout_ms = 3000\n\
             [mme]\nhss_timeout_ms = 10000\n",
            primary.port, second.port
        ),
    );
    let ecfg = pepc_emulator::EmulatorConfig {
        progress: false,
        ..common::node::emulator(n, 4)
    };
    let scen = Scenario {
        ues,
        attach_rate: 4000.0,
        duration_s: 0.0,
        event_rate: 0.0,
        detach_at_end: false,
        drain_s: 0.0,
        traffic: Traffic {
            profile: TrafficProfile::None,
            rate_pps: 0.0,
        },
        ..Default::default()
    };
    let gauges = epc.gauges.clone();
    let storm = std::thread::spawn(move || pepc_emulator::run(ecfg, scen));
    // Kill the primary once attaches are under way (bounded wait).
    let t0 = Instant::now();
    let attached = || {
        gauges
            .iter()
            .map(|g| g.attaches.load(std::sync::atomic::Ordering::Relaxed))
            .sum::<u64>()
    };
    while attached() < 100 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the storm never started"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    let at_kill = attached();
    eprintln!("primary killed after {at_kill} attaches");
    drop(primary);
    let r = storm.join().unwrap().expect("emulator run");
    let report = epc.stop();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        at_kill < u64::from(ues),
        "the primary died before the storm ended"
    );
    let j = r.to_json();
    assert_eq!(r.attached, u64::from(ues), "{j}\n{report}");
    assert_eq!(r.failed, 0, "{j}");
    drop(second);
}
