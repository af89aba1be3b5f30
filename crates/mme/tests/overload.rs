//! Overload control (TS 36.413 §8.7.6-8.7.7, TS 24.301 #22 with T3346): a slice whose
//! backlog passes the bound turns new non-emergency attaches away with #22 and a
//! back-off timer, every eNB is told OVERLOAD START (an eNB that sets up meanwhile
//! too), and OVERLOAD STOP follows once the backlog drained and the hold passed.

use pepc_mme::nasx::{NasEmmMessage, NasEpsMessage};
use pepc_mme::{MmeConfig, OverloadConfig};
use pepc_s1ap::msg::*;
use pepc_testkit::*;
use std::time::Duration;

const IMSI: &str = "001010000000001";

fn config() -> MmeConfig {
    MmeConfig {
        overload: OverloadConfig {
            high: 100,
            low: 10,
            t3346: Duration::from_secs(40),
            hold: Duration::from_millis(200),
            ..OverloadConfig::default()
        },
        ..MmeConfig::default()
    }
}

fn setup() -> Harness {
    let mut h = Harness::new(100, config());
    h.hss.add(&subscriber(IMSI)).unwrap();
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    h
}

fn names(v: &[(u64, S1apMessage)]) -> Vec<&'static str> {
    v.iter().map(|(_, m)| m.name()).collect()
}

/// The Attach Reject a Downlink NAS Transport carries, if it is one.
fn attach_reject(m: &S1apMessage) -> Option<(u8, Option<u64>)> {
    let S1apMessage::DownlinkNasTransport(d) = m else {
        return None;
    };
    match NasEpsMessage::decode(&d.nas_pdu).ok()? {
        NasEpsMessage::Emm(_, NasEmmMessage::AttachReject(r)) => Some((
            r.emm_cause.value,
            r.t3346_value.as_ref().and_then(|t| t.to_seconds()),
        )),
        _ => None,
    }
}

#[test]
fn congested_slice_rejects_attaches_with_t3346_and_enbs_are_told() {
    let mut h = setup();
    // Under the bound: nothing happens.
    assert!(h.backlog(0, 100).is_empty());
    // Over it: OVERLOAD START to the eNB, the slice becomes congested.
    let r = h.backlog(0, 101);
    match &r[..] {
        [(1, S1apMessage::OverloadStart(o))] => {
            assert_eq!(o.action, OverloadAction::PermitEmergencyAndMtOnly)
        }
        o => panic!("{o:?}"),
    }
    // An eNB that sets up now learns of the overload right after its response.
    h.input(pepc_mme::Input::EnbUp {
        assoc: 2,
        out_streams: 2,
    });
    let r = h.send(
        2,
        S1SetupRequest {
            global_enb_id: pepc_s1ap::GlobalEnbId {
                plmn: h.mme.config().plmn,
                enb_id: pepc_s1ap::EnbId::Macro(2),
            },
            enb_name: None,
            supported_tas: vec![pepc_s1ap::SupportedTa {
                tac: 1,
                plmns: vec![h.mme.config().plmn],
            }],
            paging_drx: Some(128),
        },
    );
    assert_eq!(names(&r), ["S1SetupResponse", "OverloadStart"]);

    // A new attach: #22 with T3346 (75-125% of 40 s), then the connection's release.
    let mut ue = SimUe::new(IMSI, 10);
    let att = ue.attach_request(None, false);
    let r = h.send(1, initial_ue(&h, &ue, att, None));
    let (cause, t3346) = attach_reject(&r[0].1).expect("Attach Reject");
    assert_eq!(cause, 22);
    let t = t3346.expect("T3346 present");
    assert!((30..=50).contains(&t), "T3346 {t} s");
    assert_eq!(names(&r)[1..], ["UEContextReleaseCommand"]);
    assert_eq!(h.mme.stats.congestion_rejects, 1);
    assert_eq!(h.mme.stats.attaches, 0);
    // The rejected context goes with the Release Complete: nothing is kept.
    let mme_ue_id = match &r[1].1 {
        S1apMessage::UeContextReleaseCommand(c) => c.ids,
        _ => unreachable!(),
    };
    let id = match mme_ue_id {
        pepc_s1ap::UeS1apIds::Pair { mme_ue_id, .. } => mme_ue_id,
        pepc_s1ap::UeS1apIds::MmeOnly(m) => m,
    };
    h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: id,
            enb_ue_id: 10,
        },
    );
    assert_eq!(h.mme.ue_count(), 0);

    // Emergency access (RRC cause 0) still attaches during the overload.
    let mut em = initial_ue(&h, &ue, ue.attach_request(None, false), None);
    em.rrc_cause = 0;
    em.enb_ue_id = 11;
    ue.enb_ue_id = 11;
    let first = h.send(1, em);
    let seen = pump(&mut h, &mut ue, 1, first).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?}"
    );
    assert_eq!(h.mme.stats.attaches, 1);

    // Drained, but not for the hold yet: no stop. After it: OVERLOAD STOP to both eNBs,
    // and the slice takes attaches again.
    assert!(h.backlog(0, 5).is_empty());
    h.now += Duration::from_millis(250);
    let r = h.backlog(0, 5);
    let mut to: Vec<u64> = r
        .iter()
        .filter(|(_, m)| matches!(m, S1apMessage::OverloadStop(_)))
        .map(|(a, _)| *a)
        .collect();
    to.sort();
    assert_eq!(to, [1, 2], "{r:?}");
    assert!(!h.endpoint.overloaded());
    assert_eq!(h.endpoint.overload_stats().starts, 1);
    assert_eq!(h.endpoint.overload_stats().stops, 1);
    let mut ue2 = SimUe::new(IMSI, 12);
    let seen = attach(&mut h, &mut ue2, 1).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?}"
    );
    assert_eq!(h.mme.stats.congestion_rejects, 1);
}

#[test]
fn overload_control_off_when_high_is_zero() {
    let mut cfg = config();
    cfg.overload.high = 0;
    let mut h = Harness::new(100, cfg);
    h.hss.add(&subscriber(IMSI)).unwrap();
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    assert!(h.backlog(0, 1 << 20).is_empty());
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?}"
    );
}

/// Contexts awaiting authentication near their bound congest the slice by its own
/// measure: attaches beyond get #22 with T3346 (not an Error Indication that leaves the
/// UE to time out), the node goes into overload, and leaves it once they clear.
#[test]
fn contexts_awaiting_authentication_near_their_bound_congest_the_slice() {
    let mut cfg = config();
    cfg.max_unauth_per_enb = 8;
    let mut h = Harness::new(100, cfg);
    for i in 0..12 {
        h.hss
            .add(&subscriber(&format!("0010100000001{i:02}")))
            .unwrap();
    }
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    // Seven attaches left waiting at their Authentication Request: 7 > 3/4 of 8.
    let mut ues: Vec<SimUe> = (0..12)
        .map(|i| SimUe::new(&format!("0010100000001{i:02}"), 100 + i))
        .collect();
    let mut waiting = vec![];
    for ue in &ues[..7] {
        let r = h.send(1, initial_ue(&h, ue, ue.attach_request(None, false), None));
        assert_eq!(
            names(&r),
            ["DownlinkNASTransport"],
            "authentication request"
        );
        assert!(attach_reject(&r[0].1).is_none());
        waiting.push(r);
    }
    assert_eq!(h.mme.stats.congestion_rejects, 0);
    // The eighth: #22 with T3346, from a context outside the bound.
    let r = h.send(
        1,
        initial_ue(&h, &ues[7], ues[7].attach_request(None, false), None),
    );
    assert_eq!(attach_reject(&r[0].1).map(|x| x.0), Some(22), "{r:?}");
    assert_eq!(h.mme.stats.congestion_rejects, 1);
    // The slice told the node: the next backlog report starts the overload.
    let r = h.backlog(0, 0);
    assert_eq!(names(&r), ["OverloadStart"]);
    // The waiting UEs authenticate: under half of the bound, the slice is relieved,
    // and after the hold the eNB hears OVERLOAD STOP; attaches are taken again.
    for (ue, r) in ues[..7].iter_mut().zip(waiting) {
        pump(&mut h, ue, 1, r).unwrap();
    }
    h.now += Duration::from_millis(300);
    let r = h.backlog(0, 0);
    assert_eq!(names(&r), ["OverloadStop"], "{r:?}");
    let seen = attach(&mut h, &mut ues[8], 1).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?}"
    );
}
