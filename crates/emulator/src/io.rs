//! Batched datagram I/O for the driver: one sendmmsg/recvmmsg per up to [`BATCH`]
//! packets on the S1-U and PDN sockets (the per-packet send_to/recv_from syscall was
//! the emulator's main cost under traffic), plus the optional TUN device of the PDN
//! side. Modelled on pepc-node's io/udp.rs and io/tun.rs (copied, not imported: the
//! emulator must not depend on the packet core).

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Packets per syscall.
pub const BATCH: usize = 64;
/// Largest datagram received (GTP-U of a 1500-byte IP packet fits).
const RX_BUF: usize = 2048;
/// Socket buffers asked for (best effort): bursts of a 10K-UE run fit without loss.
const SOCK_BUF_BYTES: libc::c_int = 8 << 20;
/// Waits for send-buffer space before a packet counts as dropped.
const TX_RETRIES: u32 = 50;

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn to_sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    // SAFETY: all-zero is a valid sockaddr_in.
    let mut s: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    s.sin_family = libc::AF_INET as libc::sa_family_t;
    s.sin_port = a.port().to_be();
    s.sin_addr.s_addr = u32::from(*a.ip()).to_be();
    s
}

fn from_sockaddr(s: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
        u16::from_be(s.sin_port),
    )
}

fn poll_out(fd: RawFd) {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd; the result only decides whether to retry.
    unsafe { libc::poll(&mut p, 1, 1) };
}

fn set_buf(fd: RawFd, opt: libc::c_int) {
    let v = SOCK_BUF_BYTES;
    // SAFETY: valid fd and option value pointer/length; failure only leaves the
    // default size, which is not an error for us.
    unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// Outgoing datagrams queued for one sendmmsg flush; payloads live in one arena.
#[derive(Default)]
pub struct TxQueue {
    data: Vec<u8>,
    items: Vec<(usize, usize, SocketAddrV4)>,
}

impl TxQueue {
    /// Append a datagram built by `fill` into the arena (no per-packet allocation).
    pub fn push_with(&mut self, to: SocketAddrV4, fill: impl FnOnce(&mut Vec<u8>)) {
        let start = self.data.len();
        fill(&mut self.data);
        self.items.push((start, self.data.len() - start, to));
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// A non-blocking UDP socket with batched send and receive.
pub struct BatchUdp {
    sock: UdpSocket,
    rx: Vec<[u8; RX_BUF]>,
}

impl BatchUdp {
    pub fn bind(addr: SocketAddr) -> io::Result<BatchUdp> {
        let sock = UdpSocket::bind(addr)?;
        sock.set_nonblocking(true)?;
        set_buf(sock.as_raw_fd(), libc::SO_RCVBUF);
        set_buf(sock.as_raw_fd(), libc::SO_SNDBUF);
        Ok(BatchUdp {
            sock,
            rx: vec![[0u8; RX_BUF]; BATCH],
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    pub fn send_to(&self, b: &[u8], to: SocketAddr) -> io::Result<usize> {
        self.sock.send_to(b, to)
    }

    /// Send every queued datagram (sendmmsg, BATCH at a time), waiting briefly for
    /// buffer space when full. Returns (sent, dropped); the queue is emptied.
    pub fn flush(&self, q: &mut TxQueue) -> (u64, u64) {
        let fd = self.sock.as_raw_fd();
        let (mut sent, mut dropped) = (0u64, 0u64);
        let mut addrs = [to_sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)); BATCH];
        // SAFETY: iovec and mmsghdr are plain C structs; all-zero is valid.
        let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for chunk in q.items.chunks(BATCH) {
            for (i, &(start, len, to)) in chunk.iter().enumerate() {
                addrs[i] = to_sockaddr(to);
                iov[i].iov_base = q.data[start..].as_ptr().cast_mut().cast();
                iov[i].iov_len = len;
            }
            for i in 0..chunk.len() {
                let h = &mut hdrs[i].msg_hdr;
                h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_in).cast();
                h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_iov = &mut iov[i];
                h.msg_iovlen = 1;
            }
            let mut off = 0;
            let mut retries = 0;
            while off < chunk.len() {
                // SAFETY: slots off..len point at live arena bytes and our own arrays;
                // sendmmsg only reads them.
                let r = unsafe {
                    libc::sendmmsg(
                        fd,
                        hdrs.as_mut_ptr().add(off),
                        (chunk.len() - off) as libc::c_uint,
                        libc::MSG_DONTWAIT,
                    )
                };
                if r > 0 {
                    off += r as usize;
                    sent += r as u64;
                    continue;
                }
                let e = if r == 0 { libc::EAGAIN } else { errno() };
                if e == libc::EINTR {
                    continue;
                }
                if (e == libc::EAGAIN || e == libc::ENOBUFS) && retries < TX_RETRIES {
                    retries += 1;
                    poll_out(fd);
                    continue;
                }
                // Refused (e.g. ECONNREFUSED from an earlier ICMP) or still full: skip
                // one datagram and go on; it counts as dropped.
                off += 1;
                dropped += 1;
            }
        }
        q.items.clear();
        q.data.clear();
        (sent, dropped)
    }

    /// Receive everything waiting (recvmmsg, BATCH at a time) and hand each datagram
    /// to `f`. Returns the number received.
    pub fn recv_all(&mut self, mut f: impl FnMut(&[u8], SocketAddrV4)) -> usize {
        let fd = self.sock.as_raw_fd();
        let mut total = 0;
        loop {
            let mut addrs = [to_sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)); BATCH];
            // SAFETY: plain C structs; all-zero is valid.
            let mut iov: [libc::iovec; BATCH] = unsafe { std::mem::zeroed() };
            let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
            for i in 0..BATCH {
                iov[i].iov_base = self.rx[i].as_mut_ptr().cast();
                iov[i].iov_len = RX_BUF;
                let h = &mut hdrs[i].msg_hdr;
                h.msg_name = (&mut addrs[i] as *mut libc::sockaddr_in).cast();
                h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
                h.msg_iov = &mut iov[i];
                h.msg_iovlen = 1;
            }
            // SAFETY: BATCH slots pointing at our own live buffers and arrays.
            let r = unsafe {
                libc::recvmmsg(
                    fd,
                    hdrs.as_mut_ptr(),
                    BATCH as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r <= 0 {
                // EAGAIN, EINTR or a stale ICMP error: nothing more now.
                return total;
            }
            let r = r as usize;
            for i in 0..r {
                let len = (hdrs[i].msg_len as usize).min(RX_BUF);
                f(&self.rx[i][..len], from_sockaddr(&addrs[i]));
            }
            total += r;
            if r < BATCH {
                return total;
            }
        }
    }
}

/// A non-blocking TUN device (IFF_TUN | IFF_NO_PI) owning the server address, with a
/// route to it: the PDN side when running as root. Gone when dropped.
pub struct Tun {
    fd: OwnedFd,
    name: String,
    buf: Vec<u8>,
}

fn ifreq_for(name: &[u8]) -> libc::ifreq {
    // SAFETY: plain C struct/union; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name) {
        *d = *s as libc::c_char;
    }
    ifr
}

fn ioctl_ifr(fd: RawFd, req: libc::Ioctl, ifr: &mut libc::ifreq, what: &str) -> io::Result<()> {
    // SAFETY: `ifr` is a valid, writable ifreq for the call.
    if unsafe { libc::ioctl(fd, req, ifr as *mut libc::ifreq) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(())
}

impl Tun {
    /// Create TUN `name` (`%d` allowed), bring it up with no address: the kernel routes
    /// `server` (a /32 route added here) into it, so uplink packets the EPC sends to the
    /// server arrive on it, and downlink packets written to it are routed to the UEs.
    /// Needs CAP_NET_ADMIN; the error names the failing step.
    pub fn open(name: &str, server: Ipv4Addr) -> io::Result<Tun> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("TUN name {name:?} must be 1..{} bytes", libc::IFNAMSIZ - 1),
            ));
        }
        // SAFETY: constant NUL-terminated path; result checked.
        let fd = unsafe {
            libc::open(
                c"/dev/net/tun".as_ptr(),
                libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("open /dev/net/tun: {e}")));
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut ifr = ifreq_for(name.as_bytes());
        ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
        ioctl_ifr(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr, "TUNSETIFF")?;
        let actual: Vec<u8> = ifr
            .ifr_name
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        let name = String::from_utf8_lossy(&actual).into_owned();
        // SAFETY: plain socket(2); result checked.
        let ctl = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if ctl < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        let ctl = unsafe { OwnedFd::from_raw_fd(ctl) };
        let mut r = ifreq_for(&actual);
        ioctl_ifr(ctl.as_raw_fd(), libc::SIOCGIFFLAGS, &mut r, "SIOCGIFFLAGS")?;
        // SAFETY: SIOCGIFFLAGS filled the flags member.
        let flags = unsafe { r.ifr_ifru.ifru_flags };
        r.ifr_ifru.ifru_flags = flags | (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        ioctl_ifr(ctl.as_raw_fd(), libc::SIOCSIFFLAGS, &mut r, "SIOCSIFFLAGS")?;
        // Host route server/32 dev <tun> (SIOCADDRT).
        // SAFETY: rtentry is a plain C struct; all-zero is valid.
        let mut rt: libc::rtentry = unsafe { std::mem::zeroed() };
        let sa = |ip: Ipv4Addr| -> libc::sockaddr {
            let s = to_sockaddr(SocketAddrV4::new(ip, 0));
            // SAFETY: sockaddr_in and sockaddr have the same size on Linux.
            unsafe { std::mem::transmute::<libc::sockaddr_in, libc::sockaddr>(s) }
        };
        rt.rt_dst = sa(server);
        rt.rt_genmask = sa(Ipv4Addr::BROADCAST);
        rt.rt_flags = libc::RTF_UP | libc::RTF_HOST;
        let mut dev: Vec<libc::c_char> = actual.iter().map(|&c| c as libc::c_char).collect();
        dev.push(0);
        rt.rt_dev = dev.as_mut_ptr();
        // SAFETY: valid rtentry whose rt_dev points at a live NUL-terminated name.
        if unsafe { libc::ioctl(ctl.as_raw_fd(), libc::SIOCADDRT, &mut rt) } < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(io::Error::new(e.kind(), format!("route {server}/32: {e}")));
            }
        }
        Ok(Tun {
            fd,
            name,
            buf: vec![0u8; 65536],
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Write one IP packet (downlink toward a UE).
    pub fn write(&self, pkt: &[u8]) -> bool {
        // SAFETY: valid fd and a live buffer of that length.
        let r = unsafe { libc::write(self.fd.as_raw_fd(), pkt.as_ptr().cast(), pkt.len()) };
        r == pkt.len() as isize
    }

    /// Read every IP packet waiting (a TUN fd has no batch read).
    pub fn read_all(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let mut n = 0;
        loop {
            // SAFETY: valid fd and a live writable buffer.
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr().cast(),
                    self.buf.len(),
                )
            };
            if r <= 0 {
                return n;
            }
            f(&self.buf[..r as usize]);
            n += 1;
        }
    }
}
