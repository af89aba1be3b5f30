//! Full MME flows through S1AP with a scripted eNB + UE and a real slice.

use pepc_mme::sim::*;
use pepc_mme::{Input, MmeConfig};
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;

const IMSI: &str = "001010000000001";

fn setup() -> Harness {
    let mut h = Harness::new(100, MmeConfig::default());
    h.hss.add(&subscriber(IMSI)).unwrap();
    assert!(matches!(h.enb_setup(1, 1, 1), S1apMessage::S1SetupResponse(_)));
    h
}

fn attached() -> (Harness, SimUe) {
    let mut h = setup();
    let mut ue = SimUe::new(IMSI, 10);
    let seen = attach(&mut h, &mut ue, 1).unwrap();
    assert!(seen.contains(&"InitialContextSetupRequest".to_string()), "{seen:?} {:?}", h.logs);
    (h, ue)
}

#[test]
fn s1_setup_ok_and_unknown_plmn() {
    let mut h = setup();
    h.input(Input::EnbUp { assoc: 2, out_streams: 2 });
    let req = S1SetupRequest {
        global_enb_id: pepc_s1ap::GlobalEnbId { plmn: pepc_s1ap::Plmn::from_mcc_mnc("999", "99").unwrap(), enb_id: pepc_s1ap::EnbId::Macro(2) },
        enb_name: None,
        supported_tas: vec![pepc_s1ap::SupportedTa { tac: 1, plmns: vec![pepc_s1ap::Plmn::from_mcc_mnc("999", "99").unwrap()] }],
        paging_drx: Some(64),
    };
    match &h.send(2, req)[..] {
        [(2, S1apMessage::S1SetupFailure(f))] => assert_eq!(f.cause, Cause::UNKNOWN_PLMN),
        o => panic!("{o:?}"),
    }
    assert_eq!(h.mme.stats.s1_setup_failures, 1);
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
