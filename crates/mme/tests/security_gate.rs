//! The NAS security gate (TS 24.301 §4.4.4.3) against the attacks it closes: anyone who
//! heard a UE's S-TMSI in paging can open an RRC connection and send NAS in its name,
//! unprotected. None of that may change the UE's state unless the network first
//! authenticates it again (and the attacker cannot pass AKA).

use pepc_mme::nasx::{self, NasEpsMessage};
use pepc_mme::MmeConfig;
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_testkit::*;
use std::time::Duration;

const IMSI: &str = "001010000000001";
const IMSI_N: u64 = 1010000000001;
const ATTACKER: &str = "001010000000002";
/// The victim's eNB is association 1, the attacker's association 2.
const EVIL: u64 = 2;

fn names(v: &[(u64, S1apMessage)]) -> Vec<&'static str> {
    v.iter().map(|(_, m)| m.name()).collect()
}

/// A victim attached, then ECM-IDLE (its S-TMSI is what paging shows).
fn victim_idle() -> (Harness, SimUe) {
    let mut h = Harness::new(100, MmeConfig::default());
    h.hss.add(&subscriber(IMSI)).unwrap();
    h.hss.add(&subscriber(ATTACKER)).unwrap();
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    assert!(matches!(
        h.enb_setup(EVIL, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(!h.mme.is_connected(&h.cp, IMSI_N));
    (h, ue)
}

fn guti(t: u32) -> nasx::NasEpsMobileIdentity {
    nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, t))
}

fn plain(m: NasEpsMessage) -> Vec<u8> {
    m.encode().unwrap()
}

fn plain_detach(t: u32, switch_off: bool) -> Vec<u8> {
    plain(NasEpsMessage::new_emm(
        nasx::NasDetachRequestUeOriginating::new(
            nasx::NasDetachType::new(if switch_off { 0x09 } else { 0x01 }),
            nasx::NasKeySetIdentifier::new(0),
            guti(t),
        ),
    ))
}

fn plain_tau(t: u32, active: bool) -> Vec<u8> {
    plain(NasEpsMessage::new_emm(
        nasx::NasTrackingAreaUpdateRequest::new(
            nasx::NasEpsUpdateType::new(if active { 0x08 } else { 0 }),
            nasx::NasKeySetIdentifier::new(0),
            guti(t),
        ),
    ))
}

/// The victim is registered with its session and keeps serving: its own Service
/// Request (under its current security context) brings its bearers up.
fn assert_victim_intact(h: &mut Harness, ue: &mut SimUe, enb_ue_id: u32) {
    assert!(h.mme.m_tmsi_of(&h.cp, IMSI_N).is_some(), "still registered");
    assert!(h.cp.find_imsi(IMSI_N).is_some(), "session kept");
    let t = ue.m_tmsi.unwrap();
    ue.enb_ue_id = enb_ue_id;
    let sr = ue.service_request();
    let r = h.send(1, initial_ue(h, ue, sr, Some(t)));
    assert_eq!(names(&r), ["InitialContextSetupRequest"], "{:?}", h.logs);
    pump(h, ue, 1, r).unwrap();
    assert!(h.mme.is_connected(&h.cp, IMSI_N));
}

/// The release the MME commands for a connection it refuses, answered.
fn complete_releases(h: &mut Harness, assoc: u64, r: &[(u64, S1apMessage)]) -> usize {
    let mut n = 0;
    for (a, m) in r {
        if let (true, S1apMessage::UeContextReleaseCommand(c)) = (*a == assoc, m) {
            if let pepc_s1ap::UeS1apIds::Pair {
                mme_ue_id,
                enb_ue_id,
            } = c.ids
            {
                h.send(
                    assoc,
                    UeContextReleaseComplete {
                        mme_ue_id,
                        enb_ue_id,
                    },
                );
                n += 1;
            }
        }
    }
    n
}

#[test]
fn plain_switch_off_detach_in_someone_elses_name_is_ignored() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    let evil = SimUe::new(ATTACKER, 77);
    let r = h.send(EVIL, initial_ue(&h, &evil, plain_detach(t, true), Some(t)));
    // The attacker's connection is released; nothing else happens.
    assert_eq!(names(&r), ["UEContextReleaseCommand"], "{:?}", h.logs);
    assert_eq!(complete_releases(&mut h, EVIL, &r), 1);
    assert_eq!(h.mme.stats.nas_gate_discards, 1);
    assert_eq!(
        h.mme.ue_count(),
        1,
        "the refused connection's context is gone"
    );
    assert_eq!(h.mme.stats.detaches, 0);
    assert_victim_intact(&mut h, &mut ue, 11);
}

#[test]
fn plain_detach_in_someone_elses_name_is_authenticated_first_and_fails() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    let id = h.mme.mme_ue_id_of(IMSI_N).unwrap();
    let evil = SimUe::new(ATTACKER, 77);
    let r = h.send(EVIL, initial_ue(&h, &evil, plain_detach(t, false), Some(t)));
    // A challenge, plain (the sender may hold no context), to the attacker's
    // connection: it cannot answer it.
    match &r[..] {
        [(EVIL, S1apMessage::DownlinkNasTransport(d))] => {
            assert_eq!(d.mme_ue_id, id);
            assert_eq!(d.nas_pdu[0] >> 4, 0, "plain");
            assert!(matches!(
                NasEpsMessage::decode(&d.nas_pdu).unwrap(),
                NasEpsMessage::Emm(_, pepc_mme::nasx::NasEmmMessage::AuthenticationRequest(_))
            ));
        }
        o => panic!("{:?}", names(o)),
    }
    assert_eq!(h.mme.stats.nas_reauthentications, 1);
    // T3460 runs out (4 retransmissions, then the abort): the connection goes, the
    // context stays.
    let mut rel = vec![];
    for _ in 0..6 {
        rel.extend(h.advance(Duration::from_secs(7)));
    }
    assert_eq!(h.mme.stats.nas_reauth_failures, 1, "{:?}", names(&rel));
    assert_eq!(
        complete_releases(&mut h, EVIL, &rel),
        1,
        "{:?}",
        names(&rel)
    );
    assert!(!h.mme.is_connected(&h.cp, IMSI_N));
    assert_eq!(h.mme.stats.detaches, 0);
    assert_victim_intact(&mut h, &mut ue, 11);
}

#[test]
fn a_wrong_answer_to_the_challenge_gets_a_reject_and_changes_nothing() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    // The attacker answers with its own SIM's RES: wrong.
    let mut evil = SimUe::new(ATTACKER, 77).with_wrong_key();
    let r = h.send(EVIL, initial_ue(&h, &evil, plain_detach(t, false), Some(t)));
    let seen = pump(&mut h, &mut evil, EVIL, r).unwrap();
    assert!(
        seen.contains(&"UEContextReleaseCommand".to_string()),
        "{seen:?}"
    );
    assert!(evil.received.contains(&"AuthenticationReject".to_string()));
    assert_eq!(h.mme.stats.nas_reauth_failures, 1);
    assert_victim_intact(&mut h, &mut ue, 11);
}

#[test]
fn plain_detach_on_a_new_context_detaches_only_that_context() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    let evil = SimUe::new(ATTACKER, 77);
    // No S-TMSI: a context of its own, which has nothing of the victim.
    let r = h.send(EVIL, initial_ue(&h, &evil, plain_detach(t, false), None));
    assert_eq!(complete_releases(&mut h, EVIL, &r), 1, "{:?}", names(&r));
    assert_victim_intact(&mut h, &mut ue, 11);
}

#[test]
fn plain_security_mode_reject_outside_a_security_mode_procedure_changes_nothing() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    let smr = plain(NasEpsMessage::new_emm(nasx::NasSecurityModeReject::new(
        nasx::NasEmmCause::new(23),
    )));
    // In someone else's name on a new connection: refused.
    let evil = SimUe::new(ATTACKER, 77);
    let r = h.send(EVIL, initial_ue(&h, &evil, smr.clone(), Some(t)));
    assert_eq!(names(&r), ["UEContextReleaseCommand"]);
    complete_releases(&mut h, EVIL, &r);
    assert_victim_intact(&mut h, &mut ue, 11);
    // On the UE's own secured connection: discarded, no reject, no release.
    let plmn = h.mme.config().plmn;
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: smr,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.mme.stats.nas_gate_discards, 2);
    assert_eq!(h.mme.stats.attach_rejects, 0);
    assert!(h.mme.is_connected(&h.cp, IMSI_N));
}

#[test]
fn plain_tau_of_a_registered_ue_is_served_after_authentication() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    let ip = ue.ue_ip;
    // The UE itself, its TAU unprotected (say its context went wrong): before, the MME
    // rejected it (#10) and deleted the context; now it authenticates it and serves it.
    ue.enb_ue_id = 12;
    let r = h.send(1, initial_ue(&h, &ue, plain_tau(t, false), Some(t)));
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(
        seen,
        [
            "DownlinkNASTransport",
            "DownlinkNASTransport",
            "DownlinkNASTransport",
            "UEContextReleaseCommand"
        ],
        "{:?} {:?}",
        ue.received,
        h.logs
    );
    assert_eq!(
        &ue.received[ue.received.len() - 3..],
        [
            "AuthenticationRequest",
            "SecurityModeCommand",
            "TrackingAreaUpdateAccept"
        ]
    );
    assert_eq!(h.mme.stats.tau, 1);
    assert_eq!(h.mme.stats.nas_reauthentications, 1);
    assert_eq!(h.mme.stats.attaches, 1, "no re-attach");
    assert_eq!(ue.ue_ip, ip);
    // The new security context is in use: the next Service Request verifies.
    assert_victim_intact(&mut h, &mut ue, 13);
}

#[test]
fn plain_tau_in_someone_elses_name_changes_nothing() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    let evil = SimUe::new(ATTACKER, 77);
    let r = h.send(EVIL, initial_ue(&h, &evil, plain_tau(t, true), Some(t)));
    assert_eq!(names(&r), ["DownlinkNASTransport"]);
    let mut rel = vec![];
    for _ in 0..6 {
        rel.extend(h.advance(Duration::from_secs(7)));
    }
    assert_eq!(
        complete_releases(&mut h, EVIL, &rel),
        1,
        "{:?}",
        names(&rel)
    );
    assert_eq!(h.mme.stats.tau, 0);
    assert_victim_intact(&mut h, &mut ue, 11);
}

#[test]
fn plain_attach_in_someone_elses_name_leaves_the_registered_context_alone() {
    let (mut h, mut ue) = victim_idle();
    let t = ue.m_tmsi.unwrap();
    // The attacker attaches with the victim's identity (its GUTI) and fails AKA.
    let mut evil = SimUe::new(IMSI, 77).with_wrong_key();
    let nas = evil.attach_request(Some(t), false);
    let r = h.send(EVIL, initial_ue(&h, &evil, nas, Some(t)));
    let seen = pump(&mut h, &mut evil, EVIL, r).unwrap();
    assert!(
        evil.received.contains(&"AuthenticationReject".to_string()),
        "{seen:?}"
    );
    assert_eq!(h.mme.stats.attaches, 1);
    assert_victim_intact(&mut h, &mut ue, 11);
}
