//! Paging (TS 23.401 §5.3.4.3, TS 24.301 §5.6.2, TS 36.413 §8.5), supervised by T3413.

use crate::prelude::*;

impl Mme {
    pub(crate) fn page(
        &mut self,
        now: Instant,
        _slot: u32,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.restore_imsi_first(cp, imsi, out);
        let Some(id) = self.index.by_imsi(imsi) else {
            cp.paging_failed(_slot);
            return;
        };
        let Some(u) = self.ue_mut(cp, id) else {
            cp.paging_failed(_slot);
            return;
        };
        if u.conn.is_some() {
            // Downlink for a UE on an S1 connection without user plane: its tunnels
            // went with a release under way, or it is in a procedure that sets none
            // up (a TAU without the active flag). Page it once the connection is
            // released, unless a bearer setup on this connection delivers the data
            // first (then the flag is cleared).
            u.page_after_release = true;
            return;
        }
        if u.paging_timer.is_some() {
            return;
        }
        u.paging_left = self.cfg.paging_attempts;
        self.send_paging_ue(u, now, id, out);
    }

    pub(crate) fn send_paging(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        id: u32,
        out: &mut Vec<Output>,
    ) {
        if let Some(u) = self.ue_mut(cp, id) {
            self.send_paging_ue(u, now, id, out);
        }
    }

    /// [`Mme::send_paging`] for UE `id`, whose context `u` is at hand.
    fn send_paging_ue(&mut self, u: &mut Ue, now: Instant, id: u32, out: &mut Vec<Output>) {
        u.paging_left = u.paging_left.saturating_sub(1);
        let imsi = u.imsi.unwrap_or(0);
        let tais: Vec<Tai> = self
            .cfg
            .served_tacs
            .iter()
            .map(|t| Tai {
                plmn: self.cfg.plmn,
                tac: *t,
            })
            .collect();
        let msg = Paging {
            ue_identity_index: (imsi % 1024) as u16,
            paging_id: pepc_s1ap::PagingIdentity::STmsi(pepc_s1ap::STmsi {
                mmec: self.cfg.mme_code,
                m_tmsi: u.m_tmsi,
            }),
            cn_domain: pepc_s1ap::CnDomain::Ps,
            tai_list: tais.clone(),
        };
        self.stats.pagings += 1;
        // Encoded once; the node's endpoint sends it to every eNB serving the TAIs.
        match S1apMessage::from(msg).encode() {
            Ok(bytes) => out.push(Output::Page { tais, bytes }),
            Err(e) => tracing::warn!("cannot encode Paging: {e}"),
        }
        let t = self.cfg.t3413;
        self.arm_ue(u, id, TimerKind::Paging, now + t);
    }

    pub(crate) fn paging_expired(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        if u.conn.is_some() {
            return;
        }
        if u.paging_left > 0 {
            self.send_paging_ue(u, now, id, out);
        } else {
            self.stats.paging_failures += 1;
            if let Some(s) = u.slot {
                cp.paging_failed(s);
            }
        }
    }
}
