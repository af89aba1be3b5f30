//! What a restart costs with N registered UEs checkpointed (the target: "node serving
//! again <= 2 s after start with 1M registered UEs"): N UEs attach in-process with
//! checkpoints into an embedded state store (a temporary file), then a new node reads
//! every record back, indexes them and serves: the time until the UE restored last in
//! the background has its Service Request answered (restored on demand), then the
//! background restore of the rest, are timed.
//!
//! `cargo run --release -p pepc-mme --example restart_timing -- [UES] [SLICES]`
//! (default 200000, 1). The restore here is of slice 0's UEs on one thread: a node
//! with S slices restores on S control threads at once. With `PEPC_KEEP_STATE=FILE`
//! the state store is kept in FILE, for a real node (`pepc run` with `[state] path`
//! and as many slices) to restart from.

use pepc_mme::MmeConfig;
use pepc_store::{EmbeddedStore, Op, StateStore};
use pepc_testkit::{attach, initial_ue, pump, subscriber, Harness, SimUe};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let slices: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let keep = std::env::var_os("PEPC_KEEP_STATE").map(std::path::PathBuf::from);
    let cfg = MmeConfig {
        checkpoints: true,
        ..MmeConfig::default()
    };
    let path = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pepc-restart-timing-{}.redb", std::process::id()))
    });
    let _ = std::fs::remove_file(&path);
    let mut store = EmbeddedStore::open(&path).expect("store");

    let mut h = Harness::sliced(n + 16, cfg.clone(), slices);
    let subs: Vec<_> = (0..n)
        .map(|i| subscriber(&format!("00101{:010}", i + 1)))
        .collect();
    for c in subs.chunks(50_000) {
        h.hss.add_many(c).expect("HSS");
    }
    h.enb_setup(1, 1, 1);
    let t = Instant::now();
    // The last UE to attach is the last the background restore reaches: after the
    // restart it comes back first, by Service Request.
    let mut last = None;
    for i in 0..n {
        let mut ue = SimUe::new(&format!("00101{:010}", i + 1), i as u32 + 1);
        attach(&mut h, &mut ue, 1).expect("attach");
        if i + 1 == n {
            last = Some(ue);
        }
        if i % 4096 == 0 {
            h.sync();
            h.logs.clear();
        }
    }
    let attach_s = t.elapsed().as_secs_f64();
    // The harness kept the checkpoints as the node's store thread would get them.
    let ops: Vec<Op> = std::mem::take(&mut h.checkpoints)
        .into_iter()
        .map(|(imsi, snapshot)| Op::Put { imsi, snapshot })
        .collect();
    let bytes: usize = ops
        .iter()
        .map(|o| match o {
            Op::Put { snapshot, .. } => snapshot.len(),
            Op::Delete { .. } => 0,
        })
        .sum();
    let t = Instant::now();
    for c in ops.chunks(8192) {
        store.apply(c).expect("commit");
    }
    let write_s = t.elapsed().as_secs_f64();
    drop(ops);
    drop(h);
    drop(store);

    if keep.is_some() {
        println!(
            "{{\"ues\":{n},\"slices\":{slices},\"attach_s\":{attach_s:.2},\"checkpoint_bytes_per_ue\":{:.0},\"store_write_s\":{write_s:.2},\"kept\":{:?}}}",
            bytes as f64 / n as f64,
            path.display().to_string()
        );
        return;
    }
    assert_eq!(
        slices, 1,
        "the in-process restore is of one slice: keep the state for more"
    );
    // The restart: open, read everything, index it and serve; the restore runs a
    // chunk per round behind the signaling, as the node's control loop runs it.
    let t = Instant::now();
    let store = EmbeddedStore::open(&path).expect("reopen");
    let records = store.load_all().expect("load");
    let load_s = t.elapsed().as_secs_f64();
    let mut h2 = Harness::new(n + 16, cfg);
    h2.mme.prewarm(n);
    h2.cp.prewarm(n);
    let t = Instant::now();
    let now = h2.now;
    h2.mme.begin_restore(records, now);
    let index_s = t.elapsed().as_secs_f64();
    // Serving: an eNB sets up and the last UE's Service Request is answered.
    let t = Instant::now();
    assert!(matches!(
        h2.enb_setup(1, 1, 1),
        pepc_s1ap::msg::S1apMessage::S1SetupResponse(_)
    ));
    let mut ue = last.expect("n > 0");
    ue.enb_ue_id = 1 << 20;
    let sr = ue.service_request();
    let tmsi = ue.m_tmsi;
    let r = h2.send(1, initial_ue(&h2, &ue, sr, tmsi));
    let seen = pump(&mut h2, &mut ue, 1, r).expect("service request");
    assert_eq!(seen, ["InitialContextSetupRequest"]);
    let first_sr_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let mut out = Vec::new();
    let report = loop {
        if let Some(r) = h2.mme.restore_some(&mut h2.cp, now, 2048, &mut out) {
            break r;
        }
        out.clear();
        h2.sync();
    };
    let restore_s = t.elapsed().as_secs_f64();
    assert_eq!(h2.mme.ue_count(), n - report.failed as usize);
    println!(
        "{{\"ues\":{n},\"attach_s\":{attach_s:.2},\"checkpoint_bytes_per_ue\":{:.0},\"store_write_s\":{write_s:.2},\
         \"restart_load_s\":{load_s:.3},\"restart_index_s\":{index_s:.3},\"first_service_request_s\":{first_sr_s:.4},\
         \"serving_after_s\":{:.3},\"background_restore_s\":{restore_s:.3},\"restore_us_per_ue\":{:.2},\
         \"restored\":{},\"on_demand\":{},\"failed\":{}}}",
        bytes as f64 / n as f64,
        load_s + index_s + first_sr_s,
        restore_s * 1e6 / n as f64,
        report.restored,
        report.on_demand,
        report.failed
    );
    let _ = std::fs::remove_file(&path);
}
