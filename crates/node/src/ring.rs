//! Packet hand-off from the demux thread to one slice's data thread: whole batches
//! travel over a single-producer/single-consumer ring (`pepc_slice::spsc`), and the
//! emptied batches come back over a second one. A fixed set of batches circulates, so
//! nothing is allocated per packet and no lock is taken; packets move by swapping
//! `PacketBuf`s (a box pointer and a few words), never by copying bytes.
//!
//! The demux end ([`Feeder`]) stages packets into the batch it holds and ships it when
//! full (or when asked to flush a partial one). A partial batch goes only while fewer
//! than half the batches wait in the ring: at low rates every packet would otherwise
//! travel in a batch of its own, and a data thread that misses a few milliseconds
//! (descheduled) would find the ring full after `depth` packets instead of about
//! `depth / 2 * 32`. With every batch in flight, the staging batch fills and further
//! packets are refused: that is "ring full", counted by the caller. The slice end
//! ([`Drain`]) swaps a shipped batch's buffers into the data thread's own batch and
//! returns the old buffers at once.

use crate::io::PacketIo;
use crate::stats::{bump, PortCounters};
use pepc_slice::spsc::{self, Consumer, Producer};
use pepc_wire::{Batch, PacketBuf, Verdict, BATCH_SIZE};
use std::io;
use std::os::fd::RawFd;
use std::sync::Arc;

/// The demux thread's end of one slice's ring (one direction).
pub struct Feeder {
    full: Producer<Batch>,
    free: Consumer<Batch>,
    staging: Batch,
    /// Demux round in which the first packet of the staging batch arrived.
    staged_round: u64,
    /// Batches in circulation (besides the staging one).
    depth: usize,
}

/// The data thread's end.
pub struct Drain {
    full: Consumer<Batch>,
    free: Producer<Batch>,
}

/// A ring carrying up to `depth` batches of [`BATCH_SIZE`] in flight, plus the one the
/// demux is filling: `(depth + 1) * BATCH_SIZE` packets of buffering.
pub fn batch_ring(depth: usize) -> (Feeder, Drain) {
    batch_ring_sized(depth, BATCH_SIZE)
}

/// As [`batch_ring`] with `batch` packets per batch.
pub fn batch_ring_sized(depth: usize, batch: usize) -> (Feeder, Drain) {
    let depth = depth.max(1);
    // Both rings can hold every batch there is, so a push that follows our own
    // accounting never fails.
    let (full_tx, full_rx) = spsc::channel(depth + 1);
    let (mut free_tx, free_rx) = spsc::channel(depth + 1);
    for _ in 0..depth {
        let _ = free_tx.push(Batch::new(batch.max(1)));
    }
    (
        Feeder {
            full: full_tx,
            free: free_rx,
            staging: Batch::new(batch.max(1)),
            staged_round: 0,
            depth,
        },
        Drain {
            full: full_rx,
            free: free_tx,
        },
    )
}

impl Feeder {
    /// Packets waiting in the staging batch.
    #[inline]
    pub fn staged(&self) -> usize {
        self.staging.len
    }

    /// Whether a shipped batch waits for the data thread.
    #[inline]
    pub fn shipped_waiting(&self) -> bool {
        !self.full.is_empty()
    }

    /// Round in which the oldest staged packet arrived (meaningful when `staged() > 0`).
    #[inline]
    pub fn staged_round(&self) -> u64 {
        self.staged_round
    }

    /// Ship the staging batch (even partial) if a free batch is there to replace it.
    /// Returns false when nothing was shipped because every batch is in flight.
    #[inline]
    pub fn flush(&mut self) -> bool {
        if self.staging.len == 0 {
            return true;
        }
        // We are the only producer: below capacity now means the push succeeds.
        if self.full.len() >= self.full.capacity() {
            return false;
        }
        let Some(mut fresh) = self.free.pop() else {
            return false;
        };
        fresh.len = 0;
        let out = std::mem::replace(&mut self.staging, fresh);
        if let Err(back) = self.full.push(out) {
            // Unreachable by the check above; keep the packets rather than lose them.
            let fresh = std::mem::replace(&mut self.staging, back);
            drop(fresh);
            return false;
        }
        true
    }

    /// Ship a partial staging batch if fewer than half the batches wait in the ring
    /// (the data thread keeps up); otherwise it keeps filling, so a stalled data
    /// thread's ring holds mostly full batches. Returns whether nothing stays staged.
    #[inline]
    pub fn flush_partial(&mut self) -> bool {
        if self.staging.len == 0 {
            return true;
        }
        // Every batch is shipped, free, or staging: shipped ones are the ring's fill.
        if self.full.len() * 2 >= self.depth.max(2) {
            return false;
        }
        self.flush()
    }

    /// Make room for one packet: true if the staging batch has a free slot.
    #[inline]
    fn room(&mut self) -> bool {
        self.staging.len < self.staging.capacity() || self.flush()
    }

    #[inline]
    fn after_stage(&mut self, round: u64) {
        if self.staging.len == 1 {
            self.staged_round = round;
        }
        if self.staging.len == self.staging.capacity() {
            // Ship a full batch at once; if no batch is free it waits here.
            self.flush();
        }
    }

    /// Move `buf` into the ring by swapping it with an empty buffer (which `buf` then
    /// holds). False (and `buf` untouched) when the ring is full.
    #[inline]
    pub fn stage(&mut self, buf: &mut PacketBuf, round: u64) -> bool {
        if !self.room() {
            return false;
        }
        let slot = &mut self.staging.bufs[self.staging.len];
        std::mem::swap(slot, buf);
        self.staging.len += 1;
        self.after_stage(round);
        true
    }

    /// Copy `buf` into the ring (for packets that go to several slices).
    #[inline]
    pub fn stage_copy(&mut self, buf: &PacketBuf, round: u64) -> bool {
        if !self.room() {
            return false;
        }
        let slot = &mut self.staging.bufs[self.staging.len];
        if !slot.fill(buf.as_slice()) {
            return false;
        }
        slot.meta = buf.meta;
        self.staging.len += 1;
        self.after_stage(round);
        true
    }
}

impl Drain {
    /// Take the next shipped batch into `batch` (swapping buffer sets); returns how
    /// many packets it holds, 0 when nothing is waiting. `batch`'s previous buffers go
    /// back to the demux.
    #[inline]
    pub fn recv_into(&mut self, batch: &mut Batch) -> usize {
        let Some(mut got) = self.full.pop() else {
            batch.len = 0;
            return 0;
        };
        std::mem::swap(&mut batch.bufs, &mut got.bufs);
        batch.len = got.len;
        got.len = 0;
        // Cannot fail: the free ring has room for every batch in circulation.
        let _ = self.free.push(got);
        batch.len
    }

    /// Is a shipped batch waiting?
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.full.is_empty()
    }
}

/// Packets of `batch` with verdict `select`.
#[inline]
fn selected(batch: &Batch, select: Verdict) -> u64 {
    batch
        .packets()
        .iter()
        .filter(|p| p.meta.verdict == select)
        .count() as u64
}

/// Count what the pipeline asked `tx` to send and what it could not.
#[inline]
pub(crate) fn send_counted(
    tx: &mut dyn PacketIo,
    c: &PortCounters,
    batch: &Batch,
    select: Verdict,
) -> io::Result<usize> {
    let want = selected(batch, select);
    if want == 0 {
        return Ok(0);
    }
    let r = tx.send_batch(batch, select);
    let sent = *r.as_ref().unwrap_or(&0) as u64;
    bump(&c.tx_packets, sent);
    bump(&c.tx_failed, want.saturating_sub(sent));
    r
}

/// A slice data thread's port behind the demux: receives from its ring, sends on its
/// own handle of the node's socket (see [`PacketIo::try_clone_sender`]).
pub struct RingPort {
    rx: Drain,
    tx: Box<dyn PacketIo>,
    counters: Arc<PortCounters>,
}

impl RingPort {
    pub fn new(rx: Drain, tx: Box<dyn PacketIo>, counters: Arc<PortCounters>) -> Self {
        RingPort { rx, tx, counters }
    }
}

impl PacketIo for RingPort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        let n = self.rx.recv_into(batch);
        bump(&self.counters.rx_packets, n as u64);
        Ok(n)
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        send_counted(&mut *self.tx, &self.counters, batch, select)
    }
}

/// A port used directly by a data thread (no demux), counted like a [`RingPort`].
pub struct CountedPort {
    inner: Box<dyn PacketIo>,
    counters: Arc<PortCounters>,
}

impl CountedPort {
    pub fn new(inner: Box<dyn PacketIo>, counters: Arc<PortCounters>) -> Self {
        CountedPort { inner, counters }
    }
}

impl PacketIo for CountedPort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        let r = self.inner.recv_batch(batch);
        bump(&self.counters.rx_packets, *r.as_ref().unwrap_or(&0) as u64);
        r
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        send_counted(&mut *self.inner, &self.counters, batch, select)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        self.inner.poll_fd()
    }

    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        self.inner.try_clone_sender()
    }

    fn socket_drops(&self) -> Option<crate::io::SocketDropsProbe> {
        self.inner.socket_drops()
    }

    fn idle_polls(&self) -> u32 {
        self.inner.idle_polls()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(tag: u8) -> PacketBuf {
        let mut b = PacketBuf::new();
        assert!(b.fill(&[tag; 10]));
        b
    }

    #[test]
    fn packets_arrive_in_order_and_full_ring_refuses() {
        let (mut f, mut d) = batch_ring_sized(2, 4);
        // 2 batches in flight + 4 staged = 12 accepted.
        let mut accepted = 0;
        for i in 0..20u8 {
            let mut b = pkt(i);
            if f.stage(&mut b, 1) {
                accepted += 1;
                assert!(b.is_empty(), "an empty buffer came back");
            } else {
                assert_eq!(b.as_slice(), &[i; 10], "refused packet is untouched");
            }
        }
        assert_eq!(accepted, 12);
        assert_eq!(f.staged(), 4);
        let mut mine = Batch::new(4);
        let mut seen = Vec::new();
        while d.recv_into(&mut mine) > 0 {
            seen.extend(mine.packets().iter().map(|p| p.as_slice()[0]));
        }
        assert_eq!(seen, (0..8).collect::<Vec<_>>());
        assert!(f.flush());
        assert_eq!(d.recv_into(&mut mine), 4);
        assert_eq!(mine.bufs[3].as_slice(), &[11; 10]);
        // Copies leave the source intact.
        let src = pkt(99);
        assert!(f.stage_copy(&src, 2));
        assert_eq!(src.as_slice(), &[99; 10]);
        assert!(f.flush());
        assert_eq!(d.recv_into(&mut mine), 1);
        assert_eq!(mine.bufs[0].as_slice(), &[99; 10]);
        assert!(d.is_empty());
    }

    #[test]
    fn a_stalled_drain_finds_full_batches_not_one_packet_each() {
        // 8 batches of 4. Packets arriving one at a time go one per batch while the
        // drain keeps up (half the batches free); then they wait to fill a batch.
        let (mut f, mut d) = batch_ring_sized(8, 4);
        let mut accepted = 0u8;
        for i in 0..100u8 {
            let mut b = pkt(i);
            if !f.stage(&mut b, 1) {
                break;
            }
            accepted += 1;
            f.flush_partial();
        }
        // 4 partial batches of 1, 4 full ones, and a full staging batch.
        assert_eq!(accepted, 4 + 4 * 4 + 4);
        let mut mine = Batch::new(4);
        let sizes: Vec<usize> = std::iter::from_fn(|| match d.recv_into(&mut mine) {
            0 => None,
            n => Some(n),
        })
        .collect();
        assert_eq!(sizes, [1, 1, 1, 1, 4, 4, 4, 4]);
        // Drained: the staged batch goes even though it is full only by chance, and a
        // lone packet goes at once again.
        assert!(f.flush_partial());
        assert_eq!(d.recv_into(&mut mine), 4);
        let mut b = pkt(200);
        assert!(f.stage(&mut b, 2));
        assert!(f.flush_partial());
        assert_eq!(d.recv_into(&mut mine), 1);
        assert_eq!(mine.bufs[0].as_slice(), &[200; 10]);
    }

    #[test]
    fn batches_circulate_across_threads() {
        let (mut f, mut d) = batch_ring(4);
        let n = 100_000u32;
        let t = std::thread::spawn(move || {
            let mut mine = Batch::default();
            let mut next = 0u32;
            while next < n {
                if d.recv_into(&mut mine) == 0 {
                    std::hint::spin_loop();
                    continue;
                }
                for p in mine.packets() {
                    assert_eq!(p.as_slice(), &next.to_be_bytes());
                    next += 1;
                }
            }
            next
        });
        let mut b = PacketBuf::new();
        let mut i = 0u32;
        while i < n {
            b.fill(&i.to_be_bytes());
            if f.stage(&mut b, 0) {
                i += 1;
            } else {
                std::thread::yield_now();
            }
        }
        while f.staged() > 0 && !f.flush() {
            std::thread::yield_now();
        }
        assert_eq!(t.join().unwrap(), n);
    }
}
