//! A running node (PEPC §3.3, Figure 3): N slices, each a control and a data thread,
//! and — with more than one slice on AF_XDP, or when asked — a demux thread that owns
//! the S1-U and SGi ports and steers packets to the slices over rings
//! ([`crate::dispatch`]).
//! Each data thread transmits on its own handle of those ports. With one slice and
//! `node.demux = "none"` (the default for one slice) the data thread owns the ports and
//! there is no extra hop. With `node.demux = "queues"` each slice's data thread has
//! ports of its own (AF_XDP queues, or kernel sockets and TUN queues the kernel steers
//! by slice) and hands other slices' packets on ([`crate::queues`]).

use crate::config::XdpPort;
use crate::config::{invalid, ConfigError, DemuxMode, SgiMode, Validated};
use crate::demux::Demux;
use crate::dispatch::{demux_loop, DemuxStage, RingsMismatch};
use crate::io::afxdp::{AfXdpConfig, AfXdpPort, Role};
use crate::io::steer::{attach_reuseport, Payload, SliceField};
use crate::io::{open_sgi, PacketIo, PortInfo, SgiConfig, SocketDropsProbe, UdpPort, UdpSinkPort};
use crate::plan::{Job, Plan};
use crate::queues::{Doorbell, QueuePort, Side};
use crate::ring::{batch_ring, CountedPort, RingPort};
use crate::runtime::{spawn_slice, ControlDriver, SliceStart, SliceThreads, SyntheticDriver};
use crate::stats::{DemuxCounters, NodeStats, PortCounters, SliceStats, SocketDrops, SocketOwner};
use pepc_mme::ControlPlane;
use pepc_slice::counters::SliceCounters;
use pepc_slice::datapath::DataPlane;
use pepc_slice::ids::IdLayout;
use pepc_slice::slice::{build_with_signaling, pin_current_thread, SliceConfig};
use pepc_slice::synthetic::{Synthetic, SyntheticConfig};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// IMSIs of consecutive slices' synthetic users start this far apart.
const SYNTHETIC_IMSI_STRIDE: u64 = 100_000_000;

pub struct Node {
    /// The steering tables (a copy runs in the demux thread).
    pub demux: Demux,
    pub slices: Vec<SliceThreads>,
    pub s1u_addr: SocketAddrV4,
    /// What S1-U runs on; its description reads e.g. "127.0.0.1:2152 UDP socket" or
    /// "... AF_XDP on eth1 ...".
    pub s1u_io: PortInfo,
    pub sgi_io: PortInfo,
    pub sgi_local: Option<SocketAddrV4>,
    /// Whether packets go through a demux thread.
    pub mode: DemuxMode,
    /// Whether threads were pinned to cores (`node.pin` and enough cores).
    pub pinned: bool,
    demux_thread: Option<JoinHandle<DemuxStage>>,
    demux_stop: Arc<AtomicBool>,
    demux_counters: Option<Arc<DemuxCounters>>,
    slice_counters: Vec<Arc<SliceCounters>>,
    port_counters: Vec<[Arc<PortCounters>; 2]>,
    socket_probes: Vec<(&'static str, SocketOwner, SocketDropsProbe)>,
}

/// The drop probes of an S1-U and SGi port pair.
fn probes_of(
    s1u: &dyn PacketIo,
    sgi: &dyn PacketIo,
    owner: SocketOwner,
) -> impl Iterator<Item = (&'static str, SocketOwner, SocketDropsProbe)> {
    [("s1u", s1u.socket_drops()), ("sgi", sgi.socket_drops())]
        .into_iter()
        .filter_map(move |(port, p)| Some((port, owner, p?)))
}

/// The ports as opened: shared by the slices (through the demux, or one slice's own),
/// or one pair of queue sockets per slice.
enum Opened {
    Shared(Box<dyn PacketIo>, Box<dyn PacketIo>),
    Queues(Vec<QueueSockets>),
}

type Ports = (
    Box<dyn PacketIo>,
    Box<dyn PacketIo>,
    PortInfo,
    Option<SocketAddrV4>,
);

/// Why [`Node::start`] refused or failed; nothing it started is left running.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A key the validated configuration could not judge alone (the layout, or what the
    /// control driver serves).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// `sgi.mode = "tun"` but no TUN device could be had (says why).
    #[error("config key `sgi.mode` = \"tun\": {0}")]
    NoTun(String),
    /// A port (named by its key and address, or its role) could not be opened or shared.
    #[error("{what}: {source}")]
    Port {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// A thread of the node (a slice's, the demux's) could not be spawned.
    #[error("starting {what}: {source}")]
    Thread {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// Slice `slice`'s synthetic users could not be set up in its control plane.
    #[error("slice {slice}: synthetic users: {source}")]
    Synthetic {
        slice: usize,
        #[source]
        source: pepc_slice::control::CtrlError,
    },
    /// Queue mode: the slices' doorbells (eventfds) could not be made.
    #[error("queue mode: the slices' doorbells: {0}")]
    Doorbells(#[source] std::io::Error),
    #[error(transparent)]
    Rings(#[from] RingsMismatch),
}

impl StartError {
    fn port(what: impl Into<String>, source: std::io::Error) -> Self {
        StartError::Port {
            what: what.into(),
            source,
        }
    }

    fn thread(what: impl Into<String>, source: std::io::Error) -> Self {
        StartError::Thread {
            what: what.into(),
            source,
        }
    }
}

fn xdp_config(p: &XdpPort, role: Role) -> AfXdpConfig {
    AfXdpConfig {
        interface: p.interface.clone(),
        queue: p.queue,
        xdp_mode: p.xdp_mode,
        zero_copy: p.zero_copy,
        role,
        xsk: p.xsk(),
    }
}

fn open_s1u_xdp(v: &Validated, p: &XdpPort) -> Result<AfXdpPort, StartError> {
    AfXdpPort::open(&xdp_config(p, Role::S1u { addr: v.s1u_bind }))
        .map_err(|e| StartError::port("s1u (io = \"afxdp\")", e))
}

fn open_sgi_xdp(v: &Validated, layout: &IdLayout, p: &XdpPort) -> Result<AfXdpPort, StartError> {
    let len = v.ue_pool.1;
    let pools = layout.pdn_pools[..layout.pdn_count.max(1) as usize]
        .iter()
        .map(|&a| (a, len))
        .collect();
    AfXdpPort::open(&xdp_config(
        p,
        Role::Sgi {
            pools,
            next_hop: p.next_hop,
        },
    ))
    .map_err(|e| StartError::port("sgi (io = \"afxdp\")", e))
}

/// A slice's S1-U and SGi ports in queue mode.
type QueueSockets = (Box<dyn PacketIo>, Box<dyn PacketIo>);

/// A port opened in queue mode: what it runs on, and slice k's handle at index k.
struct PerSlice {
    info: PortInfo,
    ports: Vec<Box<dyn PacketIo>>,
}

/// What queue mode gives each slice, for the port's description.
fn per_slice(v: &Validated, what: &str) -> String {
    if v.slices > 1 {
        format!(" ({what})")
    } else {
        String::new()
    }
}

/// Queue mode on AF_XDP: `first` (slice 0's socket, on `queue`) and a socket of the
/// same port on `queue + k` for each further slice k.
fn xdp_queues(
    first: AfXdpPort,
    queue: u32,
    slices: usize,
    port: &str,
) -> Result<Vec<Box<dyn PacketIo>>, StartError> {
    let mut ports: Vec<Box<dyn PacketIo>> = Vec::with_capacity(slices);
    for k in 1..slices as u32 {
        let q = first
            .open_queue(queue + k)
            .map_err(|e| StartError::port(format!("{port} (io = \"afxdp\"), slice {k}"), e))?;
        ports.push(Box::new(q));
    }
    ports.insert(0, Box::new(first));
    Ok(ports)
}

/// Queue mode, S1-U: slice k's socket on the AF_XDP port's queue + k, or slice k's UDP
/// socket of a reuseport group the kernel steers by TEID.
fn open_s1u_queues(
    v: &Validated,
    layout: &IdLayout,
) -> Result<(SocketAddrV4, PerSlice), StartError> {
    if let Some(s) = &v.s1u_xdp {
        let first = open_s1u_xdp(v, s)?;
        let mut info = first.info();
        info.description = format!(
            "{} {}{}",
            v.s1u_bind,
            info.description,
            per_slice(v, &format!("slice k on queue {} + k", s.queue))
        );
        let ports = xdp_queues(first, s.queue, v.slices, "s1u")?;
        return Ok((v.s1u_bind, PerSlice { info, ports }));
    }
    let mut group = UdpPort::bind_group(v.s1u_bind, v.slices)
        .map_err(|e| StartError::port(format!("s1u.bind {}", v.s1u_bind), e))?;
    // Every socket of the group told (`all` would stop at the first refusal).
    let mut gro = true;
    for p in &mut group {
        gro &= p.set_gro(v.s1u_gro);
    }
    if v.slices > 1 {
        attach_reuseport(&group[0], Payload::GtpU, SliceField::of_teid(layout))
            .map_err(|e| StartError::port(format!("s1u.bind {}", v.s1u_bind), e))?;
    }
    let a = group[0].local_addr();
    let info = PortInfo::kernel(
        "udp",
        String::new(),
        format!(
            "{a} UDP socket{}{}",
            if gro { " with GRO" } else { "" },
            per_slice(v, "one per slice, steered by TEID")
        ),
    );
    let ports = group
        .into_iter()
        .map(|p| Box::new(p) as Box<dyn PacketIo>)
        .collect();
    Ok((a, PerSlice { info, ports }))
}

/// Queue mode, SGi: slice k's socket on the AF_XDP port's queue + k, or slice k's
/// queue of the TUN device (or socket of the UDP sink), steered by UE address.
fn open_sgi_queues_of(
    v: &Validated,
    layout: &IdLayout,
) -> Result<(PerSlice, Option<SocketAddrV4>), StartError> {
    if let Some(g) = &v.sgi_xdp {
        let first = open_sgi_xdp(v, layout, g)?;
        let mut info = first.info();
        info.description
            .push_str(&per_slice(v, &format!("slice k on queue {} + k", g.queue)));
        let ports = xdp_queues(first, g.queue, v.slices, "sgi")?;
        return Ok((PerSlice { info, ports }, None));
    }
    let cfg = sgi_config(v);
    let by = SliceField::of_ue_addr(layout);
    let ports =
        crate::io::open_sgi_queues(&cfg, v.slices, by).map_err(|e| StartError::port("sgi", e))?;
    let first = &ports[0];
    let local = sgi_opened_as_asked(v, first)?;
    let mut info = first.info();
    let each = match first {
        crate::io::SgiPort::Tun(t) if !t.steered() => {
            "a queue per slice, spread by flow hash: the steering program was refused"
        }
        crate::io::SgiPort::Tun(_) => "a queue per slice, steered by UE address",
        crate::io::SgiPort::UdpSink { .. } => "a socket per slice, steered by UE address",
    };
    info.description.push_str(&per_slice(v, each));
    let ports = ports
        .into_iter()
        .map(|p| Box::new(p) as Box<dyn PacketIo>)
        .collect();
    Ok((PerSlice { info, ports }, local))
}

/// Refuse an SGi that fell back to the UDP sink when `sgi.mode = "tun"` asked for TUN;
/// otherwise the sink's local address, if it is the sink.
fn sgi_opened_as_asked(
    v: &Validated,
    p: &crate::io::SgiPort,
) -> Result<Option<SocketAddrV4>, StartError> {
    if v.sgi_mode == SgiMode::Tun && p.backend() != crate::io::SgiBackend::Tun {
        return Err(StartError::NoTun(p.describe()));
    }
    Ok(match p {
        crate::io::SgiPort::UdpSink { port, .. } => Some(port.local_addr()),
        crate::io::SgiPort::Tun(_) => None,
    })
}

/// How SGi opens when it is not AF_XDP (`sgi.mode` auto or tun; the UDP sink is the
/// fallback, and `sgi.mode = "udp"` goes straight to it).
fn sgi_config(v: &Validated) -> SgiConfig {
    let host_bits = 32 - v.ue_pool.1 as u32;
    SgiConfig {
        use_tun: v.sgi_mode != SgiMode::Udp,
        tun_name: v.tun_name.clone(),
        tun_queue_len: v.tun_queue_len,
        tun_addr: Ipv4Addr::from(u32::from(v.ue_pool.0) + (1u32 << host_bits) - 2),
        tun_prefix_len: v.ue_pool.1,
        sink_local: v.sink_local,
        sink_peer: v.sink_peer,
        sink_gro: v.sgi_gro,
    }
}

/// Open S1-U and SGi as configured; also says what S1-U runs on.
fn open_ports(
    v: &Validated,
    layout: &IdLayout,
) -> Result<(SocketAddrV4, PortInfo, Ports), StartError> {
    let (s1u, s1u_addr, s1u_io): (Box<dyn PacketIo>, SocketAddrV4, PortInfo) = match &v.s1u_xdp {
        Some(p) => {
            let port = open_s1u_xdp(v, p)?;
            let mut info = port.info();
            info.description = format!("{} {}", v.s1u_bind, info.description);
            (Box::new(port), v.s1u_bind, info)
        }
        None => {
            let mut s1u = UdpPort::bind(v.s1u_bind)
                .map_err(|e| StartError::port(format!("s1u.bind {}", v.s1u_bind), e))?;
            let a = s1u.local_addr();
            let gro = if s1u.set_gro(v.s1u_gro) {
                " with GRO"
            } else {
                ""
            };
            let info = PortInfo::kernel("udp", String::new(), format!("{a} UDP socket{gro}"));
            (Box::new(s1u), a, info)
        }
    };
    if let Some(p) = &v.sgi_xdp {
        let port = open_sgi_xdp(v, layout, p)?;
        let info = port.info();
        return Ok((s1u_addr, s1u_io, (s1u, Box::new(port), info, None)));
    }
    let (sgi, sgi_io, sgi_local): (Box<dyn PacketIo>, PortInfo, Option<SocketAddrV4>) =
        match v.sgi_mode {
            SgiMode::Udp => {
                let mut p = UdpSinkPort::bind(v.sink_local, v.sink_peer)
                    .map_err(|e| StartError::port(format!("sgi.sink_local {}", v.sink_local), e))?;
                let gro = if p.set_gro(v.sgi_gro) {
                    " with GRO"
                } else {
                    ""
                };
                let local = Some(p.local_addr());
                let info = PortInfo::kernel(
                    "udp_sink",
                    String::new(),
                    format!("UDP sink {} -> {}{gro}", v.sink_local, v.sink_peer),
                );
                (Box::new(p), info, local)
            }
            SgiMode::Auto | SgiMode::Tun => {
                let p = open_sgi(&sgi_config(v)).map_err(|e| StartError::port("sgi", e))?;
                let local = sgi_opened_as_asked(v, &p)?;
                let info = p.info();
                (Box::new(p), info, local)
            }
        };
    Ok((s1u_addr, s1u_io, (s1u, sgi, sgi_io, sgi_local)))
}

/// Synthetic users and events of slice `s`: the node's totals split evenly.
fn synthetic_share(v: &Validated, s: usize) -> SyntheticConfig {
    let n = v.slices as u64;
    let share = |total: u64| total / n + u64::from((s as u64) < total % n);
    let mut c = SyntheticConfig::new(
        share(v.synthetic_users as u64) as u32,
        share(v.synthetic_rate),
    );
    c.imsi_base += s as u64 * SYNTHETIC_IMSI_STRIDE;
    c.seed ^= s as u64;
    c
}

impl Node {
    /// Start the node: open the ports, build `v.slices` slices (`make_driver(s)` gives
    /// slice `s`'s control driver, or None for synthetic events per `[synthetic]`), then
    /// start their threads and, in [`DemuxMode::Thread`], the demux thread, named and
    /// pinned as `plan` (made from `v`) says.
    pub fn start(
        v: &Validated,
        plan: &Plan,
        make_driver: &mut dyn FnMut(usize) -> Option<Box<dyn ControlDriver>>,
    ) -> Result<Node, StartError> {
        let n = v.slices;
        let mut layout =
            IdLayout::new(n, v.ue_pool.0, v.ue_pool.1).map_err(|source| ConfigError::Layout {
                key: "node.slices`/`node.ue_pool",
                source,
            })?;
        if !v.pdn_pools.is_empty() {
            layout = layout
                .with_pdn_pools(&v.pdn_pools)
                .map_err(|source| ConfigError::Layout {
                    key: "node.pdn_pools",
                    source,
                })?;
        }
        if v.demux == DemuxMode::None && n != 1 {
            return Err(invalid!("node.demux", "\"none\" needs slices = 1 (got {n})").into());
        }
        let (s1u_addr, s1u_io, sgi_io, sgi_local, opened) = if v.demux == DemuxMode::Queues {
            let (addr, s1u) = open_s1u_queues(v, &layout)?;
            let (sgi, local) = open_sgi_queues_of(v, &layout)?;
            let ports = s1u.ports.into_iter().zip(sgi.ports).collect();
            (addr, s1u.info, sgi.info, local, Opened::Queues(ports))
        } else {
            let (addr, mut a, (s1u, sgi, mut b, local)) = open_ports(v, &layout)?;
            if v.demux == DemuxMode::Thread {
                for info in [&mut a, &mut b] {
                    info.description.push_str(" (through the demux thread)");
                }
            }
            (addr, a, b, local, Opened::Shared(s1u, sgi))
        };

        // Build every slice and its driver before any thread starts, so a refusal
        // leaves nothing running.
        let mut built: Vec<(ControlPlane, DataPlane, Box<dyn ControlDriver>)> = Vec::new();
        for s in 0..n {
            let mut cfg = SliceConfig::for_users(v.max_users);
            cfg.slice = s as u32;
            cfg.layout = layout;
            cfg.ue_slots = (v.max_users + 1024).min(layout.max_ue_slots());
            cfg.bearer_slots = ((v.max_users + 1024) * 2).min(layout.max_bearer_slots());
            cfg.s1u_addr = *s1u_addr.ip();
            cfg.egress = v.egress.clone();
            let (mut cp, dp) = build_with_signaling(&cfg);
            let driver: Box<dyn ControlDriver> = match make_driver(s) {
                Some(d) => d,
                None => {
                    let mut syn = Synthetic::new(synthetic_share(v, s));
                    // Updates beyond the ring wait in the control plane's backlog and
                    // are flushed by the control thread once the data thread runs.
                    syn.setup(&mut cp, |_| {})
                        .map_err(|source| StartError::Synthetic { slice: s, source })?;
                    Box::new(SyntheticDriver::new(syn))
                }
            };
            if let Some(max) = driver.max_slices() {
                if n > max {
                    return Err(invalid!(
                        "node.slices",
                        "this control driver serves at most {max} slice(s) (slices = {n})"
                    )
                    .into());
                }
            }
            built.push((cp, dp, driver));
        }

        let mode = v.demux;
        // Threads' names and cores: the plan's.
        let pinned = plan.pinned;
        let start = |s: usize| SliceStart {
            index: s,
            control_core: plan.core(Job::Control(s)),
            data_core: plan.core(Job::Data(s)),
            control_name: Job::Control(s).thread_name(),
            data_name: Job::Data(s).thread_name(),
            prewarm_users: v.prewarm_users,
        };

        let port_counters: Vec<[Arc<PortCounters>; 2]> =
            (0..n).map(|_| [Arc::default(), Arc::default()]).collect();
        let slice_counters: Vec<Arc<SliceCounters>> = built
            .iter()
            .map(|(_, dp, _)| dp.counters().clone())
            .collect();
        let demux = Demux::new(layout, n, Vec::new());
        let demux_stop = Arc::new(AtomicBool::new(false));
        let mut slices = Vec::with_capacity(n);
        let mut demux_thread = None;
        let mut demux_counters = None;
        let mut socket_probes = Vec::new();

        match (mode, opened) {
            (_, Opened::Queues(ports)) => {
                let (s1u_rings, sgi_rings) = (
                    crate::queues::mesh(n, v.ring_batches),
                    crate::queues::mesh(n, v.ring_batches),
                );
                if s1u_rings.len() != n || sgi_rings.len() != n {
                    return Err(RingsMismatch {
                        slices: n,
                        uplink: s1u_rings.len(),
                        downlink: sgi_rings.len(),
                    }
                    .into());
                }
                let (mut s1u_rings, mut sgi_rings) = (s1u_rings.into_iter(), sgi_rings.into_iter());
                let bells = Doorbell::for_slices(n).map_err(StartError::Doorbells)?;
                for (s, ((cp, dp, driver), (a, b))) in built.into_iter().zip(ports).enumerate() {
                    let pc = &port_counters[s];
                    let (Some(ra), Some(rb)) = (s1u_rings.next(), sgi_rings.next()) else {
                        unreachable!("one ring of each mesh per slice, checked above");
                    };
                    socket_probes.extend(probes_of(&*a, &*b, SocketOwner::Slice(s)));
                    let (d, bl) = (&demux, &bells);
                    let a =
                        QueuePort::new(a, Side::S1u, s, d.clone(), ra, pc[0].clone(), bl.clone());
                    let b =
                        QueuePort::new(b, Side::Sgi, s, d.clone(), rb, pc[1].clone(), bl.clone());
                    let started = spawn_slice(cp, dp, Box::new(a), Box::new(b), driver, start(s));
                    match started {
                        Ok(t) => slices.push(t),
                        Err(e) => {
                            for t in slices {
                                t.join();
                            }
                            return Err(StartError::thread(format!("slice {s}"), e));
                        }
                    }
                }
            }
            (DemuxMode::None, Opened::Shared(s1u, sgi)) => {
                let (cp, dp, driver) = built.pop().expect("one slice");
                let pc = &port_counters[0];
                socket_probes.extend(probes_of(&*s1u, &*sgi, SocketOwner::Slice(0)));
                let a: Box<dyn PacketIo> = Box::new(CountedPort::new(s1u, pc[0].clone()));
                let b: Box<dyn PacketIo> = Box::new(CountedPort::new(sgi, pc[1].clone()));
                slices.push(
                    spawn_slice(cp, dp, a, b, driver, start(0))
                        .map_err(|e| StartError::thread("slice 0", e))?,
                );
            }
            (_, Opened::Shared(s1u, sgi)) => {
                let mut ul = Vec::with_capacity(n);
                let mut dl = Vec::with_capacity(n);
                let mut ports = Vec::with_capacity(n);
                for (s, pc) in port_counters.iter().enumerate() {
                    let (uf, ud) = batch_ring(v.ring_batches);
                    let (df, dd) = batch_ring(v.ring_batches);
                    let s1u_tx = s1u
                        .try_clone_sender()
                        .map_err(|e| StartError::port("s1u: sharing the socket with a slice", e))?;
                    let sgi_tx = sgi
                        .try_clone_sender()
                        .map_err(|e| StartError::port("sgi: sharing the port with a slice", e))?;
                    // AF_XDP: the slice's own sending sockets (a UDP clone shares the
                    // demux's socket, and its counts).
                    socket_probes.extend(probes_of(&*s1u_tx, &*sgi_tx, SocketOwner::Slice(s)));
                    ul.push(uf);
                    dl.push(df);
                    ports.push((
                        RingPort::new(ud, s1u_tx, pc[0].clone()),
                        RingPort::new(dd, sgi_tx, pc[1].clone()),
                    ));
                }
                socket_probes.extend(probes_of(&*s1u, &*sgi, SocketOwner::Demux));
                let stage = DemuxStage::new(demux.clone(), s1u, sgi, ul, dl)?;
                demux_counters = Some(stage.counters());
                for (s, ((cp, dp, driver), (a, b))) in built.into_iter().zip(ports).enumerate() {
                    slices.push(
                        spawn_slice(cp, dp, Box::new(a), Box::new(b), driver, start(s))
                            .map_err(|e| StartError::thread(format!("slice {s}"), e))?,
                    );
                }
                let stop = demux_stop.clone();
                let slice_stops: Vec<_> = slices.iter().map(|t| t.stop.clone()).collect();
                let demux_core = plan.core(Job::Demux);
                let h = std::thread::Builder::new()
                    .name(Job::Demux.thread_name())
                    .spawn(move || {
                        if let Some(c) = demux_core {
                            pin_current_thread(c);
                        }
                        demux_loop(stage, stop, slice_stops)
                    });
                match h {
                    Ok(h) => demux_thread = Some(h),
                    Err(e) => {
                        for t in slices {
                            t.join();
                        }
                        return Err(StartError::thread("the demux thread", e));
                    }
                }
            }
        }
        Ok(Node {
            demux,
            slices,
            s1u_addr,
            s1u_io,
            sgi_io,
            sgi_local,
            mode,
            pinned,
            demux_thread,
            demux_stop,
            demux_counters,
            slice_counters,
            port_counters,
            socket_probes,
        })
    }

    /// A snapshot of every slice's and the demux's counters (cheap: relaxed loads).
    pub fn stats(&self) -> NodeStats {
        self.stats_reader().read()
    }

    /// A handle on the data path's counters for another thread (the metrics
    /// endpoint): it reads the single writers' atomics, nothing else.
    pub fn stats_reader(&self) -> StatsReader {
        StatsReader {
            demux: self.demux_counters.clone(),
            slices: self.slice_counters.clone(),
            ports: self.port_counters.clone(),
            sockets: self.socket_probes.clone(),
        }
    }

    /// A thread of the node that ended while it should run (a panic: its message was
    /// printed when it happened), named; None while all run.
    pub fn failed(&self) -> Option<String> {
        if self.demux_thread.as_ref().is_some_and(|h| h.is_finished())
            && !self.demux_stop.load(Ordering::Relaxed)
        {
            return Some("the demux thread stopped".into());
        }
        self.slices.iter().enumerate().find_map(|(i, s)| {
            if s.stop.load(Ordering::Relaxed) {
                return None;
            }
            let which = if s.data.is_finished() {
                "data"
            } else if s.control.is_finished() {
                "control"
            } else {
                return None;
            };
            Some(format!("slice {i}'s {which} thread stopped"))
        })
    }

    /// Stop the demux thread, then every slice; returns each slice's two halves.
    pub fn shutdown(mut self) -> Vec<(ControlPlane, DataPlane)> {
        self.demux_stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.demux_thread.take() {
            let _ = h.join();
        }
        self.slices.into_iter().map(SliceThreads::join).collect()
    }
}

/// The data path's counters, readable from any thread ([`Node::stats_reader`]).
#[derive(Clone)]
pub struct StatsReader {
    demux: Option<Arc<DemuxCounters>>,
    slices: Vec<Arc<SliceCounters>>,
    ports: Vec<[Arc<PortCounters>; 2]>,
    sockets: Vec<(&'static str, SocketOwner, SocketDropsProbe)>,
}

impl StatsReader {
    pub fn read(&self) -> NodeStats {
        let demux = self.demux.as_ref().map(|c| c.snapshot());
        let slices = self
            .slices
            .iter()
            .zip(&self.ports)
            .enumerate()
            .map(|(s, (c, p))| {
                SliceStats::read(
                    s,
                    c,
                    p,
                    demux.as_ref().and_then(|d| d.slices.get(s).copied()),
                )
            })
            .collect();
        let sockets = self
            .sockets
            .iter()
            .map(|(port, owner, p)| SocketDrops {
                port,
                owner: *owner,
                drops: p.read(),
            })
            .collect();
        NodeStats {
            slices,
            demux,
            sockets,
        }
    }
}
