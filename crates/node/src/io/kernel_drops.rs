//! What the kernel dropped at a port's socket before the data path saw it: an AF_XDP
//! socket's RX ring full or fill ring empty, a UDP socket's receive buffer full. These
//! losses happen below every counter of ours, so an operator (or `pepc bench io`)
//! would otherwise see packets vanish with no drop counted anywhere.
//!
//! The socket belongs to one thread (the demux or a data thread); a
//! [`KernelDropsProbe`] lets another thread (the metrics endpoint) read the kernel's
//! counts with one `getsockopt`, off the hot path. The owner closes the probe before
//! its descriptor closes, so a probe never reads a reused descriptor number.

use std::io;
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex};

/// Why the kernel dropped packets at one of our sockets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelDropReason {
    /// AF_XDP: the socket's RX ring was full (the thread reading it fell behind).
    RxRingFull,
    /// AF_XDP: no free frame for an arriving packet (copy mode: the fill ring was
    /// empty, its frames all waiting on the RX ring), or a packet larger than a frame.
    NoFrame,
    /// AF_XDP: a descriptor we gave the kernel was invalid (RX or TX).
    InvalidDescriptor,
    /// Kernel socket: the receive buffer was full (or a datagram failed a check).
    SocketBufferFull,
}

impl KernelDropReason {
    pub const ALL: [KernelDropReason; 4] = [
        KernelDropReason::RxRingFull,
        KernelDropReason::NoFrame,
        KernelDropReason::InvalidDescriptor,
        KernelDropReason::SocketBufferFull,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            KernelDropReason::RxRingFull => "rx_ring_full",
            KernelDropReason::NoFrame => "no_frame",
            KernelDropReason::InvalidDescriptor => "invalid_descriptor",
            KernelDropReason::SocketBufferFull => "socket_buffer_full",
        }
    }
}

/// Packets the kernel dropped at one socket, by reason, since it opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelDrops {
    by_reason: [u64; KernelDropReason::ALL.len()],
    /// AF_XDP: how many times the kernel found the fill ring empty. Not a packet
    /// count (a zero-copy driver looks once per refill; in copy mode each such
    /// packet is also a `NoFrame` drop), so it is not in [`KernelDrops::total`]:
    /// a sign that the thread returns frames too slowly.
    pub fill_ring_empty: u64,
}

impl KernelDrops {
    pub fn get(&self, why: KernelDropReason) -> u64 {
        self.by_reason[why as usize]
    }

    pub(crate) fn set(&mut self, why: KernelDropReason, n: u64) {
        self.by_reason[why as usize] = n;
    }

    pub fn total(&self) -> u64 {
        self.by_reason.iter().sum()
    }

    /// Each reason with its count, zeros included.
    pub fn by_reason(&self) -> impl Iterator<Item = (KernelDropReason, u64)> + '_ {
        KernelDropReason::ALL.iter().map(|&r| (r, self.get(r)))
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

#[derive(Debug)]
struct ProbeState {
    open: Option<(RawFd, SocketKind)>,
    last: KernelDrops,
}

/// Reads one socket's [`KernelDrops`] from any thread. After the socket closed, it
/// gives the counts read as it closed.
#[derive(Debug, Clone)]
pub struct KernelDropsProbe(Arc<Mutex<ProbeState>>);

impl KernelDropsProbe {
    pub(crate) fn new(fd: RawFd, kind: SocketKind) -> KernelDropsProbe {
        KernelDropsProbe(Arc::new(Mutex::new(ProbeState {
            open: Some((fd, kind)),
            last: KernelDrops::default(),
        })))
    }

    /// The socket's counts now (one syscall), or the last ones read if it is closed
    /// or the kernel refused.
    pub fn read(&self) -> KernelDrops {
        let mut s = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((fd, kind)) = s.open {
            if let Ok(d) = read_socket(fd, kind) {
                s.last = d;
            }
        }
        s.last
    }

    /// Called by the socket's owner just before its descriptor closes: keeps the
    /// final counts and stops using the descriptor.
    pub(crate) fn close(&self) {
        self.read();
        self.0.lock().unwrap_or_else(|e| e.into_inner()).open = None;
    }
}

fn read_socket(fd: RawFd, kind: SocketKind) -> io::Result<KernelDrops> {
    let mut d = KernelDrops::default();
    match kind {
        SocketKind::Xsk => {
            let s = super::afxdp::xsk::statistics_of(fd)?;
            d.set(KernelDropReason::RxRingFull, s.rx_ring_full);
            d.set(KernelDropReason::NoFrame, s.rx_dropped);
            d.set(
                KernelDropReason::InvalidDescriptor,
                s.rx_invalid_descs + s.tx_invalid_descs,
            );
            d.fill_ring_empty = s.rx_fill_ring_empty_descs;
        }
        SocketKind::Kernel => {
            d.set(KernelDropReason::SocketBufferFull, socket_drops(fd)?);
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
        let probe = port.kernel_drops().expect("a UDP port has a probe");
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
        let dropped = probe.read().get(KernelDropReason::SocketBufferFull);
        assert!(dropped > 0, "no drop counted (received {got} of {sent})");
        assert_eq!(got + dropped, sent, "every datagram received or counted");
        assert_eq!(probe.read().total(), dropped);
        // After the port closes, the probe keeps the last counts.
        drop(p);
        assert_eq!(
            probe.read().get(KernelDropReason::SocketBufferFull),
            dropped
        );
    }

    #[test]
    fn a_clone_for_sending_has_no_probe_of_its_own() {
        let port = UdpPort::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let sender = port.try_clone_sender().unwrap();
        assert!(port.kernel_drops().is_some());
        // The same socket: its drops are the original's, counted once.
        assert!(sender.kernel_drops().is_none());
    }
}
