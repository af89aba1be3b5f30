//! `pepc bench memory`: storms of attach + detach against one node in this process
//! (the demo's node: SCTP over UDP on loopback, in-memory HSS), the emulator driving
//! each storm from this thread; after each storm, once the node holds no session, the
//! live heap (the binary's counting allocator, [`crate::alloc`]), the resident set and
//! what mimalloc has committed. Memory that comes back shows as a live heap flat from
//! the first storm on; RSS beside it says what the allocator keeps.

use crate::alloc;
use crate::demo::{start_node_with, DemoError, DemoPorts};
use pepc_emulator::config::{Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Scenario};
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct MemoryOpts {
    pub storms: u32,
    pub ues: u32,
    pub attach_rate: f64,
    pub slices: usize,
    pub enbs: u32,
}

/// What one storm left behind, sampled once the node settled.
#[derive(Debug, Clone, Serialize)]
pub struct StormFigures {
    pub storm: u32,
    pub attached: u64,
    pub failed: u64,
    /// Detaches that failed (the storm's second half).
    pub detach_failed: u64,
    pub seconds: f64,
    /// Live heap (bytes, net of what was allocated before the bench began counting).
    pub live_heap_bytes: i64,
    pub rss_bytes: u64,
    /// Memory mimalloc has committed from the OS.
    pub mimalloc_commit_bytes: u64,
    /// UE contexts the slices' MMEs still hold (detached UEs' security contexts are
    /// kept, bounded, for a GUTI re-attach).
    pub ue_contexts: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemoryResult {
    pub ues: u32,
    pub slices: usize,
    pub attach_rate: f64,
    /// Before the first storm, node up and prewarmed.
    pub baseline_live_heap_bytes: i64,
    pub baseline_rss_bytes: u64,
    pub storms: Vec<StormFigures>,
    /// Live heap after the last storm against after the first, in % of the latter.
    pub live_heap_drift_pct: f64,
    /// Live heap after the last storm minus after the first (bytes).
    pub live_heap_drift_bytes: i64,
    /// RSS growth from the 2nd storm to the last, MB per storm (least squares slope).
    pub rss_mb_per_storm_after_2nd: f64,
    pub attaches: u64,
    pub failed: u64,
    pub wall_s: f64,
    /// Attach + detach cycles per second of wall time, and per CPU-second of the
    /// whole process (node and emulator alike).
    pub cycles_per_s: f64,
    pub process_cpu_s: f64,
    pub cycles_per_core_s: f64,
}

fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the struct we pass.
    #[allow(unsafe_code)]
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Least-squares slope of `ys` against 0, 1, 2, ...
fn slope(ys: &[f64]) -> f64 {
    let n = ys.len() as f64;
    if ys.len() < 2 {
        return 0.0;
    }
    let mx = (n - 1.0) / 2.0;
    let my = ys.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in ys.iter().enumerate() {
        let dx = i as f64 - mx;
        num += dx * (y - my);
        den += dx * dx;
    }
    num / den
}

/// Runs the storms. The live-heap count must be on (the `pepc` binary and the test
/// turn it on with [`alloc::count_live_heap`]); without it the heap reads 0.
pub fn run(ports: &DemoPorts, o: &MemoryOpts) -> Result<MemoryResult, DemoError> {
    let epc = start_node_with(ports, o.ues, o.slices, "")?;
    let gauges = epc.gauges.clone();
    let settle = || {
        // Detached UEs' releases and the last checkpoints: wait for no session and no
        // S1 connection, then a little more for what the threads free after them.
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until
            && gauges
                .iter()
                .any(|g| g.sessions.load(Relaxed) > 0 || g.connected.load(Relaxed) > 0)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    settle();
    let baseline_live = alloc::live_heap().unwrap_or(0);
    let baseline_rss = alloc::rss_bytes();
    let t0 = Instant::now();
    let cpu0 = process_cpu_s();
    let mut storms = Vec::new();
    let mut err = None;
    for s in 1..=o.storms {
        let ts = Instant::now();
        let ecfg = EmulatorConfig {
            enbs: o.enbs,
            progress: false,
            ..ports.emulator()
        };
        let scen = Scenario {
            ues: o.ues,
            attach_rate: o.attach_rate,
            duration_s: 0.0,
            event_rate: 0.0,
            detach_at_end: true,
            switch_off: true,
            drain_s: 0.0,
            timeout_s: 10.0,
            traffic: Traffic {
                profile: TrafficProfile::None,
                rate_pps: 0.0,
            },
            ..Scenario::default()
        };
        let report = match pepc_emulator::run(ecfg, scen) {
            Ok(r) => r,
            Err(e) => {
                err = Some(e);
                break;
            }
        };
        settle();
        let (_, commit) = alloc::mimalloc_held();
        storms.push(StormFigures {
            storm: s,
            attached: report.attached,
            failed: report.failed,
            detach_failed: report.procedures.get("detach").map_or(0, |d| d.failed),
            seconds: ts.elapsed().as_secs_f64(),
            live_heap_bytes: alloc::live_heap().unwrap_or(0),
            rss_bytes: alloc::rss_bytes(),
            mimalloc_commit_bytes: commit,
            ue_contexts: gauges.iter().map(|g| g.ues.load(Relaxed)).sum(),
        });
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let cpu = process_cpu_s() - cpu0;
    epc.stop();
    if let Some(e) = err {
        return Err(e.into());
    }
    let first = storms.first().map_or(0, |s| s.live_heap_bytes);
    let last = storms.last().map_or(0, |s| s.live_heap_bytes);
    let rss_after_2: Vec<f64> = storms
        .iter()
        .skip(1)
        .map(|s| s.rss_bytes as f64 / 1e6)
        .collect();
    let attaches: u64 = storms.iter().map(|s| s.attached).sum();
    let failed: u64 = storms.iter().map(|s| s.failed + s.detach_failed).sum();
    Ok(MemoryResult {
        ues: o.ues,
        slices: o.slices,
        attach_rate: o.attach_rate,
        baseline_live_heap_bytes: baseline_live,
        baseline_rss_bytes: baseline_rss,
        live_heap_drift_pct: (last - first) as f64 * 100.0 / (first.max(1) as f64),
        live_heap_drift_bytes: last - first,
        rss_mb_per_storm_after_2nd: slope(&rss_after_2),
        attaches,
        failed,
        wall_s,
        cycles_per_s: attaches as f64 / wall_s.max(1e-9),
        process_cpu_s: cpu,
        cycles_per_core_s: attaches as f64 / cpu.max(1e-9),
        storms,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn slope_of_a_line() {
        assert!((super::slope(&[1.0, 3.0, 5.0, 7.0]) - 2.0).abs() < 1e-9);
        assert_eq!(super::slope(&[4.0]), 0.0);
    }
}
