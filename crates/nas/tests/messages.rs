//! Every typed NAS message round-trips (and oxirush-nas's own validator finds the
//! octets well formed); security framing round-trips with ciphering, rejects bad MACs
//! and replays, follows COUNT wrap-around; garbage never panics.

use pepc_nas::security::*;
use pepc_nas::*;
use std::net::Ipv4Addr;

const PLMN: Plmn = Plmn([0x00, 0xf1, 0x10]);

fn guti() -> Guti {
    Guti {
        plmn: PLMN,
        mme_group_id: 2,
        mme_code: 1,
        m_tmsi: 0xc000_0001,
    }
}

fn all() -> Vec<(NasMessage, Direction)> {
    use Direction::*;
    use EmmMessage as E;
    let tai = Tai { plmn: PLMN, tac: 1 };
    let cap = UeNetworkCapability {
        eea: 0xe0,
        eia: 0xe0,
        rest: vec![],
    };
    let esm = |ebi, pti, body| NasMessage::Esm(EsmMessage { ebi, pti, body });
    let qos_gbr = EpsQos {
        qci: 1,
        gbr: Some((64, 64, 32, 32)),
    };
    vec![
        (
            E::AttachRequest(AttachRequest {
                attach_type: 1,
                ksi: 7,
                identity: MobileIdentity::Imsi("001010000000001".into()),
                ue_network_capability: cap.clone(),
                esm_container: vec![0x02, 0x01, 0xd0, 0x11],
                last_visited_tai: Some(tai),
            })
            .into(),
            Uplink,
        ),
        (
            E::AttachRequest(AttachRequest {
                attach_type: 1,
                ksi: 0,
                identity: MobileIdentity::Guti(guti()),
                ue_network_capability: cap.clone(),
                esm_container: vec![0x02, 0x01, 0xd0, 0x11],
                last_visited_tai: None,
            })
            .into(),
            Uplink,
        ),
        (
            E::AttachAccept(AttachAccept {
                attach_result: 1,
                t3412: 0x21,
                tai_list: vec![tai, Tai { tac: 2, ..tai }],
                esm_container: vec![0x52, 0x01, 0xc1],
                guti: Some(guti()),
            })
            .into(),
            Downlink,
        ),
        (
            E::AttachComplete(AttachComplete {
                esm_container: vec![0x52, 0x00, 0xc2],
            })
            .into(),
            Uplink,
        ),
        (
            E::AttachReject(AttachReject {
                emm_cause: emm_cause::PLMN_NOT_ALLOWED,
                esm_container: None,
                t3346_s: None,
            })
            .into(),
            Downlink,
        ),
        (
            E::AuthenticationRequest(AuthenticationRequest {
                ksi: 0,
                rand: [1; 16],
                autn: [2; 16],
            })
            .into(),
            Downlink,
        ),
        (
            E::AuthenticationResponse(AuthenticationResponse { res: vec![3; 8] }).into(),
            Uplink,
        ),
        (E::AuthenticationReject.into(), Downlink),
        (
            E::AuthenticationFailure(AuthenticationFailure {
                emm_cause: emm_cause::SYNCH_FAILURE,
                auts: Some([4; 14]),
            })
            .into(),
            Uplink,
        ),
        (
            E::AuthenticationFailure(AuthenticationFailure {
                emm_cause: emm_cause::MAC_FAILURE,
                auts: None,
            })
            .into(),
            Uplink,
        ),
        (
            E::SecurityModeCommand(SecurityModeCommand {
                eea: 0,
                eia: 2,
                ksi: 0,
                replayed_ue_capabilities: vec![0xe0, 0xe0],
                imeisv_request: true,
            })
            .into(),
            Downlink,
        ),
        (
            E::SecurityModeComplete(SecurityModeComplete {
                imeisv: Some(MobileIdentity::Imeisv("3534900698733000".into())),
            })
            .into(),
            Uplink,
        ),
        (
            E::SecurityModeReject {
                emm_cause: emm_cause::UE_SECURITY_CAPABILITIES_MISMATCH,
            }
            .into(),
            Uplink,
        ),
        (
            E::IdentityRequest(IdentityRequest { identity_type: 1 }).into(),
            Downlink,
        ),
        (
            E::IdentityResponse(IdentityResponse {
                identity: MobileIdentity::Imsi("001010123456789".into()),
            })
            .into(),
            Uplink,
        ),
        (
            E::DetachRequestUe(DetachRequestUe {
                detach_type: 1,
                switch_off: true,
                ksi: 0,
                identity: MobileIdentity::Guti(guti()),
            })
            .into(),
            Uplink,
        ),
        (
            E::DetachRequestNetwork(DetachRequestNetwork {
                detach_type: 1,
                emm_cause: None,
            })
            .into(),
            Downlink,
        ),
        (E::DetachAccept.into(), Downlink),
        (
            E::TauRequest(TauRequest {
                update_type: 0,
                active_flag: true,
                ksi: 0,
                old_guti: MobileIdentity::Guti(guti()),
                ue_network_capability: Some(cap.clone()),
                last_visited_tai: Some(tai),
                eps_bearer_context_status: Some(0x0020),
            })
            .into(),
            Uplink,
        ),
        (
            E::TauAccept(TauAccept {
                update_result: 0,
                t3412: Some(0x21),
                guti: Some(guti()),
                tai_list: Some(vec![tai]),
                eps_bearer_context_status: Some(0x0020),
            })
            .into(),
            Downlink,
        ),
        (E::TauComplete.into(), Uplink),
        (
            E::TauReject {
                emm_cause: emm_cause::IMPLICITLY_DETACHED,
            }
            .into(),
            Downlink,
        ),
        (
            E::ServiceReject {
                emm_cause: emm_cause::UE_IDENTITY_CANNOT_BE_DERIVED,
            }
            .into(),
            Downlink,
        ),
        (
            E::GutiReallocationCommand(GutiReallocationCommand {
                guti: guti(),
                tai_list: None,
            })
            .into(),
            Downlink,
        ),
        (E::GutiReallocationComplete.into(), Uplink),
        (
            E::EmmInformation(EmmInformation {
                full_name: Some(vec![0x80, 0x70, 0x65]),
                short_name: None,
                universal_time: None,
            })
            .into(),
            Downlink,
        ),
        (
            E::EmmStatus {
                emm_cause: emm_cause::PROTOCOL_ERROR_UNSPECIFIED,
            }
            .into(),
            Uplink,
        ),
        (
            esm(
                0,
                1,
                EsmBody::PdnConnectivityRequest(PdnConnectivityRequest {
                    request_type: 1,
                    pdn_type: 1,
                    esm_information_transfer: true,
                    apn: Some("internet".into()),
                    pco: Some(vec![0x80, 0x00, 0x0d, 0x00]),
                }),
            ),
            Uplink,
        ),
        (
            esm(
                0,
                1,
                EsmBody::PdnConnectivityReject {
                    esm_cause: esm_cause::MISSING_OR_UNKNOWN_APN,
                },
            ),
            Downlink,
        ),
        (
            esm(0, 2, EsmBody::PdnDisconnectRequest { linked_ebi: 5 }),
            Uplink,
        ),
        (
            esm(
                0,
                2,
                EsmBody::PdnDisconnectReject {
                    esm_cause: esm_cause::LAST_PDN_DISCONNECTION_NOT_ALLOWED,
                },
            ),
            Downlink,
        ),
        (esm(0, 1, EsmBody::EsmInformationRequest), Downlink),
        (
            esm(
                0,
                1,
                EsmBody::EsmInformationResponse {
                    apn: Some("ims".into()),
                    pco: None,
                },
            ),
            Uplink,
        ),
        (
            esm(
                5,
                1,
                EsmBody::ActivateDefaultBearerRequest(ActivateDefaultBearerRequest {
                    qos: EpsQos { qci: 9, gbr: None },
                    apn: "internet".into(),
                    pdn_address: PdnAddress::Ipv4(Ipv4Addr::new(10, 45, 0, 2)),
                    apn_ambr: Some(ApnAmbr {
                        dl_kbps: 1_000_000,
                        ul_kbps: 500_000,
                    }),
                    esm_cause: None,
                    pco: None,
                }),
            ),
            Downlink,
        ),
        (esm(5, 0, EsmBody::ActivateDefaultBearerAccept), Uplink),
        (
            esm(
                5,
                0,
                EsmBody::ActivateDefaultBearerReject {
                    esm_cause: esm_cause::PROTOCOL_ERROR_UNSPECIFIED,
                },
            ),
            Uplink,
        ),
        (
            esm(
                6,
                0,
                EsmBody::ActivateDedicatedBearerRequest(ActivateDedicatedBearerRequest {
                    linked_ebi: 5,
                    qos: qos_gbr,
                    tft: vec![0x21, 0x10, 0x00, 0x05, 0x30, 0x10, 0x00, 0x11],
                }),
            ),
            Downlink,
        ),
        (esm(6, 0, EsmBody::ActivateDedicatedBearerAccept), Uplink),
        (
            esm(
                6,
                0,
                EsmBody::ActivateDedicatedBearerReject {
                    esm_cause: esm_cause::INSUFFICIENT_RESOURCES,
                },
            ),
            Uplink,
        ),
        (
            esm(
                6,
                0,
                EsmBody::ModifyBearerRequest(ModifyBearerRequest {
                    qos: Some(qos_gbr),
                    tft: None,
                    apn_ambr: Some(ApnAmbr {
                        dl_kbps: 8000,
                        ul_kbps: 64,
                    }),
                }),
            ),
            Downlink,
        ),
        (esm(6, 0, EsmBody::ModifyBearerAccept), Uplink),
        (
            esm(
                6,
                0,
                EsmBody::ModifyBearerReject {
                    esm_cause: esm_cause::INSUFFICIENT_RESOURCES,
                },
            ),
            Uplink,
        ),
        (
            esm(
                6,
                0,
                EsmBody::DeactivateBearerRequest {
                    esm_cause: esm_cause::REGULAR_DEACTIVATION,
                },
            ),
            Downlink,
        ),
        (esm(6, 0, EsmBody::DeactivateBearerAccept), Uplink),
        (
            esm(
                0,
                0,
                EsmBody::EsmStatus {
                    esm_cause: esm_cause::INVALID_EPS_BEARER_IDENTITY,
                },
            ),
            Uplink,
        ),
    ]
}

#[test]
fn every_message_roundtrips() {
    for (m, dir) in all() {
        let b = m.encode().unwrap_or_else(|e| panic!("{m:?}: {e}"));
        let back = NasMessage::decode_dir(&b, dir).unwrap_or_else(|e| panic!("{m:?}: {e}"));
        assert_eq!(back, m);
        // The direction-free decoder reads everything but ambiguous detach the same.
        if !matches!(
            m,
            NasMessage::Emm(EmmMessage::DetachRequestUe(_) | EmmMessage::DetachRequestNetwork(_))
        ) {
            assert_eq!(NasMessage::decode(&b).unwrap(), m);
        }
    }
}

#[test]
fn known_octets() {
    // Attach Reject #3 (oxirush-nas docs) and an Authentication Request header.
    let r = EmmMessage::AttachReject(AttachReject {
        emm_cause: 3,
        esm_container: None,
        t3346_s: None,
    })
    .encode()
    .unwrap();
    assert_eq!(r, [0x07, 0x44, 0x03]);
    let a = EmmMessage::AuthenticationRequest(AuthenticationRequest {
        ksi: 0,
        rand: [0x23; 16],
        autn: [0x55; 16],
    })
    .encode()
    .unwrap();
    assert_eq!(&a[..4], &[0x07, 0x52, 0x00, 0x23]);
    assert_eq!(&a[19..21], &[0x10, 0x55]);
    // IMSI identity: odd number of digits, type 1.
    assert_eq!(
        MobileIdentity::Imsi("208930000000001".into())
            .to_bytes()
            .unwrap(),
        [0x29, 0x80, 0x39, 0, 0, 0, 0, 0x10]
    );
    // APN-AMBR: 1 Mbps is extended octet range.
    assert_eq!(
        ApnAmbr::from_bytes(
            &ApnAmbr {
                dl_kbps: 576,
                ul_kbps: 8
            }
            .to_bytes()
        )
        .unwrap(),
        ApnAmbr {
            dl_kbps: 576,
            ul_kbps: 8
        }
    );
    assert_eq!(decode_bitrate(0xfe, 0x4a, 0), 16_000);
}

fn keys(seed: u8) -> (Key128, Key128) {
    (Key128::new([seed; 16]), Key128::new([seed ^ 0x5a; 16]))
}

fn pair(eia: Eia, eea: Eea) -> (NasSecurityContext, NasSecurityContext) {
    let (i, e) = keys(7);
    (
        NasSecurityContext::new(Role::Network, i.clone(), e.clone(), eia, eea, 1),
        NasSecurityContext::new(Role::Ue, i, e, eia, eea, 1),
    )
}

#[test]
fn protect_unprotect_both_directions_all_algorithms() {
    let plain = EmmMessage::EmmStatus { emm_cause: 111 }.encode().unwrap();
    for eia in [Eia::Eia1, Eia::Eia2, Eia::Eia3] {
        for eea in [Eea::Eea0, Eea::Eea1, Eea::Eea2, Eea::Eea3] {
            let (mut net, mut ue) = pair(eia, eea);
            for n in 0..300u32 {
                let dl = net.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
                if eea != Eea::Eea0 {
                    assert_ne!(&dl[6..], &plain[..], "ciphered");
                }
                assert_eq!(dl[5], n as u8);
                assert_eq!(ue.unprotect(&dl).unwrap(), (plain.clone(), n));
                let ul = ue.protect(&plain, sht::INTEGRITY).unwrap();
                assert_eq!(&ul[6..], &plain[..]);
                assert_eq!(
                    net.unprotect(&ul).unwrap(),
                    (plain.clone(), n),
                    "{eia:?} {eea:?} count {n}"
                );
            }
        }
    }
}

/// A context rebuilt from its keys and COUNTs (as a snapshot restore does) sets its
/// keys up only when first used, whichever operation comes first, and then agrees
/// with the peer that kept going.
#[test]
fn context_rebuilt_from_keys_works_on_first_use() {
    let plain = EmmMessage::EmmStatus { emm_cause: 111 }.encode().unwrap();
    let rebuilt = |c: &NasSecurityContext| {
        let mut r = NasSecurityContext::new(
            c.role,
            c.knas_int().clone(),
            c.knas_enc().clone(),
            c.eia(),
            c.eea(),
            c.ksi,
        );
        r.set_counts(c.ul_count, c.dl_count, c.rx_started());
        assert!(!r.keyed());
        r
    };
    for eia in [Eia::Eia1, Eia::Eia2, Eia::Eia3] {
        for eea in [Eea::Eea0, Eea::Eea1, Eea::Eea2, Eea::Eea3] {
            let (mut net, mut ue) = pair(eia, eea);
            for _ in 0..3 {
                let dl = net.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
                ue.unprotect(&dl).unwrap();
                let ul = ue.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
                net.unprotect(&ul).unwrap();
            }
            // First use: protect + cipher; the same PDU as the original's.
            let (mut a, mut b) = (rebuilt(&net), net.clone());
            let dl = a.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
            assert_eq!(dl, b.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap());
            assert!(a.keyed());
            assert_eq!(ue.unprotect(&dl).unwrap(), (plain.clone(), 3));
            // First use: verify + decipher.
            let mut n = rebuilt(&net);
            let ul = ue.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
            assert_eq!(n.unprotect(&ul).unwrap(), (plain.clone(), 3));
            assert!(n.keyed());
            // First use: a replayed PDU is still told from a forgery.
            let mut r = rebuilt(&n);
            assert!(matches!(
                r.unprotect(&ul),
                Err(NasSecError::Replay { count: 3, .. })
            ));
            // First use: a short SERVICE REQUEST, both ends rebuilt.
            let (mut u, mut n2) = (rebuilt(&ue), rebuilt(&n));
            let sr = u.protect_service_request();
            assert_eq!(
                n2.verify_service_request(&sr).unwrap(),
                4,
                "{eia:?} {eea:?}"
            );
            // A clone taken before first use works on its own.
            let mut c = rebuilt(&n);
            let c2 = c.clone();
            let ul = ue.protect(&plain, sht::INTEGRITY).unwrap();
            c.unprotect(&ul).unwrap();
            assert!(c.keyed() && !c2.keyed());
            assert!(!format!("{c:?}").contains("knas"));
        }
    }
}

#[test]
fn bad_mac_replay_and_lost_messages() {
    let plain = EmmMessage::TauComplete.encode().unwrap();
    let (mut net, mut ue) = pair(Eia::Eia2, Eea::Eea2);
    let first = ue.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
    assert!(net.unprotect(&first).is_ok());
    // Replay of an accepted PDU.
    assert!(matches!(
        net.unprotect(&first),
        Err(NasSecError::Replay { count: 0, .. })
    ));
    // Tampered octet: MAC failure, and the receive COUNT does not move.
    let mut t = ue.protect(&plain, sht::INTEGRITY_CIPHERED).unwrap();
    let last = t.len() - 1;
    t[last] ^= 1;
    let before = net.ul_count;
    assert!(matches!(net.unprotect(&t), Err(NasSecError::BadMac { .. })));
    assert_eq!(net.ul_count, before);
    // 40 lost messages later (SEQ jumps), the COUNT estimate still finds it.
    for _ in 0..40 {
        ue.protect(&plain, sht::INTEGRITY).unwrap();
    }
    let later = ue.protect(&plain, sht::INTEGRITY).unwrap();
    assert_eq!(net.unprotect(&later).unwrap().1, 42);
    // Wrong key: MAC failure.
    let (i, e) = keys(9);
    let mut other = NasSecurityContext::new(Role::Network, i, e, Eia::Eia2, Eea::Eea2, 1);
    assert!(matches!(
        other.unprotect(&later),
        Err(NasSecError::BadMac { .. })
    ));
    // Plain and garbage inputs.
    assert_eq!(net.unprotect(&plain), Err(NasSecError::NotProtected));
    assert!(matches!(
        net.unprotect(&[0x27, 0, 0]),
        Err(NasSecError::Truncated { .. })
    ));
}

#[test]
fn service_request_short_mac() {
    let (mut net, mut ue) = pair(Eia::Eia2, Eea::Eea0);
    for n in 0..70u32 {
        let sr = ue.protect_service_request();
        assert_eq!(sr[0], 0xc7);
        assert_eq!(sr[1] & 0x1f, (n & 0x1f) as u8);
        assert_eq!(net.verify_service_request(&sr).unwrap(), n);
        if n == 10 {
            assert!(matches!(
                net.verify_service_request(&sr),
                Err(NasSecError::Replay { .. })
            ));
        }
    }
    let mut bad = ue.protect_service_request();
    bad[3] ^= 0x80;
    assert!(matches!(
        net.unprotect(&bad),
        Err(NasSecError::BadMac { .. })
    ));
}

#[test]
fn keys_never_in_debug() {
    let (net, _) = pair(Eia::Eia2, Eea::Eea2);
    let d = format!("{net:?}");
    assert!(!d.contains("7, 7, 7") && !d.contains("knas"), "{d}");
}

#[test]
fn garbage_never_panics() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let corpus: Vec<Vec<u8>> = all().iter().map(|(m, _)| m.encode().unwrap()).collect();
    let (net, _) = pair(Eia::Eia2, Eea::Eea2);
    for b in &corpus {
        for cut in 0..b.len() {
            let _ = NasMessage::decode(&b[..cut]);
        }
        for _ in 0..300 {
            let mut m = b.clone();
            let i = (rnd() as usize) % m.len();
            m[i] ^= 1 << (rnd() % 8);
            let _ = NasMessage::decode(&m);
            let _ = NasMessage::decode_dir(&m, Direction::Uplink);
            let _ = net.clone().unprotect(&m);
        }
    }
    for len in 0..40 {
        for _ in 0..100 {
            let m: Vec<u8> = (0..len).map(|_| rnd() as u8).collect();
            let _ = NasMessage::decode(&m);
            let _ = net.clone().unprotect(&m);
            let _ = MobileIdentity::from_bytes(&m);
            let _ = decode_tai_list(&m);
            let _ = PdnAddress::from_bytes(&m);
            let _ = EpsQos::from_bytes(&m);
        }
    }
}
