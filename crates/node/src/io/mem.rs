//! In-memory ports for the benchmark: a generator that fills batches from a closure and
//! a sink that counts what the pipeline emits. Neither allocates per packet.

use super::{sys::now_ns, PacketIo};
use pepc_wire::{Batch, PacketBuf, Verdict};
use std::io;

/// Fills one buffer given its sequence number (0, 1, 2, ...). The buffer has been reset.
pub type FillFn = Box<dyn FnMut(&mut PacketBuf, u64) + Send>;

/// Produces packets on every `recv_batch` until its budget (if any) is spent.
pub struct MemGenerator {
    fill: FillFn,
    next_seq: u64,
    budget: Option<u64>,
}

impl MemGenerator {
    /// `budget`: total packets to produce; `None` for an endless stream.
    pub fn new(fill: FillFn, budget: Option<u64>) -> Self {
        MemGenerator {
            fill,
            next_seq: 0,
            budget,
        }
    }

    /// Packets produced so far (also the next sequence number).
    pub fn generated(&self) -> u64 {
        self.next_seq
    }

    /// Packets left in the budget; `None` when unlimited.
    pub fn remaining(&self) -> Option<u64> {
        self.budget.map(|b| b.saturating_sub(self.next_seq))
    }

    pub fn is_exhausted(&self) -> bool {
        self.remaining() == Some(0)
    }
}

impl PacketIo for MemGenerator {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        let mut n = batch.capacity();
        if let Some(left) = self.remaining() {
            n = n.min(usize::try_from(left).unwrap_or(usize::MAX));
        }
        // One clock read per batch: packets of a burst arrive together, as from a NIC.
        let now = now_ns();
        for buf in &mut batch.bufs[..n] {
            buf.reset();
            (self.fill)(buf, self.next_seq);
            buf.meta.rx_ns = now;
            self.next_seq += 1;
        }
        batch.len = n;
        Ok(n)
    }

    /// A generator has nowhere to send.
    fn send_batch(&mut self, _batch: &Batch, _select: Verdict) -> io::Result<usize> {
        Ok(0)
    }
}

/// Packets and bytes counted for one verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerdictCount {
    pub packets: u64,
    pub bytes: u64,
}

/// Counts packets sent to it per verdict; optionally keeps copies of the last N (tests).
pub struct MemSink {
    counts: [VerdictCount; 4],
    /// Ring of preallocated buffers; `kept` of them are valid, oldest at `ring_next`
    /// once the ring has wrapped.
    ring: Vec<PacketBuf>,
    ring_next: usize,
    kept: usize,
}

fn verdict_index(v: Verdict) -> usize {
    match v {
        Verdict::Drop => 0,
        Verdict::ToS1u => 1,
        Verdict::ToSgi => 2,
        Verdict::Consumed => 3,
    }
}

impl Default for MemSink {
    fn default() -> Self {
        Self::new(0)
    }
}

impl MemSink {
    /// `keep_last`: how many of the most recent packets to keep copies of (0 = none).
    /// All buffers are allocated here, none while sending.
    pub fn new(keep_last: usize) -> Self {
        MemSink {
            counts: [VerdictCount::default(); 4],
            ring: (0..keep_last).map(|_| PacketBuf::new()).collect(),
            ring_next: 0,
            kept: 0,
        }
    }

    pub fn count(&self, v: Verdict) -> VerdictCount {
        self.counts[verdict_index(v)]
    }

    /// Sum over all verdicts.
    pub fn total(&self) -> VerdictCount {
        self.counts
            .iter()
            .fold(VerdictCount::default(), |a, c| VerdictCount {
                packets: a.packets + c.packets,
                bytes: a.bytes + c.bytes,
            })
    }

    /// Kept packets, oldest first.
    pub fn kept(&self) -> impl Iterator<Item = &PacketBuf> {
        let cap = self.ring.len();
        let first = if self.kept < cap { 0 } else { self.ring_next };
        (0..self.kept).map(move |i| &self.ring[(first + i) % cap])
    }

    /// Zero the counters and forget kept packets.
    pub fn reset(&mut self) {
        self.counts = [VerdictCount::default(); 4];
        self.ring_next = 0;
        self.kept = 0;
    }
}

impl PacketIo for MemSink {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        batch.len = 0;
        Ok(0)
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        let mut n = 0;
        let c = &mut self.counts[verdict_index(select)];
        for p in batch.packets().iter().filter(|p| p.meta.verdict == select) {
            c.packets += 1;
            c.bytes += p.len() as u64;
            n += 1;
            if !self.ring.is_empty() {
                let slot = &mut self.ring[self.ring_next];
                // Any packet in a batch fits a fresh buffer, so fill cannot fail here.
                slot.fill(p.as_slice());
                slot.meta = p.meta;
                self.ring_next = (self.ring_next + 1) % self.ring.len();
                self.kept = (self.kept + 1).min(self.ring.len());
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn gen(budget: Option<u64>) -> MemGenerator {
        MemGenerator::new(
            Box::new(|b: &mut PacketBuf, seq: u64| {
                let len = 20 + (seq % 7) as usize;
                let mut bytes = [0u8; 32];
                bytes[..8].copy_from_slice(&seq.to_be_bytes());
                assert!(b.fill(&bytes[..len]));
                b.meta.peer = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), seq as u16);
            }),
            budget,
        )
    }

    #[test]
    fn generator_numbers_packets_and_respects_budget() {
        let mut g = gen(Some(70));
        let mut batch = Batch::new(32);
        let mut seen = Vec::new();
        loop {
            let n = g.recv_batch(&mut batch).unwrap();
            assert_eq!(n, batch.len);
            if n == 0 {
                break;
            }
            for p in batch.packets() {
                let seq = u64::from_be_bytes(p.as_slice()[..8].try_into().unwrap());
                assert_eq!(p.len(), 20 + (seq % 7) as usize);
                assert_eq!(p.meta.peer.port(), seq as u16);
                assert!(p.meta.rx_ns > 0);
                assert_eq!(p.meta.verdict, Verdict::Drop);
                seen.push(seq);
            }
        }
        assert_eq!(seen, (0..70).collect::<Vec<_>>());
        assert!(g.is_exhausted());
        assert_eq!(g.generated(), 70);
        assert_eq!(g.send_batch(&batch, Verdict::ToS1u).unwrap(), 0);
    }

    #[test]
    fn unlimited_generator_fills_whole_batches() {
        let mut g = gen(None);
        let mut batch = Batch::new(32);
        for _ in 0..3 {
            assert_eq!(g.recv_batch(&mut batch).unwrap(), 32);
        }
        assert_eq!(g.remaining(), None);
        assert_eq!(g.generated(), 96);
    }

    #[test]
    fn clock_is_monotonic() {
        let a = now_ns();
        let b = now_ns();
        assert!(a > 0 && b >= a);
    }

    #[test]
    fn sink_counts_selected_verdict_and_keeps_last() {
        let mut g = gen(Some(10));
        let mut batch = Batch::new(32);
        g.recv_batch(&mut batch).unwrap();
        for (i, p) in batch.packets_mut().iter_mut().enumerate() {
            p.meta.verdict = if i % 2 == 0 {
                Verdict::ToS1u
            } else {
                Verdict::ToSgi
            };
        }
        let mut sink = MemSink::new(3);
        assert_eq!(sink.send_batch(&batch, Verdict::ToS1u).unwrap(), 5);
        assert_eq!(sink.send_batch(&batch, Verdict::ToSgi).unwrap(), 5);
        let even_bytes: u64 = (0..10).step_by(2).map(|s| 20 + s % 7).sum();
        let odd_bytes: u64 = (1..10).step_by(2).map(|s| 20 + s % 7).sum();
        assert_eq!(
            sink.count(Verdict::ToS1u),
            VerdictCount {
                packets: 5,
                bytes: even_bytes
            }
        );
        assert_eq!(sink.count(Verdict::ToSgi).bytes, odd_bytes);
        assert_eq!(sink.count(Verdict::Drop), VerdictCount::default());
        assert_eq!(sink.total().packets, 10);
        // Last three sent: the ToSgi pass saw 1,3,5,7,9.
        let kept: Vec<u64> = sink
            .kept()
            .map(|p| u64::from_be_bytes(p.as_slice()[..8].try_into().unwrap()))
            .collect();
        assert_eq!(kept, vec![5, 7, 9]);
        assert!(sink.kept().all(|p| p.meta.verdict == Verdict::ToSgi));
        sink.reset();
        assert_eq!(sink.total(), VerdictCount::default());
        assert_eq!(sink.kept().count(), 0);
        assert_eq!(sink.recv_batch(&mut batch).unwrap(), 0);
        assert_eq!(batch.len, 0);
    }

    #[test]
    fn sink_without_ring_keeps_nothing() {
        let mut batch = Batch::new(4);
        batch.len = 2;
        batch.bufs[0].meta.verdict = Verdict::Drop;
        batch.bufs[1].meta.verdict = Verdict::Drop;
        let mut sink = MemSink::default();
        assert_eq!(sink.send_batch(&batch, Verdict::Drop).unwrap(), 2);
        assert_eq!(sink.kept().count(), 0);
    }
}
