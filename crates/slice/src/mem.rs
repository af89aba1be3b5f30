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
unsafe impl Zeroable for crate::counters::BearerCounters {}
unsafe impl Zeroable for crate::counters::RuleCounters {}

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

/// Large tables are read at random by the data path: back them with transparent huge
/// pages where the kernel allows, so a lookup costs a cache miss but rarely a TLB miss.
fn advise_huge_pages(p: *mut u8, len: usize) {
    #[cfg(target_os = "linux")]
    {
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
