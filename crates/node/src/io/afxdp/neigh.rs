//! Next-hop MAC addresses from the kernel's tables: AF_XDP frames bypass the kernel's
//! stack, so we write Ethernet headers ourselves. The kernel still owns the interface's
//! address and answers ARP; we read its routes and neighbours (`/proc/thread-self/net/`:
//! the calling thread's network namespace), and when a neighbour is missing we make the kernel resolve it by
//! sending a datagram its way (to the discard port) and look again later.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

pub type Mac = [u8; 6];

/// How often a missing neighbour is asked for again.
const RETRY: Duration = Duration::from_millis(200);
/// Cached neighbours are re-read this often (the kernel may have learned a new MAC).
const REFRESH: Duration = Duration::from_secs(30);
/// Bound on the cache (one entry per eNB or next hop).
const MAX_ENTRIES: usize = 65536;

/// An interface's index and MAC address.
pub fn interface(name: &str) -> io::Result<(u32, Mac)> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name has a NUL"))?;
    // SAFETY: a valid C string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no network interface named {name:?}"),
        ));
    }
    // SIOCGIFHWADDR on a socket of this thread's network namespace (sysfs shows the
    // namespace it was mounted in, which need not be ours).
    let sock = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req
        .ifr_name
        .iter_mut()
        .zip(name.bytes().take(libc::IFNAMSIZ - 1))
    {
        *d = s as libc::c_char;
    }
    use std::os::fd::AsRawFd;
    // SAFETY: SIOCGIFHWADDR reads the name and writes ifr_hwaddr of our ifreq.
    if unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("{name}: reading its Ethernet address: {e}"),
        ));
    }
    // SAFETY: the ioctl filled the hwaddr member of the union.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok((idx, mac))
}

fn parse_mac(s: &str) -> Option<Mac> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in m.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// The interface's routes: (destination, mask, gateway) in host order, most specific
/// first.
fn routes(dev: &str) -> Vec<(u32, u32, u32)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/route").unwrap_or_default();
    // The file prints each address as the host-order u32 of its network-order bytes.
    let hex = |s: &str| {
        u32::from_str_radix(s, 16)
            .ok()
            .map(|v| u32::from_be_bytes(v.to_ne_bytes()))
    };
    let mut v: Vec<(u32, u32, u32)> = text
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 || f[0] != dev {
                return None;
            }
            Some((hex(f[1])?, hex(f[7])?, hex(f[2])?))
        })
        .collect();
    v.sort_by_key(|&(_, m, _)| std::cmp::Reverse(m.count_ones()));
    v
}

/// The neighbour's MAC if the kernel has a complete entry for `ip` on `dev`.
fn arp_lookup(dev: &str, ip: Ipv4Addr) -> Option<Mac> {
    let text = std::fs::read_to_string("/proc/thread-self/net/arp").ok()?;
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        // IP address, HW type, Flags, HW address, Mask, Device; flag 0x2 = complete.
        if f.len() < 6 || f[5] != dev || f[0].parse::<Ipv4Addr>().ok()? != ip {
            return None;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        (flags & 0x2 != 0).then(|| parse_mac(f[3])).flatten()
    })
}

/// Resolves destinations to next-hop MACs on one interface, with a bounded cache.
pub struct Neighbours {
    dev: String,
    /// Forced next hop for every destination (SGi's gateway), else the routes decide.
    via: Option<Ipv4Addr>,
    routes: Vec<(u32, u32, u32)>,
    cache: HashMap<Ipv4Addr, (Mac, Instant)>,
    asked: HashMap<Ipv4Addr, Instant>,
    prober: Option<UdpSocket>,
    /// The last answer, so a batch to one eNB costs one comparison per packet.
    last: Option<(Ipv4Addr, Mac)>,
    pub misses: u64,
}

impl Neighbours {
    pub fn new(dev: &str, via: Option<Ipv4Addr>) -> Neighbours {
        let prober = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).ok();
        if let Some(s) = &prober {
            let _ = s.set_nonblocking(true);
            bind_to_device(s, dev);
        }
        Neighbours {
            dev: dev.to_string(),
            via,
            routes: routes(dev),
            cache: HashMap::new(),
            asked: HashMap::new(),
            prober,
            last: None,
            misses: 0,
        }
    }

    /// The next hop toward `dst`.
    pub fn next_hop(&self, dst: Ipv4Addr) -> Ipv4Addr {
        if let Some(v) = self.via {
            return v;
        }
        let d = u32::from(dst);
        for &(net, mask, gw) in &self.routes {
            if d & mask == net {
                return if gw == 0 { dst } else { Ipv4Addr::from(gw) };
            }
        }
        dst
    }

    /// The MAC to send `dst`'s packets to, or None while the kernel resolves it (the
    /// caller drops the packet and counts it).
    pub fn resolve(&mut self, dst: Ipv4Addr, now: Instant) -> Option<Mac> {
        if let Some((ip, mac)) = self.last {
            if ip == dst {
                return Some(mac);
            }
        }
        let hop = self.next_hop(dst);
        if let Some(&(mac, at)) = self.cache.get(&hop) {
            if now.duration_since(at) < REFRESH {
                self.last = Some((dst, mac));
                return Some(mac);
            }
        }
        if let Some(mac) = arp_lookup(&self.dev, hop) {
            if self.cache.len() >= MAX_ENTRIES {
                self.cache.clear();
            }
            self.cache.insert(hop, (mac, now));
            self.asked.remove(&hop);
            self.last = Some((dst, mac));
            return Some(mac);
        }
        self.misses += 1;
        // Keep a stale entry while the kernel re-resolves.
        if let Some(&(mac, _)) = self.cache.get(&hop) {
            return Some(mac);
        }
        let due = self
            .asked
            .get(&hop)
            .is_none_or(|&t| now.duration_since(t) >= RETRY);
        if due {
            if self.asked.len() >= MAX_ENTRIES {
                self.asked.clear();
            }
            self.asked.insert(hop, now);
            if let Some(s) = &self.prober {
                let _ = s.send_to(&[], SocketAddrV4::new(hop, 9));
            }
        }
        None
    }
}

fn bind_to_device(s: &UdpSocket, dev: &str) {
    use std::os::fd::AsRawFd;
    // SAFETY: SO_BINDTODEVICE with the name's bytes and length.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_BINDTODEVICE,
            dev.as_ptr().cast(),
            dev.len() as libc::socklen_t,
        );
    }
}

/// The IPv4 addresses of interface `name` (in the caller's network namespace).
pub fn interface_addrs(name: &str) -> io::Result<Vec<Ipv4Addr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned; names are C strings and an
        // AF_INET address is a sockaddr_in.
        unsafe {
            let a = &*p;
            if !a.ifa_addr.is_null()
                && (*a.ifa_addr).sa_family as i32 == libc::AF_INET
                && std::ffi::CStr::from_ptr(a.ifa_name).to_bytes() == name.as_bytes()
            {
                let sin = &*(a.ifa_addr as *const libc::sockaddr_in);
                out.push(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)));
            }
            p = a.ifa_next;
        }
    }
    // SAFETY: the list from getifaddrs, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// The first of `addrs` inside one of `pools`, with that pool.
pub fn address_in_pools(
    addrs: &[Ipv4Addr],
    pools: &[(Ipv4Addr, u8)],
) -> Option<(Ipv4Addr, (Ipv4Addr, u8))> {
    addrs.iter().find_map(|&a| {
        pools
            .iter()
            .find(|&&(p, len)| {
                let mask = if len == 0 {
                    0
                } else {
                    u32::MAX << (32 - len.min(32) as u32)
                };
                u32::from(a) & mask == u32::from(p) & mask
            })
            .map(|&p| (a, p))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse() {
        assert_eq!(parse_mac("02:00:0a:ff:00:01"), Some([2, 0, 10, 255, 0, 1]));
        assert_eq!(parse_mac("02:00:0a:ff:00"), None);
        assert_eq!(parse_mac("02:00:0a:ff:00:01:07"), None);
        assert_eq!(parse_mac("zz:00:0a:ff:00:01"), None);
    }

    #[test]
    fn loopback_has_an_index() {
        let (idx, mac) = interface("lo").unwrap();
        assert!(idx > 0);
        assert_eq!(mac, [0; 6]);
        assert!(interface("no-such-if0").is_err());
    }

    #[test]
    fn an_address_inside_a_pool_is_found() {
        let pools = [
            (Ipv4Addr::new(10, 0, 0, 0), 10),
            (Ipv4Addr::new(10, 64, 0, 0), 10),
        ];
        let a = Ipv4Addr::new(10, 79, 2, 1);
        assert_eq!(
            address_in_pools(&[Ipv4Addr::new(172, 31, 2, 1), a], &pools),
            Some((a, pools[1]))
        );
        assert_eq!(
            address_in_pools(&[Ipv4Addr::new(10, 128, 0, 1)], &pools),
            None
        );
        assert_eq!(address_in_pools(&[], &pools), None);
        assert!(address_in_pools(&[a], &[(Ipv4Addr::UNSPECIFIED, 0)]).is_some());
    }
}
