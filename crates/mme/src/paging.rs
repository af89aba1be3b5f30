//! Paging (TS 23.401 §5.3.4.3, TS 24.301 §5.6.2, TS 36.413 §8.5), supervised by T3413.

use crate::prelude::*;

impl Mme {
    pub(crate) fn page(
        &mut self,
        cp: &mut ControlPlane,
        _slot: u32,
        imsi: u64,
        out: &mut Vec<Output>,
    ) {
        self.restore_imsi_first(cp, imsi, out);
        let Some(id) = self.index.by_imsi(imsi) else {
            cp.paging_failed(_slot);
            return;
        };
        let Some((mut cx, u)) = self.split(cp, id, out) else {
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
        u.paging_left = cx.cfg.paging_attempts;
        send_paging(&mut cx, u);
    }

    pub(crate) fn send_paging(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        if let Some((mut cx, u)) = self.split(cp, id, out) {
            send_paging(&mut cx, u);
        }
    }

    pub(crate) fn paging_expired(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        let Some((mut cx, u)) = self.split(cp, id, out) else {
            return;
        };
        if u.conn.is_some() {
            return;
        }
        if u.paging_left > 0 {
            send_paging(&mut cx, u);
        } else {
            cx.stats.paging_failures += 1;
            let why = ProcFailure::Timeout;
            cx.stats.procedures.fail(&mut u.open, Proc::Paging, why);
            if let Some(s) = u.slot {
                cp.paging_failed(s);
            }
        }
    }
}

/// Page `u` (S1AP Paging by its S-TMSI in every served TA) and arm T3413.
fn send_paging(cx: &mut Cx<'_>, u: &mut Ue) {
    if !crate::mme::ledger::is_open(u.open, Proc::Paging) {
        // The first Paging of an episode (its repetitions are the same procedure).
        cx.stats.procedures.start(&mut u.open, Proc::Paging);
    }
    u.paging_left = u.paging_left.saturating_sub(1);
    let imsi = u.imsi.unwrap_or(0);
    let tais: Vec<Tai> = cx
        .cfg
        .served_tacs
        .iter()
        .map(|t| Tai {
            plmn: cx.cfg.plmn,
            tac: *t,
        })
        .collect();
    let msg = Paging {
        ue_identity_index: (imsi % 1024) as u16,
        paging_id: pepc_s1ap::PagingIdentity::STmsi(pepc_s1ap::STmsi {
            mmec: cx.cfg.mme_code,
            m_tmsi: u.m_tmsi,
        }),
        cn_domain: pepc_s1ap::CnDomain::Ps,
        tai_list: tais.clone(),
    };
    cx.stats.pagings += 1;
    // Encoded once; the node's endpoint sends it to every eNB serving the TAIs.
    match S1apMessage::from(msg).encode() {
        Ok(bytes) => cx.out.push(Output::Page { tais, bytes }),
        Err(e) => tracing::warn!("cannot encode Paging: {e}"),
    }
    let at = cx.now + cx.cfg.t3413;
    cx.arm(u, TimerKind::Paging, at);
}
