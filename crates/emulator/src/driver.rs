//! The thin I/O driver: S1-MME associations (one per eNB), the shared S1-U socket, the
//! PDN-side UDP socket, the scenario clock, and the metrics. Single-threaded: every
//! socket is non-blocking and the loop ticks about once a millisecond.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use pepc_s1ap::{EnbId, GlobalEnbId, PagingIdentity, Plmn, STmsi};
use pepc_sctp::{AssocId, S1Transport, TransportEvent, S1AP_PPID};
use pepc_security::Key128;
use pepc_wire::gtpu::{GtpuPacket, G_PDU};

use crate::config::{EmulatorConfig, Scenario, SctpMode, SgiMode, TrafficProfile};
use crate::enb::{Bearer, Enb, EnbConfig, EnbInput, EnbOutput, UeId};
use crate::io::{BatchUdp, Tun, TxQueue};
use crate::report::{Metrics, Report};
use crate::ue::{Failure, Procedure, Ue, UeConfig, UeInput, UeOutput};
use crate::EmuError;

const MAGIC: [u8; 4] = *b"PEMU";
const END_MARKER: u8 = 254;
const UE_PORT: u16 = 40000;
const SERVER_PORT: u16 = 5001;

/// xorshift64*: deterministic choices without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One packet class: size and share of its direction's packets.
#[derive(Clone, Copy)]
struct Class {
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

fn classes(p: TrafficProfile) -> (f64, Vec<Class>, Vec<Class>) {
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

fn pick(cls: &[Class], rng: &mut Rng) -> usize {
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
struct Flow {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
}

/// Attaches started per turn of the storm loop at most.
const ATTACH_BATCH: usize = 1024;

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
fn write_ip_packet(out: &mut Vec<u8>, f: Flow, len: usize, ue: u32, seq: u32) {
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
fn our_packet(ip: &[u8]) -> Option<u32> {
    if ip.len() >= 40 && ip[0] >> 4 == 4 && ip[9] == 17 && ip[28..32] == MAGIC {
        Some(u32::from_be_bytes([ip[32], ip[33], ip[34], ip[35]]))
    } else {
        None
    }
}

/// How often timeouts, the busy flag and the traffic candidates are recomputed.
const SCAN_EVERY: Duration = Duration::from_millis(5);
/// What follows a quiet time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quiet {
    /// PDN Disconnect of this default bearer.
    Pdn(u8),
    /// eNB-initiated release (user inactivity).
    Release,
}

/// Quiet time on a PDN connection (or a UE) before it is disconnected (released).
const QUIESCE: Duration = Duration::from_millis(30);

/// The PDN side: where uplink packets leave the EPC and downlink ones enter it.
enum Pdn {
    /// Userspace sink: IP packets as UDP datagrams to/from the EPC's SGi socket.
    Udp(BatchUdp),
    /// Kernel-routed TUN device owning the server address.
    Tun(Tun),
}

impl Pdn {
    fn open(cfg: &EmulatorConfig) -> Result<Pdn, EmuError> {
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

struct Link {
    transport: Box<dyn S1Transport>,
    /// association -> eNB index
    assocs: HashMap<AssocId, usize>,
}

/// Drives many eNBs and UEs against one EPC.
pub struct Emulator {
    cfg: EmulatorConfig,
    scen: Scenario,
    links: Vec<Link>,
    /// eNB index -> (link, association)
    enb_assoc: Vec<Option<(usize, AssocId)>>,
    enbs: Vec<Enb>,
    ues: Vec<Ue>,
    serving: Vec<usize>,
    tunnels: Vec<Vec<Bearer>>,
    teids: HashMap<u32, UeId>,
    tmsi: HashMap<u32, UeId>,
    reattach: Vec<bool>,
    /// Idle UEs sent downlink (paging event) that have not been connected since: the
    /// EPC holds their packets, so a detach now would discard them by design.
    /// Downlink packets sent to each UE while idle and not received yet: the EPC
    /// holds them across paging, so the UE must not detach (which discards them by
    /// design) until they arrive.
    awaiting_dl: Vec<u32>,
    s1ho_target: HashMap<UeId, usize>,
    /// PDN connections about to be disconnected: (UE, default EBI, when). Traffic on
    /// them stops first so no packet is in flight when the EPC removes the PDN (a
    /// packet racing its PDN's removal would be lost by design, not by fault).
    closing: Vec<(usize, Quiet, Instant)>,
    /// UEs paged while busy with another procedure: they answer once it is over.
    paged: Vec<usize>,
    gtpu: BatchUdp,
    pdn: Pdn,
    ul_q: TxQueue,
    dl_q: TxQueue,
    /// UEs that may send traffic now, refreshed every few milliseconds.
    active: Vec<usize>,
    active_at: Option<Instant>,
    scan_at: Option<Instant>,
    any_busy: bool,
    sgi_peer: Option<SocketAddr>,
    metrics: Metrics,
    rng: Rng,
    start: Instant,
    ever_attached: Vec<bool>,
    seq: u32,
    enb_out: Vec<EnbOutput>,
    ue_out: Vec<UeOutput>,
}

impl Emulator {
    /// Builds the eNBs and UEs and binds the sockets; nothing is sent yet.
    pub fn new(cfg: EmulatorConfig, scen: Scenario) -> Result<Emulator, EmuError> {
        let plmn = Plmn::from_mcc_mnc(&cfg.mcc, &cfg.mnc)
            .map_err(|e| EmuError::Config(format!("PLMN: {e}")))?;
        let k = Key128::from_hex(&cfg.subscribers.k)
            .map_err(|e| EmuError::Config(format!("K: {e}")))?;
        let opc = Key128::from_hex(&cfg.subscribers.opc)
            .map_err(|e| EmuError::Config(format!("OPc: {e}")))?;
        if cfg.enbs == 0 || cfg.enbs > 4095 {
            return Err(EmuError::Config("enbs must be 1..=4095".into()));
        }
        scen.validate()?;
        let gtpu = BatchUdp::bind(SocketAddr::V4(cfg.gtpu_addr))
            .map_err(|e| EmuError::Io(format!("bind S1-U {}: {e}", cfg.gtpu_addr)))?;
        let pdn = Pdn::open(&cfg)?;
        let enbs: Vec<Enb> = (0..cfg.enbs)
            .map(|i| {
                Enb::new(EnbConfig {
                    index: i,
                    global_enb_id: GlobalEnbId {
                        plmn,
                        enb_id: EnbId::Macro((cfg.enb_id_start + i) & 0xf_ffff),
                    },
                    plmn,
                    tac: cfg.tac,
                    cell_id: ((cfg.enb_id_start + i) & 0xf_ffff) << 8 | 1,
                    gtpu_addr: *cfg.gtpu_addr.ip(),
                    name: format!("pepc-emu-enb{i}"),
                    out_streams: 2,
                })
            })
            .collect();
        let timeout_ns = scen.timeout().as_nanos() as u64;
        let mut rng = Rng(scen.seed | 1);
        let mut ues = Vec::with_capacity(scen.ues as usize);
        for i in 0..scen.ues {
            let imsi = cfg
                .subscribers
                .imsi(i)
                .ok_or_else(|| EmuError::Config("IMSI range overflows 15 digits".into()))?;
            ues.push(Ue::new(
                UeConfig {
                    imsi,
                    k: k.clone(),
                    opc: *opc.as_bytes(),
                    plmn: plmn.0,
                    tac: cfg.tac,
                    apn: cfg.apn.clone(),
                    iot: rng.unit() < scen.iot_share,
                    sqn_ms: cfg.subscribers.sqn_ms,
                },
                timeout_ns,
            ));
        }
        let n = ues.len();
        let sgi_peer = cfg.sgi_peer;
        Ok(Emulator {
            links: Vec::new(),
            enb_assoc: vec![None; enbs.len()],
            serving: (0..n).map(|i| i % enbs.len()).collect(),
            tunnels: vec![Vec::new(); n],
            teids: HashMap::new(),
            tmsi: HashMap::new(),
            reattach: vec![false; n],
            awaiting_dl: vec![0; n],
            s1ho_target: HashMap::new(),
            closing: Vec::new(),
            paged: Vec::new(),
            enbs,
            ues,
            gtpu,
            pdn,
            ul_q: TxQueue::default(),
            dl_q: TxQueue::default(),
            active: Vec::new(),
            active_at: None,
            scan_at: None,
            any_busy: false,
            sgi_peer,
            metrics: Metrics::default(),
            rng,
            start: Instant::now(),
            ever_attached: vec![false; n],
            seq: 0,
            enb_out: Vec::new(),
            ue_out: Vec::new(),
            cfg,
            scen,
        })
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The UEs (for inspection after a run).
    pub fn ues(&self) -> &[Ue] {
        &self.ues
    }

    fn connect(&mut self) -> Result<(), EmuError> {
        let remote_udp = SocketAddr::new(self.cfg.mme_ip, self.cfg.mme_udp_port);
        let assoc_cfg = pepc_sctp::Config::default();
        match self.cfg.sctp {
            SctpMode::Udp => {
                let mut t = pepc_sctp::UdpSctpTransport::connect(
                    SocketAddr::new(self.cfg.local_ip, 0),
                    remote_udp,
                    self.cfg.mme_sctp_port,
                    assoc_cfg,
                )?;
                // `connect` opened the first association; one more per further eNB.
                let mut ids = vec![0u64; self.enbs.len()];
                let mut assocs = HashMap::new();
                for (i, id) in ids.iter_mut().enumerate().skip(1) {
                    *id = t.open_association()?;
                    assocs.insert(*id, i);
                }
                self.links.push(Link {
                    transport: Box::new(t),
                    assocs,
                });
                // The first association's id is learnt from its Up event.
            }
            SctpMode::Kernel => {
                #[cfg(target_os = "linux")]
                for i in 0..self.enbs.len() {
                    let remote = SocketAddr::new(self.cfg.mme_ip, self.cfg.mme_sctp_port);
                    let t = pepc_sctp::KernelSctpTransport::connect(
                        SocketAddr::new(self.cfg.local_ip, 0),
                        remote,
                        &assoc_cfg,
                    )?;
                    let _ = i;
                    self.links.push(Link {
                        transport: Box::new(t),
                        assocs: HashMap::new(),
                    });
                }
                #[cfg(not(target_os = "linux"))]
                return Err(EmuError::Io(
                    "kernel SCTP is only available on Linux".into(),
                ));
            }
        }
        Ok(())
    }

    /// Poll every link once; route events to eNBs.
    fn poll_s1(&mut self, wait: Duration) -> Result<(), EmuError> {
        let mut events = Vec::new();
        let nlinks = self.links.len();
        for li in 0..nlinks {
            let w = if li == 0 { wait } else { Duration::ZERO };
            self.links[li].transport.poll(w, &mut events)?;
            for ev in events.drain(..) {
                match ev {
                    TransportEvent::Up {
                        assoc, out_streams, ..
                    } => {
                        // Unknown association: the first of a UDP link, or a kernel link's.
                        let enb = match self.links[li].assocs.get(&assoc) {
                            Some(&e) => e,
                            None => {
                                let e = if self.cfg.sctp == SctpMode::Kernel {
                                    li
                                } else {
                                    0
                                };
                                self.links[li].assocs.insert(assoc, e);
                                e
                            }
                        };
                        self.enb_assoc[enb] = Some((li, assoc));
                        self.enbs[enb].set_out_streams(out_streams);
                        let mut out = std::mem::take(&mut self.enb_out);
                        self.enbs[enb].s1_setup(&mut out);
                        self.enb_outputs(enb, &mut out);
                        self.enb_out = out;
                    }
                    TransportEvent::Data {
                        assoc, ppid, data, ..
                    } => {
                        if ppid != S1AP_PPID && ppid != 0 {
                            self.metrics.error("non-S1AP PPID");
                            continue;
                        }
                        let Some(&enb) = self.links[li].assocs.get(&assoc) else {
                            continue;
                        };
                        let mut out = std::mem::take(&mut self.enb_out);
                        self.enbs[enb].handle(EnbInput::S1ap(data), &mut out);
                        self.enb_outputs(enb, &mut out);
                        self.enb_out = out;
                    }
                    TransportEvent::Down { assoc, reason } => {
                        if let Some(&enb) = self.links[li].assocs.get(&assoc) {
                            self.metrics
                                .error(&format!("S1 association down: {reason}"));
                            self.enbs[enb].reset();
                            self.enb_assoc[enb] = None;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), EmuError> {
        for l in &mut self.links {
            l.transport.flush()?;
        }
        Ok(())
    }

    fn enb_outputs(&mut self, enb: usize, out: &mut Vec<EnbOutput>) {
        let now = self.now_ns();
        for o in out.drain(..) {
            match o {
                EnbOutput::S1ap { stream, pdu } => {
                    if let Some((li, a)) = self.enb_assoc[enb] {
                        if let Err(e) = self.links[li].transport.send(a, stream, S1AP_PPID, &pdu) {
                            self.metrics.error(&format!("S1 send: {e}"));
                        }
                    }
                }
                EnbOutput::Nas { ue, nas } => self.ue_input(ue as usize, UeInput::Nas(nas), now),
                EnbOutput::SetupDone { ok, cause } => {
                    if !ok {
                        self.metrics.error(&format!("S1 Setup failed: {cause:?}"));
                    }
                }
                EnbOutput::TunnelUp { ue, bearer } => {
                    let t = &mut self.tunnels[ue as usize];
                    t.retain(|b| b.erab_id != bearer.erab_id);
                    t.push(bearer);
                    self.teids.insert(bearer.dl_teid, ue);
                }
                EnbOutput::TunnelDown {
                    ue,
                    erab_id,
                    dl_teid,
                } => {
                    // Keep the TEID mapping: end markers and late packets still count.
                    let _ = dl_teid;
                    if self.serving[ue as usize] == enb {
                        self.tunnels[ue as usize].retain(|b| b.erab_id != erab_id);
                    }
                }
                EnbOutput::Released { ue, cause } => {
                    let u = ue as usize;
                    if self.serving[u] != enb || cause == pepc_s1ap::Cause::SUCCESSFUL_HANDOVER {
                        // The old source let go after an S1 handover.
                        if self.ues[u].busy() {
                            let mut uo = std::mem::take(&mut self.ue_out);
                            self.ues[u].end_external(Ok(()), &mut uo);
                            self.ue_outputs(u, &mut uo);
                            self.ue_out = uo;
                        }
                    } else {
                        self.tunnels[u].clear();
                        self.ue_input(u, UeInput::Released, now);
                        if self.reattach[u] {
                            self.reattach[u] = false;
                            self.ue_input(u, UeInput::Attach, now);
                        }
                    }
                }
                EnbOutput::Paging(id) => {
                    let ue = match id {
                        PagingIdentity::STmsi(STmsi { m_tmsi, .. }) => {
                            self.tmsi.get(&m_tmsi).copied()
                        }
                        PagingIdentity::Imsi(_) => None,
                    };
                    if let Some(u) = ue {
                        let u = u as usize;
                        self.metrics.pagings += 1;
                        if !self.ues[u].is_connected() && !self.ues[u].busy() {
                            self.ue_input(u, UeInput::Paged, now);
                        } else if self.ues[u].busy() && !self.paged.contains(&u) {
                            self.paged.push(u);
                        }
                    }
                }
                EnbOutput::ContextSetup { ue } => {
                    self.ue_input(ue as usize, UeInput::ContextSetup, now)
                }
                EnbOutput::PathSwitched { ue, ok, .. } => {
                    let u = ue as usize;
                    let mut uo = std::mem::take(&mut self.ue_out);
                    let r = if ok {
                        Ok(())
                    } else {
                        Err(Failure::Protocol("path switch failed".into()))
                    };
                    self.ues[u].end_external(r, &mut uo);
                    self.ue_outputs(u, &mut uo);
                    self.ue_out = uo;
                    if !ok {
                        self.ue_input(u, UeInput::Released, now);
                    }
                }
                EnbOutput::HandoverCommand { ue } => {
                    // The UE moves to the target cell now.
                    if let Some(t) = self.s1ho_target.remove(&ue) {
                        self.serving[ue as usize] = t;
                        let mut o2 = Vec::new();
                        self.enbs[t].handle(EnbInput::UeArrived { ue }, &mut o2);
                        self.enb_outputs(t, &mut o2);
                    }
                }
                EnbOutput::HandoverFailed { ue, cause } => {
                    self.s1ho_target.remove(&ue);
                    let u = ue as usize;
                    let mut uo = std::mem::take(&mut self.ue_out);
                    self.ues[u].end_external(
                        Err(Failure::Protocol(format!(
                            "handover preparation: {cause:?}"
                        ))),
                        &mut uo,
                    );
                    self.ue_outputs(u, &mut uo);
                    self.ue_out = uo;
                }
                EnbOutput::HandoverPrepared { .. } => {}
                EnbOutput::Error(e) => self.metrics.error(&e),
                EnbOutput::Overload { on } => {
                    if on {
                        self.metrics.back_off.overload_starts += 1;
                    } else {
                        self.metrics.back_off.overload_stops += 1;
                    }
                }
                EnbOutput::RrcReject { ue } => {
                    self.metrics.back_off.rrc_rejects += 1;
                    // Each UE waits a different share of the wait time (half to all
                    // of it), so the retries do not come back as one burst.
                    let full = self.cfg.rrc_wait_ms.max(1) * 1_000_000;
                    let h = (u64::from(ue) ^ now).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 33;
                    let wait_ns = full / 2 + h % (full / 2).max(1);
                    self.ue_input(ue as usize, UeInput::RrcRejected { wait_ns }, now);
                }
            }
        }
    }

    fn ue_input(&mut self, u: usize, input: UeInput, now: u64) {
        let mut uo = std::mem::take(&mut self.ue_out);
        self.ues[u].handle(input, now, &mut uo);
        self.ue_outputs(u, &mut uo);
        self.ue_out = uo;
    }

    fn ue_outputs(&mut self, u: usize, out: &mut Vec<UeOutput>) {
        let now = self.now_ns();
        let items: Vec<UeOutput> = std::mem::take(out);
        for o in items {
            match o {
                UeOutput::Uplink {
                    nas,
                    s_tmsi,
                    rrc_cause,
                } => {
                    let enb = self.serving[u];
                    let mut eo = Vec::new();
                    self.enbs[enb].handle(
                        EnbInput::UplinkNas {
                            ue: u as UeId,
                            nas,
                            s_tmsi: s_tmsi.map(|(mmec, m_tmsi)| STmsi { mmec, m_tmsi }),
                            rrc_cause,
                        },
                        &mut eo,
                    );
                    self.enb_outputs(enb, &mut eo);
                }
                UeOutput::Done {
                    procedure,
                    started_ns,
                    result,
                } => {
                    let took = now.saturating_sub(started_ns) / 1000;
                    self.metrics.record(procedure, took, &result);
                    if procedure == Procedure::Attach && result.is_ok() {
                        self.ever_attached[u] = true;
                        if let Some((_, t)) = self.ues[u].s_tmsi() {
                            self.tmsi.insert(t, u as UeId);
                        }
                    }
                }
                UeOutput::BackOff { wait_ns, t3346, .. } => {
                    let b = &mut self.metrics.back_off;
                    if t3346 {
                        b.t3346_rejects += 1;
                    }
                    let ms = wait_ns / 1_000_000;
                    b.waited_ms += ms;
                    b.longest_ms = b.longest_ms.max(ms);
                }
                UeOutput::Address { .. }
                | UeOutput::BearerUp { .. }
                | UeOutput::BearerDown { .. } => {}
            }
        }
    }

    /// Procedure timeouts and the "anything under way" flag: one pass over the UEs
    /// every few milliseconds rather than every loop turn (10K UEs x 1000 turns/s).
    fn scan(&mut self, force: bool) {
        // A pass costs ~5 ns per UE: with a million of them, every 5 ms would be all
        // the emulator does. Timeouts are seconds; 50 ns of interval per UE is plenty.
        let every = SCAN_EVERY.max(Duration::from_nanos(50 * self.ues.len() as u64));
        if !force && self.scan_at.is_some_and(|t| t.elapsed() < every) {
            return;
        }
        self.scan_at = Some(Instant::now());
        let now = self.now_ns();
        let mut busy = false;
        for u in 0..self.ues.len() {
            if self.ues[u].poll_timeout().is_some_and(|d| d <= now) {
                let mut uo = std::mem::take(&mut self.ue_out);
                self.ues[u].handle_timeout(now, &mut uo);
                self.ue_outputs(u, &mut uo);
                self.ue_out = uo;
            }
            busy |= self.ues[u].busy();
        }
        self.any_busy = busy;
    }

    /// Receive on the S1-U and PDN sides.
    fn poll_data(&mut self) {
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
    fn flush_data(&mut self) {
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
    fn downlink_to_idle(&mut self, u: usize) {
        let Some(&(_, addr)) = self.ues[u].pdns().first() else {
            return;
        };
        self.awaiting_dl[u] += 3;
        for _ in 0..3 {
            self.seq = self.seq.wrapping_add(1);
            let seq = self.seq;
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
                            .push_with(peer, |b| write_ip_packet(b, flow, 64, u as u32, seq));
                    }
                }
                Pdn::Tun(t) => {
                    let p = ip_packet(
                        flow.src, flow.dst, flow.sport, flow.dport, 64, u as u32, seq,
                    );
                    self.metrics.dl_sent += 1;
                    if !t.write(&p) {
                        self.metrics.error("TUN write failed");
                    }
                }
            }
        }
    }

    fn refresh_active(&mut self) {
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
    fn send_traffic(&mut self, n: usize, ul_frac: f64, ul: &[Class], dl: &[Class]) {
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
                let flow = Flow {
                    src: self.cfg.server_ip,
                    dst: addr,
                    sport: SERVER_PORT,
                    dport: UE_PORT,
                };
                match &self.pdn {
                    Pdn::Udp(_) => {
                        let Some(SocketAddr::V4(peer)) = self.sgi_peer else {
                            continue;
                        };
                        self.dl_q
                            .push_with(peer, |buf| write_ip_packet(buf, flow, size, u as u32, seq));
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
        }
    }

    /// Like `pick_ue`, for a filter that needs emulator state beyond the UE itself.
    fn pick_ue_where(&mut self, f: impl Fn(&Emulator, usize) -> bool) -> Option<usize> {
        let n = self.ues.len();
        if n == 0 {
            return None;
        }
        let start = self.rng.below(n);
        (0..n).map(|i| (start + i) % n).find(|&u| f(self, u))
    }

    fn pick_ue(&mut self, f: impl Fn(&Ue) -> bool) -> Option<usize> {
        let n = self.ues.len();
        if n == 0 {
            return None;
        }
        let start = self.rng.below(n);
        (0..n).map(|i| (start + i) % n).find(|&u| f(&self.ues[u]))
    }

    /// One signalling event of the mix.
    fn event(&mut self) {
        let m = self.scen.mix.clone();
        let w = [
            m.attach,
            m.add_default_bearer,
            m.dedicated_bearer,
            m.idle_to_connected,
            m.connected_to_idle,
            m.x2_handover,
            m.s1_handover,
            m.tau,
            m.paging,
        ];
        let total: f64 = w.iter().sum();
        if total <= 0.0 {
            return;
        }
        let mut x = self.rng.unit() * total;
        let mut k = 0;
        for (i, v) in w.iter().enumerate() {
            if x < *v {
                k = i;
                break;
            }
            x -= v;
        }
        let now = self.now_ns();
        let nenb = self.enbs.len();
        // Stateless IoT devices keep out of the signalling mix.
        let idle = |u: &Ue| !u.is_iot() && u.is_registered() && !u.is_connected() && !u.busy();
        let conn = |u: &Ue| !u.is_iot() && u.is_registered() && u.is_connected() && !u.busy();
        let done = match k {
            0 => match self.pick_ue(|u| !u.is_iot() && !u.is_registered() && !u.busy()) {
                Some(u) => {
                    self.ue_input(u, UeInput::Attach, now);
                    true
                }
                // Detach (switch-off) then attach again once released. Not a UE the
                // EPC holds paged downlink for: its Delete Session would discard the
                // buffered packets, a drop by design the report would count as lost.
                None => match self.pick_ue_where(|e, u| idle(&e.ues[u]) && e.awaiting_dl[u] == 0) {
                    Some(u) => {
                        self.ue_input(u, UeInput::Detach { switch_off: true }, now);
                        self.reattach[u] = true;
                        true
                    }
                    None => false,
                },
            },
            1 => match self.pick_ue(conn) {
                Some(u) => {
                    let extra = self.ues[u].pdns().get(1).map(|p| p.0);
                    match extra {
                        Some(ebi) => {
                            if !self.closing.iter().any(|c| c.0 == u) {
                                self.closing
                                    .push((u, Quiet::Pdn(ebi), Instant::now() + QUIESCE));
                            }
                        }
                        None => {
                            let apn = self.scen.extra_apn.clone();
                            self.ue_input(u, UeInput::PdnConnect { apn }, now)
                        }
                    }
                    true
                }
                None => false,
            },
            2 => match self.pick_ue(|u| conn(u) && !u.pdns().is_empty()) {
                Some(u) => {
                    let ue = &self.ues[u];
                    let input = match ue.dedicated().first() {
                        Some(&(ebi, _)) => UeInput::BearerResourceRelease { ebi },
                        None => {
                            let pdns = ue.pdns();
                            let linked_ebi = pdns[self.rng.below(pdns.len())].0;
                            UeInput::BearerResourceAllocation { linked_ebi }
                        }
                    };
                    self.ue_input(u, input, now);
                    true
                }
                None => false,
            },
            3 => match self.pick_ue(idle) {
                Some(u) => {
                    self.ue_input(u, UeInput::ServiceRequest, now);
                    true
                }
                None => false,
            },
            // User inactivity: the UE's traffic stops, the release follows after a
            // quiet time (so no packet is in flight when the S1 connection goes).
            4 => match self.pick_ue(conn) {
                Some(u) if !self.closing.iter().any(|c| c.0 == u) => {
                    self.closing
                        .push((u, Quiet::Release, Instant::now() + QUIESCE));
                    true
                }
                _ => false,
            },
            5 if nenb > 1 => match self.pick_ue(conn) {
                Some(u) => {
                    let src = self.serving[u];
                    let dst = (src + 1) % nenb;
                    if self.enb_assoc[dst].is_none() {
                        return self.metrics.skipped += 1;
                    }
                    match self.enbs[src].x2_take(u as UeId) {
                        Some(ctx) => {
                            self.ues[u].begin_external(Procedure::X2Handover, now);
                            self.serving[u] = dst;
                            let mut eo = Vec::new();
                            self.enbs[dst].handle(EnbInput::X2HandoverIn(ctx), &mut eo);
                            self.enb_outputs(dst, &mut eo);
                            true
                        }
                        None => false,
                    }
                }
                None => false,
            },
            6 if nenb > 1 => match self.pick_ue(conn) {
                Some(u) => {
                    let src = self.serving[u];
                    let dst = (src + 1) % nenb;
                    match self.enbs[src].mme_ue_id(u as UeId) {
                        Some(mme) if self.enb_assoc[dst].is_some() => {
                            self.ues[u].begin_external(Procedure::S1Handover, now);
                            self.s1ho_target.insert(u as UeId, dst);
                            let t = self.enbs[dst].config().clone();
                            let mut eo = Vec::new();
                            self.enbs[dst].handle(
                                EnbInput::ExpectHandover {
                                    ue: u as UeId,
                                    mme_ue_id: mme,
                                },
                                &mut eo,
                            );
                            self.enbs[src].handle(
                                EnbInput::StartS1Handover {
                                    ue: u as UeId,
                                    target: t.global_enb_id,
                                    target_tai: t.tai(),
                                },
                                &mut eo,
                            );
                            self.enb_outputs(src, &mut eo);
                            true
                        }
                        _ => false,
                    }
                }
                None => false,
            },
            7 => match self.pick_ue(|u| !u.is_iot() && u.is_registered() && !u.busy()) {
                Some(u) => {
                    // Idle UEs: periodic, or normal with the active flag (uplink data
                    // pending: the MME sets the bearers up); connected UEs: normal.
                    let idle = !self.ues[u].is_connected();
                    let periodic = idle && self.rng.unit() < 0.5;
                    let active = idle && !periodic;
                    self.ue_input(u, UeInput::Tau { periodic, active }, now);
                    true
                }
                None => false,
            },
            // A UE still waiting for downlink it was paged for is not sent more (the
            // EPC's per-UE buffer is bounded, and that is not what this event tests).
            8 => match self.pick_ue_where(|e, u| {
                idle(&e.ues[u]) && !e.ues[u].pdns().is_empty() && e.awaiting_dl[u] == 0
            }) {
                Some(u) => {
                    self.downlink_to_idle(u);
                    true
                }
                None => false,
            },
            // Handovers need two eNBs.
            _ => false,
        };
        if !done {
            self.metrics.skipped += 1;
        }
    }

    fn progress(&self, last: &mut Instant, prev: &mut (u64, u64, u64)) {
        if !self.cfg.progress || last.elapsed() < Duration::from_secs(1) {
            return;
        }
        let dt = last.elapsed().as_secs_f64();
        *last = Instant::now();
        let attached = self.ues.iter().filter(|u| u.is_registered()).count();
        let a = self.metrics.ok(Procedure::Attach);
        let failed = self.metrics.total_failures() + self.metrics.errors.values().sum::<u64>();
        // A 20-cell bar of the UEs registered right now.
        let filled = (attached * 20).checked_div(self.ues.len()).unwrap_or(0);
        let bar: String = (0..20)
            .map(|i| if i < filled { '#' } else { '.' })
            .collect();
        eprintln!(
            "[{:>6.1}s] [{bar}] attached {attached}/{}  attach/s {:.0}  ul {:.0} pps  dl {:.0} pps  failures {failed}",
            self.start.elapsed().as_secs_f64(),
            self.ues.len(),
            (a - prev.0) as f64 / dt,
            (self.metrics.ul_packets - prev.1) as f64 / dt,
            (self.metrics.dl_packets - prev.2) as f64 / dt,
        );
        *prev = (a, self.metrics.ul_packets, self.metrics.dl_packets);
    }

    /// One loop turn: S1 in, timers, data in, S1 out.
    fn turn(&mut self, wait: Duration) -> Result<(), EmuError> {
        self.poll_s1(wait)?;
        self.scan(false);
        self.close_pdns();
        if !self.paged.is_empty() {
            self.answer_pages();
        }
        self.poll_data();
        self.flush_data();
        self.flush()
    }

    /// Pages that came while the UE was busy: answered once it is idle and free (a
    /// UE that got connected meanwhile has its bearers already).
    fn answer_pages(&mut self) {
        let now = self.now_ns();
        let mut i = 0;
        while i < self.paged.len() {
            let u = self.paged[i];
            if self.ues[u].busy() {
                i += 1;
                continue;
            }
            self.paged.swap_remove(i);
            if self.ues[u].is_registered() && !self.ues[u].is_connected() {
                self.ue_input(u, UeInput::Paged, now);
            }
        }
    }

    /// Quiet times that are over: PDN Disconnect or release (a busy UE waits).
    fn close_pdns(&mut self) {
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

    /// No procedure under way (re-checked now when the periodic scan says so).
    fn all_idle(&mut self) -> bool {
        if self.any_busy {
            return false;
        }
        self.scan(true);
        !self.any_busy
    }

    /// Run the scenario to its end and report.
    pub fn run(self) -> Result<Report, EmuError> {
        self.run_observed(&mut || {})
    }

    /// [`Self::run`], calling `attach_phase_done` once the attach storm has settled
    /// (before the steady state), so a caller can look at the EPC then.
    pub fn run_observed(mut self, attach_phase_done: &mut dyn FnMut()) -> Result<Report, EmuError> {
        self.start = Instant::now();
        self.connect()?;
        let tick = Duration::from_millis(1);
        let timeout = self.scen.timeout();
        let mut last = Instant::now();
        let mut prev = (0, 0, 0);

        // Phase 1: S1 Setup on every association.
        let deadline = Instant::now() + timeout;
        while self.enbs.iter().any(|e| !e.is_setup()) && Instant::now() < deadline {
            self.turn(tick)?;
        }
        if !self.enbs.iter().any(|e| e.is_setup()) {
            return Err(EmuError::Setup(format!(
                "no eNB completed S1 Setup with {}:{} within {:?}",
                self.cfg.mme_ip, self.cfg.mme_udp_port, timeout
            )));
        }

        // Phase 2: attach storm.
        let t0 = Instant::now();
        let rate = self.scen.attach_rate.max(0.001);
        let mut next = 0usize;
        let n = self.ues.len();
        loop {
            let due = ((t0.elapsed().as_secs_f64() * rate) as usize + 1).min(n);
            let now = self.now_ns();
            // At most a batch per turn: the answers to earlier attaches are read
            // between batches, as a RAN would, however high the offered rate.
            let mut batch = 0;
            while next < due && batch < ATTACH_BATCH {
                if self.enbs[self.serving[next]].is_setup() {
                    self.ue_input(next, UeInput::Attach, now);
                }
                next += 1;
                batch += 1;
            }
            self.turn(tick)?;
            self.progress(&mut last, &mut prev);
            if next >= n && self.all_idle() {
                break;
            }
            // Back-offs (overload control) stretch the phase by up to the longest one.
            let backoff = Duration::from_millis(self.metrics.back_off.longest_ms);
            if t0.elapsed() > Duration::from_secs_f64(n as f64 / rate) + timeout * 2 + backoff * 2 {
                break;
            }
        }
        let attached = self.ues.iter().filter(|u| u.is_registered()).count() as u64;
        let failed = n as u64 - attached;
        attach_phase_done();

        // Phase 3: steady state (signalling mix and data).
        let (ul_frac, ul, dl) = classes(self.scen.traffic.profile);
        let t1 = Instant::now();
        let dur = Duration::from_secs_f64(self.scen.duration_s.max(0.0));
        let mut events_done = 0u64;
        let mut pkts_done = 0u64;
        while t1.elapsed() < dur {
            let el = t1.elapsed().as_secs_f64();
            let ev_due = (el * self.scen.event_rate) as u64;
            while events_done < ev_due {
                self.event();
                events_done += 1;
            }
            if !ul.is_empty() {
                let due = (el * self.scen.traffic.rate_pps) as u64;
                if due > pkts_done {
                    let k = (due - pkts_done).min(10_000) as usize;
                    self.send_traffic(k, ul_frac, &ul, &dl);
                    pkts_done = due;
                }
            }
            self.turn(tick)?;
            self.progress(&mut last, &mut prev);
        }
        // Let procedures and packets in flight finish, and paged downlink be delivered
        // (its UE's Service Request done) before the final detach, which would make the
        // EPC discard it by design.
        let drain = Instant::now() + Duration::from_secs_f64(self.scen.drain_s.max(0.0));
        while Instant::now() < drain
            || ((!self.all_idle() || self.awaiting_dl.iter().any(|&a| a > 0))
                && Instant::now() < drain + timeout)
        {
            self.turn(tick)?;
        }

        // Phase 4: detach.
        if self.scen.detach_at_end {
            let t2 = Instant::now();
            let mut next = 0usize;
            loop {
                let due = ((t2.elapsed().as_secs_f64() * rate) as usize + 1).min(n);
                let now = self.now_ns();
                while next < due {
                    let u = next;
                    next += 1;
                    self.reattach[u] = false;
                    if self.ues[u].is_registered() && !self.ues[u].busy() {
                        let so = self.scen.switch_off;
                        self.ue_input(u, UeInput::Detach { switch_off: so }, now);
                    }
                }
                self.turn(tick)?;
                self.progress(&mut last, &mut prev);
                if next >= n && self.all_idle() {
                    break;
                }
                if t2.elapsed() > Duration::from_secs_f64(n as f64 / rate) + timeout * 2 {
                    break;
                }
            }
            // Releases after detach.
            let end = Instant::now() + Duration::from_millis(200);
            while Instant::now() < end {
                self.turn(tick)?;
            }
        }
        for l in &mut self.links {
            let ids: Vec<AssocId> = l.assocs.keys().copied().collect();
            for a in ids {
                l.transport.close(a);
            }
            let _ = l.transport.flush();
        }
        let secs = self.start.elapsed().as_secs_f64();
        let _ = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        for l in self.links.iter_mut() {
            if let Some(c) = l.transport.counters() {
                let m = &mut self.metrics.sctp;
                m.data_chunks_rx += c.data_chunks_rx;
                m.dup_tsns_rx += c.dup_tsns_rx;
                m.delivered += c.delivered;
                m.data_chunks_tx += c.data_chunks_tx;
                m.retransmissions += c.retransmissions;
            }
        }
        Ok(self.metrics.report(n as u32, attached, failed, secs))
    }
}
