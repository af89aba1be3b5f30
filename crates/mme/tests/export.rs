//! A UE exported between two of its procedures and imported elsewhere: refused while a
//! procedure awaits a message; once moved it keeps its PCC rules (its dedicated bearer
//! still carries their flows, under a rule set of the new MME's registry) and its
//! charging goes on exactly: the usage records at its detach are those of a UE that
//! never moved.

use pepc_mme::pcrf::{FlowDirection, FlowFilter, PccRule, RecordCause, UsageRecord};
use pepc_mme::snapshot::{ExportError, UeKey};
use pepc_mme::MmeConfig;
use pepc_pcrf::{PolicyEntry, PolicyTable};
use pepc_s1ap::msg::*;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_testkit::*;
use pepc_wire::{Batch, Verdict};
use std::net::Ipv4Addr;

const IMSI: &str = "001010000000001";
const IMSI_N: u64 = 1010000000001;
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn voice() -> PolicyEntry {
    PolicyEntry {
        rules: vec![PccRule {
            name: "voice".into(),
            precedence: 10,
            qci: 1,
            arp_priority: 2,
            mbr: (128_000, 128_000),
            gbr: (64_000, 64_000),
            rating_group: Some(100),
            monitoring_key: None,
            flows: vec![FlowFilter::parse(
                &format!("permit out 17 from {SERVER} 5060 to assigned 4000"),
                FlowDirection::Both,
            )
            .unwrap()],
        }],
        ..Default::default()
    }
}

fn node(entry: Option<PolicyEntry>) -> Harness {
    let mut h = Harness::sliced(100, MmeConfig::default(), 1);
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

/// `n` downlink packets to the UE's port 4000 (the voice rule's flow) and `n`
/// uplink on its default bearer; returns the eNB TEIDs the downlink went to.
fn traffic(h: &mut Harness, ue: &SimUe, n: usize, now: u64) -> Vec<u32> {
    h.sync();
    let ip = ue.ue_ip.unwrap();
    let mut teids = vec![];
    for k in 0..n {
        let mut b = Batch::default();
        assert!(b.bufs[0].fill(&ipv4_udp(SERVER, ip, 5060, 4000, 80 + k)));
        b.len = 1;
        h.dp.downlink(&mut b, now + k as u64);
        assert_eq!(b.bufs[0].meta.verdict, Verdict::ToS1u);
        teids.push(u32::from_be_bytes(
            b.bufs[0].as_slice()[4..8].try_into().unwrap(),
        ));
    }
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let teid_ul = h.cp.ue(slot).unwrap().bearers[0].teid_ul;
    for k in 0..n {
        let mut b = Batch::default();
        assert!(b.bufs[0].fill(&gpdu(teid_ul, &ipv4_udp(ip, SERVER, 1, 2, 60 + k))));
        b.len = 1;
        h.dp.uplink(&mut b, now + 100 + k as u64);
        assert_eq!(b.bufs[0].meta.verdict, Verdict::ToSgi);
    }
    teids
}

fn detach(h: &mut Harness, ue: &mut SimUe) {
    let nas = ue.detach_request(false);
    let loc = initial_ue(h, ue, vec![], None);
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: nas,
            ecgi: loc.ecgi,
            tai: loc.tai,
        },
    );
    pump(h, ue, 1, r).unwrap();
}

/// The figures of the detach's records that do not depend on when they were made.
fn figures(rs: &[UsageRecord]) -> Vec<String> {
    rs.iter()
        .filter(|r| r.cause == RecordCause::Detached)
        .map(|r| {
            format!(
                "ebi {} qci {} usage {:?} rules {:?} seq {}",
                r.ebi, r.qci, r.usage, r.rules, r.sequence
            )
        })
        .collect()
}

#[test]
fn a_moved_ue_keeps_its_rules_and_its_charging_is_exact() {
    // The UE that never moves: 3 packets each way, then 2, then the detach.
    let mut still = node(Some(voice()));
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut still, &mut ue, 1).unwrap();
    traffic(&mut still, &ue, 3, 10);
    traffic(&mut still, &ue, 2, 1000);
    detach(&mut still, &mut ue);
    let want = figures(&still.usage_records);
    assert_eq!(want.len(), 2, "default and voice bearer: {want:?}");

    // The same UE, moved between the two bursts to another MME and slice.
    let mut a = node(Some(voice()));
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut a, &mut ue, 1).unwrap();
    let before = traffic(&mut a, &ue, 3, 10);
    let mut bytes = vec![];
    a.mme
        .export(&a.cp, UeKey::Imsi(IMSI_N), a.now, &mut bytes)
        .unwrap();
    a.mme
        .remove_migrated_ue(UeKey::Imsi(IMSI_N), &mut a.cp)
        .unwrap();
    assert!(a.usage_records.is_empty(), "nothing charged at the move");
    assert_eq!(a.mme.policy_rule_sets(), 0, "A's rule set went with the UE");

    // B has no PCRF rules of its own: what the UE has comes with it.
    let mut b = node(None);
    let r = b.mme.import(&mut b.cp, &bytes, b.now).unwrap();
    let slot = r.slice.unwrap().ue_slot;
    assert!(b.cp.ue(slot).unwrap().rule_set >= 64);
    assert_eq!(b.mme.policy_rule_sets(), 1);
    // Its voice flow still goes on its dedicated bearer.
    let after = traffic(&mut b, &ue, 2, 1000);
    assert_eq!(after[0], before[0], "the voice bearer's eNB tunnel");
    detach(&mut b, &mut ue);
    assert_eq!(figures(&b.usage_records), want);
}

#[test]
fn export_waits_for_the_procedure_boundary() {
    let mut h = node(None);
    h.hss_mode = HssMode::Hold;
    let mut ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(None, false);
    assert!(h.send(1, initial_ue(&h, &ue, nas, None)).is_empty());
    let mut out = vec![];
    let key = UeKey::Imsi(IMSI_N);
    assert_eq!(
        h.mme.export(&h.cp, key, h.now, &mut out),
        Err(ExportError::Busy("authentication vector (HSS)"))
    );
    // The challenge out, its answer awaited: still a procedure.
    let r = h.answer_hss(0);
    let first = r[0].clone();
    assert!(matches!(first.1, S1apMessage::DownlinkNasTransport(_)));
    assert_eq!(
        h.mme.export(&h.cp, key, h.now, &mut out),
        Err(ExportError::Busy("authentication"))
    );
    assert!(out.is_empty());
    h.hss_mode = HssMode::Inline;
    pump(&mut h, &mut ue, 1, r).unwrap();
    let r = h.answer_hss(0);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(
        ue.received.contains(&"AttachAccept".to_string()),
        "{:?}",
        h.logs
    );
    // Between procedures: exported.
    assert!(h.mme.export(&h.cp, key, h.now, &mut out).unwrap() > 0);
    assert_eq!(
        h.mme
            .export(&h.cp, UeKey::Imsi(IMSI_N + 1), h.now, &mut out),
        Err(ExportError::UnknownUe(UeKey::Imsi(IMSI_N + 1)))
    );
}
