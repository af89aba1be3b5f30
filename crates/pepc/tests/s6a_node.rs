//! A pepc node with `[hss] mode = "diameter"` (two slices, one S6a client) against
//! the pycrate test HSS of pepc-diameter (an independent Diameter codec, real
//! Milenage vectors for the test UE's keys), an eNB and a UE over userspace SCTP on
//! loopback (127.0.44.x):
//!
//! * a UE attaches over S6a (ULR, AIR) and completes the attach;
//! * the HSS sends an IDR with a new AMBR and QoS: the eNB gets an E-RAB Modify
//!   Request with the new UE-AMBR, whose NAS the UE verifies;
//! * the HSS sends a CLR (subscription withdrawn): the UE gets a Detach Request and
//!   its context is released; the HSS got DIAMETER_SUCCESS for both; an IDR for it
//!   afterwards gets DIAMETER_ERROR_USER_UNKNOWN (no slice holds it);
//! * attaches of an unknown subscriber (5001), of one not allowed to roam (5004) and
//!   of one without an EPS subscription (5420) are rejected with EMM #8, #11 and #15
//!   (TS 29.272 Annex A);
//! * with `purge_on_detach`, a UE-initiated detach sends the HSS a PUR.
//!
//! Skips (says so) when python3 with pycrate is missing; scripts/test.sh installs it.

mod common;

use common::diameter::PyPeer;
use pepc::epc::{open_hss, Epc, EpcConfig, HssStore};
use pepc_s1ap::msg::*;
use pepc_s1ap::{ERabTunnel, Ecgi, EnbId, GlobalEnbId, Plmn, SupportedTa, Tai};
use pepc_sctp::transport::{S1Transport, TransportEvent, UdpSctpTransport, S1AP_PPID};
use pepc_testkit::SimUe;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const PLMN: Plmn = Plmn([0x00, 0xf1, 0x10]);
/// The first test IMSI the node's policy puts in slice 1: its S6a answers must find
/// their way to the second slice (by the slice bits of the MME UE S1AP ID).
fn imsi_of_slice_1() -> String {
    let policy = pepc_mme::SlicePolicy::parse("consistent-hash").unwrap();
    (1..100u64)
        .map(|i| 1010000000000 + i)
        .find(|&n| policy.slice_of(n, 2) == 1 && n % 100 < 90)
        .map(|n| format!("{n:015}"))
        .expect("an IMSI of slice 1")
}

/// The eNB: one association, one UE at a time.
struct Enb {
    t: UdpSctpTransport,
    assoc: u64,
}

impl Enb {
    fn send(&mut self, m: impl Into<S1apMessage>) {
        let bytes = m.into().encode().unwrap();
        self.t.send(self.assoc, 1, S1AP_PPID, &bytes).unwrap();
        self.t.flush().unwrap();
    }

    /// S1AP messages received within `wait` (returns as soon as some arrived).
    fn recv(&mut self, wait: Duration) -> Vec<S1apMessage> {
        let deadline = Instant::now() + wait;
        let mut ev = Vec::new();
        let mut got = Vec::new();
        while got.is_empty() && Instant::now() < deadline {
            ev.clear();
            self.t.poll(Duration::from_millis(20), &mut ev).unwrap();
            for e in ev.drain(..) {
                match e {
                    TransportEvent::Data { data, .. } => {
                        got.push(S1apMessage::decode(&data).expect("valid S1AP from pepc"))
                    }
                    TransportEvent::Down { .. } => panic!("S1 association went down"),
                    _ => {}
                }
            }
        }
        got
    }

    fn tai_ecgi() -> (Tai, Ecgi) {
        (
            Tai { plmn: PLMN, tac: 1 },
            Ecgi {
                plmn: PLMN,
                cell_id: 0x101,
            },
        )
    }

    /// Plays eNB and `ue` for what the MME sends, until `done` says so of the
    /// messages so far (bounded); returns every message seen.
    fn run(
        &mut self,
        ue: &mut SimUe,
        what: &str,
        done: impl Fn(&[S1apMessage], &SimUe) -> bool,
    ) -> Vec<S1apMessage> {
        let (tai, ecgi) = Self::tai_ecgi();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = Vec::new();
        while !done(&seen, ue) {
            assert!(
                Instant::now() < deadline,
                "{what}: not done in 10 s; seen {:?}, UE got {:?}",
                seen.iter().map(|m| m.name()).collect::<Vec<_>>(),
                ue.received
            );
            for m in self.recv(Duration::from_millis(200)) {
                let enb_ue_id = ue.enb_ue_id;
                let uplink = |mme_ue_id, nas_pdu| UplinkNasTransport {
                    mme_ue_id,
                    enb_ue_id,
                    nas_pdu,
                    ecgi,
                    tai,
                };
                match &m {
                    S1apMessage::DownlinkNasTransport(d) => {
                        ue.mme_ue_id = Some(d.mme_ue_id);
                        let step = ue.on_downlink(&d.nas_pdu).expect("UE takes the NAS");
                        if let Some(r) = step.reply {
                            self.send(uplink(d.mme_ue_id, r));
                        }
                    }
                    S1apMessage::InitialContextSetupRequest(r) => {
                        let expected = ue.expected_kenb();
                        let nas = r.erabs.first().and_then(|e| e.nas_pdu.clone());
                        let reply = nas.and_then(|n| ue.on_downlink(&n).expect("NAS").reply);
                        if let Some(k) = expected {
                            assert_eq!(k.as_bytes(), &r.security_key.0, "KeNB");
                        }
                        self.send(InitialContextSetupResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            erabs: r
                                .erabs
                                .iter()
                                .map(|e| ERabTunnel {
                                    id: e.id,
                                    transport: Ipv4Addr::new(127, 0, 44, 2),
                                    teid: 0x100 + u32::from(e.id),
                                })
                                .collect(),
                            failed: vec![],
                        });
                        if let Some(b) = reply {
                            self.send(uplink(r.mme_ue_id, b));
                        }
                    }
                    S1apMessage::ERabModifyRequest(r) => {
                        for e in &r.erabs {
                            ue.on_downlink(&e.nas_pdu).expect("UE takes the NAS");
                        }
                    }
                    S1apMessage::UeContextReleaseCommand(c) => {
                        let mme_ue_id = match c.ids {
                            pepc_s1ap::UeS1apIds::Pair { mme_ue_id, .. } => mme_ue_id,
                            pepc_s1ap::UeS1apIds::MmeOnly(i) => i,
                        };
                        self.send(UeContextReleaseComplete {
                            mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                        });
                    }
                    _ => {}
                }
                seen.push(m);
            }
        }
        seen
    }

    fn attach(&mut self, ue: &mut SimUe) {
        let (tai, ecgi) = Self::tai_ecgi();
        self.send(InitialUeMessage {
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: ue.attach_request(None, false),
            tai,
            ecgi,
            rrc_cause: 3,
            s_tmsi: None,
            gummei: None,
        });
    }
}

fn names(v: &[S1apMessage]) -> Vec<&'static str> {
    v.iter().map(|m| m.name()).collect()
}

/// A node of two slices on 127.0.`net`.1 with `extra` configuration, and an eNB on
/// 127.0.`net`.2 set up with it.
/// Where node `net`'s usage records go (removed when the test ends).
fn cdr_path(net: u8) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "pepc-s6a-node-{}-{net}.cdr.jsonl",
        std::process::id()
    ))
}

fn node(net: u8, extra: &str) -> (Epc, Enb) {
    let cfg = EpcConfig::parse(&format!(
        "[node]\nmax_users = 1024\nslices = 2\n\
         [s1u]\nbind = \"127.0.{net}.1:2152\"\n\
         [sgi]\nmode = \"udp\"\nsink_local = \"127.0.{net}.1:5202\"\nsink_peer = \"127.0.{net}.1:5201\"\n\
         [metrics]\nlisten = \"\"\n[api]\nlisten = \"\"\n[s1mme]\ntransport = \"udp\"\nbind = \"127.0.{net}.1\"\nudp_port = 9899\n\
         [state]\nstore = \"none\"\n\
         [charging]\ncdr_path = \"{cdr}\"\n{extra}",
        cdr = cdr_path(net).display()
    ))
    .unwrap();
    // The embedded HSS is not used in diameter mode: it stays empty. No state store,
    // usage records in the temporary directory: a test leaves no file behind.
    let epc = Epc::start(&cfg, open_hss(&HssStore::Memory).unwrap()).unwrap();
    let t = UdpSctpTransport::connect(
        format!("127.0.{net}.2:0").parse().unwrap(),
        format!("127.0.{net}.1:9899").parse().unwrap(),
        36412,
        Default::default(),
    )
    .unwrap();
    let mut enb = Enb { t, assoc: 0 };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut ev = Vec::new();
    while enb.assoc == 0 {
        assert!(Instant::now() < deadline, "no S1 association");
        enb.t.poll(Duration::from_millis(20), &mut ev).unwrap();
        for e in ev.drain(..) {
            if let TransportEvent::Up { assoc, .. } = e {
                enb.assoc = assoc;
            }
        }
    }
    enb.send(S1SetupRequest {
        global_enb_id: GlobalEnbId {
            plmn: PLMN,
            enb_id: EnbId::Macro(0x44),
        },
        enb_name: Some("s6a-test".into()),
        supported_tas: vec![SupportedTa {
            tac: 1,
            plmns: vec![PLMN],
        }],
        paging_drx: Some(128),
    });
    let r = enb.recv(Duration::from_secs(5));
    assert!(
        matches!(r.first(), Some(S1apMessage::S1SetupResponse(_))),
        "{r:?}"
    );
    (epc, enb)
}

#[test]
fn s6a_attach_then_idr_and_clr_reach_the_ue_and_hss_errors_become_emm_causes() {
    let t0 = Instant::now();
    let dir = std::env::temp_dir().join(format!("pepc-s6a-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(mut hss) = PyPeer::start(&dir, "hss", "milenage") else {
        return;
    };
    let port = hss.port;
    let (epc, mut enb) = node(
        44,
        &format!(
            "[hss]\nmode = \"diameter\"\npeers = [\"127.0.0.1:{port}\"]\n\
             origin_host = \"mme.pepc.test\"\norigin_realm = \"pepc.test\"\n\
             destination_realm = \"test\"\nrequest_timeout_ms = 2000\npurge_on_detach = true\n"
        ),
    );

    // 1. The attach, over S6a, in slice 1.
    let imsi = imsi_of_slice_1();
    let imsi = imsi.as_str();
    let mut ue = SimUe::new(imsi, 1);
    enb.attach(&mut ue);
    enb.run(&mut ue, "attach", |_, ue| {
        ue.received.iter().any(|r| r == "AttachAccept")
    });
    // Attach Complete went with the ICS response; let the MME take it.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(epc.slice_ues(), vec![0, 1], "the UE is served by slice 1");
    let log = hss.log();
    for cmd in [316, 318] {
        assert!(
            log.iter()
                .any(|v| v["event"] == "request" && v["cmd"] == cmd && v["user"] == imsi),
            "the HSS got no command {cmd} for the UE: {log:?}"
        );
    }

    // 2. IDR: new AMBR (1000/2000 bit/s) and default bearer QoS (QCI 6, ARP 2).
    hss.command(&format!("idr {imsi}"));
    let seen = enb.run(&mut ue, "the IDR's E-RAB Modify", |seen, _| {
        seen.iter()
            .any(|m| matches!(m, S1apMessage::ERabModifyRequest(_)))
    });
    let m = seen
        .iter()
        .find_map(|m| match m {
            S1apMessage::ERabModifyRequest(r) => Some(r),
            _ => None,
        })
        .unwrap();
    let ambr = m.ue_ambr.expect("UE-AMBR in the E-RAB Modify Request");
    assert_eq!((ambr.ul, ambr.dl), (1000, 2000));
    assert_eq!((m.erabs[0].qci, m.erabs[0].arp.priority_level), (6, 2));
    assert_eq!(
        ue.received.last().map(String::as_str),
        Some("ModifyEpsBearerContextRequest"),
        "{:?}",
        ue.received
    );
    hss.wait_log("the IDA", |v| {
        v["event"] == "answer" && v["cmd"] == 319 && v["result"] == 2001
    });

    // 3. CLR (subscription withdrawn): the UE is detached.
    hss.command(&format!("clr {imsi}"));
    let seen = enb.run(&mut ue, "the CLR's detach", |seen, _| {
        seen.iter()
            .any(|m| matches!(m, S1apMessage::UeContextReleaseCommand(_)))
    });
    assert_eq!(
        names(&seen),
        vec!["DownlinkNASTransport", "UEContextReleaseCommand"]
    );
    assert!(ue.received.iter().any(|r| r == "DetachRequest"));
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(epc.slice_ues(), vec![0, 0], "the context is gone");
    // An IDR for the subscriber no slice holds now: DIAMETER_ERROR_USER_UNKNOWN
    // (TS 29.272 §5.2.2.1.2), after both slices said so.
    hss.command(&format!("idr {imsi}"));
    hss.wait_log("the IDA of an unknown subscriber", |v| {
        v["event"] == "answer" && v["cmd"] == 319 && v["exp"] == 5001
    });
    hss.wait_log("the CLA", |v| {
        v["event"] == "answer" && v["cmd"] == 317 && v["result"] == 2001
    });

    // 4. With `purge_on_detach`, a UE-initiated detach purges the subscriber (PUR).
    let imsi2 = "001010000000002";
    let mut ue = SimUe::new(imsi2, 4);
    enb.attach(&mut ue);
    enb.run(&mut ue, "second attach", |_, ue| {
        ue.received.iter().any(|r| r == "AttachAccept")
    });
    std::thread::sleep(Duration::from_millis(200));
    let (tai, ecgi) = Enb::tai_ecgi();
    let detach = ue.detach_request(false);
    enb.send(UplinkNasTransport {
        mme_ue_id: ue.mme_ue_id.unwrap(),
        enb_ue_id: ue.enb_ue_id,
        nas_pdu: detach,
        ecgi,
        tai,
    });
    enb.run(&mut ue, "UE-initiated detach", |seen, _| {
        seen.iter()
            .any(|m| matches!(m, S1apMessage::UeContextReleaseCommand(_)))
    });
    hss.wait_log("the PUR", |v| {
        v["event"] == "request" && v["cmd"] == 321 && v["user"] == imsi2
    });

    // 5. HSS refusals become the EMM causes of TS 29.272 Annex A.
    for (imsi, cause, enb_ue_id) in [
        ("310150000000001", "AttachReject#8", 2),
        ("001010000000098", "AttachReject#11", 3),
        ("001010000000099", "AttachReject#15", 5),
    ] {
        let mut ue = SimUe::new(imsi, enb_ue_id);
        enb.attach(&mut ue);
        enb.run(&mut ue, imsi, |seen, _| {
            seen.iter()
                .any(|m| matches!(m, S1apMessage::UeContextReleaseCommand(_)))
        });
        assert_eq!(ue.received, vec![cause.to_string()], "{imsi}");
    }

    enb.t.close(enb.assoc);
    let stats = epc.stop();
    let _ = std::fs::remove_file(cdr_path(44));
    eprint!("{stats}");
    // The S6a client said DPR on the way out (bounded by the DPA timeout).
    hss.wait_log("the DPR", |v| v["event"] == "request" && v["cmd"] == 282);
    // No key material in the HSS log's requests or our figures.
    for secret in [pepc_testkit::TEST_K, pepc_testkit::TEST_OPC] {
        assert!(!stats.to_ascii_uppercase().contains(secret));
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}

/// An HSS that takes the connection but never answers S6a: the request times out in
/// the S6a client (500 ms) before the MME's HSS timer (1.5 s), and the attach is
/// rejected with #17 (network failure: the UE retries later).
#[test]
fn an_hss_that_never_answers_gets_the_attach_rejected_with_17() {
    let t0 = Instant::now();
    let dir = std::env::temp_dir().join(format!("pepc-s6a-silent-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(hss) = PyPeer::start(&dir, "hss", "silent") else {
        return;
    };
    let port = hss.port;
    let (epc, mut enb) = node(
        45,
        &format!(
            "[mme]\nhss_timeout_ms = 1500\n\
             [hss]\nmode = \"diameter\"\npeers = [\"127.0.0.1:{port}\"]\n\
             origin_host = \"mme.pepc.test\"\norigin_realm = \"pepc.test\"\n\
             destination_realm = \"test\"\nrequest_timeout_ms = 500\n"
        ),
    );
    let mut ue = SimUe::new("001010000000003", 1);
    enb.attach(&mut ue);
    enb.run(&mut ue, "the reject", |seen, _| {
        seen.iter()
            .any(|m| matches!(m, S1apMessage::UeContextReleaseCommand(_)))
    });
    assert_eq!(ue.received, vec!["AttachReject#17".to_string()]);
    // Authentication comes first (TS 23.401 §5.3.2.1): the unanswered request is the
    // AIR, and no Update Location is ever sent for a UE that was not authenticated.
    hss.wait_log("the AIR", |v| v["event"] == "request" && v["cmd"] == 318);
    assert!(
        !hss.log()
            .iter()
            .any(|v| v["event"] == "request" && v["cmd"] == 316),
        "a ULR before authentication: {:?}",
        hss.log()
    );
    enb.t.close(enb.assoc);
    epc.stop();
    let _ = std::fs::remove_file(cdr_path(45));
    let _ = std::fs::remove_dir_all(&dir);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
}
