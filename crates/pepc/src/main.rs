//! `pepc`: run a node, drive it with the emulator, manage subscribers, benchmark.
// Unsafe only where marked `#[allow(unsafe_code)]`: the allocator option and the
// signal handlers.
#![deny(unsafe_code)]

use clap::{Args, Parser, Subcommand};
use pepc_bench::dataplane::{self, DataplaneOpts, Design};
use pepc_ratelog::{errln, errln_nonl, outln};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "pepc",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("PEPC_COMMIT"), ")"),
    about = "A high-performance LTE packet core, sliced by user (PEPC)"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// The whole system on loopback: a node on embedded defaults (MME over userspace
    /// SCTP, embedded HSS provisioned with the emulator's subscribers) driven by the
    /// eNB/UE emulator; prints the emulator's report.
    Demo(DemoArgs),
    /// Run a node: S1-MME listener (SCTP, or SCTP over UDP where the kernel has none),
    /// S1-U GTP-U socket, SGi (TUN or UDP sink), the embedded HSS, and slices with their
    /// control (MME) and data (S/P-GW) threads. Keys are documented in crates/pepc/src/epc.rs.
    Run(RunArgs),
    /// The eNB/UE emulator against any EPC (S1AP/NAS over SCTP, GTP-U over UDP):
    /// scenarios from flags or a TOML file; report as a table or JSON.
    Ran(Box<pepc_emulator::RanArgs>),
    /// Manage the embedded HSS's subscribers (database file, node stopped).
    Subscriber(pepc::subscriber::SubscriberArgs),
    /// Operate a running node through its management API (UEs, eNBs, slices,
    /// subscribers, detach); tables, or --json.
    Ctl(pepc::ctl::CtlArgs),
    /// Run a `[debug] record` recording again (FILE, or the slices' FILE.0, FILE.1,
    /// ...): exits 0 only if every output comes out byte-identical, else names the
    /// first difference.
    Replay {
        file: std::path::PathBuf,
        /// Print the reports as JSON.
        #[arg(long)]
        json: bool,
        /// Also replay each of these UEs (IMSI) on an MME of its own, from its
        /// snapshot taken at its first procedure boundary from --at on, with only its
        /// calls: what a node that takes over the UE does.
        #[arg(long = "ue", value_name = "IMSI")]
        ue: Vec<u64>,
        /// As --ue, for up to N of the UEs each slice holds at --at (lowest IMSIs).
        #[arg(long, value_name = "N")]
        ues: Option<usize>,
        /// Where in each recording the UEs' snapshots are taken: percent of its calls.
        #[arg(long, value_name = "PERCENT", default_value_t = 50, value_parser = clap::value_parser!(u8).range(0..=100))]
        at: u8,
    },
    /// The configuration: `default` prints every key with its default and meaning
    /// (a file `pepc run --config` takes unchanged); `docs` prints the reference
    /// (docs/configuration.md); `check FILE` validates a file as `pepc run` would.
    Config {
        #[command(subcommand)]
        what: ConfigCmd,
    },
    /// Print the node's plan for a configuration without starting it: every thread
    /// (and the core it is pinned to), every ring between two threads, every port and
    /// its owner. `pepc run` logs the same at start.
    Plan {
        /// Node configuration (TOML); default: the embedded defaults.
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        /// Cores to plan for (default: this machine's).
        #[arg(long)]
        cores: Option<usize>,
    },
    /// Shell completions for bash, zsh, fish, elvish or powershell, on stdout
    /// (e.g. `pepc completions bash > /etc/bash_completion.d/pepc`).
    Completions { shell: clap_complete::Shell },
    /// Man pages: pepc(1) on stdout, or with --dir one page per command
    /// (pepc.1, pepc-run.1, pepc-ctl.1, ...) written there.
    Man {
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
    /// Benchmarks (use a release build).
    Bench {
        #[command(subcommand)]
        what: BenchCmd,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// The whole default configuration, commented.
    Default,
    /// The configuration reference as Markdown (docs/configuration.md).
    Docs,
    /// Validate FILE (every key, every section, with the line of an error).
    Check { file: std::path::PathBuf },
}

#[derive(Args)]
struct RunArgs {
    /// Node configuration (TOML); every key has a default.
    #[arg(long)]
    config: Option<std::path::PathBuf>,
    /// Stop after this many seconds (default: run until killed).
    #[arg(long, allow_negative_numbers = true, value_parser = pepc_emulator::ran::non_negative)]
    seconds: Option<f64>,
}

#[derive(Args)]
struct DemoArgs {
    /// UEs to attach.
    #[arg(long, default_value_t = 10_000)]
    ues: u32,
    /// Emulated eNBs.
    #[arg(long, default_value_t = 2)]
    enbs: u32,
    /// Attach rate (UEs per second); also the detach rate at the end.
    #[arg(long, default_value_t = 5000.0, allow_negative_numbers = true, value_parser = pepc_emulator::ran::non_negative)]
    attach_rate: f64,
    /// Seconds of steady state (signaling mix and traffic) after the attaches.
    #[arg(long, default_value_t = 5.0, allow_negative_numbers = true, value_parser = pepc_emulator::ran::non_negative)]
    seconds: f64,
    /// Signaling events per second during steady state (Rajan et al. Table I mix).
    #[arg(long, default_value_t = 100.0, allow_negative_numbers = true, value_parser = pepc_emulator::ran::non_negative)]
    events: f64,
    /// Data packets per second (PEPC Table 2 mix: 64 B DL, 128 B UL, 1:3).
    #[arg(long, default_value_t = 10000.0, allow_negative_numbers = true, value_parser = pepc_emulator::ran::non_negative)]
    pps: f64,
    /// Slices of the node (each with its MME, control and data thread).
    #[arg(long, default_value_t = 2)]
    slices: usize,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// After the attaches, keep the UEs attached with traffic and the signaling mix
    /// flowing (instead of --seconds) until Ctrl-C, with the console and metrics
    /// served; then detach them and report.
    #[arg(long)]
    hold: bool,
    /// Record each slice's MME to FILE.<slice> (`[debug] record`; `pepc replay FILE`).
    #[arg(long, value_name = "FILE")]
    record: Option<std::path::PathBuf>,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Data-plane throughput and latency under signaling (PEPC §6-§7).
    Dataplane(DataplaneArgs),
    /// Run a sweep reproducing one of the paper's figures; writes CSV, JSON and PNG.
    Sweep(SweepArgs),
    /// Full attach procedures per control core (AKA, NAS security, ICS; every message
    /// encoded and decoded), in-process or over userspace SCTP on loopback.
    Attach(AttachArgs),
    /// The data path on real packet I/O: a generator in one network namespace, the
    /// node in another, joined by veth pairs (needs root).
    Io(IoArgs),
    /// The egress scheduler: QCI 1/2 GBR, QCI 5 and QCI 9 flows offered at
    /// a multiple of a slice's downlink egress rate; per class delivered and latency.
    Qos(QosArgs),
    /// The memory's floor under the data path: one random line per packet and nothing
    /// else, in a slice's line tables at two sizes measured in alternating windows.
    Lines(LinesArgs),
    /// Memory that comes back: storms of attach + detach against one node in this
    /// process (SCTP over UDP on loopback); live heap, RSS and mimalloc's committed
    /// memory after each storm.
    Memory(MemoryArgs),
}

#[derive(Args)]
struct MemoryArgs {
    /// Storms of attach + switch-off detach.
    #[arg(long, default_value_t = 20)]
    storms: u32,
    /// UEs per storm (each attaches and detaches once per storm).
    #[arg(long, default_value_t = 50_000)]
    ues: u32,
    /// Attaches (and detaches) offered per second.
    #[arg(long, default_value_t = 20_000.0)]
    attach_rate: f64,
    #[arg(long, default_value_t = 2)]
    slices: usize,
    /// Emulated eNBs (one SCTP association each).
    #[arg(long, default_value_t = 1)]
    enbs: u32,
    /// Loopback S1-MME UDP port of the node (S1-U on 127.0.80.1, the eNBs' on
    /// 127.0.80.2, the SGi sink on UDP 15780/15781).
    #[arg(long, default_value_t = 19_780)]
    port: u16,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct QosArgs {
    /// The slice's downlink egress rate, Mbit/s (`[s1u] egress_mbps`).
    #[arg(long, default_value_t = 1000)]
    egress_mbps: u64,
    /// Seconds of traffic (memory: virtual time, the data path runs as fast as it
    /// can; udp, afxdp: wall time).
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Offered load over the egress capacity.
    #[arg(long, default_value_t = 3.0)]
    overload: f64,
    /// Virtual time per tick, µs (the latency's resolution).
    #[arg(long, default_value_t = 50)]
    tick_us: u64,
    /// memory (the scheduler at --egress-mbps, virtual time); udp (the data thread
    /// on a UDP socket over a veth shaped to --egress-mbps, the port pushing back);
    /// afxdp (the data thread on an AF_XDP socket on a veth, the slice's egress at
    /// --egress-mbps: no qdisc shapes AF_XDP). udp and afxdp: network namespaces, as
    /// root; delivered and latency are counted where the packets arrive.
    #[arg(long, default_value = "memory")]
    io: String,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LinesArgs {
    #[arg(long, default_value_t = 1_000_000)]
    users: u32,
    /// The size compared with --users.
    #[arg(long, default_value_t = 10_000_000)]
    vs_users: u32,
    /// Rounds of one window per size (order alternating).
    #[arg(long, default_value_t = 6)]
    rounds: usize,
    /// Seconds per window.
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
    /// Downlink batches per uplink batch.
    #[arg(long, default_value_t = 3)]
    dl_per_ul: u32,
    /// Busy work per packet (ns) after its line is read: how much of the memory's cost
    /// the pipeline's own work could hide.
    #[arg(long, default_value_t = 0)]
    work_ns: u32,
    /// Do not pin the thread to a core.
    #[arg(long)]
    no_pin: bool,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct IoArgs {
    /// The node's packet I/O: afxdp | udp (kernel UDP sockets with recvmmsg/sendmmsg:
    /// S1-U, and SGi as the UDP sink) | tun (UDP socket on S1-U, TUN device on SGi).
    #[arg(long, default_value = "afxdp")]
    backend: String,
    #[arg(long, default_value_t = 100_000)]
    users: u32,
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    /// Offered load in million packets per second, both directions (0: as fast as
    /// the generator can send).
    #[arg(long, default_value_t = 0.0)]
    rate_mpps: f64,
    /// Traffic mix: table2 (PEPC: 128 B UL, 64 B DL, 1:3) | table-iv (Rajan et al.).
    #[arg(long, default_value = "table2")]
    mix: String,
    /// Where the XDP programs run: auto (native if the driver has it) | drv | skb.
    #[arg(long, default_value = "auto")]
    xdp_mode: String,
    /// The node's AF_XDP ring size (its `ring_size`: 2x as many frames, half for
    /// receiving).
    #[arg(long, default_value_t = 4096)]
    ring_size: u32,
    /// The node's TUN queue (backend tun; its `[sgi] tun_queue_len`).
    #[arg(long, default_value_t = pepc_node::io::tun::DEFAULT_QUEUE_LEN)]
    tun_queue_len: u32,
    /// Receive processing of each veth end in a kernel thread of its own, charged to
    /// the receiving side (else the sender's thread runs the peer's receive).
    #[arg(long)]
    napi_threads: bool,
    /// The generator's own I/O: afxdp | sockets (kernel UDP sockets, --backend udp
    /// only: the node's GSO sends cross the veth whole, as from a NIC with UDP
    /// segmentation offload; an XDP program on the generator's end turns that off)
    #[arg(long, default_value = "afxdp")]
    gen_io: String,
    /// Backend udp: the node's sockets receive with UDP GRO (on: a burst of one
    /// flow's same-size datagrams as one message) | off (one datagram per receive)
    #[arg(long, default_value = "on")]
    node_gro: String,
    /// Node slices (data threads); more than one adds the demux thread (--rx demux).
    #[arg(long, default_value_t = 1)]
    slices: usize,
    /// How packets reach the slices: demux (one receive socket, a demux thread with
    /// several slices) | queues (slice k receives and sends on its own: AF_XDP queue
    /// k; UDP socket k of a reuseport group, TUN queue k, steered by the kernel).
    #[arg(long, default_value = "demux")]
    rx: String,
    /// With --rx queues and AF_XDP, how the generator spreads packets over the
    /// queues: rss (a flow hash, blind to slices: packets are handed between slices)
    /// | slice (by the TEID's or address's slice, as a flow-director rule would).
    #[arg(long, default_value = "rss")]
    steer: String,
    /// Run this many times; every run is printed (JSON: one object per run).
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct AttachArgs {
    /// inprocess (MME thread + RAN thread over queues) | udp (node + emulator over
    /// SCTP-in-UDP on loopback) | all
    #[arg(long, default_value = "all")]
    transport: String,
    /// Attaches to run (one per UE).
    #[arg(long, default_value_t = 20_000)]
    attaches: u32,
    /// Attaches in flight at once per slice (inprocess).
    #[arg(long, default_value_t = 64)]
    window: u32,
    /// Attach rate offered by the emulator (udp), per second.
    #[arg(long, default_value_t = 1_000_000.0)]
    rate: f64,
    /// inprocess: measure UEs re-attaching (each first attached and switch-off
    /// detached once, unmeasured) instead of each UE's first attach since start.
    #[arg(long)]
    reattach: bool,
    /// inprocess: UEs attach in a shuffled IMSI order instead of IMSI order.
    #[arg(long)]
    shuffle: bool,
    /// inprocess: skip sizing the MME's state and faulting in its heap for the UEs
    /// before the run (what a node does at start with `node.prewarm_users`).
    #[arg(long)]
    no_prewarm: bool,
    /// inprocess: also run with checkpoints into an embedded state store (what `pepc
    /// run` does by default), alternating with runs without, to measure their cost.
    #[arg(long)]
    checkpoint: bool,
    /// inprocess: also run with each MME recorded (`[debug] record`) into a file,
    /// alternating with runs without, to measure the recording's cost.
    #[arg(long)]
    record: bool,
    /// Run each transport this many times and report the median run (by attaches
    /// per MME core-second), with every run's figure in `per_core_runs`.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Slice counts to measure, e.g. `1,2`: runs of the counts alternate (repeat by
    /// repeat), so all see the same machine; one JSON object per transport and count.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    slices: Vec<usize>,
    /// Print one JSON object per transport.
    #[arg(long)]
    json: bool,
    /// The node's HSS (udp): embedded, or diameter (S6a over TCP to --hss-peer, or
    /// to the test HSS the bench starts: Python on pycrate, so the HSS, not the
    /// proxy, sets the rate; the proxy's own CPU is reported).
    #[arg(long, default_value = "embedded")]
    hss: String,
    /// With --hss diameter: an HSS already running ("host:port", realm "test").
    #[arg(long)]
    hss_peer: Option<String>,
}

#[derive(Args, Clone)]
struct DataplaneArgs {
    /// default | unbatched | one-table | rwlock | datapath-writer | giant-lock
    #[arg(long, default_value = "default")]
    design: String,
    #[arg(long, default_value_t = 1_000_000)]
    users: u32,
    /// Control events per second on the control core.
    #[arg(long, default_value_t = 100_000)]
    signaling: u64,
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
    #[arg(long, default_value_t = 1)]
    data_cores: usize,
    /// Downlink batches per uplink batch (UL:DL = 1:N).
    #[arg(long, default_value_t = 3)]
    dl_per_ul: u32,
    /// Uplink frame size on the wire, bytes (outer IPv4+UDP+GTP-U included).
    #[arg(long, default_value_t = 128)]
    ul_size: usize,
    /// Downlink IPv4 packet size, bytes.
    #[arg(long, default_value_t = 64)]
    dl_size: usize,
    /// Share of users that are stateless-IoT devices (0..1).
    #[arg(long, default_value_t = 0.0)]
    iot_share: f64,
    /// Share of users whose uplink goes on a dedicated bearer (QCI 1) of theirs (0..1).
    #[arg(long, default_value_t = 0.0)]
    dedicated_share: f64,
    /// Share of users always in the primary table (0..1); the rest churn.
    #[arg(long, default_value_t = 1.0)]
    always_on: f64,
    /// Share of all users moved into/out of the primary table per second.
    #[arg(long, default_value_t = 0.0)]
    churn: f64,
    /// Share of events that are S1 handovers (the rest are attach/detach).
    #[arg(long, default_value_t = 0.5)]
    handover_share: f64,
    /// Do not pin threads to cores.
    #[arg(long)]
    no_pin: bool,
    /// Read and render every data-path counter a /metrics scrape reads, every this
    /// many ms, from a thread of its own (0: no scraping): the scrape's cost.
    #[arg(long, default_value_t = 0)]
    scrape_ms: u64,
    /// Also set up a slice of this many users in the same process and measure the
    /// two in alternating windows of --seconds each (see --rounds): the rate of
    /// this size against --users', with the machine's drift falling on both alike.
    #[arg(long)]
    vs_users: Option<u32>,
    /// With --vs-users: rounds of one window per size (order alternating).
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Seconds to wait, idle, between the setup and the first measured window (does
    /// the rate depend on the time since setup?).
    #[arg(long, default_value_t = 0.0)]
    settle: f64,
    /// Print one JSON object per run.
    #[arg(long)]
    json: bool,
}

impl DataplaneArgs {
    fn opts(&self) -> Result<DataplaneOpts, String> {
        Ok(DataplaneOpts {
            design: Design::parse(&self.design)?,
            users: self.users,
            signaling: self.signaling,
            seconds: self.seconds,
            data_cores: self.data_cores,
            dl_per_ul: self.dl_per_ul,
            ul_frame: self.ul_size,
            dl_packet: self.dl_size,
            iot_share: self.iot_share,
            dedicated_share: self.dedicated_share,
            always_on: self.always_on,
            churn_per_s: self.churn,
            handover_share: self.handover_share,
            pin: !self.no_pin,
            seed: 42,
            scrape_ms: self.scrape_ms,
            settle_s: self.settle,
        })
    }
}

#[derive(Args)]
struct SweepArgs {
    /// Figure: 5, 6, 7, 12, 13, 14 or 15 (the paper's), or io (backends and users on
    /// real packet I/O; needs root).
    #[arg(long)]
    figure: String,
    /// Seconds per point.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Output directory for CSV/JSON/PNG.
    #[arg(long, default_value = "out/bench")]
    out: std::path::PathBuf,
    /// Scale user counts down by this factor (for quick runs).
    #[arg(long, default_value_t = 1)]
    scale_down: u32,
}

/// mimalloc: control threads allocate and free per message (codecs) and per UE; with
/// glibc malloc, free/consolidate/page faults were ~20% of the MME thread (perf), and
/// mimalloc's per-thread free lists take most of that away.
#[global_allocator]
static ALLOC: pepc::alloc::Counting<pepc::alloc::Mi> = pepc::alloc::Counting(pepc::alloc::Mi);

fn main() -> ExitCode {
    pepc::alloc::set_purge_delay();
    let cli = Cli::parse();
    // `pepc run` installs its subscriber once its `[log]` section is read.
    if !matches!(cli.cmd, Cmd::Run(_)) {
        pepc::logging::init(&pepc::logging::LogConfig::default());
    }
    let r = match cli.cmd {
        Cmd::Run(a) => run_node(&a),
        Cmd::Demo(a) => demo(&a),
        Cmd::Ran(a) => pepc_emulator::ran_command(&a)
            .map_err(|e| format!("ran: {e}"))
            .and_then(|r| ran_outcome(&r)),
        Cmd::Subscriber(a) => pepc::subscriber::run(&a)
            .map(|s| outln!("{s}"))
            .map_err(|e| e.to_string()),
        Cmd::Ctl(a) => pepc::ctl::run(&a)
            .map(|s| outln!("{s}"))
            .map_err(|e| e.to_string()),
        Cmd::Replay {
            file,
            json,
            ue,
            ues,
            at,
        } => {
            let pick = match (ues, ue.is_empty()) {
                (Some(n), _) => Some(pepc_mme::record::replay_ue::Pick::Held(n)),
                (None, false) => Some(pepc_mme::record::replay_ue::Pick::Imsis(ue)),
                (None, true) => None,
            };
            replay(&file, json, pick.map(|p| (p, at)))
        }
        Cmd::Plan { config, cores } => plan(config.as_deref(), cores),
        Cmd::Config { what } => match what {
            ConfigCmd::Default => {
                outln!("{}", pepc::config_doc::DEFAULT_TOML.trim_end());
                Ok(())
            }
            ConfigCmd::Docs => {
                outln!("{}", pepc::config_doc::markdown().trim_end());
                Ok(())
            }
            ConfigCmd::Check { file } => pepc::epc::EpcConfig::load(&file)
                .map(|_| outln!("{}: valid", file.display()))
                .map_err(|e| e.to_string()),
        },
        Cmd::Completions { shell } => {
            use clap::CommandFactory;
            let mut cmd = Cli::command();
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut cmd, "pepc", &mut out);
            outln!("{}", String::from_utf8_lossy(&out).trim_end());
            Ok(())
        }
        Cmd::Man { dir } => man(dir.as_deref()),
        Cmd::Bench { what } => match what {
            BenchCmd::Dataplane(a) => bench_dataplane(&a),
            BenchCmd::Attach(a) => bench_attach(&a),
            BenchCmd::Io(a) => bench_io(&a),
            BenchCmd::Lines(a) => bench_lines(&a),
            BenchCmd::Qos(a) => bench_qos(&a),
            BenchCmd::Memory(a) => bench_memory(&a),
            BenchCmd::Sweep(s) => {
                pepc_bench::sweep::run(&s.figure, s.seconds, &s.out, s.scale_down)
            }
        },
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("pepc: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `pepc ran` fails when any procedure failed (the report above says which), so a
/// script sees it in the exit status.
fn ran_outcome(r: &pepc_emulator::Report) -> Result<(), String> {
    let failed: Vec<String> = r
        .procedures
        .iter()
        .filter(|(_, p)| p.failed > 0)
        .map(|(n, p)| format!("{n} {}", p.failed))
        .collect();
    if failed.is_empty() && r.failed == 0 {
        return Ok(());
    }
    Err(format!(
        "ran: procedures failed ({}; {} UEs not attached): see the report",
        failed.join(", "),
        r.failed
    ))
}

/// Ratios as percentages to one decimal, for the paired benches' per-round lists.
fn percents(ratios: &[f64]) -> Vec<f64> {
    ratios.iter().map(|x| (x * 1000.0).round() / 10.0).collect()
}

fn bench_memory(a: &MemoryArgs) -> Result<(), String> {
    if a.storms == 0 || a.ues == 0 {
        return Err("bench memory: --storms and --ues must be at least 1".into());
    }
    pepc::alloc::count_live_heap();
    // Loopback addresses of its own, so it runs beside the demo and the tests.
    let ports = pepc::demo::DemoPorts {
        s1mme_udp: a.port,
        s1u: std::net::Ipv4Addr::new(127, 0, 80, 1),
        sgi_sink_local: 15_780,
        sgi_sink_peer: 15_781,
        enb_gtpu: std::net::Ipv4Addr::new(127, 0, 80, 2),
    };
    let r = pepc::memory::run(
        &ports,
        &pepc::memory::MemoryOpts {
            storms: a.storms,
            ues: a.ues,
            attach_rate: a.attach_rate,
            slices: a.slices,
            enbs: a.enbs,
        },
    )
    .map_err(|e| format!("bench memory: {e}"))?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
        );
    } else {
        outln!("storm  attached  failed  live heap MB  RSS MB  mimalloc commit MB  UE contexts");
        for s in &r.storms {
            outln!(
                "{:>5}  {:>8}  {:>6}  {:>12.3}  {:>6.1}  {:>18.1}  {:>11}",
                s.storm,
                s.attached,
                s.failed + s.detach_failed,
                s.live_heap_bytes as f64 / 1e6,
                s.rss_bytes as f64 / 1e6,
                s.mimalloc_commit_bytes as f64 / 1e6,
                s.ue_contexts
            );
        }
        outln!(
            "live heap after the last storm vs the first: {:+.3}% ({:+} B); RSS after the 2nd storm: {:+.3} MB per storm",
            r.live_heap_drift_pct,
            r.live_heap_drift_bytes,
            r.rss_mb_per_storm_after_2nd
        );
    }
    Ok(())
}

fn bench_qos(a: &QosArgs) -> Result<(), String> {
    use pepc_bench::qos::QosIo;
    let io = match a.io.as_str() {
        "memory" => QosIo::Memory,
        "udp" => QosIo::Udp,
        "afxdp" => QosIo::Afxdp,
        other => return Err(format!("--io {other:?}: memory, udp or afxdp")),
    };
    let r = pepc_bench::qos::run(&pepc_bench::qos::QosOpts {
        egress_mbps: a.egress_mbps,
        seconds: a.seconds,
        overload: a.overload,
        tick_us: a.tick_us,
        io,
    })?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        return Ok(());
    }
    for c in &r.classes {
        println!(
            "QCI {:>3}{} {:>3} flows: offered {:>8.1} Mbit/s, delivered {:>8.1} ({:.4}), latency p50 {} us p99 {} us",
            c.qci, if c.gbr { " GBR" } else { "    " }, c.flows, c.offered_mbps, c.delivered_mbps,
            c.delivered_ratio, c.latency_us_p50, c.latency_us_p99
        );
    }
    println!(
        "egress {} Mbit/s at {}x: GBR delivered {:.4}, egress used {:.4}; {} packets in {:.2} s CPU ({:.2} Mpps per core)",
        r.egress_mbps, r.overload, r.gbr_delivered_ratio, r.work_conserving, r.packets, r.cpu_s,
        r.mpps_per_core
    );
    if r.io != "memory" {
        println!(
            "port {} (bottleneck: {}), pushed back {}, eNB socket dropped {}, unaccounted {}",
            r.port,
            r.bottleneck.name(),
            r.pushed_back,
            r.receiver_dropped,
            r.unaccounted
        );
    }
    Ok(())
}

fn bench_lines(a: &LinesArgs) -> Result<(), String> {
    let r = pepc_bench::lines::run(&pepc_bench::lines::LinesOpts {
        users: [a.users, a.vs_users],
        rounds: a.rounds,
        seconds: a.seconds,
        dl_per_ul: a.dl_per_ul,
        work_ns: a.work_ns,
        pin: !a.no_pin,
        seed: 42,
    })?;
    if a.json {
        outln!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        return Ok(());
    }
    for w in &r.windows {
        outln!(
            "round {} {:>9} users: {:.2} ns per packet ({:.2} Mpps)",
            w.round,
            w.users,
            w.ns_per_packet,
            w.mpps
        );
    }
    outln!(
        "median {:.2} ns per packet at {} users ({} MB of lines touched), {:.2} at {} ({} MB): +{:.2} ns; rate {:.1}% (rounds {:?})",
        r.ns_per_packet_median[0], r.users[0], r.touched_bytes[0] >> 20,
        r.ns_per_packet_median[1], r.users[1], r.touched_bytes[1] >> 20,
        r.extra_ns_median, r.ratio_median * 100.0,
        percents(&r.ratio_per_round)
    );
    Ok(())
}

fn bench_dataplane(a: &DataplaneArgs) -> Result<(), String> {
    let o = a.opts()?;
    if let Some(vs) = a.vs_users {
        let r = pepc_bench::paired::run(&o, vs, a.rounds)?;
        if a.json {
            outln!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        } else {
            for w in &r.windows {
                outln!(
                    "round {} {:>9} users: {:.2} Mpps/core ({:.2} incl. generation), p50 {} ns p99 {} ns, {:.0} events/s",
                    w.round, w.users, w.mpps_per_core, w.mpps_wall_per_core,
                    w.latency_ns_p50, w.latency_ns_p99, w.signaling_achieved_per_s
                );
            }
            outln!(
                "median {:.2} Mpps/core at {} users, {:.2} at {}; {} against {}: {:.1}% (median of rounds {:?}); drops {} and {}",
                r.mpps_per_core_median[0], r.users[0], r.mpps_per_core_median[1], r.users[1],
                r.users[1], r.users[0], r.ratio_median * 100.0,
                percents(&r.ratio_per_round),
                r.drops[0], r.drops[1]
            );
        }
        return Ok(());
    }
    let r = dataplane::run(&o)?;
    if a.json {
        outln!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    } else {
        outln!(
            "design {:?}: {} users, {} events/s ({:.0} achieved), {} data core(s): {:.2} Mpps/core ({:.2} incl. generation), latency p50 {} ns p99 {} ns, drops {}",
            r.design, r.users, r.signaling_per_s, r.signaling_achieved_per_s, r.data_cores,
            r.mpps_per_core, r.mpps_wall_per_core, r.latency_ns_p50, r.latency_ns_p99, r.drops
        );
    }
    Ok(())
}

fn bench_io(a: &IoArgs) -> Result<(), String> {
    use pepc_bench::io::{Backend, IoOpts, Mix};
    let o = IoOpts {
        backend: match a.backend.as_str() {
            "afxdp" => Backend::Afxdp,
            "udp" => Backend::Udp,
            "tun" => Backend::Tun,
            b => return Err(format!("--backend {b:?}: not one of afxdp, udp, tun")),
        },
        users: a.users,
        seconds: a.seconds,
        rate_pps: (a.rate_mpps * 1e6) as u64,
        mix: match a.mix.as_str() {
            "table2" => Mix::Table2,
            "table-iv" => Mix::TableIv,
            m => return Err(format!("--mix {m:?}: not one of table2, table-iv")),
        },
        seed: 42,
        xdp_mode: match a.xdp_mode.as_str() {
            "auto" => pepc_node::io::afxdp::XdpMode::Auto,
            "drv" => pepc_node::io::afxdp::XdpMode::Drv,
            "skb" => pepc_node::io::afxdp::XdpMode::Skb,
            m => return Err(format!("--xdp-mode {m:?}: not one of auto, drv, skb")),
        },
        napi_threads: a.napi_threads,
        gen_io: match a.gen_io.as_str() {
            "afxdp" => pepc_bench::io::GenIo::Afxdp,
            "sockets" => pepc_bench::io::GenIo::Sockets,
            g => return Err(format!("--gen-io {g:?}: not one of afxdp, sockets")),
        },
        node_gro: match a.node_gro.as_str() {
            "on" => true,
            "off" => false,
            g => return Err(format!("--node-gro {g:?}: not one of on, off")),
        },
        ring_size: a.ring_size,
        tun_queue_len: a.tun_queue_len,
        slices: a.slices,
        rx: match a.rx.as_str() {
            "demux" => pepc_bench::io::RxMode::Demux,
            "queues" => pepc_bench::io::RxMode::Queues,
            m => return Err(format!("--rx {m:?}: not one of demux, queues")),
        },
        steer: match a.steer.as_str() {
            "rss" => pepc_bench::io::Steer::Rss,
            "slice" => pepc_bench::io::Steer::Slice,
            m => return Err(format!("--steer {m:?}: not one of rss, slice")),
        },
    };
    for _ in 0..a.repeat.max(1) {
        let r = pepc_bench::io::run(&o)?;
        if a.json {
            outln!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        } else {
            outln!(
                "{:?} ({} / {}): {} users, {:.2} Mpps per data core, {:.2} Mpps wall, {:.2} Gb/s, loss {:.4}% ({} of {}; dropped by the node {}, its sockets' kernel {}, not sent by it {}, the links {}, the generator's sockets {}; lost before the node {}, after it {}; unexplained {}), reordered {}, latency p50 {} us p99 {} us; CPU/packet: node data {:.0} ns (demux thread {:.0} ns), generator {:.0} ns, machine {:.0} ns",
                r.backend, r.s1u_io, r.sgi_io, r.users, r.mpps_per_core, r.mpps_wall, r.gbps,
                r.loss * 100.0, r.lost, r.sent_ul + r.sent_dl, r.node_drops, r.node_kernel_drops,
                r.node_tx_failed, r.link_drops, r.generator_kernel_drops, r.lost_before_node, r.lost_after_node, r.lost_unexplained, r.reordered, r.latency_us_p50,
                r.latency_us_p99, r.node_data_cpu_ns_per_packet, r.node_demux_cpu_ns_per_packet,
                r.generator_cpu_ns_per_packet,
                r.machine_cpu_ns_per_packet
            );
        }
    }
    Ok(())
}

fn bench_attach(a: &AttachArgs) -> Result<(), String> {
    let mut results = vec![];
    let (inproc, udp) = match a.transport.as_str() {
        "inprocess" => (true, false),
        "udp" => (false, true),
        "all" => (true, true),
        t => {
            return Err(format!(
                "--transport: must be inprocess, udp or all, got {t:?}"
            ))
        }
    };
    use pepc_bench::attach::{median_of_each, AttachOpts};
    if a.slices.is_empty() || a.slices.iter().any(|&n| n == 0 || n > 64) {
        return Err("--slices: slice counts must be 1..=64".into());
    }
    let mut test_hss = None;
    let peer = match (a.hss.as_str(), &a.hss_peer) {
        ("embedded", None) => None,
        ("diameter", _) if inproc => {
            return Err(
                "--hss diameter: the HSS is reached over sockets, use --transport udp".into(),
            )
        }
        ("diameter", Some(p)) => Some(p.clone()),
        ("diameter", None) => {
            let h = pepc::demo::TestHss::start().map_err(|e| e.to_string())?;
            let p = h.peer.clone();
            test_hss = Some(h);
            Some(p)
        }
        ("embedded", Some(_)) => return Err("--hss-peer: only with --hss diameter".into()),
        (o, _) => return Err(format!("--hss: must be embedded or diameter, got {o:?}")),
    };
    if inproc {
        let ck: &[bool] = if a.checkpoint {
            &[false, true]
        } else {
            &[false]
        };
        let rec: &[bool] = if a.record { &[false, true] } else { &[false] };
        let configs: Vec<(usize, bool, bool)> = a
            .slices
            .iter()
            .flat_map(|&s| ck.iter().map(move |&c| (s, c)))
            .flat_map(|(s, c)| rec.iter().map(move |&r| (s, c, r)))
            .collect();
        results.extend(median_of_each(
            a.repeat,
            &configs,
            |(slices, checkpoint, record)| {
                pepc_bench::attach::run_inprocess(&AttachOpts {
                    attaches: a.attaches,
                    window: a.window,
                    reattach: a.reattach,
                    shuffle: a.shuffle,
                    no_prewarm: a.no_prewarm,
                    slices,
                    checkpoint,
                    record,
                })
            },
        )?);
    }
    if udp {
        results.extend(median_of_each(a.repeat, &a.slices, |slices| {
            pepc::demo::bench_attach_udp_hss(
                &pepc::demo::DemoPorts::default(),
                a.attaches,
                a.rate,
                slices,
                peer.as_deref(),
            )
            .map_err(|e| e.to_string())
        })?);
    }
    drop(test_hss);
    for r in results {
        if a.json {
            outln!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
        } else {
            outln!(
                "attach over {} with {} slice(s): {} ok, {} failed in {:.2} s: {:.0} attaches/s; {:.0} per MME core-second ({:.2} s CPU); completion p50 {:.0} us p99 {:.0} us",
                r.transport, r.slices, r.attaches, r.failed, r.seconds, r.attaches_per_s,
                r.attaches_per_mme_core_s, r.mme_cpu_s, r.completion_us_p50, r.completion_us_p99
            );
            if let Some(d) = &r.diameter {
                outln!(
                    "  HSS over S6a at {}: {} AIR+ULR, proxy thread {:.3} s CPU: {:.0} requests per proxy core-second, {:.1} us per attach",
                    d.peer, d.requests, d.proxy_cpu_s, d.requests_per_proxy_core_s, d.proxy_us_per_attach
                );
            }
        }
    }
    Ok(())
}

fn run_node(a: &RunArgs) -> Result<(), String> {
    use pepc::epc::{open_hss, Epc, EpcConfig, HssMode, HssStore};
    let cfg = match &a.config {
        Some(p) => EpcConfig::load(p).map_err(|e| e.to_string())?,
        None => EpcConfig::default_config(),
    };
    pepc::logging::init(&cfg.log);
    // An external HSS serves the subscribers: no database file is opened then.
    let hss = match &cfg.hss_mode {
        HssMode::Embedded => open_hss(&cfg.hss).map_err(|e| e.to_string())?,
        HssMode::Diameter(_) => open_hss(&HssStore::Memory).map_err(|e| e.to_string())?,
    };
    let subscribers = hss.list().map_err(|e| e.to_string())?.len();
    let epc = Epc::start(&cfg, hss).map_err(|e| e.to_string())?;
    let v = &cfg.node;
    let hss_desc = match (&cfg.hss_mode, &cfg.hss) {
        (HssMode::Diameter(d), _) => format!(
            "over S6a to {} (realm {})",
            d.peers.join(", "),
            d.app.destination_realm
        ),
        (HssMode::Embedded, HssStore::File(p)) => {
            format!("{} ({subscribers} subscribers)", p.display())
        }
        (HssMode::Embedded, HssStore::Memory) => format!("in memory ({subscribers} subscribers)"),
    };
    match &epc.s1mme {
        Some(s1mme) => tracing::info!(
            "pepc node: {} slice(s), S1-MME {s1mme}, S1-U {}, SGi {}, HSS {hss_desc}",
            v.slices, epc.node.s1u_io.description, epc.node.sgi_io.description,
        ),
        None => tracing::info!(
            "pepc node: {} slice(s), S1-U {}, SGi {}, MME disabled: {} synthetic users at {} events/s",
            v.slices, epc.node.s1u_io.description, epc.node.sgi_io.description, v.synthetic_users, v.synthetic_rate
        ),
    }
    // What runs where, as the operator's `top -H` and `ss` will show it.
    for line in epc.plan.to_string().lines() {
        tracing::info!("plan: {line}");
    }
    stop_on_signals();
    let start = std::time::Instant::now();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if let Some(why) = epc.failed() {
            // Fail loudly: a node that silently serves nothing is worse than none.
            // What was checkpointed is committed; a supervisor restarts the node.
            let ck = epc.abort();
            return Err(format!(
                "{why} (it panicked: its message is above); node stopped{ck}"
            ));
        }
        if STOP.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::info!("pepc node: stopping (signal)");
            break;
        }
        if a.seconds
            .is_some_and(|s| start.elapsed().as_secs_f64() >= s)
        {
            break;
        }
    }
    errln_nonl!("{}", epc.stop());
    Ok(())
}

/// Set by SIGTERM / SIGINT: `pepc run` stops gracefully (threads joined, checkpoints
/// committed, figures printed) instead of dying mid-write.
static STOP: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

extern "C" fn on_stop_signal(_: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(true, std::sync::atomic::Ordering::Relaxed);
}

#[allow(unsafe_code)]
fn stop_on_signals() {
    let handler = on_stop_signal as extern "C" fn(libc::c_int);
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: installs a handler that only stores to an atomic.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

/// `pepc demo --hold`'s stop: raised at SIGINT or SIGTERM (the handler only stores
/// to [`STOP`]; a thread carries it over to the emulator's flag).
fn hold_until_signal() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    use std::sync::atomic::Ordering::Relaxed;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    stop_on_signals();
    let raise = stop.clone();
    let _ = std::thread::Builder::new()
        .name("pepc-hold".into())
        .spawn(move || {
            while !STOP.load(Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            errln!("pepc demo: stopping (signal): detaching the UEs");
            raise.store(true, Relaxed);
        });
    stop
}

/// pepc(1) on stdout, or every command's page into `dir`.
fn man(dir: Option<&std::path::Path>) -> Result<(), String> {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut out)
            .map_err(|e| format!("man page: {e}"))?;
        outln!("{}", String::from_utf8_lossy(&out).trim_end());
        return Ok(());
    };
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    clap_mangen::generate_to(cmd, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(())
}

fn plan(config: Option<&std::path::Path>, cores: Option<usize>) -> Result<(), String> {
    use pepc::epc::EpcConfig;
    let cfg = match config {
        Some(p) => EpcConfig::load(p).map_err(|e| e.to_string())?,
        None => EpcConfig::default_config(),
    };
    let cores = cores.unwrap_or_else(pepc_slice::slice::available_cores);
    outln!("{}", pepc::epc::plan_of(&cfg, cores));
    Ok(())
}

fn replay(
    file: &std::path::Path,
    json: bool,
    ues: Option<(pepc_mme::record::replay_ue::Pick, u8)>,
) -> Result<(), String> {
    let done = pepc::replay::run(file, ues).map_err(|e| format!("replay: {e}"))?;
    for d in done {
        let r = &d.whole;
        let replayed: Vec<_> = d.ues.iter().filter(|u| u.snapshot_at.is_some()).collect();
        if json {
            let ues: Vec<_> = d
                .ues
                .iter()
                .map(|u| {
                    serde_json::json!({
                        "imsi": u.imsi,
                        "snapshot_at_call": u.snapshot_at,
                        "snapshot_bytes": u.snapshot_bytes,
                        "calls": u.calls,
                        "shared_calls": u.shared_calls,
                        "outputs": u.outputs,
                        "identical": u.mismatch.is_none(),
                    })
                })
                .collect();
            let mut v = serde_json::json!({
                "file": d.path.display().to_string(),
                "slice": r.slice.0,
                "slices": r.slice.1,
                "calls": r.calls,
                "outputs": r.outputs,
                "identical": true,
            });
            if let (Some(m), Some(_)) = (v.as_object_mut(), d.from_call) {
                m.insert("ues_from_call".into(), d.from_call.into());
                m.insert("ues".into(), ues.into());
            }
            outln!("{v}");
        } else {
            outln!(
                "{}: slice {} of {}: {} calls, {} outputs, all byte-identical",
                d.path.display(),
                r.slice.0,
                r.slice.1,
                r.calls,
                r.outputs
            );
            if let Some(from) = d.from_call {
                outln!(
                    "  {} of {} UEs replayed on their own from their snapshots (from call {from}): {} calls naming them, {} of their outputs, all byte-identical",
                    replayed.len(),
                    d.ues.len(),
                    replayed.iter().map(|u| u.calls).sum::<u64>(),
                    replayed.iter().map(|u| u.outputs).sum::<u64>(),
                );
            }
        }
    }
    Ok(())
}

fn demo(a: &DemoArgs) -> Result<(), String> {
    let o = pepc::demo::DemoOpts {
        ues: a.ues,
        enbs: a.enbs,
        attach_rate: a.attach_rate,
        seconds: a.seconds,
        events: a.events,
        pps: a.pps,
        progress: !a.json,
        slices: a.slices,
        record: a.record.clone(),
        hold: a.hold.then(hold_until_signal),
    };
    let json = a.json;
    let mut show = |report: &pepc_emulator::Report, slices: &[pepc::demo::SliceFigures]| {
        if json {
            let mut v: serde_json::Value =
                serde_json::from_str(&report.to_json()).unwrap_or_default();
            if let Some(m) = v.as_object_mut() {
                m.insert(
                    "slices".into(),
                    serde_json::to_value(slices).unwrap_or_default(),
                );
            }
            outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
        } else {
            outln!("{}", report.to_table());
            for s in slices {
                outln!(
                    "slice {}: {} UEs after the attaches ({} attached there), ul {} dl {} packets forwarded",
                    s.slice, s.ues, s.attaches, s.ul_forwarded, s.dl_forwarded
                );
            }
        }
    };
    pepc::demo::run_with(&pepc::demo::DemoPorts::default(), &o, &mut show)
        .map_err(|e| e.to_string())?;
    Ok(())
}
