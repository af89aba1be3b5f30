//! The MME's side of the HSS (S6a) as messages: the procedures send an
//! [`HssRequest`] ([`crate::Output::Hss`]) and wait, in a state of their own, for the
//! [`HssAnswer`] ([`crate::Input::Hss`]) that carries the same [`HssRef`]. The node's
//! proxy serves the requests of its slices (PEPC §3.3) with the embedded HSS
//! (`pepc_hss::seam`) or a Diameter S6a client; [`serve_requests`] takes the requests
//! out of a call's outputs for it.
//!
//! The shapes follow S6a (TS 29.272): [`HssRequest::Profile`] is what an Update
//! Location Request asks and [`SubscriptionData`] what its answer fills;
//! [`HssRequest::Vector`] an Authentication Information Request for one E-UTRAN
//! vector of the serving PLMN; [`HssRequest::Resync`] the same with
//! Re-Synchronization-Info (RAND + AUTS, §7.3.15).

use crate::mme::Output;

// The seam's types (requests, answers, the reference) live below the MME and the
// S6a client alike; here under their old paths.
pub use pepc_seams::hss::{
    CancellationType, DefaultApn, HssAnswer, HssData, HssFailure, HssRef, HssRequest,
    SubscriptionData, SubscriptionUpdate,
};

/// A request for the node's proxy: to the HSS or to the PCRF.
#[derive(Debug)]
pub enum Proxied {
    Hss(HssRequest),
    Pcrf(crate::pcrf::PcrfRequest),
}

/// Outputs after `from` up to which requests are taken out in place.
const SHORT_TAIL: usize = 32;

/// Takes every [`Output::Hss`] and [`Output::Pcrf`] out of `out[from..]`, in order,
/// to `answer`, which may append outputs (what the answer led to) to the vector it
/// is given: those are scanned in turn after the rest, as if appended to `out`. The
/// other outputs stay in `out`, in order. Linear in the outputs (a driver hands over
/// a whole batch's).
pub fn serve_requests(
    out: &mut Vec<Output>,
    from: usize,
    mut answer: impl FnMut(Proxied, &mut Vec<Output>),
) {
    let is_request = |o: &Output| matches!(o, Output::Hss(_) | Output::Pcrf(_));
    let Some(first) = out.get(from..).and_then(|t| t.iter().position(is_request)) else {
        return;
    };
    // A short tail (one message's outputs): each request is taken out in place and
    // its answer's outputs appended, then scanned from where it was; no allocation.
    if out.len() - from <= SHORT_TAIL {
        let mut i = from + first;
        while i < out.len() {
            if !is_request(&out[i]) {
                i += 1;
                continue;
            }
            match out.remove(i) {
                Output::Hss(req) => answer(Proxied::Hss(req), out),
                Output::Pcrf(req) => answer(Proxied::Pcrf(req), out),
                // Checked above: never taken.
                o => {
                    out.insert(i, o);
                    i += 1;
                }
            }
        }
        return;
    }
    // A whole batch's: once through a queue (each removal in place would shift the
    // rest of the batch).
    let mut queue: std::collections::VecDeque<Output> = out.drain(from..).collect();
    let mut fresh = Vec::new();
    while let Some(o) = queue.pop_front() {
        let req = match o {
            Output::Hss(req) => Proxied::Hss(req),
            Output::Pcrf(req) => Proxied::Pcrf(req),
            o => {
                out.push(o);
                continue;
            }
        };
        answer(req, &mut fresh);
        queue.extend(fresh.drain(..));
    }
}

// The MME's side: sending a request and waiting for it, the answer, the timer.
mod procedures {
    use super::{HssAnswer, HssData, HssFailure, HssRef, HssRequest, SubscriptionData};
    use crate::prelude::*;

    /// The subscription's QoS, AMBR and APN (`apn`: its index) into the UE's context.
    fn adopt_profile(u: &mut Ue, sub: &SubscriptionData, apn: u16, default_ambr: (u64, u64)) {
        u.ambr = if sub.ambr_ul_bps > 0 {
            (sub.ambr_ul_bps, sub.ambr_dl_bps)
        } else {
            default_ambr
        };
        u.qci = sub.qci;
        u.arp_priority = sub.arp_priority;
        u.hss_location = true;
        if u.apn.is_empty() && !u.esm_info_flag {
            u.apn.clone_from(&sub.apn);
        }
        u.subscribed_apn = apn;
    }

    impl Mme {
        /// Send `req` (made for the reference given) for UE `id`, which then waits for
        /// its answer in state `wait` (made for the sequence number), guarded by
        /// `cfg.hss_timeout`.
        pub(crate) fn ask_hss(
            &mut self,
            cp: &mut ControlPlane,
            id: u32,
            req: impl FnOnce(HssRef) -> HssRequest,
            wait: impl FnOnce(u32) -> Procedure,
            out: &mut Vec<Output>,
        ) {
            let now = self.now;
            let Some(u) = self.ue_mut(cp, id) else {
                return;
            };
            let seq = self.next_hss_seq();
            u.proc = wait(seq);
            // Nothing of the NAS layer is pending while the HSS is asked.
            u.nas_timer = None;
            u.retx = None;
            self.prune_hss_deadlines(cp);
            self.hss_deadlines
                .push_back((now + self.cfg.hss_timeout, id, seq));
            self.stats.hss_requests += 1;
            out.push(Output::Hss(req(HssRef { mme_ue_id: id, seq })));
        }

        /// Ask the HSS for `imsi`'s subscription data (Update Location) for an
        /// authenticated attach; then its session.
        pub(crate) fn ask_profile(
            &mut self,
            cp: &mut ControlPlane,
            id: u32,
            imsi: u64,
            out: &mut Vec<Output>,
        ) {
            // The Attach Request's digest is not kept past AKA: one repeated now is
            // served as a new attach (the UE restarted it).
            self.ask_hss(
                cp,
                id,
                |r| HssRequest::Profile { r, imsi },
                |seq| Procedure::ExpectHssProfile { seq, attach: 0 },
                out,
            );
        }

        /// Ask the HSS for a vector of `imsi` for our PLMN; then the Authentication
        /// Request, and after AKA and security mode what `then` says.
        // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn ask_vector(
            &mut self,
            cp: &mut ControlPlane,
            id: u32,
            imsi: u64,
            attach: u16,
            then: Resume,
            out: &mut Vec<Output>,
        ) {
            let plmn = self.cfg.plmn.0;
            self.ask_hss(
                cp,
                id,
                |r| HssRequest::Vector { r, imsi, plmn },
                |seq| Procedure::ExpectHssVector {
                    seq,
                    attach,
                    resynced: false,
                    then,
                },
                out,
            );
        }

        /// Resynchronise `imsi` with the UE's AUTS for `rand`, and get a fresh vector.
        // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn ask_resync(
            &mut self,
            cp: &mut ControlPlane,
            id: u32,
            imsi: u64,
            (rand, auts): ([u8; 16], [u8; 14]),
            then: Resume,
            out: &mut Vec<Output>,
        ) {
            let plmn = self.cfg.plmn.0;
            self.ask_hss(
                cp,
                id,
                |r| HssRequest::Resync {
                    r,
                    imsi,
                    plmn,
                    rand,
                    auts,
                },
                |seq| Procedure::ExpectHssVector {
                    seq,
                    attach: 0,
                    resynced: true,
                    then,
                },
                out,
            );
        }

        pub(crate) fn hss_answer(
            &mut self,
            cp: &mut ControlPlane,
            a: HssAnswer,
            out: &mut Vec<Output>,
        ) {
            let HssRef { mme_ue_id: id, seq } = a.r;
            let _span = crate::mme::ue_span(id, None, "HSS answer").entered();
            let Some(u) = self.ue_mut(cp, id) else {
                self.stats.hss_late_answers += 1;
                tracing::debug!("UE {id}: HSS answer {seq} not awaited (any more), dropped");
                return;
            };
            let awaited = match u.proc {
                Procedure::ExpectHssProfile { seq: s, .. } if s == seq => {
                    Some((false, false, Resume::Attach))
                }
                Procedure::ExpectHssVector {
                    seq: s,
                    resynced,
                    then,
                    ..
                } if s == seq => Some((true, resynced, then)),
                _ => None,
            };
            let Some((want_vector, resynced, then)) = awaited else {
                self.stats.hss_late_answers += 1;
                tracing::debug!("UE {id}: HSS answer {seq} not awaited (any more), dropped");
                return;
            };
            u.proc = Procedure::Idle;
            // The front entry of the deadlines is usually this one.
            if self
                .hss_deadlines
                .front()
                .is_some_and(|d| d.1 == id && d.2 == seq)
            {
                self.hss_deadlines.pop_front();
            }
            match (a.result, want_vector) {
                (Ok(HssData::Profile(sub)), false) => {
                    let apn = self.apn_id(&sub.apn);
                    adopt_profile(u, &sub, apn, self.cfg.default_ambr);
                    self.create_session(cp, id, out);
                }
                (Ok(HssData::Vector(v)), true) => {
                    let mut cx = self.cx(out);
                    crate::emm::auth::send_auth_request(&mut cx, u, v, resynced, then)
                }
                (Err(HssFailure::ResyncRefused), true) => {
                    tracing::info!("UE {id}: HSS refused the resynchronisation");
                    self.auth_reject(cp, id, then, out);
                }
                (Err(e), _) => {
                    self.stats.hss_failures += 1;
                    // A subscriber the HSS refuses is an operator matter, not a fault.
                    match e {
                        HssFailure::UnknownSubscriber
                        | HssFailure::NoEpsSubscription
                        | HssFailure::RoamingNotAllowed
                        | HssFailure::RatNotAllowed => tracing::info!("UE {id}: HSS: {e}"),
                        _ => tracing::warn!("UE {id}: HSS: {e}"),
                    }
                    self.aka_failed(cp, id, then, e.emm_cause(), out);
                }
                (Ok(d), _) => {
                    self.stats.hss_failures += 1;
                    let what = match d {
                        HssData::Profile(_) => "subscription data",
                        HssData::Vector(_) => "a vector",
                    };
                    tracing::warn!(
                        "UE {id}: HSS answered request {seq} with {what}, not what was asked"
                    );
                    self.aka_failed(cp, id, then, EmmCause::NetworkFailure, out);
                }
            }
        }

        /// Requests unanswered past their deadline: the attach is rejected (#17) and
        /// its context released.
        pub(crate) fn expire_hss_requests(&mut self, cp: &mut ControlPlane, out: &mut Vec<Output>) {
            let now = self.now;
            loop {
                self.prune_hss_deadlines(cp);
                match self.hss_deadlines.front() {
                    Some(&(t, id, seq)) if t <= now => {
                        self.hss_deadlines.pop_front();
                        self.stats.hss_timeouts += 1;
                        self.stats.procedure_timeouts += 1;
                        tracing::warn!("UE {id}: no HSS answer to request {seq} in time");
                        let then = self
                            .ue_mut(cp, id)
                            .and_then(|u| std::mem::replace(&mut u.proc, Procedure::Idle).resume());
                        let then = then.unwrap_or(Resume::Attach);
                        self.aka_failed(cp, id, then, HssFailure::Timeout.emm_cause(), out);
                    }
                    _ => break,
                }
            }
        }
    }
}
