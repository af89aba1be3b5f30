//! The `pepc` command's rough edges, on the real binary: a closed
//! pipe is no panic, `pepc ctl` names the URL it talked to, bad numbers are refused
//! naming the flag, and `pepc ran` fails when a procedure failed.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pepc(args: &[&str]) -> (bool, Option<i32>, String) {
    let o = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(args)
            .env_remove("RUST_LOG"),
        Duration::from_secs(60),
    );
    (
        o.status.success(),
        o.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// A one-request-at-a-time HTTP server on `addr` answering every request with
/// `status` and `body`, for as long as the test runs.
fn http_server(addr: &str, status: &'static str, body: String) -> String {
    let l = TcpListener::bind(addr).unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 2) {
                line.clear();
            }
            let _ = write!(
                s,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[test]
fn a_closed_stdout_is_no_panic() {
    // 20,000 UEs: the table is far more than a pipe holds, so the write after the
    // reader has gone fails (EPIPE).
    let items: Vec<String> = (0..20_000)
        .map(|i| {
            format!(
                r#"{{"imsi":"0010100000{i:05}","slice":0,"emm":"registered","ecm":"connected","tai":{{"tac":1}},"mme_ue_s1ap_id":{i},"procedure":null}}"#
            )
        })
        .collect();
    let body = format!(r#"{{"items":[{}],"total":20000}}"#, items.join(","));
    let url = http_server("127.0.66.1:0", "200 OK", body);
    let mut child = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args(["ctl", "--api", &url, "ues", "--limit", "20000"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // As `| head -1`: read one line, then close the pipe.
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    drop(out);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "pepc ctl still runs");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(first.starts_with("IMSI"), "{first}");
    assert!(!err.contains("panicked"), "{err}");
    assert_ne!(status.code(), Some(101), "{err}");
}

#[test]
fn ctl_names_the_url_of_a_server_that_is_not_the_api() {
    let url = http_server("127.0.66.2:0", "404 Not Found", String::new());
    let (ok, _, out) = pepc(&["ctl", "--api", &url, "ues"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("{url}/api/v1/ues")) && out.contains("404"),
        "{out}"
    );
    let url = http_server("127.0.66.3:0", "200 OK", "<html>hello</html>".into());
    let (ok, _, out) = pepc(&["ctl", "--api", &url, "node"]);
    assert!(!ok, "{out}");
    assert!(
        out.contains(&format!("{url}/api/v1/node")) && out.contains("not pepc's management API"),
        "{out}"
    );
}

#[test]
fn bad_numbers_are_refused_naming_the_flag() {
    for args in [
        &["run", "--seconds", "-1"][..],
        &["run", "--seconds", "soon"],
        &["demo", "--seconds", "-1"],
        &["ran", "--attach-rate", "-5"],
        &["ran", "--ues", "0"],
    ] {
        let (ok, code, out) = pepc(args);
        assert!(!ok, "{args:?}: {out}");
        assert_eq!(code, Some(2), "{args:?}: a usage error: {out}");
        assert!(out.contains(args[1]), "{args:?}: {out}");
        assert!(!out.contains("unexpected argument"), "{args:?}: {out}");
    }
    let (_, _, out) = pepc(&["run", "--seconds", "-1"]);
    assert!(out.contains("≥ 0"), "{out}");
}

#[test]
fn ran_fails_when_a_procedure_failed() {
    // A node whose HSS knows none of the emulator's subscribers: every attach is
    // rejected, the emulator still runs to its end.
    let n = 66u8;
    let _epc = common::node::node(n, 0, "[metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n");
    let (ok, _, out) = pepc(&[
        "ran",
        "--mme",
        &format!("127.0.{n}.1:9899"),
        "--local",
        &format!("127.0.{n}.2"),
        "--gtpu-local",
        &format!("127.0.{n}.2:2152"),
        "--pdn-local",
        &format!("127.0.{n}.2:5201"),
        "--sgi-peer",
        &format!("127.0.{n}.1:5202"),
        "--ues",
        "2",
        "--seconds",
        "0",
        "--timeout",
        "2",
        "--quiet",
    ]);
    assert!(!ok, "{out}");
    assert!(
        out.contains("procedures failed") && out.contains("attach"),
        "{out}"
    );
}

#[test]
fn ran_shuts_its_associations_down_before_it_exits() {
    // UEs left attached (detach_at_end = false): the node learns the eNB is gone from
    // the SCTP shutdown, not ~1 min later from retransmissions running out.
    let n = 71u8;
    let epc = common::node::node(n, 2, "");
    let dir = std::env::temp_dir().join(format!("pepc-ran-shutdown-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scen = dir.join("s.toml");
    std::fs::write(
        &scen,
        "ues = 2\nattach_rate = 100\nduration_s = 0\ndrain_s = 0\ndetach_at_end = false\n",
    )
    .unwrap();
    let (ok, _, out) = pepc(&[
        "ran",
        "--scenario",
        scen.to_str().unwrap(),
        "--mme",
        &format!("127.0.{n}.1:9899"),
        "--local",
        &format!("127.0.{n}.2"),
        "--gtpu-local",
        &format!("127.0.{n}.2:2152"),
        "--pdn-local",
        &format!("127.0.{n}.2:5201"),
        "--sgi-peer",
        &format!("127.0.{n}.1:5202"),
        "--quiet",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{out}");
    let enbs = &epc.endpoint.as_ref().unwrap().gauges.enbs;
    // The shutdown completed before `pepc ran` exited; the node's endpoint thread
    // takes its turn to drop the eNB (bounded far below the ~1 min of a timeout).
    let t = Instant::now();
    while enbs.load(std::sync::atomic::Ordering::Relaxed) > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "the node still has the eNB: its association was not shut down"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    epc.stop();
}

#[test]
fn a_closed_stderr_is_no_panic() {
    // `pepc run 2>&1 | head -1`: the stop summary goes to a pipe nobody reads.
    let dir = std::env::temp_dir().join(format!("pepc-stderr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("n.toml");
    std::fs::write(
        &cfg,
        "[s1u]\nbind = \"127.0.74.1:2152\"\n[sgi]\nmode = \"udp\"\n\
         sink_local = \"127.0.74.1:5202\"\nsink_peer = \"127.0.74.2:5201\"\n\
         [s1mme]\ntransport = \"udp\"\nbind = \"127.0.74.1\"\n\
         [hss]\ndb = \":memory:\"\n[api]\nlisten = \"\"\n[metrics]\nlisten = \"\"\n",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args(["run", "--seconds", "0.3", "--config"])
        .arg(&cfg)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "pepc run still runs");
        std::thread::sleep(Duration::from_millis(20));
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "{status:?}");
}

/// `pepc completions bash` is a script bash accepts, offering the commands.
#[test]
fn bash_completions_parse_and_offer_the_commands() {
    let (ok, _, out) = pepc(&["completions", "bash"]);
    assert!(ok, "{out}");
    for c in ["run", "demo", "ctl", "plan", "replay", "subscriber"] {
        assert!(out.contains(c), "no {c} in the completions");
    }
    let dir = std::env::temp_dir().join(format!("pepc-compl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("pepc.bash");
    std::fs::write(&f, &out).unwrap();
    // Sourced into bash, it registers its function for pepc.
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!("source {} && complete -p pepc", f.display()))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(said.contains("-F _pepc"), "{said}");
    let (ok, _, zsh) = pepc(&["completions", "zsh"]);
    assert!(ok && zsh.starts_with("#compdef pepc"), "{zsh}");
    let (ok, _, fish) = pepc(&["completions", "fish"]);
    assert!(ok && fish.contains("complete -c pepc"), "{fish}");
    let (ok, _, bad) = pepc(&["completions", "tcsh"]);
    assert!(!ok && bad.contains("tcsh"), "{bad}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pepc man --dir D` writes a page per command that man(1) renders; `pepc man`
/// prints pepc(1).
#[test]
fn man_pages_render() {
    let dir = std::env::temp_dir().join(format!("pepc-man-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (ok, _, out) = pepc(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(ok, "{out}");
    for page in ["pepc.1", "pepc-run.1", "pepc-ctl-ues.1", "pepc-plan.1"] {
        assert!(dir.join(page).exists(), "no {page}");
    }
    let o = Command::new("man")
        .arg("-l")
        .arg(dir.join("pepc-run.1"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text.contains("--config"), "{text}");
    let (ok, _, page) = pepc(&["man"]);
    assert!(ok && page.contains(".TH pepc 1"), "{page}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `pepc --version` names the commit it was built from.
#[test]
fn version_names_the_commit() {
    let (ok, _, out) = pepc(&["--version"]);
    assert!(ok, "{out}");
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    match head {
        Some(h) => assert!(out.contains(&h), "{out} does not name {h}"),
        None => assert!(out.contains("unknown commit"), "{out}"),
    }
}

/// `pepc config default` is a file `pepc run --config` takes unchanged; `pepc config
/// check` says so, and names the key and line of a bad one.
#[test]
fn the_default_configuration_is_a_valid_file() {
    let (ok, _, text) = pepc(&["config", "default"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("[node]") && text.contains("[debug]"),
        "{text}"
    );
    let dir = std::env::temp_dir().join(format!("pepc-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("pepc.toml");
    std::fs::write(&f, &text).unwrap();
    let (ok, _, said) = pepc(&["config", "check", f.to_str().unwrap()]);
    assert!(ok && said.contains("valid"), "{said}");
    std::fs::write(&f, text.replace("slices = 1", "slicez = 1")).unwrap();
    let (ok, _, said) = pepc(&["config", "check", f.to_str().unwrap()]);
    assert!(!ok && said.contains("slicez"), "{said}");
    let (ok, _, md) = pepc(&["config", "docs"]);
    assert!(ok && md.starts_with("# Configuration"), "{md}");
    let _ = std::fs::remove_dir_all(&dir);
}
