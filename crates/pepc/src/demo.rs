//! `pepc demo`: a node on embedded defaults (MME over userspace SCTP-in-UDP, in-memory
//! HSS provisioned with the emulator's subscribers, S1-U and a userspace SGi sink on
//! loopback) driven by the eNB/UE emulator; returns the emulator's report.

use crate::epc::{Epc, EpcConfig};
use crate::error::{ConfigError, StartError};
use pepc_emulator::config::{SubscriberKeys, Traffic, TrafficProfile};
use pepc_emulator::{EmulatorConfig, Report, Scenario};
use pepc_hss::Subscriber;
use pepc_ratelog::{errln, errln_nonl};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

/// Loopback addresses and ports of a demo node. GTP-U is always UDP 2152 (TS 29.281),
/// so nodes running side by side differ in their loopback addresses.
#[derive(Debug, Clone)]
pub struct DemoPorts {
    pub s1mme_udp: u16,
    /// The node's S1-U address (port 2152).
    pub s1u: Ipv4Addr,
    pub sgi_sink_local: u16,
    pub sgi_sink_peer: u16,
    /// The emulated eNBs' S1-U address (port 2152).
    pub enb_gtpu: Ipv4Addr,
}

impl Default for DemoPorts {
    fn default() -> Self {
        DemoPorts {
            s1mme_udp: 9899,
            s1u: Ipv4Addr::LOCALHOST,
            sgi_sink_local: 5202,
            sgi_sink_peer: 5201,
            enb_gtpu: Ipv4Addr::new(127, 0, 0, 2),
        }
    }
}

/// Why a demo node, its subscribers, the emulator or the test HSS failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Start(#[from] StartError),
    #[error("emulator IMSI range exhausted at UE {0}")]
    ImsiExhausted(u32),
    /// The emulator's `K` or `OPc` is not 32 hex digits.
    #[error("emulator subscriber {0} is not 32 hex digits")]
    BadKey(&'static str),
    #[error("provisioning the emulator's subscribers: {0}")]
    Provision(#[source] pepc_hss::HssError),
    #[error("emulator: {0}")]
    Emulator(#[from] pepc_emulator::EmuError),
    #[error("the test HSS ({0}) is not here: give --hss-peer host:port")]
    NoTestHss(&'static str),
    #[error("a loopback port for the test HSS: {0}")]
    TestHss(#[source] std::io::Error),
    #[error("python3 for the test HSS: {0}")]
    Python(#[source] std::io::Error),
    #[error("the test HSS did not start (python3 with pycrate_diameter and cryptography: scripts/test.sh installs them)")]
    TestHssDown,
}

impl DemoPorts {
    /// The node's configuration for these ports (in-memory HSS, UDP-encapsulated SCTP),
    /// with memory for `prewarm_users` UEs faulted in at start.
    pub fn config(
        &self,
        max_users: usize,
        prewarm_users: usize,
        slices: usize,
    ) -> Result<EpcConfig, ConfigError> {
        self.config_with(max_users, prewarm_users, slices, "")
    }

    /// [`DemoPorts::config`] with `hss` keys added to the `[hss]` section.
    pub fn config_with(
        &self,
        max_users: usize,
        prewarm_users: usize,
        slices: usize,
        hss: &str,
    ) -> Result<EpcConfig, ConfigError> {
        EpcConfig::parse(&format!(
            "[node]\nmax_users = {max_users}\nprewarm_users = {prewarm_users}\nslices = {slices}\n\
             [s1u]\nbind = \"{}:2152\"\n\
             [sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:{}\"\nsink_peer = \"127.0.0.1:{}\"\n\
             [s1mme]\ntransport = \"udp\"\nudp_port = {}\n\
             [hss]\ndb = \":memory:\"\n{hss}",
            self.s1u, self.sgi_sink_local, self.sgi_sink_peer, self.s1mme_udp
        ))
        .map(|mut c| {
            // A demo shows the core: its metrics and console are a bonus, left off
            // (said) when another node or demo has their ports.
            c.mgmt_optional = true;
            c
        })
    }

    /// Emulator defaults pointed at this node.
    pub fn emulator(&self) -> EmulatorConfig {
        EmulatorConfig {
            mme_udp_port: self.s1mme_udp,
            gtpu_addr: SocketAddrV4::new(self.enb_gtpu, 2152),
            sgi_peer: Some(SocketAddr::from(([127, 0, 0, 1], self.sgi_sink_local))),
            pdn_addr: SocketAddr::from(([127, 0, 0, 1], self.sgi_sink_peer)),
            ..EmulatorConfig::default()
        }
    }
}

/// The emulator's subscribers as HSS records (same K/OPc/IMSI range).
pub fn emulator_subscribers(keys: &SubscriberKeys, n: u32) -> Result<Vec<Subscriber>, DemoError> {
    (0..n)
        .map(|i| {
            let imsi = keys.imsi(i).ok_or(DemoError::ImsiExhausted(i))?;
            let mut opc = [0u8; 16];
            hex::decode_to_slice(&keys.opc, &mut opc).map_err(|_| DemoError::BadKey("OPc"))?;
            Ok(Subscriber {
                imsi,
                k: pepc_security::Key128::from_hex(&keys.k).map_err(|_| DemoError::BadKey("K"))?,
                op_kind: pepc_hss::OpKind::Opc(opc),
                amf: [0x80, 0x00],
                // Above the emulator USIM's initial SQN so its first AUTN is fresh.
                sqn: 32,
                msisdn: "1".into(),
                apn: "internet".into(),
                pdn_type: pepc_hss::PdnType::Ipv4,
                qci: 9,
                arp_priority: 8,
                ambr_ul_bps: 50_000_000,
                ambr_dl_bps: 100_000_000,
            })
        })
        .collect()
}

/// Start a demo node of `slices` slices with the emulator's first `ues` subscribers
/// provisioned.
pub fn start_node(ports: &DemoPorts, ues: u32, slices: usize) -> Result<Epc, DemoError> {
    start_node_with(ports, ues, slices, "")
}

/// [`start_node`], recording each slice's MME (`[debug] record`) when asked.
pub fn start_node_recorded(
    ports: &DemoPorts,
    ues: u32,
    slices: usize,
    record: Option<&std::path::Path>,
) -> Result<Epc, DemoError> {
    let mut cfg = ports.config_with((ues as usize).max(1024) * 2, ues as usize, slices, "")?;
    cfg.record = record.map(|p| p.to_path_buf());
    start_provisioned(&cfg, ues)
}

/// Start a node of `cfg` with the emulator's first `ues` subscribers provisioned.
fn start_provisioned(cfg: &EpcConfig, ues: u32) -> Result<Epc, DemoError> {
    let hss = crate::epc::open_hss(&cfg.hss)?;
    let subs = emulator_subscribers(&SubscriberKeys::default(), ues)?;
    hss.add_many(&subs).map_err(DemoError::Provision)?;
    Ok(Epc::start(cfg, hss)?)
}

/// [`start_node`] with `hss` keys in the `[hss]` section.
pub fn start_node_with(
    ports: &DemoPorts,
    ues: u32,
    slices: usize,
    hss: &str,
) -> Result<Epc, DemoError> {
    // Sized for the UEs it will serve, as an operator expecting them would: each
    // slice for all of them (the policy spreads them, not evenly to the unit).
    let cfg = ports.config_with((ues as usize).max(1024) * 2, ues as usize, slices, hss)?;
    start_provisioned(&cfg, ues)
}

/// The demo's scenario knobs.
#[derive(Debug, Clone)]
pub struct DemoOpts {
    pub ues: u32,
    pub enbs: u32,
    pub attach_rate: f64,
    pub seconds: f64,
    pub events: f64,
    pub pps: f64,
    pub progress: bool,
    pub slices: usize,
    /// `[debug] record`: each slice's MME recording to `<record>.<slice>`.
    pub record: Option<std::path::PathBuf>,
    /// `pepc demo --hold`: after the attaches the UEs stay attached, with traffic and
    /// the signalling mix, until this is raised (instead of `seconds`); then they are
    /// detached and the report made as usual.
    pub hold: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

/// One slice's share of the demo.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SliceFigures {
    pub slice: usize,
    /// UE contexts its MME held at the end of the attach phase.
    pub ues: u64,
    /// Attaches its MME completed by then.
    pub attaches: u64,
    /// Packets its data thread forwarded over the whole run.
    pub ul_forwarded: u64,
    pub dl_forwarded: u64,
}

/// Node + emulator; the node is stopped before returning.
pub fn run(ports: &DemoPorts, o: &DemoOpts) -> Result<(Report, Vec<SliceFigures>), DemoError> {
    run_with(ports, o, &mut |_, _| {})
}

/// [`run`], with `done` called on the report while the node still runs (to show it
/// beside the node's figures).
pub fn run_with(
    ports: &DemoPorts,
    o: &DemoOpts,
    done: &mut dyn FnMut(&Report, &[SliceFigures]),
) -> Result<(Report, Vec<SliceFigures>), DemoError> {
    let epc = start_node_recorded(ports, o.ues, o.slices, o.record.as_deref())?;
    if o.progress {
        errln!(
            "pepc demo: node up (S1-MME SCTP/UDP {}, S1-U {}, SGi {}); starting the emulator",
            epc.s1mme.as_deref().unwrap_or("-"),
            epc.node.s1u_addr,
            epc.node.sgi_io.description
        );
        match &epc.metrics {
            Some(m) => errln!("pepc demo: metrics at http://{}/metrics", m.local_addr()),
            None => errln!("pepc demo: metrics endpoint off (its port is taken)"),
        }
        match &epc.api {
            Some(a) => errln!(
                "pepc demo: console at http://{0}/, API at http://{0}/api/v1",
                a.local_addr()
            ),
            None => errln!("pepc demo: management API off (its port is taken)"),
        }
    }
    let ecfg = EmulatorConfig {
        enbs: o.enbs,
        progress: o.progress,
        ..ports.emulator()
    };
    let scen = Scenario {
        ues: o.ues,
        attach_rate: o.attach_rate,
        duration_s: o.seconds,
        event_rate: o.events,
        traffic: Traffic {
            profile: if o.pps > 0.0 {
                TrafficProfile::Pepc
            } else {
                TrafficProfile::None
            },
            rate_pps: o.pps,
        },
        ..Default::default()
    };
    let mut figures: Vec<SliceFigures> = Vec::new();
    let api = epc.api.as_ref().map(|a| a.local_addr());
    let mut attach_phase_done = || {
        figures = epc
            .gauges
            .iter()
            .enumerate()
            .map(|(s, g)| SliceFigures {
                slice: s,
                ues: g.ues.load(std::sync::atomic::Ordering::Relaxed),
                attaches: g.attaches.load(std::sync::atomic::Ordering::Relaxed),
                ul_forwarded: 0,
                dl_forwarded: 0,
            })
            .collect();
        if o.hold.is_some() {
            let ues: u64 = figures.iter().map(|f| f.ues).sum();
            let console = match api {
                Some(a) => format!("console at http://{a}/"),
                None => "management API off (its port is taken)".into(),
            };
            errln!(
                "pepc demo: holding {ues} UEs attached with traffic flowing (--hold); {console}; Ctrl-C detaches them and stops"
            );
        }
    };
    let report = match &o.hold {
        Some(stop) => pepc_emulator::run_until(ecfg, scen, stop.clone(), &mut attach_phase_done),
        None => pepc_emulator::run_observed(ecfg, scen, &mut attach_phase_done),
    };
    for (f, s) in figures.iter_mut().zip(epc.node.stats().slices) {
        f.ul_forwarded = s.ul_forwarded;
        f.dl_forwarded = s.dl_forwarded;
    }
    if let Ok(r) = &report {
        done(r, &figures);
    }
    // The node's own view (per-slice forwarding and drops by reason) beside the report.
    let stats = epc.stop();
    if o.progress {
        errln_nonl!("node: {stats}");
    }
    Ok((report?, figures))
}

/// The test HSS of pepc-diameter's tests (Python on pycrate, an independent Diameter
/// codec, real Milenage vectors for the emulator's keys), started for `pepc bench
/// attach --hss diameter` on a free loopback port; killed when dropped. A
/// development tool: it needs the source tree and `python3` with pycrate.
pub struct TestHss {
    child: std::process::Child,
    pub peer: String,
}

impl Drop for TestHss {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TestHss {
    pub fn start() -> Result<TestHss, DemoError> {
        use std::io::Read;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../diameter/tests/py/diam.py");
        if !std::path::Path::new(script).exists() {
            return Err(DemoError::NoTestHss(script));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(DemoError::TestHss)?
            .port();
        let log = std::env::temp_dir().join(format!("pepc-bench-hss-{}.log", std::process::id()));
        let mut child = std::process::Command::new("python3")
            .arg(script)
            .args(["hss", &port.to_string()])
            .arg(&log)
            .args(["hss", "bench", ""])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .map_err(DemoError::Python)?;
        let mut ready = [0u8; 6];
        let ok = child
            .stdout
            .take()
            .is_some_and(|mut o| o.read_exact(&mut ready).is_ok());
        let h = TestHss {
            child,
            peer: format!("127.0.0.1:{port}"),
        };
        if !ok {
            return Err(DemoError::TestHssDown);
        }
        Ok(h)
    }
}

/// CPU seconds used so far by this process's threads named `name` (from /proc).
#[allow(unsafe_code)] // clock_gettime on a thread's CPU clock
pub fn thread_cpu_by_name(name: &str) -> f64 {
    let mut total = 0.0;
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    for t in dir.flatten() {
        let p = t.path();
        let comm = std::fs::read_to_string(p.join("comm")).unwrap_or_default();
        if !pepc_node::plan::of_family(comm.trim(), name) {
            continue;
        }
        let Some(tid) = t
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // The thread's CPU clock (Linux's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)):
        // nanoseconds, where /proc's utime/stime count 10 ms ticks.
        let clock = ((!(tid as libc::clockid_t)) << 3) | 6;
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes the timespec we own; an ended thread's clock
        // is an error (EINVAL), counted as nothing.
        if unsafe { libc::clock_gettime(clock, &mut ts) } == 0 {
            total += ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    total
}

/// `pepc bench attach --transport udp`: an attach storm from the emulator against a
/// node of `slices` slices over userspace SCTP-in-UDP on loopback. The MMEs' CPU time
/// is read from /proc for their threads (`pepc-ctl-N`); with more than one slice
/// the S1AP endpoint's thread (`pepc-s1ap`: SCTP, S1 Setup, demux) is reported
/// apart (with one slice the endpoint runs inline on the control thread).
pub fn bench_attach_udp(
    ports: &DemoPorts,
    attaches: u32,
    rate: f64,
    slices: usize,
) -> Result<pepc_bench::attach::AttachResult, DemoError> {
    bench_attach_udp_hss(ports, attaches, rate, slices, None)
}

/// [`bench_attach_udp`] with the HSS reached over Diameter S6a at `hss_peer`
/// ("host:port", realm "test"); the result then holds the proxy's figures.
pub fn bench_attach_udp_hss(
    ports: &DemoPorts,
    attaches: u32,
    rate: f64,
    slices: usize,
    hss_peer: Option<&str>,
) -> Result<pepc_bench::attach::AttachResult, DemoError> {
    let hss = match hss_peer {
        None => String::new(),
        // Each UE's attach asks the HSS twice (ULR, AIR): a timeout well above a
        // slow test HSS's queue at the start of a storm.
        Some(p) => format!(
            "mode = \"diameter\"\npeers = [\"{p}\"]\ndestination_realm = \"test\"\n\
             request_timeout_ms = 10000\n[mme]\nhss_timeout_ms = 30000\n"
        ),
    };
    let epc = start_node_with(ports, attaches, slices, &hss)?;
    let gauges = epc.gauges.clone();
    let cpu0 = thread_cpu_by_name("pepc-ctl");
    let ep0 = thread_cpu_by_name("pepc-s1ap");
    let px0 = thread_cpu_by_name("pepc-s6a");
    let ecfg = EmulatorConfig {
        enbs: 4,
        progress: false,
        ..ports.emulator()
    };
    let scen = Scenario {
        ues: attaches,
        attach_rate: rate,
        duration_s: 0.0,
        event_rate: 0.0,
        detach_at_end: false,
        drain_s: 0.0,
        traffic: Traffic {
            profile: TrafficProfile::None,
            rate_pps: 0.0,
        },
        ..Default::default()
    };
    let report = pepc_emulator::run(ecfg, scen);
    let cpu = thread_cpu_by_name("pepc-ctl") - cpu0;
    let ep_cpu = thread_cpu_by_name("pepc-s1ap") - ep0;
    let px_cpu = thread_cpu_by_name("pepc-s6a") - px0;
    epc.stop();
    let requests: u64 = gauges
        .iter()
        .filter_map(|g| g.final_stats.lock().ok().and_then(|s| s.clone()))
        .map(|s| s.hss_requests)
        .sum();
    let r = report?;
    let (ok, failed, p50, p99) = r
        .procedures
        .get("attach")
        .map(|a| (a.ok, a.failed, a.p50_us, a.p99_us))
        .unwrap_or_default();
    let seconds = r.duration_s;
    Ok(pepc_bench::attach::AttachResult {
        state: None,
        transport: "sctp-udp".into(),
        attaches: ok,
        failed,
        seconds,
        attaches_per_s: ok as f64 / seconds.max(1e-9),
        attaches_per_mme_core_s: ok as f64 / cpu.max(1e-9),
        mme_cpu_s: cpu,
        completion_us_p50: p50 as f64,
        completion_us_p99: p99 as f64,
        s1ap_messages_per_attach: None,
        mme_page_faults_per_attach: None,
        mme_kernel_share: None,
        mme_wait_cpu_s: None,
        prewarmed_users: None,
        per_core_runs: vec![],
        slices,
        demux_ns_per_msg: None,
        endpoint_cpu_s: (slices > 1).then_some(ep_cpu),
        attaches_per_signaling_core_s: Some(ok as f64 / (cpu + ep_cpu).max(1e-9)),
        checkpoint: None,
        diameter: hss_peer.map(|p| pepc_bench::attach::DiameterFigures {
            peer: p.to_string(),
            requests,
            proxy_cpu_s: px_cpu,
            requests_per_proxy_core_s: requests as f64 / px_cpu.max(1e-9),
            proxy_us_per_attach: px_cpu * 1e6 / ok.max(1) as f64,
        }),
        record_bytes_per_attach: None,
    })
}
