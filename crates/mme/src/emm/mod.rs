//! EPS mobility management (TS 24.301 §5): the uplink EMM message dispatch. One file per
//! procedure; the identification procedure (§5.4.4) is the Identity Request of
//! `attach_request` and the Identity Response arm of `emm`.

pub(crate) mod attach;
pub(crate) mod auth;
mod detach;
pub(crate) mod guti;
mod hss_initiated;
pub(crate) mod security_mode;
mod service;
mod tau;

use crate::prelude::*;

impl Mme {
    pub(crate) fn emm(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        e: Emm,
        verified: bool,
        out: &mut Vec<Output>,
    ) {
        // The message came on UE `id`'s connection. A procedure takes the UE's context
        // and the MME's beside it (`Mme::split`, one lookup); what it leaves for the
        // slice or for other UEs follows here.
        match e {
            Emm::AttachRequest(r) => self.attach_request(cp, id, *r, verified, out),
            Emm::IdentityResponse(r) => {
                let Some((mut cx, u)) = self.split(cp, id, out) else {
                    return;
                };
                if let Some(imsi) = attach::identity_response(&mut cx, u, &r) {
                    // The Attach Request's digest is not kept past the
                    // identification: a repetition now restarts the attach. The
                    // IMSI is claimed from the node once the attach is secured.
                    self.start_auth(cp, id, imsi, 0, true, out)
                }
            }
            Emm::AuthenticationResponse(r) => {
                if let Some((mut cx, u)) = self.split(cp, id, out) {
                    auth::auth_response(&mut cx, u, &r.authentication_response_parameter.value)
                }
            }
            Emm::AuthenticationFailure(f) => self.auth_failure(cp, id, &f, out),
            Emm::SecurityModeComplete(_) => {
                let Some((mut cx, u)) = self.split(cp, id, out) else {
                    return;
                };
                if let Some(then) = security_mode::smc_complete(&mut cx, u) {
                    self.security_established(cp, id, then, out);
                }
            }
            Emm::SecurityModeReject(_) => self.smc_reject(cp, id, out),
            // It carries the Activate Default EPS Bearer Context Accept, which needs
            // nothing more: the bearer was set up with the Initial Context Setup.
            Emm::AttachComplete(_) => {
                let Some((mut cx, u)) = self.split(cp, id, out) else {
                    return;
                };
                if !attach_complete(&mut cx, u) {
                    return;
                }
                // Rules that need dedicated bearers follow the default one.
                self.apply_pending_policy(cp, id, out);
                if let Some(name) = &self.cfg.network_name {
                    let mut info = nasx::NasEmmInformation::new();
                    info.full_name_for_network =
                        Some(nasx::NasNetworkName::new(nasx::network_name_value(name)));
                    // After the policy, which may have gone to the slice: looked up
                    // again.
                    if let Some((mut cx, u)) = self.split(cp, id, out) {
                        cx.send_nas(u, NasEpsMessage::new_emm(info), false, None);
                    }
                }
            }
            Emm::DetachRequestUeOriginating(d) => {
                self.ue_detach(cp, id, d.detach_type.value & 0x08 != 0, out)
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
                let l = &mut self.stats.procedures;
                l.succeed(&mut u.open, Proc::NetworkDetach);
                // The session goes through the slice; then the context, looked up
                // again.
                self.drop_session(cp, id);
                if let Some((mut cx, u)) = self.split(cp, id, out) {
                    u.emm = Emm_::Deregistered;
                    cx.release(u, Cause::NAS_DETACH, true);
                }
            }
            Emm::TrackingAreaUpdateRequest(t) => self.tau(cp, id, *t, verified, out),
            Emm::TrackingAreaUpdateComplete(_) | Emm::GutiReallocationComplete(_) => {
                if let Some((mut cx, u)) = self.split(cp, id, out) {
                    guti::realloc_complete(&mut cx, u);
                }
            }
            Emm::EmmStatus(_) => {}
            _ => {}
        }
    }
}

/// The Attach Complete (§5.5.1.2.4): the UE is registered. `false`: not awaited.
fn attach_complete(cx: &mut Cx<'_>, u: &mut Ue) -> bool {
    if !matches!(u.proc, Procedure::ExpectAttachComplete) {
        return false;
    }
    u.stop_nas_timer();
    u.proc = Procedure::Idle;
    u.emm = Emm_::Registered;
    if let Some(t0) = u.started.take() {
        cx.stats
            .attach_latency
            .observe(cx.now.saturating_duration_since(t0));
    }
    cx.stats.attaches += 1;
    cx.stats.procedures.succeed(&mut u.open, Proc::Attach);
    cx.procedure_done(u.id);
    true
}
