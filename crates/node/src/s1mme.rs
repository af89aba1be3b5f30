//! S1-MME on a node: the node's S1AP endpoint ([`pepc_mme::S1apEndpoint`]) owns the
//! SCTP transport (PPID 18) and the eNB associations and steers each UE's messages
//! to the MME of its slice; each slice's control thread runs that MME against its own
//! control plane. Nothing on the message path is shared or locked: the endpoint and
//! the slices exchange messages over single-producer rings and wake each other with
//! eventfds ([`IdleWake`]).
//!
//! * One slice ([`MmeDriver`]): the endpoint runs inline in the slice's control
//!   thread, which also owns the transport (no extra hop).
//! * N slices ([`start_signaling`]): the endpoint has a thread of its own
//!   ([`EndpointThread`]); every slice runs a [`SliceMme`].
//!
//! Either way a slice's MME reaches the HSS through its [`Proxy`] driver, called on
//! the slice's control thread (see [`crate::proxy`]).

use crate::checkpoint::{Restored, SliceState};
use crate::io::wait_any_readable;
use crate::proxy::Proxy;
use crate::runtime::{ControlDriver, IdleWake};
use pepc_mme::ControlPlane;
use pepc_mme::{EndpointOut, Input, Mme, Output, S1apEndpoint};
use pepc_sctp::transport::{S1Transport, TransportEvent, S1AP_PPID};
use pepc_slice::control::ControlEvent;
use pepc_slice::spsc::{self, Consumer, Producer};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Messages a ring between the endpoint and a slice holds; beyond it they wait in
/// the sender's backlog (bounded by [`MAX_BACKLOG`]).
const RING: usize = 16 * 1024;
/// Messages one side keeps for a slow peer before it drops (and counts) more.
const MAX_BACKLOG: usize = 256 * 1024;

/// A slice's signaling figures, written by its control thread only.
#[derive(Debug, Default)]
pub struct SliceGauges {
    /// UE contexts in the slice's MME (registered or in a procedure).
    pub ues: AtomicU64,
    /// UEs holding a PDN session in the slice (EMM-REGISTERED, or an attach that
    /// reached its session).
    pub sessions: AtomicU64,
    pub attaches: AtomicU64,
    /// Messages dropped because the endpoint's ring and backlog were full.
    pub dropped_outputs: AtomicU64,
    /// UEs restored from the state store at start, and checkpoints that failed to.
    pub restored: AtomicU64,
    pub restore_failed: AtomicU64,
    /// The MME's counters when its driver stopped (printed at the node's stop).
    pub final_stats: std::sync::Mutex<Option<pepc_mme::MmeStats>>,
    /// Overload control's counters, where the endpoint runs inline in this slice.
    pub final_overload: std::sync::Mutex<Option<pepc_mme::OverloadStats>>,
    /// The S1-MME associations' counters, where the endpoint runs inline here.
    pub final_sctp: std::sync::Mutex<Option<pepc_sctp::AssocCounters>>,
    /// UEs with an S1 connection (ECM-CONNECTED).
    pub connected: AtomicU64,
    /// eNBs set up, where the endpoint runs inline in this slice.
    pub enbs: AtomicU64,
    live: std::sync::Mutex<Option<pepc_mme::MmeStats>>,
    live_hss: std::sync::Mutex<Option<pepc_mme::mme::LatencyHistogram>>,
    published: std::sync::Mutex<Option<Instant>>,
    /// The eNBs set up, where the endpoint runs inline in this slice.
    pub enb_views: std::sync::Mutex<Vec<pepc_mme::EnbView>>,
    /// Where the management API queues requests for this slice's control thread.
    mgmt: std::sync::OnceLock<std::sync::mpsc::Sender<MgmtRequest>>,
    /// Wakes the control thread from its idle wait for a queued request.
    mgmt_wake: std::sync::OnceLock<Arc<IdleWake>>,
    mgmt_seq: AtomicU64,
}

/// A request of the management API to a slice's control thread, which owns the UEs:
/// answered on `reply` at its next round (the API waits with a timeout).
pub enum MgmtRequest {
    Ue {
        imsi: u64,
        reply: std::sync::mpsc::SyncSender<Option<pepc_mme::view::UeView>>,
    },
    Ues {
        filter: pepc_mme::view::UeFilter,
        offset: usize,
        limit: usize,
        reply: std::sync::mpsc::SyncSender<(usize, Vec<pepc_mme::view::UeView>)>,
    },
    /// S1 connections per eNB association.
    EnbConnections {
        reply: std::sync::mpsc::SyncSender<Vec<(pepc_sctp::AssocId, usize)>>,
    },
    /// Network-initiated detach (an idle UE is detached locally).
    Detach {
        imsi: u64,
        reply: std::sync::mpsc::SyncSender<bool>,
    },
    /// The embedded PCRF's policy for `imsi` changed: its sessions get what
    /// `decide(apn)` gives now (a PCRF push). Replies whether this slice holds it.
    Repolicy {
        imsi: u64,
        decide: PolicyOracle,
        reply: std::sync::mpsc::SyncSender<bool>,
    },
}

/// The policy decision of an APN's session, as the embedded PCRF gives it now.
pub type PolicyOracle = Arc<dyn Fn(&str) -> pepc_mme::PolicyDecision + Send + Sync>;

/// A slice driver's gauges, holding the sender of its management queue.
fn gauges_with_mgmt() -> (Arc<SliceGauges>, MgmtInbox) {
    let (tx, rx) = std::sync::mpsc::channel();
    let g = SliceGauges::default();
    let _ = g.mgmt.set(tx);
    // Without an eventfd requests still come within the idle wait's cap.
    let wake = IdleWake::new().ok().map(Arc::new);
    if let Some(w) = &wake {
        let _ = g.mgmt_wake.set(w.clone());
    }
    (Arc::new(g), MgmtInbox { rx, wake, mark: 0 })
}

/// A control thread's end of the management queue, and its wake-up.
struct MgmtInbox {
    rx: std::sync::mpsc::Receiver<MgmtRequest>,
    wake: Option<Arc<IdleWake>>,
    /// Posts seen before the queue was last drained (the wake-up handshake).
    mark: u64,
}

impl MgmtInbox {
    fn serve(
        &mut self,
        mme: &mut Mme,
        cp: &mut ControlPlane,
        now: Instant,
        out: &mut Vec<Output>,
    ) -> bool {
        if let Some(w) = &self.wake {
            self.mark = w.posted();
        }
        serve_mgmt(&self.rx, mme, cp, now, out)
    }

    /// About to wait: its descriptor, or None if a request came since the drain.
    fn begin_wait(&self) -> Result<Option<RawFd>, ()> {
        match &self.wake {
            Some(w) if w.begin_wait(self.mark) => Ok(Some(w.fd())),
            Some(_) => Err(()),
            None => Ok(None),
        }
    }

    fn end_wait(&self) {
        if let Some(w) = &self.wake {
            w.end_wait();
        }
    }
}

/// The largest page a listing answers (the control thread builds it between rounds).
pub const MAX_UE_PAGE: usize = 1000;

/// Requests the management API queued for this slice's control thread.
fn serve_mgmt(
    rx: &std::sync::mpsc::Receiver<MgmtRequest>,
    mme: &mut Mme,
    cp: &mut ControlPlane,
    now: Instant,
    out: &mut Vec<Output>,
) -> bool {
    let mut any = false;
    // A few per round: the API never takes the control thread from signaling for long.
    for _ in 0..8 {
        let Ok(r) = rx.try_recv() else {
            break;
        };
        any = true;
        match r {
            MgmtRequest::Ue { imsi, reply } => {
                let _ = reply.try_send(mme.ue_view(cp, imsi));
            }
            MgmtRequest::Ues {
                filter,
                offset,
                limit,
                reply,
            } => {
                let _ = reply.try_send(mme.ue_views(cp, filter, offset, limit.min(MAX_UE_PAGE)));
            }
            MgmtRequest::EnbConnections { reply } => {
                let _ = reply.try_send(mme.connections_by_enb());
            }
            MgmtRequest::Detach { imsi, reply } => {
                let done = mme.detach_ue(now, imsi, cp, out).is_ok();
                let _ = reply.try_send(done);
            }
            MgmtRequest::Repolicy {
                imsi,
                decide,
                reply,
            } => {
                let done = mme.reapply_policy(now, imsi, &*decide, cp, out);
                let _ = reply.try_send(done);
            }
        }
    }
    any
}

/// How often a control thread copies its MME's counters for the metrics endpoint.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

impl SliceGauges {
    /// The MME's figures for readers on other threads: the level gauges every round
    /// (atomics), a copy of its counters every 100 ms (a lock only the scraper and
    /// this thread take, and this thread never waits for it).
    fn publish(&self, mme: &Mme, hss: &crate::proxy::ProxyStats, now: Instant) {
        self.ues.store(mme.ue_count() as u64, Ordering::Relaxed);
        self.attaches.store(mme.stats.attaches, Ordering::Relaxed);
        self.connected
            .store(mme.connection_count() as u64, Ordering::Relaxed);
        let due = self.published.lock().ok().is_none_or(|mut t| {
            let due = t.is_none_or(|t| now.saturating_duration_since(t) >= PUBLISH_EVERY);
            if due {
                *t = Some(now);
            }
            due
        });
        if due {
            if let Ok(mut s) = self.live.try_lock() {
                *s = Some(mme.stats.clone());
            }
            if let Ok(mut s) = self.live_hss.try_lock() {
                *s = Some(hss.vector_latency.clone());
            }
        }
    }

    /// Queue a management request for the control thread (false: the slice runs no
    /// MME, or its thread is gone).
    pub fn request(&self, r: MgmtRequest) -> bool {
        let sent = self.mgmt.get().is_some_and(|tx| tx.send(r).is_ok());
        if sent {
            if let Some(w) = self.mgmt_wake.get() {
                w.post(self.mgmt_seq.fetch_add(1, Ordering::SeqCst) + 1);
            }
        }
        sent
    }

    /// The HSS vector latency as last published.
    pub fn live_vector_latency(&self) -> Option<pepc_mme::mme::LatencyHistogram> {
        self.live_hss.lock().ok().and_then(|s| s.clone())
    }

    /// The MME's counters as last published (None before the first round).
    pub fn live_stats(&self) -> Option<pepc_mme::MmeStats> {
        self.live.lock().ok().and_then(|s| s.clone())
    }

    fn restored(&self, r: Restored) {
        self.restored.store(r.ues, Ordering::Relaxed);
        self.restore_failed.store(r.failed, Ordering::Relaxed);
    }
}

/// UEs restored per control-loop round while the node serves (about 2-3 µs each:
/// a round stays within a few milliseconds, so signaling is not held up).
const RESTORE_CHUNK: usize = 2048;

/// One round of the background restore of a dead process's UEs; the gauges learn
/// the outcome when the last is done.
fn restore_chunk(
    mme: &mut Mme,
    gauges: &SliceGauges,
    cp: &mut ControlPlane,
    now: Instant,
    out: &mut Vec<Output>,
) {
    if let Some(r) = mme.restore_some(cp, now, RESTORE_CHUNK, out) {
        gauges.restored(Restored {
            ues: r.restored,
            failed: r.failed,
        });
    }
}

/// The transport side of the endpoint: events in, S1AP and closes out.
struct Wire {
    transport: Box<dyn S1Transport>,
    events: Vec<TransportEvent>,
    /// Associations up now (shut down when the node stops).
    live: std::collections::HashSet<pepc_sctp::AssocId>,
}

impl Wire {
    fn new(transport: Box<dyn S1Transport>) -> Self {
        Wire {
            transport,
            events: Vec::with_capacity(256),
            live: Default::default(),
        }
    }

    /// The node stops: every association is shut down (SCTP SHUTDOWN, so the eNBs
    /// learn at once rather than by their heartbeats), waiting a moment for the
    /// peers' SHUTDOWN ACKs.
    fn shutdown(&mut self) -> Option<pepc_sctp::AssocCounters> {
        let mut open: std::collections::HashSet<_> = self.live.drain().collect();
        for a in &open {
            tracing::info!("S1-MME association {a} down: the node stops (SCTP SHUTDOWN)");
            self.transport.close(*a);
        }
        let until = Instant::now() + Duration::from_millis(500);
        let mut ev = Vec::new();
        // Short polls: never a longer wait than the control thread's idle cap.
        while !open.is_empty() && Instant::now() < until {
            if self
                .transport
                .poll(Duration::from_millis(5), &mut ev)
                .is_err()
            {
                break;
            }
            for e in ev.drain(..) {
                if let TransportEvent::Down { assoc, .. } = e {
                    open.remove(&assoc);
                }
            }
        }
        self.transport.counters()
    }

    /// Reads what is pending (unless `events` already holds what a wait read).
    fn poll(&mut self) {
        if self.events.is_empty() {
            if let Err(e) = self.transport.poll(Duration::ZERO, &mut self.events) {
                tracing::error!("S1-MME transport poll failed: {e}");
            }
        }
    }

    /// Hands every pending transport event to the endpoint.
    fn feed(&mut self, ep: &mut S1apEndpoint, eo: &mut EndpointOut) -> bool {
        let busy = !self.events.is_empty();
        for ev in self.events.drain(..) {
            match ev {
                TransportEvent::Up {
                    assoc,
                    peer,
                    out_streams,
                    in_streams,
                } => {
                    // Once per association (and once per restart of its peer, which
                    // the kernel backend reports as a second Up): the per-UE lines
                    // that follow say nothing of the association itself.
                    if self.live.insert(assoc) {
                        tracing::info!(
                            "S1-MME association {assoc} up: {peer}, {out_streams} out / {in_streams} in streams"
                        );
                    } else {
                        tracing::warn!("S1-MME association {assoc} restarted by its peer {peer}");
                    }
                    ep.assoc_up(assoc, out_streams)
                }
                TransportEvent::Down { assoc, reason } => {
                    if self.live.remove(&assoc) {
                        tracing::info!("S1-MME association {assoc} down: {reason}");
                    }
                    ep.assoc_down(assoc, eo)
                }
                TransportEvent::Data {
                    assoc,
                    stream,
                    ppid,
                    data,
                } => {
                    if ppid != S1AP_PPID {
                        continue; // not S1AP: ignore (TS 36.412 §7)
                    }
                    ep.on_s1ap(assoc, stream, data, eo);
                }
            }
        }
        busy
    }

    fn emit(&mut self, o: Output) {
        match o {
            Output::S1ap {
                assoc,
                stream,
                bytes,
            } => {
                if let Err(e) = self.transport.send(assoc, stream, S1AP_PPID, &bytes) {
                    tracing::warn!("S1-MME send to association {assoc} failed: {e}");
                }
            }
            Output::CloseAssoc { assoc } => self.transport.close(assoc),
            other => tracing::error!("S1AP endpoint output {other:?} has no route"),
        }
    }

    fn flush(&mut self) {
        if let Err(e) = self.transport.flush() {
            tracing::warn!("S1-MME transport flush failed: {e}");
        }
    }

    /// Waits for transport input, `extra` descriptors or `deadline`.
    fn wait(&mut self, deadline: Instant, extra: &[RawFd], short: bool) {
        let now = Instant::now();
        let mut deadline = deadline;
        if let Some(fd) = self.transport.wait_fd() {
            if let Some(t) = self.transport.next_deadline() {
                deadline = deadline.min(t);
            }
            let wait = deadline.saturating_duration_since(now);
            if wait.is_zero() {
                return;
            }
            let mut fds = Vec::with_capacity(1 + extra.len());
            fds.push(fd);
            fds.extend_from_slice(extra);
            if let Err(e) = wait_any_readable(&fds, wait) {
                tracing::error!("S1-MME wait failed: {e}");
                std::thread::sleep(wait); // do not spin on a broken descriptor
            }
            return;
        }
        // A transport without a descriptor (both real backends have one) waits
        // inside its own poll; `short` caps that wait where other sources (the
        // slices' rings) must not wait long behind it.
        let mut wait = deadline.saturating_duration_since(now);
        if short {
            wait = wait.min(Duration::from_millis(1));
        }
        if wait.is_zero() {
            return;
        }
        if let Err(e) = self.transport.poll(wait, &mut self.events) {
            tracing::error!("S1-MME transport poll failed: {e}");
            std::thread::sleep(wait);
        }
    }
}

/// One slice per node: the endpoint, the transport and the MME all run on the
/// slice's control thread.
pub struct MmeDriver {
    wire: Wire,
    pub endpoint: S1apEndpoint,
    pub mme: Mme,
    pub hss: Proxy,
    eo: EndpointOut,
    out: Vec<Output>,
    control: Vec<ControlEvent>,
    /// S1 Setups and eNB updates seen when the eNB list was last published.
    enb_setups_seen: u64,
    gauges: Arc<SliceGauges>,
    mgmt: MgmtInbox,
    /// The node's state store, if it has one.
    pub state: SliceState,
    /// `[debug] record`: the MME's recording on its way to its file.
    recording: Option<crate::record::RecordFile>,
}

impl MmeDriver {
    pub fn new(transport: Box<dyn S1Transport>, mme: Mme, hss: Proxy) -> Self {
        let endpoint = S1apEndpoint::new(mme.config().clone(), 1, mme.role().policy);
        let (gauges, mgmt) = gauges_with_mgmt();
        MmeDriver {
            wire: Wire::new(transport),
            endpoint,
            mme,
            hss,
            eo: EndpointOut::default(),
            out: Vec::with_capacity(256),
            control: Vec::new(),
            enb_setups_seen: u64::MAX,
            gauges,
            mgmt,
            state: SliceState::default(),
            recording: None,
        }
    }

    pub fn gauges(&self) -> Arc<SliceGauges> {
        self.gauges.clone()
    }

    /// Runs the endpoint's slice inputs through the MME until nothing is left, then
    /// sends everything.
    fn settle(&mut self, cp: &mut ControlPlane, now: Instant) {
        loop {
            self.hss.serve(&mut self.mme, now, cp, &mut self.out, 0);
            for o in self.out.drain(..) {
                if let Some(o) = self.state.offer(o) {
                    self.endpoint.on_slice_output(0, o, &mut self.eo);
                }
            }
            if self.eo.slices.is_empty() {
                break;
            }
            let inputs = std::mem::take(&mut self.eo.slices);
            for (_, input) in inputs {
                match input {
                    Input::S1ap {
                        assoc,
                        stream,
                        bytes,
                    } => self
                        .mme
                        .handle_s1ap(now, assoc, stream, &bytes, cp, &mut self.out),
                    other => self.mme.handle(now, other, cp, &mut self.out),
                }
            }
        }
        for o in self.eo.wire.drain(..) {
            self.wire.emit(o);
        }
        self.wire.flush();
    }
}

impl Drop for MmeDriver {
    fn drop(&mut self) {
        if let Some(r) = self.recording.as_mut() {
            r.finish(&mut self.mme);
        }
        let c = self.wire.shutdown();
        if let Ok(mut s) = self.gauges.final_sctp.lock() {
            *s = c;
        }
        if let Ok(mut s) = self.gauges.final_stats.lock() {
            *s = Some(self.mme.stats.clone());
        }
        if let Ok(mut s) = self.gauges.final_overload.lock() {
            *s = Some(self.endpoint.overload_stats().clone());
        }
    }
}

impl Drop for SliceMme {
    fn drop(&mut self) {
        if let Some(r) = self.recording.as_mut() {
            r.finish(&mut self.mme);
        }
        if let Ok(mut s) = self.gauges.final_stats.lock() {
            *s = Some(self.mme.stats.clone());
        }
    }
}

impl ControlDriver for MmeDriver {
    fn prewarm(&mut self, cp: &mut ControlPlane, users: usize) {
        self.mme.prewarm(users);
        cp.prewarm(users);
    }

    fn start(&mut self, cp: &mut ControlPlane) {
        if let Some(f) = self.state.record.take() {
            self.recording = Some(crate::record::RecordFile::start(f, &mut self.mme, cp));
        }
        let now = Instant::now();
        self.mme
            .begin_restore(std::mem::take(&mut self.state.restore), now);
        self.settle(cp, now);
    }

    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        self.wire.poll();
        let mut busy = self.wire.feed(&mut self.endpoint, &mut self.eo);
        // Inline, the backlog is what one poll of the transport brought in.
        let backlog = self.eo.slices.len();
        self.endpoint.observe_backlog(now, 0, backlog, &mut self.eo);
        self.control.clear();
        if cp.poll_requests(&mut self.control) > 0 {
            busy = true;
        }
        for ev in self.control.drain(..) {
            self.eo.slices.push((0, Input::Control(ev)));
        }
        if self.hss.poll(&mut self.mme, now, cp, &mut self.out) {
            busy = true;
        }
        if self.mgmt.serve(&mut self.mme, cp, now, &mut self.out) {
            busy = true;
        }
        self.settle(cp, now);
        if self.mme.next_timeout(cp).is_some_and(|t| t <= now) {
            self.mme.handle_timeout(now, cp, &mut self.out);
            self.settle(cp, now);
            busy = true;
        }
        if self.mme.restoring() {
            restore_chunk(&mut self.mme, &self.gauges, cp, now, &mut self.out);
            self.settle(cp, now);
            busy = true;
        }
        let enbs = self.endpoint.enb_count() as u64;
        let setups = self.endpoint.stats.s1_setups + self.endpoint.stats.enb_config_updates;
        if enbs != self.gauges.enbs.load(Ordering::Relaxed) || setups != self.enb_setups_seen {
            self.enb_setups_seen = setups;
            if let Ok(mut v) = self.gauges.enb_views.lock() {
                *v = self.endpoint.enb_views();
            }
        }
        self.gauges.enbs.store(enbs, Ordering::Relaxed);
        self.gauges
            .sessions
            .store(cp.ue_count() as u64, Ordering::Relaxed);
        self.gauges.publish(&self.mme, &self.hss.stats, now);
        if let Some(r) = self.recording.as_mut() {
            r.pump(&mut self.mme, cp);
        }
        busy
    }

    /// Blocks until S1-MME input arrives, the data thread wakes us, the MME's or the
    /// transport's next timer is due, or `max` passes.
    fn wait_idle(&mut self, cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        if !self.wire.events.is_empty() {
            return;
        }
        let mut deadline = Instant::now() + max;
        if let Some(t) = self.mme.next_timeout(cp) {
            deadline = deadline.min(t);
        }
        let Ok(mgmt) = self.mgmt.begin_wait() else {
            return;
        };
        let extra: Vec<RawFd> = wake
            .into_iter()
            .chain(self.hss.wake_fds())
            .chain(mgmt)
            .collect();
        self.wire.wait(deadline, &extra, false);
        self.mgmt.end_wait();
    }

    /// The endpoint runs inline for this one slice.
    fn max_slices(&self) -> Option<usize> {
        Some(1)
    }
}

/// What the endpoint thread holds of one slice.
struct SliceLink {
    to: Producer<Input>,
    /// Inputs the ring had no room for, in order.
    backlog: VecDeque<Input>,
    pushed: u64,
    inbox_wake: Arc<IdleWake>,
    from: Consumer<Output>,
    outbox_wake: Arc<IdleWake>,
    /// Overload control's word to the slice, beside the ring rather than in it: the
    /// attaches already queued there are the ones it must turn away.
    congested: Arc<AtomicBool>,
}

/// Figures of the endpoint thread.
#[derive(Debug, Default)]
pub struct EndpointGauges {
    pub enbs: AtomicU64,
    pub demuxed: AtomicU64,
    pub dropped_inputs: AtomicU64,
    /// The endpoint's S1AP PDUs that did not decode, and messages for UE IDs no slice
    /// has (what the stop summary's "s1ap endpoint" line says).
    pub s1ap_decode_errors: AtomicU64,
    pub unknown_ue_ids: AtomicU64,
    /// CPU time of the endpoint thread (ns), updated about every 10 ms of work.
    pub cpu_ns: AtomicU64,
    /// Overload control: periods begun, and whether eNBs are told to hold back now.
    pub overload_starts: AtomicU64,
    pub overloaded: std::sync::atomic::AtomicBool,
    /// The S1-MME associations' counters when the thread stopped.
    pub final_sctp: std::sync::Mutex<Option<pepc_sctp::AssocCounters>>,
    /// The same while it runs, republished about every second (userspace SCTP only:
    /// kernel SCTP keeps its own), and the associations up now.
    pub sctp: std::sync::Mutex<Option<pepc_sctp::AssocCounters>>,
    pub associations: AtomicU64,
    /// The eNBs set up, republished when they change (the management API reads it).
    pub enb_views: std::sync::Mutex<Vec<pepc_mme::EnbView>>,
    /// Per slice: S1AP messages waiting for its MME (ring + backlog), each round.
    pub backlogs: std::sync::OnceLock<Box<[AtomicU64]>>,
}

/// The node's S1AP endpoint on its own thread.
pub struct EndpointThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<S1apEndpoint>>,
    pub gauges: Arc<EndpointGauges>,
}

impl EndpointThread {
    /// The thread ended while it should run (it panicked).
    pub fn failed(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.handle.as_ref().is_some_and(|h| h.is_finished())
    }

    /// Stops the thread; returns the endpoint (its counters).
    pub fn stop(mut self) -> Option<S1apEndpoint> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok())
    }
}

impl Drop for EndpointThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A slice's control driver when the endpoint runs on its own thread.
pub struct SliceMme {
    index: usize,
    pub mme: Mme,
    pub hss: Proxy,
    from: Consumer<Input>,
    inbox_wake: Arc<IdleWake>,
    /// Inbox count seen before the last drain (wake-up handshake).
    inbox_mark: u64,
    to: Producer<Output>,
    backlog: VecDeque<Output>,
    pushed: u64,
    outbox_wake: Arc<IdleWake>,
    out: Vec<Output>,
    control: Vec<ControlEvent>,
    gauges: Arc<SliceGauges>,
    mgmt: MgmtInbox,
    /// The node's state store, if it has one.
    pub state: SliceState,
    /// `[debug] record`: the MME's recording on its way to its file.
    recording: Option<crate::record::RecordFile>,
    /// Overload control's flag (set by the endpoint thread) and what the MME was
    /// last told of it.
    congested: Arc<AtomicBool>,
    told_congested: bool,
}

impl SliceMme {
    /// Tells the MME of a change of overload control's flag, as an input (recorded
    /// and replayed like any other), before the next message it handles.
    fn congestion(&mut self, cp: &mut ControlPlane, now: Instant) {
        let on = self.congested.load(Ordering::Relaxed);
        if on != self.told_congested {
            self.told_congested = on;
            self.mme
                .handle(now, Input::Congestion { on }, cp, &mut self.out);
        }
    }

    pub fn gauges(&self) -> Arc<SliceGauges> {
        self.gauges.clone()
    }

    fn ship(&mut self) {
        for o in self.out.drain(..) {
            let Some(o) = self.state.offer(o) else {
                continue;
            };
            if self.backlog.len() >= MAX_BACKLOG {
                self.gauges.dropped_outputs.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.backlog.push_back(o);
        }
        let before = self.pushed;
        while let Some(o) = self.backlog.pop_front() {
            match self.to.push(o) {
                Ok(()) => self.pushed += 1,
                Err(o) => {
                    self.backlog.push_front(o);
                    break;
                }
            }
        }
        if self.pushed != before {
            self.outbox_wake.post(self.pushed);
        }
    }
}

impl ControlDriver for SliceMme {
    fn prewarm(&mut self, cp: &mut ControlPlane, users: usize) {
        self.mme.prewarm(users);
        cp.prewarm(users);
    }

    fn start(&mut self, cp: &mut ControlPlane) {
        if let Some(f) = self.state.record.take() {
            self.recording = Some(crate::record::RecordFile::start(f, &mut self.mme, cp));
        }
        self.mme
            .begin_restore(std::mem::take(&mut self.state.restore), Instant::now());
    }

    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        self.inbox_mark = self.inbox_wake.posted();
        let mut busy = false;
        self.congestion(cp, now);
        while let Some(input) = self.from.pop() {
            busy = true;
            self.congestion(cp, now);
            match input {
                Input::S1ap {
                    assoc,
                    stream,
                    bytes,
                } => self
                    .mme
                    .handle_s1ap(now, assoc, stream, &bytes, cp, &mut self.out),
                other => self.mme.handle(now, other, cp, &mut self.out),
            }
            if self.out.len() >= 256 {
                self.hss.serve(&mut self.mme, now, cp, &mut self.out, 0);
                self.ship();
            }
        }
        self.control.clear();
        if cp.poll_requests(&mut self.control) > 0 {
            busy = true;
        }
        for ev in self.control.drain(..) {
            self.mme.handle(now, Input::Control(ev), cp, &mut self.out);
        }
        if self.mme.next_timeout(cp).is_some_and(|t| t <= now) {
            self.mme.handle_timeout(now, cp, &mut self.out);
            busy = true;
        }
        if self.hss.poll(&mut self.mme, now, cp, &mut self.out) {
            busy = true;
        }
        if self.mgmt.serve(&mut self.mme, cp, now, &mut self.out) {
            busy = true;
        }
        if self.mme.restoring() {
            restore_chunk(&mut self.mme, &self.gauges, cp, now, &mut self.out);
            busy = true;
        }
        self.hss.serve(&mut self.mme, now, cp, &mut self.out, 0);
        self.ship();
        if !self.backlog.is_empty() {
            busy = true;
        }
        self.gauges
            .sessions
            .store(cp.ue_count() as u64, Ordering::Relaxed);
        self.gauges.publish(&self.mme, &self.hss.stats, now);
        if let Some(r) = self.recording.as_mut() {
            r.pump(&mut self.mme, cp);
        }
        busy
    }

    fn wait_idle(&mut self, cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        let mut wait = max;
        if let Some(t) = self.mme.next_timeout(cp) {
            wait = wait.min(t.saturating_duration_since(Instant::now()));
        }
        if wait.is_zero() || !self.inbox_wake.begin_wait(self.inbox_mark) {
            return;
        }
        let Ok(mgmt) = self.mgmt.begin_wait() else {
            self.inbox_wake.end_wait();
            return;
        };
        let mut fds = [self.inbox_wake.fd(), -1, -1, -1, -1];
        let mut n = 1;
        let proxy = self.hss.wake_fds();
        for fd in [wake, mgmt].into_iter().flatten().chain(proxy) {
            fds[n] = fd;
            n += 1;
        }
        if let Err(e) = wait_any_readable(&fds[..n], wait) {
            tracing::error!("slice {} control wait failed: {e}", self.index);
            std::thread::sleep(wait);
        }
        self.mgmt.end_wait();
        self.inbox_wake.end_wait();
    }
}

/// Starts the endpoint thread on `transport` with one MME per slice (`mmes[s]`
/// serves slice `s`, reaching the HSS through its proxy driver; their roles are set
/// here); returns it and the slices' drivers.
pub fn start_signaling(
    transport: Box<dyn S1Transport>,
    mut endpoint: S1apEndpoint,
    mmes: Vec<(Mme, Proxy)>,
    core: Option<usize>,
) -> std::io::Result<(EndpointThread, Vec<SliceMme>)> {
    let mut links = Vec::with_capacity(mmes.len());
    let mut drivers = Vec::with_capacity(mmes.len());
    for (s, (mut mme, hss)) in mmes.into_iter().enumerate() {
        mme.set_role(endpoint.role(s));
        let (to_slice, from_node) = spsc::channel::<Input>(RING);
        let (to_node, from_slice) = spsc::channel::<Output>(RING);
        let inbox_wake = Arc::new(IdleWake::new()?);
        let outbox_wake = Arc::new(IdleWake::new()?);
        let congested = Arc::new(AtomicBool::new(false));
        links.push(SliceLink {
            to: to_slice,
            backlog: VecDeque::new(),
            pushed: 0,
            inbox_wake: inbox_wake.clone(),
            from: from_slice,
            outbox_wake: outbox_wake.clone(),
            congested: congested.clone(),
        });
        let (gauges, mgmt) = gauges_with_mgmt();
        drivers.push(SliceMme {
            index: s,
            mme,
            hss,
            from: from_node,
            inbox_wake,
            inbox_mark: 0,
            to: to_node,
            backlog: VecDeque::new(),
            pushed: 0,
            outbox_wake,
            out: Vec::with_capacity(256),
            control: Vec::new(),
            gauges,
            mgmt,
            state: SliceState::default(),
            recording: None,
            congested,
            told_congested: false,
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let gauges = Arc::new(EndpointGauges::default());
    let (st, g) = (stop.clone(), gauges.clone());
    let mut wire = Wire::new(transport);
    let handle = std::thread::Builder::new()
        .name("pepc-s1ap".into())
        .spawn(move || {
            if let Some(c) = core {
                pepc_slice::slice::pin_current_thread(c);
            }
            endpoint_loop(&mut wire, &mut endpoint, &mut links, &st, &g);
            if let Ok(mut s) = g.final_sctp.lock() {
                *s = wire.shutdown();
            }
            endpoint
        })?;
    Ok((
        EndpointThread {
            stop,
            handle: Some(handle),
            gauges,
        },
        drivers,
    ))
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn endpoint_loop(
    wire: &mut Wire,
    ep: &mut S1apEndpoint,
    links: &mut [SliceLink],
    stop: &AtomicBool,
    gauges: &EndpointGauges,
) {
    let mut eo = EndpointOut::default();
    let mut idle_rounds = 0u32;
    let mut last_cpu = Instant::now();
    let mut last_sctp = Instant::now();
    let mut last_setups = u64::MAX;
    while !stop.load(Ordering::Relaxed) {
        let marks: Vec<u64> = links.iter().map(|l| l.outbox_wake.posted()).collect();
        wire.poll();
        let mut busy = wire.feed(ep, &mut eo);
        for (s, l) in links.iter_mut().enumerate() {
            while let Some(o) = l.from.pop() {
                busy = true;
                ep.on_slice_output(s, o, &mut eo);
            }
        }
        for (s, input) in eo.slices.drain(..) {
            let l = &mut links[s];
            if let Input::Congestion { on } = input {
                l.congested.store(on, Ordering::Relaxed);
                continue;
            }
            if l.backlog.len() >= MAX_BACKLOG {
                gauges.dropped_inputs.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            l.backlog.push_back(input);
        }
        for l in links.iter_mut() {
            let before = l.pushed;
            while let Some(i) = l.backlog.pop_front() {
                match l.to.push(i) {
                    Ok(()) => l.pushed += 1,
                    Err(i) => {
                        l.backlog.push_front(i);
                        busy = true;
                        break;
                    }
                }
            }
            if l.pushed != before {
                l.inbox_wake.post(l.pushed);
            }
        }
        // Overload control sees every slice's backlog each round.
        let now = Instant::now();
        let depths = gauges
            .backlogs
            .get_or_init(|| links.iter().map(|_| AtomicU64::new(0)).collect());
        for (s, l) in links.iter().enumerate() {
            let depth = l.backlog.len() + l.to.len();
            ep.observe_backlog(now, s, depth, &mut eo);
            depths[s].store(depth as u64, Ordering::Relaxed);
        }
        busy |= !eo.slices.is_empty();
        for o in eo.wire.drain(..) {
            wire.emit(o);
        }
        wire.flush();
        gauges
            .overload_starts
            .store(ep.overload_stats().starts, Ordering::Relaxed);
        gauges.overloaded.store(ep.overloaded(), Ordering::Relaxed);
        let enbs = ep.enb_count() as u64;
        let setups = ep.stats.s1_setups + ep.stats.enb_config_updates;
        if enbs != gauges.enbs.load(Ordering::Relaxed) || setups != last_setups {
            last_setups = setups;
            if let Ok(mut v) = gauges.enb_views.lock() {
                *v = ep.enb_views();
            }
        }
        gauges.enbs.store(enbs, Ordering::Relaxed);
        gauges.demuxed.store(ep.stats.demuxed, Ordering::Relaxed);
        gauges
            .s1ap_decode_errors
            .store(ep.stats.s1ap_decode_errors, Ordering::Relaxed);
        gauges
            .unknown_ue_ids
            .store(ep.stats.unknown_ue_ids, Ordering::Relaxed);
        if last_cpu.elapsed() > Duration::from_millis(10) {
            gauges.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            last_cpu = Instant::now();
        }
        gauges
            .associations
            .store(wire.live.len() as u64, Ordering::Relaxed);
        if last_sctp.elapsed() > Duration::from_secs(1) {
            // Walks every association: once a second, not every round.
            if let Ok(mut s) = gauges.sctp.lock() {
                *s = wire.transport.counters();
            }
            last_sctp = Instant::now();
        }
        if busy {
            idle_rounds = 0;
            continue;
        }
        idle_rounds = idle_rounds.saturating_add(1);
        let max = crate::runtime::idle_wait_cap(idle_rounds);
        // Wait only if no slice posted since we read its ring.
        let mut armed = Vec::with_capacity(links.len());
        let mut posted = false;
        for (l, m) in links.iter().zip(&marks) {
            if l.outbox_wake.begin_wait(*m) {
                armed.push(l);
            } else {
                posted = true;
                break;
            }
        }
        if !posted {
            let fds: Vec<RawFd> = links.iter().map(|l| l.outbox_wake.fd()).collect();
            wire.wait(Instant::now() + max, &fds, true);
        }
        for l in armed {
            l.outbox_wake.end_wait();
        }
    }
    gauges.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
}
