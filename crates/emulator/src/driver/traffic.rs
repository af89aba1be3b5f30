//! The user plane the emulated UEs exercise: Table IV traffic classes, test packets
//! (magic, UE index, sequence) sent uplink over S1-U and downlink from the PDN side, and
//! what comes back counted.

use super::*;

impl Emulator {
    /// Receive on the S1-U and PDN sides.
    pub(super) fn poll_data(&mut self) {
        let Emulator {
            gtpu,
            teids,
            metrics,
            awaiting_dl,
            ..
        } = self;
        let mut echo: Vec<(Vec<u8>, SocketAddrV4)> = Vec::new();
        gtpu.recv_all(|b, from| {
            let Ok(p) = GtpuPacket::new_checked(b) else {
                metrics.error("bad GTP-U packet");
                return;
            };
            match p.msg_type() {
                G_PDU => {
                    let known = teids.contains_key(&p.teid());
                    if let (true, Some(ue)) = (known, our_packet(p.payload())) {
                        if let Some(a) = awaiting_dl.get_mut(ue as usize) {
                            *a = a.saturating_sub(1);
                        }
                        metrics.dl_packets += 1;
                        metrics.dl_bytes += p.payload().len() as u64;
                    } else {
                        metrics.error("downlink G-PDU for an unknown TEID");
                    }
                }
                END_MARKER => metrics.end_markers += 1,
                1 => {
                    // Echo Request: answer so the peer keeps the path up.
                    let mut out = [0u8; 64];
                    if let Ok(len) = pepc_wire::gtpu::echo_response(&p, &mut out) {
                        echo.push((out[..len].to_vec(), from));
                    }
                }
                _ => {}
            }
        });
        for (b, to) in echo {
            let _ = self.gtpu.send_to(&b, SocketAddr::V4(to));
        }
        let Emulator {
            pdn,
            sgi_peer,
            metrics,
            ..
        } = self;
        let mut count = |b: &[u8]| {
            if our_packet(b).is_some() {
                metrics.ul_packets += 1;
                metrics.ul_bytes += b.len() as u64;
            }
        };
        match pdn {
            Pdn::Udp(sock) => {
                sock.recv_all(|b, from| {
                    if sgi_peer.is_none() {
                        *sgi_peer = Some(SocketAddr::V4(from));
                    }
                    count(b);
                });
            }
            Pdn::Tun(t) => {
                t.read_all(|b| count(b));
            }
        }
    }

    /// Send the queued uplink (S1-U) and downlink (PDN side) packets.
    pub(super) fn flush_data(&mut self) {
        if !self.ul_q.is_empty() {
            let (sent, dropped) = self.gtpu.flush(&mut self.ul_q);
            self.metrics.ul_sent += sent;
            if dropped > 0 {
                self.metrics.ul_sent += dropped;
                *self
                    .metrics
                    .errors
                    .entry("uplink send dropped".into())
                    .or_default() += dropped;
            }
        }
        if !self.dl_q.is_empty() {
            let (sent, dropped) = match &self.pdn {
                Pdn::Udp(sock) => sock.flush(&mut self.dl_q),
                Pdn::Tun(_) => (0, self.dl_q.len() as u64),
            };
            self.metrics.dl_sent += sent + dropped;
            if dropped > 0 {
                *self
                    .metrics
                    .errors
                    .entry("downlink send dropped".into())
                    .or_default() += dropped;
            }
        }
    }

    /// A few downlink packets for idle UE `u`: the EPC must buffer them, page the UE
    /// and deliver them after its Service Request.
    pub(super) fn downlink_to_idle(&mut self, u: usize) {
        let Some(&(_, addr)) = self.ues[u].pdns().first() else {
            return;
        };
        self.awaiting_dl[u] += 3;
        for _ in 0..3 {
            self.seq = self.seq.wrapping_add(1);
            let seq = self.seq;
            self.send_downlink(u, addr, 64, seq);
        }
    }

    /// One downlink test packet of `size` bytes from the server to UE `u` at `addr`,
    /// through the PDN side (none over UDP while the node's SGi address is unknown).
    fn send_downlink(&mut self, u: usize, addr: Ipv4Addr, size: usize, seq: u32) {
        let flow = Flow {
            src: self.cfg.server_ip,
            dst: addr,
            sport: SERVER_PORT,
            dport: UE_PORT,
        };
        match &self.pdn {
            Pdn::Udp(_) => {
                if let Some(SocketAddr::V4(peer)) = self.sgi_peer {
                    self.dl_q
                        .push_with(peer, |b| write_ip_packet(b, flow, size, u as u32, seq));
                }
            }
            Pdn::Tun(t) => {
                let p = ip_packet(
                    flow.src, flow.dst, flow.sport, flow.dport, size, u as u32, seq,
                );
                self.metrics.dl_sent += 1;
                if !t.write(&p) {
                    self.metrics.error("TUN write failed");
                }
            }
        }
    }

    pub(super) fn refresh_active(&mut self) {
        let every = SCAN_EVERY.max(Duration::from_nanos(50 * self.ues.len() as u64));
        if self.active_at.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.active_at = Some(Instant::now());
        let (ues, tunnels) = (&self.ues, &self.tunnels);
        self.active.clear();
        self.active.extend((0..ues.len()).filter(|&u| {
            ues[u].is_connected()
                && !ues[u].busy()
                && !ues[u].pdns().is_empty()
                && !tunnels[u].is_empty()
        }));
    }

    /// Send `n` packets of the traffic profile from/to connected UEs, on any of their
    /// PDN connections (default bearers). Stateless IoT devices only send uplink.
    pub(super) fn send_traffic(&mut self, n: usize, ul_frac: f64, ul: &[Class], dl: &[Class]) {
        self.refresh_active();
        if self.active.is_empty() {
            return;
        }
        for _ in 0..n {
            let u = self.active[self.rng.below(self.active.len())];
            // A UE that went busy since the refresh (handover, release) waits; one that
            // lost its PDN connections since (detach, re-attach under way) is skipped.
            if self.ues[u].busy() || !self.ues[u].is_connected() || self.ues[u].pdns().is_empty() {
                continue;
            }
            let pdns = self.ues[u].pdns();
            let k = self.rng.below(pdns.len());
            let (ebi, addr) = pdns[k];
            if !self.closing.is_empty()
                && self
                    .closing
                    .iter()
                    .any(|c| c.0 == u && (c.1 == Quiet::Pdn(ebi) || c.1 == Quiet::Release))
            {
                continue;
            }
            let Some(b) = self.tunnels[u].iter().find(|b| b.erab_id == ebi).copied() else {
                continue;
            };
            self.seq = self.seq.wrapping_add(1);
            let seq = self.seq;
            if self.ues[u].is_iot() || self.rng.unit() < ul_frac {
                if k > 0 {
                    self.metrics.ul_sent_extra_pdn += 1;
                }
                let size = pick(ul, &mut self.rng);
                let flow = Flow {
                    src: addr,
                    dst: self.cfg.server_ip,
                    sport: UE_PORT,
                    dport: SERVER_PORT,
                };
                self.ul_q
                    .push_with(SocketAddrV4::new(b.ul_addr, 2152), |buf| {
                        let size = size.max(40);
                        buf.extend_from_slice(&[0x30, G_PDU]);
                        buf.extend_from_slice(&(size as u16).to_be_bytes());
                        buf.extend_from_slice(&b.ul_teid.to_be_bytes());
                        write_ip_packet(buf, flow, size, u as u32, seq);
                    });
            } else {
                let size = pick(dl, &mut self.rng);
                self.send_downlink(u, addr, size, seq);
            }
        }
    }

    /// Quiet times that are over: PDN Disconnect or release (a busy UE waits).
    pub(super) fn close_pdns(&mut self) {
        if self.closing.is_empty() {
            return;
        }
        let now_i = Instant::now();
        let now = self.now_ns();
        let mut i = 0;
        while i < self.closing.len() {
            let (u, ebi, at) = self.closing[i];
            if at > now_i || self.ues[u].busy() {
                i += 1;
                continue;
            }
            self.closing.swap_remove(i);
            match ebi {
                Quiet::Pdn(ebi)
                    if self.ues[u].is_connected()
                        && self.ues[u].pdns().iter().any(|p| p.0 == ebi) =>
                {
                    self.ue_input(u, UeInput::PdnDisconnect { ebi }, now)
                }
                Quiet::Release if self.ues[u].is_connected() && self.ues[u].is_registered() => {
                    self.ues[u].begin_external(Procedure::Release, now);
                    let enb = self.serving[u];
                    let mut eo = Vec::new();
                    self.enbs[enb].handle(EnbInput::ReleaseRequest { ue: u as UeId }, &mut eo);
                    self.enb_outputs(enb, &mut eo);
                }
                _ => self.metrics.skipped += 1,
            }
        }
    }
}

pub(super) const MAGIC: [u8; 4] = *b"PEMU";

pub(super) const END_MARKER: u8 = 254;

pub(super) const UE_PORT: u16 = 40000;

pub(super) const SERVER_PORT: u16 = 5001;

/// xorshift64*: deterministic choices without a dependency.
pub(super) struct Rng(pub(super) u64);

impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    pub(super) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One packet class: size and share of its direction's packets.
#[derive(Clone, Copy)]
pub(super) struct Class {
    size: usize,
    share: f64,
}

/// Rajan et al. Table IV: (packet size, packets/s) per traffic class, uplink.
pub const TABLE_IV_UL: [(usize, f64); 5] = [
    (72, 2.1e6),
    (690, 289e3),
    (240, 232e3),
    (400, 76e3),
    (1000, 29e3),
];

/// Rajan et al. Table IV, downlink.
pub const TABLE_IV_DL: [(usize, f64); 5] = [
    (72, 2.1e6),
    (1200, 1.3e6),
    (1440, 602e3),
    (675, 290e3),
    (1440, 136e3),
];

pub(super) fn classes(p: TrafficProfile) -> (f64, Vec<Class>, Vec<Class>) {
    // Returns (uplink fraction of all packets, UL classes, DL classes).
    match p {
        TrafficProfile::None => (0.0, vec![], vec![]),
        TrafficProfile::Pepc => (
            0.25,
            vec![Class {
                size: 128,
                share: 1.0,
            }],
            vec![Class {
                size: 64,
                share: 1.0,
            }],
        ),
        TrafficProfile::TableIv => {
            // (size, packets/s) per class, Rajan et al. Table IV.
            let (ul, dl) = (TABLE_IV_UL, TABLE_IV_DL);
            let mk = |t: &[(usize, f64)]| {
                let sum: f64 = t.iter().map(|x| x.1).sum();
                t.iter()
                    .map(|&(size, r)| Class {
                        size,
                        share: r / sum,
                    })
                    .collect::<Vec<_>>()
            };
            let su: f64 = ul.iter().map(|x| x.1).sum();
            let sd: f64 = dl.iter().map(|x| x.1).sum();
            (su / (su + sd), mk(&ul), mk(&dl))
        }
    }
}

pub(super) fn pick(cls: &[Class], rng: &mut Rng) -> usize {
    let mut u = rng.unit();
    for c in cls {
        if u < c.share {
            return c.size;
        }
        u -= c.share;
    }
    cls.last().map_or(64, |c| c.size)
}

/// The far-end addresses and ports of one test packet.
#[derive(Clone, Copy)]
pub(super) struct Flow {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
}

/// IPv4/UDP packet of `len` bytes (>= 28 + 12) carrying MAGIC, UE index and a sequence.
pub fn ip_packet(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    len: usize,
    ue: u32,
    seq: u32,
) -> Vec<u8> {
    let mut v = Vec::new();
    write_ip_packet(
        &mut v,
        Flow {
            src,
            dst,
            sport,
            dport,
        },
        len,
        ue,
        seq,
    );
    v
}

/// Append the packet of [`ip_packet`] to `out`.
pub(super) fn write_ip_packet(out: &mut Vec<u8>, f: Flow, len: usize, ue: u32, seq: u32) {
    let Flow {
        src,
        dst,
        sport,
        dport,
    } = f;
    let len = len.max(40);
    let at = out.len();
    out.resize(at + len, 0);
    let p = &mut out[at..];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    p[6] = 0x40;
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = pepc_wire::checksum::checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&((len - 20) as u16).to_be_bytes());
    // UDP checksum 0: optional over IPv4; the EPC does not touch the inner packet.
    p[28..32].copy_from_slice(&MAGIC);
    p[32..36].copy_from_slice(&ue.to_be_bytes());
    p[36..40].copy_from_slice(&seq.to_be_bytes());
}

/// UE index of one of our test packets, if it is one.
pub(super) fn our_packet(ip: &[u8]) -> Option<u32> {
    if ip.len() >= 40 && ip[0] >> 4 == 4 && ip[9] == 17 && ip[28..32] == MAGIC {
        Some(u32::from_be_bytes([ip[32], ip[33], ip[34], ip[35]]))
    } else {
        None
    }
}

/// The PDN side: where uplink packets leave the EPC and downlink ones enter it.
pub(super) enum Pdn {
    /// Userspace sink: IP packets as UDP datagrams to/from the EPC's SGi socket.
    Udp(BatchUdp),
    /// Kernel-routed TUN device owning the server address.
    Tun(Tun),
}

impl Pdn {
    pub(super) fn open(cfg: &EmulatorConfig) -> Result<Pdn, EmuError> {
        let udp = || -> Result<Pdn, EmuError> {
            BatchUdp::bind(cfg.pdn_addr)
                .map(Pdn::Udp)
                .map_err(|e| EmuError::Io(format!("bind PDN side {}: {e}", cfg.pdn_addr)))
        };
        match cfg.sgi {
            SgiMode::Udp => udp(),
            SgiMode::Tun => match Tun::open(&cfg.tun_name, cfg.server_ip) {
                Ok(t) => {
                    tracing::info!(
                        "emulator: PDN side is TUN {} routing {} (kernel routing)",
                        t.name(),
                        cfg.server_ip
                    );
                    Ok(Pdn::Tun(t))
                }
                Err(e) => {
                    tracing::warn!(
                        "emulator: cannot use a TUN PDN side ({e}); it needs root or \
                         CAP_NET_ADMIN and /dev/net/tun. Falling back to the userspace \
                         UDP sink on {}.",
                        cfg.pdn_addr
                    );
                    udp()
                }
            },
        }
    }
}
