//! Whole-UE snapshot size and cost with the MME's section: attached, connected UEs (full
//! in-process attaches: AKA, NAS security, one PDN connection and bearer, GUTI) are
//! snapshotted (slice + MME sections) and restored into a fresh node (slice + MME).
//! Prints JSON: sizes in bytes, and ns per UE as the median of repeated runs.
//!
//! ```text
//! cargo run -p pepc-mme --release --example ue_snapshot_timing [-- UES]
//! ```

use pepc_mme::snapshot::{restore_whole_ue, snapshot_whole_ue_with, Scratch, UeKey};
use pepc_mme::MmeConfig;
use pepc_slice::snapshot::SnapshotView;
use pepc_testkit::{attach, subscriber, Harness, SimUe};
use std::hint::black_box;
use std::time::{Duration, Instant};

const RUNS: usize = 21;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn imsi(i: usize) -> String {
    format!("00101{:010}", i + 1)
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(512);
    let cfg = MmeConfig::default();
    let mut src = Harness::new(n + 16, cfg.clone());
    let subs: Vec<_> = (0..n).map(|i| subscriber(&imsi(i))).collect();
    src.hss.add_many(&subs).expect("HSS");
    src.enb_setup(1, 1, 1);
    for i in 0..n {
        let mut ue = SimUe::new(&imsi(i), i as u32 + 1);
        attach(&mut src, &mut ue, 1).expect("attach");
        if i % 64 == 0 {
            src.sync();
        }
    }
    src.sync();
    let keys: Vec<UeKey> = (0..n)
        .map(|i| UeKey::Imsi(imsi(i).parse().expect("digits")))
        .collect();

    // Sizes (the first UE; all have the same shape).
    let mut scratch = Scratch::default();
    let mut snaps: Vec<Vec<u8>> = vec![Vec::with_capacity(512); n];
    for (k, out) in keys.iter().zip(snaps.iter_mut()) {
        snapshot_whole_ue_with(&mut scratch, &src.mme, &src.cp, *k, src.now, out)
            .expect("snapshot");
    }
    let whole = snaps[0].len();
    let view = SnapshotView::parse(&snaps[0]).expect("parse");
    let slice_len = view.slice_section().len();
    let mme_len = view.mme().map_or(0, |m| m.len());
    let max_whole = snaps.iter().map(|s| s.len()).max().unwrap_or(0);

    // Snapshot, both sections: ns per UE.
    let mut out = Vec::with_capacity(1024);
    let snapshot_ns = median(
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                for k in &keys {
                    out.clear();
                    snapshot_whole_ue_with(&mut scratch, &src.mme, &src.cp, *k, src.now, &mut out)
                        .expect("snapshot");
                    black_box(&out);
                }
                t.elapsed().as_nanos() as f64 / n as f64
            })
            .collect(),
    );
    // The MME section alone.
    let mme_snapshot_ns = median(
        (0..RUNS)
            .map(|_| {
                let t = Instant::now();
                for k in &keys {
                    out.clear();
                    src.mme
                        .snapshot_ue(&src.cp, *k, src.now, &mut out)
                        .expect("snapshot");
                    black_box(&out);
                }
                t.elapsed().as_nanos() as f64 / n as f64
            })
            .collect(),
    );

    // Restore, both sections, into a fresh node per run (built untimed); `prewarm`:
    // sized at start as `node.prewarm_users` does (MME maps reserved, control heap
    // faulted in, slice tables prefaulted), a running node's case, where no restore
    // pays a page fault or a table growth.
    let restore_into = |prewarm: bool| {
        median(
            (0..RUNS)
                .map(|_| {
                    let mut dst = Harness::new(n + 16, cfg.clone());
                    if prewarm {
                        dst.mme.prewarm(n);
                        dst.cp.prewarm(n);
                    }
                    let now = dst.now + Duration::from_secs(60);
                    let t = Instant::now();
                    for s in &snaps {
                        black_box(
                            restore_whole_ue(&mut dst.mme, &mut dst.cp, black_box(s), now)
                                .expect("restore"),
                        );
                    }
                    let ns = t.elapsed().as_nanos() as f64 / n as f64;
                    assert_eq!(dst.mme.ue_count(), n);
                    dst.sync();
                    ns
                })
                .collect(),
        )
    };
    let restore_ns = restore_into(false);
    let restore_prewarmed_ns = restore_into(true);
    // The MME section alone, into a fresh node per run whose slice already holds the
    // sessions (restored untimed): the entries the sections go into.
    let sections: Vec<Vec<u8>> = snaps
        .iter()
        .map(|s| {
            SnapshotView::parse(s)
                .expect("parse")
                .mme()
                .expect("mme")
                .bytes()
                .to_vec()
        })
        .collect();
    let mme_restore_ns = median(
        (0..RUNS)
            .map(|_| {
                let mut dst = Harness::new(n + 16, cfg.clone());
                dst.mme.prewarm(n);
                let slots: Vec<Option<u32>> = snaps
                    .iter()
                    .map(|s| {
                        let v = SnapshotView::parse(s).expect("parse");
                        v.has_slice().then(|| {
                            let slice = v.decode_slice().expect("slice");
                            dst.cp.restore_ue(&slice).expect("session").ue_slot
                        })
                    })
                    .collect();
                let now = Instant::now();
                let t = Instant::now();
                for (s, slot) in sections.iter().zip(&slots) {
                    black_box(
                        dst.mme
                            .restore_ue(&mut dst.cp, black_box(s), *slot, now)
                            .expect("restore"),
                    );
                }
                t.elapsed().as_nanos() as f64 / n as f64
            })
            .collect(),
    );
    println!(
        "{{\"ues\":{n},\"runs\":{RUNS},\
         \"whole_snapshot_bytes\":{whole},\"whole_snapshot_bytes_max\":{max_whole},\
         \"slice_section_bytes\":{slice_len},\"mme_section_bytes\":{mme_len},\
         \"snapshot_whole_ns\":{snapshot_ns:.1},\"restore_whole_ns\":{restore_ns:.1},\
         \"snapshot_plus_restore_ns\":{:.1},\
         \"restore_whole_prewarmed_ns\":{restore_prewarmed_ns:.1},\
         \"snapshot_plus_restore_prewarmed_ns\":{:.1},\
         \"snapshot_mme_section_ns\":{mme_snapshot_ns:.1},\
         \"restore_mme_section_ns\":{mme_restore_ns:.1}}}",
        snapshot_ns + restore_ns,
        snapshot_ns + restore_prewarmed_ns
    );
}
