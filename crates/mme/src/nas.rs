//! NAS plumbing: uplink verification and decoding (TS 24.301 §4.4.4), downlink protection
//! and Downlink NAS Transport (TS 36.413 §8.6.2.2), retransmission on
//! T3450/T3460/T3470/T3422 expiry (TS 24.301 §10.2), EMM/ESM dispatch of an uplink message.

use crate::gate::{self, Kind, SecState, Verdict};
use crate::prelude::*;

impl Mme {
    /// Encode (and protect when a context is in use) a downlink NAS message for UE
    /// `id` (the ESM procedures that send it inside an S1AP request of their own).
    pub(crate) fn nas_bytes(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        msg: &NasEpsMessage,
        new_ctx: bool,
    ) -> Option<Vec<u8>> {
        let u = self.ue_mut(cp, id)?;
        crate::mme::cx::nas_bytes(&self.cfg, &mut self.dirty, u, msg, new_ctx)
    }

    /// Send a NAS message in Downlink NAS Transport; `timer` arms T3450/T3460/T3470/T3422.
    // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_nas(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        msg: NasEpsMessage,
        new_ctx: bool,
        timer: Option<std::time::Duration>,
        out: &mut Vec<Output>,
    ) {
        if let Some((mut cx, u)) = self.split(cp, id, out) {
            cx.send_nas(u, msg, new_ctx, timer);
        }
    }

    pub(crate) fn stop_nas_timer(&mut self, cp: &mut ControlPlane, id: u32) {
        if let Some(u) = self.ue_mut(cp, id) {
            u.stop_nas_timer();
        }
    }

    pub(crate) fn nas_timer_expired(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        out: &mut Vec<Output>,
    ) {
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return;
        };
        match nas_expiry(&mut cx, u) {
            Expiry::Handled => {}
            Expiry::PolicyTimeout => {
                let e = crate::pcrf::PcrfFailure::Timeout;
                self.policy_failed(cp, id, e, out)
            }
            Expiry::AbortReauth => self.abort_reauth(cp, id, ProcFailure::Timeout, out),
            Expiry::AttachLeft => {
                self.drop_session(cp, id);
                self.release(cp, id, Cause::NAS_UNSPECIFIED, true, out);
            }
        }
    }

    /// Decode an uplink NAS PDU, verifying its MAC first when a context exists.
    pub(crate) fn uplink_nas(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        bytes: &[u8],
    ) -> Option<(NasEpsMessage, bool)> {
        let first = *bytes.first()?;
        let sht = first >> 4;
        let pd = first & 0x0f;
        let u = self.ue_mut(cp, id)?;
        if pd == 7 && (1..=4).contains(&sht) {
            // SMC Complete comes under the new context.
            let ctx = match &mut u.proc {
                Procedure::ExpectSmcComplete { sec, .. } if sht == 4 => Some(&mut **sec),
                _ => u.sec.as_deref_mut(),
            };
            if let Some(ctx) = ctx {
                return match ctx.unprotect(bytes, Direction::Uplink) {
                    Ok(m) => Some((m, true)),
                    Err(UnprotectError::BadMac) => {
                        self.stats.nas_bad_mac += 1;
                        // The security gate decides what an unverified message may do
                        // (§4.4.4.3); a ciphered one cannot even be read.
                        let inner = nasx::unverified_inner(bytes);
                        if inner.is_none() {
                            pepc_ratelog::peer_warn!(
                                pepc_ratelog::Kind::NasIntegrity,
                                "UE {id}: NAS MAC failure, message discarded"
                            );
                        }
                        inner.map(|m| (m, false))
                    }
                    Err(UnprotectError::Replay) => {
                        self.stats.nas_replays += 1;
                        pepc_ratelog::peer_warn!(
                            pepc_ratelog::Kind::NasIntegrity,
                            "UE {id}: replayed NAS COUNT, message discarded"
                        );
                        None
                    }
                    Err(UnprotectError::Malformed(e)) => {
                        self.stats.nas_decode_errors += 1;
                        pepc_ratelog::peer_warn!(
                            pepc_ratelog::Kind::NasUndecodable,
                            "UE {id}: bad NAS: {e}"
                        );
                        None
                    }
                };
            }
            // No context: an Attach Request may verify with a parked one.
            if sht == 1 {
                if let Some(m) = self.unpark(cp, id, bytes) {
                    return Some((m, true));
                }
            }
            // No context: only the messages of §4.4.4.3 are taken, unverified. A ciphered
            // PDU is unreadable here (e.g. a UE answering with the context we dropped at
            // its detach): count and say so, it is otherwise a silent stall.
            let m = nasx::unverified_inner(bytes);
            if m.is_none() {
                self.stats.nas_unprotected_dropped += 1;
                pepc_ratelog::peer_warn!(pepc_ratelog::Kind::NasUndecodable, "UE {id}: protected NAS (header type {sht}) without a security context, discarded");
            }
            return m.map(|m| (m, false));
        }
        match NasEpsMessage::decode(bytes) {
            Ok(m) => Some((m, false)),
            Err(e) => {
                self.stats.nas_decode_errors += 1;
                pepc_ratelog::peer_warn!(
                    pepc_ratelog::Kind::NasUndecodable,
                    "UE {id}: undecodable NAS: {e}"
                );
                None
            }
        }
    }

    /// An uplink NAS message on UE `id`'s S1 connection (`loc`: where the eNB says
    /// the UE is): verified, passed through the security gate, then served.
    pub(crate) fn nas_in(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        bytes: &[u8],
        loc: Option<(Tai, Ecgi)>,
        out: &mut Vec<Output>,
    ) {
        let Some((msg, verified)) = self.uplink_nas(cp, id, bytes) else {
            return;
        };
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        let sec = if u.sec.is_none() {
            SecState::NoContext
        } else if u.nas_secured {
            SecState::Secured
        } else {
            SecState::Authenticating
        };
        let kind = gate::kind_of(&msg);
        let verdict = gate::gate(sec, kind, verified);
        tracing::debug!(?kind, ?sec, verified, ?verdict, "uplink NAS");
        match verdict {
            Verdict::Process => {
                if self.admit(u, id, &msg, verified, loc) {
                    self.serve(cp, id, msg, verified, out);
                }
            }
            Verdict::Discard => self.gate_discard(id, kind, sec),
            Verdict::Authenticate => match kind {
                // A new attach by a UE whose context cannot check it: it runs on a
                // new context, which replaces this one only once secured. This one
                // gives up the connection and stays as it was (ECM-IDLE).
                Kind::AttachRequest => {
                    let Some(ConnKey { assoc, enb_ue_id }) = u.conn else {
                        return;
                    };
                    let (tai, ecgi) = loc.unwrap_or((u.tai, u.ecgi));
                    self.make_idle(cp, id, out);
                    if let Some(new) = self.new_ue(cp, assoc, enb_ue_id, tai, ecgi) {
                        self.dispatch(cp, new, msg, false, loc, out);
                    }
                }
                _ => self.authenticate_first(cp, id, kind, out),
            },
        }
    }

    /// The gate dropped a message: counted, and said at debug level (a storm of
    /// them is no reason to flood the log).
    pub(crate) fn gate_discard(&mut self, id: u32, kind: Kind, sec: SecState) {
        self.stats.nas_gate_discards += 1;
        tracing::debug!("UE {id}: unverified {kind:?} discarded ({sec:?})");
    }

    /// Re-authenticate UE `id` before the TAU or detach that failed the check is
    /// served (the gate's "authenticate first").
    pub(crate) fn authenticate_first(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        kind: Kind,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        let then = match kind {
            Kind::TauRequest { active } => {
                // The TAU's latency counts its re-authentication.
                if let Some(u) = self.ue_mut(cp, id) {
                    u.started = Some(now);
                }
                self.proc_start(cp, id, Proc::Tau);
                Resume::Tau { active }
            }
            Kind::DetachRequest { .. } => {
                self.proc_start(cp, id, Proc::Detach);
                Resume::Detach
            }
            _ => return,
        };
        self.reauthenticate(cp, id, then, out);
    }

    /// Serve a NAS message the gate let through.
    // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dispatch(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        msg: NasEpsMessage,
        verified: bool,
        loc: Option<(Tai, Ecgi)>,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        if self.admit(u, id, &msg, verified, loc) {
            self.serve(cp, id, msg, verified, out);
        }
    }

    /// What a message the gate let through does to UE `id`'s context `u` before it
    /// is served; false if it is not served (the HSS is being asked).
    fn admit(
        &mut self,
        u: &mut Ue,
        id: u32,
        msg: &NasEpsMessage,
        verified: bool,
        loc: Option<(Tai, Ecgi)>,
    ) -> bool {
        // A verified message establishes the secure exchange on this connection; the
        // eNB's location counts once the message is one we take.
        if verified {
            u.nas_secured = true;
        }
        if let Some((tai, ecgi)) = loc {
            u.tai = tai;
            u.ecgi = ecgi;
        }
        if u.proc.awaits_hss()
            && !matches!(
                msg,
                NasEpsMessage::Emm(
                    _,
                    Emm::AttachRequest(_) | Emm::DetachRequestUeOriginating(_)
                )
            )
        {
            // Half-built context: nothing else is served until the HSS has answered.
            self.stats.nas_dropped_awaiting_hss += 1;
            tracing::debug!("UE {id}: NAS message while the HSS is asked, dropped");
            return false;
        }
        true
    }

    /// Serve an admitted NAS message: EMM or ESM.
    fn serve(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        msg: NasEpsMessage,
        verified: bool,
        out: &mut Vec<Output>,
    ) {
        match msg {
            NasEpsMessage::Emm(_, e) => self.emm(cp, id, e, verified, out),
            NasEpsMessage::Esm(h, e) => self.esm(
                cp,
                id,
                h.procedure_transaction_identity,
                h.eps_bearer_identity,
                e,
                out,
            ),
            // The gate classes anything else as "other": only verified ones come here.
            _ => {
                self.stats.nas_unprotected_dropped += 1;
            }
        }
    }
}

/// What a NAS timer's expiry leaves for the MME to do with the slice.
enum Expiry {
    /// Retransmitted, or ended without the slice.
    Handled,
    /// No CCA-I in time: the policy failure handling.
    PolicyTimeout,
    /// The gate's re-authentication got no answer: the context stays, the
    /// connection goes.
    AbortReauth,
    /// An attach the UE left: its session goes, then the context.
    AttachLeft,
}

/// UE `u`'s NAS timer ran out: retransmit on the first four expiries, abort the
/// procedure on the fifth (TS 24.301 §5.4, §5.5).
fn nas_expiry(cx: &mut Cx<'_>, u: &mut Ue) -> Expiry {
    let id = u.id;
    if let Procedure::ExpectPolicy { .. } = u.proc {
        // The policy timeout: no CCA-I in time.
        u.proc = Procedure::Idle;
        cx.stats.procedure_timeouts += 1;
        return Expiry::PolicyTimeout;
    }
    u.retx_count += 1;
    let retx = if u.retx_count >= 5 {
        None
    } else {
        u.retx.clone()
    };
    let Some(retx) = retx else {
        cx.stats.procedure_timeouts += 1;
        pepc_ratelog::peer_warn!(
            pepc_ratelog::Kind::ProcedureTimeout,
            "UE {id}: NAS procedure {} timed out",
            u.proc.name()
        );
        u.retx = None;
        if u.proc.reauthenticating() {
            let why = ProcFailure::Timeout;
            cx.stats
                .procedures
                .fail(&mut u.open, Proc::Authentication, why);
            return Expiry::AbortReauth;
        }
        let detaching = matches!(u.proc, Procedure::ExpectDetachAccept);
        let registered = u.emm == Emm_::Registered
            && !detaching
            && !matches!(u.proc, Procedure::ExpectAttachComplete);
        if detaching {
            let why = ProcFailure::Timeout;
            cx.stats
                .procedures
                .fail(&mut u.open, Proc::NetworkDetach, why);
            cx.release(u, Cause::NAS_DETACH, true);
        } else if registered {
            if let Procedure::ExpectGutiReallocComplete { .. } = u.proc {
                let why = ProcFailure::Timeout;
                cx.stats
                    .procedures
                    .fail(&mut u.open, Proc::GutiReallocation, why);
            }
            u.proc = Procedure::Idle;
        } else {
            // Not registered and not detaching: an attach that the UE left.
            cx.stats.attach_timeouts += 1;
            let why = ProcFailure::Timeout;
            cx.stats.procedures.fail(&mut u.open, Proc::Attach, why);
            u.emm = Emm_::Deregistered;
            return Expiry::AttachLeft;
        }
        return Expiry::Handled;
    };
    let (msg, new_ctx) = *retx;
    let d = match u.proc {
        Procedure::ExpectIdentity => cx.cfg.t3470,
        Procedure::ExpectAuthResponse { .. } | Procedure::ExpectSmcComplete { .. } => cx.cfg.t3460,
        Procedure::ExpectDetachAccept => cx.cfg.t3422,
        _ => cx.cfg.t3450,
    };
    cx.stats.retransmissions += 1;
    // Protected messages are re-protected: a repeated COUNT would be a replay.
    if let Some(bytes) = crate::mme::cx::nas_bytes(cx.cfg, cx.dirty, u, &msg, new_ctx) {
        if let Some(c) = u.conn {
            cx.send_dl_nas(c, id, bytes);
        }
    }
    let at = cx.now + d;
    cx.arm(u, TimerKind::Nas, at);
    Expiry::Handled
}
