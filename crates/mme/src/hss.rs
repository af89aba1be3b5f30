//! The MME's side of the HSS (S6a) as messages: the procedures send an
//! [`HssRequest`] ([`crate::Output::Hss`]) and wait, in a state of their own, for the
//! [`HssAnswer`] ([`crate::Input::Hss`]) that carries the same [`HssRef`]. The node's
//! proxy serves the requests of its slices (PEPC §3.3); [`HssProxy`] is its sans-IO
//! core over the embedded [`Hss`], and [`HssProxy::serve`] the inline driver used by a
//! slice thread, the test harness and the in-process benchmark.
//!
//! The shapes follow S6a (TS 29.272): [`HssRequest::Profile`] is what an Update
//! Location Request asks and [`SubscriptionData`] what its answer fills;
//! [`HssRequest::Vector`] an Authentication Information Request for one E-UTRAN
//! vector of the serving PLMN; [`HssRequest::Resync`] the same with
//! Re-Synchronization-Info (RAND + AUTS, §7.3.15).

use crate::mme::{Input, Mme, Output};
use crate::ControlPlane;
use pepc_hss::{Hss, HssError, ImsiKey};
use std::sync::Arc;
use std::time::Instant;

// The seam's types (requests, answers, the reference) live below the MME and the
// S6a client alike; here under their old paths.
pub use pepc_seams::hss::{
    CancellationType, DefaultApn, HssAnswer, HssData, HssFailure, HssRef, HssRequest,
    SubscriptionData, SubscriptionUpdate,
};

/// What the embedded HSS's error is as an answer's failure: an unknown IMSI or an AUTS
/// that does not verify are the subscriber's; anything else is the HSS's own trouble.
pub fn failure_of(e: HssError) -> HssFailure {
    match e {
        HssError::UnknownImsi(_) => HssFailure::UnknownSubscriber,
        HssError::ResyncMacFailure(_) => HssFailure::ResyncRefused,
        other => HssFailure::Unavailable(other.to_string()),
    }
}

/// The proxy's core over the embedded HSS: a request in, its answer out. It owns the
/// RAND source of the vectors it makes (a CSPRNG in production, see
/// [`crate::mme::urandom`]). The embedded HSS answers in a few µs, so a driver runs it
/// inline on the thread of the slice that asked ([`HssProxy::serve`]).
pub struct HssProxy {
    hss: Arc<Hss>,
    rand: Box<dyn FnMut() -> [u8; 16] + Send>,
    /// Requests answered.
    pub served: u64,
    /// The embedded PCRF beside it (the harnesses' proxy serves both; a node's
    /// proxy has its own PCRF backend). No rules unless given some.
    pub pcrf: crate::pcrf::EmbeddedPcrf,
}

impl HssProxy {
    pub fn new(hss: Arc<Hss>, rand: Box<dyn FnMut() -> [u8; 16] + Send>) -> HssProxy {
        HssProxy {
            hss,
            rand,
            served: 0,
            pcrf: Default::default(),
        }
    }

    pub fn hss(&self) -> &Arc<Hss> {
        &self.hss
    }

    /// Answer one request; a purge has no answer (the embedded HSS keeps no record
    /// of which MME serves a subscriber, so there is nothing to mark purged).
    pub fn answer(&mut self, req: HssRequest) -> Option<HssAnswer> {
        self.served += 1;
        let r = req.reference();
        let result = match req {
            HssRequest::Purge { .. } => return None,
            HssRequest::Profile { imsi, .. } => self.profile(imsi).map(HssData::Profile),
            HssRequest::Vector { imsi, plmn, .. } => self.vector(imsi, plmn),
            HssRequest::Resync {
                imsi,
                plmn,
                rand,
                auts,
                ..
            } => ImsiKey::fifteen_digits(imsi)
                .ok_or(HssFailure::UnknownSubscriber)
                .and_then(|k| self.hss.resync(&k.digits(), rand, auts).map_err(failure_of))
                .and_then(|()| self.vector(imsi, plmn)),
        };
        Some(HssAnswer { r, result })
    }

    fn profile(&self, imsi: u64) -> Result<SubscriptionData, HssFailure> {
        let key = ImsiKey::fifteen_digits(imsi).ok_or(HssFailure::UnknownSubscriber)?;
        let s = self
            .hss
            .profile_of(key)
            .map_err(failure_of)?
            .ok_or(HssFailure::UnknownSubscriber)?;
        Ok(SubscriptionData {
            msisdn: s.msisdn.clone(),
            apn: s.apn.clone(),
            pdn_type: s.pdn_type,
            qci: s.qci,
            arp_priority: s.arp_priority,
            ambr_ul_bps: s.ambr_ul_bps,
            ambr_dl_bps: s.ambr_dl_bps,
        })
    }

    fn vector(&mut self, imsi: u64, plmn: [u8; 3]) -> Result<HssData, HssFailure> {
        let key = ImsiKey::fifteen_digits(imsi).ok_or(HssFailure::UnknownSubscriber)?;
        let v = self
            .hss
            .next_vector_of(key, plmn, &mut self.rand)
            .map_err(failure_of)?;
        Ok(HssData::Vector(Box::new(v)))
    }

    /// The inline driver: answer every [`Output::Hss`] in `out` (from index `from`)
    /// and feed the answers to `mme`, until none is left (an answer may lead to the
    /// next request). The other outputs stay in `out`, in order.
    pub fn serve(
        &mut self,
        mme: &mut Mme,
        now: Instant,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
        from: usize,
    ) {
        serve_requests(out, from, |req, o| match req {
            Proxied::Hss(req) => {
                if let Some(a) = self.answer(req) {
                    mme.handle(now, Input::Hss(a), cp, o);
                }
            }
            Proxied::Pcrf(req) => {
                if let Some(a) = self.pcrf.answer(req) {
                    mme.handle(now, Input::Pcrf(a), cp, o);
                }
            }
        });
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_hss_errors_become_failures() {
        let f = failure_of(HssError::UnknownImsi("1".into()));
        assert_eq!(f, HssFailure::UnknownSubscriber);
        let f = failure_of(HssError::ResyncMacFailure("1".into()));
        assert_eq!(f, HssFailure::ResyncRefused);
        let f = failure_of(HssError::SqnExhausted("1".into()));
        assert!(matches!(f, HssFailure::Unavailable(_)));
        assert_eq!(HssRequest::Purge { imsi: 1 }.reference(), HssRef::NONE);
    }

    #[test]
    fn embedded_proxy_answers_each_request() {
        let hss = Arc::new(Hss::in_memory().unwrap());
        let mut p = HssProxy::new(hss.clone(), Box::new(|| [3u8; 16]));
        let r = HssRef {
            mme_ue_id: 7,
            seq: 1,
        };
        let imsi = 1010000000001;
        let a = p.answer(HssRequest::Profile { r, imsi }).unwrap();
        assert_eq!(a.r, r);
        assert!(matches!(a.result, Err(HssFailure::UnknownSubscriber)));
        hss.add(&pepc_hss::Subscriber {
            imsi: "001010000000001".into(),
            k: pepc_security::Key128::from_hex("465B5CE8B199B49FAA5F0A2EE238A6BC").unwrap(),
            op_kind: pepc_hss::OpKind::Opc(
                *pepc_security::Key128::from_hex("E8ED289DEBA952E4283B54E88E6183CA")
                    .unwrap()
                    .as_bytes(),
            ),
            amf: [0x80, 0x00],
            sqn: 32,
            msisdn: "1".into(),
            apn: "internet".into(),
            pdn_type: pepc_hss::PdnType::Ipv4,
            qci: 9,
            arp_priority: 8,
            ambr_ul_bps: 50_000_000,
            ambr_dl_bps: 100_000_000,
        })
        .unwrap();
        let a = p.answer(HssRequest::Profile { r, imsi }).unwrap();
        let Ok(HssData::Profile(s)) = a.result else {
            panic!("{a:?}")
        };
        assert_eq!(
            (s.apn.as_str(), s.qci, s.ambr_dl_bps),
            ("internet", 9, 100_000_000)
        );
        let plmn = [0x00, 0xf1, 0x10];
        let a = p.answer(HssRequest::Vector { r, imsi, plmn }).unwrap();
        assert!(matches!(a.result, Ok(HssData::Vector(ref v)) if v.rand == [3; 16]));
        // An AUTS whose MAC-S does not verify: refused, no vector.
        let a = p
            .answer(HssRequest::Resync {
                r,
                imsi,
                plmn,
                rand: [3; 16],
                auts: [0; 14],
            })
            .unwrap();
        assert!(matches!(a.result, Err(HssFailure::ResyncRefused)), "{a:?}");
        assert!(p.answer(HssRequest::Purge { imsi }).is_none());
        assert_eq!(p.served, 5);
    }
}
