//! The transport side of the S1AP endpoint: SCTP events in, S1AP and closes out,
//! and the association lines an operator reads in the log.

use super::gauges::SctpGauges;
use crate::io::wait_any_readable;
use pepc_mme::{EndpointOut, Output, S1apEndpoint};
use pepc_sctp::transport::{S1Transport, TransportEvent, S1AP_PPID};
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the associations' counters are read for other threads.
const SCTP_EVERY: Duration = Duration::from_secs(1);

/// The transport side of the endpoint: events in, S1AP and closes out.
pub(super) struct Wire {
    pub(super) transport: Box<dyn S1Transport>,
    pub(super) events: Vec<TransportEvent>,
    /// Associations up now (shut down when the node stops).
    pub(super) live: std::collections::HashSet<pepc_sctp::AssocId>,
    pub(super) gauges: Arc<SctpGauges>,
    published: Option<Instant>,
}

impl Wire {
    pub(super) fn new(transport: Box<dyn S1Transport>, gauges: Arc<SctpGauges>) -> Self {
        Wire {
            transport,
            events: Vec::with_capacity(256),
            live: Default::default(),
            gauges,
            published: None,
        }
    }

    /// The associations' figures for other threads: the count up every call, the
    /// counters about every second.
    pub(super) fn publish(&mut self, now: Instant) {
        self.gauges
            .up
            .store(self.live.len() as u64, Ordering::Relaxed);
        if self
            .published
            .is_some_and(|t| now.saturating_duration_since(t) < SCTP_EVERY)
        {
            return;
        }
        self.published = Some(now);
        let totals = self.transport.counters();
        let assocs = self.transport.associations();
        if let Ok(mut t) = self.gauges.totals.lock() {
            *t = totals;
        }
        if let Ok(mut a) = self.gauges.assocs.lock() {
            *a = assocs;
        }
    }

    /// The node stops: every association is shut down (SCTP SHUTDOWN, so the eNBs
    /// learn at once rather than by their heartbeats), waiting a moment for the
    /// peers' SHUTDOWN ACKs.
    pub(super) fn shutdown(&mut self) -> Option<pepc_sctp::AssocCounters> {
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
        let c = self.transport.counters();
        if let Ok(mut t) = self.gauges.final_totals.lock() {
            *t = c;
        }
        self.gauges.up.store(0, Ordering::Relaxed);
        if let Ok(mut a) = self.gauges.assocs.lock() {
            a.clear();
        }
        c
    }

    /// Whether a wait already read events not yet handed on.
    pub(super) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Reads what is pending (unless `events` already holds what a wait read).
    pub(super) fn poll(&mut self) {
        if self.events.is_empty() {
            if let Err(e) = self.transport.poll(Duration::ZERO, &mut self.events) {
                tracing::error!("S1-MME transport poll failed: {e}");
            }
        }
    }

    /// Hands every pending transport event to the endpoint.
    pub(super) fn feed(&mut self, ep: &mut S1apEndpoint, eo: &mut EndpointOut) -> bool {
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

    pub(super) fn emit(&mut self, o: Output) {
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

    pub(super) fn flush(&mut self) {
        if let Err(e) = self.transport.flush() {
            tracing::warn!("S1-MME transport flush failed: {e}");
        }
    }

    /// Waits for transport input, `extra` descriptors or `deadline`.
    pub(super) fn wait(&mut self, deadline: Instant, extra: &[RawFd], short: bool) {
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
