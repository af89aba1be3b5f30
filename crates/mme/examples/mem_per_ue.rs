//! Heap bytes and allocations that stay live per attached UE (MME, HSS cache, slice
//! control and data state), measured with a counting allocator around in-process
//! attaches (tables sized at start are not counted).
//! `cargo run --release --example mem_per_ue -p pepc-mme [N]`

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

struct Counting;
static LIVE: AtomicI64 = AtomicI64::new(0);
static BLOCKS: AtomicI64 = AtomicI64::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        BLOCKS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        BLOCKS.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20_000);
    let mut start = (0, 0);
    let r = pepc_testkit::run_inprocess_attaches_keep(n, |h, end| {
        let now = (LIVE.load(Ordering::Relaxed), BLOCKS.load(Ordering::Relaxed));
        if !end {
            start = now;
            return;
        }
        println!(
            "{{\"ues\":{n},\"live_bytes_per_ue\":{:.0},\"live_blocks_per_ue\":{:.1},\"hss_leased\":{}}}",
            (now.0 - start.0) as f64 / n as f64,
            (now.1 - start.1) as f64 / n as f64,
            h.hss.stats().leased
        );
    });
    eprintln!("{} attaches/s (one thread)", r.attaches_per_s as u64);
}
