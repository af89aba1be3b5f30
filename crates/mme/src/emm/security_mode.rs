//! Security mode control (TS 24.301 §5.4.3): Security Mode Complete, then the attach's ESM
//! information request (§6.6.1.2) or session.

use crate::prelude::*;

impl Mme {
    pub(crate) fn smc_complete(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ue_mut(cp, id).expect("present");
        let sec = match std::mem::replace(&mut u.proc, Procedure::Idle) {
            Procedure::ExpectSmcComplete { sec } => sec,
            other => {
                u.proc = other; // not awaited: a stray Complete changes nothing
                return;
            }
        };
        u.nas_timer = None;
        u.retx = None;
        u.sec = Some(sec);
        self.security_established(now, id, cp, out);
    }

    /// NAS security is in place for an attach: ESM information if wanted, then the
    /// session.
    pub(crate) fn security_established(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ue_mut(cp, id).expect("present");
        let want_info = self.cfg.esm_info_request || std::mem::take(&mut u.esm_info_flag);
        if want_info {
            u.proc = Procedure::ExpectEsmInfo;
            let pti = u.pti;
            let msg = NasEpsMessage::new_esm(nasx::NasEsmInformationRequest::new(), 0, pti);
            let t = self.cfg.t3460;
            self.send_nas(cp, now, id, msg, false, Some(t), out);
            return;
        }
        self.create_session(now, id, cp, out);
    }
}
