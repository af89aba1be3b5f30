//! E-RAB management (TS 36.413 §8.2): E-RAB Setup, Modify and Release.

use super::*;

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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
