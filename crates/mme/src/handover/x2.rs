//! X2-based handover (TS 23.401 §5.5.1.1): Path Switch Request (TS 36.413 §8.4.4) and late
//! messages from the source eNB.

use crate::prelude::*;

impl Mme {
    /// What the source eNB of an X2 handover sent before it handed the UE over, arriving
    /// after the target's Path Switch Request. The Path Switch is newer: it decided every
    /// bearer (switched ones have the target's tunnel, the others were released), and
    /// the UE's location is the target cell.
    pub(crate) fn x2_source_message(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        msg: S1apMessage,
        out: &mut Vec<Output>,
    ) {
        use S1apMessage as M;
        match msg {
            // NAS the UE sent through the source: integrity and COUNT checks as usual.
            M::UplinkNasTransport(m) => self.nas_in(cp, id, &m.nas_pdu, None, out),
            // Bearers the source set up keep the tunnel the Path Switch gave them (or
            // stay released); those it failed to set up are gone.
            M::ERabSetupResponse(m) => {
                if let Some(s) = self.ue(cp, id).and_then(|u| u.slot) {
                    for f in &m.failed {
                        // Debug: the Path Switch may have released the bearer already.
                        log_cp(
                            tracing::Level::DEBUG,
                            id,
                            format_args!("removal of failed bearer {}", f.id),
                            cp.remove_bearer(s, f.id),
                        );
                    }
                }
            }
            M::ERabModifyResponse(_)
            | M::ERabReleaseResponse(_)
            | M::UeContextModificationResponse(_)
            | M::NasNonDeliveryIndication(_) => {}
            // Anything else (a Release Request, a handover) concerns a connection the
            // UE has left.
            other => tracing::debug!("UE {id}: ignoring {} from the X2 source", other.name()),
        }
    }

    pub(crate) fn path_switch(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: PathSwitchRequest,
        out: &mut Vec<Output>,
    ) {
        let id = m.source_mme_ue_id;
        let fail = |s: &mut Self, out: &mut Vec<Output>, cause| {
            let why = ProcFailure::S1ap(cause);
            s.stats.procedures.at_once(Proc::X2Handover, Err(why));
            s.send(
                assoc,
                None,
                PathSwitchRequestFailure {
                    mme_ue_id: id,
                    enb_ue_id: m.enb_ue_id,
                    cause,
                }
                .into(),
                out,
            );
        };
        let Some(u) = self.ue(cp, id) else {
            return fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        let (Some(slot), true) = (u.slot, u.conn.is_some() && u.sec.is_some()) else {
            return fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        for t in &m.erabs {
            if cp.set_enb_tunnel(slot, t.id, t.transport, t.teid).is_err() {
                return fail(self, out, Cause::UNKNOWN_E_RAB_ID);
            }
        }
        // Bearers the target did not switch are released (TS 23.401 §5.5.1.1.2); a PDN
        // connection whose default bearer was not switched goes with all its bearers.
        let switched: Vec<u8> = m.erabs.iter().map(|t| t.id).collect();
        let Some(released) = release_unlisted(cp, slot, &switched) else {
            return fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        // The rest is the UE's context, after the slice's calls: found once.
        let Some((cx, u)) = self.split(cp, id, out) else {
            return fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        // A late accept of a released bearer (through the source) completes nothing.
        u.pending_bearers.retain(|b| !released.contains(b));
        let old = u.conn;
        if let Some(c) = old {
            cx.index.unlink_conn(c);
        }
        let new = ConnKey::new(assoc, m.enb_ue_id);
        crate::mme::lifecycle::attach_conn(
            cx.index,
            &mut cx.stats.procedures,
            u,
            new,
            (m.tai, m.ecgi),
        );
        // Not in `by_conn`: the source frees its eNB UE S1AP ID at the X2 release and
        // may give it to a new UE; late messages carry our MME UE S1AP ID anyway.
        u.x2_source = old
            .filter(|c| *c != new)
            .map(|c| (c, cx.now + X2_SOURCE_GRACE));
        let Some(sc) = super::next_nh(u) else {
            return fail(self, out, Cause::MISC_UNSPECIFIED);
        };
        self.stats.path_switches += 1;
        self.stats.procedures.at_once(Proc::X2Handover, Ok(()));
        self.procedure_done(id);
        let ack = PathSwitchRequestAcknowledge {
            mme_ue_id: id,
            enb_ue_id: m.enb_ue_id,
            ue_ambr: None,
            erabs_switched_ul: vec![],
            erabs_to_release: released
                .iter()
                .map(|e| pepc_s1ap::ERabCause {
                    id: *e,
                    cause: Cause::RADIO_UNSPECIFIED,
                })
                .collect(),
            security_context: sc,
        };
        self.send(assoc, Some(id), ack.into(), out);
    }
}

/// How long the source connection of an X2 handover stays known after the Path Switch:
/// far longer than messages in flight on another association can lag.
pub(crate) const X2_SOURCE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
