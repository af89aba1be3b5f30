//! A bounded single-producer single-consumer ring: the only channel between a slice's
//! control thread and its data thread (control→data updates, data→control requests).
//! Wait-free on both sides; the consumer drains in batches between packet batches.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[repr(align(64))]
struct Padded(AtomicUsize);

struct Ring<T> {
    slots: Box<[UnsafeCell<MaybeUninit<T>>]>,
    mask: usize,
    head: Padded, // next slot to read (written by consumer)
    tail: Padded, // next slot to write (written by producer)
}

// SAFETY: each slot is written by the producer only while it is outside [head, tail)
// and read by the consumer only while inside it; the Release/Acquire pairs on head and
// tail order those accesses. T moves across threads, hence T: Send.
unsafe impl<T: Send> Sync for Ring<T> {}
unsafe impl<T: Send> Send for Ring<T> {}

impl<T> Drop for Ring<T> {
    fn drop(&mut self) {
        let head = *self.head.0.get_mut();
        let tail = *self.tail.0.get_mut();
        for i in head..tail {
            // SAFETY: slots in [head, tail) hold initialized values not yet consumed.
            unsafe { (*self.slots[i & self.mask].get()).assume_init_drop() };
        }
    }
}

pub struct Producer<T> {
    ring: Arc<Ring<T>>,
    cached_head: usize,
}

pub struct Consumer<T> {
    ring: Arc<Ring<T>>,
    cached_tail: usize,
}

/// A ring of at least `capacity` slots (rounded up to a power of two).
pub fn channel<T: Send>(capacity: usize) -> (Producer<T>, Consumer<T>) {
    let cap = capacity.max(2).next_power_of_two();
    let slots = (0..cap)
        .map(|_| UnsafeCell::new(MaybeUninit::uninit()))
        .collect::<Vec<_>>()
        .into_boxed_slice();
    let ring = Arc::new(Ring {
        slots,
        mask: cap - 1,
        head: Padded(AtomicUsize::new(0)),
        tail: Padded(AtomicUsize::new(0)),
    });
    (
        Producer {
            ring: ring.clone(),
            cached_head: 0,
        },
        Consumer {
            ring,
            cached_tail: 0,
        },
    )
}

impl<T: Send> Producer<T> {
    /// Write zeros into every free slot, so that the ring's pages are faulted in now
    /// rather than one every few pushes during its first lap (a large ring's first
    /// lap would otherwise fault on the control thread in the middle of a storm).
    pub fn prefault(&mut self) {
        let r = &*self.ring;
        let head = r.head.0.load(Ordering::Acquire);
        let tail = r.tail.0.load(Ordering::Relaxed);
        let free = r.mask + 1 - (tail - head);
        for i in tail..tail + free {
            // SAFETY: slots from tail up to head + capacity are outside [head, tail):
            // the consumer does not read them and only this producer writes them. A
            // MaybeUninit is overwritten without dropping anything.
            unsafe { *r.slots[i & r.mask].get() = MaybeUninit::zeroed() };
        }
    }

    /// Enqueue, or give the value back when the ring is full.
    #[inline]
    pub fn push(&mut self, v: T) -> Result<(), T> {
        let r = &*self.ring;
        let tail = r.tail.0.load(Ordering::Relaxed);
        if tail - self.cached_head > r.mask {
            self.cached_head = r.head.0.load(Ordering::Acquire);
            if tail - self.cached_head > r.mask {
                return Err(v);
            }
        }
        // SAFETY: slot `tail` is outside [head, tail): the consumer does not touch it.
        unsafe { (*r.slots[tail & r.mask].get()).write(v) };
        r.tail.0.store(tail + 1, Ordering::Release);
        Ok(())
    }

    pub fn len(&self) -> usize {
        let r = &*self.ring;
        r.tail.0.load(Ordering::Relaxed) - r.head.0.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.ring.mask + 1
    }
}

impl<T: Send> Consumer<T> {
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        let r = &*self.ring;
        let head = r.head.0.load(Ordering::Relaxed);
        if head == self.cached_tail {
            self.cached_tail = r.tail.0.load(Ordering::Acquire);
            if head == self.cached_tail {
                return None;
            }
        }
        // SAFETY: slot `head` is inside [head, tail): initialized by the producer.
        let v = unsafe { (*r.slots[head & r.mask].get()).assume_init_read() };
        r.head.0.store(head + 1, Ordering::Release);
        Some(v)
    }

    /// Is anything waiting? (one Acquire load; used to skip the update stage cheaply)
    #[inline]
    pub fn is_empty(&self) -> bool {
        let r = &*self.ring;
        r.head.0.load(Ordering::Relaxed) == r.tail.0.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_and_full() {
        let (mut p, mut c) = channel::<u32>(4);
        for i in 0..4 {
            p.push(i).unwrap();
        }
        assert_eq!(p.push(9), Err(9));
        assert_eq!(c.pop(), Some(0));
        p.push(4).unwrap();
        assert_eq!(
            (1..5).map(|_| c.pop().unwrap()).collect::<Vec<_>>(),
            [1, 2, 3, 4]
        );
        assert_eq!(c.pop(), None);
    }

    #[test]
    fn threads_deliver_everything_in_order() {
        let (mut p, mut c) = channel::<u64>(64);
        let n = 200_000u64;
        let t = std::thread::spawn(move || {
            for i in 0..n {
                let mut v = i;
                while let Err(back) = p.push(v) {
                    v = back;
                    std::hint::spin_loop();
                }
            }
        });
        let mut expect = 0;
        while expect < n {
            if let Some(v) = c.pop() {
                assert_eq!(v, expect);
                expect += 1;
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn drops_unconsumed_values() {
        let (mut p, c) = channel::<Arc<()>>(8);
        let a = Arc::new(());
        p.push(a.clone()).unwrap();
        p.push(a.clone()).unwrap();
        drop(p);
        drop(c);
        assert_eq!(Arc::strong_count(&a), 1);
    }

    #[test]
    fn prefault_keeps_what_is_queued() {
        let (mut p, mut c) = channel::<Arc<u32>>(8);
        let a = Arc::new(7);
        for _ in 0..5 {
            p.push(a.clone()).unwrap();
        }
        assert_eq!(*c.pop().unwrap(), 7);
        assert_eq!(*c.pop().unwrap(), 7);
        // Three queued, wrapping: prefault must write only the five free slots.
        p.prefault();
        for _ in 0..5 {
            p.push(a.clone()).unwrap();
        }
        assert!(p.push(a.clone()).is_err());
        let mut n = 0;
        while let Some(v) = c.pop() {
            assert_eq!(*v, 7);
            n += 1;
        }
        assert_eq!(n, 8);
        assert_eq!(Arc::strong_count(&a), 1);
    }
}
