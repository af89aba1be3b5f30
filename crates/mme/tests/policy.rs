//! Policy and charging control through the MME's PCRF seam, with the embedded PCRF
//! behind the harness's proxy and a real slice (control and data plane):
//!
//! * rules for the APN at attach (CCA-I) become a dedicated bearer of their QCI/ARP
//!   after the Attach Complete, with their flows as its TFT, and the data path sends
//!   matching downlink on it (the rest on the default bearer);
//! * PCRF-pushed rules (RAR): a rule of a new QCI activates a bearer, a second rule of
//!   the same QCI/ARP modifies its TFT and GBR, removing them deactivates it; a push
//!   to an idle UE pages it and is applied after its Service Request;
//! * usage monitoring: a CCR-U once the granted volume is used, not again until the
//!   new grant is used;
//! * usage records per bearer (released bearer, detach) with the data path's volumes,
//!   and a CCR-T at detach;
//! * Failure-Handling: a PCRF that never answers the CCR-I gets the attach rejected
//!   with EMM #19 (TERMINATE), or lets it go on (CONTINUE).

use pepc_mme::pcrf::{
    FlowDirection, FlowFilter, PccRule, PcrfRequest, PolicyDecision, RecordCause, UsageGrant,
};
use pepc_mme::{Input, MmeConfig};
use pepc_pcrf::{PolicyEntry, PolicyTable};
use pepc_s1ap::msg::*;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_testkit::*;
use pepc_wire::gtpu::GtpuPacket;
use pepc_wire::{Batch, Verdict};
use std::net::Ipv4Addr;
use std::time::Duration;

const IMSI: &str = "001010000000001";
const IMSI_N: u64 = 1010000000001;
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn rule(name: &str, qci: u8, ue_port: u16) -> PccRule {
    PccRule {
        name: name.into(),
        precedence: 10,
        qci,
        arp_priority: 2,
        mbr: (128_000, 128_000),
        gbr: (64_000, 64_000),
        rating_group: Some(100),
        monitoring_key: None,
        flows: vec![FlowFilter::parse(
            &format!("permit out 17 from {SERVER} 5060 to assigned {ue_port}"),
            FlowDirection::Both,
        )
        .unwrap()],
    }
}

fn harness(cfg: MmeConfig, entry: Option<PolicyEntry>) -> Harness {
    let mut h = Harness::sliced(100, cfg, 1);
    h.hss.add(&subscriber(IMSI)).unwrap();
    if let Some(e) = entry {
        let mut t = PolicyTable::default();
        t.by_apn.insert("internet".into(), e);
        h.proxy.pcrf = pepc_pcrf::EmbeddedPcrf::new(t);
    }
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    h
}

fn batch_of(pkts: &[Vec<u8>]) -> Batch {
    let mut b = Batch::default();
    for (i, p) in pkts.iter().enumerate() {
        assert!(b.bufs[i].fill(p));
    }
    b.len = pkts.len();
    b
}

/// The eNB TEID the data path sends a downlink UDP packet to (from `SERVER:5060`).
fn dl_teid(h: &mut Harness, ip: Ipv4Addr, port: u16, now: u64) -> u32 {
    let mut b = batch_of(&[ipv4_udp(SERVER, ip, 5060, port, 80)]);
    h.dp.downlink(&mut b, now);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToS1u);
    GtpuPacket::new_checked(b.bufs[0].as_slice())
        .unwrap()
        .teid()
}

fn push(h: &mut Harness, ue: &mut SimUe, d: PolicyDecision) -> Vec<String> {
    let r = h.input(Input::PolicyUpdate {
        imsi: IMSI_N,
        ebi: None,
        decision: d,
    });
    pump(h, ue, 1, r).unwrap()
}

#[test]
fn rules_at_attach_make_a_dedicated_bearer_carrying_their_flows() {
    let entry = PolicyEntry {
        rules: vec![rule("voice", 1, 4000)],
        ..Default::default()
    };
    let mut h = harness(MmeConfig::default(), Some(entry));
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(
        seen.contains(&"E-RABSetupRequest".to_string()),
        "{seen:?} {:?}",
        h.logs
    );
    assert!(ue
        .received
        .contains(&"ActivateDedicatedEpsBearerContextRequest".to_string()));
    assert!(matches!(
        &h.pcrf_requests[0],
        PcrfRequest::Establish { session, .. } if session.imsi == IMSI_N && session.apn == "internet"
    ));
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let b = h.cp.ue(slot).unwrap().bearer(6).unwrap().clone();
    assert_eq!((b.qci, b.arp.priority_level), (1, 2));
    assert_eq!((b.gbr_ul, b.gbr_dl), (64_000, 64_000));
    // The UE got the rule's flow as the bearer's TFT: create new TFT, one
    // bidirectional filter: remote 198.51.100.7/32, UDP, local port 4000, remote 5060.
    let (ebi, linked, tft) = ue.dedicated[0].clone();
    assert_eq!((ebi, linked), (6, 5));
    assert_eq!(tft[0], 0x21, "create new TFT with one packet filter");
    assert_eq!(tft[1] >> 4 & 3, 3, "bidirectional");
    let comps = &tft[4..];
    assert_eq!(
        comps,
        &[0x10, 198, 51, 100, 7, 255, 255, 255, 255, 0x30, 17, 0x40, 0x0f, 0xa0, 0x50, 0x13, 0xc4]
    );
    let ip = ue.ue_ip.unwrap();
    h.dp.sync(1);
    assert_eq!(dl_teid(&mut h, ip, 4000, 2), enb_teid(ue.enb_ue_id, 6));
    assert_eq!(dl_teid(&mut h, ip, 4001, 3), enb_teid(ue.enb_ue_id, 5));
    assert_eq!(h.mme.stats.pcc_bearers_activated, 1);
    assert_eq!(h.mme.policy_rule_sets(), 1);
}

#[test]
fn pushed_rules_activate_modify_and_deactivate_bearers_with_records() {
    let mut h = harness(MmeConfig::default(), None);
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    assert!(ue.dedicated.is_empty());
    let seen = push(
        &mut h,
        &mut ue,
        PolicyDecision {
            install: vec![rule("video", 2, 4000)],
            ..Default::default()
        },
    );
    assert_eq!(seen, ["E-RABSetupRequest"]);
    assert!(ue
        .received
        .contains(&"ActivateDedicatedEpsBearerContextRequest".to_string()));
    // Traffic on it, counted by the data path.
    let ip = ue.ue_ip.unwrap();
    h.dp.sync(1);
    assert_eq!(dl_teid(&mut h, ip, 4000, 2), enb_teid(ue.enb_ue_id, 6));
    // A second rule of the same QCI and ARP joins the bearer: its TFT now has two
    // filters and its GBR is the sum.
    let seen = push(
        &mut h,
        &mut ue,
        PolicyDecision {
            install: vec![rule("video-2", 2, 4002)],
            ..Default::default()
        },
    );
    assert_eq!(seen, ["E-RABModifyRequest"]);
    assert_eq!(ue.received.last().unwrap(), "ModifyEpsBearerContextRequest");
    assert_eq!(
        ue.dedicated[0].2[0], 0x22,
        "create new TFT with two filters"
    );
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(h.cp.ue(slot).unwrap().bearer(6).unwrap().mbr_dl, 256_000);
    h.dp.sync(3);
    assert_eq!(dl_teid(&mut h, ip, 4002, 4), enb_teid(ue.enb_ue_id, 6));
    // One rule goes: the bearer stays with the other.
    let seen = push(
        &mut h,
        &mut ue,
        PolicyDecision {
            remove: vec!["video".into()],
            ..Default::default()
        },
    );
    assert_eq!(seen, ["E-RABModifyRequest"]);
    assert_eq!(ue.received.last().unwrap(), "ModifyEpsBearerContextRequest");
    h.dp.sync(5);
    assert_eq!(dl_teid(&mut h, ip, 4000, 6), enb_teid(ue.enb_ue_id, 5));
    // The last one goes: so does the bearer, with its usage record.
    let seen = push(
        &mut h,
        &mut ue,
        PolicyDecision {
            remove: vec!["video-2".into()],
            ..Default::default()
        },
    );
    assert_eq!(seen, ["E-RABReleaseCommand"]);
    assert_eq!(
        ue.received.last().unwrap(),
        "DeactivateEpsBearerContextRequest"
    );
    assert!(ue.dedicated.is_empty());
    let rec = h
        .usage_records
        .iter()
        .find(|r| r.ebi == 6 && r.cause == RecordCause::BearerReleased)
        .expect("a record of the released bearer");
    assert_eq!(rec.cause, RecordCause::BearerReleased);
    assert_eq!(
        rec.usage.dl_packets, 2,
        "the two downlink packets sent on it"
    );
    assert_eq!(rec.qci, 2);
    assert_eq!(h.mme.policy_rule_sets(), 0);
    assert_eq!(h.mme.stats.pcrf_updates, 4);
    // Detach: a record of the default bearer and the session's end at the PCRF.
    let nas = ue.detach_request(false);
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: nas,
            ecgi: pepc_s1ap::Ecgi {
                plmn: h.mme.config().plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai {
                plmn: h.mme.config().plmn,
                tac: 1,
            },
        },
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    let last = h.usage_records.last().unwrap();
    assert_eq!((last.ebi, last.cause), (5, RecordCause::Detached));
    assert_eq!(
        last.usage.dl_packets, 1,
        "port 4000 after the rule's removal"
    );
    assert!(matches!(
        h.pcrf_requests.last(),
        Some(PcrfRequest::Terminate { session, .. }) if session.imsi == IMSI_N
    ));
}

#[test]
fn a_push_to_an_idle_ue_pages_it_and_applies_after_its_service_request() {
    let mut h = harness(MmeConfig::default(), None);
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let id = ue.mme_ue_id.unwrap();
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            cause: pepc_s1ap::Cause::USER_INACTIVITY,
        },
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    let out = h.input(Input::PolicyUpdate {
        imsi: IMSI_N,
        ebi: None,
        decision: PolicyDecision {
            install: vec![rule("voice", 1, 4000)],
            ..Default::default()
        },
    });
    assert!(
        out.iter().any(|(_, m)| matches!(m, S1apMessage::Paging(_))),
        "{out:?}"
    );
    ue.enb_ue_id = 11;
    let nas = ue.service_request();
    let m = initial_ue(&h, &ue, nas, ue.m_tmsi);
    let r = h.send(1, m);
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(seen, ["InitialContextSetupRequest", "E-RABSetupRequest"]);
    assert!(ue
        .received
        .contains(&"ActivateDedicatedEpsBearerContextRequest".to_string()));
}

#[test]
fn usage_monitoring_reports_once_per_grant() {
    let entry = PolicyEntry {
        monitoring: vec![UsageGrant {
            key: "mk".into(),
            octets: 1000,
        }],
        ..Default::default()
    };
    let mut h = harness(MmeConfig::default(), Some(entry));
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let ip = ue.ue_ip.unwrap();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let teid = h.cp.ue(slot).unwrap().bearers[0].teid_ul;
    let send = |h: &mut Harness, n: usize, now: u64| {
        let pkts: Vec<Vec<u8>> = (0..n)
            .map(|_| gpdu(teid, &ipv4_udp(ip, SERVER, 1, 2, 100)))
            .collect();
        let mut b = batch_of(&pkts);
        h.dp.uplink(&mut b, now);
    };
    let reports = |h: &Harness| {
        h.pcrf_requests
            .iter()
            .filter(|r| matches!(r, PcrfRequest::Report { .. }))
            .count()
    };
    send(&mut h, 5, 1); // 500 bytes
    h.advance(Duration::from_secs(2));
    assert_eq!(reports(&h), 0);
    send(&mut h, 6, 2); // 1100
    h.advance(Duration::from_secs(2));
    assert_eq!(reports(&h), 1);
    match h.pcrf_requests.last() {
        Some(PcrfRequest::Report { usage, .. }) => {
            assert_eq!(usage[0].key, "mk");
            assert_eq!(usage[0].ul_bytes + usage[0].dl_bytes, 1100);
        }
        o => panic!("{o:?}"),
    }
    // Granted again from here: 900 more bytes are not enough.
    send(&mut h, 9, 3);
    h.advance(Duration::from_secs(2));
    assert_eq!(reports(&h), 1);
    send(&mut h, 1, 4);
    h.advance(Duration::from_secs(2));
    assert_eq!(reports(&h), 2);
    assert_eq!(h.mme.stats.usage_reports, 2);
}

#[test]
fn an_unanswered_ccr_i_rejects_the_attach_unless_failure_handling_continues() {
    let mut h = harness(MmeConfig::default(), None);
    h.pcrf_silent = true;
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(!seen.contains(&"InitialContextSetupRequest".to_string()));
    let r = h.advance(Duration::from_secs(4));
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(
        ue.received.iter().any(|r| r.starts_with("AttachReject")),
        "{:?}",
        ue.received
    );
    assert_eq!(h.mme.stats.pcrf_failures, 1);
    assert_eq!(h.ue_count(), 0);

    let mut cfg = MmeConfig::default();
    cfg.policy.continue_on_failure = true;
    let mut h = harness(cfg, None);
    h.pcrf_silent = true;
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let r = h.advance(Duration::from_secs(4));
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?}"
    );
}

#[test]
fn off_means_no_pcrf_request() {
    let mut cfg = MmeConfig::default();
    cfg.policy.enabled = false;
    let mut h = harness(cfg, None);
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(seen.contains(&"InitialContextSetupRequest".to_string()));
    assert!(h.pcrf_requests.is_empty());
}

#[test]
fn a_restored_ue_never_keeps_a_rule_set_id_of_another_registry() {
    use pepc_mme::snapshot::{restore_whole_ue, snapshot_whole_ue, UeKey};
    let entry = PolicyEntry {
        rules: vec![rule("voice", 1, 4000)],
        ..Default::default()
    };
    let mut h = harness(MmeConfig::default(), Some(entry));
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let set = h.cp.ue(slot).unwrap().rule_set;
    assert!(set >= 64, "the UE has a policy rule set ({set})");
    let mut bytes = vec![];
    snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut bytes).unwrap();
    // Another MME whose registry already gave its first set to a UE of other rules:
    // the restored UE's rules (its snapshot's PCC section) get a set of this registry
    // by their content, never the old id that names the other UE's set here.
    let other = PolicyEntry {
        rules: vec![rule("video", 2, 4002)],
        ..Default::default()
    };
    let mut h2 = harness(MmeConfig::default(), Some(other));
    let mut ue2 = SimUe::new("001010000000002", 20);
    h2.hss.add(&subscriber("001010000000002")).unwrap();
    attach(&mut h2, &mut ue2, 1).unwrap();
    // Both MMEs gave their first M-TMSI: the other UE takes the next one here.
    let mut out = vec![];
    let now = h2.now;
    h2.mme
        .reallocate_guti(now, 1010000000002, &mut h2.cp, &mut out)
        .unwrap();
    let r: Vec<_> = out
        .into_iter()
        .filter_map(|o| match o {
            pepc_mme::mme::Output::S1ap { assoc, bytes, .. } => {
                Some((assoc, S1apMessage::decode(&bytes).unwrap()))
            }
            _ => None,
        })
        .collect();
    pump(&mut h2, &mut ue2, 1, r).unwrap();
    let (_, other_slot) = h2.cp.find_imsi(1010000000002).unwrap();
    let other_set = h2.cp.ue(other_slot).unwrap().rule_set;
    assert_eq!(other_set, set, "both registries start from the same id");
    let r = restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes, h2.now).unwrap();
    let slot2 = r.slice.unwrap().ue_slot;
    let set2 = h2.cp.ue(slot2).unwrap().rule_set;
    assert!(set2 >= 64 && set2 != other_set, "{set2}");
    assert_eq!(h2.mme.policy_rule_sets(), 2);
}
