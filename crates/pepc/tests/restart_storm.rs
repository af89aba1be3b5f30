//! Restart durability during an attach storm. The stated rule (docs/operations.md):
//! a registered UE's checkpoint is written at the end of each procedure and durable
//! a few ms later (group commit: a 4 ms window, then the fsync; the longest delay
//! seen is `pepc_checkpoint_max_delay_us`); a restart, even after kill -9, restores
//! every UE whose checkpoint was durable, and a procedure that ended in the last few
//! ms before the kill is lost (that UE attaches again).
//!
//! Here the emulator storms `pepc run` (2 slices, SCTP over UDP) and notes when each
//! UE's Attach Complete left its eNB; the node is killed (SIGKILL) in mid-storm. Every
//! UE whose attach completed at the eNB more than W before the kill must be in the
//! state store and restored by the next start, W being the window the README names
//! as measured by the node itself just before the kill (`pepc_checkpoint_max_delay_us`,
//! group window + fsync) plus the time the Attach Complete takes to reach the node's
//! MME, which the eNB cannot see (bounded here by what the node's own attach latency
//! histogram shows is its queueing: see `DELIVERY`).

mod common;

use pepc::demo::emulator_subscribers;
use pepc_emulator::config::{SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{Emulator, EmulatorConfig, Scenario};
use pepc_store::StateStore;
use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const UDP_PORT: u16 = 19_750;
const METRICS: &str = "127.0.78.1:19751";
const UES: u32 = 3000;
const RATE: f64 = 500.0;
/// The eNB's Attach Complete to the node's MME: loopback, the endpoint thread and
/// the control thread's queue. A debug build on 2 shared cores, at a rate the node
/// keeps up with (no overload): well under this.
const DELIVERY: Duration = Duration::from_millis(50);

struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start(config: &std::path::Path, log: &std::path::Path, seconds: Option<u32>) -> Node {
    let mut args = vec![
        "run".to_string(),
        "--config".into(),
        config.display().to_string(),
    ];
    if let Some(s) = seconds {
        args.extend(["--seconds".into(), s.to_string()]);
    }
    Node(
        Command::new(env!("CARGO_BIN_EXE_pepc"))
            .args(&args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .expect("spawn pepc run"),
    )
}

fn scrape_when_up(within: Duration) -> String {
    let until = Instant::now() + within;
    loop {
        if std::net::TcpStream::connect(METRICS).is_ok() {
            return common::scrape(METRICS);
        }
        assert!(Instant::now() < until, "the node's /metrics never came up");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn kill_9_in_an_attach_storm_restores_every_ue_attached_before_the_window() {
    let dir = std::env::temp_dir().join(format!("pepc-restart-storm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("hss.redb");
    let keys = SubscriberKeys::default();
    {
        let hss = pepc_hss::Hss::open(&db).unwrap();
        hss.add_many(&emulator_subscribers(&keys, UES).unwrap())
            .unwrap();
    }
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!(
            "[node]\nslices = 2\nmax_users = 8192\n[s1u]\nbind = \"127.0.78.1:2152\"\n\
             [sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:15750\"\nsink_peer = \"127.0.0.1:15751\"\n\
             [metrics]\nlisten = \"{METRICS}\"\n[api]\nlisten = \"\"\n\
             [s1mme]\ntransport = \"udp\"\nudp_port = {UDP_PORT}\n[hss]\ndb = \"{}\"\n",
            db.display()
        ),
    )
    .unwrap();

    let mut node = start(&config, &dir.join("first.log"), None);
    scrape_when_up(Duration::from_secs(20));

    // The storm, from a thread: each completion noted with its time.
    let done: Arc<Mutex<Vec<(usize, Instant)>>> = Arc::default();
    let d = done.clone();
    let ecfg = EmulatorConfig {
        mme_udp_port: UDP_PORT,
        gtpu_addr: SocketAddrV4::new(Ipv4Addr::new(127, 0, 78, 2), 2152),
        sgi_peer: Some(SocketAddr::from(([127, 0, 0, 1], 15750))),
        pdn_addr: SocketAddr::from(([127, 0, 0, 1], 15751)),
        enbs: 2,
        progress: false,
        ..EmulatorConfig::default()
    };
    let scen = Scenario {
        ues: UES,
        attach_rate: RATE,
        duration_s: 0.0,
        event_rate: 0.0,
        detach_at_end: false,
        drain_s: 0.0,
        timeout_s: 2.0,
        traffic: Traffic {
            profile: TrafficProfile::None,
            rate_pps: 0.0,
        },
        ..Scenario::default()
    };
    let storm = std::thread::spawn(move || {
        let emu = Emulator::new(ecfg, scen).expect("emulator");
        let _ = emu
            .on_attached(Box::new(move |u| {
                d.lock().unwrap().push((u, Instant::now()))
            }))
            .run();
    });

    // Kill once a good part of the storm is through, the node's commit delay read
    // just before (the last scrape).
    let mut max_delay_us = 0;
    let until = Instant::now() + Duration::from_secs(30);
    while done.lock().unwrap().len() < UES as usize / 2 {
        assert!(Instant::now() < until, "the storm did not get going");
        let m = common::scrape(METRICS);
        max_delay_us = common::sample(&m, "pepc_checkpoint_max_delay_us").unwrap_or(0);
        std::thread::sleep(Duration::from_millis(20));
    }
    let killed = Instant::now();
    node.0.kill().unwrap(); // SIGKILL, mid-storm
    node.0.wait().unwrap();
    storm.join().unwrap();
    let done = std::mem::take(&mut *done.lock().unwrap());

    // What the store holds is what a restart restores (checked below by restarting).
    let stored: HashSet<u64> = {
        let s = pepc_store::EmbeddedStore::open(&dir.join("hss.state.redb")).unwrap();
        s.load_all()
            .unwrap()
            .into_iter()
            .map(|(imsi, _)| imsi)
            .collect()
    };
    let imsi = |u: usize| keys.imsi(u as u32).unwrap().parse::<u64>().unwrap();
    let window = Duration::from_micros(max_delay_us) + DELIVERY;
    let before_kill: Vec<(usize, Duration)> = done
        .iter()
        .filter(|(_, t)| *t <= killed)
        .map(|&(u, t)| (u, killed - t))
        .collect();
    let lost: Vec<(usize, Duration)> = before_kill
        .iter()
        .filter(|(u, _)| !stored.contains(&imsi(*u)))
        .copied()
        .collect();
    let oldest_lost = lost.iter().map(|l| l.1).max().unwrap_or_default();
    eprintln!(
        "attached at the eNB before the kill: {}, checkpoints in the store: {}, lost: {} \
         (the oldest completed {:?} before the kill); node's longest commit delay {} µs, \
         window checked {:?}",
        before_kill.len(),
        stored.len(),
        lost.len(),
        oldest_lost,
        max_delay_us,
        window
    );
    assert!(
        before_kill.len() >= UES as usize / 2,
        "{} attached",
        before_kill.len()
    );
    assert!(
        max_delay_us > 0,
        "the node measured its commit delay before the kill"
    );
    let late: Vec<_> = lost.iter().filter(|(_, age)| *age > window).collect();
    assert!(
        late.is_empty(),
        "{} UEs attached more than {window:?} before the kill are not in the store: {:?}",
        late.len(),
        &late[..late.len().min(10)]
    );

    // The restart restores them all (and nothing the eNB did not see attached).
    let mut node = start(&config, &dir.join("second.log"), Some(2));
    let until = Instant::now() + Duration::from_secs(60);
    while node.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "the restarted node did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = std::fs::read_to_string(dir.join("second.log")).unwrap();
    let n = stored.len();
    assert!(
        log.contains(&format!("{n} of {n} found at start restored, 0 failed")),
        "{log}"
    );
    let attached: HashSet<u64> = done.iter().map(|&(u, _)| imsi(u)).collect();
    assert!(
        stored.iter().all(|i| attached.contains(i)),
        "a checkpoint for a UE the eNB never saw attached"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
