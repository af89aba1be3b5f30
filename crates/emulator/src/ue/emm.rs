//! What the UE does with the network's NAS: unprotecting downlink, the Security Mode
//! Command, and the EMM messages (TS 24.301 §5) as a UE answers them.

use super::*;

impl Ue {
    pub(super) fn downlink(&mut self, pdu: Vec<u8>, now: u64, out: &mut Vec<UeOutput>) {
        let t = security::security_header_type(&pdu).unwrap_or(0);
        let plain = if t == sht::PLAIN {
            pdu
        } else if t == sht::INTEGRITY_NEW_CONTEXT || t == sht::INTEGRITY_CIPHERED_NEW_CONTEXT {
            // Security Mode Command: the keys come from the message itself.
            return self.security_mode_command(&pdu, out);
        } else {
            let Some(s) = self.sec.as_mut() else {
                return self.fail(Failure::Integrity, out);
            };
            match s.unprotect(&pdu) {
                Ok((p, _)) => p,
                Err(_) => return self.fail(Failure::Integrity, out),
            }
        };
        // Bearer Resource Allocation/Modification Reject (TS 24.301 8.3.7, 8.3.9): the
        // codec does not model them; PD, PTI, type and the ESM cause are all we need.
        if plain.len() >= 4 && plain[0] & 0x0f == 2 && matches!(plain[2], 0xd5 | 0xd7) {
            if t == sht::PLAIN && self.sec.is_some() {
                return self.fail(Failure::Integrity, out);
            }
            if plain[1] == self.esm_pti {
                return self.fail(Failure::Esm(plain[3]), out);
            }
            return;
        }
        let m = match NasMessage::decode_dir(&plain, Direction::Downlink) {
            Ok(m) => m,
            Err(e) => return self.fail(Failure::Protocol(format!("NAS decode: {e}")), out),
        };
        // Until a security context exists only a few plain messages are acceptable
        // (TS 24.301 §4.4.4.2).
        if t == sht::PLAIN && self.sec.is_some() {
            let ok = matches!(
                &m,
                NasMessage::Emm(
                    EmmMessage::IdentityRequest(_)
                        | EmmMessage::AuthenticationRequest(_)
                        | EmmMessage::AuthenticationReject
                        | EmmMessage::AttachReject(_)
                        | EmmMessage::DetachAccept
                        | EmmMessage::TauReject { .. }
                        | EmmMessage::ServiceReject { .. }
                )
            );
            if !ok {
                return self.fail(Failure::Integrity, out);
            }
        }
        match m {
            NasMessage::Emm(e) => self.emm(e, t == sht::PLAIN, now, out),
            NasMessage::Esm(e) => self.esm(e, out),
        }
    }

    pub(super) fn security_mode_command(&mut self, pdu: &[u8], out: &mut Vec<UeOutput>) {
        if pdu.len() < 7 {
            return self.fail(Failure::Protocol("short SMC".into()), out);
        }
        let smc = match NasMessage::decode_dir(&pdu[6..], Direction::Downlink) {
            Ok(NasMessage::Emm(EmmMessage::SecurityModeCommand(s))) => s,
            _ => {
                return self.fail(
                    Failure::Protocol("new-context PDU is not an SMC".into()),
                    out,
                )
            }
        };
        let (Ok(eia), Ok(eea)) = (Eia::try_from(smc.eia), Eea::try_from(smc.eea)) else {
            return self.reject_smc(emm_cause::UE_SECURITY_CAPABILITIES_MISMATCH, out);
        };
        // Replayed capabilities must be ours (bidding-down protection).
        let caps = UE_CAPS.to_bytes();
        if smc.replayed_ue_capabilities.len() < 2 || smc.replayed_ue_capabilities[..2] != caps[..2]
        {
            return self.reject_smc(emm_cause::UE_SECURITY_CAPABILITIES_MISMATCH, out);
        }
        let Some((kasme, _)) = self.pending_kasme.as_ref().or(None) else {
            return self.reject_smc(emm_cause::SECURITY_MODE_REJECTED_UNSPECIFIED, out);
        };
        let mut ctx = NasSecurityContext::from_kasme(Role::Ue, kasme, eia, eea, smc.ksi & 7);
        if ctx.unprotect(pdu).is_err() {
            return self.reject_smc(emm_cause::SECURITY_MODE_REJECTED_UNSPECIFIED, out);
        }
        self.pending_kasme = None;
        self.sec = Some(ctx);
        let m = EmmMessage::SecurityModeComplete(SecurityModeComplete {
            imeisv: smc
                .imeisv_request
                .then(|| MobileIdentity::Imeisv(IMEISV.into())),
        });
        self.send(
            m.into(),
            sht::INTEGRITY_CIPHERED_NEW_CONTEXT,
            rrc_cause::MO_SIGNALLING,
            out,
        );
    }

    pub(super) fn reject_smc(&mut self, cause: u8, out: &mut Vec<UeOutput>) {
        let m = EmmMessage::SecurityModeReject { emm_cause: cause };
        self.send(m.into(), sht::PLAIN, rrc_cause::MO_SIGNALLING, out);
        self.fail(Failure::Emm(cause), out);
    }

    pub(super) fn emm(
        &mut self,
        m: EmmMessage,
        came_plain: bool,
        _now: u64,
        out: &mut Vec<UeOutput>,
    ) {
        use EmmMessage as E;
        // A plain Identity/Authentication Request means the network does not use our
        // context (e.g. it dropped it at a switch-off detach): answer in plain, which
        // it can read (TS 24.301 4.4.4.2, 4.4.5).
        let plain_challenge =
            came_plain && matches!(m, E::IdentityRequest(_) | E::AuthenticationRequest(_));
        let prot = if self.sec.is_some() && !plain_challenge {
            sht::INTEGRITY_CIPHERED
        } else {
            sht::PLAIN
        };
        match m {
            E::IdentityRequest(r) => {
                let identity = match r.identity_type {
                    2 => MobileIdentity::Imei(IMEISV[..15].into()),
                    3 => MobileIdentity::Imeisv(IMEISV.into()),
                    _ => MobileIdentity::Imsi(self.cfg.imsi.clone()),
                };
                let m = E::IdentityResponse(IdentityResponse { identity });
                self.send(m.into(), prot, rrc_cause::MO_SIGNALLING, out);
            }
            E::AuthenticationRequest(r) => {
                match usim_check(&self.mil, r.rand, r.autn, self.cfg.sqn_ms) {
                    Ok(ok) => {
                        self.cfg.sqn_ms = ok.sqn;
                        let mut sqn_xor_ak = [0u8; 6];
                        sqn_xor_ak.copy_from_slice(&r.autn[..6]);
                        let k = kasme(&ok.ck, &ok.ik, self.cfg.plmn, sqn_xor_ak);
                        self.pending_kasme = Some((k, r.ksi & 7));
                        let m = E::AuthenticationResponse(AuthenticationResponse {
                            res: ok.res.to_vec(),
                        });
                        self.send(m.into(), prot, rrc_cause::MO_SIGNALLING, out);
                    }
                    Err(UsimError::SynchFailure { auts }) => {
                        // The MME resynchronises with the HSS and challenges again;
                        // the procedure goes on.
                        let m = E::AuthenticationFailure(AuthenticationFailure {
                            emm_cause: emm_cause::SYNCH_FAILURE,
                            auts: Some(auts),
                        });
                        self.send(m.into(), sht::PLAIN, rrc_cause::MO_SIGNALLING, out);
                    }
                    Err(UsimError::MacFailure) => {
                        let m = E::AuthenticationFailure(AuthenticationFailure {
                            emm_cause: emm_cause::MAC_FAILURE,
                            auts: None,
                        });
                        self.send(m.into(), sht::PLAIN, rrc_cause::MO_SIGNALLING, out);
                        self.fail(Failure::AuthFailed(emm_cause::MAC_FAILURE), out);
                    }
                    Err(UsimError::NonEpsAuthUnacceptable) => {
                        let c = emm_cause::NON_EPS_AUTHENTICATION_UNACCEPTABLE;
                        let m = E::AuthenticationFailure(AuthenticationFailure {
                            emm_cause: c,
                            auts: None,
                        });
                        self.send(m.into(), sht::PLAIN, rrc_cause::MO_SIGNALLING, out);
                        self.fail(Failure::AuthFailed(c), out);
                    }
                }
            }
            E::AuthenticationReject => {
                self.sec = None;
                self.guti = None;
                self.state = EmmState::Deregistered;
                self.fail(Failure::AuthReject, out);
            }
            E::AttachAccept(a) => {
                if self.state != EmmState::RegisteredInitiated {
                    return self.fail(Failure::Protocol("Attach Accept out of state".into()), out);
                }
                if let Some(g) = a.guti {
                    self.guti = Some(g);
                }
                let esm = match NasMessage::decode_dir(&a.esm_container, Direction::Downlink) {
                    Ok(NasMessage::Esm(e)) => e,
                    _ => return self.fail(Failure::Protocol("bad ESM container".into()), out),
                };
                let EsmBody::ActivateDefaultBearerRequest(req) = &esm.body else {
                    return self.fail(
                        Failure::Protocol("Attach Accept without default bearer".into()),
                        out,
                    );
                };
                self.activate_default(esm.ebi, req, out);
                let accept = EsmMessage {
                    ebi: esm.ebi,
                    pti: 0,
                    body: EsmBody::ActivateDefaultBearerAccept,
                };
                let esm_container = match accept.encode() {
                    Ok(e) => e,
                    Err(e) => return self.fail(Failure::Protocol(e.to_string()), out),
                };
                let m = E::AttachComplete(AttachComplete { esm_container });
                self.send(m.into(), prot, rrc_cause::MO_SIGNALLING, out);
                self.state = EmmState::Registered;
                self.done(Procedure::Attach, out);
            }
            // Congestion with a back-off timer (TS 24.301 §5.5.1.2.6, #22): T3346
            // runs, then the attach is tried again.
            E::AttachReject(r) if r.emm_cause == 22 && r.t3346_s.is_some_and(|t| t > 0) => {
                let wait = r.t3346_s.unwrap_or(0) * 1_000_000_000;
                self.back_off(wait, true, out);
            }
            E::AttachReject(r) => {
                self.state = EmmState::Deregistered;
                if matches!(r.emm_cause, 3 | 6 | 7 | 8 | 9 | 10) {
                    // Identity no longer valid: next attach uses the IMSI.
                    self.guti = None;
                    self.sec = None;
                }
                self.fail(Failure::Emm(r.emm_cause), out);
            }
            E::DetachAccept => {
                self.state = EmmState::Deregistered;
                self.forget_bearers();
                self.done(Procedure::Detach, out);
            }
            E::DetachRequestNetwork(_) => {
                self.send(E::DetachAccept.into(), prot, rrc_cause::MO_SIGNALLING, out);
                self.state = EmmState::Deregistered;
                self.forget_bearers();
                self.fail(Failure::Protocol("network detach".into()), out);
            }
            E::TauAccept(a) => {
                if let Some(g) = a.guti {
                    self.guti = Some(g);
                    self.send(E::TauComplete.into(), prot, rrc_cause::MO_SIGNALLING, out);
                }
                if let Some(st) = a.eps_bearer_context_status {
                    // Bearers the network no longer has are gone locally too.
                    let gone: Vec<u8> = self
                        .bearers
                        .iter()
                        .filter(|(e, _)| st & (1 << (e & 15)) == 0)
                        .map(|(e, _)| *e)
                        .collect();
                    for e in gone {
                        self.bearers.retain(|(x, _)| *x != e);
                        out.push(UeOutput::BearerDown { ebi: e });
                    }
                }
                self.state = EmmState::Registered;
                for p in [Procedure::Tau, Procedure::TauPeriodic, Procedure::TauActive] {
                    self.done(p, out);
                }
            }
            E::TauReject { emm_cause } => {
                self.state = EmmState::Deregistered;
                self.fail(Failure::Emm(emm_cause), out);
            }
            E::ServiceReject { emm_cause } => {
                if matches!(emm_cause, 9 | 10) {
                    self.state = EmmState::Deregistered;
                }
                self.fail(Failure::Emm(emm_cause), out);
            }
            E::GutiReallocationCommand(g) => {
                self.guti = Some(g.guti);
                self.send(
                    E::GutiReallocationComplete.into(),
                    prot,
                    rrc_cause::MO_SIGNALLING,
                    out,
                );
            }
            E::EmmInformation(_) => {}
            E::EmmStatus { emm_cause } => self.fail(Failure::Emm(emm_cause), out),
            other => self.fail(
                Failure::Protocol(format!("unexpected downlink EMM {other:?}")),
                out,
            ),
        }
    }
}
