//! A whole S6a exchange as our client sends it (CER, DWR, AIR, AIR with resync, ULR,
//! PUR, CLA, IDA with Failed-AVP, DWA, DPR) and the HSS's side built with our owned
//! reprs, written to a pcap over TCP port 3868 and dissected by tshark: no malformed
//! packet, no expert warning or error, and tshark reads the fields we meant.

mod common;

use common::temp_dir;
use pepc_diameter::base::{self, Action, Client};
use pepc_diameter::codec::{flags, AvpData as D, AvpRepr, MessageRepr, MessageView};
use pepc_diameter::dict::{app, avp as a, avp3, cmd, VENDOR_3GPP as V};
use pepc_diameter::s6a::{S6aClient, S6aConfig};
use pepc_seams::{HssRef, HssRequest};
use pepc_wire::pcap::{tshark_check, PcapWriter};
use std::time::{Duration, Instant};

const PLMN: [u8; 3] = [0x00, 0xf1, 0x10];

fn sum16(data: &[u8], mut acc: u32) -> u32 {
    for c in data.chunks(2) {
        acc += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

/// One IPv4/TCP segment (PSH|ACK) carrying `payload`.
fn segment(
    src: ([u8; 4], u16),
    dst: ([u8; 4], u16),
    seq: u32,
    ack: u32,
    payload: &[u8],
) -> Vec<u8> {
    let total = 40 + payload.len();
    let mut p = vec![0u8; total];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 6;
    p[12..16].copy_from_slice(&src.0);
    p[16..20].copy_from_slice(&dst.0);
    let c = fold(sum16(&p[..20], 0));
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut p[20..];
    t[0..2].copy_from_slice(&src.1.to_be_bytes());
    t[2..4].copy_from_slice(&dst.1.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = 5 << 4;
    t[13] = 0x18;
    t[14..16].copy_from_slice(&65535u16.to_be_bytes());
    t[20..].copy_from_slice(payload);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&src.0);
    pseudo.extend_from_slice(&dst.0);
    pseudo.extend_from_slice(&[0, 6]);
    pseudo.extend_from_slice(&((20 + payload.len()) as u16).to_be_bytes());
    let c = fold(sum16(&p[20..], sum16(&pseudo, 0)));
    p[36..38].copy_from_slice(&c.to_be_bytes());
    p
}

fn split(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut rest = b;
    while !rest.is_empty() {
        let n = MessageView::new_checked(rest).unwrap().length() as usize;
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

fn hss_answer(req: &[u8], avps: Vec<AvpRepr>) -> Vec<u8> {
    let v = MessageView::new_checked(req).unwrap();
    let mut all = vec![];
    if let Ok(Some(s)) = v.find(0, a::SESSION_ID) {
        all.push(AvpRepr::new(
            a::SESSION_ID,
            0,
            D::Utf8String(s.utf8().unwrap().into()),
        ));
    }
    all.push(AvpRepr::new(a::RESULT_CODE, 0, D::Unsigned32(2001)));
    all.push(AvpRepr::new(
        a::ORIGIN_HOST,
        0,
        D::DiameterIdentity("hss.test".into()),
    ));
    all.push(AvpRepr::new(
        a::ORIGIN_REALM,
        0,
        D::DiameterIdentity("test".into()),
    ));
    all.extend(avps);
    let m = MessageRepr {
        flags: v.flags() & flags::PROXIABLE,
        command: v.command_code(),
        application: v.application_id(),
        hop_by_hop: v.hop_by_hop(),
        end_to_end: v.end_to_end(),
        avps: all,
    };
    let mut b = vec![];
    m.emit(&mut b);
    b
}

fn g(code: u32, members: Vec<AvpRepr>) -> AvpRepr {
    AvpRepr::new(code, V, D::Grouped(members))
}
fn u(code: u32, v: u32) -> AvpRepr {
    AvpRepr::new(code, V, D::Unsigned32(v))
}
fn e(code: u32, v: i32) -> AvpRepr {
    AvpRepr::new(code, V, D::Enumerated(v))
}
fn o(code: u32, v: &[u8]) -> AvpRepr {
    AvpRepr::new(code, V, D::OctetString(v.to_vec()))
}

fn vsai() -> AvpRepr {
    AvpRepr::new(
        a::VENDOR_SPECIFIC_APPLICATION_ID,
        0,
        D::Grouped(vec![
            AvpRepr::new(a::VENDOR_ID, 0, D::Unsigned32(V)),
            AvpRepr::new(a::AUTH_APPLICATION_ID, 0, D::Unsigned32(app::S6A)),
        ]),
    )
}

fn hss_request(command: u32, hbh: u32, extra: Vec<AvpRepr>) -> Vec<u8> {
    let mut avps = vec![
        AvpRepr::new(a::SESSION_ID, 0, D::Utf8String(format!("hss.test;{hbh}"))),
        vsai(),
        AvpRepr::new(a::AUTH_SESSION_STATE, 0, D::Enumerated(1)),
        AvpRepr::new(a::ORIGIN_HOST, 0, D::DiameterIdentity("hss.test".into())),
        AvpRepr::new(a::ORIGIN_REALM, 0, D::DiameterIdentity("test".into())),
        AvpRepr::new(
            a::DESTINATION_HOST,
            0,
            D::DiameterIdentity("mme.pepc.test".into()),
        ),
        AvpRepr::new(
            a::DESTINATION_REALM,
            0,
            D::DiameterIdentity("pepc.test".into()),
        ),
        AvpRepr::new(a::USER_NAME, 0, D::Utf8String("001010000000001".into())),
    ];
    avps.extend(extra);
    let m = MessageRepr {
        flags: flags::REQUEST | flags::PROXIABLE,
        command,
        application: app::S6A,
        hop_by_hop: hbh,
        end_to_end: hbh,
        avps,
    };
    let mut b = vec![];
    m.emit(&mut b);
    b
}

/// The exchange as TCP segments between 127.0.0.1:40000 (us) and 127.0.0.2:3868.
fn write_flow(path: &std::path::Path, flow: &[(bool, Vec<u8>)]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    let (mme, hss) = (([127, 0, 0, 1], 40000u16), ([127, 0, 0, 2], 3868u16));
    let (mut seq_m, mut seq_h) = (1000u32, 5000u32);
    for (k, (from_mme, m)) in flow.iter().enumerate() {
        let ts = 1_700_000_000_000_000_000u64 + k as u64 * 1_000_000;
        let p = if *from_mme {
            let p = segment(mme, hss, seq_m, seq_h, m);
            seq_m += m.len() as u32;
            p
        } else {
            let p = segment(hss, mme, seq_h, seq_m, m);
            seq_h += m.len() as u32;
            p
        };
        w.write_packet(ts, &p).unwrap();
    }
    w.flush().unwrap();
}

fn have_tshark() -> bool {
    let ok = std::process::Command::new("tshark")
        .arg("-v")
        .output()
        .is_ok();
    if !ok {
        eprintln!("SKIP: tshark not installed (scripts/test.sh installs it)");
    }
    ok
}

/// A Gx exchange: our CER, CCR-I, CCR-U, RAA, CCR-T; the PCRF's CEA, CCA-I with a
/// dynamic rule and a monitoring grant, CCA-U, RAR and CCA-T built with pycrate
/// (tests/py/diam.py): tshark dissects all of it cleanly.
#[test]
fn our_gx_exchange_is_clean_in_tshark() {
    use pepc_diameter::gx::{GxClient, GxConfig};
    use pepc_seams::pcrf::{PcrfRequest, PolicySession, SessionQos, UsageReport};
    use serde_json::json;
    need_pycrate!();
    if !have_tshark() {
        return;
    }
    let now = Instant::now();
    let mut cfg = base::Config::new("pgw.pepc.test", "pepc.test");
    cfg.applications = vec![app::GX];
    let mut c = GxClient::new(
        Client::new(cfg, 1, now, 7),
        GxConfig {
            destination_realm: "test".into(),
            ..GxConfig::default()
        },
        7,
    );
    let mut flow: Vec<(bool, Vec<u8>)> = vec![];
    let ours = |c: &mut GxClient, flow: &mut Vec<(bool, Vec<u8>)>| {
        for m in split(&std::mem::take(c.base().tx(0))) {
            flow.push((true, m));
        }
    };
    c.handle_timeout(now);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, now);
    ours(&mut c, &mut flow);
    let hdr = |m: &[u8]| {
        let v = MessageView::new_checked(m).unwrap();
        (
            v.command_code(),
            v.hop_by_hop(),
            v.end_to_end(),
            v.find(0, a::SESSION_ID)
                .unwrap()
                .map(|s| s.utf8().unwrap().to_string()),
        )
    };
    let av = |code: u32, vendor: u32, value: serde_json::Value| json!({"code": code, "vendor": vendor, "M": 1, "value": value});
    let origin = [av(264, 0, json!("pcrf.test")), av(296, 0, json!("test"))];
    let (_, hbh, e2e, _) = hdr(&flow[0].1);
    let cea = json!({"R": 0, "cmd": 257, "app": 0, "hbh": hbh, "e2e": e2e, "avps": [
        av(268, 0, json!(2001)), origin[0], origin[1], av(257, 0, json!({"addr": [1, "7f000002"]})),
        av(266, 0, json!(0)), av(269, 0, json!("pcrf")), av(258, 0, json!(app::GX)),
        av(260, 0, json!([av(266, 0, json!(V)), av(258, 0, json!(app::GX))]))]});
    let session = PolicySession {
        imsi: 1010000000001,
        apn: "internet".into(),
        ebi: 5,
        ue_ip: "10.45.0.2".parse().unwrap(),
    };
    let r = HssRef {
        mme_ue_id: 1,
        seq: 1,
    };
    let mut specs = vec![cea];
    let b = common::py_encode(&specs[..1]).remove(0);
    c.base().on_bytes(0, now, &b);
    flow.push((false, b));
    c.submit(
        now,
        PcrfRequest::Establish {
            r,
            session: session.clone(),
            subscribed: SessionQos {
                qci: 9,
                arp_priority: 8,
                ambr_ul: 1000,
                ambr_dl: 2000,
            },
        },
    );
    c.submit(
        now,
        PcrfRequest::Report {
            r,
            session: session.clone(),
            usage: vec![UsageReport {
                key: "mk1".into(),
                ul_bytes: 10,
                dl_bytes: 20,
            }],
        },
    );
    let first = flow.len();
    ours(&mut c, &mut flow);
    let rule = json!([
        av(1005, V, json!({"hex": hex::encode("video")})),
        av(
            1058,
            V,
            json!([
                av(
                    507,
                    V,
                    json!("permit out 17 from 198.51.100.7 5060 to assigned 4000")
                ),
                av(1080, V, json!(3))
            ])
        ),
        av(
            1016,
            V,
            json!([
                av(1028, V, json!(2)),
                av(516, V, json!(256000)),
                av(515, V, json!(256000)),
                av(1026, V, json!(128000)),
                av(1025, V, json!(128000)),
                av(
                    1034,
                    V,
                    json!([
                        av(1046, V, json!(3)),
                        av(1047, V, json!(1)),
                        av(1048, V, json!(0))
                    ])
                )
            ])
        ),
        av(1010, V, json!(20)),
        av(432, 0, json!(200))
    ]);
    let grant = av(
        1067,
        V,
        json!([
            av(1066, V, json!({"hex": hex::encode("mk1")})),
            av(431, 0, json!([av(421, 0, json!(2000))]))
        ]),
    );
    specs.clear();
    for (k, m) in flow[first..].iter().enumerate() {
        let (cmd, hbh, e2e, sid) = hdr(&m.1);
        let mut avps = vec![
            av(263, 0, json!(sid.unwrap())),
            av(268, 0, json!(2001)),
            origin[0].clone(),
            origin[1].clone(),
            av(258, 0, json!(app::GX)),
            av(416, 0, json!(k + 1)),
            // pycrate types CC-Request-Number as Time: give the octets.
            av(415, 0, json!({"hex": format!("{k:08x}")})),
        ];
        if k == 0 {
            avps.push(av(1001, V, json!([av(1003, V, rule.clone())])));
        }
        avps.push(grant.clone());
        specs.push(json!({"R": 0, "P": 1, "cmd": cmd, "app": app::GX, "hbh": hbh, "e2e": e2e, "avps": avps}));
    }
    let (_, _, _, sid) = hdr(&flow[first].1);
    specs.push(
        json!({"R": 1, "P": 1, "cmd": 258, "app": app::GX, "hbh": 77, "e2e": 78, "avps": [
        av(263, 0, json!(sid.unwrap())), av(258, 0, json!(app::GX)), origin[0], origin[1],
        av(283, 0, json!("pepc.test")), av(293, 0, json!("pgw.pepc.test")), av(285, 0, json!(0)),
        av(1002, V, json!([av(1005, V, json!({"hex": hex::encode("video")}))]))]}),
    );
    for b in common::py_encode(&specs) {
        c.base().on_bytes(0, now, &b);
        flow.push((false, b));
        c.process();
        ours(&mut c, &mut flow);
    }
    let mut got = vec![];
    c.take_answers(&mut got);
    assert_eq!(got.len(), 2);
    assert!(got.iter().all(|a| a.result.is_ok()), "{got:?}");
    c.submit(
        now,
        PcrfRequest::Terminate {
            session,
            usage: vec![],
        },
    );
    ours(&mut c, &mut flow);
    let dir = temp_dir("tshark-gx");
    let path = dir.0.join("gx.pcap");
    write_flow(&path, &flow);
    let rep = tshark_check(&path, &["tcp.port==3868,diameter"]).unwrap();
    if std::env::var_os("DUMP_TSHARK").is_some() {
        std::fs::write("/tmp/gx-tshark.txt", &rep.text).unwrap();
    }
    assert_eq!(rep.frames, flow.len());
    assert!(
        rep.malformed.is_empty() && rep.errors.is_empty() && rep.warnings.is_empty(),
        "malformed {:?} warnings {:?} errors {:?}",
        rep.malformed,
        rep.warnings,
        rep.errors
    );
    for want in [
        "Command Code: Credit-Control (272)",
        "CC-Request-Type: INITIAL_REQUEST (1)",
        "CC-Request-Type: UPDATE_REQUEST (2)",
        "CC-Request-Type: TERMINATION_REQUEST (3)",
        "Subscription-Id-Data: 001010000000001",
        "Framed-IP-Address Address: 10.45.0.2",
        "Called-Station-Id: internet",
        "Default-EPS-Bearer-QoS",
        "Charging-Rule-Install",
        "Flow-Description: permit out 17 from 198.51.100.7 5060 to assigned 4000",
        "Usage-Monitoring-Information",
        "CC-Total-Octets: 30",
        "Command Code: Re-Auth (258)",
        "Result-Code: DIAMETER_SUCCESS (2001)",
    ] {
        assert!(rep.text.contains(want), "tshark did not show {want:?}");
    }
}

#[test]
fn our_s6a_exchange_is_clean_in_tshark() {
    if !have_tshark() {
        return;
    }
    let now = Instant::now();
    let mut cfg = base::Config::new("mme.pepc.test", "pepc.test");
    cfg.watchdog = Duration::from_secs(6);
    let s6a = S6aConfig {
        destination_realm: "test".into(),
        destination_host: Some("hss.test".into()),
        visited_plmn: PLMN,
    };
    let mut c = S6aClient::new(Client::new(cfg, 1, now, 7), s6a, 7);
    // (from_mme, bytes) in order.
    let mut flow: Vec<(bool, Vec<u8>)> = vec![];
    let ours = |c: &mut S6aClient, flow: &mut Vec<(bool, Vec<u8>)>| {
        for m in split(&std::mem::take(c.base().tx(0))) {
            flow.push((true, m));
        }
    };
    c.handle_timeout(now);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, now);
    ours(&mut c, &mut flow);
    let cea = hss_answer(
        &flow[0].1,
        vec![
            AvpRepr::new(
                a::HOST_IP_ADDRESS,
                0,
                D::Address("127.0.0.2".parse().unwrap()),
            ),
            AvpRepr::new(a::VENDOR_ID, 0, D::Unsigned32(0)),
            AvpRepr::new(a::PRODUCT_NAME, 0, D::Utf8String("hss".into())),
            vsai(),
        ],
    );
    c.base().on_bytes(0, now, &cea);
    flow.push((false, cea));
    let r = |seq| HssRef { mme_ue_id: 1, seq };
    let imsi = 1010000000001;
    c.submit(
        now,
        HssRequest::Vector {
            r: r(1),
            imsi,
            plmn: PLMN,
        },
    );
    c.submit(
        now,
        HssRequest::Resync {
            r: r(2),
            imsi,
            plmn: PLMN,
            rand: [1; 16],
            auts: [2; 14],
        },
    );
    c.submit(now, HssRequest::Profile { r: r(3), imsi });
    c.purge(now, imsi);
    let first = flow.len();
    ours(&mut c, &mut flow);
    let reqs: Vec<Vec<u8>> = flow[first..].iter().map(|f| f.1.clone()).collect();
    let vector = g(
        avp3::AUTHENTICATION_INFO,
        vec![g(
            avp3::E_UTRAN_VECTOR,
            vec![
                u(avp3::ITEM_NUMBER, 1),
                o(avp3::RAND, &[3; 16]),
                o(avp3::XRES, &[4; 8]),
                o(avp3::AUTN, &[5; 16]),
                o(avp3::KASME, &[6; 32]),
            ],
        )],
    );
    let sub = g(
        avp3::SUBSCRIPTION_DATA,
        vec![
            o(avp3::MSISDN, &[0x64, 0x21, 0xf3]),
            g(
                avp3::AMBR,
                vec![
                    u(avp3::MAX_REQUESTED_BANDWIDTH_UL, 1000),
                    u(avp3::MAX_REQUESTED_BANDWIDTH_DL, 2000),
                ],
            ),
            g(
                avp3::APN_CONFIGURATION_PROFILE,
                vec![
                    u(avp3::CONTEXT_IDENTIFIER, 1),
                    e(avp3::ALL_APN_CONFIGURATIONS_INCLUDED_INDICATOR, 0),
                    g(
                        avp3::APN_CONFIGURATION,
                        vec![
                            u(avp3::CONTEXT_IDENTIFIER, 1),
                            e(avp3::PDN_TYPE, 0),
                            AvpRepr::new(a::SERVICE_SELECTION, 0, D::Utf8String("internet".into())),
                            g(
                                avp3::EPS_SUBSCRIBED_QOS_PROFILE,
                                vec![
                                    e(avp3::QOS_CLASS_IDENTIFIER, 9),
                                    g(
                                        avp3::ALLOCATION_RETENTION_PRIORITY,
                                        vec![
                                            u(avp3::PRIORITY_LEVEL, 8),
                                            e(avp3::PRE_EMPTION_CAPABILITY, 1),
                                            e(avp3::PRE_EMPTION_VULNERABILITY, 0),
                                        ],
                                    ),
                                ],
                            ),
                        ],
                    ),
                ],
            ),
        ],
    );
    let ss = AvpRepr::new(a::AUTH_SESSION_STATE, 0, D::Enumerated(1));
    let answers = vec![
        hss_answer(&reqs[0], vec![ss.clone(), vector.clone()]),
        hss_answer(&reqs[1], vec![ss.clone(), vector]),
        hss_answer(&reqs[2], vec![ss.clone(), u(avp3::ULA_FLAGS, 1), sub]),
        hss_answer(&reqs[3], vec![ss, u(avp3::PUA_FLAGS, 0)]),
    ];
    for b in answers {
        c.base().on_bytes(0, now, &b);
        flow.push((false, b));
    }
    c.process();
    let mut got = vec![];
    c.take_answers(&mut got);
    assert!(got.iter().all(|a| a.result.is_ok()), "{got:?}");
    // The HSS's CLR and an IDR with an unknown mandatory AVP; our answers.
    for m in [
        hss_request(
            cmd::CANCEL_LOCATION,
            900,
            vec![e(avp3::CANCELLATION_TYPE, 2)],
        ),
        hss_request(cmd::INSERT_SUBSCRIBER_DATA, 901, vec![o(4242, b"??")]),
    ] {
        c.base().on_bytes(0, now, &m);
        flow.push((false, m));
        c.process();
        ours(&mut c, &mut flow);
    }
    // Watchdog both ways, then DPR/DPA.
    c.handle_timeout(now + Duration::from_secs(6));
    ours(&mut c, &mut flow);
    let dwr = flow.last().unwrap().1.clone();
    let dwa = hss_answer(&dwr, vec![]);
    c.base().on_bytes(0, now, &dwa);
    flow.push((false, dwa));
    let their_dwr = {
        let m = MessageRepr {
            flags: flags::REQUEST,
            command: cmd::DEVICE_WATCHDOG,
            application: 0,
            hop_by_hop: 950,
            end_to_end: 950,
            avps: vec![
                AvpRepr::new(a::ORIGIN_HOST, 0, D::DiameterIdentity("hss.test".into())),
                AvpRepr::new(a::ORIGIN_REALM, 0, D::DiameterIdentity("test".into())),
            ],
        };
        let mut b = vec![];
        m.emit(&mut b);
        b
    };
    c.base().on_bytes(0, now, &their_dwr);
    flow.push((false, their_dwr));
    ours(&mut c, &mut flow);
    c.base().disconnect(now);
    ours(&mut c, &mut flow);
    let dpa = hss_answer(&flow.last().unwrap().1, vec![]);
    flow.push((false, dpa));

    let dir = temp_dir("tshark");
    let path = dir.0.join("s6a.pcap");
    write_flow(&path, &flow);
    let rep = tshark_check(&path, &["tcp.port==3868,diameter"]).unwrap();
    if std::env::var_os("DUMP_TSHARK").is_some() {
        std::fs::write("/tmp/s6a-tshark.txt", &rep.text).unwrap();
    }
    assert_eq!(rep.frames, flow.len());
    // The one warning allowed: the AVP we put in the IDR to be unknown, there and in
    // our IDA's Failed-AVP.
    let warnings: Vec<_> = rep
        .warnings
        .iter()
        .filter(|w| !w.contains("Unknown AVP 4242"))
        .collect();
    assert_eq!(rep.warnings.len(), 2, "{:?}", rep.warnings);
    assert!(
        rep.malformed.is_empty() && rep.errors.is_empty() && warnings.is_empty(),
        "malformed {:?} warnings {:?} errors {:?}",
        rep.malformed,
        warnings,
        rep.errors
    );
    for want in [
        "Command Code: Capabilities-Exchange (257)",
        "Command Code: 3GPP-Update-Location (316)",
        "Re-Synchronization-Info",
        "Visited-PLMN-Id",
        "E-UTRAN-Vector",
        "Service-Selection: internet",
        "QoS-Class-Identifier: QCI_9",
        "Cancellation-Type: SUBSCRIPTION_WITHDRAWAL (2)",
        "Failed-AVP",
        "Result-Code: DIAMETER_AVP_UNSUPPORTED (5001)",
        "Command Code: Disconnect-Peer (282)",
        "Command Code: Device-Watchdog (280)",
        "Command Code: 3GPP-Purge-UE (321)",
    ] {
        assert!(rep.text.contains(want), "tshark did not show {want:?}");
    }
    assert!(!rep.text.contains("Malformed"));
}
