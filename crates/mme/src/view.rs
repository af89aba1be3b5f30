//! What an operator sees of a UE (the management API's `/ues`): identifiers, EMM/ECM
//! state, where it is, its PDN connections and bearers with their tunnels and usage.
//! Built on the control thread that owns the UE, on request; never its keys.

use crate::prelude::*;

/// One bearer as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BearerView {
    pub ebi: u8,
    pub qci: u8,
    pub arp_priority: u8,
    pub teid_ul: u32,
    /// The eNB's tunnel (0 / unspecified while the UE is idle).
    pub enb_teid: u32,
    pub enb_addr: std::net::Ipv4Addr,
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
}

/// One PDN connection as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PdnView {
    pub apn: String,
    pub ip: std::net::Ipv4Addr,
    pub default_ebi: u8,
}

/// One UE as shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UeView {
    pub imsi: u64,
    pub mme_ue_s1ap_id: u32,
    pub registered: bool,
    pub connected: bool,
    /// The S1 connection: association and eNB UE S1AP ID.
    pub enb: Option<(AssocId, u32)>,
    pub tac: u16,
    pub cell_id: u32,
    pub m_tmsi: u32,
    pub procedure: &'static str,
    pub ambr_ul: u64,
    pub ambr_dl: u64,
    pub pdns: Vec<PdnView>,
    pub bearers: Vec<BearerView>,
}

/// Which UEs a listing takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UeFilter {
    All,
    Connected,
    Idle,
}

impl Mme {
    /// UE `imsi`, if this slice holds it.
    pub fn ue_view(&self, cp: &ControlPlane, imsi: u64) -> Option<UeView> {
        let id = self.index.by_imsi(imsi)?;
        self.view_of(cp, id)
    }

    /// Up to `limit` UEs after skipping `offset` (in the index's order, which changes
    /// as UEs come and go), and how many match in all. Costs `offset + limit` steps.
    pub fn ue_views(
        &self,
        cp: &ControlPlane,
        filter: UeFilter,
        offset: usize,
        limit: usize,
    ) -> (usize, Vec<UeView>) {
        let keep = |connected: bool| match filter {
            UeFilter::All => true,
            UeFilter::Connected => connected,
            UeFilter::Idle => !connected,
        };
        let total = match filter {
            UeFilter::All => self.index.imsi_count(),
            _ => self
                .index
                .imsis()
                .filter(|(_, id)| keep(self.ue(cp, *id).is_some_and(|u| u.conn.is_some())))
                .count(),
        };
        let v = self
            .index
            .imsis()
            .filter_map(|(_, id)| self.view_of(cp, id))
            .filter(|v| keep(v.connected))
            .skip(offset)
            .take(limit)
            .collect();
        (total, v)
    }

    fn view_of(&self, cp: &ControlPlane, id: u32) -> Option<UeView> {
        let u = self.ue(cp, id)?;
        let ctx = u.slot.and_then(|s| cp.ue(s));
        let pdns = ctx.map_or(vec![], |c| {
            c.pdns
                .iter()
                .map(|p| PdnView {
                    apn: p.apn.clone(),
                    ip: p.ip,
                    default_ebi: p.default_ebi,
                })
                .collect()
        });
        let bearers = match (ctx, u.slot) {
            (Some(c), Some(slot)) => c
                .bearers
                .iter()
                .map(|b| {
                    let us = cp.usage(slot, b.ebi).unwrap_or_default();
                    BearerView {
                        ebi: b.ebi,
                        qci: b.qci,
                        arp_priority: b.arp.priority_level,
                        teid_ul: b.teid_ul,
                        enb_teid: b.enb_teid,
                        enb_addr: b.enb_addr,
                        ul_packets: us.ul_packets,
                        ul_bytes: us.ul_bytes,
                        dl_packets: us.dl_packets,
                        dl_bytes: us.dl_bytes,
                    }
                })
                .collect(),
            _ => vec![],
        };
        Some(UeView {
            imsi: u.imsi?,
            mme_ue_s1ap_id: id,
            registered: u.emm == Emm_::Registered,
            connected: u.conn.is_some(),
            enb: u.conn.map(|c| (c.assoc, c.enb_ue_id)),
            tac: u.tai.tac,
            cell_id: u.ecgi.cell_id,
            m_tmsi: u.m_tmsi,
            procedure: u.proc.name(),
            ambr_ul: ctx.map_or(0, |c| c.ambr_ul),
            ambr_dl: ctx.map_or(0, |c| c.ambr_dl),
            pdns,
            bearers,
        })
    }
}
