//! Cost of the node's S1AP demux per message: the endpoint reads the routing fields in
//! place and hands the PDU to its slice (no decode). Messages of one attach in their
//! proportions (Initial UE Message by IMSI, Uplink NAS Transport ×3, Initial Context
//! Setup Response) plus an Initial UE Message by S-TMSI, on a node of 2 slices.
//! Prints JSON (median of 11 runs). `cargo run --release --example demux_timing -p pepc-mme`
//! For instruction counts: `valgrind --tool=callgrind` on the same binary with `-- 1`.

use pepc_mme::{EndpointOut, Input, MmeConfig, S1apEndpoint, SlicePolicy};
use pepc_s1ap::msg::*;
use pepc_s1ap::{ERabTunnel, Ecgi, EnbId, GlobalEnbId, STmsi, SupportedTa, Tai};
use pepc_testkit::subscriber;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(11);
    let cfg = MmeConfig::default();
    let plmn = cfg.plmn;
    let mut ep = S1apEndpoint::new(cfg.clone(), 2, SlicePolicy::ConsistentHash);
    let mut eo = EndpointOut::default();
    ep.assoc_up(1, 4);
    let setup = S1apMessage::from(S1SetupRequest {
        global_enb_id: GlobalEnbId {
            plmn,
            enb_id: EnbId::Macro(1),
        },
        enb_name: None,
        supported_tas: vec![SupportedTa {
            tac: 1,
            plmns: vec![plmn],
        }],
        paging_drx: Some(128),
    })
    .encode()
    .expect("encodes");
    ep.on_s1ap(1, 0, setup, &mut eo);
    assert_eq!(eo.wire.len(), 1, "S1 Setup answered");
    eo.wire.clear();
    let tai = Tai { plmn, tac: 1 };
    let ecgi = Ecgi {
        plmn,
        cell_id: 0x101,
    };
    let ue = pepc_testkit::SimUe::new(&subscriber("001010000000007").imsi, 7);
    let mme_ue_id = 0x8000_0123;
    let msgs: Vec<Vec<u8>> = vec![
        S1apMessage::from(InitialUeMessage {
            enb_ue_id: 7,
            nas_pdu: ue.attach_request(None, false),
            tai,
            ecgi,
            rrc_cause: 3,
            s_tmsi: None,
            gummei: None,
        }),
        S1apMessage::from(InitialUeMessage {
            enb_ue_id: 8,
            nas_pdu: vec![0xc7, 0, 1, 2],
            tai,
            ecgi,
            rrc_cause: 3,
            s_tmsi: Some(STmsi {
                mmec: cfg.mme_code,
                m_tmsi: 0xc000_0042,
            }),
            gummei: None,
        }),
        S1apMessage::from(UplinkNasTransport {
            mme_ue_id,
            enb_ue_id: 7,
            nas_pdu: vec![0x27; 40],
            ecgi,
            tai,
        }),
        S1apMessage::from(UplinkNasTransport {
            mme_ue_id: mme_ue_id & 0x7fff_ffff,
            enb_ue_id: 7,
            nas_pdu: vec![0x47; 20],
            ecgi,
            tai,
        }),
        S1apMessage::from(UplinkNasTransport {
            mme_ue_id,
            enb_ue_id: 7,
            nas_pdu: vec![0x27; 30],
            ecgi,
            tai,
        }),
        S1apMessage::from(InitialContextSetupResponse {
            mme_ue_id,
            enb_ue_id: 7,
            erabs: vec![ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(127, 0, 0, 2),
                teid: 0x1234,
            }],
            failed: vec![],
        }),
    ]
    .into_iter()
    .map(|m| m.encode().expect("encodes"))
    .collect();
    let per_round = 20_000;
    let mut batch: Vec<Vec<u8>> = Vec::with_capacity(per_round);
    let mut samples = Vec::new();
    let mut steered = [0u64; 2];
    for r in 0..rounds.max(1) {
        batch.clear();
        for i in 0..per_round {
            batch.push(msgs[i % msgs.len()].clone());
        }
        eo.slices.clear();
        eo.slices.reserve(per_round);
        let t = Instant::now();
        for b in batch.drain(..) {
            ep.on_s1ap(1, 1, b, &mut eo);
        }
        let ns = t.elapsed().as_nanos() as f64 / per_round as f64;
        for (s, i) in eo.slices.drain(..) {
            if let Input::S1ap { .. } = i {
                steered[s] += 1;
            }
        }
        black_box(&eo);
        if r > 0 || rounds == 1 {
            samples.push(ns);
        }
    }
    assert!(eo
        .wire
        .iter()
        .all(|o| !matches!(o, pepc_mme::Output::S1ap { .. })));
    samples.sort_by(f64::total_cmp);
    println!(
        "{{\"demux_ns_per_msg\": {:.1}, \"runs\": {:?}, \"steered_per_slice\": {:?}}}",
        samples[samples.len() / 2],
        samples
            .iter()
            .map(|x| (x * 10.0).round() / 10.0)
            .collect::<Vec<_>>(),
        steered
    );
}
