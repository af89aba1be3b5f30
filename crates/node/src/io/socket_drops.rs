//! What was dropped at a port's socket before the data path saw it, or after it
//! handed a packet over: by the kernel (an AF_XDP socket's RX ring full or out of
//! frames, a UDP socket's receive buffer full) or by the port's own code (a frame the
//! XDP program redirected that is not ours, no next-hop MAC, TX ring full). These
//! losses happen below every counter of the slices, so an operator (or `pepc bench
//! io`) would otherwise see packets vanish, or only a sum of send failures.
//!
//! The socket belongs to one thread (the demux or a data thread); a
//! [`SocketDropsProbe`] lets another thread (the metrics endpoint) read the kernel's
//! counts with one `getsockopt`, and the port's own counts from atomics the owner
//! keeps, all off the hot path. The owner closes the probe before its descriptor
//! closes, so a probe never reads a reused descriptor number.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

/// Why a packet was dropped at one of our sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SocketDropReason {
    /// Kernel, AF_XDP: the socket's RX ring was full (the thread reading it fell
    /// behind).
    RxRingFull,
    /// Kernel, AF_XDP: no free frame for an arriving packet (copy mode: the fill ring
    /// was empty, its frames all waiting on the RX ring), or a packet larger than a
    /// frame.
    NoFrame,
    /// Kernel, AF_XDP: a descriptor we gave the kernel was invalid (RX or TX).
    InvalidDescriptor,
    /// Kernel socket: the receive buffer was full (or a datagram failed a check).
    SocketBufferFull,
    /// Port, AF_XDP: a frame the XDP program redirected that this port does not
    /// carry (truncated headers, a wrong length, another protocol).
    Malformed,
    /// Port, AF_XDP: the next hop's MAC is not known yet (the kernel is asked).
    NoNeighbour,
    /// Port, AF_XDP: no free TX frame or TX ring slot.
    TxRingFull,
    /// Port, AF_XDP: a packet too large for a frame.
    TooBig,
}

impl SocketDropReason {
    pub const ALL: [SocketDropReason; 8] = [
        SocketDropReason::RxRingFull,
        SocketDropReason::NoFrame,
        SocketDropReason::InvalidDescriptor,
        SocketDropReason::SocketBufferFull,
        SocketDropReason::Malformed,
        SocketDropReason::NoNeighbour,
        SocketDropReason::TxRingFull,
        SocketDropReason::TooBig,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SocketDropReason::RxRingFull => "rx_ring_full",
            SocketDropReason::NoFrame => "no_frame",
            SocketDropReason::InvalidDescriptor => "invalid_descriptor",
            SocketDropReason::SocketBufferFull => "socket_buffer_full",
            SocketDropReason::Malformed => "malformed",
            SocketDropReason::NoNeighbour => "no_neighbour",
            SocketDropReason::TxRingFull => "tx_ring_full",
            SocketDropReason::TooBig => "too_big",
        }
    }

    /// Whether the kernel dropped it (else the port's own code did).
    pub fn by_kernel(self) -> bool {
        (self as usize) < PORT_FIRST
    }
}

/// Index of the first reason counted by the port rather than the kernel.
const PORT_FIRST: usize = SocketDropReason::Malformed as usize;
const PORT_REASONS: usize = SocketDropReason::ALL.len() - PORT_FIRST;

/// Packets dropped at one socket, by reason, since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounts {
    /// The reasons this kind of socket can have (none before the first read).
    reasons: &'static [SocketDropReason],
    by_reason: [u64; SocketDropReason::ALL.len()],
    /// AF_XDP: how many times the kernel found the fill ring empty. Not a packet
    /// count (a zero-copy driver looks once per refill; in copy mode each such
    /// packet is also a `NoFrame` drop), so it is in no total: a sign that the
    /// thread returns frames too slowly.
    pub fill_ring_empty: u64,
}

impl DropCounts {
    pub fn get(&self, why: SocketDropReason) -> u64 {
        self.by_reason[why as usize]
    }

    pub(crate) fn set(&mut self, why: SocketDropReason, n: u64) {
        self.by_reason[why as usize] = n;
    }

    /// Every packet dropped, by the kernel or the port.
    pub fn total(&self) -> u64 {
        self.by_reason.iter().sum()
    }

    /// The packets the kernel dropped.
    pub fn by_kernel(&self) -> u64 {
        self.by_reason[..PORT_FIRST].iter().sum()
    }

    /// Each reason this kind of socket can have, with its count (zeros included).
    pub fn by_reason(&self) -> impl Iterator<Item = (SocketDropReason, u64)> + '_ {
        self.reasons.iter().map(|&r| (r, self.get(r)))
    }
}

/// The port's own drop counts, kept by the thread that owns the port (a single
/// writer: plain load + store, only when a packet is dropped) where a
/// [`SocketDropsProbe`] reads them.
#[derive(Debug, Default)]
pub struct PortDrops([AtomicU64; PORT_REASONS]);

impl PortDrops {
    /// Count `n` more drops for a port-level reason (owner only).
    #[inline]
    pub fn add(&self, why: SocketDropReason, n: u64) {
        debug_assert!(!why.by_kernel());
        let c = &self.0[why as usize - PORT_FIRST];
        if n != 0 {
            c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
        }
    }

    pub fn get(&self, why: SocketDropReason) -> u64 {
        debug_assert!(!why.by_kernel());
        self.0[why as usize - PORT_FIRST].load(Relaxed)
    }

    fn read_into(&self, d: &mut DropCounts) {
        for (i, c) in self.0.iter().enumerate() {
            d.by_reason[PORT_FIRST + i] = c.load(Relaxed);
        }
    }
}

/// How a probe asks the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketKind {
    /// `getsockopt(SOL_XDP, XDP_STATISTICS)`.
    Xsk,
    /// `getsockopt(SOL_SOCKET, SO_MEMINFO)`: the socket's drop count.
    Kernel,
}

impl SocketKind {
    fn reasons(self) -> &'static [SocketDropReason] {
        use SocketDropReason::*;
        match self {
            SocketKind::Xsk => &[
                RxRingFull,
                NoFrame,
                InvalidDescriptor,
                Malformed,
                NoNeighbour,
                TxRingFull,
                TooBig,
            ],
            SocketKind::Kernel => &[SocketBufferFull],
        }
    }
}

#[derive(Debug)]
struct ProbeState {
    open: Option<(RawFd, SocketKind)>,
    last: DropCounts,
}

/// Reads one socket's [`DropCounts`] from any thread. After the socket closed, it
/// gives the kernel's counts read as it closed.
#[derive(Debug, Clone)]
pub struct SocketDropsProbe {
    kernel: Arc<Mutex<ProbeState>>,
    port: Option<Arc<PortDrops>>,
}

impl SocketDropsProbe {
    pub(crate) fn new(fd: RawFd, kind: SocketKind) -> SocketDropsProbe {
        SocketDropsProbe {
            kernel: Arc::new(Mutex::new(ProbeState {
                open: Some((fd, kind)),
                last: DropCounts {
                    reasons: kind.reasons(),
                    ..DropCounts::default()
                },
            })),
            port: None,
        }
    }

    /// The same probe, with the port's own counts too.
    pub(crate) fn with_port(mut self, port: Arc<PortDrops>) -> SocketDropsProbe {
        self.port = Some(port);
        self
    }

    /// The counts now (one syscall for the kernel's; the last ones read if the
    /// socket is closed or the kernel refused).
    pub fn read(&self) -> DropCounts {
        let mut s = self.kernel.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((fd, kind)) = s.open {
            if let Ok(mut d) = read_socket(fd, kind) {
                if kind == SocketKind::Kernel {
                    // The kernel's count is 32 bits: keep ours growing past a wrap.
                    let why = SocketDropReason::SocketBufferFull;
                    d.set(why, widen32(s.last.get(why), d.get(why) as u32));
                }
                s.last = d;
            }
        }
        let mut d = s.last;
        if let Some(p) = &self.port {
            p.read_into(&mut d);
        }
        d
    }

    /// Called by the socket's owner just before its descriptor closes: keeps the
    /// final counts and stops using the descriptor.
    pub(crate) fn close(&self) {
        self.read();
        self.kernel.lock().unwrap_or_else(|e| e.into_inner()).open = None;
    }
}

/// The 64-bit count that follows `prev` when a 32-bit counter now reads `raw`
/// (it only grows, so a smaller low half means it wrapped).
fn widen32(prev: u64, raw: u32) -> u64 {
    let v = (prev & !0xffff_ffff) | u64::from(raw);
    if v < prev {
        v + (1 << 32)
    } else {
        v
    }
}

fn read_socket(fd: RawFd, kind: SocketKind) -> io::Result<DropCounts> {
    let mut d = DropCounts {
        reasons: kind.reasons(),
        ..DropCounts::default()
    };
    match kind {
        SocketKind::Xsk => {
            let s = super::afxdp::xsk::statistics_of(fd)?;
            d.set(SocketDropReason::RxRingFull, s.rx_ring_full);
            d.set(SocketDropReason::NoFrame, s.rx_dropped);
            d.set(
                SocketDropReason::InvalidDescriptor,
                s.rx_invalid_descs + s.tx_invalid_descs,
            );
            d.fill_ring_empty = s.rx_fill_ring_empty_descs;
        }
        SocketKind::Kernel => {
            d.set(SocketDropReason::SocketBufferFull, socket_drops(fd)?);
        }
    }
    Ok(d)
}

/// `SK_MEMINFO_DROPS` of `SO_MEMINFO` (linux/sock_diag.h): datagrams the socket
/// dropped (receive buffer full, failed checksum, filter).
fn socket_drops(fd: RawFd) -> io::Result<u64> {
    const SO_MEMINFO: libc::c_int = 55;
    const SK_MEMINFO_DROPS: usize = 8;
    let mut v = [0u32; 9];
    let mut len = std::mem::size_of_val(&v) as libc::socklen_t;
    // SAFETY: a live, writable array and its size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_MEMINFO,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < (SK_MEMINFO_DROPS + 1) * 4 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("SO_MEMINFO gave {len} bytes, too few for the drop count"),
        ));
    }
    Ok(u64::from(v[SK_MEMINFO_DROPS]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::{PacketIo, UdpPort};
    use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};

    #[test]
    fn a_full_receive_buffer_is_counted_per_datagram() {
        let port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let probe = port.socket_drops().expect("a UDP port has a probe");
        // The smallest receive buffer the kernel allows (it doubles and floors it).
        let fd = port.poll_fd().unwrap();
        assert!(super::super::udp::setsockopt_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            1
        ));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let sent = 2_000u64;
        for _ in 0..sent {
            tx.send_to(&[7u8; 200], port.local_addr()).unwrap();
        }
        // Nobody reads: most datagrams overflow the buffer.
        let mut got = 0u64;
        let mut batch = pepc_wire::Batch::new(32);
        let mut p = port;
        loop {
            let n = p.recv_batch(&mut batch).unwrap();
            if n == 0 {
                break;
            }
            got += n as u64;
        }
        let dropped = probe.read().get(SocketDropReason::SocketBufferFull);
        assert!(dropped > 0, "no drop counted (received {got} of {sent})");
        assert_eq!(got + dropped, sent, "every datagram received or counted");
        assert_eq!(probe.read().total(), dropped);
        assert_eq!(probe.read().by_kernel(), dropped);
        // After the port closes, the probe keeps the last counts.
        drop(p);
        assert_eq!(
            probe.read().get(SocketDropReason::SocketBufferFull),
            dropped
        );
    }

    #[test]
    fn the_port_publishes_its_own_reasons_beside_the_kernels() {
        // An AF_XDP probe on a descriptor the kernel refuses XDP_STATISTICS for: the
        // kernel's counts stay at their last value (none), the port's are read.
        let port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let own = Arc::new(PortDrops::default());
        let probe =
            SocketDropsProbe::new(port.poll_fd().unwrap(), SocketKind::Xsk).with_port(own.clone());
        own.add(SocketDropReason::NoNeighbour, 3);
        own.add(SocketDropReason::TxRingFull, 2);
        let d = probe.read();
        assert_eq!(d.get(SocketDropReason::NoNeighbour), 3);
        assert_eq!(d.get(SocketDropReason::TxRingFull), 2);
        assert_eq!((d.total(), d.by_kernel()), (5, 0));
        // Every AF_XDP reason is listed, the UDP one is not, and they add up.
        assert_eq!(d.by_reason().count(), 7);
        assert!(d
            .by_reason()
            .all(|(r, _)| r != SocketDropReason::SocketBufferFull));
        assert_eq!(d.by_reason().map(|(_, n)| n).sum::<u64>(), d.total());
        assert!(SocketDropReason::ALL
            .iter()
            .all(|r| r.by_kernel() == ((*r as usize) < PORT_FIRST)));
    }

    #[test]
    fn a_32_bit_kernel_count_keeps_growing_past_its_wrap() {
        assert_eq!(widen32(0, 0), 0);
        assert_eq!(widen32(5, 7), 7);
        assert_eq!(widen32(0xffff_fff0, 3), 0x1_0000_0003);
        assert_eq!(widen32(0x1_0000_0003, 10), 0x1_0000_000a);
        assert_eq!(widen32(0x1_0000_000a, 0x0000_000a), 0x1_0000_000a);
    }

    #[test]
    fn a_clone_for_sending_has_no_probe_of_its_own() {
        let port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let sender = port.try_clone_sender().unwrap();
        assert!(port.socket_drops().is_some());
        // The same socket: its drops are the original's, counted once.
        assert!(sender.socket_drops().is_none());
    }
}
