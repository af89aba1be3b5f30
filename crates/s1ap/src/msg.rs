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

// ------------------------------------------------------------------ S1 Setup

/// Supported TAs (TS 36.413 §9.2.3.7) of an S1 Setup Request or eNB Configuration
/// Update.
fn supported_tas_raw(tas: &[SupportedTa]) -> raw::SupportedTAs {
    raw::SupportedTAs(
        tas.iter()
            .map(|t| {
                raw::SupportedTAsItem::new(
                    raw::TAC(t.tac.to_be_bytes()),
                    raw::BPLMNs(t.plmns.iter().map(|p| p.to_raw()).collect()),
                    None,
                )
            })
            .collect(),
    )
}

fn supported_tas_of(t: &raw::SupportedTAs) -> Vec<SupportedTa> {
    t.0.iter()
        .map(|i| SupportedTa {
            tac: u16::from_be_bytes(i.tac.0),
            plmns: i.broadcast_plmns.0.iter().map(Plmn::from_raw).collect(),
        })
        .collect()
}

/// Default paging DRX (TS 36.413 §9.2.1.16): value is the cycle, 32/64/128/256.
fn drx_raw(v: u16) -> R<raw::PagingDRX> {
    Ok(match v {
        32 => raw::PagingDRX::v32,
        64 => raw::PagingDRX::v64,
        128 => raw::PagingDRX::v128,
        256 => raw::PagingDRX::v256,
        _ => {
            return Err(S1apError::Invalid(format!(
                "paging DRX {v} not in 32/64/128/256"
            )))
        }
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S1SetupRequest {
    pub global_enb_id: GlobalEnbId,
    pub enb_name: Option<String>,
    pub supported_tas: Vec<SupportedTa>,
    /// Default paging DRX cycle in radio frames: 32, 64, 128 or 256. Mandatory in
    /// TS 36.413; `None` only when a non-conforming peer left it out (the Open5GS test
    /// eNB does), so the MME can decide whether to reject.
    pub paging_drx: Option<u16>,
}
message!(
    S1SetupRequest,
    Initiating,
    proc_code::S1_SETUP,
    "S1SetupRequest"
);
impl S1SetupRequest {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![build_s1ap_ie!(
            S1SetupRequest,
            Global_ENB_ID(self.global_enb_id.to_raw()?)
        )?];
        if let Some(n) = &self.enb_name {
            ies.push(build_s1ap_ie!(
                S1SetupRequest,
                eNBname(raw::ENBname(n.clone().into()))
            )?);
        }
        ies.push(build_s1ap_ie!(
            S1SetupRequest,
            SupportedTAs(supported_tas_raw(&self.supported_tas))
        )?);
        if let Some(d) = self.paging_drx {
            ies.push(build_s1ap_ie!(
                S1SetupRequest,
                DefaultPagingDRX(drx_raw(d)?)
            )?);
        }
        pdu!(S1SetupRequest, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, S1SetupRequest,
            req gid: GlobalEnbId = Global_ENB_ID(g) => GlobalEnbId::from_raw(&g)?,
            opt enb_name: String = eNBname(n) => n.0.into_owned(),
            req tas: Vec<SupportedTa> = SupportedTAs(t) => supported_tas_of(&t),
            opt drx: u16 = DefaultPagingDRX(d) => 32 << enums::pagingdrx_to(d),
        );
        Ok(S1SetupRequest {
            global_enb_id: gid,
            enb_name,
            supported_tas: tas,
            paging_drx: drx,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S1SetupResponse {
    pub mme_name: Option<String>,
    pub served_gummeis: Vec<ServedGummei>,
    pub relative_capacity: u8,
}
message!(
    S1SetupResponse,
    Successful,
    proc_code::S1_SETUP,
    "S1SetupResponse"
);
impl S1SetupResponse {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![];
        if let Some(n) = &self.mme_name {
            ies.push(build_s1ap_ie!(
                S1SetupResponse,
                MMEname(raw::MMEname(n.clone().into()))
            )?);
        }
        let g = self
            .served_gummeis
            .iter()
            .map(|s| {
                raw::ServedGUMMEIsItem::new(
                    raw::ServedPLMNs(s.plmns.iter().map(|p| p.to_raw()).collect()),
                    raw::ServedGroupIDs(
                        s.group_ids
                            .iter()
                            .map(|g| raw::MMEGroupID(g.to_be_bytes()))
                            .collect(),
                    ),
                    raw::ServedMMECs(s.codes.iter().map(|c| raw::MMECode([*c])).collect()),
                    None,
                )
            })
            .collect();
        ies.push(build_s1ap_ie!(
            S1SetupResponse,
            ServedGUMMEIs(raw::ServedGUMMEIs(g))
        )?);
        ies.push(build_s1ap_ie!(
            S1SetupResponse,
            RelativeMMECapacity(raw::RelativeMMECapacity(self.relative_capacity))
        )?);
        pdu!(S1SetupResponse, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, S1SetupResponse,
            opt mme_name: String = MMEname(n) => n.0.into_owned(),
            req g: Vec<ServedGummei> = ServedGUMMEIs(g) => g.0.iter().map(|s| ServedGummei {
                plmns: s.served_plmns.0.iter().map(Plmn::from_raw).collect(),
                group_ids: s.served_group_ids.0.iter().map(|g| u16::from_be_bytes(g.0)).collect(),
                codes: s.served_mmecs.0.iter().map(|c| c.0[0]).collect(),
            }).collect(),
            req cap: u8 = RelativeMMECapacity(c) => c.0,
        );
        Ok(S1SetupResponse {
            mme_name,
            served_gummeis: g,
            relative_capacity: cap,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S1SetupFailure {
    pub cause: Cause,
    /// TimeToWait enumeration index (0 = 1 s, 1 = 2 s, 2 = 5 s, 3 = 10 s, 4 = 20 s, 5 = 60 s).
    pub time_to_wait: Option<u8>,
}
message!(
    S1SetupFailure,
    Unsuccessful,
    proc_code::S1_SETUP,
    "S1SetupFailure"
);
impl S1SetupFailure {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![build_s1ap_ie!(S1SetupFailure, Cause(self.cause.to_raw()?))?];
        if let Some(t) = self.time_to_wait {
            let t = enums::time_to_wait_from(t)
                .ok_or_else(|| S1apError::Invalid(format!("no TimeToWait {t}")))?;
            ies.push(build_s1ap_ie!(S1SetupFailure, TimeToWait(t))?);
        }
        pdu!(S1SetupFailure, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, S1SetupFailure,
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
            opt ttw: u8 = TimeToWait(t) => enums::time_to_wait_to(t),
        );
        Ok(S1SetupFailure {
            cause,
            time_to_wait: ttw,
        })
    }
}

// ------------------------------------------------------------------ eNB Configuration Update

/// eNB Configuration Update (TS 36.413 §8.7.4): the eNB changes its name, supported
/// TAs or paging DRX; what it leaves out stays as it was.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnbConfigurationUpdate {
    pub enb_name: Option<String>,
    pub supported_tas: Option<Vec<SupportedTa>>,
    pub paging_drx: Option<u16>,
}
message!(
    EnbConfigurationUpdate,
    Initiating,
    proc_code::ENB_CONFIGURATION_UPDATE,
    "ENBConfigurationUpdate"
);
impl EnbConfigurationUpdate {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![];
        if let Some(n) = &self.enb_name {
            ies.push(build_s1ap_ie!(
                ENBConfigurationUpdate,
                eNBname(raw::ENBname(n.clone().into()))
            )?);
        }
        if let Some(tas) = &self.supported_tas {
            ies.push(build_s1ap_ie!(
                ENBConfigurationUpdate,
                SupportedTAs(supported_tas_raw(tas))
            )?);
        }
        if let Some(d) = self.paging_drx {
            ies.push(build_s1ap_ie!(
                ENBConfigurationUpdate,
                DefaultPagingDRX(drx_raw(d)?)
            )?);
        }
        pdu!(ENBConfigurationUpdate, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ENBConfigurationUpdate,
            opt enb_name: String = eNBname(n) => n.0.into_owned(),
            opt tas: Vec<SupportedTa> = SupportedTAs(t) => supported_tas_of(&t),
            opt drx: u16 = DefaultPagingDRX(d) => 32 << enums::pagingdrx_to(d),
        );
        Ok(EnbConfigurationUpdate {
            enb_name,
            supported_tas: tas,
            paging_drx: drx,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EnbConfigurationUpdateAcknowledge {}
message!(
    EnbConfigurationUpdateAcknowledge,
    Successful,
    proc_code::ENB_CONFIGURATION_UPDATE,
    "ENBConfigurationUpdateAcknowledge"
);
impl EnbConfigurationUpdateAcknowledge {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(ENBConfigurationUpdateAcknowledge, vec![])
    }
    fn extract(_pdu: &S1apPdu) -> R<Self> {
        Ok(EnbConfigurationUpdateAcknowledge {})
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnbConfigurationUpdateFailure {
    pub cause: Cause,
    /// TimeToWait enumeration index, as in [`S1SetupFailure`].
    pub time_to_wait: Option<u8>,
}
message!(
    EnbConfigurationUpdateFailure,
    Unsuccessful,
    proc_code::ENB_CONFIGURATION_UPDATE,
    "ENBConfigurationUpdateFailure"
);
impl EnbConfigurationUpdateFailure {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![build_s1ap_ie!(
            ENBConfigurationUpdateFailure,
            Cause(self.cause.to_raw()?)
        )?];
        if let Some(t) = self.time_to_wait {
            let t = enums::time_to_wait_from(t)
                .ok_or_else(|| S1apError::Invalid(format!("no TimeToWait {t}")))?;
            ies.push(build_s1ap_ie!(
                ENBConfigurationUpdateFailure,
                TimeToWait(t)
            )?);
        }
        pdu!(ENBConfigurationUpdateFailure, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ENBConfigurationUpdateFailure,
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
            opt ttw: u8 = TimeToWait(t) => enums::time_to_wait_to(t),
        );
        Ok(EnbConfigurationUpdateFailure {
            cause,
            time_to_wait: ttw,
        })
    }
}

// ------------------------------------------------------------------ NAS transport

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialUeMessage {
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
    pub tai: Tai,
    pub ecgi: Ecgi,
    /// RRC establishment cause index (0 emergency, 1 highPriorityAccess, 2 mt-Access,
    /// 3 mo-Signalling, 4 mo-Data, 5 delay-TolerantAccess, 6 mo-VoiceCall, ...).
    pub rrc_cause: u8,
    pub s_tmsi: Option<STmsi>,
    pub gummei: Option<Gummei>,
}
message!(
    InitialUeMessage,
    Initiating,
    proc_code::INITIAL_UE_MESSAGE,
    "InitialUEMessage",
    fast_decode
);
impl InitialUeMessage {
    /// The hand-written decoder (see `fast`); `None` where it defers.
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        crate::fast::initial_ue_message(bytes)
    }
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(InitialUEMessage, eNB_UE_S1AP_ID(self.enb_ue_id))?,
            build_s1ap_ie!(
                InitialUEMessage,
                NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
            )?,
            build_s1ap_ie!(InitialUEMessage, TAI(self.tai.to_raw()))?,
            build_s1ap_ie!(InitialUEMessage, EUTRAN_CGI(self.ecgi.to_raw()?))?,
            build_s1ap_ie!(
                InitialUEMessage,
                RRC_Establishment_Cause(rrc_cause_raw(self.rrc_cause)?)
            )?,
        ];
        if let Some(s) = self.s_tmsi {
            ies.push(build_s1ap_ie!(InitialUEMessage, S_TMSI(s.to_raw()))?);
        }
        if let Some(g) = self.gummei {
            ies.push(build_s1ap_ie!(InitialUEMessage, GUMMEI_ID(g.to_raw()))?);
        }
        pdu!(InitialUEMessage, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, InitialUEMessage,
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
            req tai: Tai = TAI(t) => Tai::from_raw(&t),
            req ecgi: Ecgi = EUTRAN_CGI(e) => Ecgi::from_raw(&e),
            req rrc_cause: u8 = RRC_Establishment_Cause(c) => enums::rrc_establishment_cause_to(c),
            opt s_tmsi: STmsi = S_TMSI(s) => STmsi::from_raw(&s),
            opt gummei: Gummei = GUMMEI_ID(g) => Gummei::from_raw(&g),
        );
        Ok(InitialUeMessage {
            enb_ue_id,
            nas_pdu,
            tai,
            ecgi,
            rrc_cause,
            s_tmsi,
            gummei,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UplinkNasTransport {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
    pub ecgi: Ecgi,
    pub tai: Tai,
}
message!(
    UplinkNasTransport,
    Initiating,
    proc_code::UPLINK_NAS_TRANSPORT,
    "UplinkNASTransport",
    fast_decode
);
impl UplinkNasTransport {
    /// The hand-written decoder (see `fast`); `None` where it defers.
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        crate::fast::uplink_nas_transport(bytes)
    }
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            UplinkNASTransport,
            vec![
                build_s1ap_ie!(UplinkNASTransport, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(UplinkNASTransport, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    UplinkNASTransport,
                    NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
                )?,
                build_s1ap_ie!(UplinkNASTransport, EUTRAN_CGI(self.ecgi.to_raw()?))?,
                build_s1ap_ie!(UplinkNASTransport, TAI(self.tai.to_raw()))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, UplinkNASTransport,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
            req ecgi: Ecgi = EUTRAN_CGI(e) => Ecgi::from_raw(&e),
            req tai: Tai = TAI(t) => Tai::from_raw(&t),
        );
        Ok(UplinkNasTransport {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
            ecgi,
            tai,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownlinkNasTransport {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
}
message!(
    DownlinkNasTransport,
    Initiating,
    proc_code::DOWNLINK_NAS_TRANSPORT,
    "DownlinkNASTransport",
    fast
);
impl DownlinkNasTransport {
    /// The hand-written encoder (see `fast`); `None` where it defers to `to_pdu`.
    fn encode_fast(&self) -> Option<Vec<u8>> {
        crate::fast::downlink_nas_transport(self.mme_ue_id, self.enb_ue_id, &self.nas_pdu)
    }

    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            DownlinkNASTransport,
            vec![
                build_s1ap_ie!(DownlinkNASTransport, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(DownlinkNASTransport, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    DownlinkNASTransport,
                    NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
                )?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, DownlinkNASTransport,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
        );
        Ok(DownlinkNasTransport {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NasNonDeliveryIndication {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub nas_pdu: Vec<u8>,
    pub cause: Cause,
}
message!(
    NasNonDeliveryIndication,
    Initiating,
    proc_code::NAS_NON_DELIVERY_INDICATION,
    "NASNonDeliveryIndication"
);
impl NasNonDeliveryIndication {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            NASNonDeliveryIndication,
            vec![
                build_s1ap_ie!(NASNonDeliveryIndication, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(NASNonDeliveryIndication, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    NASNonDeliveryIndication,
                    NAS_PDU(raw::NASPDU::from(self.nas_pdu.clone()))
                )?,
                build_s1ap_ie!(NASNonDeliveryIndication, Cause(self.cause.to_raw()?))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, NASNonDeliveryIndication,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
        );
        Ok(NasNonDeliveryIndication {
            mme_ue_id,
            enb_ue_id,
            nas_pdu,
            cause,
        })
    }
}

// ------------------------------------------------------------------ Initial Context Setup

fn ctxt_item(e: &ERab) -> R<raw::ProtocolIEField<'static>> {
    let item = raw::ERABToBeSetupItemCtxtSUReq::new(
        raw::ERABID(e.id.into()),
        qos_to_raw(e.qci, e.arp, e.gbr),
        addr_to_raw(e.transport),
        raw::GTPTEID(e.teid.to_be_bytes()),
        e.nas_pdu.clone().map(raw::NASPDU::from),
        None,
    );
    Ok(build_s1ap_ie!(REJECT E_RABToBeSetupItemCtxtSUReq(item))?)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialContextSetupRequest {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub ue_ambr: Ambr,
    pub erabs: Vec<ERab>,
    pub ue_security_capabilities: UeSecurityCapabilities,
    /// KeNB.
    pub security_key: Key256,
}
message!(
    InitialContextSetupRequest,
    Initiating,
    proc_code::INITIAL_CONTEXT_SETUP,
    "InitialContextSetupRequest",
    fast
);
impl InitialContextSetupRequest {
    /// The hand-written encoder (see `fast`); `None` where it defers to `to_pdu`.
    fn encode_fast(&self) -> Option<Vec<u8>> {
        crate::fast::initial_context_setup_request(
            self.mme_ue_id,
            self.enb_ue_id,
            self.ue_ambr,
            &self.erabs,
            self.ue_security_capabilities,
            &self.security_key,
        )
    }

    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self.erabs.iter().map(ctxt_item).collect::<R<Vec<_>>>()?;
        pdu!(
            InitialContextSetupRequest,
            vec![
                build_s1ap_ie!(InitialContextSetupRequest, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(InitialContextSetupRequest, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    InitialContextSetupRequest,
                    uEaggregateMaximumBitrate(self.ue_ambr.to_raw())
                )?,
                build_s1ap_ie!(
                    InitialContextSetupRequest,
                    E_RABToBeSetupListCtxtSUReq(raw::ERABToBeSetupListCtxtSUReq(items))
                )?,
                build_s1ap_ie!(
                    InitialContextSetupRequest,
                    UESecurityCapabilities(self.ue_security_capabilities.to_raw())
                )?,
                build_s1ap_ie!(
                    InitialContextSetupRequest,
                    SecurityKey(self.security_key.to_raw())
                )?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, InitialContextSetupRequest,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req ue_ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            req erabs: Vec<ERab> = E_RABToBeSetupListCtxtSUReq(l) => {
                list::<raw::ERABToBeSetupItemCtxtSUReq>(&l.0, "E-RABToBeSetupItemCtxtSUReq")?
                    .iter()
                    .map(|i| {
                        let q = qos_from_raw(&i.e_rab_level_qos_parameters);
                        Ok(ERab {
                            id: erab_id(i.e_rab_id.0, "E-RABToBeSetupItemCtxtSUReq")?,
                            qci: q.qci, arp: q.arp, gbr: q.gbr,
                            transport: addr_from_raw(&i.transport_layer_address, "E-RABToBeSetupItemCtxtSUReq")?,
                            teid: u32::from_be_bytes(i.gtp_teid.0),
                            nas_pdu: i.nas_pdu.as_ref().map(|n| n.0.to_vec()),
                        })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            req caps: UeSecurityCapabilities = UESecurityCapabilities(c) => UeSecurityCapabilities::from_raw(&c),
            req key: Key256 = SecurityKey(k) => Key256::from_raw(&k)?,
        );
        Ok(InitialContextSetupRequest {
            mme_ue_id,
            enb_ue_id,
            ue_ambr,
            erabs,
            ue_security_capabilities: caps,
            security_key: key,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InitialContextSetupResponse {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    /// eNB S1-U endpoints (downlink tunnels).
    pub erabs: Vec<ERabTunnel>,
    pub failed: Vec<ERabCause>,
}
message!(
    InitialContextSetupResponse,
    Successful,
    proc_code::INITIAL_CONTEXT_SETUP,
    "InitialContextSetupResponse",
    fast_decode
);
impl InitialContextSetupResponse {
    /// The hand-written decoder (see `fast`); `None` where it defers.
    fn decode_fast(bytes: &[u8]) -> Option<Self> {
        crate::fast::initial_context_setup_response(bytes)
    }

    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self
            .erabs
            .iter()
            .map(|e| {
                let item = raw::ERABSetupItemCtxtSURes::new(
                    raw::ERABID(e.id.into()),
                    addr_to_raw(e.transport),
                    raw::GTPTEID(e.teid.to_be_bytes()),
                    None,
                );
                Ok(build_s1ap_ie!(IGNORE E_RABSetupItemCtxtSURes(item))?)
            })
            .collect::<R<Vec<_>>>()?;
        let mut ies: Ies = vec![
            build_s1ap_ie!(InitialContextSetupResponse, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(InitialContextSetupResponse, eNB_UE_S1AP_ID(self.enb_ue_id))?,
            build_s1ap_ie!(
                InitialContextSetupResponse,
                E_RABSetupListCtxtSURes(raw::ERABSetupListCtxtSURes(items))
            )?,
        ];
        if !self.failed.is_empty() {
            ies.push(build_s1ap_ie!(
                InitialContextSetupResponse,
                E_RABFailedToSetupListCtxtSURes(raw::ERABList(erab_cause_items(&self.failed)?))
            )?);
        }
        pdu!(InitialContextSetupResponse, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, InitialContextSetupResponse,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req erabs: Vec<ERabTunnel> = E_RABSetupListCtxtSURes(l) => {
                list::<raw::ERABSetupItemCtxtSURes>(&l.0, "E-RABSetupItemCtxtSURes")?
                    .iter()
                    .map(|i| {
                        let (transport, teid) = tunnel(&i.transport_layer_address, &i.gtp_teid, "E-RABSetupItemCtxtSURes")?;
                        Ok(ERabTunnel { id: erab_id(i.e_rab_id.0, "E-RABSetupItemCtxtSURes")?, transport, teid })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            opt failed: Vec<ERabCause> = E_RABFailedToSetupListCtxtSURes(l) => erab_cause_list(&l)?,
        );
        Ok(InitialContextSetupResponse {
            mme_ue_id,
            enb_ue_id,
            erabs,
            failed: failed.unwrap_or_default(),
        })
    }
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
            fn extract(pdu: &S1apPdu) -> R<Self> {
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
            fn extract(pdu: &S1apPdu) -> R<Self> {
                extract_s1ap_ies!(pdu, $raw,
                    req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
                    req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
                );
                Ok($ty { mme_ue_id, enb_ue_id })
            }
        }
    };
}

ids_cause_message!(
    InitialContextSetupFailure,
    InitialContextSetupFailure,
    Unsuccessful,
    proc_code::INITIAL_CONTEXT_SETUP,
    "InitialContextSetupFailure"
);
ids_cause_message!(
    UeContextReleaseRequest,
    UEContextReleaseRequest,
    Initiating,
    proc_code::UE_CONTEXT_RELEASE_REQUEST,
    "UEContextReleaseRequest"
);
ids_message!(
    UeContextReleaseComplete,
    UEContextReleaseComplete,
    Successful,
    proc_code::UE_CONTEXT_RELEASE,
    "UEContextReleaseComplete"
);
ids_message!(
    UeContextModificationResponse,
    UEContextModificationResponse,
    Successful,
    proc_code::UE_CONTEXT_MODIFICATION,
    "UEContextModificationResponse"
);
ids_cause_message!(
    UeContextModificationFailure,
    UEContextModificationFailure,
    Unsuccessful,
    proc_code::UE_CONTEXT_MODIFICATION,
    "UEContextModificationFailure"
);
ids_cause_message!(
    PathSwitchRequestFailure,
    PathSwitchRequestFailure,
    Unsuccessful,
    proc_code::PATH_SWITCH_REQUEST,
    "PathSwitchRequestFailure"
);
ids_cause_message!(
    HandoverPreparationFailure,
    HandoverPreparationFailure,
    Unsuccessful,
    proc_code::HANDOVER_PREPARATION,
    "HandoverPreparationFailure"
);
ids_cause_message!(
    HandoverCancel,
    HandoverCancel,
    Initiating,
    proc_code::HANDOVER_CANCEL,
    "HandoverCancel"
);
ids_message!(
    HandoverCancelAcknowledge,
    HandoverCancelAcknowledge,
    Successful,
    proc_code::HANDOVER_CANCEL,
    "HandoverCancelAcknowledge"
);

// ------------------------------------------------------------------ UE context release / modification

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UeContextReleaseCommand {
    pub ids: UeS1apIds,
    pub cause: Cause,
}
message!(
    UeContextReleaseCommand,
    Initiating,
    proc_code::UE_CONTEXT_RELEASE,
    "UEContextReleaseCommand"
);
impl UeContextReleaseCommand {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let ids = match self.ids {
            UeS1apIds::Pair {
                mme_ue_id,
                enb_ue_id,
            } => raw::UES1APIDs::uE_S1AP_ID_pair(raw::UES1APIDPair::new(
                raw::MMEUES1APID(mme_ue_id),
                raw::ENBUES1APID(enb_ue_id),
                None,
            )),
            UeS1apIds::MmeOnly(m) => raw::UES1APIDs::mME_UE_S1AP_ID(raw::MMEUES1APID(m)),
        };
        pdu!(
            UEContextReleaseCommand,
            vec![
                build_s1ap_ie!(UEContextReleaseCommand, UE_S1AP_IDs(ids))?,
                build_s1ap_ie!(UEContextReleaseCommand, Cause(self.cause.to_raw()?))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, UEContextReleaseCommand,
            req ids: UeS1apIds = UE_S1AP_IDs(i) => match i {
                raw::UES1APIDs::uE_S1AP_ID_pair(p) => UeS1apIds::Pair { mme_ue_id: p.mme_ue_s1ap_id.0, enb_ue_id: p.enb_ue_s1ap_id.0 },
                raw::UES1APIDs::mME_UE_S1AP_ID(m) => UeS1apIds::MmeOnly(m.0),
                _ => return Err(S1apError::InvalidIe { ie: "UE-S1AP-IDs", reason: "unknown alternative".into() }),
            },
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
        );
        Ok(UeContextReleaseCommand { ids, cause })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UeContextModificationRequest {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub security_key: Option<Key256>,
    pub ue_ambr: Option<Ambr>,
    pub ue_security_capabilities: Option<UeSecurityCapabilities>,
}
message!(
    UeContextModificationRequest,
    Initiating,
    proc_code::UE_CONTEXT_MODIFICATION,
    "UEContextModificationRequest"
);
impl UeContextModificationRequest {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(UEContextModificationRequest, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(UEContextModificationRequest, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if let Some(k) = &self.security_key {
            ies.push(build_s1ap_ie!(
                UEContextModificationRequest,
                SecurityKey(k.to_raw())
            )?);
        }
        if let Some(a) = self.ue_ambr {
            ies.push(build_s1ap_ie!(
                UEContextModificationRequest,
                uEaggregateMaximumBitrate(a.to_raw())
            )?);
        }
        if let Some(c) = self.ue_security_capabilities {
            ies.push(build_s1ap_ie!(
                UEContextModificationRequest,
                UESecurityCapabilities(c.to_raw())
            )?);
        }
        pdu!(UEContextModificationRequest, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, UEContextModificationRequest,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt key: Key256 = SecurityKey(k) => Key256::from_raw(&k)?,
            opt ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            opt caps: UeSecurityCapabilities = UESecurityCapabilities(c) => UeSecurityCapabilities::from_raw(&c),
        );
        Ok(UeContextModificationRequest {
            mme_ue_id,
            enb_ue_id,
            security_key: key,
            ue_ambr: ambr,
            ue_security_capabilities: caps,
        })
    }
}

// ------------------------------------------------------------------ Paging

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paging {
    /// UE identity index value: IMSI mod 1024 (10 bits).
    pub ue_identity_index: u16,
    pub paging_id: PagingIdentity,
    pub cn_domain: CnDomain,
    pub tai_list: Vec<Tai>,
}
message!(Paging, Initiating, proc_code::PAGING, "Paging");
impl Paging {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let idx = oxirush_s1ap::Bits::new(self.ue_identity_index.into(), 10).map_err(|_| {
            S1apError::Invalid(format!(
                "UE identity index {} exceeds 10 bits",
                self.ue_identity_index
            ))
        })?;
        let id = match &self.paging_id {
            PagingIdentity::STmsi(s) => raw::UEPagingID::s_TMSI(s.to_raw()),
            PagingIdentity::Imsi(i) => {
                raw::UEPagingID::iMSI(raw::IMSI(oxirush_s1ap::Octets::from(i.clone())))
            }
        };
        let dom = match self.cn_domain {
            CnDomain::Ps => raw::CNDomain::ps,
            CnDomain::Cs => raw::CNDomain::cs,
        };
        let tais = self
            .tai_list
            .iter()
            .map(|t| Ok(build_s1ap_ie!(IGNORE TAIItem(raw::TAIItem::new(t.to_raw(), None)))?))
            .collect::<R<Vec<_>>>()?;
        pdu!(
            Paging,
            vec![
                build_s1ap_ie!(Paging, UEIdentityIndexValue(raw::UEIdentityIndexValue(idx)))?,
                build_s1ap_ie!(Paging, UEPagingID(id))?,
                build_s1ap_ie!(Paging, CNDomain(dom))?,
                build_s1ap_ie!(Paging, TAIList(raw::TAIList(tais)))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, Paging,
            req idx: u16 = UEIdentityIndexValue(v) => v.0.value() as u16,
            req paging_id: PagingIdentity = UEPagingID(p) => match p {
                raw::UEPagingID::s_TMSI(s) => PagingIdentity::STmsi(STmsi::from_raw(&s)),
                raw::UEPagingID::iMSI(i) => PagingIdentity::Imsi(i.0.to_vec()),
                _ => return Err(S1apError::InvalidIe { ie: "UEPagingID", reason: "unknown alternative".into() }),
            },
            req dom: CnDomain = CNDomain(d) => if enums::cn_domain_to(d) == 0 { CnDomain::Ps } else { CnDomain::Cs },
            req tai_list: Vec<Tai> = TAIList(l) => list::<raw::TAIItem>(&l.0, "TAIItem")?.iter().map(|i| Tai::from_raw(&i.tai)).collect(),
        );
        Ok(Paging {
            ue_identity_index: idx,
            paging_id,
            cn_domain: dom,
            tai_list,
        })
    }
}

// ------------------------------------------------------------------ E-RAB management

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ERabSetupRequest {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub ue_ambr: Option<Ambr>,
    /// Each E-RAB must carry its NAS-PDU (Activate Dedicated EPS Bearer Context Request).
    pub erabs: Vec<ERab>,
}
message!(
    ERabSetupRequest,
    Initiating,
    proc_code::E_RAB_SETUP,
    "E-RABSetupRequest"
);
impl ERabSetupRequest {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self
            .erabs
            .iter()
            .map(|e| {
                let nas = e.nas_pdu.clone().ok_or_else(|| {
                    S1apError::Invalid(format!(
                        "E-RAB {} of E-RAB Setup Request has no NAS-PDU",
                        e.id
                    ))
                })?;
                let item = raw::ERABToBeSetupItemBearerSUReq::new(
                    raw::ERABID(e.id.into()),
                    qos_to_raw(e.qci, e.arp, e.gbr),
                    addr_to_raw(e.transport),
                    raw::GTPTEID(e.teid.to_be_bytes()),
                    raw::NASPDU::from(nas),
                    None,
                );
                Ok(build_s1ap_ie!(REJECT E_RABToBeSetupItemBearerSUReq(item))?)
            })
            .collect::<R<Vec<_>>>()?;
        let mut ies: Ies = vec![
            build_s1ap_ie!(ERABSetupRequest, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(ERABSetupRequest, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if let Some(a) = self.ue_ambr {
            ies.push(build_s1ap_ie!(
                ERABSetupRequest,
                uEaggregateMaximumBitrate(a.to_raw())
            )?);
        }
        ies.push(build_s1ap_ie!(
            ERABSetupRequest,
            E_RABToBeSetupListBearerSUReq(raw::ERABToBeSetupListBearerSUReq(items))
        )?);
        pdu!(ERABSetupRequest, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ERABSetupRequest,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            req erabs: Vec<ERab> = E_RABToBeSetupListBearerSUReq(l) => {
                list::<raw::ERABToBeSetupItemBearerSUReq>(&l.0, "E-RABToBeSetupItemBearerSUReq")?
                    .iter()
                    .map(|i| {
                        let q = qos_from_raw(&i.e_rab_level_qos_parameters);
                        Ok(ERab {
                            id: erab_id(i.e_rab_id.0, "E-RABToBeSetupItemBearerSUReq")?,
                            qci: q.qci, arp: q.arp, gbr: q.gbr,
                            transport: addr_from_raw(&i.transport_layer_address, "E-RABToBeSetupItemBearerSUReq")?,
                            teid: u32::from_be_bytes(i.gtp_teid.0),
                            nas_pdu: Some(i.nas_pdu.0.to_vec()),
                        })
                    })
                    .collect::<R<Vec<_>>>()?
            },
        );
        Ok(ERabSetupRequest {
            mme_ue_id,
            enb_ue_id,
            ue_ambr: ambr,
            erabs,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ERabSetupResponse {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub setup: Vec<ERabTunnel>,
    pub failed: Vec<ERabCause>,
}
message!(
    ERabSetupResponse,
    Successful,
    proc_code::E_RAB_SETUP,
    "E-RABSetupResponse"
);
impl ERabSetupResponse {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(ERABSetupResponse, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(ERABSetupResponse, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if !self.setup.is_empty() {
            let items = self
                .setup
                .iter()
                .map(|e| {
                    let item = raw::ERABSetupItemBearerSURes::new(
                        raw::ERABID(e.id.into()),
                        addr_to_raw(e.transport),
                        raw::GTPTEID(e.teid.to_be_bytes()),
                        None,
                    );
                    Ok(build_s1ap_ie!(IGNORE E_RABSetupItemBearerSURes(item))?)
                })
                .collect::<R<Vec<_>>>()?;
            ies.push(build_s1ap_ie!(
                ERABSetupResponse,
                E_RABSetupListBearerSURes(raw::ERABSetupListBearerSURes(items))
            )?);
        }
        if !self.failed.is_empty() {
            ies.push(build_s1ap_ie!(
                ERABSetupResponse,
                E_RABFailedToSetupListBearerSURes(raw::ERABList(erab_cause_items(&self.failed)?))
            )?);
        }
        pdu!(ERABSetupResponse, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ERABSetupResponse,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt setup: Vec<ERabTunnel> = E_RABSetupListBearerSURes(l) => {
                list::<raw::ERABSetupItemBearerSURes>(&l.0, "E-RABSetupItemBearerSURes")?
                    .iter()
                    .map(|i| {
                        let (transport, teid) = tunnel(&i.transport_layer_address, &i.gtp_teid, "E-RABSetupItemBearerSURes")?;
                        Ok(ERabTunnel { id: erab_id(i.e_rab_id.0, "E-RABSetupItemBearerSURes")?, transport, teid })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            opt failed: Vec<ERabCause> = E_RABFailedToSetupListBearerSURes(l) => erab_cause_list(&l)?,
        );
        Ok(ERabSetupResponse {
            mme_ue_id,
            enb_ue_id,
            setup: setup.unwrap_or_default(),
            failed: failed.unwrap_or_default(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ERabModifyRequest {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub ue_ambr: Option<Ambr>,
    pub erabs: Vec<ERabModify>,
}
message!(
    ERabModifyRequest,
    Initiating,
    proc_code::E_RAB_MODIFY,
    "E-RABModifyRequest"
);
impl ERabModifyRequest {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self
            .erabs
            .iter()
            .map(|e| {
                let item = raw::ERABToBeModifiedItemBearerModReq::new(
                    raw::ERABID(e.id.into()),
                    qos_to_raw(e.qci, e.arp, e.gbr),
                    raw::NASPDU::from(e.nas_pdu.clone()),
                    None,
                );
                Ok(build_s1ap_ie!(REJECT E_RABToBeModifiedItemBearerModReq(item))?)
            })
            .collect::<R<Vec<_>>>()?;
        let mut ies: Ies = vec![
            build_s1ap_ie!(ERABModifyRequest, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(ERABModifyRequest, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if let Some(a) = self.ue_ambr {
            ies.push(build_s1ap_ie!(
                ERABModifyRequest,
                uEaggregateMaximumBitrate(a.to_raw())
            )?);
        }
        ies.push(build_s1ap_ie!(
            ERABModifyRequest,
            E_RABToBeModifiedListBearerModReq(raw::ERABToBeModifiedListBearerModReq(items))
        )?);
        pdu!(ERABModifyRequest, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ERABModifyRequest,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            req erabs: Vec<ERabModify> = E_RABToBeModifiedListBearerModReq(l) => {
                list::<raw::ERABToBeModifiedItemBearerModReq>(&l.0, "E-RABToBeModifiedItemBearerModReq")?
                    .iter()
                    .map(|i| {
                        let q = qos_from_raw(&i.e_rab_level_qos_parameters);
                        Ok(ERabModify {
                            id: erab_id(i.e_rab_id.0, "E-RABToBeModifiedItemBearerModReq")?,
                            qci: q.qci, arp: q.arp, gbr: q.gbr,
                            nas_pdu: i.nas_pdu.0.to_vec(),
                        })
                    })
                    .collect::<R<Vec<_>>>()?
            },
        );
        Ok(ERabModifyRequest {
            mme_ue_id,
            enb_ue_id,
            ue_ambr: ambr,
            erabs,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ERabModifyResponse {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub modified: Vec<u8>,
    pub failed: Vec<ERabCause>,
}
message!(
    ERabModifyResponse,
    Successful,
    proc_code::E_RAB_MODIFY,
    "E-RABModifyResponse"
);
impl ERabModifyResponse {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(ERABModifyResponse, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(ERABModifyResponse, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if !self.modified.is_empty() {
            let items = self
                .modified
                .iter()
                .map(|id| Ok(build_s1ap_ie!(IGNORE E_RABModifyItemBearerModRes(raw::ERABModifyItemBearerModRes::new(raw::ERABID((*id).into()), None)))?))
                .collect::<R<Vec<_>>>()?;
            ies.push(build_s1ap_ie!(
                ERABModifyResponse,
                E_RABModifyListBearerModRes(raw::ERABModifyListBearerModRes(items))
            )?);
        }
        if !self.failed.is_empty() {
            ies.push(build_s1ap_ie!(
                ERABModifyResponse,
                E_RABFailedToModifyList(raw::ERABList(erab_cause_items(&self.failed)?))
            )?);
        }
        pdu!(ERABModifyResponse, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ERABModifyResponse,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt modified: Vec<u8> = E_RABModifyListBearerModRes(l) => list::<raw::ERABModifyItemBearerModRes>(&l.0, "E-RABModifyItemBearerModRes")?
                .iter().map(|i| erab_id(i.e_rab_id.0, "E-RABModifyItemBearerModRes")).collect::<R<Vec<_>>>()?,
            opt failed: Vec<ERabCause> = E_RABFailedToModifyList(l) => erab_cause_list(&l)?,
        );
        Ok(ERabModifyResponse {
            mme_ue_id,
            enb_ue_id,
            modified: modified.unwrap_or_default(),
            failed: failed.unwrap_or_default(),
        })
    }
}

/// E-RAB Release Command (MME → eNB).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ERabReleaseCommand {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub ue_ambr: Option<Ambr>,
    pub erabs: Vec<ERabCause>,
    pub nas_pdu: Option<Vec<u8>>,
}
message!(
    ERabReleaseCommand,
    Initiating,
    proc_code::E_RAB_RELEASE,
    "E-RABReleaseCommand"
);
impl ERabReleaseCommand {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(ERABReleaseCommand, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(ERABReleaseCommand, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if let Some(a) = self.ue_ambr {
            ies.push(build_s1ap_ie!(
                ERABReleaseCommand,
                uEaggregateMaximumBitrate(a.to_raw())
            )?);
        }
        ies.push(build_s1ap_ie!(
            ERABReleaseCommand,
            E_RABToBeReleasedList(raw::ERABList(erab_cause_items(&self.erabs)?))
        )?);
        if let Some(n) = &self.nas_pdu {
            ies.push(build_s1ap_ie!(
                ERABReleaseCommand,
                NAS_PDU(raw::NASPDU::from(n.clone()))
            )?);
        }
        pdu!(ERABReleaseCommand, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ERABReleaseCommand,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            req erabs: Vec<ERabCause> = E_RABToBeReleasedList(l) => erab_cause_list(&l)?,
            opt nas_pdu: Vec<u8> = NAS_PDU(n) => n.0.to_vec(),
        );
        Ok(ERabReleaseCommand {
            mme_ue_id,
            enb_ue_id,
            ue_ambr: ambr,
            erabs,
            nas_pdu,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ERabReleaseResponse {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub released: Vec<u8>,
    pub failed: Vec<ERabCause>,
}
message!(
    ERabReleaseResponse,
    Successful,
    proc_code::E_RAB_RELEASE,
    "E-RABReleaseResponse"
);
impl ERabReleaseResponse {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(ERABReleaseResponse, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(ERABReleaseResponse, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if !self.released.is_empty() {
            let items = self
                .released
                .iter()
                .map(|id| Ok(build_s1ap_ie!(IGNORE E_RABReleaseItemBearerRelComp(raw::ERABReleaseItemBearerRelComp::new(raw::ERABID((*id).into()), None)))?))
                .collect::<R<Vec<_>>>()?;
            ies.push(build_s1ap_ie!(
                ERABReleaseResponse,
                E_RABReleaseListBearerRelComp(raw::ERABReleaseListBearerRelComp(items))
            )?);
        }
        if !self.failed.is_empty() {
            ies.push(build_s1ap_ie!(
                ERABReleaseResponse,
                E_RABFailedToReleaseList(raw::ERABList(erab_cause_items(&self.failed)?))
            )?);
        }
        pdu!(ERABReleaseResponse, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ERABReleaseResponse,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt released: Vec<u8> = E_RABReleaseListBearerRelComp(l) => list::<raw::ERABReleaseItemBearerRelComp>(&l.0, "E-RABReleaseItemBearerRelComp")?
                .iter().map(|i| erab_id(i.e_rab_id.0, "E-RABReleaseItemBearerRelComp")).collect::<R<Vec<_>>>()?,
            opt failed: Vec<ERabCause> = E_RABFailedToReleaseList(l) => erab_cause_list(&l)?,
        );
        Ok(ERabReleaseResponse {
            mme_ue_id,
            enb_ue_id,
            released: released.unwrap_or_default(),
            failed: failed.unwrap_or_default(),
        })
    }
}

// ------------------------------------------------------------------ X2 path switch

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSwitchRequest {
    pub enb_ue_id: u32,
    /// Target eNB's downlink S1-U endpoints.
    pub erabs: Vec<ERabTunnel>,
    pub source_mme_ue_id: u32,
    pub ecgi: Ecgi,
    pub tai: Tai,
    pub ue_security_capabilities: UeSecurityCapabilities,
}
message!(
    PathSwitchRequest,
    Initiating,
    proc_code::PATH_SWITCH_REQUEST,
    "PathSwitchRequest"
);
impl PathSwitchRequest {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self
            .erabs
            .iter()
            .map(|e| {
                let item = raw::ERABToBeSwitchedDLItem::new(
                    raw::ERABID(e.id.into()),
                    addr_to_raw(e.transport),
                    raw::GTPTEID(e.teid.to_be_bytes()),
                    None,
                );
                Ok(build_s1ap_ie!(REJECT E_RABToBeSwitchedDLItem(item))?)
            })
            .collect::<R<Vec<_>>>()?;
        pdu!(
            PathSwitchRequest,
            vec![
                build_s1ap_ie!(PathSwitchRequest, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    PathSwitchRequest,
                    E_RABToBeSwitchedDLList(raw::ERABToBeSwitchedDLList(items))
                )?,
                build_s1ap_ie!(
                    PathSwitchRequest,
                    SourceMME_UE_S1AP_ID(raw::MMEUES1APID(self.source_mme_ue_id))
                )?,
                build_s1ap_ie!(PathSwitchRequest, EUTRAN_CGI(self.ecgi.to_raw()?))?,
                build_s1ap_ie!(PathSwitchRequest, TAI(self.tai.to_raw()))?,
                build_s1ap_ie!(
                    PathSwitchRequest,
                    UESecurityCapabilities(self.ue_security_capabilities.to_raw())
                )?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, PathSwitchRequest,
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req erabs: Vec<ERabTunnel> = E_RABToBeSwitchedDLList(l) => {
                list::<raw::ERABToBeSwitchedDLItem>(&l.0, "E-RABToBeSwitchedDLItem")?
                    .iter()
                    .map(|i| {
                        let (transport, teid) = tunnel(&i.transport_layer_address, &i.gtp_teid, "E-RABToBeSwitchedDLItem")?;
                        Ok(ERabTunnel { id: erab_id(i.e_rab_id.0, "E-RABToBeSwitchedDLItem")?, transport, teid })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            req source_mme_ue_id: u32 = SourceMME_UE_S1AP_ID(m) => m.0,
            req ecgi: Ecgi = EUTRAN_CGI(e) => Ecgi::from_raw(&e),
            req tai: Tai = TAI(t) => Tai::from_raw(&t),
            req caps: UeSecurityCapabilities = UESecurityCapabilities(c) => UeSecurityCapabilities::from_raw(&c),
        );
        Ok(PathSwitchRequest {
            enb_ue_id,
            erabs,
            source_mme_ue_id,
            ecgi,
            tai,
            ue_security_capabilities: caps,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathSwitchRequestAcknowledge {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub ue_ambr: Option<Ambr>,
    /// S-GW uplink endpoints, when they changed.
    pub erabs_switched_ul: Vec<ERabTunnel>,
    pub erabs_to_release: Vec<ERabCause>,
    pub security_context: SecurityContext,
}
message!(
    PathSwitchRequestAcknowledge,
    Successful,
    proc_code::PATH_SWITCH_REQUEST,
    "PathSwitchRequestAcknowledge"
);
impl PathSwitchRequestAcknowledge {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(PathSwitchRequestAcknowledge, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(PathSwitchRequestAcknowledge, eNB_UE_S1AP_ID(self.enb_ue_id))?,
        ];
        if let Some(a) = self.ue_ambr {
            ies.push(build_s1ap_ie!(
                PathSwitchRequestAcknowledge,
                uEaggregateMaximumBitrate(a.to_raw())
            )?);
        }
        if !self.erabs_switched_ul.is_empty() {
            let items = self
                .erabs_switched_ul
                .iter()
                .map(|e| {
                    let item = raw::ERABToBeSwitchedULItem::new(
                        raw::ERABID(e.id.into()),
                        addr_to_raw(e.transport),
                        raw::GTPTEID(e.teid.to_be_bytes()),
                        None,
                    );
                    Ok(build_s1ap_ie!(IGNORE E_RABToBeSwitchedULItem(item))?)
                })
                .collect::<R<Vec<_>>>()?;
            ies.push(build_s1ap_ie!(
                PathSwitchRequestAcknowledge,
                E_RABToBeSwitchedULList(raw::ERABToBeSwitchedULList(items))
            )?);
        }
        if !self.erabs_to_release.is_empty() {
            ies.push(build_s1ap_ie!(
                PathSwitchRequestAcknowledge,
                E_RABToBeReleasedList(raw::ERABList(erab_cause_items(&self.erabs_to_release)?))
            )?);
        }
        ies.push(build_s1ap_ie!(
            PathSwitchRequestAcknowledge,
            SecurityContext(self.security_context.to_raw())
        )?);
        pdu!(PathSwitchRequestAcknowledge, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, PathSwitchRequestAcknowledge,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            opt ul: Vec<ERabTunnel> = E_RABToBeSwitchedULList(l) => {
                list::<raw::ERABToBeSwitchedULItem>(&l.0, "E-RABToBeSwitchedULItem")?
                    .iter()
                    .map(|i| {
                        let (transport, teid) = tunnel(&i.transport_layer_address, &i.gtp_teid, "E-RABToBeSwitchedULItem")?;
                        Ok(ERabTunnel { id: erab_id(i.e_rab_id.0, "E-RABToBeSwitchedULItem")?, transport, teid })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            opt rel: Vec<ERabCause> = E_RABToBeReleasedList(l) => erab_cause_list(&l)?,
            req sc: SecurityContext = SecurityContext(s) => SecurityContext::from_raw(&s)?,
        );
        Ok(PathSwitchRequestAcknowledge {
            mme_ue_id,
            enb_ue_id,
            ue_ambr: ambr,
            erabs_switched_ul: ul.unwrap_or_default(),
            erabs_to_release: rel.unwrap_or_default(),
            security_context: sc,
        })
    }
}

// ------------------------------------------------------------------ S1 handover

/// Handover type index (0 intralte, 1 ltetoutran, 2 ltetogeran, 3 utrantolte, 4 gerantolte).
pub const HANDOVER_TYPE_INTRALTE: u8 = 0;

fn target_to_raw(t: &TargetId) -> R<raw::ProtocolIEField<'static>> {
    match t {
        TargetId::Enb { global_enb_id, tai } => {
            let v = raw::TargetID::targeteNB_ID(raw::TargeteNBID::new(
                global_enb_id.to_raw()?,
                tai.to_raw(),
                None,
            ));
            Ok(build_s1ap_ie!(HandoverRequired, TargetID(v))?)
        }
        TargetId::Other(bytes) => Ok(raw_field(
            <oxirush_s1ap::ie::TargetID as oxirush_s1ap::aper::protocol::Ie>::ID,
            raw::Criticality::reject,
            bytes.clone(),
        )),
    }
}

fn target_from_raw(t: &raw::TargetID, encoded: &[u8]) -> R<TargetId> {
    Ok(match t {
        raw::TargetID::targeteNB_ID(e) => TargetId::Enb {
            global_enb_id: GlobalEnbId::from_raw(&e.global_enb_id)?,
            tai: Tai::from_raw(&e.selected_tai),
        },
        _ => TargetId::Other(encoded.to_vec()),
    })
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverRequired {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub handover_type: u8,
    pub cause: Cause,
    pub target: TargetId,
    /// Source to Target Transparent Container, relayed opaque to the target eNB.
    pub container: Vec<u8>,
}
message!(
    HandoverRequired,
    Initiating,
    proc_code::HANDOVER_PREPARATION,
    "HandoverRequired"
);
impl HandoverRequired {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            HandoverRequired,
            vec![
                build_s1ap_ie!(HandoverRequired, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(HandoverRequired, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(
                    HandoverRequired,
                    HandoverType(handover_type_raw(self.handover_type)?)
                )?,
                build_s1ap_ie!(HandoverRequired, Cause(self.cause.to_raw()?))?,
                target_to_raw(&self.target)?,
                build_s1ap_ie!(
                    HandoverRequired,
                    Source_ToTarget_TransparentContainer(raw::SourceToTargetTransparentContainer(
                        self.container.clone().into()
                    ))
                )?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        let tid = <oxirush_s1ap::ie::TargetID as oxirush_s1ap::aper::protocol::Ie>::ID;
        let encoded = raw_ie(pdu, tid)?.unwrap_or_default();
        extract_s1ap_ies!(pdu, HandoverRequired,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req ht: u8 = HandoverType(h) => enums::handover_type_to(h),
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
            req target: TargetId = TargetID(t) => target_from_raw(&t, &encoded)?,
            req container: Vec<u8> = Source_ToTarget_TransparentContainer(c) => c.0.to_vec(),
        );
        Ok(HandoverRequired {
            mme_ue_id,
            enb_ue_id,
            handover_type: ht,
            cause,
            target,
            container,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverCommand {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub handover_type: u8,
    pub erabs_forwarding: Vec<ERabForwarding>,
    pub erabs_to_release: Vec<ERabCause>,
    /// Target to Source Transparent Container from the target eNB.
    pub container: Vec<u8>,
}
message!(
    HandoverCommand,
    Successful,
    proc_code::HANDOVER_PREPARATION,
    "HandoverCommand"
);
impl HandoverCommand {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![
            build_s1ap_ie!(HandoverCommand, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(HandoverCommand, eNB_UE_S1AP_ID(self.enb_ue_id))?,
            build_s1ap_ie!(
                HandoverCommand,
                HandoverType(handover_type_raw(self.handover_type)?)
            )?,
        ];
        if !self.erabs_forwarding.is_empty() {
            let items = self
                .erabs_forwarding
                .iter()
                .map(|f| {
                    let item = raw::ERABDataForwardingItem::new(
                        raw::ERABID(f.id.into()),
                        f.dl.map(|(a, _)| addr_to_raw(a)),
                        f.dl.map(|(_, t)| raw::GTPTEID(t.to_be_bytes())),
                        f.ul.map(|(a, _)| addr_to_raw(a)),
                        f.ul.map(|(_, t)| raw::GTPTEID(t.to_be_bytes())),
                        None,
                    );
                    Ok(build_s1ap_ie!(IGNORE E_RABDataForwardingItem(item))?)
                })
                .collect::<R<Vec<_>>>()?;
            ies.push(build_s1ap_ie!(
                HandoverCommand,
                E_RABSubjecttoDataForwardingList(raw::ERABSubjecttoDataForwardingList(items))
            )?);
        }
        if !self.erabs_to_release.is_empty() {
            ies.push(build_s1ap_ie!(
                HandoverCommand,
                E_RABtoReleaseListHOCmd(raw::ERABList(erab_cause_items(&self.erabs_to_release)?))
            )?);
        }
        ies.push(build_s1ap_ie!(
            HandoverCommand,
            Target_ToSource_TransparentContainer(raw::TargetToSourceTransparentContainer(
                self.container.clone().into()
            ))
        )?);
        pdu!(HandoverCommand, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, HandoverCommand,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req ht: u8 = HandoverType(h) => enums::handover_type_to(h),
            opt fwd: Vec<ERabForwarding> = E_RABSubjecttoDataForwardingList(l) => {
                list::<raw::ERABDataForwardingItem>(&l.0, "E-RABDataForwardingItem")?
                    .iter()
                    .map(|i| Ok(ERabForwarding {
                        id: erab_id(i.e_rab_id.0, "E-RABDataForwardingItem")?,
                        dl: opt_tunnel(&i.dl_transport_layer_address, &i.dl_gtp_teid, "E-RABDataForwardingItem")?,
                        ul: opt_tunnel(&i.ul_transport_layer_address, &i.ul_gtp_teid, "E-RABDataForwardingItem")?,
                    }))
                    .collect::<R<Vec<_>>>()?
            },
            opt rel: Vec<ERabCause> = E_RABtoReleaseListHOCmd(l) => erab_cause_list(&l)?,
            req container: Vec<u8> = Target_ToSource_TransparentContainer(c) => c.0.to_vec(),
        );
        Ok(HandoverCommand {
            mme_ue_id,
            enb_ue_id,
            handover_type: ht,
            erabs_forwarding: fwd.unwrap_or_default(),
            erabs_to_release: rel.unwrap_or_default(),
            container,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverRequest {
    pub mme_ue_id: u32,
    pub handover_type: u8,
    pub cause: Cause,
    pub ue_ambr: Ambr,
    /// E-RABs with their S-GW uplink endpoints; `nas_pdu` is not carried here.
    pub erabs: Vec<ERab>,
    pub container: Vec<u8>,
    pub ue_security_capabilities: UeSecurityCapabilities,
    pub security_context: SecurityContext,
}
message!(
    HandoverRequest,
    Initiating,
    proc_code::HANDOVER_RESOURCE_ALLOCATION,
    "HandoverRequest"
);
impl HandoverRequest {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self
            .erabs
            .iter()
            .map(|e| {
                let item = raw::ERABToBeSetupItemHOReq::new(
                    raw::ERABID(e.id.into()),
                    addr_to_raw(e.transport),
                    raw::GTPTEID(e.teid.to_be_bytes()),
                    qos_to_raw(e.qci, e.arp, e.gbr),
                    None,
                );
                Ok(build_s1ap_ie!(REJECT E_RABToBeSetupItemHOReq(item))?)
            })
            .collect::<R<Vec<_>>>()?;
        pdu!(
            HandoverRequest,
            vec![
                build_s1ap_ie!(HandoverRequest, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(
                    HandoverRequest,
                    HandoverType(handover_type_raw(self.handover_type)?)
                )?,
                build_s1ap_ie!(HandoverRequest, Cause(self.cause.to_raw()?))?,
                build_s1ap_ie!(
                    HandoverRequest,
                    uEaggregateMaximumBitrate(self.ue_ambr.to_raw())
                )?,
                build_s1ap_ie!(
                    HandoverRequest,
                    E_RABToBeSetupListHOReq(raw::ERABToBeSetupListHOReq(items))
                )?,
                build_s1ap_ie!(
                    HandoverRequest,
                    Source_ToTarget_TransparentContainer(raw::SourceToTargetTransparentContainer(
                        self.container.clone().into()
                    ))
                )?,
                build_s1ap_ie!(
                    HandoverRequest,
                    UESecurityCapabilities(self.ue_security_capabilities.to_raw())
                )?,
                build_s1ap_ie!(
                    HandoverRequest,
                    SecurityContext(self.security_context.to_raw())
                )?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, HandoverRequest,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req ht: u8 = HandoverType(h) => enums::handover_type_to(h),
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
            req ambr: Ambr = uEaggregateMaximumBitrate(a) => Ambr::from_raw(&a),
            req erabs: Vec<ERab> = E_RABToBeSetupListHOReq(l) => {
                list::<raw::ERABToBeSetupItemHOReq>(&l.0, "E-RABToBeSetupItemHOReq")?
                    .iter()
                    .map(|i| {
                        let q = qos_from_raw(&i.e_rab_level_qos_parameters);
                        Ok(ERab {
                            id: erab_id(i.e_rab_id.0, "E-RABToBeSetupItemHOReq")?,
                            qci: q.qci, arp: q.arp, gbr: q.gbr,
                            transport: addr_from_raw(&i.transport_layer_address, "E-RABToBeSetupItemHOReq")?,
                            teid: u32::from_be_bytes(i.gtp_teid.0),
                            nas_pdu: None,
                        })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            req container: Vec<u8> = Source_ToTarget_TransparentContainer(c) => c.0.to_vec(),
            req caps: UeSecurityCapabilities = UESecurityCapabilities(c) => UeSecurityCapabilities::from_raw(&c),
            req sc: SecurityContext = SecurityContext(s) => SecurityContext::from_raw(&s)?,
        );
        Ok(HandoverRequest {
            mme_ue_id,
            handover_type: ht,
            cause,
            ue_ambr: ambr,
            erabs,
            container,
            ue_security_capabilities: caps,
            security_context: sc,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverRequestAcknowledge {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub admitted: Vec<ERabAdmitted>,
    pub failed: Vec<ERabCause>,
    /// Target to Source Transparent Container.
    pub container: Vec<u8>,
}
message!(
    HandoverRequestAcknowledge,
    Successful,
    proc_code::HANDOVER_RESOURCE_ALLOCATION,
    "HandoverRequestAcknowledge"
);
impl HandoverRequestAcknowledge {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let items = self
            .admitted
            .iter()
            .map(|a| {
                let item = raw::ERABAdmittedItem::new(
                    raw::ERABID(a.id.into()),
                    addr_to_raw(a.transport),
                    raw::GTPTEID(a.teid.to_be_bytes()),
                    a.dl_forwarding.map(|(x, _)| addr_to_raw(x)),
                    a.dl_forwarding.map(|(_, t)| raw::GTPTEID(t.to_be_bytes())),
                    a.ul_forwarding.map(|(x, _)| addr_to_raw(x)),
                    a.ul_forwarding.map(|(_, t)| raw::GTPTEID(t.to_be_bytes())),
                    None,
                );
                Ok(build_s1ap_ie!(IGNORE E_RABAdmittedItem(item))?)
            })
            .collect::<R<Vec<_>>>()?;
        let mut ies: Ies = vec![
            build_s1ap_ie!(HandoverRequestAcknowledge, MME_UE_S1AP_ID(self.mme_ue_id))?,
            build_s1ap_ie!(HandoverRequestAcknowledge, eNB_UE_S1AP_ID(self.enb_ue_id))?,
            build_s1ap_ie!(
                HandoverRequestAcknowledge,
                E_RABAdmittedList(raw::ERABAdmittedList(items))
            )?,
        ];
        if !self.failed.is_empty() {
            let f = self
                .failed
                .iter()
                .map(|e| {
                    let item = raw::ERABFailedToSetupItemHOReqAck::new(
                        raw::ERABID(e.id.into()),
                        e.cause.to_raw()?,
                        None,
                    );
                    Ok(build_s1ap_ie!(IGNORE E_RABFailedtoSetupItemHOReqAck(item))?)
                })
                .collect::<R<Vec<_>>>()?;
            ies.push(build_s1ap_ie!(
                HandoverRequestAcknowledge,
                E_RABFailedToSetupListHOReqAck(raw::ERABFailedtoSetupListHOReqAck(f))
            )?);
        }
        ies.push(build_s1ap_ie!(
            HandoverRequestAcknowledge,
            Target_ToSource_TransparentContainer(raw::TargetToSourceTransparentContainer(
                self.container.clone().into()
            ))
        )?);
        pdu!(HandoverRequestAcknowledge, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, HandoverRequestAcknowledge,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req admitted: Vec<ERabAdmitted> = E_RABAdmittedList(l) => {
                list::<raw::ERABAdmittedItem>(&l.0, "E-RABAdmittedItem")?
                    .iter()
                    .map(|i| {
                        let (transport, teid) = tunnel(&i.transport_layer_address, &i.gtp_teid, "E-RABAdmittedItem")?;
                        Ok(ERabAdmitted {
                            id: erab_id(i.e_rab_id.0, "E-RABAdmittedItem")?,
                            transport, teid,
                            dl_forwarding: opt_tunnel(&i.dl_transport_layer_address, &i.dl_gtp_teid, "E-RABAdmittedItem")?,
                            ul_forwarding: opt_tunnel(&i.ul_transport_layer_address, &i.ul_gtp_teid, "E-RABAdmittedItem")?,
                        })
                    })
                    .collect::<R<Vec<_>>>()?
            },
            opt failed: Vec<ERabCause> = E_RABFailedToSetupListHOReqAck(l) => {
                list::<raw::ERABFailedToSetupItemHOReqAck>(&l.0, "E-RABFailedtoSetupItemHOReqAck")?
                    .iter()
                    .map(|i| Ok(ERabCause { id: erab_id(i.e_rab_id.0, "E-RABFailedtoSetupItemHOReqAck")?, cause: Cause::from_raw(&i.cause)? }))
                    .collect::<R<Vec<_>>>()?
            },
            req container: Vec<u8> = Target_ToSource_TransparentContainer(c) => c.0.to_vec(),
        );
        Ok(HandoverRequestAcknowledge {
            mme_ue_id,
            enb_ue_id,
            admitted,
            failed: failed.unwrap_or_default(),
            container,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverFailure {
    pub mme_ue_id: u32,
    pub cause: Cause,
}
message!(
    HandoverFailure,
    Unsuccessful,
    proc_code::HANDOVER_RESOURCE_ALLOCATION,
    "HandoverFailure"
);
impl HandoverFailure {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            HandoverFailure,
            vec![
                build_s1ap_ie!(HandoverFailure, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(HandoverFailure, Cause(self.cause.to_raw()?))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, HandoverFailure,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
        );
        Ok(HandoverFailure { mme_ue_id, cause })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandoverNotify {
    pub mme_ue_id: u32,
    pub enb_ue_id: u32,
    pub ecgi: Ecgi,
    pub tai: Tai,
}
message!(
    HandoverNotify,
    Initiating,
    proc_code::HANDOVER_NOTIFICATION,
    "HandoverNotify"
);
impl HandoverNotify {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(
            HandoverNotify,
            vec![
                build_s1ap_ie!(HandoverNotify, MME_UE_S1AP_ID(self.mme_ue_id))?,
                build_s1ap_ie!(HandoverNotify, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                build_s1ap_ie!(HandoverNotify, EUTRAN_CGI(self.ecgi.to_raw()?))?,
                build_s1ap_ie!(HandoverNotify, TAI(self.tai.to_raw()))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, HandoverNotify,
            req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            req ecgi: Ecgi = EUTRAN_CGI(e) => Ecgi::from_raw(&e),
            req tai: Tai = TAI(t) => Tai::from_raw(&t),
        );
        Ok(HandoverNotify {
            mme_ue_id,
            enb_ue_id,
            ecgi,
            tai,
        })
    }
}

const STATUS_CONTAINER_ID: u16 = 90;

/// eNB/MME Status Transfer: the container (APER of
/// ENB-StatusTransfer-TransparentContainer) is relayed by the MME unchanged.
macro_rules! status_transfer {
    ($ty:ident, $raw:ident, $code:expr, $name:literal) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $ty {
            pub mme_ue_id: u32,
            pub enb_ue_id: u32,
            pub container: Vec<u8>,
        }
        message!($ty, Initiating, $code, $name);
        impl $ty {
            pub fn to_pdu(&self) -> R<S1apPdu> {
                // Validate so we never relay something the target cannot decode.
                raw::decode_open_type::<raw::ENBStatusTransferTransparentContainer>(&self.container).map_err(|e| {
                    S1apError::InvalidIe { ie: "eNB-StatusTransfer-TransparentContainer", reason: e.to_string() }
                })?;
                pdu!($raw, vec![
                    build_s1ap_ie!($raw, MME_UE_S1AP_ID(self.mme_ue_id))?,
                    build_s1ap_ie!($raw, eNB_UE_S1AP_ID(self.enb_ue_id))?,
                    raw_field(STATUS_CONTAINER_ID, raw::Criticality::reject, self.container.clone()),
                ])
            }
            fn extract(pdu: &S1apPdu) -> R<Self> {
                extract_s1ap_ies!(pdu, $raw,
                    req mme_ue_id: u32 = MME_UE_S1AP_ID(id),
                    req enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
                    req _c: () = eNB_StatusTransfer_TransparentContainer(_c) => (),
                );
                let container = raw_ie(pdu, STATUS_CONTAINER_ID)?.unwrap_or_default();
                Ok($ty { mme_ue_id, enb_ue_id, container })
            }
        }
    };
}
status_transfer!(
    EnbStatusTransfer,
    ENBStatusTransfer,
    proc_code::ENB_STATUS_TRANSFER,
    "ENBStatusTransfer"
);
status_transfer!(
    MmeStatusTransfer,
    MMEStatusTransfer,
    proc_code::MME_STATUS_TRANSFER,
    "MMEStatusTransfer"
);

// ------------------------------------------------------------------ Error handling, reset

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ErrorIndication {
    pub mme_ue_id: Option<u32>,
    pub enb_ue_id: Option<u32>,
    pub cause: Option<Cause>,
}
message!(
    ErrorIndication,
    Initiating,
    proc_code::ERROR_INDICATION,
    "ErrorIndication"
);
impl ErrorIndication {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![];
        if let Some(m) = self.mme_ue_id {
            ies.push(build_s1ap_ie!(ErrorIndication, MME_UE_S1AP_ID(m))?);
        }
        if let Some(e) = self.enb_ue_id {
            ies.push(build_s1ap_ie!(ErrorIndication, eNB_UE_S1AP_ID(e))?);
        }
        if let Some(c) = self.cause {
            ies.push(build_s1ap_ie!(ErrorIndication, Cause(c.to_raw()?))?);
        }
        pdu!(ErrorIndication, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ErrorIndication,
            opt mme_ue_id: u32 = MME_UE_S1AP_ID(id),
            opt enb_ue_id: u32 = eNB_UE_S1AP_ID(id),
            opt cause: Cause = Cause(c) => Cause::from_raw(&c)?,
        );
        Ok(ErrorIndication {
            mme_ue_id,
            enb_ue_id,
            cause,
        })
    }
}

// ------------------------------------------------------------------ Overload (§8.7.6, §8.7.7)

/// What an eNB is asked to do while the MME is overloaded (TS 36.413 §9.2.3.20).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverloadAction {
    /// Reject RRC connection establishments for non-emergency mobile-originated data.
    RejectNonEmergencyMoDt,
    /// Reject RRC connection establishments for signalling.
    RejectRrcCrSignalling,
    /// Permit emergency sessions and mobile-terminated services only.
    PermitEmergencyAndMtOnly,
    /// Permit high-priority sessions and mobile-terminated services only.
    PermitHighPriorityAndMtOnly,
    /// Reject delay-tolerant access.
    RejectDelayTolerantAccess,
}

impl OverloadAction {
    fn to_raw(self) -> raw::OverloadAction {
        use raw::OverloadAction as A;
        match self {
            OverloadAction::RejectNonEmergencyMoDt => A::reject_non_emergency_mo_dt,
            OverloadAction::RejectRrcCrSignalling => A::reject_rrc_cr_signalling,
            OverloadAction::PermitEmergencyAndMtOnly => {
                A::permit_emergency_sessions_and_mobile_terminated_services_only
            }
            OverloadAction::PermitHighPriorityAndMtOnly => {
                A::permit_high_priority_sessions_and_mobile_terminated_services_only
            }
            OverloadAction::RejectDelayTolerantAccess => A::reject_delay_tolerant_access,
        }
    }

    fn from_raw(a: raw::OverloadAction) -> R<Self> {
        use raw::OverloadAction as A;
        Ok(match a {
            A::reject_non_emergency_mo_dt => OverloadAction::RejectNonEmergencyMoDt,
            A::reject_rrc_cr_signalling => OverloadAction::RejectRrcCrSignalling,
            A::permit_emergency_sessions_and_mobile_terminated_services_only => {
                OverloadAction::PermitEmergencyAndMtOnly
            }
            A::permit_high_priority_sessions_and_mobile_terminated_services_only => {
                OverloadAction::PermitHighPriorityAndMtOnly
            }
            A::reject_delay_tolerant_access => OverloadAction::RejectDelayTolerantAccess,
            other => {
                return Err(S1apError::InvalidIe {
                    ie: "OverloadAction",
                    reason: format!("{other:?} is not modelled"),
                })
            }
        })
    }

    /// Whether an RRC connection with this establishment cause (TS 36.331:
    /// 0 emergency, 1 highPriorityAccess, 2 mt-Access, 3 mo-Signalling, 4 mo-Data,
    /// 5 delayTolerantAccess) is to be rejected under this action.
    pub fn rejects(self, rrc_cause: u8) -> bool {
        match self {
            OverloadAction::RejectNonEmergencyMoDt => matches!(rrc_cause, 4 | 5),
            OverloadAction::RejectRrcCrSignalling => rrc_cause == 3,
            OverloadAction::PermitEmergencyAndMtOnly => !matches!(rrc_cause, 0 | 2),
            OverloadAction::PermitHighPriorityAndMtOnly => !matches!(rrc_cause, 1 | 2),
            OverloadAction::RejectDelayTolerantAccess => rrc_cause == 5,
        }
    }
}

/// OVERLOAD START (MME → eNB): the action to take, and optionally the percentage of
/// the traffic of that type to reject (Traffic Load Reduction Indication, 1..99).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverloadStart {
    pub action: OverloadAction,
    pub traffic_load_reduction: Option<u8>,
}
message!(
    OverloadStart,
    Initiating,
    proc_code::OVERLOAD_START,
    "OverloadStart"
);
impl OverloadStart {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![build_s1ap_ie!(
            OverloadStart,
            OverloadResponse(raw::OverloadResponse::overloadAction(self.action.to_raw()))
        )?];
        if let Some(p) = self.traffic_load_reduction {
            ies.push(build_s1ap_ie!(
                OverloadStart,
                TrafficLoadReductionIndication(raw::TrafficLoadReductionIndication(p.clamp(1, 99)))
            )?);
        }
        pdu!(OverloadStart, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, OverloadStart,
            req action: OverloadAction = OverloadResponse(r) => match r {
                raw::OverloadResponse::overloadAction(a) => OverloadAction::from_raw(a)?,
                #[allow(unreachable_patterns)]
                other => return Err(S1apError::InvalidIe { ie: "OverloadResponse", reason: format!("{other:?}") }),
            },
            opt traffic_load_reduction: u8 = TrafficLoadReductionIndication(t) => t.0,
        );
        Ok(OverloadStart {
            action,
            traffic_load_reduction,
        })
    }
}

/// OVERLOAD STOP (MME → eNB): normal operation again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OverloadStop {}
message!(
    OverloadStop,
    Initiating,
    proc_code::OVERLOAD_STOP,
    "OverloadStop"
);
impl OverloadStop {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        pdu!(OverloadStop, vec![])
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        let _ = pdu;
        Ok(OverloadStop {})
    }
}

fn connection_items(items: &[UeConnection], crit: raw::Criticality) -> R<Ies> {
    items
        .iter()
        .map(|c| {
            let item = raw::UEAssociatedLogicalS1ConnectionItem::new(
                c.mme_ue_id.map(raw::MMEUES1APID),
                c.enb_ue_id.map(raw::ENBUES1APID),
                None,
            );
            let v = raw::encode_open_type(&item)?;
            Ok(raw_field(91, crit, v.into_vec()))
        })
        .collect()
}

fn connections(fields: &[raw::ProtocolIEField<'_>]) -> R<Vec<UeConnection>> {
    fields
        .iter()
        .map(|f| {
            let i = raw::decode_open_type::<raw::UEAssociatedLogicalS1ConnectionItem>(&f.value)
                .map_err(|e| S1apError::InvalidIe {
                    ie: "UE-associatedLogicalS1-ConnectionItem",
                    reason: e.to_string(),
                })?;
            Ok(UeConnection {
                mme_ue_id: i.mme_ue_s1ap_id.map(|m| m.0),
                enb_ue_id: i.enb_ue_s1ap_id.map(|e| e.0),
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reset {
    pub cause: Cause,
    pub kind: ResetKind,
}
message!(Reset, Initiating, proc_code::RESET, "Reset");
impl Reset {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let rt = match &self.kind {
            ResetKind::All => raw::ResetType::s1_Interface(raw::ResetAll::reset_all),
            ResetKind::Partial(c) => {
                raw::ResetType::partOfS1_Interface(raw::UEAssociatedLogicalS1ConnectionListRes(
                    connection_items(c, raw::Criticality::reject)?,
                ))
            }
        };
        pdu!(
            Reset,
            vec![
                build_s1ap_ie!(Reset, Cause(self.cause.to_raw()?))?,
                build_s1ap_ie!(Reset, ResetType(rt))?,
            ]
        )
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, Reset,
            req cause: Cause = Cause(c) => Cause::from_raw(&c)?,
            req kind: ResetKind = ResetType(r) => match r {
                raw::ResetType::s1_Interface(_) => ResetKind::All,
                raw::ResetType::partOfS1_Interface(l) => ResetKind::Partial(connections(&l.0)?),
                _ => return Err(S1apError::InvalidIe { ie: "ResetType", reason: "unknown alternative".into() }),
            },
        );
        Ok(Reset { cause, kind })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResetAcknowledge {
    /// Echo of the partial reset's connections; empty for a full reset.
    pub connections: Vec<UeConnection>,
}
message!(
    ResetAcknowledge,
    Successful,
    proc_code::RESET,
    "ResetAcknowledge"
);
impl ResetAcknowledge {
    pub fn to_pdu(&self) -> R<S1apPdu> {
        let mut ies: Ies = vec![];
        if !self.connections.is_empty() {
            ies.push(build_s1ap_ie!(
                ResetAcknowledge,
                UE_associatedLogicalS1_ConnectionListResAck(
                    raw::UEAssociatedLogicalS1ConnectionListResAck(connection_items(
                        &self.connections,
                        raw::Criticality::ignore
                    )?)
                )
            )?);
        }
        pdu!(ResetAcknowledge, ies)
    }
    fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ResetAcknowledge,
            opt c: Vec<UeConnection> = UE_associatedLogicalS1_ConnectionListResAck(l) => connections(&l.0)?,
        );
        Ok(ResetAcknowledge {
            connections: c.unwrap_or_default(),
        })
    }
}

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
