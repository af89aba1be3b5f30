//! Tests that run processes and servers: a bounded `output()`, a `/metrics` scrape,
//! the lock on the demo's fixed ports.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `cmd.output()`, bounded: a child still running after `limit` is killed and the test
/// fails naming the command and what it printed, instead of hanging the test run.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = read(Box::new(child.stdout.take().expect("piped")));
    let err = read(Box::new(child.stderr.take().expect("piped")));
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for the child") {
            break Some(s);
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let Some(status) = status else {
        panic!(
            "{cmd:?} still ran after {limit:?} and was killed\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    Output {
        status,
        stdout,
        stderr,
    }
}

/// GET /metrics from `addr`: the body (the status line and content type checked).
pub fn scrape(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: pepc\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap();
    assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    assert!(r.contains("application/openmetrics-text"), "{r}");
    r.split_once("\r\n\r\n").unwrap().1.to_string()
}

/// The value of sample `name` (no labels) in a /metrics body.
pub fn sample(m: &str, name: &str) -> Option<u64> {
    m.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Held while a test uses the demo's fixed loopback ports (S1-MME 9899, S1-U 2152,
/// SGi 5201/5202, the API's 8080 on 127.0.0.1): an exclusive `flock` on
/// `/tmp/pepc-demo-ports.lock`, so such tests, in this binary or any other (another
/// checkout's test run on the same machine), take turns. Released when dropped.
pub fn demo_ports_lock() -> std::fs::File {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open("/tmp/pepc-demo-ports.lock")
        .expect("/tmp/pepc-demo-ports.lock");
    f.lock().expect("flock /tmp/pepc-demo-ports.lock");
    f
}
