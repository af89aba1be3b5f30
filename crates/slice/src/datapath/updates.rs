//! The control thread's updates, applied by the data thread between batches (it is the
//! single writer of the primary table), and the End Markers a path switch makes.

use super::*;

impl DataPlane {
    /// Apply pending control updates (called before every batch: the paper's sync every
    /// 32 packets) and retry requests the ring could not take.
    pub fn sync(&mut self, now_ns: u64) {
        if !self.request_backlog.is_empty() {
            let backlog = std::mem::take(&mut self.request_backlog);
            for r in backlog {
                match self.requests.push(r) {
                    Ok(()) => self.requests_pushed += 1,
                    Err(r) => self.request_backlog.push(r),
                }
            }
        }
        if !self.updates.is_empty() {
            let mut n = 0;
            // Stop early if originated packets (End Markers) would not fit: the rest
            // of the updates wait for the next sync instead of losing an End Marker.
            while n < self.cfg.max_updates_per_sync
                && self.generated.len < self.generated.capacity()
            {
                let Some(u) = self.updates.pop() else { break };
                self.apply(u);
                n += 1;
            }
            bump(&self.counters.updates_applied, n as u64);
        }
        if !self.pending.is_empty() {
            self.expire_pending(now_ns);
        }
    }

    pub(super) fn apply(&mut self, u: DpUpdate) {
        match u {
            DpUpdate::Ue { slot, rec } => {
                let s = slot as usize;
                let (Some(ul), Some(dl)) = (self.ul_line(slot), self.dl_line(slot)) else {
                    return;
                };
                // A UE newly installed starts with full buckets; re-publishing at the
                // same rates must not refill them.
                let fresh = dl.flags() & HOT_VALID == 0;
                ul.set_ambr(rec.ambr_ul, fresh);
                dl.set_ambr(rec.ambr_dl, fresh);
                let pdn = rec.ips.iter().position(|a| *a != 0).unwrap_or(0);
                ul.set_ue(HOT_VALID, rec.rule_set);
                dl.set_ue(UeDown {
                    ip: rec.ips[pdn],
                    enb_teid: 0,
                    enb_addr: 0,
                    rule_set: rec.rule_set,
                    pdn: pdn as u8,
                    ebi: rec.default_ebis[pdn],
                    flags: HOT_VALID,
                });
                self.ue_cold[s] = rec;
                self.refresh_hot_tunnel(slot);
                self.release_pending(slot);
            }
            DpUpdate::Bearer { slot, rec } => {
                let s = slot as usize;
                if s >= self.bearer_cold.len() {
                    return;
                }
                let valid = self.counters.ul[s].bearer_flags() & HOT_VALID != 0;
                let e = &mut self.bearer_cold[s];
                let moved = valid
                    && e.rec.enb_teid != 0
                    && (e.rec.enb_teid, e.rec.enb_addr) != (rec.enb_teid, rec.enb_addr);
                let (old_teid, old_addr) = (e.rec.enb_teid, e.rec.enb_addr);
                if !valid || !e.mbr_ul.same_rate(&TokenBucket::new(rec.mbr_ul)) {
                    e.mbr_ul = TokenBucket::new(rec.mbr_ul);
                }
                if !valid || !e.mbr_dl.same_rate(&TokenBucket::new(rec.mbr_dl)) {
                    e.mbr_dl = TokenBucket::new(rec.mbr_dl);
                }
                e.rec = rec;
                let mbr = if e.mbr_ul.is_unlimited() && e.mbr_dl.is_unlimited() {
                    0
                } else {
                    HOT_MBR
                };
                self.counters.ul[s].set_bearer(BearerHot {
                    teid_ul: rec.teid_ul,
                    ue_slot: rec.ue_slot,
                    src_ip: rec.ue_ip,
                    flags: HOT_VALID | mbr,
                });
                self.refresh_hot_tunnel(rec.ue_slot);
                if moved {
                    self.emit_end_marker(old_teid, old_addr);
                }
                if rec.enb_teid != 0 {
                    // A downlink tunnel now exists: buffered downlink can flow.
                    self.release_pending(rec.ue_slot);
                }
            }
            DpUpdate::EvictUe { slot } => {
                if let (Some(ul), Some(dl)) = (self.ul_line(slot), self.dl_line(slot)) {
                    let (_, rule_set) = ul.ue();
                    ul.set_ue(0, rule_set);
                    dl.set_ue(UeDown {
                        flags: 0,
                        ..dl.ue()
                    });
                }
            }
            DpUpdate::EvictBearer { slot } => {
                if let Some(l) = self.ul_line(slot) {
                    l.set_bearer_flags(0);
                    let owner = l.bearer().ue_slot;
                    self.refresh_hot_tunnel(owner);
                }
            }
            DpUpdate::BearerExists { slot, teid } => {
                if let Some(k) = self.known_teid.get_mut(slot as usize) {
                    *k = teid.unwrap_or(0);
                    if teid.is_some() {
                        // A new bearer in a reused slot starts from zero.
                        self.counters.reset_bearer(slot);
                    }
                }
            }
            DpUpdate::UeExists { slot, pdns } => {
                if let Some(k) = self.known_pdns.get_mut(slot as usize) {
                    *k = pdns;
                }
                if pdns == 0 {
                    self.refuse_pending(slot);
                }
            }
            DpUpdate::RuleSet { id, rules } => {
                if let Some(s) = self.rule_sets.get_mut(id as usize) {
                    *s = Some(rules);
                }
            }
            DpUpdate::IotTunnel {
                index,
                enb_teid,
                enb_addr,
            } => {
                let i = index as usize * 2;
                if i + 1 < self.iot_tunnels.len() {
                    self.iot_tunnels[i] = enb_teid;
                    self.iot_tunnels[i + 1] = enb_addr;
                }
            }
            DpUpdate::BearerUsage { slot, usage } => {
                self.counters.restore_bearer(slot, &usage);
            }
            DpUpdate::ExceptionTeid { teid, slot } => match slot {
                Some(s) => {
                    self.exc_teid.insert(teid, s);
                }
                None => {
                    self.exc_teid.remove(&teid);
                }
            },
            DpUpdate::ExceptionIp { ip, slot } => match slot {
                Some(s) => {
                    self.exc_ip.insert(ip, s);
                }
                None => {
                    self.exc_ip.remove(&ip);
                }
            },
            DpUpdate::PromotionRefused { ue_slot } => self.refuse_pending(ue_slot),
        }
    }

    /// Copy the hot PDN's default bearer's downlink tunnel into its UE's downlink line
    /// when that bearer has the UE's own slot and is in the primary table; otherwise
    /// none, and downlink takes the cold records (which buffer and promote a bearer
    /// out of the primary table).
    pub(super) fn refresh_hot_tunnel(&mut self, ue_slot: u32) {
        let Some(dl) = self.dl_line(ue_slot) else {
            return;
        };
        let mut h = dl.ue();
        if h.flags & HOT_VALID == 0 {
            return;
        }
        let b = self.ue_cold[ue_slot as usize].default_slot(h.pdn as usize);
        let bh = self.counters.ul[ue_slot as usize].bearer();
        h.flags &= !(HOT_MBR | HOT_PAIRED);
        match self.bearer_cold.get(b as usize) {
            Some(bc) if b == ue_slot && bh.flags & HOT_VALID != 0 && bh.ue_slot == ue_slot => {
                h.enb_teid = bc.rec.enb_teid;
                h.enb_addr = bc.rec.enb_addr;
                h.flags |= HOT_PAIRED | (bh.flags & HOT_MBR);
            }
            _ => {
                h.enb_teid = 0;
                h.enb_addr = 0;
            }
        }
        dl.set_ue(h);
    }

    pub(super) fn emit_end_marker(&mut self, teid: u32, addr: u32) {
        let g = &mut self.generated;
        if g.len == g.capacity() {
            bump(&self.counters.drops[DropReason::TxFailed as usize], 1);
            return;
        }
        let buf = &mut g.bufs[g.len];
        buf.reset();
        let mut tmp = [0u8; 16];
        let Ok(n) = gtpu::end_marker(teid, &mut tmp) else {
            return;
        };
        buf.fill(&tmp[..n]);
        buf.meta.peer = SocketAddrV4::new(Ipv4Addr::from(addr), gtpu::GTPU_PORT);
        buf.meta.verdict = Verdict::ToS1u;
        g.len += 1;
        bump(&self.counters.end_markers, 1);
    }
}
