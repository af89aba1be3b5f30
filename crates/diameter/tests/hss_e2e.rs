//! The S6a client on its TCP driver against a test HSS written on an independent
//! codec (tests/py/diam.py, pycrate), over loopback: vectors, profiles, resync,
//! unknown users, CLR/IDR from the HSS, an HSS that never answers, a connection
//! reset, watchdog failover, and failback to a primary that returns.

mod common;

use common::{free_port, temp_dir, TestHss};
use pepc_diameter::base;
use pepc_diameter::driver::{DriverConfig, S6aDriver};
use pepc_diameter::s6a::{S6aConfig, S6aEvent};
use pepc_seams::hss::{HssData, SubscriptionUpdate};
use pepc_seams::PdnType;
use pepc_seams::{HssAnswer, HssFailure, HssRef, HssRequest};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const IMSI: u64 = 1010000000001;
const PLMN: [u8; 3] = [0x00, 0xf1, 0x10];

fn config(peers: Vec<String>) -> DriverConfig {
    let mut b = base::Config::new("mme.pepc.test", "pepc.test");
    b.watchdog = Duration::from_millis(300);
    b.reconnect = Duration::from_millis(200);
    b.cea_timeout = Duration::from_secs(1);
    b.request_timeout = Duration::from_secs(3);
    DriverConfig {
        peers,
        base: b,
        app: S6aConfig {
            destination_realm: "test".into(),
            destination_host: None,
            visited_plmn: PLMN,
        },
        connect_timeout: Duration::from_millis(500),
    }
}

fn wait_up(d: &S6aDriver) {
    let t0 = Instant::now();
    while !d.is_up() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no peer came up");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `n` answers, waiting on the driver's descriptor (bounded).
fn answers(d: &mut S6aDriver, n: usize, limit: Duration) -> Vec<HssAnswer> {
    let t0 = Instant::now();
    let mut got = vec![];
    while got.len() < n {
        assert!(
            t0.elapsed() < limit,
            "{} of {n} answers: {got:?}",
            got.len()
        );
        let mut p = libc::pollfd {
            fd: d.wake_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        unsafe { libc::poll(&mut p, 1, 50) };
        d.poll(&mut got);
    }
    got.sort_by_key(|a| a.r.seq);
    got
}

fn events(d: &mut S6aDriver, pred: impl Fn(&[S6aEvent]) -> bool) -> Vec<S6aEvent> {
    let t0 = Instant::now();
    let mut got = vec![];
    loop {
        d.poll_events(&mut got);
        if pred(&got) {
            return got;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "events: {got:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn r(seq: u32) -> HssRef {
    HssRef { mme_ue_id: 9, seq }
}

fn vector(seq: u32, imsi: u64) -> HssRequest {
    HssRequest::Vector {
        r: r(seq),
        imsi,
        plmn: PLMN,
    }
}

fn requests(h: &TestHss, cmd: u64) -> Vec<Value> {
    h.log()
        .into_iter()
        .filter(|v| v["event"] == "request" && v["cmd"] == cmd)
        .collect()
}

#[test]
fn vectors_profile_resync_unknown_users_and_hss_initiated_requests() {
    need_pycrate!();
    let dir = temp_dir("e2e-main");
    let hss = TestHss::start(&dir.0, "hss1", free_port(), "normal", "clr,idr,bogus");
    let mut d = S6aDriver::start(config(vec![hss.addr()])).unwrap();
    wait_up(&d);
    let (rand, auts) = ([0xabu8; 16], [0xcdu8; 14]);
    d.submit(vector(1, IMSI));
    d.submit(HssRequest::Resync {
        r: r(2),
        imsi: IMSI,
        plmn: PLMN,
        rand,
        auts,
    });
    d.submit(HssRequest::Profile {
        r: r(3),
        imsi: IMSI,
    });
    d.submit(vector(4, 999990000000001));
    d.submit(HssRequest::Profile {
        r: r(5),
        imsi: 1010000000099,
    });
    let got = answers(&mut d, 5, Duration::from_secs(10));

    // The vectors are the ones the HSS logged it sent, the resync one for our AUTS.
    let vectors: Vec<Value> = hss
        .log()
        .into_iter()
        .filter(|v| v["event"] == "vector")
        .collect();
    assert_eq!(vectors.len(), 2);
    let mut resync_hex = hex::encode(rand);
    resync_hex.push_str(&hex::encode(auts));
    let resync_req = requests(&hss, 318)
        .into_iter()
        .find(|v| v["resync"] != Value::Null)
        .expect("an AIR with Re-Synchronization-Info");
    assert_eq!(resync_req["resync"], json!(resync_hex));
    for a in &got[..2] {
        let Ok(HssData::Vector(v)) = &a.result else {
            panic!("{a:?}")
        };
        let sent = vectors
            .iter()
            .find(|s| s["rand"] == json!(hex::encode(v.rand)))
            .expect("a vector the HSS made");
        assert_eq!(sent["xres"], json!(hex::encode(v.xres)));
        assert_eq!(sent["autn"], json!(hex::encode(v.autn)));
        assert_eq!(sent["kasme"], json!(hex::encode(v.kasme.as_bytes())));
    }
    let Ok(HssData::Profile(p)) = &got[2].result else {
        panic!("{:?}", got[2])
    };
    assert_eq!(
        (
            p.msisdn.as_str(),
            p.apn.as_str(),
            p.pdn_type,
            p.qci,
            p.arp_priority
        ),
        ("46000000001", "internet", PdnType::Ipv4v6, 9, 8)
    );
    assert_eq!((p.ambr_ul_bps, p.ambr_dl_bps), (50_000_000, 100_000_000));
    assert_eq!(
        got[3].result.as_ref().err(),
        Some(&HssFailure::UnknownSubscriber)
    );
    assert_eq!(
        got[4].result.as_ref().err(),
        Some(&HssFailure::NoEpsSubscription)
    );
    assert!(requests(&hss, 316)
        .iter()
        .all(|v| v["dest_realm"] == "test" && v["T"] == 0));

    // After each ULA it sent a CLR, an IDR and an IDR with an unknown mandatory AVP.
    let ev = events(&mut d, |e| {
        e.iter()
            .filter(|x| matches!(x, S6aEvent::InsertSubscriberData { .. }))
            .count()
            >= 1
            && e.iter()
                .any(|x| matches!(x, S6aEvent::CancelLocation { .. }))
    });
    assert!(ev.contains(&S6aEvent::CancelLocation {
        imsi: "001010000000001".into(),
        cancellation_type: 2,
        reattach_required: false
    }));
    assert!(ev.iter().any(|e| matches!(e,
        S6aEvent::InsertSubscriberData { imsi, update: SubscriptionUpdate { ambr: Some((1000, 2000)), default_apn: Some(d) }, .. } if imsi == "001010000000001" && d.apn == "fast" && d.qci == 6)));
    // The IDA waits for the MME's word on the subscriber: known here.
    for e in &ev {
        if let S6aEvent::InsertSubscriberData { token, .. } = e {
            d.idr_outcome(*token, true);
        }
    }
    let results: Vec<(u64, u64, Value)> = {
        hss.wait_log("the answer to the bogus IDR", |v| {
            v["event"] == "answer" && v["result"] == 5001
        });
        hss.wait_log("the IDA", |v| {
            v["event"] == "answer" && v["cmd"] == 319 && v["result"] == 2001
        });
        hss.log()
            .into_iter()
            .filter(|v| v["event"] == "answer")
            .map(|v| {
                (
                    v["cmd"].as_u64().unwrap(),
                    v["result"].as_u64().unwrap(),
                    v["failed"].clone(),
                )
            })
            .collect()
    };
    assert!(results.contains(&(317, 2001, json!([]))), "{results:?}");
    assert!(results.contains(&(319, 2001, json!([]))), "{results:?}");
    assert!(
        results.contains(&(319, 5001, json!([99999]))),
        "{results:?}"
    );

    // PUR.
    d.purge(IMSI);
    events(&mut d, |e| {
        e.contains(&S6aEvent::Purged {
            imsi: "001010000000001".into(),
            result: Ok(()),
        })
    });
    assert!(hss.log().iter().all(|v| v["event"] != "undecodable"));
    drop(d);
    // Dropping the driver disconnects with DPR.
    hss.wait_log("a DPR", |v| v["event"] == "request" && v["cmd"] == 282);
}

#[test]
fn an_hss_that_never_answers_times_out() {
    need_pycrate!();
    let dir = temp_dir("e2e-silent");
    let hss = TestHss::start(&dir.0, "silent", free_port(), "silent", "");
    let mut cfg = config(vec![hss.addr()]);
    cfg.base.request_timeout = Duration::from_millis(500);
    let mut d = S6aDriver::start(cfg).unwrap();
    wait_up(&d);
    let t0 = Instant::now();
    d.submit(vector(1, IMSI));
    let got = answers(&mut d, 1, Duration::from_secs(5));
    assert_eq!(got[0].result.as_ref().err(), Some(&HssFailure::Timeout));
    assert!(
        t0.elapsed() >= Duration::from_millis(450),
        "{:?}",
        t0.elapsed()
    );
    let s = d.stats();
    assert_eq!((s.timeouts, s.answers), (1, 0));
    // The peer is still up: it answers watchdogs.
    assert!(d.is_up());
}

#[test]
fn a_peer_that_resets_the_connection_fails_over_to_the_second_with_the_t_flag() {
    need_pycrate!();
    let dir = temp_dir("e2e-reset");
    let bad = TestHss::start(&dir.0, "bad", free_port(), "reset", "");
    let good = TestHss::start(&dir.0, "good", free_port(), "normal", "");
    let mut d = S6aDriver::start(config(vec![bad.addr(), good.addr()])).unwrap();
    wait_up(&d);
    // Both up, so the request goes to the first.
    bad.wait_log("CER", |v| v["cmd"] == 257);
    good.wait_log("CER", |v| v["cmd"] == 257);
    std::thread::sleep(Duration::from_millis(200));
    d.submit(vector(1, IMSI));
    let got = answers(&mut d, 1, Duration::from_secs(10));
    assert!(matches!(got[0].result, Ok(HssData::Vector(_))), "{got:?}");
    let first = requests(&bad, 318);
    let second = requests(&good, 318);
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(first[0]["T"], 0);
    assert_eq!(second.len(), 1, "{second:?}");
    assert_eq!(second[0]["T"], 1, "retransmitted after failover");
    assert_eq!(
        first[0]["session"], second[0]["session"],
        "the same request"
    );
    assert!(d.stats().retransmits >= 1);
}

#[test]
fn watchdog_failover_from_a_mute_peer_and_failback_after_reopen() {
    need_pycrate!();
    let dir = temp_dir("e2e-watchdog");
    let mute = TestHss::start(&dir.0, "mute", free_port(), "mute", "");
    let good = TestHss::start(&dir.0, "good", free_port(), "normal", "");
    let started = Instant::now();
    let mut d = S6aDriver::start(config(vec![mute.addr(), good.addr()])).unwrap();
    wait_up(&d);
    mute.wait_log("CER", |v| v["cmd"] == 257);
    good.wait_log("CER", |v| v["cmd"] == 257);
    std::thread::sleep(Duration::from_millis(200));
    d.submit(vector(1, IMSI));
    // Unanswered at the mute peer: a DWR Tw after its CEA, suspect after 2 Tw, then
    // the request goes to the second peer.
    let got = answers(&mut d, 1, Duration::from_secs(5));
    assert!(matches!(got[0].result, Ok(HssData::Vector(_))), "{got:?}");
    let dt = started.elapsed();
    assert!(
        dt >= Duration::from_millis(600),
        "answered before the failover: {dt:?}"
    );
    assert_eq!(requests(&mute, 318).len(), 1);
    assert!(!requests(&mute, 280).is_empty(), "watchdog sent");
    assert_eq!(requests(&good, 318)[0]["T"], 1);
    drop(d);

    // Failback: the primary goes away and comes back on the same port.
    let dir2 = temp_dir("e2e-failback");
    let port = free_port();
    let primary = TestHss::start(&dir2.0, "p1", port, "normal", "");
    let mut d = S6aDriver::start(config(vec![primary.addr(), good.addr()])).unwrap();
    wait_up(&d);
    good.wait_log("second CER", |v| v["cmd"] == 257);
    std::thread::sleep(Duration::from_millis(100));
    d.submit(vector(1, IMSI));
    answers(&mut d, 1, Duration::from_secs(5));
    assert_eq!(requests(&primary, 318).len(), 1);
    drop(primary);
    let before = requests(&good, 318).len();
    // Down: the second peer serves.
    let t0 = Instant::now();
    loop {
        d.submit(vector(2, IMSI));
        let a = answers(&mut d, 1, Duration::from_secs(5));
        if a[0].result.is_ok() && requests(&good, 318).len() > before {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
    let back = TestHss::start(&dir2.0, "p2", port, "normal", "");
    // Back: after CER and three watchdogs (REOPEN) requests return to it.
    back.wait_log("three DWRs", |_| requests(&back, 280).len() >= 3);
    let t0 = Instant::now();
    let mut seq = 10;
    while requests(&back, 318).is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(5), "no failback");
        seq += 1;
        d.submit(vector(seq, IMSI));
        answers(&mut d, 1, Duration::from_secs(5));
    }
    let log = back.log();
    let first_air = log
        .iter()
        .position(|v| v["event"] == "request" && v["cmd"] == 318)
        .unwrap();
    let dwrs_before = log[..first_air]
        .iter()
        .filter(|v| v["event"] == "request" && v["cmd"] == 280)
        .count();
    assert!(dwrs_before >= 3, "REOPEN: {log:?}");
}

/// One client shared by two consumers (a node's slices): each answer goes to the
/// consumer its reference routes to, whoever submitted the request; each HSS-initiated
/// request goes to both (only the slice holding the subscriber acts on it).
#[test]
fn a_routed_client_delivers_answers_by_reference_and_events_to_all() {
    need_pycrate!();
    let dir = temp_dir("e2e-routed");
    let hss = TestHss::start(&dir.0, "hss1", free_port(), "normal", "clr");
    let mut ds = S6aDriver::start_routed(
        config(vec![hss.addr()]),
        2,
        Box::new(|id| (id >> 31) as usize),
        "test-s6a",
    )
    .unwrap();
    wait_up(&ds[0]);
    let slice1 = HssRef {
        mme_ue_id: 0x8000_0007,
        seq: 1,
    };
    // Submitted by consumer 0, answered to consumer 1; and the other way round.
    ds[0].submit(HssRequest::Profile {
        r: slice1,
        imsi: IMSI,
    });
    ds[1].submit(vector(2, IMSI));
    let a1 = answers(&mut ds[1], 1, Duration::from_secs(10));
    assert_eq!(a1[0].r, slice1);
    assert!(matches!(a1[0].result, Ok(HssData::Profile(_))), "{a1:?}");
    let a0 = answers(&mut ds[0], 1, Duration::from_secs(10));
    assert_eq!(a0[0].r, r(2));
    assert!(matches!(a0[0].result, Ok(HssData::Vector(_))), "{a0:?}");
    for d in ds.iter_mut() {
        let ev = events(d, |e| {
            e.iter()
                .any(|x| matches!(x, S6aEvent::CancelLocation { .. }))
        });
        assert!(ev.contains(&S6aEvent::CancelLocation {
            imsi: "001010000000001".into(),
            cancellation_type: 2,
            reattach_required: false,
        }));
    }
    // A purge goes out as PUR and is confirmed (to every consumer).
    ds[0].submit(HssRequest::Purge { imsi: IMSI });
    let ev = events(&mut ds[1], |e| {
        e.iter().any(|x| matches!(x, S6aEvent::Purged { .. }))
    });
    assert!(ev.contains(&S6aEvent::Purged {
        imsi: "001010000000001".into(),
        result: Ok(())
    }));
    // Both handles gone: the thread says DPR and ends.
    drop(ds);
    assert!(
        requests(&hss, 282).len() == 1,
        "DPR on the way out: {:?}",
        hss.log()
    );
}
