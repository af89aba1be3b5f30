//! `pepc bench attach --hss diameter` end to end: the node's HSS is the test HSS
//! (Python on pycrate, real Milenage vectors) over S6a on loopback; every attach
//! completes, each asks the HSS twice (ULR, AIR), and the JSON carries the proxy's
//! figures. Figures are not asserted (the benchmark reports them; see docs/benchmarks.md).
//! Uses the demo's fixed loopback ports (9899, 2152, 5201, 5202), under their lock.

mod common;

#[test]
fn bench_attach_over_s6a_reports_the_proxy() {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import pycrate_diameter.Diameter3GPP, cryptography"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIP: python3 with pycrate_diameter and cryptography missing (scripts/test.sh installs them)");
        return;
    }
    let _ports = common::demo_ports_lock();
    let out = common::output_within(
        std::process::Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args([
                "bench",
                "attach",
                "--transport",
                "udp",
                "--hss",
                "diameter",
                "--attaches",
                "300",
                "--json",
            ])
            .env("RUST_LOG", "warn"),
        std::time::Duration::from_secs(300),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("a JSON line");
    let v: serde_json::Value = serde_json::from_str(line).unwrap();
    assert_eq!(v["attaches"], 300, "{v}");
    assert_eq!(v["failed"], 0, "{v}");
    let d = &v["diameter"];
    assert_eq!(d["requests"], 600, "a ULR and an AIR per attach: {v}");
    assert!(d["proxy_cpu_s"].as_f64().unwrap() > 0.0, "{v}");
    assert!(
        d["requests_per_proxy_core_s"].as_f64().unwrap() > 0.0,
        "{v}"
    );
    assert!(d["peer"].as_str().unwrap().starts_with("127.0.0.1:"));
    // Wrong uses say what is wrong.
    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args([
            "bench",
            "attach",
            "--transport",
            "inprocess",
            "--hss",
            "diameter",
        ])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--transport udp"));
}
