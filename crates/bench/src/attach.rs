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
//!
//! With `slices` > 1 there is one MME thread per slice; the node's S1AP endpoint
//! ([`pepc_mme::S1apEndpoint`]: S1 Setup and the demux of every message to its slice)
//! runs on the RAN thread's side, timed on its own: `demux_ns_per_msg` is its cost
//! per S1AP message crossing it (either way), and the control-core figure counts the
//! MME threads only. With one slice a node runs the endpoint inline on the control
//! thread, so add `demux_ns_per_msg` × messages per attach to compare.

use pepc_mme::{AssocId, EndpointOut, Input, Mme, MmeConfig, Output, S1apEndpoint, SlicePolicy};
use pepc_s1ap::msg::{
    InitialContextSetupResponse, InitialUeMessage, S1SetupRequest, S1apMessage,
    UeContextReleaseComplete, UplinkNasTransport,
};
use pepc_s1ap::{ERabTunnel, Ecgi, EnbId, GlobalEnbId, SupportedTa, Tai, UeS1apIds};
use pepc_slice::slice::{
    build_with_signaling, pin_current_thread, pin_current_thread_to, SliceConfig,
};
use pepc_testkit::{subscriber, InlineProxy, SimUe, ENB_ADDR};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct AttachOpts {
    /// Attaches to run (each UE attaches once).
    pub attaches: u32,
    /// Attaches in flight at once, per slice.
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
    /// Slices of the node, each with its MME thread (the endpoint demuxes to them).
    pub slices: usize,
    /// Checkpoint every registered UE at the end of each procedure into an embedded
    /// state store (a temporary file), as `pepc run` does by default.
    pub checkpoint: bool,
    /// Record each MME (`[debug] record`) into a temporary file, as a node does.
    pub record: bool,
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
    /// Slices of the node (MME threads / control threads).
    pub slices: usize,
    /// The node's S1AP endpoint: ns per S1AP message it steered (either way).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub demux_ns_per_msg: Option<f64>,
    /// Over SCTP with more than one slice: CPU seconds of the endpoint thread (SCTP,
    /// S1 Setup, demux), beside the control threads' `mme_cpu_s`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub endpoint_cpu_s: Option<f64>,
    /// Attaches per CPU-second of the control threads and the endpoint thread
    /// together (the node's whole signaling cost).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attaches_per_signaling_core_s: Option<f64>,
    /// Checkpoints on (inprocess): how they were committed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<CheckpointFigures>,
    /// The HSS over Diameter S6a (`--hss diameter`): the proxy's cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diameter: Option<DiameterFigures>,
    /// Recording on (`--record`, inprocess): bytes of recording per attach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub record_bytes_per_attach: Option<f64>,
}

/// The S6a proxy's figures of an attach run over Diameter.
#[derive(Debug, Clone, Serialize)]
pub struct DiameterFigures {
    /// Where the HSS was ("127.0.0.1:port", the test HSS when the bench started it).
    pub peer: String,
    /// AIR and ULR the MMEs sent (their answers all came back or the attach failed).
    pub requests: u64,
    /// CPU of the Diameter client thread (`pepc-s6a`): its TCP I/O, codec, watchdog.
    pub proxy_cpu_s: f64,
    pub requests_per_proxy_core_s: f64,
    pub proxy_us_per_attach: f64,
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

/// [`median_of`] for each of `configs`, their runs alternating (repeat by repeat) so
/// that every configuration sees the same phases of a noisy machine.
pub fn median_of_each<C: Copy>(
    n: u32,
    configs: &[C],
    mut f: impl FnMut(C) -> Result<AttachResult, String>,
) -> Result<Vec<AttachResult>, String> {
    let mut runs: Vec<Vec<AttachResult>> = configs.iter().map(|_| Vec::new()).collect();
    for _ in 0..n.max(1) {
        for (c, r) in configs.iter().zip(runs.iter_mut()) {
            r.push(f(*c)?);
        }
    }
    runs.into_iter()
        .map(|rs| {
            let mut it = rs.into_iter();
            median_of(n, || it.next().ok_or_else(|| "no run".to_string()))
        })
        .collect()
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
    /// Toward a slice: the endpoint's other inputs (eNB set up).
    inputs: Vec<Input>,
}

/// A slice's answer to one [`Hop`]: its MME's outputs, and the RAN's spent buffers.
struct Back {
    slice: usize,
    outs: Vec<Output>,
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
    /// Bytes of recording written (with a recording file).
    recorded: u64,
}

/// The MME thread: decode, run procedures, encode; nothing else.
/// What the checkpointer did during an in-process run.
#[derive(Debug, Clone, Serialize)]
pub struct CheckpointFigures {
    pub records: u64,
    pub commits: u64,
    pub bytes_per_record: f64,
    /// Longest time from a checkpoint's emission to its durable commit.
    pub max_delay_us: u64,
}

#[allow(clippy::too_many_arguments)]
fn mme_thread(
    slice: usize,
    mut mme: Mme,
    mut proxy: InlineProxy,
    mut cp: pepc_mme::ControlPlane,
    rx: mpsc::Receiver<Hop>,
    tx: mpsc::Sender<Back>,
    mut sink: Option<pepc_store::CheckpointSink>,
    record: Option<std::fs::File>,
) -> MmeRun {
    use std::io::Write;
    // As a node's slice driver with `[debug] record`: the recording goes to its file
    // after each round.
    let mut record = record.map(|f| {
        mme.start_recording(&mut cp);
        (std::io::BufWriter::with_capacity(1 << 16, f), Vec::new())
    });
    let mut recorded = 0u64;
    let mut waited = 0.0;
    let mut cpu0 = thread_cpu_s();
    let (mut faults0, mut sys0) = thread_faults_sys();
    let mut msgs = 0u64;
    let now = Instant::now();
    mme.handle(
        now,
        Input::EnbUp {
            assoc: ASSOC,
            out_streams: 4,
        },
        &mut cp,
        &mut Vec::new(),
    );
    loop {
        let w0 = thread_cpu_s();
        let Ok(Hop {
            msgs: batch,
            spent,
            inputs,
        }) = rx.recv()
        else {
            break;
        };
        waited += thread_cpu_s() - w0;
        drop(spent);
        let mut outs = Vec::with_capacity(batch.len() * 2);
        if batch.is_empty() && inputs.is_empty() {
            // Marker: measure from here (the passes before it are warm-up).
            cpu0 = thread_cpu_s();
            (faults0, sys0) = thread_faults_sys();
            msgs = 0;
            waited = 0.0;
        }
        // The node's proxy over the embedded HSS answers inline, as in a node.
        for i in inputs {
            let from = outs.len();
            mme.handle(now, i, &mut cp, &mut outs);
            proxy.serve(&mut mme, now, &mut cp, &mut outs, from);
        }
        for bytes in &batch {
            msgs += 1;
            let from = outs.len();
            mme.handle_s1ap(now, ASSOC, 1, bytes, &mut cp, &mut outs);
            proxy.serve(&mut mme, now, &mut cp, &mut outs, from);
        }
        if let Some((w, buf)) = record.as_mut() {
            mme.take_recorded(buf);
            recorded += buf.len() as u64;
            if w.write_all(buf).is_err() {
                mme.stop_recording(&mut cp);
            }
            buf.clear();
        }
        // As a node's slice driver does: checkpoints to the store's thread.
        if let Some(s) = &mut sink {
            s.flush();
            outs.retain_mut(|o| match o {
                Output::Checkpoint { imsi, snapshot } => {
                    s.put(*imsi, std::mem::take(&mut snapshot.0));
                    false
                }
                Output::Forget { imsi } => {
                    s.delete(*imsi);
                    false
                }
                _ => true,
            });
        }
        let back = Back {
            slice,
            outs,
            spent: batch,
        };
        if tx.send(back).is_err() {
            break;
        }
    }
    let cpu = thread_cpu_s() - cpu0;
    let (faults, sys) = thread_faults_sys();
    if let Some((mut w, _)) = record {
        let _ = w.flush();
    }
    MmeRun {
        busy_cpu_s: cpu - waited,
        wait_cpu_s: waited,
        msgs,
        faults: faults - faults0,
        sys_s: sys - sys0,
        recorded,
    }
}

struct Pending {
    ue: SimUe,
    started: Instant,
}

/// The eNB side of the in-process benchmark: feeds the MME thread batches of S1AP
/// and answers what it sends, keeping `window` procedures in flight.
struct Ran {
    to_slices: Vec<mpsc::Sender<Hop>>,
    from_slices: mpsc::Receiver<Back>,
    /// The node's S1AP endpoint (demux), timed apart.
    endpoint: S1apEndpoint,
    eo: EndpointOut,
    demux_ns: u64,
    demux_msgs: u64,
    /// Replies handled, going back to the MME thread of each slice with its next batch.
    spent: Vec<Batch>,
    /// The slice whose replies [`Ran::recv`] returned last.
    reply_slice: usize,
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
    /// Hands a batch to the endpoint, which steers each message to its slice.
    fn send(&mut self, b: Batch) -> Result<(), String> {
        let t0 = Instant::now();
        self.demux_msgs += b.len() as u64;
        for m in b {
            self.endpoint.on_s1ap(ASSOC, 1, m, &mut self.eo);
        }
        self.demux_ns += t0.elapsed().as_nanos() as u64;
        if let Some(o) = self.eo.wire.first() {
            return Err(format!("the endpoint answered a UE message itself: {o:?}"));
        }
        self.dispatch()
    }

    /// Sends what the endpoint has for the slices, one hop per slice.
    fn dispatch(&mut self) -> Result<(), String> {
        let n = self.to_slices.len();
        let mut hops: Vec<Hop> = (0..n)
            .map(|_| Hop {
                msgs: vec![],
                spent: vec![],
                inputs: vec![],
            })
            .collect();
        for (s, i) in self.eo.slices.drain(..) {
            match i {
                Input::S1ap { bytes, .. } => hops[s].msgs.push(bytes),
                other => hops[s].inputs.push(other),
            }
        }
        for (s, mut h) in hops.into_iter().enumerate() {
            if h.msgs.is_empty() && h.inputs.is_empty() {
                continue;
            }
            h.spent = std::mem::take(&mut self.spent[s]);
            self.to_slices[s].send(h).map_err(|_| "MME thread gone")?;
            self.outstanding += 1;
        }
        Ok(())
    }

    /// The next batch of replies (one slice's); the caller hands it to
    /// [`Ran::done_with`].
    fn recv(&mut self, what: &str) -> Result<Batch, String> {
        let Back { slice, outs, spent } = self
            .from_slices
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| format!("MME silent for 10 s during {what}"))?;
        self.outstanding -= 1;
        drop(spent);
        let t0 = Instant::now();
        self.demux_msgs += outs.len() as u64;
        for o in outs {
            self.endpoint.on_slice_output(slice, o, &mut self.eo);
        }
        self.demux_ns += t0.elapsed().as_nanos() as u64;
        let mut replies = Vec::with_capacity(self.eo.wire.len());
        for o in self.eo.wire.drain(..) {
            if let Output::S1ap { bytes, .. } = o {
                replies.push(bytes);
            }
        }
        self.reply_slice = slice;
        if !self.eo.slices.is_empty() {
            self.dispatch()?;
        }
        Ok(replies)
    }

    /// Replies handled: back to the MME thread (their owner) with the next batch.
    fn done_with(&mut self, replies: Batch) {
        self.spent[self.reply_slice].extend(replies);
    }

    /// Waits for every batch in flight to be answered (answers are dropped).
    fn settle(&mut self) -> Result<(), String> {
        while self.outstanding > 0 {
            let replies = self.recv("settling")?;
            self.done_with(replies);
        }
        Ok(())
    }

    /// Tells every MME thread to start measuring here (an empty hop), and the
    /// endpoint's timing too.
    fn marker(&mut self) -> Result<(), String> {
        self.settle()?;
        for s in 0..self.to_slices.len() {
            let h = Hop {
                msgs: vec![],
                spent: std::mem::take(&mut self.spent[s]),
                inputs: vec![],
            };
            self.to_slices[s].send(h).map_err(|_| "MME thread gone")?;
            self.outstanding += 1;
        }
        self.settle()?;
        self.demux_ns = 0;
        self.demux_msgs = 0;
        Ok(())
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
/// attach pass. Returns (completion latencies in µs, failures, seconds, demux ns per
/// message).
#[allow(clippy::too_many_arguments)]
fn ran_thread(
    to_slices: Vec<mpsc::Sender<Hop>>,
    from_slices: mpsc::Receiver<Back>,
    endpoint: S1apEndpoint,
    plmn: pepc_s1ap::Plmn,
    window: u32,
    order: Vec<u32>,
    reattach: bool,
    n: u32,
) -> Result<(Vec<f64>, u64, f64, f64), String> {
    let tai = Tai { plmn, tac: 1 };
    let ecgi = Ecgi {
        plmn,
        cell_id: 0x101,
    };
    let slices = to_slices.len();
    let mut ran = Ran {
        to_slices,
        from_slices,
        endpoint,
        eo: EndpointOut::default(),
        demux_ns: 0,
        demux_msgs: 0,
        spent: vec![vec![]; slices],
        reply_slice: 0,
        tai,
        ecgi,
        window,
        outstanding: 0,
        order,
    };
    // S1 Setup first: the endpoint answers and tells every slice of the eNB.
    ran.endpoint.assoc_up(ASSOC, 4);
    let setup = enc(S1SetupRequest {
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
    .into())?;
    ran.endpoint.on_s1ap(ASSOC, 0, setup, &mut ran.eo);
    let answer = ran.eo.wire.pop();
    match answer {
        Some(Output::S1ap { bytes, .. })
            if matches!(
                S1apMessage::decode(&bytes),
                Ok(S1apMessage::S1SetupResponse(_))
            ) => {}
        other => return Err(format!("S1 Setup not accepted: {other:?}")),
    }
    ran.dispatch()?;
    ran.settle()?;
    if reattach {
        let ues = ran.attach_pass(n, 0)?.2;
        ran.detach_pass(ues)?;
    }
    // Everything before the marker is warm-up; the MME thread measures from it.
    ran.marker()?;
    let t0 = Instant::now();
    let base = if reattach { n } else { 0 };
    let (lat, failed, _) = ran.attach_pass(n, base)?;
    let seconds = t0.elapsed().as_secs_f64();
    let demux = ran.demux_ns as f64 / ran.demux_msgs.max(1) as f64;
    Ok((lat, failed, seconds, demux))
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
    let cfg = MmeConfig {
        checkpoints: o.checkpoint,
        ..MmeConfig::default()
    };
    let plmn = cfg.plmn;
    let slices = o.slices.max(1);
    let store_path = std::env::temp_dir().join(format!(
        "pepc-bench-state-{}-{}.redb",
        std::process::id(),
        slices
    ));
    let checkpointer = if o.checkpoint {
        let _ = std::fs::remove_file(&store_path);
        let store = pepc_store::EmbeddedStore::open(&store_path).map_err(|e| e.to_string())?;
        Some(
            pepc_store::Checkpointer::start(Box::new(store), "pepc-checkpoint")
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let endpoint = S1apEndpoint::new(cfg.clone(), slices, SlicePolicy::ConsistentHash);
    let layout = pepc_slice::ids::IdLayout::new(slices, std::net::Ipv4Addr::new(10, 0, 0, 0), 8)
        .map_err(|e| e.to_string())?;
    let prewarm = !o.no_prewarm;

    // Each MME gets a core of its own where there are enough; the RAN and the data
    // threads share the others and never preempt them, as with a slice's control
    // thread (a preempted MME pays the switch and refills its caches). On a machine
    // with fewer cores than MMEs + 1 they share.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let own_cores = cores > slices;
    let first_mme_core = cores.saturating_sub(slices);
    let pin_off_mme = move || {
        if own_cores {
            pin_current_thread_to(0..first_mme_core);
        }
    };

    let stop = Arc::new(AtomicBool::new(false));
    let mut rec_paths = Vec::new();
    let mut datas = Vec::new();
    let mut mmes = Vec::new();
    let mut to_slices = Vec::new();
    let (back_tx, from_slices) = mpsc::channel::<Back>();
    for sl in 0..slices {
        let mut sc = SliceConfig::for_users(n as usize + 1024);
        sc.slice = sl as u32;
        sc.layout = layout;
        let (mut cp, mut dp) = build_with_signaling(&sc);
        let mut mme = Mme::new(cfg.clone(), std::time::Instant::now());
        mme.set_role(endpoint.role(sl));
        let proxy = InlineProxy::new(hss.clone(), pepc_mme::mme::urandom());
        // The data thread only applies the control thread's published updates here.
        let s = stop.clone();
        datas.push(
            std::thread::Builder::new()
                .name("bench-data".into())
                .spawn(move || {
                    pin_off_mme();
                    while !s.load(Ordering::Relaxed) {
                        dp.sync(0);
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    dp.sync(0);
                })
                .map_err(|e| e.to_string())?,
        );
        let (to_mme, mme_rx) = mpsc::channel::<Hop>();
        to_slices.push(to_mme);
        let tx = back_tx.clone();
        let sink = checkpointer.as_ref().map(|c| c.sink());
        let rec_path =
            std::env::temp_dir().join(format!("pepc-bench-record-{}-{sl}", std::process::id()));
        let rec_file = if o.record {
            Some(std::fs::File::create(&rec_path).map_err(|e| e.to_string())?)
        } else {
            None
        };
        rec_paths.push(rec_path);
        // Each slice's share of the UEs, as a node sizes `node.prewarm_users`.
        let share = (n as usize).div_ceil(slices) + 64;
        mmes.push(
            std::thread::Builder::new()
                .name("bench-mme".into())
                .spawn(move || {
                    if own_cores {
                        pin_current_thread(first_mme_core + sl);
                    }
                    // As a node's control thread does at start with `node.prewarm_users`.
                    if prewarm {
                        mme.prewarm(share);
                        cp.prewarm(share);
                    }
                    mme_thread(sl, mme, proxy, cp, mme_rx, tx, sink, rec_file)
                })
                .map_err(|e| e.to_string())?,
        );
    }
    drop(back_tx);

    // `window` attaches in flight per slice: each MME sees batches of the same size
    // whatever the slice count (fewer, smaller batches would cost each attach more
    // wake-ups, an artefact of the queue between threads, not of slicing).
    let window = o.window.max(1).saturating_mul(slices as u32);
    let (order, reattach) = (attach_order(n, o.shuffle), o.reattach);
    let ran_join = std::thread::Builder::new()
        .name("bench-ran".into())
        .spawn(move || {
            pin_off_mme();
            ran_thread(
                to_slices,
                from_slices,
                endpoint,
                plmn,
                window,
                order,
                reattach,
                n,
            )
        })
        .map_err(|e| e.to_string())?;
    let ran_result = ran_join.join().map_err(|_| "RAN thread panicked")?;
    // The RAN's queues are closed by now, so the MME threads end either way.
    let mut runs = Vec::new();
    for m in mmes {
        runs.push(m.join().map_err(|_| "MME thread panicked")?);
    }
    stop.store(true, Ordering::Relaxed);
    for d in datas {
        let _ = d.join();
    }
    for p in &rec_paths {
        let _ = std::fs::remove_file(p);
    }
    let checkpoint = checkpointer.map(|c| {
        let st = c.stop();
        let _ = std::fs::remove_file(&store_path);
        use std::sync::atomic::Ordering::Relaxed;
        let records = st.records.load(Relaxed);
        CheckpointFigures {
            records,
            commits: st.commits.load(Relaxed),
            bytes_per_record: st.bytes.load(Relaxed) as f64 / records.max(1) as f64,
            max_delay_us: st.max_delay_us.load(Relaxed),
        }
    });
    let (mut lat, failed, seconds, demux_ns) = ran_result?;
    let sum = |f: fn(&MmeRun) -> f64| runs.iter().map(f).sum::<f64>();
    let mme_cpu_s = sum(|r| r.busy_cpu_s);
    let wait_cpu_s = sum(|r| r.wait_cpu_s);
    let sys_s = sum(|r| r.sys_s);
    let msgs: u64 = runs.iter().map(|r| r.msgs).sum();
    let faults: u64 = runs.iter().map(|r| r.faults).sum();
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
        slices,
        demux_ns_per_msg: Some(demux_ns),
        endpoint_cpu_s: None,
        attaches_per_signaling_core_s: None,
        checkpoint,
        diameter: None,
        record_bytes_per_attach: o
            .record
            .then(|| runs.iter().map(|r| r.recorded).sum::<u64>() as f64 / n as f64),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inprocess_attaches_with_checkpoints_commit_every_ue() {
        let r = run_inprocess(&AttachOpts {
            attaches: 300,
            window: 16,
            reattach: false,
            shuffle: false,
            no_prewarm: true,
            slices: 2,
            checkpoint: true,
            record: false,
        })
        .unwrap();
        assert_eq!((r.attaches, r.failed), (300, 0));
        let c = r.checkpoint.expect("figures");
        // One at the end of each attach (the attach complete).
        assert!(c.records >= 300, "{c:?}");
        assert!(c.commits >= 1 && c.commits <= c.records, "{c:?}");
        assert!(
            c.bytes_per_record > 200.0 && c.bytes_per_record < 600.0,
            "{c:?}"
        );
    }

    #[test]
    fn inprocess_attaches_all_complete() {
        let r = run_inprocess(&AttachOpts {
            shuffle: false,
            no_prewarm: false,
            checkpoint: false,
            record: false,
            reattach: false,
            attaches: 50,
            window: 8,
            slices: 1,
        })
        .unwrap();
        assert_eq!(r.attaches, 50, "{r:?}");
        assert_eq!(r.failed, 0);
        // S1 Setup + Initial UE + Auth Resp + SMC Complete + ICS Resp + Attach Complete.
        assert!(r.s1ap_messages_per_attach.unwrap() >= 5.0, "{r:?}");
        assert!(r.mme_cpu_s > 0.0);
        assert!(r.demux_ns_per_msg.unwrap() > 0.0);
    }

    #[test]
    fn inprocess_attaches_spread_over_three_slices() {
        let r = run_inprocess(&AttachOpts {
            shuffle: true,
            no_prewarm: false,
            checkpoint: false,
            record: false,
            reattach: true,
            attaches: 60,
            window: 8,
            slices: 3,
        })
        .unwrap();
        assert_eq!((r.attaches, r.failed, r.slices), (60, 0, 3), "{r:?}");
        let m = r.s1ap_messages_per_attach.unwrap();
        assert!((5.0..5.5).contains(&m), "{r:?}");
    }

    #[test]
    fn reattach_pass_measures_only_the_second_attach_of_each_ue() {
        let r = run_inprocess(&AttachOpts {
            shuffle: true,
            no_prewarm: true,
            checkpoint: false,
            // Recorded too, as with `--record`: the recording takes every call.
            record: true,
            reattach: true,
            attaches: 40,
            window: 8,
            slices: 1,
        })
        .unwrap();
        assert_eq!(r.state.as_deref(), Some("reattach-shuffled"));
        assert_eq!(r.attaches, 40, "{r:?}");
        // Both passes' calls, their outputs and the HSS vectors' keys: a few KB each.
        let b = r.record_bytes_per_attach.unwrap();
        assert!(b > 1000.0 && b < 20_000.0, "{r:?}");
        assert_eq!(r.failed, 0);
        // Counted from the marker: the re-attaches only (5 S1AP messages each), not
        // the first attaches, detaches and releases before it.
        let m = r.s1ap_messages_per_attach.unwrap();
        assert!((5.0..5.5).contains(&m), "{r:?}");
    }
}
