//! The generator and sink: packet templates of the mix, per-user sequence and send-time
//! stamps, the sink's loss/reordering/latency count, and the sending loop on AF_XDP or
//! kernel UDP sockets.

use super::*;

/// Packet sizes (uplink frame on the S1-U wire incl. outer IP/UDP/GTP-U; downlink IP
/// packet) and the uplink share of packets.
pub(super) fn mix_classes(m: Mix) -> (f64, Classes, Classes) {
    match m {
        Mix::Table2 => (0.25, vec![(128, 1.0)], vec![(64, 1.0)]),
        Mix::TableIv => {
            let (ul, dl) = (TABLE_IV_UL, TABLE_IV_DL);
            let su: f64 = ul.iter().map(|x| x.1).sum();
            let sd: f64 = dl.iter().map(|x| x.1).sum();
            let norm = |t: &[(usize, f64)], s: f64| t.iter().map(|&(a, r)| (a, r / s)).collect();
            (su / (su + sd), norm(&ul, su), norm(&dl, sd))
        }
    }
}

pub(super) struct Templates {
    /// Per class: G-PDU (uplink) or IP packet (downlink), stamped and retargeted per
    /// packet.
    ul: Vec<(Vec<u8>, f64)>,
    dl: Vec<(Vec<u8>, f64)>,
    ul_share: f64,
}

impl Templates {
    fn new(m: Mix) -> Templates {
        let (ul_share, ul, dl) = mix_classes(m);
        let zero_udp_sum = |mut p: Vec<u8>| {
            // The stamp changes the payload: "no checksum" stays valid over IPv4.
            p[26..28].copy_from_slice(&[0, 0]);
            p
        };
        Templates {
            ul: ul
                .into_iter()
                .map(|(size, share)| {
                    let inner = zero_udp_sum(ipv4_udp(
                        Ipv4Addr::new(10, 0, 0, 1),
                        SERVER,
                        40000,
                        443,
                        size.saturating_sub(36).max(STAMP + 16),
                    ));
                    (gpdu(1, &inner), share)
                })
                .collect(),
            dl: dl
                .into_iter()
                .map(|(size, share)| {
                    (
                        zero_udp_sum(ipv4_udp(
                            SERVER,
                            Ipv4Addr::new(10, 0, 0, 1),
                            443,
                            40000,
                            size.max(STAMP + 16),
                        )),
                        share,
                    )
                })
                .collect(),
            ul_share,
        }
    }

    fn pick(cls: &[(Vec<u8>, f64)], rng: &mut Rng) -> usize {
        let mut u = rng.next_u64() as f64 / u64::MAX as f64;
        for (i, c) in cls.iter().enumerate() {
            if u < c.1 {
                return i;
            }
            u -= c.1;
        }
        cls.len() - 1
    }
}

/// Write the stamp: the user's index, its per-direction sequence number (from 1),
/// and the send time. Order is a per-flow property: slices may interleave users.
pub(super) fn stamp(inner: &mut [u8], user: u32, seq: u32, now: u64) {
    inner[STAMP..STAMP + 4].copy_from_slice(&user.to_be_bytes());
    inner[STAMP + 4..STAMP + 8].copy_from_slice(&seq.to_be_bytes());
    inner[STAMP + 8..STAMP + 16].copy_from_slice(&now.to_be_bytes());
}

/// Per-direction receive bookkeeping.
#[derive(Default)]
pub(super) struct Sink {
    pub(super) received: u64,
    pub(super) bytes: u64,
    /// Per user: the highest sequence number received.
    pub(super) last: Vec<u32>,
    pub(super) reordered: u64,
}

impl Sink {
    fn new(users: usize) -> Sink {
        Sink {
            last: vec![0; users],
            ..Sink::default()
        }
    }

    fn take(&mut self, inner: &[u8], wire_len: usize, now: u64, lat: &mut Histogram) {
        if inner.len() < STAMP + 16 {
            return;
        }
        let user = u32::from_be_bytes(inner[STAMP..STAMP + 4].try_into().expect("4")) as usize;
        let seq = u32::from_be_bytes(inner[STAMP + 4..STAMP + 8].try_into().expect("4"));
        let sent = u64::from_be_bytes(inner[STAMP + 8..STAMP + 16].try_into().expect("8"));
        self.received += 1;
        self.bytes += wire_len as u64;
        if let Some(l) = self.last.get_mut(user) {
            if seq < *l {
                self.reordered += 1;
            } else {
                *l = seq;
            }
        }
        lat.record_n(now.saturating_sub(sent) / 1000, 1);
    }
}

pub(super) fn gtpu_inner(p: &[u8]) -> &[u8] {
    if p.len() < 8 {
        return &[];
    }
    let h = if p[0] & 0x07 != 0 { 12 } else { 8 };
    p.get(h..).unwrap_or(&[])
}

/// The generator's receiving side: the eNB and PDN ports (passed in: they also send)
/// and the sockets on the node's other sending queues.
pub(super) struct Receiver {
    pub(super) enb_more: Vec<Box<dyn PacketIo>>,
    pub(super) pdn_more: Vec<Box<dyn PacketIo>>,
    pub(super) ul: Sink,
    pub(super) dl: Sink,
    pub(super) lat: Histogram,
}

impl Receiver {
    /// Take what waits on every receiving socket; returns how many packets.
    fn drain(
        &mut self,
        enb: &mut (dyn PacketIo + 'static),
        pdn: &mut (dyn PacketIo + 'static),
        b: &mut Batch,
    ) -> usize {
        let mut got = 0;
        for p in std::iter::once(enb).chain(self.enb_more.iter_mut().map(|p| &mut **p)) {
            if p.recv_batch(b).unwrap_or(0) > 0 {
                let now = now_ns();
                for x in b.packets() {
                    self.dl
                        .take(gtpu_inner(x.as_slice()), x.len() + 28, now, &mut self.lat);
                }
                got += b.len;
            }
        }
        for p in std::iter::once(pdn).chain(self.pdn_more.iter_mut().map(|p| &mut **p)) {
            if p.recv_batch(b).unwrap_or(0) > 0 {
                let now = now_ns();
                for x in b.packets() {
                    self.ul.take(x.as_slice(), x.len(), now, &mut self.lat);
                }
                got += b.len;
            }
        }
        got
    }
}

pub(super) struct GenResult {
    pub(super) kernel_dropped: u64,
    /// CPU of the kernel threads receiving on the generator's veth ends (threaded
    /// NAPI), over the run.
    pub(super) napi_ns: u64,
    pub(super) sent_ul: u64,
    pub(super) sent_dl: u64,
    pub(super) ul: Sink,
    pub(super) dl: Sink,
    pub(super) lat: Histogram,
    pub(super) cpu_ns: u64,
    pub(super) seconds: f64,
}

/// Queue mode: per user, the queue of its uplink and of its downlink packets.
pub(super) type QueueOfUser = (Vec<u8>, Vec<u8>);

/// Queue mode: per user, the queue its uplink and its downlink packets are sent on.
pub(super) fn steering(
    targets: &[(u32, Ipv4Addr)],
    layout: &pepc_slice::ids::IdLayout,
    queues: u32,
    steer: Steer,
) -> QueueOfUser {
    // A flow hash (Fibonacci hashing): spread, and blind to the slice bits.
    let hash = |x: u32| ((x as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32 % queues;
    targets
        .iter()
        .map(|&(teid, ip)| match steer {
            Steer::Rss => (hash(teid) as u8, hash(u32::from(ip)) as u8),
            Steer::Slice => {
                let s = layout.split_teid(teid).map_or(0, |(s, _, _)| s) as u8;
                (s, s)
            }
        })
        .unzip()
}

pub(super) fn generate(
    o: &IoOpts,
    ns: &str,
    (s1u_dev, sgi_dev): (&str, &str),
    targets: &[(u32, Ipv4Addr)],
    (warm, go): (mpsc::Sender<()>, mpsc::Receiver<()>),
    (queues, steering): (u32, Option<QueueOfUser>),
) -> Result<GenResult, String> {
    enter(ns)?;
    if targets.is_empty() {
        return Err("no users attached".into());
    }
    let (mut enb, mut pdn, enb_more, pdn_more) = open_ports(o, (s1u_dev, sgi_dev), queues)?;
    let t = Templates::new(o.mix);
    let mut rng = Rng::new(o.seed);
    let node_s1u = SocketAddrV4::new(S1U_NODE, 2152);
    // Per queue (queue mode; else everything goes on queue 0).
    let mut ul: Vec<Batch> = (0..queues).map(|_| Batch::new(BATCH_SIZE)).collect();
    let mut dl: Vec<Batch> = (0..queues).map(|_| Batch::new(BATCH_SIZE)).collect();
    // Kernel sockets have one socket per port: the kernel picks the veth queue.
    let per_queue = !enb_more.is_empty();
    let queue_of = |u: usize, uplink: bool| match &steering {
        Some((q_ul, q_dl)) if per_queue => (if uplink { q_ul[u] } else { q_dl[u] }) as usize,
        _ => 0,
    };
    let mut rxb = Batch::new(BATCH_SIZE);
    // Per user and direction: the next sequence number.
    let (mut seq_ul, mut seq_dl) = (vec![1u32; targets.len()], vec![1u32; targets.len()]);
    // Every queue the node's slices send on has a receiving socket here.
    let mut rx = Receiver {
        enb_more,
        pdn_more,
        ul: Sink::new(targets.len()),
        dl: Sink::new(targets.len()),
        lat: Histogram::default(),
    };
    // Warm the neighbour entries (ARP) before timing: a few packets each way.
    let warm_until = Instant::now() + Duration::from_secs(3);
    loop {
        let mut b = Batch::new(1);
        b.len = 1;
        let (teid, ue) = targets[0];
        b.bufs[0].fill(&t.ul[0].0);
        retarget_uplink(b.bufs[0].as_mut_slice(), teid, ue);
        b.bufs[0].meta.peer = node_s1u;
        b.bufs[0].meta.verdict = Verdict::ToS1u;
        // On the user's own queues (queue mode steers warm-up packets too).
        let a = match queue_of(0, true) {
            0 => enb.send_batch(&b, Verdict::ToS1u),
            q => rx.enb_more[q - 1].send_batch(&b, Verdict::ToS1u),
        }
        .unwrap_or(0);
        b.bufs[0].fill(&t.dl[0].0);
        retarget_downlink(b.bufs[0].as_mut_slice(), ue);
        b.bufs[0].meta.peer = SINK_NODE;
        b.bufs[0].meta.verdict = Verdict::ToSgi;
        let c = match queue_of(0, false) {
            0 => pdn.send_batch(&b, Verdict::ToSgi),
            q => rx.pdn_more[q - 1].send_batch(&b, Verdict::ToSgi),
        }
        .unwrap_or(0);
        if a > 0 && c > 0 {
            break;
        }
        if Instant::now() > warm_until {
            return Err("the generator could not resolve the node's MAC addresses (ARP)".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    while rx.drain(&mut *enb, &mut *pdn, &mut rxb) > 0 {}
    // Counting starts now.
    (rx.ul, rx.dl, rx.lat) = (
        Sink::new(targets.len()),
        Sink::new(targets.len()),
        Histogram::default(),
    );
    let _ = warm.send(());
    // The node's and the links' counters are read before the first counted packet.
    if go.recv_timeout(Duration::from_secs(60)).is_err() {
        return Err("the bench did not start the generator after its warm-up".into());
    }

    let cpu0 = own_cpu_ns();
    let napi0 = napi_of(s1u_dev, sgi_dev);
    let start = Instant::now();
    let dur = Duration::from_secs_f64(o.seconds);
    let mut sent_ul = 0u64;
    let mut sent_dl = 0u64;
    loop {
        let elapsed = start.elapsed();
        if elapsed >= dur {
            break;
        }
        let due = if o.rate_pps == 0 {
            u64::MAX
        } else {
            (elapsed.as_nanos() * o.rate_pps as u128 / 1_000_000_000) as u64
        };
        if sent_ul + sent_dl < due {
            // One batch of 32 packets, split by the mix's uplink share.
            let n_ul = ((BATCH_SIZE as f64 * t.ul_share).round() as usize).clamp(1, BATCH_SIZE - 1);
            let n_dl = BATCH_SIZE - n_ul;
            let now = now_ns();
            for b in ul.iter_mut().chain(dl.iter_mut()) {
                b.len = 0;
            }
            for _ in 0..n_ul {
                let u = rng.below(targets.len() as u64) as usize;
                let q = &mut ul[queue_of(u, true)];
                let b = &mut q.bufs[q.len];
                q.len += 1;
                let (teid, ip) = targets[u];
                let k = Templates::pick(&t.ul, &mut rng);
                b.fill(&t.ul[k].0);
                let d = b.as_mut_slice();
                retarget_uplink(d, teid, ip);
                stamp(&mut d[8..], u as u32, seq_ul[u], now);
                seq_ul[u] += 1;
                b.meta.peer = node_s1u;
                b.meta.verdict = Verdict::ToS1u;
            }
            for _ in 0..n_dl {
                let u = rng.below(targets.len() as u64) as usize;
                let q = &mut dl[queue_of(u, false)];
                let b = &mut q.bufs[q.len];
                q.len += 1;
                let ip = targets[u].1;
                let k = Templates::pick(&t.dl, &mut rng);
                b.fill(&t.dl[k].0);
                let d = b.as_mut_slice();
                retarget_downlink(d, ip);
                stamp(d, u as u32, seq_dl[u], now);
                seq_dl[u] += 1;
                b.meta.peer = SINK_NODE;
                b.meta.verdict = Verdict::ToSgi;
            }
            // What the TX ring could not take is not sent (and not counted as sent);
            // its sequence numbers are skipped, which the sink does not mind.
            for (q, b) in ul.iter().enumerate().filter(|(_, b)| b.len > 0) {
                let port = if q == 0 {
                    &mut enb
                } else {
                    &mut rx.enb_more[q - 1]
                };
                sent_ul += port.send_batch(b, Verdict::ToS1u).unwrap_or(0) as u64;
            }
            for (q, b) in dl.iter().enumerate().filter(|(_, b)| b.len > 0) {
                let port = if q == 0 {
                    &mut pdn
                } else {
                    &mut rx.pdn_more[q - 1]
                };
                sent_dl += port.send_batch(b, Verdict::ToSgi).unwrap_or(0) as u64;
            }
        }
        rx.drain(&mut *enb, &mut *pdn, &mut rxb);
    }
    let seconds = start.elapsed().as_secs_f64();
    // Drain what is still in flight.
    let quiet = Instant::now();
    let mut last = Instant::now();
    while quiet.elapsed() < Duration::from_secs(2) && last.elapsed() < Duration::from_millis(200) {
        if rx.drain(&mut *enb, &mut *pdn, &mut rxb) > 0 {
            last = Instant::now();
        }
    }
    // What the kernel dropped before the generator's sockets saw it (a full RX ring,
    // no free frame): the generator, not the node, lost those. (Not the kernel's
    // "fill ring empty" count: in copy mode those packets are no-frame drops too.)
    let kernel_dropped = std::iter::once(&enb)
        .chain(std::iter::once(&pdn))
        .chain(rx.enb_more.iter())
        .chain(rx.pdn_more.iter())
        .filter_map(|p| p.socket_drops())
        .map(|d| d.read().by_kernel())
        .sum();
    Ok(GenResult {
        kernel_dropped,
        sent_ul,
        sent_dl,
        ul: rx.ul,
        dl: rx.dl,
        lat: rx.lat,
        cpu_ns: own_cpu_ns() - cpu0,
        napi_ns: napi_of(s1u_dev, sgi_dev).saturating_sub(napi0),
        seconds,
    })
}

/// The eNB port, the PDN port, and the sockets on the other queues of each.
type Ports = (
    Box<dyn PacketIo>,
    Box<dyn PacketIo>,
    Vec<Box<dyn PacketIo>>,
    Vec<Box<dyn PacketIo>>,
);

/// The generator's eNB and PDN ports (they receive too) and, on AF_XDP, a socket on
/// each other queue the node's slices send on.
fn open_ports(o: &IoOpts, (s1u_dev, sgi_dev): (&str, &str), queues: u32) -> Result<Ports, String> {
    if o.gen_io == GenIo::Sockets {
        // The eNB side sends GTP-U from 2152; the PDN side speaks UDP to the sink.
        let enb = UdpPort::bind(SocketAddrV4::new(S1U_GEN, 2152))
            .map_err(|e| format!("generator S1-U socket: {e}"))?;
        let pdn = UdpPort::bind(SINK_GEN).map_err(|e| format!("generator sink socket: {e}"))?;
        return Ok((Box::new(enb), Box::new(pdn), Vec::new(), Vec::new()));
    }
    let cfg = |dev: &str, role| AfXdpConfig {
        interface: dev.to_string(),
        queue: 0,
        xdp_mode: o.xdp_mode,
        zero_copy: ZeroCopy::Auto,
        role,
        xsk: XskConfig::default(),
    };
    // The eNB side sends GTP-U from 2152 and takes the node's downlink G-PDUs; the
    // PDN side takes uplink to the server's prefix and sends to the UEs via the node.
    let enb = AfXdpPort::open(&cfg(
        s1u_dev,
        Role::S1u {
            addr: SocketAddrV4::new(S1U_GEN, 2152),
        },
    ))
    .map_err(|e| format!("generator S1-U: {e}"))?;
    // With the UDP sink the PDN side speaks UDP to the node's sink address.
    let pdn_role = match o.backend {
        Backend::Udp => Role::S1u { addr: SINK_GEN },
        Backend::Afxdp | Backend::Tun => Role::Sgi {
            pools: vec![(SERVER, 24)],
            next_hop: Some(SGI_NODE),
        },
    };
    let pdn =
        AfXdpPort::open(&cfg(sgi_dev, pdn_role)).map_err(|e| format!("generator SGi: {e}"))?;
    let more = |p: &AfXdpPort, what: &str| -> Result<Vec<Box<dyn PacketIo>>, String> {
        (1..queues)
            .map(|q| {
                p.open_queue(q)
                    .map(|p| Box::new(p) as Box<dyn PacketIo>)
                    .map_err(|e| format!("generator {what}: {e}"))
            })
            .collect()
    };
    let (enb_more, pdn_more) = (more(&enb, "S1-U")?, more(&pdn, "SGi")?);
    Ok((Box::new(enb), Box::new(pdn), enb_more, pdn_more))
}
