//! Decode/encode time of three hot S1AP messages, printed as JSON (reported, not asserted).
//! `cargo run --release --example codec_timing -p pepc-s1ap`
//!
//! `encode_ns` / `decode_typed_ns` are what the MME calls (`S1apMessage::encode` /
//! `decode`: the hand-written path where one exists); `*_generic_ns` always take the
//! generic oxirush path (`to_pdu` + encode, decode + `from_pdu`).

use pepc_s1ap::msg::*;
use pepc_s1ap::*;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

fn time<F: FnMut()>(iters: u32, mut f: F) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    let t = Instant::now();
    for _ in 0..iters {
        f();
    }
    t.elapsed().as_nanos() as f64 / f64::from(iters)
}

fn main() {
    let plmn = Plmn::from_mcc_mnc("001", "01").unwrap();
    let tai = Tai { plmn, tac: 1 };
    let ecgi = Ecgi {
        plmn,
        cell_id: 0x19b01,
    };
    let msgs: Vec<(&str, S1apMessage)> = vec![
        (
            "InitialUEMessage",
            InitialUeMessage {
                enb_ue_id: 7,
                nas_pdu: vec![0x17; 60],
                tai,
                ecgi,
                rrc_cause: 3,
                s_tmsi: None,
                gummei: None,
            }
            .into(),
        ),
        (
            "UplinkNASTransport",
            UplinkNasTransport {
                mme_ue_id: 1,
                enb_ue_id: 7,
                nas_pdu: vec![0x27; 20],
                ecgi,
                tai,
            }
            .into(),
        ),
        (
            "InitialContextSetupRequest",
            InitialContextSetupRequest {
                mme_ue_id: 1,
                enb_ue_id: 7,
                ue_ambr: Ambr {
                    dl: 1_000_000_000,
                    ul: 500_000_000,
                },
                erabs: vec![ERab {
                    id: 5,
                    qci: 9,
                    arp: Arp::default(),
                    gbr: None,
                    transport: Ipv4Addr::new(127, 0, 0, 2),
                    teid: 1,
                    nas_pdu: Some(vec![0x27; 80]),
                }],
                ue_security_capabilities: UeSecurityCapabilities {
                    eea: 0xe000,
                    eia: 0xe000,
                },
                security_key: Key256([0xab; 32]),
            }
            .into(),
        ),
    ];
    let iters = 20_000;
    let mut out = Vec::new();
    for (name, m) in &msgs {
        let bytes = m.encode().unwrap();
        let enc = time(iters, || {
            black_box(m.encode().unwrap());
        });
        let dec_pdu = time(iters, || {
            black_box(decode(black_box(&bytes)).unwrap());
        });
        let dec_typed = time(iters, || {
            black_box(S1apMessage::decode(black_box(&bytes)).unwrap());
        });
        let enc_generic = time(iters, || {
            black_box(encode(&m.to_pdu().unwrap()).unwrap());
        });
        let dec_generic = time(iters, || {
            black_box(S1apMessage::from_pdu(&decode(black_box(&bytes)).unwrap()).unwrap());
        });
        out.push(format!(
            "{{\"message\":\"{name}\",\"bytes\":{},\"encode_ns\":{enc:.0},\"encode_generic_ns\":{enc_generic:.0},\"decode_pdu_ns\":{dec_pdu:.0},\"decode_typed_ns\":{dec_typed:.0},\"decode_generic_ns\":{dec_generic:.0}}}",
            bytes.len()
        ));
    }
    println!("[{}]", out.join(","));
}
