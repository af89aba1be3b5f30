//! A second `pepc run` on what a running one holds: every address
//! (S1-MME, S1-U in a SO_REUSEPORT group, SGi, API, metrics) and the HSS and state
//! files is refused at start, naming the key and the pepc that holds it. Before, the
//! S1-U/SGi sockets joined the first node's (SO_REUSEADDR / SO_REUSEPORT), a taken API
//! or metrics port was logged and the node ran on, and a held HSS file said only
//! "Database already open".

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// A node's configuration: everything on 127.0.`net`.1, files in `dir`.
fn config(net: u8, dir: &Path) -> String {
    format!(
        "[node]\nslices = 2\ndemux = \"queues\"\nmax_users = 1024\n\
         [s1u]\nbind = \"127.0.{net}.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{net}.1:5202\"\nsink_peer = \"127.0.{net}.2:5201\"\n\
         [s1mme]\ntransport = \"udp\"\nbind = \"127.0.{net}.1\"\nudp_port = 9899\n\
         [hss]\ndb = \"{}\"\n\
         [state]\npath = \"{}\"\n\
         [api]\nlisten = \"127.0.{net}.1:8080\"\n\
         [metrics]\nlisten = \"127.0.{net}.1:9090\"\n",
        dir.join("hss.redb").display(),
        dir.join("state.redb").display(),
    )
}

/// Kills the first node when the test ends, whatever happened.
struct Running(Child);
impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_second_node_on_what_the_first_holds_is_refused_naming_it() {
    let dir = std::env::temp_dir().join(format!("pepc-ports-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (a_dir, b_dir) = (dir.join("a"), dir.join("b"));
    std::fs::create_dir_all(&a_dir).unwrap();
    std::fs::create_dir_all(&b_dir).unwrap();
    let a_cfg = dir.join("a.toml");
    std::fs::write(&a_cfg, config(67, &a_dir)).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args(["run", "--seconds", "120", "--config"])
        .arg(&a_cfg)
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let a = Running(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    // Up once it says so (after every port and file is open).
    loop {
        let l = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the first node did not come up");
        if l.contains("pepc node:") {
            break;
        }
    }
    let pid = a.0.id();
    let b = config(68, &b_dir);
    let a_text = config(67, &a_dir);
    // The line of `key` in `section` of A's configuration.
    let a_line = |section: &str, key: &str| {
        let mut cur = "";
        for l in a_text.lines() {
            if l.starts_with('[') {
                cur = l;
            } else if cur == section && l.starts_with(&format!("{key} =")) {
                return l.to_string();
            }
        }
        panic!("{section} {key}")
    };
    let held = format!("held by pepc (pid {pid})");
    let another = "another pepc holds".to_string();
    // One clash each: B's own configuration with one line of A's.
    for (section, key, says) in [
        ("[s1u]", "bind", &held),
        ("[sgi]", "sink_local", &held),
        ("[s1mme]", "bind", &held),
        ("[api]", "listen", &held),
        ("[metrics]", "listen", &held),
        ("[hss]", "db", &another),
        ("[state]", "path", &another),
    ] {
        // Replace `key` in `section` of B by A's line.
        let mut out = String::new();
        let mut cur = "";
        for l in b.lines() {
            if l.starts_with('[') {
                cur = l;
            }
            if cur == section && l.starts_with(&format!("{key} =")) {
                out += &a_line(section, key);
            } else {
                out += l;
            }
            out.push('\n');
        }
        let cfg = dir.join("b.toml");
        std::fs::write(&cfg, &out).unwrap();
        let o = common::output_within(
            Command::new(env!("CARGO_BIN_EXE_pepc"))
                .args(["run", "--seconds", "5", "--config"])
                .arg(&cfg)
                .env_remove("RUST_LOG"),
            Duration::from_secs(60),
        );
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{section} {key}: started: {err}");
        assert!(err.contains(says.as_str()), "{section} {key}: {err}");
        let name = format!("{}.{key}", &section[1..section.len() - 1]);
        let names_key = err.contains(&name)
            || (section == "[s1mme]" && err.contains("S1-MME"))
            || (section == "[s1u]" && err.contains("S1-U"))
            || (section == "[sgi]" && err.contains("SGi"))
            || (section == "[state]" && err.contains("state store"));
        assert!(names_key, "{section} {key}: {err}");
    }
    drop(a);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_hss_directory_is_named_by_its_key() {
    let dir = std::env::temp_dir().join(format!("pepc-nodir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("n.toml");
    let missing = dir.join("no-such-dir");
    std::fs::write(
        &cfg,
        config(69, &missing).replace("[state]\npath", "[state]\n# none\npath"),
    )
    .unwrap();
    let o = common::output_within(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(["run", "--seconds", "1", "--config"])
            .arg(&cfg)
            .env_remove("RUST_LOG"),
        Duration::from_secs(60),
    );
    let _ = std::fs::remove_dir_all(&dir);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(
        err.contains("`hss.db`")
            && err.contains(&format!("directory {} does not exist", missing.display())),
        "{err}"
    );
}
