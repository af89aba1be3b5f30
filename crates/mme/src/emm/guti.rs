//! GUTI allocation and the GUTI reallocation procedure (TS 24.301 §5.4.1).

use crate::prelude::*;
use pepc_slice::control::TapKey;

impl Mme {
    /// The GUTI of registered subscriber `imsi` (its one copy: the M-TMSI in the
    /// signaling part of its context, with this MME's identity).
    pub fn guti_of(&self, cp: &ControlPlane, imsi: u64) -> Option<Guti> {
        Some(Guti {
            plmn: self.cfg.plmn,
            mme_group_id: self.cfg.mme_group_id,
            mme_code: self.cfg.mme_code,
            m_tmsi: self.m_tmsi_of(cp, imsi)?,
        })
    }

    /// Tell the node this slice now holds `imsi` (learned by identity, not by the
    /// IMSI route), so no other slice keeps a context of it.
    pub(crate) fn claim(&self, imsi: u64, out: &mut Vec<Output>) {
        if self.role.count > 1 {
            out.push(Output::ClaimImsi { imsi });
        }
    }

    /// Next free MME UE S1AP ID of this slice (never 0).
    pub(crate) fn alloc_mme_ue_id(&mut self) -> u32 {
        let (ids, index) = (self.role.ids(), self.role.index);
        let ix = &mut self.index;
        let drawn = self.draws.draw(TapKey::MmeUeId, |claim| match claim {
            None => Some(u64::from(ix.alloc_id(ids, index))),
            Some(w) => {
                let id = u32::try_from(w).ok()?;
                (id != 0 && ids.slice_of(id) == index && !ix.contains(id)).then_some(w)
            }
        });
        match drawn {
            Some(w) => w as u32,
            None => self.index.alloc_id(ids, index),
        }
    }

    /// A new M-TMSI of this slice (the demux finds the slice in its top bits).
    pub(crate) fn alloc_tmsi(&mut self) -> u32 {
        // A parked context keeps its M-TMSI until it expires; a UE still being
        // restored after a restart keeps its own.
        let (parked, restoring) = (&self.parked, &self.restoring);
        let taken =
            |t: u32| parked.contains_key(&t) || restoring.as_ref().is_some_and(|r| r.holds_tmsi(t));
        let (ids, index) = (self.role.ids(), self.role.index);
        let ix = &mut self.index;
        let drawn = self.draws.draw(TapKey::MTmsi, |claim| match claim {
            None => Some(u64::from(ix.alloc_tmsi(ids, index, taken))),
            Some(w) => {
                let t = u32::try_from(w).ok()?;
                (ids.slice_of(t) == index && !ix.has_tmsi(t) && !taken(t)).then_some(w)
            }
        });
        match drawn {
            Some(w) => w as u32,
            None => self.index.alloc_tmsi(ids, index, taken),
        }
    }

    /// The number of a new HSS or PCRF request (its answer names it).
    pub(crate) fn next_hss_seq(&mut self) -> u32 {
        let seq = &mut self.hss_seq;
        let drawn = self.draws.draw(TapKey::RequestNumber, |claim| {
            *seq = match claim {
                None => seq.wrapping_add(1),
                Some(w) => u32::try_from(w).ok()?,
            };
            Some(u64::from(*seq))
        });
        drawn.map_or(self.hss_seq, |w| w as u32)
    }

    /// GUTI Reallocation (connected UE), supervised by T3450.
    pub fn reallocate_guti(
        &mut self,
        now: Instant,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<u32, MmeError> {
        let call = crate::record::put::reallocate_guti(imsi);
        self.run_recorded(now, cp, out, call, |m, cp, out| {
            m.operator_guti_reallocation(now, imsi, cp, out)
        })
    }

    fn operator_guti_reallocation(
        &mut self,
        now: Instant,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<u32, MmeError> {
        self.now = now;
        self.restore_imsi_first(cp, imsi, out);
        let id = self.index.by_imsi(imsi).ok_or(MmeError::UnknownUe)?;
        let slot = self.entry_of(id).ok_or(MmeError::UnknownUe)?;
        let u = cp.signaling_mut(slot).ok_or(MmeError::UnknownUe)?;
        if u.conn.is_none() {
            return Err(MmeError::NotConnected);
        }
        let t = self.alloc_tmsi();
        let mut cx = self.cx(out);
        let plmn = cx.cfg.plmn.0;
        let cmd = nasx::NasGutiReallocationCommand::new(nasx::NasEpsMobileIdentity::new(
            nasx::guti_value(plmn, cx.cfg.mme_group_id, cx.cfg.mme_code, t),
        ));
        u.proc = Procedure::ExpectGutiReallocComplete { m_tmsi: t };
        cx.stats
            .procedures
            .start(&mut u.open, Proc::GutiReallocation);
        // Old and new GUTI are both valid until the UE confirms (TS 24.301 §5.4.1.4),
        // and a checkpoint keeps the new one: a UE that took it finds its context
        // after a restart too.
        cx.index.link_tmsi(t, id);
        cx.procedure_done(id);
        let d = cx.cfg.t3450;
        cx.send_nas(u, NasEpsMessage::new_emm(cmd), false, Some(d));
        self.flush_released(cp, out);
        Ok(t)
    }
}

/// GUTI Reallocation Complete, or the TAU Complete of a TAU that gave a new GUTI
/// (§5.4.1.4): the new M-TMSI is the UE's, the old one no longer names it.
pub(crate) fn realloc_complete(cx: &mut Cx<'_>, u: &mut Ue) {
    let Procedure::ExpectGutiReallocComplete { m_tmsi: t } = u.proc else {
        return;
    };
    u.proc = Procedure::Idle;
    cx.index.unlink_tmsi(u.m_tmsi);
    u.m_tmsi = t;
    cx.index.link_tmsi(t, u.id);
    u.stop_nas_timer();
    cx.stats
        .procedures
        .succeed(&mut u.open, Proc::GutiReallocation);
    cx.procedure_done(u.id);
}
