//! The NAS security gate (TS 24.301 §4.4.4.3, TS 33.401 §7.2.4): what the MME does with
//! an uplink NAS message, from the UE's security state, the message's type and the
//! result of its integrity check. Every uplink EMM/ESM message passes it, and nothing
//! else decides; the procedures then check that the message is the one their state
//! awaits.
//!
//! The table, from §4.4.4.3 (columns: [`SecState`]; rows: [`Kind`]; a verified message
//! is always processed):
//!
//! | unverified message                 | no context | new connection | authenticating | secured |
//! |------------------------------------|-----------|-----------------|----------------|---------|
//! | Attach Request                     | process   | authenticate    | authenticate   | discard |
//! | TAU Request                        | process   | authenticate    | discard        | discard |
//! | Detach Request (not switch-off)    | process   | authenticate    | discard        | discard |
//! | Detach Request (switch-off)        | process   | discard         | discard        | discard |
//! | Identity Response, Authentication Response / Failure, Security Mode Reject, Detach Accept | process | discard | process | discard |
//! | Security Mode Complete, any other EMM, any ESM | discard | discard | discard  | discard |
//!
//! "Process" for the answers means: handed to the procedure, which acts only if its
//! state awaits that answer (a Security Mode Reject outside a security mode procedure
//! changes nothing); on a new connection nothing was asked yet, so an unverified
//! answer there is someone else's. "Authenticate": the message changes nothing of the
//! UE's current context until a new AKA and security mode procedure succeed (an Attach
//! Request then runs on a new context, which supersedes the old one only once secured;
//! a TAU or detach resumes after it; while one authentication runs, a second TAU or
//! detach is not started). A switch-off detach cannot be authenticated (the UE is
//! gone), and §4.4.4.3 lets the MME ignore it: we do, or anyone who heard an S-TMSI in
//! paging could detach its owner.

use crate::prelude::{Emm, NasEpsMessage};

/// The UE's security as the MME holds it when the message comes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecState {
    /// No current EPS security context.
    NoContext,
    /// A current EPS security context; the message is the first of a new NAS
    /// signalling connection (an Initial UE Message).
    NewConnection,
    /// A current EPS security context; on this connection the network is
    /// authenticating the UE (no secure exchange of NAS messages yet).
    Authenticating,
    /// Secure exchange of NAS messages is established on this connection.
    Secured,
}

/// The message types the gate tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    AttachRequest,
    TauRequest {
        active: bool,
    },
    DetachRequest {
        switch_off: bool,
    },
    /// Answers the network asked for, before or while security is set up: Identity
    /// Response, Authentication Response and Failure, Security Mode Reject, Detach
    /// Accept (the §4.4.4.3 list).
    Answer,
    /// Everything else: Security Mode Complete, Attach/TAU Complete, GUTI Reallocation
    /// Complete, EMM Status, and every ESM message.
    Other,
}

/// What to do with the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Process,
    /// Authenticate the UE (AKA + security mode) before the message changes anything.
    Authenticate,
    /// Drop it and count it.
    Discard,
}

/// The gate's class of an uplink message.
pub(crate) fn kind_of(m: &NasEpsMessage) -> Kind {
    match m {
        NasEpsMessage::Emm(_, e) => match e {
            Emm::AttachRequest(_) => Kind::AttachRequest,
            Emm::TrackingAreaUpdateRequest(t) => Kind::TauRequest {
                active: t.eps_update_type.value & 0x08 != 0,
            },
            Emm::DetachRequestUeOriginating(d) => Kind::DetachRequest {
                switch_off: d.detach_type.value & 0x08 != 0,
            },
            Emm::IdentityResponse(_)
            | Emm::AuthenticationResponse(_)
            | Emm::AuthenticationFailure(_)
            | Emm::SecurityModeReject(_)
            | Emm::DetachAccept(_) => Kind::Answer,
            _ => Kind::Other,
        },
        _ => Kind::Other,
    }
}

/// The gate: `verified` is the integrity check's result (false for a plain message, a
/// MAC failure, or a protected message no context can check).
pub(crate) fn gate(sec: SecState, kind: Kind, verified: bool) -> Verdict {
    use Kind::*;
    use SecState::*;
    use Verdict::*;
    if verified {
        return Process;
    }
    match (sec, kind) {
        (Secured, _) | (_, Other) => Discard,
        (NoContext, _) => Process,
        (
            NewConnection,
            AttachRequest | TauRequest { .. } | DetachRequest { switch_off: false },
        ) => Authenticate,
        (NewConnection, DetachRequest { switch_off: true } | Answer) => Discard,
        (Authenticating, AttachRequest) => Authenticate,
        (Authenticating, Answer) => Process,
        (Authenticating, TauRequest { .. } | DetachRequest { .. }) => Discard,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Kind::*;
    use SecState::*;
    use Verdict::*;

    const KINDS: [Kind; 7] = [
        AttachRequest,
        TauRequest { active: false },
        TauRequest { active: true },
        DetachRequest { switch_off: false },
        DetachRequest { switch_off: true },
        Answer,
        Other,
    ];

    /// Every cell of the table in the module docs.
    #[test]
    fn every_cell() {
        // Column by column, as the module docs' table reads.
        let expect = |sec: SecState, kind: Kind| -> Verdict {
            match (sec, kind) {
                (NoContext, Other) => Discard,
                (NoContext, _) => Process,
                (NewConnection, AttachRequest) => Authenticate,
                (NewConnection, TauRequest { .. }) => Authenticate,
                (NewConnection, DetachRequest { switch_off: false }) => Authenticate,
                (NewConnection, DetachRequest { switch_off: true }) => Discard,
                (NewConnection, Answer) => Discard,
                (NewConnection, Other) => Discard,
                (Authenticating, AttachRequest) => Authenticate,
                (Authenticating, TauRequest { .. }) => Discard,
                (Authenticating, DetachRequest { .. }) => Discard,
                (Authenticating, Answer) => Process,
                (Authenticating, Other) => Discard,
                (Secured, _) => Discard,
            }
        };
        let mut cells = 0;
        for sec in [NoContext, NewConnection, Authenticating, Secured] {
            for kind in KINDS {
                assert_eq!(
                    gate(sec, kind, false),
                    expect(sec, kind),
                    "{sec:?} {kind:?}"
                );
                assert_eq!(gate(sec, kind, true), Process, "verified {sec:?} {kind:?}");
                cells += 2;
            }
        }
        assert_eq!(cells, 56);
    }
}
