//! Management messages (TS 36.413 §8.7): S1 Setup, eNB Configuration Update, Error
//! Indication, Overload Start/Stop and Reset.

use super::*;

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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(_pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
        extract_s1ap_ies!(pdu, ResetAcknowledge,
            opt c: Vec<UeConnection> = UE_associatedLogicalS1_ConnectionListResAck(l) => connections(&l.0)?,
        );
        Ok(ResetAcknowledge {
            connections: c.unwrap_or_default(),
        })
    }
}
