//! Dedicated bearers (TS 24.301 §6.4.2-§6.4.4, §6.5.3, §6.5.4; TS 23.401 §5.4) over E-RAB
//! management (TS 36.413 §8.2): network-initiated activation, modification and
//! deactivation; UE-requested bearer resource allocation and modification.

use crate::prelude::*;

/// The QoS of a dedicated bearer: QCI, ARP, MBR and GBR (bit/s, UL and DL).
#[derive(Debug, Clone, Copy)]
pub(crate) struct DedicatedQos {
    pub(crate) qci: u8,
    pub(crate) arp: Arp,
    pub(crate) mbr: (u64, u64),
    pub(crate) gbr: (u64, u64),
}

impl Mme {
    /// Dedicated bearer activation (as a PCRF would ask): E-RAB Setup carrying
    /// Activate Dedicated EPS Bearer Context Request. Returns the EBI.
    #[allow(clippy::too_many_arguments)]
    pub fn activate_dedicated_bearer(
        &mut self,
        imsi: u64,
        qci: u8,
        mbr: (u64, u64),
        gbr: (u64, u64),
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<u8, MmeError> {
        let id = self.index.by_imsi(imsi).ok_or(MmeError::UnknownUe)?;
        let slot = self
            .ue(cp, id)
            .ok_or(MmeError::UnknownUe)?
            .slot
            .ok_or(MmeError::NotConnected)?;
        let linked = cp.ue(slot).ok_or(MmeError::UnknownUe)?.default_ebi;
        let tft = nasx::default_tft_value();
        let qos = DedicatedQos {
            qci,
            arp: Arp::default(),
            mbr,
            gbr,
        };
        self.dedicated(cp, id, linked, qos, 0, tft, out)
    }

    /// Dedicated bearer activation on the PDN connection of `linked`, with procedure
    /// transaction `pti` (0: network-initiated) and TFT value `tft`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dedicated(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        linked: u8,
        qos: DedicatedQos,
        pti: u8,
        tft: Vec<u8>,
        out: &mut Vec<Output>,
    ) -> Result<u8, MmeError> {
        let DedicatedQos { qci, arp, mbr, gbr } = qos;
        let u = self.ue(cp, id).ok_or(MmeError::UnknownUe)?;
        let (Some(slot), Some(ConnKey { assoc, enb_ue_id })) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        let ctx = cp.ue(slot).ok_or(MmeError::UnknownUe)?;
        if ctx.pdn_by_default_ebi(linked).is_none() {
            return Err(MmeError::NoBearer(linked));
        }
        let ebi = free_ebi(ctx).ok_or(MmeError::Busy)?;
        let p = BearerParams {
            ebi,
            linked_ebi: linked,
            qci,
            arp,
            mbr_ul: mbr.0,
            mbr_dl: mbr.1,
            gbr_ul: gbr.0,
            gbr_dl: gbr.1,
            charging_key: 0,
        };
        let teid = cp.add_bearer(slot, p).map_err(MmeError::Control)?;
        let g = (qci <= 4).then_some((mbr.0, mbr.1, gbr.0, gbr.1));
        let req = nasx::NasActivateDedicatedEpsBearerContextRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(linked),
            nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(qci, g)),
            nasx::NasTrafficFlowTemplate::new(tft),
        );
        let Some(nas) = self.nas_bytes(cp, id, &NasEpsMessage::new_esm(req, ebi, pti), false)
        else {
            warn_cp(
                id,
                format_args!("rollback of bearer {ebi}"),
                cp.remove_bearer(slot, ebi),
            );
            return Err(MmeError::NasEncode);
        };
        if let Some(u) = self.ue_mut(cp, id) {
            u.pending_bearers.push(ebi);
        }
        self.note_bearer(cp, id, linked, ebi);
        let erab = pepc_s1ap::ERab {
            id: ebi,
            qci,
            arp,
            gbr: gbr_qos(qci, mbr, gbr),
            transport: self.cfg.s1u_addr,
            teid,
            nas_pdu: Some(nas),
        };
        self.send(
            assoc,
            Some(id),
            ERabSetupRequest {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![erab],
            }
            .into(),
            out,
        );
        Ok(ebi)
    }

    /// Bearer modification: E-RAB Modify with Modify EPS Bearer Context Request.
    pub fn modify_bearer(
        &mut self,
        imsi: u64,
        ebi: u8,
        qci: u8,
        mbr: (u64, u64),
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let id = self.index.by_imsi(imsi).ok_or(MmeError::UnknownUe)?;
        let u = self.ue(cp, id).ok_or(MmeError::UnknownUe)?;
        let (Some(slot), Some(ConnKey { assoc, enb_ue_id })) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        cp.modify_bearer_qos(slot, ebi, qci, mbr.0, mbr.1)
            .map_err(|_| MmeError::NoBearer(ebi))?;
        let mut req = nasx::NasModifyEpsBearerContextRequest::new();
        req.new_eps_qos = Some(nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(
            qci, None,
        )));
        let nas = self
            .nas_bytes(cp, id, &NasEpsMessage::new_esm(req, ebi, 0), false)
            .ok_or(MmeError::NasEncode)?;
        let arp = cp
            .ue(slot)
            .and_then(|c| c.bearer(ebi))
            .map_or_else(pepc_s1ap::Arp::default, |b| b.arp);
        let m = pepc_s1ap::ERabModify {
            id: ebi,
            qci,
            arp,
            gbr: None,
            nas_pdu: nas,
        };
        self.send_erab_modify(id, (assoc, enb_ue_id), m, None, out);
        Ok(())
    }

    /// E-RAB Modify Request for one bearer (its NAS inside), with the UE-AMBR if it
    /// changes.
    pub(crate) fn send_erab_modify(
        &mut self,
        id: u32,
        (assoc, enb_ue_id): (AssocId, u32),
        m: pepc_s1ap::ERabModify,
        ue_ambr: Option<pepc_s1ap::Ambr>,
        out: &mut Vec<Output>,
    ) {
        let req = ERabModifyRequest {
            mme_ue_id: id,
            enb_ue_id,
            ue_ambr,
            erabs: vec![m],
        };
        self.send(assoc, Some(id), req.into(), out);
    }

    /// A dedicated bearer's QoS and TFT change (PCC rules added or removed): E-RAB
    /// Modify with Modify EPS Bearer Context Request carrying the new EPS QoS and
    /// the whole new TFT ("create new TFT" replaces the old one, TS 24.301 §6.4.3.3).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn modify_dedicated(
        &mut self,
        id: u32,
        ebi: u8,
        qci: u8,
        mbr: (u64, u64),
        gbr: (u64, u64),
        tft: Vec<u8>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let u = self.ue(cp, id).ok_or(MmeError::UnknownUe)?;
        let (Some(slot), Some(ConnKey { assoc, enb_ue_id })) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        let arp = cp
            .ue(slot)
            .and_then(|c| c.bearer(ebi))
            .map(|b| b.arp)
            .ok_or(MmeError::NoBearer(ebi))?;
        cp.modify_bearer_qos(slot, ebi, qci, mbr.0, mbr.1)
            .map_err(|_| MmeError::NoBearer(ebi))?;
        let g = (qci <= 4).then_some((mbr.0, mbr.1, gbr.0, gbr.1));
        let mut req = nasx::NasModifyEpsBearerContextRequest::new();
        req.new_eps_qos = Some(nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(
            qci, g,
        )));
        req.tft = Some(nasx::NasTrafficFlowTemplate::new(tft));
        let nas = self
            .nas_bytes(cp, id, &NasEpsMessage::new_esm(req, ebi, 0), false)
            .ok_or(MmeError::NasEncode)?;
        if let Some(u) = self.ue_mut(cp, id) {
            u.pending_bearers.push(ebi);
        }
        let m = pepc_s1ap::ERabModify {
            id: ebi,
            qci,
            arp,
            gbr: gbr_qos(qci, mbr, gbr),
            nas_pdu: nas,
        };
        self.send_erab_modify(id, (assoc, enb_ue_id), m, None, out);
        Ok(())
    }

    /// Dedicated bearer deactivation: E-RAB Release with Deactivate EPS Bearer Context Request.
    pub fn deactivate_bearer(
        &mut self,
        imsi: u64,
        ebi: u8,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let id = self.index.by_imsi(imsi).ok_or(MmeError::UnknownUe)?;
        self.deactivate(cp, id, ebi, 0, out)
    }

    /// Deactivate dedicated bearer `ebi` (Deactivate EPS Bearer Context Request #36 in
    /// E-RAB Release Command) with procedure transaction `pti`.
    pub(crate) fn deactivate(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        ebi: u8,
        pti: u8,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let u = self.ue(cp, id).ok_or(MmeError::UnknownUe)?;
        let (Some(slot), Some(ConnKey { assoc, enb_ue_id })) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        let ctx = cp.ue(slot).ok_or(MmeError::UnknownUe)?;
        if ctx.bearer(ebi).is_none() || ctx.pdn_by_default_ebi(ebi).is_some() {
            return Err(MmeError::NoBearer(ebi));
        }
        let req = nasx::NasDeactivateEpsBearerContextRequest::new(nasx::NasEsmCause::new(
            EsmCause::RegularDeactivation.into(),
        ));
        let nas = self
            .nas_bytes(cp, id, &NasEpsMessage::new_esm(req, ebi, pti), false)
            .ok_or(MmeError::NasEncode)?;
        self.end_bearer(cp, id, ebi);
        warn_cp(
            id,
            format_args!("removal of bearer {ebi}"),
            cp.remove_bearer(slot, ebi),
        );
        self.send(
            assoc,
            Some(id),
            ERabReleaseCommand {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![pepc_s1ap::ERabCause {
                    id: ebi,
                    cause: Cause::NAS_NORMAL_RELEASE,
                }],
                nas_pdu: Some(nas),
            }
            .into(),
            out,
        );
        Ok(())
    }

    /// Checks shared by UE-requested bearer resource allocation and modification:
    /// counts the request; the UE must be connected (#31 otherwise) and the PTI
    /// assigned (#81, TS 24.301 §7.3.1). Returns the UE's slice slot.
    pub(crate) fn bearer_request_slot(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pti: u8,
    ) -> Result<u32, EsmCause> {
        self.stats.bearer_resource_allocations += 1;
        let u = self
            .ue(cp, id)
            .ok_or(EsmCause::RequestRejectedUnspecified)?;
        let (Some(slot), Some(_)) = (u.slot, u.conn) else {
            return Err(EsmCause::RequestRejectedUnspecified);
        };
        if pti == 0 || pti == 0xff {
            return Err(EsmCause::InvalidPtiValue);
        }
        Ok(slot)
    }

    /// UE-requested bearer resource allocation (TS 24.301 §6.5.3): a dedicated bearer
    /// with the requested QoS and the aggregate's packet filters, activated with the
    /// request's PTI. `Err` is the ESM cause of the Bearer Resource Allocation Reject.
    pub(crate) fn bearer_resource_allocation(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pti: u8,
        r: &nasx::NasBearerResourceAllocationRequest,
        out: &mut Vec<Output>,
    ) -> Result<(), EsmCause> {
        let slot = self.bearer_request_slot(cp, id, pti)?;
        let linked = r.linked_eps_bearer_identity.bearer_identity();
        let ctx = cp.ue(slot).ok_or(EsmCause::RequestRejectedUnspecified)?;
        if ctx.pdn_by_default_ebi(linked).is_none() {
            return Err(EsmCause::InvalidEpsBearerIdentity);
        }
        let (qci, rates) = nasx::parse_eps_qos(&r.required_traffic_flow_qos.value)
            .ok_or(EsmCause::EpsQosNotAccepted)?;
        // GBR QCIs need their bit rates (TS 23.203 Table 6.1.7); none is a bad request.
        let gbr_qci = (1..=4).contains(&qci);
        let rates = match (gbr_qci, rates) {
            (true, Some(r)) if r.2 > 0 || r.3 > 0 => Some(r),
            (true, _) => return Err(EsmCause::EpsQosNotAccepted),
            (false, r) => r,
        };
        if !(1..=9).contains(&qci) {
            return Err(EsmCause::EpsQosNotAccepted);
        }
        if !self.cfg.ue_requested_qcis.contains(&qci) {
            return Err(EsmCause::RequestRejectedByGw); // refused by the P-GW policy
        }
        // Every cause nasx gives is in the table; 111 would only cover one it might add.
        let tft = nasx::network_tft_from_aggregate(&r.traffic_flow_aggregate)
            .map_err(|c| EsmCause::try_from(c).unwrap_or(EsmCause::ProtocolErrorUnspecified))?;
        if free_ebi(ctx).is_none() {
            return Err(EsmCause::MaximumEpsBearersReached);
        }
        let (mu, md, gu, gd) = rates.unwrap_or((0, 0, 0, 0));
        let (mbr, gbr) = if gbr_qci {
            // MBR at least GBR.
            ((mu.max(gu), md.max(gd)), (gu, gd))
        } else {
            ((0, 0), (0, 0))
        };
        let qos = DedicatedQos {
            qci,
            arp: Arp::default(),
            mbr,
            gbr,
        };
        self.dedicated(cp, id, linked, qos, pti, tft, out)
            .map(|_| ())
            .map_err(|e| match e {
                MmeError::Busy => EsmCause::MaximumEpsBearersReached,
                MmeError::Control(_) => EsmCause::InsufficientResources,
                _ => EsmCause::RequestRejectedUnspecified,
            })
    }

    /// UE-requested bearer resource modification (TS 24.301 §6.5.4), release case: a
    /// traffic flow aggregate deleting the TFT (or its packet filters) of a dedicated
    /// bearer deactivates that bearer with the request's PTI. Other modifications are
    /// refused with #31. `Err` is the ESM cause of the reject.
    pub(crate) fn bearer_resource_modification(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pti: u8,
        r: &nasx::NasBearerResourceModificationRequest,
        out: &mut Vec<Output>,
    ) -> Result<(), EsmCause> {
        let slot = self.bearer_request_slot(cp, id, pti)?;
        let ebi = r.eps_bearer_identity_for_packet_filter.bearer_identity();
        let ctx = cp.ue(slot).ok_or(EsmCause::RequestRejectedUnspecified)?;
        if ctx.bearer(ebi).is_none() {
            return Err(EsmCause::InvalidEpsBearerIdentity);
        }
        let op = nasx::tft_operation(&r.traffic_flow_aggregate.value)
            .ok_or(EsmCause::SemanticErrorInTftOperation)?;
        // 2: delete existing TFT, 5: delete packet filters (all of a dedicated bearer's
        // filters going means the bearer goes, TS 24.301 §6.5.4.3).
        if op != 2 && op != 5 {
            return Err(EsmCause::RequestRejectedUnspecified);
        }
        if ctx.pdn_by_default_ebi(ebi).is_some() {
            // A default bearer is released by PDN disconnect only.
            return Err(EsmCause::RequestRejectedByGw);
        }
        self.deactivate(cp, id, ebi, pti, out)
            .map_err(|_| EsmCause::RequestRejectedUnspecified)
    }
}

/// Remove the UE's bearers not in `kept` (a PDN connection whose default bearer is not
/// kept goes whole); returns the EBIs removed. `None` (nothing removed) when no PDN
/// connection's default bearer is kept: the UE would be left without one.
pub(crate) fn release_unlisted(cp: &mut ControlPlane, slot: u32, kept: &[u8]) -> Option<Vec<u8>> {
    let ctx = cp.ue(slot)?;
    if !ctx.pdns.iter().any(|p| kept.contains(&p.default_ebi)) {
        return None;
    }
    let gone_pdns: Vec<u8> = ctx
        .pdns
        .iter()
        .map(|p| p.default_ebi)
        .filter(|e| !kept.contains(e))
        .collect();
    let mut released = vec![];
    for d in gone_pdns {
        if let Ok(ebis) = cp.remove_pdn(slot, d) {
            released.extend(ebis);
        }
    }
    let gone: Vec<u8> = cp
        .ue(slot)?
        .bearers
        .iter()
        .map(|b| b.ebi)
        .filter(|e| !kept.contains(e))
        .collect();
    for e in gone {
        if cp.remove_bearer(slot, e).is_ok() {
            released.push(e);
        }
    }
    Some(released)
}

/// The S1AP GBR QoS of a GBR QCI (1-4; `None` for the others): MBR and GBR, UL and DL.
fn gbr_qos(qci: u8, mbr: (u64, u64), gbr: (u64, u64)) -> Option<pepc_s1ap::GbrQos> {
    (qci <= 4).then_some(pepc_s1ap::GbrQos {
        mbr_dl: mbr.1,
        mbr_ul: mbr.0,
        gbr_dl: gbr.1,
        gbr_ul: gbr.0,
    })
}

/// The lowest EPS bearer identity the UE does not use (5..=15).
pub(crate) fn free_ebi(ctx: &pepc_slice::context::UeContext) -> Option<u8> {
    (pepc_slice::context::FIRST_EBI..=15).find(|e| ctx.bearer(*e).is_none())
}
