//! Small libc helpers shared by the backends: clock, poll, address conversion.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;
use std::time::Duration;

/// Monotonic time in ns (CLOCK_MONOTONIC, served by the vDSO so it costs no syscall).
/// The same clock in every process on the host, so a sender and receiver can compare.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// poll(2) on one descriptor for `events`. Ok(false) on timeout or EINTR.
pub fn poll_one(fd: RawFd, events: libc::c_short, timeout: Duration) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // Round up so a sub-millisecond timeout still waits rather than spinning.
    let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd, count 1.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    if r > 0 && p.revents & libc::POLLNVAL != 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(r > 0)
}

/// ppoll(2) on up to 8 descriptors for `events`. Ok(false) on timeout or EINTR.
pub fn poll_many(fds: &[RawFd], events: libc::c_short, timeout: Duration) -> io::Result<bool> {
    let mut p = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 8];
    let n = fds.len().min(p.len());
    for (slot, &fd) in p.iter_mut().zip(&fds[..n]) {
        slot.fd = fd;
        slot.events = events;
    }
    // ppoll: nanosecond timeouts (the control thread waits fractions of a millisecond).
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `n` valid pollfds in a live array, a valid timespec, no signal mask.
    let r = unsafe { libc::ppoll(p.as_mut_ptr(), n as libc::nfds_t, &ts, std::ptr::null()) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    if p[..n].iter().any(|x| x.revents & libc::POLLNVAL != 0) {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(r > 0)
}

#[inline]
pub fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

#[inline]
pub fn is_would_block(e: i32) -> bool {
    e == libc::EAGAIN || e == libc::EWOULDBLOCK
}

/// A failed receive on a UDP socket: nothing waiting, a signal, or a stale ICMP
/// error all mean "no packets now"; anything else is the caller's to see.
pub fn no_packets_or_error(e: i32) -> io::Result<usize> {
    if is_would_block(e) || e == libc::EINTR || e == libc::ECONNREFUSED {
        Ok(0)
    } else {
        Err(io::Error::from_raw_os_error(e))
    }
}

#[inline]
pub fn to_sockaddr(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

#[inline]
pub fn from_sockaddr(s: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(u32::from_be(s.sin_addr.s_addr)),
        u16::from_be(s.sin_port),
    )
}

pub fn zero_sockaddr() -> libc::sockaddr_in {
    to_sockaddr(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))
}
