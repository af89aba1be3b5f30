//! S1AP routing (TS 36.413 §8): where an S1AP PDU goes. Initial UE Message (§8.6.2.1) and
//! the UE-associated messages handled in place: Uplink NAS Transport (§8.6.2.3), Initial
//! Context Setup response (§8.3.1), UE Context Release Request/Complete (§8.3.2, §8.3.3),
//! NAS Non Delivery (§8.6.2.4), E-RAB responses (§8.2), Handover Cancel (§8.4.5), eNB
//! Status Transfer (§8.4.6).

use crate::gate::{self, Kind, SecState, Verdict};
use crate::prelude::*;

/// RRC establishment causes (TS 36.331 §6.2.2, as S1AP carries them).
const RRC_EMERGENCY: u8 = 0;
const RRC_MT_ACCESS: u8 = 2;

impl Mme {
    pub(crate) fn on_s1ap(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        _stream: u16,
        bytes: &[u8],
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        self.enbs.entry(assoc).or_insert(Enb {
            out_streams: 1,
            global_id: None,
        });
        let msg = match S1apMessage::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.s1ap_decode_errors += 1;
                crate::enb::undecodable_s1ap(assoc, &e, out);
                return;
            }
        };
        use S1apMessage as M;
        match msg {
            M::InitialUeMessage(m) => self.initial_ue(cp, assoc, m, out),
            M::HandoverRequestAcknowledge(m) => self.ho_request_ack(cp, assoc, m, out),
            M::HandoverFailure(m) => self.ho_failure(cp, assoc, m, out),
            // Comes from the target eNB, which has no connection for the UE yet.
            M::PathSwitchRequest(m) => self.path_switch(cp, assoc, m, out),
            other => {
                let (Some(mme_id), enb_id) = (other.mme_ue_id(), other.enb_ue_id()) else {
                    pepc_ratelog::peer_warn!(
                        pepc_ratelog::Kind::S1apUnexpected,
                        "assoc {assoc}: ignoring {}",
                        other.name()
                    );
                    return;
                };
                let Some(ue) = self.ue(cp, mme_id) else {
                    self.stats.unknown_ue_ids += 1;
                    self.error_indication(
                        assoc,
                        other.name(),
                        Some(mme_id),
                        enb_id,
                        Cause::UNKNOWN_MME_UE_S1AP_ID,
                        out,
                    );
                    return;
                };
                // The message must come from one of the UE's S1 connections.
                let pair = enb_id.map(|e| ConnKey::new(assoc, e));
                let known = |c: Option<ConnKey>| c.is_some() && c == pair;
                let from_target = ue.handover.as_ref().is_some_and(|h| {
                    h.target_assoc == assoc
                        && (h.target_enb_ue_id == enb_id || h.target_enb_ue_id.is_none())
                });
                let from_x2_source = ue
                    .x2_source
                    .is_some_and(|(c, until)| known(Some(c)) && now < until);
                let ok = known(ue.conn)
                    || known(ue.old_conn)
                    || from_x2_source
                    || from_target
                    || matches!(other, M::PathSwitchRequest(_));
                if !ok {
                    self.stats.unknown_ue_ids += 1;
                    self.error_indication(
                        assoc,
                        other.name(),
                        Some(mme_id),
                        enb_id,
                        Cause::UNKNOWN_ENB_UE_S1AP_ID,
                        out,
                    );
                    return;
                }
                // A context superseded only waits for its release; a message from the
                // source of a finished X2 handover is the source's late answer.
                let superseded = ue.superseded;
                let from_x2_source =
                    pair.is_some() && ue.conn != pair && ue.x2_source.map(|(c, _)| c) == pair;
                let _span = crate::mme::ue_span(mme_id, enb_id, ue.proc.name()).entered();
                tracing::trace!("{}", other.name());
                self.ue_message(cp, mme_id, assoc, other, (superseded, from_x2_source), out);
            }
        }
    }

    pub(crate) fn initial_ue(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: InitialUeMessage,
        out: &mut Vec<Output>,
    ) {
        let _span = crate::mme::ue_span(0, Some(m.enb_ue_id), "initial UE message").entered();
        // Service Request: short header, the UE is known by S-TMSI.
        if m.nas_pdu
            .first()
            .is_some_and(|b| b >> 4 >= 12 && b & 0x0f == 7)
        {
            if let Some(s) = m.s_tmsi {
                self.restore_tmsi_first(cp, s.m_tmsi, out);
            }
            let id = m.s_tmsi.and_then(|s| self.ue_by_tmsi(cp, s.m_tmsi));
            self.service_request(cp, id, assoc, m, out);
            return;
        }
        // Overload control: a congested slice turns new non-emergency attaches away
        // (emergency and mobile-terminated access still pass, TS 23.401 §4.3.7.4.1).
        let attach = !matches!(m.rrc_cause, RRC_EMERGENCY | RRC_MT_ACCESS)
            && crate::overload::non_emergency_attach(&m.nas_pdu);
        if attach && self.congested() {
            return self.congestion_reject(cp, assoc, &m, out);
        }
        // A UE we know (by S-TMSI) that starts a new connection: its context, if the
        // message passes the security gate.
        if let Some(s) = m.s_tmsi.filter(|s| s.mmec == self.cfg.mme_code) {
            self.restore_tmsi_first(cp, s.m_tmsi, out);
        }
        let known = m
            .s_tmsi
            .filter(|s| s.mmec == self.cfg.mme_code)
            .and_then(|s| self.ue_by_tmsi(cp, s.m_tmsi));
        if let Some(id) = known {
            return self.initial_known(cp, id, assoc, m, out);
        }
        let id = match self.new_ue(cp, assoc, m.enb_ue_id, m.tai, m.ecgi) {
            Some(id) => id,
            // At the bound on contexts awaiting authentication, an attach is still
            // told to back off (#22 + T3346) rather than left to time out.
            None if attach && self.admission.crowded.is_some() => {
                return self.congestion_reject(cp, assoc, &m, out);
            }
            // At a bound (unauthenticated contexts, UE slots).
            None => return self.refuse_initial(assoc, &m, out),
        };
        self.nas_in(cp, id, &m.nas_pdu, Some((m.tai, m.ecgi)), out);
    }

    /// The first message of a new connection of known UE `id` (by its S-TMSI, which
    /// anyone may have heard in paging). It is checked against the UE's context before
    /// the connection is given to it: only what the security gate lets through binds
    /// it; an unverified attach goes to a new context, an unverified TAU or detach is
    /// authenticated first, anything else is refused.
    pub(crate) fn initial_known(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        assoc: AssocId,
        m: InitialUeMessage,
        out: &mut Vec<Output>,
    ) {
        let loc = (m.tai, m.ecgi);
        let Some((msg, verified)) = self.uplink_nas(cp, id, &m.nas_pdu) else {
            return self.refuse_connection(cp, assoc, m.enb_ue_id, loc, out);
        };
        let Some(u) = self.ue(cp, id) else {
            return;
        };
        let sec = if u.sec.is_some() {
            SecState::NewConnection
        } else {
            SecState::NoContext
        };
        let idle = u.conn.is_none();
        let kind = gate::kind_of(&msg);
        match gate::gate(sec, kind, verified) {
            Verdict::Process => {
                self.attach_conn(cp, id, assoc, m.enb_ue_id, m.tai, m.ecgi);
                if let Some(s) = m.s_tmsi {
                    self.resolve_pending_guti(cp, id, s.m_tmsi);
                }
                self.dispatch(cp, id, msg, verified, Some(loc), out);
            }
            Verdict::Authenticate if kind == Kind::AttachRequest => {
                // On a new context; the known one stays as it is until that is secured.
                if let Some(new) = self.new_ue(cp, assoc, m.enb_ue_id, m.tai, m.ecgi) {
                    self.dispatch(cp, new, msg, false, Some(loc), out);
                }
            }
            // The connection is the UE's for the authentication only: no location,
            // timers or state of the context change unless it succeeds. A UE connected
            // elsewhere keeps its connection (a real one sends its TAU protected).
            Verdict::Authenticate if idle => {
                self.bind_conn(cp, id, assoc, m.enb_ue_id);
                self.authenticate_first(cp, id, kind, out);
            }
            Verdict::Authenticate | Verdict::Discard => {
                self.gate_discard(id, kind, sec);
                self.refuse_connection(cp, assoc, m.enb_ue_id, loc, out);
            }
        }
    }

    /// Release an eNB's new UE connection whose first message we do not serve: a
    /// context that holds only the connection, removed at its release.
    pub(crate) fn refuse_connection(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        enb_ue_id: u32,
        (tai, ecgi): (Tai, Ecgi),
        out: &mut Vec<Output>,
    ) {
        if let Some(tmp) = self.new_ue(cp, assoc, enb_ue_id, tai, ecgi) {
            self.release(cp, tmp, Cause::NAS_UNSPECIFIED, true, out);
        }
    }

    /// UE-associated message `msg` from one of UE `id`'s connections (`on_s1ap`
    /// checked it, and found whether the context is `superseded` and whether the
    /// message is `from_x2_source`).
    // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ue_message(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        assoc: AssocId,
        msg: S1apMessage,
        (superseded, from_x2_source): (bool, bool),
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        use S1apMessage as M;
        if superseded && !matches!(msg, M::UeContextReleaseComplete(_)) {
            // The context only waits for its release: whatever crossed our command
            // (NAS, a Release Request, responses) has nobody to go to.
            tracing::debug!("UE {id} superseded: ignoring {}", msg.name());
            return;
        }
        if from_x2_source {
            return self.x2_source_message(cp, id, msg, out);
        }
        match msg {
            M::UplinkNasTransport(m) => self.nas_in(cp, id, &m.nas_pdu, Some((m.tai, m.ecgi)), out),
            M::InitialContextSetupResponse(m) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                // The user plane is up: buffered downlink flows, nothing to page for.
                u.page_after_release = false;
                let attach = matches!(u.proc, Procedure::ExpectIcsResponse { attach: true });
                u.paging_timer = None;
                self.stats.procedures.succeed(&mut u.open, Proc::Paging);
                if !attach {
                    let l = &mut self.stats.procedures;
                    l.succeed(&mut u.open, Proc::ServiceRequest);
                }
                u.proc = if attach {
                    Procedure::ExpectAttachComplete
                } else {
                    Procedure::Idle
                };
                // A Service Request (or active-flag TAU) is done: connected.
                let started = if attach { None } else { u.started.take() };
                if let Some(s) = u.slot {
                    for t in &m.erabs {
                        warn_cp(
                            id,
                            format_args!("eNB tunnel of bearer {}", t.id),
                            cp.set_enb_tunnel(s, t.id, t.transport, t.teid),
                        );
                    }
                }
                if !attach {
                    if let Some(t0) = started {
                        self.stats
                            .service_request_latency
                            .observe(now.saturating_duration_since(t0));
                    }
                    self.procedure_done(id);
                    // Rules pushed while it was idle (it was paged for them).
                    self.apply_pending_policy(cp, id, out);
                }
            }
            M::InitialContextSetupFailure(_) => {
                let Some(u) = self.ue(cp, id) else {
                    return;
                };
                if matches!(u.proc, Procedure::ExpectIcsResponse { attach: true }) {
                    // The session goes through the slice; then the context.
                    self.drop_session(cp, id);
                    if let Some((mut cx, u)) = self.split(cp, id, out) {
                        u.stop_nas_timer();
                        cx.release(u, Cause::NAS_UNSPECIFIED, true);
                    }
                } else {
                    self.release_connection(cp, id, Cause::RADIO_UNSPECIFIED, out);
                }
            }
            // A Release Request crossing our Release Command (TS 36.413 §8.3.2): the
            // command in flight answers it; a second one would be answered with a
            // second Release Complete for an already removed context.
            M::UeContextReleaseRequest(_)
                if self
                    .ue(cp, id)
                    .is_some_and(|u| matches!(u.proc, Procedure::ExpectReleaseComplete { .. })) => {
            }
            M::UeContextReleaseRequest(m) => self.release_connection(cp, id, m.cause, out),
            M::UeContextReleaseComplete(m) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                let c = ConnKey::new(assoc, m.enb_ue_id);
                if u.old_conn == Some(c) {
                    // The source side of a finished handover.
                    u.old_conn = None;
                    self.index.unlink_conn(c);
                    return;
                }
                let remove = matches!(
                    u.proc,
                    Procedure::ExpectReleaseComplete { then_remove: true }
                ) || u.emm == Emm_::Deregistered;
                if remove {
                    self.remove_ue(cp, id, true);
                } else {
                    self.make_idle(cp, id, out);
                }
            }
            M::NasNonDeliveryIndication(m) => {
                self.stats.nas_non_delivery += 1;
                pepc_ratelog::peer_warn!(
                    pepc_ratelog::Kind::EnbReport,
                    "UE {id}: NAS not delivered ({:?}); T3450/T3460 will retransmit",
                    m.cause
                );
            }
            M::ERabSetupResponse(m) => {
                if let Some(s) = self.ue(cp, id).and_then(|u| u.slot) {
                    for t in &m.setup {
                        warn_cp(
                            id,
                            format_args!("eNB tunnel of bearer {}", t.id),
                            cp.set_enb_tunnel(s, t.id, t.transport, t.teid),
                        );
                    }
                    for f in &m.failed {
                        warn_cp(
                            id,
                            format_args!("removal of failed bearer {}", f.id),
                            cp.remove_bearer(s, f.id),
                        );
                    }
                }
            }
            M::ERabModifyResponse(_) | M::ERabReleaseResponse(_) => {}
            M::PathSwitchRequest(m) => self.path_switch(cp, assoc, m, out),
            M::HandoverRequired(m) => self.ho_required(cp, assoc, m, out),
            M::HandoverCancel(m) => {
                let handover = self.ue_mut(cp, id).and_then(|u| {
                    let why = ProcFailure::S1ap(m.cause);
                    let l = &mut self.stats.procedures;
                    l.fail(&mut u.open, Proc::S1Handover, why);
                    u.handover.take()
                });
                if let Some(h) = handover {
                    if let Some(t) = h.target_enb_ue_id {
                        self.send(
                            h.target_assoc,
                            Some(id),
                            UeContextReleaseCommand {
                                ids: UeS1apIds::Pair {
                                    mme_ue_id: id,
                                    enb_ue_id: t,
                                },
                                cause: Cause::HANDOVER_CANCELLED,
                            }
                            .into(),
                            out,
                        );
                    }
                }
                self.send(
                    assoc,
                    Some(id),
                    HandoverCancelAcknowledge {
                        mme_ue_id: id,
                        enb_ue_id: m.enb_ue_id,
                    }
                    .into(),
                    out,
                );
            }
            M::EnbStatusTransfer(m) => {
                if let Some(h) = self.ue(cp, id).and_then(|u| u.handover.as_ref()) {
                    if let Some(t) = h.target_enb_ue_id {
                        let ta = h.target_assoc;
                        self.send(
                            ta,
                            Some(id),
                            MmeStatusTransfer {
                                mme_ue_id: id,
                                enb_ue_id: t,
                                container: m.container,
                            }
                            .into(),
                            out,
                        );
                    }
                }
            }
            M::HandoverNotify(m) => self.ho_notify(cp, assoc, m, out),
            other => pepc_ratelog::peer_info!(
                pepc_ratelog::Kind::S1apUnexpected,
                "UE {id}: ignoring {}",
                other.name()
            ),
        }
    }
}
