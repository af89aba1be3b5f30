//! Large tables allocated zeroed, so the OS commits pages only when first touched:
//! a slice sized for millions of slots costs memory in proportion to the slots used.

use std::alloc::{alloc_zeroed, handle_alloc_error, Layout};
use std::sync::atomic::{AtomicU64, AtomicU8};

/// Types for which the all-zero bit pattern is a valid value.
///
/// # Safety
/// Implement only for types whose every field is an integer, atomic integer, bool,
/// array of those, or another `Zeroable`.
pub unsafe trait Zeroable: Sized {}

unsafe impl Zeroable for AtomicU64 {}
unsafe impl Zeroable for AtomicU8 {}
// SAFETY: atomics only.
unsafe impl Zeroable for crate::counters::UplinkLine {}
// SAFETY: atomics only.
unsafe impl Zeroable for crate::counters::DownlinkLine {}
// SAFETY: atomics only.
unsafe impl Zeroable for crate::counters::BearerDrops {}
unsafe impl Zeroable for crate::counters::RuleCounters {}
unsafe impl Zeroable for crate::counters::BearerRuleCounters {}

/// A boxed slice of `n` zeroed values, lazily committed by the OS.
pub fn zeroed_slice<T: Zeroable>(n: usize) -> Box<[T]> {
    if n == 0 || std::mem::size_of::<T>() == 0 {
        return (0..n)
            .map(|_| {
                // SAFETY: T: Zeroable.
                unsafe { std::mem::zeroed() }
            })
            .collect();
    }
    let layout = Layout::array::<T>(n).expect("table size overflows");
    // SAFETY: layout has non-zero size; all-zero is a valid T (Zeroable), and the
    // pointer/length describe exactly the allocation Box will free with this layout.
    unsafe {
        let p = alloc_zeroed(layout) as *mut T;
        if p.is_null() {
            handle_alloc_error(layout);
        }
        advise_huge_pages(p as *mut u8, layout.size());
        Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, n))
    }
}

/// Ask for `p`'s cache line ahead of its use (a hint: any address is allowed).
#[inline(always)]
pub fn prefetch<T>(p: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetch is a hint; any address is allowed.
    unsafe {
        core::arch::x86_64::_mm_prefetch(
            p as *const T as *const i8,
            core::arch::x86_64::_MM_HINT_T0,
        )
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// An empty vector with room for `n` values, its pages advised as huge before any
/// is written: for a large table filled once and then read at random.
pub fn huge_page_vec<T>(n: usize) -> Vec<T> {
    let v = Vec::with_capacity(n);
    advise_huge_pages(v.as_ptr() as *mut u8, n * std::mem::size_of::<T>());
    v
}

/// Large tables are read at random by the data path: back them with transparent huge
/// pages where the kernel allows, so a lookup costs a cache miss but rarely a TLB miss.
/// `PEPC_NO_HUGE_PAGES=1` in the environment leaves them on normal pages, to measure
/// what the advice is worth (`pepc bench dataplane`).
fn advise_huge_pages(p: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
        static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        if *OFF.get_or_init(|| std::env::var_os("PEPC_NO_HUGE_PAGES").is_some_and(|v| v == "1")) {
            return;
        }
        const HUGE: usize = 2 << 20;
        let start = (p as usize).div_ceil(HUGE) * HUGE;
        let end = (p as usize + len) / HUGE * HUGE;
        if end > start {
            // SAFETY: the range lies inside an allocation we own; madvise only changes
            // how the kernel backs it (a failure just leaves normal pages).
            unsafe {
                libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, len);
}

/// Block sizes of the heap a UE's control state is made of (contexts, keys, map
/// values, strings), for [`prewarm_heap`].
const PREWARM_BLOCKS: [usize; 9] = [16, 32, 48, 64, 96, 128, 256, 512, 1024];

/// Touch `bytes` of heap on the calling thread, in blocks of the sizes UE control
/// state uses, then free it all. An allocator that keeps freed memory for reuse (the
/// `pepc` binary's never returns it to the OS) then places the state of the UEs that
/// attach next on pages that are already faulted in: a control thread sized this
/// way at start takes no page fault every few attaches in a storm. Returns the
/// bytes touched.
pub fn prewarm_heap(bytes: usize) -> usize {
    let per_round: usize = PREWARM_BLOCKS.iter().sum();
    let rounds = bytes.div_ceil(per_round);
    let mut held: Vec<Box<[u8]>> = Vec::with_capacity(rounds * PREWARM_BLOCKS.len());
    for _ in 0..rounds {
        for &size in &PREWARM_BLOCKS {
            // Not zero: a zeroed allocation may be satisfied by untouched pages.
            held.push(std::hint::black_box(vec![0xa5u8; size].into_boxed_slice()));
        }
    }
    let touched = rounds * per_round;
    drop(std::hint::black_box(held));
    touched
}

/// Touch the unused capacity of `v` for up to `n` more elements (writes zeros into
/// it), so that the table's pages are faulted in before slots are used.
pub fn prefault_spare<T>(v: &mut Vec<T>, n: usize) {
    let spare = v.spare_capacity_mut();
    let n = n.min(spare.len());
    for slot in &mut spare[..n] {
        *slot = std::mem::MaybeUninit::zeroed();
    }
    std::hint::black_box(&v);
}

#[cfg(test)]
mod prewarm_tests {
    use super::*;

    #[test]
    fn prewarm_touches_what_it_was_asked_for() {
        assert_eq!(prewarm_heap(0), 0);
        let per_round: usize = PREWARM_BLOCKS.iter().sum();
        assert_eq!(prewarm_heap(1), per_round);
        assert!(prewarm_heap(1 << 20) >= 1 << 20);
    }

    #[test]
    fn prefault_spare_leaves_the_contents_alone() {
        let mut v: Vec<u64> = Vec::with_capacity(100);
        v.extend([1, 2, 3]);
        prefault_spare(&mut v, 1000);
        assert_eq!(v, [1, 2, 3]);
        assert!(v.capacity() >= 100);
    }
}
