//! A pepc node with `[pcrf] mode = "diameter"` against the pycrate test PCRF of
//! pepc-diameter (an independent Diameter codec), an eNB and a UE over userspace
//! SCTP, GTP-U and the SGi sink on loopback (127.0.47.x), the node's real data path:
//!
//! * the attach waits for the CCA-I, whose rule "video" (QCI 2, GBR) becomes a
//!   dedicated bearer with the rule's flow as TFT after the Attach Complete;
//! * downlink matching the flow leaves on that bearer's tunnel, the rest on the
//!   default bearer's;
//! * the granted 2000 octets are used: the PCRF gets a CCR-U with the volume;
//! * the PCRF's RARs: a rule of the same QCI/ARP joins the bearer (E-RAB Modify,
//!   traffic to its port follows), removing both deactivates the bearer;
//! * the UE detaches: CCR-T; the usage records (JSON lines) hold the bearers'
//!   volumes as the data path counted them.
//!
//! Skips (says so) when python3 with pycrate is missing; scripts/test.sh installs it.

mod common;

use common::diameter::PyPeer;
use common::enb::{enb_teid, Enb};
use pepc_s1ap::msg::*;
use pepc_slice::packets::ipv4_udp;
use pepc_testkit::{subscriber, SimUe};
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const IMSI: &str = "001010000000001";
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

/// Downlink from `SERVER:5060` to the UE's `port`, through the SGi sink; returns the
/// TEIDs of the G-PDUs the eNB got for them.
fn downlink(sgi: &UdpSocket, s1u: &UdpSocket, ue: Ipv4Addr, port: u16, n: usize) -> Vec<u32> {
    for _ in 0..n {
        sgi.send(&ipv4_udp(SERVER, ue, 5060, port, 100)).unwrap();
    }
    let mut teids = vec![];
    let mut b = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(5);
    while teids.len() < n && Instant::now() < deadline {
        if let Ok(k) = s1u.recv(&mut b) {
            assert!(k > 8 && b[1] == 0xff, "a G-PDU");
            teids.push(u32::from_be_bytes([b[4], b[5], b[6], b[7]]));
        }
    }
    assert_eq!(teids.len(), n, "downlink lost");
    teids
}

fn ul_nas(enb: &mut Enb, ue: &mut SimUe, nas: Vec<u8>) -> Vec<String> {
    let plmn = common::enb::PLMN;
    enb.send(
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: nas,
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x701,
            },
        }
        .into(),
    );
    let first = enb.recv(Duration::from_secs(3));
    enb.pump(ue, first)
}

/// What the eNB gets after a PCRF command (bounded).
fn after(enb: &mut Enb, ue: &mut SimUe) -> Vec<String> {
    let first = enb.recv(Duration::from_secs(5));
    enb.pump(ue, first)
}

#[test]
fn pcrf_rules_bearers_usage_and_records_over_gx() {
    let dir = std::env::temp_dir().join(format!("pepc-gx-node-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(mut pcrf) = PyPeer::start(&dir, "pcrf", "normal") else {
        return;
    };
    let port = pcrf.port;
    let cdr = dir.join("cdr.jsonl");
    let epc = common::node::node(
        47,
        0,
        &format!(
            "[pcrf]\nmode = \"diameter\"\npeers = [\"127.0.0.1:{port}\"]\n\
             destination_realm = \"test\"\ntimeout_ms = 3000\nrequest_timeout_ms = 1000\n\
             [charging]\ncdr_path = \"{}\"\ninterim_s = 0\n",
            cdr.display()
        ),
    );
    epc.hss.add(&subscriber(IMSI)).unwrap();
    pcrf.wait_log("the node's CER", |v| v["cmd"] == 257);
    let s1u = UdpSocket::bind("127.0.47.9:2152").unwrap();
    s1u.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let sgi = UdpSocket::bind("127.0.47.2:5201").unwrap();
    sgi.connect("127.0.47.1:5202").unwrap();
    let mut enb = Enb::up_from(
        SocketAddr::from(([127, 0, 47, 1], pepc_sctp::SCTP_UDP_ENCAPS_PORT)),
        SocketAddr::from(([127, 0, 47, 2], 0)),
    );
    enb.s1u = "127.0.47.9".parse().unwrap();

    // Attach: CCR-I, the rule's dedicated bearer after the Attach Complete.
    let mut ue = SimUe::new(IMSI, 10);
    let first = enb.initial(&ue, ue.attach_request(None, false), None);
    let seen = enb.pump(&mut ue, first);
    assert!(
        seen.contains(&"E-RABSetupRequest".to_string()),
        "{seen:?} {:?}",
        ue.received
    );
    let i = pcrf.wait_log("the CCR-I", |v| v["cc_type"] == 1);
    assert_eq!(i["user"], IMSI);
    assert_eq!(i["apn"], "internet");
    let ip = ue.ue_ip.unwrap();
    assert_eq!(i["ip"], hex(&ip.octets()));
    assert_eq!(ue.dedicated.len(), 1);
    let (ebi, linked, tft) = ue.dedicated[0].clone();
    assert_eq!((ebi, linked), (6, 5));
    assert_eq!(tft[0], 0x21, "create new TFT, one filter");

    // Downlink on the rule's flow: the dedicated bearer; the rest: the default one.
    let ded = enb_teid(ue.enb_ue_id, 6);
    let def = 0x1000 + ue.enb_ue_id;
    assert!(downlink(&sgi, &s1u, ip, 4000, 12).iter().all(|t| *t == ded));
    assert!(downlink(&sgi, &s1u, ip, 4001, 12).iter().all(|t| *t == def));

    // 2400 octets passed the 2000 granted: a CCR-U with the session's volume.
    let u = pcrf.wait_log("the CCR-U", |v| v["cc_type"] == 2);
    assert_eq!(u["trigger"], 26);
    let total = u["usage"][0]["total"].as_u64().unwrap();
    assert!(total >= 2000, "{u}");
    assert_eq!(u["session"], i["session"]);

    // A RAR: "voice" (same QCI and ARP) joins bearer 6.
    pcrf.command(&format!("rar-install {IMSI} voice 4002"));
    let seen = after(&mut enb, &mut ue);
    assert_eq!(seen, ["E-RABModifyRequest"], "{:?}", ue.received);
    assert_eq!(ue.dedicated[0].2[0], 0x22, "the TFT now has two filters");
    assert!(downlink(&sgi, &s1u, ip, 4002, 3).iter().all(|t| *t == ded));
    pcrf.command(&format!("rar-remove {IMSI} video"));
    assert_eq!(after(&mut enb, &mut ue), ["E-RABModifyRequest"]);
    assert!(downlink(&sgi, &s1u, ip, 4000, 2).iter().all(|t| *t == def));
    pcrf.command(&format!("rar-remove {IMSI} voice"));
    assert_eq!(after(&mut enb, &mut ue), ["E-RABReleaseCommand"]);
    assert!(ue.dedicated.is_empty());
    let raas = pcrf
        .log()
        .iter()
        .filter(|v| v["event"] == "answer" && v["cmd"] == 258 && v["result"] == 2001)
        .count();
    assert_eq!(raas, 3);

    // Detach: the session ends at the PCRF.
    let nas = ue.detach_request(false);
    ul_nas(&mut enb, &mut ue, nas);
    pcrf.wait_log("the CCR-T", |v| v["cc_type"] == 3);
    let report = epc.stop();
    assert!(report.contains("mme slice"), "{report}");

    // The usage records: the dedicated bearer's (released) and the default's.
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&cdr)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let b6 = lines
        .iter()
        .find(|r| r["ebi"] == 6 && r["cause"] == "bearer-released")
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert_eq!(b6["cause"], "bearer-released");
    assert_eq!(b6["dl_packets"], 12 + 3, "ports 4000 (first) and 4002");
    assert_eq!(b6["qci"], 2);
    assert_eq!(b6["imsi"], IMSI);
    let b5 = lines.iter().find(|r| r["ebi"] == 5).unwrap();
    assert_eq!(b5["cause"], "detached");
    assert_eq!(b5["dl_packets"], 12 + 2);
    assert_eq!(b5["dl_bytes"], (12 + 2) * 100);
    let _ = std::fs::remove_dir_all(&dir);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A PCRF that refuses the session (DIAMETER_ERROR_INITIAL_PARAMETERS): with
/// Failure-Handling TERMINATE the attach is rejected with EMM #19 carrying ESM #30.
#[test]
fn a_refused_ccr_i_rejects_the_attach_with_esm_failure() {
    let dir = std::env::temp_dir().join(format!("pepc-gx-reject-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let Some(pcrf) = PyPeer::start(&dir, "pcrf", "reject") else {
        return;
    };
    let port = pcrf.port;
    let epc = common::node::node(
        45,
        0,
        &format!(
            "[pcrf]\nmode = \"diameter\"\npeers = [\"127.0.0.1:{port}\"]\n\
             destination_realm = \"test\"\ntimeout_ms = 3000\nrequest_timeout_ms = 1000\n"
        ),
    );
    epc.hss.add(&subscriber(IMSI)).unwrap();
    pcrf.wait_log("the node's CER", |v| v["cmd"] == 257);
    let mut enb = Enb::up_from(
        SocketAddr::from(([127, 0, 45, 1], pepc_sctp::SCTP_UDP_ENCAPS_PORT)),
        SocketAddr::from(([127, 0, 45, 2], 0)),
    );
    let mut ue = SimUe::new(IMSI, 10);
    let first = enb.initial(&ue, ue.attach_request(None, false), None);
    enb.pump(&mut ue, first);
    assert!(
        ue.received.iter().any(|r| r == "AttachReject#19"),
        "{:?}",
        ue.received
    );
    pcrf.wait_log("the CCR-I", |v| v["cc_type"] == 1);
    epc.stop();
    let _ = std::fs::remove_dir_all(&dir);
}
