//! Policy and charging control of a UE's PDN connections (TS 23.203, TS 23.401 §5.4;
//! the PCRF reached through [`crate::pcrf`]): the CCR-I of a new PDN connection and
//! its answer applied, PCC rules bound to bearers (TS 23.203 §6.1.10: one bearer per
//! QCI and ARP), PCRF-pushed rules (RAR) over the dedicated bearer procedures, usage
//! monitoring (CCR-U), and the usage records and CCR-T when bearers and sessions go.
//!
//! A UE's rules become its PCEF rule set on the data path, shared with every UE whose
//! rules and bearers are the same ([`RuleSets`]: the data path holds at most
//! `MAX_RULE_SETS` sets, so a set is found by its content and counted).

use super::usage::RULE_PAIRS;
use crate::pcrf::{
    FlowFilter, PccRule, PcrfAnswer, PcrfFailure, PcrfRequest, PolicyDecision, PolicySession,
    SessionQos, MAX_MONITORING_KEYS, MAX_RULES_PER_SESSION,
};
use crate::prelude::*;
use std::net::Ipv4Addr;

/// A rule bound to a bearer, with its packet filters' identifiers and precedences
/// in that bearer's TFT.
#[derive(Debug, Clone)]
pub(crate) struct Bound {
    pub(crate) rule: PccRule,
    pub(crate) ebi: u8,
    pub(crate) filters: Vec<(u8, u8)>,
    /// Its pair of the bearer's per-rule volumes, with their values when it was
    /// bound (the pair may have counted for an earlier rule or bearer).
    pub(crate) counter: Option<(u8, u64, u64)>,
}

/// A monitoring key's grant: reported once the session's volume passes `base +
/// threshold`.
#[derive(Debug, Clone)]
pub(crate) struct Monitor {
    pub(crate) key: String,
    pub(crate) threshold: u64,
    pub(crate) base: u64,
    /// Reported, the new grant not yet come.
    pub(crate) reported: bool,
}

/// The policy of one PDN connection (one Gx session).
#[derive(Debug)]
pub(crate) struct SessionPolicy {
    pub(crate) ebi: u8,
    pub(crate) apn: String,
    pub(crate) ue_ip: Ipv4Addr,
    /// The PCRF holds a session for it: a CCR-T is due when it goes.
    pub(crate) gx: bool,
    pub(crate) rules: Vec<Bound>,
    pub(crate) monitors: Vec<Monitor>,
    /// The bearers of the PDN connection with when they were set up and their
    /// records' sequence numbers.
    pub(crate) bearers: Vec<(u8, Instant, u32)>,
    /// A decision to apply once the UE is connected (pushed while it was idle or
    /// before its attach completed).
    pub(crate) pending: Option<PolicyDecision>,
}

/// A UE's policy state, out of line of its context (most of its life it is read only
/// when a bearer or session goes).
#[derive(Debug, Default)]
pub(crate) struct UePolicy {
    pub(crate) sessions: Vec<SessionPolicy>,
    /// Its PCEF rule set on the data path (`None`: the slice's default).
    pub(crate) rule_set: Option<u16>,
    /// When its next interim usage records are due (its entry in `Mme::interims`).
    pub(crate) interim_due: Option<Instant>,
}

/// Rule sets the MME gave the data path: by content, with a count of the UEs on
/// each. Ids from `FIRST_POLICY_SET` up are the MME's; those below are the node's
/// configured ones.
pub(crate) struct RuleSets {
    by_key: HashMap<String, (u16, u32)>,
    key_of: HashMap<u16, String>,
    free: Vec<u16>,
}

pub(crate) const FIRST_POLICY_SET: u16 = 64;

impl Default for RuleSets {
    fn default() -> Self {
        RuleSets {
            by_key: HashMap::new(),
            key_of: HashMap::new(),
            free: (FIRST_POLICY_SET..pepc_slice::counters::MAX_RULE_SETS as u16)
                .rev()
                .collect(),
        }
    }
}

impl RuleSets {
    fn acquire(
        &mut self,
        rules: Vec<pepc_slice::pcef::Rule>,
        cp: &mut ControlPlane,
    ) -> Result<u16, &'static str> {
        let key = format!("{rules:?}");
        if let Some((id, n)) = self.by_key.get_mut(&key) {
            *n += 1;
            return Ok(*id);
        }
        if rules.len() > pepc_slice::counters::MAX_RULES_PER_SET {
            return Err("more packet filters than a rule set holds");
        }
        let id = self.free.pop().ok_or("every policy rule set is in use")?;
        if cp.install_rule_set(id, rules).is_err() {
            self.free.push(id);
            return Err("the data path refused the rule set");
        }
        self.key_of.insert(id, key.clone());
        self.by_key.insert(key, (id, 1));
        Ok(id)
    }

    pub(super) fn release(&mut self, id: u16) {
        let Some(key) = self.key_of.get(&id) else {
            return;
        };
        let Some((_, n)) = self.by_key.get_mut(key) else {
            return;
        };
        *n -= 1;
        if *n == 0 {
            if let Some(key) = self.key_of.remove(&id) {
                self.by_key.remove(&key);
            }
            self.free.push(id);
        }
    }

    /// Sets in use.
    pub(crate) fn in_use(&self) -> usize {
        self.by_key.len()
    }
}

/// Filters of a bearer's TFT with their identifiers and precedences.
type TftFilters<'a> = Vec<(u8, u8, &'a FlowFilter)>;

impl Mme {
    /// The policy state of a new PDN connection (no Gx session yet).
    pub(crate) fn open_session(&mut self, cp: &mut ControlPlane, id: u32, session: PolicySession) {
        let now = self.now;
        if let Some(u) = self.ue_mut(cp, id) {
            open_session_ue(u, now, session);
        }
    }

    /// The PDN connection of default bearer `session.ebi` of UE `id` asks the PCRF
    /// for its policy (CCR-I). `wait` (the attach's): the UE waits in
    /// [`Procedure::ExpectPolicy`], guarded by the policy timeout; else the answer
    /// is applied when it comes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ask_policy(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        session: PolicySession,
        subscribed: SessionQos,
        wait: bool,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        self.open_session(cp, id, session.clone());
        let seq = self.next_hss_seq();
        if wait {
            let Some(u) = self.ue_mut(cp, id) else {
                return;
            };
            u.proc = Procedure::ExpectPolicy { seq };
            let t = self.cfg.policy.timeout;
            self.arm(cp, id, TimerKind::Nas, now + t);
        }
        self.stats.pcrf_requests += 1;
        out.push(Output::Pcrf(PcrfRequest::Establish {
            r: crate::hss::HssRef { mme_ue_id: id, seq },
            session,
            subscribed,
        }));
    }

    /// The PCRF's answer: a CCA-I the attach waits for, or a CCA-U's new grants.
    pub(crate) fn pcrf_answer(
        &mut self,
        cp: &mut ControlPlane,
        a: PcrfAnswer,
        out: &mut Vec<Output>,
    ) {
        let id = a.r.mme_ue_id;
        let _span = crate::mme::ue_span(id, None, "PCRF answer").entered();
        let Some(u) = self.ue(cp, id) else {
            self.stats.pcrf_late_answers += 1;
            return;
        };
        match u.proc {
            Procedure::ExpectPolicy { seq } if seq == a.r.seq => {}
            _ => {
                // The CCA-I of a later PDN connection: its policy now; a CCA-U:
                // its grants.
                let Ok(d) = a.result else {
                    self.stats.pcrf_failures += 1;
                    return;
                };
                let first = self.session_of(cp, id, a.ebi, |s| !std::mem::replace(&mut s.gx, true));
                match first {
                    Some(true) => self.apply_policy(cp, id, a.ebi, d, out),
                    Some(false) => self.update_grants(cp, id, a.ebi, &d, true),
                    None => self.stats.pcrf_late_answers += 1,
                }
                return;
            }
        }
        self.stop_nas_timer(cp, id);
        if let Some(u) = self.ue_mut(cp, id) {
            u.proc = Procedure::Idle;
        }
        match a.result {
            Ok(d) => {
                self.session_of(cp, id, a.ebi, |s| s.gx = true);
                self.apply_policy(cp, id, a.ebi, d, out);
                self.accept_attach(cp, id, out);
            }
            Err(e) => self.policy_failed(cp, id, e, out),
        }
    }

    /// The CCR-I failed (refused, unreachable, no answer in time): Failure-Handling.
    pub(crate) fn policy_failed(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        e: PcrfFailure,
        out: &mut Vec<Output>,
    ) {
        self.stats.pcrf_failures += 1;
        if self.cfg.policy.continue_on_failure {
            tracing::warn!("UE {id}: {e}; the PDN connection goes on with the subscription's QoS");
            return self.accept_attach(cp, id, out);
        }
        tracing::warn!("UE {id}: {e}; the attach is rejected");
        let rej = nasx::NasPdnConnectivityReject::new(nasx::NasEsmCause::new(
            EsmCause::RequestRejectedByGw.into(),
        ));
        let pti = self.ue(cp, id).map_or(0, |u| u.pti);
        let esm = NasEpsMessage::new_esm(rej, 0, pti);
        let mut r = nasx::NasAttachReject::new(nasx::NasEmmCause::new(EmmCause::EsmFailure.into()));
        r.esm_message_container = nasx::NasEsmMessageContainer::from_esm_message(&esm).ok();
        if let Some((mut cx, u)) = self.split(cp, id, out) {
            crate::emm::attach::send_attach_reject(&mut cx, u, r);
        }
    }

    /// Runs `f` on the session of default bearer `ebi` of UE `id`, if it has one.
    pub(super) fn session_of<R>(
        &self,
        cp: &mut ControlPlane,
        id: u32,
        ebi: u8,
        f: impl FnOnce(&mut SessionPolicy) -> R,
    ) -> Option<R> {
        let u = self.ue_mut(cp, id)?;
        let s = u
            .policy
            .as_mut()?
            .sessions
            .iter_mut()
            .find(|s| s.ebi == ebi)?;
        Some(f(s))
    }

    /// The volume of the PDN connection of default bearer `ebi` (all its bearers,
    /// both directions).
    pub(super) fn session_volume(&self, cp: &ControlPlane, id: u32, ebi: u8) -> u64 {
        let Some(slot) = self.ue(cp, id).and_then(|u| u.slot) else {
            return 0;
        };
        let Some(ctx) = cp.ue(slot) else { return 0 };
        let Some(pdn) = ctx.pdn_by_default_ebi(ebi).map(|p| p.index) else {
            return 0;
        };
        ctx.bearers
            .iter()
            .filter(|b| b.pdn == pdn)
            .filter_map(|b| cp.usage(slot, b.ebi).ok())
            .map(|u| u.ul_bytes + u.dl_bytes)
            .sum()
    }

    /// Monitoring grants of a decision into the session (a key granted again starts
    /// counting from now). `report`: from a CCA-U.
    pub(super) fn update_grants(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        ebi: u8,
        d: &PolicyDecision,
        report: bool,
    ) {
        if d.monitoring.is_empty() && !report {
            return;
        }
        let now_volume = self.session_volume(cp, id, ebi);
        let monitored = self
            .session_of(cp, id, ebi, |s| {
                for g in &d.monitoring {
                    s.monitors.retain(|m| m.key != g.key);
                    if s.monitors.len() < MAX_MONITORING_KEYS && g.octets > 0 {
                        s.monitors.push(crate::esm::policy::Monitor {
                            key: g.key.clone(),
                            threshold: g.octets,
                            base: now_volume,
                            reported: false,
                        });
                    }
                }
                !s.monitors.is_empty()
            })
            .unwrap_or(false);
        if monitored && !self.monitored.contains(&id) {
            let at = self.now + self.cfg.policy.usage_check;
            self.monitored.insert(id);
            super::usage::push_due(&mut self.usage_checks, &self.index, at, id);
        }
    }

    /// Applies a decision to the PDN connection of default bearer `ebi`: the default
    /// bearer's QoS and the AMBR now, monitoring grants, and the rules, bound to
    /// bearers once the UE is connected and registered (else kept pending).
    pub(crate) fn apply_policy(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        ebi: u8,
        d: PolicyDecision,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        let Some(slot) = self.ue(cp, id).and_then(|u| u.slot) else {
            return;
        };
        let attaching = self.ue(cp, id).is_some_and(|u| u.emm != Emm_::Registered);
        if let Some((qci, arp)) = d.default_qos {
            let arp = Arp {
                priority_level: arp,
                ..Arp::default()
            };
            warn_cp(
                id,
                "default bearer QoS",
                cp.modify_bearer_qos(slot, ebi, qci, 0, 0),
            );
            warn_cp(id, "default bearer ARP", cp.set_bearer_arp(slot, ebi, arp));
            if attaching {
                if let Some(u) = self.ue_mut(cp, id) {
                    u.qci = qci;
                    u.arp_priority = arp.priority_level;
                }
            }
        }
        if let Some((ul, dl)) = d.ambr {
            warn_cp(id, "AMBR", cp.set_ambr(slot, ul, dl));
            if let Some(u) = self.ue_mut(cp, id) {
                u.ambr = (ul, dl);
            }
        }
        self.update_grants(cp, id, ebi, &d, false);
        if d.install.is_empty() && d.remove.is_empty() {
            return;
        }
        let connected = self
            .ue(cp, id)
            .is_some_and(|u| u.conn.is_some() && u.emm == Emm_::Registered);
        if !connected {
            // Bound when the UE is connected: after its attach, or once paged.
            let idle = self
                .ue(cp, id)
                .is_some_and(|u| u.conn.is_none() && u.emm == Emm_::Registered);
            self.session_of(cp, id, ebi, |s| {
                let p = s.pending.get_or_insert_with(Default::default);
                for r in &d.remove {
                    p.install.retain(|x| &x.name != r);
                    if !p.remove.contains(r) {
                        p.remove.push(r.clone());
                    }
                }
                for r in d.install {
                    p.install.retain(|x| x.name != r.name);
                    p.remove.retain(|x| *x != r.name);
                    p.install.push(r);
                }
                p.install.truncate(MAX_RULES_PER_SESSION);
            });
            if idle && self.ue(cp, id).is_some_and(|u| u.paging_timer.is_none()) {
                if let Some(u) = self.ue_mut(cp, id) {
                    u.paging_left = self.cfg.paging_attempts;
                }
                self.send_paging(cp, id, out);
            }
            return;
        }
        self.bind_rules(now, id, ebi, d.install, d.remove, cp, out);
    }

    /// What was pushed while the UE could not take it, now that it is connected.
    pub(crate) fn apply_pending_policy(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        out: &mut Vec<Output>,
    ) {
        let now = self.now;
        let pending: Vec<(u8, PolicyDecision)> = match self.ue_mut(cp, id) {
            Some(u) => u.policy.as_mut().map_or(vec![], |p| {
                p.sessions
                    .iter_mut()
                    .filter_map(|s| s.pending.take().map(|d| (s.ebi, d)))
                    .collect()
            }),
            None => return,
        };
        for (ebi, d) in pending {
            self.bind_rules(now, id, ebi, d.install, d.remove, cp, out);
        }
    }

    /// Binds rules to bearers (TS 23.203 §6.1.10) and runs the bearer procedures
    /// that follow: a new dedicated bearer per new QCI/ARP, filters added to or
    /// deleted from a dedicated bearer's TFT, a bearer left without rules
    /// deactivated; then the UE's PCEF rule set. Rules that cannot be taken (invalid,
    /// over the bounds, no bearer left) are counted and logged.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn bind_rules(
        &mut self,
        now: Instant,
        id: u32,
        pdn_ebi: u8,
        install: Vec<PccRule>,
        remove: Vec<String>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some(slot) = self.ue(cp, id).and_then(|u| u.slot) else {
            return;
        };
        let Some(default) = cp
            .ue(slot)
            .and_then(|c| c.bearer(pdn_ebi))
            .map(|b| (b.qci, b.arp.priority_level))
        else {
            return;
        };
        let Some(mut rules) = self.session_of(cp, id, pdn_ebi, |s| std::mem::take(&mut s.rules))
        else {
            return;
        };
        // Dedicated bearers whose rules change (their TFT is sent whole again).
        let mut touched: Vec<u8> = Vec::new();
        let mut touch = |ebi: u8| {
            if !touched.contains(&ebi) {
                touched.push(ebi);
            }
        };
        let mut gone: Vec<Bound> = Vec::new();
        for name in remove.iter().chain(install.iter().map(|r| &r.name)) {
            if let Some(i) = rules.iter().position(|b| &b.rule.name == name) {
                let b = rules.remove(i);
                touch(b.ebi);
                gone.push(b);
            }
        }

        // New rules, grouped by binding onto new bearers where none has it.
        let mut fresh: Vec<((u8, u8), Vec<PccRule>)> = Vec::new();
        for r in install {
            if let Err(e) = r.validate() {
                self.stats.pcc_rule_failures += 1;
                tracing::warn!("UE {id}: {e}");
                continue;
            }
            if rules.len() + fresh.iter().map(|f| f.1.len()).sum::<usize>() >= MAX_RULES_PER_SESSION
            {
                self.stats.pcc_rule_failures += 1;
                tracing::warn!(
                    "UE {id}: rule {:?} over {MAX_RULES_PER_SESSION} rules",
                    r.name
                );
                continue;
            }
            let target = if r.binding() == default {
                Some(pdn_ebi)
            } else {
                rules
                    .iter()
                    .find(|b| b.ebi != pdn_ebi && b.rule.binding() == r.binding())
                    .map(|b| b.ebi)
            };
            match target {
                Some(ebi) => {
                    let filters = free_filters(&rules, ebi, r.flows.len());
                    if filters.len() < r.flows.len() {
                        self.stats.pcc_rule_failures += 1;
                        tracing::warn!("UE {id}: no room in bearer {ebi}'s TFT for {:?}", r.name);
                        continue;
                    }
                    if ebi != pdn_ebi {
                        touch(ebi);
                    }
                    let counter = assign_counter(cp, slot, ebi, &rules);
                    rules.push(Bound {
                        rule: r,
                        ebi,
                        filters,
                        counter,
                    });
                }
                None => match fresh.iter_mut().find(|f| f.0 == r.binding()) {
                    Some(f) => f.1.push(r),
                    None => fresh.push((r.binding(), vec![r])),
                },
            }
        }
        // The volumes of the rules that went, while their bearers (and counters)
        // are still there: a record of their own where the bearer stays.
        for b in &gone {
            if b.ebi == pdn_ebi || rules.iter().any(|r| r.ebi == b.ebi) {
                self.rule_record(now, cp, id, pdn_ebi, b);
            }
        }
        // Changed dedicated bearers: gone, or a new TFT (and GBR) by modification.
        for ebi in touched {
            if ebi == pdn_ebi {
                continue;
            }
            let left: Vec<&Bound> = rules.iter().filter(|b| b.ebi == ebi).collect();
            if left.is_empty() {
                // The bearer's record lists the rules it carried last.
                let last: Vec<Bound> = gone.iter().filter(|b| b.ebi == ebi).cloned().collect();
                self.session_of(cp, id, pdn_ebi, |s| s.rules = last);
                if let Err(e) = self.deactivate(cp, id, ebi, 0, out) {
                    tracing::warn!("UE {id}: bearer {ebi} without rules not deactivated: {e}");
                }
                continue;
            }
            let (mbr, gbr) = rates(&left);
            let qci = left[0].rule.qci;
            let filters: TftFilters = left
                .iter()
                .flat_map(|b| b.filters.iter().zip(&b.rule.flows))
                .map(|(f, flow)| (f.0, f.1, flow))
                .collect();
            let tft = nasx::tft_value(1, &filters);
            if let Err(e) = self.modify_dedicated(id, ebi, qci, mbr, gbr, tft, cp, out) {
                tracing::warn!("UE {id}: bearer {ebi} not modified: {e}");
            }
        }
        // New dedicated bearers.
        for ((qci, arp), group) in fresh {
            let mut bound: Vec<Bound> = Vec::new();
            let mut next = 0u8;
            for r in group {
                if usize::from(next) + r.flows.len() > 16 {
                    self.stats.pcc_rule_failures += 1;
                    continue;
                }
                let filters = (0..r.flows.len())
                    .map(|_| {
                        next += 1;
                        (next - 1, 0)
                    })
                    .collect();
                bound.push(Bound {
                    rule: r,
                    ebi: 0,
                    filters,
                    counter: None,
                });
            }
            let refs: Vec<&Bound> = bound.iter().collect();
            let (mbr, gbr) = rates(&refs);
            let prec = precedences(&rules, bound.iter().map(|b| b.filters.len()).sum());
            let mut k = 0;
            for b in &mut bound {
                for f in &mut b.filters {
                    f.1 = prec[k];
                    k += 1;
                }
            }
            let filters: TftFilters = bound
                .iter()
                .flat_map(|b| b.filters.iter().zip(&b.rule.flows))
                .map(|(f, flow)| (f.0, f.1, flow))
                .collect();
            let tft = nasx::tft_value(1, &filters);
            let arp = Arp {
                priority_level: arp,
                ..Arp::default()
            };
            let qos = crate::esm::DedicatedQos { qci, arp, mbr, gbr };
            match self.dedicated(cp, id, pdn_ebi, qos, 0, tft, out) {
                Ok(ebi) => {
                    self.stats.pcc_bearers_activated += 1;
                    for b in &mut bound {
                        b.ebi = ebi;
                    }
                    for i in 0..bound.len() {
                        bound[i].counter = assign_counter(cp, slot, ebi, &bound[..i]);
                    }
                    rules.extend(bound);
                    // `dedicated` noted the bearer in the session (once: a second
                    // entry made its usage record twice at the session's end).
                }
                Err(e) => {
                    self.stats.pcc_rule_failures += bound.len() as u64;
                    tracing::warn!("UE {id}: no dedicated bearer for QCI {qci}: {e}");
                }
            }
        }
        self.session_of(cp, id, pdn_ebi, |s| s.rules = rules);
        self.refresh_rule_set(cp, id);
    }

    /// The UE's PCEF rule set from its sessions' rules (shared by content).
    pub(crate) fn refresh_rule_set(&mut self, cp: &mut ControlPlane, id: u32) {
        let Some(u) = self.ue(cp, id) else { return };
        let Some(slot) = u.slot else { return };
        let Some(pol) = u.policy.as_ref() else { return };
        let old = pol.rule_set;
        let mut all: Vec<&Bound> = pol.sessions.iter().flat_map(|s| &s.rules).collect();
        all.sort_by_key(|b| b.rule.precedence);
        let rules: Vec<pepc_slice::pcef::Rule> = all
            .iter()
            .flat_map(|b| b.rule.flows.iter().map(move |f| (b, f)))
            .enumerate()
            .map(|(i, (b, f))| {
                f.pcef_rule(i as u32, b.ebi, b.rule.rating_group, b.counter.map(|c| c.0))
            })
            .collect();
        let new = if rules.is_empty() {
            None
        } else {
            match self.rule_sets.acquire(rules, cp) {
                Ok(s) => Some(s),
                Err(e) => {
                    self.stats.pcc_rule_failures += 1;
                    tracing::warn!("UE {id}: rules not enforced on the data path: {e}");
                    return;
                }
            }
        };
        if let Some(o) = old {
            self.rule_sets.release(o);
        }
        let set = new.unwrap_or(cp.config().default_rule_set);
        // Published only if it changes (each publication is an update of the UE on
        // the data path).
        if cp.ue(slot).map(|c| c.rule_set) != Some(set) {
            warn_cp(id, "rule set", cp.set_rule_set(slot, set));
        }
        if let Some(p) = self.ue_mut(cp, id).and_then(|u| u.policy.as_mut()) {
            p.rule_set = new;
        }
    }

    /// A PCRF-initiated change (RAR) for `imsi`'s PDN connection of default bearer
    /// `ebi` (`None`: its first). False if no context of this slice has it.
    pub(crate) fn policy_update(
        &mut self,
        cp: &mut ControlPlane,
        imsi: u64,
        ebi: Option<u8>,
        d: PolicyDecision,
        out: &mut Vec<Output>,
    ) -> bool {
        let Some(id) = self.index.by_imsi(imsi) else {
            return false;
        };
        let Some(ebi) = self.ue(cp, id).and_then(|u| {
            let p = u.policy.as_ref()?;
            match ebi {
                Some(e) => p.sessions.iter().find(|s| s.ebi == e).map(|s| s.ebi),
                None => p.sessions.first().map(|s| s.ebi),
            }
        }) else {
            return false;
        };
        self.stats.pcrf_updates += 1;
        let _span = crate::mme::ue_span(id, None, "PCRF update").entered();
        let connected = self.ue(cp, id).is_some_and(|u| u.conn.is_some());
        if let (true, Some((qci, _))) = (connected, d.default_qos) {
            // The default bearer's new QoS reaches the UE and the eNB.
            if let Err(e) = self.modify_bearer(imsi, ebi, qci, (0, 0), cp, out) {
                tracing::warn!("UE {id}: default bearer not modified: {e}");
            }
        }
        self.apply_policy(cp, id, ebi, d, out);
        self.procedure_done(id);
        true
    }

    /// The embedded PCRF's policy for `imsi` changed: each of its sessions gets the
    /// decision `decide(apn)` now gives, as a PCRF push would (rules it no longer
    /// has go, new or changed ones are installed, unchanged ones stay). False if no
    /// context of this slice holds the subscriber.
    pub fn reapply_policy(
        &mut self,
        now: Instant,
        imsi: u64,
        decide: &dyn Fn(&str) -> PolicyDecision,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> bool {
        // The decisions are asked first, in the sessions' order: they are the call's
        // input (what a recording keeps and a replay gives back).
        let decisions: Vec<(String, PolicyDecision)> = self
            .policy_sessions(cp, imsi)
            .into_iter()
            .map(|(_, apn, _)| {
                let d = decide(&apn);
                (apn, d)
            })
            .collect();
        self.apply_policy_decisions(now, imsi, decisions, cp, out)
    }

    /// [`Mme::reapply_policy`] with the decisions for the subscriber's sessions given,
    /// in their order (a session whose APN is not the one given keeps its policy).
    pub fn apply_policy_decisions(
        &mut self,
        now: Instant,
        imsi: u64,
        decisions: Vec<(String, PolicyDecision)>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> bool {
        let rec = self.begin_call(
            now,
            Some(cp),
            out.len(),
            crate::record::put::reapply_policy(imsi, &decisions),
        );
        self.now = now;
        let known = self.index.has_imsi(imsi);
        let sessions = self.policy_sessions(cp, imsi);
        for ((ebi, apn, current), (dapn, mut d)) in sessions.into_iter().zip(decisions) {
            if apn != dapn {
                continue;
            }
            d.remove = current
                .iter()
                .filter(|r| !d.install.iter().any(|n| n.name == r.name))
                .map(|r| r.name.clone())
                .collect();
            d.install.retain(|r| !current.contains(r));
            self.policy_update(cp, imsi, Some(ebi), d, out);
        }
        self.end_call(rec, cp, out, Some(&known));
        known
    }

    /// The subscriber's sessions: default bearer, APN, and the PCC rules they have
    /// or will have once a pending decision applies.
    pub(super) fn policy_sessions(
        &self,
        cp: &ControlPlane,
        imsi: u64,
    ) -> Vec<(u8, String, Vec<PccRule>)> {
        let Some(id) = self.index.by_imsi(imsi) else {
            return Vec::new();
        };
        self.ue(cp, id)
            .and_then(|u| u.policy.as_ref())
            .map(|p| {
                p.sessions
                    .iter()
                    .map(|s| {
                        let mut current: Vec<PccRule> =
                            s.rules.iter().map(|b| b.rule.clone()).collect();
                        if let Some(d) = &s.pending {
                            current.retain(|r| !d.remove.contains(&r.name));
                            current.extend(d.install.iter().cloned());
                        }
                        (s.ebi, s.apn.clone(), current)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// A free pair of bearer `ebi`'s per-rule volumes (`used`: rules bound already),
/// with its values now; `None` when all are taken.
pub(super) fn assign_counter(
    cp: &ControlPlane,
    slot: u32,
    ebi: u8,
    used: &[Bound],
) -> Option<(u8, u64, u64)> {
    let k = (0..RULE_PAIRS as u8).find(|k| {
        !used
            .iter()
            .any(|b| b.ebi == ebi && b.counter.is_some_and(|c| c.0 == *k))
    })?;
    let (ul, dl) = cp.rule_volumes(slot, ebi).ok()?[k as usize];
    Some((k, ul, dl))
}

/// The summed bit rates of the rules on one bearer: (MBR, GBR), UL and DL.
pub(super) fn rates(rules: &[&Bound]) -> ((u64, u64), (u64, u64)) {
    rules
        .iter()
        .fold(((0, 0), (0, 0)), |((mu, md), (gu, gd)), b| {
            let r = &b.rule;
            (
                (mu + r.mbr.0.max(r.gbr.0), md + r.mbr.1.max(r.gbr.1)),
                (gu + r.gbr.0, gd + r.gbr.1),
            )
        })
}

/// `n` packet filter identifiers free in bearer `ebi`'s TFT, with precedences free
/// in the PDN connection (TS 24.008 §10.5.6.12: at most 16 filters; precedences
/// unique).
pub(super) fn free_filters(rules: &[Bound], ebi: u8, n: usize) -> Vec<(u8, u8)> {
    let used: Vec<u8> = rules
        .iter()
        .filter(|b| b.ebi == ebi)
        .flat_map(|b| b.filters.iter().map(|f| f.0))
        .collect();
    let prec = precedences(rules, n);
    (0..16u8).filter(|i| !used.contains(i)).zip(prec).collect()
}

/// `n` evaluation precedences no filter of the session uses.
pub(super) fn precedences(rules: &[Bound], n: usize) -> Vec<u8> {
    let used: Vec<u8> = rules
        .iter()
        .flat_map(|b| b.filters.iter().map(|f| f.1))
        .collect();
    (16..=255u8).filter(|p| !used.contains(p)).take(n).collect()
}

/// The policy state of UE `u`'s new PDN connection (no Gx session yet).
pub(crate) fn open_session_ue(u: &mut Ue, now: Instant, session: PolicySession) {
    let pol = u.policy.get_or_insert_with(Default::default);
    pol.sessions.retain(|s| s.ebi != session.ebi);
    pol.sessions.push(SessionPolicy {
        ebi: session.ebi,
        apn: session.apn.clone(),
        ue_ip: session.ue_ip,
        gx: false,
        rules: Vec::new(),
        monitors: Vec::new(),
        bearers: vec![(session.ebi, now, 0)],
        pending: None,
    });
}
