//! Detach (TS 24.301 §5.5.2, TS 23.401 §5.3.8): UE-initiated (§5.5.2.2) and
//! network-initiated (§5.5.2.3).

use crate::prelude::*;

impl Mme {
    pub(crate) fn ue_detach(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        switch_off: bool,
        out: &mut Vec<Output>,
    ) {
        self.stats.detaches += 1;
        // Started here, or at the gate's re-authentication before it.
        if let Some(u) = self.ue_mut(cp, id) {
            let l = &mut self.stats.procedures;
            if !crate::mme::ledger::is_open(u.open, Proc::Detach) {
                l.start(&mut u.open, Proc::Detach);
            }
            l.succeed(&mut u.open, Proc::Detach);
        }
        if self.cfg.purge_on_detach {
            self.purge_at_hss(cp, id, out);
        }
        self.drop_session(cp, id);
        self.procedure_done(id);
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return;
        };
        u.emm = Emm_::Deregistered;
        u.nas_timer = None;
        u.retx = None;
        if !switch_off {
            let acc = NasEpsMessage::new_emm(nasx::NasDetachAccept::new());
            cx.send_nas(u, acc, false, None);
        }
        cx.release(u, Cause::NAS_DETACH, true);
    }

    /// Network-initiated detach (re-attach required), supervised by T3422. An idle UE
    /// is detached locally.
    pub fn detach_ue(
        &mut self,
        now: Instant,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let call = crate::record::put::detach_ue(imsi);
        self.run_recorded(now, cp, out, call, |m, cp, out| {
            m.operator_detach(now, imsi, cp, out)
        })
    }

    fn operator_detach(
        &mut self,
        now: Instant,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        self.now = now;
        self.restore_imsi_first(cp, imsi, out);
        let id = self.index.by_imsi(imsi).ok_or(MmeError::UnknownUe)?;
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return Err(MmeError::UnknownUe);
        };
        if u.conn.is_some() {
            cx.stats.procedures.start(&mut u.open, Proc::NetworkDetach);
            u.proc = Procedure::ExpectDetachAccept;
            let req = nasx::NasDetachRequestUeTerminated::new(nasx::NasDetachType::new(1));
            let t = cx.cfg.t3422;
            cx.send_nas(u, NasEpsMessage::new_emm(req), false, Some(t));
        } else {
            self.stats.detaches += 1;
            self.stats.procedures.at_once(Proc::NetworkDetach, Ok(()));
            self.remove_ue(cp, id, false);
        }
        self.flush_released(cp, out);
        Ok(())
    }
}
