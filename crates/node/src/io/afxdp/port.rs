//! A [`PacketIo`] port on an AF_XDP socket: S1-U (GTP-U in UDP in IPv4 in Ethernet)
//! or SGi (IPv4 in Ethernet). Frames are parsed and copied into the batch's buffers on
//! receive and built (Ethernet, and for S1-U the outer IPv4/UDP) into TX frames on send,
//! so the pipeline sees exactly what the UDP and TUN backends give it.

use super::bpf::{Filter, XdpAttachment, XdpMode};
use super::neigh::{interface, Mac, Neighbours};
use super::xsk::{BindMode, XskConfig, XskSocket, ZeroCopy, FRAME_SIZE};
use crate::io::socket_drops::{PortDrops, SocketDropReason, SocketDropsProbe};
use crate::io::{sys, PacketIo};
use pepc_wire::{Batch, Verdict};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
const GTPU_PORT: u16 = 2152;
/// Queues the XDP program's socket map can address.
const MAP_QUEUES: u32 = 256;

/// What the port carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// GTP-U to and from `addr` (our S1-U address and port).
    S1u { addr: SocketAddrV4 },
    /// IP packets of the UE pools (the prefixes) toward the PDN via `next_hop`
    /// (None: the interface's routes decide).
    Sgi {
        pools: Vec<(Ipv4Addr, u8)>,
        next_hop: Option<Ipv4Addr>,
    },
}

/// An AF_XDP port's settings.
#[derive(Debug, Clone)]
pub struct AfXdpConfig {
    pub interface: String,
    pub queue: u32,
    pub xdp_mode: XdpMode,
    pub zero_copy: ZeroCopy,
    pub role: Role,
    pub xsk: XskConfig,
}

/// Counters of an [`AfXdpPort`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AfXdpStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames the XDP program redirected that are not what this port carries
    /// (truncated headers, a wrong length, an odd protocol).
    pub rx_malformed: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// No free TX frame or ring slot.
    pub tx_ring_full: u64,
    /// The next hop's MAC is not known yet (the kernel is asked to resolve it).
    pub tx_no_neighbour: u64,
    /// Packets too large for a frame.
    pub tx_too_big: u64,
}

/// One AF_XDP socket on one queue of an interface, with the XDP program that feeds it.
pub struct AfXdpPort {
    xsk: XskSocket,
    /// Shared by every port on the interface (one XDP program per interface).
    attach: Arc<XdpAttachment>,
    ifindex: u32,
    cfg: AfXdpConfig,
    /// The next queue a sender clone takes.
    next_queue: Arc<AtomicU32>,
    mac: Mac,
    neigh: Neighbours,
    role: Role,
    ip_id: u16,
    interface: String,
    queue: u32,
    /// Its drop fields stay 0: those counts live in `drops`, readable by other threads.
    stats: AfXdpStats,
    drops: Arc<PortDrops>,
}

impl AfXdpPort {
    pub fn open(cfg: &AfXdpConfig) -> io::Result<AfXdpPort> {
        let (ifindex, mac) = interface(&cfg.interface)?;
        if let Role::Sgi { pools, .. } = &cfg.role {
            // The program takes every packet to the pools: an address of the
            // interface inside one would lose its own traffic (neighbour probes,
            // routing protocols) to the data path.
            let addrs = super::neigh::interface_addrs(&cfg.interface)?;
            if let Some((a, (p, len))) = super::neigh::address_in_pools(&addrs, pools) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{}: its address {a} is inside the UE pool {p}/{len}, whose packets the XDP program takes; give the interface an address outside the pools (node.ue_pool, node.pdn_pools)",
                        cfg.interface
                    ),
                ));
            }
        }
        let filter = match &cfg.role {
            Role::S1u { addr } => Filter {
                prefixes: vec![(*addr.ip(), 32)],
                udp_port: Some(addr.port()),
            },
            Role::Sgi { pools, .. } => Filter {
                prefixes: pools.clone(),
                udp_port: None,
            },
        };
        let attach = XdpAttachment::attach(ifindex, MAP_QUEUES, &filter, cfg.xdp_mode)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", cfg.interface)))?;
        let next_queue = Arc::new(AtomicU32::new(cfg.queue + 1));
        Self::on_queue(
            cfg,
            ifindex,
            mac,
            Arc::new(attach),
            next_queue,
            cfg.queue,
            true,
        )
    }

    fn on_queue(
        cfg: &AfXdpConfig,
        ifindex: u32,
        mac: Mac,
        attach: Arc<XdpAttachment>,
        next_queue: Arc<AtomicU32>,
        queue: u32,
        receive: bool,
    ) -> io::Result<AfXdpPort> {
        let xsk = XskSocket::open(ifindex, queue, cfg.zero_copy, cfg.xsk).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{} queue {queue}: {e} (AF_XDP takes a queue per socket: one to receive, one per slice to send)",
                    cfg.interface
                ),
            )
        })?;
        if receive {
            attach.register(queue, xsk.fd())?;
        }
        let via = match &cfg.role {
            Role::Sgi { next_hop, .. } => *next_hop,
            Role::S1u { .. } => None,
        };
        Ok(AfXdpPort {
            xsk,
            attach,
            ifindex,
            cfg: cfg.clone(),
            next_queue,
            mac,
            neigh: Neighbours::new(&cfg.interface, via),
            role: cfg.role.clone(),
            ip_id: 0,
            interface: cfg.interface.clone(),
            queue,
            stats: AfXdpStats::default(),
            drops: Arc::default(),
        })
    }

    /// Another socket on the same interface and program, on `queue`, receiving what
    /// arrives there (e.g. a generator taking every queue its peer sends on).
    pub fn open_queue(&self, queue: u32) -> io::Result<AfXdpPort> {
        self.sibling(queue, true)
    }

    fn sibling(&self, queue: u32, receive: bool) -> io::Result<AfXdpPort> {
        Self::on_queue(
            &self.cfg,
            self.ifindex,
            self.mac,
            self.attach.clone(),
            self.next_queue.clone(),
            queue,
            receive,
        )
    }

    /// E.g. "AF_XDP on veth0 queue 0 (native XDP, copy mode, rings of 4096)".
    /// What this port runs on (see [`crate::io::PortInfo`]).
    pub fn info(&self) -> crate::io::PortInfo {
        crate::io::PortInfo {
            io: "afxdp",
            interface: self.interface.clone(),
            afxdp: Some(crate::io::AfXdpInfo {
                queue: self.queue,
                native: !matches!(self.attach.mode, XdpMode::Skb),
                zero_copy: self.xsk.mode() == BindMode::ZeroCopy,
                ring_size: self.cfg.xsk.ring_size,
            }),
            description: self.describe(),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "AF_XDP on {} queue {} ({} XDP, {}, rings of {})",
            self.interface,
            self.queue,
            match self.attach.mode {
                XdpMode::Drv | XdpMode::Auto => "native",
                XdpMode::Skb => "generic",
            },
            match self.xsk.mode() {
                BindMode::ZeroCopy => "zero-copy",
                BindMode::Copy => "copy mode",
            },
            self.cfg.xsk.ring_size
        )
    }

    pub fn stats(&self) -> AfXdpStats {
        let d = &self.drops;
        AfXdpStats {
            rx_malformed: d.get(SocketDropReason::Malformed),
            tx_ring_full: d.get(SocketDropReason::TxRingFull),
            tx_no_neighbour: d.get(SocketDropReason::NoNeighbour),
            tx_too_big: d.get(SocketDropReason::TooBig),
            ..self.stats
        }
    }
}

/// The payload (offset, length) and sender of a received frame, or None if it is not
/// what a port of `role` carries. Any octets are safe input.
pub fn parse_frame(role: &Role, frame: &[u8]) -> Option<(usize, usize, SocketAddrV4)> {
    if frame.len() < ETH_LEN + IP_LEN || frame[12..14] != [0x08, 0x00] {
        return None;
    }
    let ip = &frame[ETH_LEN..];
    let ihl = (ip[0] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if ip[0] >> 4 != 4 || ihl < IP_LEN || total < ihl || total > ip.len() {
        return None;
    }
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    match role {
        Role::Sgi { .. } => Some((ETH_LEN, total, SocketAddrV4::new(src, 0))),
        Role::S1u { .. } => {
            if ip[9] != 17 || total < ihl + UDP_LEN {
                return None;
            }
            let udp = &ip[ihl..total];
            let ulen = u16::from_be_bytes([udp[4], udp[5]]) as usize;
            if ulen < UDP_LEN || ulen > udp.len() {
                return None;
            }
            let sport = u16::from_be_bytes([udp[0], udp[1]]);
            Some((
                ETH_LEN + ihl + UDP_LEN,
                ulen - UDP_LEN,
                SocketAddrV4::new(src, sport),
            ))
        }
    }
}

fn ip_checksum(h: &[u8]) -> u16 {
    pepc_wire::checksum::checksum(h)
}

impl PacketIo for AfXdpPort {
    fn recv_batch(&mut self, batch: &mut Batch) -> io::Result<usize> {
        batch.len = 0;
        let now = sys::now_ns();
        let mut n = 0usize;
        let (role, stats, drops, bufs) =
            (&self.role, &mut self.stats, &self.drops, &mut batch.bufs);
        self.xsk.recv(bufs.len() as u32, |frame| {
            let Some((off, len, peer)) = parse_frame(role, frame) else {
                drops.add(SocketDropReason::Malformed, 1);
                return;
            };
            let b = &mut bufs[n];
            if !b.fill(&frame[off..off + len]) {
                drops.add(SocketDropReason::Malformed, 1);
                return;
            }
            b.meta.peer = peer;
            b.meta.rx_ns = now;
            b.meta.verdict = Verdict::Drop;
            stats.rx_packets += 1;
            stats.rx_bytes += len as u64;
            n += 1;
        });
        batch.len = n;
        Ok(n)
    }

    fn send_batch(&mut self, batch: &Batch, select: Verdict) -> io::Result<usize> {
        self.send_or_hold(batch, select, None)
    }

    fn send_batch_or_hold(
        &mut self,
        batch: &Batch,
        select: Verdict,
        held: &mut Vec<u16>,
    ) -> io::Result<usize> {
        self.send_or_hold(batch, select, Some(held))
    }

    fn poll_fd(&self) -> Option<RawFd> {
        Some(self.xsk.fd())
    }

    /// A socket of its own on the next queue, for sending only: an AF_XDP TX ring
    /// has one producer, so each slice's data thread sends on its own queue (what
    /// arrives on that queue passes to the kernel; receive stays on the first socket).
    fn try_clone_sender(&self) -> io::Result<Box<dyn PacketIo>> {
        let q = self.next_queue.fetch_add(1, Ordering::Relaxed);
        let p = self.sibling(q, false)?;
        Ok(Box::new(p))
    }

    fn socket_drops(&self) -> Option<SocketDropsProbe> {
        Some(self.xsk.drops_probe().with_port(self.drops.clone()))
    }
}

impl AfXdpPort {
    /// `send_batch`; with `held`, the packets the TX ring (or its frames) had no room
    /// for are listed there instead of dropped.
    fn send_or_hold(
        &mut self,
        batch: &Batch,
        select: Verdict,
        held: Option<&mut Vec<u16>>,
    ) -> io::Result<usize> {
        let pkts: &[_] = batch.packets();
        let now = Instant::now();
        // Resolve first (the neighbour table may read a file), then fill frames.
        let mut dst: [Option<Mac>; pepc_wire::BATCH_SIZE] = [None; pepc_wire::BATCH_SIZE];
        let mut want = 0usize;
        for (i, p) in pkts.iter().enumerate().take(dst.len()) {
            if p.meta.verdict != select {
                continue;
            }
            let to = match &self.role {
                Role::S1u { .. } => *p.meta.peer.ip(),
                Role::Sgi { .. } => {
                    let d = p.as_slice();
                    if d.len() < IP_LEN {
                        continue;
                    }
                    Ipv4Addr::new(d[16], d[17], d[18], d[19])
                }
            };
            match self.neigh.resolve(to, now) {
                Some(m) => {
                    dst[i] = Some(m);
                    want += 1;
                }
                None => self.drops.add(SocketDropReason::NoNeighbour, 1),
            }
        }
        if want == 0 {
            return Ok(0);
        }
        let (role, mac, drops) = (&self.role, self.mac, &self.drops);
        let mut ip_id = self.ip_id;
        let mut cursor = 0usize;
        let mut bytes = 0u64;
        let queued = self.xsk.send(want, |_, frame| {
            // Next selected, resolved packet.
            while cursor < pkts.len() && dst[cursor].is_none() {
                cursor += 1;
            }
            let Some(p) = pkts.get(cursor) else { return 0 };
            let to_mac = dst[cursor].expect("selected above");
            cursor += 1;
            let data = p.as_slice();
            let hdr = match role {
                Role::S1u { .. } => ETH_LEN + IP_LEN + UDP_LEN,
                Role::Sgi { .. } => ETH_LEN,
            };
            let len = hdr + data.len();
            if len > FRAME_SIZE as usize {
                drops.add(SocketDropReason::TooBig, 1);
                return 0;
            }
            frame[0..6].copy_from_slice(&to_mac);
            frame[6..12].copy_from_slice(&mac);
            frame[12..14].copy_from_slice(&[0x08, 0x00]);
            if let Role::S1u { addr } = role {
                let ip = &mut frame[ETH_LEN..ETH_LEN + IP_LEN];
                ip[0] = 0x45;
                ip[1] = 0;
                ip[2..4].copy_from_slice(&((IP_LEN + UDP_LEN + data.len()) as u16).to_be_bytes());
                ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
                ip_id = ip_id.wrapping_add(1);
                ip[6..8].copy_from_slice(&[0x40, 0]); // don't fragment
                ip[8] = 64;
                ip[9] = 17;
                ip[10..12].copy_from_slice(&[0, 0]);
                ip[12..16].copy_from_slice(&addr.ip().octets());
                ip[16..20].copy_from_slice(&p.meta.peer.ip().octets());
                let c = ip_checksum(ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                let udp = &mut frame[ETH_LEN + IP_LEN..ETH_LEN + IP_LEN + UDP_LEN];
                udp[0..2].copy_from_slice(&addr.port().to_be_bytes());
                let dport = match p.meta.peer.port() {
                    0 => GTPU_PORT,
                    x => x,
                };
                udp[2..4].copy_from_slice(&dport.to_be_bytes());
                udp[4..6].copy_from_slice(&((UDP_LEN + data.len()) as u16).to_be_bytes());
                // A zero UDP checksum is allowed over IPv4 (RFC 768) and is what GTP-U
                // senders commonly use.
                udp[6..8].copy_from_slice(&[0, 0]);
            }
            frame[hdr..len].copy_from_slice(data);
            bytes += data.len() as u64;
            len
        });
        self.ip_id = ip_id;
        // What the ring had no room for: the resolved packets from the cursor on.
        let mut kept = 0usize;
        if let (Some(h), true) = (held, queued < want) {
            for (j, d) in dst.iter().enumerate().take(pkts.len()).skip(cursor) {
                if d.is_some() {
                    h.push(j as u16);
                    kept += 1;
                }
            }
        }
        self.stats.tx_packets += queued as u64;
        self.stats.tx_bytes += bytes;
        self.drops
            .add(SocketDropReason::TxRingFull, (want - queued - kept) as u64);
        Ok(queued)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(proto: u8, total: u16, ihl: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + total as usize];
        f[12] = 0x08;
        let ip = &mut f[14..];
        ip[0] = 0x40 | ihl;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[192, 0, 2, 7]);
        let h = ihl as usize * 4;
        if proto == 17 && total as usize >= h + 8 {
            ip[h..h + 2].copy_from_slice(&2152u16.to_be_bytes());
            ip[h + 4..h + 6].copy_from_slice(&(total - h as u16).to_be_bytes());
        }
        f
    }

    #[test]
    fn s1u_frames_give_the_gtp_payload_and_sender() {
        let role = Role::S1u {
            addr: "10.0.0.1:2152".parse().unwrap(),
        };
        let f = frame(17, 20 + 8 + 16, 5);
        assert_eq!(
            parse_frame(&role, &f),
            Some((42, 16, "192.0.2.7:2152".parse().unwrap()))
        );
        // IP options move the UDP header.
        let f = frame(17, 24 + 8 + 4, 6);
        assert_eq!(parse_frame(&role, &f).map(|x| (x.0, x.1)), Some((46, 4)));
        assert_eq!(parse_frame(&role, &frame(6, 40, 5)), None, "TCP");
        assert_eq!(
            parse_frame(&role, &frame(17, 24, 5)),
            None,
            "no room for UDP"
        );
        let mut f = frame(17, 40, 5);
        f[14 + 2..14 + 4].copy_from_slice(&400u16.to_be_bytes());
        assert_eq!(parse_frame(&role, &f), None, "IP length beyond the frame");
        let mut f = frame(17, 40, 5);
        f[12] = 0x86;
        assert_eq!(parse_frame(&role, &f), None, "not IPv4");
        assert_eq!(parse_frame(&role, &f[..20]), None, "truncated");
    }

    #[test]
    fn sgi_frames_give_the_ip_packet_cut_to_its_length() {
        let role = Role::Sgi {
            pools: vec![],
            next_hop: None,
        };
        let mut f = frame(6, 60, 5);
        f.extend_from_slice(&[0; 10]); // Ethernet padding
        assert_eq!(parse_frame(&role, &f).map(|x| (x.0, x.1)), Some((14, 60)));
    }

    #[test]
    fn checksum_of_a_known_header() {
        // RFC 1071 style example header.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(ip_checksum(&h), 0xb861);
    }
}
