//! S1-based handover (TS 23.401 §5.5.1.2; TS 36.413 §8.4.1-§8.4.3): Handover Required,
//! Request Acknowledge, Failure and Notify.

use crate::prelude::*;

impl Mme {
    pub(crate) fn ho_required(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: HandoverRequired,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        let prep_fail = |s: &mut Self, out: &mut Vec<Output>, cause| {
            let why = ProcFailure::S1ap(cause);
            s.stats.procedures.at_once(Proc::S1Handover, Err(why));
            s.send(
                assoc,
                Some(id),
                HandoverPreparationFailure {
                    mme_ue_id: id,
                    enb_ue_id: m.enb_ue_id,
                    cause,
                }
                .into(),
                out,
            );
        };
        let target = match &m.target {
            pepc_s1ap::TargetId::Enb { global_enb_id, .. } => {
                self.enb_by_gid.get(global_enb_id).copied()
            }
            _ => None,
        };
        let Some(target) = target else {
            return prep_fail(self, out, Cause::UNKNOWN_TARGET_ID);
        };
        // The UE's entry, found once: its signaling part and, by slot, its bearers.
        let Some(entry) = self.entry_of(id) else {
            return prep_fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        let Some(u) = cp.signaling(entry) else {
            return prep_fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        let (Some(slot), true) = (u.slot, u.sec.is_some()) else {
            return prep_fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        let Some(ctx) = cp.ue(slot) else {
            return prep_fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        let erabs = ctx
            .bearers
            .iter()
            .map(|b| pepc_s1ap::ERab {
                id: b.ebi,
                qci: b.qci,
                arp: b.arp,
                gbr: gbr_of(b),
                transport: self.cfg.s1u_addr,
                teid: b.teid_ul,
                nas_pdu: None,
            })
            .collect();
        let Some(u) = cp.signaling_mut(entry) else {
            return prep_fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        let caps = sec_caps(&u.ue_net_cap);
        let ambr = pepc_s1ap::Ambr {
            dl: u.ambr.1,
            ul: u.ambr.0,
        };
        let Some(sc) = super::next_nh(u) else {
            return prep_fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        let req = HandoverRequest {
            mme_ue_id: id,
            handover_type: m.handover_type,
            cause: m.cause,
            ue_ambr: ambr,
            erabs,
            container: m.container.clone(),
            ue_security_capabilities: caps,
            security_context: sc,
        };
        self.stats.procedures.start(&mut u.open, Proc::S1Handover);
        u.handover = Some(Box::new(HoState {
            target_assoc: target,
            target_enb_ue_id: None,
            admitted: vec![],
            source: ConnKey::new(assoc, m.enb_ue_id),
            started: self.now,
        }));
        self.send(target, Some(id), req.into(), out);
    }

    pub(crate) fn ho_request_ack(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: HandoverRequestAcknowledge,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        let Some(h) = self
            .ue_mut(cp, id)
            .and_then(|u| u.handover.as_mut())
            .filter(|h| h.target_assoc == assoc)
        else {
            self.stats.unknown_ue_ids += 1;
            self.error_indication(
                assoc,
                "Handover Request Acknowledge",
                Some(id),
                Some(m.enb_ue_id),
                Cause::UNKNOWN_MME_UE_S1AP_ID,
                out,
            );
            return;
        };
        h.target_enb_ue_id = Some(m.enb_ue_id);
        h.admitted = m.admitted.clone();
        let ConnKey {
            assoc: sa,
            enb_ue_id: se,
        } = h.source;
        self.index.link_conn(ConnKey::new(assoc, m.enb_ue_id), id);
        let cmd = HandoverCommand {
            mme_ue_id: id,
            enb_ue_id: se,
            handover_type: 0,
            erabs_forwarding: vec![],
            erabs_to_release: m.failed.clone(),
            container: m.container,
        };
        self.send(sa, Some(id), cmd.into(), out);
    }

    pub(crate) fn ho_failure(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: HandoverFailure,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        // Only the target eNB the request went to can refuse it.
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        if u.handover.as_ref().is_none_or(|h| h.target_assoc != assoc) {
            self.stats.unknown_ue_ids += 1;
            return;
        }
        let Some(h) = u.handover.take() else {
            return;
        };
        let why = ProcFailure::S1ap(m.cause);
        self.stats
            .procedures
            .fail(&mut u.open, Proc::S1Handover, why);
        self.send(
            h.source.assoc,
            Some(id),
            HandoverPreparationFailure {
                mme_ue_id: id,
                enb_ue_id: h.source.enb_ue_id,
                cause: m.cause,
            }
            .into(),
            out,
        );
    }

    pub(crate) fn ho_notify(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: HandoverNotify,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        // The UE's entry, found once: its signaling part and, by slot, its session.
        let Some(entry) = self.entry_of(id) else {
            return;
        };
        let Some((h, slot)) = cp
            .signaling_mut(entry)
            .and_then(|u| Some((u.handover.take()?, u.slot)))
        else {
            return;
        };
        if let Some(s) = slot {
            for a in &h.admitted {
                warn_cp(
                    id,
                    format_args!("eNB tunnel of bearer {}", a.id),
                    cp.set_enb_tunnel(s, a.id, a.transport, a.teid),
                );
            }
            // Bearers the target did not admit are gone (the Handover Command listed
            // them for release).
            let admitted: Vec<u8> = h.admitted.iter().map(|a| a.id).collect();
            if release_unlisted(cp, s, &admitted).is_none() {
                tracing::warn!("UE {id}: target admitted no default bearer");
            }
        }
        let Some(u) = cp.signaling_mut(entry) else {
            return;
        };
        let mut cx = self.cx(out);
        let new = ConnKey::new(assoc, m.enb_ue_id);
        u.conn = Some(new);
        u.old_conn = Some(h.source);
        u.tai = m.tai;
        u.ecgi = m.ecgi;
        cx.index.link_conn(new, id);
        cx.stats.s1_handovers += 1;
        cx.stats.procedures.succeed(&mut u.open, Proc::S1Handover);
        cx.stats
            .handover_latency
            .observe(cx.now.saturating_duration_since(h.started));
        cx.procedure_done(id);
        cx.send(
            h.source.assoc,
            Some(id),
            UeContextReleaseCommand {
                ids: UeS1apIds::Pair {
                    mme_ue_id: id,
                    enb_ue_id: h.source.enb_ue_id,
                },
                cause: Cause::SUCCESSFUL_HANDOVER,
            }
            .into(),
        );
    }
}
