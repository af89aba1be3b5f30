//! Our codec and state machines against an independent Diameter codec (pycrate):
//! what we encode, pycrate decodes strictly, field by field; what pycrate encodes
//! (CEA, DWR, DWA, AIA, ULA, PUA, CLR, IDR, DPA), our views and clients read.

mod common;

use common::{all, avp, find, hexv, py_decode, py_encode};
use pepc_diameter::base::{self, Action, Client, PeerState};
use pepc_diameter::codec::{AvpData, AvpRepr, MessageRepr, MessageView};
use pepc_diameter::dict::{app, avp as a, avp3, cmd, VENDOR_3GPP as V};
use pepc_diameter::s6a::{S6aClient, S6aConfig, S6aEvent};
use pepc_seams::hss::{HssData, SubscriptionData, SubscriptionUpdate};
use pepc_seams::PdnType;
use pepc_seams::{HssFailure, HssRef, HssRequest};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const IMSI: u64 = 1010000000001;
const PLMN: [u8; 3] = [0x00, 0xf1, 0x10];

fn client(now: Instant) -> S6aClient {
    let mut cfg = base::Config::new("mme.pepc.test", "pepc.test");
    cfg.watchdog = Duration::from_secs(6);
    let s6a = S6aConfig {
        destination_realm: "test".into(),
        destination_host: None,
        visited_plmn: PLMN,
    };
    S6aClient::new(Client::new(cfg, 1, now, 7), s6a, 7)
}

/// Every whole message in `bytes`.
fn split(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut rest = bytes;
    while !rest.is_empty() {
        let m = MessageView::new_checked(rest).expect("whole messages");
        let n = m.length() as usize;
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

fn take_tx(c: &mut S6aClient) -> Vec<Vec<u8>> {
    let b = std::mem::take(c.base().tx(0));
    split(&b)
}

/// An answer spec for the request `req` (ids copied).
fn answer_to(req: &[u8], avps: Vec<Value>) -> Value {
    let v = MessageView::new_checked(req).unwrap();
    json!({"R": 0, "P": 1, "cmd": v.command_code(), "app": v.application_id(),
           "hbh": v.hop_by_hop(), "e2e": v.end_to_end(), "avps": avps})
}

fn hss_id() -> Vec<Value> {
    vec![
        avp(a::ORIGIN_HOST, 0, json!("hss.test")),
        avp(a::ORIGIN_REALM, 0, json!("test")),
    ]
}

fn cea_spec(cer: &[u8]) -> Value {
    let mut avps = vec![avp(a::RESULT_CODE, 0, json!(2001))];
    avps.extend(hss_id());
    avps.extend([
        avp(a::HOST_IP_ADDRESS, 0, json!({"addr": [1, "7f000002"]})),
        avp(a::VENDOR_ID, 0, json!(0)),
        avp(a::PRODUCT_NAME, 0, json!("pycrate")),
        avp(
            a::VENDOR_SPECIFIC_APPLICATION_ID,
            0,
            json!([
                avp(a::VENDOR_ID, 0, json!(V)),
                avp(a::AUTH_APPLICATION_ID, 0, json!(app::S6A))
            ]),
        ),
    ]);
    answer_to(cer, avps)
}

/// A client whose one peer is open: CER out (checked by pycrate), pycrate's CEA in.
fn open(now: Instant) -> S6aClient {
    let mut c = client(now);
    c.handle_timeout(now);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, now);
    let cer = take_tx(&mut c).remove(0);
    let cea = py_encode(&[cea_spec(&cer)]).remove(0);
    c.base().on_bytes(0, now, &cea);
    c.process();
    assert_eq!(
        c.poll_event(),
        Some(S6aEvent::PeerUp {
            peer: 0,
            host: "hss.test".into()
        })
    );
    assert_eq!(c.base().peer_state(0), PeerState::Okay);
    c
}

#[test]
fn cer_and_dwr_and_dpr_decode_in_pycrate_and_pycrate_cea_dwa_dpa_open_and_close() {
    need_pycrate!();
    let now = Instant::now();
    let mut c = client(now);
    c.handle_timeout(now);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, now);
    let cer = take_tx(&mut c).remove(0);
    let d = &py_decode(std::slice::from_ref(&cer))[0];
    assert_eq!(
        (d["R"].as_u64(), d["cmd"].as_u64(), d["app"].as_u64()),
        (Some(1), Some(257), Some(0))
    );
    let avps = &d["avps"];
    assert_eq!(find(avps, 264, 0), Some(&json!("mme.pepc.test")));
    assert_eq!(find(avps, 296, 0), Some(&json!("pepc.test")));
    assert_eq!(find(avps, 257, 0), Some(&json!({"addr": [1, "7f000001"]})));
    assert_eq!(find(avps, 266, 0), Some(&json!(0)));
    assert_eq!(find(avps, 269, 0), Some(&json!("pepc")));
    assert_eq!(find(avps, 265, 0), Some(&json!(V)));
    assert_eq!(find(avps, 278, 0), Some(&json!(7)));
    let vsai = find(avps, 260, 0).expect("Vendor-Specific-Application-Id");
    assert_eq!(find(vsai, 266, 0), Some(&json!(V)));
    assert_eq!(find(vsai, 258, 0), Some(&json!(app::S6A)));

    // pycrate's CEA opens the peer.
    let cea = py_encode(&[cea_spec(&cer)]).remove(0);
    c.base().on_bytes(0, now, &cea);
    c.process();
    assert!(
        matches!(c.poll_event(), Some(S6aEvent::PeerUp { peer: 0, ref host }) if host == "hss.test")
    );

    // Idle for Tw: a DWR; pycrate's DWA keeps the peer open.
    let t1 = now + Duration::from_secs(6);
    c.handle_timeout(t1);
    let dwr = take_tx(&mut c).remove(0);
    let d = &py_decode(std::slice::from_ref(&dwr))[0];
    assert_eq!((d["R"].as_u64(), d["cmd"].as_u64()), (Some(1), Some(280)));
    assert_eq!(find(&d["avps"], 264, 0), Some(&json!("mme.pepc.test")));
    let mut dwa = vec![avp(a::RESULT_CODE, 0, json!(2001))];
    dwa.extend(hss_id());
    let dwa = py_encode(&[answer_to(&dwr, dwa)]).remove(0);
    c.base().on_bytes(0, t1, &dwa);
    // Another Tw: a new DWR, not suspect (the DWA cleared the pending watchdog).
    c.handle_timeout(t1 + Duration::from_secs(6));
    assert_eq!(c.base().peer_state(0), PeerState::Okay);
    assert_eq!(take_tx(&mut c).len(), 1);

    // pycrate's DWR: our DWA decodes in pycrate with the ids of the request.
    let mut dwr_avps = hss_id();
    dwr_avps.push(avp(a::ORIGIN_STATE_ID, 0, json!(3)));
    let their_dwr =
        py_encode(&[json!({"R": 1, "cmd": 280, "app": 0, "hbh": 77, "e2e": 78, "avps": dwr_avps})])
            .remove(0);
    c.base().on_bytes(0, t1, &their_dwr);
    let our_dwa = take_tx(&mut c).remove(0);
    let d = &py_decode(&[our_dwa])[0];
    assert_eq!(
        (
            d["R"].as_u64(),
            d["cmd"].as_u64(),
            d["hbh"].as_u64(),
            d["e2e"].as_u64()
        ),
        (Some(0), Some(280), Some(77), Some(78))
    );
    assert_eq!(find(&d["avps"], 268, 0), Some(&json!(2001)));

    // DPR out, pycrate's DPA closes.
    c.base().disconnect(t1);
    let dpr = take_tx(&mut c).remove(0);
    let d = &py_decode(std::slice::from_ref(&dpr))[0];
    assert_eq!((d["R"].as_u64(), d["cmd"].as_u64()), (Some(1), Some(282)));
    assert_eq!(find(&d["avps"], 273, 0), Some(&json!(0)));
    let mut dpa = vec![avp(a::RESULT_CODE, 0, json!(2001))];
    dpa.extend(hss_id());
    let dpa = py_encode(&[answer_to(&dpr, dpa)]).remove(0);
    c.base().on_bytes(0, t1, &dpa);
    assert_eq!(c.base().peer_state(0), PeerState::Closed);
    assert!(c.base().is_closed());
}

#[test]
fn our_cea_repr_decodes_in_pycrate() {
    need_pycrate!();
    let m = MessageRepr {
        flags: 0,
        command: cmd::CAPABILITIES_EXCHANGE,
        application: 0,
        hop_by_hop: 0x1234_5678,
        end_to_end: 0x9abc_def0,
        avps: vec![
            AvpRepr::new(a::RESULT_CODE, 0, AvpData::Unsigned32(2001)),
            AvpRepr::new(a::ORIGIN_HOST, 0, AvpData::DiameterIdentity("hss.x".into())),
            AvpRepr::new(a::ORIGIN_REALM, 0, AvpData::DiameterIdentity("x".into())),
            AvpRepr::new(
                a::HOST_IP_ADDRESS,
                0,
                AvpData::Address("::1".parse().unwrap()),
            ),
            AvpRepr::new(a::VENDOR_ID, 0, AvpData::Unsigned32(0)),
            AvpRepr::new(
                a::VENDOR_SPECIFIC_APPLICATION_ID,
                0,
                AvpData::Grouped(vec![
                    AvpRepr::new(a::VENDOR_ID, 0, AvpData::Unsigned32(V)),
                    AvpRepr::new(a::AUTH_APPLICATION_ID, 0, AvpData::Unsigned32(app::GX)),
                ]),
            ),
        ],
    };
    let mut b = vec![];
    m.emit(&mut b);
    let d = &py_decode(&[b])[0];
    assert_eq!(
        (d["R"].as_u64(), d["hbh"].as_u64(), d["e2e"].as_u64()),
        (Some(0), Some(0x1234_5678), Some(0x9abc_def0))
    );
    assert_eq!(
        find(&d["avps"], 257, 0),
        Some(&json!({"addr": [2, "00000000000000000000000000000001"]}))
    );
    assert_eq!(find(&d["avps"], 264, 0), Some(&json!("hss.x")));
    let vsai = find(&d["avps"], 260, 0).unwrap();
    assert_eq!(find(vsai, 258, 0), Some(&json!(app::GX)));
}

fn r(seq: u32) -> HssRef {
    HssRef { mme_ue_id: 40, seq }
}

#[test]
fn air_ulr_pur_decode_in_pycrate_and_pycrate_aia_ula_pua_answer_them() {
    need_pycrate!();
    let now = Instant::now();
    let mut c = open(now);
    let (rand, auts) = ([0x11u8; 16], [0x22u8; 14]);
    c.submit(
        now,
        HssRequest::Vector {
            r: r(1),
            imsi: IMSI,
            plmn: PLMN,
        },
    );
    c.submit(
        now,
        HssRequest::Resync {
            r: r(2),
            imsi: IMSI,
            plmn: PLMN,
            rand,
            auts,
        },
    );
    c.submit(
        now,
        HssRequest::Profile {
            r: r(3),
            imsi: IMSI,
        },
    );
    c.purge(now, IMSI);
    let reqs = take_tx(&mut c);
    assert_eq!(reqs.len(), 4);
    let d = py_decode(&reqs);
    for (m, want) in d.iter().zip([318, 318, 316, 321]) {
        assert_eq!(
            (
                m["R"].as_u64(),
                m["P"].as_u64(),
                m["cmd"].as_u64(),
                m["app"].as_u64()
            ),
            (Some(1), Some(1), Some(want), Some(app::S6A as u64))
        );
        let avps = &m["avps"];
        assert_eq!(avps[0]["code"], 263, "Session-Id first");
        assert!(avps[0]["value"]
            .as_str()
            .unwrap()
            .starts_with("mme.pepc.test;"));
        assert_eq!(find(avps, 1, 0), Some(&json!("001010000000001")));
        assert_eq!(find(avps, 277, 0), Some(&json!(1)));
        assert_eq!(find(avps, 283, 0), Some(&json!("test")));
        assert_eq!(find(avps, 264, 0), Some(&json!("mme.pepc.test")));
        assert!(find(avps, 293, 0).is_none());
    }
    let sessions: std::collections::HashSet<_> = d
        .iter()
        .map(|m| m["avps"][0]["value"].to_string())
        .collect();
    assert_eq!(sessions.len(), 4, "a Session-Id per request");
    // AIR: one vector, immediate, for our PLMN; the resync one carries RAND || AUTS.
    let rei = find(&d[0]["avps"], 1408, V).unwrap();
    assert_eq!(find(rei, 1410, V), Some(&json!(1)));
    assert!(find(rei, 1411, V).is_none());
    assert_eq!(find(&d[0]["avps"], 1407, V), Some(&hexv(&PLMN)));
    let rei = find(&d[1]["avps"], 1408, V).unwrap();
    let mut ra = rand.to_vec();
    ra.extend(auts);
    assert_eq!(find(rei, 1411, V), Some(&hexv(&ra)));
    // ULR: E-UTRAN, S6a.
    assert_eq!(find(&d[2]["avps"], 1032, V), Some(&json!(1004)));
    assert_eq!(find(&d[2]["avps"], 1405, V), Some(&json!(2)));
    assert_eq!(find(&d[2]["avps"], 1407, V), Some(&hexv(&PLMN)));

    // pycrate's answers, out of order.
    let kasme = [0x44u8; 32];
    let vec_avp = |rand: &[u8]| {
        avp(
            avp3::AUTHENTICATION_INFO,
            V,
            json!([avp(
                avp3::E_UTRAN_VECTOR,
                V,
                json!([
                    avp(avp3::ITEM_NUMBER, V, json!(1)),
                    avp(avp3::RAND, V, hexv(rand)),
                    avp(avp3::XRES, V, hexv(&[0x55; 8])),
                    avp(avp3::AUTN, V, hexv(&[0x66; 16])),
                    avp(avp3::KASME, V, hexv(&kasme)),
                ])
            )]),
        )
    };
    let ok = |extra: Vec<Value>| {
        let mut v = vec![
            avp(a::RESULT_CODE, 0, json!(2001)),
            avp(a::AUTH_SESSION_STATE, 0, json!(1)),
        ];
        v.extend(hss_id());
        v.extend(extra);
        v
    };
    let apn_cfg = |ctx: u32, apn: &str, pdn: i32, qci: i32, arp: u32| {
        avp(
            avp3::APN_CONFIGURATION,
            V,
            json!([
                avp(avp3::CONTEXT_IDENTIFIER, V, json!(ctx)),
                avp(avp3::PDN_TYPE, V, json!(pdn)),
                avp(a::SERVICE_SELECTION, 0, json!(apn)),
                avp(
                    avp3::EPS_SUBSCRIBED_QOS_PROFILE,
                    V,
                    json!([
                        avp(avp3::QOS_CLASS_IDENTIFIER, V, json!(qci)),
                        avp(
                            avp3::ALLOCATION_RETENTION_PRIORITY,
                            V,
                            json!([
                                avp(avp3::PRIORITY_LEVEL, V, json!(arp)),
                                avp(avp3::PRE_EMPTION_CAPABILITY, V, json!(1)),
                                avp(avp3::PRE_EMPTION_VULNERABILITY, V, json!(0)),
                            ])
                        ),
                    ])
                ),
            ]),
        )
    };
    let sub = avp(
        avp3::SUBSCRIPTION_DATA,
        V,
        json!([
            avp(avp3::MSISDN, V, hexv(&[0x64, 0x21, 0x43, 0x65, 0x87, 0xf9])),
            avp(
                avp3::AMBR,
                V,
                json!([
                    avp(avp3::MAX_REQUESTED_BANDWIDTH_UL, V, json!(50_000_000)),
                    avp(avp3::MAX_REQUESTED_BANDWIDTH_DL, V, json!(100_000_000)),
                ])
            ),
            avp(
                avp3::APN_CONFIGURATION_PROFILE,
                V,
                json!([
                    avp(avp3::CONTEXT_IDENTIFIER, V, json!(7)),
                    avp(avp3::ALL_APN_CONFIGURATIONS_INCLUDED_INDICATOR, V, json!(0)),
                    apn_cfg(3, "ims", 1, 5, 1),
                    apn_cfg(7, "internet", 2, 9, 8),
                ])
            ),
        ]),
    );
    let answers = py_encode(&[
        answer_to(&reqs[2], ok(vec![avp(avp3::ULA_FLAGS, V, json!(1)), sub])),
        answer_to(&reqs[3], ok(vec![avp(avp3::PUA_FLAGS, V, json!(0))])),
        answer_to(&reqs[1], ok(vec![vec_avp(&[0x77; 16])])),
        answer_to(&reqs[0], ok(vec![vec_avp(&[0x33; 16])])),
    ]);
    for b in &answers {
        c.base().on_bytes(0, now, b);
    }
    c.process();
    let mut got = vec![];
    c.take_answers(&mut got);
    assert_eq!(got.len(), 3);
    let Ok(HssData::Profile(s)) = &got[0].result else {
        panic!("{:?}", got[0])
    };
    assert_eq!(got[0].r, r(3));
    assert_eq!(
        s,
        &SubscriptionData {
            msisdn: "46123456789".into(),
            apn: "internet".into(),
            pdn_type: PdnType::Ipv4v6,
            qci: 9,
            arp_priority: 8,
            ambr_ul_bps: 50_000_000,
            ambr_dl_bps: 100_000_000,
        }
    );
    for (a, rnd, seq) in [(&got[1], 0x77, 2), (&got[2], 0x33, 1)] {
        assert_eq!(a.r, r(seq));
        let Ok(HssData::Vector(v)) = &a.result else {
            panic!("{a:?}")
        };
        assert_eq!((v.rand, v.xres, v.autn), ([rnd; 16], [0x55; 8], [0x66; 16]));
        assert_eq!(v.kasme.as_bytes(), &kasme);
    }
    assert_eq!(
        c.poll_event(),
        Some(S6aEvent::Purged {
            imsi: "001010000000001".into(),
            result: Ok(())
        })
    );
    assert_eq!(c.outstanding(), 0);
    assert_eq!(c.base().pending(), 0);
}

#[test]
fn pycrate_error_answers_map_to_hss_failures() {
    need_pycrate!();
    let now = Instant::now();
    let mut c = open(now);
    for seq in 1..=7 {
        c.submit(
            now,
            HssRequest::Vector {
                r: r(seq),
                imsi: IMSI,
                plmn: PLMN,
            },
        );
    }
    c.submit(
        now,
        HssRequest::Resync {
            r: r(8),
            imsi: IMSI,
            plmn: PLMN,
            rand: [1; 16],
            auts: [2; 14],
        },
    );
    let reqs = take_tx(&mut c);
    let exp = |code: u32| {
        let mut v = vec![avp(
            a::EXPERIMENTAL_RESULT,
            0,
            json!([
                avp(a::VENDOR_ID, 0, json!(V)),
                avp(a::EXPERIMENTAL_RESULT_CODE, 0, json!(code)),
            ]),
        )];
        v.extend(hss_id());
        v
    };
    let mut base_err = vec![avp(a::RESULT_CODE, 0, json!(3002))];
    base_err.extend(hss_id());
    let mut no_result = hss_id();
    no_result.push(avp(a::AUTH_SESSION_STATE, 0, json!(1)));
    let specs = [
        answer_to(&reqs[0], exp(5001)),
        answer_to(&reqs[1], exp(5420)),
        answer_to(&reqs[2], exp(4181)),
        answer_to(&reqs[3], base_err),
        answer_to(&reqs[4], no_result),
        answer_to(&reqs[5], exp(5004)),
        answer_to(&reqs[6], exp(5421)),
        answer_to(&reqs[7], exp(4181)),
    ];
    for b in py_encode(&specs) {
        c.base().on_bytes(0, now, &b);
    }
    c.process();
    let mut got = vec![];
    c.take_answers(&mut got);
    let f: Vec<_> = got
        .iter()
        .map(|a| (a.r.seq, a.result.as_ref().err().cloned()))
        .collect();
    assert_eq!(f[0], (1, Some(HssFailure::UnknownSubscriber)));
    assert_eq!(f[1], (2, Some(HssFailure::NoEpsSubscription)));
    assert!(
        matches!(&f[2], (3, Some(HssFailure::Unavailable(w))) if w.contains("4181")),
        "{f:?}"
    );
    assert!(
        matches!(&f[3], (4, Some(HssFailure::Unavailable(w))) if w.contains("3002")),
        "{f:?}"
    );
    assert!(
        matches!(&f[4], (5, Some(HssFailure::Unavailable(w))) if w.contains("without a result")),
        "{f:?}"
    );
    // TS 29.272 Annex A: roaming and RAT refusals are causes of their own.
    assert_eq!(f[5], (6, Some(HssFailure::RoamingNotAllowed)));
    assert_eq!(f[6], (7, Some(HssFailure::RatNotAllowed)));
    // 4181 to a plain AIR is an outage (#17), to a resync a refused AUTS.
    assert_eq!(f[7], (8, Some(HssFailure::ResyncRefused)));
}

#[test]
fn pycrate_clr_and_idr_are_answered_and_surfaced_and_unknown_mandatory_avps_refused() {
    need_pycrate!();
    let now = Instant::now();
    let mut c = open(now);
    let push = |cmd: u32, hbh: u32, extra: Vec<Value>| {
        let mut v = vec![
            avp(a::SESSION_ID, 0, json!(format!("hss.test;{hbh}"))),
            avp(
                a::VENDOR_SPECIFIC_APPLICATION_ID,
                0,
                json!([
                    avp(a::VENDOR_ID, 0, json!(V)),
                    avp(a::AUTH_APPLICATION_ID, 0, json!(app::S6A))
                ]),
            ),
            avp(a::AUTH_SESSION_STATE, 0, json!(1)),
        ];
        v.extend(hss_id());
        v.push(avp(a::DESTINATION_HOST, 0, json!("mme.pepc.test")));
        v.push(avp(a::DESTINATION_REALM, 0, json!("pepc.test")));
        v.push(avp(a::USER_NAME, 0, json!("001010000000001")));
        v.extend(extra);
        json!({"R": 1, "P": 1, "cmd": cmd, "app": app::S6A, "hbh": hbh, "e2e": hbh + 1, "avps": v})
    };
    let sub = avp(
        avp3::SUBSCRIPTION_DATA,
        V,
        json!([avp(
            avp3::APN_CONFIGURATION_PROFILE,
            V,
            json!([
                avp(avp3::CONTEXT_IDENTIFIER, V, json!(1)),
                avp(
                    avp3::APN_CONFIGURATION,
                    V,
                    json!([
                        avp(avp3::CONTEXT_IDENTIFIER, V, json!(1)),
                        avp(avp3::PDN_TYPE, V, json!(0)),
                        avp(a::SERVICE_SELECTION, 0, json!("fast")),
                        avp(
                            avp3::EPS_SUBSCRIBED_QOS_PROFILE,
                            V,
                            json!([
                                avp(avp3::QOS_CLASS_IDENTIFIER, V, json!(6)),
                                avp(
                                    avp3::ALLOCATION_RETENTION_PRIORITY,
                                    V,
                                    json!([avp(avp3::PRIORITY_LEVEL, V, json!(2))])
                                ),
                            ])
                        ),
                    ])
                ),
            ])
        ),]),
    );
    let msgs = py_encode(&[
        push(
            cmd::CANCEL_LOCATION,
            100,
            vec![avp(avp3::CANCELLATION_TYPE, V, json!(2))],
        ),
        push(cmd::INSERT_SUBSCRIBER_DATA, 200, vec![sub]),
        push(
            cmd::INSERT_SUBSCRIBER_DATA,
            300,
            vec![avp(99999, V, hexv(&[1, 2]))],
        ),
        push(cmd::DELETE_SUBSCRIBER_DATA, 400, vec![]),
        // Only what changed: an AMBR.
        push(
            cmd::INSERT_SUBSCRIBER_DATA,
            500,
            vec![avp(
                avp3::SUBSCRIPTION_DATA,
                V,
                json!([avp(
                    avp3::AMBR,
                    V,
                    json!([
                        avp(avp3::MAX_REQUESTED_BANDWIDTH_UL, V, json!(3000)),
                        avp(avp3::MAX_REQUESTED_BANDWIDTH_DL, V, json!(4000)),
                    ])
                )]),
            )],
        ),
        // An APN configuration without its QoS: unreadable, so not applied.
        push(
            cmd::INSERT_SUBSCRIBER_DATA,
            600,
            vec![avp(
                avp3::SUBSCRIPTION_DATA,
                V,
                json!([avp(
                    avp3::APN_CONFIGURATION_PROFILE,
                    V,
                    json!([
                        avp(avp3::CONTEXT_IDENTIFIER, V, json!(1)),
                        avp(
                            avp3::APN_CONFIGURATION,
                            V,
                            json!([
                                avp(avp3::CONTEXT_IDENTIFIER, V, json!(1)),
                                avp(avp3::PDN_TYPE, V, json!(0)),
                                avp(a::SERVICE_SELECTION, 0, json!("fast")),
                            ])
                        ),
                    ])
                )]),
            )],
        ),
        // No Subscription-Data at all (it is mandatory in an IDR).
        push(cmd::INSERT_SUBSCRIBER_DATA, 700, vec![]),
    ]);
    for m in &msgs {
        c.base().on_bytes(0, now, m);
    }
    c.process();
    assert_eq!(
        c.poll_event(),
        Some(S6aEvent::CancelLocation {
            imsi: "001010000000001".into(),
            cancellation_type: 2,
            reattach_required: false
        })
    );
    let Some(S6aEvent::InsertSubscriberData {
        imsi,
        update:
            SubscriptionUpdate {
                ambr: None,
                default_apn: Some(d),
            },
        token: known,
    }) = c.poll_event()
    else {
        panic!()
    };
    assert_eq!(imsi, "001010000000001");
    assert_eq!(
        (d.apn.as_str(), d.qci, d.arp_priority, d.pdn_type),
        ("fast", 6, 2, PdnType::Ipv4)
    );
    let Some(S6aEvent::InsertSubscriberData {
        update:
            SubscriptionUpdate {
                ambr: Some((3000, 4000)),
                default_apn: None,
            },
        token: unknown,
        ..
    }) = c.poll_event()
    else {
        panic!()
    };
    assert_eq!(c.poll_event(), None, "no event for the refused requests");
    // The IDAs wait for the MME's word on the subscriber (TS 29.272 §5.2.2.1.2).
    assert_eq!(c.pending_idrs(), 2);
    let immediate = take_tx(&mut c);
    c.idr_outcome(known, true);
    c.idr_outcome(unknown, false);
    c.idr_outcome(unknown, false); // once answered, a repeat changes nothing
    assert_eq!(c.pending_idrs(), 0);
    let mut answers = immediate;
    answers.extend(take_tx(&mut c));
    let d = py_decode(&answers);
    let want = [
        (317, 100, 2001, false),
        (319, 300, 5001, false),
        (320, 400, 3001, true),
        (319, 600, 5012, false),
        (319, 700, 5005, false),
        (319, 200, 2001, false),
    ];
    assert_eq!(d.len(), want.len() + 1, "{d:?}");
    // The IDR of a subscriber the MME does not know: Experimental-Result 5001.
    let last = &d[want.len()];
    assert_eq!(last["hbh"].as_u64(), Some(500));
    assert_eq!(find(&last["avps"], 268, 0), None);
    let er = find(&last["avps"], 297, 0).expect("Experimental-Result");
    assert_eq!(find(er, 298, 0), Some(&json!(5001)));
    assert_eq!(find(er, 266, 0), Some(&json!(V)));
    for (m, (cmd, hbh, code, e)) in d.iter().zip(want) {
        assert_eq!(
            (
                m["R"].as_u64(),
                m["cmd"].as_u64(),
                m["hbh"].as_u64(),
                m["e2e"].as_u64(),
                m["E"] == 1
            ),
            (Some(0), Some(cmd), Some(hbh), Some(hbh + 1), e)
        );
        let avps = &m["avps"];
        assert_eq!(avps[0]["code"], 263);
        assert_eq!(avps[0]["value"], json!(format!("hss.test;{hbh}")));
        assert_eq!(find(avps, 268, 0), Some(&json!(code)));
        assert_eq!(find(avps, 277, 0), Some(&json!(1)));
        assert_eq!(find(avps, 264, 0), Some(&json!("mme.pepc.test")));
        assert!(find(avps, 260, 0).is_some());
    }
    // The unknown mandatory AVP comes back in Failed-AVP, as it was.
    let failed = find(&d[1]["avps"], 279, 0).expect("Failed-AVP");
    let inner = all(failed, 99999, V);
    assert_eq!(inner, vec![&hexv(&[1, 2])]);
}
