//! No key ever reaches a log (TS 33.401): full flows run at TRACE with every
//! span and event formatted, and the output is searched for each key of the UE —
//! K, OPc, CK, IK, KASME, K_NASenc, K_NASint, KeNB, NH — in hex (either case), as Rust
//! prints byte arrays, and for any 6-byte piece of them.

use pepc_mme::MmeConfig;
use pepc_s1ap::msg::*;
use pepc_s1ap::Cause;
use pepc_security::{Key128, Milenage};
use pepc_testkit::*;
use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const IMSI: &str = "001010000000001";

/// Everything the subscriber writes, kept for the search.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Every textual form a key could take in a log line.
fn forms(key: &[u8]) -> Vec<String> {
    let mut v = Vec::new();
    for w in key.windows(6) {
        let lower = hex::encode(w);
        v.push(lower.to_uppercase());
        v.push(lower);
        let dec: Vec<String> = w.iter().map(|b| b.to_string()).collect();
        v.push(dec.join(", "));
        for fmt in [
            |b: &u8| format!("{b:#04x}"),
            |b: &u8| format!("{b:02x}"),
            |b: &u8| format!("{b:02X}"),
        ] {
            let hx: Vec<String> = w.iter().map(fmt).collect();
            v.push(hx.join(", "));
        }
    }
    v
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

#[test]
fn a_full_flow_at_trace_level_logs_no_key() {
    let buf = Captured::default();
    let w = buf.clone();
    let capture = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    let mut keys: Vec<(&str, Vec<u8>)> = Vec::new();
    tracing::subscriber::with_default(capture, || {
        let mut h = Harness::new(100, MmeConfig::default());
        h.hss.add(&subscriber(IMSI)).unwrap();
        assert!(matches!(
            h.enb_setup(1, 1, 1),
            S1apMessage::S1SetupResponse(_)
        ));
        assert!(matches!(
            h.enb_setup(2, 2, 1),
            S1apMessage::S1SetupResponse(_)
        ));
        // Attach: AKA, SMC, Initial Context Setup (KeNB).
        let mut ue = SimUe::new(IMSI, 10);
        attach(&mut h, &mut ue, 1).unwrap();
        let id = ue.mme_ue_id.unwrap();
        let rand = ue
            .last_rand
            .expect("an Authentication Request was answered");
        let sec = ue.sec.as_ref().expect("security context");
        let kasme = sec.kasme.clone();
        let (k_enc, k_int) = pepc_security::nas_keys(&kasme, sec.eea as u8, sec.eia as u8);
        let kenb = ue.expected_kenb().unwrap();
        // A bad MAC (discarded and logged) and a second uplink NAS.
        let mut bad = ue.tau_request(false);
        let n = bad.len();
        bad[n - 1] ^= 0xff;
        bad[2] ^= 0x55;
        ul_nas(&mut h, &ue, bad);
        // X2 handover: the Path Switch Request Acknowledge carries NH.
        let plmn = h.mme.config().plmn;
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
        let nh = match &r[..] {
            [(2, S1apMessage::PathSwitchRequestAcknowledge(a))] => {
                a.security_context.next_hop.0.to_vec()
            }
            o => panic!("{o:?}"),
        };
        // Release to idle, then a Service Request (a new KeNB) and a detach.
        ue.enb_ue_id = 50;
        let r = h.send(
            2,
            UeContextReleaseRequest {
                mme_ue_id: id,
                enb_ue_id: 50,
                cause: Cause::USER_INACTIVITY,
            },
        );
        pump(&mut h, &mut ue, 2, r).unwrap();
        ue.enb_ue_id = 11;
        let sr = ue.service_request();
        let first = h.send(1, initial_ue(&h, &ue, sr, ue.m_tmsi));
        pump(&mut h, &mut ue, 1, first).unwrap();
        let kenb2 = ue.expected_kenb().unwrap();
        let d = ue.detach_request(false);
        let r = ul_nas(&mut h, &ue, d);
        pump(&mut h, &mut ue, 1, r).unwrap();
        h.advance(Duration::from_secs(30));
        // A UE with the wrong key: an authentication failure path.
        let mut bad_ue = SimUe::new(IMSI, 12).with_wrong_key();
        let _ = attach(&mut h, &mut bad_ue, 1);

        let k = Key128::from_hex(TEST_K).unwrap();
        let opc = Key128::from_hex(TEST_OPC).unwrap();
        let (_, ck, ik, _) = Milenage::new_with_opc(&k, *opc.as_bytes()).f2345(rand);
        keys = vec![
            ("K", k.as_bytes().to_vec()),
            ("OPc", opc.as_bytes().to_vec()),
            ("CK", ck.as_bytes().to_vec()),
            ("IK", ik.as_bytes().to_vec()),
            ("KASME", kasme.as_bytes().to_vec()),
            ("K_NASenc", k_enc.as_bytes().to_vec()),
            ("K_NASint", k_int.as_bytes().to_vec()),
            ("KeNB", kenb.as_bytes().to_vec()),
            ("KeNB (service request)", kenb2.as_bytes().to_vec()),
            ("NH", nh),
        ];
    });
    let out = String::from_utf8_lossy(&buf.0.lock().unwrap()).into_owned();
    // The search means something only if the flow was logged at all levels, with spans.
    assert!(out.contains("TRACE"), "no TRACE line:\n{out}");
    assert!(out.contains("mme_ue_s1ap_id="), "no UE span:\n{out}");
    assert!(out.contains("DEBUG"), "no DEBUG line:\n{out}");
    assert!(out.lines().count() > 20, "too little logged:\n{out}");
    for (name, key) in &keys {
        for f in forms(key) {
            assert!(!out.contains(&f), "{name} appears in the log as {f:?}");
        }
    }
}
