//! The XDP program that steers only our traffic into the AF_XDP sockets, built as BPF
//! bytecode here (a few dozen instructions, so no compiler or libbpf is needed) and
//! attached with a BPF link: the link's descriptor is the attachment, so the program
//! leaves the interface when the node exits, however it exits.
//!
//! The program matches IPv4 in Ethernet whose destination lies in one of up to four
//! prefixes (S1-U: our address /32; SGi: the UE pools) and, for S1-U, UDP to our
//! GTP-U port in an unfragmented packet without IP options. A match is redirected to
//! the socket registered for the packet's RX queue in an XSKMAP; everything else
//! (ARP, ICMP, other ports, fragments) passes to the kernel.

use crate::io::ebpf::*;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Where the XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    /// In the driver when it supports XDP, generic (skb) otherwise.
    Auto,
    /// In the driver (native XDP).
    Drv,
    /// Generic XDP, after the kernel built an skb (works on any device, slower).
    Skb,
}

/// What the program redirects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Destination prefixes (address, length); 1 to 4.
    pub prefixes: Vec<(Ipv4Addr, u8)>,
    /// Also require UDP to this destination port (S1-U).
    pub udp_port: Option<u16>,
}

const PSEUDO_MAP_FD: u8 = 1;

/// A packet's 4 bytes in network order read as the little-endian u32 `ldxw` yields.
fn wire32(b: [u8; 4]) -> i32 {
    u32::from_le_bytes(b) as i32
}

/// The program for `filter`, redirecting into the XSKMAP `map_fd`.
fn program(filter: &Filter, map_fd: RawFd) -> io::Result<Vec<Insn>> {
    if filter.prefixes.is_empty() || filter.prefixes.len() > 4 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "XDP filter: 1 to 4 destination prefixes",
        ));
    }
    // Registers: r6 = ctx, r2 = data, r3 = data_end, r4/r5 scratch.
    // Jumps to "pass" are patched once its index is known.
    let mut p: Vec<Insn> = Vec::new();
    let mut to_pass: Vec<usize> = Vec::new();
    let need = if filter.udp_port.is_some() { 42 } else { 34 };
    p.push(insn(MOV64_X, 6, 1, 0, 0));
    p.push(insn(LDXW, 2, 1, 0, 0)); // data
    p.push(insn(LDXW, 3, 1, 4, 0)); // data_end
    p.push(insn(MOV64_X, 4, 2, 0, 0));
    p.push(insn(ADD64_K, 4, 0, 0, need));
    to_pass.push(p.len());
    p.push(insn(JGT_X, 4, 3, 0, 0)); // too short
    p.push(insn(LDXH, 5, 2, 12, 0)); // ethertype
    to_pass.push(p.len());
    p.push(insn(JNE32_K, 5, 0, 0, wire32([0x08, 0x00, 0, 0])));
    // Destination prefixes: any match goes on to the port check.
    let mut to_matched: Vec<usize> = Vec::new();
    for &(net, len) in &filter.prefixes {
        let mask = if len == 0 {
            0
        } else {
            u32::MAX << (32 - len as u32)
        };
        let net = u32::from(net) & mask;
        p.push(insn(LDXW, 5, 2, 30, 0));
        p.push(insn(AND32_K, 5, 0, 0, wire32(mask.to_be_bytes())));
        to_matched.push(p.len());
        p.push(insn(JEQ32_K, 5, 0, 0, wire32(net.to_be_bytes())));
    }
    to_pass.push(p.len());
    p.push(insn(JA, 0, 0, 0, 0));
    let matched = p.len();
    if let Some(port) = filter.udp_port {
        p.push(insn(LDXB, 5, 2, 14, 0)); // version + IHL: no options
        to_pass.push(p.len());
        p.push(insn(JNE32_K, 5, 0, 0, 0x45));
        p.push(insn(LDXB, 5, 2, 23, 0)); // protocol
        to_pass.push(p.len());
        p.push(insn(JNE32_K, 5, 0, 0, 17));
        p.push(insn(LDXH, 5, 2, 20, 0)); // flags + fragment offset: MF or offset → kernel
        p.push(insn(AND32_K, 5, 0, 0, wire32([0x3f, 0xff, 0, 0])));
        to_pass.push(p.len());
        p.push(insn(JNE32_K, 5, 0, 0, 0));
        p.push(insn(LDXH, 5, 2, 36, 0)); // UDP destination port
        let b = port.to_be_bytes();
        to_pass.push(p.len());
        p.push(insn(JNE32_K, 5, 0, 0, wire32([b[0], b[1], 0, 0])));
    }
    // bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS): with no socket on the
    // queue the packet passes to the kernel.
    p.push(insn(LDXW, 2, 6, 16, 0));
    p.push(insn(LD_IMM64, 1, PSEUDO_MAP_FD, 0, map_fd));
    p.push(insn(0, 0, 0, 0, 0));
    p.push(insn(MOV64_K, 3, 0, 0, XDP_PASS));
    p.push(insn(CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    p.push(insn(EXIT, 0, 0, 0, 0));
    let pass = p.len();
    p.push(insn(MOV64_K, 0, 0, 0, XDP_PASS));
    p.push(insn(EXIT, 0, 0, 0, 0));
    for i in to_pass {
        p[i].off = (pass - i - 1) as i16;
    }
    for i in to_matched {
        p[i].off = (matched - i - 1) as i16;
    }
    Ok(p)
}

/// An XDP program attached to an interface, with its socket map.
pub struct XdpAttachment {
    map: OwnedFd,
    _prog: OwnedFd,
    _link: OwnedFd,
    pub mode: XdpMode,
}

impl XdpAttachment {
    /// Load the program for `filter` with an XSKMAP of `queues` entries and attach it
    /// to `ifindex`.
    pub fn attach(
        ifindex: u32,
        queues: u32,
        filter: &Filter,
        mode: XdpMode,
    ) -> io::Result<XdpAttachment> {
        let mut a = [0u64; 18];
        // map_type, key_size | value_size, max_entries
        a[0] = BPF_MAP_TYPE_XSKMAP as u64 | (4u64 << 32);
        a[1] = 4 | ((queues.max(1) as u64) << 32);
        let map = fd_from(bpf(BPF_MAP_CREATE, &mut a).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("creating the XSKMAP: {e} (AF_XDP needs root or CAP_BPF+CAP_NET_ADMIN)"),
            )
        })?);
        let prog = load(
            BPF_PROG_TYPE_XDP,
            &program(filter, map.as_raw_fd())?,
            "the XDP program",
        )?;
        let link = |flags: u32| -> io::Result<OwnedFd> {
            let mut a = [0u64; 18];
            a[0] = prog.as_raw_fd() as u64 | ((ifindex as u64) << 32);
            a[1] = BPF_XDP as u64 | ((flags as u64) << 32);
            bpf(BPF_LINK_CREATE, &mut a).map(fd_from)
        };
        let (link, mode) = match mode {
            XdpMode::Drv => (link(XDP_FLAGS_DRV_MODE)?, XdpMode::Drv),
            XdpMode::Skb => (link(XDP_FLAGS_SKB_MODE)?, XdpMode::Skb),
            XdpMode::Auto => match link(XDP_FLAGS_DRV_MODE) {
                Ok(l) => (l, XdpMode::Drv),
                Err(_) => (link(XDP_FLAGS_SKB_MODE)?, XdpMode::Skb),
            },
        };
        Ok(XdpAttachment {
            map,
            _prog: prog,
            _link: link,
            mode,
        })
    }

    /// Steer packets arriving on `queue` to the AF_XDP socket `xsk_fd`.
    pub fn register(&self, queue: u32, xsk_fd: RawFd) -> io::Result<()> {
        let key = queue;
        let val = xsk_fd as u32;
        let mut a = [0u64; 18];
        a[0] = self.map.as_raw_fd() as u64;
        a[1] = &key as *const u32 as u64;
        a[2] = &val as *const u32 as u64;
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("registering the AF_XDP socket on queue {queue}: {e}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_land_inside_the_program() {
        for f in [
            Filter {
                prefixes: vec![("10.0.0.1".parse().unwrap(), 32)],
                udp_port: Some(2152),
            },
            Filter {
                prefixes: vec![
                    ("10.0.0.0".parse().unwrap(), 10),
                    ("10.64.0.0".parse().unwrap(), 10),
                ],
                udp_port: None,
            },
        ] {
            assert_jumps_inside(&program(&f, 3).unwrap());
        }
        assert!(program(
            &Filter {
                prefixes: vec![],
                udp_port: None
            },
            3
        )
        .is_err());
    }
}
