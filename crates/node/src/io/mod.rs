//! Packet I/O behind one interface. The data thread calls `recv_batch` to fill a batch
//! and `send_batch` to transmit the packets whose verdict names this port. Backends:
//! in-memory generator/sink (benchmarks), UDP with recvmmsg/sendmmsg (S1-U), TUN (SGi),
//! and a UDP sink for SGi where a TUN device cannot be created.

use pepc_wire::{Batch, Verdict};
use std::io;

/// A batch-oriented packet port.
pub trait PacketIo: Send {
    /// Receive up to `batch.capacity()` packets without blocking; sets `batch.len` and
    /// returns it (0 when nothing is waiting).
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize>;
    /// Transmit every packet in `batch.packets()` whose `meta.verdict == select`.
    /// Returns how many were sent.
    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize>;
}
