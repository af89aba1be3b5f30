//! The ledger of UE procedures: every procedure that starts ends once, as succeeded or
//! as failed with a typed [`ProcFailure`], so that per procedure
//! `started = succeeded + failed + open` holds at every moment, and `open` is what
//! runs now.
//!
//! A UE carries one bit per procedure it has open ([`Open`]): a start sets it, an end
//! counts only if the bit was set and clears it. So an end is never counted twice (a
//! timeout after a reject, a release after a timeout), a procedure started again
//! before it ended counts its first run as [`ProcFailure::Superseded`], and a context that
//! goes ends whatever it had open ([`ProcFailure::ContextRemoved`]). Procedures the MME
//! answers in the handler that received them (a Path Switch, a UE-requested PDN
//! disconnection) start and end at once ([`Ledger::at_once`]).
//!
//! | Procedure | Starts | Succeeds | Fails |
//! |---|---|---|---|
//! | attach | an Attach Request served (or turned away for congestion) | Attach Complete | Attach Reject (cause), T3450/T3460/T3470 ran out, a new Attach Request, the connection or context went |
//! | service_request | a Service Request verified | Initial Context Setup Response | Service Reject (cause, at once), the connection or context went |
//! | tau | a Tracking Area Update Request | TAU Accept | TAU Reject (cause), the gate's re-authentication failed (the connection went) |
//! | detach | a UE's Detach Request (at the gate's re-authentication, if it needs one) | Detach Accept sent, or a switch-off handled | the gate's re-authentication failed |
//! | network_detach | Detach Request sent by the MME (an idle UE: at once) | Detach Accept | T3422 ran out, the connection or context went |
//! | guti_reallocation | GUTI Reallocation Command | GUTI Reallocation Complete | T3450 ran out, the connection or context went |
//! | authentication | the gate's re-authentication (AKA + SMC before an unverified message acts) | Security Mode Complete | Authentication Reject, no answer, an HSS failure, SMC rejected |
//! | paging | the first Paging of an episode | the UE came back on a new connection | the repetitions ran out, the context went |
//! | s1_handover | Handover Required taken (refused: at once) | Handover Notify | Handover Failure, Handover Cancel, the connection or context went |
//! | x2_handover | Path Switch Request | at once: acknowledged | at once: Path Switch Request Failure |
//! | pdn_connect | a PDN Connectivity Request | the UE's Activate Default EPS Bearer Context Accept | rejected (ESM cause), refused by the UE, the connection or context went |
//! | pdn_disconnect, bearer_resource_allocation, bearer_resource_modification | the ESM request | at once: accepted | at once: rejected (ESM cause) |

use std::collections::BTreeMap;

/// A UE procedure the ledger counts (TS 24.301 EMM/ESM procedures, paging and the S1AP
/// mobility procedures), by its 3GPP name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Proc {
    Attach,
    ServiceRequest,
    Tau,
    Detach,
    NetworkDetach,
    GutiReallocation,
    Authentication,
    Paging,
    S1Handover,
    X2Handover,
    PdnConnect,
    PdnDisconnect,
    BearerResourceAllocation,
    BearerResourceModification,
}

impl Proc {
    pub const ALL: [Proc; 14] = [
        Proc::Attach,
        Proc::ServiceRequest,
        Proc::Tau,
        Proc::Detach,
        Proc::NetworkDetach,
        Proc::GutiReallocation,
        Proc::Authentication,
        Proc::Paging,
        Proc::S1Handover,
        Proc::X2Handover,
        Proc::PdnConnect,
        Proc::PdnDisconnect,
        Proc::BearerResourceAllocation,
        Proc::BearerResourceModification,
    ];

    /// Its label in metrics.
    pub fn name(self) -> &'static str {
        match self {
            Proc::Attach => "attach",
            Proc::ServiceRequest => "service_request",
            Proc::Tau => "tau",
            Proc::Detach => "detach",
            Proc::NetworkDetach => "network_detach",
            Proc::GutiReallocation => "guti_reallocation",
            Proc::Authentication => "authentication",
            Proc::Paging => "paging",
            Proc::S1Handover => "s1_handover",
            Proc::X2Handover => "x2_handover",
            Proc::PdnConnect => "pdn_connect",
            Proc::PdnDisconnect => "pdn_disconnect",
            Proc::BearerResourceAllocation => "bearer_resource_allocation",
            Proc::BearerResourceModification => "bearer_resource_modification",
        }
    }

    /// Its rejects carry ESM causes (TS 24.301 §9.9.4.4), not EMM ones.
    pub fn esm(self) -> bool {
        matches!(
            self,
            Proc::PdnConnect
                | Proc::PdnDisconnect
                | Proc::BearerResourceAllocation
                | Proc::BearerResourceModification
        )
    }

    fn bit(self) -> u16 {
        1 << self as u8
    }
}

/// Why a procedure failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProcFailure {
    /// Rejected with this cause value (EMM, or ESM for [`Proc::esm`] procedures).
    Rejected(u8),
    /// The UE stopped answering: the procedure's timer ran out on its last try.
    Timeout,
    /// The same procedure started again on the UE before this one ended (a new
    /// Attach Request, a new Handover Required).
    Superseded,
    /// The UE's S1 connection was released (by the eNB, a reset, a lost
    /// association, or the MME aborting it) before the procedure ended.
    ConnectionReleased,
    /// The UE failed authentication (a wrong RES, or a resynchronisation the HSS
    /// refused): an Authentication Reject went.
    AuthenticationRejected,
    /// Refused or aborted by S1AP with this cause (a handover's preparation or
    /// path switch failure, a cancel).
    S1ap(pepc_s1ap::Cause),
    /// The UE's context went (detach, Cancel Location, a newer context of the same
    /// subscriber, expiry) before the procedure ended.
    ContextRemoved,
}

impl ProcFailure {
    /// The `cause` label in metrics: the cause value of a reject, else a word.
    pub fn label(self) -> String {
        match self {
            ProcFailure::Rejected(c) => c.to_string(),
            ProcFailure::S1ap(c) => {
                let (group, v) = match c {
                    pepc_s1ap::Cause::RadioNetwork(v) => ("radio_network", v),
                    pepc_s1ap::Cause::Transport(v) => ("transport", v),
                    pepc_s1ap::Cause::Nas(v) => ("nas", v),
                    pepc_s1ap::Cause::Protocol(v) => ("protocol", v),
                    pepc_s1ap::Cause::Misc(v) => ("misc", v),
                };
                format!("s1ap_{group}_{v}")
            }
            ProcFailure::Timeout => "timeout".into(),
            ProcFailure::AuthenticationRejected => "authentication_rejected".into(),
            ProcFailure::Superseded => "superseded".into(),
            ProcFailure::ConnectionReleased => "connection_released".into(),
            ProcFailure::ContextRemoved => "context_removed".into(),
        }
    }
}

/// The procedures a UE has open, one bit per [`Proc`].
pub type Open = u16;

/// `p` is open in `open`.
pub(crate) fn is_open(open: Open, p: Proc) -> bool {
    open & p.bit() != 0
}

/// Counts of procedures started, succeeded and failed by cause.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ledger {
    started: [u64; Proc::ALL.len()],
    succeeded: [u64; Proc::ALL.len()],
    failed: BTreeMap<(Proc, ProcFailure), u64>,
}

impl Ledger {
    /// `p` starts on the UE whose open set is `open`; one still open ends as
    /// superseded.
    pub(crate) fn start(&mut self, open: &mut Open, p: Proc) {
        self.fail(open, p, ProcFailure::Superseded);
        *open |= p.bit();
        self.started[p as usize] += 1;
    }

    /// `p` succeeded, if it was open.
    pub(crate) fn succeed(&mut self, open: &mut Open, p: Proc) {
        if *open & p.bit() != 0 {
            *open &= !p.bit();
            self.succeeded[p as usize] += 1;
        }
    }

    /// `p` failed with `why`, if it was open.
    pub(crate) fn fail(&mut self, open: &mut Open, p: Proc, why: ProcFailure) {
        if *open & p.bit() != 0 {
            *open &= !p.bit();
            *self.failed.entry((p, why)).or_default() += 1;
        }
    }

    /// Every procedure still open fails with `why` (the connection or context went).
    pub(crate) fn fail_all(&mut self, open: &mut Open, why: ProcFailure) {
        for p in Proc::ALL {
            self.fail(open, p, why);
        }
    }

    /// A procedure answered in the handler that received it.
    pub(crate) fn at_once(&mut self, p: Proc, result: Result<(), ProcFailure>) {
        let mut open = 0;
        self.start(&mut open, p);
        match result {
            Ok(()) => self.succeed(&mut open, p),
            Err(why) => self.fail(&mut open, p, why),
        }
    }

    /// An ESM request answered in its handler: accepted, or rejected with the ESM
    /// cause it returns (passed on).
    pub(crate) fn answered(
        &mut self,
        p: Proc,
        r: Result<(), crate::EsmCause>,
    ) -> Result<(), crate::EsmCause> {
        self.at_once(p, r.map_err(|c| ProcFailure::Rejected(c.into())));
        r
    }

    pub fn started(&self, p: Proc) -> u64 {
        self.started[p as usize]
    }

    pub fn succeeded(&self, p: Proc) -> u64 {
        self.succeeded[p as usize]
    }

    /// Failures of `p`, all causes.
    pub fn failed(&self, p: Proc) -> u64 {
        self.failed
            .range((p, ProcFailure::Rejected(0))..)
            .take_while(|((q, _), _)| *q == p)
            .map(|(_, n)| n)
            .sum()
    }

    /// Failures of `p` with cause `why`.
    pub fn failed_with(&self, p: Proc, why: ProcFailure) -> u64 {
        self.failed.get(&(p, why)).copied().unwrap_or(0)
    }

    /// Running now: started and not ended.
    pub fn open(&self, p: Proc) -> u64 {
        self.started(p) - self.succeeded(p) - self.failed(p)
    }

    /// Every (procedure, cause) that failed, with its count, in a fixed order.
    pub fn failures(&self) -> impl Iterator<Item = (Proc, ProcFailure, u64)> + '_ {
        self.failed.iter().map(|(&(p, f), &n)| (p, f, n))
    }
}

impl crate::mme::Mme {
    /// `p` starts on UE `id`.
    pub(crate) fn proc_start(&mut self, cp: &mut crate::ControlPlane, id: u32, p: Proc) {
        if let Some(u) = self.ue_mut(cp, id) {
            self.stats.procedures.start(&mut u.open, p);
        }
    }

    /// `p` ends on UE `id`, if it was open there.
    pub(crate) fn proc_end(
        &mut self,
        cp: &mut crate::ControlPlane,
        id: u32,
        p: Proc,
        result: Result<(), ProcFailure>,
    ) {
        if let Some(u) = self.ue_mut(cp, id) {
            let l = &mut self.stats.procedures;
            match result {
                Ok(()) => l.succeed(&mut u.open, p),
                Err(why) => l.fail(&mut u.open, p, why),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_start_ends_once() {
        let mut l = Ledger::default();
        let (mut a, mut b) = (0, 0);
        l.start(&mut a, Proc::Attach);
        l.start(&mut b, Proc::Attach);
        assert_eq!(l.open(Proc::Attach), 2);
        // A reject, then the timer it stopped too late: one failure.
        l.fail(&mut a, Proc::Attach, ProcFailure::Rejected(22));
        l.fail(&mut a, Proc::Attach, ProcFailure::Timeout);
        assert_eq!(l.failed(Proc::Attach), 1);
        // Started again before it ended: the first run is superseded.
        l.start(&mut b, Proc::Attach);
        assert_eq!(l.failed_with(Proc::Attach, ProcFailure::Superseded), 1);
        l.succeed(&mut b, Proc::Attach);
        l.succeed(&mut b, Proc::Attach);
        assert_eq!(l.started(Proc::Attach), 3);
        assert_eq!(l.succeeded(Proc::Attach), 1);
        assert_eq!(l.failed(Proc::Attach), 2);
        assert_eq!(l.open(Proc::Attach), 0);
    }

    #[test]
    fn a_context_that_goes_ends_what_it_had_open() {
        let mut l = Ledger::default();
        let mut u = 0;
        l.start(&mut u, Proc::Paging);
        l.start(&mut u, Proc::S1Handover);
        l.fail_all(&mut u, ProcFailure::ContextRemoved);
        assert_eq!(u, 0);
        for p in [Proc::Paging, Proc::S1Handover] {
            assert_eq!(l.failed_with(p, ProcFailure::ContextRemoved), 1);
            assert_eq!(l.open(p), 0);
        }
        l.at_once(Proc::X2Handover, Ok(()));
        l.at_once(Proc::PdnConnect, Err(ProcFailure::Rejected(27)));
        assert_eq!(l.succeeded(Proc::X2Handover), 1);
        assert_eq!(
            l.failed_with(Proc::PdnConnect, ProcFailure::Rejected(27)),
            1
        );
        let all: Vec<_> = l.failures().map(|(p, _, _)| p).collect();
        assert_eq!(all.len(), 3);
    }
}
