//! NAS plumbing: uplink verification and decoding (TS 24.301 §4.4.4), downlink protection
//! and Downlink NAS Transport (TS 36.413 §8.6.2.2), retransmission on
//! T3450/T3460/T3470/T3422 expiry (TS 24.301 §10.2), EMM/ESM dispatch of an uplink message.

use crate::prelude::*;

impl Mme {
    /// Encode (and protect when a context is in use) a downlink NAS message.
    pub(crate) fn nas_bytes(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        msg: &NasEpsMessage,
        new_ctx: bool,
    ) -> Option<Vec<u8>> {
        let u = self.ue_mut(cp, id)?;
        let r = if new_ctx {
            // The context being established: the Security Mode Command's.
            let Procedure::ExpectSmcComplete { sec } = &mut u.proc else {
                return None;
            };
            sec.protect(msg, true, Direction::Downlink)
        } else if let Some(s) = u.sec.as_mut() {
            s.protect(msg, false, Direction::Downlink)
        } else {
            msg.encode().map_err(|e| e.to_string())
        };
        r.ok()
    }

    /// Send a NAS message in Downlink NAS Transport; `timer` arms T3450/T3460/T3470/T3422.
    // The MME and the slice (`cp`) travel apart until handlers take one context (STYLE.md §4).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_nas(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        id: u32,
        msg: NasEpsMessage,
        new_ctx: bool,
        timer: Option<std::time::Duration>,
        out: &mut Vec<Output>,
    ) {
        let Some(bytes) = self.nas_bytes(cp, id, &msg, new_ctx) else {
            return;
        };
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        let Some((assoc, enb_ue_id)) = u.conn else {
            return;
        };
        if let Some(d) = timer {
            u.retx = Some(Box::new((msg, new_ctx)));
            u.retx_count = 0;
            self.arm(cp, id, TimerKind::Nas, now + d);
        }
        self.send(
            assoc,
            Some(id),
            DownlinkNasTransport {
                mme_ue_id: id,
                enb_ue_id,
                nas_pdu: bytes,
            }
            .into(),
            out,
        );
    }

    pub(crate) fn stop_nas_timer(&mut self, cp: &mut ControlPlane, id: u32) {
        if let Some(u) = self.ue_mut(cp, id) {
            u.nas_timer = None;
            u.retx = None;
        }
    }

    pub(crate) fn nas_timer_expired(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        u.retx_count += 1;
        // Retransmit on the first four expiries; abort on the fifth (TS 24.301 §5.4, §5.5).
        if u.retx_count >= 5 || u.retx.is_none() {
            self.stats.procedure_timeouts += 1;
            log(
                out,
                LogLevel::Warn,
                format!("UE {id}: NAS procedure {} timed out", u.proc.name()),
            );
            u.retx = None;
            let detaching = matches!(u.proc, Procedure::ExpectDetachAccept);
            let registered = u.emm == Emm_::Registered
                && !detaching
                && !matches!(u.proc, Procedure::ExpectAttachComplete);
            if detaching {
                self.release(cp, id, Cause::NAS_DETACH, true, out);
            } else if registered {
                u.proc = Procedure::Idle;
            } else {
                u.emm = Emm_::Deregistered;
                self.drop_session(cp, id, out);
                self.release(cp, id, Cause::NAS_UNSPECIFIED, true, out);
            }
            return;
        }
        let (msg, new_ctx) = *u.retx.clone().expect("checked");
        let n = u.retx_count;
        let d = match u.proc {
            Procedure::ExpectIdentity => self.cfg.t3470,
            Procedure::ExpectAuthResponse { .. } | Procedure::ExpectSmcComplete { .. } => {
                self.cfg.t3460
            }
            Procedure::ExpectDetachAccept => self.cfg.t3422,
            _ => self.cfg.t3450,
        };
        self.stats.retransmissions += 1;
        // Protected messages are re-protected: a repeated COUNT would be a replay.
        if let Some(bytes) = self.nas_bytes(cp, id, &msg, new_ctx) {
            if let Some((assoc, enb_ue_id)) = self.ue(cp, id).expect("present").conn {
                self.send(
                    assoc,
                    Some(id),
                    DownlinkNasTransport {
                        mme_ue_id: id,
                        enb_ue_id,
                        nas_pdu: bytes,
                    }
                    .into(),
                    out,
                );
            }
        }
        self.arm(cp, id, TimerKind::Nas, now + d);
        if let Some(u) = self.ue_mut(cp, id) {
            u.retx_count = n;
        }
    }

    /// Decode an uplink NAS PDU, verifying its MAC first when a context exists.
    pub(crate) fn uplink_nas(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        bytes: &[u8],
        out: &mut Vec<Output>,
    ) -> Option<(NasEpsMessage, bool)> {
        let first = *bytes.first()?;
        let sht = first >> 4;
        let pd = first & 0x0f;
        let u = self.ue_mut(cp, id)?;
        if pd == 7 && (1..=4).contains(&sht) {
            // SMC Complete comes under the new context.
            let ctx = match &mut u.proc {
                Procedure::ExpectSmcComplete { sec } if sht == 4 => Some(&mut **sec),
                _ => u.sec.as_deref_mut(),
            };
            if let Some(ctx) = ctx {
                return match ctx.unprotect(bytes, Direction::Uplink) {
                    Ok(m) => Some((m, true)),
                    Err(UnprotectError::BadMac) => {
                        self.stats.nas_bad_mac += 1;
                        // Some messages may still be processed unverified (§4.4.4.3).
                        let inner = nasx::unverified_inner(bytes)?;
                        if matches!(
                            inner,
                            NasEpsMessage::Emm(
                                _,
                                Emm::AttachRequest(_)
                                    | Emm::DetachRequestUeOriginating(_)
                                    | Emm::TrackingAreaUpdateRequest(_)
                            )
                        ) && u.conn.is_some()
                            && matches!(u.proc, Procedure::Idle)
                            && u.emm == Emm_::Deregistered
                        {
                            return Some((inner, false));
                        }
                        log(
                            out,
                            LogLevel::Warn,
                            format!("UE {id}: NAS MAC failure, message discarded"),
                        );
                        None
                    }
                    Err(UnprotectError::Replay) => {
                        self.stats.nas_replays += 1;
                        log(
                            out,
                            LogLevel::Warn,
                            format!("UE {id}: replayed NAS COUNT, message discarded"),
                        );
                        None
                    }
                    Err(UnprotectError::Malformed(e)) => {
                        self.stats.nas_decode_errors += 1;
                        log(out, LogLevel::Warn, format!("UE {id}: bad NAS: {e}"));
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
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: protected NAS (header type {sht}) without a security context, discarded"),
                );
            }
            return m.map(|m| (m, false));
        }
        match NasEpsMessage::decode(bytes) {
            Ok(m) => Some((m, false)),
            Err(e) => {
                self.stats.nas_decode_errors += 1;
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: undecodable NAS: {e}"),
                );
                None
            }
        }
    }

    pub(crate) fn nas_in(
        &mut self,
        now: Instant,
        id: u32,
        bytes: &[u8],
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some((msg, verified)) = self.uplink_nas(cp, id, bytes, out) else {
            return;
        };
        if self.ue(cp, id).is_some_and(|u| u.proc.awaits_hss())
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
            log(
                out,
                LogLevel::Debug,
                format!("UE {id}: NAS message while the HSS is asked, dropped"),
            );
            return;
        }
        match msg {
            NasEpsMessage::Emm(_, e) => {
                // After security is established every uplink message must be verified.
                let allowed_plain = matches!(
                    e,
                    Emm::AttachRequest(_)
                        | Emm::IdentityResponse(_)
                        | Emm::AuthenticationResponse(_)
                        | Emm::AuthenticationFailure(_)
                        | Emm::SecurityModeReject(_)
                        | Emm::DetachRequestUeOriginating(_)
                        | Emm::TrackingAreaUpdateRequest(_)
                );
                if !verified && !allowed_plain {
                    self.stats.nas_unprotected_dropped += 1;
                    return;
                }
                self.emm(now, id, e, verified, cp, out);
            }
            NasEpsMessage::Esm(h, e) if verified => self.esm(
                now,
                id,
                h.procedure_transaction_identity,
                h.eps_bearer_identity,
                e,
                cp,
                out,
            ),
            _ => {
                self.stats.nas_unprotected_dropped += 1;
            }
        }
    }
}
