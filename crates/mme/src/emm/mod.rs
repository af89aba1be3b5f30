//! EPS mobility management (TS 24.301 §5): the uplink EMM message dispatch. One file per
//! procedure; the identification procedure (§5.4.4) is the Identity Request of
//! `attach_request` and the Identity Response arm of `emm`.

mod attach;
mod auth;
mod detach;
mod guti;
mod hss_initiated;
mod security_mode;
mod service;
mod tau;

use crate::prelude::*;

impl Mme {
    pub(crate) fn emm(
        &mut self,
        now: Instant,
        id: u32,
        e: Emm,
        verified: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        // The message came on UE `id`'s connection: the arms that look at its context
        // take it once (a handler they call looks it up itself).
        match e {
            Emm::AttachRequest(r) => self.attach_request(now, id, *r, verified, cp, out),
            Emm::IdentityResponse(r) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if !matches!(u.proc, Procedure::ExpectIdentity) {
                    return;
                }
                u.stop_nas_timer();
                match nasx::parse_identity(&r.mobile_identity.value) {
                    Identity::Imsi(imsi) => {
                        // The Attach Request's digest is not kept past the
                        // identification: a repetition now restarts the attach. The
                        // IMSI is claimed from the node once the attach is secured.
                        self.start_auth(now, id, imsi, 0, true, cp, out)
                    }
                    _ => self.attach_reject(cp, id, EmmCause::InvalidMandatoryInformation, out),
                }
            }
            Emm::AuthenticationResponse(r) => {
                self.auth_response(cp, now, id, &r.authentication_response_parameter.value, out)
            }
            Emm::AuthenticationFailure(f) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if !matches!(u.proc, Procedure::ExpectAuthResponse { .. }) {
                    return;
                }
                u.stop_nas_timer();
                let cause = f.emm_cause.value;
                let auts = f
                    .authentication_failure_parameter
                    .as_ref()
                    .map(|p| p.value.to_vec());
                self.auth_failure(now, id, cause, auts, cp, out);
            }
            Emm::SecurityModeComplete(_) => self.smc_complete(now, id, cp, out),
            Emm::SecurityModeReject(_) => self.smc_reject(cp, id, out),
            // It carries the Activate Default EPS Bearer Context Accept, which needs
            // nothing more: the bearer was set up with the Initial Context Setup.
            Emm::AttachComplete(_) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if !matches!(u.proc, Procedure::ExpectAttachComplete) {
                    return;
                }
                u.stop_nas_timer();
                u.proc = Procedure::Idle;
                u.emm = Emm_::Registered;
                if let Some(t0) = u.started.take() {
                    self.stats
                        .attach_latency
                        .observe(now.saturating_duration_since(t0));
                }
                self.stats.attaches += 1;
                self.procedure_done(id);
                // Rules that need dedicated bearers follow the default one.
                self.apply_pending_policy(now, id, cp, out);
                if let Some(name) = self.cfg.network_name.clone() {
                    let mut info = nasx::NasEmmInformation::new();
                    info.full_name_for_network =
                        Some(nasx::NasNetworkName::new(nasx::network_name_value(&name)));
                    self.send_nas(cp, now, id, NasEpsMessage::new_emm(info), false, None, out);
                }
            }
            Emm::DetachRequestUeOriginating(d) => {
                self.ue_detach(id, d.detach_type.value & 0x08 != 0, cp, out, now)
            }
            Emm::DetachAccept(_) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if !matches!(u.proc, Procedure::ExpectDetachAccept) {
                    return;
                }
                u.stop_nas_timer();
                self.stats.detaches += 1;
                self.drop_session(cp, id);
                if let Some(u) = self.ue_mut(cp, id) {
                    u.emm = Emm_::Deregistered;
                }
                self.release(cp, id, Cause::NAS_DETACH, true, out);
            }
            Emm::TrackingAreaUpdateRequest(t) => self.tau(now, id, *t, verified, cp, out),
            Emm::TrackingAreaUpdateComplete(_) | Emm::GutiReallocationComplete(_) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                let Procedure::ExpectGutiReallocComplete { m_tmsi: t } = u.proc else {
                    return;
                };
                u.proc = Procedure::Idle;
                self.index.unlink_tmsi(u.m_tmsi);
                u.m_tmsi = t;
                self.index.link_tmsi(t, id);
                u.stop_nas_timer();
                self.procedure_done(id);
            }
            Emm::EmmStatus(_) => {}
            _ => {}
        }
    }
}
