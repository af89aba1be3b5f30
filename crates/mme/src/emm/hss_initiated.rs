//! What the HSS starts (S6a, TS 29.272 §5.2.1.2 Cancel Location, §5.2.2.1 Insert
//! Subscriber Data) and what the MME tells it (§5.2.1.3 Purge UE).
//!
//! The node hands each CLR and IDR to every slice, and the one that holds the
//! subscriber acts (the node's S6a backend answers: CLA success, as §5.2.1.2.2 asks
//! even for an IMSI the MME does not know; IDA success, or
//! DIAMETER_ERROR_USER_UNKNOWN when no slice knows the IMSI):
//!
//! * Cancel Location, Cancellation-Type SUBSCRIPTION_WITHDRAWAL: network-initiated
//!   detach (TS 23.401 §5.3.8.3, TS 24.301 §5.5.2.3): a connected UE gets a Detach
//!   Request, "re-attach required" when CLR-Flags say so and "re-attach not required"
//!   otherwise, supervised by T3422; an idle UE is detached locally (§5.3.8.3 lets
//!   the MME page it; we do not: its next TAU or Service Request finds no context and
//!   is rejected with #10 "implicitly detached", which makes it attach again). The
//!   other types (the UE moved to another MME or SGSN, or attached at another MME)
//!   remove the context without NAS: the UE is served elsewhere, and a connection it
//!   still has here is released.
//! * Insert Subscriber Data: what it changed of UE-AMBR, the default bearer's QCI
//!   and ARP, and the subscribed APN (an IDR may carry only the AMBR, or only the
//!   APN-Configuration-Profile) is taken into the context (what the next attach, Service
//!   Request or PDN connection uses) and into the slice's data path at once (AMBR,
//!   bearer QoS). A connected UE with no EMM procedure under way also gets them over
//!   the air (TS 23.401 §5.3.9.2, HSS-initiated subscribed QoS modification): E-RAB
//!   Modify Request with the new UE-AMBR and the default E-RAB's QoS, carrying a
//!   Modify EPS Bearer Context Request with the new EPS QoS and APN-AMBR. An idle UE
//!   gets them with its next Initial Context Setup. The PDN connection the UE has
//!   stays on its APN: a new subscribed APN applies to the next attach.
//! * Purge UE (§5.2.1.3): sent when a context whose subscriber the HSS holds at this
//!   MME (its Update Location was answered) is deleted: at implicit detach (mobile
//!   reachable timer), after an operator's detach, when an attach that got that far
//!   fails, and for a detached UE when its parked security context goes (expired or
//!   evicted, not taken back by a re-attach), or at once after a UE-initiated detach
//!   when `MmeConfig::purge_on_detach` is set. Not after a Cancel Location (the HSS
//!   moved the subscriber), not for a UE that migrates to another slice or node, and
//!   not while a newer context of the subscriber is here.

use crate::hss::{CancellationType, HssRequest, SubscriptionUpdate};
use crate::prelude::*;

impl Mme {
    /// S6a CLR for `imsi`.
    // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn hss_cancel_location(
        &mut self,
        cp: &mut ControlPlane,
        imsi: u64,
        kind: CancellationType,
        reattach_required: bool,
        out: &mut Vec<Output>,
    ) {
        self.restore_imsi_first(cp, imsi, out);
        let Some(id) = self.index.by_imsi(imsi) else {
            return; // another slice's subscriber, or nobody's
        };
        let Some(u) = self.ue_mut(cp, id) else { return };
        // The HSS moved the subscriber itself: no Purge UE when the context goes.
        u.hss_location = false;
        self.stats.hss_cancels += 1;
        let registered = u.emm == Emm_::Registered;
        // A connection being released is as good as gone: its Release Complete
        // removes the (then deregistered) context.
        let releasing = matches!(u.proc, Procedure::ExpectReleaseComplete { .. });
        let connected = u.conn.is_some() && !releasing;
        tracing::info!("UE {id}: HSS cancelled its location ({kind:?})");
        let withdrawn = kind == CancellationType::SubscriptionWithdrawal;
        if withdrawn && registered && connected {
            // §5.5.2.3.1: detach type 1 "re-attach required", 2 "re-attach not required".
            let detach_type = if reattach_required { 1 } else { 2 };
            self.stats
                .procedures
                .start(&mut u.open, Proc::NetworkDetach);
            u.proc = Procedure::ExpectDetachAccept;
            let req =
                nasx::NasDetachRequestUeTerminated::new(nasx::NasDetachType::new(detach_type));
            let t = self.cfg.t3422;
            self.send_nas(cp, id, NasEpsMessage::new_emm(req), false, Some(t), out);
            return;
        }
        // Served elsewhere now, idle, or not registered yet: the context goes here,
        // with no NAS (an attach under way is not completed).
        self.stats.detaches += u64::from(registered);
        if registered {
            self.stats.procedures.at_once(Proc::NetworkDetach, Ok(()));
        }
        self.drop_session(cp, id);
        self.procedure_done(id);
        if let Some(u) = self.ue_mut(cp, id) {
            u.emm = Emm_::Deregistered;
            u.nas_timer = None;
            u.retx = None;
        }
        if connected {
            self.release(cp, id, Cause::NAS_DETACH, true, out);
        } else if !releasing {
            self.remove_ue(cp, id, false);
        }
    }

    /// S6a IDR for `imsi`: what changed of its subscription into its context.
    pub(crate) fn hss_insert_subscriber_data(
        &mut self,
        imsi: u64,
        upd: SubscriptionUpdate,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.restore_imsi_first(cp, imsi, out);
        let Some(id) = self.index.by_imsi(imsi) else {
            return;
        };
        if upd == SubscriptionUpdate::default() {
            return; // nothing this MME keeps changed (e.g. only ODB or MSISDN)
        }
        let apn = upd.default_apn.as_ref().map(|d| self.apn_id(&d.apn));
        let default_ambr = self.cfg.default_ambr;
        let Some(u) = self.ue_mut(cp, id) else { return };
        self.stats.hss_subscription_updates += 1;
        if let Some((ul, dl)) = upd.ambr {
            // An AMBR of 0 is no AMBR: our default applies, as at attach.
            u.ambr = if ul > 0 { (ul, dl) } else { default_ambr };
        }
        if let (Some(d), Some(apn)) = (&upd.default_apn, apn) {
            u.qci = d.qci;
            u.arp_priority = d.arp_priority;
            u.subscribed_apn = apn;
        }
        let (ambr, qci, arp_priority) = (u.ambr, u.qci, u.arp_priority);
        // A restarted node keeps the new subscription (checkpoints, when configured).
        self.procedure_done(id);
        let over_the_air = u.conn.filter(|_| matches!(u.proc, Procedure::Idle));
        tracing::info!(
                "UE {id}: subscription changed by the HSS: AMBR {}/{} bit/s, QCI {qci}, ARP {arp_priority}",
                ambr.0, ambr.1
            );
        let Some(slot) = u.slot else {
            return; // no session yet: the attach will use what is stored
        };
        let Some(ebi) = cp.ue(slot).map(|c| c.default_ebi) else {
            return;
        };
        let arp = Arp {
            priority_level: arp_priority,
            ..Arp::default()
        };
        warn_cp(id, "AMBR change", cp.set_ambr(slot, ambr.0, ambr.1));
        let mbr = cp
            .ue(slot)
            .and_then(|c| c.bearer(ebi))
            .map_or((0, 0), |b| (b.mbr_ul, b.mbr_dl));
        warn_cp(
            id,
            "default bearer QoS change",
            cp.modify_bearer_qos(slot, ebi, qci, mbr.0, mbr.1),
        );
        warn_cp(id, "ARP change", cp.set_bearer_arp(slot, ebi, arp));
        let Some(ConnKey { assoc, enb_ue_id }) = over_the_air else {
            return; // idle or busy: the next Initial Context Setup carries them
        };
        let mut req = nasx::NasModifyEpsBearerContextRequest::new();
        req.new_eps_qos = Some(nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(
            qci, None,
        )));
        req.apn_ambr =
            nasx::NasApnAggregateMaximumBitRate::from_kbps(ambr.1 / 1000, ambr.0 / 1000).ok();
        let Some(nas) = self.nas_bytes(cp, id, &NasEpsMessage::new_esm(req, ebi, 0), false) else {
            tracing::warn!("UE {id}: cannot build Modify EPS Bearer Context Request");
            return;
        };
        let m = pepc_s1ap::ERabModify {
            id: ebi,
            qci,
            arp,
            gbr: None,
            nas_pdu: nas,
        };
        let ambr = pepc_s1ap::Ambr {
            dl: ambr.1,
            ul: ambr.0,
        };
        self.send_erab_modify(id, (assoc, enb_ue_id), m, Some(ambr), out);
    }

    /// Tell the HSS that UE `id`'s subscription data is gone from this MME (PUR), if
    /// the UE was registered here (only then did the HSS record us for it).
    /// Done once: the context's later deletion sends none.
    pub(crate) fn purge_at_hss(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        let Some(u) = self.ue_mut(cp, id) else { return };
        if let (Some(imsi), true) = (u.imsi, std::mem::take(&mut u.hss_location)) {
            self.stats.hss_purges += 1;
            out.push(Output::Hss(HssRequest::Purge { imsi }));
        }
    }
}
