//! The management API's requests to a slice's control thread, which owns the UEs:
//! queued, woken by an eventfd, and served a few per round between signaling.

use crate::runtime::IdleWake;
use pepc_mme::ControlPlane;
use pepc_mme::{Mme, Output};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

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

/// A control thread's end of the management queue, and its wake-up.
pub(super) struct MgmtInbox {
    rx: std::sync::mpsc::Receiver<MgmtRequest>,
    wake: Option<Arc<IdleWake>>,
    /// Posts seen before the queue was last drained (the wake-up handshake).
    mark: u64,
}

impl MgmtInbox {
    pub(super) fn new(
        rx: std::sync::mpsc::Receiver<MgmtRequest>,
        wake: Option<Arc<IdleWake>>,
    ) -> Self {
        MgmtInbox { rx, wake, mark: 0 }
    }

    pub(super) fn serve(
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
    pub(super) fn begin_wait(&self) -> Result<Option<RawFd>, ()> {
        match &self.wake {
            Some(w) if w.begin_wait(self.mark) => Ok(Some(w.fd())),
            Some(_) => Err(()),
            None => Ok(None),
        }
    }

    pub(super) fn end_wait(&self) {
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
