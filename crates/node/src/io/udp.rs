//! UDP port with one recvmmsg/sendmmsg call per batch (S1-U, GTP-U on 2152). The
//! mmsghdr/iovec/sockaddr arrays live in the port and are re-pointed at the batch's
//! buffers before each call, so the hot path allocates nothing.
//!
//! Sending uses UDP GSO (`UDP_SEGMENT`, Linux 4.18+): consecutive packets of a batch
//! with the same destination and the same length go as one message, which the kernel
//! walks through UDP and IP once and cuts into datagrams at the device (a downlink
//! burst to one eNB, an uplink burst to one PDN router; a batch's packets are put in
//! order of destination first, each destination's keeping theirs). Where the kernel refuses it,
//! the port sends those packets one by one and stops asking.
//!
//! Receiving uses UDP GRO where the kernel has it (`UDP_GRO`, Linux 5.0+): a message
//! of several datagrams of one flow and length is received whole and cut into the
//! batch's buffers ([`super::udp_gro`]).

use super::socket_drops::{SocketDropsProbe, SocketKind};
use super::sys::{self, errno, from_sockaddr, is_would_block, to_sockaddr, zero_sockaddr};
use super::udp_gro::{GroRx, UDP_GRO};
use super::PacketIo;
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use std::io;
use std::mem::size_of;
use std::net::{SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Socket buffer size asked for (best effort): a few ms of line rate absorbs bursts
/// while the data thread is busy with a batch.
const SOCK_BUF_BYTES: libc::c_int = 8 << 20;
/// Sends without GSO after the port pushed back (see `UdpPort::no_gso_for`).
const NO_GSO_SENDS: u32 = 256;
/// How long one retry waits for send-buffer space when the kernel says EAGAIN.
const TX_RETRY_WAIT: Duration = Duration::from_millis(1);
/// Retries of the unsent rest of a batch before it is counted as dropped.
pub const DEFAULT_TX_RETRIES: u32 = 3;
/// Most datagrams in one GSO message (the kernel's UDP_MAX_SEGMENTS).
const GSO_MAX_SEGMENTS: u16 = 64;
/// Most payload bytes in one GSO message (one IP packet's worth).
const GSO_MAX_BYTES: usize = 65_000;
/// `SOL_UDP` level option: the segment size of a GSO message.
const UDP_SEGMENT: libc::c_int = 103;

/// One control message carrying a GSO segment size (cmsghdr + u16, padded).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct GsoCmsg {
    len: usize,
    level: libc::c_int,
    kind: libc::c_int,
    segment: u16,
    _pad: [u8; 6],
}

impl GsoCmsg {
    fn new(segment: u16) -> Self {
        GsoCmsg {
            // CMSG_LEN(sizeof(u16)): the header plus the data, unpadded.
            len: size_of::<usize>() + 2 * size_of::<libc::c_int>() + size_of::<u16>(),
            level: libc::SOL_UDP,
            kind: UDP_SEGMENT,
            segment,
            _pad: [0; 6],
        }
    }
}

/// Counters kept by a [`UdpPort`] (read with [`UdpPort::stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Datagrams longer than a buffer's receive area; discarded.
    pub rx_truncated: u64,
    pub rx_syscalls: u64,
    /// Messages that brought several datagrams (UDP GRO).
    pub rx_gro_messages: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets given up on after the send buffer stayed full through all retries.
    pub tx_dropped: u64,
    /// Packets the kernel refused individually (bad destination, unreachable, ...).
    pub tx_errors: u64,
    /// errno of the most recent refused packet (0 if none).
    pub tx_last_errno: i32,
    pub tx_retries: u64,
    pub tx_syscalls: u64,
    /// Messages that carried several datagrams (UDP GSO).
    pub tx_gso_messages: u64,
    /// Packets handed back unsent because the send buffer was full (sends that hold,
    /// [`PacketIo::send_batch_or_hold`]): the egress scheduler keeps them.
    pub tx_held: u64,
}

/// A non-blocking UDP socket moving whole batches.
pub struct UdpPort {
    sock: UdpSocket,
    local: SocketAddrV4,
    hdrs: Box<[libc::mmsghdr]>,
    iov: Box<[libc::iovec]>,
    addrs: Box<[libc::sockaddr_in]>,
    /// The batch indexes of the packets one syscall sends, in sending order.
    order: Box<[u32]>,
    /// Per message slot: datagrams in it, and its GSO control message.
    segs: Box<[u16]>,
    cmsgs: Box<[GsoCmsg]>,
    /// Whether to group datagrams with UDP GSO (off once the kernel refused it, or
    /// with `PEPC_NO_UDP_GSO=1` in the environment, to measure without).
    gso: bool,
    /// Sends left without GSO since the port last pushed back: a GSO message is one
    /// burst on the link (64 datagrams of 1400 bytes take 14 ms at 50 Mbit/s), and
    /// while the link is the bottleneck a voice packet the scheduler sends first would
    /// wait behind it in the device's queue. The link, not the CPU, sets the rate then.
    no_gso_for: u32,
    /// Whether the socket delivers coalesced datagrams (off where the kernel refused
    /// `UDP_GRO`, or with `PEPC_NO_UDP_GRO=1` in the environment, to measure
    /// without); their staging area is made at the first receive, so a port that
    /// only sends has none.
    pub(super) gro: bool,
    gro_rx: Option<Box<GroRx>>,
    tx_retries: u32,
    stats: UdpStats,
    /// The socket's kernel drop count, read by other threads; only the port that
    /// opened the socket has it (its clones share the socket, and its count).
    probe: Option<SocketDropsProbe>,
}

impl Drop for UdpPort {
    fn drop(&mut self) {
        if let Some(p) = &self.probe {
            p.close();
        }
    }
}

// SAFETY: the raw pointers inside `hdrs`/`iov` are scratch values, rewritten to point at
// the caller's batch (or at `iov`/`addrs`, which move with the port as boxed slices)
// immediately before each syscall and never dereferenced by us outside it.
unsafe impl Send for UdpPort {}

pub(crate) fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> bool {
    // SAFETY: passes a pointer to a live c_int and its exact size.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        ) == 0
    }
}

/// Create a non-blocking, close-on-exec IPv4 UDP socket (for a group, with
/// SO_REUSEPORT) bound to `addr`, with large buffers where the system allows. No
/// SO_REUSEADDR: on UDP it lets a second process bind the same address and take its
/// traffic. A taken address is refused naming its holder.
fn bind_socket(addr: SocketAddrV4, reuseport: bool) -> io::Result<UdpSocket> {
    bind_socket_inner(addr, reuseport)
        .map_err(|e| super::holder::in_use(e, addr.into(), super::holder::Proto::Udp))
}

fn bind_socket_inner(addr: SocketAddrV4, reuseport: bool) -> io::Result<UdpSocket> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor we own; OwnedFd closes it on every error path.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if reuseport && !setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1) {
        return Err(io::Error::last_os_error());
    }
    // FORCE variants pass rmem_max/wmem_max when privileged; otherwise the plain ones
    // are clamped by the kernel. Either way a failure here is not fatal.
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if !setsockopt_int(fd, libc::SOL_SOCKET, force, SOCK_BUF_BYTES) {
            setsockopt_int(fd, libc::SOL_SOCKET, plain, SOCK_BUF_BYTES);
        }
    }
    let sa = to_sockaddr(addr);
    // SAFETY: `sa` is a valid sockaddr_in and the length matches it.
    let r = unsafe {
        libc::bind(
            fd,
            (&sa as *const libc::sockaddr_in).cast(),
            size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(UdpSocket::from(owned))
}

impl UdpPort {
    /// Bind with room for [`BATCH_SIZE`] packets per syscall.
    pub fn bind(addr: SocketAddrV4) -> io::Result<UdpPort> {
        Self::bind_with_capacity(addr, BATCH_SIZE)
    }

    /// Bind with room for `capacity` packets per syscall (larger batches are received
    /// up to this many and sent in chunks of it).
    pub fn bind_with_capacity(addr: SocketAddrV4, capacity: usize) -> io::Result<UdpPort> {
        if capacity == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "UdpPort capacity must be at least 1",
            ));
        }
        Self::open(bind_socket(addr, false)?, capacity)
    }

    fn open(sock: UdpSocket, capacity: usize) -> io::Result<UdpPort> {
        let mut p = Self::from_socket(sock, capacity)?;
        if std::env::var_os("PEPC_NO_UDP_GRO").is_none_or(|v| v != "1") {
            p.set_gro(true);
        }
        p.probe = Some(SocketDropsProbe::new(p.as_raw_fd(), SocketKind::Kernel));
        Ok(p)
    }

    /// `n` ports on `addr` in one SO_REUSEPORT group (one port, without SO_REUSEPORT,
    /// when `n` is 1), each a socket of its own (its own buffer and drop count), in the
    /// order the group indexes them; the kernel spreads
    /// the datagrams over them by its hash unless a program steers them
    /// ([`super::steer::attach_reuseport`]). Port 0 is resolved by the first.
    pub fn bind_group(addr: SocketAddrV4, n: usize) -> io::Result<Vec<UdpPort>> {
        let mut out: Vec<UdpPort> = Vec::with_capacity(n);
        if n > 1 && addr.port() != 0 {
            // A group's first socket would join a group already on `addr` (another
            // pepc's, same user) and share its traffic: a plain bind first fails if
            // anything holds the address. The probe is closed right before the group
            // binds; only a process binding the same address in that instant with
            // SO_REUSEPORT could still join.
            drop(bind_socket(addr, false)?);
        }
        for k in 0..n {
            let at = out.first().map_or(addr, |p| p.local_addr());
            let sock = bind_socket(at, n > 1)
                .map_err(|e| io::Error::new(e.kind(), format!("socket {k} of {n} on {at}: {e}")))?;
            out.push(Self::open(sock, BATCH_SIZE)?);
        }
        Ok(out)
    }

    /// Another port on a duplicate of this socket's descriptor (same local address),
    /// with its own syscall arrays and counters.
    pub fn try_clone(&self) -> io::Result<UdpPort> {
        let mut p = Self::from_socket(self.sock.try_clone()?, self.capacity())?;
        // The socket's option is shared: the clone receives as the original does.
        p.gro = self.gro;
        p.tx_retries = self.tx_retries;
        Ok(p)
    }

    fn from_socket(sock: UdpSocket, capacity: usize) -> io::Result<UdpPort> {
        let local = match sock.local_addr()? {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(a) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("UdpPort bound to non-IPv4 address {a}"),
                ))
            }
        };
        // SAFETY: mmsghdr and iovec are plain C structs for which all-zero (null
        // pointers, zero lengths) is a valid value.
        let zero_hdr: libc::mmsghdr = unsafe { std::mem::zeroed() };
        let zero_iov = libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        };
        Ok(UdpPort {
            sock,
            local,
            hdrs: vec![zero_hdr; capacity].into_boxed_slice(),
            iov: vec![zero_iov; capacity].into_boxed_slice(),
            addrs: vec![zero_sockaddr(); capacity].into_boxed_slice(),
            order: vec![0; capacity].into_boxed_slice(),
            segs: vec![0; capacity].into_boxed_slice(),
            cmsgs: vec![GsoCmsg::new(0); capacity].into_boxed_slice(),
            gso: std::env::var_os("PEPC_NO_UDP_GSO").is_none_or(|v| v != "1"),
            gro: false,
            gro_rx: None,
            no_gso_for: 0,
            tx_retries: DEFAULT_TX_RETRIES,
            stats: UdpStats::default(),
            probe: None,
        })
    }

    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    pub fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    pub fn stats(&self) -> UdpStats {
        self.stats
    }

    /// Receive a flow's same-size datagrams as one message ([`super::udp_gro`]), or
    /// one per datagram. Returns whether GRO is now on (the kernel may refuse it).
    pub fn set_gro(&mut self, on: bool) -> bool {
        let ok = setsockopt_int(self.as_raw_fd(), libc::SOL_UDP, UDP_GRO, on.into());
        self.gro = on && ok;
        self.gro
    }

    /// Whether the port receives with GRO.
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Packets per syscall this port was built for.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// How many times the unsent rest of a batch is retried (each after waiting up to
    /// 1 ms for buffer space) before it is dropped.
    /// Set the socket's send buffer to `bytes` (the kernel doubles it): where the
    /// port pushes back. A small one keeps the queue below the socket short, so what
    /// waits, waits in the egress scheduler, in QoS order.
    pub fn set_send_buffer(&mut self, bytes: i32) -> io::Result<()> {
        if setsockopt_int(self.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, bytes) {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    pub fn set_tx_retries(&mut self, n: u32) {
        self.tx_retries = n;
    }

    /// Block until a datagram is waiting or `timeout` passes.
    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        super::wait_readable(self.as_raw_fd(), timeout)
    }

    /// Point slot `k` at `iov`/`addrs[k]`; `base`/`len` is the data area.
    #[inline]
    fn arm(&mut self, k: usize, base: *mut u8, len: usize) {
        self.iov[k] = libc::iovec {
            iov_base: base.cast(),
            iov_len: len,
        };
        let h = &mut self.hdrs[k];
        h.msg_hdr.msg_name = (&mut self.addrs[k] as *mut libc::sockaddr_in).cast();
        h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        h.msg_hdr.msg_iov = &mut self.iov[k];
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = std::ptr::null_mut();
        h.msg_hdr.msg_controllen = 0;
        h.msg_hdr.msg_flags = 0;
        h.msg_len = 0;
    }

    /// Send the `k` armed messages, retrying the unsent rest on EAGAIN and skipping
    /// messages the kernel refuses one by one. Returns how many datagrams went out.
    fn flush(&mut self, k: usize, mut held: Option<&mut Vec<u16>>) -> io::Result<usize> {
        let fd = self.as_raw_fd();
        let mut off = 0;
        let mut sent = 0;
        let mut retries = 0;
        let left = |segs: &[u16], from: usize| segs[from..k].iter().map(|&n| n as u64).sum::<u64>();
        while off < k {
            self.stats.tx_syscalls += 1;
            // SAFETY: slots off..k were armed with pointers into the caller's live
            // batch and into our own arrays; sendmmsg only reads the data.
            let r = unsafe {
                libc::sendmmsg(
                    fd,
                    self.hdrs.as_mut_ptr().add(off),
                    (k - off) as libc::c_uint,
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                let r = r as usize;
                for (h, &n) in self.hdrs[off..off + r].iter().zip(&self.segs[off..off + r]) {
                    self.stats.tx_bytes += u64::from(h.msg_len);
                    self.stats.tx_packets += n as u64;
                    self.stats.tx_gso_messages += u64::from(n > 1);
                    sent += n as usize;
                }
                off += r;
                continue;
            }
            // r == 0 cannot happen for a non-empty vector; treat it like a full buffer
            // so the loop still ends.
            let e = if r == 0 { libc::EAGAIN } else { errno() };
            match e {
                libc::EINTR => continue,
                e if is_would_block(e) || e == libc::ENOBUFS => {
                    if let Some(h) = held.as_deref_mut() {
                        // The caller keeps the rest: no wait, no drop. Datagram slot v
                        // is the batch's packet order[v].
                        let first: usize = self.segs[..off].iter().map(|&n| n as usize).sum();
                        let all = first + left(&self.segs, off) as usize;
                        h.extend(self.order[first..all].iter().map(|&i| i as u16));
                        self.stats.tx_held += (all - first) as u64;
                        break;
                    }
                    if retries >= self.tx_retries {
                        self.stats.tx_dropped += left(&self.segs, off);
                        break;
                    }
                    retries += 1;
                    self.stats.tx_retries += 1;
                    sys::poll_one(fd, libc::POLLOUT, TX_RETRY_WAIT)?;
                }
                // The socket itself is unusable: report it to the caller.
                libc::EBADF | libc::ENOTSOCK | libc::EFAULT => {
                    self.stats.tx_dropped += left(&self.segs, off);
                    return Err(io::Error::from_raw_os_error(e));
                }
                // The kernel (or the route's device) does not do UDP GSO: send this
                // message's datagrams one by one and stop grouping.
                libc::EIO | libc::EINVAL | libc::ENOPROTOOPT if self.segs[off] > 1 => {
                    self.gso = false;
                    sent += self.send_each(off);
                    off += 1;
                }
                // Only the first message of the rest was refused (bad or unreachable
                // destination, too big, ...): skip it and go on.
                _ => {
                    self.stats.tx_errors += self.segs[off] as u64;
                    self.stats.tx_last_errno = e;
                    off += 1;
                }
            }
        }
        Ok(sent)
    }

    /// The slow path for a GSO message the kernel refused: its datagrams one by one.
    #[cold]
    fn send_each(&mut self, k: usize) -> usize {
        let h = self.hdrs[k].msg_hdr;
        let mut sent = 0;
        for i in 0..h.msg_iovlen {
            // SAFETY: the message's iovecs point into the caller's live batch (armed
            // by send_selected) and its name at our own sockaddr.
            let r = unsafe {
                let v = *h.msg_iov.add(i);
                libc::sendto(
                    self.as_raw_fd(),
                    v.iov_base,
                    v.iov_len,
                    libc::MSG_DONTWAIT,
                    h.msg_name as *const libc::sockaddr,
                    h.msg_namelen,
                )
            };
            if r >= 0 {
                sent += 1;
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += r as u64;
            } else {
                self.stats.tx_errors += 1;
                self.stats.tx_last_errno = errno();
            }
        }
        sent
    }

    /// Send every selected packet to `dest`, or to its `meta.peer` when `dest` is None.
    /// Runs of packets with one destination and one length share a GSO message.
    pub(crate) fn send_selected(
        &mut self,
        batch: &Batch,
        select: Verdict,
        dest: Option<SocketAddrV4>,
    ) -> io::Result<usize> {
        self.send_selected_or_hold(batch, select, dest, None)
    }

    /// [`Self::send_selected`]; with `held`, what the full send buffer does not take
    /// is not waited for or dropped but listed there (batch indexes, in batch order
    /// per destination), and so is everything after it.
    pub(crate) fn send_selected_or_hold(
        &mut self,
        batch: &Batch,
        select: Verdict,
        dest: Option<SocketAddrV4>,
        mut held: Option<&mut Vec<u16>>,
    ) -> io::Result<usize> {
        let cap = self.capacity();
        let mut n = 0;
        let mut sent = 0;
        let holding = |h: &Option<&mut Vec<u16>>| h.as_ref().is_some_and(|h| !h.is_empty());
        let gso = self.gso && !(held.is_some() && self.no_gso_for > 0);
        self.no_gso_for = self.no_gso_for.saturating_sub(u32::from(held.is_some()));
        for (i, p) in batch.packets().iter().enumerate() {
            if p.meta.verdict == select {
                if holding(&held) {
                    // The buffer is full: the rest waits behind what it refused.
                    if let Some(h) = held.as_deref_mut() {
                        h.push(i as u16);
                        self.stats.tx_held += 1;
                    }
                    continue;
                }
                self.order[n] = i as u32;
                n += 1;
                if n == cap {
                    sent += self.send_some(batch, n, dest, gso, held.as_deref_mut())?;
                    n = 0;
                }
            }
        }
        if n > 0 {
            sent += self.send_some(batch, n, dest, gso, held.as_deref_mut())?;
        }
        if holding(&held) {
            self.no_gso_for = NO_GSO_SENDS;
        }
        Ok(sent)
    }

    /// Send the packets `order[..n]` of `batch` (at most one syscall's worth).
    fn send_some(
        &mut self,
        batch: &Batch,
        n: usize,
        dest: Option<SocketAddrV4>,
        gso: bool,
        held: Option<&mut Vec<u16>>,
    ) -> io::Result<usize> {
        // GSO as asked, unless the kernel refused it since (which clears it for good).
        let gso = gso && self.gso;
        if gso && dest.is_none() {
            // One destination's packets next to each other, so that runs of one
            // length grow (a downlink batch spread over eNBs). The sort is stable: a
            // destination's packets keep their order.
            let bufs = &batch.bufs;
            self.order[..n].sort_by_key(|&i| {
                let a = bufs[i as usize].meta.peer;
                (u32::from(*a.ip()), a.port())
            });
        }
        // Messages armed, and iovec slots used by them (one per datagram).
        let (mut m, mut v) = (0usize, 0usize);
        for k in 0..n {
            let p = &batch.bufs[self.order[k] as usize];
            let to = to_sockaddr(dest.unwrap_or(p.meta.peer));
            let data = p.as_slice();
            // sendmmsg never writes through the iovec, so the *mut is only nominal.
            self.iov[v] = libc::iovec {
                iov_base: data.as_ptr().cast_mut().cast(),
                iov_len: data.len(),
            };
            let joins = gso && m > 0 && {
                let g = m - 1;
                let seg = self.cmsgs[g].segment as usize;
                let first = self.hdrs[g].msg_hdr.msg_iov;
                // SAFETY: message g's first iovec is armed (slot < v).
                let seg = if self.segs[g] == 1 {
                    unsafe { (*first).iov_len }
                } else {
                    seg
                };
                let a = &self.addrs[g];
                self.segs[g] < GSO_MAX_SEGMENTS
                    && data.len() == seg
                    && seg * (self.segs[g] as usize + 1) <= GSO_MAX_BYTES
                    && a.sin_addr.s_addr == to.sin_addr.s_addr
                    && a.sin_port == to.sin_port
            };
            if joins {
                let g = m - 1;
                self.segs[g] += 1;
                let h = &mut self.hdrs[g].msg_hdr;
                h.msg_iovlen += 1;
                if self.segs[g] == 2 {
                    self.cmsgs[g] = GsoCmsg::new(data.len() as u16);
                    h.msg_control = (&mut self.cmsgs[g] as *mut GsoCmsg).cast();
                    h.msg_controllen = size_of::<GsoCmsg>();
                }
            } else {
                self.addrs[m] = to;
                self.arm_message(m, v);
                m += 1;
            }
            v += 1;
        }
        if m == 0 {
            return Ok(0);
        }
        self.flush(m, held)
    }

    /// Point message slot `k` at `addrs[k]` and at one datagram, `iov[v]`.
    #[inline]
    fn arm_message(&mut self, k: usize, v: usize) {
        self.segs[k] = 1;
        self.cmsgs[k].segment = 0;
        let h = &mut self.hdrs[k];
        h.msg_hdr.msg_name = (&mut self.addrs[k] as *mut libc::sockaddr_in).cast();
        h.msg_hdr.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        h.msg_hdr.msg_iov = &mut self.iov[v];
        h.msg_hdr.msg_iovlen = 1;
        h.msg_hdr.msg_control = std::ptr::null_mut();
        h.msg_hdr.msg_controllen = 0;
        h.msg_hdr.msg_flags = 0;
        h.msg_len = 0;
    }
}

impl AsRawFd for UdpPort {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for UdpPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl PacketIo for UdpPort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        if self.gro {
            let (fd, cap) = (self.as_raw_fd(), self.capacity());
            let g = self.gro_rx.get_or_insert_with(|| Box::new(GroRx::new(cap)));
            let arrays = (&mut *self.hdrs, &mut *self.iov, &mut *self.addrs);
            return g.recv(fd, arrays, &mut self.stats, batch);
        }
        batch.len = 0;
        let n = batch.capacity().min(self.capacity());
        if n == 0 {
            return Ok(0);
        }
        for i in 0..n {
            let area = batch.bufs[i].rx_area();
            let (base, len) = (area.as_mut_ptr(), area.len());
            self.arm(i, base, len);
        }
        self.stats.rx_syscalls += 1;
        // SAFETY: slots 0..n point at the rx areas of batch.bufs[0..n], which stay
        // borrowed (unmoved) for the duration of the call, and at our own arrays.
        let r = unsafe {
            libc::recvmmsg(
                self.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return sys::no_packets_or_error(errno());
        }
        let now = sys::now_ns();
        let mut w = 0;
        for i in 0..r as usize {
            let h = &self.hdrs[i];
            if h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
                self.stats.rx_truncated += 1;
                continue;
            }
            let len = h.msg_len as usize;
            let peer = from_sockaddr(&self.addrs[i]);
            // Keep received packets contiguous at the front (swapping boxes, not bytes).
            if w != i {
                batch.bufs.swap(w, i);
            }
            let b = &mut batch.bufs[w];
            b.set_received(len);
            b.meta.peer = peer;
            b.meta.rx_ns = now;
            b.meta.verdict = Verdict::Drop;
            self.stats.rx_bytes += len as u64;
            w += 1;
        }
        self.stats.rx_packets += w as u64;
        batch.len = w;
        Ok(w)
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        self.send_selected(batch, select, None)
    }

    fn send_batch_or_hold(
        &mut self,
        batch: &Batch,
        select: Verdict,
        held: &mut Vec<u16>,
    ) -> io::Result<usize> {
        self.send_selected_or_hold(batch, select, None, Some(held))
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }

    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        Ok(Box::new(self.try_clone()?))
    }

    fn socket_drops(&self) -> Option<SocketDropsProbe> {
        self.probe.clone()
    }

    fn idle_polls(&self) -> u32 {
        super::IDLE_POLLS_SYSCALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepc_wire::HEADROOM;
    use std::net::Ipv4Addr;
    use std::time::Instant;

    fn lo0() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)
    }

    fn std_sock() -> (UdpSocket, SocketAddrV4) {
        let s = UdpSocket::bind(lo0()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let SocketAddr::V4(a) = s.local_addr().unwrap() else {
            panic!("v6")
        };
        (s, a)
    }

    /// Receive until `want` packets arrived or 5 s passed; returns (packets, batch sizes).
    fn recv_all(port: &mut UdpPort, want: usize) -> (Vec<(Vec<u8>, SocketAddrV4)>, Vec<usize>) {
        let mut batch = Batch::new(BATCH_SIZE);
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut last_rx = 0;
        while got.len() < want && Instant::now() < deadline {
            if port.recv_batch(&mut batch).unwrap() == 0 {
                port.wait_readable(Duration::from_millis(100)).unwrap();
                continue;
            }
            sizes.push(batch.len);
            for p in batch.packets() {
                assert!(p.meta.rx_ns >= last_rx);
                last_rx = p.meta.rx_ns;
                assert_eq!(p.headroom(), HEADROOM);
                got.push((p.as_slice().to_vec(), p.meta.peer));
            }
        }
        (got, sizes)
    }

    fn payload(i: usize) -> Vec<u8> {
        (0..(1 + i * 13 % 1400)).map(|j| (i + j) as u8).collect()
    }

    #[test]
    fn recv_batch_gets_datagrams_with_peers() {
        let mut port = UdpPort::bind(lo0()).unwrap();
        assert_ne!(port.local_addr().port(), 0);
        let (a, a_addr) = std_sock();
        let (b, b_addr) = std_sock();
        for i in 0..100 {
            let s = if i % 3 == 0 { &b } else { &a };
            s.send_to(&payload(i), port.local_addr()).unwrap();
        }
        let (got, sizes) = recv_all(&mut port, 100);
        assert_eq!(got.len(), 100);
        assert!(sizes.iter().all(|&n| n <= BATCH_SIZE));
        // Loopback delivers all 100 before we read: expect real batching.
        assert!(sizes.len() < 100, "no batching: {sizes:?}");
        for (i, (bytes, peer)) in got.iter().enumerate() {
            assert_eq!(bytes, &payload(i), "packet {i}");
            assert_eq!(*peer, if i % 3 == 0 { b_addr } else { a_addr });
        }
        let st = port.stats();
        assert_eq!(st.rx_packets, 100);
        assert_eq!(
            st.rx_bytes,
            (0..100).map(|i| payload(i).len() as u64).sum::<u64>()
        );
        assert!(st.rx_syscalls >= sizes.len() as u64);
    }

    #[test]
    fn recv_on_idle_socket_returns_zero_and_wait_times_out() {
        let mut port = UdpPort::bind(lo0()).unwrap();
        let mut batch = Batch::new(BATCH_SIZE);
        batch.len = 5;
        assert_eq!(port.recv_batch(&mut batch).unwrap(), 0);
        assert_eq!(batch.len, 0);
        let t = Instant::now();
        assert!(!port.wait_readable(Duration::from_millis(50)).unwrap());
        assert!(t.elapsed() >= Duration::from_millis(40));
        let (s, _) = std_sock();
        s.send_to(b"x", port.local_addr()).unwrap();
        assert!(port.wait_readable(Duration::from_secs(2)).unwrap());
        assert_eq!(port.poll_fd(), Some(port.as_raw_fd()));
    }

    #[test]
    fn oversize_datagram_is_discarded_not_truncated() {
        let mut port = UdpPort::bind(lo0()).unwrap();
        let (s, s_addr) = std_sock();
        s.send_to(b"first", port.local_addr()).unwrap();
        s.send_to(&[7u8; 3000], port.local_addr()).unwrap();
        s.send_to(b"third", port.local_addr()).unwrap();
        let (got, _) = recv_all(&mut port, 2);
        assert_eq!(
            got,
            vec![(b"first".to_vec(), s_addr), (b"third".to_vec(), s_addr)]
        );
        assert_eq!(port.stats().rx_truncated, 1);
    }

    fn make_batch(n: usize, peer: SocketAddrV4, verdict_of: impl Fn(usize) -> Verdict) -> Batch {
        let mut batch = Batch::new(n);
        for i in 0..n {
            let b = &mut batch.bufs[i];
            assert!(b.fill(&payload(i)));
            b.meta.peer = peer;
            b.meta.verdict = verdict_of(i);
        }
        batch.len = n;
        batch
    }

    fn drain(s: &UdpSocket) -> Vec<Vec<u8>> {
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut out = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok((n, _)) = s.recv_from(&mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    #[test]
    fn send_batch_sends_only_selected_verdict() {
        let mut port = UdpPort::bind(lo0()).unwrap();
        let (rx, rx_addr) = std_sock();
        let verdicts = [
            Verdict::ToS1u,
            Verdict::ToSgi,
            Verdict::Drop,
            Verdict::Consumed,
        ];
        let batch = make_batch(20, rx_addr, |i| verdicts[i % 4]);
        assert_eq!(port.send_batch(&batch, Verdict::ToS1u).unwrap(), 5);
        let got = drain(&rx);
        let want: Vec<Vec<u8>> = (0..20).step_by(4).map(payload).collect();
        assert_eq!(got, want);
        let st = port.stats();
        assert_eq!(st.tx_packets, 5);
        assert_eq!(st.tx_syscalls, 1);
        assert_eq!(
            st.tx_bytes,
            want.iter().map(|p| p.len() as u64).sum::<u64>()
        );
        // The receiver sees our port as the source.
        let batch = make_batch(1, rx_addr, |_| Verdict::ToS1u);
        port.send_batch(&batch, Verdict::ToS1u).unwrap();
        let mut buf = [0u8; 64];
        let (_, from) = rx.recv_from(&mut buf).unwrap();
        assert_eq!(from, SocketAddr::V4(port.local_addr()));
    }

    #[test]
    fn send_batch_larger_than_capacity_goes_in_chunks() {
        let mut port = UdpPort::bind_with_capacity(lo0(), 8).unwrap();
        let (rx, rx_addr) = std_sock();
        let batch = make_batch(50, rx_addr, |_| Verdict::ToS1u);
        assert_eq!(port.send_batch(&batch, Verdict::ToS1u).unwrap(), 50);
        assert_eq!(drain(&rx), (0..50).map(payload).collect::<Vec<_>>());
        assert!(port.stats().tx_syscalls >= 7);
        // A batch larger than the port's capacity is received up to capacity per call.
        let (tx, _) = std_sock();
        for i in 0..20 {
            tx.send_to(&payload(i), port.local_addr()).unwrap();
        }
        assert!(port.wait_readable(Duration::from_secs(2)).unwrap());
        let mut big = Batch::new(32);
        assert!(port.recv_batch(&mut big).unwrap() <= 8);
    }

    #[test]
    fn refused_packet_is_skipped_and_rest_sent() {
        let mut port = UdpPort::bind(lo0()).unwrap();
        let (rx, rx_addr) = std_sock();
        let mut batch = make_batch(5, rx_addr, |_| Verdict::ToS1u);
        // Port 0 is not a valid destination: the kernel refuses that one (EINVAL).
        batch.bufs[2].meta.peer = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0);
        assert_eq!(port.send_batch(&batch, Verdict::ToS1u).unwrap(), 4);
        let want: Vec<Vec<u8>> = [0, 1, 3, 4].into_iter().map(payload).collect();
        assert_eq!(drain(&rx), want);
        let st = port.stats();
        assert_eq!(st.tx_errors, 1);
        assert_eq!(st.tx_last_errno, libc::EINVAL);
        assert_eq!(st.tx_dropped, 0);
    }

    /// Runs of one destination and one length go as GSO messages; the receivers' kernel
    /// delivers each datagram whole and in order, and with grouping off the same.
    #[test]
    fn runs_of_equal_datagrams_go_as_gso_messages_and_arrive_one_by_one() {
        for gso in [true, false] {
            let (a, a_addr) = std_sock();
            let (b, b_addr) = std_sock();
            let mut port = UdpPort::bind(lo0()).unwrap();
            port.gso = gso;
            // 20 of 100 bytes to a, then 3 of 60 to b, then 1 of 100 to a, 2 of 100 to b.
            let mut want: Vec<(SocketAddrV4, Vec<u8>)> = Vec::new();
            for i in 0..20u8 {
                want.push((a_addr, vec![i; 100]));
            }
            for i in 0..3u8 {
                want.push((b_addr, vec![100 + i; 60]));
            }
            want.push((a_addr, vec![200; 100]));
            want.push((b_addr, vec![201; 100]));
            want.push((b_addr, vec![202; 100]));
            let mut batch = Batch::new(want.len());
            for (i, (to, data)) in want.iter().enumerate() {
                let p = &mut batch.bufs[i];
                p.fill(data);
                p.meta.peer = *to;
                p.meta.verdict = Verdict::ToS1u;
            }
            batch.len = want.len();
            assert_eq!(port.send_batch(&batch, Verdict::ToS1u).unwrap(), want.len());
            let st = port.stats();
            assert_eq!((st.tx_packets, st.tx_errors, st.tx_dropped), (26, 0, 0));
            assert_eq!(st.tx_bytes, 20 * 100 + 3 * 60 + 3 * 100);
            // Grouped by destination: a's 21 (20 + 1 of one length), b's 3 of 60 and
            // b's 2 of 100.
            assert_eq!(st.tx_gso_messages, if gso { 3 } else { 0 }, "{st:?}");
            let per = |to| {
                want.iter()
                    .filter(|(t, _)| *t == to)
                    .map(|(_, d)| d.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(drain(&a), per(a_addr));
            assert_eq!(drain(&b), per(b_addr));
        }
    }

    /// Packets to two eNBs, interleaved: grouped by destination they make one GSO
    /// message each, and each destination gets its packets in the order sent.
    #[test]
    fn interleaved_destinations_are_grouped_in_order() {
        let (a, a_addr) = std_sock();
        let (b, b_addr) = std_sock();
        let mut port = UdpPort::bind(lo0()).unwrap();
        let mut batch = Batch::new(20);
        for i in 0..20u8 {
            let p = &mut batch.bufs[i as usize];
            p.fill(&[i; 80]);
            p.meta.peer = if i % 2 == 0 { a_addr } else { b_addr };
            p.meta.verdict = Verdict::ToS1u;
        }
        batch.len = 20;
        assert_eq!(port.send_batch(&batch, Verdict::ToS1u).unwrap(), 20);
        let st = port.stats();
        assert_eq!(
            (st.tx_packets, st.tx_gso_messages, st.tx_syscalls),
            (20, 2, 1)
        );
        let want = |odd: u8| (0..20u8).filter(move |i| i % 2 == odd).map(|i| vec![i; 80]);
        assert_eq!(drain(&a), want(0).collect::<Vec<_>>());
        assert_eq!(drain(&b), want(1).collect::<Vec<_>>());
    }

    #[test]
    fn zero_capacity_is_an_error() {
        assert!(UdpPort::bind_with_capacity(lo0(), 0).is_err());
    }

    #[test]
    fn two_ports_can_share_address_with_reuseaddr_after_close() {
        let p = UdpPort::bind(lo0()).unwrap();
        let a = p.local_addr();
        drop(p);
        let p2 = UdpPort::bind(a).unwrap();
        assert_eq!(p2.local_addr(), a);
    }
}
