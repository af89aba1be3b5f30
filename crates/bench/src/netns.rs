//! Network namespaces and veth pairs that a benchmark or test makes for itself (with
//! `ip` from iproute2, as root) and removes when dropped, even on panic. A thread
//! enters a namespace with [`enter`]; sockets and AF_XDP ports it opens live there.

use std::os::fd::AsRawFd;
use std::process::Command;

/// Run `ip ARGS`; the error carries ip's own message.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip (iproute2): {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Why namespaces cannot be made here, if they cannot.
pub fn unavailable() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("network namespaces need root (CAP_NET_ADMIN)".into());
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return Some("`ip` (iproute2) is not installed".into());
    }
    None
}

/// Why AF_XDP ports cannot be tried here in namespaces, if they cannot: no root, or a
/// kernel without AF_XDP sockets.
pub fn afxdp_unavailable() -> Option<String> {
    if let Some(why) = unavailable() {
        return Some(why);
    }
    // SAFETY: socket(2) with constant arguments; a descriptor it returns is closed.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Some(format!("this kernel gives no AF_XDP socket: {e}"));
    }
    // SAFETY: the descriptor just opened, closed once.
    unsafe { libc::close(fd) };
    None
}

/// One end of a veth pair: its namespace, device name and address (with prefix).
#[derive(Debug, Clone)]
pub struct End {
    pub ns: String,
    pub dev: String,
    pub addr: std::net::Ipv4Addr,
    pub prefix: u8,
}

/// Namespaces and the veth pairs between them; all removed on drop.
pub struct Topology {
    namespaces: Vec<String>,
}

impl Topology {
    /// Make namespaces `names` (fresh: stale ones of the same name are removed first).
    pub fn new(names: &[&str]) -> Result<Topology, String> {
        if let Some(why) = unavailable() {
            return Err(why);
        }
        let mut t = Topology {
            namespaces: Vec::new(),
        };
        for n in names {
            let _ = ip(&["netns", "del", n]);
            ip(&["netns", "add", n])?;
            t.namespaces.push(n.to_string());
            ip(&["-n", n, "link", "set", "lo", "up"])?;
        }
        Ok(t)
    }

    /// A veth pair between `a` and `b`, addressed and up. `queues` > 1 gives each end
    /// that many RX/TX queues.
    pub fn veth(&self, a: &End, b: &End, queues: u32) -> Result<(), String> {
        let q = queues.max(1).to_string();
        ip(&[
            "link",
            "add",
            &a.dev,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &b.dev,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        for e in [a, b] {
            ip(&["link", "set", &e.dev, "netns", &e.ns])?;
            ip(&[
                "-n",
                &e.ns,
                "addr",
                "add",
                &format!("{}/{}", e.addr, e.prefix),
                "dev",
                &e.dev,
            ])?;
            ip(&["-n", &e.ns, "link", "set", &e.dev, "up"])?;
        }
        Ok(())
    }

    /// `ip -n NS ARGS`.
    pub fn run(&self, ns: &str, args: &[&str]) -> Result<(), String> {
        let mut v = vec!["-n", ns];
        v.extend_from_slice(args);
        ip(&v)
    }

    /// Run the device's NAPI (its receive processing) in a kernel thread of its own
    /// (`napi/DEV-ID`) instead of in whichever task woke it: on veth, the sender's.
    pub fn threaded_napi(&self, e: &End) -> Result<(), String> {
        let echo = format!("echo 1 > /sys/class/net/{}/threaded", e.dev);
        ip(&["netns", "exec", &e.ns, "sh", "-c", &echo])
            .map_err(|x| format!("threaded NAPI on {}: {x}", e.dev))
    }

    /// Turn GRO on or off on a veth end (`ethtool -K DEV gro on|off
    /// rx-udp-gro-forwarding on|off`). On veth, GRO gives the end NAPI where no XDP
    /// program does; UDP GRO forwarding makes a peer's socket-sent (and GSO) datagrams
    /// take that NAPI instead of the peer's own context.
    pub fn gro(&self, e: &End, on: bool) -> Result<(), String> {
        let v = if on { "on" } else { "off" };
        let ethtool = [
            "ethtool",
            "-K",
            &e.dev,
            "gro",
            v,
            "rx-udp-gro-forwarding",
            v,
        ];
        ip(&[&["netns", "exec", &e.ns][..], &ethtool].concat())
    }

    /// Packets the device dropped, received and sent (`ip -s link`'s `dropped`): on
    /// veth, a full receive queue, or an XDP redirect its target refused.
    pub fn link_drops(&self, e: &End) -> Result<u64, String> {
        let out = Command::new("ip")
            .args(["-n", &e.ns, "-s", "-j", "link", "show", "dev", &e.dev])
            .output()
            .map_err(|x| format!("ip -s link: {x}"))?;
        if !out.status.success() {
            return Err(format!(
                "ip -s link on {}: {}",
                e.dev,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .map_err(|x| format!("ip -s -j link on {}: {x}", e.dev))?;
        let dropped = |dir: &str| v[0]["stats64"][dir]["dropped"].as_u64();
        match (dropped("rx"), dropped("tx")) {
            (Some(rx), Some(tx)) => Ok(rx + tx),
            _ => Err(format!(
                "ip -s -j link on {}: no stats64 drop counts",
                e.dev
            )),
        }
    }

    /// `sysctl -w KEY=VALUE` inside `ns`.
    pub fn sysctl(&self, ns: &str, key: &str, value: &str) -> Result<(), String> {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "sysctl",
                "-qw",
                &format!("{key}={value}"),
            ])
            .output()
            .map_err(|e| format!("sysctl: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "sysctl {key} in {ns}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Deleting a namespace takes its veth ends, and the pairs with them.
        for n in &self.namespaces {
            let _ = ip(&["netns", "del", n]);
        }
    }
}

/// Move the calling thread into namespace `ns`.
pub fn enter(ns: &str) -> Result<(), String> {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}"))
        .map_err(|e| format!("namespace {ns}: {e}"))?;
    // SAFETY: a valid namespace descriptor; only the calling thread changes namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if r != 0 {
        return Err(format!("setns {ns}: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}
