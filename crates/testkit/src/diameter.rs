//! The test Diameter peers of pepc-diameter (crates/diameter/tests/py/diam.py: an HSS
//! or a PCRF on pycrate, an independent codec) for the node tests: started on a free
//! loopback port, commands on their stdin, their JSON-lines log; killed on drop.

use std::io::{BufRead, Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PyPeer {
    child: Child,
    stdin: ChildStdin,
    pub log: std::path::PathBuf,
    pub port: u16,
}

impl Drop for PyPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl PyPeer {
    /// `kind`: hss | pcrf; `mode`: the peer's (see diam.py). `None` (said) when
    /// python3 with pycrate and cryptography is missing (scripts/test.sh installs them).
    pub fn start(dir: &std::path::Path, kind: &str, mode: &str) -> Option<PyPeer> {
        let ok = Command::new("python3")
            .args(["-c", "import pycrate_diameter.Diameter3GPP, cryptography"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("SKIP: python3 with pycrate_diameter and cryptography missing (scripts/test.sh installs them)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../diameter/tests/py/diam.py");
        let log = dir.join(format!("{kind}-{port}.log"));
        let mut cmd = Command::new("python3");
        cmd.args([script, kind, &port.to_string()])
            .arg(&log)
            .args([kind, mode]);
        if kind == "hss" {
            cmd.arg(""); // no requests after each ULA
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 6];
        child.stdout.take().unwrap().read_exact(&mut ready).unwrap();
        let stdin = child.stdin.take().unwrap();
        Some(PyPeer {
            child,
            stdin,
            log,
            port,
        })
    }

    pub fn command(&mut self, c: &str) {
        writeln!(self.stdin, "{c}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Its log so far: one JSON object a line.
    pub fn log(&self) -> Vec<serde_json::Value> {
        let Ok(f) = std::fs::File::open(&self.log) else {
            return vec![];
        };
        std::io::BufReader::new(f)
            .lines()
            .map_while(Result::ok)
            .filter_map(|l| serde_json::from_str(&l).ok())
            .collect()
    }

    /// Waits (bounded) until a log line satisfies `f`; returns it.
    pub fn wait_log(
        &self,
        what: &str,
        f: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(v) = self.log().into_iter().find(|v| f(v)) {
                return v;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("the peer never logged {what}: {:?}", self.log());
    }
}
