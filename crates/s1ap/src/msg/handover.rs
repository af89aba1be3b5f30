//! Handover signalling (TS 36.413 §8.4): Path Switch Request, Handover Preparation,
//! Resource Allocation, Notification, Cancel, and eNB/MME Status Transfer.

use super::*;

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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
    pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
            pub(super) fn extract(pdu: &S1apPdu) -> R<Self> {
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
