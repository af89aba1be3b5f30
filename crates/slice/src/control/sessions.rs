//! PDN connections and bearers of an attached UE: eNB tunnels, idle and active,
//! dedicated bearers, QoS, ARP, AMBR and rule sets.

use super::*;

impl<S> ControlPlane<S> {
    /// Set the eNB end of a bearer's S1-U tunnel: Initial Context Setup Response,
    /// Path Switch (X2 handover), Handover Notify (S1 handover). The data thread sends an
    /// End Marker on the old path when it changes. Makes the UE ECM-CONNECTED.
    pub fn set_enb_tunnel(
        &mut self,
        ue_slot: u32,
        ebi: u8,
        enb_addr: Ipv4Addr,
        enb_teid: u32,
    ) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        let b = ue
            .bearer_mut(ebi)
            .ok_or(CtrlError::NoSuchBearer { ue_slot, ebi })?;
        b.enb_addr = enb_addr;
        b.enb_teid = enb_teid;
        ue.ecm = EcmState::Connected;
        ue.in_primary = true;
        self.paging.remove(&ue_slot);
        self.republish(ue_slot)
    }

    /// S1 release: ECM-IDLE. eNB tunnels are forgotten and the UE leaves the primary
    /// table; downlink data then triggers paging.
    /// Release Access Bearers (TS 23.401 §5.3.5): the eNB's downlink tunnels go, the
    /// UE stays ECM-CONNECTED while its S1 connection is being released. Uplink still
    /// in flight from the eNB is forwarded; downlink is buffered and asks for paging
    /// (see [`ControlEvent::Page`]). [`Self::release_to_idle`] follows once released.
    pub fn release_access_bearers(&mut self, ue_slot: u32) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        for b in ue.bearers.iter_mut() {
            b.enb_teid = 0;
            b.enb_addr = Ipv4Addr::UNSPECIFIED;
        }
        ue.version = ue.version.wrapping_add(1);
        if ue.in_primary {
            self.promote(ue_slot)?;
        }
        Ok(())
    }

    pub fn release_to_idle(&mut self, ue_slot: u32) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        ue.ecm = EcmState::Idle;
        for b in ue.bearers.iter_mut() {
            b.enb_teid = 0;
            b.enb_addr = Ipv4Addr::UNSPECIFIED;
        }
        ue.version = ue.version.wrapping_add(1);
        self.evict(ue_slot)
    }

    /// Add a PDN connection: an address from the first free PDN pool and a default
    /// bearer `p.ebi`. The data path finds the UE by the new address once published.
    pub fn add_pdn(&mut self, ue_slot: u32, p: &PdnParams) -> Result<PdnAdded, CtrlError> {
        let (slice, layout) = (self.cfg.slice, self.cfg.layout);
        let ue = self.ue_mut(ue_slot)?;
        if ue.class != DeviceClass::Normal {
            return Err(CtrlError::Exhausted(
                "PDN pools (stateless IoT has one PDN)",
            ));
        }
        new_ebi(ue, ue_slot, p.ebi)?;
        let mask = ue.pdn_mask();
        let index = (0..layout.pdn_count)
            .find(|k| mask & (1 << k) == 0)
            .ok_or(CtrlError::Exhausted("PDN address pools"))?;
        let ue_ip = layout
            .pdn_ip(index, slice, ue_slot)
            .ok_or(CtrlError::Exhausted("PDN address pools"))?;
        let (bslot, gen) = self
            .draw_bearer_slot(Some(ue_slot), &[])
            .ok_or(CtrlError::Exhausted("bearer slots"))?;
        let teid_ul = layout.teid(slice, bslot, gen);
        let ue = self.ue_mut(ue_slot)?;
        ue.pdns.push(PdnContext {
            index,
            apn: p.apn.clone(),
            ip: ue_ip,
            default_ebi: p.ebi,
        });
        ue.bearers.push(BearerContext {
            ebi: p.ebi,
            qci: p.qci,
            arp: p.arp,
            mbr_ul: 0,
            mbr_dl: 0,
            gbr_ul: 0,
            gbr_dl: 0,
            slot: bslot,
            teid_ul,
            enb_teid: 0,
            enb_addr: Ipv4Addr::UNSPECIFIED,
            charging_key: p.charging_key,
            pdn: index,
        });
        let pdns = ue.pdn_mask();
        self.set_bearer_owner(bslot, ue_slot);
        self.publish(DpUpdate::BearerExists {
            slot: bslot,
            teid: Some(teid_ul),
        });
        self.publish(DpUpdate::UeExists {
            slot: ue_slot,
            pdns,
        });
        self.republish(ue_slot)?;
        Ok(PdnAdded {
            pdn: index,
            ue_ip,
            teid_ul,
        })
    }

    /// Remove the PDN connection whose default bearer is `default_ebi` with all its
    /// bearers; its address stops reaching the UE. Returns the EBIs removed (default
    /// first). The last PDN connection is refused ([`CtrlError::LastPdn`]).
    pub fn remove_pdn(&mut self, ue_slot: u32, default_ebi: u8) -> Result<Vec<u8>, CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        let i = ue
            .pdns
            .iter()
            .position(|p| p.default_ebi == default_ebi)
            .ok_or(CtrlError::NoSuchPdn {
                ue_slot,
                ebi: default_ebi,
            })?;
        if ue.pdns.len() == 1 {
            return Err(CtrlError::LastPdn(ue_slot));
        }
        let pdn = ue.pdns.remove(i);
        let mut ebis = vec![pdn.default_ebi];
        let mut slots = vec![];
        ue.bearers.retain(|b| {
            if b.pdn != pdn.index {
                return true;
            }
            if b.ebi != pdn.default_ebi {
                ebis.push(b.ebi);
            }
            slots.push((b.slot, b.teid_ul));
            false
        });
        // The first remaining PDN is the UE's primary one now.
        ue.ue_ip = ue.pdns[0].ip;
        ue.default_ebi = ue.pdns[0].default_ebi;
        let pdns = ue.pdn_mask();
        for (s, teid) in slots {
            self.retire_bearer(s, teid);
        }
        self.drop_exception_ip(pdn.ip);
        self.publish(DpUpdate::UeExists {
            slot: ue_slot,
            pdns,
        });
        self.republish(ue_slot)?;
        Ok(ebis)
    }

    /// Add a dedicated bearer to the PDN connection of `p.linked_ebi`; returns its TEID.
    pub fn add_bearer(&mut self, ue_slot: u32, p: BearerParams) -> Result<u32, CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        new_ebi(ue, ue_slot, p.ebi)?;
        let linked = if p.linked_ebi == 0 {
            ue.default_ebi
        } else {
            p.linked_ebi
        };
        let pdn = ue
            .pdn_by_default_ebi(linked)
            .map(|d| d.index)
            .ok_or(CtrlError::NoSuchPdn {
                ue_slot,
                ebi: linked,
            })?;
        let (bslot, gen) = self
            .draw_bearer_slot(None, &[])
            .ok_or(CtrlError::Exhausted("bearer slots"))?;
        let teid_ul = self.cfg.layout.teid(self.cfg.slice, bslot, gen);
        let ue = self.ue_mut(ue_slot)?;
        ue.bearers.push(BearerContext {
            ebi: p.ebi,
            qci: p.qci,
            arp: p.arp,
            mbr_ul: p.mbr_ul,
            mbr_dl: p.mbr_dl,
            gbr_ul: p.gbr_ul,
            gbr_dl: p.gbr_dl,
            slot: bslot,
            teid_ul,
            enb_teid: 0,
            enb_addr: Ipv4Addr::UNSPECIFIED,
            charging_key: p.charging_key,
            pdn,
        });
        self.set_bearer_owner(bslot, ue_slot);
        self.publish(DpUpdate::BearerExists {
            slot: bslot,
            teid: Some(teid_ul),
        });
        self.republish(ue_slot)?;
        Ok(teid_ul)
    }

    /// Change a bearer's QoS (bearer modification).
    pub fn modify_bearer_qos(
        &mut self,
        ue_slot: u32,
        ebi: u8,
        qci: u8,
        mbr_ul: u64,
        mbr_dl: u64,
    ) -> Result<(), CtrlError> {
        let b = self
            .ue_mut(ue_slot)?
            .bearer_mut(ebi)
            .ok_or(CtrlError::NoSuchBearer { ue_slot, ebi })?;
        b.qci = qci;
        b.mbr_ul = mbr_ul;
        b.mbr_dl = mbr_dl;
        self.republish(ue_slot)
    }

    /// Remove a dedicated bearer. Removing a PDN connection's default bearer removes
    /// the whole PDN connection ([`Self::remove_pdn`]; refused for the last one).
    pub fn remove_bearer(&mut self, ue_slot: u32, ebi: u8) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        if ue.pdn_by_default_ebi(ebi).is_some() {
            return self.remove_pdn(ue_slot, ebi).map(|_| ());
        }
        let i = ue
            .bearers
            .iter()
            .position(|b| b.ebi == ebi)
            .ok_or(CtrlError::NoSuchBearer { ue_slot, ebi })?;
        let b = ue.bearers.remove(i);
        self.retire_bearer(b.slot, b.teid_ul);
        self.republish(ue_slot)
    }

    pub(super) fn retire_bearer(&mut self, slot: u32, teid: u32) {
        if !self.exc_teid.is_empty() && self.exc_teid.remove(&teid).is_some() {
            self.publish(DpUpdate::ExceptionTeid { teid, slot: None });
        }
        self.publish(DpUpdate::EvictBearer { slot });
        self.publish(DpUpdate::BearerExists { slot, teid: None });
        self.set_bearer_owner(slot, 0);
        self.bearer_alloc.free(slot);
    }

    /// Change a bearer's ARP (a subscription change from the HSS).
    pub fn set_bearer_arp(&mut self, ue_slot: u32, ebi: u8, arp: Arp) -> Result<(), CtrlError> {
        self.ue_mut(ue_slot)?
            .bearer_mut(ebi)
            .ok_or(CtrlError::NoSuchBearer { ue_slot, ebi })?
            .arp = arp;
        self.republish(ue_slot)
    }

    /// Change a UE's AMBR (a subscription change from the HSS); the data path
    /// enforces the new rates from its next update.
    pub fn set_ambr(&mut self, ue_slot: u32, ul: u64, dl: u64) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        ue.ambr_ul = ul;
        ue.ambr_dl = dl;
        self.republish(ue_slot)
    }

    /// Set the PCEF rule set of a UE (a PCRF update).
    pub fn set_rule_set(&mut self, ue_slot: u32, id: u16) -> Result<(), CtrlError> {
        if id as usize >= crate::counters::MAX_RULE_SETS {
            return Err(CtrlError::BadRuleSet(id));
        }
        self.ue_mut(ue_slot)?.rule_set = id;
        self.republish(ue_slot)
    }
}

/// `ebi` is free on the UE and in the range a bearer may use.
fn new_ebi(ue: &UeContext, ue_slot: u32, ebi: u8) -> Result<(), CtrlError> {
    if ue.bearer(ebi).is_some() {
        return Err(CtrlError::BearerExists { ue_slot, ebi });
    }
    if !(FIRST_EBI..FIRST_EBI + MAX_BEARERS as u8).contains(&ebi) {
        return Err(CtrlError::NoSuchBearer { ue_slot, ebi });
    }
    Ok(())
}
