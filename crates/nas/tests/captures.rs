//! Every NAS-EPS message carried in the shared captures decodes. For the Open5GS
//! testattach capture, EPS-AKA is redone offline from the published test K/OPc: RES
//! must match the UE's Authentication Response, and every protected message must pass
//! MAC verification (and deciphering) under keys derived from KASME and the algorithms
//! of its Security Mode Command, then decode.

#[path = "../../s1ap/tests/common/captures.rs"]
mod captures;

use captures::*;
use pepc_nas::security::{Eea, Eia, NasSecurityContext, Role};
use pepc_nas::*;
use pepc_s1ap::msg::S1apMessage;
use pepc_security::{Key128, Milenage};

const K: &str = "465B5CE8B199B49FAA5F0A2EE238A6BC";
const OPC: &str = "E8ED289DEBA952E4283B54E88E6183CA";

/// (enb_ue_id, direction, NAS PDU, serving PLMN if known) of every NAS PDU, in order.
/// (eNB UE S1AP id, direction, NAS PDU, serving PLMN).
type NasPdu = (u32, Direction, Vec<u8>, Option<[u8; 3]>);

fn nas_pdus(path: &std::path::Path) -> Vec<NasPdu> {
    let mut out = Vec::new();
    for p in s1ap_payloads(path) {
        let m = S1apMessage::decode(&p.bytes).expect("S1AP decodes");
        let enb = m.enb_ue_id().unwrap_or(u32::MAX);
        let (dir, pdus, plmn) = match &m {
            S1apMessage::InitialUeMessage(i) => (
                Direction::Uplink,
                vec![i.nas_pdu.clone()],
                Some(i.tai.plmn.0),
            ),
            S1apMessage::UplinkNasTransport(u) => (
                Direction::Uplink,
                vec![u.nas_pdu.clone()],
                Some(u.tai.plmn.0),
            ),
            S1apMessage::DownlinkNasTransport(d) => {
                (Direction::Downlink, vec![d.nas_pdu.clone()], None)
            }
            S1apMessage::NasNonDeliveryIndication(d) => {
                (Direction::Downlink, vec![d.nas_pdu.clone()], None)
            }
            S1apMessage::InitialContextSetupRequest(r) => (
                Direction::Downlink,
                r.erabs.iter().filter_map(|e| e.nas_pdu.clone()).collect(),
                None,
            ),
            S1apMessage::ERabSetupRequest(r) => (
                Direction::Downlink,
                r.erabs.iter().filter_map(|e| e.nas_pdu.clone()).collect(),
                None,
            ),
            S1apMessage::ERabModifyRequest(r) => (
                Direction::Downlink,
                r.erabs.iter().map(|e| e.nas_pdu.clone()).collect(),
                None,
            ),
            S1apMessage::ERabReleaseCommand(r) => (
                Direction::Downlink,
                r.nas_pdu.iter().cloned().collect(),
                None,
            ),
            _ => continue,
        };
        for n in pdus {
            out.push((enb, dir, n, plmn));
        }
    }
    out
}

/// Decode a plain message and, for EMM messages with an ESM container, the ESM inside.
fn decode_plain(b: &[u8], dir: Direction, what: &str) -> NasMessage {
    let m = NasMessage::decode_dir(b, dir).unwrap_or_else(|e| panic!("{what}: {e}: {}", hex(b)));
    let esm = match &m {
        NasMessage::Emm(EmmMessage::AttachRequest(a)) => Some(&a.esm_container),
        NasMessage::Emm(EmmMessage::AttachAccept(a)) => Some(&a.esm_container),
        NasMessage::Emm(EmmMessage::AttachComplete(a)) => Some(&a.esm_container),
        _ => None,
    };
    if let Some(e) = esm {
        NasMessage::decode_dir(e, dir)
            .unwrap_or_else(|err| panic!("{what} ESM container: {err}: {}", hex(e)));
    }
    // Our re-encoding decodes to the same value.
    let again = m
        .encode()
        .unwrap_or_else(|e| panic!("{what} re-encode: {e}"));
    assert_eq!(NasMessage::decode_dir(&again, dir).unwrap(), m, "{what}");
    m
}

#[test]
fn plain_nas_in_all_captures_decodes() {
    let mut plain = 0;
    for path in capture_files() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        for (i, (_, dir, pdu, _)) in nas_pdus(&path).into_iter().enumerate() {
            match security::security_header_type(&pdu) {
                Some(0) => {
                    decode_plain(&pdu, dir, &format!("{name} NAS #{i}"));
                    plain += 1;
                }
                Some(1..=4) if pdu.len() > 6 => {
                    // EEA0/integrity-only payloads are plain after the 6-octet header;
                    // others are ciphered and are checked (with keys) in the test below.
                    let _ = NasMessage::decode_dir(&pdu[6..], dir);
                }
                _ => {}
            }
        }
    }
    assert!(plain > 20, "{plain}");
}

struct Ctx {
    net: NasSecurityContext,
    ue: NasSecurityContext,
}

#[test]
fn testattach_aka_and_nas_security_verify() {
    let path = captures_dir().join("testattach.pcapng");
    let mil = Milenage::new_with_opc(
        &Key128::from_hex(K).unwrap(),
        Key128::from_hex(OPC).unwrap().as_bytes().to_owned(),
    );
    let mut plmn_of: std::collections::HashMap<u32, [u8; 3]> = Default::default();
    // Per eNB UE id: pending AKA result (RES, KASME) and the bound context index.
    let mut pending: std::collections::HashMap<u32, ([u8; 8], pepc_security::Key256)> =
        Default::default();
    let mut bound: std::collections::HashMap<u32, usize> = Default::default();
    let mut ctxs: Vec<Ctx> = Vec::new();
    let mut awaiting_reject = std::collections::HashSet::new();
    let mut service_ok = 0;
    let (mut aka_ok, mut res_ok, mut smc, mut verified, mut deciphered, mut unverified_initial) =
        (0, 0, 0, 0, 0, 0);
    for (i, (enb, dir, pdu, plmn)) in nas_pdus(&path).into_iter().enumerate() {
        let what = format!("testattach NAS #{i} (eNB UE {enb})");
        if let Some(p) = plmn {
            plmn_of.insert(enb, p);
        }
        let sht = security::security_header_type(&pdu).unwrap();
        match sht {
            0 => match decode_plain(&pdu, dir, &what) {
                NasMessage::Emm(EmmMessage::ServiceReject { .. }) => {
                    awaiting_reject.remove(&enb);
                }
                NasMessage::Emm(EmmMessage::AuthenticationRequest(a)) => {
                    let (_res8, ck, ik, ak) = mil.f2345(a.rand);
                    let sqn: [u8; 6] = core::array::from_fn(|k| a.autn[k] ^ ak[k]);
                    let mac_a = mil.f1(a.rand, sqn, [a.autn[6], a.autn[7]]);
                    if mac_a[..] != a.autn[8..] {
                        continue; // a challenge for another subscriber key
                    }
                    aka_ok += 1;
                    let sqn_xor_ak: [u8; 6] = a.autn[..6].try_into().unwrap();
                    let kasme = pepc_security::kasme(&ck, &ik, plmn_of[&enb], sqn_xor_ak);
                    let (res, ..) = mil.f2345(a.rand);
                    pending.insert(enb, (res, kasme));
                }
                NasMessage::Emm(EmmMessage::AuthenticationResponse(r)) => {
                    if let Some((res, _)) = pending.get(&enb) {
                        assert_eq!(&r.res[..], &res[..r.res.len()], "{what}: RES");
                        res_ok += 1;
                    }
                }
                _ => {}
            },
            3 | 4 if dir == Direction::Downlink => {
                // Security Mode Command under a new context: read the algorithms, derive
                // the keys, then the MAC must verify before we trust anything.
                let inner = NasMessage::decode_dir(&pdu[6..], dir).expect("SMC body");
                let NasMessage::Emm(EmmMessage::SecurityModeCommand(c)) = inner else {
                    panic!("{what}: {inner:?}")
                };
                let (_, kasme) = pending
                    .get(&enb)
                    .unwrap_or_else(|| panic!("{what}: SMC without AKA"));
                let eia = Eia::try_from(c.eia).unwrap();
                let eea = Eea::try_from(c.eea).unwrap();
                let mut ue = NasSecurityContext::from_kasme(Role::Ue, kasme, eia, eea, c.ksi);
                let net = NasSecurityContext::from_kasme(Role::Network, kasme, eia, eea, c.ksi);
                let (plain, count) = ue
                    .unprotect(&pdu)
                    .unwrap_or_else(|e| panic!("{what}: SMC {e}"));
                assert_eq!(count, 0);
                decode_plain(&plain, dir, &what);
                ctxs.push(Ctx { net, ue });
                bound.insert(enb, ctxs.len() - 1);
                smc += 1;
            }
            1..=4 | 12 => {
                // Try the context bound to this UE first, then every other (a UE that
                // comes back on a new S1 connection with its cached context).
                let mut order: Vec<usize> = bound.get(&enb).copied().into_iter().collect();
                order.extend(
                    (0..ctxs.len())
                        .rev()
                        .filter(|k| Some(*k) != bound.get(&enb).copied()),
                );
                let mut done = None;
                for k in order {
                    let c = &mut ctxs[k];
                    let side = if dir == Direction::Uplink {
                        &mut c.net
                    } else {
                        &mut c.ue
                    };
                    let mut trial = side.clone();
                    if let Ok((plain, count)) = trial.unprotect(&pdu) {
                        *side = trial;
                        done = Some((k, plain, count));
                        break;
                    }
                }
                let Some((k, plain, _count)) = done else {
                    // TS 24.301 §4.4.4.3: an initial UE message the MME cannot verify (no
                    // or stale context) is still processed, and starts AKA. Only those may
                    // fail here, and only integrity-only ones (readable without keys).
                    if sht == 12 {
                        // The MME could not verify it either: it must answer Service Reject.
                        awaiting_reject.insert(enb);
                        unverified_initial += 1;
                        continue;
                    }
                    assert!(
                        dir == Direction::Uplink && matches!(sht, 1 | 3),
                        "{what}: no context verifies SHT {sht}: {}",
                        hex(&pdu)
                    );
                    let m = decode_plain(&pdu[6..], dir, &what);
                    assert!(
                        matches!(
                            m,
                            NasMessage::Emm(
                                EmmMessage::AttachRequest(_)
                                    | EmmMessage::TauRequest(_)
                                    | EmmMessage::DetachRequestUe(_)
                            )
                        ),
                        "{what}: unverifiable {m:?}"
                    );
                    unverified_initial += 1;
                    continue;
                };
                bound.insert(enb, k);
                verified += 1;
                service_ok += (sht == 12) as usize;
                if sht != 12 {
                    if matches!(sht, 2 | 4) && ctxs[k].net.eea() != Eea::Eea0 {
                        deciphered += 1;
                    }
                    decode_plain(&plain, dir, &what);
                }
            }
            other => panic!("{what}: security header type {other}"),
        }
    }
    eprintln!("AKA {aka_ok}, RES {res_ok}, SMC {smc}, verified {verified}, deciphered (non-null) {deciphered}, unverifiable initial {unverified_initial}, service requests verified {service_ok}");
    assert!(
        aka_ok >= 3 && res_ok >= 3 && smc >= 3,
        "{aka_ok} {res_ok} {smc}"
    );
    assert!(verified >= 20, "{verified}");
    assert!(service_ok >= 1, "no Service Request verified");
    assert!(
        awaiting_reject.is_empty(),
        "unverifiable Service Request not rejected: {awaiting_reject:?}"
    );
}
