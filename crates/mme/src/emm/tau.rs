//! Tracking area updating (TS 24.301 §5.5.3, TS 23.401 §5.3.3).

use crate::prelude::*;

impl Mme {
    /// A Tracking Area Update Request the NAS security gate let through: verified, or
    /// from a context without security (which cannot be updated).
    pub(crate) fn tau(
        &mut self,
        now: Instant,
        id: u32,
        t: nasx::NasTrackingAreaUpdateRequest,
        verified: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let registered = self
            .ue(cp, id)
            .is_some_and(|u| u.emm == Emm_::Registered && u.sec.is_some());
        if !verified || !registered {
            // Unknown here, or known without a security context: the UE must attach
            // again (#9). (A registered UE's unverified TAU never comes here: the gate
            // has it authenticated first.)
            let cause = EmmCause::UeIdentityCannotBeDerived;
            self.stats.failed("tau", cause.into());
            let rej = nasx::NasTrackingAreaUpdateReject::new(nasx::NasEmmCause::new(cause.into()));
            if let Some(u) = self.ue_mut(cp, id) {
                if !registered {
                    u.sec = None;
                }
            }
            self.send_nas(cp, now, id, NasEpsMessage::new_emm(rej), false, None, out);
            if registered {
                self.release_connection(id, Cause::NAS_UNSPECIFIED, cp, out);
            } else {
                self.release(cp, id, Cause::NAS_UNSPECIFIED, true, out);
            }
            return;
        }
        let active = t.eps_update_type.value & 0x08 != 0;
        if let Some(u) = self.ue_mut(cp, id) {
            u.started.get_or_insert(now);
        }
        self.tau_accept(now, id, active, cp, out);
    }

    /// Tracking Area Update Accept, then the user plane (`active` flag) or the release
    /// of the connection.
    pub(crate) fn tau_accept(
        &mut self,
        now: Instant,
        id: u32,
        active: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.stats.tau += 1;
        let Some(u) = self.ue(cp, id) else {
            return;
        };
        let plmn = self.cfg.plmn.0;
        let mut acc = nasx::NasTrackingAreaUpdateAccept::new(nasx::NasEpsUpdateResult::new(0));
        acc.t3412_value = Some(nasx::NasT3412Value::new(nasx::gprs_timer(
            self.cfg.t3412.as_secs(),
        )));
        acc.tai_list = Some(nasx::NasTrackingAreaIdentityList::new(
            nasx::tai_list_value(plmn, &self.cfg.served_tacs),
        ));
        acc.eps_bearer_context_status = Some(nasx::NasEpsBearerContextStatus::new(bearer_status(
            cp, u.slot,
        )));
        self.send_nas(cp, now, id, NasEpsMessage::new_emm(acc), false, None, out);
        if let Some(t0) = self.ue_mut(cp, id).and_then(|u| u.started.take()) {
            self.stats
                .tau_latency
                .observe(now.saturating_duration_since(t0));
        }
        self.procedure_done(id);
        if active {
            self.send_ics(id, None, cp, out);
        } else {
            self.release_connection(id, Cause::NAS_NORMAL_RELEASE, cp, out);
        }
    }
}

pub(crate) fn bearer_status(cp: &ControlPlane, slot: Option<u32>) -> Vec<u8> {
    let mut bits = 0u16;
    if let Some(u) = slot.and_then(|s| cp.ue(s)) {
        for b in &u.bearers {
            bits |= 1 << b.ebi;
        }
    }
    vec![(bits & 0xff) as u8, (bits >> 8) as u8]
}
