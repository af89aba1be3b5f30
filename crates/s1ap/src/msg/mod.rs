//! One plain struct per S1AP message the MME and the eNB exchange, with `to_pdu()` /
//! `encode()` builders and `TryFrom<&S1apPdu>` extractors, and [`S1apMessage`] over all
//! of them.
//!
//! Builders emit IEs in the order and with the criticalities of TS 36.413 so that the
//! output is canonical; extractors take IEs by id wherever they are and ignore IEs we
//! do not model (TS 36.413 §10: unknown `ignore` IEs are skipped).

use crate::types::*;
use crate::{enums, Direction, S1apError, S1apPdu};
use oxirush_s1ap::s1ap as raw;
use oxirush_s1ap::{build_s1ap_ie, extract_s1ap_ies, Decode};
use std::net::Ipv4Addr;

/// Procedure codes (TS 36.413 §9.3.7).
pub mod proc_code {
    pub const HANDOVER_PREPARATION: u8 = 0;
    pub const HANDOVER_RESOURCE_ALLOCATION: u8 = 1;
    pub const HANDOVER_NOTIFICATION: u8 = 2;
    pub const PATH_SWITCH_REQUEST: u8 = 3;
    pub const HANDOVER_CANCEL: u8 = 4;
    pub const E_RAB_SETUP: u8 = 5;
    pub const E_RAB_MODIFY: u8 = 6;
    pub const E_RAB_RELEASE: u8 = 7;
    pub const INITIAL_CONTEXT_SETUP: u8 = 9;
    pub const PAGING: u8 = 10;
    pub const DOWNLINK_NAS_TRANSPORT: u8 = 11;
    pub const INITIAL_UE_MESSAGE: u8 = 12;
    pub const UPLINK_NAS_TRANSPORT: u8 = 13;
    pub const RESET: u8 = 14;
    pub const ERROR_INDICATION: u8 = 15;
    pub const NAS_NON_DELIVERY_INDICATION: u8 = 16;
    pub const S1_SETUP: u8 = 17;
    pub const ENB_CONFIGURATION_UPDATE: u8 = 29;
    pub const UE_CONTEXT_RELEASE_REQUEST: u8 = 18;
    pub const UE_CONTEXT_MODIFICATION: u8 = 21;
    pub const UE_CONTEXT_RELEASE: u8 = 23;
    pub const ENB_STATUS_TRANSFER: u8 = 24;
    pub const MME_STATUS_TRANSFER: u8 = 25;
    pub const OVERLOAD_START: u8 = 34;
    pub const OVERLOAD_STOP: u8 = 35;
}

type R<T> = Result<T, S1apError>;
type Ies = Vec<raw::ProtocolIEField<'static>>;

fn pdu_of<'m, M>(m: &M) -> R<S1apPdu>
where
    M: oxirush_s1ap::Message<'m, Protocol = oxirush_s1ap::S1ap>,
{
    S1apPdu::of_message(m, M::CRITICALITY).map_err(S1apError::from)
}

macro_rules! pdu {
    ($msg:ident, $ies:expr) => {
        pdu_of(&raw::$msg::new(raw::ProtocolIEContainer($ies)))
    };
}

/// Checks the PDU holds `name` before reading IEs, so a mismatch names both messages.
fn expect(pdu: &S1apPdu, dir: Direction, code: u8, name: &'static str) -> R<()> {
    if crate::direction(pdu) == dir && pdu.procedure_code() == code {
        Ok(())
    } else {
        Err(S1apError::WrongMessage {
            expected: name,
            got: format!(
                "{} ({:?}, procedure {})",
                pdu.procedure_name(),
                crate::direction(pdu),
                pdu.procedure_code()
            ),
        })
    }
}

/// Decode every item of a list of single containers.
fn list<'a, T: Decode<'a>>(fields: &'a [raw::ProtocolIEField<'a>], ie: &'static str) -> R<Vec<T>> {
    fields
        .iter()
        .map(|f| {
            raw::decode_open_type::<T>(&f.value).map_err(|e| S1apError::InvalidIe {
                ie,
                reason: e.to_string(),
            })
        })
        .collect()
}

/// The raw octets of an IE's value (for containers we relay without looking inside).
fn raw_ie(pdu: &S1apPdu, id: u16) -> R<Option<Vec<u8>>> {
    let ies = pdu.protocol_ies()?;
    Ok(ies
        .0
        .iter()
        .find(|f| f.id.0 == id)
        .map(|f| f.value.to_vec()))
}

fn raw_field(id: u16, crit: raw::Criticality, value: Vec<u8>) -> raw::ProtocolIEField<'static> {
    raw::ProtocolIEField::new(
        raw::ProtocolIEID(id),
        crit,
        oxirush_s1ap::Octets::from(value),
    )
}

fn tunnel(
    addr: &raw::TransportLayerAddress<'_>,
    teid: &raw::GTPTEID,
    ie: &'static str,
) -> R<(Ipv4Addr, u32)> {
    Ok((addr_from_raw(addr, ie)?, u32::from_be_bytes(teid.0)))
}

fn opt_tunnel(
    addr: &Option<raw::TransportLayerAddress<'_>>,
    teid: &Option<raw::GTPTEID>,
    ie: &'static str,
) -> R<Option<(Ipv4Addr, u32)>> {
    match (addr, teid) {
        (Some(a), Some(t)) => Ok(Some(tunnel(a, t, ie)?)),
        _ => Ok(None),
    }
}

fn erab_cause_items(items: &[ERabCause]) -> R<Ies> {
    items
        .iter()
        .map(|e| {
            let item = raw::ERABItem::new(raw::ERABID(e.id.into()), e.cause.to_raw()?, None);
            Ok(build_s1ap_ie!(IGNORE E_RABItem(item))?)
        })
        .collect()
}

fn erab_cause_list(l: &raw::ERABList<'_>) -> R<Vec<ERabCause>> {
    list::<raw::ERABItem>(&l.0, "E-RABItem")?
        .iter()
        .map(|i| {
            Ok(ERabCause {
                id: erab_id(i.e_rab_id.0, "E-RABItem")?,
                cause: Cause::from_raw(&i.cause)?,
            })
        })
        .collect()
}

fn rrc_cause_raw(v: u8) -> R<raw::RRCEstablishmentCause> {
    enums::rrc_establishment_cause_from(v)
        .ok_or_else(|| S1apError::Invalid(format!("no RRC establishment cause {v}")))
}

fn handover_type_raw(v: u8) -> R<raw::HandoverType> {
    enums::handover_type_from(v).ok_or_else(|| S1apError::Invalid(format!("no handover type {v}")))
}

macro_rules! message {
    ($ty:ident, $dir:ident, $code:expr, $name:literal) => {
        message!(@common $ty, $dir, $code, $name);
        impl $ty {
            /// Build and encode in one step.
            pub fn encode(&self) -> R<Vec<u8>> {
                crate::encode(&self.to_pdu()?)
            }
        }
    };
    // A message with a hand-written encoder (`encode_fast`, see `fast`).
    ($ty:ident, $dir:ident, $code:expr, $name:literal, fast) => {
        message!(@common $ty, $dir, $code, $name);
        impl $ty {
            /// Encode: the hand-written path where it applies, else the generic one.
            pub fn encode(&self) -> R<Vec<u8>> {
                match self.encode_fast() {
                    Some(b) => Ok(b),
                    None => crate::encode(&self.to_pdu()?),
                }
            }
        }
    };
    // A message with a hand-written decoder (`decode_fast`, see `fast`).
    ($ty:ident, $dir:ident, $code:expr, $name:literal, fast_decode) => {
        message!(@consts $ty, $dir, $code, $name);
        impl $ty {
            /// Build and encode in one step.
            pub fn encode(&self) -> R<Vec<u8>> {
                crate::encode(&self.to_pdu()?)
            }
            /// Decode octets as this message: the hand-written path for the
            /// canonical form, else the generic decoder.
            pub fn decode(bytes: &[u8]) -> R<Self> {
                match Self::decode_fast(bytes) {
                    Some(m) => Ok(m),
                    None => Self::try_from(&crate::decode(bytes)?),
                }
            }
        }
    };
    (@common $ty:ident, $dir:ident, $code:expr, $name:literal) => {
        message!(@consts $ty, $dir, $code, $name);
        impl $ty {
            /// Decode octets as this message.
            pub fn decode(bytes: &[u8]) -> R<Self> {
                Self::try_from(&crate::decode(bytes)?)
            }
        }
    };
    (@consts $ty:ident, $dir:ident, $code:expr, $name:literal) => {
        impl $ty {
            pub const PROCEDURE_CODE: u8 = $code;
            pub const DIRECTION: Direction = Direction::$dir;
            pub const NAME: &'static str = $name;
        }
        impl TryFrom<&S1apPdu> for $ty {
            type Error = S1apError;
            fn try_from(pdu: &S1apPdu) -> R<Self> {
                expect(pdu, Direction::$dir, $code, $name)?;
                Self::extract(pdu)
            }
        }
    };
}

/// Messages of the form { MME-UE-S1AP-ID, eNB-UE-S1AP-ID, Cause }.
macro_rules! ids_cause_message {
    ($ty:ident, $raw:ident, $dir:ident, $code:expr, $name:literal) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $ty {
            pub mme_ue_id: u32,
            pub enb_ue_id: u32,
            pub cause: Cause,
        }
        message!($ty, $dir, $code, $name);
        impl $ty {
            pub fn to_pdu(&self) -> R<S1apPdu> {
                pdu!($raw, vec![
                    build_s1ap_ie!($raw, MME_UE_S1AP_ID(self.mme_ue_id))?,
                    build_s1ap_ie!($raw, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                    build_s1ap_ie!($raw, Cause(self.cause.to_raw()?))?,
                ])
            }
            pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
                extract_s1ap_ies!(pdu, $raw,
                    req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
                    req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
                    req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
                );
                Ok($ty { mme_ue_id, enb_ue_id, cause })
            }
        }
    };
}

/// Messages of the form { MME-UE-S1AP-ID, eNB-UE-S1AP-ID }.
macro_rules! ids_message {
    ($ty:ident, $raw:ident, $dir:ident, $code:expr, $name:literal) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $ty {
            pub mme_ue_id: u32,
            pub enb_ue_id: u32,
        }
        message!($ty, $dir, $code, $name);
        impl $ty {
            pub fn to_pdu(&self) -> R<S1apPdu> {
                pdu!($raw, vec![
                    build_s1ap_ie!($raw, MME_UE_S1AP_ID(self.mme_ue_id))?,
                    build_s1ap_ie!($raw, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                ])
            }
            pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
                extract_s1ap_ies!(pdu, $raw,
                    req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
                    req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
                );
                Ok($ty { mme_ue_id, enb_ue_id })
            }
        }
    };
}

mod context;
mod erab;
mod handover;
mod management;
mod nas_transport;
mod paging;

pub use context::*;
pub use erab::*;
pub use handover::*;
pub use management::*;
pub use nas_transport::*;
pub use paging::*;

// ------------------------------------------------------------------ the enum

macro_rules! s1ap_message_enum {
    ($($v:ident),+ $(,)?) => {
        /// Any S1AP message, typed.
        #[derive(Debug, Clone, PartialEq, Eq)]
        #[allow(clippy::large_enum_variant)]
        pub enum S1apMessage {
            $($v($v),)+
            /// A valid PDU of a procedure/direction we do not model.
            Other { procedure_code: u8, direction: Direction, pdu: Box<S1apPdu> },
        }
        impl S1apMessage {
            /// Typed view of a PDU.
            pub fn from_pdu(pdu: &S1apPdu) -> R<Self> {
                let key = (crate::direction(pdu), pdu.procedure_code());
                $(
                    if key == ($v::DIRECTION, $v::PROCEDURE_CODE) {
                        return Ok(S1apMessage::$v($v::extract(pdu)?));
                    }
                )+
                Ok(S1apMessage::Other { procedure_code: key.1, direction: key.0, pdu: Box::new(pdu.clone()) })
            }
            pub fn to_pdu(&self) -> R<S1apPdu> {
                match self {
                    $(S1apMessage::$v(m) => m.to_pdu(),)+
                    S1apMessage::Other { pdu, .. } => Ok((**pdu).clone()),
                }
            }
            pub fn procedure_code(&self) -> u8 {
                match self {
                    $(S1apMessage::$v(_) => $v::PROCEDURE_CODE,)+
                    S1apMessage::Other { procedure_code, .. } => *procedure_code,
                }
            }
            pub fn direction(&self) -> Direction {
                match self {
                    $(S1apMessage::$v(_) => $v::DIRECTION,)+
                    S1apMessage::Other { direction, .. } => *direction,
                }
            }
            /// ASN.1 message name.
            pub fn name(&self) -> &'static str {
                match self {
                    $(S1apMessage::$v(_) => $v::NAME,)+
                    S1apMessage::Other { pdu, .. } => pdu.procedure_name(),
                }
            }
        }
        $(impl From<$v> for S1apMessage { fn from(m: $v) -> Self { S1apMessage::$v(m) } })+
    };
}

s1ap_message_enum!(
    S1SetupRequest,
    S1SetupResponse,
    S1SetupFailure,
    EnbConfigurationUpdate,
    EnbConfigurationUpdateAcknowledge,
    EnbConfigurationUpdateFailure,
    InitialUeMessage,
    UplinkNasTransport,
    DownlinkNasTransport,
    NasNonDeliveryIndication,
    InitialContextSetupRequest,
    InitialContextSetupResponse,
    InitialContextSetupFailure,
    UeContextReleaseRequest,
    UeContextReleaseCommand,
    UeContextReleaseComplete,
    UeContextModificationRequest,
    UeContextModificationResponse,
    UeContextModificationFailure,
    Paging,
    ERabSetupRequest,
    ERabSetupResponse,
    ERabModifyRequest,
    ERabModifyResponse,
    ERabReleaseCommand,
    ERabReleaseResponse,
    PathSwitchRequest,
    PathSwitchRequestAcknowledge,
    PathSwitchRequestFailure,
    HandoverRequired,
    HandoverCommand,
    HandoverPreparationFailure,
    HandoverRequest,
    HandoverRequestAcknowledge,
    HandoverFailure,
    HandoverNotify,
    HandoverCancel,
    HandoverCancelAcknowledge,
    EnbStatusTransfer,
    MmeStatusTransfer,
    ErrorIndication,
    Reset,
    ResetAcknowledge,
    OverloadStart,
    OverloadStop,
);

impl S1apMessage {
    /// Decode octets into a typed message.
    pub fn decode(bytes: &[u8]) -> R<Self> {
        if let Some(m) = crate::fast::uplink_nas_transport(bytes) {
            return Ok(S1apMessage::UplinkNasTransport(m));
        }
        if let Some(m) = crate::fast::initial_ue_message(bytes) {
            return Ok(S1apMessage::InitialUeMessage(m));
        }
        if let Some(m) = crate::fast::initial_context_setup_response(bytes) {
            return Ok(S1apMessage::InitialContextSetupResponse(m));
        }
        Self::from_pdu(&crate::decode(bytes)?)
    }

    pub fn encode(&self) -> R<Vec<u8>> {
        match self {
            S1apMessage::DownlinkNasTransport(m) => return m.encode(),
            S1apMessage::InitialContextSetupRequest(m) => return m.encode(),
            _ => {}
        }
        crate::encode(&self.to_pdu()?)
    }

    /// MME UE S1AP ID, where the message carries one.
    pub fn mme_ue_id(&self) -> Option<u32> {
        use S1apMessage as M;
        match self {
            M::UplinkNasTransport(m) => Some(m.mme_ue_id),
            M::DownlinkNasTransport(m) => Some(m.mme_ue_id),
            M::NasNonDeliveryIndication(m) => Some(m.mme_ue_id),
            M::InitialContextSetupRequest(m) => Some(m.mme_ue_id),
            M::InitialContextSetupResponse(m) => Some(m.mme_ue_id),
            M::InitialContextSetupFailure(m) => Some(m.mme_ue_id),
            M::UeContextReleaseRequest(m) => Some(m.mme_ue_id),
            M::UeContextReleaseCommand(m) => Some(match m.ids {
                UeS1apIds::Pair { mme_ue_id, .. } => mme_ue_id,
                UeS1apIds::MmeOnly(x) => x,
            }),
            M::UeContextReleaseComplete(m) => Some(m.mme_ue_id),
            M::UeContextModificationRequest(m) => Some(m.mme_ue_id),
            M::UeContextModificationResponse(m) => Some(m.mme_ue_id),
            M::UeContextModificationFailure(m) => Some(m.mme_ue_id),
            M::ERabSetupRequest(m) => Some(m.mme_ue_id),
            M::ERabSetupResponse(m) => Some(m.mme_ue_id),
            M::ERabModifyRequest(m) => Some(m.mme_ue_id),
            M::ERabModifyResponse(m) => Some(m.mme_ue_id),
            M::ERabReleaseCommand(m) => Some(m.mme_ue_id),
            M::ERabReleaseResponse(m) => Some(m.mme_ue_id),
            // The source MME UE S1AP ID is the MME's handle for the UE.
            M::PathSwitchRequest(m) => Some(m.source_mme_ue_id),
            M::PathSwitchRequestAcknowledge(m) => Some(m.mme_ue_id),
            M::PathSwitchRequestFailure(m) => Some(m.mme_ue_id),
            M::HandoverRequired(m) => Some(m.mme_ue_id),
            M::HandoverCommand(m) => Some(m.mme_ue_id),
            M::HandoverPreparationFailure(m) => Some(m.mme_ue_id),
            M::HandoverRequest(m) => Some(m.mme_ue_id),
            M::HandoverRequestAcknowledge(m) => Some(m.mme_ue_id),
            M::HandoverFailure(m) => Some(m.mme_ue_id),
            M::HandoverNotify(m) => Some(m.mme_ue_id),
            M::HandoverCancel(m) => Some(m.mme_ue_id),
            M::HandoverCancelAcknowledge(m) => Some(m.mme_ue_id),
            M::EnbStatusTransfer(m) => Some(m.mme_ue_id),
            M::MmeStatusTransfer(m) => Some(m.mme_ue_id),
            M::ErrorIndication(m) => m.mme_ue_id,
            M::Other { pdu, .. } => id_in(pdu, 0),
            M::S1SetupRequest(_)
            | M::S1SetupResponse(_)
            | M::S1SetupFailure(_)
            | M::EnbConfigurationUpdate(_)
            | M::EnbConfigurationUpdateAcknowledge(_)
            | M::EnbConfigurationUpdateFailure(_)
            | M::InitialUeMessage(_)
            | M::Paging(_)
            | M::Reset(_)
            | M::ResetAcknowledge(_)
            | M::OverloadStart(_)
            | M::OverloadStop(_) => None,
        }
    }

    /// eNB UE S1AP ID, where the message carries one.
    pub fn enb_ue_id(&self) -> Option<u32> {
        use S1apMessage as M;
        match self {
            M::InitialUeMessage(m) => Some(m.enb_ue_id),
            M::UplinkNasTransport(m) => Some(m.enb_ue_id),
            M::DownlinkNasTransport(m) => Some(m.enb_ue_id),
            M::NasNonDeliveryIndication(m) => Some(m.enb_ue_id),
            M::InitialContextSetupRequest(m) => Some(m.enb_ue_id),
            M::InitialContextSetupResponse(m) => Some(m.enb_ue_id),
            M::InitialContextSetupFailure(m) => Some(m.enb_ue_id),
            M::UeContextReleaseRequest(m) => Some(m.enb_ue_id),
            M::UeContextReleaseCommand(m) => match m.ids {
                UeS1apIds::Pair { enb_ue_id, .. } => Some(enb_ue_id),
                UeS1apIds::MmeOnly(_) => None,
            },
            M::UeContextReleaseComplete(m) => Some(m.enb_ue_id),
            M::UeContextModificationRequest(m) => Some(m.enb_ue_id),
            M::UeContextModificationResponse(m) => Some(m.enb_ue_id),
            M::UeContextModificationFailure(m) => Some(m.enb_ue_id),
            M::ERabSetupRequest(m) => Some(m.enb_ue_id),
            M::ERabSetupResponse(m) => Some(m.enb_ue_id),
            M::ERabModifyRequest(m) => Some(m.enb_ue_id),
            M::ERabModifyResponse(m) => Some(m.enb_ue_id),
            M::ERabReleaseCommand(m) => Some(m.enb_ue_id),
            M::ERabReleaseResponse(m) => Some(m.enb_ue_id),
            M::PathSwitchRequest(m) => Some(m.enb_ue_id),
            M::PathSwitchRequestAcknowledge(m) => Some(m.enb_ue_id),
            M::PathSwitchRequestFailure(m) => Some(m.enb_ue_id),
            M::HandoverRequired(m) => Some(m.enb_ue_id),
            M::HandoverCommand(m) => Some(m.enb_ue_id),
            M::HandoverPreparationFailure(m) => Some(m.enb_ue_id),
            M::HandoverRequestAcknowledge(m) => Some(m.enb_ue_id),
            M::HandoverNotify(m) => Some(m.enb_ue_id),
            M::HandoverCancel(m) => Some(m.enb_ue_id),
            M::HandoverCancelAcknowledge(m) => Some(m.enb_ue_id),
            M::EnbStatusTransfer(m) => Some(m.enb_ue_id),
            M::MmeStatusTransfer(m) => Some(m.enb_ue_id),
            M::ErrorIndication(m) => m.enb_ue_id,
            M::Other { pdu, .. } => id_in(pdu, 8),
            M::S1SetupRequest(_)
            | M::S1SetupResponse(_)
            | M::S1SetupFailure(_)
            | M::EnbConfigurationUpdate(_)
            | M::EnbConfigurationUpdateAcknowledge(_)
            | M::EnbConfigurationUpdateFailure(_)
            | M::Paging(_)
            | M::HandoverRequest(_)
            | M::HandoverFailure(_)
            | M::Reset(_)
            | M::ResetAcknowledge(_)
            | M::OverloadStart(_)
            | M::OverloadStop(_) => None,
        }
    }

    /// Whether the message belongs to a UE-associated signalling connection (TS 36.412
    /// §7: such messages go on a UE stream; non-UE-associated ones on stream 0).
    pub fn is_ue_associated(&self) -> bool {
        match self {
            // Handover Request/Failure carry only the MME UE S1AP ID but are UE-associated.
            S1apMessage::HandoverRequest(_) | S1apMessage::HandoverFailure(_) => true,
            S1apMessage::Reset(_) | S1apMessage::ResetAcknowledge(_) | S1apMessage::Paging(_) => {
                false
            }
            _ => self.mme_ue_id().is_some() || self.enb_ue_id().is_some(),
        }
    }
}

/// A UE S1AP ID (IE 0 = MME, 8 = eNB) in any message.
fn id_in(pdu: &S1apPdu, ie: u16) -> Option<u32> {
    let ies = pdu.protocol_ies().ok()?;
    let f = ies.0.iter().find(|f| f.id.0 == ie)?;
    match ie {
        0 => raw::decode_open_type::<raw::MMEUES1APID>(&f.value)
            .ok()
            .map(|v| v.0),
        _ => raw::decode_open_type::<raw::ENBUES1APID>(&f.value)
            .ok()
            .map(|v| v.0),
    }
}
