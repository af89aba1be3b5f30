//! One UE's data-path part as a snapshot, and its restore into this slice (a moved
//! or recovered UE keeps its identifiers).

use super::*;

impl<S> ControlPlane<S> {
    /// Snapshot of the UE in slot `ue_slot`: its control state and its bearers'
    /// counters as the data thread holds them now (for a loss-free count, take it once
    /// the UE's traffic is held aside).
    pub fn snapshot_ue(&self, ue_slot: u32) -> Result<UeSliceSnapshot, CtrlError> {
        let mut s = UeSliceSnapshot::default();
        self.snapshot_ue_into(ue_slot, &mut s)?;
        Ok(s)
    }

    /// [`Self::snapshot_ue`] into `out`, reusing its allocations.
    pub fn snapshot_ue_into(
        &self,
        ue_slot: u32,
        out: &mut UeSliceSnapshot,
    ) -> Result<(), CtrlError> {
        let ue = self.ue(ue_slot).ok_or(CtrlError::UnknownUe(ue_slot))?;
        out.fill_from(ue, |b| self.bearer_usage(b.slot));
        Ok(())
    }

    /// Snapshot of a UE of either device class (stateless-IoT devices have aggregate
    /// counters only: their usage is zero).
    pub fn snapshot_imsi(&self, imsi: u64) -> Result<UeSliceSnapshot, CtrlError> {
        match self.by_imsi.get(&imsi).copied() {
            Some((DeviceClass::Normal, slot)) => self.snapshot_ue(slot),
            Some((DeviceClass::StatelessIot, idx)) => {
                let ue = self
                    .iot_ues
                    .get(idx as usize)
                    .and_then(|u| u.as_ref())
                    .ok_or(CtrlError::UnknownUe(idx))?;
                let mut s = UeSliceSnapshot::default();
                s.fill_from(ue, |_| Usage::default());
                Ok(s)
            }
            None => Err(CtrlError::UnknownImsi(imsi)),
        }
    }

    /// Recreate a UE from its snapshot (taken in another slice, node or process) and
    /// publish it to the data thread like an attach, counters included.
    ///
    /// Identifiers keep their value wherever the data path can still find the UE:
    /// * a TEID or address that names *this* slice keeps its slot when that slot is
    ///   free here (same slice index after a restart: no exception at all);
    /// * one that names another slice (or lies outside the layout) gets a local slot
    ///   and an entry in the data thread's exception table (see [`crate::ids`]);
    /// * one that cannot be kept (its slot or value is taken here, or it lies in the
    ///   stateless-IoT pool) is replaced by a new one: counted in
    ///   [`Restored::renumbered`], and the MME must signal it.
    ///
    /// Refused if the IMSI is already registered here; on error nothing changed.
    pub fn restore_ue(&mut self, s: &UeSliceSnapshot) -> Result<Restored, CtrlError> {
        s.validate().map_err(CtrlError::BadSnapshot)?;
        if self.by_imsi.contains_key(&s.imsi) {
            return Err(CtrlError::ImsiExists(s.imsi));
        }
        if s.class == DeviceClass::StatelessIot {
            return self.restore_iot(s);
        }
        if s.rule_set as usize >= crate::counters::MAX_RULE_SETS {
            return Err(CtrlError::BadRuleSet(s.rule_set));
        }
        let (slice, layout, iot) = (self.cfg.slice, self.cfg.layout, self.cfg.iot);
        let mut out = Restored {
            ue_slot: 0,
            class: DeviceClass::Normal,
            exceptions: 0,
            renumbered: 0,
        };

        // UE slot: the one its addresses name, if they name this slice and it is free.
        let wanted = s
            .pdns
            .iter()
            .find_map(|p| match layout.split_pdn_ip(u32::from(p.ip)) {
                Some((_, sl, slot)) if sl == slice => Some(slot),
                _ => None,
            });
        let ue_slot = match wanted {
            Some(w)
                if self.ues.get(w as usize).is_none_or(UeEntry::is_free)
                    && self.ue_alloc.claim(w, self.ue_alloc.generation(w)) =>
            {
                w
            }
            _ => {
                self.ue_alloc
                    .alloc()
                    .ok_or(CtrlError::Exhausted("UE slots"))?
                    .0
            }
        };
        out.ue_slot = ue_slot;

        // Addresses.
        let mut pdns = s.pdns.clone();
        let mut exc_ips = [0u32; crate::ids::MAX_PDNS];
        let mut n_exc_ips = 0;
        for p in pdns.iter_mut() {
            let native = layout.pdn_ip(p.index, slice, ue_slot);
            if native == Some(p.ip) {
                continue;
            }
            let ip = u32::from(p.ip);
            let taken = ip == 0
                || layout
                    .split_pdn_ip(ip)
                    .is_some_and(|(_, sl, _)| sl == slice)
                || iot.is_some_and(|pool| pool.index_of_ip(ip).is_some())
                || self.exc_ip.contains_key(&ip);
            if !taken {
                exc_ips[n_exc_ips] = ip;
                n_exc_ips += 1;
                out.exceptions += 1;
                continue;
            }
            match native {
                Some(a) => {
                    p.ip = a;
                    out.renumbered += 1;
                }
                None => {
                    self.ue_alloc.free(ue_slot);
                    return Err(CtrlError::Exhausted("PDN address pools"));
                }
            }
        }

        // Bearers.
        let mut bearers: Vec<BearerContext> = Vec::with_capacity(s.bearers.len());
        let mut exc_teids = [(0u32, 0u32); MAX_BEARERS];
        let mut n_exc_teids = 0;
        for b in &s.bearers {
            // This slice's TEID: keep its slot if free here.
            // (A reserved slot has no claim record: `bearers` says which are taken.)
            let kept = match layout.split_teid(b.teid_ul) {
                Some((sl, slot, gen)) if sl == slice => (self.bearer_owner(slot).is_none()
                    && !bearers.iter().any(|c| c.slot == slot)
                    && self.bearer_alloc.claim(slot, gen))
                .then_some(slot),
                _ => None,
            };
            let is_default = s.pdns.iter().any(|p| p.default_ebi == b.ebi);
            let (slot, teid) = match kept {
                Some(slot) => (slot, b.teid_ul),
                None => {
                    let fresh = if is_default {
                        self.alloc_default_bearer(ue_slot, &bearers)
                    } else {
                        self.bearer_alloc.alloc()
                    };
                    let Some((slot, gen)) = fresh else {
                        for c in &bearers {
                            self.bearer_alloc.free(c.slot);
                        }
                        self.ue_alloc.free(ue_slot);
                        return Err(CtrlError::Exhausted("bearer slots"));
                    };
                    let foreign = b.teid_ul != 0
                        && layout
                            .split_teid(b.teid_ul)
                            .is_none_or(|(sl, _, _)| sl != slice)
                        && iot.is_none_or(|pool| pool.index_of_teid(b.teid_ul).is_none())
                        && !self.exc_teid.contains_key(&b.teid_ul);
                    if foreign {
                        exc_teids[n_exc_teids] = (b.teid_ul, slot);
                        n_exc_teids += 1;
                        out.exceptions += 1;
                        (slot, b.teid_ul)
                    } else {
                        out.renumbered += 1;
                        (slot, layout.teid(slice, slot, gen))
                    }
                }
            };
            let mut c = b.to_context(slot);
            c.teid_ul = teid;
            bearers.push(c);
        }

        // Nothing can fail from here: install.
        for &(teid, slot) in &exc_teids[..n_exc_teids] {
            self.exc_teid.insert(teid, slot);
            self.publish(DpUpdate::ExceptionTeid {
                teid,
                slot: Some(slot),
            });
        }
        for &ip in &exc_ips[..n_exc_ips] {
            self.exc_ip.insert(ip, ue_slot);
            self.publish(DpUpdate::ExceptionIp {
                ip,
                slot: Some(ue_slot),
            });
        }
        for (c, b) in bearers.iter().zip(&s.bearers) {
            self.set_bearer_owner(c.slot, ue_slot);
            self.publish(DpUpdate::BearerExists {
                slot: c.slot,
                teid: Some(c.teid_ul),
            });
            if b.usage != Usage::default() {
                self.publish(DpUpdate::BearerUsage {
                    slot: c.slot,
                    usage: b.usage,
                });
            }
        }
        let ctx = UeContext {
            imsi: s.imsi,
            class: DeviceClass::Normal,
            ecm: s.ecm,
            ue_slot,
            ue_ip: pdns[0].ip,
            ambr_ul: s.ambr_ul,
            ambr_dl: s.ambr_dl,
            rule_set: s.rule_set,
            default_ebi: pdns[0].default_ebi,
            pdns,
            bearers,
            version: s.version,
            in_primary: false,
        };
        self.publish(DpUpdate::UeExists {
            slot: ue_slot,
            pdns: ctx.pdn_mask(),
        });
        self.entry_mut(ue_slot).ctx = Some(ctx);
        self.by_imsi.insert(s.imsi, (DeviceClass::Normal, ue_slot));
        if s.in_primary {
            self.promote(ue_slot)?;
        }
        Ok(out)
    }
}
