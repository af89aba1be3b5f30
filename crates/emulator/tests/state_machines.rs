//! The UE and eNB state machines against a scripted network side built with pepc-nas,
//! pepc-s1ap and pepc-security; no sockets.

use std::net::Ipv4Addr;

use pepc_emulator::enb::*;
use pepc_emulator::ue::*;
use pepc_emulator::{Report, Scenario, TrafficProfile};
use pepc_nas::security::{sht, NasSecurityContext, Role};
use pepc_nas::*;
use pepc_s1ap::msg::*;
use pepc_s1ap::*;
use pepc_security::{generate_vector, resync_sqn, sqn_from_u64, Eea, Eia, Key128, Milenage};

const K: &str = "465B5CE8B199B49FAA5F0A2EE238A6BC";
const OPC: &str = "E8ED289DEBA952E4283B54E88E6183CA";
const PLMN: [u8; 3] = [0x00, 0xf1, 0x10];

fn ue_cfg(sqn_ms: u64) -> UeConfig {
    UeConfig {
        imsi: "001010000000001".into(),
        k: Key128::from_hex(K).unwrap(),
        opc: *Key128::from_hex(OPC).unwrap().as_bytes(),
        plmn: PLMN,
        tac: 1,
        apn: Some("internet".into()),
        iot: false,
        sqn_ms,
    }
}

fn mil() -> Milenage {
    Milenage::new_with_opc(
        &Key128::from_hex(K).unwrap(),
        *Key128::from_hex(OPC).unwrap().as_bytes(),
    )
}

fn uplinks(out: &[UeOutput]) -> Vec<Vec<u8>> {
    let v = out
        .iter()
        .filter_map(|o| match o {
            UeOutput::Uplink { nas, .. } => Some(nas.clone()),
            _ => None,
        })
        .collect();
    v
}

fn one_uplink(out: &mut Vec<UeOutput>) -> Vec<u8> {
    let u = uplinks(out);
    assert_eq!(u.len(), 1, "expected one uplink NAS, got {out:?}");
    out.clear();
    u.into_iter().next().unwrap()
}

fn plain_ul(b: &[u8]) -> NasMessage {
    NasMessage::decode_dir(b, pepc_nas::Direction::Uplink).unwrap()
}

/// Network side of an attach: returns the MME's NAS context.
struct Net {
    ctx: Option<NasSecurityContext>,
}

impl Net {
    fn dl(&mut self, m: NasMessage, t: u8) -> Vec<u8> {
        let p = m.encode().unwrap();
        match (&mut self.ctx, t) {
            (Some(c), t) if t != sht::PLAIN => c.protect(&p, t).unwrap(),
            _ => p,
        }
    }
    fn ul(&mut self, b: &[u8]) -> NasMessage {
        match &mut self.ctx {
            Some(c) => {
                let (p, _) = c.unprotect(b).expect("uplink MAC verifies");
                plain_ul(&p)
            }
            None => plain_ul(b),
        }
    }
}

/// Runs a full attach; returns the UE, the network context and the PDN address.
fn attach(sqn: u64) -> (Ue, Net) {
    let mut ue = Ue::new(ue_cfg(0), 5_000_000_000);
    let mut out = vec![];
    ue.handle(UeInput::Attach, 0, &mut out);
    let req = one_uplink(&mut out);
    let NasMessage::Emm(EmmMessage::AttachRequest(ar)) = plain_ul(&req) else {
        panic!()
    };
    assert_eq!(ar.identity, MobileIdentity::Imsi("001010000000001".into()));
    let NasMessage::Esm(pdn) =
        NasMessage::decode_dir(&ar.esm_container, pepc_nas::Direction::Uplink).unwrap()
    else {
        panic!()
    };
    assert!(
        matches!(pdn.body, EsmBody::PdnConnectivityRequest(ref p) if p.esm_information_transfer)
    );

    let mut net = Net { ctx: None };
    let rand = [7u8; 16];
    let av = generate_vector(&mil(), sqn_from_u64(sqn), [0x80, 0], rand, PLMN);
    let m = EmmMessage::AuthenticationRequest(AuthenticationRequest {
        ksi: 1,
        rand,
        autn: av.autn,
    });
    let b = net.dl(m.into(), sht::PLAIN);
    ue.handle(UeInput::Nas(b), 1000, &mut out);
    let NasMessage::Emm(EmmMessage::AuthenticationResponse(r)) = plain_ul(&one_uplink(&mut out))
    else {
        panic!()
    };
    assert_eq!(r.res, av.xres, "RES equals XRES");

    net.ctx = Some(NasSecurityContext::from_kasme(
        Role::Network,
        &av.kasme,
        Eia::Eia2,
        Eea::Eea2,
        1,
    ));
    let smc = EmmMessage::SecurityModeCommand(SecurityModeCommand {
        eea: 2,
        eia: 2,
        ksi: 1,
        replayed_ue_capabilities: vec![0xf0, 0xf0],
        imeisv_request: true,
    });
    let b = net.dl(smc.into(), sht::INTEGRITY_NEW_CONTEXT);
    ue.handle(UeInput::Nas(b), 2000, &mut out);
    let smc_c = one_uplink(&mut out);
    assert_eq!(smc_c[0] >> 4, sht::INTEGRITY_CIPHERED_NEW_CONTEXT);
    let NasMessage::Emm(EmmMessage::SecurityModeComplete(c)) = net.ul(&smc_c) else {
        panic!()
    };
    assert!(matches!(c.imeisv, Some(MobileIdentity::Imeisv(_))));

    let esm_req = EsmMessage {
        ebi: 0,
        pti: pdn.pti,
        body: EsmBody::EsmInformationRequest,
    };
    let b = net.dl(esm_req.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 3000, &mut out);
    let NasMessage::Esm(resp) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!(
        resp.body,
        EsmBody::EsmInformationResponse {
            apn: Some("internet".into()),
            pco: None
        }
    );

    let dbr = EsmMessage {
        ebi: 5,
        pti: pdn.pti,
        body: EsmBody::ActivateDefaultBearerRequest(ActivateDefaultBearerRequest {
            qos: EpsQos { qci: 9, gbr: None },
            apn: "internet".into(),
            pdn_address: PdnAddress::Ipv4(Ipv4Addr::new(10, 45, 0, 2)),
            apn_ambr: None,
            esm_cause: None,
            pco: None,
        }),
    };
    let guti = Guti {
        plmn: Plmn(PLMN),
        mme_group_id: 2,
        mme_code: 1,
        m_tmsi: 0xc000_0001,
    };
    let acc = EmmMessage::AttachAccept(AttachAccept {
        attach_result: 1,
        t3412: 0x21,
        tai_list: vec![pepc_nas::Tai {
            plmn: Plmn(PLMN),
            tac: 1,
        }],
        esm_container: dbr.encode().unwrap(),
        guti: Some(guti),
    });
    let b = net.dl(acc.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 4000, &mut out);
    assert!(out.contains(&UeOutput::Address {
        ebi: 5,
        addr: Ipv4Addr::new(10, 45, 0, 2)
    }));
    assert!(out.iter().any(|o| matches!(
        o,
        UeOutput::Done {
            procedure: Procedure::Attach,
            started_ns: 0,
            result: Ok(())
        }
    )));
    let NasMessage::Emm(EmmMessage::AttachComplete(ac)) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    let NasMessage::Esm(e) =
        NasMessage::decode_dir(&ac.esm_container, pepc_nas::Direction::Uplink).unwrap()
    else {
        panic!()
    };
    assert_eq!((e.ebi, e.body), (5, EsmBody::ActivateDefaultBearerAccept));
    assert!(ue.is_registered());
    assert_eq!(ue.guti(), Some(guti));
    assert_eq!(ue.sqn_ms(), sqn);
    (ue, net)
}

#[test]
fn attach_against_scripted_mme() {
    attach(0x20);
}

#[test]
fn tampered_downlink_fails_integrity() {
    let (mut ue, mut net) = attach(0x20);
    let mut out = vec![];
    let mut b = net.dl(
        EmmMessage::EmmInformation(Default::default()).into(),
        sht::INTEGRITY_CIPHERED,
    );
    ue.handle(
        UeInput::Tau {
            periodic: false,
            active: false,
        },
        10,
        &mut out,
    );
    out.clear();
    let last = b.len() - 1;
    b[last] ^= 1;
    ue.handle(UeInput::Nas(b), 20, &mut out);
    assert!(out.iter().any(|o| matches!(
        o,
        UeOutput::Done {
            procedure: Procedure::Tau,
            result: Err(Failure::Integrity),
            ..
        }
    )));
}

#[test]
fn idle_service_request_tau_and_detach() {
    let (mut ue, mut net) = attach(0x20);
    let mut out = vec![];
    ue.handle(UeInput::Released, 10, &mut out);
    assert!(!ue.is_connected());
    // Service Request: 4 octets, short MAC verifies at the network.
    ue.handle(UeInput::ServiceRequest, 20, &mut out);
    let sr = out
        .iter()
        .find_map(|o| match o {
            UeOutput::Uplink {
                nas,
                s_tmsi,
                rrc_cause,
            } => Some((nas.clone(), *s_tmsi, *rrc_cause)),
            _ => None,
        })
        .unwrap();
    out.clear();
    assert_eq!(sr.0.len(), 4);
    assert_eq!(sr.1, Some((1, 0xc000_0001)));
    assert_eq!(sr.2, rrc_cause::MO_DATA);
    net.ctx
        .as_mut()
        .unwrap()
        .verify_service_request(&sr.0)
        .expect("short MAC verifies");
    ue.handle(UeInput::ContextSetup, 1020, &mut out);
    assert!(out.contains(&UeOutput::Done {
        procedure: Procedure::ServiceRequest,
        started_ns: 20,
        result: Ok(())
    }));
    out.clear();

    // TAU (connected) with a new GUTI: TAU Complete follows.
    ue.handle(
        UeInput::Tau {
            periodic: false,
            active: false,
        },
        2000,
        &mut out,
    );
    let NasMessage::Emm(EmmMessage::TauRequest(t)) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!(t.eps_bearer_context_status, Some(1 << 5));
    let g2 = Guti {
        plmn: Plmn(PLMN),
        mme_group_id: 2,
        mme_code: 1,
        m_tmsi: 0xc000_0002,
    };
    let acc = EmmMessage::TauAccept(TauAccept {
        update_result: 0,
        t3412: None,
        guti: Some(g2),
        tai_list: None,
        eps_bearer_context_status: Some(1 << 5),
    });
    let b = net.dl(acc.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 3000, &mut out);
    assert!(matches!(
        net.ul(&uplinks(&out)[0]),
        NasMessage::Emm(EmmMessage::TauComplete)
    ));
    assert!(out.iter().any(|o| matches!(
        o,
        UeOutput::Done {
            procedure: Procedure::Tau,
            result: Ok(()),
            ..
        }
    )));
    assert_eq!(ue.guti(), Some(g2));
    out.clear();

    // Detach (normal): Detach Accept ends it.
    ue.handle(UeInput::Detach { switch_off: false }, 4000, &mut out);
    let NasMessage::Emm(EmmMessage::DetachRequestUe(d)) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert!(!d.switch_off);
    assert_eq!(d.identity, MobileIdentity::Guti(g2));
    let b = net.dl(EmmMessage::DetachAccept.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 5000, &mut out);
    assert!(out.contains(&UeOutput::Done {
        procedure: Procedure::Detach,
        started_ns: 4000,
        result: Ok(())
    }));
    assert_eq!(ue.state(), EmmState::Deregistered);
}

#[test]
fn dedicated_bearer_accept() {
    let (mut ue, mut net) = attach(0x20);
    let mut out = vec![];
    let m = EsmMessage {
        ebi: 6,
        pti: 0,
        body: EsmBody::ActivateDedicatedBearerRequest(ActivateDedicatedBearerRequest {
            linked_ebi: 5,
            qos: EpsQos {
                qci: 1,
                gbr: Some((64, 64, 64, 64)),
            },
            tft: vec![0x21, 0x10, 0x00, 0x01, 0x30, 0x11],
        }),
    };
    let b = net.dl(m.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 10, &mut out);
    let NasMessage::Esm(a) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!((a.ebi, a.body), (6, EsmBody::ActivateDedicatedBearerAccept));
    assert!(ue.bearers().contains(&(6, false)));
}

#[test]
fn sqn_resync_then_success() {
    let mut ue = Ue::new(ue_cfg(1000), 5_000_000_000);
    let mut out = vec![];
    ue.handle(UeInput::Attach, 0, &mut out);
    out.clear();
    let rand = [3u8; 16];
    let stale = generate_vector(&mil(), sqn_from_u64(5), [0x80, 0], rand, PLMN);
    let m: NasMessage = EmmMessage::AuthenticationRequest(AuthenticationRequest {
        ksi: 0,
        rand,
        autn: stale.autn,
    })
    .into();
    ue.handle(UeInput::Nas(m.encode().unwrap()), 10, &mut out);
    let NasMessage::Emm(EmmMessage::AuthenticationFailure(f)) = plain_ul(&one_uplink(&mut out))
    else {
        panic!()
    };
    assert_eq!(f.emm_cause, emm_cause::SYNCH_FAILURE);
    let sqn_ms = resync_sqn(&mil(), rand, f.auts.unwrap()).expect("AUTS verifies at the HSS");
    assert_eq!(sqn_ms, sqn_from_u64(1000));
    assert!(ue.busy(), "the attach goes on after a synch failure");
    let rand2 = [4u8; 16];
    let fresh = generate_vector(&mil(), sqn_from_u64(1001 + 32), [0x80, 0], rand2, PLMN);
    let m: NasMessage = EmmMessage::AuthenticationRequest(AuthenticationRequest {
        ksi: 0,
        rand: rand2,
        autn: fresh.autn,
    })
    .into();
    ue.handle(UeInput::Nas(m.encode().unwrap()), 20, &mut out);
    let NasMessage::Emm(EmmMessage::AuthenticationResponse(r)) = plain_ul(&one_uplink(&mut out))
    else {
        panic!()
    };
    assert_eq!(r.res, fresh.xres);
}

#[test]
fn mac_failure_answers_cause_20() {
    let mut ue = Ue::new(ue_cfg(0), 5_000_000_000);
    let mut out = vec![];
    ue.handle(UeInput::Attach, 0, &mut out);
    out.clear();
    let other = Milenage::new_with_opc(&Key128::new([1; 16]), [2; 16]);
    let av = generate_vector(&other, sqn_from_u64(40), [0x80, 0], [9; 16], PLMN);
    let m: NasMessage = EmmMessage::AuthenticationRequest(AuthenticationRequest {
        ksi: 0,
        rand: [9; 16],
        autn: av.autn,
    })
    .into();
    ue.handle(UeInput::Nas(m.encode().unwrap()), 10, &mut out);
    let NasMessage::Emm(EmmMessage::AuthenticationFailure(f)) = plain_ul(&uplinks(&out)[0]) else {
        panic!()
    };
    assert_eq!((f.emm_cause, f.auts), (emm_cause::MAC_FAILURE, None));
    assert!(out.contains(&UeOutput::Done {
        procedure: Procedure::Attach,
        started_ns: 0,
        result: Err(Failure::AuthFailed(20))
    }));
}

#[test]
fn timeout_fails_procedure() {
    let mut ue = Ue::new(ue_cfg(0), 1000);
    let mut out = vec![];
    ue.handle(UeInput::Attach, 0, &mut out);
    out.clear();
    ue.handle_timeout(500, &mut out);
    assert!(out.is_empty());
    ue.handle_timeout(1001, &mut out);
    assert_eq!(
        out,
        vec![UeOutput::Done {
            procedure: Procedure::Attach,
            started_ns: 0,
            result: Err(Failure::Timeout)
        }]
    );
    assert_eq!(ue.state(), EmmState::Deregistered);
}

// ------------------------------------------------------------------ eNB

fn plmn() -> Plmn {
    Plmn(PLMN)
}

fn enb(i: u32) -> Enb {
    Enb::new(EnbConfig {
        index: i,
        global_enb_id: GlobalEnbId {
            plmn: plmn(),
            enb_id: EnbId::Macro(0x100 + i),
        },
        plmn: plmn(),
        tac: 1,
        cell_id: (0x100 + i) << 8,
        gtpu_addr: Ipv4Addr::new(127, 0, 0, 2),
        name: format!("enb{i}"),
        out_streams: 2,
    })
}

fn s1(out: &[EnbOutput]) -> Vec<S1apMessage> {
    out.iter()
        .filter_map(|o| match o {
            EnbOutput::S1ap { pdu, .. } => Some(S1apMessage::decode(pdu).unwrap()),
            _ => None,
        })
        .collect()
}

fn feed(e: &mut Enb, m: impl Into<S1apMessage>) -> Vec<EnbOutput> {
    let mut out = vec![];
    e.handle(EnbInput::S1ap(m.into().encode().unwrap()), &mut out);
    out
}

const SGW: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);

/// Brings UE 7 to connected with one E-RAB at eNB `e` (MME UE ID 100).
fn connect(e: &mut Enb) -> u32 {
    let mut out = vec![];
    e.s1_setup(&mut out);
    assert!(matches!(&s1(&out)[0], S1apMessage::S1SetupRequest(r) if r.supported_tas[0].tac == 1));
    let o = feed(
        e,
        S1SetupResponse {
            mme_name: None,
            served_gummeis: vec![ServedGummei {
                plmns: vec![plmn()],
                group_ids: vec![2],
                codes: vec![1],
            }],
            relative_capacity: 255,
        },
    );
    assert!(
        o.contains(&EnbOutput::SetupDone {
            ok: true,
            cause: None
        }) && e.is_setup()
    );
    out.clear();
    e.handle(
        EnbInput::UplinkNas {
            ue: 7,
            nas: vec![0x07, 0x41],
            s_tmsi: None,
            rrc_cause: 3,
        },
        &mut out,
    );
    let S1apMessage::InitialUeMessage(im) = &s1(&out)[0] else {
        panic!()
    };
    assert_eq!(im.nas_pdu, vec![0x07, 0x41]);
    let enb_ue_id = im.enb_ue_id;
    let o = feed(
        e,
        DownlinkNasTransport {
            mme_ue_id: 100,
            enb_ue_id,
            nas_pdu: vec![0x07, 0x52],
        },
    );
    assert_eq!(
        o,
        vec![EnbOutput::Nas {
            ue: 7,
            nas: vec![0x07, 0x52]
        }]
    );
    let o = feed(
        e,
        InitialContextSetupRequest {
            mme_ue_id: 100,
            enb_ue_id,
            ue_ambr: Ambr { dl: 1, ul: 1 },
            erabs: vec![ERab {
                id: 5,
                qci: 9,
                arp: Arp::default(),
                gbr: None,
                transport: SGW,
                teid: 0x1234,
                nas_pdu: Some(vec![0x27, 1]),
            }],
            ue_security_capabilities: UeSecurityCapabilities {
                eea: 0xe000,
                eia: 0xe000,
            },
            security_key: Key256([1; 32]),
        },
    );
    let S1apMessage::InitialContextSetupResponse(r) = &s1(&o)[0] else {
        panic!()
    };
    let tun = o.iter().find_map(|x| match x {
        EnbOutput::TunnelUp { ue: 7, bearer } => Some(*bearer),
        _ => None,
    });
    let b = tun.unwrap();
    assert_eq!((b.ul_addr, b.ul_teid), (SGW, 0x1234));
    assert_eq!(
        r.erabs,
        vec![ERabTunnel {
            id: 5,
            transport: Ipv4Addr::new(127, 0, 0, 2),
            teid: b.dl_teid
        }]
    );
    assert!(o.contains(&EnbOutput::Nas {
        ue: 7,
        nas: vec![0x27, 1]
    }));
    assert!(o.contains(&EnbOutput::ContextSetup { ue: 7 }));
    enb_ue_id
}

#[test]
fn enb_attach_release_and_paging() {
    let mut e = enb(0);
    let id = connect(&mut e);
    // Uplink NAS now goes as Uplink NAS Transport.
    let mut out = vec![];
    e.handle(
        EnbInput::UplinkNas {
            ue: 7,
            nas: vec![1],
            s_tmsi: None,
            rrc_cause: 3,
        },
        &mut out,
    );
    assert!(
        matches!(&s1(&out)[0], S1apMessage::UplinkNasTransport(u) if u.mme_ue_id == 100 && u.enb_ue_id == id)
    );
    out.clear();
    e.handle(EnbInput::ReleaseRequest { ue: 7 }, &mut out);
    assert!(
        matches!(&s1(&out)[0], S1apMessage::UeContextReleaseRequest(r) if r.cause == Cause::USER_INACTIVITY)
    );
    let o = feed(
        &mut e,
        UeContextReleaseCommand {
            ids: UeS1apIds::Pair {
                mme_ue_id: 100,
                enb_ue_id: id,
            },
            cause: Cause::USER_INACTIVITY,
        },
    );
    assert!(matches!(&s1(&o)[0], S1apMessage::UeContextReleaseComplete(c) if c.enb_ue_id == id));
    assert!(o.contains(&EnbOutput::Released {
        ue: 7,
        cause: Cause::USER_INACTIVITY
    }));
    assert!(!e.has_ue(7));
    let p = PagingIdentity::STmsi(STmsi { mmec: 1, m_tmsi: 9 });
    let o = feed(
        &mut e,
        Paging {
            ue_identity_index: 1,
            paging_id: p.clone(),
            cn_domain: CnDomain::Ps,
            tai_list: vec![pepc_s1ap::Tai {
                plmn: plmn(),
                tac: 1,
            }],
        },
    );
    assert_eq!(o, vec![EnbOutput::Paging(p)]);
    // A message for a UE we do not know: Error Indication back.
    let o = feed(
        &mut e,
        DownlinkNasTransport {
            mme_ue_id: 1,
            enb_ue_id: 999,
            nas_pdu: vec![1],
        },
    );
    assert!(matches!(&s1(&o)[0], S1apMessage::ErrorIndication(_)));
}

#[test]
fn enb_erab_setup_modify_release() {
    let mut e = enb(0);
    let id = connect(&mut e);
    let erab = ERab {
        id: 6,
        qci: 1,
        arp: Arp::default(),
        gbr: None,
        transport: SGW,
        teid: 0x99,
        nas_pdu: Some(vec![0x27, 2]),
    };
    let o = feed(
        &mut e,
        ERabSetupRequest {
            mme_ue_id: 100,
            enb_ue_id: id,
            ue_ambr: None,
            erabs: vec![erab],
        },
    );
    let S1apMessage::ERabSetupResponse(r) = &s1(&o)[0] else {
        panic!()
    };
    assert_eq!(r.setup.len(), 1);
    assert_eq!(e.bearers(7).len(), 2);
    let o = feed(
        &mut e,
        ERabModifyRequest {
            mme_ue_id: 100,
            enb_ue_id: id,
            ue_ambr: None,
            erabs: vec![ERabModify {
                id: 6,
                qci: 2,
                arp: Arp::default(),
                gbr: None,
                nas_pdu: vec![0x27, 3],
            }],
        },
    );
    assert!(matches!(&s1(&o)[0], S1apMessage::ERabModifyResponse(m) if m.modified == vec![6]));
    let o = feed(
        &mut e,
        ERabReleaseCommand {
            mme_ue_id: 100,
            enb_ue_id: id,
            ue_ambr: None,
            erabs: vec![ERabCause {
                id: 6,
                cause: Cause::NAS_NORMAL_RELEASE,
            }],
            nas_pdu: None,
        },
    );
    assert!(matches!(&s1(&o)[0], S1apMessage::ERabReleaseResponse(m) if m.released == vec![6]));
    assert_eq!(e.bearers(7).len(), 1);
}

#[test]
fn x2_handover_path_switch() {
    let mut a = enb(0);
    let mut b = enb(1);
    connect(&mut a);
    let old = a.bearers(7)[0];
    let ctx = a.x2_take(7).unwrap();
    assert!(!a.has_ue(7));
    let mut out = vec![];
    b.handle(EnbInput::X2HandoverIn(ctx), &mut out);
    let S1apMessage::PathSwitchRequest(p) = &s1(&out)[0] else {
        panic!()
    };
    assert_eq!(p.source_mme_ue_id, 100);
    let new = b.bearers(7)[0];
    assert_ne!(new.dl_teid, old.dl_teid, "target allocates its own TEIDs");
    assert_eq!(
        p.erabs,
        vec![ERabTunnel {
            id: 5,
            transport: Ipv4Addr::new(127, 0, 0, 2),
            teid: new.dl_teid
        }]
    );
    let o = feed(
        &mut b,
        PathSwitchRequestAcknowledge {
            mme_ue_id: 100,
            enb_ue_id: p.enb_ue_id,
            ue_ambr: None,
            erabs_switched_ul: vec![ERabTunnel {
                id: 5,
                transport: SGW,
                teid: 0x5678,
            }],
            erabs_to_release: vec![],
            security_context: SecurityContext {
                ncc: 2,
                next_hop: Key256([3; 32]),
            },
        },
    );
    assert!(o.contains(&EnbOutput::PathSwitched {
        ue: 7,
        ok: true,
        ncc: Some(2)
    }));
    assert_eq!(b.bearers(7)[0].ul_teid, 0x5678);
}

#[test]
fn s1_handover_sequence() {
    let mut a = enb(0);
    let mut b = enb(1);
    let src_id = connect(&mut a);
    let mut out = vec![];
    b.handle(
        EnbInput::ExpectHandover {
            ue: 7,
            mme_ue_id: 100,
        },
        &mut out,
    );
    let tgt = b.config().clone();
    a.handle(
        EnbInput::StartS1Handover {
            ue: 7,
            target: tgt.global_enb_id,
            target_tai: tgt.tai(),
        },
        &mut out,
    );
    let S1apMessage::HandoverRequired(hr) = &s1(&out)[0] else {
        panic!()
    };
    assert_eq!(
        hr.target,
        TargetId::Enb {
            global_enb_id: tgt.global_enb_id,
            tai: tgt.tai()
        }
    );
    // MME -> target: Handover Request.
    let o = feed(
        &mut b,
        HandoverRequest {
            mme_ue_id: 100,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            ue_ambr: Ambr { dl: 1, ul: 1 },
            erabs: vec![ERab {
                id: 5,
                qci: 9,
                arp: Arp::default(),
                gbr: None,
                transport: SGW,
                teid: 0x1234,
                nas_pdu: None,
            }],
            container: hr.container.clone(),
            ue_security_capabilities: UeSecurityCapabilities {
                eea: 0xe000,
                eia: 0xe000,
            },
            security_context: SecurityContext {
                ncc: 1,
                next_hop: Key256([4; 32]),
            },
        },
    );
    let S1apMessage::HandoverRequestAcknowledge(ack) = &s1(&o)[0] else {
        panic!()
    };
    assert_eq!(ack.admitted.len(), 1);
    assert_eq!(ack.admitted[0].teid, b.bearers(7)[0].dl_teid);
    assert!(o.contains(&EnbOutput::HandoverPrepared { ue: 7 }));
    // MME -> source: Handover Command; source sends eNB Status Transfer.
    let o = feed(
        &mut a,
        HandoverCommand {
            mme_ue_id: 100,
            enb_ue_id: src_id,
            handover_type: 0,
            erabs_forwarding: vec![],
            erabs_to_release: vec![],
            container: vec![0; 4],
        },
    );
    assert!(matches!(&s1(&o)[0], S1apMessage::EnbStatusTransfer(s) if s.enb_ue_id == src_id));
    assert!(o.contains(&EnbOutput::HandoverCommand { ue: 7 }));
    // UE arrives at target: Handover Notify.
    let mut out = vec![];
    b.handle(EnbInput::UeArrived { ue: 7 }, &mut out);
    assert!(
        matches!(&s1(&out)[0], S1apMessage::HandoverNotify(n) if n.mme_ue_id == 100 && n.enb_ue_id == ack.enb_ue_id)
    );
    // MME releases the source.
    let o = feed(
        &mut a,
        UeContextReleaseCommand {
            ids: UeS1apIds::Pair {
                mme_ue_id: 100,
                enb_ue_id: src_id,
            },
            cause: Cause::SUCCESSFUL_HANDOVER,
        },
    );
    assert!(o.contains(&EnbOutput::Released {
        ue: 7,
        cause: Cause::SUCCESSFUL_HANDOVER
    }));
    assert!(b.has_ue(7) && !a.has_ue(7));
}

#[test]
fn scenario_toml_and_report() {
    let s = Scenario::from_toml(
        "ues = 500\nattach_rate = 50.0\nduration_s = 3\nevent_rate = 20\n[traffic]\nprofile = \"table_iv\"\nrate_pps = 2000\n[mix]\ntau = 1.0\n",
    )
    .unwrap();
    assert_eq!(s.ues, 500);
    assert_eq!(s.traffic.profile, TrafficProfile::TableIv);
    assert_eq!(s.mix.tau, 1.0);
    assert!(s.detach_at_end, "defaults fill absent keys");
    assert!(Scenario::from_toml("ues = \"x\"").is_err());

    let mut m = pepc_emulator::report::Metrics::default();
    for i in 1..=100 {
        m.record(Procedure::Attach, i, &Ok(()));
    }
    m.record(Procedure::Attach, 0, &Err(Failure::Timeout));
    m.ul_sent = 10;
    m.ul_packets = 8;
    let r: Report = m.report(101, 100, 1, 1.0);
    let a = &r.procedures["attach"];
    assert_eq!((a.ok, a.failed, a.p50_us, a.p99_us), (100, 1, 50, 99));
    assert_eq!(r.lost, 2);
    let j: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    for k in [
        "ues",
        "attached",
        "failed",
        "ul_packets",
        "dl_packets",
        "lost",
    ] {
        assert!(j.get(k).is_some(), "{k}");
    }
    assert_eq!(j["procedures"]["attach"]["p99_us"], 99);
    assert!(r.to_table().contains("attach"));
    assert_eq!(r.failures["attach: timeout"], 1);
}

fn ul_raw(net: &mut Net, b: &[u8]) -> Vec<u8> {
    net.ctx
        .as_mut()
        .unwrap()
        .unprotect(b)
        .expect("uplink MAC verifies")
        .0
}

fn done(out: &[UeOutput], p: Procedure) -> Option<Result<(), Failure>> {
    out.iter().find_map(|o| match o {
        UeOutput::Done {
            procedure, result, ..
        } if *procedure == p => Some(result.clone()),
        _ => None,
    })
}

fn dedicated_request(pti: u8, ebi: u8, linked: u8) -> NasMessage {
    EsmMessage {
        ebi,
        pti,
        body: EsmBody::ActivateDedicatedBearerRequest(ActivateDedicatedBearerRequest {
            linked_ebi: linked,
            qos: EpsQos {
                qci: 1,
                gbr: Some((64, 64, 64, 64)),
            },
            tft: vec![0x21, 0x31, 0x10, 0x05, 0x30, 0x11, 0x40, 0x13, 0x8a],
        }),
    }
    .into()
}

#[test]
fn ue_requested_bearer_resource_allocation_and_release() {
    let (mut ue, mut net) = attach(0x20);
    let mut out = vec![];
    // TS 24.301 6.5.3.2: EBI 0, a fresh PTI, linked EBI, TFA "create new TFT", QoS.
    ue.handle(
        UeInput::BearerResourceAllocation { linked_ebi: 5 },
        10,
        &mut out,
    );
    let req = ul_raw(&mut net, &one_uplink(&mut out));
    assert_eq!(req[0], 0x02, "EBI 0, PD ESM");
    let pti = req[1];
    assert_ne!(pti, 0);
    assert_eq!(req[2], 0xd4, "Bearer Resource Allocation Request");
    assert_eq!(req[3] & 0x0f, 5, "linked EBI");
    let tfa_len = req[4] as usize;
    let tfa = &req[5..5 + tfa_len];
    assert_eq!(tfa[0] >> 5, 1, "create new TFT");
    assert_eq!(tfa[0] & 0x0f, 1, "one packet filter");
    assert_eq!(tfa[3] as usize, tfa.len() - 4, "filter contents length");
    let qos_len = req[5 + tfa_len] as usize;
    assert_eq!(req.len(), 6 + tfa_len + qos_len, "no trailing octets");
    assert_eq!(req[6 + tfa_len], 1, "QCI 1");
    assert!(ue.busy());

    // An answer with another PTI is not ours.
    let b = net.dl(
        dedicated_request(pti.wrapping_add(1), 6, 5),
        sht::INTEGRITY_CIPHERED,
    );
    ue.handle(UeInput::Nas(b), 20, &mut out);
    assert_eq!(done(&out, Procedure::DedicatedBearer), None);
    let NasMessage::Esm(r) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!(
        r.body,
        EsmBody::ActivateDedicatedBearerReject { esm_cause: 81 },
        "TS 24.301 7.3.1: PTI not in use"
    );
    assert!(ue.dedicated().is_empty() && ue.busy());
    // Our PTI: accepted, procedure done, bearer linked to 5.
    let b = net.dl(dedicated_request(pti, 7, 5), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 30, &mut out);
    assert_eq!(done(&out, Procedure::DedicatedBearer), Some(Ok(())));
    let NasMessage::Esm(a) = net.ul(&uplinks(&out)[0]) else {
        panic!()
    };
    assert_eq!(
        (a.ebi, a.pti, a.body),
        (7, pti, EsmBody::ActivateDedicatedBearerAccept)
    );
    assert!(ue.dedicated().contains(&(7, 5)));
    assert!(!ue.busy());
    out.clear();

    // Release: Bearer Resource Modification Request, "delete existing TFT", #36.
    ue.handle(UeInput::BearerResourceRelease { ebi: 7 }, 40, &mut out);
    let req = ul_raw(&mut net, &one_uplink(&mut out));
    let pti2 = req[1];
    assert_ne!(pti2, pti);
    assert_eq!(&req[2..], &[0xd6, 7, 1, 0x40, 0x58, 36]);
    let m = EsmMessage {
        ebi: 7,
        pti: pti2,
        body: EsmBody::DeactivateBearerRequest { esm_cause: 36 },
    };
    let b = net.dl(m.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 50, &mut out);
    assert_eq!(done(&out, Procedure::BearerDeactivate), Some(Ok(())));
    assert!(out.contains(&UeOutput::BearerDown { ebi: 7 }));
    assert!(ue.dedicated().is_empty());
    assert_eq!(ue.bearers(), &[(5, true)]);
}

#[test]
fn bearer_resource_allocation_reject_fails_with_its_cause() {
    let (mut ue, mut net) = attach(0x20);
    let mut out = vec![];
    ue.handle(
        UeInput::BearerResourceAllocation { linked_ebi: 5 },
        10,
        &mut out,
    );
    let pti = ul_raw(&mut net, &one_uplink(&mut out))[1];
    let protect = |net: &mut Net, plain: &[u8]| {
        net.ctx
            .as_mut()
            .unwrap()
            .protect(plain, sht::INTEGRITY_CIPHERED)
            .unwrap()
    };
    // A reject for another PTI is ignored; ours ends the procedure with its cause.
    let b = protect(&mut net, &[0x02, pti ^ 0x80, 0xd5, 30]);
    ue.handle(UeInput::Nas(b), 20, &mut out);
    assert!(out.is_empty() && ue.busy());
    let b = protect(&mut net, &[0x02, pti, 0xd5, 30]);
    ue.handle(UeInput::Nas(b), 30, &mut out);
    assert_eq!(
        done(&out, Procedure::DedicatedBearer),
        Some(Err(Failure::Esm(30)))
    );
    // A plain reject once a context exists fails integrity instead.
    out.clear();
    ue.handle(
        UeInput::BearerResourceAllocation { linked_ebi: 5 },
        40,
        &mut out,
    );
    let pti = ul_raw(&mut net, &one_uplink(&mut out))[1];
    ue.handle(UeInput::Nas(vec![0x02, pti, 0xd5, 30]), 50, &mut out);
    assert_eq!(
        done(&out, Procedure::DedicatedBearer),
        Some(Err(Failure::Integrity))
    );
    // A dedicated bearer linked to no PDN of ours is refused with #43.
    out.clear();
    let b = net.dl(dedicated_request(0, 6, 9), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 60, &mut out);
    let NasMessage::Esm(r) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!(
        r.body,
        EsmBody::ActivateDedicatedBearerReject { esm_cause: 43 }
    );
    assert!(ue.dedicated().is_empty());
}

#[test]
fn second_pdn_connection_and_disconnect_take_linked_bearers() {
    let (mut ue, mut net) = attach(0x20);
    let mut out = vec![];
    ue.handle(UeInput::PdnConnect { apn: "ims".into() }, 10, &mut out);
    let NasMessage::Esm(req) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!(req.ebi, 0);
    let EsmBody::PdnConnectivityRequest(p) = &req.body else {
        panic!("{req:?}")
    };
    assert_eq!(
        (p.request_type, p.pdn_type),
        (1, 1),
        "initial request, IPv4"
    );
    assert_eq!(p.apn.as_deref(), Some("ims"));
    let dbr = EsmMessage {
        ebi: 6,
        pti: req.pti,
        body: EsmBody::ActivateDefaultBearerRequest(ActivateDefaultBearerRequest {
            qos: EpsQos { qci: 5, gbr: None },
            apn: "ims".into(),
            pdn_address: PdnAddress::Ipv4(Ipv4Addr::new(10, 46, 0, 2)),
            apn_ambr: None,
            esm_cause: None,
            pco: None,
        }),
    };
    let b = net.dl(dbr.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 20, &mut out);
    assert_eq!(done(&out, Procedure::PdnConnect), Some(Ok(())));
    let NasMessage::Esm(acc) = net.ul(&uplinks(&out)[0]) else {
        panic!()
    };
    assert_eq!((acc.ebi, acc.pti), (6, req.pti));
    assert_eq!(acc.body, EsmBody::ActivateDefaultBearerAccept);
    assert_eq!(
        ue.pdns(),
        &[
            (5, Ipv4Addr::new(10, 45, 0, 2)),
            (6, Ipv4Addr::new(10, 46, 0, 2))
        ]
    );
    // The first PDN's address stays the UE's main one.
    assert_eq!(ue.address(), Some(Ipv4Addr::new(10, 45, 0, 2)));
    out.clear();
    // A network-initiated dedicated bearer on the second PDN.
    let b = net.dl(dedicated_request(0, 7, 6), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 30, &mut out);
    assert!(ue.dedicated().contains(&(7, 6)));
    out.clear();
    // The attach PDN cannot be disconnected (it is the last one after this).
    ue.handle(UeInput::PdnDisconnect { ebi: 9 }, 40, &mut out);
    assert!(out.is_empty(), "unknown PDN: nothing sent");
    ue.handle(UeInput::PdnDisconnect { ebi: 6 }, 40, &mut out);
    let NasMessage::Esm(d) = net.ul(&one_uplink(&mut out)) else {
        panic!()
    };
    assert_eq!(d.body, EsmBody::PdnDisconnectRequest { linked_ebi: 6 });
    let m = EsmMessage {
        ebi: 6,
        pti: d.pti,
        body: EsmBody::DeactivateBearerRequest { esm_cause: 36 },
    };
    let b = net.dl(m.into(), sht::INTEGRITY_CIPHERED);
    ue.handle(UeInput::Nas(b), 50, &mut out);
    assert_eq!(done(&out, Procedure::PdnDisconnect), Some(Ok(())));
    // TS 24.301 6.4.4.3: the dedicated bearer linked to the default one goes too.
    assert!(out.contains(&UeOutput::BearerDown { ebi: 6 }));
    assert!(out.contains(&UeOutput::BearerDown { ebi: 7 }));
    assert_eq!(ue.pdns(), &[(5, Ipv4Addr::new(10, 45, 0, 2))]);
    assert_eq!(ue.bearers(), &[(5, true)]);
    // Now only one PDN is left: a disconnect of it is not even attempted.
    out.clear();
    ue.handle(UeInput::PdnDisconnect { ebi: 5 }, 60, &mut out);
    assert!(out.is_empty());
}

#[test]
fn plain_identity_request_after_context_loss_is_answered_in_plain() {
    let (mut ue, _net) = attach(0x20);
    let mut out = vec![];
    // Re-attach (the MME forgot us at a switch-off detach): it asks for the IMSI in
    // plain; the answer must be readable without our old context.
    ue.handle(UeInput::Detach { switch_off: true }, 10, &mut out);
    ue.handle(UeInput::Released, 11, &mut out);
    out.clear();
    ue.handle(UeInput::Attach, 20, &mut out);
    let req = one_uplink(&mut out);
    assert_eq!(
        req[0] >> 4,
        sht::INTEGRITY,
        "GUTI attach is integrity protected"
    );
    let m = EmmMessage::IdentityRequest(IdentityRequest { identity_type: 1 });
    ue.handle(UeInput::Nas(m.encode().unwrap()), 30, &mut out);
    let resp = one_uplink(&mut out);
    assert_eq!(resp[0] >> 4, sht::PLAIN);
    let NasMessage::Emm(EmmMessage::IdentityResponse(r)) = plain_ul(&resp) else {
        panic!()
    };
    assert_eq!(r.identity, MobileIdentity::Imsi("001010000000001".into()));
}

#[test]
fn scenario_files_parse_and_unknown_keys_are_named() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let s = Scenario::from_toml(&std::fs::read_to_string(&p).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(s.ues > 0);
            n += 1;
        }
    }
    assert!(n >= 4, "scenario examples present");
    let e = Scenario::from_toml("ues = 3\n[mix]\nhandover = 1.0\n").unwrap_err();
    assert!(e.to_string().contains("handover"), "{e}");
    let e = Scenario::from_toml("iot_share = 1.5\n").unwrap_err();
    assert!(e.to_string().contains("iot_share"), "{e}");
}
