//! The `pepc` binary's allocator: mimalloc, with a live-heap count that is off unless a
//! memory benchmark or test turns it on ([`count_live_heap`]). Off, each allocation
//! costs one load of a flag no thread writes (shared, never bounced between cores).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// `A` with the live-heap count: bytes allocated minus bytes freed (by layout size)
/// since [`count_live_heap`] turned it on.
pub struct Counting<A>(pub A);

// SAFETY: every call goes to `A`; the count is bookkeeping beside it.
unsafe impl<A: GlobalAlloc> GlobalAlloc for Counting<A> {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { self.0.alloc(l) };
        if COUNTING.load(Relaxed) && !p.is_null() {
            LIVE.fetch_add(l.size() as isize, Relaxed);
        }
        p
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        let p = unsafe { self.0.alloc_zeroed(l) };
        if COUNTING.load(Relaxed) && !p.is_null() {
            LIVE.fetch_add(l.size() as isize, Relaxed);
        }
        p
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { self.0.dealloc(p, l) };
        if COUNTING.load(Relaxed) {
            LIVE.fetch_sub(l.size() as isize, Relaxed);
        }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        let q = unsafe { self.0.realloc(p, l, new) };
        if COUNTING.load(Relaxed) && !q.is_null() {
            LIVE.fetch_add(new as isize - l.size() as isize, Relaxed);
        }
        q
    }
}

/// Turns the live-heap count on (once, for the rest of the process). What was
/// allocated before is not counted, and its frees are: the count is a level to
/// compare with itself later in the same process, not an absolute size.
pub fn count_live_heap() {
    COUNTING.store(true, Relaxed);
}

/// Live heap since [`count_live_heap`] (bytes), or None while the count is off.
pub fn live_heap() -> Option<i64> {
    COUNTING.load(Relaxed).then(|| LIVE.load(Relaxed) as i64)
}

/// mimalloc's `purge_delay` (`mi_option_purge_delay` in mimalloc.h v2).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long freed memory stays with the process before it goes back to the kernel
/// (mimalloc's purge delay), ms. Long enough that a storm's churn reuses what it
/// frees (no madvise, no TLB shootdown interrupting the data threads, no page fault
/// on reuse while it runs); short enough that memory freed when the storm is over
/// comes back. Never purging (as before), RSS after storms of 50,000 attaches and
/// detaches was 501 -> 555 MB over 8; with this delay 431 MB after 1 and 442 after 20
/// (`pepc bench memory --storms 20 --ues 50000 --attach-rate 8000`): ~110 MB less,
/// though still +0.53 MB a storm, beside live-heap steps not explained yet. The data
/// path's rate with it, paired over 8 rounds under 100,000 control events/s: median
/// ratio 1.02.
pub const PURGE_DELAY_MS: libc::c_long = 1000;

/// Set the allocator's purge delay to [`PURGE_DELAY_MS`]. An operator's
/// `MIMALLOC_PURGE_DELAY` (milliseconds, -1: never; mimalloc reads it at start) is
/// left to rule.
pub fn set_purge_delay() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: sets a process-wide allocator option; read by mimalloc when it purges.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) };
}

/// What mimalloc holds: (resident set, committed memory) in bytes, from
/// `mi_process_info`.
pub fn mimalloc_held() -> (u64, u64) {
    let (mut el, mut user, mut sys) = (0usize, 0usize, 0usize);
    let (mut rss, mut peak_rss, mut commit, mut peak_commit, mut faults) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    // SAFETY: every pointer is to a live local.
    unsafe {
        libmimalloc_sys::mi_process_info(
            &mut el,
            &mut user,
            &mut sys,
            &mut rss,
            &mut peak_rss,
            &mut commit,
            &mut peak_commit,
            &mut faults,
        )
    };
    (rss as u64, commit as u64)
}

/// This process's resident set (bytes), from /proc/self/statm.
pub fn rss_bytes() -> u64 {
    let page = 4096u64;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |p| p * page)
}

/// mimalloc through its plain entry points wherever the layout allows: every block it
/// hands out is aligned to 8 bytes, so a layout that asks no more needs none of the
/// aligned path's checks (the `mimalloc` crate sends every call through
/// `mi_malloc_aligned`); larger alignments still go there.
pub struct Mi;

/// The alignment mimalloc gives every block on a 64-bit target (its `MI_INTPTR_SIZE`).
const MI_ALIGN: usize = 8;

// SAFETY: each call is the mimalloc function for the layout: plain where the layout's
// alignment is at most what every mimalloc block has, aligned otherwise; frees and
// reallocations go to mimalloc, which knows every block it gave.
unsafe impl GlobalAlloc for Mi {
    #[inline]
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        use libmimalloc_sys as mi;
        if l.align() <= MI_ALIGN {
            unsafe { mi::mi_malloc(l.size()).cast() }
        } else {
            unsafe { mi::mi_malloc_aligned(l.size(), l.align()).cast() }
        }
    }
    #[inline]
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        use libmimalloc_sys as mi;
        if l.align() <= MI_ALIGN {
            unsafe { mi::mi_zalloc(l.size()).cast() }
        } else {
            unsafe { mi::mi_zalloc_aligned(l.size(), l.align()).cast() }
        }
    }
    #[inline]
    unsafe fn dealloc(&self, p: *mut u8, _: Layout) {
        unsafe { libmimalloc_sys::mi_free(p.cast()) }
    }
    #[inline]
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        use libmimalloc_sys as mi;
        if l.align() <= MI_ALIGN {
            unsafe { mi::mi_realloc(p.cast(), new).cast() }
        } else {
            unsafe { mi::mi_realloc_aligned(p.cast(), new, l.align()).cast() }
        }
    }
}
