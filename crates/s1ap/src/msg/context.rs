//! UE context management (TS 36.413 §8.3): Initial Context Setup, UE Context Release
//! and UE Context Modification.

use super::*;

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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
