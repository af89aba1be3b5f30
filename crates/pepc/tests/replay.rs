//! `[debug] record` and `pepc replay` end to end: a demo of 1,000 UEs with the Table I
//! signaling mix (attach, service request, TAU, handover, paging, detach) and data
//! traffic, each slice's MME recorded, then replayed byte-identical by the `pepc`
//! binary, whole and 100 UEs per slice each on its own from a mid-run snapshot; a
//! recording changed by one byte is refused, naming the call. Uses the
//! demo's fixed loopback ports (9899, 2152, 5201, 5202), under their lock.

mod common;

use std::process::Command;

fn pepc(args: &[&str]) -> std::process::Output {
    // A 1,000-UE demo takes ~15 s and its replay ~5 s in a debug build.
    common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc")).args(args),
        std::time::Duration::from_secs(300),
    )
}

#[test]
fn a_recorded_demo_replays_byte_identical_and_a_changed_one_is_refused() {
    let _ports = common::demo_ports_lock();
    let dir = std::env::temp_dir().join(format!("pepc-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let rec = dir.join("rec");
    let rec_s = rec.to_str().unwrap();
    let out = pepc(&[
        "demo",
        "--ues",
        "1000",
        "--seconds",
        "3",
        "--events",
        "300",
        "--pps",
        "2000",
        "--json",
        "--record",
        rec_s,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON report");
    assert_eq!(r["attached"], 1000, "{r}");
    // The Table I mix ran: more than attaches and detaches were recorded.
    let events: u64 = ["service_request", "tau", "handover"]
        .iter()
        .filter_map(|p| r["procedures"][p]["ok"].as_u64())
        .sum();
    assert!(events > 0, "{r}");
    for s in 0..2 {
        let p = dir.join(format!("rec.{s}"));
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&p)
                .expect("a recording per slice")
                .permissions(),
        );
        assert_eq!(mode & 0o777, 0o600, "the recording holds keys");
    }

    let out = pepc(&["replay", rec_s, "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "replay failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line per slice"))
        .collect();
    assert_eq!(reports.len(), 2, "{stdout}");
    for (s, r) in reports.iter().enumerate() {
        assert_eq!(r["slice"], s, "{r}");
        assert_eq!(r["identical"], true, "{r}");
        assert!(r["calls"].as_u64().unwrap() > 1000, "{r}");
    }

    // 100 UEs of each slice, each replayed on an MME of its own from its snapshot
    // taken mid-run, with only its calls (what a node taking it over does).
    let out = pepc(&["replay", rec_s, "--ues", "100", "--at", "50", "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "per-UE replay failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for l in stdout.lines() {
        let r: serde_json::Value = serde_json::from_str(l).expect("a JSON line per slice");
        let ues = r["ues"].as_array().expect("UE reports");
        assert_eq!(ues.len(), 100, "{r}");
        let from = r["ues_from_call"].as_u64().unwrap();
        assert!(from > 500, "{r}");
        for u in ues {
            assert_eq!(u["identical"], true, "{u}");
            assert!(u["snapshot_at_call"].as_u64().unwrap() >= from, "{u}");
        }
        // The UEs did more after their snapshots than wait: their own signaling
        // (service requests, TAUs, handovers, detaches) with outputs compared.
        let calls: u64 = ues.iter().map(|u| u["calls"].as_u64().unwrap()).sum();
        let outputs: u64 = ues.iter().map(|u| u["outputs"].as_u64().unwrap()).sum();
        assert!(
            calls >= 100 && outputs >= 100,
            "{calls} calls, {outputs} outputs: {r}"
        );
    }

    // The last byte of the last output slice 1 recorded, changed: the replay says
    // where, and exits non-zero.
    let p1 = dir.join("rec.1");
    let mut bytes = std::fs::read(&p1).unwrap();
    let (call, at) = {
        let mut last = None;
        let calls = pepc_mme::record::Records::new(&bytes)
            .unwrap()
            .filter_map(|r| match r.unwrap() {
                pepc_mme::record::Record::Call(c) => Some(c),
                pepc_mme::record::Record::Start(_) => None,
            });
        for (i, c) in calls.enumerate() {
            if let Some(o) = c.outputs.last() {
                last = Some((
                    i,
                    o.as_ptr() as usize - bytes.as_ptr() as usize + o.len() - 1,
                ));
            }
        }
        last.expect("a call with outputs")
    };
    bytes[at] ^= 0x01;
    std::fs::write(&p1, &bytes).unwrap();
    let out = pepc(&["replay", rec_s]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("slice 1 of 2") && err.contains(&format!("differs at call {call} ")),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
