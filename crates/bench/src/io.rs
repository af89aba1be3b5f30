//! `pepc bench io`: the node's data path on real packet I/O. A generator and sink in
//! one network namespace play the eNBs (S1-U) and the PDN (SGi); the node runs in
//! another, joined by two veth pairs. The generator builds GTP-U uplink and IPv4
//! downlink for N attached UEs (PEPC Table 2 or Rajan et al. Table IV mix), stamps
//! each packet with a per-direction sequence number and its send time, and counts what
//! comes out of the node: loss, reordering, latency. The generator always uses AF_XDP
//! (it must outrun the node); `--backend` picks the node's I/O: AF_XDP on both ports,
//! or the kernel's UDP socket (S1-U, recvmmsg/sendmmsg) and TUN device (SGi).
//!
//! CPU is read per thread (`/proc/self/task/*/schedstat`): the node's data thread, the
//! generator, and the whole machine (`/proc/stat`, which includes the kernel's veth and
//! softirq work wherever it ran).

use crate::hist::Histogram;
use crate::netns::{enter, End, Topology};
use pepc_emulator::driver::{TABLE_IV_DL, TABLE_IV_UL};
use pepc_node::config::NodeConfig;
pub use pepc_node::io::afxdp::XdpMode;
use pepc_node::io::afxdp::{AfXdpConfig, AfXdpPort, Role, XskConfig, ZeroCopy};
use pepc_node::io::{now_ns, PacketIo, SocketDropReason};
use pepc_node::node::Node;
use pepc_node::runtime::ControlDriver;
use pepc_slice::control::{AttachParams, ControlPlane};
use pepc_slice::packets::{gpdu, ipv4_udp, retarget_downlink, retarget_uplink};
use pepc_slice::synthetic::Rng;
use pepc_wire::{Batch, Verdict, BATCH_SIZE};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::mpsc;
use std::time::{Duration, Instant};

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
    /// How packets reach the node's slices (AF_XDP only with `Queues`).
    pub rx: RxMode,
    /// Queue mode: how the generator picks the queue of each packet.
    pub steer: Steer,
    /// The node's AF_XDP rings (`ring_size` of `[s1u]` and `[sgi]`).
    pub ring_size: u32,
}

/// How packets reach the node's slices.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RxMode {
    /// One receive socket per port; with several slices a demux thread steers.
    Demux,
    /// `node.demux = "queues"`: slice k receives and sends on queue k of each port.
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
    pub node_data_cpu_ns_per_packet: f64,
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
    /// (AF_XDP: RX ring full, no fill frame; UDP: socket buffer full).
    pub node_kernel_drops: u64,
    /// Packets the four veth ends dropped during the run (`ip -s link`): a full
    /// receive queue, or an XDP redirect the socket refused (that packet is also in
    /// `node_kernel_drops` or `generator_kernel_drops`).
    pub link_drops: u64,
    /// Lost packets that no counter explains (0 when every loss is named): `lost`
    /// less the node's drops and send failures and the larger of `link_drops` and
    /// the sockets' kernel drops (in native XDP mode a socket's drop is a link drop
    /// too).
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

/// ns on CPU of this process's threads named `name` (schedstat: exact, in ns).
fn thread_cpu_ns(name: &str) -> u64 {
    schedstat_ns("/proc/self/task", |comm| comm == name)
}

/// The sum of `/DIR/*/schedstat`'s time on CPU (ns) over the tasks whose name passes.
fn schedstat_ns(dir: &str, pick: impl Fn(&str) -> bool) -> u64 {
    let Ok(dir) = std::fs::read_dir(dir) else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            pick(
                std::fs::read_to_string(e.path().join("comm"))
                    .unwrap_or_default()
                    .trim(),
            )
        })
        .map(|e| {
            std::fs::read_to_string(e.path().join("schedstat"))
                .unwrap_or_default()
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

/// User and system clock ticks of this process's threads named `name` (/proc stat).
fn thread_user_sys_ticks(name: &str) -> (u64, u64) {
    let mut t = (0, 0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return t;
    };
    for e in dir.flatten() {
        let p = e.path();
        if std::fs::read_to_string(p.join("comm"))
            .unwrap_or_default()
            .trim()
            != name
        {
            continue;
        }
        let stat = std::fs::read_to_string(p.join("stat")).unwrap_or_default();
        // Fields after the command's closing parenthesis: state is field 3; utime 14, stime 15.
        let rest = stat.rsplit_once(')').map_or("", |x| x.1);
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|v| v.parse().unwrap_or(0))
            .collect();
        if f.len() > 12 {
            t.0 += f[11];
            t.1 += f[12];
        }
    }
    t
}

/// ns on CPU of the kernel's NAPI threads of devices whose name starts with `prefix`.
fn napi_cpu_ns(prefix: &str) -> u64 {
    let want = format!("napi/{prefix}");
    schedstat_ns("/proc", |comm| comm.starts_with(&want))
}

/// ns on CPU of the NAPI threads of the two veth ends `s1u` and `sgi`.
fn napi_of(s1u: &str, sgi: &str) -> u64 {
    napi_cpu_ns(&format!("{s1u}-")) + napi_cpu_ns(&format!("{sgi}-"))
}

/// ns of this thread's CPU.
fn own_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// All CPUs' busy time so far, ns (from /proc/stat's first line).
fn machine_busy_ns() -> u64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal
    let busy: u64 = f
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    busy * 1_000_000_000 / hz
}

/// Packet sizes (uplink frame on the S1-U wire incl. outer IP/UDP/GTP-U; downlink IP
/// packet) and the uplink share of packets.
fn mix_classes(m: Mix) -> (f64, Classes, Classes) {
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

struct Templates {
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
fn stamp(inner: &mut [u8], user: u32, seq: u32, now: u64) {
    inner[STAMP..STAMP + 4].copy_from_slice(&user.to_be_bytes());
    inner[STAMP + 4..STAMP + 8].copy_from_slice(&seq.to_be_bytes());
    inner[STAMP + 8..STAMP + 16].copy_from_slice(&now.to_be_bytes());
}

/// Per-direction receive bookkeeping.
#[derive(Default)]
struct Sink {
    received: u64,
    bytes: u64,
    /// Per user: the highest sequence number received.
    last: Vec<u32>,
    reordered: u64,
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

fn gtpu_inner(p: &[u8]) -> &[u8] {
    if p.len() < 8 {
        return &[];
    }
    let h = if p[0] & 0x07 != 0 { 12 } else { 8 };
    p.get(h..).unwrap_or(&[])
}

/// Run the benchmark once. Needs root (namespaces, AF_XDP); the error says why not.
pub fn run(o: &IoOpts) -> Result<IoReport, String> {
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
    // receives and sends on queue k.
    if o.rx == RxMode::Queues && o.backend != Backend::Afxdp {
        return Err("--rx queues needs --backend afxdp".into());
    }
    let queues = match o.rx {
        RxMode::Queues => o.slices.max(1) as u32,
        RxMode::Demux if o.slices > 1 => o.slices as u32 + 1,
        RxMode::Demux => 1,
    };
    topo.veth(&s1u_n, &s1u_g, queues)?;
    topo.veth(&sgi_n, &sgi_g, queues)?;
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
            "[node]\nue_pool = \"{pool}\"\nmax_users = {}\npin = false\nslices = {slices}\n\
             [s1u]\nbind = \"{S1U_NODE}:2152\"\n\
             [sgi]\nmode = \"udp\"\nsink_local = \"{SINK_NODE}\"\nsink_peer = \"{SINK_GEN}\"\n",
            o.users.max(1)
        ),
        Backend::Tun => format!(
            "[node]\nue_pool = \"{pool}\"\nmax_users = {}\npin = false\nslices = {slices}\n\
             [s1u]\nbind = \"{S1U_NODE}:2152\"\n[sgi]\nmode = \"tun\"\ntun_name = \"pio{tag}u\"\n",
            o.users.max(1)
        ),
    };
    let v = NodeConfig::parse(&config)?.validate()?;
    let (tx, rx) = mpsc::channel();
    let users = o.users;
    let ns = ns_node.clone();
    let node = std::thread::spawn(move || -> Result<Node, String> {
        enter(&ns)?;
        // Users split evenly over the slices.
        let share =
            |s: usize| users / slices as u32 + u32::from((s as u32) < users % slices as u32);
        Node::start(&v, &mut |s| {
            let first = (0..s).map(share).sum();
            Some(Box::new(BenchDriver {
                first,
                users: share(s),
                targets: Vec::with_capacity(share(s) as usize),
                ready: Some(tx.clone()),
                attached: false,
            }) as Box<dyn ControlDriver>)
        })
    })
    .join()
    .map_err(|_| "the node's start panicked".to_string())??;
    let s1u_io = node.s1u_desc.clone();
    let sgi_io = node.sgi_desc.clone();
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
            let layout = pepc_slice::ids::IdLayout::new(slices, addr, len)?;
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
    let malformed0 = stats0.dropped_by_ports(SocketDropReason::Malformed);
    let tx_failed0 = tx_failed(&stats0);
    let link0 = link_drops()?;
    let node_napi0 = napi_of(&s1u_n.dev, &sgi_n.dev);
    let node_cpu_ns = || thread_cpu_ns("pepc-data") + thread_cpu_ns("pepc-demux");
    let node_cpu0 = node_cpu_ns();
    let node_ticks0 = thread_user_sys_ticks("pepc-data");
    let machine0 = machine_busy_ns();
    // Only now may the generator send what it counts: a drop before the baselines
    // above would be taken out of the drop counts but stay in the lost ones.
    let _ = go_tx.send(());
    let g = gen
        .join()
        .map_err(|_| "the generator panicked".to_string())??;
    let node_cpu = node_cpu_ns().saturating_sub(node_cpu0);
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
    let link_drops = link_drops()?.saturating_sub(link0);
    let node_tx_failed = tx_failed(&stats).saturating_sub(tx_failed0);
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
    let named = node_drops + node_tx_failed + link_drops.max(node_kernel_drops + g.kernel_dropped);
    let per = |ns: u64| {
        if fwd == 0 {
            0.0
        } else {
            ns as f64 / fwd as f64
        }
    };
    Ok(IoReport {
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
        lost_unexplained: lost.saturating_sub(named),
        lost_named: named,
    })
}

/// The generator's receiving side: the eNB and PDN ports (passed in: they also send)
/// and the sockets on the node's other sending queues.
struct Receiver {
    enb_more: Vec<AfXdpPort>,
    pdn_more: Vec<AfXdpPort>,
    ul: Sink,
    dl: Sink,
    lat: Histogram,
}

impl Receiver {
    /// Take what waits on every receiving socket; returns how many packets.
    fn drain(&mut self, enb: &mut AfXdpPort, pdn: &mut AfXdpPort, b: &mut Batch) -> usize {
        let mut got = 0;
        for p in std::iter::once(enb).chain(self.enb_more.iter_mut()) {
            if p.recv_batch(b).unwrap_or(0) > 0 {
                let now = now_ns();
                for x in b.packets() {
                    self.dl
                        .take(gtpu_inner(x.as_slice()), x.len() + 28, now, &mut self.lat);
                }
                got += b.len;
            }
        }
        for p in std::iter::once(pdn).chain(self.pdn_more.iter_mut()) {
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

struct GenResult {
    kernel_dropped: u64,
    /// CPU of the kernel threads receiving on the generator's veth ends (threaded
    /// NAPI), over the run.
    napi_ns: u64,
    sent_ul: u64,
    sent_dl: u64,
    ul: Sink,
    dl: Sink,
    lat: Histogram,
    cpu_ns: u64,
    seconds: f64,
}

/// Queue mode: per user, the queue of its uplink and of its downlink packets.
type QueueOfUser = (Vec<u8>, Vec<u8>);

/// Queue mode: per user, the queue its uplink and its downlink packets are sent on.
fn steering(
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

fn generate(
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
    let mut enb = AfXdpPort::open(&cfg(
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
    let mut pdn =
        AfXdpPort::open(&cfg(sgi_dev, pdn_role)).map_err(|e| format!("generator SGi: {e}"))?;
    let t = Templates::new(o.mix);
    let mut rng = Rng::new(o.seed);
    let node_s1u = SocketAddrV4::new(S1U_NODE, 2152);
    // Per queue (queue mode; else everything goes on queue 0).
    let mut ul: Vec<Batch> = (0..queues).map(|_| Batch::new(BATCH_SIZE)).collect();
    let mut dl: Vec<Batch> = (0..queues).map(|_| Batch::new(BATCH_SIZE)).collect();
    let queue_of = |u: usize, uplink: bool| match &steering {
        Some((q_ul, q_dl)) => (if uplink { q_ul[u] } else { q_dl[u] }) as usize,
        None => 0,
    };
    let mut rxb = Batch::new(BATCH_SIZE);
    // Per user and direction: the next sequence number.
    let (mut seq_ul, mut seq_dl) = (vec![1u32; targets.len()], vec![1u32; targets.len()]);
    // Every queue the node's slices send on has a receiving socket here.
    let mut rx = Receiver {
        enb_more: (1..queues)
            .map(|q| enb.open_queue(q))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("generator S1-U: {e}"))?,
        pdn_more: (1..queues)
            .map(|q| pdn.open_queue(q))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("generator SGi: {e}"))?,
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
    while rx.drain(&mut enb, &mut pdn, &mut rxb) > 0 {}
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
        rx.drain(&mut enb, &mut pdn, &mut rxb);
    }
    let seconds = start.elapsed().as_secs_f64();
    // Drain what is still in flight.
    let quiet = Instant::now();
    let mut last = Instant::now();
    while quiet.elapsed() < Duration::from_secs(2) && last.elapsed() < Duration::from_millis(200) {
        if rx.drain(&mut enb, &mut pdn, &mut rxb) > 0 {
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
