//! Packet buffers for batch processing. A batch owns its buffers for its whole life:
//! receive fills them, the pipeline rewrites them in place (headroom lets encapsulation
//! prepend headers without a copy) and transmit reads them, so nothing is allocated per
//! packet.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Bytes per buffer: a 1500-byte inner packet plus GTP-U/UDP/IP encapsulation fits.
pub const BUF_SIZE: usize = 2048;
/// Room kept in front of received data so a GTP-U header (and, for raw output, outer
/// IPv4/UDP) can be prepended in place.
pub const HEADROOM: usize = 128;
/// Packets per batch (the PEPC data thread syncs control updates every 32 packets).
pub const BATCH_SIZE: usize = 32;

/// Where the pipeline decided a packet goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verdict {
    /// Not yet processed / dropped (the drop reason is counted where it was decided).
    #[default]
    Drop,
    /// Send on S1-U (UDP 2152) to `meta.peer`.
    ToS1u,
    /// Send on SGi (an IP packet toward the PDN).
    ToSgi,
    /// Taken out of the batch (e.g. copied into a per-UE buffer awaiting promotion).
    Consumed,
}

/// Per-packet metadata carried beside the bytes.
#[derive(Debug, Clone, Copy)]
pub struct PacketMeta {
    /// Received: the sender's address. To transmit on S1-U: the destination.
    pub peer: SocketAddrV4,
    /// Receive timestamp (ns, monotonic, from the I/O layer) for latency measurement.
    pub rx_ns: u64,
    pub verdict: Verdict,
    /// The bearer slot the data path forwarded the packet on ([`NO_BEARER`]: none, e.g.
    /// path management): the egress scheduler finds its class from it only when the
    /// egress is congested, so an uncongested packet costs one store.
    pub bearer: u32,
}

/// [`PacketMeta::bearer`] of a packet not forwarded on a bearer.
pub const NO_BEARER: u32 = u32::MAX;

impl Default for PacketMeta {
    fn default() -> Self {
        PacketMeta {
            peer: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
            rx_ns: 0,
            verdict: Verdict::Drop,
            bearer: NO_BEARER,
        }
    }
}

/// One packet: fixed storage with a movable window `[start, start+len)`.
pub struct PacketBuf {
    data: Box<[u8; BUF_SIZE]>,
    start: usize,
    len: usize,
    pub meta: PacketMeta,
}

impl Default for PacketBuf {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for PacketBuf {
    fn clone(&self) -> Self {
        let mut b = PacketBuf::new();
        b.data.copy_from_slice(&self.data[..]);
        b.start = self.start;
        b.len = self.len;
        b.meta = self.meta;
        b
    }
}

impl std::fmt::Debug for PacketBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketBuf")
            .field("len", &self.len)
            .field("meta", &self.meta)
            .finish()
    }
}

impl PacketBuf {
    pub fn new() -> Self {
        PacketBuf {
            data: Box::new([0u8; BUF_SIZE]),
            start: HEADROOM,
            len: 0,
            meta: PacketMeta::default(),
        }
    }

    /// Empty the buffer and restore the default headroom.
    #[inline]
    pub fn reset(&mut self) {
        self.start = HEADROOM;
        self.len = 0;
        self.meta = PacketMeta::default();
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    pub fn headroom(&self) -> usize {
        self.start
    }

    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.data[self.start..self.start + self.len]
    }

    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data[self.start..self.start + self.len]
    }

    /// The whole writable area after the default headroom, for receive calls; follow
    /// with [`PacketBuf::set_received`].
    #[inline]
    pub fn rx_area(&mut self) -> &mut [u8] {
        &mut self.data[HEADROOM..]
    }

    /// Mark `len` bytes written into [`PacketBuf::rx_area`] as the packet.
    #[inline]
    pub fn set_received(&mut self, len: usize) {
        self.start = HEADROOM;
        self.len = len.min(BUF_SIZE - HEADROOM);
    }

    /// Replace the contents with `bytes` (at the default headroom). Returns false and
    /// leaves the buffer empty if `bytes` does not fit.
    pub fn fill(&mut self, bytes: &[u8]) -> bool {
        self.start = HEADROOM;
        if bytes.len() > BUF_SIZE - HEADROOM {
            self.len = 0;
            return false;
        }
        self.data[HEADROOM..HEADROOM + bytes.len()].copy_from_slice(bytes);
        self.len = bytes.len();
        true
    }

    /// Grow the packet at the front by `n` bytes and return them for writing.
    #[inline]
    pub fn prepend(&mut self, n: usize) -> Option<&mut [u8]> {
        if n > self.start {
            return None;
        }
        self.start -= n;
        self.len += n;
        Some(&mut self.data[self.start..self.start + n])
    }

    /// Drop `n` bytes from the front (decapsulation).
    #[inline]
    pub fn strip(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.start += n;
        self.len -= n;
        true
    }

    /// Cut the packet to `len` bytes (e.g. to the IP total length).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len {
            self.len = len;
        }
    }
}

/// A fixed set of buffers processed together. `len` of them hold packets.
pub struct Batch {
    pub bufs: Vec<PacketBuf>,
    pub len: usize,
}

impl Default for Batch {
    fn default() -> Self {
        Self::new(BATCH_SIZE)
    }
}

impl Batch {
    pub fn new(capacity: usize) -> Self {
        Batch {
            bufs: (0..capacity).map(|_| PacketBuf::new()).collect(),
            len: 0,
        }
    }

    #[inline]
    pub fn capacity(&self) -> usize {
        self.bufs.len()
    }

    #[inline]
    pub fn packets(&self) -> &[PacketBuf] {
        &self.bufs[..self.len]
    }

    #[inline]
    pub fn packets_mut(&mut self) -> &mut [PacketBuf] {
        &mut self.bufs[..self.len]
    }

    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prepend_and_strip_move_the_window() {
        let mut b = PacketBuf::new();
        assert!(b.fill(&[1, 2, 3]));
        b.prepend(2).unwrap().copy_from_slice(&[9, 8]);
        assert_eq!(b.as_slice(), &[9, 8, 1, 2, 3]);
        assert!(b.strip(2));
        assert_eq!(b.as_slice(), &[1, 2, 3]);
        assert!(!b.strip(4));
        assert!(b.prepend(HEADROOM + 1).is_none());
    }

    #[test]
    fn fill_rejects_oversize() {
        let mut b = PacketBuf::new();
        assert!(!b.fill(&vec![0u8; BUF_SIZE]));
        assert!(b.is_empty());
    }
}
