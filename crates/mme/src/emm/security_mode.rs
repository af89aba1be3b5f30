//! Security mode control (TS 24.301 §5.4.3): Security Mode Complete, then the attach's ESM
//! information request (§6.6.1.2), Update Location at the HSS and the session.

use crate::prelude::*;

impl Mme {
    /// A Security Mode Reject: the security mode procedure under way (if one is: an
    /// unverified reject outside one changes nothing) fails; an attach is rejected, a
    /// re-authentication aborted.
    pub(crate) fn smc_reject(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        let Some(then) = self.ue(cp, id).and_then(|u| match u.proc {
            Procedure::ExpectSmcComplete { then, .. } => Some(then),
            _ => None,
        }) else {
            self.stats.nas_gate_discards += 1;
            return;
        };
        self.stop_nas_timer(cp, id);
        self.aka_failed(cp, id, then, EmmCause::UeSecurityCapabilitiesMismatch, out);
    }

    /// NAS security is in place (AKA and security mode done, or a verified parked
    /// context): the attach goes on (ESM information if wanted, then the session), or
    /// the message the gate held is served.
    pub(crate) fn security_established(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        then: Resume,
        out: &mut Vec<Output>,
    ) {
        match then {
            Resume::Attach => self.commit_subscriber(cp, id, out),
            Resume::Tau { active } => {
                self.proc_end(cp, id, Proc::Authentication, Ok(()));
                return self.tau_accept(cp, id, active, out);
            }
            Resume::Detach => {
                self.proc_end(cp, id, Proc::Authentication, Ok(()));
                return self.ue_detach(cp, id, false, out);
            }
        }
        // The subscriber's context may have superseded another: looked up again.
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return;
        };
        let want_info = cx.cfg.esm_info_request || std::mem::take(&mut u.esm_info_flag);
        if want_info {
            u.proc = Procedure::ExpectEsmInfo;
            let pti = u.pti;
            let msg = NasEpsMessage::new_esm(nasx::NasEsmInformationRequest::new(), 0, pti);
            let t = cx.cfg.t3460;
            cx.send_nas(u, msg, false, Some(t));
            return;
        }
        // Update Location (TS 23.401 §5.3.2.1 step 8): only now does the HSS record
        // this MME as the subscriber's. The session follows its answer.
        if let Some(imsi) = u.imsi {
            self.ask_profile(cp, id, imsi, out);
        }
    }
}

/// The Security Mode Complete, verified under the context being established
/// (§5.4.3.3): that context is the UE's now; what the AKA was for follows. `None`:
/// not awaited (a stray Complete changes nothing).
pub(crate) fn smc_complete(cx: &mut Cx<'_>, u: &mut Ue) -> Option<Resume> {
    let (sec, then) = match std::mem::replace(&mut u.proc, Procedure::Idle) {
        Procedure::ExpectSmcComplete { sec, then } => (sec, then),
        other => {
            u.proc = other;
            return None;
        }
    };
    u.stop_nas_timer();
    u.sec = Some(sec);
    u.nas_secured = true;
    cx.authenticated(u);
    Some(then)
}
