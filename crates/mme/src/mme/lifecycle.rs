//! A UE context's life in the MME: made for a UE's first message on an S1 connection
//! (with the bounds on contexts without security), given a connection or none
//! (ECM-CONNECTED, ECM-IDLE), its release commanded, its session dropped, and the
//! context removed (parking its security context for a GUTI re-attach).

use super::index::UeIndex;
use super::*;

impl Mme {
    /// Drop the UE's S1 connection; a registered UE becomes ECM-IDLE, a UE in the
    /// middle of attach is forgotten.
    pub(crate) fn make_idle(&mut self, cp: &mut ControlPlane, id: u32, out: &mut Vec<Output>) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        let why = ProcFailure::ConnectionReleased;
        self.stats.procedures.fail_all(&mut u.open, why);
        if let Some(c) = u.conn.take() {
            self.index.unlink_conn(c);
        }
        if let Some(c) = u.old_conn.take() {
            self.index.unlink_conn(c);
        }
        u.x2_source = None;
        u.handover = None;
        u.guard_timer = None;
        u.nas_secured = false;
        u.proc = Procedure::Idle;
        u.retx = None;
        u.nas_timer = None;
        if u.emm == Emm_::Registered {
            let page = std::mem::take(&mut u.page_after_release);
            if let Some(s) = u.slot {
                warn_cp(id, "release to idle", cp.release_to_idle(s));
            }
            self.stats.releases += 1;
            self.procedure_done(id);
            let at = self.now + self.cfg.mobile_reachable;
            {
                self.arm(cp, id, TimerKind::Reachable, at);
                // Downlink came while the connection was being released.
                if page {
                    if let Some(u) = self.ue_mut(cp, id) {
                        u.paging_left = self.cfg.paging_attempts;
                    }
                    self.send_paging(cp, id, out);
                }
            }
        } else {
            self.remove_ue(cp, id, true);
        }
    }

    /// Drop UE `id`'s session (the data-path part of its entry: PDN connections,
    /// bearers, tunnels); its signaling part stays.
    pub(crate) fn drop_session(&mut self, cp: &mut ControlPlane, id: u32) {
        self.end_sessions(cp, id, crate::pcrf::RecordCause::Detached);
        if let Some(s) = self.ue_mut(cp, id).and_then(|u| u.slot.take()) {
            warn_cp(id, "detach", cp.detach(s));
        }
    }

    /// The index of subscribed APN `apn` (0 if the table is full: an APN beyond the
    /// 65535 first ones is then not known as subscribed).
    pub(crate) fn apn_id(&mut self, apn: &str) -> u16 {
        if apn.is_empty() {
            return 0;
        }
        if let Some(i) = self.apn_ids.get(apn) {
            return *i;
        }
        let Ok(i) = u16::try_from(self.apns.len() + 1) else {
            return 0;
        };
        self.apns.push(apn.into());
        self.apn_ids.insert(apn.into(), i);
        i
    }

    /// The subscribed APN of index `i`.
    pub(crate) fn apn_name(&self, i: u16) -> Option<&str> {
        self.apns.get(usize::from(i).checked_sub(1)?).map(|a| &**a)
    }

    /// Drop a UE context. `park`: the UE detached (or was rejected) and keeps its EPS
    /// security context, so we keep it too for a GUTI re-attach. The subscription data
    /// goes with the context: if the HSS holds this MME for the subscriber, a Purge UE
    /// tells it now, or when the parked context goes (`Mme::expire_parked`).
    pub(crate) fn remove_ue(&mut self, cp: &mut ControlPlane, id: u32, park: bool) {
        if self.index.contains(id) {
            self.end_sessions(cp, id, crate::pcrf::RecordCause::Detached);
        }
        let Some(slot) = self.index.remove(id) else {
            return;
        };
        // The whole entry goes: the data-path part if any (detach), and this part.
        let Some(mut u) = cp.release_ue(slot) else {
            return;
        };
        let why = ProcFailure::ContextRemoved;
        self.stats.procedures.fail_all(&mut u.open, why);
        if let Some(a) = u.unauth_on.take() {
            self.uncount_unauth(a);
        }
        // Only the subscriber's current context speaks for it to the HSS (a superseded
        // one has no IMSI; a newer context has the subscriber's index).
        let current = u.imsi.is_some_and(|i| self.index.is_imsi_of(i, id));
        let mut purge = current && u.hss_location;
        if park && u.emm == Emm_::Deregistered && u.m_tmsi != 0 {
            if let (Some(sec), Some(imsi)) = (u.sec.take(), u.imsi) {
                self.park(self.now, u.m_tmsi, imsi, sec, purge);
                purge = false;
            }
        }

        if let Some(c) = u.conn {
            self.index.unlink_conn(c);
        }
        if let Some(c) = u.old_conn {
            self.index.unlink_conn(c);
        }
        if let Some(i) = u.imsi {
            if self.index.is_imsi_of(i, id) {
                self.index.unlink_imsi(i);
                if !self.role.is_home_of(i) {
                    self.released.push(i);
                }
                if self.cfg.checkpoints {
                    self.forgotten.push(i);
                }
            }
        }
        self.index.unlink_tmsi_of(u.m_tmsi, id);
        if let Procedure::ExpectGutiReallocComplete { m_tmsi } = u.proc {
            self.index.unlink_tmsi_of(m_tmsi, id);
        }
        if let (true, Some(imsi)) = (purge, u.imsi) {
            self.purge_subscriber(imsi);
        }
    }

    /// A new UE context for a UE's first message on S1 connection (`assoc`,
    /// `enb_ue_id`): its entry in the slice's table. `None` when the slice has no
    /// entry left (counted; the message is not served).
    pub(crate) fn new_ue(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        enb_ue_id: u32,
        tai: Tai,
        ecgi: Ecgi,
    ) -> Option<u32> {
        if !self.unauth_room(assoc) {
            self.stats.unauth_refused += 1;
            return None;
        }
        self.new_context(cp, assoc, enb_ue_id, tai, ecgi, true)
    }

    /// A context for a new S1 connection; `unauth`: it counts against the bounds on
    /// contexts without security (a context made only to send a reject and release
    /// does not: its release guard bounds it).
    pub(crate) fn new_context(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        enb_ue_id: u32,
        tai: Tai,
        ecgi: Ecgi,
        unauth: bool,
    ) -> Option<u32> {
        let id = self.alloc_mme_ue_id();
        let conn = ConnKey::new(assoc, enb_ue_id);
        let ue = Box::new(Ue {
            id,
            imsi: None,
            emm: Emm_::Deregistered,
            conn: Some(conn),
            proc: Procedure::Idle,
            sec: None,
            nas_secured: false,
            claim_imsi: false,
            ue_net_cap: vec![],
            pti: 0,
            apn: String::new(),
            subscribed_apn: 0,
            slot: None,
            m_tmsi: 0,
            tai,
            ecgi,
            nh: None,
            ncc: 0,
            retx: None,
            retx_count: 0,
            nas_timer: None,
            paging_timer: None,
            paging_left: 0,
            reach_timer: None,
            guard_timer: None,
            unauth_on: unauth.then_some(assoc),
            started: None,
            ckpt_dl: 0,
            handover: None,
            old_conn: None,
            x2_source: None,
            ambr: self.cfg.default_ambr,
            qci: 9,
            arp_priority: 9,
            next_ksi: 0,
            pending_bearers: vec![],
            esm_info_flag: false,
            resumed: false,
            superseded: false,
            hss_location: false,
            page_after_release: false,
            open: 0,
            policy: None,
        });
        let slot = match cp.reserve_ue(ue) {
            Ok(s) => s,
            Err(_) => {
                self.stats.no_ue_entry += 1;
                return None;
            }
        };
        self.index.insert(id, slot);
        self.index.link_conn(conn, id);
        if !unauth {
            return Some(id);
        }
        self.admission.count(&self.cfg, assoc);
        let at = self.now + self.cfg.unauth_context_ttl;
        self.arm(cp, id, TimerKind::Guard, at);
        Some(id)
    }

    pub(crate) fn release(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        cause: Cause,
        then_remove: bool,
        out: &mut Vec<Output>,
    ) {
        if let Some((mut cx, u)) = self.split(cp, id, out) {
            cx.release(u, cause, then_remove);
        }
    }

    /// Release a registered UE's S1 connection, keeping the UE (ECM-CONNECTED → IDLE).
    /// Its eNB tunnels go first, as Release Access Bearers does before the UE Context
    /// Release Command (TS 23.401 §5.3.5): downlink from now on is buffered and pages
    /// the UE once the release completes, instead of going to the released eNB.
    pub(crate) fn release_connection(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        cause: Cause,
        out: &mut Vec<Output>,
    ) {
        if let Some(u) = self.ue(cp, id) {
            if let (Some(s), true) = (u.slot, u.emm == Emm_::Registered) {
                warn_cp(
                    id,
                    "release of the eNB tunnels",
                    cp.release_access_bearers(s),
                );
            }
        }
        self.release(cp, id, cause, false, out);
    }

    /// Give idle UE `id` the S1 connection its unverified first message came on, for
    /// a re-authentication only: nothing else of the context changes (location,
    /// timers) unless it succeeds.
    pub(crate) fn bind_conn(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        assoc: AssocId,
        enb_ue_id: u32,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        let c = ConnKey::new(assoc, enb_ue_id);
        u.conn = Some(c);
        u.nas_secured = false;
        self.index.link_conn(c, id);
    }

    /// Give a known UE a new S1 connection (idle → connected).
    pub(crate) fn attach_conn(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        assoc: AssocId,
        enb_ue_id: u32,
        tai: Tai,
        ecgi: Ecgi,
    ) {
        if let Some(u) = self.ue_mut(cp, id) {
            attach_conn(
                &mut self.index,
                &mut self.stats.procedures,
                u,
                ConnKey::new(assoc, enb_ue_id),
                (tai, ecgi),
            );
        }
    }
}

/// Give UE `u` the new S1 connection `new` at location `(tai, ecgi)` (idle →
/// connected, or a handover's target).
pub(crate) fn attach_conn(
    index: &mut UeIndex,
    ledger: &mut Ledger,
    u: &mut Ue,
    new: ConnKey,
    (tai, ecgi): (Tai, Ecgi),
) {
    if let Some(c) = u.conn.take() {
        if matches!(u.proc, Procedure::ExpectReleaseComplete { .. }) && c != new {
            // The old connection's release is still in flight (its Release Complete
            // may come late, after a loss): it stays known, to be taken quietly.
            if let Some(o) = u.old_conn.replace(c) {
                index.unlink_conn(o);
            }
        } else {
            index.unlink_conn(c);
        }
    }
    u.conn = Some(new);
    u.nas_secured = false; // a new NAS signalling connection
    u.tai = tai;
    u.ecgi = ecgi;
    u.reach_timer = None;
    // A paged UE that answers with another procedure than a Service Request (a
    // TAU without the active flag) is reachable, but its downlink still waits:
    // paging ends here and starts again once this connection is released, unless
    // a bearer setup delivers the data first.
    if u.paging_timer.take().is_some() {
        // The UE answered: the paging succeeded, whatever it answered with.
        ledger.succeed(&mut u.open, Proc::Paging);
        u.page_after_release = true;
    }
    index.link_conn(new, u.id);
}
