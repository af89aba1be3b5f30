//! `[log]`: the level and format keys are checked (errors name the key), and `pepc run`
//! with `format = "json"` writes one JSON object per log line on stderr.

mod common;

use pepc::epc::EpcConfig;
use std::process::Command;

#[test]
fn log_section_is_validated() {
    let c =
        EpcConfig::parse("[log]\nlevel = \"debug,pepc_mme=trace\"\nformat = \"json\"\n").unwrap();
    assert_eq!(c.log.format, pepc::logging::LogFormat::Json);
    let e = EpcConfig::parse("[log]\nformat = \"xml\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("log.format"), "{e}");
    let e = EpcConfig::parse("[log]\nlevel = \"pepc_mme=loud\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("log.level"), "{e}");
    // EnvFilter takes a bare word as a target: these turned logging off, exit 0.
    for level in ["loud", "warning", "info,pepc_mme=loud", "", "info,,debug"] {
        let e = EpcConfig::parse(&format!("[log]\nlevel = {level:?}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("log.level") && (e.contains("not a level") || e.contains("empty")),
            "{level}: {e}"
        );
    }
    for level in ["WARN", "off", "info,pepc_mme=debug", "pepc_mme[ue]=trace"] {
        EpcConfig::parse(&format!("[log]\nlevel = {level:?}\n"))
            .unwrap_or_else(|e| panic!("{level}: {e}"));
    }
    let e = EpcConfig::parse("[log]\ncolour = true\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("colour"), "{e}");
}

#[test]
fn json_logs_are_one_object_per_line() {
    let dir = std::env::temp_dir().join(format!("pepc-log-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        "[node]\nslices = 1\n[s1u]\nbind = \"127.0.43.1:2152\"\n[sgi]\nmode = \"udp\"\n\
         sink_local = \"127.0.43.1:15312\"\nsink_peer = \"127.0.43.1:15311\"\n\
         [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nbind = \"127.0.43.1\"\nudp_port = 19931\n\
         [hss]\ndb = \":memory:\"\n[log]\nformat = \"json\"\nlevel = \"info\"\n",
    )
    .unwrap();
    let out = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(["run", "--seconds", "0.5", "--config"])
            .arg(&config)
            .env_remove("RUST_LOG"),
        std::time::Duration::from_secs(120),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let logs: Vec<serde_json::Value> = err
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let banner = logs
        .iter()
        .find(|v| {
            v["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("pepc node:"))
        })
        .unwrap_or_else(|| panic!("no start line in JSON:\n{err}"));
    assert_eq!(banner["level"], "INFO");
}
