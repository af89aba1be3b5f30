//! `pepc bench attach --transport inprocess`: full attach procedures against the MME,
//! with the MME on its own thread (the slice's control core) and the eNB+UE side on
//! another, exchanging encoded S1AP over in-memory queues. Every message is encoded
//! and decoded on both sides; each attach runs full EPS-AKA (Milenage on both sides),
//! NAS security mode, the ICS and attach completion, with vectors from an in-memory HSS.
//!
//! Two figures come out: `attaches_per_s` (wall clock, what the pair of threads
//! achieved) and `attaches_per_mme_core_s` (attaches divided by the CPU time the MME
//! thread spent, measured with CLOCK_THREAD_CPUTIME_ID) — the control core's capacity,
//! independent of how fast the emulated RAN is.

use pepc_mme::sim::{subscriber, SimUe, ENB_ADDR};
use pepc_mme::{AssocId, EndpointOut, HssProxy, Input, Mme, MmeConfig, Output, S1apEndpoint};
use pepc_s1ap::msg::{
    InitialContextSetupResponse, InitialUeMessage, S1SetupRequest, S1apMessage,
    UeContextReleaseComplete, UplinkNasTransport,
};
use pepc_s1ap::{ERabTunnel, Ecgi, EnbId, GlobalEnbId, SupportedTa, Tai, UeS1apIds};
use pepc_slice::slice::{build, pin_current_thread, pin_current_thread_to, SliceConfig};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct AttachOpts {
    /// Attaches to run (each UE attaches once).
    pub attaches: u32,
    /// Attaches in flight at once.
    pub window: u32,
    /// Steady state: every UE first attaches and switch-off detaches once, unmeasured;
    /// then the measured pass re-attaches them all (by IMSI, full AKA) on a warm
    /// node (HSS profiles cached, memory already faulted in). Otherwise every measured
    /// attach is its UE's first since the node started (cold).
    pub reattach: bool,
    /// UEs attach in a shuffled IMSI order (as real subscribers do) instead of in
    /// IMSI order, which the HSS read-ahead favours.
    pub shuffle: bool,
    /// Skip what a node does at start with `node.prewarm_users` = the UEs to attach
    /// (maps sized, control-thread heap faulted in): memory then grows during the
    /// measured pass, one page fault every few attaches.
    pub no_prewarm: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct AttachResult {
    pub transport: String,
    /// "cold" (each UE's first attach since start) or "reattach" (steady state).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    pub attaches: u64,
    pub failed: u64,
    pub seconds: f64,
    pub attaches_per_s: f64,
    /// Attaches per CPU-second of the MME (control) thread. In-process, the CPU the
    /// thread spends blocked waiting for its next batch is not counted (see
    /// `mme_wait_cpu_s`); over UDP it is the thread's whole CPU time.
    pub attaches_per_mme_core_s: f64,
    pub mme_cpu_s: f64,
    /// In-process: CPU the MME thread spent blocking for its next batch (the RAN
    /// thread is the slower side; a saturated control thread does not wait).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mme_wait_cpu_s: Option<f64>,
    pub completion_us_p50: f64,
    pub completion_us_p99: f64,
    /// S1AP messages the MME decoded per attach (in-process only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s1ap_messages_per_attach: Option<f64>,
    /// Minor page faults the MME thread took per attach (fresh memory for new UEs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mme_page_faults_per_attach: Option<f64>,
    /// In-process: UEs the MME thread sized its state and heap for before the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prewarmed_users: Option<u64>,
    /// Share of the MME thread's CPU time (busy and waiting) spent in the kernel.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mme_kernel_share: Option<f64>,
    /// With `--repeat N`: `attaches_per_mme_core_s` of every run, sorted; the other
    /// fields are those of the median run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_core_runs: Vec<f64>,
}

/// Run `f` `n` times and keep the median run by `attaches_per_mme_core_s`, with all
/// runs' figures in `per_core_runs` (a shared machine's noise shows in their spread).
pub fn median_of(
    n: u32,
    mut f: impl FnMut() -> Result<AttachResult, String>,
) -> Result<AttachResult, String> {
    let mut runs = (0..n.max(1)).map(|_| f()).collect::<Result<Vec<_>, _>>()?;
    runs.sort_by(|a, b| {
        a.attaches_per_mme_core_s
            .total_cmp(&b.attaches_per_mme_core_s)
    });
    let all: Vec<f64> = runs.iter().map(|r| r.attaches_per_mme_core_s).collect();
    let mut median = runs.swap_remove(runs.len() / 2);
    if all.len() > 1 {
        median.per_core_runs = all;
    }
    Ok(median)
}

/// (minor page faults, system CPU seconds) of the calling thread so far.
fn thread_faults_sys() -> (u64, f64) {
    // SAFETY: getrusage writes into the rusage we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) } != 0 {
        return (0, 0.0);
    }
    (
        ru.ru_minflt as u64,
        ru.ru_stime.tv_sec as f64 + ru.ru_stime.tv_usec as f64 * 1e-6,
    )
}

/// CPU time of the calling thread.
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One batch of S1AP PDUs between the RAN thread and the MME thread.
type Batch = Vec<Vec<u8>>;

/// A batch one way, with the buffers the receiver is done with going back to the
/// thread that allocated them: each side frees only its own memory, as a driver
/// with its own receive buffers does (a free into another thread's heap would pull
/// that heap's cache lines across cores on every message).
struct Hop {
    msgs: Batch,
    spent: Batch,
}

const ASSOC: AssocId = 1;

fn imsi(i: u32) -> String {
    format!("00101{:010}", u64::from(i) + 1)
}

/// What the MME thread measured from the marker on.
struct MmeRun {
    /// CPU time handling batches: decode, procedures, encode, handing replies over.
    busy_cpu_s: f64,
    /// CPU time spent blocking for the next batch (futex sleep and wake-up): the
    /// RAN thread is the slower side, so the MME goes idle between batches, which a
    /// saturated control thread never does. Reported, not counted per attach.
    wait_cpu_s: f64,
    msgs: u64,
    faults: u64,
    /// System CPU time over busy and waiting time alike.
    sys_s: f64,
}

/// The MME thread: decode, run procedures, encode; nothing else.
fn mme_thread(
    mut mme: Mme,
    mut proxy: HssProxy,
    mut cp: pepc_slice::control::ControlPlane,
    rx: mpsc::Receiver<Hop>,
    tx: mpsc::Sender<Hop>,
) -> MmeRun {
    let mut waited = 0.0;
    let mut cpu0 = thread_cpu_s();
    let (mut faults0, mut sys0) = thread_faults_sys();
    let mut out = Vec::with_capacity(64);
    let mut msgs = 0u64;
    let now = Instant::now();
    // S1 Setup is the node's endpoint's (as in `MmeDriver`); the UE messages go
    // straight to the MME, as the endpoint of a one-slice node hands them over.
    let mut ep = S1apEndpoint::new(mme.config().clone(), 1, mme.role().policy);
    mme.set_role(ep.role(0));
    ep.assoc_up(ASSOC, 4);
    mme.handle(
        now,
        Input::EnbUp {
            assoc: ASSOC,
            out_streams: 4,
        },
        &mut cp,
        &mut out,
    );
    out.clear();
    let mut setup_done = false;
    loop {
        let w0 = thread_cpu_s();
        let Ok(Hop { msgs: batch, spent }) = rx.recv() else {
            break;
        };
        waited += thread_cpu_s() - w0;
        drop(spent);
        if batch.is_empty() {
            // Marker: measure from here (the passes before it are warm-up).
            cpu0 = thread_cpu_s();
            (faults0, sys0) = thread_faults_sys();
            msgs = 0;
            waited = 0.0;
            let marker = Hop {
                msgs: vec![],
                spent: batch,
            };
            if tx.send(marker).is_err() {
                break;
            }
            continue;
        }
        let mut reply = Vec::with_capacity(batch.len() * 2);
        if !setup_done {
            setup_done = true;
            let mut eo = EndpointOut::default();
            for bytes in &batch {
                ep.on_s1ap(ASSOC, 0, bytes.clone(), &mut eo);
            }
            while !eo.slices.is_empty() {
                for (_, i) in std::mem::take(&mut eo.slices) {
                    mme.handle(now, i, &mut cp, &mut out);
                }
                for o in out.drain(..) {
                    ep.on_slice_output(0, o, &mut eo);
                }
            }
            for o in eo.wire.drain(..) {
                if let Output::S1ap { bytes, .. } = o {
                    reply.push(bytes);
                }
            }
            let hop = Hop {
                msgs: reply,
                spent: batch,
            };
            if tx.send(hop).is_err() {
                break;
            }
            continue;
        }
        for bytes in &batch {
            msgs += 1;
            mme.handle_s1ap(now, ASSOC, 1, bytes, &mut cp, &mut out);
            proxy.serve(&mut mme, now, &mut cp, &mut out, 0);
            for o in out.drain(..) {
                if let Output::S1ap { bytes, .. } = o {
                    reply.push(bytes);
                }
            }
        }
        let hop = Hop {
            msgs: reply,
            spent: batch,
        };
        if tx.send(hop).is_err() {
            break;
        }
    }
    let cpu = thread_cpu_s() - cpu0;
    let (faults, sys) = thread_faults_sys();
    MmeRun {
        busy_cpu_s: cpu - waited,
        wait_cpu_s: waited,
        msgs,
        faults: faults - faults0,
        sys_s: sys - sys0,
    }
}

struct Pending {
    ue: SimUe,
    started: Instant,
}

/// The eNB side of the in-process benchmark: feeds the MME thread batches of S1AP
/// and answers what it sends, keeping `window` procedures in flight.
struct Ran {
    to_mme: mpsc::Sender<Hop>,
    from_mme: mpsc::Receiver<Hop>,
    /// Replies handled, going back to the MME thread with the next batch.
    spent: Batch,
    tai: Tai,
    ecgi: Ecgi,
    window: u32,
    /// Batches sent whose reply has not come back.
    outstanding: u64,
    /// Subscriber index of the i-th UE to attach.
    order: Vec<u32>,
}

/// 0..n, or a fixed pseudo-random permutation of it.
fn attach_order(n: u32, shuffle: bool) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n).collect();
    if shuffle {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in (1..v.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            v.swap(i, (x % (i as u64 + 1)) as usize);
        }
    }
    v
}

fn enc(m: S1apMessage) -> Result<Vec<u8>, String> {
    m.encode().map_err(|e| format!("encode: {e}"))
}

impl Ran {
    fn send(&mut self, b: Batch) -> Result<(), String> {
        let hop = Hop {
            msgs: b,
            spent: std::mem::take(&mut self.spent),
        };
        self.to_mme.send(hop).map_err(|_| "MME thread gone")?;
        self.outstanding += 1;
        Ok(())
    }

    /// The next batch of replies; the caller hands it to [`Ran::done_with`].
    fn recv(&mut self, what: &str) -> Result<Batch, String> {
        let Hop { msgs, spent } = self
            .from_mme
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| format!("MME silent for 10 s during {what}"))?;
        self.outstanding -= 1;
        drop(spent);
        Ok(msgs)
    }

    /// Replies handled: back to the MME thread (their owner) with the next batch.
    fn done_with(&mut self, replies: Batch) {
        self.spent.extend(replies);
    }

    /// Waits for every batch in flight to be answered (answers are dropped).
    fn settle(&mut self) -> Result<(), String> {
        while self.outstanding > 0 {
            let replies = self.recv("settling")?;
            self.done_with(replies);
        }
        Ok(())
    }

    /// Tells the MME thread to start measuring here.
    fn marker(&mut self) -> Result<(), String> {
        self.settle()?;
        self.send(vec![])?;
        self.settle()
    }

    /// `n` attaches by IMSI; eNB UE S1AP IDs from `base + 1`. Returns completion
    /// latencies (µs), failures, and the attached UEs.
    fn attach_pass(&mut self, n: u32, base: u32) -> Result<(Vec<f64>, u64, Vec<SimUe>), String> {
        let (tai, ecgi) = (self.tai, self.ecgi);
        let mut pending: Vec<Option<Pending>> = (0..n).map(|_| None).collect();
        let mut done: Vec<SimUe> = Vec::with_capacity(n as usize);
        let mut lat = Vec::with_capacity(n as usize);
        let mut next = 0u32;
        let mut in_flight = 0u32;
        let mut failed = 0u64;
        let order = self.order.clone();
        let start_one = |i: u32, pending: &mut Vec<Option<Pending>>| -> Result<Vec<u8>, String> {
            let ue = SimUe::new(&imsi(order[i as usize]), base + i + 1);
            let nas = ue.attach_request(None, false);
            pending[i as usize] = Some(Pending {
                ue,
                started: Instant::now(),
            });
            enc(InitialUeMessage {
                enb_ue_id: base + i + 1,
                nas_pdu: nas,
                tai,
                ecgi,
                rrc_cause: 3,
                s_tmsi: None,
                gummei: None,
            }
            .into())
        };
        let mut batch = Vec::new();
        while next < n && in_flight < self.window {
            batch.push(start_one(next, &mut pending)?);
            next += 1;
            in_flight += 1;
        }
        self.send(batch)?;
        while in_flight > 0 {
            let replies = self.recv("attach")?;
            let mut up = Vec::with_capacity(replies.len() * 2);
            for bytes in &replies {
                let m =
                    S1apMessage::decode(bytes).map_err(|e| format!("MME sent bad S1AP: {e}"))?;
                match m {
                    S1apMessage::DownlinkNasTransport(d) => {
                        let Some(p) = (d.enb_ue_id as usize)
                            .checked_sub(base as usize + 1)
                            .and_then(|i| pending.get_mut(i))
                            .and_then(|p| p.as_mut())
                        else {
                            continue; // EMM Information after completion
                        };
                        p.ue.mme_ue_id = Some(d.mme_ue_id);
                        let step = p.ue.on_downlink(&d.nas_pdu)?;
                        if let Some(r) = step.reply {
                            up.push(enc(UplinkNasTransport {
                                mme_ue_id: d.mme_ue_id,
                                enb_ue_id: d.enb_ue_id,
                                nas_pdu: r,
                                ecgi,
                                tai,
                            }
                            .into())?);
                        }
                    }
                    S1apMessage::InitialContextSetupRequest(r) => {
                        let Some(mut p) = (r.enb_ue_id as usize)
                            .checked_sub(base as usize + 1)
                            .and_then(|i| pending.get_mut(i))
                            .and_then(|p| p.take())
                        else {
                            return Err(format!("ICS for unknown eNB UE {}", r.enb_ue_id));
                        };
                        let nas = r.erabs.first().and_then(|e| e.nas_pdu.clone());
                        let reply = match nas {
                            Some(nas) => p.ue.on_downlink(&nas)?.reply,
                            None => None,
                        };
                        up.push(enc(InitialContextSetupResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: r.enb_ue_id,
                            erabs: r
                                .erabs
                                .iter()
                                .map(|e| ERabTunnel {
                                    id: e.id,
                                    transport: ENB_ADDR,
                                    teid: 0x1000_0000 | r.enb_ue_id << 4 | u32::from(e.id & 0xf),
                                })
                                .collect(),
                            failed: vec![],
                        }
                        .into())?);
                        match reply {
                            Some(b) => {
                                up.push(enc(UplinkNasTransport {
                                    mme_ue_id: r.mme_ue_id,
                                    enb_ue_id: r.enb_ue_id,
                                    nas_pdu: b,
                                    ecgi,
                                    tai,
                                }
                                .into())?);
                                lat.push(p.started.elapsed().as_secs_f64() * 1e6);
                                done.push(p.ue);
                            }
                            None => failed += 1,
                        }
                        in_flight -= 1;
                        if next < n {
                            up.push(start_one(next, &mut pending)?);
                            next += 1;
                            in_flight += 1;
                        }
                    }
                    other => {
                        // Attach Reject and friends end the attempt.
                        return Err(format!("unexpected {} during attach", other.name()));
                    }
                }
            }
            self.done_with(replies);
            if !up.is_empty() {
                self.send(up)?;
            }
            if self.outstanding == 0 && in_flight > 0 {
                return Err(format!("{in_flight} attaches stalled"));
            }
        }
        // Let the last Attach Completes be processed.
        self.settle()?;
        Ok((lat, failed, done))
    }

    /// Switch-off detach of every UE in `ues`, each answered with UE Context Release
    /// Complete, `window` at a time.
    fn detach_pass(&mut self, ues: Vec<SimUe>) -> Result<(), String> {
        let (tai, ecgi) = (self.tai, self.ecgi);
        let mut left = ues.into_iter();
        let mut in_flight = 0u32;
        let detach = |ue: &mut SimUe| -> Result<Vec<u8>, String> {
            let mme_ue_id = ue.mme_ue_id.ok_or("UE without an MME UE S1AP ID")?;
            enc(UplinkNasTransport {
                mme_ue_id,
                enb_ue_id: ue.enb_ue_id,
                nas_pdu: ue.detach_request(true),
                ecgi,
                tai,
            }
            .into())
        };
        let mut batch = Vec::new();
        for mut ue in left.by_ref().take(self.window as usize) {
            batch.push(detach(&mut ue)?);
            in_flight += 1;
        }
        self.send(batch)?;
        while in_flight > 0 {
            let replies = self.recv("detach")?;
            let mut up = Vec::new();
            for bytes in &replies {
                if let Ok(S1apMessage::UeContextReleaseCommand(c)) = S1apMessage::decode(bytes) {
                    let UeS1apIds::Pair {
                        mme_ue_id,
                        enb_ue_id,
                    } = c.ids
                    else {
                        continue;
                    };
                    up.push(enc(UeContextReleaseComplete {
                        mme_ue_id,
                        enb_ue_id,
                    }
                    .into())?);
                    in_flight -= 1;
                    if let Some(mut ue) = left.next() {
                        up.push(detach(&mut ue)?);
                        in_flight += 1;
                    }
                }
            }
            self.done_with(replies);
            if !up.is_empty() {
                self.send(up)?;
            }
            if self.outstanding == 0 && in_flight > 0 {
                return Err(format!("{in_flight} detaches stalled"));
            }
        }
        self.settle()
    }
}

/// The eNB side: S1 Setup, the unmeasured passes, the marker, then the measured
/// attach pass. Returns (completion latencies in µs, failures, seconds).
fn ran_thread(
    to_mme: mpsc::Sender<Hop>,
    from_mme: mpsc::Receiver<Hop>,
    plmn: pepc_s1ap::Plmn,
    window: u32,
    order: Vec<u32>,
    reattach: bool,
    n: u32,
) -> Result<(Vec<f64>, u64, f64), String> {
    let tai = Tai { plmn, tac: 1 };
    let ecgi = Ecgi {
        plmn,
        cell_id: 0x101,
    };
    // S1 Setup first.
    let setup = Hop {
        msgs: vec![enc(S1SetupRequest {
            global_enb_id: GlobalEnbId {
                plmn,
                enb_id: EnbId::Macro(1),
            },
            enb_name: Some("bench".into()),
            supported_tas: vec![SupportedTa {
                tac: 1,
                plmns: vec![plmn],
            }],
            paging_drx: Some(128),
        }
        .into())?],
        spent: vec![],
    };
    to_mme.send(setup).map_err(|_| "MME thread gone")?;
    let setup = from_mme.recv().map_err(|_| "MME thread gone")?;
    match setup.msgs.first().map(|b| S1apMessage::decode(b)) {
        Some(Ok(S1apMessage::S1SetupResponse(_))) => {}
        other => return Err(format!("S1 Setup not accepted: {other:?}")),
    }
    let mut ran = Ran {
        to_mme,
        from_mme,
        spent: vec![],
        tai,
        ecgi,
        window,
        outstanding: 0,
        order,
    };
    if reattach {
        let ues = ran.attach_pass(n, 0)?.2;
        ran.detach_pass(ues)?;
    }
    // Everything before the marker is warm-up; the MME thread measures from it.
    ran.marker()?;
    let t0 = Instant::now();
    let base = if reattach { n } else { 0 };
    let (lat, failed, _) = ran.attach_pass(n, base)?;
    Ok((lat, failed, t0.elapsed().as_secs_f64()))
}

/// Run the in-process attach benchmark.
pub fn run_inprocess(o: &AttachOpts) -> Result<AttachResult, String> {
    let n = o.attaches.max(1);
    let hss = Arc::new(pepc_hss::Hss::in_memory().map_err(|e| e.to_string())?);
    let subs: Vec<_> = (0..n).map(|i| subscriber(&imsi(i))).collect();
    for chunk in subs.chunks(10_000) {
        hss.add_many(chunk).map_err(|e| e.to_string())?;
    }
    // As the node does when it starts (`Epc::start`).
    hss.preload().map_err(|e| e.to_string())?;
    let cfg = MmeConfig::default();
    let plmn = cfg.plmn;
    let (cp, mut dp) = build(&SliceConfig::for_users(n as usize + 1024));
    let mut mme = Mme::new(cfg);
    // The node's proxy over the embedded HSS, inline on the MME thread as in a node.
    let proxy = HssProxy::new(hss, pepc_mme::mme::urandom());
    let mut cp = cp;
    let prewarm = !o.no_prewarm;

    // The MME gets a core of its own where there are two or more; the RAN and the
    // data thread share the others and never preempt it, as with a slice's control
    // thread (a preempted MME pays the switch and refills its caches).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mme_core = cores - 1;
    let pin_off_mme = move || {
        if cores >= 2 {
            pin_current_thread_to(0..mme_core);
        }
    };

    // The data thread only applies the control thread's published updates here.
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let data = std::thread::Builder::new()
        .name("bench-data".into())
        .spawn(move || {
            pin_off_mme();
            while !s.load(Ordering::Relaxed) {
                dp.sync(0);
                std::thread::sleep(Duration::from_micros(200));
            }
            dp.sync(0);
        })
        .map_err(|e| e.to_string())?;

    let (to_mme, mme_rx) = mpsc::channel::<Hop>();
    let (mme_tx, from_mme) = mpsc::channel::<Hop>();
    let mme_join = std::thread::Builder::new()
        .name("bench-mme".into())
        .spawn(move || {
            if cores >= 2 {
                pin_current_thread(mme_core);
            }
            // As a node's control thread does at start with `node.prewarm_users`.
            if prewarm {
                mme.prewarm(n as usize);
                cp.prewarm(n as usize);
            }
            mme_thread(mme, proxy, cp, mme_rx, mme_tx)
        })
        .map_err(|e| e.to_string())?;

    let (window, order, reattach) = (o.window.max(1), attach_order(n, o.shuffle), o.reattach);
    let ran_join = std::thread::Builder::new()
        .name("bench-ran".into())
        .spawn(move || {
            pin_off_mme();
            ran_thread(to_mme, from_mme, plmn, window, order, reattach, n)
        })
        .map_err(|e| e.to_string())?;
    let ran_result = ran_join.join().map_err(|_| "RAN thread panicked")?;
    // The RAN's queues are closed by now, so the MME thread ends either way.
    let mme_result = mme_join.join().map_err(|_| "MME thread panicked");
    stop.store(true, Ordering::Relaxed);
    let _ = data.join();
    let (mut lat, failed, seconds) = ran_result?;
    let MmeRun {
        busy_cpu_s: mme_cpu_s,
        wait_cpu_s,
        msgs,
        faults,
        sys_s,
    } = mme_result?;
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    let ok = lat.len() as u64;
    Ok(AttachResult {
        transport: "inprocess".into(),
        state: Some(
            match (o.reattach, o.shuffle) {
                (false, false) => "cold",
                (false, true) => "cold-shuffled",
                (true, false) => "reattach",
                (true, true) => "reattach-shuffled",
            }
            .into(),
        ),
        attaches: ok,
        failed,
        seconds,
        attaches_per_s: ok as f64 / seconds.max(1e-9),
        attaches_per_mme_core_s: ok as f64 / mme_cpu_s.max(1e-9),
        mme_cpu_s,
        completion_us_p50: q(0.5),
        completion_us_p99: q(0.99),
        s1ap_messages_per_attach: Some(msgs as f64 / n as f64),
        mme_page_faults_per_attach: Some(faults as f64 / n as f64),
        mme_kernel_share: Some(sys_s / (mme_cpu_s + wait_cpu_s).max(1e-9)),
        mme_wait_cpu_s: Some(wait_cpu_s),
        prewarmed_users: Some(if prewarm { u64::from(n) } else { 0 }),
        per_core_runs: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inprocess_attaches_all_complete() {
        let r = run_inprocess(&AttachOpts {
            shuffle: false,
            no_prewarm: false,
            reattach: false,
            attaches: 50,
            window: 8,
        })
        .unwrap();
        assert_eq!(r.attaches, 50, "{r:?}");
        assert_eq!(r.failed, 0);
        // S1 Setup + Initial UE + Auth Resp + SMC Complete + ICS Resp + Attach Complete.
        assert!(r.s1ap_messages_per_attach.unwrap() >= 5.0, "{r:?}");
        assert!(r.mme_cpu_s > 0.0);
    }

    #[test]
    fn reattach_pass_measures_only_the_second_attach_of_each_ue() {
        let r = run_inprocess(&AttachOpts {
            shuffle: true,
            no_prewarm: true,
            reattach: true,
            attaches: 40,
            window: 8,
        })
        .unwrap();
        assert_eq!(r.state.as_deref(), Some("reattach-shuffled"));
        assert_eq!(r.attaches, 40, "{r:?}");
        assert_eq!(r.failed, 0);
        // Counted from the marker: the re-attaches only (5 S1AP messages each), not
        // the first attaches, detaches and releases before it.
        let m = r.s1ap_messages_per_attach.unwrap();
        assert!((5.0..5.5).contains(&m), "{r:?}");
    }
}
