//! UE snapshots, MME and slice sections together: a UE snapshotted in each EMM/ECM state
//! and procedure is restored into a fresh MME + slice (another harness, clock elsewhere)
//! or into another slice of the node, and the same scripted UE carries on there.

use pepc_mme::snapshot::{
    restore_whole_ue, snapshot_whole_ue, MmeRestored, Scratch, SnapshotError, UeKey, WholeRestored,
};
use pepc_mme::{MmeConfig, Output};
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_slice::snapshot::SnapshotView;
use pepc_testkit::*;
use std::net::Ipv4Addr;
use std::time::Duration;

const IMSI: &str = "001010000000001";
const IMSI_N: u64 = 1010000000001;

type Msgs = Vec<(u64, S1apMessage)>;

/// A one-slice node with the test subscriber and eNBs 1.. (assoc = global id = i).
fn node(enbs: u64) -> Harness {
    let mut h = Harness::new(64, MmeConfig::default());
    // These tests move MME sections and slice parts one by one (below the whole-UE
    // import a recording knows), so their harnesses are not replayed.
    h.stop_recording();
    h.hss.add(&subscriber(IMSI)).unwrap();
    for a in 1..=enbs {
        assert!(matches!(
            h.enb_setup(a, a as u32, 1),
            S1apMessage::S1SetupResponse(_)
        ));
    }
    h
}

fn attached() -> (Harness, SimUe) {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    assert_eq!(h.mme.stats.attaches, 1);
    (h, ue)
}

fn names(v: &[(u64, S1apMessage)]) -> Vec<&'static str> {
    v.iter().map(|(_, m)| m.name()).collect()
}

fn ul(h: &mut Harness, ue: &SimUe, nas: Vec<u8>) -> Msgs {
    let plmn = h.mme.config().plmn;
    h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: nas,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    )
}

/// The UE answers the one Downlink NAS Transport in `msgs` on `h`.
fn answer(h: &mut Harness, ue: &mut SimUe, msgs: Msgs) -> Msgs {
    let [(_, S1apMessage::DownlinkNasTransport(d))] = &msgs[..] else {
        panic!("expected one Downlink NAS Transport: {:?}", names(&msgs));
    };
    ue.mme_ue_id = Some(d.mme_ue_id);
    let reply = ue
        .on_downlink(&d.nas_pdu)
        .unwrap()
        .reply
        .expect("UE answers");
    ul(h, ue, reply)
}

/// S1AP messages among an MME's outputs (for calls made on the MME directly).
fn s1(out: Vec<Output>) -> Msgs {
    out.into_iter()
        .filter_map(|o| match o {
            Output::S1ap { assoc, bytes, .. } => {
                Some((assoc, S1apMessage::decode(&bytes).unwrap()))
            }
            _ => None,
        })
        .collect()
}

/// Snapshot UE `key` of `h` (its slice and MME sections), restore it into a fresh
/// node whose clock is elsewhere, and check that a snapshot of the restored UE is the
/// same bytes.
fn migrate(h: &mut Harness, key: UeKey, enbs: u64) -> (Harness, WholeRestored, Vec<u8>) {
    let mut bytes = vec![];
    let n = snapshot_whole_ue(&h.mme, &h.cp, key, h.now, &mut bytes).unwrap();
    assert_eq!(n, bytes.len());
    let mut h2 = node(enbs);
    h2.now += Duration::from_secs(1234);
    let r = restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes, h2.now).unwrap();
    assert_eq!(
        r.mme.renumbered_from, None,
        "same slice index: the ID stays"
    );
    assert!(!r.mme.guti_reallocation_needed);
    assert!(!r.mme.imsi_exception);
    if let UeKey::MmeUeId(id) = key {
        assert_eq!(r.mme.mme_ue_id, id);
    }
    let mut again = vec![];
    snapshot_whole_ue(
        &h2.mme,
        &h2.cp,
        UeKey::MmeUeId(r.mme.mme_ue_id),
        h2.now,
        &mut again,
    )
    .unwrap();
    assert_eq!(
        bytes, again,
        "snapshot → restore → snapshot is byte-identical"
    );
    // The bytes being equal at another clock says the timers are the same relative to
    // it. The next wake-up: the source's may be a stopped timer still in its heap
    // (it fires as a no-op), the restored side arms live timers only.
    let src = h
        .mme
        .next_timeout(&h.cp)
        .map(|t| t.saturating_duration_since(h.now));
    let dst = h2.mme.next_timeout(&h2.cp).map(|t| t - h2.now);
    match (src, dst) {
        (_, None) => {}
        (Some(a), Some(b)) => assert!(b >= a, "timer {a:?} restored as {b:?}"),
        (None, Some(b)) => panic!("a timer ({b:?}) the source did not have"),
    }
    (h2, r, bytes)
}

/// A slice to restore bare MME sections of `bytes` into. A section that had a session
/// goes into the entry of that session, restored first from `bytes`' slice section.
struct Target {
    h: Harness,
    bytes: Vec<u8>,
}

impl Target {
    fn new(bytes: &[u8]) -> Target {
        Target {
            h: node(1),
            bytes: bytes.to_vec(),
        }
    }

    /// The slot of the session (made if absent) when `with` is set.
    fn slot(&mut self, with: bool) -> Option<u32> {
        if !with {
            return None;
        }
        if let Some((_, s)) = self.h.cp.find_imsi(IMSI_N) {
            return Some(s);
        }
        let v = SnapshotView::parse(&self.bytes).unwrap();
        if !v.has_slice() {
            // No session to go into: a slot that holds none (refused).
            return Some(0);
        }
        let s = v.decode_slice().unwrap();
        Some(self.h.cp.restore_ue(&s).unwrap().ue_slot)
    }

    fn restore(
        &mut self,
        section: &[u8],
        with_session: bool,
    ) -> Result<MmeRestored, SnapshotError> {
        let slot = self.slot(with_session);
        self.h
            .mme
            .restore_ue(&mut self.h.cp, section, slot, self.h.now)
    }

    /// Undo a successful restore (its entry, session included, goes).
    fn remove(&mut self, r: &MmeRestored) {
        let k = UeKey::MmeUeId(r.mme_ue_id);
        self.h.mme.remove_migrated_ue(k, &mut self.h.cp).unwrap();
        assert_eq!(self.h.mme.ue_count(), 0);
        // Nothing of it is left: only a session made for a restore stays.
        assert_eq!(self.h.cp.entry_count(), self.h.cp.ue_count());
    }
}

fn mme_section(bytes: &[u8]) -> Vec<u8> {
    SnapshotView::parse(bytes)
        .unwrap()
        .mme()
        .unwrap()
        .bytes()
        .to_vec()
}

#[test]
fn waiting_identity_response() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(Some(0xdead_beef), false);
    let r = h.send(1, initial_ue(&h, &ue, nas, None));
    let [(_, S1apMessage::DownlinkNasTransport(d))] = &r[..] else {
        panic!("{:?}", names(&r))
    };
    let id = d.mme_ue_id;
    assert!(h.mme.ue_slot_of(&h.cp, UeKey::MmeUeId(id)).is_none());
    let (mut h2, rest, bytes) = migrate(&mut h, UeKey::MmeUeId(id), 1);
    assert!(rest.slice.is_none(), "no slice state before the session");
    assert!(!SnapshotView::parse(&bytes).unwrap().has_slice());
    let seen = pump(&mut h2, &mut ue, 1, r).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".into()),
        "{seen:?}"
    );
    assert_eq!(ue.received[0], "IdentityRequest");
    assert_eq!(h2.mme.stats.attaches, 1, "{:?}", h2.logs);
    assert!(h2.mme.is_connected(&h2.cp, IMSI_N));
}

#[test]
fn waiting_auth_response() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let r = h.send(1, initial_ue(&h, &ue, ue.attach_request(None, false), None));
    assert_eq!(names(&r), ["DownlinkNASTransport"]);
    let (mut h2, rest, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    assert!(rest.slice.is_none());
    // The UE's RES meets the XRES of the vector the source MME got.
    let seen = pump(&mut h2, &mut ue, 1, r).unwrap();
    assert_eq!(
        ue.received[..3],
        [
            "AuthenticationRequest",
            "SecurityModeCommand",
            "AttachAccept"
        ]
    );
    assert!(seen.contains(&"InitialContextSetupRequest".into()));
    assert_eq!(h2.mme.stats.attaches, 1, "{:?}", h2.logs);
    assert_eq!(h2.mme.stats.auth_rejects, 0);
}

#[test]
fn waiting_smc_complete() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let r = h.send(1, initial_ue(&h, &ue, ue.attach_request(None, false), None));
    let smc = answer(&mut h, &mut ue, r);
    assert_eq!(names(&smc), ["DownlinkNASTransport"]);
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    pump(&mut h2, &mut ue, 1, smc).unwrap();
    assert_eq!(h2.mme.stats.attaches, 1, "{:?}", h2.logs);
    assert_eq!(h2.mme.stats.nas_bad_mac, 0);
}

#[test]
fn waiting_esm_information_response() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let r = h.send(1, initial_ue(&h, &ue, ue.attach_request(None, true), None));
    let smc = answer(&mut h, &mut ue, r);
    let info = answer(&mut h, &mut ue, smc);
    assert_eq!(ue.received.last().unwrap(), "SecurityModeCommand");
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    pump(&mut h2, &mut ue, 1, info).unwrap();
    assert!(ue.received.contains(&"EsmInformationRequest".into()));
    assert_eq!(h2.mme.stats.attaches, 1, "{:?}", h2.logs);
}

/// Attach up to the Initial Context Setup Request (Attach Accept inside).
fn up_to_ics(h: &mut Harness, ue: &mut SimUe) -> Msgs {
    let r = h.send(1, initial_ue(h, ue, ue.attach_request(None, false), None));
    let smc = answer(h, ue, r);
    let ics = answer(h, ue, smc);
    assert_eq!(names(&ics), ["InitialContextSetupRequest"]);
    ics
}

#[test]
fn waiting_ics_response_of_the_attach() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let ics = up_to_ics(&mut h, &mut ue);
    let (mut h2, rest, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    assert!(rest.slice.is_some());
    // `pump` checks the KeNB of the request against the UE's own.
    pump(&mut h2, &mut ue, 1, ics).unwrap();
    assert_eq!(h2.mme.stats.attaches, 1, "{:?}", h2.logs);
    let (_, slot) = h2.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(h2.cp.ue(slot).unwrap().bearers[0].enb_teid, enb_teid(10, 5));
    assert_eq!(h2.cp.ue(slot).unwrap().ue_ip, ue.ue_ip.unwrap());
}

#[test]
fn waiting_attach_complete() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let ics = up_to_ics(&mut h, &mut ue);
    let [(_, S1apMessage::InitialContextSetupRequest(req))] = &ics[..] else {
        unreachable!()
    };
    let nas = req.erabs[0].nas_pdu.clone().unwrap();
    let complete = ue.on_downlink(&nas).unwrap().reply.unwrap();
    let r = h.send(
        1,
        InitialContextSetupResponse {
            mme_ue_id: req.mme_ue_id,
            enb_ue_id: ue.enb_ue_id,
            erabs: vec![pepc_s1ap::ERabTunnel {
                id: 5,
                transport: ENB_ADDR,
                teid: enb_teid(10, 5),
            }],
            failed: vec![],
        },
    );
    assert!(r.is_empty());
    assert_eq!(h.mme.stats.attaches, 0);
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    let r = ul(&mut h2, &ue, complete);
    assert_eq!(h2.mme.stats.attaches, 1, "{:?}", h2.logs);
    // EMM Information, protected under the continued downlink COUNT.
    pump(&mut h2, &mut ue, 1, r).unwrap();
    assert_eq!(ue.received.last().unwrap(), "EmmInformation");
    assert!(h2.mme.m_tmsi_of(&h2.cp, IMSI_N).is_some());
    // T3450 of the Attach Accept stopped with the restored timer.
    assert!(h2.advance(Duration::from_secs(7)).is_empty());
}

#[test]
fn attached_connected_continues_nas_counts() {
    let (mut h, mut ue) = attached();
    let (mut h2, rest, bytes) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    assert!(rest.slice.is_some());
    assert!(
        bytes.len() <= 512,
        "whole snapshot of an attached UE: {} bytes",
        bytes.len()
    );
    // A protected downlink (GUTI Reallocation Command) and uplink (its Complete).
    let mut out = vec![];
    let t = h2
        .mme
        .reallocate_guti(h2.now, IMSI_N, &mut h2.cp, &mut out)
        .unwrap();
    let seen = pump(&mut h2, &mut ue, 1, s1(out)).unwrap();
    assert_eq!(seen, ["DownlinkNASTransport"]);
    assert_eq!(ue.m_tmsi, Some(t));
    assert_eq!(h2.mme.m_tmsi_of(&h2.cp, IMSI_N), Some(t));
    // And a UE-initiated detach, under the continued COUNTs.
    let d = ue.detach_request(false);
    let r = ul(&mut h2, &ue, d);
    pump(&mut h2, &mut ue, 1, r).unwrap();
    assert_eq!(ue.received.last().unwrap(), "DetachAccept");
    assert!(h2.cp.find_imsi(IMSI_N).is_none());
    assert_eq!(h2.mme.stats.nas_bad_mac + h2.mme.stats.nas_replays, 0);
}

fn release_to_idle(h: &mut Harness, ue: &mut SimUe) {
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    pump(h, ue, 1, r).unwrap();
    assert!(!h.mme.is_connected(&h.cp, IMSI_N));
}

#[test]
fn attached_idle_service_request_with_the_old_context() {
    let (mut h, mut ue) = attached();
    release_to_idle(&mut h, &mut ue);
    let reach = h.mme.next_timeout(&h.cp).unwrap() - h.now;
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    let left = h2.mme.next_timeout(&h2.cp).unwrap() - h2.now;
    assert!(
        left >= reach && left - reach < Duration::from_micros(1),
        "mobile reachable timer {reach:?} restored as {left:?}"
    );
    ue.enb_ue_id = 11;
    let sr = ue.service_request();
    let r = h2.send(1, initial_ue(&h2, &ue, sr, ue.m_tmsi));
    // `pump` checks the KeNB: derived from the Service Request's uplink COUNT.
    let seen = pump(&mut h2, &mut ue, 1, r).unwrap();
    assert_eq!(seen, ["InitialContextSetupRequest"], "{:?}", h2.logs);
    assert!(h2.mme.is_connected(&h2.cp, IMSI_N));
    assert_eq!(h2.mme.stats.nas_bad_mac, 0);
}

#[test]
fn idle_ue_mobile_reachable_timer_runs_on_the_restored_side() {
    let (mut h, mut ue) = attached();
    release_to_idle(&mut h, &mut ue);
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    let reach = MmeConfig::default().mobile_reachable;
    h2.advance(reach - Duration::from_secs(1));
    assert_eq!(h2.mme.ue_count(), 1);
    h2.advance(Duration::from_secs(2));
    assert_eq!(h2.mme.ue_count(), 0, "implicit detach");
    assert_eq!(h2.mme.stats.implicit_detaches, 1);
}

#[test]
fn waiting_detach_accept_retransmits_from_the_restored_side() {
    let (mut h, mut ue) = attached();
    let mut out = vec![];
    h.mme.detach_ue(h.now, IMSI_N, &mut h.cp, &mut out).unwrap();
    assert_eq!(names(&s1(out)), ["DownlinkNASTransport"]);
    // The first Detach Request is lost; T3422 expires on the restored side.
    h.now += Duration::from_secs(2);
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    assert!(h2.advance(Duration::from_secs(3)).is_empty());
    let r = h2.advance(Duration::from_millis(1001));
    assert_eq!(names(&r), ["DownlinkNASTransport"], "T3422 at 6 s");
    assert_eq!(h2.mme.stats.retransmissions, 1);
    pump(&mut h2, &mut ue, 1, r).unwrap();
    assert_eq!(ue.received.last().unwrap(), "DetachRequest");
    assert!(h2.cp.find_imsi(IMSI_N).is_none());
    assert_eq!(h2.mme.ue_count(), 0);
    assert_eq!(h2.mme.stats.detaches, 1);
}

#[test]
fn waiting_release_complete_after_detach_has_no_slice_state() {
    let (mut h, mut ue) = attached();
    let d = ue.detach_request(false);
    let r = ul(&mut h, &ue, d);
    assert_eq!(
        names(&r),
        ["DownlinkNASTransport", "UEContextReleaseCommand"]
    );
    assert!(h.cp.find_imsi(IMSI_N).is_none());
    let (mut h2, rest, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    assert!(rest.slice.is_none());
    pump(&mut h2, &mut ue, 1, r).unwrap();
    assert_eq!(h2.mme.ue_count(), 0);
}

#[test]
fn guti_reallocation_pending() {
    let (mut h, mut ue) = attached();
    let old = ue.m_tmsi.unwrap();
    let mut out = vec![];
    let t = h
        .mme
        .reallocate_guti(h.now, IMSI_N, &mut h.cp, &mut out)
        .unwrap();
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 1);
    assert_eq!(h2.mme.m_tmsi_of(&h2.cp, IMSI_N), Some(old));
    pump(&mut h2, &mut ue, 1, s1(out)).unwrap();
    assert_eq!(ue.m_tmsi, Some(t));
    assert_eq!(h2.mme.m_tmsi_of(&h2.cp, IMSI_N), Some(t));
    // One copy of the GUTI: the signaling part's.
    assert_eq!(h2.mme.guti_of(&h2.cp, IMSI_N).unwrap().m_tmsi, t);
    // Nothing left to retransmit.
    assert!(h2.advance(Duration::from_secs(7)).is_empty());
}

#[test]
fn during_s1_handover() {
    let (mut h, mut ue) = attached();
    assert!(matches!(
        h.enb_setup(2, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let plmn = h.mme.config().plmn;
    let id = ue.mme_ue_id.unwrap();
    let container = vec![0x40, 0x80, 0x00];
    let r = h.send(
        1,
        HandoverRequired {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            target: pepc_s1ap::TargetId::Enb {
                global_enb_id: pepc_s1ap::GlobalEnbId {
                    plmn,
                    enb_id: pepc_s1ap::EnbId::Macro(2),
                },
                tai: pepc_s1ap::Tai { plmn, tac: 1 },
            },
            container: container.clone(),
        },
    );
    assert_eq!(names(&r), ["HandoverRequest"]);
    let fwd = (Ipv4Addr::new(127, 0, 0, 9), 0x1234);
    let r = h.send(
        2,
        HandoverRequestAcknowledge {
            mme_ue_id: id,
            enb_ue_id: 60,
            admitted: vec![pepc_s1ap::ERabAdmitted {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 4),
                teid: 0x99,
                dl_forwarding: Some(fwd),
                ul_forwarding: None,
            }],
            failed: vec![],
            container,
        },
    );
    assert_eq!(names(&r), ["HandoverCommand"]);
    let (mut h2, _, _) = migrate(&mut h, UeKey::Imsi(IMSI_N), 2);
    let r = h2.send(
        2,
        HandoverNotify {
            mme_ue_id: id,
            enb_ue_id: 60,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x202,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    match &r[..] {
        [(1, S1apMessage::UeContextReleaseCommand(c))] => {
            assert_eq!(c.cause, Cause::SUCCESSFUL_HANDOVER)
        }
        o => panic!("{o:?} {:?}", h2.logs),
    }
    let (_, slot) = h2.cp.find_imsi(IMSI_N).unwrap();
    let b = &h2.cp.ue(slot).unwrap().bearers[0];
    assert_eq!(
        (b.enb_addr, b.enb_teid),
        (Ipv4Addr::new(127, 0, 0, 4), 0x99)
    );
    assert_eq!(h2.mme.stats.s1_handovers, 1);
    // The source's Release Complete ends the old connection; the UE stays connected
    // on the target and its NAS goes on there.
    let rc = h2.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
        },
    );
    assert!(rc.is_empty());
    assert!(h2.mme.is_connected(&h2.cp, IMSI_N));
    let mut out = vec![];
    h2.mme
        .reallocate_guti(h2.now, IMSI_N, &mut h2.cp, &mut out)
        .unwrap();
    let [(2, S1apMessage::DownlinkNasTransport(d))] = &s1(out)[..] else {
        panic!("NAS goes to the target")
    };
    let reply = ue.on_downlink(&d.nas_pdu).unwrap().reply.unwrap();
    ue.enb_ue_id = 60;
    let plmn = h2.mme.config().plmn;
    h2.send(
        2,
        UplinkNasTransport {
            mme_ue_id: id,
            enb_ue_id: 60,
            nas_pdu: reply,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x202,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    assert_eq!(h2.mme.m_tmsi_of(&h2.cp, IMSI_N), ue.m_tmsi);
    assert_eq!(h2.mme.stats.nas_bad_mac, 0);
}

/// Live migration inside a node: slice A → slice B. The MME UE S1AP ID and the
/// M-TMSI name A, so B renumbers the first and asks for a GUTI reallocation.
#[test]
fn migration_to_another_slice_renumbers_and_reallocates_the_guti() {
    let mut h = Harness::sliced(64, MmeConfig::default(), 2);
    h.stop_recording(); // sections moved one by one, as above
    h.hss.add(&subscriber(IMSI)).unwrap();
    h.enb_setup(1, 1, 1);
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let (a, b) = (h.focus, 1 - h.focus);
    let old_id = ue.mme_ue_id.unwrap();
    let mut bytes = vec![];
    {
        let now = h.now;
        let (mme, cp, _) = h.slice(a);
        snapshot_whole_ue(mme, cp, UeKey::Imsi(IMSI_N), now, &mut bytes).unwrap();
        mme.remove_migrated_ue(UeKey::Imsi(IMSI_N), cp).unwrap();
        assert_eq!(mme.ue_count(), 0);
        assert!(cp.find_imsi(IMSI_N).is_none());
    }
    let now = h.now;
    let (mme, cp, _) = h.slice(b);
    let r = restore_whole_ue(mme, cp, &bytes, now).unwrap();
    let MmeRestored {
        mme_ue_id,
        renumbered_from,
        guti_reallocation_needed,
        imsi_exception,
    } = r.mme;
    assert_eq!(renumbered_from, Some(old_id));
    assert_ne!(mme_ue_id, old_id);
    assert!(guti_reallocation_needed);
    assert!(imsi_exception);
    let slice = r.slice.unwrap();
    assert!(
        slice.exceptions > 0,
        "TEIDs and address of slice A kept by exception"
    );
    // The eNB learns the new MME UE S1AP ID (the node's part; here the test's).
    ue.mme_ue_id = Some(mme_ue_id);
    let mut out = vec![];
    let t = mme.reallocate_guti(now, IMSI_N, cp, &mut out).unwrap();
    pump(&mut h, &mut ue, 1, s1(out)).unwrap();
    assert_eq!(ue.m_tmsi, Some(t));
    let ids = pepc_slice::ids::SignalingIds::new(2);
    assert_eq!(ids.slice_of(t), b);
    // Idle, then a Service Request by the new S-TMSI reaches slice B.
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id,
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    ue.enb_ue_id = 11;
    let sr = ue.service_request();
    let r = h.send(1, initial_ue(&h, &ue, sr, Some(t)));
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(seen, ["InitialContextSetupRequest"], "{:?}", h.logs);
    assert!({
        let (m, c, _) = h.slice(b);
        m.is_connected(c, IMSI_N)
    });
}

#[test]
fn restore_refuses_a_ue_already_here_and_leaves_nothing_behind() {
    let (h, _ue) = attached();
    let mut bytes = vec![];
    snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut bytes).unwrap();
    let mut h2 = node(1);
    restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes, h2.now).unwrap();
    // Slice part refused.
    assert!(matches!(
        restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes, h2.now),
        Err(SnapshotError::Slice(_))
    ));
    // MME part refused after the slice took its part: the slice's is undone. h3's
    // MME holds the subscriber mid-attach (IMSI known, no session yet).
    let mut h3 = node(1);
    let early = &sample_snapshots()[0];
    assert!(!SnapshotView::parse(early).unwrap().has_slice());
    h3.mme
        .restore_ue(&mut h3.cp, &mme_section(early), None, h3.now)
        .unwrap();
    assert!(matches!(
        restore_whole_ue(&mut h3.mme, &mut h3.cp, &bytes, h3.now),
        Err(SnapshotError::ImsiExists(IMSI_N))
    ));
    assert!(h3.cp.find_imsi(IMSI_N).is_none());
    assert_eq!((h3.mme.ue_count(), h3.cp.entry_count()), (1, 1));
    // Slot given or not as the snapshot says.
    let section = mme_section(&bytes);
    let mut h4 = node(1);
    assert_eq!(
        h4.mme.restore_ue(&mut h4.cp, &section, None, h4.now),
        Err(SnapshotError::SlotMismatch { had_slot: true })
    );
    // A slot that holds no session is not one to go into.
    assert!(matches!(
        h4.mme.restore_ue(&mut h4.cp, &section, Some(5), h4.now),
        Err(SnapshotError::Slice(_))
    ));
    assert_eq!((h4.mme.ue_count(), h4.cp.entry_count()), (0, 0));
    assert!(matches!(
        snapshot_whole_ue(&h4.mme, &h4.cp, UeKey::Imsi(1), h4.now, &mut vec![]),
        Err(SnapshotError::UnknownUe(UeKey::Imsi(1)))
    ));
    // Into the session's entry, it is accepted.
    let mut t = Target::new(&bytes);
    let r = t.restore(&section, true).unwrap();
    t.remove(&r);
}

/// Sections of UEs in several states (keys, vector, retransmission, handover...).
fn sample_snapshots() -> Vec<Vec<u8>> {
    let mut v = vec![];
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let r = h.send(1, initial_ue(&h, &ue, ue.attach_request(None, false), None));
    let mut b = vec![];
    snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut b).unwrap();
    v.push(b);
    let smc = answer(&mut h, &mut ue, r);
    let mut b = vec![];
    snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut b).unwrap();
    v.push(b);
    let ics = answer(&mut h, &mut ue, smc);
    pump(&mut h, &mut ue, 1, ics).unwrap();
    let mut out = vec![];
    h.mme
        .reallocate_guti(h.now, IMSI_N, &mut h.cp, &mut out)
        .unwrap();
    let mut b = vec![];
    snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut b).unwrap();
    v.push(b);
    v
}

#[test]
fn every_truncation_is_an_error() {
    for bytes in sample_snapshots() {
        let section = mme_section(&bytes);
        let mut h2 = node(1);
        for n in 0..bytes.len() {
            assert!(
                restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes[..n], h2.now).is_err(),
                "container cut at {n}"
            );
        }
        let had_slot = SnapshotView::parse(&bytes).unwrap().has_slice();
        let mut t = Target::new(&bytes);
        for n in 0..section.len() {
            let e = t.restore(&section[..n], had_slot);
            assert!(e.is_err(), "section cut at {n}");
            assert_eq!(t.h.mme.ue_count(), 0);
        }
        assert_eq!(h2.mme.ue_count(), 0);
        assert!(h2.cp.find_imsi(IMSI_N).is_none());
        let r = t.restore(&section, had_slot).unwrap();
        t.remove(&r);
        // Trailing bytes.
        let mut long = section.clone();
        long.push(0);
        assert_eq!(t.restore(&long, had_slot), Err(SnapshotError::Trailing(1)));
        let mut v2 = section.clone();
        v2[0] = pepc_mme::snapshot::MME_SECTION_VERSION + 1;
        assert_eq!(
            t.restore(&v2, had_slot),
            Err(SnapshotError::UnsupportedVersion(
                pepc_mme::snapshot::MME_SECTION_VERSION + 1
            ))
        );
    }
}

#[test]
fn random_mutations_never_panic() {
    let h = node(1);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let (mut ok, mut err) = (0, 0);
    for bytes in sample_snapshots() {
        let section = mme_section(&bytes);
        let mut t = Target::new(&bytes);
        for _ in 0..1500 {
            let mut m = section.clone();
            for _ in 0..1 + rnd() % 3 {
                let i = (rnd() as usize) % m.len();
                match rnd() % 4 {
                    0 => m[i] ^= 1 << (rnd() % 8),
                    1 => m[i] = rnd() as u8,
                    2 => {
                        m.remove(i);
                        if m.is_empty() {
                            m.push(1);
                        }
                    }
                    _ => m.insert(i, rnd() as u8),
                }
            }
            let with_session = rnd() % 2 == 0;
            match t.restore(&m, with_session) {
                Ok(r) => {
                    ok += 1;
                    // Whatever was accepted snapshots again.
                    let mut again = vec![];
                    let k = UeKey::MmeUeId(r.mme_ue_id);
                    t.h.mme.snapshot_ue(&t.h.cp, k, h.now, &mut again).unwrap();
                    t.remove(&r);
                }
                Err(e) => {
                    err += 1;
                    assert_eq!(t.h.mme.ue_count(), 0);
                    let _ = e.to_string();
                }
            }
        }
    }
    assert!(
        err > ok,
        "most mutations are refused ({ok} accepted, {err} refused)"
    );
}

#[test]
fn no_key_bytes_in_debug_output() {
    let mut h = node(1);
    let mut ue = SimUe::new(IMSI, 10);
    let ics = up_to_ics(&mut h, &mut ue);
    let kasme = ue.sec.as_ref().unwrap().kasme.clone();
    let mut bytes = vec![];
    snapshot_whole_ue(&h.mme, &h.cp, UeKey::Imsi(IMSI_N), h.now, &mut bytes).unwrap();
    let k = kasme.as_bytes();
    assert!(
        bytes.windows(32).any(|w| w == k),
        "the snapshot does carry KASME"
    );
    // And K_NASenc, K_NASint (the context is EEA2/EIA2 here).
    let (enc, int) = pepc_security::nas_keys(&kasme, 2, 2);
    let nas_keys = [enc.as_bytes().to_vec(), int.as_bytes().to_vec()];
    for nk in &nas_keys {
        assert!(
            bytes.windows(16).any(|w| w == &nk[..]),
            "the snapshot carries K_NASint and K_NASenc"
        );
    }
    let mut h2 = node(1);
    let r = restore_whole_ue(&mut h2.mme, &mut h2.cp, &bytes, h2.now).unwrap();
    let view = SnapshotView::parse(&bytes).unwrap();
    let mut scratch = Scratch::default();
    let mut b2 = vec![];
    pepc_mme::snapshot::snapshot_whole_ue_with(
        &mut scratch,
        &h2.mme,
        &h2.cp,
        UeKey::Imsi(IMSI_N),
        h2.now,
        &mut b2,
    )
    .unwrap();
    assert_eq!(b2, bytes);
    let errors = [
        SnapshotError::Invalid("KSI"),
        SnapshotError::Truncated { need: 9, have: 3 },
        SnapshotError::TooLong {
            what: "APN",
            len: 101,
            max: 100,
        },
        SnapshotError::UnknownUe(UeKey::MmeUeId(7)),
    ];
    let mut texts = vec![
        format!("{r:?}"),
        format!("{view:?}"),
        format!("{:?}", view.mme()),
        format!("{scratch:?}"),
        format!("{:?}", view.decode_slice()),
        format!("{errors:?}"),
        format!("{:?}", ue.sec),
    ];
    texts.extend(errors.iter().map(|e| e.to_string()));
    for k in [&k[..], &nas_keys[0], &nas_keys[1]] {
        let hex: String = k.iter().map(|b| format!("{b:02x}")).collect();
        let dec = format!("{}, {}, {}, {}", k[0], k[1], k[2], k[3]);
        for t in &texts {
            assert!(!t.to_lowercase().contains(&hex[..16]), "hex key in {t}");
            assert!(!t.contains(&dec), "key bytes in {t}");
        }
    }
    drop(ics);
}
