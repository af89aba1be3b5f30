//! `pepc bench dataplane --vs-users N --rounds R`: how the data path's rate holds as
//! users grow, measured so that a shared machine's drift cannot decide it. Two slices
//! of different sizes are set up in one process, then measured in alternating
//! windows (A B, B A, A B, ...), each under the same signaling. Runs of the two sizes
//! in separate processes, minutes apart, differed by a third on this VM from the
//! host alone; windows a second apart share its mood.

use crate::dataplane::{DataplaneOpts, Design, PepcRig, START_BIT};
use pepc_slice::slice::available_cores;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Every window starts with this long unmeasured, so the slice's lines and page
/// walks of the other size are gone from the caches before counting.
const WARM_UP: Duration = Duration::from_millis(200);

#[derive(Debug, Clone, Serialize)]
pub struct PairedWindow {
    pub round: usize,
    pub users: u32,
    pub mpps_per_core: f64,
    pub mpps_wall_per_core: f64,
    pub latency_ns_p50: u64,
    pub latency_ns_p99: u64,
    pub packets: u64,
    pub signaling_achieved_per_s: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PairedResult {
    pub design: Design,
    pub signaling_per_s: u64,
    pub seconds_per_window: f64,
    pub settle_seconds: f64,
    pub rounds: usize,
    /// The two sizes: `users[1]`'s rate is compared with `users[0]`'s.
    pub users: [u32; 2],
    pub windows: Vec<PairedWindow>,
    /// Per size, the median over its windows.
    pub mpps_per_core_median: [f64; 2],
    /// Per size, packets its data path dropped over the whole run (0 expected).
    pub drops: [u64; 2],
    /// Each round's `users[1]` rate over its `users[0]` rate, and their median.
    pub ratio_per_round: Vec<f64>,
    pub ratio_median: f64,
}

pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Set up `o.users` and `vs_users`, wait `o.settle_s`, then measure `rounds` rounds of
/// one window each.
pub fn run(o: &DataplaneOpts, vs_users: u32, rounds: usize) -> Result<PairedResult, String> {
    if !matches!(
        o.design,
        Design::Default | Design::Unbatched | Design::OneTable
    ) {
        return Err(
            "--vs-users compares our design's slices (default, unbatched, one-table)".into(),
        );
    }
    if o.data_cores != 1 {
        return Err("--vs-users measures one data core".into());
    }
    if o.users == 0 || vs_users == 0 || rounds == 0 {
        return Err("--users, --vs-users and --rounds must be > 0".into());
    }
    let sizes = [o.users, vs_users];
    let mut rigs = Vec::new();
    for &users in &sizes {
        let mut o2 = o.clone();
        o2.users = users;
        rigs.push(PepcRig::new(&o2)?);
    }
    std::thread::sleep(Duration::from_secs_f64(o.settle_s.max(0.0)));
    let cores = available_cores();
    let (ctrl_core, data_core) = if o.pin {
        (Some(0), Some(1 % cores.max(1)))
    } else {
        (None, None)
    };
    let mut windows = Vec::new();
    // Each size's rates by index, not by user count: the two may be equal (an A/A run
    // shows the machine's own spread).
    let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let mut rate = [0.0; 2];
        // Alternate which size goes first, so a trend over the run falls on both.
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        for i in order {
            let mut o2 = o.clone();
            o2.users = sizes[i];
            let rig = &mut rigs[i];
            let events = Arc::new(AtomicU64::new(0));
            for (secs, measured) in [(WARM_UP.as_secs_f64(), false), (o.seconds, true)] {
                let stop = Arc::new(AtomicBool::new(false));
                let timer = {
                    let stop = stop.clone();
                    std::thread::spawn(move || {
                        std::thread::sleep(Duration::from_secs_f64(secs));
                        stop.store(true, Ordering::Relaxed);
                    })
                };
                events.store(0, Ordering::Relaxed);
                let st = rig.window(&o2, ctrl_core, data_core, &stop, None, &events);
                let _ = timer.join();
                let st = st?;
                if !measured {
                    continue;
                }
                let wall_s = st.wall_ns.max(1) as f64 / 1e9;
                let w = PairedWindow {
                    round,
                    users: sizes[i],
                    mpps_per_core: st.packets as f64 / st.busy_ns.max(1) as f64 * 1e3,
                    mpps_wall_per_core: st.packets as f64 / st.wall_ns.max(1) as f64 * 1e3,
                    latency_ns_p50: st.hist.quantile(0.5),
                    latency_ns_p99: st.hist.quantile(0.99),
                    packets: st.packets,
                    signaling_achieved_per_s: (events.load(Ordering::Relaxed) & !START_BIT) as f64
                        / wall_s,
                };
                rate[i] = w.mpps_per_core;
                rates[i].push(w.mpps_per_core);
                windows.push(w);
            }
        }
        ratios.push(rate[1] / rate[0].max(f64::MIN_POSITIVE));
    }
    Ok(PairedResult {
        design: o.design,
        signaling_per_s: o.signaling,
        seconds_per_window: o.seconds,
        settle_seconds: o.settle_s,
        rounds,
        users: sizes,
        mpps_per_core_median: [median(&rates[0]), median(&rates[1])],
        drops: [rigs[0].drops(), rigs[1].drops()],
        ratio_median: median(&ratios),
        ratio_per_round: ratios,
        windows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn two_sizes_alternate_and_each_window_forwards() {
        let o = DataplaneOpts {
            users: 2_000,
            signaling: 20_000,
            seconds: 0.2,
            pin: false,
            ..DataplaneOpts::default()
        };
        let r = run(&o, 20_000, 2).unwrap();
        assert_eq!(r.users, [2_000, 20_000]);
        let order: Vec<u32> = r.windows.iter().map(|w| w.users).collect();
        assert_eq!(order, [2_000, 20_000, 20_000, 2_000]);
        for w in &r.windows {
            assert!(w.packets > 0 && w.mpps_per_core > 0.0, "{w:?}");
            // The signaling runs in every window, at its rate, across windows.
            assert!(w.signaling_achieved_per_s > 5_000.0, "{w:?}");
        }
        assert_eq!(r.ratio_per_round.len(), 2);
        assert_eq!(r.drops, [0, 0]);
        // The same size twice (an A/A run): each keeps its own windows.
        let aa = run(&o, 2_000, 1).unwrap();
        assert_eq!(aa.windows.len(), 2);
        assert!(aa.mpps_per_core_median.iter().all(|&m| m > 0.0));
        assert!(r.ratio_median > 0.0);
        let e = run(&o, 20_000, 0).unwrap_err();
        assert!(e.contains("--rounds"), "{e}");
    }
}
