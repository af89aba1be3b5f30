//! NAS cause values the MME sends and reads: EMM causes (TS 24.301 §9.9.3.9) and ESM
//! causes (§9.9.4.4). S1AP causes are [`pepc_s1ap::Cause`].

use pepc_seams::HssFailure;

/// One enum per cause IE: the variants with their wire values and texts, `u8` from the
/// variant (`as u8` or `From`), the variant from a `u8` (`TryFrom`, `Err` gives the value
/// back), and `Display` as "#value text".
macro_rules! cause_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $n:literal, $text:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum $name {
            $($(#[$vm])* $v = $n,)*
        }

        impl $name {
            /// The cause's name in TS 24.301.
            pub fn text(self) -> &'static str {
                match self {
                    $($name::$v => $text,)*
                }
            }
        }

        impl From<$name> for u8 {
            fn from(c: $name) -> u8 {
                c as u8
            }
        }

        impl TryFrom<u8> for $name {
            type Error = u8;
            fn try_from(n: u8) -> Result<Self, u8> {
                match n {
                    $($n => Ok($name::$v),)*
                    _ => Err(n),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "#{} {}", *self as u8, self.text())
            }
        }
    };
}

cause_enum! {
    /// EMM cause (TS 24.301 §9.9.3.9, Table 9.9.3.9.1).
    EmmCause {
        ImsiUnknownInHss = 2, "IMSI unknown in HSS";
        IllegalUe = 3, "Illegal UE";
        ImeiNotAccepted = 5, "IMEI not accepted";
        IllegalMe = 6, "Illegal ME";
        EpsServicesNotAllowed = 7, "EPS services not allowed";
        /// Also what the MME answers for a subscriber the HSS does not know (TS 29.272
        /// DIAMETER_ERROR_USER_UNKNOWN).
        EpsAndNonEpsServicesNotAllowed = 8, "EPS services and non-EPS services not allowed";
        UeIdentityCannotBeDerived = 9, "UE identity cannot be derived by the network";
        ImplicitlyDetached = 10, "Implicitly detached";
        PlmnNotAllowed = 11, "PLMN not allowed";
        TrackingAreaNotAllowed = 12, "Tracking area not allowed";
        RoamingNotAllowedInTrackingArea = 13, "Roaming not allowed in this tracking area";
        EpsServicesNotAllowedInPlmn = 14, "EPS services not allowed in this PLMN";
        NoSuitableCellsInTrackingArea = 15, "No suitable cells in tracking area";
        MscTemporarilyNotReachable = 16, "MSC temporarily not reachable";
        NetworkFailure = 17, "Network failure";
        CsDomainNotAvailable = 18, "CS domain not available";
        EsmFailure = 19, "ESM failure";
        MacFailure = 20, "MAC failure";
        SynchFailure = 21, "Synch failure";
        Congestion = 22, "Congestion";
        UeSecurityCapabilitiesMismatch = 23, "UE security capabilities mismatch";
        SecurityModeRejectedUnspecified = 24, "Security mode rejected, unspecified";
        NotAuthorizedForCsg = 25, "Not authorized for this CSG";
        NonEpsAuthenticationUnacceptable = 26, "Non-EPS authentication unacceptable";
        RequestedServiceOptionNotAuthorized = 35,
            "Requested service option not authorized in this PLMN";
        CsServiceTemporarilyNotAvailable = 39, "CS service temporarily not available";
        NoEpsBearerContextActivated = 40, "No EPS bearer context activated";
        SevereNetworkFailure = 42, "Severe network failure";
        SemanticallyIncorrectMessage = 95, "Semantically incorrect message";
        InvalidMandatoryInformation = 96, "Invalid mandatory information";
        MessageTypeNonExistent = 97, "Message type non-existent or not implemented";
        MessageTypeNotCompatibleWithState = 98,
            "Message type not compatible with the protocol state";
        IeNonExistent = 99, "Information element non-existent or not implemented";
        ConditionalIeError = 100, "Conditional IE error";
        MessageNotCompatibleWithState = 101, "Message not compatible with the protocol state";
        ProtocolErrorUnspecified = 111, "Protocol error, unspecified";
    }
}

cause_enum! {
    /// ESM cause (TS 24.301 §9.9.4.4, Table 9.9.4.4.1).
    EsmCause {
        OperatorDeterminedBarring = 8, "Operator Determined Barring";
        InsufficientResources = 26, "Insufficient resources";
        MissingOrUnknownApn = 27, "Missing or unknown APN";
        UnknownPdnType = 28, "Unknown PDN type";
        UserAuthenticationFailed = 29, "User authentication failed";
        RequestRejectedByGw = 30, "Request rejected by Serving GW or PDN GW";
        RequestRejectedUnspecified = 31, "Request rejected, unspecified";
        ServiceOptionNotSupported = 32, "Service option not supported";
        ServiceOptionNotSubscribed = 33, "Requested service option not subscribed";
        ServiceOptionTemporarilyOutOfOrder = 34, "Service option temporarily out of order";
        PtiAlreadyInUse = 35, "PTI already in use";
        RegularDeactivation = 36, "Regular deactivation";
        EpsQosNotAccepted = 37, "EPS QoS not accepted";
        NetworkFailure = 38, "Network failure";
        ReactivationRequested = 39, "Reactivation requested";
        SemanticErrorInTftOperation = 41, "Semantic error in the TFT operation";
        SyntacticalErrorInTftOperation = 42, "Syntactical error in the TFT operation";
        InvalidEpsBearerIdentity = 43, "Invalid EPS bearer identity";
        SemanticErrorsInPacketFilters = 44, "Semantic errors in packet filter(s)";
        SyntacticalErrorsInPacketFilters = 45, "Syntactical errors in packet filter(s)";
        PtiMismatch = 47, "PTI mismatch";
        LastPdnDisconnectionNotAllowed = 49, "Last PDN disconnection not allowed";
        PdnTypeIpv4OnlyAllowed = 50, "PDN type IPv4 only allowed";
        PdnTypeIpv6OnlyAllowed = 51, "PDN type IPv6 only allowed";
        SingleAddressBearersOnlyAllowed = 52, "Single address bearers only allowed";
        EsmInformationNotReceived = 53, "ESM information not received";
        PdnConnectionDoesNotExist = 54, "PDN connection does not exist";
        MultiplePdnConnectionsForApnNotAllowed = 55,
            "Multiple PDN connections for a given APN not allowed";
        CollisionWithNetworkInitiatedRequest = 56, "Collision with network initiated request";
        PdnTypeIpv4v6OnlyAllowed = 57, "PDN type IPv4v6 only allowed";
        PdnTypeNonIpOnlyAllowed = 58, "PDN type non IP only allowed";
        UnsupportedQciValue = 59, "Unsupported QCI value";
        BearerHandlingNotSupported = 60, "Bearer handling not supported";
        MaximumEpsBearersReached = 65, "Maximum number of EPS bearers reached";
        ApnNotSupportedInRatAndPlmn = 66,
            "Requested APN not supported in current RAT and PLMN combination";
        InvalidPtiValue = 81, "Invalid PTI value";
        SemanticallyIncorrectMessage = 95, "Semantically incorrect message";
        InvalidMandatoryInformation = 96, "Invalid mandatory information";
        MessageTypeNonExistent = 97, "Message type non-existent or not implemented";
        MessageTypeNotCompatibleWithState = 98,
            "Message type not compatible with the protocol state";
        IeNonExistent = 99, "Information element non-existent or not implemented";
        ConditionalIeError = 100, "Conditional IE error";
        MessageNotCompatibleWithState = 101, "Message not compatible with the protocol state";
        ProtocolErrorUnspecified = 111, "Protocol error, unspecified";
        ApnRestrictionIncompatible = 112,
            "APN restriction value incompatible with active EPS bearer context";
        MultipleAccessesToPdnConnectionNotAllowed = 113,
            "Multiple accesses to a PDN connection not allowed";
    }
}

/// The EMM cause an HSS failure makes: the seam's [`HssFailure`] knows no MME types,
/// so the mapping is the MME's, as a method for the procedures' convenience.
pub trait HssFailureCause {
    /// The EMM cause of the Attach Reject this failure makes (TS 29.272 Annex A):
    /// unknown subscriber #8 (as before the seam), no EPS subscription #15, an HSS that
    /// cannot answer #17 (a transient failure: the UE retries, TS 24.301 §5.5.1.2.6),
    /// roaming not allowed #11 (PLMN not allowed: Annex A lists #11, #13 and #15 for
    /// it; without the ODB Error-Diagnostic the whole PLMN is barred, which is #11),
    /// RAT not allowed #15 (the UE may find another RAT in this tracking area).
    /// [`HssFailure::ResyncRefused`] ends in an Authentication Reject instead.
    fn emm_cause(&self) -> EmmCause;
}

impl HssFailureCause for HssFailure {
    fn emm_cause(&self) -> EmmCause {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip() {
        for n in 0..=255u8 {
            if let Ok(c) = EmmCause::try_from(n) {
                assert_eq!(u8::from(c), n);
            }
            if let Ok(c) = EsmCause::try_from(n) {
                assert_eq!(c as u8, n);
            }
        }
        assert_eq!(EmmCause::InvalidMandatoryInformation as u8, 96);
        assert_eq!(EsmCause::try_from(27), Ok(EsmCause::MissingOrUnknownApn));
        assert_eq!(EsmCause::try_from(46), Err(46));
        assert_eq!(
            EsmCause::MissingOrUnknownApn.to_string(),
            "#27 Missing or unknown APN"
        );
    }

    #[test]
    fn hss_failures_map_to_emm_causes() {
        assert_eq!(
            HssFailure::UnknownSubscriber.emm_cause(),
            EmmCause::EpsAndNonEpsServicesNotAllowed
        );
        assert_eq!(
            HssFailure::Unavailable("SQN exhausted".into()).emm_cause(),
            EmmCause::NetworkFailure
        );
        assert_eq!(HssFailure::Timeout.emm_cause(), EmmCause::NetworkFailure);
        assert_eq!(HssFailure::ResyncRefused.emm_cause(), EmmCause::IllegalUe);
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
    }
}
