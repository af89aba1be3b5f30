//! `pepc subscriber …` and `pepc run` with a persistent HSS file, driven by the emulator
//! over userspace SCTP on loopback: subscribers added from the command line and from
//! CSV attach; keys never appear in any output; the SQN store survives a restart, so a
//! restarted node never hands out a vector it already used.

mod common;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const K: &str = "465B5CE8B199B49FAA5F0A2EE238A6BC";
const OPC: &str = "E8ED289DEBA952E4283B54E88E6183CA";

fn pepc(args: &[&str]) -> Output {
    common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc")).args(args),
        Duration::from_secs(300),
    )
}

fn ok(o: &Output) -> String {
    let out = String::from_utf8_lossy(&o.stdout).to_string();
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "pepc failed: {out}\n{err}");
    for secret in [K, OPC] {
        assert!(
            !out.to_ascii_uppercase().contains(secret)
                && !err.to_ascii_uppercase().contains(secret),
            "a key appeared in pepc's output"
        );
    }
    out
}

fn sqn_of(db: &Path, imsi: &str) -> u64 {
    let out = ok(&pepc(&[
        "subscriber",
        "--db",
        db.to_str().unwrap(),
        "list",
        "--json",
    ]));
    out.lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON line"))
        .find(|v| v["imsi"] == imsi)
        .and_then(|v| v["sqn"].as_u64())
        .unwrap_or_else(|| panic!("{imsi} not listed: {out}"))
}

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_node(config: &Path) -> Node {
    let child = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args([
            "run",
            "--config",
            config.to_str().unwrap(),
            "--seconds",
            "60",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn pepc run");
    Node(child)
}

fn attach_and_detach(ues: u32) -> pepc_emulator::Report {
    let ecfg = pepc_emulator::EmulatorConfig {
        mme_udp_port: 19899,
        gtpu_addr: "127.0.41.2:2152".parse().unwrap(), // GTP-U is always on 2152
        pdn_addr: "127.0.0.1:15201".parse().unwrap(),
        sgi_peer: Some("127.0.0.1:15202".parse().unwrap()),
        ..Default::default()
    };
    let scen = pepc_emulator::Scenario {
        ues,
        attach_rate: 200.0,
        traffic: pepc_emulator::config::Traffic {
            profile: pepc_emulator::config::TrafficProfile::Pepc,
            rate_pps: 200.0,
        },
        duration_s: 0.5,
        timeout_s: 5.0,
        ..Default::default()
    };
    // The node needs a moment to bind; the emulator's S1 Setup retries cover that,
    // but give it a bounded number of attempts here too.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match pepc_emulator::run(ecfg.clone(), scen.clone()) {
            Ok(r) => return r,
            Err(e) if Instant::now() < deadline => {
                eprintln!("emulator: {e}; retrying");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!("emulator never reached the node: {e}"),
        }
    }
}

#[test]
fn subscribers_from_cli_and_csv_attach_to_pepc_run_and_sqn_survives_restart() {
    let dir = std::env::temp_dir().join(format!("pepc-run-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("hss.redb");
    let dbs = db.to_str().unwrap();

    // One subscriber from flags, two from CSV (the emulator's first three IMSIs).
    ok(&pepc(&[
        "subscriber",
        "--db",
        dbs,
        "add",
        "--imsi",
        "001010000000001",
        "--k",
        K,
        "--opc",
        OPC,
        "--msisdn",
        "4915100001",
        "--sqn",
        "32",
    ]));
    let csv = dir.join("subs.csv");
    std::fs::write(
        &csv,
        format!("imsi,k,opc,sqn,apn,qci\n001010000000002,{K},{OPC},32,internet,9\n001010000000003,{K},{OPC},32,internet,8\n"),
    )
    .unwrap();
    let out = ok(&pepc(&[
        "subscriber",
        "--db",
        dbs,
        "import",
        csv.to_str().unwrap(),
    ]));
    assert!(out.contains("imported 2"), "{out}");
    let out = ok(&pepc(&["subscriber", "--db", dbs, "list"]));
    assert!(out.contains("3 subscriber(s)"), "{out}");
    assert!(out.contains("4915100001"), "{out}");

    // Errors name the field and never echo the key.
    let bad = pepc(&[
        "subscriber",
        "--db",
        dbs,
        "add",
        "--imsi",
        "001010000000009",
        "--k",
        "zz",
        "--opc",
        OPC,
    ]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--k"));
    let bad = pepc(&["subscriber", "--db", dbs, "remove", "001019999999999"]);
    assert!(!bad.status.success());

    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[s1u]\nbind = \"127.0.41.1:2152\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:15202\"\nsink_peer = \"127.0.0.1:15201\"\n\
             [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nudp_port = 19899\n[hss]\ndb = \"{}\"\n",
            dbs
        ),
    )
    .unwrap();

    let sqn0 = sqn_of(&db, "001010000000001");
    let first_run_sqn = {
        let _node = start_node(&config);
        let r = attach_and_detach(3);
        assert_eq!(r.attached, 3, "{}", r.to_table());
        assert_eq!(r.failed, 0, "{}", r.to_table());
        assert_eq!(r.lost, 0, "{}", r.to_table());
        assert!(r.ul_packets > 0 && r.dl_packets > 0, "{}", r.to_table());
        drop(_node);
        // The node has exited: the SQN it used is on disk.
        let s = sqn_of(&db, "001010000000001");
        assert!(s > sqn0, "SQN not advanced by the attach: {sqn0} -> {s}");
        s
    };
    {
        // The second run goes through the `pepc ran` command, as an operator would.
        let _node = start_node(&config);
        let deadline = Instant::now() + Duration::from_secs(20);
        let out = loop {
            let o = pepc(&[
                "ran",
                "--mme",
                "127.0.0.1:19899",
                "--gtpu-local",
                "127.0.41.2:2152",
                "--pdn-local",
                "127.0.0.1:15201",
                "--sgi-peer",
                "127.0.0.1:15202",
                "--ues",
                "3",
                "--attach-rate",
                "200",
                "--seconds",
                "0.5",
                "--pps",
                "200",
                "--traffic",
                "pepc",
                "--k",
                K,
                "--opc",
                OPC,
                "--quiet",
                "--json",
            ]);
            if o.status.success() || Instant::now() > deadline {
                break o;
            }
            std::thread::sleep(Duration::from_millis(300));
        };
        let r: serde_json::Value =
            serde_json::from_str(ok(&out).trim()).expect("pepc ran --json prints one object");
        assert_eq!(r["attached"], 3, "{r}");
        assert_eq!(r["failed"], 0, "{r}");
        assert_eq!(r["lost"], 0, "{r}");
    }
    let s = sqn_of(&db, "001010000000001");
    assert!(
        s > first_run_sqn,
        "after a restart the HSS must hand out fresh SQNs: {first_run_sqn} -> {s}"
    );

    let out = ok(&pepc(&[
        "subscriber",
        "--db",
        dbs,
        "remove",
        "001010000000003",
    ]));
    assert!(out.contains("removed"), "{out}");
    let out = ok(&pepc(&["subscriber", "--db", dbs, "list"]));
    assert!(out.contains("2 subscriber(s)"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pepc run` with `node.slices = 2`: the S1AP endpoint steers the UEs to both slices'
/// MMEs, and the node prints each slice's UE count when it exits.
#[test]
fn pepc_run_with_two_slices_serves_ues_in_both_and_reports_them_at_exit() {
    let dir = std::env::temp_dir().join(format!("pepc-run2-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("hss.redb");
    let dbs = db.to_str().unwrap();
    let ues = 12u32;
    let keys = pepc_emulator::config::SubscriberKeys::default();
    let mut csv = String::from("imsi,k,opc,sqn\n");
    for i in 0..ues {
        csv += &format!("{},{K},{OPC},32\n", keys.imsi(i).unwrap());
    }
    let csv_path = dir.join("subs.csv");
    std::fs::write(&csv_path, csv).unwrap();
    ok(&pepc(&[
        "subscriber",
        "--db",
        dbs,
        "import",
        csv_path.to_str().unwrap(),
    ]));
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[node]\nslices = 2\n[s1u]\nbind = \"127.0.45.1:2152\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:15212\"\nsink_peer = \"127.0.0.1:15211\"\n\
             [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nudp_port = 19845\n[hss]\ndb = \"{dbs}\"\n"
        ),
    )
    .unwrap();
    let node = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args([
            "run",
            "--config",
            config.to_str().unwrap(),
            "--seconds",
            "6",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn pepc run");
    let pid = node.id();
    let node = Node(node);
    let ecfg = pepc_emulator::EmulatorConfig {
        mme_udp_port: 19845,
        gtpu_addr: "127.0.45.2:2152".parse().unwrap(),
        pdn_addr: "127.0.0.1:15211".parse().unwrap(),
        sgi_peer: Some("127.0.0.1:15212".parse().unwrap()),
        ..Default::default()
    };
    let scen = pepc_emulator::Scenario {
        ues,
        attach_rate: 200.0,
        duration_s: 0.2,
        detach_at_end: false,
        timeout_s: 4.0,
        ..Default::default()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let r = loop {
        match pepc_emulator::run(ecfg.clone(), scen.clone()) {
            Ok(r) => break r,
            Err(e) if Instant::now() < deadline => {
                eprintln!("emulator: {e}; retrying");
                std::thread::sleep(Duration::from_millis(300));
            }
            Err(e) => panic!("emulator never reached the node: {e}"),
        }
    };
    assert_eq!(r.attached, u64::from(ues), "{}", r.to_table());
    assert_eq!(r.failed, 0, "{}", r.to_table());
    // The threads that run are the plan's (`pepc plan` on the same file): by name,
    // each once; the HSS preload may have ended already.
    let planned = ok(&pepc(&["plan", "--config", config.to_str().unwrap()]));
    let mut want: Vec<String> = planned
        .lines()
        .take_while(|l| !l.starts_with("rings"))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("pepc-"))
        .map(String::from)
        .collect();
    want.sort();
    let mut running: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flatten()
        .map(|t| std::fs::read_to_string(t.path().join("comm")).unwrap_or_default())
        .map(|c| c.trim().to_string())
        .filter(|c| c.starts_with("pepc-"))
        .collect();
    running.sort();
    let preload = "pepc-hss-load".to_string();
    if !running.contains(&preload) {
        want.retain(|n| *n != preload);
    }
    assert_eq!(running, want, "{planned}");
    for t in [
        "pepc-ctl-0",
        "pepc-ctl-1",
        "pepc-data-0",
        "pepc-data-1",
        "pepc-s1ap",
    ] {
        assert!(want.iter().any(|n| n == t), "{t} not planned: {planned}");
    }
    let mut node = node;
    let out = node.0.wait_with_output_ref();
    // `pepc run` logs its plan at start.
    assert!(
        out.contains("plan: threads (")
            && out.contains("SCTP-in-UDP 127.0.0.1:19845 (owner pepc-s1ap)"),
        "{out}"
    );
    // Each slice holds some of the UEs, and together all of them.
    let counts: Vec<u64> = (0..2)
        .map(|s| {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("slice {s}: ")) && l.ends_with(" UEs"))
                .unwrap_or_else(|| panic!("no UE count of slice {s} in: {out}"));
            line.split_whitespace().nth(2).unwrap().parse().unwrap()
        })
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), u64::from(ues), "{out}");
    assert!(counts.iter().all(|&c| c > 0), "{out}");
    assert!(out.contains("s1ap endpoint: 1 eNBs set up"), "{out}");
    let _ = std::fs::remove_dir_all(&dir);
}

trait WaitOutput {
    fn wait_with_output_ref(&mut self) -> String;
}

impl WaitOutput for Child {
    /// Waits (bounded) for the node to exit on its own and returns its stderr.
    fn wait_with_output_ref(&mut self) -> String {
        use std::io::Read;
        let t0 = Instant::now();
        while self.try_wait().expect("wait").is_none() {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "pepc run did not exit"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut s = String::new();
        if let Some(mut e) = self.stderr.take() {
            let _ = e.read_to_string(&mut s);
        }
        s
    }
}
