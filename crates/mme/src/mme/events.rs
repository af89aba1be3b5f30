//! What goes into an MME (S1AP octets, association events, HSS/PCRF answers, the
//! slice's control events, time) and what comes out of it.

use super::*;

#[derive(Debug)]
pub enum Input {
    /// The node's overload control: this slice's signaling backlog passed its bound
    /// (`on`) or drained (`crate::overload`).
    Congestion {
        on: bool,
    },
    EnbUp {
        assoc: AssocId,
        out_streams: u16,
    },
    EnbDown {
        assoc: AssocId,
    },
    /// The node's endpoint completed S1 Setup with this eNB.
    EnbSetup {
        assoc: AssocId,
        out_streams: u16,
        global_id: GlobalEnbId,
    },
    /// The eNB (or the node) reset UE-associated connections of the association:
    /// `None` all of them, else those listed. Answered by [`Output::ResetDone`].
    EnbReset {
        assoc: AssocId,
        token: u64,
        connections: Option<Vec<pepc_s1ap::UeConnection>>,
    },
    /// Another slice took subscriber `imsi`: drop our context of it (TS 23.401 §5.3.2.1).
    Supersede {
        imsi: u64,
    },
    S1ap {
        assoc: AssocId,
        stream: u16,
        bytes: Vec<u8>,
    },
    Control(ControlEvent),
    /// The HSS's answer to an [`Output::Hss`] request (through the node's proxy).
    Hss(HssAnswer),
    /// The HSS cancelled `imsi`'s location (S6a CLR, TS 29.272 §5.2.1.2): see
    /// `emm/hss_initiated.rs`. A slice that does not hold `imsi` ignores it.
    HssCancelLocation {
        imsi: u64,
        cancellation_type: crate::hss::CancellationType,
        /// CLR-Flags Reattach-Required (§7.3.152): the UE is to attach again.
        reattach_required: bool,
    },
    /// The HSS changed `imsi`'s subscription (S6a IDR, §5.2.2.1): applied to the
    /// UE's context (see `emm/hss_initiated.rs`).
    HssInsertSubscriberData {
        imsi: u64,
        update: crate::hss::SubscriptionUpdate,
    },
    /// The PCRF's answer to an [`Output::Pcrf`] request (CCA-I, CCA-U).
    Pcrf(crate::pcrf::PcrfAnswer),
    /// The PCRF changed the policy of `imsi`'s PDN connection of default bearer `ebi`
    /// (`None`: its first): Gx RAR, or the embedded PCRF's table changed. A slice
    /// that does not hold `imsi` ignores it.
    PolicyUpdate {
        imsi: u64,
        ebi: Option<u8>,
        decision: crate::pcrf::PolicyDecision,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    S1ap {
        assoc: AssocId,
        stream: u16,
        bytes: Vec<u8>,
    },
    CloseAssoc {
        assoc: AssocId,
    },
    /// A Paging message for every eNB serving one of `tais` (the node fans it out).
    Page {
        tais: Vec<Tai>,
        bytes: Vec<u8>,
    },
    /// This slice has released what [`Input::EnbReset`] `token` named.
    ResetDone {
        token: u64,
    },
    /// This slice now holds subscriber `imsi`, learned other than by its IMSI route
    /// (an Identity Response after a foreign GUTI, a parked context): the node moves
    /// its IMSI route here and has any other slice drop its context.
    ClaimImsi {
        imsi: u64,
    },
    /// This slice no longer holds `imsi`, which it held outside its policy slice.
    ReleaseImsi {
        imsi: u64,
    },
    /// A request to the HSS, answered by an [`Input::Hss`] with the same reference
    /// (the node's proxy serves it; see [`crate::hss`]).
    Hss(HssRequest),
    /// A registered UE's whole snapshot at the end of a procedure, for the state
    /// store (key material: never logged). Only with `MmeConfig::checkpoints`.
    Checkpoint {
        imsi: u64,
        snapshot: SnapshotBytes,
    },
    /// Subscriber `imsi` has no context here any more: its checkpoint goes.
    Forget {
        imsi: u64,
    },
    /// This slice's MME became congested by its own measure (`on`: contexts awaiting
    /// authentication passed 3/4 of their bound) or relieved: the node's overload
    /// control counts the slice as congested meanwhile (OVERLOAD START to eNBs).
    Congestion {
        on: bool,
    },
    /// A request to the PCRF (CCR-I/U/T), served by the node's proxy; an Establish
    /// or Report is answered by an [`Input::Pcrf`] with the same reference.
    Pcrf(crate::pcrf::PcrfRequest),
    /// A bearer's usage record for offline charging (the node writes CDR lines).
    UsageRecord(Box<crate::pcrf::UsageRecord>),
}

/// A UE snapshot's bytes: they hold its keys, so `Debug` shows the length only.
#[derive(Clone, PartialEq, Eq)]
pub struct SnapshotBytes(pub Vec<u8>);

impl std::fmt::Debug for SnapshotBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SnapshotBytes({} bytes)", self.0.len())
    }
}
