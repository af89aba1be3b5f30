//! HSS-initiated procedures (S6a CLR and IDR) and purges, on a node of two slices:
//! like the node, the test hands each CLR/IDR to every slice, and only the one holding
//! the subscriber acts.

use pepc_mme::hss::{DefaultApn, SubscriptionUpdate};
use pepc_mme::{CancellationType, Input, MmeConfig};
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_testkit::HssMode;
use pepc_testkit::*;
use std::time::Duration;

const IMSI: &str = "001010000000001";
const IMSI_N: u64 = 1010000000001;
const SLICES: usize = 2;

fn attached(cfg: MmeConfig) -> (Harness, SimUe) {
    let mut h = Harness::sliced(100, cfg, SLICES);
    h.hss.add(&subscriber(IMSI)).unwrap();
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(seen.contains(&"InitialContextSetupRequest".to_string()));
    assert!(ue.received.contains(&"AttachAccept".to_string()));
    (h, ue)
}

/// Every slice gets the input, as the node does.
fn to_all(h: &mut Harness, i: impl Fn() -> Input) -> Vec<(u64, S1apMessage)> {
    let mut r = vec![];
    for s in 0..h.slices() {
        r.extend(h.input_to(s, i()));
    }
    r
}

fn clr(kind: CancellationType, reattach_required: bool) -> impl Fn() -> Input {
    move || Input::HssCancelLocation {
        imsi: IMSI_N,
        cancellation_type: kind,
        reattach_required,
    }
}

fn release(h: &mut Harness, ue: &mut SimUe) {
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    pump(h, ue, 1, r).unwrap();
}

#[test]
fn subscription_withdrawn_detaches_a_connected_ue() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    let r = to_all(&mut h, clr(CancellationType::SubscriptionWithdrawal, false));
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(
        seen,
        vec!["DownlinkNASTransport", "UEContextReleaseCommand"],
        "{:?}",
        h.logs
    );
    assert_eq!(ue.received.last().unwrap(), "DetachRequest");
    assert!(h.find_imsi(IMSI_N).is_none());
    assert_eq!(h.ue_count(), 0);
    assert_eq!(h.stat(|s| s.hss_cancels), 1);
    // The HSS cancelled: no purge goes back to it.
    assert!(h.purged.is_empty());
}

#[test]
fn subscription_withdrawn_detaches_an_idle_ue_locally() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    release(&mut h, &mut ue);
    let r = to_all(&mut h, clr(CancellationType::SubscriptionWithdrawal, true));
    assert!(r.is_empty(), "nothing to an idle UE: {r:?}");
    assert!(h.find_imsi(IMSI_N).is_none());
    assert_eq!(h.ue_count(), 0);
}

#[test]
fn cancel_during_a_release_lets_the_release_remove_the_context() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    let id = ue.mme_ue_id.unwrap();
    h.hold_releases.push(id);
    release(&mut h, &mut ue);
    assert_eq!(h.held_releases.len(), 1);
    let r = to_all(&mut h, clr(CancellationType::SubscriptionWithdrawal, false));
    assert!(r.is_empty(), "no NAS on a connection being released: {r:?}");
    assert_eq!(h.ue_count(), 1, "kept until the Release Complete");
    let r = h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
        },
    );
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(h.ue_count(), 0);
    assert!(h.find_imsi(IMSI_N).is_none());
}

#[test]
fn update_procedure_removes_the_context_without_nas() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    let r = to_all(&mut h, clr(CancellationType::MmeUpdate, false));
    let names: Vec<_> = r.iter().map(|(_, m)| m.name()).collect();
    assert_eq!(names, vec!["UEContextReleaseCommand"]);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.ue_count(), 0);
    assert!(h.find_imsi(IMSI_N).is_none());
}

#[test]
fn cancel_of_an_unknown_subscriber_changes_nothing() {
    let (mut h, _ue) = attached(MmeConfig::default());
    for s in 0..h.slices() {
        let r = h.input_to(
            s,
            Input::HssCancelLocation {
                imsi: 1010000000077,
                cancellation_type: CancellationType::SubscriptionWithdrawal,
                reattach_required: false,
            },
        );
        assert!(r.is_empty());
    }
    assert_eq!(h.stat(|s| s.hss_cancels), 0);
    assert_eq!(h.ue_count(), 1);
}

fn new_subscription() -> SubscriptionUpdate {
    SubscriptionUpdate {
        ambr: Some((1_000_000, 2_000_000)),
        default_apn: Some(DefaultApn {
            apn: "fast".into(),
            pdn_type: pepc_hss::PdnType::Ipv4,
            qci: 6,
            arp_priority: 2,
        }),
    }
}

#[test]
fn insert_subscriber_data_modifies_a_connected_ues_bearer_and_ambr() {
    let (mut h, _ue) = attached(MmeConfig::default());
    let r = to_all(&mut h, || Input::HssInsertSubscriberData {
        imsi: IMSI_N,
        update: new_subscription(),
    });
    assert_eq!(r.len(), 1, "{r:?}");
    let S1apMessage::ERabModifyRequest(m) = &r[0].1 else {
        panic!("expected E-RAB Modify Request, got {:?}", r[0].1)
    };
    let ambr = m.ue_ambr.expect("new UE-AMBR");
    assert_eq!((ambr.ul, ambr.dl), (1_000_000, 2_000_000));
    assert_eq!(m.erabs.len(), 1);
    assert_eq!((m.erabs[0].qci, m.erabs[0].arp.priority_level), (6, 2));
    assert!(!m.erabs[0].nas_pdu.is_empty());
    // The data path has the new rates and QoS.
    let (s, slot) = h.find_imsi(IMSI_N).unwrap();
    let (_, cp, _) = h.slice(s);
    let ctx = cp.ue(slot).unwrap();
    assert_eq!((ctx.ambr_ul, ctx.ambr_dl), (1_000_000, 2_000_000));
    let b = ctx.bearer(ctx.default_ebi).unwrap();
    assert_eq!((b.qci, b.arp.priority_level), (6, 2));
    assert_eq!(h.stat(|s| s.hss_subscription_updates), 1);
}

#[test]
fn insert_subscriber_data_for_an_idle_ue_comes_with_its_next_connection() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    release(&mut h, &mut ue);
    let r = to_all(&mut h, || Input::HssInsertSubscriberData {
        imsi: IMSI_N,
        update: new_subscription(),
    });
    assert!(r.is_empty(), "nothing over the air to an idle UE: {r:?}");
    let sr = ue.service_request();
    let m_tmsi = ue.m_tmsi;
    let r = h.send(1, initial_ue(&h, &ue, sr, m_tmsi));
    let ics = r
        .iter()
        .find_map(|(_, m)| match m {
            S1apMessage::InitialContextSetupRequest(i) => Some(i.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no Initial Context Setup: {r:?} {:?}", h.logs));
    assert_eq!((ics.ue_ambr.ul, ics.ue_ambr.dl), (1_000_000, 2_000_000));
    assert_eq!(ics.erabs[0].qci, 6);
}

#[test]
fn implicit_detach_purges_the_subscriber() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    release(&mut h, &mut ue);
    assert!(h.purged.is_empty());
    let reachable = MmeConfig::default().mobile_reachable;
    h.advance(reachable + Duration::from_secs(1));
    assert_eq!(h.ue_count(), 0);
    assert_eq!(h.purged, vec![IMSI_N]);
    assert_eq!(h.stat(|s| s.hss_purges), 1);
}

#[test]
fn detach_purges_only_when_configured() {
    for purge in [false, true] {
        let cfg = MmeConfig {
            purge_on_detach: purge,
            ..MmeConfig::default()
        };
        let (mut h, mut ue) = attached(cfg);
        let d = ue.detach_request(false);
        let id = ue.mme_ue_id.unwrap();
        let r = h.send(
            1,
            UplinkNasTransport {
                mme_ue_id: id,
                enb_ue_id: ue.enb_ue_id,
                nas_pdu: d,
                ecgi: initial_ue(&h, &ue, vec![], None).ecgi,
                tai: initial_ue(&h, &ue, vec![], None).tai,
            },
        );
        pump(&mut h, &mut ue, 1, r).unwrap();
        assert_eq!(h.ue_count(), 0);
        let want: Vec<u64> = if purge { vec![IMSI_N] } else { vec![] };
        assert_eq!(h.purged, want, "purge_on_detach = {purge}");
        // Without it, the Purge UE goes when the context does: the parked security
        // context of the detached UE, once expired. Never twice.
        h.advance(MmeConfig::default().parked_context_ttl + Duration::from_secs(1));
        assert_eq!(h.mme.parked_count(), 0);
        assert_eq!(h.purged, vec![IMSI_N], "purge_on_detach = {purge}");
        assert_eq!(h.stat(|s| s.hss_purges), 1);
    }
}

/// A detached UE that attaches again with its parked context before it expires is
/// registered here again: no Purge UE, then or at the expiry it no longer has.
#[test]
fn a_parked_context_taken_back_is_not_purged() {
    let (mut h, mut ue) = attached(MmeConfig::default());
    let m_tmsi = ue.m_tmsi.unwrap();
    let d = ue.detach_request(true);
    let id = ue.mme_ue_id.unwrap();
    let loc = initial_ue(&h, &ue, vec![], None);
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: d,
            ecgi: loc.ecgi,
            tai: loc.tai,
        },
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.mme.parked_count(), 1);
    // Re-attach under the GUTI, integrity protected with the parked context.
    ue.mme_ue_id = None;
    ue.enb_ue_id = 11;
    let nas = ue.attach_request_protected(m_tmsi);
    let r = h.send(1, initial_ue(&h, &ue, nas, Some(m_tmsi)));
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.stat(|s| s.parked_contexts_reused), 1, "{:?}", h.logs);
    assert_eq!(h.stat(|s| s.attaches), 2);
    h.advance(MmeConfig::default().parked_context_ttl + Duration::from_secs(1));
    assert!(h.purged.is_empty(), "{:?}", h.purged);
}

/// An attach that fails after its Update Location was answered (the PCRF refuses
/// the session, say) deletes a context the HSS holds here: Purge UE.
#[test]
fn an_attach_failing_after_update_location_is_purged() {
    let mut h = Harness::sliced(100, MmeConfig::default(), SLICES);
    h.hss.add(&subscriber(IMSI)).unwrap();
    h.enb_setup(1, 1, 1);
    h.hss_mode = HssMode::Hold;
    let mut ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(None, false);
    assert!(h.send(1, initial_ue(&h, &ue, nas, None)).is_empty());
    // AKA and security mode; then the Update Location is answered.
    let r = h.answer_hss(0);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(h.purged.is_empty());
    let r = h.answer_hss(0);
    assert!(
        r.iter()
            .any(|(_, m)| matches!(m, S1apMessage::InitialContextSetupRequest(_))),
        "{:?}",
        h.logs
    );
    // The eNB fails the context setup: the attach fails, its context goes.
    let r = h.send(
        1,
        InitialContextSetupFailure {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::RADIO_UNSPECIFIED,
        },
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.ue_count(), 0, "{:?}", h.logs);
    // Its security context stays parked (the UE may come back with it); the Purge UE
    // goes with that.
    h.advance(MmeConfig::default().parked_context_ttl + Duration::from_secs(1));
    assert_eq!(h.purged, vec![IMSI_N]);
}

#[test]
fn an_unanswered_attach_is_not_purged() {
    let mut h = Harness::sliced(100, MmeConfig::default(), SLICES);
    h.hss.add(&subscriber(IMSI)).unwrap();
    h.enb_setup(1, 1, 1);
    let ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(None, false);
    h.send(1, initial_ue(&h, &ue, nas, None));
    for _ in 0..12 {
        h.advance(Duration::from_secs(6));
    }
    assert_eq!(h.ue_count(), 0);
    assert!(h.purged.is_empty(), "never registered, never purged");
}

#[test]
fn with_checkpoints_an_idr_is_checkpointed_and_a_clr_forgets_the_ue() {
    let cfg = MmeConfig {
        checkpoints: true,
        ..MmeConfig::default()
    };
    let (mut h, mut ue) = attached(cfg);
    let before = h
        .checkpoints
        .get(&IMSI_N)
        .cloned()
        .expect("checkpointed at attach");
    to_all(&mut h, || Input::HssInsertSubscriberData {
        imsi: IMSI_N,
        update: new_subscription(),
    });
    let after = h
        .checkpoints
        .get(&IMSI_N)
        .cloned()
        .expect("still checkpointed");
    assert_ne!(before, after, "checkpointed again after the change");
    release(&mut h, &mut ue);
    to_all(&mut h, clr(CancellationType::SubscriptionWithdrawal, false));
    assert!(!h.checkpoints.contains_key(&IMSI_N), "forgotten");
}

#[test]
fn an_idr_with_only_an_ambr_changes_only_the_ambr() {
    let (mut h, _ue) = attached(MmeConfig::default());
    let r = to_all(&mut h, || Input::HssInsertSubscriberData {
        imsi: IMSI_N,
        update: SubscriptionUpdate {
            ambr: Some((3_000_000, 4_000_000)),
            default_apn: None,
        },
    });
    let S1apMessage::ERabModifyRequest(m) = &r[0].1 else {
        panic!("{r:?}")
    };
    let ambr = m.ue_ambr.unwrap();
    assert_eq!((ambr.ul, ambr.dl), (3_000_000, 4_000_000));
    // The subscribed QoS (QCI 9, ARP 8) stays.
    assert_eq!((m.erabs[0].qci, m.erabs[0].arp.priority_level), (9, 8));
    // An IDR with nothing this MME keeps changes nothing and sends nothing.
    let r = to_all(&mut h, || Input::HssInsertSubscriberData {
        imsi: IMSI_N,
        update: SubscriptionUpdate::default(),
    });
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(h.stat(|s| s.hss_subscription_updates), 1);
}
