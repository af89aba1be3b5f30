//! `pepc bench lines`: what this machine's memory charges for the data path's one line
//! per packet, with nothing else done, at two table sizes measured in alternating
//! windows. The slice's uplink and downlink line tables are allocated as a slice of
//! `users` allocates them (the same types, sizes and huge-page advice); each packet
//! picks a user at random, and a batch is fetched the way the pipeline fetches it:
//! every line prefetched before the first is read, then each read and its counters
//! written. With `--work-ns`, each packet also spins that long, standing in for the
//! pipeline's parse, policy and QoS, to see how much of the memory's cost that work hides.
//!
//! It answers whether a gap between `pepc bench dataplane` at 1M and at 10M users is
//! the pipeline's or the memory system's: the pipeline cannot touch fewer than one
//! random line per packet when traffic spreads over all users.

use crate::paired::median;
use pepc_slice::counters::{bump, DownlinkLine, UplinkLine};
use pepc_slice::mem::{huge_page_vec, prefetch, zeroed_slice};
use pepc_slice::slice::{available_cores, pin_current_thread, SliceConfig};
use pepc_wire::BATCH_SIZE;
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// Like the paired data-path bench: each window starts with this long unmeasured.
const WARM_UP: Duration = Duration::from_millis(200);

#[derive(Debug, Clone)]
pub struct LinesOpts {
    pub users: [u32; 2],
    pub rounds: usize,
    pub seconds: f64,
    /// Downlink batches per uplink batch (Table 2: 3).
    pub dl_per_ul: u32,
    /// Busy work per packet, in ns, after its line is read (0: none).
    pub work_ns: u32,
    pub pin: bool,
    pub seed: u64,
}

impl Default for LinesOpts {
    fn default() -> Self {
        LinesOpts {
            users: [1_000_000, 10_000_000],
            rounds: 6,
            seconds: 2.0,
            dl_per_ul: 3,
            work_ns: 0,
            pin: true,
            seed: 42,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct LinesWindow {
    pub round: usize,
    pub users: u32,
    pub ns_per_packet: f64,
    pub mpps: f64,
    pub packets: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct LinesResult {
    pub users: [u32; 2],
    /// Bytes of the two line tables per size, as a slice of that many users has them.
    pub table_bytes: [u64; 2],
    /// Bytes of lines the packets touch per size (their users' lines).
    pub touched_bytes: [u64; 2],
    pub work_ns: u32,
    pub seconds_per_window: f64,
    pub rounds: usize,
    pub windows: Vec<LinesWindow>,
    /// Per size, the median over its windows.
    pub ns_per_packet_median: [f64; 2],
    pub mpps_median: [f64; 2],
    /// What the larger tables add per packet: the median over rounds of the second
    /// size's ns per packet less the first's.
    pub extra_ns_median: f64,
    /// Each round's second-size rate over its first-size rate, and their median.
    pub ratio_per_round: Vec<f64>,
    pub ratio_median: f64,
}

/// The two line tables of one slice size, and the users' indices to visit.
struct Tables {
    ul: Box<[UplinkLine]>,
    dl: Box<[DownlinkLine]>,
    idx: Vec<u32>,
    next: usize,
}

impl Tables {
    fn new(users: u32, seed: u64) -> Tables {
        let cfg = SliceConfig::for_users(users as usize);
        let slots = cfg.bearer_slots.max(cfg.ue_slots);
        let ul: Box<[UplinkLine]> = zeroed_slice(slots);
        let dl: Box<[DownlinkLine]> = zeroed_slice(slots);
        // Touch every user's lines, as attaching them does, so no window pays a
        // first-touch fault.
        for i in 0..users as usize {
            ul[i].packets.store(1, Relaxed);
            dl[i].packets.store(1, Relaxed);
        }
        // Drawn before measuring and read in order, so drawing costs no miss per
        // packet. As many as there are users: a shorter cycle would let the cache
        // keep what one cycle touches.
        let mut x = seed | 1;
        let n = (users as usize).max(BATCH_SIZE);
        let mut idx = huge_page_vec(n);
        idx.extend((0..n).map(|_| {
            // xorshift64*: uniform enough over the users, and independent of them.
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32 % users
        }));
        Tables {
            ul,
            dl,
            idx,
            next: 0,
        }
    }

    fn bytes(&self) -> u64 {
        (std::mem::size_of_val(&*self.ul) + std::mem::size_of_val(&*self.dl)) as u64
    }

    fn batch(&mut self) -> [u32; BATCH_SIZE] {
        let mut b = [0u32; BATCH_SIZE];
        for v in &mut b {
            *v = self.idx[self.next];
            self.next += 1;
            if self.next == self.idx.len() {
                self.next = 0;
            }
        }
        b
    }

    /// Run until `deadline`; returns packets and busy ns.
    fn run(&mut self, deadline: Instant, dl_per_ul: u32, work_ns: u32) -> (u64, u64) {
        let start = Instant::now();
        let mut packets = 0u64;
        let mut now_ns = 0u64;
        let spin = spin_iterations(work_ns);
        while Instant::now() < deadline {
            for _ in 0..64 {
                let b = self.batch();
                visit(&self.ul, &b, spin, |l| {
                    bump(&l.packets, 1);
                    bump(&l.bytes, 100);
                    l.last_active_ns.store(now_ns, Relaxed);
                });
                for _ in 0..dl_per_ul {
                    let b = self.batch();
                    visit(&self.dl, &b, spin, |l| {
                        bump(&l.packets, 1);
                        bump(&l.bytes, 36);
                        l.last_active_ns.store(now_ns, Relaxed);
                    });
                }
                packets += (BATCH_SIZE * (1 + dl_per_ul as usize)) as u64;
                now_ns += 1;
            }
        }
        (packets, start.elapsed().as_nanos() as u64)
    }
}

/// One batch the pipeline's way: every line prefetched before the first is read,
/// then each read and its counters written (`count`), then the packet's own work.
#[inline(always)]
fn visit<L>(t: &[L], b: &[u32; BATCH_SIZE], spin: u32, count: impl Fn(&L)) {
    for &i in b {
        prefetch(&t[i as usize]);
    }
    for &i in b {
        count(&t[i as usize]);
        work(spin);
    }
}

/// Dependent arithmetic the compiler cannot drop: roughly one cycle per iteration.
#[inline(always)]
fn work(iterations: u32) {
    let mut x = iterations as u64;
    for _ in 0..iterations {
        x = std::hint::black_box(x.wrapping_mul(3).wrapping_add(1));
    }
    std::hint::black_box(x);
}

/// Iterations of `work` that take about `ns`, calibrated on this core.
fn spin_iterations(ns: u32) -> u32 {
    if ns == 0 {
        return 0;
    }
    let n = 1_000_000u32;
    let t = Instant::now();
    work(n);
    let per = t.elapsed().as_nanos().max(1) as f64 / n as f64;
    ((ns as f64 / per).round() as u32).max(1)
}

/// Set up both sizes, then measure `rounds` rounds of one window per size.
pub fn run(o: &LinesOpts) -> Result<LinesResult, String> {
    if o.users.contains(&0) || o.rounds == 0 || o.seconds <= 0.0 {
        return Err("--users, --vs-users, --rounds and --seconds must be > 0".into());
    }
    let mut tables: Vec<Tables> = o.users.iter().map(|&u| Tables::new(u, o.seed)).collect();
    if o.pin {
        pin_current_thread(1 % available_cores().max(1));
    }
    let mut windows = Vec::new();
    let mut ns: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let mut mpps: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
    let (mut ratios, mut extras) = (Vec::new(), Vec::new());
    for round in 0..o.rounds {
        let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
        let mut w_ns = [0.0; 2];
        for i in order {
            let t = &mut tables[i];
            t.run(Instant::now() + WARM_UP, o.dl_per_ul, o.work_ns);
            let (packets, busy) = t.run(
                Instant::now() + Duration::from_secs_f64(o.seconds),
                o.dl_per_ul,
                o.work_ns,
            );
            let per = busy as f64 / packets.max(1) as f64;
            w_ns[i] = per;
            ns[i].push(per);
            mpps[i].push(1e3 / per);
            windows.push(LinesWindow {
                round,
                users: o.users[i],
                ns_per_packet: per,
                mpps: 1e3 / per,
                packets,
            });
        }
        ratios.push(w_ns[0] / w_ns[1].max(f64::MIN_POSITIVE));
        extras.push(w_ns[1] - w_ns[0]);
    }
    Ok(LinesResult {
        users: o.users,
        table_bytes: [tables[0].bytes(), tables[1].bytes()],
        touched_bytes: o.users.map(|u| {
            u as u64
                * (std::mem::size_of::<UplinkLine>() + std::mem::size_of::<DownlinkLine>()) as u64
        }),
        work_ns: o.work_ns,
        seconds_per_window: o.seconds,
        rounds: o.rounds,
        windows,
        ns_per_packet_median: [median(&ns[0]), median(&ns[1])],
        mpps_median: [median(&mpps[0]), median(&mpps[1])],
        extra_ns_median: median(&extras),
        ratio_median: median(&ratios),
        ratio_per_round: ratios,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sizes_alternate_and_touch_only_their_users() {
        let o = LinesOpts {
            users: [1_000, 5_000],
            rounds: 2,
            seconds: 0.05,
            pin: false,
            ..LinesOpts::default()
        };
        let r = run(&o).unwrap();
        let order: Vec<u32> = r.windows.iter().map(|w| w.users).collect();
        assert_eq!(order, [1_000, 5_000, 5_000, 1_000]);
        assert!(r
            .windows
            .iter()
            .all(|w| w.packets > 0 && w.ns_per_packet > 0.0));
        assert_eq!(r.ratio_per_round.len(), 2);
        // The tables are a slice's: twice the users and the spare slots, both ways.
        let cfg = SliceConfig::for_users(1_000);
        assert_eq!(r.table_bytes[0], cfg.bearer_slots as u64 * 128);
        assert_eq!(r.touched_bytes[1], 5_000 * 128);
        assert!(run(&LinesOpts { rounds: 0, ..o }).is_err());
    }

    #[test]
    fn indices_cover_the_users_and_no_more() {
        let mut t = Tables::new(100, 7);
        assert_eq!(t.idx.len(), 100, "one draw per user");
        let mut seen = [0u32; 100];
        for _ in 0..25 {
            for i in t.batch() {
                seen[i as usize] += 1;
            }
        }
        // 800 packets: the 100 draws, read in order, 8 times over; drawn with
        // replacement, about 1 - 1/e of the users are among them.
        assert!(seen.iter().all(|&c| c % 8 == 0));
        let distinct = seen.iter().filter(|&&c| c > 0).count();
        assert!((50..=80).contains(&distinct), "{distinct}");
        // Every packet counted on its own user's line, nothing beyond the users.
        let (packets, _) = t.run(Instant::now() + Duration::from_millis(5), 3, 0);
        let counted: u64 = t.ul.iter().map(|l| l.packets.load(Relaxed)).sum::<u64>()
            + t.dl.iter().map(|l| l.packets.load(Relaxed)).sum::<u64>();
        // Each line started at 1 (touched at setup).
        assert_eq!(counted, packets + 200);
        assert!(t.ul[100..].iter().all(|l| l.packets.load(Relaxed) == 0));
    }

    #[test]
    fn work_spins_about_as_long_as_asked() {
        assert_eq!(spin_iterations(0), 0);
        assert!(spin_iterations(50) >= 1);
    }
}
