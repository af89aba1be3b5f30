//! EPS session management (TS 24.301 §6): the uplink ESM message dispatch and ESM rejects.

mod bearer;
mod pdn;
pub(crate) mod policy;
mod usage;

pub(crate) use bearer::{free_ebi, release_unlisted, DedicatedQos};

use crate::prelude::*;

impl Mme {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn esm(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pti: u8,
        ebi: u8,
        e: Esm,
        out: &mut Vec<Output>,
    ) {
        if matches!(
            e,
            Esm::ActivateDefaultEpsBearerContextAccept(_)
                | Esm::ActivateDefaultEpsBearerContextReject(_)
                | Esm::ActivateDedicatedEpsBearerContextAccept(_)
                | Esm::ActivateDedicatedEpsBearerContextReject(_)
                | Esm::ModifyEpsBearerContextAccept(_)
                | Esm::DeactivateEpsBearerContextAccept(_)
        ) {
            // The end of an ESM procedure: the bearers as they are now.
            self.procedure_done(id);
        }
        match e {
            Esm::EsmInformationResponse(r) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if !matches!(u.proc, Procedure::ExpectEsmInfo) {
                    return;
                }
                u.stop_nas_timer();
                if let Some(a) = r.access_point_name.as_ref() {
                    u.apn = nasx::apn_string(&a.value);
                }
                // Update Location (TS 23.401 §5.3.2.1 step 8), the attach authenticated.
                if let Some(imsi) = u.imsi {
                    self.ask_profile(cp, id, imsi, out);
                }
            }
            Esm::PdnConnectivityRequest(r) => {
                self.proc_start(cp, id, Proc::PdnConnect);
                if let Err(cause) = self.pdn_connect(cp, id, pti, &r, out) {
                    self.stats.pdn_connect_rejects += 1;
                    let why = ProcFailure::Rejected(cause.into());
                    self.proc_end(cp, id, Proc::PdnConnect, Err(why));
                    tracing::info!("UE {id}: PDN connectivity rejected, ESM cause {cause}");
                    let rej =
                        nasx::NasPdnConnectivityReject::new(nasx::NasEsmCause::new(cause.into()));
                    self.send_esm_reject(cp, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::PdnDisconnectRequest(r) => {
                let linked = r.linked_eps_bearer_identity.bearer_identity();
                let r = self.pdn_disconnect(cp, id, pti, linked, out);
                if let Err(cause) = self.stats.procedures.answered(Proc::PdnDisconnect, r) {
                    self.stats.pdn_disconnect_rejects += 1;
                    let rej =
                        nasx::NasPdnDisconnectReject::new(nasx::NasEsmCause::new(cause.into()));
                    self.send_esm_reject(cp, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::BearerResourceAllocationRequest(r) => {
                let r = self.bearer_resource_allocation(cp, id, pti, &r, out);
                if let Err(cause) = self
                    .stats
                    .procedures
                    .answered(Proc::BearerResourceAllocation, r)
                {
                    self.stats.bearer_resource_rejects += 1;
                    let rej = nasx::NasBearerResourceAllocationReject::new(nasx::NasEsmCause::new(
                        cause.into(),
                    ));
                    self.send_esm_reject(cp, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::BearerResourceModificationRequest(r) => {
                let r = self.bearer_resource_modification(cp, id, pti, &r, out);
                if let Err(cause) = self
                    .stats
                    .procedures
                    .answered(Proc::BearerResourceModification, r)
                {
                    self.stats.bearer_resource_rejects += 1;
                    let rej = nasx::NasBearerResourceModificationReject::new(
                        nasx::NasEsmCause::new(cause.into()),
                    );
                    self.send_esm_reject(cp, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::ActivateDefaultEpsBearerContextAccept(_) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if u.pending_bearers.contains(&ebi) {
                    u.pending_bearers.retain(|b| *b != ebi);
                    self.stats.pdn_connects += 1;
                    let l = &mut self.stats.procedures;
                    l.succeed(&mut u.open, Proc::PdnConnect);
                }
            }
            Esm::ActivateDefaultEpsBearerContextReject(r) => {
                // The UE refused the new PDN connection: release it (never the last).
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                if u.pending_bearers.contains(&ebi) {
                    let why = ProcFailure::Rejected(r.esm_cause.value);
                    let l = &mut self.stats.procedures;
                    l.fail(&mut u.open, Proc::PdnConnect, why);
                    u.pending_bearers.retain(|b| *b != ebi);
                    if let Some(s) = u.slot {
                        warn_cp(
                            id,
                            format_args!("removal of refused PDN connection {ebi}"),
                            cp.remove_pdn(s, ebi),
                        );
                    }
                }
            }
            Esm::ActivateDedicatedEpsBearerContextAccept(_)
            | Esm::ModifyEpsBearerContextAccept(_) => {
                if let Some(u) = self.ue_mut(cp, id) {
                    u.pending_bearers.retain(|b| *b != ebi);
                }
            }
            Esm::ActivateDedicatedEpsBearerContextReject(_)
            | Esm::DeactivateEpsBearerContextAccept(_) => {
                let Some(u) = self.ue_mut(cp, id) else {
                    return;
                };
                u.pending_bearers.retain(|b| *b != ebi);
                if let Some(s) = u.slot {
                    // Debug: the accept of our own deactivation finds the bearer gone.
                    log_cp(
                        tracing::Level::DEBUG,
                        id,
                        format_args!("removal of bearer {ebi}"),
                        cp.remove_bearer(s, ebi),
                    );
                }
            }
            _ => {}
        }
    }

    /// An ESM reject to the UE: plain ESM inside the UE's protected NAS, no bearer.
    pub(crate) fn send_esm_reject(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        m: NasEpsMessage,
        out: &mut Vec<Output>,
    ) {
        self.send_nas(cp, id, m, false, None, out);
    }
}
