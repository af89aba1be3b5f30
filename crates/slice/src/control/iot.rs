//! Stateless IoT devices (PEPC §4.4): one index in a pool instead of a session, no
//! bearers; attach, tunnel, detach and restore.

use super::*;

impl<S> ControlPlane<S> {
    pub(super) fn attach_iot(&mut self, p: &AttachParams) -> Result<Attached, CtrlError> {
        let pool = self
            .cfg
            .iot
            .ok_or(CtrlError::Exhausted("IoT pool (none configured)"))?;
        let idx = self.draw_iot_index(pool)?;
        let ctx = UeContext {
            imsi: p.imsi,
            class: DeviceClass::StatelessIot,
            ecm: if p.enb_teid != 0 {
                EcmState::Connected
            } else {
                EcmState::Idle
            },
            ue_slot: idx,
            ue_ip: pool.ip(idx),
            ambr_ul: 0,
            ambr_dl: 0,
            rule_set: 0,
            default_ebi: p.default_ebi,
            pdns: vec![PdnContext {
                index: 0,
                apn: p.apn.clone(),
                ip: pool.ip(idx),
                default_ebi: p.default_ebi,
            }],
            bearers: vec![BearerContext {
                ebi: p.default_ebi,
                qci: 9,
                arp: p.arp,
                mbr_ul: 0,
                mbr_dl: 0,
                gbr_ul: 0,
                gbr_dl: 0,
                slot: NO_SLOT,
                teid_ul: pool.teid(idx),
                enb_teid: p.enb_teid,
                enb_addr: p.enb_addr,
                charging_key: p.charging_key,
                pdn: 0,
            }],
            version: 1,
            in_primary: false,
        };
        if self.iot_ues.len() <= idx as usize {
            self.iot_ues.resize_with(idx as usize + 1, || None);
        }
        self.iot_ues[idx as usize] = Some(ctx);
        self.by_imsi
            .insert(p.imsi, (DeviceClass::StatelessIot, idx));
        self.publish(DpUpdate::IotTunnel {
            index: idx,
            enb_teid: p.enb_teid,
            enb_addr: u32::from(p.enb_addr),
        });
        Ok(Attached {
            ue_slot: idx,
            ue_ip: pool.ip(idx),
            teid_ul: pool.teid(idx),
            class: DeviceClass::StatelessIot,
        })
    }

    pub(super) fn alloc_iot_index(&mut self, pool: IotPool) -> Result<u32, CtrlError> {
        match self.iot_free.pop_front() {
            Some(i) => Ok(i),
            None if self.iot_next < pool.size => {
                self.iot_next += 1;
                Ok(self.iot_next - 1)
            }
            None => Err(CtrlError::Exhausted("IoT pool")),
        }
    }

    /// Take pool index `idx` if it is free. Linear in the pool's free list: restoring
    /// an IoT device is rare next to its attach.
    pub(super) fn take_iot_index(&mut self, pool: IotPool, idx: u32) -> bool {
        if idx >= pool.size || self.iot_ues.get(idx as usize).is_some_and(|u| u.is_some()) {
            return false;
        }
        if idx >= self.iot_next {
            self.iot_free.extend(self.iot_next..idx);
            self.iot_next = idx + 1;
            return true;
        }
        match self.iot_free.iter().position(|&i| i == idx) {
            Some(pos) => {
                self.iot_free.remove(pos);
                true
            }
            None => false,
        }
    }

    pub(super) fn detach_iot(&mut self, idx: u32) -> Result<(), CtrlError> {
        let ue = self
            .iot_ues
            .get_mut(idx as usize)
            .and_then(|u| u.take())
            .ok_or(CtrlError::UnknownUe(idx))?;
        self.publish(DpUpdate::IotTunnel {
            index: idx,
            enb_teid: 0,
            enb_addr: 0,
        });
        self.by_imsi.remove(&ue.imsi);
        self.iot_free.push_back(idx);
        Ok(())
    }

    /// Set an IoT device's downlink tunnel (its eNB changed).
    pub fn set_iot_tunnel(
        &mut self,
        idx: u32,
        enb_addr: Ipv4Addr,
        enb_teid: u32,
    ) -> Result<(), CtrlError> {
        let ue = self
            .iot_ues
            .get_mut(idx as usize)
            .and_then(|u| u.as_mut())
            .ok_or(CtrlError::UnknownUe(idx))?;
        ue.bearers[0].enb_addr = enb_addr;
        ue.bearers[0].enb_teid = enb_teid;
        self.publish(DpUpdate::IotTunnel {
            index: idx,
            enb_teid,
            enb_addr: u32::from(enb_addr),
        });
        Ok(())
    }

    /// A stateless-IoT device: its identifiers are its pool index's, kept if that
    /// index is free here.
    pub(super) fn restore_iot(&mut self, s: &UeSliceSnapshot) -> Result<Restored, CtrlError> {
        let pool = self
            .cfg
            .iot
            .ok_or(CtrlError::Exhausted("IoT pool (none configured)"))?;
        let (p, b) = (&s.pdns[0], &s.bearers[0]);
        let wanted = pool
            .index_of_teid(b.teid_ul)
            .filter(|&i| pool.index_of_ip(u32::from(p.ip)) == Some(i));
        let idx = match wanted {
            Some(i) if self.take_iot_index(pool, i) => i,
            _ => self.alloc_iot_index(pool)?,
        };
        let (teid, ip) = (pool.teid(idx), pool.ip(idx));
        let renumbered = (teid != b.teid_ul) as u8 + (ip != p.ip) as u8;
        let mut bearer = b.to_context(NO_SLOT);
        bearer.teid_ul = teid;
        let ctx = UeContext {
            imsi: s.imsi,
            class: DeviceClass::StatelessIot,
            ecm: s.ecm,
            ue_slot: idx,
            ue_ip: ip,
            ambr_ul: s.ambr_ul,
            ambr_dl: s.ambr_dl,
            rule_set: s.rule_set,
            default_ebi: p.default_ebi,
            pdns: vec![PdnContext {
                index: p.index,
                apn: p.apn.clone(),
                ip,
                default_ebi: p.default_ebi,
            }],
            bearers: vec![bearer],
            version: s.version,
            in_primary: s.in_primary,
        };
        if self.iot_ues.len() <= idx as usize {
            self.iot_ues.resize_with(idx as usize + 1, || None);
        }
        self.iot_ues[idx as usize] = Some(ctx);
        self.by_imsi
            .insert(s.imsi, (DeviceClass::StatelessIot, idx));
        self.publish(DpUpdate::IotTunnel {
            index: idx,
            enb_teid: b.enb_teid,
            enb_addr: u32::from(b.enb_addr),
        });
        Ok(Restored {
            ue_slot: idx,
            class: DeviceClass::StatelessIot,
            exceptions: 0,
            renumbered,
        })
    }
}
