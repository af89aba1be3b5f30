//! Tracking area updating (TS 24.301 §5.5.3, TS 23.401 §5.3.3).

use crate::prelude::*;

impl Mme {
    /// A Tracking Area Update Request the NAS security gate let through: verified, or
    /// from a context without security (which cannot be updated).
    pub(crate) fn tau(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        t: nasx::NasTrackingAreaUpdateRequest,
        verified: bool,
        out: &mut Vec<Output>,
    ) {
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            // No context: counted as the reject it would have had.
            let why = ProcFailure::Rejected(EmmCause::UeIdentityCannotBeDerived.into());
            self.stats.procedures.at_once(Proc::Tau, Err(why));
            return;
        };
        cx.stats.procedures.start(&mut u.open, Proc::Tau);
        let registered = u.emm == Emm_::Registered && u.sec.is_some();
        if !verified || !registered {
            // Unknown here, or known without a security context: the UE must attach
            // again (#9). (A registered UE's unverified TAU never comes here: the gate
            // has it authenticated first.)
            let cause = EmmCause::UeIdentityCannotBeDerived;
            let why = ProcFailure::Rejected(cause.into());
            cx.stats.procedures.fail(&mut u.open, Proc::Tau, why);
            let rej = nasx::NasTrackingAreaUpdateReject::new(nasx::NasEmmCause::new(cause.into()));
            if !registered {
                u.sec = None;
            }
            cx.send_nas(u, NasEpsMessage::new_emm(rej), false, None);
            if registered {
                // Its eNB tunnels go first: with the slice.
                self.release_connection(cp, id, Cause::NAS_UNSPECIFIED, out);
            } else {
                cx.release(u, Cause::NAS_UNSPECIFIED, true);
            }
            return;
        }
        let active = t.eps_update_type.value & 0x08 != 0;
        u.started.get_or_insert(cx.now);
        self.tau_accept(cp, id, active, out);
    }

    /// Tracking Area Update Accept, then the user plane (`active` flag) or the release
    /// of the connection.
    pub(crate) fn tau_accept(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        active: bool,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        self.stats.tau += 1;
        let Some(slot) = self.entry_of(id) else {
            return;
        };
        let status = cp.signaling(slot).map(|u| bearer_status(cp, u.slot));
        let (Some(status), Some(u)) = (status, cp.signaling_mut(slot)) else {
            return;
        };
        let mut cx = self.cx(out);
        let plmn = cx.cfg.plmn.0;
        let mut acc = nasx::NasTrackingAreaUpdateAccept::new(nasx::NasEpsUpdateResult::new(0));
        acc.t3412_value = Some(nasx::NasT3412Value::new(nasx::gprs_timer(
            cx.cfg.t3412.as_secs(),
        )));
        acc.tai_list = Some(nasx::NasTrackingAreaIdentityList::new(
            nasx::tai_list_value(plmn, &cx.cfg.served_tacs),
        ));
        acc.eps_bearer_context_status = Some(nasx::NasEpsBearerContextStatus::new(status));
        cx.send_nas(u, NasEpsMessage::new_emm(acc), false, None);
        cx.stats.procedures.succeed(&mut u.open, Proc::Tau);
        if let Some(t0) = u.started.take() {
            cx.stats
                .tau_latency
                .observe(now.saturating_duration_since(t0));
        }
        cx.procedure_done(id);
        if active {
            self.send_ics(cp, id, None, out);
        } else {
            self.release_connection(cp, id, Cause::NAS_NORMAL_RELEASE, out);
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
