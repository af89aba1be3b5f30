//! eNB (non-UE-associated) S1AP procedures: S1 Setup (TS 36.413 §8.7.3), Reset (§8.7.1),
//! Error Indication (§8.7.2), loss of an eNB's association (TS 23.401 §5.3.5).

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
        log(
            out,
            LogLevel::Debug,
            format!(
                "assoc {assoc}: Error Indication {cause:?} for {what} (MME-UE-S1AP-ID {mme:?}, eNB-UE-S1AP-ID {enb:?})"
            ),
        );
        self.send(
            assoc,
            None,
            ErrorIndication {
                mme_ue_id: mme,
                enb_ue_id: enb,
                cause: Some(cause),
            }
            .into(),
            out,
        );
    }

    pub(crate) fn s1_setup(
        &mut self,
        assoc: AssocId,
        m: S1SetupRequest,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let ok = m
            .supported_tas
            .iter()
            .any(|ta| ta.plmns.contains(&self.cfg.plmn));
        if !ok {
            self.stats.s1_setup_failures += 1;
            self.send(
                assoc,
                None,
                S1SetupFailure {
                    cause: Cause::UNKNOWN_PLMN,
                    time_to_wait: None,
                }
                .into(),
                out,
            );
            return;
        }
        // Re-association of a known eNB: the old association is gone for good.
        if let Some(old) = self.enb_by_gid.get(&m.global_enb_id).copied() {
            if old != assoc {
                self.enb_gone(old, cp, out);
                out.push(Output::CloseAssoc { assoc: old });
            }
        }
        let tais = m
            .supported_tas
            .iter()
            .flat_map(|ta| {
                ta.plmns.iter().map(|p| Tai {
                    plmn: *p,
                    tac: ta.tac,
                })
            })
            .collect();
        let e = self.enbs.entry(assoc).or_insert(Enb {
            out_streams: 1,
            global_id: None,
            tais: vec![],
        });
        e.global_id = Some(m.global_enb_id);
        e.tais = tais;
        self.enb_by_gid.insert(m.global_enb_id, assoc);
        self.stats.s1_setups += 1;
        let resp = S1SetupResponse {
            mme_name: self.cfg.mme_name.clone(),
            served_gummeis: vec![ServedGummei {
                plmns: vec![self.cfg.plmn],
                group_ids: vec![self.cfg.mme_group_id],
                codes: vec![self.cfg.mme_code],
            }],
            relative_capacity: self.cfg.relative_capacity,
        };
        self.send(assoc, None, resp.into(), out);
    }

    /// The eNB lost its association: its connected UEs go idle (TS 23.401 §5.3.5).
    pub(crate) fn enb_gone(
        &mut self,
        assoc: AssocId,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        if let Some(e) = self.enbs.remove(&assoc) {
            if let Some(g) = e.global_id {
                if self.enb_by_gid.get(&g) == Some(&assoc) {
                    self.enb_by_gid.remove(&g);
                }
            }
        }
        let ids: Vec<u32> = self
            .by_conn
            .iter()
            .filter(|((a, _), _)| *a == assoc)
            .map(|(_, id)| *id)
            .collect();
        for id in ids {
            self.make_idle(id, cp, out);
        }
    }

    pub(crate) fn reset(
        &mut self,
        assoc: AssocId,
        m: Reset,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let connections = match &m.kind {
            pepc_s1ap::ResetKind::All => {
                let ids: Vec<u32> = self
                    .by_conn
                    .iter()
                    .filter(|((a, _), _)| *a == assoc)
                    .map(|(_, id)| *id)
                    .collect();
                for id in ids {
                    self.make_idle(id, cp, out);
                }
                vec![]
            }
            pepc_s1ap::ResetKind::Partial(list) => {
                for c in list {
                    let id = c
                        .mme_ue_id
                        .filter(|i| {
                            self.ues
                                .get(i)
                                .is_some_and(|u| u.conn.map(|x| x.0) == Some(assoc))
                        })
                        .or_else(|| {
                            c.enb_ue_id
                                .and_then(|e| self.by_conn.get(&(assoc, e)).copied())
                        });
                    if let Some(id) = id {
                        self.make_idle(id, cp, out);
                    }
                }
                list.clone()
            }
        };
        self.send(assoc, None, ResetAcknowledge { connections }.into(), out);
    }
}
