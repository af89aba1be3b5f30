//! What fetching a packet's state costs on this machine, apart from everything else
//! the data path does: random slots of N users, each "packet" prefetching its lines
//! 20 packets ahead and then updating one word in each. Three layouts:
//! - `one`: one 64-byte line per packet, lines packed (the slice's layout: one table
//!   per direction, a packet touches one line);
//! - `apart`: two lines in two tables (a UE table and a bearer table);
//! - `pair`: two lines side by side, 128-byte aligned;
//! - `one_of_pair`: one line of such a pair.
//!
//! It shows the floor under `pepc bench dataplane` at 1M and 10M users: a host whose
//! L3 holds 1M users' lines but not 10M's pays the DRAM difference per line.
//! `cargo run --release --example line_fetch -p pepc-bench [-- USERS...]`

use pepc_slice::mem::zeroed_slice;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

const LAG: usize = 20;
const PACKETS: usize = 1 << 25;

#[inline(always)]
fn prefetch(p: &AtomicU64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint; any address is allowed.
    unsafe {
        core::arch::x86_64::_mm_prefetch(p as *const AtomicU64 as *const i8, 3)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[inline(always)]
fn touch(w: &AtomicU64) {
    w.store(w.load(Relaxed).wrapping_add(1), Relaxed);
}

/// ns per packet for `lines_of(slot)` (word indices into `t`, 8 words per line).
fn run(t: &[AtomicU64], idx: &[u32], lines_of: impl Fn(usize) -> [Option<usize>; 2]) -> f64 {
    let mask = idx.len() - 1;
    let t0 = Instant::now();
    for k in 0..PACKETS {
        for w in lines_of(idx[k & mask] as usize).into_iter().flatten() {
            prefetch(&t[w]);
        }
        if k >= LAG {
            for w in lines_of(idx[(k - LAG) & mask] as usize)
                .into_iter()
                .flatten()
            {
                touch(&t[w]);
            }
        }
    }
    t0.elapsed().as_nanos() as f64 / PACKETS as f64
}

fn main() {
    let users: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let users = if users.is_empty() {
        vec![1_000_000, 10_000_000]
    } else {
        users
    };
    for n in users {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let idx: Vec<u32> = (0..1 << 20)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed % n as u64) as u32
            })
            .collect();
        // Words: 8 per line. `one` uses n lines; `apart` 2n (UE table, then bearer
        // table); `pair` 2n interleaved. Touch every page first so no run pays faults.
        let t: Box<[AtomicU64]> = zeroed_slice(n * 16 + 16);
        let base = (16 - (t.as_ptr() as usize / 8) % 16) % 16; // 128-byte alignment
        for w in t.iter().step_by(512) {
            w.store(1, Relaxed);
        }
        let one = run(&t, &idx, |s| [Some(base + s * 8), None]);
        let apart = run(&t, &idx, |s| [Some(base + s * 8), Some(base + (n + s) * 8)]);
        let pair = run(&t, &idx, |s| [Some(base + s * 16), Some(base + s * 16 + 8)]);
        let one_of_pair = run(&t, &idx, |s| [Some(base + s * 16 + (s & 1) * 8), None]);
        println!(
            "{{\"users\":{n},\"ns_per_packet\":{{\"one\":{one:.1},\"apart\":{apart:.1},\"pair\":{pair:.1},\"one_of_pair\":{one_of_pair:.1}}}}}"
        );
    }
}
