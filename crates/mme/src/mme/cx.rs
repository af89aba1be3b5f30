//! What a procedure works with besides its UE: [`Cx`], the MME's parts other than the
//! UE table (config, the UE index, timers, stats, admission, eNB streams, checkpoints
//! due) with the time of the input and the outputs. A handler takes
//! `(cx: &mut Cx, ue: &mut Ue, input)`; [`Mme::split`] yields both from one lookup
//! of the UE's entry. A procedure that must reach another UE (a superseded context, a
//! GUTI collision) or the slice's data path goes back to the [`Mme`] with the slice
//! (`ControlPlane`) explicitly.

use super::admission::Admission;
use super::index::UeIndex;
use super::timers::TimerTable;
use super::{Enb, Map};
use crate::prelude::*;

pub(crate) struct Cx<'a> {
    /// The time of the input being handled.
    pub(crate) now: Instant,
    pub(crate) cfg: &'a MmeConfig,
    pub(crate) index: &'a mut UeIndex,
    pub(crate) timers: &'a mut TimerTable,
    pub(crate) stats: &'a mut crate::mme::MmeStats,
    pub(crate) admission: &'a mut Admission,
    /// eNB associations (their outbound stream counts).
    pub(crate) enbs: &'a Map<AssocId, Enb>,
    /// UEs whose procedure ended in this input (checkpointed once it is handled).
    pub(crate) dirty: &'a mut Vec<u32>,
    pub(crate) out: &'a mut Vec<Output>,
}

impl Mme {
    /// The procedures' context over this MME, for the input of `self.now`.
    pub(crate) fn cx<'a>(&'a mut self, out: &'a mut Vec<Output>) -> Cx<'a> {
        Cx {
            now: self.now,
            cfg: &self.cfg,
            index: &mut self.index,
            timers: &mut self.timers,
            stats: &mut self.stats,
            admission: &mut self.admission,
            enbs: &self.enbs,
            dirty: &mut self.dirty,
            out,
        }
    }

    /// UE `id`'s context and the procedures' context beside it: one lookup of the
    /// UE's entry in the slice's table. `None` if there is no such UE.
    #[inline]
    pub(crate) fn split<'a>(
        &'a mut self,
        cp: &'a mut ControlPlane,
        id: u32,
        out: &'a mut Vec<Output>,
    ) -> Option<(Cx<'a>, &'a mut Ue)> {
        let ue = cp.signaling_mut(self.index.slot(id)?)?;
        Some((self.cx(out), ue))
    }
}

/// The SCTP stream of UE `id`'s messages on `assoc`: 0 is for non-UE signaling.
pub(crate) fn stream_for(enbs: &Map<AssocId, Enb>, assoc: AssocId, id: u32) -> u16 {
    let n = enbs.get(&assoc).map(|e| e.out_streams).unwrap_or(1);
    if n <= 1 {
        0
    } else {
        1 + (id % (n as u32 - 1)) as u16
    }
}

/// Encode `msg` and queue it to `assoc` (on UE `ue`'s stream if it is UE-associated).
pub(crate) fn send_s1(
    enbs: &Map<AssocId, Enb>,
    assoc: AssocId,
    ue: Option<u32>,
    msg: S1apMessage,
    out: &mut Vec<Output>,
) {
    let stream = ue.map(|i| stream_for(enbs, assoc, i)).unwrap_or(0);
    match msg.encode() {
        Ok(bytes) => out.push(Output::S1ap {
            assoc,
            stream,
            bytes,
        }),
        Err(e) => tracing::warn!("cannot encode {}: {e}", msg.name()),
    }
}

/// Encode (and protect when a context is in use) a downlink NAS message for `u`;
/// a checkpoint is due once its downlink COUNT nears the end of its lease.
pub(crate) fn nas_bytes(
    cfg: &MmeConfig,
    dirty: &mut Vec<u32>,
    u: &mut Ue,
    msg: &NasEpsMessage,
    new_ctx: bool,
) -> Option<Vec<u8>> {
    let r = if new_ctx {
        // The context being established: the Security Mode Command's.
        let Procedure::ExpectSmcComplete { sec, .. } = &mut u.proc else {
            return None;
        };
        sec.protect(msg, true, Direction::Downlink)
    } else if let (Some(s), true) = (u.sec.as_mut(), u.nas_secured) {
        // Protected once the secure exchange is established on this connection;
        // before (a re-authentication the gate asked for: the sender may not hold
        // the context), the UE takes them plain (§4.4.4.2).
        s.protect(msg, false, Direction::Downlink)
    } else {
        msg.encode()
            .map_err(|e| crate::nasx::NasSecError::Codec(e.to_string()))
    };
    let dl = u.sec.as_ref().map_or(0, |s| s.ctx.dl_count);
    if dl.wrapping_sub(u.ckpt_dl) & 0x00ff_ffff >= CHECKPOINT_DL_LEASE / 2 {
        // Renew the lease before the count can pass it.
        procedure_done(cfg, dirty, u.id);
    }
    r.ok()
}

/// The end of a procedure of UE `id`: its state is worth a checkpoint once the input
/// is handled (a registered UE's whole snapshot, or its removal).
pub(crate) fn procedure_done(cfg: &MmeConfig, dirty: &mut Vec<u32>, id: u32) {
    if cfg.checkpoints && !dirty.contains(&id) {
        dirty.push(id);
    }
}

/// Arm `u`'s timer of `kind` for `at`.
pub(crate) fn arm(timers: &mut TimerTable, u: &mut Ue, kind: TimerKind, at: Instant) {
    *u.timer_mut(kind) = Some(at);
    timers.push(at, u.id, kind);
}

impl Cx<'_> {
    pub(crate) fn send(&mut self, assoc: AssocId, ue: Option<u32>, msg: S1apMessage) {
        send_s1(self.enbs, assoc, ue, msg, self.out)
    }

    pub(crate) fn arm(&mut self, u: &mut Ue, kind: TimerKind, at: Instant) {
        arm(self.timers, u, kind, at)
    }

    pub(crate) fn procedure_done(&mut self, id: u32) {
        procedure_done(self.cfg, self.dirty, id)
    }

    /// `u` has a security context now: it no longer counts as unauthenticated.
    pub(crate) fn authenticated(&mut self, u: &mut Ue) {
        u.guard_timer = None;
        if let Some(a) = u.unauth_on.take() {
            self.admission.uncount(self.cfg, a);
        }
    }

    /// Send a NAS message to `u` in Downlink NAS Transport; `timer` arms
    /// T3450/T3460/T3470/T3422 and keeps the message for retransmission.
    pub(crate) fn send_nas(
        &mut self,
        u: &mut Ue,
        msg: NasEpsMessage,
        new_ctx: bool,
        timer: Option<std::time::Duration>,
    ) {
        let Some(bytes) = nas_bytes(self.cfg, self.dirty, u, &msg, new_ctx) else {
            return;
        };
        let Some(c) = u.conn else {
            return;
        };
        if let Some(d) = timer {
            u.retx = Some(Box::new((msg, new_ctx)));
            u.retx_count = 0;
            let at = self.now + d;
            self.arm(u, TimerKind::Nas, at);
        }
        self.send_dl_nas(c, u.id, bytes);
    }

    /// NAS bytes to UE `id` on its S1 connection `c` (Downlink NAS Transport).
    pub(crate) fn send_dl_nas(&mut self, c: ConnKey, id: u32, nas_pdu: Vec<u8>) {
        let msg = DownlinkNasTransport {
            mme_ue_id: id,
            enb_ue_id: c.enb_ue_id,
            nas_pdu,
        };
        self.send(c.assoc, Some(id), msg.into());
    }

    /// Command the release of `u`'s S1 connection (UE Context Release Command); then
    /// the context goes (`then_remove`) or the UE becomes ECM-IDLE, once the eNB
    /// completes it or the release guard runs out.
    pub(crate) fn release(&mut self, u: &mut Ue, cause: Cause, then_remove: bool) {
        let Some(c) = u.conn else {
            return;
        };
        u.proc = Procedure::ExpectReleaseComplete { then_remove };
        // What needed the connection ends with it.
        let why = ProcFailure::ConnectionReleased;
        self.stats.procedures.fail_all(&mut u.open, why);
        // The release ends the NAS procedure it replaces: its retransmission timer
        // goes with it. Left running, it re-sent a Downlink NAS Transport after the
        // UE Context Release Command, for a UE the eNB had already let go (seen
        // under SCTP loss, where retransmissions are pending more often).
        u.nas_timer = None;
        u.retx = None;
        // Not for ever: an eNB that never completes is not keeping the context.
        let at = self.now + self.cfg.release_guard;
        self.arm(u, TimerKind::Guard, at);
        let id = u.id;
        self.send(
            c.assoc,
            Some(id),
            UeContextReleaseCommand {
                ids: UeS1apIds::Pair {
                    mme_ue_id: id,
                    enb_ue_id: c.enb_ue_id,
                },
                cause,
            }
            .into(),
        );
    }
}
