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

use crate::cause::EmmCause;
use crate::mme::{Input, Mme, Output};
use pepc_hss::{Hss, HssError, ImsiKey, PdnType};
use pepc_security::AuthVector;
use pepc_slice::control::ControlPlane;
use std::sync::Arc;
use std::time::Instant;

/// Which request an answer belongs to: the MME UE S1AP ID of the context that asked
/// (it carries the slice, so a node routes the answer by it) and the MME's sequence
/// number of the request. An answer whose context is gone, or which no longer waits
/// for that sequence number (superseded, restarted, timed out), is dropped and
/// counted ([`crate::MmeStats::hss_late_answers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HssRef {
    pub mme_ue_id: u32,
    pub seq: u32,
}

impl HssRef {
    /// The reference of a request no answer comes back for ([`HssRequest::Purge`]):
    /// MME UE S1AP ID 0 is never a context's.
    pub const NONE: HssRef = HssRef {
        mme_ue_id: 0,
        seq: 0,
    };
}

/// A request of the MME to the HSS. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HssRequest {
    /// The subscription data of `imsi` (S6a ULR/ULA).
    Profile { r: HssRef, imsi: u64 },
    /// One E-UTRAN authentication vector for the serving `plmn` (S6a AIR/AIA).
    Vector { r: HssRef, imsi: u64, plmn: [u8; 3] },
    /// Re-synchronise the subscriber's SQN with the UE's AUTS for `rand`, then one
    /// fresh vector (S6a AIR with Re-Synchronization-Info).
    Resync {
        r: HssRef,
        imsi: u64,
        plmn: [u8; 3],
        rand: [u8; 16],
        auts: [u8; 14],
    },
    /// The MME deleted `imsi`'s subscription data for good (S6a PUR, TS 29.272
    /// §5.2.1.3): sent at implicit detach and, if configured, after a UE-initiated
    /// detach. Nothing comes back to the MME ([`HssRef::NONE`]).
    Purge { imsi: u64 },
}

impl HssRequest {
    pub fn reference(&self) -> HssRef {
        match self {
            HssRequest::Profile { r, .. }
            | HssRequest::Vector { r, .. }
            | HssRequest::Resync { r, .. } => *r,
            HssRequest::Purge { .. } => HssRef::NONE,
        }
    }

    pub fn imsi(&self) -> u64 {
        match self {
            HssRequest::Profile { imsi, .. }
            | HssRequest::Vector { imsi, .. }
            | HssRequest::Resync { imsi, .. }
            | HssRequest::Purge { imsi } => *imsi,
        }
    }
}

/// What the MME keeps of a subscription (the APN configuration profile's default
/// APN, its QoS and the UE-AMBR of S6a Subscription-Data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubscriptionData {
    pub msisdn: String,
    /// The subscribed (default) APN.
    pub apn: String,
    pub pdn_type: PdnType,
    pub qci: u8,
    pub arp_priority: u8,
    /// UE-AMBR (bit/s); 0 when the subscription has none.
    pub ambr_ul_bps: u64,
    pub ambr_dl_bps: u64,
}

/// Cancellation-Type of a CLR (TS 29.272 §7.3.24).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CancellationType {
    /// The UE moved to another MME (0), an SGSN (1) or via an IWF (3): it is served
    /// elsewhere now.
    MmeUpdate,
    SgsnUpdate,
    UpdateIwf,
    /// The subscription was withdrawn (2): detach the UE.
    SubscriptionWithdrawal,
    /// The UE attached at another MME (4).
    InitialAttach,
    /// A value this release does not know.
    Other(u32),
}

impl From<u32> for CancellationType {
    fn from(v: u32) -> Self {
        match v {
            0 => CancellationType::MmeUpdate,
            1 => CancellationType::SgsnUpdate,
            2 => CancellationType::SubscriptionWithdrawal,
            3 => CancellationType::UpdateIwf,
            4 => CancellationType::InitialAttach,
            v => CancellationType::Other(v),
        }
    }
}

/// What an S6a Insert Subscriber Data changes: its Subscription-Data may carry only
/// what changed (TS 29.272 §5.2.2.1), so each part is optional.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SubscriptionUpdate {
    /// UE-AMBR (bit/s, UL and DL).
    pub ambr: Option<(u64, u64)>,
    /// The default APN and its QoS, when an APN-Configuration-Profile came.
    pub default_apn: Option<DefaultApn>,
}

/// The default APN configuration of a subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultApn {
    pub apn: String,
    pub pdn_type: PdnType,
    pub qci: u8,
    pub arp_priority: u8,
}

/// What a successful answer carries.
#[derive(Debug)]
pub enum HssData {
    Profile(SubscriptionData),
    /// Boxed: the UE context keeps it boxed while it waits for the response.
    Vector(Box<AuthVector>),
}

/// Why the HSS did not serve a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HssFailure {
    /// DIAMETER_ERROR_USER_UNKNOWN: the HSS has no such subscriber.
    UnknownSubscriber,
    /// DIAMETER_ERROR_UNKNOWN_EPS_SUBSCRIPTION (not produced by the embedded HSS).
    NoEpsSubscription,
    /// The AUTS did not verify (MAC-S): the resynchronisation is refused.
    ResyncRefused,
    /// The HSS could not serve the request (its database, SQN space, a Diameter
    /// DIAMETER_UNABLE_TO_COMPLY); what went wrong, without key material.
    Unavailable(String),
    /// No answer in time (an asynchronous backend's own timer).
    Timeout,
    /// DIAMETER_ERROR_ROAMING_NOT_ALLOWED (5004): not allowed in our (visited) PLMN.
    RoamingNotAllowed,
    /// DIAMETER_ERROR_RAT_NOT_ALLOWED (5421): E-UTRAN is not allowed to the subscriber.
    RatNotAllowed,
}

impl HssFailure {
    /// The EMM cause of the Attach Reject this failure makes (TS 29.272 Annex A):
    /// unknown subscriber #8 (as before the seam), no EPS subscription #15, an HSS that
    /// cannot answer #17 (a transient failure: the UE retries, TS 24.301 §5.5.1.2.6),
    /// roaming not allowed #11 (PLMN not allowed: Annex A lists #11, #13 and #15 for
    /// it; without the ODB Error-Diagnostic the whole PLMN is barred, which is #11),
    /// RAT not allowed #15 (the UE may find another RAT in this tracking area).
    /// [`HssFailure::ResyncRefused`] ends in an Authentication Reject instead.
    pub fn emm_cause(&self) -> EmmCause {
        match self {
            HssFailure::UnknownSubscriber => EmmCause::EpsAndNonEpsServicesNotAllowed,
            HssFailure::NoEpsSubscription | HssFailure::RatNotAllowed => {
                EmmCause::NoSuitableCellsInTrackingArea
            }
            HssFailure::RoamingNotAllowed => EmmCause::PlmnNotAllowed,
            HssFailure::ResyncRefused => EmmCause::IllegalUe,
            HssFailure::Unavailable(_) | HssFailure::Timeout => EmmCause::NetworkFailure,
        }
    }
}

impl std::fmt::Display for HssFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HssFailure::UnknownSubscriber => f.write_str("unknown subscriber"),
            HssFailure::NoEpsSubscription => f.write_str("no EPS subscription"),
            HssFailure::ResyncRefused => f.write_str("resynchronisation refused (MAC-S)"),
            HssFailure::Unavailable(w) => write!(f, "HSS unavailable: {w}"),
            HssFailure::Timeout => f.write_str("no answer in time"),
            HssFailure::RoamingNotAllowed => f.write_str("roaming not allowed"),
            HssFailure::RatNotAllowed => f.write_str("RAT (E-UTRAN) not allowed"),
        }
    }
}

impl From<HssError> for HssFailure {
    fn from(e: HssError) -> Self {
        match e {
            HssError::UnknownImsi(_) => HssFailure::UnknownSubscriber,
            HssError::ResyncMacFailure(_) => HssFailure::ResyncRefused,
            other => HssFailure::Unavailable(other.to_string()),
        }
    }
}

/// The answer to the request [`HssAnswer::r`].
#[derive(Debug)]
pub struct HssAnswer {
    pub r: HssRef,
    pub result: Result<HssData, HssFailure>,
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
                .and_then(|k| Ok(self.hss.resync(&k.digits(), rand, auts)?))
                .and_then(|()| self.vector(imsi, plmn)),
        };
        Some(HssAnswer { r, result })
    }

    fn profile(&self, imsi: u64) -> Result<SubscriptionData, HssFailure> {
        let key = ImsiKey::fifteen_digits(imsi).ok_or(HssFailure::UnknownSubscriber)?;
        let s = self
            .hss
            .profile_of(key)?
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
        let v = self.hss.next_vector_of(key, plmn, &mut self.rand)?;
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
    if !out.get(from..).is_some_and(|t| {
        t.iter()
            .any(|o| matches!(o, Output::Hss(_) | Output::Pcrf(_)))
    }) {
        return;
    }
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

    impl Mme {
        /// Send `req` (made for the reference given) for UE `id`, which then waits for
        /// its answer in state `wait` (made for the sequence number), guarded by
        /// `cfg.hss_timeout`.
        pub(crate) fn ask_hss(
            &mut self,
            cp: &mut ControlPlane,
            now: Instant,
            id: u32,
            req: impl FnOnce(HssRef) -> HssRequest,
            wait: impl FnOnce(u32) -> Procedure,
            out: &mut Vec<Output>,
        ) {
            let Some(u) = self.ue_mut(cp, id) else {
                return;
            };
            self.hss_seq = self.hss_seq.wrapping_add(1);
            let seq = self.hss_seq;
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
            now: Instant,
            id: u32,
            imsi: u64,
            out: &mut Vec<Output>,
        ) {
            // The Attach Request's digest is not kept past AKA: one repeated now is
            // served as a new attach (the UE restarted it).
            self.ask_hss(
                cp,
                now,
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
            now: Instant,
            id: u32,
            imsi: u64,
            attach: u16,
            then: Resume,
            out: &mut Vec<Output>,
        ) {
            let plmn = self.cfg.plmn.0;
            self.ask_hss(
                cp,
                now,
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
            now: Instant,
            id: u32,
            imsi: u64,
            (rand, auts): ([u8; 16], [u8; 14]),
            then: Resume,
            out: &mut Vec<Output>,
        ) {
            let plmn = self.cfg.plmn.0;
            self.ask_hss(
                cp,
                now,
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
            now: Instant,
            a: HssAnswer,
            cp: &mut ControlPlane,
            out: &mut Vec<Output>,
        ) {
            let HssRef { mme_ue_id: id, seq } = a.r;
            let _span = crate::mme::ue_span(id, None, "HSS answer").entered();
            let awaited = self.ue(cp, id).map(|u| match u.proc {
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
            });
            let (want_vector, resynced, then) = match awaited.flatten() {
                Some(a) => a,
                _ => {
                    self.stats.hss_late_answers += 1;
                    tracing::debug!("UE {id}: HSS answer {seq} not awaited (any more), dropped");
                    return;
                }
            };
            // The front entry of the deadlines is usually this one.
            if self
                .hss_deadlines
                .front()
                .is_some_and(|d| d.1 == id && d.2 == seq)
            {
                self.hss_deadlines.pop_front();
            }
            if let Some(u) = self.ue_mut(cp, id) {
                u.proc = Procedure::Idle;
            }
            match (a.result, want_vector) {
                (Ok(HssData::Profile(sub)), false) => {
                    self.adopt_profile(cp, id, sub);
                    self.create_session(now, id, cp, out);
                }
                (Ok(HssData::Vector(v)), true) => {
                    self.send_auth_request(cp, now, id, v, (resynced, then), out)
                }
                (Err(HssFailure::ResyncRefused), true) => {
                    tracing::info!("UE {id}: HSS refused the resynchronisation");
                    self.auth_reject(cp, now, id, then, out);
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

        /// The subscription's QoS, AMBR and APN into the UE's context.
        fn adopt_profile(&mut self, cp: &mut ControlPlane, id: u32, sub: SubscriptionData) {
            let default_ambr = self.cfg.default_ambr;
            let apn = self.apn_id(&sub.apn);
            let Some(u) = self.ue_mut(cp, id) else {
                return;
            };
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

        /// Requests unanswered past their deadline: the attach is rejected (#17) and
        /// its context released.
        pub(crate) fn expire_hss_requests(
            &mut self,
            now: Instant,
            cp: &mut ControlPlane,
            out: &mut Vec<Output>,
        ) {
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
    fn failures_map_to_emm_causes() {
        let f = HssFailure::from(HssError::UnknownImsi("1".into()));
        assert_eq!(f, HssFailure::UnknownSubscriber);
        assert_eq!(f.emm_cause(), EmmCause::EpsAndNonEpsServicesNotAllowed);
        let f = HssFailure::from(HssError::ResyncMacFailure("1".into()));
        assert_eq!(f, HssFailure::ResyncRefused);
        let f = HssFailure::from(HssError::SqnExhausted("1".into()));
        assert!(matches!(f, HssFailure::Unavailable(_)));
        assert_eq!(f.emm_cause(), EmmCause::NetworkFailure);
        assert_eq!(HssFailure::Timeout.emm_cause(), EmmCause::NetworkFailure);
        assert_eq!(
            HssFailure::NoEpsSubscription.emm_cause(),
            EmmCause::NoSuitableCellsInTrackingArea
        );
        // TS 29.272 Annex A: 5004 -> #11, 5421 -> #15.
        assert_eq!(
            HssFailure::RoamingNotAllowed.emm_cause(),
            EmmCause::PlmnNotAllowed
        );
        assert_eq!(
            HssFailure::RatNotAllowed.emm_cause(),
            EmmCause::NoSuitableCellsInTrackingArea
        );
        assert_eq!(u8::from(EmmCause::PlmnNotAllowed), 11);
        assert_eq!(u8::from(EmmCause::NoSuitableCellsInTrackingArea), 15);
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
        hss.add(&crate::sim::subscriber("001010000000001")).unwrap();
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
