//! What was dropped at a port's socket before the data path saw it, or after it
//! handed a packet over: by the kernel (an AF_XDP socket's RX ring full or out of
//! frames, a UDP socket's receive buffer full, a TUN device's queue to the data
//! thread full) or by the port's own code (a frame the XDP program redirected that is
//! not ours, no next-hop MAC, TX ring full). These losses happen below every counter
//! of the slices, so an operator (or `pepc bench io`) would otherwise see packets
//! vanish, or only a sum of send failures.
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
    /// The kernel counts a message: with UDP GRO one can hold up to 64 datagrams.
    SocketBufferFull,
    /// Kernel, TUN: the device's queue of packets for the data thread was full (the
    /// kernel counts them as the device's `tx_dropped`).
    DeviceQueueFull,
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
    pub const ALL: [SocketDropReason; 9] = [
        SocketDropReason::RxRingFull,
        SocketDropReason::NoFrame,
        SocketDropReason::InvalidDescriptor,
        SocketDropReason::SocketBufferFull,
        SocketDropReason::DeviceQueueFull,
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
            SocketDropReason::DeviceQueueFull => "device_queue_full",
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

    /// Whether the veth or NIC the packet came in on also counts it as dropped: an
    /// AF_XDP socket refusing an XDP redirect (native mode) is the device's drop
    /// too, while a kernel socket's or a TUN device's drop is after the link.
    pub fn also_a_link_drop(self) -> bool {
        matches!(
            self,
            SocketDropReason::RxRingFull
                | SocketDropReason::NoFrame
                | SocketDropReason::InvalidDescriptor
        )
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

    /// The kernel's drops that the link the packets came in on does not also count
    /// (see [`SocketDropReason::also_a_link_drop`]).
    pub fn by_kernel_after_the_link(&self) -> u64 {
        SocketDropReason::ALL[..PORT_FIRST]
            .iter()
            .filter(|r| !r.also_a_link_drop())
            .map(|&r| self.get(r))
            .sum()
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

/// Where a probe reads the kernel's counts while the port is open.
#[derive(Debug)]
enum Source {
    /// The port's socket (a descriptor the port owns).
    Socket(RawFd, SocketKind),
    /// The port's network device.
    Device(DeviceStats),
}

#[derive(Debug)]
struct ProbeState {
    open: Option<Source>,
    last: DropCounts,
}

/// A network device's counts as `/proc/net/dev` gives them. The file is opened by a
/// thread in the device's network namespace and keeps to that namespace, so any
/// thread can read it later (sysfs would show the namespace it was mounted in).
#[derive(Debug)]
pub(crate) struct DeviceStats {
    file: std::fs::File,
    name: String,
}

impl DeviceStats {
    /// Counts of device `name`, in the calling thread's network namespace.
    pub(crate) fn open(name: &str) -> io::Result<DeviceStats> {
        let file = std::fs::File::open("/proc/thread-self/net/dev")?;
        let mut d = DeviceStats {
            file,
            name: name.to_string(),
        };
        d.tx_dropped()?;
        Ok(d)
    }

    /// The device's `tx_dropped`: for a TUN device, packets the kernel could not
    /// queue for the process reading it.
    fn tx_dropped(&mut self) -> io::Result<u64> {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = String::new();
        self.file.seek(SeekFrom::Start(0))?;
        self.file.read_to_string(&mut text)?;
        parse_tx_dropped(&text, &self.name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("device {} not in /proc/net/dev", self.name),
            )
        })
    }
}

/// The `drop` column of the transmit half of `name`'s line in `/proc/net/dev`:
/// `name: rx bytes packets errs drop fifo frame compressed multicast | tx bytes
/// packets errs drop ...`.
fn parse_tx_dropped(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (dev, rest) = l.split_once(':')?;
        if dev.trim() != name {
            return None;
        }
        rest.split_whitespace().nth(11)?.parse().ok()
    })
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
        Self::of(Source::Socket(fd, kind), kind.reasons())
    }

    /// A probe of a TUN device's drops.
    pub(crate) fn for_tun(device: DeviceStats) -> SocketDropsProbe {
        Self::of(Source::Device(device), &[SocketDropReason::DeviceQueueFull])
    }

    fn of(source: Source, reasons: &'static [SocketDropReason]) -> SocketDropsProbe {
        SocketDropsProbe {
            kernel: Arc::new(Mutex::new(ProbeState {
                open: Some(source),
                last: DropCounts {
                    reasons,
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
        let s = &mut *s;
        match &mut s.open {
            Some(Source::Socket(fd, kind)) => {
                if let Ok(mut d) = read_socket(*fd, *kind) {
                    if *kind == SocketKind::Kernel {
                        // The kernel's count is 32 bits: keep ours growing past a wrap.
                        let why = SocketDropReason::SocketBufferFull;
                        d.set(why, widen32(s.last.get(why), d.get(why) as u32));
                    }
                    s.last = d;
                }
            }
            Some(Source::Device(dev)) => {
                if let Ok(n) = dev.tx_dropped() {
                    s.last.set(SocketDropReason::DeviceQueueFull, n);
                }
            }
            None => {}
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
    fn proc_net_dev_gives_the_transmit_drop_column() {
        let text = "Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
pepcq0: 14212252  154481    0    3    0     0          0         0 16067312   251052    0 212326    0     0       0          0
";
        assert_eq!(parse_tx_dropped(text, "pepcq0"), Some(212_326));
        assert_eq!(parse_tx_dropped(text, "lo"), Some(0));
        assert_eq!(parse_tx_dropped(text, "pepcq"), None);
    }

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
