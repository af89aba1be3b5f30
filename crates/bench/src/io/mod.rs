//! `pepc bench io`: the node's data path on real packet I/O. A generator and sink in
//! one network namespace play the eNBs (S1-U) and the PDN (SGi); the node runs in
//! another, joined by two veth pairs. The generator builds GTP-U uplink and IPv4
//! downlink for N attached UEs (PEPC Table 2 or Rajan et al. Table IV mix), stamps
//! each packet with a per-direction sequence number and its send time, and counts what
//! comes out of the node: loss, reordering, latency. The generator uses AF_XDP (it must
//! outrun the node), or with `--backend udp --gen-io sockets` kernel UDP sockets;
//! `--backend` picks the node's I/O: AF_XDP on both ports, or the kernel's UDP socket
//! (S1-U, recvmmsg/sendmmsg) and TUN device (SGi).
//!
//! CPU is read per thread (`/proc/self/task/*/schedstat`): the node's data thread, the
//! generator, and the whole machine (`/proc/stat`, which includes the kernel's veth and
//! softirq work wherever it ran).

use crate::hist::Histogram;
use crate::netns::{enter, End, Topology};
use pepc_emulator::driver::{TABLE_IV_DL, TABLE_IV_UL};
use pepc_mme::ControlPlane;
use pepc_node::config::NodeConfig;
pub use pepc_node::io::afxdp::XdpMode;
use pepc_node::io::afxdp::{AfXdpConfig, AfXdpPort, Role, XskConfig, ZeroCopy};
use pepc_node::io::udp::UdpPort;
use pepc_node::io::{now_ns, PacketIo, SocketDropReason};
use pepc_node::node::Node;
use pepc_node::runtime::ControlDriver;
use pepc_slice::control::AttachParams;
use pepc_slice::packets::{gpdu, ipv4_udp, retarget_downlink, retarget_uplink};
use pepc_slice::synthetic::Rng;
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::mpsc;
use std::time::{Duration, Instant};

mod cpu;
mod generator;

use cpu::*;
use generator::*;

/// The node's packet I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    Afxdp,
    /// Kernel UDP sockets with recvmmsg/sendmmsg on both ports: S1-U, and SGi as the
    /// UDP sink (each IP packet in one datagram to and from the PDN side).
    Udp,
    /// Kernel UDP socket on S1-U, TUN device on SGi (the kernel routes to the PDN).
    Tun,
}

/// The generator's own I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GenIo {
    /// AF_XDP on both of its veth ends. An XDP program on a veth end makes the kernel
    /// turn UDP segmentation off on its peer, the node's end: the node's GSO sends are
    /// then cut into datagrams in software, in the node's thread, one skb each.
    Afxdp,
    /// Kernel UDP sockets (backend `udp` only), with GRO on its veth ends so they have
    /// NAPI (`--napi-threads`): the node's GSO sends cross the veth whole, as they
    /// leave a NIC with UDP segmentation offload. Both sides' sockets have UDP GRO
    /// on, so each side receives the other's GSO message whole, as a NIC's GRO would
    /// hand over a burst of one flow's same-size datagrams (`PEPC_NO_UDP_GRO=1`: one
    /// datagram per packet, as from a NIC without GRO).
    Sockets,
}

/// The PDN side's UDP-sink addresses (backend `udp`): the node's and the generator's.
const SINK_NODE: SocketAddrV4 = SocketAddrV4::new(SGI_NODE, 5202);
const SINK_GEN: SocketAddrV4 = SocketAddrV4::new(SGI_GEN, 5201);

/// Traffic mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mix {
    /// PEPC Table 2: 128 B uplink frames, 64 B downlink packets, UL:DL = 1:3.
    Table2,
    /// Rajan et al. Table IV: per-class sizes and UL/DL rates.
    TableIv,
}

#[derive(Debug, Clone)]
pub struct IoOpts {
    pub backend: Backend,
    pub users: u32,
    pub seconds: f64,
    /// Offered packets per second, both directions (0: as fast as the generator can).
    pub rate_pps: u64,
    pub mix: Mix,
    pub seed: u64,
    /// Where the XDP programs run (node and generator): auto | drv | skb.
    pub xdp_mode: XdpMode,
    /// Slices of the node (data threads; with more than one, a demux thread steers).
    pub slices: usize,
    /// Each veth end's receive processing in a kernel thread of its own, charged to
    /// the side that receives (else it runs in the sender's context: the node's data
    /// thread pays the generator's receive work and the other way round).
    pub napi_threads: bool,
    /// How packets reach the node's slices.
    pub rx: RxMode,
    /// Queue mode: how the generator picks the queue of each packet.
    pub steer: Steer,
    /// The node's AF_XDP rings (`ring_size` of `[s1u]` and `[sgi]`).
    pub ring_size: u32,
    /// The node's TUN queue (`[sgi] tun_queue_len`, backend `tun`).
    pub tun_queue_len: u32,
    /// The generator's own I/O.
    pub gen_io: GenIo,
    /// Backend `udp`: the node's sockets receive with UDP GRO (`[s1u] gro`, `[sgi]
    /// gro`); off, one datagram per receive, as from a NIC without GRO.
    pub node_gro: bool,
}

/// How packets reach the node's slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RxMode {
    /// One receive socket per port; with several slices a demux thread steers.
    Demux,
    /// `node.demux = "queues"`: slice k receives and sends on ports of its own (AF_XDP:
    /// queue k of each port; kernel sockets: socket k of each reuseport group, queue k
    /// of the TUN device, steered by the kernel).
    Queues,
}

/// Queue mode: which queue the generator sends a packet on (what a NIC would do).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Steer {
    /// A hash of the flow (uplink: the TEID, as a GTP-aware RSS does; downlink: the
    /// UE address), blind to slices: with k slices, (k-1)/k of the packets arrive at
    /// another slice's queue and are handed on.
    Rss,
    /// By slice (a flow-director rule on the TEID's or the address's slice bits):
    /// every packet arrives at its own slice's queue.
    Slice,
}

#[derive(Debug, Clone, Serialize)]
pub struct IoReport {
    pub backend: Backend,
    pub mix: Mix,
    pub users: u32,
    pub seconds: f64,
    pub gen_io: GenIo,
    pub node_gro: bool,
    /// What the node said it uses on each port.
    pub s1u_io: String,
    pub sgi_io: String,
    pub offered_pps: u64,
    pub sent_ul: u64,
    pub sent_dl: u64,
    pub received_ul: u64,
    pub received_dl: u64,
    /// Sent but never received, as a share of sent.
    pub loss: f64,
    pub lost: u64,
    /// Packets that arrived after a later packet of the same user and direction.
    pub reordered: u64,
    pub slices: usize,
    pub rx: RxMode,
    pub steer: Steer,
    /// Queue mode: packets a slice received for another slice and handed to it, and
    /// those dropped because that slice's ring was full (since the node started).
    pub handed_off: u64,
    pub handoff_dropped: u64,
    /// Packets each slice forwarded since the node started (warm-up included).
    pub slice_forwarded: Vec<u64>,
    /// Packets through the node per second of its CPU: the data threads' and the
    /// demux thread's, plus (with
    /// `napi_threads`) the kernel threads receiving on the node's two veth ends.
    pub mpps_per_core: f64,
    /// Packets through the node per second of wall time.
    pub mpps_wall: f64,
    /// IP-level bits per second out of the node (outer headers of S1-U included).
    pub gbps: f64,
    pub latency_us_p50: f64,
    pub latency_us_p99: f64,
    /// The node's data threads and demux thread.
    pub node_data_cpu_ns_per_packet: f64,
    /// The demux thread's part of it (0 without one): every packet crosses that one
    /// thread, so its inverse caps the node however many slices it has.
    pub node_demux_cpu_ns_per_packet: f64,
    /// With `napi_threads`: the node's veth receive threads, and the generator's.
    pub node_napi_cpu_ns_per_packet: f64,
    pub generator_napi_cpu_ns_per_packet: f64,
    /// The veth ends whose receive ran in NAPI threads.
    pub napi_threads: Vec<String>,
    /// Share of the data thread's CPU spent in the kernel (syscalls and the softirq
    /// work they trigger: on veth, the peer's receive runs in the sender's context).
    pub node_data_kernel_share: f64,
    pub generator_cpu_ns_per_packet: f64,
    /// All CPUs' busy time (user, system, softirq) per forwarded packet.
    pub machine_cpu_ns_per_packet: f64,
    /// Packets the node dropped during the measured run (its slices and demux thread,
    /// and frames its AF_XDP ports received that were not theirs).
    pub node_drops: u64,
    /// The node's drops by reason since it started (warm-up included).
    pub node_drops_by_reason: Vec<(&'static str, u64)>,
    /// Packets the kernel dropped at the generator's own sockets (its RX rings full
    /// or out of frames): lost by the generator, counted in `lost` too.
    pub generator_kernel_drops: u64,
    /// Packets the node's ports could not send during the run (AF_XDP: no next-hop
    /// MAC yet, TX ring full).
    pub node_tx_failed: u64,
    /// Packets the kernel dropped at the node's receiving sockets during the run
    /// (AF_XDP: RX ring full, no fill frame; UDP: socket buffer full; TUN: the
    /// device's queue full).
    pub node_kernel_drops: u64,
    /// Packets the four veth ends dropped during the run (`ip -s link`): a full
    /// receive queue, or an XDP redirect the socket refused (that packet is also in
    /// `node_kernel_drops` or `generator_kernel_drops`).
    pub link_drops: u64,
    /// Packets the generator sent during the run that the node's ports did not
    /// receive (lost on the way in: the links or the node's sockets), from the node's
    /// own receive counts. The kernel counts a dropped GSO or GRO message once,
    /// however many packets it held, so where messages carry several packets (UDP
    /// backend) this count, not the kernel's, says how many were lost there.
    pub lost_before_node: u64,
    /// Packets the node's ports sent during the run that the generator did not
    /// receive (lost on the way back: the generator's links or sockets).
    pub lost_after_node: u64,
    /// Lost packets that no counter explains (0 when every loss is named): `lost`
    /// less the node's drops and send failures, the larger of `link_drops` and the
    /// AF_XDP sockets' kernel drops (in native XDP mode a socket's drop is a link
    /// drop too), and the kernel's drops after the links (UDP socket buffers, TUN);
    /// or less `lost_before_node`, the node's drops and send failures, and
    /// `lost_after_node`, where those name more.
    pub lost_unexplained: u64,
    /// The losses the counters above name (the sum `lost_unexplained` takes from
    /// `lost`). A few more than `lost` can be: the links also drop packets outside
    /// the counted traffic (ARP).
    pub lost_named: u64,
}

// Addresses of the two links (node side .1, generator side .2). Outside 10/8: the UE
// pools and the default pools of further PDNs take all of it, and the node's SGi XDP
// program takes every packet to them (the generator's neighbour probe to the node's
// SGi address once landed in the data path as an unknown UE).
const S1U_NODE: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 1);
const S1U_GEN: Ipv4Addr = Ipv4Addr::new(172, 31, 1, 2);
const SGI_NODE: Ipv4Addr = Ipv4Addr::new(172, 31, 2, 1);
const SGI_GEN: Ipv4Addr = Ipv4Addr::new(172, 31, 2, 2);
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
/// UE pools: a /10 holds 4M UEs; more take a /8.
fn ue_pool(users: u32) -> &'static str {
    if users > 4_000_000 {
        "10.0.0.0/8"
    } else {
        "10.0.0.0/10"
    }
}
/// Where the stamp (sequence number, send time) sits in the inner IP packet.
const STAMP: usize = 28;

/// (packet size, share) per traffic class.
type Classes = Vec<(usize, f64)>;
/// Each user's uplink TEID and address.
type Targets = Vec<(u32, Ipv4Addr)>;

/// Attaches the bench's users on the control thread, then idles; says when the data
/// thread has every user's tunnel.
struct BenchDriver {
    /// This slice's users: IMSIs and eNB TEIDs `first..first + users`.
    first: u32,
    users: u32,
    targets: Vec<(u32, Ipv4Addr)>,
    ready: Option<mpsc::Sender<Result<Targets, String>>>,
    attached: bool,
}

impl ControlDriver for BenchDriver {
    fn start(&mut self, cp: &mut ControlPlane) {
        for i in self.first..self.first + self.users {
            let mut p = AttachParams::new(1_010_000_000_000 + i as u64);
            p.enb_addr = S1U_GEN;
            p.enb_teid = i + 1;
            p.ambr_ul = 10_000_000_000;
            p.ambr_dl = 10_000_000_000;
            match cp.attach(&p) {
                Ok(a) => self.targets.push((a.teid_ul, a.ue_ip)),
                Err(e) => {
                    if let Some(tx) = self.ready.take() {
                        let _ = tx.send(Err(format!("attaching user {i}: {e}")));
                    }
                    return;
                }
            }
            while cp.in_flight() > 8192 && cp.flush() > 0 {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.attached = true;
    }

    fn run_once(&mut self, cp: &mut ControlPlane, _now: Instant) -> bool {
        if self.attached && cp.flush() == 0 && cp.in_flight() == 0 {
            if let Some(tx) = self.ready.take() {
                let _ = tx.send(Ok(std::mem::take(&mut self.targets)));
            }
        }
        false
    }

    fn idle_wait(&self) -> Duration {
        Duration::from_millis(1)
    }
}

/// Run the benchmark once. Needs root (namespaces, AF_XDP); the error says why not.
pub fn run(o: &IoOpts) -> Result<IoReport, String> {
    if o.gen_io == GenIo::Sockets && o.backend != Backend::Udp {
        return Err(
            "--gen-io sockets needs --backend udp (the node's ports are UDP sockets)".into(),
        );
    }
    // Unique per run, also between runs in one process (tests run in parallel).
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let tag = (std::process::id() % 10_000) * 10
        + RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 10;
    let (ns_node, ns_gen) = (format!("pepcio{tag}n"), format!("pepcio{tag}g"));
    let topo = Topology::new(&[&ns_node, &ns_gen])?;
    let end = |ns: &str, dev: String, addr| End {
        ns: ns.to_string(),
        dev,
        addr,
        prefix: 24,
    };
    let s1u_n = end(&ns_node, format!("pio{tag}s"), S1U_NODE);
    let s1u_g = end(&ns_gen, format!("pio{tag}t"), S1U_GEN);
    let sgi_n = end(&ns_node, format!("pio{tag}i"), SGI_NODE);
    let sgi_g = end(&ns_gen, format!("pio{tag}j"), SGI_GEN);
    // Demux: queue 0 carries what the generator sends; with several slices, slice k
    // sends on queue 1 + k (an AF_XDP TX ring has one producer). Queues: slice k
    // receives and sends on queue k (AF_XDP; the kernel backends' sockets and TUN
    // queues are steered by the kernel, whatever the veth queue).
    let queues = match o.rx {
        RxMode::Queues => o.slices.max(1) as u32,
        RxMode::Demux if o.slices > 1 => o.slices as u32 + 1,
        RxMode::Demux => 1,
    };
    topo.veth(&s1u_n, &s1u_g, queues)?;
    topo.veth(&sgi_n, &sgi_g, queues)?;
    if o.gen_io == GenIo::Sockets {
        // A veth end without XDP has NAPI only with GRO on: without it the node's
        // sends are received in the node's own context, whatever `--napi-threads`.
        for e in [&s1u_g, &sgi_g] {
            topo.gro(e, true)?;
        }
    }
    if o.backend == Backend::Tun {
        // The TUN path: the node's kernel forwards between the TUN device and SGi.
        topo.sysctl(&ns_node, "net.ipv4.ip_forward", "1")?;
        topo.run(
            &ns_node,
            &[
                "route",
                "add",
                "198.51.100.0/24",
                "via",
                &SGI_GEN.to_string(),
            ],
        )?;
    }

    // The node, in its namespace (threads it starts inherit it).
    let slices = o.slices.max(1);
    let pool = ue_pool(o.users);
    let mode = match o.xdp_mode {
        XdpMode::Auto => "auto",
        XdpMode::Drv => "drv",
        XdpMode::Skb => "skb",
    };
    let demux = match o.rx {
        RxMode::Queues => "queues",
        RxMode::Demux if slices > 1 => "thread",
        RxMode::Demux => "auto",
    };
    let config = match o.backend {
        Backend::Afxdp => format!(
            "[node]\nue_pool = \"{pool}\"\nmax_users = {}\npin = false\nslices = {slices}\ndemux = \"{demux}\"\n\
             [s1u]\nbind = \"{S1U_NODE}:2152\"\nio = \"afxdp\"\ninterface = \"{}\"\nxdp_mode = \"{mode}\"\nring_size = {ring}\n\
             [sgi]\nio = \"afxdp\"\ninterface = \"{}\"\nnext_hop = \"{SGI_GEN}\"\nxdp_mode = \"{mode}\"\nring_size = {ring}\n",
            o.users.max(1),
            s1u_n.dev,
            sgi_n.dev,
            ring = o.ring_size,
        ),
        Backend::Udp => format!(
            "[node]\nue_pool = \"{pool}\"\nmax_users = {}\npin = false\nslices = {slices}\ndemux = \"{demux}\"\n\
             [s1u]\nbind = \"{S1U_NODE}:2152\"\ngro = {gro}\n\
             [sgi]\nmode = \"udp\"\nsink_local = \"{SINK_NODE}\"\nsink_peer = \"{SINK_GEN}\"\ngro = {gro}\n",
            o.users.max(1),
            gro = o.node_gro,
        ),
        Backend::Tun => format!(
            "[node]\nue_pool = \"{pool}\"\nmax_users = {}\npin = false\nslices = {slices}\ndemux = \"{demux}\"\n\
             [s1u]\nbind = \"{S1U_NODE}:2152\"\n[sgi]\nmode = \"tun\"\ntun_name = \"pio{tag}u\"\ntun_queue_len = {}\n",
            o.users.max(1),
            o.tun_queue_len
        ),
    };
    let v = NodeConfig::parse(&config)
        .and_then(|c| c.validate())
        .map_err(|e| e.to_string())?;
    let (tx, rx) = mpsc::channel();
    let users = o.users;
    let ns = ns_node.clone();
    let node = std::thread::spawn(move || -> Result<Node, String> {
        enter(&ns)?;
        // Users split evenly over the slices.
        let share =
            |s: usize| users / slices as u32 + u32::from((s as u32) < users % slices as u32);
        Node::start(&v, &pepc_node::plan::Plan::node_only(&v), &mut |s| {
            let first = (0..s).map(share).sum();
            Some(Box::new(BenchDriver {
                first,
                users: share(s),
                targets: Vec::with_capacity(share(s) as usize),
                ready: Some(tx.clone()),
                attached: false,
            }) as Box<dyn ControlDriver>)
        })
        .map_err(|e| e.to_string())
    })
    .join()
    .map_err(|_| "the node's start panicked".to_string())??;
    let s1u_io = node.s1u_io.description.clone();
    let sgi_io = node.sgi_io.description.clone();
    let mut targets = Vec::with_capacity(o.users as usize);
    for _ in 0..slices {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(Ok(t)) => targets.extend(t),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err("the node did not attach the users within 120 s".into()),
        }
    }

    // Queue mode: each user's queue, per direction.
    let steering = match o.rx {
        RxMode::Demux => None,
        RxMode::Queues => {
            let (addr, len) = pool.split_once('/').ok_or("bad pool")?;
            let (addr, len) = (
                addr.parse().map_err(|_| "bad pool address")?,
                len.parse().map_err(|_| "bad pool length")?,
            );
            let layout =
                pepc_slice::ids::IdLayout::new(slices, addr, len).map_err(|e| e.to_string())?;
            Some(steering(&targets, &layout, queues, o.steer))
        }
    };
    // The generator, in its namespace.
    let o2 = o.clone();
    let ns = ns_gen.clone();
    let (s1u_dev, sgi_dev) = (s1u_g.dev.clone(), sgi_g.dev.clone());
    let (warm_tx, warm_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let gen = std::thread::Builder::new()
        .name("pepc-iogen".into())
        .spawn(move || {
            generate(
                &o2,
                &ns,
                (&s1u_dev, &sgi_dev),
                &targets,
                (warm_tx, go_rx),
                (queues, steering),
            )
        })
        .map_err(|e| e.to_string())?;
    // Counted from the end of the generator's warm-up (ARP, first packets).
    let _ = warm_rx.recv_timeout(Duration::from_secs(10));
    // A veth end has NAPI once an XDP program is attached (the kernel backend's node
    // ends have none: their receive stays in the sender's context).
    let mut threaded = Vec::new();
    if o.napi_threads {
        for e in [&s1u_n, &s1u_g, &sgi_n, &sgi_g] {
            if topo.threaded_napi(e).is_ok() {
                threaded.push(e.dev.clone());
            }
        }
        if threaded.is_empty() {
            return Err("--napi-threads: no veth end has NAPI to thread".into());
        }
    }
    // The slices' drops and the demux thread's own (a slice's ring full, unknown UE).
    let all_drops = |s: &pepc_node::stats::NodeStats| {
        s.slices.iter().map(|s| s.drops).sum::<u64>() + s.demux.as_ref().map_or(0, |d| d.dropped())
    };
    let link_drops = || -> Result<u64, String> {
        [&s1u_n, &s1u_g, &sgi_n, &sgi_g]
            .into_iter()
            .map(|e| topo.link_drops(e))
            .sum()
    };
    let stats0 = node.stats();
    let drops0 = all_drops(&stats0);
    let tx_failed = |s: &pepc_node::stats::NodeStats| -> u64 {
        s.slices
            .iter()
            .map(|s| s.s1u.tx_failed + s.sgi.tx_failed)
            .sum()
    };
    let kernel0 = stats0.dropped_by_kernel();
    let after_link0 = stats0.dropped_by_kernel_after_the_link();
    let malformed0 = stats0.dropped_by_ports(SocketDropReason::Malformed);
    let tx_failed0 = tx_failed(&stats0);
    // Packets through the node's ports (received, sent).
    let node_io = |s: &pepc_node::stats::NodeStats| -> (u64, u64) {
        s.slices.iter().fold((0, 0), |(r, t), s| {
            (
                r + s.s1u.rx_packets + s.sgi.rx_packets,
                t + s.s1u.tx_packets + s.sgi.tx_packets,
            )
        })
    };
    let node_io0 = node_io(&stats0);
    let link0 = link_drops()?;
    let node_napi0 = napi_of(&s1u_n.dev, &sgi_n.dev);
    let node_cpu_ns = || thread_cpu_ns("pepc-data") + thread_cpu_ns("pepc-demux");
    let node_cpu0 = node_cpu_ns();
    let demux_cpu0 = thread_cpu_ns("pepc-demux");
    let node_ticks0 = thread_user_sys_ticks("pepc-data");
    let machine0 = machine_busy_ns();
    // Only now may the generator send what it counts: a drop before the baselines
    // above would be taken out of the drop counts but stay in the lost ones.
    let _ = go_tx.send(());
    let g = gen
        .join()
        .map_err(|_| "the generator panicked".to_string())??;
    let node_cpu = node_cpu_ns().saturating_sub(node_cpu0);
    let demux_cpu = thread_cpu_ns("pepc-demux").saturating_sub(demux_cpu0);
    let node_napi = napi_of(&s1u_n.dev, &sgi_n.dev).saturating_sub(node_napi0);
    // The generator's receive threads go with its sockets: it reads them itself.
    let gen_napi = g.napi_ns;
    let node_ticks = thread_user_sys_ticks("pepc-data");
    let (user, sys) = (
        node_ticks.0.saturating_sub(node_ticks0.0),
        node_ticks.1.saturating_sub(node_ticks0.1),
    );
    let machine = machine_busy_ns().saturating_sub(machine0);
    let stats = node.stats();
    let node_drops = all_drops(&stats).saturating_sub(drops0)
        + stats
            .dropped_by_ports(SocketDropReason::Malformed)
            .saturating_sub(malformed0);
    let node_kernel_drops = stats.dropped_by_kernel().saturating_sub(kernel0);
    let after_link = stats
        .dropped_by_kernel_after_the_link()
        .saturating_sub(after_link0);
    let link_drops = link_drops()?.saturating_sub(link0);
    let node_tx_failed = tx_failed(&stats).saturating_sub(tx_failed0);
    let node_io = node_io(&stats);
    let (node_received, node_sent) = (
        node_io.0.saturating_sub(node_io0.0),
        node_io.1.saturating_sub(node_io0.1),
    );
    let handed_off = stats
        .slices
        .iter()
        .map(|s| s.s1u.handed_off + s.sgi.handed_off)
        .sum();
    let handoff_dropped = stats
        .slices
        .iter()
        .map(|s| s.s1u.handoff_full + s.sgi.handoff_full)
        .sum();
    let slice_forwarded = stats
        .slices
        .iter()
        .map(|s| s.ul_forwarded + s.dl_forwarded)
        .collect();
    let node_drops_by_reason = stats
        .slices
        .iter()
        .flat_map(|s| s.drops_by_reason.clone())
        .collect();
    node.shutdown();
    drop(topo);

    let fwd = g.ul.received + g.dl.received;
    let sent = g.sent_ul + g.sent_dl;
    let lost = sent.saturating_sub(fwd);
    let at_sockets = node_kernel_drops.saturating_sub(after_link) + g.kernel_dropped;
    let lost_before_node = sent.saturating_sub(node_received);
    let lost_after_node = node_sent.saturating_sub(fwd);
    let named = (node_drops + node_tx_failed + link_drops.max(at_sockets) + after_link)
        .max(lost_before_node + node_drops + node_tx_failed + lost_after_node);
    let per = |ns: u64| {
        if fwd == 0 {
            0.0
        } else {
            ns as f64 / fwd as f64
        }
    };
    Ok(IoReport {
        gen_io: o.gen_io,
        node_gro: o.node_gro,
        backend: o.backend,
        mix: o.mix,
        users: o.users,
        slices,
        rx: o.rx,
        steer: o.steer,
        handed_off,
        handoff_dropped,
        slice_forwarded,
        seconds: g.seconds,
        s1u_io,
        sgi_io,
        offered_pps: o.rate_pps,
        sent_ul: g.sent_ul,
        sent_dl: g.sent_dl,
        received_ul: g.ul.received,
        received_dl: g.dl.received,
        loss: if sent == 0 {
            0.0
        } else {
            lost as f64 / sent as f64
        },
        lost,
        reordered: g.ul.reordered + g.dl.reordered,
        mpps_per_core: if node_cpu + node_napi == 0 {
            0.0
        } else {
            fwd as f64 / ((node_cpu + node_napi) as f64 / 1e9) / 1e6
        },
        mpps_wall: fwd as f64 / g.seconds.max(1e-9) / 1e6,
        gbps: (g.ul.bytes + g.dl.bytes) as f64 * 8.0 / g.seconds.max(1e-9) / 1e9,
        latency_us_p50: g.lat.quantile(0.5) as f64,
        latency_us_p99: g.lat.quantile(0.99) as f64,
        node_data_cpu_ns_per_packet: per(node_cpu),
        node_demux_cpu_ns_per_packet: per(demux_cpu),
        node_napi_cpu_ns_per_packet: per(node_napi),
        generator_napi_cpu_ns_per_packet: per(gen_napi),
        napi_threads: threaded,
        node_data_kernel_share: if user + sys == 0 {
            0.0
        } else {
            sys as f64 / (user + sys) as f64
        },
        generator_cpu_ns_per_packet: per(g.cpu_ns),
        machine_cpu_ns_per_packet: per(machine),
        node_drops,
        node_drops_by_reason,
        generator_kernel_drops: g.kernel_dropped,
        node_tx_failed,
        node_kernel_drops,
        link_drops,
        lost_before_node,
        lost_after_node,
        lost_unexplained: lost.saturating_sub(named),
        lost_named: named,
    })
}
