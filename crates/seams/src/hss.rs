//! The HSS side of the seam as messages: the MME sends an [`HssRequest`] and waits, in
//! a state of its own, for the [`HssAnswer`] that carries the same [`HssRef`].
//!
//! The shapes follow S6a (TS 29.272): [`HssRequest::Profile`] is what an Update
//! Location Request asks and [`SubscriptionData`] what its answer fills;
//! [`HssRequest::Vector`] an Authentication Information Request for one E-UTRAN
//! vector of the serving PLMN; [`HssRequest::Resync`] the same with
//! Re-Synchronization-Info (RAND + AUTS, §7.3.15).

use pepc_security::AuthVector;
use pepc_types::PdnType;

/// Which request an answer belongs to: the MME UE S1AP ID of the context that asked
/// (it carries the slice, so a node routes the answer by it) and the MME's sequence
/// number of the request. The MME drops an answer whose context is gone, or which no
/// longer waits for that sequence number (superseded, restarted, timed out). The PCRF
/// side ([`crate::pcrf`]) names its requests the same way.
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

/// Why the HSS did not serve a request. What the MME makes of each (an EMM cause) is
/// the MME's business, not the seam's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HssFailure {
    /// DIAMETER_ERROR_USER_UNKNOWN: the HSS has no such subscriber.
    #[error("unknown subscriber")]
    UnknownSubscriber,
    /// DIAMETER_ERROR_UNKNOWN_EPS_SUBSCRIPTION (not produced by the embedded HSS).
    #[error("no EPS subscription")]
    NoEpsSubscription,
    /// The AUTS did not verify (MAC-S): the resynchronisation is refused.
    #[error("resynchronisation refused (MAC-S)")]
    ResyncRefused,
    /// The HSS could not serve the request (its database, SQN space, a Diameter
    /// DIAMETER_UNABLE_TO_COMPLY); what went wrong, without key material.
    #[error("HSS unavailable: {0}")]
    Unavailable(String),
    /// No answer in time (an asynchronous backend's own timer).
    #[error("no answer in time")]
    Timeout,
    /// DIAMETER_ERROR_ROAMING_NOT_ALLOWED (5004): not allowed in our (visited) PLMN.
    #[error("roaming not allowed")]
    RoamingNotAllowed,
    /// DIAMETER_ERROR_RAT_NOT_ALLOWED (5421): E-UTRAN is not allowed to the subscriber.
    #[error("RAT (E-UTRAN) not allowed")]
    RatNotAllowed,
}

/// The answer to the request [`HssAnswer::r`].
#[derive(Debug)]
pub struct HssAnswer {
    pub r: HssRef,
    pub result: Result<HssData, HssFailure>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_has_no_reference_and_others_keep_theirs() {
        assert_eq!(HssRequest::Purge { imsi: 1 }.reference(), HssRef::NONE);
        let r = HssRef {
            mme_ue_id: 7,
            seq: 3,
        };
        let req = HssRequest::Vector {
            r,
            imsi: 9,
            plmn: [0; 3],
        };
        assert_eq!((req.reference(), req.imsi()), (r, 9));
        assert_eq!(
            CancellationType::from(2),
            CancellationType::SubscriptionWithdrawal
        );
        assert_eq!(CancellationType::from(9), CancellationType::Other(9));
        assert_eq!(
            HssFailure::Unavailable("db".into()).to_string(),
            "HSS unavailable: db"
        );
    }
}
