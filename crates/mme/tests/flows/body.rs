// Full MME flows through S1AP with a scripted eNB + UE and real slices, on a node of
// SLICES slices (the including file sets it): tests/flows.rs with one,
// tests/flows_sliced.rs with two and three.

use pepc_testkit::*;
use pepc_mme::mme::{Proc, ProcFailure};
use pepc_mme::{Input, MmeConfig};
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;

const IMSI: &str = "001010000000001";

fn setup() -> Harness {
    let mut h = Harness::sliced(100, MmeConfig::default(), SLICES);
    h.hss.add(&subscriber(IMSI)).unwrap();
    assert!(matches!(
        h.enb_setup(1, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    h
}

/// Procedure `p` over every slice: (started, succeeded, failed, in progress), whose
/// sum the ledger keeps.
fn ledger(h: &mut Harness, p: Proc) -> (u64, u64, u64, u64) {
    let t = (
        h.stat(|m| m.procedures.started(p)),
        h.stat(|m| m.procedures.succeeded(p)),
        h.stat(|m| m.procedures.failed(p)),
        h.stat(|m| m.procedures.open(p)),
    );
    assert_eq!(t.0, t.1 + t.2 + t.3, "{p:?}: {t:?}");
    t
}

fn failed_with(h: &mut Harness, p: Proc, why: ProcFailure) -> u64 {
    h.stat(|m| m.procedures.failed_with(p, why))
}

fn attached() -> (Harness, SimUe) {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?} {:?}",
        h.logs
    );
    (h, ue)
}

#[test]
fn s1_setup_ok_and_unknown_plmn() {
    let mut h = setup();
    h.input(Input::EnbUp {
        assoc: 2,
        out_streams: 2,
    });
    let req = S1SetupRequest {
        global_enb_id: pepc_s1ap::GlobalEnbId {
            plmn: pepc_s1ap::Plmn::from_mcc_mnc("999", "99").unwrap(),
            enb_id: pepc_s1ap::EnbId::Macro(2),
        },
        enb_name: None,
        supported_tas: vec![pepc_s1ap::SupportedTa {
            tac: 1,
            plmns: vec![pepc_s1ap::Plmn::from_mcc_mnc("999", "99").unwrap()],
        }],
        paging_drx: Some(64),
    };
    match &h.send(2, req)[..] {
        [(2, S1apMessage::S1SetupFailure(f))] => assert_eq!(f.cause, Cause::UNKNOWN_PLMN),
        o => panic!("{o:?}"),
    }
    assert_eq!(h.endpoint.stats.s1_setup_failures, 1);
}

#[test]
fn attach_by_imsi() {
    let (mut h, ue) = attached();
    assert_eq!(h.mme.stats.attaches, 1, "{:?} {:?}", h.logs, ue.received);
    assert!(ue.received.iter().any(|r| r == "AttachAccept"));
    let ip = ue.ue_ip.expect("UE got an address");
    let (_, slot) = h.cp.find_imsi(1010000000001).unwrap();
    let ctx = h.cp.ue(slot).unwrap();
    assert_eq!(ctx.ue_ip, ip);
    assert_eq!(ctx.bearers[0].enb_teid, enb_teid(10, 5));
    assert_eq!(ctx.ecm, pepc_slice::context::EcmState::Connected);
    h.sync();
}

use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_wire::gtpu::GtpuPacket;
use pepc_wire::{Batch, Verdict};
use std::net::Ipv4Addr;
use std::time::Duration;

const IMSI_N: u64 = 1010000000001;
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 7);

fn batch_of(pkts: &[Vec<u8>]) -> Batch {
    let mut b = Batch::default();
    for (i, p) in pkts.iter().enumerate() {
        assert!(b.bufs[i].fill(p));
    }
    b.len = pkts.len();
    b
}

fn ul_nas(h: &mut Harness, ue: &SimUe, nas: Vec<u8>) -> Vec<(u64, S1apMessage)> {
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

fn names(v: &[(u64, S1apMessage)]) -> Vec<&'static str> {
    v.iter().map(|(_, m)| m.name()).collect()
}

fn release(h: &mut Harness, ue: &mut SimUe) {
    let id = ue.mme_ue_id.unwrap();
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    pump(h, ue, 1, r).unwrap();
    assert!(!h.mme.is_connected(&h.cp, IMSI_N));
}

#[test]
fn attach_then_uplink_forwards_and_idle_downlink_pages_then_service_request_drains() {
    let (mut h, mut ue) = attached();
    let ip = ue.ue_ip.unwrap();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let teid_ul = h.cp.ue(slot).unwrap().bearers[0].teid_ul;
    let mut b = batch_of(&[gpdu(teid_ul, &ipv4_udp(ip, SERVER, 1, 2, 60))]);
    h.dp.uplink(&mut b, 1);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToSgi);

    release(&mut h, &mut ue);
    let mut b = batch_of(&[
        ipv4_udp(SERVER, ip, 2, 1, 50),
        ipv4_udp(SERVER, ip, 2, 1, 51),
    ]);
    h.dp.downlink(&mut b, 2);
    assert!(b
        .packets()
        .iter()
        .all(|p| p.meta.verdict == Verdict::Consumed));
    let mut ev = vec![];
    h.cp.poll_requests(&mut ev);
    assert_eq!(ev.len(), 1);
    let paging = h.input(Input::Control(ev.pop().unwrap()));
    match &paging[..] {
        [(1, S1apMessage::Paging(p))] => {
            assert!(
                matches!(p.paging_id, pepc_s1ap::PagingIdentity::STmsi(s) if Some(s.m_tmsi) == ue.m_tmsi)
            );
        }
        o => panic!("{o:?}"),
    }
    // Service Request from the paged UE → ICS with a KeNB from the SR's COUNT.
    ue.enb_ue_id = 11;
    let sr = ue.service_request();
    let first = h.send(1, initial_ue(&h, &ue, sr, ue.m_tmsi));
    let seen = pump(&mut h, &mut ue, 1, first).unwrap();
    assert_eq!(seen, vec!["InitialContextSetupRequest"]);
    // Each procedure's latency was measured once (the metrics' histograms).
    assert_eq!(h.mme.stats.attach_latency.count(), 1);
    assert_eq!(h.mme.stats.service_request_latency.count(), 1);
    h.dp.sync(3);
    let mut again = Batch::default();
    assert_eq!(h.dp.take_ready(&mut again, false), 2);
    h.dp.downlink(&mut again, 4);
    for p in again.packets() {
        assert_eq!(p.meta.verdict, Verdict::ToS1u);
        assert_eq!(
            GtpuPacket::new_checked(p.as_slice()).unwrap().teid(),
            enb_teid(11, 5)
        );
    }
    // No further paging once connected.
    assert!(h.advance(Duration::from_secs(10)).is_empty());
    assert_eq!(h.mme.stats.paging_failures, 0);
    assert_eq!(ledger(&mut h, Proc::Attach), (1, 1, 0, 0));
    assert_eq!(ledger(&mut h, Proc::Paging), (1, 1, 0, 0));
    assert_eq!(ledger(&mut h, Proc::ServiceRequest), (1, 1, 0, 0));
}

/// TS 23.401 §5.3.5: the eNB tunnels go before the UE Context Release Command, so
/// downlink arriving while the eNB releases the UE is buffered (never sent to the
/// released eNB's TEID) and pages the UE once the release completes.
#[test]
fn downlink_during_release_is_buffered_then_pages_after_release_complete() {
    let (mut h, mut ue) = attached();
    h.sync();
    let ip = ue.ue_ip.unwrap();
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    assert_eq!(names(&r), vec!["UEContextReleaseCommand"]);
    h.sync();
    // Uplink the eNB still had in flight goes on to the PDN.
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let teid_ul = h.cp.ue(slot).unwrap().bearers[0].teid_ul;
    let mut b = batch_of(&[gpdu(teid_ul, &ipv4_udp(ip, SERVER, 1, 2, 60))]);
    h.dp.uplink(&mut b, 2);
    assert_eq!(b.packets()[0].meta.verdict, Verdict::ToSgi, "uplink in flight");
    let mut b = batch_of(&[ipv4_udp(SERVER, ip, 2, 1, 50)]);
    h.dp.downlink(&mut b, 2);
    assert_eq!(b.packets()[0].meta.verdict, Verdict::Consumed, "buffered");
    let mut ev = vec![];
    h.cp.poll_requests(&mut ev);
    assert_eq!(ev.len(), 1);
    // Still releasing: no paging yet.
    assert!(h.input(Input::Control(ev.pop().unwrap())).is_empty());
    let r = h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
        },
    );
    assert_eq!(names(&r), vec!["Paging"], "paged once released");
    // The paged UE comes back and gets its buffered downlink.
    ue.enb_ue_id = 12;
    let sr = ue.service_request();
    let first = h.send(1, initial_ue(&h, &ue, sr, ue.m_tmsi));
    pump(&mut h, &mut ue, 1, first).unwrap();
    h.dp.sync(3);
    let mut again = Batch::default();
    assert_eq!(h.dp.take_ready(&mut again, false), 1);
    h.dp.downlink(&mut again, 4);
    let p = &again.packets()[0];
    assert_eq!(p.meta.verdict, Verdict::ToS1u);
    assert_eq!(
        GtpuPacket::new_checked(p.as_slice()).unwrap().teid(),
        enb_teid(12, 5)
    );
}

/// Downlink for an idle UE that is in a TAU without the active flag (an S1 connection
/// with no user plane): buffered, and the UE is paged once the TAU's release is done,
/// rather than the data waiting out its buffer time unpaged.
#[test]
fn downlink_during_a_tau_without_active_flag_pages_after_its_release() {
    let (mut h, mut ue) = attached();
    let ip = ue.ue_ip.unwrap();
    release(&mut h, &mut ue);
    h.sync();
    // Downlink while idle: paged.
    let mut b = batch_of(&[ipv4_udp(SERVER, ip, 2, 1, 50)]);
    h.dp.downlink(&mut b, 2);
    assert_eq!(b.packets()[0].meta.verdict, Verdict::Consumed, "buffered");
    let mut ev = vec![];
    h.cp.poll_requests(&mut ev);
    assert_eq!(ev.len(), 1);
    let r = h.input(Input::Control(ev.pop().unwrap()));
    assert_eq!(names(&r), vec!["Paging"]);
    // The UE, crossing the paging, does a TAU without the active flag.
    ue.enb_ue_id = 13;
    let tau = ue.tau_request(false);
    let first = h.send(1, initial_ue(&h, &ue, tau, ue.m_tmsi));
    let seen = pump(&mut h, &mut ue, 1, first).unwrap();
    assert!(ue.received.iter().any(|r| r == "TrackingAreaUpdateAccept"));
    assert_eq!(
        seen.iter().filter(|m| *m == "Paging").count(),
        1,
        "paged once the TAU's connection is released: {seen:?}"
    );
}

#[test]
fn paging_retries_then_fails() {
    let (mut h, mut ue) = attached();
    release(&mut h, &mut ue);
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    h.input(Input::Control(pepc_slice::control::ControlEvent::Page {
        ue_slot: slot,
        imsi: IMSI_N,
    }));
    let mut pages = 1;
    for _ in 0..5 {
        pages += h
            .advance(Duration::from_secs(2))
            .iter()
            .filter(|(_, m)| matches!(m, S1apMessage::Paging(_)))
            .count();
    }
    assert_eq!(pages, 3);
    assert_eq!(h.mme.stats.paging_failures, 1);
    // Three Pagings, one procedure: it failed when its repetitions ran out.
    assert_eq!(ledger(&mut h, Proc::Paging), (1, 0, 1, 0));
    assert_eq!(failed_with(&mut h, Proc::Paging, ProcFailure::Timeout), 1);
}

#[test]
fn attach_by_unknown_guti_asks_identity() {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(Some(0xdead_beef), false);
    let first = h.send(1, initial_ue(&h, &ue, nas, None));
    let seen = pump(&mut h, &mut ue, 1, first).unwrap();
    assert_eq!(ue.received[0], "IdentityRequest");
    assert!(seen.contains(&"InitialContextSetupRequest".to_string()));
    // The context stays in the slice the GUTI steered it to, wherever that is.
    assert_eq!(h.stat(|s| s.attaches), 1);
    assert_eq!(h.ue_count(), 1);
}

#[test]
fn esm_information_request_when_flagged() {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(None, true);
    let first = h.send(1, initial_ue(&h, &ue, nas, None));
    pump(&mut h, &mut ue, 1, first).unwrap();
    assert!(ue.received.contains(&"EsmInformationRequest".to_string()));
    assert_eq!(h.mme.stats.attaches, 1);
}

#[test]
fn auth_mac_failure_gets_authentication_reject() {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10).with_wrong_key();
    attach(&mut h, &mut ue, 1).unwrap();
    assert!(
        ue.received
            .iter()
            .any(|r| r.contains("AuthenticationReject")),
        "{:?}",
        ue.received
    );
    assert_eq!(h.mme.stats.attaches, 0);
    assert_eq!(h.mme.stats.auth_rejects, 1);
    assert!(h.cp.find_imsi(IMSI_N).is_none());
}

#[test]
fn wrong_res_gets_authentication_reject() {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    ue.corrupt_k = true;
    attach(&mut h, &mut ue, 1).unwrap();
    assert_eq!(h.mme.stats.auth_rejects, 1);
    assert_eq!(h.mme.stats.attaches, 0);
}

#[test]
fn synch_failure_resyncs_and_succeeds() {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    ue.sqn_max = 1 << 20; // USIM ahead of the HSS
    attach(&mut h, &mut ue, 1).unwrap();
    assert_eq!(h.mme.stats.resyncs, 1);
    assert_eq!(h.mme.stats.attaches, 1, "{:?}", ue.received);
}

#[test]
fn unknown_imsi_is_rejected_with_cause_8() {
    let mut h = setup();
    let mut ue = SimUe::new("001019999999999", 10);
    attach(&mut h, &mut ue, 1).unwrap();
    assert_eq!(ue.received, vec!["AttachReject#8"]);
    // Counted by cause (the slice that served it).
    assert_eq!(
        failed_with(&mut h, Proc::Attach, ProcFailure::Rejected(8)),
        1
    );
    assert_eq!(ledger(&mut h, Proc::Attach), (1, 0, 1, 0));
}

#[test]
fn bad_mac_is_discarded_and_replay_is_counted() {
    let (mut h, mut ue) = attached();
    let m =
        pepc_mme::nasx::NasEpsMessage::new_emm(pepc_mme::nasx::NasDetachRequestUeOriginating::new(
            pepc_mme::nasx::NasDetachType::new(1),
            pepc_mme::nasx::NasKeySetIdentifier::new(0),
            pepc_mme::nasx::NasEpsMobileIdentity::new(pepc_mme::nasx::guti_value(
                [0, 0xf1, 0x10],
                1,
                1,
                ue.m_tmsi.unwrap(),
            )),
        ));
    let mut forged = ue.protect(&m);
    forged[2] ^= 0xff;
    assert!(ul_nas(&mut h, &ue, forged).is_empty());
    assert_eq!(h.mme.stats.nas_bad_mac, 1);
    assert!(
        h.cp.find_imsi(IMSI_N).is_some(),
        "forged detach must not act"
    );
    // A replay of a message the MME already accepted (Attach Complete's COUNT).
    let gr = h.mme.reallocate_guti(h.now, IMSI_N, &mut h.cp, &mut vec![]).unwrap();
    let _ = gr;
    let ok = ue.protect(&pepc_mme::nasx::NasEpsMessage::new_emm(
        pepc_mme::nasx::NasGutiReallocationComplete::new(),
    ));
    ul_nas(&mut h, &ue, ok.clone());
    assert!(ul_nas(&mut h, &ue, ok).is_empty());
    assert_eq!(h.mme.stats.nas_replays, 1);
    // Plain (unprotected) messages after SMC are dropped.
    let plain =
        pepc_mme::nasx::NasEpsMessage::new_emm(pepc_mme::nasx::NasGutiReallocationComplete::new())
            .encode()
            .unwrap();
    ul_nas(&mut h, &ue, plain);
    assert_eq!(h.mme.stats.nas_gate_discards, 1);
}

#[test]
fn unknown_ue_ids_and_garbage_get_error_indication() {
    let (mut h, ue) = attached();
    let plmn = h.mme.config().plmn;
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: 9999,
            enb_ue_id: 1,
            nas_pdu: vec![7, 0x48],
            ecgi: pepc_s1ap::Ecgi { plmn, cell_id: 1 },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    match &r[..] {
        [(1, S1apMessage::ErrorIndication(e))] => {
            assert_eq!(e.cause, Some(Cause::UNKNOWN_MME_UE_S1AP_ID))
        }
        o => panic!("{o:?}"),
    }
    let r = h.send(
        1,
        UplinkNasTransport {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: 777,
            nas_pdu: vec![7, 0x48],
            ecgi: pepc_s1ap::Ecgi { plmn, cell_id: 1 },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        },
    );
    match &r[..] {
        [(1, S1apMessage::ErrorIndication(e))] => {
            assert_eq!(e.cause, Some(Cause::UNKNOWN_ENB_UE_S1AP_ID))
        }
        o => panic!("{o:?}"),
    }
    let r = h.input(Input::S1ap {
        assoc: 1,
        stream: 0,
        bytes: vec![0x00, 0x0c, 0x40, 0xff, 0xff, 0x01],
    });
    match &r[..] {
        [(1, S1apMessage::ErrorIndication(e))] => {
            assert!(matches!(e.cause, Some(Cause::Protocol(_))))
        }
        o => panic!("{o:?}"),
    }
    assert_eq!(
        h.endpoint.stats.s1ap_decode_errors + h.stat(|s| s.s1ap_decode_errors),
        1
    );
    // The association survives: a new attach still works.
    let mut ue2 = SimUe::new(IMSI, 20);
    attach(&mut h, &mut ue2, 1).unwrap();
    assert_eq!(h.mme.stats.attaches, 2);
}

#[test]
fn tau_periodic_and_active() {
    let (mut h, mut ue) = attached();
    release(&mut h, &mut ue);
    ue.enb_ue_id = 12;
    let tau = ue.tau_request(false);
    let first = h.send(1, initial_ue(&h, &ue, tau, ue.m_tmsi));
    let seen = pump(&mut h, &mut ue, 1, first).unwrap();
    assert_eq!(
        seen,
        vec!["DownlinkNASTransport", "UEContextReleaseCommand"]
    );
    assert_eq!(ue.received.last().unwrap(), "TrackingAreaUpdateAccept");
    ue.enb_ue_id = 13;
    let tau = ue.tau_request(true);
    let first = h.send(1, initial_ue(&h, &ue, tau, ue.m_tmsi));
    let seen = pump(&mut h, &mut ue, 1, first).unwrap();
    assert_eq!(
        seen,
        vec!["DownlinkNASTransport", "InitialContextSetupRequest"]
    );
    assert!(h.mme.is_connected(&h.cp, IMSI_N));
    assert_eq!(h.mme.stats.tau, 2);
    assert_eq!(h.mme.stats.tau_latency.count(), 2);
    assert_eq!(ledger(&mut h, Proc::Tau), (2, 2, 0, 0));
}

#[test]
fn detach_normal_and_switch_off() {
    let (mut h, mut ue) = attached();
    let d = ue.detach_request(false);
    let r = ul_nas(&mut h, &ue, d);
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(
        seen,
        vec!["DownlinkNASTransport", "UEContextReleaseCommand"]
    );
    assert_eq!(ue.received.last().unwrap(), "DetachAccept");
    assert!(h.cp.find_imsi(IMSI_N).is_none());
    assert_eq!(h.mme.ue_count(), 0);

    let mut ue = SimUe::new(IMSI, 30);
    ue.sqn_max = 0;
    attach(&mut h, &mut ue, 1).unwrap();
    let d = ue.detach_request(true);
    let r = ul_nas(&mut h, &ue, d);
    assert_eq!(
        names(&r),
        vec!["UEContextReleaseCommand"],
        "no Detach Accept on switch-off"
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(h.cp.find_imsi(IMSI_N).is_none());
    assert_eq!(ledger(&mut h, Proc::Detach), (2, 2, 0, 0));
    assert_eq!(ledger(&mut h, Proc::Attach), (2, 2, 0, 0));
}

#[test]
fn network_detach_with_t3422() {
    let (mut h, mut ue) = attached();
    let mut out = vec![];
    h.mme.detach_ue(h.now, IMSI_N, &mut h.cp, &mut out).unwrap();
    let mut resent = 0;
    for _ in 0..2 {
        resent += h.advance(Duration::from_secs(6)).len();
    }
    assert_eq!(resent, 2, "T3422 retransmits");
    // The UE now answers the (re-protected) retransmission.
    let r = h.advance(Duration::from_secs(6));
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(h.cp.find_imsi(IMSI_N).is_none());
    assert_eq!(ledger(&mut h, Proc::NetworkDetach), (1, 1, 0, 0));
}

#[test]
fn timer_retransmits_four_times_then_gives_up() {
    let mut h = setup();
    let ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(None, false);
    let r = h.send(1, initial_ue(&h, &ue, nas, None));
    assert_eq!(names(&r), vec!["DownlinkNASTransport"]);
    let mut retx = 0;
    let mut released = false;
    for _ in 0..5 {
        for (_, m) in h.advance(Duration::from_secs(6)) {
            match m {
                S1apMessage::DownlinkNasTransport(_) => retx += 1,
                S1apMessage::UeContextReleaseCommand(_) => released = true,
                _ => {}
            }
        }
    }
    assert_eq!(retx, 4);
    assert!(released);
    assert_eq!(h.mme.stats.procedure_timeouts, 1);
    assert_eq!(ledger(&mut h, Proc::Attach), (1, 0, 1, 0));
    assert_eq!(failed_with(&mut h, Proc::Attach, ProcFailure::Timeout), 1);
    // The eNB never completes the release: the guard releases the context locally.
    assert!(h.mme.next_timeout(&h.cp).is_some(), "the release guard");
    assert!(h.advance(Duration::from_secs(10)).is_empty());
    assert_eq!(h.mme.stats.release_guard_expiries, 1);
    assert_eq!(h.mme.ue_count(), 0);
    assert_eq!(h.cp.entry_count(), 0);
    assert!(h.mme.next_timeout(&h.cp).is_none());
}

#[test]
fn x2_path_switch_chains_nh() {
    let (mut h, mut ue) = attached();
    assert!(matches!(
        h.enb_setup(2, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let plmn = h.mme.config().plmn;
    let id = ue.mme_ue_id.unwrap();
    // The attach KeNB came from SMC Complete's uplink COUNT 0 (checked by `pump`).
    let kenb = pepc_security::kenb(&ue.sec.as_ref().unwrap().kasme, 0);
    let r = h.send(
        2,
        PathSwitchRequest {
            enb_ue_id: 50,
            erabs: vec![pepc_s1ap::ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 3),
                teid: 0x77,
            }],
            source_mme_ue_id: id,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x202,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
            ue_security_capabilities: pepc_s1ap::UeSecurityCapabilities {
                eea: 0xc000,
                eia: 0xc000,
            },
        },
    );
    let ack = match &r[..] {
        [(2, S1apMessage::PathSwitchRequestAcknowledge(a))] => a.clone(),
        o => panic!("{o:?}"),
    };
    assert_eq!(ack.security_context.ncc, 1);
    let s = ue.sec.as_ref().unwrap();
    let nh1 = pepc_security::nh(&s.kasme, &kenb);
    assert_eq!(&ack.security_context.next_hop.0, nh1.as_bytes());
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let b = &h.cp.ue(slot).unwrap().bearers[0];
    assert_eq!(
        (b.enb_addr, b.enb_teid),
        (Ipv4Addr::new(127, 0, 0, 3), 0x77)
    );
    // Unknown UE → failure.
    let r = h.send(
        2,
        PathSwitchRequest {
            enb_ue_id: 51,
            erabs: vec![pepc_s1ap::ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 3),
                teid: 0x78,
            }],
            source_mme_ue_id: 4242,
            ecgi: pepc_s1ap::Ecgi { plmn, cell_id: 1 },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
            ue_security_capabilities: Default::default(),
        },
    );
    assert_eq!(names(&r), vec!["PathSwitchRequestFailure"]);
    ue.enb_ue_id = 50;
    let (started, ok, failed, open) = ledger(&mut h, Proc::X2Handover);
    assert_eq!((failed, open), (1, 0));
    assert!(ok >= 1 && started == ok + 1, "{started} {ok}");
}

#[test]
fn s1_handover_full_sequence() {
    let (mut h, ue) = attached();
    assert!(matches!(
        h.enb_setup(2, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let plmn = h.mme.config().plmn;
    let id = ue.mme_ue_id.unwrap();
    let target = pepc_s1ap::TargetId::Enb {
        global_enb_id: pepc_s1ap::GlobalEnbId {
            plmn,
            enb_id: pepc_s1ap::EnbId::Macro(2),
        },
        tai: pepc_s1ap::Tai { plmn, tac: 1 },
    };
    // A Source-to-Target container taken from the codec's own round-trip is opaque to us.
    let container = vec![0x40, 0x80, 0x00];
    let r = h.send(
        1,
        HandoverRequired {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            target,
            container: container.clone(),
        },
    );
    let req = match &r[..] {
        [(2, S1apMessage::HandoverRequest(q))] => q.clone(),
        o => panic!("{o:?} {:?}", h.logs),
    };
    assert_eq!(req.security_context.ncc, 1);
    assert_eq!(req.erabs[0].id, 5);
    let r = h.send(
        2,
        HandoverRequestAcknowledge {
            mme_ue_id: id,
            enb_ue_id: 60,
            admitted: vec![pepc_s1ap::ERabAdmitted {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 4),
                teid: 0x99,
                dl_forwarding: None,
                ul_forwarding: None,
            }],
            failed: vec![],
            container: container.clone(),
        },
    );
    assert_eq!(names(&r), vec!["HandoverCommand"]);
    assert_eq!(r[0].0, 1);
    let r = h.send(
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
        o => panic!("{o:?}"),
    }
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let b = &h.cp.ue(slot).unwrap().bearers[0];
    assert_eq!(
        (b.enb_addr, b.enb_teid),
        (Ipv4Addr::new(127, 0, 0, 4), 0x99)
    );
    // The source's release complete does not make the UE idle.
    assert!(h
        .send(
            1,
            UeContextReleaseComplete {
                mme_ue_id: id,
                enb_ue_id: ue.enb_ue_id
            }
        )
        .is_empty());
    assert!(h.mme.is_connected(&h.cp, IMSI_N));
    assert_eq!(h.mme.stats.s1_handovers, 1);
    assert_eq!(h.mme.stats.handover_latency.count(), 1);
    assert_eq!(ledger(&mut h, Proc::S1Handover), (1, 1, 0, 0));
}

#[test]
fn handover_to_unknown_target_and_cancel() {
    let (mut h, ue) = attached();
    let plmn = h.mme.config().plmn;
    let id = ue.mme_ue_id.unwrap();
    let target = pepc_s1ap::TargetId::Enb {
        global_enb_id: pepc_s1ap::GlobalEnbId {
            plmn,
            enb_id: pepc_s1ap::EnbId::Macro(77),
        },
        tai: pepc_s1ap::Tai { plmn, tac: 1 },
    };
    let r = h.send(
        1,
        HandoverRequired {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            target,
            container: vec![0],
        },
    );
    assert_eq!(names(&r), vec!["HandoverPreparationFailure"]);
    let r = h.send(
        1,
        HandoverCancel {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::HANDOVER_CANCELLED,
        },
    );
    assert_eq!(names(&r), vec!["HandoverCancelAcknowledge"]);
    // The unknown target failed the handover at once; the cancel found none open.
    assert_eq!(ledger(&mut h, Proc::S1Handover), (1, 0, 1, 0));
    let why = ProcFailure::S1ap(Cause::UNKNOWN_TARGET_ID);
    assert_eq!(failed_with(&mut h, Proc::S1Handover, why), 1);
}

#[test]
fn enb_reset_and_loss_make_ues_idle_but_registered() {
    let (mut h, _ue) = attached();
    let r = h.send(
        1,
        Reset {
            cause: Cause::OM_INTERVENTION,
            kind: pepc_s1ap::ResetKind::All,
        },
    );
    assert_eq!(names(&r), vec!["ResetAcknowledge"]);
    assert!(!h.mme.is_connected(&h.cp, IMSI_N));
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(
        h.cp.ue(slot).unwrap().ecm,
        pepc_slice::context::EcmState::Idle
    );
    // Re-association of the same eNB replaces the old one.
    assert!(matches!(
        h.enb_setup(5, 1, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    assert!(h.logs.iter().any(|l| l == "close 1"));
    assert!(h.mme.m_tmsi_of(&h.cp, IMSI_N).is_some());
}

#[test]
fn dedicated_bearer_lifecycle() {
    let (mut h, mut ue) = attached();
    let mut out = vec![];
    let ebi = h
        .mme
        .activate_dedicated_bearer(
            IMSI_N,
            1,
            (128_000, 128_000),
            (64_000, 64_000),
            &mut h.cp,
            &mut out,
        )
        .unwrap();
    assert_eq!(ebi, 6);
    let msgs: Vec<_> = out
        .into_iter()
        .filter_map(|o| match o {
            pepc_mme::Output::S1ap { assoc, bytes, .. } => {
                Some((assoc, S1apMessage::decode(&bytes).unwrap()))
            }
            _ => None,
        })
        .collect();
    pump(&mut h, &mut ue, 1, msgs).unwrap();
    assert!(ue
        .received
        .contains(&"ActivateDedicatedEpsBearerContextRequest".to_string()));
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(
        h.cp.ue(slot).unwrap().bearer(6).unwrap().enb_teid,
        enb_teid(ue.enb_ue_id, 6)
    );
    let mut out = vec![];
    h.mme
        .deactivate_bearer(IMSI_N, 6, &mut h.cp, &mut out)
        .unwrap();
    assert!(h.cp.ue(slot).unwrap().bearer(6).is_none());
}

#[test]
fn bench_helper_runs() {
    let r = run_inprocess_attaches(20);
    assert_eq!(r.attaches, 20);
    assert!(r.attaches_per_s > 0.0 && r.completion_us_p99 >= r.completion_us_p50);
}

// ------------------------------------------------------------ multiple PDN connections

fn esm_exchange(h: &mut Harness, ue: &mut SimUe, nas: Vec<u8>) -> Vec<String> {
    let r = ul_nas(h, ue, nas);
    pump(h, ue, 1, r).unwrap()
}

fn dl_to(h: &mut Harness, ip: Ipv4Addr, now: u64) -> Batch {
    let mut b = batch_of(&[ipv4_udp(SERVER, ip, 5060, 5060, 80)]);
    h.dp.downlink(&mut b, now);
    b
}

fn tunnel_teid(b: &Batch) -> u32 {
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToS1u);
    GtpuPacket::new_checked(b.bufs[0].as_slice())
        .unwrap()
        .teid()
}

/// Attach, then a standalone PDN connection to "ims" on bearer 6.
fn attached_with_ims() -> (Harness, SimUe, Ipv4Addr) {
    let (mut h, mut ue) = attached();
    let nas = ue.pdn_connectivity_request(Some("ims"));
    let seen = esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(seen, vec!["E-RABSetupRequest"], "{:?}", h.logs);
    assert!(ue
        .received
        .contains(&"ActivateDefaultEpsBearerContextRequest".to_string()));
    assert_eq!(ue.last_pti, ue.pti, "the network answers on the UE's PTI");
    assert_eq!(ue.pdns.len(), 2);
    let (ebi, ip) = ue.pdns[1];
    assert_eq!(ebi, 6);
    assert_ne!(Some(ip), ue.ue_ip);
    assert_eq!(h.mme.stats.pdn_connects, 1);
    (h, ue, ip)
}

#[test]
fn pdn_connectivity_to_ims_gets_a_second_address_and_bearer() {
    let (mut h, mut ue, ims_ip) = attached_with_ims();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let ctx = h.cp.ue(slot).unwrap().clone();
    assert_eq!(ctx.pdns.len(), 2);
    assert_eq!(ctx.pdns[1].apn, "ims");
    assert_eq!(ctx.pdns[1].ip, ims_ip);
    let b6 = ctx.bearer(6).unwrap();
    assert_eq!((b6.qci, b6.pdn), (5, 1));
    assert_eq!(b6.enb_teid, enb_teid(ue.enb_ue_id, 6));
    // Data path: the second address reaches bearer 6's tunnel, the first bearer 5's.
    h.sync();
    assert_eq!(tunnel_teid(&dl_to(&mut h, ims_ip, 1)), enb_teid(10, 6));
    let ip = ue.ue_ip.unwrap();
    assert_eq!(tunnel_teid(&dl_to(&mut h, ip, 2)), enb_teid(10, 5));
    // Uplink from the ims address on bearer 6's TEID.
    let mut b = batch_of(&[gpdu(b6.teid_ul, &ipv4_udp(ims_ip, SERVER, 1, 2, 60))]);
    h.dp.uplink(&mut b, 3);
    assert_eq!(b.bufs[0].meta.verdict, Verdict::ToSgi);

    // Rejects: same APN again (#55), unknown APN (#27).
    let nas = ue.pdn_connectivity_request(Some("ims"));
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(ue.received.last().unwrap(), "PdnConnectivityReject#55");
    let nas = ue.pdn_connectivity_request(Some("nowhere.example"));
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(ue.received.last().unwrap(), "PdnConnectivityReject#27");
    // No APN: the default APN, already connected (#55).
    let nas = ue.pdn_connectivity_request(None);
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(ue.received.last().unwrap(), "PdnConnectivityReject#55");
    assert_eq!(h.mme.stats.pdn_connect_rejects, 3);
    assert_eq!(h.cp.ue(slot).unwrap().pdns.len(), 2);
}

#[test]
fn subscribed_apn_is_accepted_when_not_yet_connected() {
    // The attach PDN uses "ims" (from ESM information); "internet" is the subscribed APN.
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    let nas = ue.attach_request(None, true);
    let first = h.send(1, initial_ue(&h, &ue, nas, None));
    pump(&mut h, &mut ue, 1, first).unwrap();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(h.cp.ue(slot).unwrap().pdns[0].apn, "ims");
    let nas = ue.pdn_connectivity_request(Some("Internet"));
    let seen = esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(seen, vec!["E-RABSetupRequest"]);
    assert_eq!(h.cp.ue(slot).unwrap().pdns[1].apn, "Internet");
}

#[test]
fn pdn_disconnect_releases_bearers_and_frees_the_address() {
    let (mut h, mut ue, ims_ip) = attached_with_ims();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    // A dedicated bearer on the ims PDN (UE-requested) goes with it.
    let nas =
        ue.bearer_resource_allocation_request(6, vec![1, 0x50, 0x50, 0x48, 0x48], create_tfa());
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(h.cp.ue(slot).unwrap().bearer(7).unwrap().pdn, 1);
    // Unknown linked bearer (#43); last PDN (#49) is checked after disconnect below.
    let nas = ue.pdn_disconnect_request(9);
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(ue.received.last().unwrap(), "PdnDisconnectReject#43");

    let nas = ue.pdn_disconnect_request(6);
    let r = ul_nas(&mut h, &ue, nas);
    match &r[..] {
        [(1, S1apMessage::ERabReleaseCommand(c))] => {
            let ids: Vec<u8> = c.erabs.iter().map(|e| e.id).collect();
            assert_eq!(ids, vec![6, 7]);
            assert!(c.nas_pdu.is_some());
        }
        o => panic!("{o:?}"),
    }
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(ue
        .received
        .contains(&"DeactivateEpsBearerContextRequest".to_string()));
    assert_eq!(ue.last_pti, ue.pti);
    assert_eq!(ue.pdns.len(), 1);
    assert!(ue.dedicated.is_empty());
    let ctx = h.cp.ue(slot).unwrap();
    assert_eq!(ctx.pdns.len(), 1);
    assert!(ctx.bearer(6).is_none() && ctx.bearer(7).is_none());
    assert_eq!(h.mme.stats.pdn_disconnects, 1);
    // The freed address no longer reaches the UE; it is dropped and counted.
    h.sync();
    let before =
        h.dp.counters()
            .drop_count(pepc_slice::counters::DropReason::UnknownUeIp);
    assert_eq!(dl_to(&mut h, ims_ip, 5).bufs[0].meta.verdict, Verdict::Drop);
    assert_eq!(
        h.dp.counters()
            .drop_count(pepc_slice::counters::DropReason::UnknownUeIp),
        before + 1
    );
    // The last PDN connection cannot be disconnected.
    let nas = ue.pdn_disconnect_request(5);
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(ue.received.last().unwrap(), "PdnDisconnectReject#49");
    // A new ims connection reuses the freed address.
    let nas = ue.pdn_connectivity_request(Some("ims"));
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(ue.pdns[1].1, ims_ip);
}

#[test]
fn all_pdns_survive_idle_service_request_and_handovers() {
    let (mut h, mut ue, ims_ip) = attached_with_ims();
    release(&mut h, &mut ue);
    h.sync();
    // Downlink to the idle UE's ims address pages it.
    assert_eq!(
        dl_to(&mut h, ims_ip, 1).bufs[0].meta.verdict,
        Verdict::Consumed
    );
    let mut ev = vec![];
    h.cp.poll_requests(&mut ev);
    let paging = h.input(Input::Control(ev.pop().unwrap()));
    assert_eq!(names(&paging), vec!["Paging"]);
    ue.enb_ue_id = 11;
    let sr = ue.service_request();
    let first = h.send(1, initial_ue(&h, &ue, sr, ue.m_tmsi));
    match &first[..] {
        [(1, S1apMessage::InitialContextSetupRequest(r))] => {
            let ids: Vec<u8> = r.erabs.iter().map(|e| e.id).collect();
            assert_eq!(ids, vec![5, 6], "ICS carries every PDN's bearers");
        }
        o => panic!("{o:?}"),
    }
    pump(&mut h, &mut ue, 1, first).unwrap();
    h.dp.sync(2);
    let mut again = Batch::default();
    assert_eq!(h.dp.take_ready(&mut again, false), 1);
    h.dp.downlink(&mut again, 3);
    assert_eq!(tunnel_teid(&again), enb_teid(11, 6));

    // S1 handover: the Handover Request lists both PDNs' bearers.
    assert!(matches!(
        h.enb_setup(2, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let plmn = h.mme.config().plmn;
    let id = ue.mme_ue_id.unwrap();
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
            container: vec![0x40, 0x80, 0x00],
        },
    );
    match &r[..] {
        [(2, S1apMessage::HandoverRequest(q))] => {
            let ids: Vec<u8> = q.erabs.iter().map(|e| e.id).collect();
            assert_eq!(ids, vec![5, 6]);
        }
        o => panic!("{o:?}"),
    }
    // X2 path switch (from eNB 2) that switches only bearer 5: the ims PDN is released.
    let r = h.send(
        2,
        PathSwitchRequest {
            enb_ue_id: 70,
            erabs: vec![pepc_s1ap::ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 3),
                teid: 0x55,
            }],
            source_mme_ue_id: id,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x202,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
            ue_security_capabilities: pepc_s1ap::UeSecurityCapabilities {
                eea: 0xc000,
                eia: 0xc000,
            },
        },
    );
    match &r[..] {
        [(2, S1apMessage::PathSwitchRequestAcknowledge(a))] => {
            let ids: Vec<u8> = a.erabs_to_release.iter().map(|e| e.id).collect();
            assert_eq!(ids, vec![6]);
        }
        o => panic!("{o:?}"),
    }
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(h.cp.ue(slot).unwrap().pdns.len(), 1);
}

// ------------------------------------------------------- UE-requested bearer resources

/// Traffic flow aggregate: create new TFT, one bidirectional filter (UDP to port 5060).
fn create_tfa() -> Vec<u8> {
    // op 001, 1 filter; filter id 0 dir bidirectional (0x30), precedence 10,
    // contents: protocol 17 (0x30 0x11), single remote port 5060 (0x50 0x13 0xc4).
    vec![0x21, 0x30, 10, 5, 0x30, 0x11, 0x50, 0x13, 0xc4]
}

#[test]
fn bearer_resource_allocation_activates_a_dedicated_bearer_and_modification_releases_it() {
    let (mut h, mut ue) = attached();
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    // QCI 1, MBR 128 kbps, GBR 64 kbps (TS 24.008 octets 0x48 = 128, 0x40 = 64).
    let nas =
        ue.bearer_resource_allocation_request(5, vec![1, 0x48, 0x48, 0x40, 0x40], create_tfa());
    let seen = esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(seen, vec!["E-RABSetupRequest"], "{:?}", h.logs);
    assert_eq!(ue.last_pti, ue.pti, "activation answers the request's PTI");
    let (ebi, linked, tft) = ue.dedicated[0].clone();
    assert_eq!((ebi, linked), (6, 5));
    // The network TFT: create new TFT with the UE's filter (identifier assigned).
    assert_eq!(tft[0] >> 5, 1);
    assert_eq!(&tft[3..], &create_tfa()[3..]);
    let b = h.cp.ue(slot).unwrap().bearer(6).unwrap().clone();
    assert_eq!(b.qci, 1);
    assert_eq!(
        (b.gbr_ul, b.gbr_dl, b.mbr_ul, b.mbr_dl),
        (64_000, 64_000, 128_000, 128_000)
    );
    assert_eq!(b.enb_teid, enb_teid(10, 6));

    // Release: delete the bearer's packet filters.
    let nas = ue.bearer_resource_modification_request(6, vec![0xA1, 0x00]);
    let r = ul_nas(&mut h, &ue, nas);
    assert_eq!(names(&r), vec!["E-RABReleaseCommand"]);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(ue.last_pti, ue.pti);
    assert!(ue.dedicated.is_empty());
    assert!(h.cp.ue(slot).unwrap().bearer(6).is_none());
    // Delete existing TFT (op 010) of the default bearer: refused (#30); unknown
    // bearer (#43); another operation (#31).
    let nas = ue.bearer_resource_modification_request(5, vec![0x40]);
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(
        ue.received.last().unwrap(),
        "BearerResourceModificationReject#30"
    );
    let nas = ue.bearer_resource_modification_request(9, vec![0x40]);
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(
        ue.received.last().unwrap(),
        "BearerResourceModificationReject#43"
    );
    let nas = ue.bearer_resource_modification_request(5, create_tfa());
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(
        ue.received.last().unwrap(),
        "BearerResourceModificationReject#31"
    );
}

#[test]
fn bearer_resource_allocation_rejects() {
    let cfg = MmeConfig {
        ue_requested_qcis: vec![1, 2, 3, 4],
        ..Default::default()
    };
    let mut h = Harness::sliced(100, cfg, SLICES);
    h.hss.add(&subscriber(IMSI)).unwrap();
    h.enb_setup(1, 1, 1);
    let mut ue = SimUe::new(IMSI, 10);
    attach(&mut h, &mut ue, 1).unwrap();
    let cases: Vec<(u8, Vec<u8>, Vec<u8>, &str)> = vec![
        // linked bearer is not a PDN's default bearer
        (9, vec![9], create_tfa(), "#43"),
        // GBR QCI without bit rates
        (5, vec![1], create_tfa(), "#37"),
        // reserved QCI
        (5, vec![200], create_tfa(), "#37"),
        // QCI not granted by policy
        (5, vec![8], create_tfa(), "#30"),
        // "delete packet filters" is no allocation
        (5, vec![1, 0x48, 0x48, 0x40, 0x40], vec![0xA1, 0x00], "#41"),
        // syntactically broken aggregate: one filter announced, none present
        (5, vec![1, 0x48, 0x48, 0x40, 0x40], vec![0x21], "#42"),
    ];
    for (linked, qos, tfa, cause) in cases {
        let nas = ue.bearer_resource_allocation_request(linked, qos, tfa);
        esm_exchange(&mut h, &mut ue, nas);
        assert_eq!(
            ue.received.last().unwrap(),
            &format!("BearerResourceAllocationReject{cause}")
        );
    }
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    assert_eq!(h.cp.ue(slot).unwrap().bearers.len(), 1);
    assert_eq!(h.mme.stats.bearer_resource_rejects, 6);
    // Bearers run out: #65 once EBIs 6..=15 are taken.
    for _ in 6..=15 {
        let nas =
            ue.bearer_resource_allocation_request(5, vec![1, 0x48, 0x48, 0x40, 0x40], create_tfa());
        esm_exchange(&mut h, &mut ue, nas);
    }
    assert_eq!(h.cp.ue(slot).unwrap().bearers.len(), 11);
    let nas =
        ue.bearer_resource_allocation_request(5, vec![1, 0x48, 0x48, 0x40, 0x40], create_tfa());
    esm_exchange(&mut h, &mut ue, nas);
    assert_eq!(
        ue.received.last().unwrap(),
        "BearerResourceAllocationReject#65"
    );
}

#[test]
fn ciphered_answer_without_a_context_is_counted_not_silently_lost() {
    // A UE that detached (switch-off) keeps its NAS context; the MME dropped it. Its
    // re-attach is answered with a plain Identity Request; a ciphered answer with the
    // stale context cannot be read and is counted (the re-attach then waits on T3470).
    let (mut h, mut ue) = attached();
    let nas = ue.detach_request(true);
    let r = ul_nas(&mut h, &ue, nas);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.mme.stats.detaches, 1);
    ue.enb_ue_id = 12;
    let att = ue.attach_request(ue.m_tmsi, false);
    let r = h.send(1, initial_ue(&h, &ue, att, None));
    assert_eq!(names(&r), vec!["DownlinkNASTransport"]);
    let id = match &r[0].1 {
        S1apMessage::DownlinkNasTransport(d) => d.mme_ue_id,
        _ => unreachable!(),
    };
    ue.mme_ue_id = Some(id);
    let resp = pepc_mme::nasx::NasIdentityResponse::new(pepc_mme::nasx::NasMobileIdentity::new(
        pepc_mme::nasx::imsi_value(IMSI),
    ));
    let ciphered = ue.protect(&pepc_mme::nasx::NasEpsMessage::new_emm(resp));
    let before = h.mme.stats.nas_unprotected_dropped;
    assert!(ul_nas(&mut h, &ue, ciphered).is_empty());
    assert_eq!(h.mme.stats.nas_unprotected_dropped, before + 1);
}

/// Attach by GUTI with an integrity-protected Attach Request; returns the S1AP names.
fn guti_reattach(h: &mut Harness, ue: &mut SimUe, enb_ue_id: u32, nas: Vec<u8>) -> Vec<String> {
    ue.enb_ue_id = enb_ue_id;
    ue.mme_ue_id = None;
    let r = h.send(1, initial_ue(h, ue, nas, None));
    pump(h, ue, 1, r).unwrap()
}

#[test]
fn guti_reattach_after_detach_reuses_the_parked_security_context() {
    for switch_off in [false, true] {
        let (mut h, mut ue) = attached();
        let old_tmsi = ue.m_tmsi.unwrap();
        let ksi = ue.sec.as_ref().unwrap().ksi;
        let nas = ue.detach_request(switch_off);
        let r = ul_nas(&mut h, &ue, nas);
        pump(&mut h, &mut ue, 1, r).unwrap();
        assert_eq!(h.mme.ue_count(), 0);
        assert_eq!(h.mme.parked_count(), 1);

        // The UE comes back with its GUTI and the context it kept: no Identity
        // Request, no AKA, no SMC; the ICS carries the KeNB of the attach's COUNT.
        ue.received.clear();
        let nas = ue.attach_request_protected(old_tmsi);
        let seen = guti_reattach(&mut h, &mut ue, 20, nas);
        assert!(
            seen.contains(&"InitialContextSetupRequest".to_string()),
            "{seen:?} {:?}",
            h.logs
        );
        assert!(
            !ue.received.iter().any(|m| m.starts_with("IdentityRequest")
                || m.starts_with("AuthenticationRequest")
                || m.starts_with("SecurityModeCommand")),
            "{:?}",
            ue.received
        );
        assert!(
            ue.received.iter().any(|r| r == "AttachAccept"),
            "{:?}",
            ue.received
        );
        assert_eq!(h.mme.stats.attaches, 2);
        assert_eq!(h.mme.stats.parked_contexts_reused, 1);
        assert_eq!(h.mme.parked_count(), 0);
        assert_eq!(ue.sec.as_ref().unwrap().ksi, ksi);
        assert!(h.mme.is_connected(&h.cp, IMSI_N));
        assert!(ue.ue_ip.is_some());
        // The context is live: a protected uplink message after the attach verifies.
        let nas = ue.detach_request(false);
        let r = ul_nas(&mut h, &ue, nas);
        assert_eq!(
            names(&r),
            vec!["DownlinkNASTransport", "UEContextReleaseCommand"]
        );
    }
}

/// A subscriber that re-attaches by IMSI (a new AKA: its old context is gone from
/// the UE) and detaches again has one parked context, the newest: before, every
/// such cycle parked one more until the bound (65,536 per slice), the live heap
/// growing with each attach/detach storm.
#[test]
fn one_parked_context_per_subscriber_across_imsi_reattaches() {
    let (mut h, mut ue) = attached();
    let nas = ue.detach_request(true);
    let r = ul_nas(&mut h, &ue, nas);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.mme.parked_count(), 1);
    for round in 0..3u32 {
        let mut again = SimUe::new(IMSI, 30 + round);
        let seen = attach(&mut h, &mut again, 1).unwrap();
        assert!(
            seen.contains(&"InitialContextSetupRequest".to_string()),
            "{seen:?}"
        );
        let nas = again.detach_request(true);
        let r = ul_nas(&mut h, &again, nas);
        pump(&mut h, &mut again, 1, r).unwrap();
        assert_eq!(h.mme.ue_count(), 0);
        assert_eq!(h.mme.parked_count(), 1, "round {round}");
        // The newest one is the one kept: a GUTI re-attach with it skips AKA.
        if round == 2 {
            let t = again.m_tmsi.unwrap();
            again.received.clear();
            let nas = again.attach_request_protected(t);
            let seen = guti_reattach(&mut h, &mut again, 40, nas);
            assert!(
                seen.contains(&"InitialContextSetupRequest".to_string()),
                "{seen:?}"
            );
            assert!(
                !again
                    .received
                    .iter()
                    .any(|m| m.starts_with("AuthenticationRequest")),
                "{:?}",
                again.received
            );
            assert_eq!(h.mme.stats.parked_contexts_reused, 1);
            assert_eq!(h.mme.parked_count(), 0);
        }
    }
}

#[test]
fn guti_reattach_with_wrong_ksi_or_bad_mac_falls_back_to_identification() {
    let (mut h, mut ue) = attached();
    let old_tmsi = ue.m_tmsi.unwrap();
    let nas = ue.detach_request(true);
    let r = ul_nas(&mut h, &ue, nas);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.mme.parked_count(), 1);

    // A forged MAC: the parked context is neither used nor dropped.
    let mut forged = ue.attach_request_protected(old_tmsi);
    forged[1] ^= 0xff;
    ue.enb_ue_id = 21;
    let r = h.send(1, initial_ue(&h, &ue, forged, None));
    assert_eq!(names(&r), vec!["DownlinkNASTransport"]);
    assert_eq!(h.mme.stats.parked_contexts_reused, 0);
    assert_eq!(h.mme.parked_count(), 1);

    // Another KSI than the parked one: identification as for an unknown GUTI.
    let real_ksi = ue.sec.as_ref().unwrap().ksi;
    ue.sec.as_mut().unwrap().ksi = (real_ksi + 1) % 7;
    let nas = ue.attach_request_protected(old_tmsi);
    ue.enb_ue_id = 22;
    let r = h.send(1, initial_ue(&h, &ue, nas, None));
    assert_eq!(names(&r), vec!["DownlinkNASTransport"]);
    assert_eq!(h.mme.stats.parked_contexts_reused, 0);
    assert_eq!(h.mme.parked_count(), 1);
}

#[test]
fn parked_contexts_are_bounded_and_expire() {
    let cfg = MmeConfig {
        parked_contexts: 1,
        parked_context_ttl: Duration::from_secs(60),
        ..Default::default()
    };
    let mut h = Harness::sliced(100, cfg, SLICES);
    // Both in the focus slice: the bound is per slice's MME.
    let imsis = [h.focus_imsi(0), h.focus_imsi(1)];
    for i in &imsis {
        h.hss.add(&subscriber(i)).unwrap();
    }
    h.enb_setup(1, 1, 1);
    let mut ues = Vec::new();
    for (n, i) in imsis.iter().enumerate() {
        let mut ue = SimUe::new(i, 40 + n as u32);
        attach(&mut h, &mut ue, 1).unwrap();
        ues.push(ue);
    }
    for ue in ues.iter_mut() {
        let nas = ue.detach_request(true);
        let r = ul_nas(&mut h, ue, nas);
        pump(&mut h, ue, 1, r).unwrap();
        assert_eq!(h.mme.parked_count(), 1, "bounded to one");
    }
    // The first UE's context was evicted: its GUTI re-attach needs identification.
    let t0 = ues[0].m_tmsi.unwrap();
    let nas = ues[0].attach_request_protected(t0);
    ues[0].enb_ue_id = 50;
    let r = h.send(1, initial_ue(&h, &ues[0], nas, None));
    assert_eq!(names(&r), vec!["DownlinkNASTransport"]);
    assert_eq!(h.mme.stats.parked_contexts_reused, 0);

    // The second one's expires after the TTL: dropped at the next timer tick.
    h.advance(Duration::from_secs(61));
    assert_eq!(h.mme.parked_count(), 0);
    let t1 = ues[1].m_tmsi.unwrap();
    let nas = ues[1].attach_request_protected(t1);
    ues[1].enb_ue_id = 51;
    let r = h.send(1, initial_ue(&h, &ues[1], nas, None));
    assert_eq!(names(&r), vec!["DownlinkNASTransport"]);
    assert_eq!(h.mme.stats.parked_contexts_reused, 0);
}

fn release_commands_for(r: &[(u64, S1apMessage)], mme_ue_id: u32) -> usize {
    r.iter()
        .filter(|(_, m)| {
            matches!(m, S1apMessage::UeContextReleaseCommand(c)
                if matches!(c.ids, pepc_s1ap::UeS1apIds::Pair { mme_ue_id: i, .. } if i == mme_ue_id))
        })
        .count()
}

fn error_indications(r: &[(u64, S1apMessage)]) -> usize {
    r.iter()
        .filter(|(_, m)| matches!(m, S1apMessage::ErrorIndication(_)))
        .count()
}

/// The race seen in `pepc demo` (Error Indication, unknown MME UE S1AP ID): a
/// switch-off detach is answered by a Release Command; the eNB releases, answers and
/// the UE attaches again at once by GUTI. The new Initial UE Message goes on another
/// SCTP stream than the UE Context Release Complete and reaches the MME first. The
/// MME must neither command the release a second time nor forget the old MME UE S1AP
/// ID before the Release Complete arrives.
#[test]
fn reattach_overtaking_the_release_complete_of_the_detach() {
    let (mut h, mut ue) = attached();
    let old_id = ue.mme_ue_id.unwrap();
    let old_enb = ue.enb_ue_id;
    let old_tmsi = ue.m_tmsi.unwrap();
    let nas = ue.detach_request(true);
    let r = ul_nas(&mut h, &ue, nas);
    assert_eq!(release_commands_for(&r, old_id), 1, "{:?}", names(&r));

    // Re-attach on a new S1 connection before the Release Complete is in.
    ue.received.clear();
    let nas = ue.attach_request_protected(old_tmsi);
    ue.enb_ue_id = old_enb + 1;
    ue.mme_ue_id = None;
    let r = h.send(1, initial_ue(&h, &ue, nas, None));
    assert_eq!(
        release_commands_for(&r, old_id),
        0,
        "the old connection is already being released: {:?}",
        names(&r)
    );
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?} {:?}",
        h.logs
    );
    assert!(ue.received.iter().any(|r| r == "AttachAccept"));
    let new_id = ue.mme_ue_id.unwrap();
    assert_ne!(new_id, old_id);

    // The delayed Release Complete of the detach: quietly accepted.
    let unknown = h.mme.stats.unknown_ue_ids;
    let r = h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: old_id,
            enb_ue_id: old_enb,
        },
    );
    assert_eq!(error_indications(&r), 0, "{:?}", names(&r));
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.mme.stats.unknown_ue_ids, unknown);
    assert_eq!(h.mme.ue_count(), 1, "the old context is gone");
    assert_eq!(
        h.mme.parked_count(),
        0,
        "a superseded context is not parked"
    );
    assert!(h.mme.is_connected(&h.cp, IMSI_N));
    assert_eq!(h.mme.stats.attaches, 2);

    // The new context is untouched: its uplink verifies and its detach works.
    let nas = ue.detach_request(false);
    let r = ul_nas(&mut h, &ue, nas);
    assert_eq!(
        names(&r),
        vec!["DownlinkNASTransport", "UEContextReleaseCommand"]
    );
    assert_eq!(release_commands_for(&r, new_id), 1);
}

/// An attach by IMSI from a UE whose old connection is still up (e.g. a UE that
/// restarted): the old connection is released once, and its MME UE S1AP ID stays
/// known until the eNB confirms, whatever crosses the command meanwhile.
#[test]
fn superseded_connection_stays_known_until_its_release_complete() {
    let (mut h, ue) = attached();
    let old_id = ue.mme_ue_id.unwrap();
    let old_enb = ue.enb_ue_id;

    let mut ue2 = SimUe::new(IMSI, old_enb + 5);
    ue2.sqn_max = ue.sqn_max;
    let nas = ue2.attach_request(None, false);
    // The eNB does not answer the old connection's release yet.
    h.hold_releases.push(old_id);
    let r = h.send(1, initial_ue(&h, &ue2, nas, None));
    assert_eq!(
        release_commands_for(&r, old_id),
        0,
        "the registered context stays until the new attach is secured: {:?}",
        names(&r)
    );
    let seen = pump(&mut h, &mut ue2, 1, r).unwrap();
    assert_eq!(h.held_releases.len(), 1, "released once, when the new one was");
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?} {:?}",
        h.logs
    );

    // The eNB asked for a release before our command reached it, then completes.
    let unknown = h.mme.stats.unknown_ue_ids;
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: old_id,
            enb_ue_id: old_enb,
            cause: Cause::USER_INACTIVITY,
        },
    );
    assert!(r.is_empty(), "{:?}", names(&r));
    let r = h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: old_id,
            enb_ue_id: old_enb,
        },
    );
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.mme.stats.unknown_ue_ids, unknown);
    assert_eq!(h.mme.ue_count(), 1);
    assert!(h.mme.is_connected(&h.cp, IMSI_N));

    // Only now is the old ID unknown.
    let r = h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: old_id,
            enb_ue_id: old_enb,
        },
    );
    assert_eq!(error_indications(&r), 1);
}

/// A UE Context Release Request crossing the Release Command of a detach: one command
/// only, so the eNB answers once and no Release Complete meets a removed context.
#[test]
fn release_request_crossing_the_detach_release_command() {
    let (mut h, mut ue) = attached();
    let id = ue.mme_ue_id.unwrap();
    let nas = ue.detach_request(false);
    let r = ul_nas(&mut h, &ue, nas);
    assert_eq!(release_commands_for(&r, id), 1);
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    assert_eq!(release_commands_for(&r, id), 0, "{:?}", names(&r));
    let r = h.send(
        1,
        UeContextReleaseComplete {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
        },
    );
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.mme.ue_count(), 0);
    assert_eq!(h.mme.stats.unknown_ue_ids, 0);
}

/// A PDN connection to "ims" whose E-RAB Setup Request reached the source eNB; the UE
/// answered, then moved by X2 at once. Returns the source's answers, not yet delivered
/// (E-RAB Setup Response, Uplink NAS with the Activate Default EPS Bearer Accept).
fn ims_setup_answered_at_source(h: &mut Harness, ue: &mut SimUe) -> Vec<S1apMessage> {
    let nas = ue.pdn_connectivity_request(Some("ims"));
    let r = ul_nas(h, ue, nas);
    let req = match &r[..] {
        [(1, S1apMessage::ERabSetupRequest(q))] => q.clone(),
        o => panic!("{o:?} {:?}", h.logs),
    };
    let accept = ue
        .on_downlink(req.erabs[0].nas_pdu.as_ref().unwrap())
        .unwrap()
        .reply
        .expect("the UE accepts");
    let plmn = h.mme.config().plmn;
    vec![
        ERabSetupResponse {
            mme_ue_id: req.mme_ue_id,
            enb_ue_id: ue.enb_ue_id,
            setup: vec![pepc_s1ap::ERabTunnel {
                id: 6,
                transport: ENB_ADDR,
                teid: enb_teid(ue.enb_ue_id, 6),
            }],
            failed: vec![],
        }
        .into(),
        UplinkNasTransport {
            mme_ue_id: req.mme_ue_id,
            enb_ue_id: ue.enb_ue_id,
            nas_pdu: accept,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x101,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
        }
        .into(),
    ]
}

fn x2_path_switch(h: &mut Harness, id: u32, ebis: &[u8]) -> PathSwitchRequestAcknowledge {
    let plmn = h.mme.config().plmn;
    let r = h.send(
        2,
        PathSwitchRequest {
            enb_ue_id: 50,
            erabs: ebis
                .iter()
                .map(|e| pepc_s1ap::ERabTunnel {
                    id: *e,
                    transport: Ipv4Addr::new(127, 0, 0, 3),
                    teid: 0x70 + *e as u32,
                })
                .collect(),
            source_mme_ue_id: id,
            ecgi: pepc_s1ap::Ecgi {
                plmn,
                cell_id: 0x202,
            },
            tai: pepc_s1ap::Tai { plmn, tac: 1 },
            ue_security_capabilities: pepc_s1ap::UeSecurityCapabilities {
                eea: 0xc000,
                eia: 0xc000,
            },
        },
    );
    match &r[..] {
        [(2, S1apMessage::PathSwitchRequestAcknowledge(a))] => a.clone(),
        o => panic!("{o:?} {:?}", h.logs),
    }
}

/// The race seen in `pepc demo` (Error Indication, unknown eNB UE S1AP ID): the target
/// eNB's Path Switch Request, on its own SCTP association, overtakes the source eNB's
/// E-RAB Setup Response and Uplink NAS. They complete the procedure on the UE's
/// context; the Path Switch, being newer, keeps deciding the tunnels.
#[test]
fn x2_source_answers_overtaken_by_the_path_switch() {
    let (mut h, mut ue) = attached();
    assert!(matches!(
        h.enb_setup(2, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let id = ue.mme_ue_id.unwrap();
    let late = ims_setup_answered_at_source(&mut h, &mut ue);
    let ack = x2_path_switch(&mut h, id, &[5, 6]);
    assert!(ack.erabs_to_release.is_empty());
    let mut r = vec![];
    for m in late.clone() {
        r.extend(h.send(1, m));
    }
    assert_eq!(error_indications(&r), 0, "{r:?} {:?}", h.logs);
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(h.mme.stats.unknown_ue_ids, 0);
    assert_eq!(h.mme.stats.pdn_connects, 1, "{:?}", h.logs);
    // The source's tunnel does not override the one the target switched to.
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let b = h.cp.ue(slot).unwrap().bearer(6).unwrap();
    assert_eq!(
        (b.enb_addr, b.enb_teid),
        (Ipv4Addr::new(127, 0, 0, 3), 0x76)
    );
    // NAS through the source is still checked: the same message again is a replay.
    let replays = h.mme.stats.nas_replays;
    let r = h.send(1, late[1].clone());
    assert!(r.is_empty(), "{r:?}");
    assert_eq!(h.mme.stats.nas_replays, replays + 1);
    // A Release Request from the source concerns a connection the UE has left.
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: id,
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::RADIO_UNSPECIFIED,
        },
    );
    assert!(r.is_empty(), "{r:?}");
    assert!(h.mme.is_connected(&h.cp, IMSI_N));
    // After the grace period the source connection is unknown again.
    h.advance(Duration::from_secs(6));
    let r = h.send(1, late[0].clone());
    match &r[..] {
        [(1, S1apMessage::ErrorIndication(e))] => {
            assert_eq!(e.cause, Some(Cause::UNKNOWN_ENB_UE_S1AP_ID))
        }
        o => panic!("{o:?}"),
    }
    // The target connection works as before.
    ue.enb_ue_id = 50;
    let r = h.send(
        2,
        UeContextReleaseRequest {
            mme_ue_id: id,
            enb_ue_id: 50,
            cause: Cause::USER_INACTIVITY,
        },
    );
    assert_eq!(release_commands_for(&r, id), 1, "{r:?}");
}

/// Same race, but the target did not switch the new bearer: the Path Switch released
/// it, and the late answers from the source neither bring it back nor count a PDN
/// connection.
#[test]
fn x2_source_answers_for_a_bearer_the_target_did_not_switch() {
    let (mut h, mut ue) = attached();
    assert!(matches!(
        h.enb_setup(2, 2, 1),
        S1apMessage::S1SetupResponse(_)
    ));
    let id = ue.mme_ue_id.unwrap();
    let late = ims_setup_answered_at_source(&mut h, &mut ue);
    let ack = x2_path_switch(&mut h, id, &[5]);
    assert_eq!(
        ack.erabs_to_release
            .iter()
            .map(|e| e.id)
            .collect::<Vec<_>>(),
        vec![6]
    );
    let mut r = vec![];
    for m in late {
        r.extend(h.send(1, m));
    }
    assert_eq!(error_indications(&r), 0, "{r:?} {:?}", h.logs);
    assert_eq!(h.mme.stats.unknown_ue_ids, 0);
    assert_eq!(h.mme.stats.pdn_connects, 0);
    let (_, slot) = h.cp.find_imsi(IMSI_N).unwrap();
    let ctx = h.cp.ue(slot).unwrap();
    assert!(ctx.bearer(6).is_none());
    assert_eq!(ctx.pdns.len(), 1);
}

// The HSS behind the node's proxy, slow or absent (the harness holds its requests).

/// An Initial UE Message with `ue`'s Attach Request by IMSI.
fn start_attach(h: &mut Harness, ue: &SimUe) -> Vec<(u64, S1apMessage)> {
    let nas = ue.attach_request(None, false);
    h.send(1, initial_ue(h, ue, nas, None))
}

#[test]
fn attaches_go_on_while_another_ue_waits_for_the_hss() {
    let mut h = setup();
    let other = h.focus_imsi(1);
    h.hss.add(&subscriber(&other)).unwrap();
    h.hss_mode = HssMode::Hold;
    let mut a = SimUe::new(IMSI, 10);
    let r = start_attach(&mut h, &a);
    assert!(r.is_empty(), "nothing before the HSS answers: {:?}", names(&r));
    assert_eq!(h.held_hss.len(), 1);
    assert!(matches!(
        h.held_hss[0].1,
        pepc_mme::HssRequest::Vector { imsi: IMSI_N, .. }
    ));
    // The same Attach Request again (same connection) is not served twice.
    let id = h.mme.mme_ue_id_of(IMSI_N).expect("context of the waiting UE");
    a.mme_ue_id = Some(id);
    let r = ul_nas(&mut h, &a, a.attach_request(None, false));
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.held_hss.len(), 1);
    assert_eq!(h.stat(|s| s.nas_dropped_awaiting_hss), 1);

    // Another UE attaches from start to end meanwhile.
    h.hss_mode = HssMode::Inline;
    let mut b = SimUe::new(&other, 11);
    let seen = attach(&mut h, &mut b, 1).unwrap();
    assert!(seen.contains(&"InitialContextSetupRequest".to_string()));
    assert_eq!(h.stat(|s| s.attaches), 1);

    // The first UE's answer comes: its attach goes on (AKA, security mode, Update
    // Location, ...) to the end.
    h.hss_mode = HssMode::Hold;
    let r = h.answer_hss(0);
    pump(&mut h, &mut a, 1, r).unwrap();
    assert!(matches!(
        h.held_hss[0].1,
        pepc_mme::HssRequest::Profile { imsi: IMSI_N, .. }
    ));
    h.hss_mode = HssMode::Inline;
    let r = h.answer_hss(0);
    let seen = pump(&mut h, &mut a, 1, r).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?} {:?}",
        h.logs
    );
    assert_eq!(h.stat(|s| s.attaches), 2);
    assert_eq!(h.stat(|s| s.hss_late_answers), 0);
    assert_eq!(h.stat(|s| s.hss_requests), 4, "vector and profile per attach");
}

#[test]
fn hss_that_never_answers_rejects_the_attach_and_frees_the_context() {
    let mut h = setup();
    h.hss_mode = HssMode::Hold;
    let mut ue = SimUe::new(IMSI, 10);
    assert!(start_attach(&mut h, &ue).is_empty());
    assert_eq!(h.ue_count(), 1);
    let timeout = h.mme.config().hss_timeout;
    assert!(h.advance(timeout - Duration::from_millis(1)).is_empty());
    let r = h.advance(Duration::from_millis(2));
    assert_eq!(
        names(&r),
        vec!["DownlinkNASTransport", "UEContextReleaseCommand"],
        "{:?}",
        h.logs
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    // #17 network failure: the UE tries again later (TS 24.301 §5.5.1.2.6).
    assert_eq!(ue.received, vec!["AttachReject#17"]);
    assert_eq!(h.ue_count(), 0, "context freed");
    assert_eq!(h.stat(|s| s.hss_timeouts), 1);
    assert_eq!(h.stat(|s| s.attach_rejects), 1);

    // The answer that comes after all finds nobody: dropped and counted.
    let r = h.answer_hss(0);
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.stat(|s| s.hss_late_answers), 1);
    assert_eq!(h.ue_count(), 0);
}

#[test]
fn late_hss_answer_for_a_removed_context_is_dropped_and_counted() {
    let mut h = setup();
    h.hss_mode = HssMode::Hold;
    let ue = SimUe::new(IMSI, 10);
    assert!(start_attach(&mut h, &ue).is_empty());
    assert_eq!(h.ue_count(), 1);
    // The eNB goes: the attaching UE's context with it.
    h.input(Input::EnbDown { assoc: 1 });
    assert_eq!(h.ue_count(), 0);
    let r = h.answer_hss(0);
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.stat(|s| s.hss_late_answers), 1);
    assert_eq!(h.ue_count(), 0);
    // Nothing of it is left to time out.
    assert!(h.advance(Duration::from_secs(30)).is_empty());
    assert_eq!(h.stat(|s| s.hss_timeouts), 0);
}

#[test]
fn hss_answer_for_a_superseded_attach_is_dropped_and_the_new_one_completes() {
    let mut h = setup();
    h.hss_mode = HssMode::Hold;
    let first = SimUe::new(IMSI, 10);
    assert!(start_attach(&mut h, &first).is_empty());
    let old_id = h.mme.mme_ue_id_of(IMSI_N).unwrap();
    // The UE gives up and attaches again on a new connection: the old context goes.
    let mut ue = SimUe::new(IMSI, 12);
    let r = start_attach(&mut h, &ue);
    assert_eq!(release_commands_for(&r, old_id), 1, "{:?}", names(&r));
    assert_eq!(h.held_hss.len(), 2);
    let r = h.answer_hss(0);
    assert!(r.is_empty(), "{:?}", names(&r));
    assert_eq!(h.stat(|s| s.hss_late_answers), 1);
    h.hss_mode = HssMode::Inline;
    let r = h.answer_hss(0);
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(
        seen.contains(&"InitialContextSetupRequest".to_string()),
        "{seen:?}"
    );
    assert_eq!(h.stat(|s| s.attaches), 1);
}

#[test]
fn hss_unavailable_rejects_with_network_failure_and_nas_waits_are_not_served() {
    let mut h = setup();
    h.hss_mode = HssMode::Hold;
    let mut ue = SimUe::new(IMSI, 10);
    assert!(start_attach(&mut h, &ue).is_empty());
    // The vector request is the first, held.
    assert!(matches!(
        h.held_hss[0].1,
        pepc_mme::HssRequest::Vector { imsi: IMSI_N, .. }
    ));
    // A message out of place while the vector is awaited: dropped, counted.
    ue.mme_ue_id = h.mme.mme_ue_id_of(IMSI_N);
    let smc = pepc_mme::nasx::NasEpsMessage::new_emm(pepc_mme::nasx::NasSecurityModeReject::new(
        pepc_mme::nasx::NasEmmCause::new(24),
    ))
    .encode()
    .unwrap();
    assert!(ul_nas(&mut h, &ue, smc).is_empty());
    assert_eq!(h.stat(|s| s.nas_dropped_awaiting_hss), 1);
    // The HSS fails the request.
    let (s, req) = h.held_hss.pop_front().unwrap();
    let r = h.input_to(
        s,
        Input::Hss(pepc_mme::HssAnswer {
            r: req.reference(),
            result: Err(pepc_mme::HssFailure::Unavailable("database down".into())),
        }),
    );
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(ue.received, vec!["AttachReject#17"]);
    assert_eq!(h.stat(|s| s.hss_failures), 1);
    assert_eq!(h.ue_count(), 0);
}

#[test]
fn synch_failure_waits_for_the_resync_answer() {
    let mut h = setup();
    h.hss_mode = HssMode::Hold;
    let mut ue = SimUe::new(IMSI, 10);
    ue.sqn_max = 1 << 20; // USIM ahead of the HSS
    assert!(start_attach(&mut h, &ue).is_empty());
    let r = h.answer_hss(0); // vector: Authentication Request, Synch failure back
    assert!(pump(&mut h, &mut ue, 1, r).is_ok());
    assert_eq!(h.held_hss.len(), 1);
    assert!(matches!(
        h.held_hss[0].1,
        pepc_mme::HssRequest::Resync { imsi: IMSI_N, .. }
    ));
    assert_eq!(h.stat(|s| s.resyncs), 1);
    h.hss_mode = HssMode::Inline;
    let r = h.answer_hss(0);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(h.stat(|s| s.attaches), 1, "{:?}", ue.received);
}

/// TS 23.401 §5.3.2.1: authentication (AIR, AKA, security mode: step 5a) before Update
/// Location (step 8). Every HSS request of an attach in order, and no ULR for an
/// Attach Request whose sender fails AKA: anyone may send one in a subscriber's name,
/// and a ULR would move the subscriber's registration here.
#[test]
fn update_location_comes_only_after_authentication_and_security_mode() {
    let mut h = setup();
    h.hss_mode = HssMode::Hold;
    let mut ue = SimUe::new(IMSI, 10);
    assert!(start_attach(&mut h, &ue).is_empty());
    let kinds = |h: &Harness| -> Vec<&'static str> {
        h.held_hss
            .iter()
            .map(|(_, r)| match r {
                pepc_mme::HssRequest::Profile { .. } => "ULR",
                pepc_mme::HssRequest::Vector { .. } => "AIR",
                pepc_mme::HssRequest::Resync { .. } => "AIR-resync",
                pepc_mme::HssRequest::Purge { .. } => "PUR",
            })
            .collect()
    };
    assert_eq!(kinds(&h), vec!["AIR"]);
    // The vector: Authentication Request; the UE's RES: Security Mode Command; its
    // Complete: only now the Update Location.
    let r = h.answer_hss(0);
    pump(&mut h, &mut ue, 1, r).unwrap();
    assert_eq!(
        ue.received,
        vec!["AuthenticationRequest", "SecurityModeCommand"],
        "{:?}",
        h.logs
    );
    assert_eq!(kinds(&h), vec!["ULR"]);
    // The attach completes on its answer.
    h.hss_mode = HssMode::Inline;
    let r = h.answer_hss(0);
    let seen = pump(&mut h, &mut ue, 1, r).unwrap();
    assert!(seen.contains(&"InitialContextSetupRequest".to_string()), "{seen:?}");
    assert_eq!(h.stat(|s| s.attaches), 1);

    // Someone else attaches in the subscriber's name without its key: AKA fails, no
    // Update Location is sent, and the subscriber's context is untouched.
    h.hss_mode = HssMode::Hold;
    let mut impostor = SimUe::new(IMSI, 30).with_wrong_key();
    assert!(start_attach(&mut h, &impostor).is_empty());
    assert_eq!(kinds(&h), vec!["AIR"]);
    let r = h.answer_hss(0);
    let _ = pump(&mut h, &mut impostor, 1, r);
    assert!(h.held_hss.is_empty(), "no ULR for an unauthenticated UE: {:?}", kinds(&h));
    assert!(h.mme.is_connected(&h.cp, IMSI_N), "the subscriber keeps its context");
    assert_eq!(h.mme.m_tmsi_of(&h.cp, IMSI_N), ue.m_tmsi);
}

#[test]
fn a_release_stops_the_nas_retransmission_of_the_procedure_it_ends() {
    let (mut h, ue) = attached();
    // A GUTI reallocation awaits its Complete (T3450 running)...
    let now = h.now;
    h.mme
        .reallocate_guti(now, IMSI_N, &mut h.cp, &mut vec![])
        .unwrap();
    // ...when the eNB asks to release the UE.
    let r = h.send(
        1,
        UeContextReleaseRequest {
            mme_ue_id: ue.mme_ue_id.unwrap(),
            enb_ue_id: ue.enb_ue_id,
            cause: Cause::USER_INACTIVITY,
        },
    );
    assert_eq!(names(&r), vec!["UEContextReleaseCommand"]);
    // T3450 runs out before the Release Complete comes: nothing more may go on the
    // connection being released (the eNB has let the UE go).
    let later = h.advance(Duration::from_secs(7));
    assert!(
        !later
            .iter()
            .any(|(_, m)| matches!(m, S1apMessage::DownlinkNasTransport(_))),
        "{later:?}"
    );
}
