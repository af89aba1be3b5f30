//! What a slice's MME does about its eNBs: Error Indication for a UE-associated
//! message it cannot place (TS 36.413 §8.7.2), the UEs of a Reset (§8.7.1) and of a lost
//! association (TS 23.401 §5.3.5). S1 Setup, eNB Configuration Update, the Reset
//! handshake and Paging fan-out are the node's (`crate::endpoint`).

use crate::prelude::*;

impl Mme {
    /// `what` names the message that triggered it, for the log (IDs only, no keys).
    pub(crate) fn error_indication(
        &mut self,
        assoc: AssocId,
        what: &str,
        mme: Option<u32>,
        enb: Option<u32>,
        cause: Cause,
        out: &mut Vec<Output>,
    ) {
        send_error_indication(assoc, what, mme, enb, cause, out);
    }

    /// The eNB lost its association: its connected UEs go idle (TS 23.401 §5.3.5).
    pub(crate) fn enb_gone(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        out: &mut Vec<Output>,
    ) {
        if let Some(e) = self.enbs.remove(&assoc) {
            if let Some(g) = e.global_id {
                if self.enb_by_gid.get(&g) == Some(&assoc) {
                    self.enb_by_gid.remove(&g);
                }
            }
        }
        self.idle_all_of(cp, assoc, out);
    }

    /// Every UE with an S1 connection on `assoc` goes ECM-IDLE.
    fn idle_all_of(&mut self, cp: &mut ControlPlane, assoc: AssocId, out: &mut Vec<Output>) {
        let mut ids: Vec<u32> = self
            .index
            .conns()
            .filter(|(a, _, _)| *a == assoc)
            .map(|(_, _, id)| id)
            .collect();
        // In MME UE S1AP ID order, not the map's: what is sent must not depend on
        // hashing (a replay gives the same bytes in the same order).
        ids.sort_unstable();
        for id in ids {
            self.make_idle(cp, id, out);
        }
    }

    /// The UE-associated connections of `assoc` that a Reset names (`None`: all of
    /// them) go: their UEs become ECM-IDLE (TS 36.413 §8.7.1; the node's endpoint
    /// acknowledges once every slice is done).
    pub(crate) fn reset(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        connections: Option<Vec<pepc_s1ap::UeConnection>>,
        out: &mut Vec<Output>,
    ) {
        match connections {
            None => self.idle_all_of(cp, assoc, out),
            Some(list) => {
                for c in list {
                    let id = c
                        .mme_ue_id
                        .filter(|i| {
                            self.ue(cp, *i)
                                .is_some_and(|u| u.conn.map(|x| x.assoc) == Some(assoc))
                        })
                        .or_else(|| {
                            c.enb_ue_id
                                .and_then(|e| self.index.by_conn(ConnKey::new(assoc, e)))
                        });
                    if let Some(id) = id {
                        self.make_idle(cp, id, out);
                    }
                }
            }
        }
    }
}

/// An Error Indication to `assoc` on stream 0 (TS 36.413 §8.7.2); `what` names the
/// message that triggered it, for the log (IDs only, no keys).
pub(crate) fn send_error_indication(
    assoc: AssocId,
    what: &str,
    mme: Option<u32>,
    enb: Option<u32>,
    cause: Cause,
    out: &mut Vec<Output>,
) {
    tracing::debug!(
            "assoc {assoc}: Error Indication {cause:?} for {what} (MME-UE-S1AP-ID {mme:?}, eNB-UE-S1AP-ID {enb:?})"
        );
    let m = S1apMessage::from(ErrorIndication {
        mme_ue_id: mme,
        enb_ue_id: enb,
        cause: Some(cause),
    });
    match m.encode() {
        Ok(bytes) => out.push(Output::S1ap {
            assoc,
            stream: 0,
            bytes,
        }),
        Err(e) => tracing::warn!("cannot encode {}: {e}", m.name()),
    }
}

/// A PDU that does not decode: logged, and answered with an Error Indication whose
/// cause says whether the octets or their content were wrong.
pub(crate) fn undecodable_s1ap(assoc: AssocId, e: &pepc_s1ap::S1apError, out: &mut Vec<Output>) {
    let cause = match e {
        pepc_s1ap::S1apError::Decode(_) => Cause::TRANSFER_SYNTAX_ERROR,
        _ => Cause::ABSTRACT_SYNTAX_ERROR_REJECT,
    };
    pepc_ratelog::peer_warn!(
        pepc_ratelog::Kind::S1apUndecodable,
        "assoc {assoc}: undecodable S1AP: {e}"
    );
    send_error_indication(assoc, "undecodable S1AP", None, None, cause, out);
}
