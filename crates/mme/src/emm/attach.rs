//! Attach (TS 24.301 §5.5.1, TS 23.401 §5.3.2): Attach Request, the subscriber's profile,
//! supersession of an older context of the same subscriber, Attach Reject (the accept is
//! sent from `create_session` in esm/pdn.rs).

use crate::prelude::*;

impl Mme {
    pub(crate) fn attach_request(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        r: nasx::NasAttachRequest,
        verified: bool,
        out: &mut Vec<Output>,
    ) {
        let digest = attach_digest(&r);
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return;
        };
        let Some(next) = attach_start(&mut cx, u, &r, digest, verified) else {
            return;
        };
        match next {
            AttachNext::Resumed(imsi) => {
                self.adopt_subscriber(cp, id, imsi, true, out);
                // Secured already: Update Location follows (TS 23.401 §5.3.2.1 step 8).
                self.security_established(cp, id, Resume::Attach, out);
            }
            AttachNext::Authenticate(imsi) => self.start_auth(cp, id, imsi, digest, false, out),
            AttachNext::Guti(t) => {
                // Another UE's context, known by the GUTI we gave it (restored first
                // if it is still in a dead process's checkpoints).
                self.restore_tmsi_first(cp, t, out);
                let known = self.ue_by_tmsi(cp, t).filter(|o| *o != id);
                match known.and_then(|o| self.ue(cp, o).and_then(|u| u.imsi)) {
                    // A GUTI we allocated: re-authenticate the known subscriber.
                    Some(imsi) => self.start_auth(cp, id, imsi, digest, false, out),
                    None => {
                        if let Some((mut cx, u)) = self.split(cp, id, out) {
                            identity_request(&mut cx, u);
                        }
                    }
                }
            }
            AttachNext::Identify => {
                if let Some((mut cx, u)) = self.split(cp, id, out) {
                    identity_request(&mut cx, u);
                }
            }
        }
    }

    /// Retire the older context `old` of a subscriber that attaches again. Without an
    /// S1 connection it goes at once. With one, its MME UE S1AP ID stays valid until the
    /// eNB answers the release (TS 36.413 §8.3.3): the UE Context Release Complete, on
    /// another SCTP stream than the new Initial UE Message, may well arrive after it,
    /// and must not meet an Error Indication (unknown MME UE S1AP ID). A release already
    /// under way (switch-off detach, then re-attach) is not commanded twice.
    pub(crate) fn supersede(&mut self, cp: &mut ControlPlane, old: u32, out: &mut Vec<Output>) {
        self.drop_session(cp, old);
        let Some(o) = self.ue_mut(cp, old) else {
            return;
        };
        let Some(ConnKey { assoc, enb_ue_id }) = o.conn else {
            self.remove_ue(cp, old, false);
            return;
        };
        let commanded = matches!(o.proc, Procedure::ExpectReleaseComplete { .. });
        // The procedure's own state (a new M-TMSI, a vector, keys) goes with it.
        let pending_tmsi = match o.proc {
            Procedure::ExpectGutiReallocComplete { m_tmsi } => Some(m_tmsi),
            _ => None,
        };
        o.superseded = true;
        o.emm = Emm_::Deregistered;
        o.proc = Procedure::ExpectReleaseComplete { then_remove: true };
        // Nothing of the subscriber stays here: no keys (so nothing is parked at the
        // release), no timers, no identities that could find this context again.
        o.sec = None;
        o.nh = None;
        o.retx = None;
        o.handover = None;
        o.nas_timer = None;
        o.paging_timer = None;
        o.reach_timer = None;
        o.guard_timer = None;
        o.pending_bearers.clear();
        o.esm_info_flag = false;
        let imsi = o.imsi.take();
        let tmsis = [Some(std::mem::take(&mut o.m_tmsi)), pending_tmsi];
        if let Some(i) = imsi {
            if self.index.is_imsi_of(i, old) {
                self.index.unlink_imsi(i);
                if self.cfg.checkpoints {
                    // The new context checkpoints itself once registered.
                    self.forgotten.push(i);
                }
            }
        }
        for t in tmsis.into_iter().flatten() {
            self.index.unlink_tmsi_of(t, old);
        }
        tracing::debug!("UE {old} superseded by a new attach; awaiting its release complete");
        let at = self.now + self.cfg.release_guard;
        self.arm(cp, old, TimerKind::Guard, at);
        if !commanded {
            self.send(
                assoc,
                Some(old),
                UeContextReleaseCommand {
                    ids: UeS1apIds::Pair {
                        mme_ue_id: old,
                        enb_ue_id,
                    },
                    cause: Cause::NAS_NORMAL_RELEASE,
                }
                .into(),
                out,
            );
        }
    }

    /// Make `id` a context of subscriber `imsi`, whose subscription data is asked of
    /// the HSS next. An older, secured context of the subscriber stays as it is until
    /// this one is secured too ([`Mme::commit_subscriber`]; TS 23.401 §5.3.2.1 deletes
    /// it after authentication), so an Attach Request anyone can send with someone's
    /// identity changes nothing of theirs; an older one without security (an attach
    /// that did not get that far) has nothing to keep and goes now. `claim`: the IMSI
    /// was learned other than by its route (identification, a parked context), so the
    /// node is told once secured.
    pub(crate) fn adopt_subscriber(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        imsi: u64,
        claim: bool,
        out: &mut Vec<Output>,
    ) {
        self.restore_imsi_first(cp, imsi, out);
        match self.index.by_imsi(imsi) {
            Some(old) if old != id => {
                if self.ue(cp, old).is_none_or(|u| u.sec.is_none()) {
                    self.supersede(cp, old, out);
                    self.index.link_imsi(imsi, id);
                }
            }
            Some(_) => {}
            None => {
                self.index.link_imsi(imsi, id);
            }
        }
        if let Some(u) = self.ue_mut(cp, id) {
            u.imsi = Some(imsi);
            u.claim_imsi = claim;
        }
    }

    /// The attach of context `id` is secured: it becomes the subscriber's context,
    /// an older one here is superseded, and one in another slice too (by the node,
    /// told by [`Output::ClaimImsi`]).
    pub(crate) fn commit_subscriber(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        out: &mut Vec<Output>,
    ) {
        let Some((imsi, claim)) = self.ue_mut(cp, id).and_then(|u| {
            let c = std::mem::take(&mut u.claim_imsi);
            u.imsi.map(|i| (i, c))
        }) else {
            return;
        };
        if let Some(old) = self.index.link_imsi(imsi, id) {
            if old != id {
                self.supersede(cp, old, out);
            }
        }
        if claim {
            self.claim(imsi, out);
        }
    }

    pub(crate) fn attach_reject(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        cause: EmmCause,
        out: &mut Vec<Output>,
    ) {
        if let Some((mut cx, u)) = self.split(cp, id, out) {
            attach_reject(&mut cx, u, cause);
        }
    }

    /// Overload control (`crate::overload`): the slice is congested, so a new
    /// non-emergency attach gets #22 with T3346 (TS 24.301 §5.5.1.2.5) from a
    /// short-lived context, without the HSS or any crypto; the UE backs off.
    pub(crate) fn congestion_reject(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        m: &InitialUeMessage,
        out: &mut Vec<Output>,
    ) {
        let Some(id) = self.new_context(cp, assoc, m.enb_ue_id, m.tai, m.ecgi, false) else {
            return self.refuse_initial(assoc, m, out);
        };
        self.stats.congestion_rejects += 1;
        // Spread over 3/4..5/4 of the configured value (TS 23.401 §4.3.7.4.2.4: the
        // deferred requests must not come back synchronised).
        let base = self.cfg.overload.t3346;
        let spread = (u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 1001;
        let t = base.mul_f64(0.75 + spread as f64 / 2000.0);
        let t3346 = crate::overload::t3346_encodable(t);
        let mut rej =
            nasx::NasAttachReject::new(nasx::NasEmmCause::new(EmmCause::Congestion.into()));
        rej.t3346_value = nasx::NasGprsTimer2::from_seconds(t3346).ok();
        if let Some((mut cx, u)) = self.split(cp, id, out) {
            cx.stats.procedures.start(&mut u.open, Proc::Attach);
            send_attach_reject(&mut cx, u, rej);
        }
    }

    /// No context can be had for a new UE (its slots are full): the eNB is told with an
    /// Error Indication and releases its side; nothing is kept here.
    pub(crate) fn refuse_initial(
        &mut self,
        assoc: AssocId,
        m: &InitialUeMessage,
        out: &mut Vec<Output>,
    ) {
        self.error_indication(
            assoc,
            "Initial UE Message",
            None,
            Some(m.enb_ue_id),
            Cause::CONTROL_PROCESSING_OVERLOAD,
            out,
        );
    }
}

/// What an Attach Request leads to once checked against the UE's context.
enum AttachNext {
    /// Verified with a parked context of subscriber `imsi`: no identity, AKA or SMC.
    Resumed(u64),
    /// By IMSI: AKA for the subscriber.
    Authenticate(u64),
    /// By a GUTI of ours with M-TMSI `t`: the subscriber of the context it names, if any.
    Guti(u32),
    /// By a GUTI we cannot resolve: identification (§5.4.4).
    Identify,
}

/// The Attach Request `r` (digest `digest`) on `u`'s context: a repetition while the
/// HSS is asked is dropped (§5.5.1.2.7 e), a malformed one rejected (`None`); else the
/// request's parameters go into the context and the identity says what follows.
fn attach_start(
    cx: &mut Cx<'_>,
    u: &mut Ue,
    r: &nasx::NasAttachRequest,
    digest: u16,
    verified: bool,
) -> Option<AttachNext> {
    if u.proc.awaits_hss() && u.proc.hss_attach() == digest {
        // The same Attach Request again while the HSS is asked: the attach goes on
        // and this one is not treated further (TS 24.301 §5.5.1.2.7 e). A
        // different one aborts it and is served; the pending answer is then late.
        cx.stats.nas_dropped_awaiting_hss += 1;
        tracing::debug!(
            "UE {}: repeated Attach Request while the HSS is asked, ignored",
            u.id
        );
        return None;
    }
    if u.proc.awaits_hss() {
        u.proc = Procedure::Idle; // the request pending is abandoned
    }
    cx.stats.attach_requests += 1;
    cx.stats.procedures.start(&mut u.open, Proc::Attach);
    let esm = r.esm_message_container.decode_as_esm_message().ok();
    u.started = Some(cx.now);
    u.ue_net_cap.clear();
    u.ue_net_cap
        .extend_from_slice(&r.ue_network_capability.value);
    u.emm = Emm_::Deregistered;
    if let Some(NasEpsMessage::Esm(h, Esm::PdnConnectivityRequest(p))) = &esm {
        u.pti = h.procedure_transaction_identity;
        u.apn = p
            .access_point_name
            .as_ref()
            .map(|a| nasx::apn_string(&a.value))
            .unwrap_or_default();
        if p.esm_information_transfer_flag
            .is_some_and(|f| f.value & 1 == 1)
        {
            u.apn.clear();
            u.esm_info_flag = true;
        }
    } else {
        attach_reject(cx, u, EmmCause::InvalidMandatoryInformation);
        return None;
    }
    // Verified with a parked context: the subscriber is known and the UE holds the
    // keys, so identity, AKA and SMC are skipped (TS 24.301 §5.5.1.2.3).
    if std::mem::take(&mut u.resumed) {
        if let (true, Some(imsi)) = (verified, u.imsi) {
            cx.stats.parked_contexts_reused += 1;
            return Some(AttachNext::Resumed(imsi));
        }
    }
    match nasx::parse_identity(&r.eps_mobile_identity.value) {
        Identity::Imsi(imsi) => Some(AttachNext::Authenticate(imsi)),
        Identity::Guti(plmn, g, c, t) => {
            let ours = plmn == cx.cfg.plmn.0 && g == cx.cfg.mme_group_id && c == cx.cfg.mme_code;
            Some(if ours {
                AttachNext::Guti(t)
            } else {
                AttachNext::Identify
            })
        }
        Identity::Other => {
            attach_reject(cx, u, EmmCause::InvalidMandatoryInformation);
            None
        }
    }
}

/// Identification (§5.4.4): an Identity Request for the IMSI, under T3470.
fn identity_request(cx: &mut Cx<'_>, u: &mut Ue) {
    u.proc = Procedure::ExpectIdentity;
    let req = nasx::NasIdentityRequest::new(nasx::NasIdentityType2::new(1));
    let t = cx.cfg.t3470;
    cx.send_nas(u, NasEpsMessage::new_emm(req), false, Some(t));
}

/// The Identity Response to an Identity Request (§5.4.4.4): the IMSI, or the attach
/// is rejected (`None`).
pub(crate) fn identity_response(
    cx: &mut Cx<'_>,
    u: &mut Ue,
    r: &nasx::NasIdentityResponse,
) -> Option<u64> {
    if !matches!(u.proc, Procedure::ExpectIdentity) {
        return None;
    }
    u.stop_nas_timer();
    match nasx::parse_identity(&r.mobile_identity.value) {
        Identity::Imsi(imsi) => Some(imsi),
        _ => {
            attach_reject(cx, u, EmmCause::InvalidMandatoryInformation);
            None
        }
    }
}

/// Attach Reject with `cause`; the context is released.
pub(crate) fn attach_reject(cx: &mut Cx<'_>, u: &mut Ue, cause: EmmCause) {
    let rej = nasx::NasAttachReject::new(nasx::NasEmmCause::new(cause.into()));
    send_attach_reject(cx, u, rej);
}

pub(crate) fn send_attach_reject(cx: &mut Cx<'_>, u: &mut Ue, rej: nasx::NasAttachReject) {
    cx.stats.attach_rejects += 1;
    let why = ProcFailure::Rejected(rej.emm_cause.value);
    cx.stats.procedures.fail(&mut u.open, Proc::Attach, why);
    u.proc = Procedure::Idle;
    // A reject to an unauthenticated UE is sent plain; one after security mode
    // (the HSS refused the Update Location, say) goes protected.
    if u.emm == Emm_::Deregistered && !u.nas_secured {
        u.sec = None;
    }
    cx.send_nas(u, NasEpsMessage::new_emm(rej), false, None);
    cx.release(u, Cause::NAS_UNSPECIFIED, true);
}

/// A digest of the IEs of an Attach Request, to recognise a repeated one; never 0
/// (which stands for "unknown"). 16 bits, kept in the wait state: a different
/// request taken for a repetition (1 in 65535) only lets the first attach go on.
fn attach_digest(r: &nasx::NasAttachRequest) -> u16 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = foldhash::fast::FixedState::with_seed(0x6174_7461_6368).build_hasher();
    r.eps_attach_type.value.hash(&mut h);
    r.nas_key_set_identifier.value.hash(&mut h);
    r.eps_mobile_identity.value.hash(&mut h);
    r.ue_network_capability.value.hash(&mut h);
    r.esm_message_container.value.hash(&mut h);
    (h.finish() as u16).max(1)
}
