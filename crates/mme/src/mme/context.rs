//! A UE's MME context (the signaling part of its one entry in the slice's table): EMM
//! state, the procedure in progress as one state per awaited message, timers, and parked
//! security contexts.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Emm_ {
    Deregistered,
    Registered,
}

/// The EMM procedure in progress on a UE and the one message it awaits (TS 24.301
/// §4.1: one EMM specific or common procedure at a time), in rustls's style: each state
/// holds what only it needs (the vector while the RES is awaited, the security context
/// being established until the Security Mode Complete, the new M-TMSI until the UE
/// confirms it), and nothing beside it records what is awaited. A handler checks the
/// state its message belongs to and moves the UE to the next one.
///
/// The S1 handover is not one of these: it is an S1AP mobility procedure that may run
/// while an EMM procedure waits for the UE ([`Ue::handover`]).
#[derive(Debug)]
pub(crate) enum Procedure {
    /// No EMM procedure in progress.
    Idle,
    /// Identification (§5.4.4): an attach by a GUTI we could not resolve.
    ExpectIdentity,
    /// The HSS's subscription data (request `seq`, an Update Location of a UE that is
    /// authenticated and secured); then the session. `attach`: digest of the Attach
    /// Request served (0: unknown), so that the same one repeated meanwhile is not
    /// served twice (§5.5.1.2.7 e).
    ExpectHssProfile {
        seq: u32,
        attach: u16,
    },
    /// An authentication vector from the HSS (request `seq`); then the Authentication
    /// Request. `resynced`: this vector follows a resynchronisation (one per AKA).
    ExpectHssVector {
        seq: u32,
        attach: u16,
        resynced: bool,
        then: Resume,
    },
    /// The RES for the challenge of `vector` (§5.4.2).
    ExpectAuthResponse {
        vector: Box<AuthVector>,
        resynced: bool,
        then: Resume,
    },
    /// The Security Mode Complete under `sec`, the context being established (§5.4.3).
    ExpectSmcComplete {
        sec: Box<SecCtx>,
        then: Resume,
    },
    /// The attach's ESM Information Response (§6.6.1.2).
    ExpectEsmInfo,
    /// The PCRF's policy for the attach's PDN connection (request `seq`, a CCR-I),
    /// guarded by the NAS timer set to the policy timeout; then the Attach Accept.
    ExpectPolicy {
        seq: u32,
    },
    /// The eNB's Initial Context Setup response (an attach's, or a Service Request's /
    /// an active-flag TAU's).
    ExpectIcsResponse {
        attach: bool,
    },
    ExpectAttachComplete,
    /// GUTI Reallocation Complete for the new `m_tmsi` (§5.4.1).
    ExpectGutiReallocComplete {
        m_tmsi: u32,
    },
    /// Network-initiated detach (§5.5.2.3).
    ExpectDetachAccept,
    /// The eNB's UE Context Release Complete; then the context goes (`then_remove`) or
    /// the UE becomes ECM-IDLE.
    ExpectReleaseComplete {
        then_remove: bool,
    },
}

/// What an AKA and security mode procedure lead to: the attach that started them, or
/// the message the NAS security gate held until the UE was authenticated again
/// ([`crate::gate`]). Until then nothing of the UE's current context changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    Attach,
    /// A Tracking Area Update Request (with its active flag) that failed the check.
    Tau {
        active: bool,
    },
    /// A Detach Request (not switch-off) that failed the check.
    Detach,
}

impl Procedure {
    /// What the AKA under way leads to, if one is.
    pub(crate) fn resume(&self) -> Option<Resume> {
        match self {
            Procedure::ExpectHssVector { then, .. }
            | Procedure::ExpectAuthResponse { then, .. }
            | Procedure::ExpectSmcComplete { then, .. } => Some(*then),
            Procedure::ExpectHssProfile { .. } => Some(Resume::Attach),
            _ => None,
        }
    }

    /// A re-authentication of a UE whose current context stays as it is until it
    /// succeeds (the gate's "authenticate first").
    pub(crate) fn reauthenticating(&self) -> bool {
        matches!(self.resume(), Some(Resume::Tau { .. } | Resume::Detach))
    }

    /// Waiting for the HSS: the context is half built and takes no NAS but a new
    /// Attach Request or a Detach Request.
    pub(crate) fn awaits_hss(&self) -> bool {
        matches!(
            self,
            Procedure::ExpectHssProfile { .. } | Procedure::ExpectHssVector { .. }
        )
    }

    /// The sequence number of the HSS request awaited.
    pub(crate) fn hss_seq(&self) -> Option<u32> {
        match self {
            Procedure::ExpectHssProfile { seq, .. } | Procedure::ExpectHssVector { seq, .. } => {
                Some(*seq)
            }
            _ => None,
        }
    }

    /// The digest of the Attach Request whose HSS answer is awaited (0: unknown).
    pub(crate) fn hss_attach(&self) -> u16 {
        match self {
            Procedure::ExpectHssProfile { attach, .. }
            | Procedure::ExpectHssVector { attach, .. } => *attach,
            _ => 0,
        }
    }

    /// Name for logs (never the state's keys).
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Procedure::Idle => "idle",
            Procedure::ExpectIdentity => "identification",
            Procedure::ExpectHssProfile { .. } => "subscription data (HSS)",
            Procedure::ExpectHssVector { .. } => "authentication vector (HSS)",
            Procedure::ExpectAuthResponse { .. } => "authentication",
            Procedure::ExpectSmcComplete { .. } => "security mode control",
            Procedure::ExpectEsmInfo => "ESM information",
            Procedure::ExpectPolicy { .. } => "policy (PCRF)",
            Procedure::ExpectIcsResponse { .. } => "initial context setup",
            Procedure::ExpectAttachComplete => "attach completion",
            Procedure::ExpectGutiReallocComplete { .. } => "GUTI reallocation",
            Procedure::ExpectDetachAccept => "network-initiated detach",
            Procedure::ExpectReleaseComplete { .. } => "UE context release",
        }
    }
}

pub(crate) struct HoState {
    pub(crate) target_assoc: AssocId,
    pub(crate) target_enb_ue_id: Option<u32>,
    pub(crate) admitted: Vec<pepc_s1ap::ERabAdmitted>,
    pub(crate) source: ConnKey,
    /// When the Handover Required came (its latency is measured to the Notify).
    pub(crate) started: Instant,
}

/// The MME's state of one UE: the signaling part of its entry in the slice's control
/// table ([`crate::ControlPlane`]). Opaque outside this crate.
pub struct Ue {
    /// Its MME UE S1AP ID (the key of `Mme::index`).
    pub(crate) id: u32,
    pub(crate) imsi: Option<u64>,
    pub(crate) emm: Emm_,
    /// Current S1 connection (assoc, eNB UE S1AP ID).
    pub(crate) conn: Option<ConnKey>,
    /// The EMM procedure in progress (what it awaits, with its own state).
    pub(crate) proc: Procedure,
    /// Boxed: the keyed EIA/EEA state makes it ~700 bytes; the context established
    /// by a security mode procedure moves in from its state without a copy.
    pub(crate) sec: Option<Box<SecCtx>>,
    /// Secure exchange of NAS messages is established on the current S1 connection
    /// (a message verified on it, or a security mode procedure completed): from then on
    /// nothing unverified is taken ([`crate::gate`]).
    pub(crate) nas_secured: bool,
    /// The attach learned the IMSI by identification: once secured, the slice claims it
    /// from the node ([`Output::ClaimImsi`]).
    pub(crate) claim_imsi: bool,
    pub(crate) ue_net_cap: Vec<u8>,
    pub(crate) pti: u8,
    pub(crate) apn: String,
    /// The subscribed APN from the HSS's subscription data at attach, as its index
    /// in `Mme::apns` (0: none). An index, not a string: the context stays within
    /// its 1 KiB allocation class.
    pub(crate) subscribed_apn: u16,
    pub(crate) slot: Option<u32>,
    pub(crate) m_tmsi: u32,
    pub(crate) tai: Tai,
    pub(crate) ecgi: Ecgi,
    pub(crate) nh: Option<Key256>,
    pub(crate) ncc: u8,
    /// NAS retransmission: the plain message and how to send it.
    pub(crate) retx: Option<Box<(NasEpsMessage, bool)>>,
    pub(crate) retx_count: u32,
    pub(crate) nas_timer: Option<Instant>,
    pub(crate) paging_timer: Option<Instant>,
    pub(crate) paging_left: u32,
    pub(crate) reach_timer: Option<Instant>,
    /// [`TimerKind::Guard`]: while a release awaits its Complete, the release guard;
    /// before, for a context without security, its time to live.
    pub(crate) guard_timer: Option<Instant>,
    /// The eNB whose budget of unauthenticated contexts this one counts against
    /// (until it gets a security context or goes).
    pub(crate) unauth_on: Option<AssocId>,
    /// When the EMM procedure under way began (its latency is measured to its end).
    pub(crate) started: Option<Instant>,
    /// Downlink NAS COUNT at the last checkpoint: one is due again before the count
    /// runs [`CHECKPOINT_DL_LEASE`] past it, so a restart can resume above any count
    /// the dead process used.
    pub(crate) ckpt_dl: u32,
    /// The S1 handover under way (TS 36.413 §8.4), beside any EMM procedure. Boxed,
    /// like `retx`: held only during the procedure, and out of line the context that
    /// stays per UE is smaller.
    pub(crate) handover: Option<Box<HoState>>,
    /// Source connection of a finished handover awaiting its release complete.
    pub(crate) old_conn: Option<ConnKey>,
    /// Source connection of the last X2 handover and until when it stays known. The
    /// source eNB answers over its own SCTP association, which has no ordering with the
    /// target's: its responses to what we sent before the Path Switch can arrive after
    /// it. The target releases the source over X2, so no Release Complete ends this.
    pub(crate) x2_source: Option<(ConnKey, Instant)>,
    pub(crate) ambr: (u64, u64),
    pub(crate) qci: u8,
    pub(crate) arp_priority: u8,
    pub(crate) next_ksi: u8,
    /// EPS bearers whose activation, modification or deactivation awaits the UE's
    /// ESM answer (ESM procedures run beside the EMM one).
    pub(crate) pending_bearers: Vec<u8>,
    /// The attach's PDN Connectivity Request set the ESM information transfer flag:
    /// the APN comes in an ESM Information Response after security (§6.6.1.2.2).
    pub(crate) esm_info_flag: bool,
    /// The current security context was taken from `Mme::parked` by a verified
    /// Attach Request: the attach goes on without identity and AKA.
    pub(crate) resumed: bool,
    /// A newer context of the same subscriber replaced this one; it only waits for the
    /// UE Context Release Complete of its S1 connection.
    pub(crate) superseded: bool,
    /// The HSS holds this MME as the subscriber's (an Update Location was answered):
    /// when the context is deleted, the HSS is told with a Purge UE (TS 29.272
    /// §5.2.1.3). Not after a Cancel Location (the HSS moved it) or a migration (the
    /// UE lives on elsewhere).
    pub(crate) hss_location: bool,
    /// Downlink arrived while the S1 connection was being released: page the UE once
    /// the release completes.
    pub(crate) page_after_release: bool,
    /// The procedures it has open in the slice's ledger ([`crate::mme::ledger`]):
    /// not in checkpoints (a restored UE's procedure ends uncounted, as it started
    /// in another process's ledger).
    pub(crate) open: crate::mme::ledger::Open,
    /// Policy of its PDN connections (Gx sessions, PCC rules, monitoring); boxed:
    /// the context stays within its allocation class.
    pub(crate) policy: Option<Box<crate::esm::policy::UePolicy>>,
}

impl Ue {
    /// Stop T3450/T3460/T3470/T3422 and forget the message they would retransmit.
    pub(crate) fn stop_nas_timer(&mut self) {
        self.nas_timer = None;
        self.retx = None;
    }

    /// The deadline of the UE's timer of `kind`, if it runs.
    pub(crate) fn timer(&self, kind: TimerKind) -> Option<Instant> {
        match kind {
            TimerKind::Nas => self.nas_timer,
            TimerKind::Paging => self.paging_timer,
            TimerKind::Reachable => self.reach_timer,
            TimerKind::Guard => self.guard_timer,
        }
    }

    pub(crate) fn timer_mut(&mut self, kind: TimerKind) -> &mut Option<Instant> {
        match kind {
            TimerKind::Nas => &mut self.nas_timer,
            TimerKind::Paging => &mut self.paging_timer,
            TimerKind::Reachable => &mut self.reach_timer,
            TimerKind::Guard => &mut self.guard_timer,
        }
    }

    /// The UE's running timers, as the timer heap holds them.
    pub(crate) fn timers(&self) -> impl Iterator<Item = (Instant, TimerKind)> + '_ {
        TimerKind::ALL
            .into_iter()
            .filter_map(|k| self.timer(k).map(|t| (t, k)))
    }
}

// A context is one allocation of 1 KiB: one more byte and it takes mimalloc's next
// class (1280 B), which costs the attach path page faults and cache misses (seen as
// 0.10 -> 0.26 page faults per attach in the in-process attach benchmark).
const _: () = assert!(std::mem::size_of::<Ue>() <= 1024);

/// The EPS security context of a UE that detached, kept under the M-TMSI of the GUTI
/// we gave it: its next Attach Request, integrity protected with this context (TS
/// 24.301 §5.5.1.2.2, §4.4.4.3), is verified and accepted without identity and AKA.
pub(crate) struct Parked {
    pub(crate) imsi: u64,
    pub(crate) sec: Box<SecCtx>,
    pub(crate) until: Instant,
    /// The HSS still holds this MME for the subscriber: the Purge UE goes when the
    /// parked context does, unless a new context of the subscriber is here then.
    pub(crate) purge: bool,
}
