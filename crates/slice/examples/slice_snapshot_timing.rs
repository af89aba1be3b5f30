//! UE snapshot size and cost: an attached, connected UE with one PDN connection and one
//! bearer (counters), moved from slice 1 to slice 2 of a four-slice node.
//! Prints JSON: sizes in bytes, and ns per operation as the median of repeated runs.
//!
//! ```text
//! cargo run -p pepc-slice --release --example slice_snapshot_timing [-- MME_PLACEHOLDER_BYTES]
//! ```
//! The MME section is an opaque placeholder of the given size (default 128) until the
//! MME's per-UE record is plugged in.

use pepc_slice::control::{AttachParams, ControlPlane};
use pepc_slice::datapath::DataPlane;
use pepc_slice::ids::IdLayout;
use pepc_slice::packets::{gpdu, ipv4_udp};
use pepc_slice::slice::{build, SliceConfig};
use pepc_slice::snapshot::{self, SnapshotView, UeSliceSnapshot};
use pepc_wire::Batch;
use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

const RUNS: usize = 21;
const ITERS: usize = 20_000;
/// UEs restored per timed run (then detached, untimed).
const RESTORES: usize = 2_000;

fn slice(index: u32) -> (ControlPlane, DataPlane) {
    let mut cfg = SliceConfig::for_users(RESTORES + 16);
    cfg.layout = IdLayout::new(4, Ipv4Addr::new(10, 0, 0, 0), 8).expect("layout");
    cfg.slice = index;
    build(&cfg)
}

fn drain(cp: &mut ControlPlane, dp: &mut DataPlane) {
    while cp.in_flight() > 0 {
        dp.sync(0);
        cp.flush();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Median over runs of ns per iteration of `f`.
fn time(mut f: impl FnMut()) -> f64 {
    for _ in 0..ITERS / 10 {
        f();
    }
    median(
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..ITERS {
                    f();
                }
                t.elapsed().as_nanos() as f64 / ITERS as f64
            })
            .collect(),
    )
}

fn main() {
    let mme_len: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("MME placeholder size in bytes"))
        .unwrap_or(128);
    let mme = vec![0xA5u8; mme_len];

    let (mut src, mut src_dp) = slice(1);
    let mut p = AttachParams::new(1_010_123_456_789);
    p.ambr_ul = 50_000_000;
    p.ambr_dl = 150_000_000;
    p.apn = "internet".into();
    p.enb_addr = Ipv4Addr::new(192, 0, 2, 10);
    p.enb_teid = 0x0102_0304;
    let a = src.attach(&p).expect("attach");
    // Some traffic so that counters are not zero (and not tiny).
    let pkt = gpdu(
        a.teid_ul,
        &ipv4_udp(a.ue_ip, Ipv4Addr::new(198, 51, 100, 7), 1, 2, 1400),
    );
    for _ in 0..300 {
        let mut b = Batch::default();
        b.bufs[0].fill(&pkt);
        b.len = 1;
        src_dp.uplink(&mut b, 1);
    }

    let snap = src.snapshot_ue(a.ue_slot).expect("snapshot");
    let mut out = Vec::with_capacity(1024);
    let total = snapshot::encode(&snap, Some(&mme), &mut out).expect("encode");
    let slice_len = SnapshotView::parse(&out)
        .expect("parse")
        .slice_section()
        .len();
    let mut no_mme = Vec::new();
    let without_mme = snapshot::encode(&snap, None, &mut no_mme).expect("encode");

    let encode_ns = time(|| {
        out.clear();
        black_box(snapshot::encode(black_box(&snap), Some(&mme), &mut out).ok());
    });
    let bytes = out.clone();
    let mut back = UeSliceSnapshot::default();
    let decode_ns = time(|| {
        let v = SnapshotView::parse(black_box(&bytes)).expect("parse");
        v.decode_slice_into(&mut back).expect("decode");
        black_box((&back, v.mme()));
    });
    assert_eq!(back, snap);
    let mut scratch = UeSliceSnapshot::default();
    let snapshot_encode_ns = time(|| {
        src.snapshot_ue_into(black_box(a.ue_slot), &mut scratch)
            .expect("snapshot");
        out.clear();
        black_box(snapshot::encode(&scratch, Some(&mme), &mut out).ok());
    });

    // Restore: RESTORES distinct UEs (IMSIs) per run into slice 2, detached after.
    let inputs: Vec<Vec<u8>> = (0..RESTORES as u64)
        .map(|i| {
            let mut s = snap.clone();
            s.imsi += i;
            let mut v = Vec::new();
            snapshot::encode(&s, Some(&mme), &mut v).expect("encode");
            v
        })
        .collect();
    let (mut dst, mut dst_dp) = slice(2);
    let mut slots = Vec::with_capacity(RESTORES);
    let mut runs = Vec::with_capacity(RUNS);
    for run in 0..RUNS + 1 {
        let t = Instant::now();
        for b in &inputs {
            let v = SnapshotView::parse(b).expect("parse");
            v.decode_slice_into(&mut back).expect("decode");
            let r = dst.restore_ue(&back).expect("restore");
            slots.push(r.ue_slot);
        }
        let ns = t.elapsed().as_nanos() as f64 / RESTORES as f64;
        if run > 0 {
            runs.push(ns); // run 0 warms up
        }
        for s in slots.drain(..) {
            dst.detach(s).expect("detach");
        }
        drain(&mut dst, &mut dst_dp);
    }
    let restore_ns = median(runs);

    println!(
        "{{\"ue\":\"1 PDN, 1 bearer, connected, GUTI, counters\",\
         \"slice_section_bytes\":{slice_len},\
         \"snapshot_bytes_without_mme\":{without_mme},\
         \"mme_placeholder_bytes\":{mme_len},\
         \"snapshot_bytes\":{total},\
         \"encode_ns\":{encode_ns:.1},\
         \"decode_ns\":{decode_ns:.1},\
         \"snapshot_ue_encode_ns\":{snapshot_encode_ns:.1},\
         \"decode_restore_ue_ns\":{restore_ns:.1},\
         \"runs\":{RUNS},\"iters\":{ITERS},\"restores_per_run\":{RESTORES}}}"
    );
}
