//! `pepc bench qos --io udp|afxdp`: the slice's data thread (`runtime::data_loop`, as
//! a node runs it) sends its downlink on a real port, in a network namespace of its
//! own, over a veth pair to a second namespace where the eNB's socket receives and
//! counts what arrives, by class, with its latency. The flows are those of the
//! in-memory run, paced in wall time; latency is from entering the pipeline to the
//! eNB's socket (the link's own queue included). What holds the egress to
//! `--egress-mbps` depends on the port:
//!
//! * `udp`: the link, shaped by a `tbf` qdisc on the node's veth end. The egress has
//!   no rate of its own: the socket's send buffer (kept small, below the qdisc's
//!   queue) fills as the link does and the port pushes back, so the scheduler sends
//!   in QoS order at the port's rate.
//! * `afxdp`: the slice's own rate (`[s1u] egress_mbps`), as an operator shaping to a
//!   backhaul it knows sets it. An AF_XDP socket's frames go to the driver directly,
//!   past any qdisc, so a tbf would not shape them; and a veth has no line rate: in
//!   copy mode it hands each frame to its peer at once, so the TX ring fills only
//!   when the CPU falls behind, not at a rate one could set. The port still pushes
//!   back if its TX ring fills.

use crate::netns::{enter, ip, End, Topology};
use crate::qos::{result, setup, Bottleneck, Flow, QosIo, QosOpts, QosResult, Tally, GTPU_HEADER};
use pepc_node::io::afxdp::{AfXdpConfig, AfXdpPort, Role, XdpMode, XskConfig, ZeroCopy};
use pepc_node::io::{now_ns, PacketIo, UdpPort};
use pepc_wire::{Batch, Verdict};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const NODE: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 1);
const ENB: Ipv4Addr = Ipv4Addr::new(10, 79, 0, 2);
/// The node socket's send buffer (the kernel doubles it): a few packets in flight on
/// the link, so pushback happens at the socket and the scheduler decides the order.
const SNDBUF: i32 = 4096;
/// Where a generated packet carries its send time (after the IP and UDP headers).
const STAMP: usize = 28;

/// The SGi side of the slice: each flow's packets when they are due in wall time.
struct Paced {
    flows: Vec<Flow>,
    templates: Vec<Vec<u8>>,
    t0: u64,
    end: u64,
    /// Offered (packets, bytes) per class.
    offered: Arc<Vec<(AtomicU64, AtomicU64)>>,
    next: usize,
}

impl PacketIo for Paced {
    fn recv_batch(&mut self, batch: &mut Batch) -> std::io::Result<usize> {
        batch.len = 0;
        let now = now_ns();
        if now >= self.end {
            return Ok(0);
        }
        let rel = (now - self.t0) as f64;
        let n = self.flows.len();
        // Round robin from where the last batch stopped, so no flow waits behind
        // another when a batch is full.
        for k in 0..n {
            let i = (self.next + k) % n;
            while self.flows[i].next_ns <= rel && batch.len < batch.capacity() {
                let f = &mut self.flows[i];
                f.next_ns += f.gap_ns;
                let b = &mut batch.bufs[batch.len];
                b.reset();
                b.fill(&self.templates[i]);
                b.as_mut_slice()[STAMP..STAMP + 8].copy_from_slice(&now.to_be_bytes());
                b.meta.rx_ns = now;
                let o = &self.offered[f.class];
                o.0.fetch_add(1, Relaxed);
                o.1.fetch_add(f.len as u64, Relaxed);
                batch.len += 1;
            }
            if batch.len == batch.capacity() {
                self.next = i;
                break;
            }
        }
        Ok(batch.len)
    }

    fn send_batch(&mut self, _: &Batch, _: Verdict) -> std::io::Result<usize> {
        Ok(0)
    }
}

/// The class and send time of a received G-PDU, by its inner packet's source port.
fn parse(d: &[u8], ports: &[u16]) -> Option<(usize, u64)> {
    let flags = *d.first()?;
    let mut at = GTPU_HEADER;
    if flags & 0x07 != 0 {
        at += 4;
        // Extension headers: a length in 4-byte units, then the next type last.
        let mut next = if flags & 0x04 != 0 { *d.get(11)? } else { 0 };
        while next != 0 {
            let len = usize::from(*d.get(at)?) * 4;
            next = *d.get(at + len - 1)?;
            at += len;
        }
    }
    let inner = d.get(at..)?;
    let port = u16::from_be_bytes([*inner.get(20)?, *inner.get(21)?]);
    let class = ports.iter().position(|&p| p == port)?;
    let stamp = u64::from_be_bytes(inner.get(STAMP..STAMP + 8)?.try_into().ok()?);
    Some((class, stamp))
}

/// The link at the egress rate (`udp`), with a queue (1 MB) deeper than the socket's
/// send buffer: the socket fills first, so the link never drops.
fn shape(ns: &str, dev: &str, egress_mbps: u64) -> Result<(), String> {
    let burst = (egress_mbps * 125).max(4000).to_string();
    let rate = format!("{egress_mbps}mbit");
    ip(&[
        "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", &rate,
        "burst", &burst, "limit", "1000000",
    ])
    .map_err(|e| format!("shaping the link (tc from iproute2): {e}"))
}

/// The node's S1-U port on `dev` (`afxdp`), once the kernel knows the eNB's MAC: a
/// probe G-PDU without a packet inside (the eNB counts none) is sent until the port
/// takes it, so the flows' first packets do not meet an unresolved neighbour.
fn afxdp_port(dev: &str) -> Result<AfXdpPort, String> {
    let mut port = AfXdpPort::open(&AfXdpConfig {
        interface: dev.to_string(),
        queue: 0,
        xdp_mode: XdpMode::Auto,
        zero_copy: ZeroCopy::Auto,
        role: Role::S1u {
            addr: SocketAddrV4::new(NODE, 2152),
        },
        xsk: XskConfig::default(),
    })
    .map_err(|e| format!("AF_XDP on {dev}: {e}"))?;
    let mut probe = Batch::new(1);
    probe.len = 1;
    probe.bufs[0].fill(&[0x30, 0xff, 0, 0, 0, 0, 0, 0]);
    probe.bufs[0].meta.peer = SocketAddrV4::new(ENB, 2152);
    probe.bufs[0].meta.verdict = Verdict::ToS1u;
    let until = Instant::now() + Duration::from_secs(5);
    while port
        .send_batch(&probe, Verdict::ToS1u)
        .map_err(|e| format!("AF_XDP on {dev}: {e}"))?
        == 0
    {
        if Instant::now() > until {
            return Err(format!(
                "{dev}: the eNB's address {ENB} did not resolve in 5 s"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(port)
}

/// The eNB: binds, says it is ready, then counts what arrives by class with its
/// latency (and what its socket dropped) until `stop`; what arrives before `window`'s
/// end (set when the flows start, 0 until then) as arriving while they ran.
fn receive(
    ns: &str,
    k: usize,
    ports: &[u16],
    ready: mpsc::Sender<()>,
    (stop, window): (&AtomicBool, &AtomicU64),
) -> Result<Tally, String> {
    enter(ns)?;
    let mut sock = UdpPort::bind(SocketAddrV4::new(ENB, 2152)).map_err(|e| e.to_string())?;
    let drops = sock.socket_drops();
    let dropped = || drops.as_ref().map_or(0, |d| d.read().total());
    let dropped0 = dropped();
    let _ = ready.send(());
    let mut t = Tally::new(k);
    let mut batch = Batch::default();
    while !stop.load(Relaxed) {
        if sock.recv_batch(&mut batch).map_err(|e| e.to_string())? == 0 {
            let _ = sock.wait_readable(Duration::from_millis(20));
            continue;
        }
        let now = now_ns();
        let in_window = now <= window.load(Relaxed);
        for p in batch.packets() {
            let d = p.as_slice();
            if let Some((c, stamp)) = parse(d, ports) {
                t.delivered(c, d.len() - GTPU_HEADER, in_window);
                t.hists[c].record_n(now.saturating_sub(stamp) / 1000, 1);
            }
        }
    }
    t.receiver_dropped = dropped() - dropped0;
    Ok(t)
}

pub fn run(o: &QosOpts) -> Result<QosResult, String> {
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let tag = (std::process::id() % 10_000) * 10 + RUNS.fetch_add(1, Relaxed) % 10;
    let (ns_node, ns_enb) = (format!("pepcq{tag}n"), format!("pepcq{tag}e"));
    let topo = Topology::new(&[&ns_node, &ns_enb])?;
    let end = |ns: &str, dev: String, addr| End {
        ns: ns.to_string(),
        dev,
        addr,
        prefix: 24,
    };
    let (node_end, enb_end) = (
        end(&ns_node, format!("pq{tag}n"), NODE),
        end(&ns_enb, format!("pq{tag}e"), ENB),
    );
    topo.veth(&node_end, &enb_end, 1)?;
    let afxdp = o.io == QosIo::Afxdp;
    let (egress_rate, bottleneck) = if afxdp {
        (o.egress_mbps, Bottleneck::EgressMbps)
    } else {
        shape(&ns_node, &node_end.dev, o.egress_mbps)?;
        (0, Bottleneck::Tbf)
    };

    let s = setup(o, ENB, egress_rate)?;
    let classes = s.classes.clone();
    let ports: Vec<u16> = classes.iter().map(|c| c.5).collect();
    let k = classes.len();
    let stop_rx = Arc::new(AtomicBool::new(false));
    // When the flows end (0: not started).
    let window = Arc::new(AtomicU64::new(0));
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = {
        let (ns, stop, w) = (ns_enb.clone(), stop_rx.clone(), window.clone());
        std::thread::spawn(move || receive(&ns, k, &ports, ready_tx, (&stop, &w)))
    };
    if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
        stop_rx.store(true, Relaxed);
        return Err(match receiver.join() {
            Ok(Err(e)) => format!("the eNB's socket: {e}"),
            _ => "the eNB's socket was not ready in 10 s".into(),
        });
    }
    // The node: the slice's data thread on its port, fed by the paced flows.
    let offered: Arc<Vec<(AtomicU64, AtomicU64)>> = Arc::new(
        (0..k)
            .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
            .collect(),
    );
    let seconds = o.seconds;
    let node = {
        let (ns, dev, offered) = (ns_node.clone(), node_end.dev.clone(), offered.clone());
        let window = window.clone();
        let (dp, flows, templates) = (s.dp, s.flows, s.templates);
        std::thread::spawn(move || -> Result<_, String> {
            enter(&ns)?;
            let (port, described): (Box<dyn PacketIo>, String) = if afxdp {
                let p = afxdp_port(&dev)?;
                let d = p.describe();
                (Box::new(p), d)
            } else {
                let mut p =
                    UdpPort::bind(SocketAddrV4::new(NODE, 2152)).map_err(|e| e.to_string())?;
                p.set_send_buffer(SNDBUF)
                    .map_err(|e| format!("SO_SNDBUF: {e}"))?;
                let d = format!("UDP socket, send buffer {SNDBUF} B (doubled by the kernel)");
                (Box::new(p), d)
            };
            let t0 = now_ns();
            let end = t0 + (seconds * 1e9) as u64;
            window.store(end, Relaxed);
            let gen = Paced {
                flows,
                templates,
                t0,
                end,
                offered,
                next: 0,
            };
            let stop = Arc::new(AtomicBool::new(false));
            let st = stop.clone();
            // The flows end at `seconds`; what is queued then has a moment to leave.
            let timer = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs_f64(seconds + 0.3));
                st.store(true, Relaxed);
            });
            let cpu0 = crate::attach::thread_cpu_s();
            let wall0 = Instant::now();
            let dp = pepc_node::runtime::data_loop(dp, port, Box::new(gen), stop);
            let cpu = crate::attach::thread_cpu_s() - cpu0;
            let _ = timer.join();
            Ok((dp, described, cpu, wall0.elapsed().as_secs_f64()))
        })
    };
    let joined = node
        .join()
        .map_err(|_| "the node's thread panicked".to_string());
    std::thread::sleep(Duration::from_millis(100));
    stop_rx.store(true, Relaxed);
    let (dp, port, cpu_s, wall_s) = joined??;
    let mut t = receiver
        .join()
        .map_err(|_| "the receiver panicked".to_string())??;
    for (c, o) in offered.iter().enumerate() {
        t.offered[c] = (o.0.load(Relaxed), o.1.load(Relaxed));
    }
    let packets = t.offered.iter().map(|o| o.0).sum();
    drop(topo);
    Ok(result(
        o,
        (port, bottleneck),
        &classes,
        &t,
        seconds,
        dp.counters(),
        packets,
        (cpu_s, wall_s),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_the_data_path_sends() {
        let mut d = vec![0x30, 0xff, 0, 0, 0, 0, 0, 1];
        let mut inner = pepc_slice::packets::ipv4_udp(
            Ipv4Addr::new(8, 8, 8, 8),
            Ipv4Addr::new(10, 0, 0, 1),
            5,
            40000,
            100,
        );
        inner[STAMP..STAMP + 8].copy_from_slice(&77u64.to_be_bytes());
        d.extend_from_slice(&inner);
        assert_eq!(parse(&d, &[1, 2, 5, 9]), Some((2, 77)));
        assert_eq!(parse(&d[..20], &[1, 2, 5, 9]), None);
    }
}
