//! Restart without re-attach: `kill -9` of `pepc run` and a restart with the
//! same files loses no registered UE. A small eNB here (userspace SCTP over UDP, real
//! S1AP, and the MME crate's scripted UE for NAS security) attaches UEs to the node,
//! leaves some idle and some connected, and the node is killed; the restarted node
//! serves every UE's Service Request with its old security context and bearers.

mod common;

use common::enb::Enb;
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_sctp::transport::{S1Transport, TransportEvent};
use pepc_testkit::{subscriber, SimUe};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const UDP_PORT: u16 = 19911;
const UES: usize = 6;

const METRICS: &str = "127.0.42.1:19428";

fn imsi(i: usize) -> String {
    format!("00101{:010}", 4200 + i)
}

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_node(config: &Path, log: &Path, seconds: Option<u32>) -> Node {
    let mut args = vec![
        "run".to_string(),
        "--config".into(),
        config.to_str().unwrap().into(),
    ];
    if let Some(s) = seconds {
        args.extend(["--seconds".into(), s.to_string()]);
    }
    let child = Command::new(env!("CARGO_BIN_EXE_pepc"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("spawn pepc run");
    Node(child)
}

fn wait_exit(n: &mut Node, within: Duration) -> std::process::ExitStatus {
    let until = Instant::now() + within;
    loop {
        if let Some(s) = n.0.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < until, "pepc run did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn kill_9_and_restart_loses_no_registered_ue() {
    let dir = std::env::temp_dir().join(format!("pepc-restart-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("hss.redb");
    {
        let hss = pepc_hss::Hss::open(&db).unwrap();
        for i in 0..UES {
            hss.add(&subscriber(&imsi(i))).unwrap();
        }
    }
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[node]\nslices = 2\n[s1u]\nbind = \"127.0.42.1:2152\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:15212\"\nsink_peer = \"127.0.0.1:15211\"\n\
             [metrics]\nlisten = \"{METRICS}\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nudp_port = {UDP_PORT}\n[hss]\ndb = \"{}\"\n",
            db.display()
        ),
    )
    .unwrap();

    // First life: every UE attaches; the even ones go idle, the odd stay connected.
    let mut node = start_node(&config, &dir.join("first.log"), None);
    let mut enb = Enb::up(SocketAddr::from(([127, 0, 0, 1], UDP_PORT)));
    let mut ues: Vec<SimUe> = (0..UES)
        .map(|i| SimUe::new(&imsi(i), 10 + i as u32))
        .collect();
    for ue in ues.iter_mut() {
        let first = enb.initial(ue, ue.attach_request(None, false), None);
        let seen = enb.pump(ue, first);
        assert!(
            ue.received.iter().any(|r| r == "AttachAccept"),
            "attach: {seen:?} {:?}",
            ue.received
        );
    }
    for ue in ues.iter_mut().step_by(2) {
        enb.send(
            UeContextReleaseRequest {
                mme_ue_id: ue.mme_ue_id.unwrap(),
                enb_ue_id: ue.enb_ue_id,
                cause: Cause::USER_INACTIVITY,
            }
            .into(),
        );
        let r = enb.recv(Duration::from_secs(3));
        enb.pump(ue, r);
    }
    // Checkpoints are durable within ~10 ms of each procedure's end.
    std::thread::sleep(Duration::from_millis(300));
    // /metrics says so: a record per registered UE at least, committed, and the
    // longest procedure-end-to-durable delay (what a kill -9 can lose).
    let m = common::scrape(METRICS);
    let records = common::sample(&m, "pepc_checkpoint_records_total").unwrap_or(0);
    assert!(
        records >= UES as u64,
        "{records} checkpoints for {UES} UEs\n{m}"
    );
    assert!(
        common::sample(&m, "pepc_checkpoint_commits_total").unwrap_or(0) > 0,
        "{m}"
    );
    assert_eq!(
        common::sample(&m, "pepc_checkpoint_errors_total"),
        Some(0),
        "{m}"
    );
    assert!(
        common::sample(&m, "pepc_checkpoint_max_delay_us").is_some(),
        "{m}"
    );
    node.0.kill().unwrap(); // SIGKILL: no shutdown, nothing flushed on the way out
    node.0.wait().unwrap();
    drop(enb);

    // Second life, same files: the eNB sets up again and every UE comes back by
    // Service Request with the security context it has.
    let mut node = start_node(&config, &dir.join("second.log"), None);
    let mut enb = Enb::up(SocketAddr::from(([127, 0, 0, 1], UDP_PORT)));
    for (i, ue) in ues.iter_mut().enumerate() {
        ue.enb_ue_id = 100 + i as u32;
        let sr = ue.service_request();
        let t = ue.m_tmsi;
        let first = enb.initial(ue, sr, t);
        let seen = enb.pump(ue, first);
        assert_eq!(
            seen.first().map(String::as_str),
            Some("InitialContextSetupRequest"),
            "UE {i} after the restart: {seen:?}"
        );
        assert!(
            !ue.received.iter().any(|r| r.contains("Reject")),
            "{:?}",
            ue.received
        );
    }
    // SIGTERM: a graceful stop, checkpoints committed and figures printed, and the
    // association shut down (the eNB learns at once).
    // SAFETY: a signal to our own child.
    unsafe {
        libc::kill(node.0.id() as i32, libc::SIGTERM);
    }
    let until = Instant::now() + Duration::from_secs(10);
    let mut down = false;
    while !down && Instant::now() < until {
        enb.t
            .poll(Duration::from_millis(50), &mut enb.events)
            .unwrap();
        down = enb
            .events
            .drain(..)
            .any(|e| matches!(e, TransportEvent::Down { .. }));
    }
    assert!(down, "the node shut the association down at SIGTERM");
    drop(enb);
    let status = wait_exit(&mut node, Duration::from_secs(30));
    assert!(status.success());
    let log = std::fs::read_to_string(dir.join("second.log")).unwrap();
    assert!(
        log.contains(&format!("{UES} of {UES} found at start restored, 0 failed")),
        "{log}"
    );
    assert!(log.contains("stopping (signal)"), "{log}");
    // The MME's counters beside the data path's: no attach in the second life.
    assert!(log.contains("mme slice 0: 0 attaches"), "{log}");
    assert!(log.contains("mme slice 1: 0 attaches"), "{log}");
    for ue in &ues {
        let attaches = ue.received.iter().filter(|r| *r == "AttachAccept").count();
        assert_eq!(attaches, 1, "no re-attach: {:?}", ue.received);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
