//! PDN connections (TS 24.301 §6.4.1, §6.5.1, §6.5.2; TS 23.401 §5.3.2.1, §5.10): the
//! attach's default bearer with Attach Accept in Initial Context Setup (TS 36.413 §8.3.1),
//! UE-requested PDN connectivity and disconnect.

use crate::pcrf::{PolicySession, SessionQos};
use crate::prelude::*;

impl Mme {
    /// ControlPlane::attach, then Initial Context Setup with Attach Accept.
    pub(crate) fn create_session(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        let now = self.now;
        // The UE's entry: its signaling part now, its session next to it.
        let Some(entry) = self.entry_of(id) else {
            return;
        };
        let Some(u) = cp.signaling_mut(entry) else {
            return;
        };
        if u.apn.is_empty() {
            u.apn = self.cfg.default_apn.clone();
        }
        let mut p = AttachParams::new(u.imsi.unwrap_or(0));
        // Lent to the slice for the call, and back (no copy).
        p.apn = std::mem::take(&mut u.apn);
        // The session goes into the UE's entry, beside this signaling part.
        p.ue_slot = Some(entry);
        p.ambr_ul = u.ambr.0;
        p.ambr_dl = u.ambr.1;
        p.qci = u.qci;
        p.arp = Arp {
            priority_level: u.arp_priority,
            ..Arp::default()
        };
        let r = cp.attach(&p);
        let Some(u) = cp.signaling_mut(entry) else {
            return;
        };
        u.apn = std::mem::take(&mut p.apn);
        let att = match r {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!("UE {id}: slice refused attach: {e}");
                self.attach_reject(cp, id, EmmCause::Congestion, out);
                return;
            }
        };
        debug_assert_eq!(att.ue_slot, entry);
        u.slot = Some(att.ue_slot);
        self.schedule_interim(u, now, id);
        let session = PolicySession {
            imsi: u.imsi.unwrap_or(0),
            apn: u.apn.clone(),
            ebi: pepc_slice::context::FIRST_EBI,
            ue_ip: att.ue_ip,
        };
        let subscribed = SessionQos {
            qci: u.qci,
            arp_priority: u.arp_priority,
            ambr_ul: u.ambr.0,
            ambr_dl: u.ambr.1,
        };
        if self.cfg.policy.enabled {
            // The Attach Accept waits for the PCRF's policy (CCR-I/CCA-I).
            self.ask_policy(cp, id, session, subscribed, true, out);
        } else {
            crate::esm::policy::open_session_ue(u, now, session);
            self.accept_attach_at(cp, id, att.ue_slot, att.ue_ip, out);
        }
    }

    /// The attach's default bearer is set up (and its policy applied): a GUTI, the
    /// Attach Accept with Activate Default EPS Bearer Context Request, in Initial
    /// Context Setup.
    pub(crate) fn accept_attach(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        let Some(slot) = self.ue(cp, id).and_then(|u| u.slot) else {
            return;
        };
        let Some(ue_ip) = cp.ue(slot).map(|c| c.ue_ip) else {
            return;
        };
        self.accept_attach_at(cp, id, slot, ue_ip, out);
    }

    /// [`Mme::accept_attach`] for the default bearer's session in UE `slot`, at `ue_ip`.
    fn accept_attach_at(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        slot: u32,
        ue_ip: std::net::Ipv4Addr,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        let tmsi = self.alloc_tmsi();
        // `slot` is the UE's entry: its session's and this signaling part's.
        debug_assert_eq!(
            self.entry_of(id),
            Some(slot),
            "a UE's session is in its entry"
        );
        let Some(u) = cp.signaling_mut(slot) else {
            return;
        };
        self.index.link_tmsi(tmsi, id);
        u.m_tmsi = tmsi;
        if u.apn.is_empty() {
            u.apn = self.cfg.default_apn.clone();
        }
        let plmn = self.cfg.plmn.0;
        let mut act = nasx::NasActivateDefaultEpsBearerContextRequest::new(
            nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(u.qci, None)),
            nasx::NasAccessPointName::new(nasx::apn_value(&u.apn)),
            nasx::NasPdnAddress::from_ipv4(ue_ip.octets()),
        );
        act.apn_ambr =
            nasx::NasApnAggregateMaximumBitRate::from_kbps(u.ambr.1 / 1000, u.ambr.0 / 1000).ok();
        let esm = NasEpsMessage::new_esm(act, pepc_slice::context::FIRST_EBI, u.pti);
        let Ok(container) = nasx::NasEsmMessageContainer::from_esm_message(&esm) else {
            return;
        };
        let mut acc = nasx::NasAttachAccept::new(
            nasx::NasEpsAttachResult::new(1),
            nasx::NasT3412Value::new(nasx::gprs_timer(self.cfg.t3412.as_secs())),
            nasx::NasTrackingAreaIdentityList::new(nasx::tai_list_value(
                plmn,
                &self.cfg.served_tacs,
            )),
            container,
        );
        acc.guti = Some(nasx::NasEpsMobileIdentity::new(nasx::guti_value(
            plmn,
            self.cfg.mme_group_id,
            self.cfg.mme_code,
            tmsi,
        )));
        let msg = NasEpsMessage::new_emm(acc);
        u.proc = Procedure::ExpectIcsResponse { attach: true };
        let Some(nas) = crate::mme::cx::nas_bytes(&self.cfg, &mut self.dirty, u, &msg, false)
        else {
            return;
        };
        u.retx = Some(Box::new((msg, false)));
        u.retx_count = 0;
        let t = self.cfg.t3450;
        self.arm_ue(u, TimerKind::Nas, now + t);
        self.send_ics_at(cp, id, slot, Some(nas), out);
    }

    /// Initial Context Setup for all the UE's bearers, with a fresh KeNB from the
    /// latest uplink NAS COUNT (TS 33.401 A.3).
    pub(crate) fn send_ics(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        nas: Option<Vec<u8>>,
        out: &mut Vec<Output>,
    ) {
        let Some(slot) = self.ue(cp, id).and_then(|u| u.slot) else {
            return;
        };
        self.send_ics_at(cp, id, slot, nas, out);
    }

    /// [`Mme::send_ics`] for UE `id`, whose bearers are in UE `slot`.
    fn send_ics_at(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        slot: u32,
        nas: Option<Vec<u8>>,
        out: &mut Vec<Output>,
    ) {
        let Some(ctx) = cp.ue(slot) else { return };
        let (mut erabs, mut nas) = (Vec::with_capacity(ctx.bearers.len()), nas);
        for b in ctx.bearers.iter() {
            erabs.push(pepc_s1ap::ERab {
                id: b.ebi,
                qci: b.qci,
                arp: b.arp,
                gbr: gbr_of(b),
                transport: self.cfg.s1u_addr,
                teid: b.teid_ul,
                // The NAS PDU rides on the first bearer only (moved, not copied).
                nas_pdu: nas.take(),
            });
        }
        debug_assert_eq!(
            self.entry_of(id),
            Some(slot),
            "a UE's session is in its entry"
        );
        let Some(u) = cp.signaling_mut(slot) else {
            return;
        };
        let (Some(ConnKey { assoc, enb_ue_id }), Some(sec)) = (u.conn, u.sec.as_mut()) else {
            return;
        };
        let count = sec.last_ul_count;
        let kenb = sec.kdf().kenb(count);
        // NH chain restarts from the new KeNB with NCC 0 (TS 33.401 §7.2.8.1.1).
        u.nh = Some(kenb.clone());
        u.ncc = 0;
        let req = InitialContextSetupRequest {
            mme_ue_id: id,
            enb_ue_id,
            ue_ambr: pepc_s1ap::Ambr {
                dl: u.ambr.1,
                ul: u.ambr.0,
            },
            erabs,
            ue_security_capabilities: sec_caps(&u.ue_net_cap),
            security_key: S1Key(*kenb.as_bytes()),
        };
        if !matches!(u.proc, Procedure::ExpectIcsResponse { .. }) {
            u.proc = Procedure::ExpectIcsResponse { attach: false };
        }
        self.send(assoc, Some(id), req.into(), out);
    }

    /// UE-requested PDN connectivity (TS 24.301 §6.5.1): a new default bearer and an
    /// address from the next PDN pool, E-RAB Setup carrying Activate Default EPS Bearer
    /// Context Request. `Err` is the ESM cause of the PDN Connectivity Reject.
    pub(crate) fn pdn_connect(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pti: u8,
        r: &nasx::NasPdnConnectivityRequest,
        out: &mut Vec<Output>,
    ) -> Result<(), EsmCause> {
        let u = self
            .ue(cp, id)
            .ok_or(EsmCause::RequestRejectedUnspecified)?;
        let (Some(slot), Some(ConnKey { assoc, enb_ue_id }), Some(_)) = (u.slot, u.conn, u.imsi)
        else {
            return Err(EsmCause::RequestRejectedUnspecified);
        };
        if u.emm != Emm_::Registered {
            return Err(EsmCause::RequestRejectedUnspecified);
        }
        if pti == 0 || pti == 0xff {
            return Err(EsmCause::InvalidPtiValue);
        }
        match r.request_type.request_type_raw() {
            1 => {} // initial request
            // Emergency: no emergency APN here.
            4 => return Err(EsmCause::RequestRejectedUnspecified),
            // Handover from non-3GPP access: not supported.
            _ => return Err(EsmCause::RequestRejectedUnspecified),
        }
        // IPv4 addresses only (TS 24.301 §6.5.1.4: #50 for an IPv6-only request).
        if r.pdn_type.value & 0x07 == 2 {
            return Err(EsmCause::PdnTypeIpv4OnlyAllowed);
        }
        let apn = r
            .access_point_name
            .as_ref()
            .map(|a| nasx::apn_string(&a.value))
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| self.cfg.default_apn.clone());
        // The subscription data the HSS gave at attach (S6a: kept by the MME).
        let subscribed = self
            .apn_name(u.subscribed_apn)
            .is_some_and(|s| s.eq_ignore_ascii_case(&apn));
        let extra = self
            .cfg
            .extra_apns
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&apn));
        if !subscribed && !extra {
            return Err(EsmCause::MissingOrUnknownApn);
        }
        let ctx = cp.ue(slot).ok_or(EsmCause::RequestRejectedUnspecified)?;
        if ctx.pdns.iter().any(|p| p.apn.eq_ignore_ascii_case(&apn)) {
            return Err(EsmCause::MultiplePdnConnectionsForApnNotAllowed);
        }
        let ebi = free_ebi(ctx).ok_or(EsmCause::MaximumEpsBearersReached)?;
        let qci = if apn.eq_ignore_ascii_case("ims") {
            5
        } else {
            u.qci
        };
        let arp = Arp {
            priority_level: u.arp_priority,
            ..Arp::default()
        };
        let ambr = u.ambr;
        let added = cp
            .add_pdn(
                slot,
                &PdnParams {
                    apn: apn.clone(),
                    ebi,
                    qci,
                    arp,
                    charging_key: 0,
                },
            )
            .map_err(|_| EsmCause::InsufficientResources)?; // no pool / bearer slot left
        let mut act = nasx::NasActivateDefaultEpsBearerContextRequest::new(
            nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(qci, None)),
            nasx::NasAccessPointName::new(nasx::apn_value(&apn)),
            nasx::NasPdnAddress::from_ipv4(added.ue_ip.octets()),
        );
        act.apn_ambr =
            nasx::NasApnAggregateMaximumBitRate::from_kbps(ambr.1 / 1000, ambr.0 / 1000).ok();
        let Some(nas) = self.nas_bytes(cp, id, &NasEpsMessage::new_esm(act, ebi, pti), false)
        else {
            warn_cp(
                id,
                format_args!("rollback of PDN connection {ebi}"),
                cp.remove_pdn(slot, ebi),
            );
            return Err(EsmCause::RequestRejectedUnspecified);
        };
        if let Some(u) = self.ue_mut(cp, id) {
            u.pending_bearers.push(ebi);
        }
        let session = PolicySession {
            imsi: self.ue(cp, id).and_then(|u| u.imsi).unwrap_or(0),
            apn: apn.clone(),
            ebi,
            ue_ip: added.ue_ip,
        };
        if self.cfg.policy.enabled {
            // The PCRF's rules for it are applied when its answer comes (the
            // bearer is activated with the subscription's QoS meanwhile).
            let subscribed = SessionQos {
                qci,
                arp_priority: arp.priority_level,
                ambr_ul: ambr.0,
                ambr_dl: ambr.1,
            };
            self.ask_policy(cp, id, session, subscribed, false, out);
        } else {
            self.open_session(cp, id, session);
        }
        let erab = pepc_s1ap::ERab {
            id: ebi,
            qci,
            arp,
            gbr: None,
            transport: self.cfg.s1u_addr,
            teid: added.teid_ul,
            nas_pdu: Some(nas),
        };
        tracing::debug!(
            "UE {id}: PDN connection to {apn} on bearer {ebi}, {}",
            added.ue_ip
        );
        self.send(
            assoc,
            Some(id),
            ERabSetupRequest {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![erab],
            }
            .into(),
            out,
        );
        Ok(())
    }

    /// UE-requested PDN disconnect (TS 24.301 §6.5.2): Deactivate EPS Bearer Context
    /// Request (#36) for the default bearer in an E-RAB Release Command for every bearer
    /// of the PDN connection; the address is freed. `Err` is the ESM cause.
    pub(crate) fn pdn_disconnect(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pti: u8,
        linked: u8,
        out: &mut Vec<Output>,
    ) -> Result<(), EsmCause> {
        let u = self
            .ue(cp, id)
            .ok_or(EsmCause::RequestRejectedUnspecified)?;
        let (Some(slot), Some(ConnKey { assoc, enb_ue_id })) = (u.slot, u.conn) else {
            return Err(EsmCause::RequestRejectedUnspecified);
        };
        if pti == 0 || pti == 0xff {
            return Err(EsmCause::InvalidPtiValue);
        }
        let ctx = cp.ue(slot).ok_or(EsmCause::RequestRejectedUnspecified)?;
        if ctx.pdn_by_default_ebi(linked).is_none() {
            return Err(EsmCause::InvalidEpsBearerIdentity);
        }
        if ctx.pdns.len() == 1 {
            return Err(EsmCause::LastPdnDisconnectionNotAllowed);
        }
        let req = nasx::NasDeactivateEpsBearerContextRequest::new(nasx::NasEsmCause::new(
            EsmCause::RegularDeactivation.into(),
        ));
        let nas = self
            .nas_bytes(cp, id, &NasEpsMessage::new_esm(req, linked, pti), false)
            .ok_or(EsmCause::RequestRejectedUnspecified)?;
        self.end_session(cp, id, linked, crate::pcrf::RecordCause::PdnReleased);
        let ebis = cp
            .remove_pdn(slot, linked)
            .map_err(|_| EsmCause::RequestRejectedUnspecified)?;
        self.stats.pdn_disconnects += 1;
        if let Some(u) = self.ue_mut(cp, id) {
            u.pending_bearers.retain(|b| !ebis.contains(b));
        }
        self.send(
            assoc,
            Some(id),
            ERabReleaseCommand {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: ebis
                    .iter()
                    .map(|e| pepc_s1ap::ERabCause {
                        id: *e,
                        cause: Cause::NAS_NORMAL_RELEASE,
                    })
                    .collect(),
                nas_pdu: Some(nas),
            }
            .into(),
            out,
        );
        Ok(())
    }
}
