//! `pepc demo` end to end: a node (MME over userspace SCTP, slice data path, embedded
//! HSS) driven by the emulator on loopback. Attaches, traffic, detaches all succeed
//! with no loss; with `--hold` the UEs stay attached with traffic flowing until
//! SIGINT, then are detached and reported. Uses the demo's fixed loopback ports (9899,
//! 2152, 5201, 5202, the API's 8080), under their lock.

mod common;

use std::io::{BufRead, Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn demo_attaches_exchanges_traffic_and_detaches() {
    let _ports = common::demo_ports_lock();
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

/// GET `path` of the API at `addr`: its JSON body.
fn get(addr: &str, path: &str) -> serde_json::Value {
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: pepc\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    serde_json::from_str(r.split_once("\r\n\r\n").unwrap().1).unwrap()
}

/// The slices' sum of `field`.
fn total(slices: &serde_json::Value, field: &str) -> u64 {
    slices
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[field].as_u64().unwrap())
        .sum()
}

/// A child process killed when dropped (a failed assertion leaves nothing running).
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn demo_hold_keeps_the_ues_attached_with_traffic_until_sigint_then_detaches() {
    let _ports = common::demo_ports_lock();
    let ues = 20;
    let mut child = Killed(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(["demo", "--ues", "20", "--seconds", "0", "--events", "0"])
            .args(["--pps", "500", "--json", "--hold"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let (tx, lines) = mpsc::channel();
    let stderr = child.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(stderr).lines() {
            if tx.send(l.unwrap_or_default()).is_err() {
                break;
            }
        }
    });
    let mut stdout = child.0.stdout.take().unwrap();
    let report = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    // The attach phase over, the demo says it holds (and where its console is).
    let mut said = Vec::new();
    let holding = loop {
        match lines.recv_timeout(Duration::from_secs(120)) {
            Ok(l) if l.contains("(--hold)") => break l,
            Ok(l) => said.push(l),
            Err(e) => panic!("no hold notice ({e}): {said:?}"),
        }
    };
    assert!(
        holding.contains(&format!("holding {ues} UEs attached")),
        "{holding}"
    );

    // Held: past where `--seconds 0` would have ended, the UEs are still attached and
    // packets keep being forwarded (when the API's port was free for the demo).
    std::thread::sleep(Duration::from_secs(2));
    match holding
        .split_once("console at http://")
        .and_then(|(_, r)| r.split_once('/'))
    {
        Some((api, _)) => {
            let a = get(api, "/api/v1/slices");
            assert_eq!(total(&a, "ue_registered"), ues, "{a}");
            assert_eq!(total(&a, "ue_connected"), ues, "{a}");
            let t = Instant::now();
            let moved = loop {
                std::thread::sleep(Duration::from_millis(500));
                let b = get(api, "/api/v1/slices");
                if total(&b, "ul_forwarded") > total(&a, "ul_forwarded")
                    && total(&b, "dl_forwarded") > total(&a, "dl_forwarded")
                {
                    break true;
                }
                if t.elapsed() > Duration::from_secs(10) {
                    break false;
                }
            };
            assert!(moved, "no packet forwarded while held");
            assert_eq!(total(&get(api, "/api/v1/slices"), "ue_registered"), ues);
        }
        None => eprintln!("the demo's API was off (port taken): {holding}"),
    }
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the demo ended on its own"
    );

    // Ctrl-C: the UEs are detached, the report printed, exit 0.
    let pid = child.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the demo still ran 120 s after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let stdout = report.join().unwrap();
    let rest: Vec<String> = lines.iter().collect();
    assert!(status.success(), "{status}: {stdout}\n{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("stopping (signal)")),
        "{rest:?}"
    );
    let r: serde_json::Value = serde_json::from_str(stdout.trim()).expect("JSON report");
    assert_eq!(r["attached"], ues, "{r}");
    assert_eq!(r["failed"], 0, "{r}");
    assert_eq!(r["lost"], 0, "{r}");
    assert_eq!(r["procedures"]["detach"]["ok"], ues, "{r}");
    assert!(r["ul_packets"].as_u64().unwrap() > 0, "{r}");
    assert!(r["dl_packets"].as_u64().unwrap() > 0, "{r}");
    // Held for the seconds waited above, though `--seconds 0` was asked.
    assert!(r["duration_s"].as_f64().unwrap() > 2.0, "{r}");
}
