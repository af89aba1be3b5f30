//! Every typed message builds, encodes, decodes back to an equal value, and is
//! recognised by `S1apMessage::decode`; garbage and truncations never panic.

use pepc_s1ap::msg::*;
use pepc_s1ap::*;
use std::net::Ipv4Addr;

fn plmn() -> Plmn {
    Plmn::from_mcc_mnc("001", "01").unwrap()
}
fn tai() -> Tai {
    Tai {
        plmn: plmn(),
        tac: 1,
    }
}
fn ecgi() -> Ecgi {
    Ecgi {
        plmn: plmn(),
        cell_id: 0x0001_9b01,
    }
}
fn erab(nas: bool) -> ERab {
    ERab {
        id: 5,
        qci: 9,
        arp: Arp {
            priority_level: 8,
            pre_emption_capability: false,
            pre_emption_vulnerability: true,
        },
        gbr: None,
        transport: Ipv4Addr::new(127, 0, 0, 2),
        teid: 0x0102_0304,
        nas_pdu: nas.then(|| vec![0x27, 1, 2, 3]),
    }
}
fn key(b: u8) -> Key256 {
    Key256([b; 32])
}
fn caps() -> UeSecurityCapabilities {
    UeSecurityCapabilities {
        eea: 0xe000,
        eia: 0xe000,
    }
}

pub fn all_messages() -> Vec<S1apMessage> {
    let gbr = GbrQos {
        mbr_dl: 1_000_000,
        mbr_ul: 500_000,
        gbr_dl: 128_000,
        gbr_ul: 64_000,
    };
    let conn = UeConnection {
        mme_ue_id: Some(1),
        enb_ue_id: Some(2),
    };
    vec![
        S1SetupRequest {
            global_enb_id: GlobalEnbId {
                plmn: plmn(),
                enb_id: EnbId::Macro(0x19b),
            },
            enb_name: Some("enb-1".into()),
            supported_tas: vec![SupportedTa {
                tac: 1,
                plmns: vec![plmn()],
            }],
            paging_drx: Some(128),
        }
        .into(),
        S1SetupResponse {
            mme_name: Some("pepc".into()),
            served_gummeis: vec![ServedGummei {
                plmns: vec![plmn()],
                group_ids: vec![2],
                codes: vec![1],
            }],
            relative_capacity: 255,
        }
        .into(),
        S1SetupFailure {
            cause: Cause::UNKNOWN_PLMN,
            time_to_wait: Some(3),
        }
        .into(),
        InitialUeMessage {
            enb_ue_id: 7,
            nas_pdu: vec![0x07, 0x41, 0x71],
            tai: tai(),
            ecgi: ecgi(),
            rrc_cause: 3,
            s_tmsi: Some(STmsi {
                mmec: 1,
                m_tmsi: 0xdead_beef,
            }),
            gummei: Some(Gummei {
                plmn: plmn(),
                mme_group_id: 2,
                mme_code: 1,
            }),
        }
        .into(),
        UplinkNasTransport {
            mme_ue_id: 1,
            enb_ue_id: 7,
            nas_pdu: vec![0x07, 0x53],
            ecgi: ecgi(),
            tai: tai(),
        }
        .into(),
        DownlinkNasTransport {
            mme_ue_id: 1,
            enb_ue_id: 7,
            nas_pdu: vec![0x07, 0x52],
        }
        .into(),
        NasNonDeliveryIndication {
            mme_ue_id: 1,
            enb_ue_id: 7,
            nas_pdu: vec![7],
            cause: Cause::RADIO_CONNECTION_WITH_UE_LOST,
        }
        .into(),
        InitialContextSetupRequest {
            mme_ue_id: 1,
            enb_ue_id: 7,
            ue_ambr: Ambr {
                dl: 100_000_000,
                ul: 50_000_000,
            },
            erabs: vec![
                erab(true),
                ERab {
                    id: 6,
                    gbr: Some(gbr),
                    nas_pdu: None,
                    ..erab(false)
                },
            ],
            ue_security_capabilities: caps(),
            security_key: key(0xab),
        }
        .into(),
        InitialContextSetupResponse {
            mme_ue_id: 1,
            enb_ue_id: 7,
            erabs: vec![ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 3),
                teid: 9,
            }],
            failed: vec![ERabCause {
                id: 6,
                cause: Cause::RADIO_UNSPECIFIED,
            }],
        }
        .into(),
        InitialContextSetupFailure {
            mme_ue_id: 1,
            enb_ue_id: 7,
            cause: Cause::TRANSPORT_RESOURCE_UNAVAILABLE,
        }
        .into(),
        UeContextReleaseRequest {
            mme_ue_id: 1,
            enb_ue_id: 7,
            cause: Cause::USER_INACTIVITY,
        }
        .into(),
        UeContextReleaseCommand {
            ids: UeS1apIds::Pair {
                mme_ue_id: 1,
                enb_ue_id: 7,
            },
            cause: Cause::NAS_NORMAL_RELEASE,
        }
        .into(),
        UeContextReleaseCommand {
            ids: UeS1apIds::MmeOnly(1),
            cause: Cause::NAS_DETACH,
        }
        .into(),
        UeContextReleaseComplete {
            mme_ue_id: 1,
            enb_ue_id: 7,
        }
        .into(),
        UeContextModificationRequest {
            mme_ue_id: 1,
            enb_ue_id: 7,
            security_key: Some(key(1)),
            ue_ambr: Some(Ambr { dl: 1, ul: 2 }),
            ue_security_capabilities: Some(caps()),
        }
        .into(),
        UeContextModificationResponse {
            mme_ue_id: 1,
            enb_ue_id: 7,
        }
        .into(),
        UeContextModificationFailure {
            mme_ue_id: 1,
            enb_ue_id: 7,
            cause: Cause::SEMANTIC_ERROR,
        }
        .into(),
        Paging {
            ue_identity_index: 1023,
            paging_id: PagingIdentity::STmsi(STmsi {
                mmec: 1,
                m_tmsi: 42,
            }),
            cn_domain: CnDomain::Ps,
            tai_list: vec![tai(), Tai { tac: 2, ..tai() }],
        }
        .into(),
        ERabSetupRequest {
            mme_ue_id: 1,
            enb_ue_id: 7,
            ue_ambr: None,
            erabs: vec![ERab {
                gbr: Some(gbr),
                ..erab(true)
            }],
        }
        .into(),
        ERabSetupResponse {
            mme_ue_id: 1,
            enb_ue_id: 7,
            setup: vec![ERabTunnel {
                id: 6,
                transport: Ipv4Addr::LOCALHOST,
                teid: 77,
            }],
            failed: vec![],
        }
        .into(),
        ERabModifyRequest {
            mme_ue_id: 1,
            enb_ue_id: 7,
            ue_ambr: Some(Ambr { dl: 5, ul: 6 }),
            erabs: vec![ERabModify {
                id: 6,
                qci: 1,
                arp: Arp::default(),
                gbr: Some(gbr),
                nas_pdu: vec![0x27],
            }],
        }
        .into(),
        ERabModifyResponse {
            mme_ue_id: 1,
            enb_ue_id: 7,
            modified: vec![6],
            failed: vec![ERabCause {
                id: 7,
                cause: Cause::UNKNOWN_E_RAB_ID,
            }],
        }
        .into(),
        ERabReleaseCommand {
            mme_ue_id: 1,
            enb_ue_id: 7,
            ue_ambr: None,
            erabs: vec![ERabCause {
                id: 6,
                cause: Cause::NAS_NORMAL_RELEASE,
            }],
            nas_pdu: Some(vec![0x27]),
        }
        .into(),
        ERabReleaseResponse {
            mme_ue_id: 1,
            enb_ue_id: 7,
            released: vec![6],
            failed: vec![],
        }
        .into(),
        PathSwitchRequest {
            enb_ue_id: 8,
            erabs: vec![ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 4),
                teid: 10,
            }],
            source_mme_ue_id: 1,
            ecgi: ecgi(),
            tai: tai(),
            ue_security_capabilities: caps(),
        }
        .into(),
        PathSwitchRequestAcknowledge {
            mme_ue_id: 1,
            enb_ue_id: 8,
            ue_ambr: None,
            erabs_switched_ul: vec![ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 2),
                teid: 11,
            }],
            erabs_to_release: vec![],
            security_context: SecurityContext {
                ncc: 2,
                next_hop: key(7),
            },
        }
        .into(),
        PathSwitchRequestFailure {
            mme_ue_id: 1,
            enb_ue_id: 8,
            cause: Cause::UNKNOWN_MME_UE_S1AP_ID,
        }
        .into(),
        HandoverRequired {
            mme_ue_id: 1,
            enb_ue_id: 7,
            handover_type: HANDOVER_TYPE_INTRALTE,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            target: TargetId::Enb {
                global_enb_id: GlobalEnbId {
                    plmn: plmn(),
                    enb_id: EnbId::Macro(0x1a),
                },
                tai: tai(),
            },
            container: vec![0x40, 1, 2, 3],
        }
        .into(),
        HandoverCommand {
            mme_ue_id: 1,
            enb_ue_id: 7,
            handover_type: 0,
            erabs_forwarding: vec![ERabForwarding {
                id: 5,
                dl: Some((Ipv4Addr::LOCALHOST, 5)),
                ul: None,
            }],
            erabs_to_release: vec![],
            container: vec![9, 9],
        }
        .into(),
        HandoverPreparationFailure {
            mme_ue_id: 1,
            enb_ue_id: 7,
            cause: Cause::HO_TARGET_NOT_ALLOWED,
        }
        .into(),
        HandoverRequest {
            mme_ue_id: 2,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            ue_ambr: Ambr { dl: 10, ul: 20 },
            erabs: vec![erab(false)],
            container: vec![0x40, 1, 2, 3],
            ue_security_capabilities: caps(),
            security_context: SecurityContext {
                ncc: 1,
                next_hop: key(3),
            },
        }
        .into(),
        HandoverRequestAcknowledge {
            mme_ue_id: 2,
            enb_ue_id: 9,
            admitted: vec![ERabAdmitted {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 5),
                teid: 12,
                dl_forwarding: Some((Ipv4Addr::new(127, 0, 0, 5), 13)),
                ul_forwarding: None,
            }],
            failed: vec![ERabCause {
                id: 6,
                cause: Cause::RADIO_UNSPECIFIED,
            }],
            container: vec![1, 2],
        }
        .into(),
        HandoverFailure {
            mme_ue_id: 2,
            cause: Cause::HO_FAILURE_IN_TARGET,
        }
        .into(),
        HandoverNotify {
            mme_ue_id: 2,
            enb_ue_id: 9,
            ecgi: ecgi(),
            tai: tai(),
        }
        .into(),
        HandoverCancel {
            mme_ue_id: 1,
            enb_ue_id: 7,
            cause: Cause::HANDOVER_CANCELLED,
        }
        .into(),
        HandoverCancelAcknowledge {
            mme_ue_id: 1,
            enb_ue_id: 7,
        }
        .into(),
        // One bearer (E-RAB 5) with 12-bit PDCP SNs: UL COUNT 5/7, DL COUNT 9/11.
        EnbStatusTransfer {
            mme_ue_id: 1,
            enb_ue_id: 7,
            container: status_container(),
        }
        .into(),
        MmeStatusTransfer {
            mme_ue_id: 2,
            enb_ue_id: 9,
            container: status_container(),
        }
        .into(),
        ErrorIndication {
            mme_ue_id: Some(1),
            enb_ue_id: None,
            cause: Some(Cause::TRANSFER_SYNTAX_ERROR),
        }
        .into(),
        ErrorIndication::default().into(),
        Reset {
            cause: Cause::OM_INTERVENTION,
            kind: ResetKind::All,
        }
        .into(),
        Reset {
            cause: Cause::OM_INTERVENTION,
            kind: ResetKind::Partial(vec![conn]),
        }
        .into(),
        ResetAcknowledge {
            connections: vec![conn],
        }
        .into(),
        ResetAcknowledge::default().into(),
    ]
}

/// An ENB-StatusTransfer-TransparentContainer built with the bindings.
fn status_container() -> Vec<u8> {
    use pepc_s1ap::raw::build_s1ap_ie;
    use pepc_s1ap::raw::s1ap as r;
    let count = |pdcp: u16, hfn: u32| r::COUNTvalue::new(r::PDCPSN(pdcp), r::HFN(hfn), None);
    let item = r::BearersSubjectToStatusTransferItem::new(
        r::ERABID(5),
        count(5, 7),
        count(9, 11),
        None,
        None,
    );
    let field = build_s1ap_ie!(IGNORE Bearers_SubjectToStatusTransfer_Item(item)).unwrap();
    let c = r::ENBStatusTransferTransparentContainer::new(
        r::BearersSubjectToStatusTransferList(vec![field]),
        None,
    );
    r::encode_open_type(&c).unwrap().into_vec()
}

#[test]
fn every_message_roundtrips() {
    let msgs = all_messages();
    assert!(msgs.len() >= 40);
    for m in msgs {
        let bytes = m.encode().unwrap_or_else(|e| panic!("{}: {e}", m.name()));
        let back = S1apMessage::decode(&bytes).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
        assert_eq!(m, back, "{}", m.name());
        assert!(!matches!(back, S1apMessage::Other { .. }));
        // The PDU obeys the ASN.1 object sets: no deviation (IE order, criticality, presence).
        let pdu = decode(&bytes).unwrap();
        let dev = pdu.check().unwrap();
        assert!(dev.is_empty(), "{}: {:?}", m.name(), dev);
        assert_eq!(m.procedure_code(), procedure_code(&pdu));
        assert_eq!(m.direction(), direction(&pdu));
        assert!(!procedure_name(&pdu).is_empty());
    }
}

#[test]
fn accessors_and_stream_selection() {
    let m = S1apMessage::from(DownlinkNasTransport {
        mme_ue_id: 3,
        enb_ue_id: 4,
        nas_pdu: vec![7],
    });
    assert_eq!(
        (m.mme_ue_id(), m.enb_ue_id(), m.is_ue_associated()),
        (Some(3), Some(4), true)
    );
    let s = S1apMessage::from(S1SetupFailure {
        cause: Cause::UNKNOWN_PLMN,
        time_to_wait: None,
    });
    assert!(!s.is_ue_associated());
    assert_eq!(s.procedure_code(), proc_code::S1_SETUP);
    let p = S1apMessage::from(Paging {
        ue_identity_index: 1,
        paging_id: PagingIdentity::Imsi(vec![0x00, 0x01, 0x01]),
        cn_domain: CnDomain::Ps,
        tai_list: vec![tai()],
    });
    assert!(!p.is_ue_associated());
    let i = S1apMessage::from(InitialUeMessage {
        enb_ue_id: 9,
        nas_pdu: vec![7],
        tai: tai(),
        ecgi: ecgi(),
        rrc_cause: 3,
        s_tmsi: None,
        gummei: None,
    });
    assert_eq!(
        (i.mme_ue_id(), i.enb_ue_id(), i.is_ue_associated()),
        (None, Some(9), true)
    );
}

#[test]
fn known_encoding_from_the_bindings_readme() {
    // UE CONTEXT RELEASE REQUEST, MME 42 / eNB 7, user-inactivity (oxirush-s1ap README).
    let m = UeContextReleaseRequest {
        mme_ue_id: 42,
        enb_ue_id: 7,
        cause: Cause::USER_INACTIVITY,
    };
    let hex: String = m
        .encode()
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(hex, "0012401500000300000002002a000800020007000240020280");
}

#[test]
fn plmn_tbcd() {
    assert_eq!(
        Plmn::from_mcc_mnc("001", "01").unwrap().0,
        [0x00, 0xf1, 0x10]
    );
    // TS 24.008 §10.5.1.13 (pycrate agrees: 130014).
    assert_eq!(
        Plmn::from_mcc_mnc("310", "410").unwrap().0,
        [0x13, 0x00, 0x14]
    );
    assert_eq!(
        Plmn([0x02, 0xf8, 0x39]).mcc_mnc(),
        Some(("208".into(), "93".into()))
    );
    assert_eq!(
        Plmn::from_mcc_mnc("310", "410").unwrap().mcc_mnc(),
        Some(("310".into(), "410".into()))
    );
    assert!(Plmn::from_mcc_mnc("31", "410").is_err());
    assert!(Plmn::from_mcc_mnc("310", "4").is_err());
}

#[test]
fn errors_name_the_problem() {
    let bytes = DownlinkNasTransport {
        mme_ue_id: 1,
        enb_ue_id: 2,
        nas_pdu: vec![7],
    }
    .encode()
    .unwrap();
    let pdu = decode(&bytes).unwrap();
    match InitialUeMessage::try_from(&pdu) {
        Err(S1apError::WrongMessage { expected, got }) => {
            assert_eq!(expected, "InitialUEMessage");
            assert!(got.to_lowercase().contains("downlinknastransport"), "{got}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        decode(&bytes[..bytes.len() - 2]),
        Err(S1apError::Decode(_))
    ));
    let bad = Ecgi {
        plmn: plmn(),
        cell_id: 1 << 28,
    };
    let e = UplinkNasTransport {
        mme_ue_id: 1,
        enb_ue_id: 2,
        nas_pdu: vec![],
        ecgi: bad,
        tai: tai(),
    }
    .encode();
    assert!(
        matches!(e, Err(S1apError::Invalid(ref s)) if s.contains("28 bits")),
        "{e:?}"
    );
    // Keys never show in Debug.
    let dbg = format!("{:?}", all_messages()[7]);
    assert!(
        dbg.contains("redacted") && !dbg.contains("171, 171"),
        "{dbg}"
    );
}

/// Deterministic xorshift so the test is reproducible without a dependency.
fn rng(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

#[test]
fn garbage_and_truncation_never_panic() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let corpus: Vec<Vec<u8>> = all_messages().iter().map(|m| m.encode().unwrap()).collect();
    let mut decoded_ok = 0;
    for bytes in &corpus {
        for cut in 0..bytes.len() {
            let _ = S1apMessage::decode(&bytes[..cut]);
        }
        for _ in 0..300 {
            let mut b = bytes.clone();
            for _ in 0..1 + rng(&mut seed) % 4 {
                let i = (rng(&mut seed) as usize) % b.len();
                b[i] ^= 1 << (rng(&mut seed) % 8);
            }
            if S1apMessage::decode(&b).is_ok() {
                decoded_ok += 1;
            }
        }
    }
    for len in 0..64 {
        for _ in 0..50 {
            let b: Vec<u8> = (0..len).map(|_| rng(&mut seed) as u8).collect();
            let _ = S1apMessage::decode(&b);
        }
    }
    // Some bit flips land in values (ids, TEIDs) and still decode: the fuzz reached past the envelope.
    assert!(decoded_ok > 0);
}
