//! Plain EMM/ESM messages (TS 24.301 §8) over oxirush-nas's framing.
//!
//! Each message is a plain struct of the fields the MME and the emulated UE use; IEs we
//! do not model are dropped on decode and absent on encode. `encode()` produces a plain
//! NAS message (security header type 0); see [`crate::security`] for protection.

use crate::ie::*;
use crate::NasError;
use oxirush_nas::nas_eps as x;
use std::net::Ipv4Addr;

type R<T> = Result<T, NasError>;

/// Link direction of a NAS message (Detach Request has one message type for both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Uplink,
    Downlink,
}

/// EMM message types (TS 24.301 §9.8).
pub mod emm_type {
    pub const ATTACH_REQUEST: u8 = 0x41;
    pub const ATTACH_ACCEPT: u8 = 0x42;
    pub const ATTACH_COMPLETE: u8 = 0x43;
    pub const ATTACH_REJECT: u8 = 0x44;
    pub const DETACH_REQUEST: u8 = 0x45;
    pub const DETACH_ACCEPT: u8 = 0x46;
    pub const TAU_REQUEST: u8 = 0x48;
    pub const TAU_ACCEPT: u8 = 0x49;
    pub const TAU_COMPLETE: u8 = 0x4a;
    pub const TAU_REJECT: u8 = 0x4b;
    pub const SERVICE_REJECT: u8 = 0x4e;
    pub const GUTI_REALLOCATION_COMMAND: u8 = 0x50;
    pub const GUTI_REALLOCATION_COMPLETE: u8 = 0x51;
    pub const AUTHENTICATION_REQUEST: u8 = 0x52;
    pub const AUTHENTICATION_RESPONSE: u8 = 0x53;
    pub const AUTHENTICATION_REJECT: u8 = 0x54;
    pub const AUTHENTICATION_FAILURE: u8 = 0x5c;
    pub const IDENTITY_REQUEST: u8 = 0x55;
    pub const IDENTITY_RESPONSE: u8 = 0x56;
    pub const SECURITY_MODE_COMMAND: u8 = 0x5d;
    pub const SECURITY_MODE_COMPLETE: u8 = 0x5e;
    pub const SECURITY_MODE_REJECT: u8 = 0x5f;
    pub const EMM_STATUS: u8 = 0x60;
    pub const EMM_INFORMATION: u8 = 0x61;
}

/// EMM causes used by the core (TS 24.301 §9.9.3.9).
pub mod emm_cause {
    pub const IMSI_UNKNOWN_IN_HSS: u8 = 2;
    pub const ILLEGAL_UE: u8 = 3;
    pub const IMPLICITLY_DETACHED: u8 = 10;
    pub const PLMN_NOT_ALLOWED: u8 = 11;
    pub const TRACKING_AREA_NOT_ALLOWED: u8 = 12;
    pub const NETWORK_FAILURE: u8 = 17;
    pub const ESM_FAILURE: u8 = 19;
    pub const MAC_FAILURE: u8 = 20;
    pub const SYNCH_FAILURE: u8 = 21;
    pub const CONGESTION: u8 = 22;
    pub const UE_SECURITY_CAPABILITIES_MISMATCH: u8 = 23;
    pub const SECURITY_MODE_REJECTED_UNSPECIFIED: u8 = 24;
    pub const NON_EPS_AUTHENTICATION_UNACCEPTABLE: u8 = 26;
    pub const UE_IDENTITY_CANNOT_BE_DERIVED: u8 = 9;
    pub const SEMANTICALLY_INCORRECT: u8 = 95;
    pub const PROTOCOL_ERROR_UNSPECIFIED: u8 = 111;
}

/// ESM causes used by the core (TS 24.301 §9.9.4.4).
pub mod esm_cause {
    pub const INSUFFICIENT_RESOURCES: u8 = 26;
    pub const MISSING_OR_UNKNOWN_APN: u8 = 27;
    pub const UNKNOWN_PDN_TYPE: u8 = 28;
    pub const USER_AUTHENTICATION_FAILED: u8 = 29;
    pub const REQUEST_REJECTED_BY_GW: u8 = 30;
    pub const REQUEST_REJECTED_UNSPECIFIED: u8 = 31;
    pub const REGULAR_DEACTIVATION: u8 = 36;
    pub const INVALID_EPS_BEARER_IDENTITY: u8 = 43;
    pub const LAST_PDN_DISCONNECTION_NOT_ALLOWED: u8 = 49;
    pub const PROTOCOL_ERROR_UNSPECIFIED: u8 = 111;
}

fn v<T: AsRef<[u8]>>(o: &T) -> Vec<u8> {
    o.as_ref().to_vec()
}

fn arr<const N: usize>(b: &[u8], what: &str) -> R<[u8; N]> {
    b.try_into()
        .map_err(|_| NasError::Decode(format!("{what} is {} octets, not {N}", b.len())))
}

// ----------------------------------------------------------------------------- EMM

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachRequest {
    /// EPS attach type (1 EPS attach, 2 combined, 6 emergency).
    pub attach_type: u8,
    /// NAS key set identifier half octet (TSC in bit 4; 7 = no key).
    pub ksi: u8,
    pub identity: MobileIdentity,
    pub ue_network_capability: UeNetworkCapability,
    /// ESM message container (a PDN Connectivity Request).
    pub esm_container: Vec<u8>,
    pub last_visited_tai: Option<Tai>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachAccept {
    /// 1 = EPS only, 2 = combined.
    pub attach_result: u8,
    /// T3412 as GPRS timer octet (unit in bits 8-6).
    pub t3412: u8,
    pub tai_list: Vec<Tai>,
    /// ESM message container (Activate Default EPS Bearer Context Request).
    pub esm_container: Vec<u8>,
    pub guti: Option<Guti>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachComplete {
    pub esm_container: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachReject {
    pub emm_cause: u8,
    pub esm_container: Option<Vec<u8>>,
    /// T3346 (back-off with #22 congestion), seconds; 0 = deactivated.
    pub t3346_s: Option<u64>,
}

#[derive(Clone, PartialEq, Eq)]
pub struct AuthenticationRequest {
    pub ksi: u8,
    pub rand: [u8; 16],
    pub autn: [u8; 16],
}

impl core::fmt::Debug for AuthenticationRequest {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // RAND/AUTN are sent in clear on the air interface; no secret here.
        f.debug_struct("AuthenticationRequest")
            .field("ksi", &self.ksi)
            .field("rand", &self.rand)
            .field("autn", &self.autn)
            .finish()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticationResponse {
    pub res: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthenticationFailure {
    /// #20 MAC failure, #21 synch failure, #26 non-EPS authentication unacceptable.
    pub emm_cause: u8,
    /// AUTS, present with #21.
    pub auts: Option<[u8; 14]>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityModeCommand {
    /// Selected ciphering algorithm (EEA0..7).
    pub eea: u8,
    /// Selected integrity algorithm (EIA0..7).
    pub eia: u8,
    pub ksi: u8,
    /// Replayed UE security capabilities (octets as in the UE network capability).
    pub replayed_ue_capabilities: Vec<u8>,
    pub imeisv_request: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityModeComplete {
    pub imeisv: Option<MobileIdentity>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityRequest {
    /// 1 IMSI, 2 IMEI, 3 IMEISV, 4 TMSI.
    pub identity_type: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentityResponse {
    pub identity: MobileIdentity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachRequestUe {
    /// Detach type bits 1-3 (1 EPS, 3 combined).
    pub detach_type: u8,
    pub switch_off: bool,
    pub ksi: u8,
    pub identity: MobileIdentity,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DetachRequestNetwork {
    /// Detach type bits 1-3 (1 re-attach required, 2 re-attach not required, 3 IMSI detach).
    pub detach_type: u8,
    pub emm_cause: Option<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TauRequest {
    /// EPS update type bits 1-3 (0 TA updating, 1 combined, 2 combined with IMSI, 3 periodic).
    pub update_type: u8,
    /// "Active" flag (bit 4): bearers to be re-established.
    pub active_flag: bool,
    pub ksi: u8,
    pub old_guti: MobileIdentity,
    pub ue_network_capability: Option<UeNetworkCapability>,
    pub last_visited_tai: Option<Tai>,
    /// EPS bearer context status bitmap (EBI 0..15, bit n = EBI n).
    pub eps_bearer_context_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TauAccept {
    pub update_result: u8,
    pub t3412: Option<u8>,
    pub guti: Option<Guti>,
    pub tai_list: Option<Vec<Tai>>,
    pub eps_bearer_context_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GutiReallocationCommand {
    pub guti: Guti,
    pub tai_list: Option<Vec<Tai>>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EmmInformation {
    /// Network name IE contents (TS 24.008 §10.5.3.5a) as sent.
    pub full_name: Option<Vec<u8>>,
    pub short_name: Option<Vec<u8>>,
    /// Universal time and local time zone, 7 octets.
    pub universal_time: Option<Vec<u8>>,
}

/// EMM messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmmMessage {
    AttachRequest(AttachRequest),
    AttachAccept(AttachAccept),
    AttachComplete(AttachComplete),
    AttachReject(AttachReject),
    AuthenticationRequest(AuthenticationRequest),
    AuthenticationResponse(AuthenticationResponse),
    AuthenticationReject,
    AuthenticationFailure(AuthenticationFailure),
    SecurityModeCommand(SecurityModeCommand),
    SecurityModeComplete(SecurityModeComplete),
    SecurityModeReject { emm_cause: u8 },
    IdentityRequest(IdentityRequest),
    IdentityResponse(IdentityResponse),
    DetachRequestUe(DetachRequestUe),
    DetachRequestNetwork(DetachRequestNetwork),
    DetachAccept,
    TauRequest(TauRequest),
    TauAccept(TauAccept),
    TauComplete,
    TauReject { emm_cause: u8 },
    ServiceReject { emm_cause: u8 },
    GutiReallocationCommand(GutiReallocationCommand),
    GutiReallocationComplete,
    EmmInformation(EmmInformation),
    EmmStatus { emm_cause: u8 },
}

// ----------------------------------------------------------------------------- ESM

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdnConnectivityRequest {
    /// 1 initial request, 2 handover, 4 emergency.
    pub request_type: u8,
    /// 1 IPv4, 2 IPv6, 3 IPv4v6.
    pub pdn_type: u8,
    pub esm_information_transfer: bool,
    pub apn: Option<String>,
    /// Protocol configuration options contents, as sent.
    pub pco: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivateDefaultBearerRequest {
    pub qos: EpsQos,
    pub apn: String,
    pub pdn_address: PdnAddress,
    pub apn_ambr: Option<ApnAmbr>,
    /// ESM cause, e.g. #50 "PDN type IPv4 only allowed".
    pub esm_cause: Option<u8>,
    pub pco: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivateDedicatedBearerRequest {
    pub linked_ebi: u8,
    pub qos: EpsQos,
    /// Traffic flow template contents (TS 24.008 §10.5.6.12), as built by the caller.
    pub tft: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModifyBearerRequest {
    pub qos: Option<EpsQos>,
    pub tft: Option<Vec<u8>>,
    pub apn_ambr: Option<ApnAmbr>,
}

/// ESM message bodies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EsmBody {
    PdnConnectivityRequest(PdnConnectivityRequest),
    PdnConnectivityReject {
        esm_cause: u8,
    },
    PdnDisconnectRequest {
        linked_ebi: u8,
    },
    PdnDisconnectReject {
        esm_cause: u8,
    },
    EsmInformationRequest,
    EsmInformationResponse {
        apn: Option<String>,
        pco: Option<Vec<u8>>,
    },
    ActivateDefaultBearerRequest(ActivateDefaultBearerRequest),
    ActivateDefaultBearerAccept,
    ActivateDefaultBearerReject {
        esm_cause: u8,
    },
    ActivateDedicatedBearerRequest(ActivateDedicatedBearerRequest),
    ActivateDedicatedBearerAccept,
    ActivateDedicatedBearerReject {
        esm_cause: u8,
    },
    ModifyBearerRequest(ModifyBearerRequest),
    ModifyBearerAccept,
    ModifyBearerReject {
        esm_cause: u8,
    },
    DeactivateBearerRequest {
        esm_cause: u8,
    },
    DeactivateBearerAccept,
    EsmStatus {
        esm_cause: u8,
    },
}

/// An ESM message with its header fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EsmMessage {
    /// EPS bearer identity (0 = none).
    pub ebi: u8,
    /// Procedure transaction identity (0 = none).
    pub pti: u8,
    pub body: EsmBody,
}

/// A plain NAS message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NasMessage {
    Emm(EmmMessage),
    Esm(EsmMessage),
}

impl From<EmmMessage> for NasMessage {
    fn from(m: EmmMessage) -> Self {
        NasMessage::Emm(m)
    }
}
impl From<EsmMessage> for NasMessage {
    fn from(m: EsmMessage) -> Self {
        NasMessage::Esm(m)
    }
}

fn enc(m: x::NasEpsMessage) -> R<Vec<u8>> {
    m.encode().map_err(|e| NasError::Encode(e.to_string()))
}

fn emm_out(m: impl Into<x::NasEmmMessage>) -> x::NasEpsMessage {
    x::NasEpsMessage::new_emm(m)
}

fn status(b: &[u8]) -> Option<u16> {
    (b.len() >= 2).then(|| u16::from_le_bytes([b[0], b[1]]))
}

impl EmmMessage {
    pub fn encode(&self) -> R<Vec<u8>> {
        use EmmMessage as E;
        let lv = |b: Vec<u8>| b;
        let m = match self {
            E::AttachRequest(a) => {
                let mut r = x::NasAttachRequest::new(
                    x::NasEpsAttachType::new(a.attach_type),
                    x::NasKeySetIdentifier::new(a.ksi),
                    x::NasEpsMobileIdentity::new(a.identity.to_bytes()?),
                    x::NasUeNetworkCapability::new(a.ue_network_capability.to_bytes()),
                    x::NasEsmMessageContainer::new(a.esm_container.clone()),
                );
                if let Some(t) = a.last_visited_tai {
                    r.last_visited_registered_tai =
                        Some(x::NasTrackingAreaIdentity::new(t.to_bytes().to_vec()));
                }
                emm_out(r)
            }
            E::AttachAccept(a) => {
                let mut r = x::NasAttachAccept::new(
                    x::NasEpsAttachResult::new(a.attach_result),
                    x::NasT3412Value::new(a.t3412),
                    x::NasTrackingAreaIdentityList::new(encode_tai_list(&a.tai_list)?),
                    x::NasEsmMessageContainer::new(a.esm_container.clone()),
                );
                if let Some(g) = a.guti {
                    r.guti = Some(x::NasEpsMobileIdentity::new(
                        MobileIdentity::Guti(g).to_bytes()?,
                    ));
                }
                emm_out(r)
            }
            E::AttachComplete(a) => emm_out(x::NasAttachComplete::new(
                x::NasEsmMessageContainer::new(a.esm_container.clone()),
            )),
            E::AttachReject(a) => {
                let mut r = x::NasAttachReject::new(x::NasEmmCause::new(a.emm_cause));
                r.esm_message_container =
                    a.esm_container.clone().map(x::NasEsmMessageContainer::new);
                r.t3346_value = match a.t3346_s {
                    Some(0) => Some(x::NasGprsTimer2::deactivated()),
                    Some(t) => Some(
                        x::NasGprsTimer2::from_seconds(t)
                            .map_err(|e| NasError::Encode(e.to_string()))?,
                    ),
                    None => None,
                };
                emm_out(r)
            }
            E::AuthenticationRequest(a) => emm_out(x::NasAuthenticationRequest::new(
                x::NasKeySetIdentifier::new(a.ksi),
                x::NasAuthenticationParameterRand::new(a.rand.to_vec()),
                x::NasAuthenticationParameterAutn::new(a.autn.to_vec()),
            )),
            E::AuthenticationResponse(a) => emm_out(x::NasAuthenticationResponse::new(
                x::NasAuthenticationResponseParameter::new(lv(a.res.clone())),
            )),
            E::AuthenticationReject => emm_out(x::NasAuthenticationReject::new()),
            E::AuthenticationFailure(a) => {
                let mut r = x::NasAuthenticationFailure::new(x::NasEmmCause::new(a.emm_cause));
                r.authentication_failure_parameter = a
                    .auts
                    .map(|t| x::NasAuthenticationFailureParameter::new(t.to_vec()));
                emm_out(r)
            }
            E::SecurityModeCommand(s) => {
                let mut r = x::NasSecurityModeCommand::new(
                    x::NasSecurityAlgorithms::new((s.eea & 7) << 4 | (s.eia & 7)),
                    x::NasKeySetIdentifier::new(s.ksi),
                    x::NasUeSecurityCapability::new(s.replayed_ue_capabilities.clone()),
                );
                if s.imeisv_request {
                    r.imeisv_request = Some(x::NasImeisvRequest::new(1));
                }
                emm_out(r)
            }
            E::SecurityModeComplete(s) => {
                let mut r = x::NasSecurityModeComplete::new();
                if let Some(i) = &s.imeisv {
                    r.imeisv = Some(x::NasMobileIdentity::new(i.to_bytes()?));
                }
                emm_out(r)
            }
            E::SecurityModeReject { emm_cause } => emm_out(x::NasSecurityModeReject::new(
                x::NasEmmCause::new(*emm_cause),
            )),
            E::IdentityRequest(i) => emm_out(x::NasIdentityRequest::new(x::NasIdentityType2::new(
                i.identity_type,
            ))),
            E::IdentityResponse(i) => emm_out(x::NasIdentityResponse::new(
                x::NasMobileIdentity::new(i.identity.to_bytes()?),
            )),
            E::DetachRequestUe(d) => emm_out(x::NasDetachRequestUeOriginating::new(
                x::NasDetachType::new((d.switch_off as u8) << 3 | (d.detach_type & 7)),
                x::NasKeySetIdentifier::new(d.ksi),
                x::NasEpsMobileIdentity::new(d.identity.to_bytes()?),
            )),
            E::DetachRequestNetwork(d) => {
                let mut r =
                    x::NasDetachRequestUeTerminated::new(x::NasDetachType::new(d.detach_type & 7));
                r.emm_cause = d.emm_cause.map(x::NasEmmCause::new);
                emm_out(r)
            }
            E::DetachAccept => emm_out(x::NasDetachAccept::new()),
            E::TauRequest(t) => {
                let mut r = x::NasTrackingAreaUpdateRequest::new(
                    x::NasEpsUpdateType::new((t.active_flag as u8) << 3 | (t.update_type & 7)),
                    x::NasKeySetIdentifier::new(t.ksi),
                    x::NasEpsMobileIdentity::new(t.old_guti.to_bytes()?),
                );
                r.ue_network_capability = t
                    .ue_network_capability
                    .as_ref()
                    .map(|c| x::NasUeNetworkCapability::new(c.to_bytes()));
                r.last_visited_registered_tai = t
                    .last_visited_tai
                    .map(|t| x::NasTrackingAreaIdentity::new(t.to_bytes().to_vec()));
                r.eps_bearer_context_status = t
                    .eps_bearer_context_status
                    .map(|s| x::NasEpsBearerContextStatus::new(s.to_le_bytes().to_vec()));
                emm_out(r)
            }
            E::TauAccept(t) => {
                let mut r = x::NasTrackingAreaUpdateAccept::new(x::NasEpsUpdateResult::new(
                    t.update_result,
                ));
                r.t3412_value = t.t3412.map(x::NasT3412Value::new);
                if let Some(g) = t.guti {
                    r.guti = Some(x::NasEpsMobileIdentity::new(
                        MobileIdentity::Guti(g).to_bytes()?,
                    ));
                }
                if let Some(l) = &t.tai_list {
                    r.tai_list = Some(x::NasTrackingAreaIdentityList::new(encode_tai_list(l)?));
                }
                r.eps_bearer_context_status = t
                    .eps_bearer_context_status
                    .map(|s| x::NasEpsBearerContextStatus::new(s.to_le_bytes().to_vec()));
                emm_out(r)
            }
            E::TauComplete => emm_out(x::NasTrackingAreaUpdateComplete::new()),
            E::TauReject { emm_cause } => emm_out(x::NasTrackingAreaUpdateReject::new(
                x::NasEmmCause::new(*emm_cause),
            )),
            E::ServiceReject { emm_cause } => {
                emm_out(x::NasServiceReject::new(x::NasEmmCause::new(*emm_cause)))
            }
            E::GutiReallocationCommand(g) => {
                let mut r = x::NasGutiReallocationCommand::new(x::NasEpsMobileIdentity::new(
                    MobileIdentity::Guti(g.guti).to_bytes()?,
                ));
                if let Some(l) = &g.tai_list {
                    r.tai_list = Some(x::NasTrackingAreaIdentityList::new(encode_tai_list(l)?));
                }
                emm_out(r)
            }
            E::GutiReallocationComplete => emm_out(x::NasGutiReallocationComplete::new()),
            E::EmmInformation(i) => {
                let mut r = x::NasEmmInformation::new();
                r.full_name_for_network = i.full_name.clone().map(x::NasNetworkName::new);
                r.short_name_for_network = i.short_name.clone().map(x::NasNetworkName::new);
                r.universal_time_and_local_time_zone =
                    i.universal_time.clone().map(x::NasTimeZoneAndTime::new);
                emm_out(r)
            }
            E::EmmStatus { emm_cause } => {
                emm_out(x::NasEmmStatus::new(x::NasEmmCause::new(*emm_cause)))
            }
        };
        enc(m)
    }

    fn from_x(m: &x::NasEmmMessage) -> R<Self> {
        use x::NasEmmMessage as X;
        use EmmMessage as E;
        let tai = |t: &Option<x::NasTrackingAreaIdentity>| {
            t.as_ref().map(|t| Tai::from_bytes(&t.value)).transpose()
        };
        let guti = |g: &x::NasEpsMobileIdentity| match MobileIdentity::from_bytes(&g.value)? {
            MobileIdentity::Guti(g) => Ok(g),
            other => Err(NasError::Decode(format!("GUTI IE holds {other:?}"))),
        };
        Ok(match m {
            X::AttachRequest(a) => E::AttachRequest(AttachRequest {
                attach_type: a.eps_attach_type.value,
                ksi: a.nas_key_set_identifier.value,
                identity: MobileIdentity::from_bytes(&a.eps_mobile_identity.value)?,
                ue_network_capability: UeNetworkCapability::from_bytes(
                    &a.ue_network_capability.value,
                )?,
                esm_container: v(&a.esm_message_container.value),
                last_visited_tai: tai(&a.last_visited_registered_tai)?,
            }),
            X::AttachAccept(a) => E::AttachAccept(AttachAccept {
                attach_result: a.eps_attach_result.value,
                t3412: a.t3412_value.value,
                tai_list: decode_tai_list(&a.tai_list.value)?,
                esm_container: v(&a.esm_message_container.value),
                guti: a.guti.as_ref().map(guti).transpose()?,
            }),
            X::AttachComplete(a) => E::AttachComplete(AttachComplete {
                esm_container: v(&a.esm_message_container.value),
            }),
            X::AttachReject(a) => E::AttachReject(AttachReject {
                emm_cause: a.emm_cause.value,
                esm_container: a.esm_message_container.as_ref().map(|c| v(&c.value)),
                t3346_s: a.t3346_value.as_ref().map(|t| {
                    if t.is_deactivated() {
                        0
                    } else {
                        t.to_seconds().unwrap_or(0)
                    }
                }),
            }),
            X::AuthenticationRequest(a) => E::AuthenticationRequest(AuthenticationRequest {
                ksi: a.nas_key_set_identifier_asme.value,
                rand: arr(&a.authentication_parameter_rand.value, "RAND")?,
                autn: arr(&a.authentication_parameter_autn.value, "AUTN")?,
            }),
            X::AuthenticationResponse(a) => E::AuthenticationResponse(AuthenticationResponse {
                res: v(&a.authentication_response_parameter.value),
            }),
            X::AuthenticationReject(_) => E::AuthenticationReject,
            X::AuthenticationFailure(a) => E::AuthenticationFailure(AuthenticationFailure {
                emm_cause: a.emm_cause.value,
                auts: a
                    .authentication_failure_parameter
                    .as_ref()
                    .map(|p| arr(&p.value, "AUTS"))
                    .transpose()?,
            }),
            X::SecurityModeCommand(s) => E::SecurityModeCommand(SecurityModeCommand {
                eea: (s.selected_nas_security_algorithms.value >> 4) & 7,
                eia: s.selected_nas_security_algorithms.value & 7,
                ksi: s.nas_key_set_identifier.value,
                replayed_ue_capabilities: v(&s.replayed_ue_security_capabilities.value),
                imeisv_request: s.imeisv_request.as_ref().is_some_and(|r| r.value & 7 == 1),
            }),
            X::SecurityModeComplete(s) => E::SecurityModeComplete(SecurityModeComplete {
                imeisv: s
                    .imeisv
                    .as_ref()
                    .map(|i| MobileIdentity::from_bytes(&i.value))
                    .transpose()?,
            }),
            X::SecurityModeReject(s) => E::SecurityModeReject {
                emm_cause: s.emm_cause.value,
            },
            X::IdentityRequest(i) => E::IdentityRequest(IdentityRequest {
                identity_type: i.identity_type.value & 7,
            }),
            X::IdentityResponse(i) => E::IdentityResponse(IdentityResponse {
                identity: MobileIdentity::from_bytes(&i.mobile_identity.value)?,
            }),
            X::DetachRequestUeOriginating(d) => E::DetachRequestUe(DetachRequestUe {
                detach_type: d.detach_type.value & 7,
                switch_off: d.detach_type.value & 8 != 0,
                ksi: d.nas_key_set_identifier.value,
                identity: MobileIdentity::from_bytes(&d.eps_mobile_identity.value)?,
            }),
            X::DetachRequestUeTerminated(d) => E::DetachRequestNetwork(DetachRequestNetwork {
                detach_type: d.detach_type.value & 7,
                emm_cause: d.emm_cause.as_ref().map(|c| c.value),
            }),
            X::DetachAccept(_) => E::DetachAccept,
            X::TrackingAreaUpdateRequest(t) => E::TauRequest(TauRequest {
                update_type: t.eps_update_type.value & 7,
                active_flag: t.eps_update_type.value & 8 != 0,
                ksi: t.nas_key_set_identifier.value,
                old_guti: MobileIdentity::from_bytes(&t.old_guti.value)?,
                ue_network_capability: t
                    .ue_network_capability
                    .as_ref()
                    .map(|c| UeNetworkCapability::from_bytes(&c.value))
                    .transpose()?,
                last_visited_tai: tai(&t.last_visited_registered_tai)?,
                eps_bearer_context_status: t
                    .eps_bearer_context_status
                    .as_ref()
                    .and_then(|s| status(&s.value)),
            }),
            X::TrackingAreaUpdateAccept(t) => E::TauAccept(TauAccept {
                update_result: t.eps_update_result.value,
                t3412: t.t3412_value.as_ref().map(|x| x.value),
                guti: t.guti.as_ref().map(guti).transpose()?,
                tai_list: t
                    .tai_list
                    .as_ref()
                    .map(|l| decode_tai_list(&l.value))
                    .transpose()?,
                eps_bearer_context_status: t
                    .eps_bearer_context_status
                    .as_ref()
                    .and_then(|s| status(&s.value)),
            }),
            X::TrackingAreaUpdateComplete(_) => E::TauComplete,
            X::TrackingAreaUpdateReject(t) => E::TauReject {
                emm_cause: t.emm_cause.value,
            },
            X::ServiceReject(s) => E::ServiceReject {
                emm_cause: s.emm_cause.value,
            },
            X::GutiReallocationCommand(g) => E::GutiReallocationCommand(GutiReallocationCommand {
                guti: guti(&g.guti)?,
                tai_list: g
                    .tai_list
                    .as_ref()
                    .map(|l| decode_tai_list(&l.value))
                    .transpose()?,
            }),
            X::GutiReallocationComplete(_) => E::GutiReallocationComplete,
            X::EmmInformation(i) => E::EmmInformation(EmmInformation {
                full_name: i.full_name_for_network.as_ref().map(|n| v(&n.value)),
                short_name: i.short_name_for_network.as_ref().map(|n| v(&n.value)),
                universal_time: i
                    .universal_time_and_local_time_zone
                    .as_ref()
                    .map(|n| v(&n.value)),
            }),
            X::EmmStatus(s) => E::EmmStatus {
                emm_cause: s.emm_cause.value,
            },
            other => {
                return Err(NasError::Unsupported(format!(
                    "EMM message {:?}",
                    other.message_type()
                )))
            }
        })
    }
}

impl EsmMessage {
    pub fn encode(&self) -> R<Vec<u8>> {
        use EsmBody as B;
        let pco = |p: &Option<Vec<u8>>| p.clone().map(x::NasProtocolConfigurationOptions::new);
        let m: x::NasEsmMessage = match &self.body {
            B::PdnConnectivityRequest(p) => {
                let mut r = x::NasPdnConnectivityRequest::new(
                    x::NasRequestType::new(p.request_type),
                    x::NasPdnType::new(p.pdn_type),
                );
                if p.esm_information_transfer {
                    r.esm_information_transfer_flag =
                        Some(x::NasEsmInformationTransferFlag::new(1));
                }
                r.access_point_name = p
                    .apn
                    .as_deref()
                    .map(encode_apn)
                    .transpose()?
                    .map(x::NasAccessPointName::new);
                r.protocol_configuration_options = pco(&p.pco);
                r.into()
            }
            B::PdnConnectivityReject { esm_cause } => {
                x::NasPdnConnectivityReject::new(x::NasEsmCause::new(*esm_cause)).into()
            }
            B::PdnDisconnectRequest { linked_ebi } => {
                x::NasPdnDisconnectRequest::new(x::NasLinkedEpsBearerIdentity::new(*linked_ebi))
                    .into()
            }
            B::PdnDisconnectReject { esm_cause } => {
                x::NasPdnDisconnectReject::new(x::NasEsmCause::new(*esm_cause)).into()
            }
            B::EsmInformationRequest => x::NasEsmInformationRequest::new().into(),
            B::EsmInformationResponse { apn, pco: p } => {
                let mut r = x::NasEsmInformationResponse::new();
                r.access_point_name = apn
                    .as_deref()
                    .map(encode_apn)
                    .transpose()?
                    .map(x::NasAccessPointName::new);
                r.protocol_configuration_options = pco(p);
                r.into()
            }
            B::ActivateDefaultBearerRequest(a) => {
                let mut r = x::NasActivateDefaultEpsBearerContextRequest::new(
                    x::NasEpsQualityOfService::new(a.qos.to_bytes()),
                    x::NasAccessPointName::new(encode_apn(&a.apn)?),
                    x::NasPdnAddress::new(a.pdn_address.to_bytes()),
                );
                r.apn_ambr = a
                    .apn_ambr
                    .map(|x_| x::NasApnAggregateMaximumBitRate::new(x_.to_bytes()));
                r.esm_cause = a.esm_cause.map(x::NasEsmCause::new);
                r.protocol_configuration_options = pco(&a.pco);
                r.into()
            }
            B::ActivateDefaultBearerAccept => {
                x::NasActivateDefaultEpsBearerContextAccept::new().into()
            }
            B::ActivateDefaultBearerReject { esm_cause } => {
                x::NasActivateDefaultEpsBearerContextReject::new(x::NasEsmCause::new(*esm_cause))
                    .into()
            }
            B::ActivateDedicatedBearerRequest(d) => {
                x::NasActivateDedicatedEpsBearerContextRequest::new(
                    x::NasLinkedEpsBearerIdentity::new(d.linked_ebi),
                    x::NasEpsQualityOfService::new(d.qos.to_bytes()),
                    x::NasTrafficFlowTemplate::new(d.tft.clone()),
                )
                .into()
            }
            B::ActivateDedicatedBearerAccept => {
                x::NasActivateDedicatedEpsBearerContextAccept::new().into()
            }
            B::ActivateDedicatedBearerReject { esm_cause } => {
                x::NasActivateDedicatedEpsBearerContextReject::new(x::NasEsmCause::new(*esm_cause))
                    .into()
            }
            B::ModifyBearerRequest(m) => {
                let mut r = x::NasModifyEpsBearerContextRequest::new();
                r.new_eps_qos = m.qos.map(|q| x::NasEpsQualityOfService::new(q.to_bytes()));
                r.tft = m.tft.clone().map(x::NasTrafficFlowTemplate::new);
                r.apn_ambr = m
                    .apn_ambr
                    .map(|a| x::NasApnAggregateMaximumBitRate::new(a.to_bytes()));
                r.into()
            }
            B::ModifyBearerAccept => x::NasModifyEpsBearerContextAccept::new().into(),
            B::ModifyBearerReject { esm_cause } => {
                x::NasModifyEpsBearerContextReject::new(x::NasEsmCause::new(*esm_cause)).into()
            }
            B::DeactivateBearerRequest { esm_cause } => {
                x::NasDeactivateEpsBearerContextRequest::new(x::NasEsmCause::new(*esm_cause)).into()
            }
            B::DeactivateBearerAccept => x::NasDeactivateEpsBearerContextAccept::new().into(),
            B::EsmStatus { esm_cause } => {
                x::NasEsmStatus::new(x::NasEsmCause::new(*esm_cause)).into()
            }
        };
        enc(x::NasEpsMessage::new_esm(m, self.ebi, self.pti))
    }

    fn from_x(h: &x::NasEsmHeader, m: &x::NasEsmMessage) -> R<Self> {
        use x::NasEsmMessage as X;
        use EsmBody as B;
        let pco = |p: &Option<x::NasProtocolConfigurationOptions>| p.as_ref().map(|p| v(&p.value));
        let body = match m {
            X::PdnConnectivityRequest(p) => B::PdnConnectivityRequest(PdnConnectivityRequest {
                request_type: p.request_type.value & 7,
                pdn_type: p.pdn_type.value & 7,
                esm_information_transfer: p
                    .esm_information_transfer_flag
                    .as_ref()
                    .is_some_and(|f| f.value & 1 == 1),
                apn: p
                    .access_point_name
                    .as_ref()
                    .map(|a| decode_apn(&a.value))
                    .transpose()?,
                pco: pco(&p.protocol_configuration_options),
            }),
            X::PdnConnectivityReject(p) => B::PdnConnectivityReject {
                esm_cause: p.esm_cause.value,
            },
            X::PdnDisconnectRequest(p) => B::PdnDisconnectRequest {
                linked_ebi: p.linked_eps_bearer_identity.value & 0xf,
            },
            X::PdnDisconnectReject(p) => B::PdnDisconnectReject {
                esm_cause: p.esm_cause.value,
            },
            X::EsmInformationRequest(_) => B::EsmInformationRequest,
            X::EsmInformationResponse(r) => B::EsmInformationResponse {
                apn: r
                    .access_point_name
                    .as_ref()
                    .map(|a| decode_apn(&a.value))
                    .transpose()?,
                pco: pco(&r.protocol_configuration_options),
            },
            X::ActivateDefaultEpsBearerContextRequest(a) => {
                B::ActivateDefaultBearerRequest(ActivateDefaultBearerRequest {
                    qos: EpsQos::from_bytes(&a.eps_qos.value)?,
                    apn: decode_apn(&a.access_point_name.value)?,
                    pdn_address: PdnAddress::from_bytes(&a.pdn_address.value)?,
                    apn_ambr: a
                        .apn_ambr
                        .as_ref()
                        .map(|x_| ApnAmbr::from_bytes(&x_.value))
                        .transpose()?,
                    esm_cause: a.esm_cause.as_ref().map(|c| c.value),
                    pco: pco(&a.protocol_configuration_options),
                })
            }
            X::ActivateDefaultEpsBearerContextAccept(_) => B::ActivateDefaultBearerAccept,
            X::ActivateDefaultEpsBearerContextReject(r) => B::ActivateDefaultBearerReject {
                esm_cause: r.esm_cause.value,
            },
            X::ActivateDedicatedEpsBearerContextRequest(d) => {
                B::ActivateDedicatedBearerRequest(ActivateDedicatedBearerRequest {
                    linked_ebi: d.linked_eps_bearer_identity.value & 0xf,
                    qos: EpsQos::from_bytes(&d.eps_qos.value)?,
                    tft: v(&d.tft.value),
                })
            }
            X::ActivateDedicatedEpsBearerContextAccept(_) => B::ActivateDedicatedBearerAccept,
            X::ActivateDedicatedEpsBearerContextReject(r) => B::ActivateDedicatedBearerReject {
                esm_cause: r.esm_cause.value,
            },
            X::ModifyEpsBearerContextRequest(m) => B::ModifyBearerRequest(ModifyBearerRequest {
                qos: m
                    .new_eps_qos
                    .as_ref()
                    .map(|q| EpsQos::from_bytes(&q.value))
                    .transpose()?,
                tft: m.tft.as_ref().map(|t| v(&t.value)),
                apn_ambr: m
                    .apn_ambr
                    .as_ref()
                    .map(|a| ApnAmbr::from_bytes(&a.value))
                    .transpose()?,
            }),
            X::ModifyEpsBearerContextAccept(_) => B::ModifyBearerAccept,
            X::ModifyEpsBearerContextReject(r) => B::ModifyBearerReject {
                esm_cause: r.esm_cause.value,
            },
            X::DeactivateEpsBearerContextRequest(r) => B::DeactivateBearerRequest {
                esm_cause: r.esm_cause.value,
            },
            X::DeactivateEpsBearerContextAccept(_) => B::DeactivateBearerAccept,
            X::EsmStatus(s) => B::EsmStatus {
                esm_cause: s.esm_cause.value,
            },
            other => {
                return Err(NasError::Unsupported(format!(
                    "ESM message {:?}",
                    other.message_type()
                )))
            }
        };
        Ok(EsmMessage {
            ebi: h.eps_bearer_identity,
            pti: h.procedure_transaction_identity,
            body,
        })
    }
}

impl NasMessage {
    /// Decode a plain NAS message (security header type 0). Detach Request is read as
    /// the direction its octets fit; use [`NasMessage::decode_dir`] when it is known.
    pub fn decode(bytes: &[u8]) -> R<Self> {
        Self::convert(crate::guard(|| x::NasEpsMessage::decode(bytes))?)
    }

    pub fn decode_dir(bytes: &[u8], dir: Direction) -> R<Self> {
        let d = match dir {
            Direction::Uplink => x::Direction::Uplink,
            Direction::Downlink => x::Direction::Downlink,
        };
        Self::convert(crate::guard(|| {
            x::NasEpsMessage::decode_with_direction(bytes, d)
        })?)
    }

    fn convert(m: x::NasEpsMessage) -> R<Self> {
        match &m {
            x::NasEpsMessage::Emm(_, e) => Ok(NasMessage::Emm(EmmMessage::from_x(e)?)),
            x::NasEpsMessage::Esm(h, e) => Ok(NasMessage::Esm(EsmMessage::from_x(h, e)?)),
            x::NasEpsMessage::SecurityProtected(..) | x::NasEpsMessage::ServiceRequest(_) => {
                Err(NasError::Protected)
            }
            _ => Err(NasError::Unsupported("NAS PDU kind".into())),
        }
    }

    pub fn encode(&self) -> R<Vec<u8>> {
        match self {
            NasMessage::Emm(m) => m.encode(),
            NasMessage::Esm(m) => m.encode(),
        }
    }
}

/// Convenience: the IPv4 address of a PDN address, if any.
pub fn pdn_ipv4(a: &PdnAddress) -> Option<Ipv4Addr> {
    match a {
        PdnAddress::Ipv4(v) | PdnAddress::Ipv4v6(_, v) => Some(*v),
        PdnAddress::Ipv6(_) => None,
    }
}
