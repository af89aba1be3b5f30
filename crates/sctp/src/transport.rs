//! The S1-MME transport interface used by the MME (server) and the eNB emulator
//! (client), with two backends: userspace SCTP over UDP (RFC 6951) and kernel SCTP.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::assoc::{Config, Event};
use crate::endpoint::{AssocHandle, Endpoint};

/// Identifies an association within one transport.
pub type AssocId = u64;

/// S1AP payload protocol identifier (IANA; TS 36.412).
pub const S1AP_PPID: u32 = 18;
/// SCTP port of S1-MME (TS 36.412).
pub const S1AP_SCTP_PORT: u16 = 36412;
/// UDP port for SCTP encapsulation (RFC 6951).
pub const SCTP_UDP_ENCAPS_PORT: u16 = 9899;

/// Something that happened on the transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportEvent {
    Up {
        assoc: AssocId,
        peer: SocketAddr,
        out_streams: u16,
        in_streams: u16,
    },
    Data {
        assoc: AssocId,
        stream: u16,
        ppid: u32,
        data: Vec<u8>,
    },
    Down {
        assoc: AssocId,
        reason: String,
    },
}

/// A message transport for S1AP: associations, streams, PPIDs.
pub trait S1Transport: Send {
    /// Waits up to `timeout` for something to happen, runs timers, sends what is
    /// queued, and appends events. Returns early as soon as there are events.
    fn poll(&mut self, timeout: Duration, events: &mut Vec<TransportEvent>) -> io::Result<()>;
    /// Queues a message. Userspace backends put it on the wire at the next `poll` or
    /// `flush`, so several messages share a packet.
    fn send(&mut self, assoc: AssocId, stream: u16, ppid: u32, data: &[u8]) -> io::Result<()>;
    /// Starts a graceful shutdown; `Down` follows.
    fn close(&mut self, assoc: AssocId);
    fn local_addr(&self) -> SocketAddr;
    /// What the associations did (userspace SCTP only; the kernel keeps its own).
    fn counters(&mut self) -> Option<crate::assoc::AssocCounters> {
        None
    }
    /// Each open association (userspace SCTP; kernel SCTP keeps its own, in
    /// /proc/net/sctp/assocs).
    fn associations(&mut self) -> Vec<crate::assoc::AssocView> {
        Vec::new()
    }
    /// Puts queued messages on the wire now.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// A descriptor that turns readable when `poll` has input, for a caller that waits
    /// on it beside other sources and then calls `poll` with a zero timeout. None:
    /// only `poll` can wait.
    #[cfg(unix)]
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }
    /// When `poll` must run again even if that descriptor stays quiet (protocol
    /// timers, events already held back). None: not before input arrives.
    fn next_deadline(&mut self) -> Option<Instant> {
        None
    }
}

/// Which backend [`open_server`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// Kernel SCTP when the OS has it, else UDP encapsulation.
    #[default]
    Auto,
    Kernel,
    Udp,
}

/// Where and how to listen.
#[derive(Debug, Clone)]
pub struct TransportConfig {
    pub backend: Backend,
    pub ip: IpAddr,
    pub sctp_port: u16,
    /// UDP port for the encapsulating backend (0 = ephemeral).
    pub udp_port: u16,
    pub assoc: Config,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            backend: Backend::Auto,
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            sctp_port: S1AP_SCTP_PORT,
            udp_port: SCTP_UDP_ENCAPS_PORT,
            assoc: Config::default(),
        }
    }
}

/// Opens the server side: kernel SCTP if available (or forced), else SCTP over UDP.
pub fn open_server(config: &TransportConfig) -> io::Result<Box<dyn S1Transport>> {
    let kernel = || -> io::Result<Box<dyn S1Transport>> {
        #[cfg(target_os = "linux")]
        {
            Ok(Box::new(KernelSctpTransport::bind(
                SocketAddr::new(config.ip, config.sctp_port),
                &config.assoc,
            )?))
        }
        #[cfg(not(target_os = "linux"))]
        {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "kernel SCTP backend is only built on Linux",
            ))
        }
    };
    let udp = || -> io::Result<Box<dyn S1Transport>> {
        Ok(Box::new(UdpSctpTransport::bind(
            SocketAddr::new(config.ip, config.udp_port),
            config.sctp_port,
            config.assoc.clone(),
        )?))
    };
    match config.backend {
        Backend::Kernel => kernel(),
        Backend::Udp => udp(),
        Backend::Auto => kernel().or_else(|_| udp()),
    }
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// Sees each SCTP packet: (outgoing, peer UDP address, packet).
pub type Tap = Box<dyn FnMut(bool, SocketAddr, &[u8]) + Send>;

/// Userspace SCTP carried in UDP (RFC 6951): one UDP socket, many associations.
pub struct UdpSctpTransport {
    socket: UdpSocket,
    local: SocketAddr,
    endpoint: Endpoint,
    remote: Option<(SocketAddr, u16)>,
    next_client_port: u16,
    /// Associations the user knows of (came up, or opened by us): they get `Down`.
    known: HashSet<AssocHandle>,
    dirty: Vec<AssocHandle>,
    held: Vec<TransportEvent>,
    /// Packets of the current flush, sent together (one `sendmmsg` on Linux).
    tx: TxBatch,
    rx: RxBuffers,
    /// Optional tap of every SCTP packet (outgoing = true) for captures in tests.
    tap: Option<Tap>,
    /// Counters of the associations already gone.
    gone: crate::assoc::AssocCounters,
}

impl UdpSctpTransport {
    /// What every association of this transport did, closed ones included.
    pub fn counters(&mut self) -> crate::assoc::AssocCounters {
        let mut c = self.gone;
        let hs: Vec<AssocHandle> = self.endpoint.handles().collect();
        for h in hs {
            if let Some(a) = self.endpoint.association(h) {
                c += a.counters();
            }
        }
        c
    }

    /// Each association the user knows of (up, or opened by us), by handle.
    pub fn association_views(&mut self) -> Vec<crate::assoc::AssocView> {
        let mut hs: Vec<AssocHandle> = self.known.iter().copied().collect();
        hs.sort_unstable();
        hs.into_iter()
            .filter_map(|h| {
                let peer = self.endpoint.peer_addr(h)?;
                let a = self.endpoint.association(h)?;
                Some(crate::assoc::AssocView {
                    id: h,
                    peer,
                    state: a.state(),
                    rto: a.rto(),
                    srtt: a.srtt(),
                    out_streams: a.out_streams(),
                    in_streams: a.in_streams(),
                    counters: a.counters(),
                })
            })
            .collect()
    }

    fn open(
        udp_addr: SocketAddr,
        listen: Option<u16>,
        config: Config,
    ) -> io::Result<UdpSctpTransport> {
        let socket = UdpSocket::bind(udp_addr)?;
        socket.set_nonblocking(true)?;
        #[cfg(target_os = "linux")]
        grow_receive_buffer(&socket);
        let local = socket.local_addr()?;
        let endpoint = Endpoint::new(
            Instant::now(),
            Arc::new(config),
            listen,
            Endpoint::random_secret(),
        );
        Ok(UdpSctpTransport {
            socket,
            local,
            endpoint,
            remote: None,
            next_client_port: 0,
            known: HashSet::new(),
            dirty: Vec::new(),
            held: Vec::new(),
            tx: TxBatch::default(),
            rx: RxBuffers::new(),
            tap: None,
            gone: Default::default(),
        })
    }

    /// Server: listens for associations to SCTP port `sctp_port` on `udp_addr`.
    pub fn bind(udp_addr: SocketAddr, sctp_port: u16, config: Config) -> io::Result<Self> {
        Self::open(udp_addr, Some(sctp_port), config)
    }

    /// Client: binds `local` and opens an association to SCTP port `sctp_port` at
    /// `remote_udp` (from local SCTP port `sctp_port`). `Up` follows on `poll`.
    pub fn connect(
        local: SocketAddr,
        remote_udp: SocketAddr,
        sctp_port: u16,
        config: Config,
    ) -> io::Result<Self> {
        let mut t = Self::open(local, None, config)?;
        t.remote = Some((remote_udp, sctp_port));
        t.next_client_port = sctp_port;
        t.open_association()?;
        Ok(t)
    }

    /// Client: opens one more association to the remote given to `connect`, from the
    /// next local SCTP port (one association per port pair, as RFC 9260 requires).
    pub fn open_association(&mut self) -> io::Result<AssocId> {
        let (remote, port) = self
            .remote
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a client transport"))?;
        let lp = self.next_client_port;
        self.next_client_port = if lp == u16::MAX { 1024 } else { lp + 1 };
        Ok(self.connect_to(remote, lp, port))
    }

    /// Opens an association to any peer (`local_port` -> `peer_port`).
    pub fn connect_to(
        &mut self,
        remote_udp: SocketAddr,
        local_port: u16,
        peer_port: u16,
    ) -> AssocId {
        let h = self
            .endpoint
            .connect(Instant::now(), remote_udp, local_port, peer_port);
        self.known.insert(h);
        self.mark(h);
        h
    }

    /// Installs a tap that sees every SCTP packet sent (`true`) or received (`false`).
    pub fn set_tap(&mut self, tap: Tap) {
        self.tap = Some(tap);
    }

    /// Number of live associations.
    pub fn associations(&self) -> usize {
        self.endpoint.len()
    }

    /// Aborts an association at once.
    pub fn abort(&mut self, assoc: AssocId) {
        if let Some(a) = self.endpoint.association(assoc) {
            a.abort();
            self.mark(assoc);
        }
    }

    fn mark(&mut self, h: AssocHandle) {
        if !self.dirty.contains(&h) {
            self.dirty.push(h);
        }
    }

    /// Queues one packet of the current flush (the tap sees it now, in send order).
    fn queue_raw(&mut self, to: SocketAddr, pkt: &[u8]) {
        if let Some(tap) = self.tap.as_mut() {
            tap(true, to, pkt);
        }
        let start = self.tx.data.len();
        self.tx.data.extend_from_slice(pkt);
        self.tx.pkts.push((to, start, pkt.len()));
    }

    /// Puts the queued packets on the wire and empties the batch.
    fn send_queued(&mut self) -> io::Result<()> {
        let r = self.tx.send(&self.socket);
        self.tx.data.clear();
        self.tx.pkts.clear();
        r
    }

    /// Sends everything the endpoint and the touched associations have queued, and
    /// collects their events.
    fn flush_all(&mut self, now: Instant, events: &mut Vec<TransportEvent>) -> io::Result<()> {
        let r = self.collect_all(now, events);
        // Whatever was queued goes out even if collecting stopped early.
        let s = self.send_queued();
        r.and(s)
    }

    fn collect_all(&mut self, now: Instant, events: &mut Vec<TransportEvent>) -> io::Result<()> {
        while let Some((to, p)) = self.endpoint.poll_transmit() {
            self.queue_raw(to, &p);
        }
        while let Some(h) = self.endpoint.poll_touched() {
            self.mark(h);
        }
        let dirty = std::mem::take(&mut self.dirty);
        for &h in &dirty {
            let Some(peer) = self.endpoint.peer_addr(h) else {
                continue;
            };
            while let Some(a) = self.endpoint.association(h) {
                let start = self.tx.data.len();
                if !a.poll_transmit_into(now, &mut self.tx.data) {
                    self.tx.data.truncate(start);
                    break;
                }
                let len = self.tx.data.len() - start;
                if let Some(tap) = self.tap.as_mut() {
                    tap(true, peer, &self.tx.data[start..]);
                }
                self.tx.pkts.push((peer, start, len));
                if self.tx.pkts.len() >= TX_BATCH_MAX {
                    self.send_queued()?;
                }
            }
            let mut drained = false;
            if let Some(a) = self.endpoint.association(h) {
                while let Some(e) = a.poll_event() {
                    match e {
                        Event::Connected {
                            out_streams,
                            in_streams,
                        } => {
                            self.known.insert(h);
                            events.push(TransportEvent::Up {
                                assoc: h,
                                peer,
                                out_streams,
                                in_streams,
                            });
                        }
                        Event::Data { stream, ppid, data } => events.push(TransportEvent::Data {
                            assoc: h,
                            stream,
                            ppid,
                            data,
                        }),
                        Event::Closed { reason } => {
                            if self.known.remove(&h) {
                                events.push(TransportEvent::Down {
                                    assoc: h,
                                    reason: reason.to_string(),
                                });
                            }
                        }
                    }
                }
                drained = a.is_drained();
            }
            if drained {
                if let Some(a) = self.endpoint.remove(h) {
                    self.gone += a.counters();
                }
            }
        }
        self.dirty = dirty;
        self.dirty.clear();
        Ok(())
    }

    /// Reads every datagram waiting on the socket (in batches: one `recvmmsg` per
    /// batch on Linux). Returns how many.
    fn drain_socket(&mut self, now: Instant) -> io::Result<usize> {
        let mut n = 0;
        loop {
            let got = match self.rx.recv(&self.socket) {
                Ok(k) => k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
                // ICMP errors from earlier datagrams: SCTP timers handle them.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused
                            | io::ErrorKind::ConnectionReset
                            | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => return Err(e),
            };
            for i in 0..got {
                let Some((from, pkt)) = self.rx.get(i) else {
                    continue;
                };
                n += 1;
                if let Some(tap) = self.tap.as_mut() {
                    tap(false, from, pkt);
                }
                if let Some(h) = self.endpoint.handle_packet(now, from, pkt) {
                    if !self.dirty.contains(&h) {
                        self.dirty.push(h);
                    }
                }
            }
            // A short batch means the socket was empty: no need for a call that
            // would only say so.
            if n >= 1024 || got < RxBuffers::BATCH {
                return Ok(n);
            }
        }
    }

    fn run_timers(&mut self, now: Instant) {
        if self.endpoint.poll_timeout().is_some_and(|t| t <= now) {
            self.endpoint.handle_timeout(now);
            let hs: Vec<AssocHandle> = self.endpoint.handles().collect();
            for h in hs {
                self.mark(h);
            }
        }
    }
}

impl S1Transport for UdpSctpTransport {
    fn counters(&mut self) -> Option<crate::assoc::AssocCounters> {
        Some(UdpSctpTransport::counters(self))
    }

    fn associations(&mut self) -> Vec<crate::assoc::AssocView> {
        self.association_views()
    }

    fn poll(&mut self, timeout: Duration, events: &mut Vec<TransportEvent>) -> io::Result<()> {
        let start = Instant::now();
        let deadline = start + timeout;
        let mut now = start;
        events.append(&mut self.held);
        loop {
            self.drain_socket(now)?;
            self.run_timers(now);
            self.flush_all(now, events)?;
            if !events.is_empty() || now >= deadline {
                return Ok(());
            }
            let wake = match self.endpoint.poll_timeout() {
                Some(t) => t.min(deadline),
                None => deadline,
            };
            let wait = wake.saturating_duration_since(now);
            if !wait.is_zero() {
                wait_readable(&self.socket, wait)?;
            }
            now = Instant::now();
        }
    }

    fn send(&mut self, assoc: AssocId, stream: u16, ppid: u32, data: &[u8]) -> io::Result<()> {
        let a = self
            .endpoint
            .association(assoc)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotConnected, "unknown association"))?;
        a.send(stream, ppid, data, false).map_err(other)?;
        self.mark(assoc);
        Ok(())
    }

    fn close(&mut self, assoc: AssocId) {
        if let Some(a) = self.endpoint.association(assoc) {
            a.shutdown(Instant::now());
            self.mark(assoc);
        }
    }

    fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut ev = std::mem::take(&mut self.held);
        let r = self.flush_all(Instant::now(), &mut ev);
        self.held = ev; // reported by the next poll
        r
    }

    #[cfg(unix)]
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        Some(self.socket.as_raw_fd())
    }

    fn next_deadline(&mut self) -> Option<Instant> {
        if !self.held.is_empty() {
            return Some(Instant::now());
        }
        self.endpoint.poll_timeout()
    }
}

/// Asks for a receive buffer that holds a burst of many associations' packets: the
/// 208 KiB default overflows in an attach storm, and every datagram lost there
/// costs an SCTP retransmission timeout (1 s). Best effort: the kernel caps it at
/// net.core.rmem_max.
#[cfg(target_os = "linux")]
fn grow_receive_buffer(socket: &UdpSocket) {
    use std::os::fd::AsRawFd;
    const WANT: libc::c_int = 4 << 20;
    // SAFETY: setsockopt with a valid int option buffer.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            &WANT as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// Packets of one flush kept in one buffer, so they can leave in one system call.
#[derive(Default)]
struct TxBatch {
    data: Vec<u8>,
    /// (destination, offset in `data`, length), in send order.
    pkts: Vec<(SocketAddr, usize, usize)>,
    #[cfg(target_os = "linux")]
    names: Vec<(libc::sockaddr_storage, libc::socklen_t)>,
}

/// Flush this many packets at once at most (bounds the batch buffer).
const TX_BATCH_MAX: usize = 256;

/// What to do about a failed datagram send.
fn tx_error_is_loss(e: &io::Error) -> bool {
    // A full socket buffer is a lost packet: SCTP retransmits. ICMP port unreachable
    // from an earlier datagram: SCTP timers handle it.
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::ConnectionRefused
    )
}

impl TxBatch {
    #[cfg(not(target_os = "linux"))]
    fn send(&mut self, socket: &UdpSocket) -> io::Result<()> {
        for &(to, off, len) in &self.pkts {
            match socket.send_to(&self.data[off..off + len], to) {
                Ok(_) => {}
                Err(e) if tx_error_is_loss(&e) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `sendmmsg` in chunks; a datagram that fails with a loss-like error is skipped
    /// (as one `sendto` each would have lost it) and the rest still go.
    #[cfg(target_os = "linux")]
    fn send(&mut self, socket: &UdpSocket) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        const CHUNK: usize = 64;
        if self.pkts.is_empty() {
            return Ok(());
        }
        self.names.clear();
        self.names
            .extend(self.pkts.iter().map(|&(to, _, _)| sockaddr(to)));
        let base = self.data.as_ptr();
        let mut i = 0;
        while i < self.pkts.len() {
            let k = (self.pkts.len() - i).min(CHUNK);
            // SAFETY: iovec and mmsghdr are plain data; zero is a valid value.
            let mut iov: [libc::iovec; CHUNK] = unsafe { std::mem::zeroed() };
            let mut hdr: [libc::mmsghdr; CHUNK] = unsafe { std::mem::zeroed() };
            for j in 0..k {
                let (_, off, len) = self.pkts[i + j];
                let (name, nlen) = &self.names[i + j];
                iov[j] = libc::iovec {
                    // SAFETY: off + len is within `data` (recorded when queued).
                    iov_base: unsafe { base.add(off) } as *mut libc::c_void,
                    iov_len: len,
                };
                let h = &mut hdr[j].msg_hdr;
                h.msg_name = name as *const _ as *mut libc::c_void;
                h.msg_namelen = *nlen;
                h.msg_iov = &mut iov[j];
                h.msg_iovlen = 1;
            }
            // SAFETY: hdr[..k] point at live buffers (data, names, iov) for the call;
            // the kernel only reads them.
            let r = unsafe { libc::sendmmsg(socket.as_raw_fd(), hdr.as_mut_ptr(), k as _, 0) };
            if r > 0 {
                i += r as usize;
                continue;
            }
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if !tx_error_is_loss(&e) {
                return Err(e);
            }
            i += 1; // this datagram is lost; go on with the next
        }
        Ok(())
    }
}

/// Receive buffers for a batch of datagrams.
struct RxBuffers {
    buf: Box<[u8]>,
    /// (source, length) of each datagram of the last batch.
    got: Vec<(Option<SocketAddr>, usize)>,
}

impl RxBuffers {
    #[cfg(target_os = "linux")]
    const BATCH: usize = 32;
    #[cfg(not(target_os = "linux"))]
    const BATCH: usize = 1;
    /// Room for the largest UDP datagram.
    const SLOT: usize = 65536;
    /// Slots are not a power of two apart, so their starts do not share cache sets.
    const STRIDE: usize = Self::SLOT + 64;

    fn new() -> Self {
        RxBuffers {
            buf: vec![0u8; Self::BATCH * Self::STRIDE].into_boxed_slice(),
            got: Vec::with_capacity(Self::BATCH),
        }
    }

    /// Datagram `i` of the last batch (None if its source address was unreadable).
    fn get(&self, i: usize) -> Option<(SocketAddr, &[u8])> {
        let (from, len) = *self.got.get(i)?;
        let off = i * Self::STRIDE;
        Some((from?, &self.buf[off..off + len]))
    }

    #[cfg(not(target_os = "linux"))]
    fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        self.got.clear();
        let (len, from) = socket.recv_from(&mut self.buf[..Self::SLOT])?;
        self.got.push((Some(from), len));
        Ok(1)
    }

    /// One `recvmmsg` without waiting. Returns how many datagrams it read (at least
    /// one; WouldBlock when there were none).
    #[cfg(target_os = "linux")]
    fn recv(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        const B: usize = RxBuffers::BATCH;
        self.got.clear();
        // SAFETY: these are plain data; zero is a valid value.
        let mut names: [libc::sockaddr_storage; B] = unsafe { std::mem::zeroed() };
        let mut iov: [libc::iovec; B] = unsafe { std::mem::zeroed() };
        let mut hdr: [libc::mmsghdr; B] = unsafe { std::mem::zeroed() };
        let base = self.buf.as_mut_ptr();
        for j in 0..B {
            iov[j] = libc::iovec {
                // SAFETY: slot j lies within `buf` (BATCH * STRIDE bytes).
                iov_base: unsafe { base.add(j * Self::STRIDE) } as *mut libc::c_void,
                iov_len: Self::SLOT,
            };
            let h = &mut hdr[j].msg_hdr;
            h.msg_name = &mut names[j] as *mut _ as *mut libc::c_void;
            h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iov[j];
            h.msg_iovlen = 1;
        }
        // SAFETY: hdr points at live, writable buffers for the duration of the call.
        let r = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                hdr.as_mut_ptr(),
                B as _,
                libc::MSG_DONTWAIT as _,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let r = r as usize;
        for j in 0..r {
            self.got
                .push((from_sockaddr(&names[j]), hdr[j].msg_len as usize));
        }
        Ok(r)
    }
}

#[cfg(target_os = "linux")]
fn sockaddr(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; zero is a valid value.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in, sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage.
            unsafe { std::ptr::write(&mut ss as *mut _ as *mut libc::sockaddr_in6, sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

#[cfg(target_os = "linux")]
fn from_sockaddr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: family says sockaddr_in.
            let sin = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::new(
                IpAddr::V4(Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes())),
                u16::from_be(sin.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: family says sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::new(
                IpAddr::V6(std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr)),
                u16::from_be(sin6.sin6_port),
            ))
        }
        _ => None,
    }
}

/// Blocks until `socket` is readable or `wait` passes.
#[cfg(target_os = "linux")]
fn wait_readable(socket: &UdpSocket, wait: Duration) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let mut pfd = libc::pollfd {
        fd: socket.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: wait.as_secs() as libc::time_t,
        tv_nsec: wait.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn wait_readable(socket: &UdpSocket, wait: Duration) -> io::Result<()> {
    socket.set_nonblocking(false)?;
    socket.set_read_timeout(Some(wait.max(Duration::from_micros(1))))?;
    let mut b = [0u8; 1];
    let r = socket.peek_from(&mut b);
    socket.set_nonblocking(true)?;
    match r {
        Ok(_) => Ok(()),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

#[cfg(target_os = "linux")]
pub use kernel::KernelSctpTransport;

#[cfg(target_os = "linux")]
mod kernel {
    //! Linux kernel SCTP, one-to-many style (SOCK_SEQPACKET), with sctp_sndrcvinfo
    //! ancillary data. libc has no SCTP definitions, so the few we need are here
    //! (values from linux/sctp.h).

    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    const IPPROTO_SCTP: libc::c_int = 132;
    const SOL_SCTP: libc::c_int = 132;
    const SCTP_INITMSG: libc::c_int = 2;
    const SCTP_EVENTS: libc::c_int = 11;
    const SCTP_SNDRCV: libc::c_int = 1;
    const SCTP_EOF: u16 = libc::MSG_FIN as u16;
    const MSG_NOTIFICATION: libc::c_int = 0x8000;
    const SCTP_ASSOC_CHANGE: u16 = 0x8001;
    const SCTP_COMM_UP: u16 = 0;
    const SCTP_RESTART: u16 = 2;

    #[repr(C)]
    #[derive(Default, Clone, Copy)]
    struct SctpSndRcvInfo {
        stream: u16,
        ssn: u16,
        flags: u16,
        ppid: u32,
        context: u32,
        timetolive: u32,
        tsn: u32,
        cumtsn: u32,
        assoc_id: i32,
    }

    #[repr(C)]
    struct SctpInitMsg {
        num_ostreams: u16,
        max_instreams: u16,
        max_attempts: u16,
        max_init_timeo: u16,
    }

    /// Kernel SCTP (Linux). `bind` fails when the kernel has no SCTP.
    pub struct KernelSctpTransport {
        fd: OwnedFd,
        local: SocketAddr,
        rxbuf: Vec<u8>,
        peers: std::collections::HashMap<i32, SocketAddr>,
    }

    fn check(r: libc::c_int) -> io::Result<libc::c_int> {
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }

    impl KernelSctpTransport {
        fn socket(addr: SocketAddr, config: &Config) -> io::Result<OwnedFd> {
            let fam = if addr.is_ipv4() {
                libc::AF_INET
            } else {
                libc::AF_INET6
            };
            // SAFETY: plain socket(2) call.
            let fd = check(unsafe { libc::socket(fam, libc::SOCK_SEQPACKET, IPPROTO_SCTP) })
                .map_err(|e| io::Error::new(e.kind(), format!("kernel SCTP unavailable: {e}")))?;
            // SAFETY: fd is a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let init = SctpInitMsg {
                num_ostreams: config.out_streams,
                max_instreams: config.in_streams,
                max_attempts: config.max_init_retransmits.min(u16::MAX as u32) as u16,
                max_init_timeo: 0,
            };
            // SAFETY: valid option buffer of the stated size.
            check(unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    SOL_SCTP,
                    SCTP_INITMSG,
                    &init as *const _ as *const libc::c_void,
                    std::mem::size_of::<SctpInitMsg>() as libc::socklen_t,
                )
            })?;
            // sctp_event_subscribe: data_io, association (first two bytes).
            let ev = [1u8, 1, 0, 0, 0, 0, 0, 0, 0, 0];
            // SAFETY: valid option buffer; the kernel accepts a prefix of the struct.
            check(unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    SOL_SCTP,
                    SCTP_EVENTS,
                    ev.as_ptr() as *const libc::c_void,
                    ev.len() as libc::socklen_t,
                )
            })?;
            Ok(fd)
        }

        /// Server: one-to-many socket bound to `addr` and listening.
        pub fn bind(addr: SocketAddr, config: &Config) -> io::Result<Self> {
            let fd = Self::socket(addr, config)?;
            let (ss, len) = sockaddr(addr);
            // SAFETY: ss holds a valid address of length len.
            check(unsafe { libc::bind(fd.as_raw_fd(), &ss as *const _ as *const _, len) })?;
            // SAFETY: plain listen(2).
            check(unsafe { libc::listen(fd.as_raw_fd(), 128) })?;
            let local = Self::local_of(&fd).unwrap_or(addr);
            Ok(KernelSctpTransport {
                fd,
                local,
                rxbuf: vec![0; 65536],
                peers: Default::default(),
            })
        }

        /// Client: one-to-many socket bound to `local`, associating with `remote`.
        pub fn connect(local: SocketAddr, remote: SocketAddr, config: &Config) -> io::Result<Self> {
            let fd = Self::socket(remote, config)?;
            let (ss, len) = sockaddr(local);
            // SAFETY: as in bind.
            check(unsafe { libc::bind(fd.as_raw_fd(), &ss as *const _ as *const _, len) })?;
            let (rs, rlen) = sockaddr(remote);
            // SAFETY: connect(2) on a one-to-many socket sets up an association.
            check(unsafe { libc::connect(fd.as_raw_fd(), &rs as *const _ as *const _, rlen) })?;
            let local = Self::local_of(&fd).unwrap_or(local);
            Ok(KernelSctpTransport {
                fd,
                local,
                rxbuf: vec![0; 65536],
                peers: Default::default(),
            })
        }

        fn local_of(fd: &OwnedFd) -> Option<SocketAddr> {
            // SAFETY: zeroed sockaddr_storage is valid; getsockname fills it.
            let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            let r =
                unsafe { libc::getsockname(fd.as_raw_fd(), &mut ss as *mut _ as *mut _, &mut len) };
            if r < 0 {
                None
            } else {
                from_sockaddr(&ss)
            }
        }

        fn recv_one(&mut self, events: &mut Vec<TransportEvent>) -> io::Result<bool> {
            // SAFETY: zeroed msghdr/sockaddr are valid starting values.
            let mut name: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
            let mut cbuf = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: self.rxbuf.as_mut_ptr() as *mut libc::c_void,
                iov_len: self.rxbuf.len(),
            };
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = &mut name as *mut _ as *mut libc::c_void;
            msg.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = std::mem::size_of_val(&cbuf) as _;
            // SAFETY: msg points at live buffers for the duration of the call.
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    return Ok(false);
                }
                return Err(e);
            }
            let n = n as usize;
            if msg.msg_flags & MSG_NOTIFICATION != 0 {
                let b = &self.rxbuf[..n];
                if b.len() >= 20 && u16::from_ne_bytes([b[0], b[1]]) == SCTP_ASSOC_CHANGE {
                    let state = u16::from_ne_bytes([b[8], b[9]]);
                    let os = u16::from_ne_bytes([b[12], b[13]]);
                    let is = u16::from_ne_bytes([b[14], b[15]]);
                    let id = i32::from_ne_bytes([b[16], b[17], b[18], b[19]]);
                    let assoc = id as u32 as u64;
                    if state == SCTP_COMM_UP || state == SCTP_RESTART {
                        let peer = from_sockaddr(&name).unwrap_or(self.local);
                        self.peers.insert(id, peer);
                        events.push(TransportEvent::Up {
                            assoc,
                            peer,
                            out_streams: os,
                            in_streams: is,
                        });
                    } else if self.peers.remove(&id).is_some() {
                        let reason = match state {
                            1 => "communication lost",
                            3 => "shutdown",
                            _ => "association failed",
                        };
                        events.push(TransportEvent::Down {
                            assoc,
                            reason: reason.to_string(),
                        });
                    }
                }
                return Ok(true);
            }
            let mut info = SctpSndRcvInfo::default();
            // SAFETY: walking the control messages the kernel wrote into cbuf.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&msg);
                while !c.is_null() {
                    if (*c).cmsg_level == SOL_SCTP && (*c).cmsg_type == SCTP_SNDRCV {
                        info =
                            std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const SctpSndRcvInfo);
                    }
                    c = libc::CMSG_NXTHDR(&msg, c);
                }
            }
            events.push(TransportEvent::Data {
                assoc: info.assoc_id as u32 as u64,
                stream: info.stream,
                // The kernel passes the PPID through untouched: it is in network order.
                ppid: u32::from_be(info.ppid),
                data: self.rxbuf[..n].to_vec(),
            });
            Ok(true)
        }

        fn send_info(&mut self, info: SctpSndRcvInfo, data: &[u8]) -> io::Result<()> {
            let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<SctpSndRcvInfo>() as u32) };
            let mut cbuf = [0u64; 16];
            let mut iov = libc::iovec {
                iov_base: data.as_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
            // SAFETY: zeroed msghdr is valid; we fill one cmsg inside cbuf.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = space as _;
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = SOL_SCTP;
                (*c).cmsg_type = SCTP_SNDRCV;
                (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<SctpSndRcvInfo>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut SctpSndRcvInfo, info);
            }
            // SAFETY: msg points at live buffers.
            let r = unsafe { libc::sendmsg(self.fd.as_raw_fd(), &msg, 0) };
            if r < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        }
    }

    impl S1Transport for KernelSctpTransport {
        fn poll(&mut self, timeout: Duration, events: &mut Vec<TransportEvent>) -> io::Result<()> {
            let deadline = Instant::now() + timeout;
            loop {
                let mut any = false;
                while self.recv_one(events)? {
                    any = true;
                    if events.len() >= 1024 {
                        break;
                    }
                }
                let now = Instant::now();
                if any && !events.is_empty() || now >= deadline {
                    return Ok(());
                }
                let mut pfd = libc::pollfd {
                    fd: self.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let wait = deadline - now;
                let ts = libc::timespec {
                    tv_sec: wait.as_secs() as libc::time_t,
                    tv_nsec: wait.subsec_nanos() as libc::c_long,
                };
                // SAFETY: one valid pollfd and timespec.
                unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
            }
        }

        fn send(&mut self, assoc: AssocId, stream: u16, ppid: u32, data: &[u8]) -> io::Result<()> {
            let info = SctpSndRcvInfo {
                stream,
                ppid: ppid.to_be(),
                assoc_id: assoc as u32 as i32,
                ..Default::default()
            };
            self.send_info(info, data)
        }

        fn close(&mut self, assoc: AssocId) {
            let info = SctpSndRcvInfo {
                flags: SCTP_EOF,
                assoc_id: assoc as u32 as i32,
                ..Default::default()
            };
            let _ = self.send_info(info, &[]);
        }

        fn local_addr(&self) -> SocketAddr {
            self.local
        }

        /// The kernel runs the SCTP timers: only input needs a `poll`.
        fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
            Some(self.fd.as_raw_fd())
        }
    }
}
