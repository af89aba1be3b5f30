//! Shared by the interop tests: the independent codec (pycrate_diameter, through
//! tests/py/diam.py), bounded child processes, the test HSS.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/diam.py")
}

/// `Err(reason)` when python3 with pycrate_diameter is not there (scripts/test.sh
/// installs it): the caller prints the reason and skips.
pub fn pycrate() -> Result<(), String> {
    let out = Command::new("python3")
        .args(["-c", "import pycrate_diameter.Diameter3GPP"])
        .output()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "pycrate_diameter missing (pip install pycrate==0.8.1): {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

#[macro_export]
macro_rules! need_pycrate {
    () => {
        if let Err(why) = common::pycrate() {
            eprintln!("SKIP: {why}");
            return;
        }
    };
}

/// Runs `diam.py <mode>` with `lines` on stdin, within 60 s.
fn run_lines(mode: &str, lines: &[String]) -> Vec<String> {
    let mut child = Command::new("python3")
        .arg(script())
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut input = child.stdin.take().unwrap();
    let text = lines.join("\n") + "\n";
    let w = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let mut out = child.stdout.take().unwrap();
    let r = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            assert!(st.success(), "diam.py {mode} failed: {err}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("diam.py {mode} took over 60 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    w.join().unwrap();
    r.join().unwrap().lines().map(str::to_string).collect()
}

/// Each message decoded by pycrate (strictly), as its JSON tree.
pub fn py_decode(msgs: &[Vec<u8>]) -> Vec<Value> {
    let lines: Vec<String> = msgs.iter().map(hex::encode).collect();
    let out = run_lines("decode", &lines);
    assert_eq!(out.len(), msgs.len());
    out.iter()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert!(v.get("error").is_none(), "pycrate: {v}");
            v
        })
        .collect()
}

/// Each spec encoded by pycrate.
pub fn py_encode(specs: &[Value]) -> Vec<Vec<u8>> {
    let lines: Vec<String> = specs.iter().map(|s| s.to_string()).collect();
    run_lines("encode", &lines)
        .iter()
        .map(|l| hex::decode(l).unwrap())
        .collect()
}

/// The AVP `code` of `vendor` in a decoded list.
pub fn find(avps: &Value, code: u32, vendor: u32) -> Option<&Value> {
    avps.as_array()?
        .iter()
        .find(|a| a["code"] == code && a["vendor"] == vendor)
        .map(|a| &a["value"])
}

pub fn all(avps: &Value, code: u32, vendor: u32) -> Vec<&Value> {
    avps.as_array()
        .map(|v| {
            v.iter()
                .filter(|a| a["code"] == code && a["vendor"] == vendor)
                .map(|a| &a["value"])
                .collect()
        })
        .unwrap_or_default()
}

pub fn avp(code: u32, vendor: u32, value: Value) -> Value {
    serde_json::json!({"code": code, "vendor": vendor, "M": 1, "value": value})
}

pub fn hexv(b: &[u8]) -> Value {
    serde_json::json!({ "hex": hex::encode(b) })
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct TempDir(pub PathBuf);
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
pub fn temp_dir(tag: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("pepc-diameter-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// A test HSS or PCRF (tests/py/diam.py hss|pcrf) on 127.0.0.1:port; killed on drop.
pub struct TestHss {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    pub port: u16,
    pub log: PathBuf,
}

/// The test PCRF: the same process shape.
pub type TestPcrf = TestHss;

impl TestHss {
    /// `mode`: normal | silent (no S6a answers) | reset (RST on the first S6a request)
    /// | mute (answers CER only); `after_ulr`: requests it sends after each ULA
    /// ("clr", "idr", "bogus").
    pub fn start(dir: &Path, name: &str, port: u16, mode: &str, after_ulr: &str) -> TestHss {
        Self::spawn(dir, &["hss"], name, port, &[mode, after_ulr])
    }

    /// The test PCRF; `mode`: normal | reject | silent | reset | mute. Commands on
    /// its stdin ([`TestHss::command`]): "rar-install IMSI NAME PORT",
    /// "rar-remove IMSI NAME", "rar-unknown IMSI x".
    pub fn start_pcrf(dir: &Path, name: &str, port: u16, mode: &str) -> TestPcrf {
        Self::spawn(dir, &["pcrf"], name, port, &[mode])
    }

    fn spawn(dir: &Path, kind: &[&str], name: &str, port: u16, rest: &[&str]) -> TestHss {
        let log = dir.join(format!("{name}.log"));
        let mut child = Command::new("python3")
            .arg(script())
            .args(kind)
            .arg(port.to_string())
            .arg(&log)
            .arg(name)
            .args(rest)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs");
        // Wait for its "ready" line (bounded).
        let mut out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut b = [0u8; 6];
            let _ = tx.send(out.read_exact(&mut b).is_ok());
            // Keep the pipe open until the child ends.
            let mut rest = Vec::new();
            let _ = out.read_to_end(&mut rest);
        });
        let ok = rx.recv_timeout(Duration::from_secs(20)).unwrap_or(false);
        let stdin = child.stdin.take();
        let mut h = TestHss {
            child,
            stdin,
            port,
            log,
        };
        assert!(ok, "test {} {name} did not start", kind[0]);
        h.child.try_wait().unwrap();
        h
    }

    /// A line on its stdin (a command).
    pub fn command(&mut self, line: &str) {
        let s = self.stdin.as_mut().expect("stdin");
        writeln!(s, "{line}").unwrap();
        s.flush().unwrap();
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Its log: one JSON object a line.
    pub fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Waits (bounded) until `pred` holds for some log line; returns it.
    pub fn wait_log(&self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let t0 = Instant::now();
        loop {
            if let Some(v) = self.log().into_iter().find(|v| pred(v)) {
                return v;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "HSS log never showed {what}: {:?}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for TestHss {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
