//! `pepc ctl` against a running node's API: subscriber add/list/show/remove, node,
//! slices, eNBs and UEs, tables and --json, errors as a non-zero exit naming the cause.

mod common;

use common::node::node;
use std::process::Command;

fn ctl(api: &str, token: &str, args: &[&str]) -> (bool, String) {
    let o = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .arg("ctl")
            .args(["--api", api])
            .args(args)
            .env("PEPC_API_TOKEN", token)
            .env_remove("RUST_LOG"),
        std::time::Duration::from_secs(60),
    );
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn ctl_drives_a_running_node() {
    let n = 54u8;
    let epc = node(
        n,
        0,
        &format!(
            "[metrics]\nlisten = \"\"\n[api]\nlisten = \"127.0.{n}.1:0\"\ntoken = \"ctl-token\"\n"
        ),
    );
    let api = format!("http://{}", epc.api.as_ref().unwrap().local_addr());
    let k = "465B5CE8B199B49FAA5F0A2EE238A6BC";
    let opc = "E8ED289DEBA952E4283B54E88E6183CA";
    let (ok, out) = ctl(
        &api,
        "ctl-token",
        &[
            "subscriber",
            "add",
            "--imsi",
            "001010000004242",
            "--k",
            k,
            "--opc",
            opc,
            "--apn",
            "ims",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("added 001010000004242"), "{out}");
    let (ok, out) = ctl(&api, "ctl-token", &["subscriber", "list"]);
    assert!(ok, "{out}");
    assert!(
        out.contains("IMSI") && out.contains("001010000004242") && out.contains("ims"),
        "{out}"
    );
    assert!(out.contains("1 subscriber(s)"), "{out}");
    assert!(
        !out.to_ascii_uppercase().contains(k),
        "a key was printed: {out}"
    );
    let (ok, out) = ctl(
        &api,
        "ctl-token",
        &["--json", "subscriber", "show", "001010000004242"],
    );
    assert!(ok, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["apn"], "ims");
    for args in [
        &["node"][..],
        &["slices"],
        &["enbs"],
        &["ues", "--state", "idle"],
    ] {
        let (ok, out) = ctl(&api, "ctl-token", args);
        assert!(ok, "{args:?}: {out}");
    }
    let (ok, out) = ctl(&api, "ctl-token", &["node"]);
    assert!(
        ok && out
            .lines()
            .any(|l| l.starts_with("S1-U: ") && l.contains("UDP socket")),
        "{out}"
    );
    let (ok, out) = ctl(&api, "ctl-token", &["slices"]);
    assert!(
        ok && out.lines().count() == 3 && out.starts_with("SLICE"),
        "{out}"
    );
    // Errors: a non-zero exit and the API's message.
    let (ok, out) = ctl(&api, "ctl-token", &["ue", "001010000009999"]);
    assert!(!ok && out.contains("404") && out.contains("no UE"), "{out}");
    let (ok, out) = ctl(&api, "wrong", &["node"]);
    assert!(!ok && out.contains("401"), "{out}");
    let (ok, out) = ctl(
        &api,
        "ctl-token",
        &[
            "subscriber",
            "add",
            "--imsi",
            "1",
            "--k",
            "zz",
            "--opc",
            opc,
        ],
    );
    assert!(!ok && out.contains("--k"), "{out}");
    let (ok, out) = ctl(
        &api,
        "ctl-token",
        &["subscriber", "remove", "001010000004242"],
    );
    assert!(ok && out.contains("removed"), "{out}");
    epc.stop();
}
