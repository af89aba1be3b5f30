//! SGi side: a TUN device (IP packets to and from the host kernel) where the process may
//! create one, else a UDP "sink" that carries each inner IP packet as one UDP datagram
//! to and from a userspace PDN emulator.

use super::sys::{self, errno, is_would_block, to_sockaddr};
use super::udp::{UdpPort, UdpStats};
use super::PacketIo;
use pepc_wire::{Batch, Verdict};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

const TX_RETRY_WAIT: Duration = Duration::from_millis(1);
const TX_RETRIES: u32 = 3;

/// Counters kept by a [`TunPort`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Given up on after the device queue stayed full through the retries.
    pub tx_dropped: u64,
    /// Refused by the kernel one by one (e.g. malformed).
    pub tx_errors: u64,
    pub tx_last_errno: i32,
}

/// A non-blocking TUN device (IFF_TUN | IFF_NO_PI: reads and writes are bare IP
/// packets). The device exists while the port is open and vanishes when it is dropped.
pub struct TunPort {
    fd: OwnedFd,
    name: String,
    addr: Ipv4Addr,
    prefix_len: u8,
    stats: TunStats,
    /// The device's drops (the receiving port only: a sender clone has none).
    drops: Option<super::SocketDropsProbe>,
    /// The queue length set ([`TunPort::set_queue_len`]; None: the kernel's default).
    queue_len: Option<u32>,
    /// A multi-queue device whose steering program is loaded ([`TunPort::steered`]).
    steered: bool,
}

fn os_err(what: &str, name: &str) -> io::Error {
    let e = io::Error::last_os_error();
    io::Error::new(e.kind(), format!("{what} on {name}: {e}"))
}

fn ifreq_for(name: &[u8]) -> libc::ifreq {
    // SAFETY: ifreq is a plain C struct/union; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    ifr
}

fn sockaddr_of(ip: Ipv4Addr) -> libc::sockaddr {
    let sin = to_sockaddr(SocketAddrV4::new(ip, 0));
    // SAFETY: sockaddr_in and sockaddr are both 16 bytes on Linux; this is how the
    // SIOCSIF* ioctls expect an IPv4 address.
    unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(sin) }
}

/// ioctl on `fd` with an ifreq, mapping failure to an error naming the step.
fn ifreq_ioctl(
    fd: RawFd,
    req: libc::Ioctl,
    ifr: &mut libc::ifreq,
    what: &str,
    name: &str,
) -> io::Result<()> {
    // SAFETY: `ifr` is a valid, writable ifreq for the duration of the call, which is
    // what every request used here reads and/or writes.
    if unsafe { libc::ioctl(fd, req, ifr as *mut libc::ifreq) } < 0 {
        return Err(os_err(what, name));
    }
    Ok(())
}

/// A socket for the interface ioctls (address, mask, flags, queue length): any
/// AF_INET socket serves.
fn control_socket(name: &str) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); result checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(os_err("control socket", name));
    }
    // SAFETY: fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Queues a multi-queue TUN device may have (the kernel's MAX_TAP_QUEUES is 256).
pub const MAX_QUEUES: usize = 64;

/// Open /dev/net/tun and attach the descriptor to device `name` with `flags`; returns
/// it and the device's final name.
fn attach_queue(name: &str, flags: libc::c_int) -> io::Result<(OwnedFd, String)> {
    // SAFETY: constant NUL-terminated path; result checked.
    let fd = unsafe {
        libc::open(
            c"/dev/net/tun".as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(os_err("open /dev/net/tun", name));
    }
    // SAFETY: fresh descriptor we own; closing it on any later error detaches the
    // queue (and removes a non-persistent device with its last queue).
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ifr = ifreq_for(name.as_bytes());
    ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
    ifreq_ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr, "TUNSETIFF", name)?;
    let actual: Vec<u8> = ifr
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok((fd, String::from_utf8_lossy(&actual).into_owned()))
}

/// Packets a node's TUN device queues for the data thread (the kernel's default,
/// 500, is a 1 ms stall at 0.5 Mpps): like the AF_XDP rings and the UDP sockets'
/// buffers, sized to absorb a data thread's stall.
pub const DEFAULT_QUEUE_LEN: u32 = 4096;

impl TunPort {
    /// Set how many packets the kernel queues for this port's reader (the device's
    /// `txqueuelen`); beyond it the kernel drops them (counted as
    /// `device_queue_full`).
    pub fn set_queue_len(&mut self, len: u32) -> io::Result<()> {
        let ctl = control_socket(&self.name)?;
        let mut r = ifreq_for(self.name.as_bytes());
        r.ifr_ifru.ifru_metric = i32::try_from(len).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TUN queue length {len}"),
            )
        })?;
        ifreq_ioctl(
            ctl.as_raw_fd(),
            libc::SIOCSIFTXQLEN,
            &mut r,
            "SIOCSIFTXQLEN",
            &self.name,
        )?;
        self.queue_len = Some(len);
        Ok(())
    }

    /// Create TUN device `name` (a `%d` in it lets the kernel pick a free number), give
    /// it `addr/prefix_len` and bring it up. Needs CAP_NET_ADMIN and /dev/net/tun; the
    /// error then says which step failed (its kind is kept, e.g. PermissionDenied).
    pub fn open(name: &str, addr: Ipv4Addr, prefix_len: u8) -> io::Result<TunPort> {
        let mut q = Self::open_queues(name, addr, prefix_len, 1)?;
        Ok(q.remove(0))
    }

    /// As [`TunPort::open`], with `queues` queues (a multi-queue device when more than
    /// one): a port per queue, in the order the device indexes them, each read by its
    /// own thread; the kernel spreads packets over them by its flow hash unless a
    /// program steers them ([`super::steer::steer_tun`]). The first port counts the
    /// device's drops.
    pub fn open_queues(
        name: &str,
        addr: Ipv4Addr,
        prefix_len: u8,
        queues: usize,
    ) -> io::Result<Vec<TunPort>> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.as_bytes().contains(&0) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "TUN name {name:?} must be 1..{} bytes without NUL",
                    libc::IFNAMSIZ - 1
                ),
            ));
        }
        if prefix_len > 32 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TUN prefix length {prefix_len} exceeds 32"),
            ));
        }
        if queues == 0 || queues > MAX_QUEUES {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TUN queues: 1..={MAX_QUEUES}, got {queues}"),
            ));
        }
        let mut flags = libc::IFF_TUN | libc::IFF_NO_PI;
        if queues > 1 {
            flags |= libc::IFF_MULTI_QUEUE;
        }
        // Each queue is a descriptor attached to the device by name; the first creates
        // it, and the kernel writes back the final name (resolving any %d).
        let (first, actual) = attach_queue(name, flags)?;
        let mut fds = vec![first];
        for _ in 1..queues {
            fds.push(attach_queue(&actual, flags)?.0);
        }

        let ctl = control_socket(&actual)?;
        let ctl = ctl.as_raw_fd();
        let nb = actual.as_bytes();

        let mut r = ifreq_for(nb);
        r.ifr_ifru.ifru_addr = sockaddr_of(addr);
        ifreq_ioctl(ctl, libc::SIOCSIFADDR, &mut r, "SIOCSIFADDR", &actual)?;

        let mask = if prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(prefix_len))
        };
        let mut r = ifreq_for(nb);
        r.ifr_ifru.ifru_netmask = sockaddr_of(Ipv4Addr::from(mask));
        ifreq_ioctl(ctl, libc::SIOCSIFNETMASK, &mut r, "SIOCSIFNETMASK", &actual)?;

        let mut r = ifreq_for(nb);
        ifreq_ioctl(ctl, libc::SIOCGIFFLAGS, &mut r, "SIOCGIFFLAGS", &actual)?;
        // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
        let flags = unsafe { r.ifr_ifru.ifru_flags };
        r.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        ifreq_ioctl(ctl, libc::SIOCSIFFLAGS, &mut r, "SIOCSIFFLAGS", &actual)?;

        // Opened here, in the device's network namespace.
        let drops = super::socket_drops::DeviceStats::open(&actual)
            .map(super::SocketDropsProbe::for_tun)
            .map_err(|e| tracing::warn!(device = %actual, "TUN drop count unavailable: {e}"))
            .ok();
        Ok(fds
            .into_iter()
            .enumerate()
            .map(|(k, fd)| TunPort {
                fd,
                name: actual.clone(),
                addr,
                prefix_len,
                stats: TunStats::default(),
                drops: if k == 0 { drops.clone() } else { None },
                queue_len: None,
                steered: false,
            })
            .collect())
    }

    /// The device name the kernel assigned.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn addr(&self) -> (Ipv4Addr, u8) {
        (self.addr, self.prefix_len)
    }

    pub fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn stats(&self) -> TunStats {
        self.stats
    }

    /// Whether the kernel queues each packet for its slice's reader (a multi-queue
    /// device with the steering program loaded); else its flow hash spreads them.
    pub fn steered(&self) -> bool {
        self.steered
    }

    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        super::wait_readable(self.as_raw_fd(), timeout)
    }
}

impl AsRawFd for TunPort {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl TunPort {
    /// Another port on a duplicate of the device descriptor (each write(2) is one
    /// packet, so threads may write through their own copies). The device lives until
    /// the last copy is closed.
    pub fn try_clone(&self) -> io::Result<TunPort> {
        Ok(TunPort {
            fd: self.fd.try_clone()?,
            name: self.name.clone(),
            addr: self.addr,
            prefix_len: self.prefix_len,
            stats: TunStats::default(),
            drops: None,
            queue_len: self.queue_len,
            steered: self.steered,
        })
    }
}

impl Drop for TunPort {
    fn drop(&mut self) {
        // Keep the final count: the device goes when its last descriptor closes.
        if let Some(p) = &self.drops {
            p.close();
        }
    }
}

impl AsFd for TunPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl PacketIo for TunPort {
    /// One read(2) per packet (a TUN fd has no batch read) until EAGAIN or full.
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        batch.len = 0;
        let fd = self.as_raw_fd();
        let now = sys::now_ns();
        let mut n = 0;
        while n < batch.capacity() {
            let b = &mut batch.bufs[n];
            let area = b.rx_area();
            // SAFETY: reads at most area.len() bytes into the buffer's rx area.
            let r = unsafe { libc::read(fd, area.as_mut_ptr().cast(), area.len()) };
            if r < 0 {
                let e = errno();
                if e == libc::EINTR {
                    continue;
                }
                if is_would_block(e) || n > 0 {
                    // Keep what we have; a real error will show again on the next call.
                    break;
                }
                return Err(io::Error::from_raw_os_error(e));
            }
            if r == 0 {
                break;
            }
            b.set_received(r as usize);
            b.meta.peer = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0);
            b.meta.rx_ns = now;
            b.meta.verdict = Verdict::Drop;
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += r as u64;
            n += 1;
        }
        batch.len = n;
        Ok(n)
    }

    /// One write(2) per selected packet, each a complete IP packet.
    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        let fd = self.as_raw_fd();
        let mut sent = 0;
        let mut retries = 0;
        let mut pkts = batch.packets().iter().filter(|p| p.meta.verdict == select);
        let mut cur = pkts.next();
        while let Some(p) = cur {
            let data = p.as_slice();
            // SAFETY: writes data.len() bytes from a live slice.
            let r = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
            if r >= 0 {
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += r as u64;
                sent += 1;
                cur = pkts.next();
                continue;
            }
            match errno() {
                libc::EINTR => {}
                e if is_would_block(e) || e == libc::ENOBUFS => {
                    if retries >= TX_RETRIES {
                        self.stats.tx_dropped += 1 + pkts.count() as u64;
                        break;
                    }
                    retries += 1;
                    sys::poll_one(fd, libc::POLLOUT, TX_RETRY_WAIT)?;
                }
                e @ (libc::EBADF | libc::EFAULT) => {
                    return Err(io::Error::from_raw_os_error(e));
                }
                e => {
                    self.stats.tx_errors += 1;
                    self.stats.tx_last_errno = e;
                    cur = pkts.next();
                }
            }
        }
        Ok(sent)
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }

    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        Ok(Box::new(self.try_clone()?))
    }

    fn socket_drops(&self) -> Option<super::SocketDropsProbe> {
        self.drops.clone()
    }

    fn idle_polls(&self) -> u32 {
        super::IDLE_POLLS_SYSCALL
    }
}

/// SGi without a TUN device: every IP packet bound for the PDN is sent as the payload
/// of one UDP datagram to `sink`; every datagram received is taken as a downlink IP
/// packet (from any sender, so an emulator may inject from its own socket).
pub struct UdpSinkPort {
    udp: UdpPort,
    sink: SocketAddrV4,
}

impl UdpSinkPort {
    pub fn bind(local: SocketAddrV4, sink: SocketAddrV4) -> io::Result<UdpSinkPort> {
        Ok(UdpSinkPort {
            udp: UdpPort::bind(local)?,
            sink,
        })
    }

    /// `n` sink ports on `local` in one SO_REUSEPORT group (see
    /// [`UdpPort::bind_group`]), each sending to `sink`.
    pub fn bind_group(
        local: SocketAddrV4,
        sink: SocketAddrV4,
        n: usize,
    ) -> io::Result<Vec<UdpSinkPort>> {
        Ok(UdpPort::bind_group(local, n)?
            .into_iter()
            .map(|udp| UdpSinkPort { udp, sink })
            .collect())
    }

    pub fn local_addr(&self) -> SocketAddrV4 {
        self.udp.local_addr()
    }

    /// See [`UdpPort::set_gro`].
    pub fn set_gro(&mut self, on: bool) -> bool {
        self.udp.set_gro(on)
    }

    pub fn sink_addr(&self) -> SocketAddrV4 {
        self.sink
    }

    pub fn stats(&self) -> UdpStats {
        self.udp.stats()
    }

    pub fn as_raw_fd(&self) -> RawFd {
        self.udp.as_raw_fd()
    }

    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        self.udp.wait_readable(timeout)
    }
}

impl PacketIo for UdpSinkPort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        self.udp.recv_batch(batch)
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        self.udp.send_selected(batch, select, Some(self.sink))
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.udp.as_raw_fd())
    }

    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        Ok(Box::new(UdpSinkPort {
            udp: self.udp.try_clone()?,
            sink: self.sink,
        }))
    }

    fn socket_drops(&self) -> Option<super::SocketDropsProbe> {
        self.udp.socket_drops()
    }

    fn idle_polls(&self) -> u32 {
        super::IDLE_POLLS_SYSCALL
    }
}

/// How to open the SGi port.
#[derive(Debug, Clone)]
pub struct SgiConfig {
    /// Try a TUN device first (set false to go straight to the UDP sink).
    pub use_tun: bool,
    pub tun_name: String,
    pub tun_addr: Ipv4Addr,
    pub tun_prefix_len: u8,
    /// Packets the kernel queues for the reader ([`TunPort::set_queue_len`]).
    pub tun_queue_len: u32,
    /// Local address of the fallback UDP socket (port 0 = ephemeral).
    pub sink_local: SocketAddrV4,
    /// Where the fallback sends uplink IP packets (the PDN emulator).
    pub sink_peer: SocketAddrV4,
    /// Whether the fallback's sockets receive with UDP GRO ([`UdpPort::set_gro`]).
    pub sink_gro: bool,
}

impl Default for SgiConfig {
    fn default() -> Self {
        SgiConfig {
            use_tun: true,
            tun_name: "pepc%d".into(),
            tun_addr: Ipv4Addr::new(10, 45, 0, 1),
            tun_prefix_len: 16,
            tun_queue_len: DEFAULT_QUEUE_LEN,
            sink_local: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0),
            sink_peer: SocketAddrV4::new(Ipv4Addr::LOCALHOST, 5201),
            sink_gro: true,
        }
    }
}

/// Which SGi backend was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SgiBackend {
    Tun,
    UdpSink,
}

/// The opened SGi port: a TUN device or the UDP-sink fallback (with why TUN was not
/// used, if it was tried).
pub enum SgiPort {
    Tun(TunPort),
    UdpSink {
        port: UdpSinkPort,
        tun_error: Option<io::Error>,
    },
}

/// Open SGi per `cfg`: TUN if allowed and possible, otherwise the UDP sink. Any TUN
/// failure (no /dev/net/tun, no CAP_NET_ADMIN, name in use, ...) falls back; the error
/// is kept in the result for logging. Fails only if the fallback socket cannot bind.
pub fn open_sgi(cfg: &SgiConfig) -> io::Result<SgiPort> {
    Ok(open_sgi_ports(cfg, 1, None)?.remove(0))
}

/// Open SGi as [`open_sgi`] does, with a port per slice (`node.demux = "queues"`): a
/// TUN device with a queue each, or the UDP sink's sockets in a reuseport group, in
/// slice order. The kernel steers each packet to the port of the slice its destination
/// names (`by`: the UE address's slice bits).
pub fn open_sgi_queues(
    cfg: &SgiConfig,
    slices: usize,
    by: super::steer::SliceField,
) -> io::Result<Vec<SgiPort>> {
    open_sgi_ports(cfg, slices, (slices > 1).then_some(by))
}

fn open_sgi_ports(
    cfg: &SgiConfig,
    n: usize,
    by: Option<super::steer::SliceField>,
) -> io::Result<Vec<SgiPort>> {
    let tun_error = if cfg.use_tun {
        let opened = TunPort::open_queues(&cfg.tun_name, cfg.tun_addr, cfg.tun_prefix_len, n)
            .and_then(|mut q| {
                q[0].set_queue_len(cfg.tun_queue_len)?;
                // Without the program (BPF refused) the device still works: its flow
                // hash spreads the packets and the slices hand them on.
                let steered = match by.map(|by| super::steer::steer_tun(q[0].as_raw_fd(), by)) {
                    Some(Ok(())) => true,
                    Some(Err(e)) => {
                        tracing::warn!(device = %q[0].name, "TUN queues not steered by slice: {e}");
                        false
                    }
                    None => false,
                };
                for t in &mut q {
                    t.queue_len = Some(cfg.tun_queue_len);
                    t.steered = steered;
                }
                Ok(q)
            });
        match opened {
            Ok(q) => return Ok(q.into_iter().map(SgiPort::Tun).collect()),
            Err(e) => Some(e),
        }
    } else {
        None
    };
    let sinks = UdpSinkPort::bind_group(cfg.sink_local, cfg.sink_peer, n).and_then(|mut g| {
        for p in &mut g {
            p.set_gro(cfg.sink_gro);
        }
        if let Some(by) = by {
            super::steer::attach_reuseport(&g[0].udp, super::steer::Payload::Ipv4, by)?;
        }
        Ok(g)
    });
    match sinks {
        Ok(g) => Ok(g
            .into_iter()
            .map(|port| SgiPort::UdpSink {
                port,
                tun_error: tun_error
                    .as_ref()
                    .map(|e| io::Error::new(e.kind(), e.to_string())),
            })
            .collect()),
        Err(e) => Err(io::Error::new(
            e.kind(),
            match &tun_error {
                Some(t) => format!("SGi: TUN failed ({t}) and UDP sink bind failed ({e})"),
                None => format!("SGi: UDP sink bind on {} failed: {e}", cfg.sink_local),
            },
        )),
    }
}

impl SgiPort {
    pub fn backend(&self) -> SgiBackend {
        match self {
            SgiPort::Tun(_) => SgiBackend::Tun,
            SgiPort::UdpSink { .. } => SgiBackend::UdpSink,
        }
    }

    /// What this port runs on (see [`crate::io::PortInfo`]).
    pub fn info(&self) -> crate::io::PortInfo {
        let (io, interface) = match self {
            SgiPort::Tun(t) => ("tun", t.name.clone()),
            SgiPort::UdpSink { .. } => ("udp_sink", String::new()),
        };
        crate::io::PortInfo::kernel(io, interface, self.describe())
    }

    /// One line for the startup log.
    pub fn describe(&self) -> String {
        match self {
            SgiPort::Tun(t) => match t.queue_len {
                Some(q) => format!("TUN {} ({}/{}, queue of {q})", t.name, t.addr, t.prefix_len),
                None => format!("TUN {} ({}/{})", t.name, t.addr, t.prefix_len),
            },
            SgiPort::UdpSink { port, tun_error } => {
                let mut s = format!(
                    "UDP sink {} -> {}{}",
                    port.local_addr(),
                    port.sink_addr(),
                    if port.udp.gro() { " with GRO" } else { "" }
                );
                if let Some(e) = tun_error {
                    s.push_str(&format!(" (TUN unavailable: {e})"));
                }
                s
            }
        }
    }

    pub fn as_raw_fd(&self) -> RawFd {
        match self {
            SgiPort::Tun(t) => t.as_raw_fd(),
            SgiPort::UdpSink { port, .. } => port.as_raw_fd(),
        }
    }

    pub fn wait_readable(&self, timeout: Duration) -> io::Result<bool> {
        super::wait_readable(self.as_raw_fd(), timeout)
    }
}

impl PacketIo for SgiPort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        match self {
            SgiPort::Tun(t) => t.recv_batch(batch),
            SgiPort::UdpSink { port, .. } => port.recv_batch(batch),
        }
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        match self {
            SgiPort::Tun(t) => t.send_batch(batch, select),
            SgiPort::UdpSink { port, .. } => port.send_batch(batch, select),
        }
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.as_raw_fd())
    }

    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        match self {
            SgiPort::Tun(t) => t.try_clone_sender(),
            SgiPort::UdpSink { port, .. } => port.try_clone_sender(),
        }
    }

    fn socket_drops(&self) -> Option<super::SocketDropsProbe> {
        match self {
            SgiPort::Tun(t) => t.socket_drops(),
            SgiPort::UdpSink { port, .. } => port.socket_drops(),
        }
    }

    fn idle_polls(&self) -> u32 {
        super::IDLE_POLLS_SYSCALL
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{SocketAddr, UdpSocket};
    use std::time::Instant;

    fn checksum(data: &[u8]) -> u16 {
        let mut sum: u32 = data
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// IPv4/UDP packet with a valid header checksum and UDP checksum 0 (allowed on v4).
    fn ipv4_udp(src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) -> Vec<u8> {
        let total = 28 + payload.len();
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[8] = 64;
        p[9] = 17;
        p[12..16].copy_from_slice(&src.ip().octets());
        p[16..20].copy_from_slice(&dst.ip().octets());
        let c = checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        p[20..22].copy_from_slice(&src.port().to_be_bytes());
        p[22..24].copy_from_slice(&dst.port().to_be_bytes());
        p[24..26].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        p[28..].copy_from_slice(payload);
        p
    }

    fn tun_unavailable(e: &io::Error) -> bool {
        matches!(
            e.kind(),
            io::ErrorKind::PermissionDenied | io::ErrorKind::NotFound
        )
    }

    /// Kernel -> TUN -> recv_batch, then send_batch -> TUN -> kernel -> socket.
    #[test]
    fn tun_round_trip_through_kernel() {
        let local = Ipv4Addr::new(10, 254, 254, 1);
        let remote = Ipv4Addr::new(10, 254, 254, 2);
        let mut tun = match TunPort::open("pepct%d", local, 30) {
            Ok(t) => t,
            Err(e) => {
                // Unprivileged environment: the SGi opener must fall back instead.
                assert!(tun_unavailable(&e), "unexpected TUN error: {e}");
                let cfg = SgiConfig {
                    tun_name: "pepcf%d".into(),
                    ..SgiConfig::default()
                };
                let sgi = open_sgi(&cfg).unwrap();
                assert_eq!(sgi.backend(), SgiBackend::UdpSink);
                assert!(sgi.describe().contains("TUN unavailable"));
                return;
            }
        };
        let name = tun.name().to_string();
        assert!(name.starts_with("pepct") && !name.contains('%'), "{name}");
        assert!(std::path::Path::new(&format!("/sys/class/net/{name}")).exists());
        assert_eq!(tun.addr(), (local, 30));
        // The queue the kernel keeps for the reader is what we set.
        let qlen = || {
            std::fs::read_to_string(format!("/sys/class/net/{name}/tx_queue_len"))
                .unwrap()
                .trim()
                .parse::<u32>()
                .unwrap()
        };
        assert_eq!(qlen(), 500, "the kernel's default");
        tun.set_queue_len(DEFAULT_QUEUE_LEN).unwrap();
        assert_eq!(qlen(), DEFAULT_QUEUE_LEN);

        let sock = UdpSocket::bind(SocketAddrV4::new(local, 0)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let SocketAddr::V4(sock_addr) = sock.local_addr().unwrap() else {
            panic!("v6")
        };
        sock.send_to(b"pepc uplink probe", SocketAddrV4::new(remote, 9))
            .unwrap();

        // The device may also carry IPv6 router solicitations etc.: look for ours.
        let mut batch = Batch::new(8);
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut found = false;
        while !found && Instant::now() < deadline {
            if tun.recv_batch(&mut batch).unwrap() == 0 {
                tun.wait_readable(Duration::from_millis(100)).unwrap();
                continue;
            }
            for p in batch.packets() {
                let b = p.as_slice();
                assert!(p.meta.rx_ns > 0);
                if b.len() >= 28 && b[0] == 0x45 && b[9] == 17 {
                    assert_eq!(&b[12..16], &local.octets());
                    assert_eq!(&b[16..20], &remote.octets());
                    assert_eq!(&b[20..22], &sock_addr.port().to_be_bytes());
                    assert_eq!(&b[22..24], &9u16.to_be_bytes());
                    assert_eq!(&b[28..], b"pepc uplink probe");
                    found = true;
                }
            }
        }
        assert!(found, "kernel packet never came out of {name}");

        // Downlink: a packet written to the TUN is delivered to the local socket.
        let from = SocketAddrV4::new(remote, 9);
        let mut out = Batch::new(4);
        out.bufs[0].fill(&ipv4_udp(from, sock_addr, b"pepc downlink"));
        out.bufs[0].meta.verdict = Verdict::ToSgi;
        out.bufs[1].fill(&ipv4_udp(from, sock_addr, b"not selected"));
        out.bufs[1].meta.verdict = Verdict::ToS1u;
        out.len = 2;
        assert_eq!(tun.send_batch(&out, Verdict::ToSgi).unwrap(), 1);
        let mut buf = [0u8; 128];
        let (n, src) = sock.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"pepc downlink");
        assert_eq!(src, SocketAddr::V4(from));
        sock.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        assert!(sock.recv_from(&mut buf).is_err(), "unselected packet sent");
        assert_eq!(tun.stats().tx_packets, 1);

        // Closing the port removes the device.
        drop(tun);
        assert!(!std::path::Path::new(&format!("/sys/class/net/{name}")).exists());
    }

    /// A port per slice: TUN queues the steering program serves where a device can be
    /// made, else (and when asked) the UDP sink's sockets, the kernel steering each
    /// downlink packet to its slice's socket.
    #[test]
    fn sgi_opens_a_port_per_slice() {
        let l = pepc_slice::ids::IdLayout::new(2, Ipv4Addr::new(10, 254, 244, 0), 24).unwrap();
        let by = super::super::steer::SliceField::of_ue_addr(&l);
        let cfg = SgiConfig {
            tun_name: "pepcs%d".into(),
            tun_addr: Ipv4Addr::new(10, 254, 244, 254),
            tun_prefix_len: 24,
            ..SgiConfig::default()
        };
        let ports = open_sgi_queues(&cfg, 2, by).unwrap();
        assert_eq!(ports.len(), 2);
        match &ports[0] {
            SgiPort::Tun(t) => {
                assert!(t.steered() && ports.iter().all(|p| p.backend() == SgiBackend::Tun));
                assert_eq!(t.queue_len, Some(DEFAULT_QUEUE_LEN));
            }
            SgiPort::UdpSink { tun_error, .. } => {
                assert!(
                    tun_unavailable(tun_error.as_ref().unwrap()),
                    "{tun_error:?}"
                )
            }
        }
        let mut sinks = open_sgi_queues(
            &SgiConfig {
                use_tun: false,
                ..cfg
            },
            2,
            by,
        )
        .unwrap();
        let to = match &sinks[0] {
            SgiPort::UdpSink { port, .. } => port.local_addr(),
            SgiPort::Tun(_) => panic!("use_tun = false"),
        };
        let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
        let server = SocketAddrV4::new(Ipv4Addr::new(198, 51, 100, 1), 80);
        for s in [1u32, 0, 1] {
            let ue = SocketAddrV4::new(l.ue_ip(s, 7), 1000);
            pdn.send_to(&ipv4_udp(server, ue, b"dl"), to).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        let mut got = [0usize; 2];
        let mut b = Batch::new(8);
        while got.iter().sum::<usize>() < 3 && Instant::now() < deadline {
            for (k, p) in sinks.iter_mut().enumerate() {
                p.recv_batch(&mut b).unwrap();
                for x in b.packets() {
                    let d = x.as_slice();
                    let dst = Ipv4Addr::new(d[16], d[17], d[18], d[19]);
                    assert_eq!(l.split_ue_ip(u32::from(dst)).unwrap().0, k as u32);
                    got[k] += 1;
                }
            }
        }
        assert_eq!(got, [1, 2]);
    }

    #[test]
    fn tun_rejects_bad_arguments() {
        let a = Ipv4Addr::new(10, 254, 252, 1);
        let e = TunPort::open("this-name-is-too-long", a, 30).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = TunPort::open("pepcx%d", a, 33).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        let e = TunPort::open("", a, 30).err().unwrap();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn open_sgi_prefers_tun_when_possible() {
        let cfg = SgiConfig {
            tun_name: "pepcs%d".into(),
            tun_addr: Ipv4Addr::new(10, 254, 253, 1),
            tun_prefix_len: 30,
            ..SgiConfig::default()
        };
        let sgi = open_sgi(&cfg).unwrap();
        // Decide what to expect from whether this process can create TUN devices.
        match TunPort::open("pepcp%d", Ipv4Addr::new(10, 254, 251, 1), 30) {
            Ok(_) => {
                assert_eq!(sgi.backend(), SgiBackend::Tun);
                assert!(sgi.describe().contains("pepcs"), "{}", sgi.describe());
            }
            Err(e) => {
                assert!(tun_unavailable(&e), "{e}");
                assert_eq!(sgi.backend(), SgiBackend::UdpSink);
            }
        }
        assert!(sgi.poll_fd().is_some());
    }

    /// A TUN failure (here: an invalid name) falls back to the UDP sink, which carries
    /// uplink IP packets to the sink and takes downlink ones from any sender.
    #[test]
    fn fallback_udp_sink_carries_ip_packets() {
        let emu = UdpSocket::bind("127.0.0.1:0").unwrap();
        emu.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let SocketAddr::V4(emu_addr) = emu.local_addr().unwrap() else {
            panic!("v6")
        };
        let cfg = SgiConfig {
            tun_name: "name-longer-than-ifnamsiz".into(),
            sink_peer: emu_addr,
            ..SgiConfig::default()
        };
        let mut sgi = open_sgi(&cfg).unwrap();
        assert_eq!(sgi.backend(), SgiBackend::UdpSink);
        let d = sgi.describe();
        assert!(
            d.contains("UDP sink") && d.contains("TUN unavailable"),
            "{d}"
        );
        let SgiPort::UdpSink { port, tun_error } = &sgi else {
            unreachable!()
        };
        assert_eq!(
            tun_error.as_ref().map(|e| e.kind()),
            Some(io::ErrorKind::InvalidInput)
        );
        let local = port.local_addr();

        // Uplink: each selected packet becomes one datagram to the sink, whatever the
        // packet's meta.peer says.
        let ip1 = ipv4_udp(
            SocketAddrV4::new(Ipv4Addr::new(10, 45, 0, 2), 1000),
            SocketAddrV4::new(Ipv4Addr::new(8, 8, 8, 8), 53),
            b"query",
        );
        let mut out = Batch::new(4);
        out.bufs[0].fill(&ip1);
        out.bufs[0].meta.verdict = Verdict::ToSgi;
        out.bufs[0].meta.peer = SocketAddrV4::new(Ipv4Addr::new(192, 0, 2, 1), 2152);
        out.bufs[1].fill(b"dropped");
        out.bufs[2].fill(&ip1[..20]);
        out.bufs[2].meta.verdict = Verdict::ToSgi;
        out.len = 3;
        assert_eq!(sgi.send_batch(&out, Verdict::ToSgi).unwrap(), 2);
        let mut buf = [0u8; 256];
        let (n, from) = emu.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &ip1[..]);
        assert_eq!(from, SocketAddr::V4(local));
        let (n, _) = emu.recv_from(&mut buf).unwrap();
        assert_eq!(&buf[..n], &ip1[..20]);

        // Downlink: the emulator injects an IP packet.
        let ip2 = ipv4_udp(
            SocketAddrV4::new(Ipv4Addr::new(8, 8, 8, 8), 53),
            SocketAddrV4::new(Ipv4Addr::new(10, 45, 0, 2), 1000),
            b"answer",
        );
        emu.send_to(&ip2, local).unwrap();
        assert!(sgi.wait_readable(Duration::from_secs(2)).unwrap());
        let mut inb = Batch::new(8);
        assert_eq!(sgi.recv_batch(&mut inb).unwrap(), 1);
        assert_eq!(inb.packets()[0].as_slice(), &ip2[..]);
    }

    #[test]
    fn use_tun_false_goes_straight_to_sink() {
        let cfg = SgiConfig {
            use_tun: false,
            ..SgiConfig::default()
        };
        let sgi = open_sgi(&cfg).unwrap();
        assert_eq!(sgi.backend(), SgiBackend::UdpSink);
        assert!(!sgi.describe().contains("TUN unavailable"));
    }

    /// Packets the kernel could not queue for a TUN reader that fell behind are
    /// counted (its `tx_dropped`): with nobody reading, what was sent is what the
    /// port then reads plus what the probe counts.
    #[test]
    fn a_full_tun_queue_is_counted_per_packet() {
        let local = Ipv4Addr::new(10, 254, 252, 1);
        let remote = Ipv4Addr::new(10, 254, 252, 2);
        let mut tun = match TunPort::open("pepcq%d", local, 30) {
            Ok(t) => t,
            Err(e) => {
                assert!(tun_unavailable(&e), "unexpected TUN error: {e}");
                eprintln!("SKIPPED: cannot create a TUN device here: {e}");
                return;
            }
        };
        use crate::io::SocketDropReason;
        let probe = tun.socket_drops().expect("a TUN port counts its drops");
        assert!(
            tun.try_clone().unwrap().drops.is_none(),
            "a clone has no probe"
        );
        let sock = UdpSocket::bind(SocketAddrV4::new(local, 0)).unwrap();
        let sent = 3_000u64;
        for _ in 0..sent {
            sock.send_to(b"pepc drop probe", SocketAddrV4::new(remote, 9))
                .unwrap();
        }
        let mut batch = Batch::new(32);
        let (mut ours, mut others) = (0u64, 0u64);
        let quiet = Instant::now() + Duration::from_millis(300);
        while Instant::now() < quiet {
            tun.recv_batch(&mut batch).unwrap();
            for p in batch.packets() {
                let b = p.as_slice();
                if b.len() >= 28 && b[0] == 0x45 && b[9] == 17 && b[16..20] == remote.octets() {
                    ours += 1;
                } else {
                    others += 1;
                }
            }
        }
        let dropped = probe.read().get(SocketDropReason::DeviceQueueFull);
        // The queue holds txqueuelen packets (500 by default): most were dropped.
        assert!(ours < sent && dropped > 0, "read {ours}, dropped {dropped}");
        // The kernel may also send the device a few packets of its own (IPv6).
        assert!(
            ours + dropped >= sent && ours + dropped <= sent + others + 8,
            "sent {sent}, read {ours} (+{others} others), dropped {dropped}"
        );
        // The count stays readable after the device is gone.
        drop(tun);
        assert_eq!(probe.read().get(SocketDropReason::DeviceQueueFull), dropped);
    }
}
