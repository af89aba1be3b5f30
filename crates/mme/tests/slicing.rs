//! Signaling across slices: the node's S1AP endpoint and several slices' MMEs, with
//! UEs spread over the slices by the IMSI policy. One context per IMSI on the node,
//! identifiers that carry their slice, Reset / association loss / paging reaching
//! every slice that has UEs of the eNB.

use pepc_mme::{Input, MmeConfig, SlicePolicy};
use pepc_s1ap::msg::*;
use pepc_s1ap::{Cause, ResetKind, UeConnection};
use pepc_slice::ids::SignalingIds;
use pepc_testkit::*;
use std::time::Duration;

/// A node of `slices` slices with eNB 1 (TAC 1) set up and `per_slice` subscribers
/// whose IMSIs the policy gives each slice; returns their IMSIs by slice.
fn node(slices: usize, per_slice: usize) -> (Harness, Vec<Vec<String>>) {
    let mut h = Harness::sliced(200, MmeConfig::default(), slices);
    let mut by_slice = vec![Vec::new(); slices];
    let mut imsi = 1010000000001u64;
    while by_slice.iter().any(|v| v.len() < per_slice) {
        let s = h.endpoint.slice_of_imsi(imsi);
        if by_slice[s].len() < per_slice {
            let i = format!("{imsi:015}");
            h.hss.add(&subscriber(&i)).unwrap();
            by_slice[s].push(i);
        }
        imsi += 1;
    }
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    (h, by_slice)
}

fn attach_all(h: &mut Harness, imsis: &[Vec<String>]) -> Vec<SimUe> {
    let mut ues = Vec::new();
    for (k, i) in imsis.iter().flatten().enumerate() {
        let mut ue = SimUe::new(i, 100 + k as u32);
        attach(h, &mut ue, 1).unwrap();
        ues.push(ue);
    }
    ues
}

fn imsi_num(s: &str) -> u64 {
    s.parse().unwrap()
}

#[test]
fn ues_land_in_their_policy_slice_with_identifiers_carrying_it() {
    for slices in [2usize, 3] {
        let (mut h, imsis) = node(slices, 3);
        let ues = attach_all(&mut h, &imsis);
        let ids = SignalingIds::new(slices);
        for (ue, imsi) in ues.iter().zip(imsis.iter().flatten()) {
            let s = h.endpoint.slice_of_imsi(imsi_num(imsi));
            assert_eq!(h.find_imsi(imsi_num(imsi)).map(|x| x.0), Some(s));
            assert_eq!(ids.slice_of(ue.mme_ue_id.unwrap()), s, "MME UE S1AP ID");
            assert_eq!(ids.slice_of(ue.m_tmsi.unwrap()), s, "M-TMSI");
            assert!(ue.received.iter().any(|r| r == "AttachAccept"));
        }
        for s in 0..slices {
            assert_eq!(h.slice(s).0.stats.attaches, 3, "slice {s}");
            assert_eq!(h.slice(s).0.ue_count(), 3);
        }
        assert_eq!(h.endpoint.stats.before_setup, 0);
    }
}

#[test]
fn foreign_guti_attach_revealing_an_imsi_of_another_slice_leaves_one_context() {
    let (mut h, imsis) = node(2, 1);
    let imsi = imsis[0][0].clone();
    let home = h.endpoint.slice_of_imsi(imsi_num(&imsi));
    let mut ue = SimUe::new(&imsi, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    assert_eq!(h.ue_count(), 1);

    // The UE comes back with another MME's GUTI whose M-TMSI the policy puts in the
    // other slice: identification there reveals the IMSI held here.
    let other = 1 - home;
    let t = (1u32..)
        .find(|t| SlicePolicy::ConsistentHash.slice_of(u64::from(*t), 2) == other)
        .unwrap();
    let mut ue2 = SimUe::new(&imsi, 11);
    let nas = ue2.attach_request(Some(t), false);
    let first = h.send(1, initial_ue(&h, &ue2, nas, None));
    let seen = pump(&mut h, &mut ue2, 1, first).unwrap();
    assert_eq!(ue2.received[0], "IdentityRequest");
    assert!(ue2.received.iter().any(|r| r == "AttachAccept"), "{seen:?}");
    // The old context was released on its eNB connection and is gone.
    assert!(
        seen.iter().any(|m| m == "UEContextReleaseCommand"),
        "{seen:?}"
    );
    assert_eq!(h.ue_count(), 1, "one context for the IMSI on the node");
    assert_eq!(h.find_imsi(imsi_num(&imsi)).map(|x| x.0), Some(other));
    assert_eq!(h.endpoint.stats.supersedes_sent, 1);
    // Its IMSI route follows the context: an IMSI attach now goes there too.
    assert_eq!(h.endpoint.slice_of_imsi(imsi_num(&imsi)), other);
    let mut ue3 = SimUe::new(&imsi, 12);
    attach(&mut h, &mut ue3, 1).unwrap();
    assert_eq!(h.ue_count(), 1);
    assert_eq!(h.slice(other).0.stats.attaches, 2);
    assert_eq!(h.slice(home).0.stats.attaches, 1);

    // Detach: the exception goes with the context.
    let nas = ue3.detach_request(true);
    let mme_ue_id = ue3.mme_ue_id.unwrap();
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id,
            enb_ue_id: ue3.enb_ue_id,
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
    pump(&mut h, &mut ue3, 1, r).unwrap();
    assert_eq!(h.ue_count(), 0);
    assert_eq!(h.endpoint.stats.imsi_exceptions, 0);
    assert_eq!(h.endpoint.slice_of_imsi(imsi_num(&imsi)), home);
}

#[test]
fn full_reset_from_an_enb_idles_its_ues_in_every_slice_then_one_acknowledge() {
    let (mut h, imsis) = node(3, 2);
    let mut ues = attach_all(&mut h, &imsis);
    let r = h.send(
        1,
        Reset {
            cause: Cause::OM_INTERVENTION,
            kind: ResetKind::All,
        },
    );
    let acks: Vec<_> = r
        .iter()
        .filter(|(_, m)| matches!(m, S1apMessage::ResetAcknowledge(_)))
        .collect();
    assert_eq!(acks.len(), 1, "{r:?}");
    assert_eq!(r.len(), 1, "nothing else is sent: {r:?}");
    for imsi in imsis.iter().flatten() {
        assert!(!{
            let (m, c, _) = h.slice(0);
            m.is_connected(c, imsi_num(imsi))
        });
        let (s, slot) = h.find_imsi(imsi_num(imsi)).unwrap();
        let ctx = h.slice(s).1.ue(slot).unwrap();
        assert_eq!(ctx.ecm, pepc_slice::context::EcmState::Idle);
    }
    assert_eq!(h.stat(|s| s.releases), 6);
    // Registered and reachable: each UE comes back with a Service Request.
    for ue in ues.iter_mut() {
        ue.enb_ue_id += 1000;
        let nas = ue.service_request();
        let t = ue.m_tmsi;
        let r = h.send(1, initial_ue(&h, ue, nas, t));
        let seen = pump(&mut h, ue, 1, r).unwrap();
        assert!(
            seen.iter().any(|m| m == "InitialContextSetupRequest"),
            "{seen:?}"
        );
    }
}

#[test]
fn partial_reset_reaches_only_the_named_ues_and_is_echoed() {
    let (mut h, imsis) = node(2, 2);
    let ues = attach_all(&mut h, &imsis);
    // One UE of each slice, named by both IDs; one by its eNB ID only.
    let named = vec![
        UeConnection {
            mme_ue_id: ues[0].mme_ue_id,
            enb_ue_id: Some(ues[0].enb_ue_id),
        },
        UeConnection {
            mme_ue_id: ues[2].mme_ue_id,
            enb_ue_id: Some(ues[2].enb_ue_id),
        },
        UeConnection {
            mme_ue_id: None,
            enb_ue_id: Some(ues[3].enb_ue_id),
        },
    ];
    let r = h.send(
        1,
        Reset {
            cause: Cause::OM_INTERVENTION,
            kind: ResetKind::Partial(named.clone()),
        },
    );
    match &r[..] {
        [(1, S1apMessage::ResetAcknowledge(a))] => assert_eq!(a.connections, named),
        o => panic!("{o:?}"),
    }
    let connected: Vec<bool> = imsis
        .iter()
        .flatten()
        .map(|i| {
            let (s, _) = h.find_imsi(imsi_num(i)).unwrap();
            {
                let (m, c, _) = h.slice(s);
                m.is_connected(c, imsi_num(i))
            }
        })
        .collect();
    assert_eq!(connected, vec![false, true, false, false]);
}

#[test]
fn association_loss_idles_ues_of_every_slice_and_they_return_after_re_setup() {
    let (mut h, imsis) = node(2, 2);
    let mut ues = attach_all(&mut h, &imsis);
    assert!(h.input(Input::EnbDown { assoc: 1 }).is_empty());
    for imsi in imsis.iter().flatten() {
        let (s, _) = h.find_imsi(imsi_num(imsi)).expect("still registered");
        assert!(!{
            let (m, c, _) = h.slice(s);
            m.is_connected(c, imsi_num(imsi))
        });
    }
    // UE signaling on a new association before its S1 Setup is refused.
    h.input(Input::EnbUp {
        assoc: 2,
        out_streams: 2,
    });
    let nas = ues[0].service_request();
    let t = ues[0].m_tmsi;
    let r = h.send(2, initial_ue(&h, &ues[0], nas, t));
    match &r[..] {
        [(2, S1apMessage::ErrorIndication(e))] => assert_eq!(
            e.cause,
            Some(Cause::MESSAGE_NOT_COMPATIBLE_WITH_RECEIVER_STATE)
        ),
        o => panic!("{o:?}"),
    }
    assert_eq!(h.endpoint.stats.before_setup, 1);
    // The same eNB re-associates; every UE's Service Request works.
    assert!(matches!(
        h.enb_setup(3, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    for ue in ues.iter_mut() {
        ue.enb_ue_id += 500;
        let nas = ue.service_request();
        let t = ue.m_tmsi;
        let r = h.send(3, initial_ue(&h, ue, nas, t));
        let seen = pump(&mut h, ue, 3, r).unwrap();
        assert!(
            seen.iter().any(|m| m == "InitialContextSetupRequest"),
            "{seen:?}"
        );
    }
}

#[test]
fn node_initiated_reset_idles_every_slices_ues() {
    let (mut h, imsis) = node(2, 2);
    attach_all(&mut h, &imsis);
    let r = h.reset_enb(1);
    match &r[..] {
        [(1, S1apMessage::Reset(m))] => assert_eq!(m.kind, ResetKind::All),
        o => panic!("{o:?}"),
    }
    assert_eq!(h.endpoint.stats.resets_tx, 1);
    for imsi in imsis.iter().flatten() {
        let (s, _) = h.find_imsi(imsi_num(imsi)).unwrap();
        assert!(!{
            let (m, c, _) = h.slice(s);
            m.is_connected(c, imsi_num(imsi))
        });
    }
    // The eNB's acknowledge is taken quietly.
    assert!(h.send(1, ResetAcknowledge::default()).is_empty());
}

#[test]
fn paging_goes_to_the_enbs_serving_the_ues_tais_and_follows_configuration_updates() {
    let (mut h, imsis) = node(2, 1);
    // eNB 2 serves TAC 2 only (not ours): it is never paged, until it updates to TAC 1.
    assert!(matches!(
        h.enb_setup(2, 2, 2),
        S1apMessage::S1SetupResponse(_)
    ));
    let mut ues = attach_all(&mut h, &imsis);
    for ue in ues.iter_mut() {
        let r = h.send(
            1,
            UeContextReleaseRequest {
                mme_ue_id: ue.mme_ue_id.unwrap(),
                enb_ue_id: ue.enb_ue_id,
                cause: Cause::USER_INACTIVITY,
            },
        );
        pump(&mut h, ue, 1, r).unwrap();
    }
    let page = |h: &mut Harness, imsi: &str| {
        let (s, slot) = h.find_imsi(imsi_num(imsi)).unwrap();
        h.input_to(
            s,
            Input::Control(pepc_mme::ControlEvent::Page {
                ue_slot: slot,
                imsi: imsi_num(imsi),
            }),
        )
    };
    for imsi in imsis.iter().flatten() {
        let r = page(&mut h, imsi);
        let to: Vec<u64> = r
            .iter()
            .filter(|(_, m)| matches!(m, S1apMessage::Paging(_)))
            .map(|(a, _)| *a)
            .collect();
        assert_eq!(to, vec![1], "{r:?}");
    }
    // eNB 2 now serves TAC 1 too; a refused update (no PLMN of ours) changes nothing.
    let plmn = h.mme.config().plmn;
    let bad = EnbConfigurationUpdate {
        supported_tas: Some(vec![pepc_s1ap::SupportedTa {
            tac: 1,
            plmns: vec![pepc_s1ap::Plmn::from_mcc_mnc("999", "99").unwrap()],
        }]),
        ..Default::default()
    };
    match &h.send(2, bad)[..] {
        [(2, S1apMessage::EnbConfigurationUpdateFailure(f))] => {
            assert_eq!(f.cause, Cause::UNKNOWN_PLMN)
        }
        o => panic!("{o:?}"),
    }
    let good = EnbConfigurationUpdate {
        supported_tas: Some(vec![pepc_s1ap::SupportedTa {
            tac: 1,
            plmns: vec![plmn],
        }]),
        ..Default::default()
    };
    match &h.send(2, good)[..] {
        [(2, S1apMessage::EnbConfigurationUpdateAcknowledge(_))] => {}
        o => panic!("{o:?}"),
    }
    assert_eq!(h.endpoint.stats.enb_config_updates, 1);
    // Paging supervision (T3413) runs out first, then page again: both eNBs now.
    for _ in 0..5 {
        h.advance(Duration::from_secs(3));
    }
    let imsi = imsis[1][0].clone();
    let r = page(&mut h, &imsi);
    let mut to: Vec<u64> = r
        .iter()
        .filter(|(_, m)| matches!(m, S1apMessage::Paging(_)))
        .map(|(a, _)| *a)
        .collect();
    to.sort();
    assert_eq!(to, vec![1, 2], "{r:?}");
}

#[test]
fn forged_ids_naming_no_slice_get_an_error_indication() {
    // Three slices use two slice bits: slice 3 does not exist.
    let (mut h, imsis) = node(3, 1);
    let ues = attach_all(&mut h, &imsis);
    let forged = SignalingIds::new(3).compose(3, 5);
    let plmn = h.mme.config().plmn;
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: forged,
            enb_ue_id: ues[0].enb_ue_id,
            nas_pdu: vec![7, 0x48],
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    match &r[..] {
        [(1, S1apMessage::ErrorIndication(e))] => {
            assert_eq!(e.cause, Some(Cause::UNKNOWN_MME_UE_S1AP_ID));
            assert_eq!(e.mme_ue_id, Some(forged));
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(h.endpoint.stats.unknown_ue_ids, 1);
}
