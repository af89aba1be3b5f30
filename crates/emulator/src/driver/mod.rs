//! The thin I/O driver: S1-MME associations (one per eNB), the shared S1-U socket, the
//! PDN-side UDP socket, the scenario clock, and the metrics. Single-threaded: every
//! socket is non-blocking and the loop ticks about once a millisecond.

use pepc_ratelog::errln;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
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

mod events;
mod traffic;

use traffic::*;
pub use traffic::{ip_packet, TABLE_IV_DL, TABLE_IV_UL};

/// Attaches started per turn of the storm loop at most.
const ATTACH_BATCH: usize = 1024;
/// Signalling events started per loop turn at most (steady state).
const EVENT_BATCH: u64 = 256;

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
    /// Per UE: paged, and not connected since (a Paging now is the MME's repeat).
    paging_episode: Vec<bool>,
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
    /// Told the index of each UE whose attach completed (Attach Complete handed to
    /// its eNB), as it happens: a restart test's record of what the eNB saw.
    on_attached: Option<Box<dyn FnMut(usize) + Send>>,
    /// With a stop flag the steady state is open-ended: it lasts until the flag is
    /// raised (not `duration_s`), then the run drains, detaches and reports as usual.
    stop: Option<Arc<AtomicBool>>,
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
            paging_episode: vec![false; n],
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
            on_attached: None,
            stop: None,
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
                        if self.paging_episode[u] {
                            // Already answering this episode's first Paging.
                            self.metrics.paging_repeats += 1;
                        } else if !self.ues[u].is_connected() && !self.ues[u].busy() {
                            self.metrics.pagings += 1;
                            self.paging_episode[u] = true;
                            self.ue_input(u, UeInput::Paged, now);
                        } else if self.ues[u].busy() && !self.paged.contains(&u) {
                            self.metrics.pagings += 1;
                            self.paging_episode[u] = true;
                            self.paged.push(u);
                        } else {
                            // Connected already (its Service Request went first).
                            self.metrics.paging_repeats += 1;
                        }
                    }
                }
                EnbOutput::ContextSetup { ue } => {
                    // Connected: the paging episode, if any, is over.
                    self.paging_episode[ue as usize] = false;
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
                        if let Some(f) = self.on_attached.as_mut() {
                            f(u);
                        }
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
        errln!(
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

    /// No procedure under way (re-checked now when the periodic scan says so).
    fn all_idle(&mut self) -> bool {
        if self.any_busy {
            return false;
        }
        self.scan(true);
        !self.any_busy
    }

    /// Run the scenario to its end and report.
    /// Shuts every live association down gracefully and waits (up to `limit`) until
    /// each is down: the EPC then knows the eNBs are gone when the run ends, instead of
    /// keeping their UEs connected until the association times out.
    fn shut_down(&mut self, limit: Duration) -> Result<(), EmuError> {
        if self.cfg.leave_associations {
            return Ok(());
        }
        let mut live: Vec<(usize, AssocId)> = self.enb_assoc.iter().flatten().copied().collect();
        live.sort_unstable();
        live.dedup();
        for &(li, a) in &live {
            self.links[li].transport.close(a);
        }
        for l in &mut self.links {
            // A failed send shows up as an association that does not go down below.
            let _ = l.transport.flush();
        }
        let end = Instant::now() + limit.max(Duration::from_secs(1));
        let mut events = Vec::new();
        while !live.is_empty() && Instant::now() < end {
            for li in 0..self.links.len() {
                self.links[li]
                    .transport
                    .poll(Duration::from_millis(2), &mut events)?;
                for ev in events.drain(..) {
                    if let TransportEvent::Down { assoc, .. } = ev {
                        live.retain(|&x| x != (li, assoc));
                    }
                }
            }
        }
        if !live.is_empty() {
            self.metrics.error("SCTP shutdown not completed");
        }
        Ok(())
    }

    /// Calls `f` with the index of each UE (the `i` of `subscribers.imsi(i)`) whose
    /// attach completes, when it completes.
    pub fn on_attached(mut self, f: Box<dyn FnMut(usize) + Send>) -> Self {
        self.on_attached = Some(f);
        self
    }

    /// Runs the steady state until `stop` is raised instead of for `duration_s`
    /// (an attach storm still under way is cut short by it too); then the run drains,
    /// detaches (with `detach_at_end`) and reports as usual.
    pub fn until(mut self, stop: Arc<AtomicBool>) -> Self {
        self.stop = Some(stop);
        self
    }

    /// The stop flag is raised.
    fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
    }

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
            if self.stopped() {
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
        let open_ended = self.stop.is_some();
        while if open_ended {
            !self.stopped()
        } else {
            t1.elapsed() < dur
        } {
            let el = t1.elapsed().as_secs_f64();
            let ev_due = (el * self.scen.event_rate) as u64;
            // At most a batch of events per turn: the S1 answers are read between
            // batches, so an emulator behind its schedule is late with its events,
            // not with its answers to the EPC (which time out on both sides).
            self.metrics.events_behind_max = self
                .metrics
                .events_behind_max
                .max(ev_due.saturating_sub(events_done));
            let mut batch = 0;
            while events_done < ev_due && batch < EVENT_BATCH {
                self.event();
                events_done += 1;
                batch += 1;
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
        // EPC discard it by design. An MME in overload lifts it (OVERLOAD STOP) once
        // its backlog drains and its hold time has passed: the run ends settled, after it.
        let drain = Instant::now() + Duration::from_secs_f64(self.scen.drain_s.max(0.0));
        while Instant::now() < drain
            || ((!self.all_idle()
                || self.awaiting_dl.iter().any(|&a| a > 0)
                || self.enbs.iter().any(|e| e.overloaded()))
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
        self.shut_down(timeout)?;
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
