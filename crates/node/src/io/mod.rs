//! Packet I/O behind one interface. The data thread calls `recv_batch` to fill a batch
//! and `send_batch` to transmit the packets whose verdict names this port. Backends:
//! in-memory generator/sink (benchmarks), UDP with recvmmsg/sendmmsg (S1-U), TUN (SGi),
//! a UDP sink for SGi where a TUN device cannot be created, and AF_XDP for either.

use pepc_wire::{Batch, Verdict};
use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

pub mod afxdp;
pub(crate) mod ebpf;
pub mod holder;
pub mod mem;
pub mod socket_drops;
pub mod steer;
pub(crate) mod sys;
pub mod tun;
pub mod udp;
mod udp_gro;

pub use mem::{FillFn, MemGenerator, MemSink, VerdictCount};
pub use socket_drops::{DropCounts, SocketDropReason, SocketDropsProbe};
pub use sys::now_ns;
pub use tun::{
    open_sgi, open_sgi_queues, SgiBackend, SgiConfig, SgiPort, TunPort, TunStats, UdpSinkPort,
};
pub use udp::{UdpPort, UdpStats};

/// What a user-plane port runs on, for the operator: the node's start line, the
/// management API and the `pepc_port_info` metric (where an alert can catch an
/// AF_XDP port that fell back to copy mode).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// "udp", "udp_sink", "tun" or "afxdp".
    pub io: &'static str,
    /// The device the port is bound to (AF_XDP, TUN); empty for a socket.
    pub interface: String,
    /// AF_XDP only.
    pub afxdp: Option<AfXdpInfo>,
    /// One line, as the start line says it.
    pub description: String,
}

impl PortInfo {
    /// A port on a kernel socket or device (no AF_XDP details).
    pub fn kernel(io: &'static str, interface: String, description: String) -> PortInfo {
        PortInfo {
            io,
            interface,
            afxdp: None,
            description,
        }
    }
}

/// How an AF_XDP port is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfXdpInfo {
    /// The (first) queue its sockets are bound to.
    pub queue: u32,
    /// The XDP program runs in the driver (else generic, on skbs).
    pub native: bool,
    /// Frames go to and from the NIC without a copy (else copy mode).
    pub zero_copy: bool,
    /// Descriptors per ring (RX, TX, fill, completion).
    pub ring_size: u32,
}

/// A batch-oriented packet port.
pub trait PacketIo: Send {
    /// Receive up to `batch.capacity()` packets without blocking; sets `batch.len` and
    /// returns it (0 when nothing is waiting).
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize>;
    /// Transmit every packet in `batch.packets()` whose `meta.verdict == select`.
    /// Returns how many were sent.
    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize>;
    /// [`send_batch`](Self::send_batch) for a port that may push back: what it
    /// cannot take now (a full socket buffer or TX ring) it neither waits for nor
    /// drops, but lists in `held` (indexes into `batch`, one destination's packets in
    /// their order), for the egress scheduler to send later in QoS order. A port that
    /// never pushes back sends as `send_batch` does (the default).
    fn send_batch_or_hold(
        &mut self,
        batch: &Batch,
        select: Verdict,
        held: &mut Vec<u16>,
    ) -> io::Result<usize> {
        let _ = held;
        self.send_batch(batch, select)
    }
    /// The descriptor an idle data thread can wait on (see [`wait_readable`]); `None`
    /// for in-memory ports, which never block.
    fn poll_fd(&self) -> Option<RawFd> {
        None
    }
    /// A second handle on the same socket/device for sending only, so each slice's
    /// data thread transmits on its own descriptor (the kernel serialises concurrent
    /// sends on one socket; packets keep the port's source address, e.g. S1-U 2152).
    /// Ports without a descriptor cannot be shared.
    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this port cannot be shared between threads",
        ))
    }
    /// What was dropped at this port's socket (by the kernel before we saw it, or by
    /// the port itself), readable from another thread; `None` where no such count is
    /// kept (in-memory ports, TUN) or another handle of the socket reports it.
    fn socket_drops(&self) -> Option<SocketDropsProbe> {
        None
    }
    /// A descriptor besides [`poll_fd`](Self::poll_fd) that wakes this port's idle data
    /// thread (a queue-mode port's doorbell, rung by slices handing it packets).
    fn wake_fd(&self) -> Option<RawFd> {
        None
    }
    /// The data thread is about to sleep on the descriptors: false when work for it
    /// arrived meanwhile (it then does not sleep). [`woke`](Self::woke) follows.
    fn going_idle(&self) -> bool {
        true
    }
    /// The data thread is awake again.
    fn woke(&self) {}
    /// Empty receive rounds an idle data thread spends polling this port before it
    /// sleeps on the port's descriptor ([`IDLE_POLLS_MEMORY`] by default).
    fn idle_polls(&self) -> u32 {
        IDLE_POLLS_MEMORY
    }
}

/// Idle rounds worth polling where an empty poll reads memory (rings, AF_XDP): a
/// packet is taken the moment it arrives, for a few microseconds of spinning.
pub const IDLE_POLLS_MEMORY: u32 = 256;
/// Idle rounds worth polling where an empty poll is a syscall (kernel sockets, TUN):
/// 256 rounds would take ~0.5 ms of CPU after every burst, which the kernel needs to
/// deliver the packets when cores are shared (2 slices on UDP sockets of their own:
/// 0.20-0.26 Mpps per core spinning 256 rounds against 0.40-0.48 with 16 or fewer;
/// one slice at 0.2 Mpps offered: 4.9 against 2.2-2.6 µs of CPU per packet, p50
/// latency +10-20 µs). A data thread pinned to a core of its own spins
/// [`IDLE_POLLS_MEMORY`] rounds on any port (`runtime::data_loop_waking`).
pub const IDLE_POLLS_SYSCALL: u32 = 16;

/// Block until `fd` is readable or `timeout` passes, so an idle data thread sleeps
/// instead of spinning. Returns whether it is readable. EINTR counts as "not yet".
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    sys::poll_one(fd, libc::POLLIN, timeout)
}

/// Block until any of `fds` is readable or `timeout` passes (at most 8 descriptors;
/// the rest are ignored). Returns whether one is readable. EINTR counts as "not yet".
pub fn wait_any_readable(fds: &[RawFd], timeout: Duration) -> io::Result<bool> {
    sys::poll_many(fds, libc::POLLIN, timeout)
}
