//! What a slice's and the endpoint's threads publish for the metrics endpoint, the
//! API and the stop summary: atomics each thread alone writes, and copies behind a
//! lock only readers and that thread take (it never waits for it).

use super::mgmt::{MgmtInbox, MgmtRequest};
use crate::checkpoint::Restored;
use crate::runtime::IdleWake;
use pepc_mme::Mme;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// The S1-MME associations, where the endpoint runs inline here.
    pub sctp: Arc<SctpGauges>,
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
    pub(super) mgmt: std::sync::OnceLock<std::sync::mpsc::Sender<MgmtRequest>>,
    /// Wakes the control thread from its idle wait for a queued request.
    pub(super) mgmt_wake: std::sync::OnceLock<Arc<IdleWake>>,
    mgmt_seq: AtomicU64,
}

/// A slice driver's gauges, holding the sender of its management queue.
pub(super) fn gauges_with_mgmt() -> (Arc<SliceGauges>, MgmtInbox) {
    let (tx, rx) = std::sync::mpsc::channel();
    let g = SliceGauges::default();
    let _ = g.mgmt.set(tx);
    // Without an eventfd requests still come within the idle wait's cap.
    let wake = IdleWake::new().ok().map(Arc::new);
    if let Some(w) = &wake {
        let _ = g.mgmt_wake.set(w.clone());
    }
    (Arc::new(g), MgmtInbox::new(rx, wake))
}

/// How often a control thread copies its MME's counters for the metrics endpoint.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

impl SliceGauges {
    /// The MME's figures for readers on other threads: the level gauges every round
    /// (atomics), a copy of its counters every 100 ms (a lock only the scraper and
    /// this thread take, and this thread never waits for it).
    pub(super) fn publish(&self, mme: &Mme, hss: &crate::proxy::ProxyStats, now: Instant) {
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

    pub(super) fn restored(&self, r: Restored) {
        self.restored.store(r.ues, Ordering::Relaxed);
        self.restore_failed.store(r.failed, Ordering::Relaxed);
    }
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
    /// The S1-MME associations, as the endpoint thread's transport has them.
    pub sctp: Arc<SctpGauges>,
    /// The eNBs set up, republished when they change (the management API reads it).
    pub enb_views: std::sync::Mutex<Vec<pepc_mme::EnbView>>,
    /// Per slice: S1AP messages waiting for its MME (ring + backlog), each round.
    pub backlogs: std::sync::OnceLock<Box<[AtomicU64]>>,
}

/// The S1-MME associations, written by the thread that owns the transport: the count
/// up every round, the counters (summed, and per association) about every second
/// (they walk every association), the totals once more when it stops. Userspace
/// SCTP only: kernel SCTP keeps its own (/proc/net/sctp).
#[derive(Debug, Default)]
pub struct SctpGauges {
    pub up: AtomicU64,
    /// Every association's counters summed, closed ones included.
    pub totals: std::sync::Mutex<Option<pepc_sctp::AssocCounters>>,
    /// Each open association.
    pub assocs: std::sync::Mutex<Vec<pepc_sctp::assoc::AssocView>>,
    /// The totals when the transport was shut down (the stop summary's).
    pub final_totals: std::sync::Mutex<Option<pepc_sctp::AssocCounters>>,
}
