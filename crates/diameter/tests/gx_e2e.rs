//! The Gx client against independent implementations:
//!
//! * our CCR-I/U/T decoded strictly by pycrate (lengths, padding, re-encoding), with
//!   the AVPs TS 29.212 §5.6.2 asks;
//! * on its TCP driver against a test PCRF written on pycrate (tests/py/diam.py pcrf)
//!   over loopback: CER advertising Gx, a CCA-I whose dynamic rule, monitoring grant
//!   and bearer control mode are read into the decision, CCR-U with the used volume
//!   (the PCRF grants again), RARs installing and removing rules reaching the
//!   consumer of the session's slice, a RAR for an unknown session answered
//!   DIAMETER_UNKNOWN_SESSION_ID (5002), CCR-T; a PCRF that rejects the session
//!   (5140), one that never answers (timeout), one that resets the connection.

mod common;

use common::{all, find, free_port, py_decode, temp_dir, TestPcrf};
use pepc_diameter::base;
use pepc_diameter::driver::{DriverConfig, GxDriver};
use pepc_diameter::gx::{self, GxConfig, GxEvent};
use pepc_seams::pcrf::{PcrfFailure, PcrfRequest, PolicySession, SessionQos, UsageReport};
use pepc_seams::{HssRef, PcrfAnswer};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const IMSI: u64 = 1010000000001;
const V: u32 = 10415;

fn session() -> PolicySession {
    PolicySession {
        imsi: IMSI,
        apn: "internet".into(),
        ebi: 5,
        ue_ip: Ipv4Addr::new(10, 45, 0, 2),
    }
}

const QOS: SessionQos = SessionQos {
    qci: 9,
    arp_priority: 8,
    ambr_ul: 50_000_000,
    ambr_dl: 100_000_000,
};

fn config(peers: Vec<String>) -> DriverConfig<GxConfig> {
    let mut b = base::Config::new("pgw.pepc.test", "pepc.test");
    b.applications = vec![pepc_diameter::dict::app::GX];
    b.watchdog = Duration::from_secs(6);
    b.reconnect = Duration::from_millis(200);
    b.request_timeout = Duration::from_millis(800);
    DriverConfig {
        peers,
        base: b,
        app: GxConfig {
            destination_realm: "test".into(),
            ..GxConfig::default()
        },
        connect_timeout: Duration::from_millis(500),
    }
}

fn wait_up(d: &GxDriver) {
    let t0 = Instant::now();
    while !d.is_up() {
        assert!(t0.elapsed() < Duration::from_secs(10), "no peer came up");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn answer(d: &mut GxDriver) -> PcrfAnswer {
    let t0 = Instant::now();
    loop {
        let mut a = vec![];
        d.poll(&mut a);
        if let Some(a) = a.pop() {
            return a;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no answer");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn event(d: &mut GxDriver) -> GxEvent {
    let t0 = Instant::now();
    loop {
        let mut e = vec![];
        d.poll_events(&mut e);
        if let Some(e) = e
            .into_iter()
            .find(|e| matches!(e, GxEvent::PolicyUpdate { .. }))
        {
            return e;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no RAR event");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn establish(seq: u32) -> PcrfRequest {
    PcrfRequest::Establish {
        r: HssRef { mme_ue_id: 7, seq },
        session: session(),
        subscribed: QOS,
    }
}

/// An unsigned AVP's value: pycrate shows those of RFC 4006 it has no type for as
/// octets (big-endian).
fn num(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Number(n)) => n.as_u64().unwrap(),
        Some(v) => u64::from_str_radix(v["hex"].as_str().expect("hex"), 16).unwrap(),
        None => panic!("AVP missing"),
    }
}

#[test]
fn our_ccrs_decode_strictly_in_pycrate() {
    need_pycrate!();
    let h = gx::Head {
        session_id: "pgw.pepc.test;1;1;gx",
        origin_host: "pgw.pepc.test",
        origin_realm: "pepc.test",
        destination_realm: "test",
        destination_host: None,
    };
    let s = session();
    let usage = [UsageReport {
        key: "mk1".into(),
        ul_bytes: 1000,
        dl_bytes: 5000,
    }];
    let mut msgs = vec![];
    for (kind, n, q, u) in [
        (gx::INITIAL_REQUEST, 0, Some(&QOS), &[][..]),
        (gx::UPDATE_REQUEST, 1, None, &usage[..]),
        (gx::TERMINATION_REQUEST, 2, None, &[][..]),
    ] {
        let mut b = vec![];
        gx::ccr(&mut b, &h, kind, n, &s, q, u);
        msgs.push(b);
    }
    let d = py_decode(&msgs);
    for (i, m) in d.iter().enumerate() {
        assert_eq!(m["cmd"], 272);
        assert_eq!(m["app"], 16777238);
        assert_eq!(m["R"], 1);
        let a = &m["avps"];
        assert_eq!(a[0]["code"], 263, "Session-Id first (RFC 6733 §8.8)");
        assert_eq!(find(a, 258, 0).unwrap(), 16777238);
        assert_eq!(num(find(a, 416, 0)), i as u64 + 1);
        assert_eq!(num(find(a, 415, 0)), i as u64);
        let sub = find(a, 443, 0).unwrap();
        assert_eq!(num(find(sub, 450, 0)), 1);
        assert_eq!(find(sub, 444, 0).unwrap(), "001010000000001");
    }
    let i = &d[0]["avps"];
    assert_eq!(
        find(i, 8, 0).unwrap()["hex"],
        "0a2d0002",
        "Framed-IP-Address"
    );
    assert_eq!(find(i, 1027, V).unwrap(), 5, "IP-CAN-Type 3GPP-EPS");
    assert_eq!(find(i, 1032, V).unwrap(), 1004, "RAT-Type EUTRAN");
    assert_eq!(find(i, 30, 0).unwrap(), "internet");
    let q = find(i, 1049, V).unwrap();
    assert_eq!(find(q, 1028, V).unwrap(), 9);
    assert_eq!(find(find(q, 1034, V).unwrap(), 1046, V).unwrap(), 8);
    let ambr = find(i, 1016, V).unwrap();
    assert_eq!(find(ambr, 1041, V).unwrap(), 50_000_000);
    let u = &d[1]["avps"];
    assert_eq!(find(u, 1006, V).unwrap(), 26, "Event-Trigger USAGE_REPORT");
    let umi = all(u, 1067, V);
    let used = find(umi[0], 446, 0).unwrap();
    assert_eq!(num(find(used, 421, 0)), 6000);
    assert_eq!(num(find(used, 412, 0)), 1000);
    assert_eq!(num(find(&d[2]["avps"], 295, 0)), 1, "Termination-Cause");
}

#[test]
fn sessions_rules_usage_and_rars_against_the_pycrate_pcrf() {
    need_pycrate!();
    let dir = temp_dir("gx-e2e");
    let mut pcrf = TestPcrf::start_pcrf(&dir.0, "pcrf", free_port(), "normal");
    let mut d = GxDriver::start(config(vec![pcrf.addr()])).unwrap();
    wait_up(&d);
    // CER advertised Gx (the PCRF answered with it: the peer is up).
    d.submit(establish(1));
    let a = answer(&mut d);
    assert_eq!((a.r.seq, a.imsi, a.ebi), (1, IMSI, 5));
    let dec = a.result.expect("CCA-I success");
    assert_eq!(dec.install.len(), 1);
    let r = &dec.install[0];
    assert_eq!((r.name.as_str(), r.qci, r.arp_priority), ("video", 2, 3));
    assert_eq!((r.gbr, r.mbr), ((128_000, 128_000), (256_000, 256_000)));
    assert_eq!((r.precedence, r.rating_group), (20, Some(200)));
    assert_eq!(r.flows[0].ue_ports, (4000, 4000));
    assert_eq!(r.flows[0].remote, Ipv4Addr::new(198, 51, 100, 7));
    assert_eq!(dec.monitoring[0].key, "mk1");
    assert_eq!(dec.monitoring[0].octets, 2000);
    let req = pcrf.wait_log("CCR-I", |v| v["cc_type"] == 1);
    assert_eq!(req["user"], "001010000000001");
    assert_eq!(req["apn"], "internet");
    assert_eq!(req["ip"], "0a2d0002");
    let sid = req["session"].as_str().unwrap().to_string();

    // A usage report: the used volume, then a new grant.
    d.submit(PcrfRequest::Report {
        r: HssRef {
            mme_ue_id: 7,
            seq: 0,
        },
        session: session(),
        usage: vec![UsageReport {
            key: "mk1".into(),
            ul_bytes: 1500,
            dl_bytes: 700,
        }],
    });
    let a = answer(&mut d);
    assert_eq!(a.result.unwrap().monitoring[0].octets, 2000);
    let u = pcrf.wait_log("CCR-U", |v| v["cc_type"] == 2);
    assert_eq!(u["session"], sid.as_str(), "the same session");
    assert_eq!(u["cc_number"], 1);
    assert_eq!(u["trigger"], 26);
    assert_eq!(u["usage"][0]["total"], 2200);

    // RARs: install, remove, and one for a session we never had.
    pcrf.command("rar-install 001010000000001 voice 4002");
    match event(&mut d) {
        GxEvent::PolicyUpdate {
            imsi,
            ebi,
            decision,
            route,
        } => {
            assert_eq!((imsi, ebi, route), (IMSI, 5, 7));
            assert_eq!(decision.install[0].name, "voice");
            assert_eq!(decision.install[0].flows[0].ue_ports, (4002, 4002));
        }
        e => panic!("{e:?}"),
    }
    pcrf.command("rar-remove 001010000000001 video");
    match event(&mut d) {
        GxEvent::PolicyUpdate { decision, .. } => assert_eq!(decision.remove, ["video"]),
        e => panic!("{e:?}"),
    }
    pcrf.command("rar-unknown 001010000000001 x");
    let raas: Vec<Value> = {
        let t0 = Instant::now();
        loop {
            let l: Vec<Value> = pcrf
                .log()
                .into_iter()
                .filter(|v| v["event"] == "answer" && v["cmd"] == 258)
                .collect();
            if l.len() == 3 || t0.elapsed() > Duration::from_secs(10) {
                break l;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let codes: Vec<&Value> = raas.iter().map(|v| &v["result"]).collect();
    assert_eq!(codes, [2001, 2001, 5002], "RAAs");

    // The session ends.
    d.submit(PcrfRequest::Terminate {
        session: session(),
        usage: vec![],
    });
    let t = pcrf.wait_log("CCR-T", |v| v["cc_type"] == 3);
    assert_eq!(t["session"], sid.as_str());
    assert_eq!(t["cc_number"], 2);
    // Nothing undecodable reached the PCRF.
    assert!(!pcrf.log().iter().any(|v| v["event"] == "undecodable"));
}

#[test]
fn rejected_unanswered_and_reset_sessions_fail_with_their_reason() {
    need_pycrate!();
    let dir = temp_dir("gx-fail");
    for (mode, want) in [
        ("reject", "rejected"),
        ("silent", "timeout"),
        ("reset", "unavailable"),
    ] {
        let pcrf = TestPcrf::start_pcrf(&dir.0, mode, free_port(), mode);
        let mut d = GxDriver::start(config(vec![pcrf.addr()])).unwrap();
        wait_up(&d);
        d.submit(establish(3));
        let a = answer(&mut d);
        let got = match a.result {
            Err(PcrfFailure::Rejected(5140)) => "rejected",
            Err(PcrfFailure::Timeout) => "timeout",
            Err(PcrfFailure::Unavailable(_)) => "unavailable",
            o => panic!("{mode}: {o:?}"),
        };
        // A reset connection is retried once on the (same, reconnecting) peer and
        // may end in a timeout or a peer loss: both say the PCRF did not serve.
        if mode == "reset" {
            assert!(got == "unavailable" || got == "timeout", "{mode}: {got}");
        } else {
            assert_eq!(got, want, "{mode}");
        }
        // The failed session is not kept: a report for it fails at once.
        d.submit(PcrfRequest::Report {
            r: HssRef {
                mme_ue_id: 7,
                seq: 0,
            },
            session: session(),
            usage: vec![],
        });
        assert!(answer(&mut d).result.is_err());
    }
}
