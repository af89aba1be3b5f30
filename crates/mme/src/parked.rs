//! Parked EPS security contexts of detached UEs, taken back by an integrity-protected
//! re-attach under their GUTI (TS 24.301 §5.5.1.2.2, §4.4.4.3).

use crate::prelude::*;

impl Mme {
    /// Keep the security context of a UE that detached under its M-TMSI, evicting
    /// expired entries and, at the bound, the oldest.
    /// `purge`: the HSS holds this MME for the subscriber, and is told with a Purge
    /// UE when the parked context goes without being taken back.
    pub(crate) fn park(
        &mut self,
        now: Instant,
        m_tmsi: u32,
        imsi: u64,
        sec: Box<SecCtx>,
        purge: bool,
    ) {
        self.expire_parked(now);
        if self.cfg.parked_contexts == 0 {
            if purge {
                self.purge_subscriber(imsi);
            }
            return;
        }
        // One parked context per subscriber: a UE holds one native EPS security
        // context, so the one parked at its previous detach is of no use once it
        // detaches with a newer one (a re-attach by IMSI ran a new AKA). Kept, every
        // detach of a subscriber re-attaching by IMSI added one until the bound.
        if let Some(t) = self.parked_by_imsi.get(&imsi).copied() {
            if t != m_tmsi && self.parked.get(&t).is_some_and(|p| p.imsi == imsi) {
                self.take_parked(t);
            }
        }
        while self.parked.len() >= self.cfg.parked_contexts {
            let Some((until, t)) = self.parked_order.pop_front() else {
                break;
            };
            if self.parked.get(&t).is_some_and(|p| p.until == until) {
                self.drop_parked(t);
            }
        }
        let until = now + self.cfg.parked_context_ttl;
        let p = Parked {
            imsi,
            sec,
            until,
            purge,
        };
        if let Some(old) = self.parked.insert(m_tmsi, p) {
            if old.imsi != imsi && self.parked_by_imsi.get(&old.imsi) == Some(&m_tmsi) {
                self.parked_by_imsi.remove(&old.imsi);
            }
            // The same M-TMSI parked twice cannot be a live subscriber's twice; the
            // older one's registration is still the HSS's to forget.
            if old.purge && old.imsi != imsi {
                self.purge_subscriber(old.imsi);
            }
        }
        self.parked_by_imsi.insert(imsi, m_tmsi);
        self.parked_order.push_back((until, m_tmsi));
        // Records of contexts taken back or replaced stay in the order until they
        // reach its front (an hour): compacted once they are half of it, so the
        // order is bounded by twice the contexts parked.
        if self.parked_order.len() > 2 * self.parked.len() + 64 {
            let parked = &self.parked;
            self.parked_order
                .retain(|&(u, t)| parked.get(&t).is_some_and(|p| p.until == u));
        }
    }

    /// Room in the table for the contexts `users` subscribers may park, made at start.
    /// A subscriber's detach replaces its context parked at the previous one (a new
    /// M-TMSI: take and insert), which leaves the table's old bucket deleted, and a
    /// hash table more than half full grows rather than rehashing in place: sized by
    /// its first storm, it doubled in the second with as many entries (2 slices x 1.6
    /// MB at 25,000 parked each). Sized for them all, it rehashes in place instead.
    pub(crate) fn reserve_parked(&mut self, users: usize) {
        self.parked.reserve(users.min(self.cfg.parked_contexts));
    }

    /// The parked context under `m_tmsi` leaves the table (taken back, replaced,
    /// dropped), and its subscriber's entry with it.
    fn take_parked(&mut self, m_tmsi: u32) -> Option<Parked> {
        let p = self.parked.remove(&m_tmsi)?;
        if self.parked_by_imsi.get(&p.imsi) == Some(&m_tmsi) {
            self.parked_by_imsi.remove(&p.imsi);
        }
        Some(p)
    }

    /// The parked context under `m_tmsi` goes (expired or evicted, not taken back):
    /// the subscription data goes with it.
    fn drop_parked(&mut self, m_tmsi: u32) {
        if let Some(p) = self.take_parked(m_tmsi) {
            if p.purge {
                self.purge_subscriber(p.imsi);
            }
        }
    }

    /// Purge UE for `imsi` (S6a PUR, TS 29.272 §5.2.1.3), unless a context of the
    /// subscriber is here again (its Update Location made the HSS hold us anew).
    pub(crate) fn purge_subscriber(&mut self, imsi: u64) {
        if self.index.has_imsi(imsi) {
            return;
        }
        self.stats.hss_purges += 1;
        self.records
            .push(Output::Hss(crate::hss::HssRequest::Purge { imsi }));
    }

    /// Drop expired parked contexts and the order records of contexts already taken.
    pub(crate) fn expire_parked(&mut self, now: Instant) {
        while let Some(&(until, t)) = self.parked_order.front() {
            let live = self.parked.get(&t).is_some_and(|p| p.until == until);
            if live && until > now {
                break;
            }
            self.parked_order.pop_front();
            if live {
                self.drop_parked(t);
            }
        }
    }

    /// Security contexts parked for detached UEs (for metrics and tests).
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// Entries of the parking order (expiry and eviction; bounded with the parked
    /// contexts).
    pub fn parked_order_len(&self) -> usize {
        self.parked_order.len()
    }

    /// An integrity-protected (not ciphered) Attach Request from a UE without a
    /// context here: if its GUTI is ours, a context is parked under it with the same
    /// KSI and the MAC verifies with it, the context becomes the UE's current one.
    /// Anything else leaves the parked context alone (`None`: identification goes on).
    pub(crate) fn unpark(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        bytes: &[u8],
    ) -> Option<NasEpsMessage> {
        let now = self.now;
        let NasEpsMessage::Emm(_, Emm::AttachRequest(r)) = nasx::unverified_inner(bytes)? else {
            return None;
        };
        let Identity::Guti(plmn, g, c, t) = nasx::parse_identity(&r.eps_mobile_identity.value)
        else {
            return None;
        };
        if (plmn, g, c) != (self.cfg.plmn.0, self.cfg.mme_group_id, self.cfg.mme_code) {
            return None;
        }
        let ksi = r.nas_key_set_identifier.value;
        let p = self.parked.get_mut(&t)?;
        // Native context (TSC 0) with the KSI we assigned, not expired.
        if ksi & 0x08 != 0 || ksi & 0x07 != p.sec.ksi || p.until <= now {
            return None;
        }
        let m = p.sec.unprotect(bytes, Direction::Uplink).ok()?;
        let p = self.take_parked(t)?;
        let u = self.ue_mut(cp, id)?;
        u.sec = Some(p.sec);
        u.imsi = Some(p.imsi);
        u.resumed = true;
        self.authenticated(cp, id);
        Some(m)
    }
}
