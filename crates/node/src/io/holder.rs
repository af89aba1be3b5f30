//! Who holds a local address: a taken S1-U, SGi, S1-MME, API or metrics address is
//! refused at start naming the process that has it (read from /proc: the socket's
//! inode in /proc/net/{udp,tcp}, then the process with a descriptor on that inode;
//! processes of other users are not readable, and then only the address is named).

use std::io;
use std::net::SocketAddr;

/// The transport of the socket looked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    Udp,
    /// A listening TCP socket.
    Tcp,
}

/// `e` (a failed bind of `addr`) said again with who holds `addr`, when it is taken.
pub fn in_use(e: io::Error, addr: SocketAddr, proto: Proto) -> io::Error {
    if e.kind() != io::ErrorKind::AddrInUse {
        return e;
    }
    let who = match holder(addr, proto) {
        Some(h) => format!("held by {h}"),
        None => "held by another process (not one of this user's)".into(),
    };
    io::Error::new(io::ErrorKind::AddrInUse, format!("{addr} is in use: {who}"))
}

/// "pepc (pid 1234)" for the process holding `addr`, if this user can see it.
pub fn holder(addr: SocketAddr, proto: Proto) -> Option<String> {
    let inode = socket_inode(addr, proto)?;
    let link = format!("socket:[{inode}]");
    for p in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        let has = fds
            .flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == link.as_str()));
        if has {
            let comm = std::fs::read_to_string(p.path().join("comm")).unwrap_or_default();
            let who = if pid == std::process::id() {
                "this process".to_string()
            } else {
                format!("pid {pid}")
            };
            return Some(format!("{} ({who})", comm.trim()));
        }
    }
    None
}

/// The inode of the socket bound to `addr` (a listener for TCP) in /proc/net.
fn socket_inode(addr: SocketAddr, proto: Proto) -> Option<u64> {
    let (file, v4) = match (proto, addr) {
        (Proto::Udp, SocketAddr::V4(_)) => ("/proc/net/udp", true),
        (Proto::Tcp, SocketAddr::V4(_)) => ("/proc/net/tcp", true),
        (Proto::Udp, SocketAddr::V6(_)) => ("/proc/net/udp6", false),
        (Proto::Tcp, SocketAddr::V6(_)) => ("/proc/net/tcp6", false),
    };
    let text = std::fs::read_to_string(file).ok()?;
    let port = format!("{:04X}", addr.port());
    // The kernel prints the address as the in-memory u32 in hex (little-endian here).
    let ip = match addr {
        SocketAddr::V4(a) => format!("{:08X}", u32::from_ne_bytes(a.ip().octets())),
        SocketAddr::V6(_) => String::new(),
    };
    let wildcard_v4 = "00000000";
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
        let (a, p) = local.split_once(':')?;
        let ip_ok = !v4 || a == ip || a == wildcard_v4 || ip == wildcard_v4;
        // 0A: TCP_LISTEN.
        let state_ok = proto == Proto::Udp || *state == "0A";
        (p == port && ip_ok && state_ok)
            .then(|| inode.parse().ok())
            .flatten()
    })
}
