//! `[s1mme]`'s SCTP tunables reach the associations: an eNB that falls silent (its
//! host gone: no SHUTDOWN, no ABORT) is declared gone after the configured heartbeat
//! interval and retransmissions, where the defaults (30 s heartbeats, 5 retransmissions
//! from a 1 s RTO) took about a minute.

mod common;

use common::enb::Enb;
use pepc::epc::{open_hss, Epc, EpcConfig};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[test]
fn a_silent_enb_is_declared_gone_by_the_configured_heartbeats() {
    let n = 73u8;
    let cfg = EpcConfig::parse(&format!(
        "[node]\nmax_users = 64\nslices = 2\n\
         [s1u]\nbind = \"127.0.{n}.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{n}.1:5202\"\nsink_peer = \"127.0.{n}.2:5201\"\n\
         [s1mme]\ntransport = \"udp\"\nbind = \"127.0.{n}.1\"\n\
         heartbeat_interval_s = 1\npath_max_retrans = 2\nrto_initial_ms = 200\nrto_min_ms = 100\nrto_max_ms = 400\n\
         [hss]\ndb = \":memory:\"\n[metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n"
    ))
    .expect("config");
    assert_eq!(
        cfg.transport.assoc.heartbeat_interval,
        Duration::from_secs(1)
    );
    assert_eq!(cfg.transport.assoc.path_max_retrans, 2);
    let hss = open_hss(&cfg.hss).expect("HSS");
    let epc = Epc::start(&cfg, hss).expect("node start");
    let enb = Enb::up(format!("127.0.{n}.1:9899").parse().unwrap());
    let enbs = &epc.endpoint.as_ref().unwrap().gauges.enbs;
    assert_eq!(enbs.load(Ordering::Relaxed), 1);
    // The eNB's host goes: its socket closes without a word on the wire, so the
    // node's heartbeats go unanswered.
    drop(enb);
    // 1 s of idle, then 3 heartbeats unanswered at RTOs of at most 400 ms: a few
    // seconds. The bound only keeps a broken build from hanging the test.
    let t = Instant::now();
    while enbs.load(Ordering::Relaxed) > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "the silent eNB is still there after 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    eprintln!("silent eNB declared gone after {:?}", t.elapsed());
    epc.stop();
}

/// One slice runs the endpoint inline: its association is in /metrics' gauges too,
/// with its state and heartbeats (sent every configured second, answered by the eNB
/// while it reads its socket).
#[test]
fn one_slice_publishes_its_association_and_heartbeats() {
    let n = 74u8;
    let cfg = EpcConfig::parse(&format!(
        "[node]\nmax_users = 64\nslices = 1\n\
         [s1u]\nbind = \"127.0.{n}.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{n}.1:5202\"\nsink_peer = \"127.0.{n}.2:5201\"\n\
         [s1mme]\ntransport = \"udp\"\nbind = \"127.0.{n}.1\"\nheartbeat_interval_s = 1\n\
         [hss]\ndb = \":memory:\"\n[metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n"
    ))
    .expect("config");
    let hss = open_hss(&cfg.hss).expect("HSS");
    let epc = Epc::start(&cfg, hss).expect("node start");
    assert!(
        epc.endpoint.is_none(),
        "one slice: the endpoint runs inline"
    );
    let mut enb = Enb::up(format!("127.0.{n}.1:9899").parse().unwrap());
    let sctp = epc.gauges[0].sctp.clone();
    let t = Instant::now();
    let view = loop {
        // The eNB reads its socket (and so answers the node's heartbeats).
        enb.recv(Duration::from_millis(100));
        let v = sctp.assocs.lock().unwrap().clone();
        if let Some(a) = v.first().filter(|a| a.counters.heartbeat_acks >= 1) {
            break a.clone();
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no answered heartbeat published after 20 s: {v:?}"
        );
    };
    assert_eq!(sctp.up.load(Ordering::Relaxed), 1);
    assert_eq!(view.state.name(), "ESTABLISHED");
    assert!(view.counters.heartbeats_sent >= view.counters.heartbeat_acks);
    assert!(view.srtt.is_some(), "{view:?}");
    let summary = epc.stop();
    assert!(summary.contains("heartbeats ("), "{summary}");
}
