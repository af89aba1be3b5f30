//! The one control driver of a slice that runs an MME ([`SliceMme`]). Where its
//! S1AP comes from is its [`Link`]: rings to the node's endpoint thread (N slices), or
//! the endpoint inline on this thread, owning the transport (one slice: no extra hop).
//! Everything else (the HSS and PCRF proxy, timers, the management queue, restore,
//! checkpoints, the recording, the gauges) is the same code either way.

use super::gauges::{gauges_with_mgmt, SliceGauges};
use super::mgmt::MgmtInbox;
use super::wire::Wire;
use super::MAX_BACKLOG;
use crate::checkpoint::{Restored, SliceState};
use crate::io::wait_any_readable;
use crate::proxy::Proxy;
use crate::runtime::{ControlDriver, IdleWake};
use pepc_mme::ControlPlane;
use pepc_mme::{EndpointOut, Input, Mme, Output, S1apEndpoint};
use pepc_sctp::transport::S1Transport;
use pepc_slice::control::ControlEvent;
use pepc_slice::spsc::{Consumer, Producer};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// UEs restored per control-loop round while the node serves (about 2-3 µs each:
/// a round stays within a few milliseconds, so signaling is not held up).
const RESTORE_CHUNK: usize = 2048;

/// Outputs the MME may gather before they go out in the middle of a long drain.
const SHIP_EVERY: usize = 256;

/// A slice's end of its rings to the endpoint thread.
pub(super) struct RingEnd {
    pub(super) from: Consumer<Input>,
    pub(super) inbox_wake: Arc<IdleWake>,
    /// Inbox count seen before the last drain (wake-up handshake).
    pub(super) inbox_mark: u64,
    pub(super) to: Producer<Output>,
    /// Outputs the ring had no room for, in order.
    pub(super) backlog: VecDeque<Output>,
    pub(super) pushed: u64,
    pub(super) outbox_wake: Arc<IdleWake>,
    /// Overload control's flag (set by the endpoint thread, beside the ring: the
    /// attaches already queued in it are the ones it must turn away) and what the MME
    /// was last told of it.
    pub(super) congested: Arc<AtomicBool>,
    pub(super) told_congested: bool,
}

impl RingEnd {
    /// The next input: a change of overload control's flag first (as an input, so
    /// recordings and replays see it), then the ring in order.
    fn pop(&mut self) -> Option<Input> {
        let on = self.congested.load(Ordering::Relaxed);
        if on != self.told_congested {
            self.told_congested = on;
            return Some(Input::Congestion { on });
        }
        self.from.pop()
    }
}

/// The endpoint and the transport, on the slice's own control thread.
pub(super) struct Inline {
    wire: Wire,
    endpoint: S1apEndpoint,
    eo: EndpointOut,
    /// Inputs for the MME the endpoint gave, in order.
    pending: VecDeque<Input>,
    /// S1 Setups and eNB updates seen when the eNB list was last published.
    enb_setups_seen: u64,
}

/// Where a slice's MME gets its S1AP and sends its answers.
pub(super) enum Link {
    Ring(RingEnd),
    Inline(Box<Inline>),
}

impl Link {
    fn pop(&mut self) -> Option<Input> {
        match self {
            Link::Ring(r) => r.pop(),
            Link::Inline(i) => i.pending.pop_front(),
        }
    }
}

/// A slice's control driver: its MME, fed by its [`Link`].
pub struct SliceMme {
    pub(super) index: usize,
    pub mme: Mme,
    pub hss: Proxy,
    pub(super) link: Link,
    pub(super) out: Vec<Output>,
    pub(super) control: Vec<ControlEvent>,
    pub(super) gauges: Arc<SliceGauges>,
    pub(super) mgmt: MgmtInbox,
    /// The node's state store, if it has one.
    pub state: SliceState,
    /// `[debug] record`: the MME's recording on its way to its file.
    pub(super) recording: Option<crate::record::RecordFile>,
}

impl SliceMme {
    /// A slice driver on `link`.
    pub(super) fn on(index: usize, mme: Mme, hss: Proxy, link: Link) -> Self {
        let (gauges, mgmt) = gauges_with_mgmt();
        Self::with_gauges(index, mme, hss, link, gauges, mgmt)
    }

    fn with_gauges(
        index: usize,
        mme: Mme,
        hss: Proxy,
        link: Link,
        gauges: Arc<SliceGauges>,
        mgmt: MgmtInbox,
    ) -> Self {
        SliceMme {
            index,
            mme,
            hss,
            link,
            out: Vec::with_capacity(SHIP_EVERY),
            control: Vec::new(),
            gauges,
            mgmt,
            state: SliceState::default(),
            recording: None,
        }
    }

    /// The only slice of a node: the endpoint and `transport` run inline on its
    /// control thread.
    pub fn inline(transport: Box<dyn S1Transport>, mme: Mme, hss: Proxy) -> Self {
        let endpoint = S1apEndpoint::new(mme.config().clone(), 1, mme.role().policy);
        let (gauges, mgmt) = gauges_with_mgmt();
        let link = Link::Inline(Box::new(Inline {
            wire: Wire::new(transport, gauges.sctp.clone()),
            endpoint,
            eo: EndpointOut::default(),
            pending: VecDeque::new(),
            enb_setups_seen: u64::MAX,
        }));
        Self::with_gauges(0, mme, hss, link, gauges, mgmt)
    }

    pub fn gauges(&self) -> Arc<SliceGauges> {
        self.gauges.clone()
    }

    /// Inline: reads the transport into the endpoint, which queues this slice's
    /// inputs (overload control first sees the round's backlog).
    fn receive(&mut self, now: Instant) -> bool {
        let Link::Inline(i) = &mut self.link else {
            return false;
        };
        i.wire.poll();
        let busy = i.wire.feed(&mut i.endpoint, &mut i.eo);
        // Inline, the backlog is what one poll of the transport brought in.
        let backlog = i.eo.slices.len();
        i.endpoint.observe_backlog(now, 0, backlog, &mut i.eo);
        i.pending
            .extend(i.eo.slices.drain(..).map(|(_, input)| input));
        busy
    }

    /// Every input the link holds, through the MME.
    fn drain(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        let mut busy = false;
        while let Some(input) = self.link.pop() {
            busy = true;
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
            // Through rings, a long drain sends as it goes; inline, the endpoint's
            // answers would be inputs again, so they wait for the drain's end.
            if self.out.len() >= SHIP_EVERY && matches!(self.link, Link::Ring(_)) {
                self.hss.serve(&mut self.mme, now, cp, &mut self.out, 0);
                self.ship(cp, now);
            }
        }
        busy
    }

    /// Sends the MME's outputs (after the state store took the checkpoints). Inline,
    /// the endpoint's answers to them may be inputs again: they run until none is left.
    fn ship(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        loop {
            let outs = self.out.drain(..).filter_map(|o| self.state.offer(o));
            match &mut self.link {
                Link::Ring(r) => {
                    for o in outs {
                        if r.backlog.len() >= MAX_BACKLOG {
                            self.gauges.dropped_outputs.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                        r.backlog.push_back(o);
                    }
                    let before = r.pushed;
                    while let Some(o) = r.backlog.pop_front() {
                        match r.to.push(o) {
                            Ok(()) => r.pushed += 1,
                            Err(o) => {
                                r.backlog.push_front(o);
                                break;
                            }
                        }
                    }
                    if r.pushed != before {
                        r.outbox_wake.post(r.pushed);
                    }
                    return !r.backlog.is_empty();
                }
                Link::Inline(i) => {
                    for o in outs {
                        i.endpoint.on_slice_output(0, o, &mut i.eo);
                    }
                    if i.eo.slices.is_empty() {
                        for o in i.eo.wire.drain(..) {
                            i.wire.emit(o);
                        }
                        i.wire.flush();
                        return false;
                    }
                    i.pending
                        .extend(i.eo.slices.drain(..).map(|(_, input)| input));
                }
            }
            self.drain(cp, now);
            self.hss.serve(&mut self.mme, now, cp, &mut self.out, 0);
        }
    }

    /// The figures other threads read: the MME's, and the endpoint's where it runs here.
    fn publish(&mut self, cp: &ControlPlane, now: Instant) {
        if let Link::Inline(i) = &mut self.link {
            let enbs = i.endpoint.enb_count() as u64;
            let setups = i.endpoint.stats.s1_setups + i.endpoint.stats.enb_config_updates;
            if enbs != self.gauges.enbs.load(Ordering::Relaxed) || setups != i.enb_setups_seen {
                i.enb_setups_seen = setups;
                if let Ok(mut v) = self.gauges.enb_views.lock() {
                    *v = i.endpoint.enb_views();
                }
            }
            self.gauges.enbs.store(enbs, Ordering::Relaxed);
            i.wire.publish(now);
        }
        self.gauges
            .sessions
            .store(cp.ue_count() as u64, Ordering::Relaxed);
        self.gauges.publish(&self.mme, &self.hss.stats, now);
    }
}

impl Drop for SliceMme {
    fn drop(&mut self) {
        if let Some(r) = self.recording.as_mut() {
            r.finish(&mut self.mme);
        }
        if let Link::Inline(i) = &mut self.link {
            i.wire.shutdown();
            if let Ok(mut s) = self.gauges.final_overload.lock() {
                *s = Some(i.endpoint.overload_stats().clone());
            }
        }
        if let Ok(mut s) = self.gauges.final_stats.lock() {
            *s = Some(self.mme.stats.clone());
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
        let now = Instant::now();
        self.mme
            .begin_restore(std::mem::take(&mut self.state.restore), now);
        self.ship(cp, now);
    }

    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        if let Link::Ring(r) = &mut self.link {
            r.inbox_mark = r.inbox_wake.posted();
        }
        let mut busy = self.receive(now);
        busy |= self.drain(cp, now);
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
            if let Some(r) = self.mme.restore_some(cp, now, RESTORE_CHUNK, &mut self.out) {
                self.gauges.restored(Restored {
                    ues: r.restored,
                    failed: r.failed,
                });
            }
            busy = true;
        }
        self.hss.serve(&mut self.mme, now, cp, &mut self.out, 0);
        busy |= self.ship(cp, now);
        self.state.flush();
        self.publish(cp, now);
        if let Some(r) = self.recording.as_mut() {
            r.pump(&mut self.mme, cp);
        }
        busy
    }

    /// Blocks until S1AP arrives (from the ring, or the transport inline), the data
    /// thread wakes us, a management request or an HSS answer comes, the MME's or the
    /// transport's next timer is due, or `max` passes.
    fn wait_idle(&mut self, cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        let mut deadline = Instant::now() + max;
        if let Some(t) = self.mme.next_timeout(cp) {
            deadline = deadline.min(t);
        }
        let mut fds: Vec<RawFd> = Vec::with_capacity(6);
        fds.extend(wake);
        fds.extend(self.hss.wake_fds());
        match &mut self.link {
            Link::Inline(i) => {
                if !i.wire.has_events() {
                    let Ok(mgmt) = self.mgmt.begin_wait() else {
                        return;
                    };
                    fds.extend(mgmt);
                    i.wire.wait(deadline, &fds, false);
                    self.mgmt.end_wait();
                }
            }
            Link::Ring(r) => {
                let wait = deadline.saturating_duration_since(Instant::now());
                if wait.is_zero() || !r.inbox_wake.begin_wait(r.inbox_mark) {
                    return;
                }
                let Ok(mgmt) = self.mgmt.begin_wait() else {
                    r.inbox_wake.end_wait();
                    return;
                };
                fds.push(r.inbox_wake.fd());
                fds.extend(mgmt);
                if let Err(e) = wait_any_readable(&fds, wait) {
                    tracing::error!("slice {} control wait failed: {e}", self.index);
                    std::thread::sleep(wait);
                }
                self.mgmt.end_wait();
                r.inbox_wake.end_wait();
            }
        }
    }

    /// Inline, the endpoint serves this one slice.
    fn max_slices(&self) -> Option<usize> {
        match self.link {
            Link::Inline(_) => Some(1),
            Link::Ring(_) => None,
        }
    }
}
