//! Usage of a UE's PDN connections: usage monitoring (CCR-U when a grant's volume is
//! used), interim and final usage records (offline charging) with the data path's
//! volumes per bearer and per rule, and the CCR-T when a session ends.

use super::policy::*;
use crate::pcrf::*;
use crate::prelude::*;

impl Mme {
    /// Sessions under usage monitoring whose volume passed a grant: CCR-U.
    pub(crate) fn check_usage(&mut self, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        let now = self.now;
        while let Some(&(at, id)) = self.usage_checks.front() {
            if at > now {
                break;
            }
            self.usage_checks.pop_front();
            let sessions: Vec<u8> = self
                .ue(cp, id)
                .and_then(|u| u.policy.as_ref())
                .map(|p| {
                    p.sessions
                        .iter()
                        .filter(|s| !s.monitors.is_empty())
                        .map(|s| s.ebi)
                        .collect()
                })
                .unwrap_or_default();
            if sessions.is_empty() {
                self.monitored.remove(&id);
                continue;
            }
            for ebi in sessions {
                let v = self.session_volume(cp, id, ebi);
                let due = self.session_of(cp, id, ebi, |s| {
                    let mut usage = Vec::new();
                    for m in s.monitors.iter_mut().filter(|m| !m.reported) {
                        if v.saturating_sub(m.base) >= m.threshold {
                            m.reported = true;
                            usage.push(UsageReport {
                                key: m.key.clone(),
                                // Session level: the volume is not split by direction.
                                ul_bytes: 0,
                                dl_bytes: v - m.base,
                            });
                        }
                    }
                    (!usage.is_empty()).then(|| {
                        (
                            PolicySession {
                                imsi: 0,
                                apn: s.apn.clone(),
                                ebi: s.ebi,
                                ue_ip: s.ue_ip,
                            },
                            usage,
                        )
                    })
                });
                if let (Some(Some((mut session, usage))), Some(imsi)) =
                    (due, self.ue(cp, id).and_then(|u| u.imsi))
                {
                    session.imsi = imsi;
                    self.stats.usage_reports += 1;
                    out.push(Output::Pcrf(PcrfRequest::Report {
                        r: crate::hss::HssRef {
                            mme_ue_id: id,
                            seq: 0,
                        },
                        session,
                        usage,
                    }));
                }
            }
            self.usage_checks
                .push_back((now + self.cfg.policy.usage_check, id));
        }
    }

    /// Interim usage records of long sessions.
    pub(crate) fn interim_records(&mut self, now: Instant, cp: &mut ControlPlane) {
        let Some(every) = self.cfg.policy.interim else {
            return;
        };
        while let Some(&(at, id)) = self.interims.front() {
            if at > now {
                break;
            }
            self.interims.pop_front();
            let ebis: Vec<u8> = self
                .ue(cp, id)
                .and_then(|u| u.policy.as_ref())
                .map(|p| p.sessions.iter().map(|s| s.ebi).collect())
                .unwrap_or_default();
            if ebis.is_empty() {
                continue;
            }
            for pdn in ebis {
                let bearers: Vec<u8> = self
                    .session_of(cp, id, pdn, |s| s.bearers.iter().map(|b| b.0).collect())
                    .unwrap_or_default();
                for b in bearers {
                    self.record(now, cp, id, pdn, b, RecordCause::Interim);
                }
            }
            self.interims.push_back((now + every, id));
            self.set_interim_due(cp, id, now + every);
        }
    }

    fn set_interim_due(&mut self, cp: &mut ControlPlane, id: u32, at: Instant) {
        if let Some(u) = self.ue_mut(cp, id) {
            set_interim_due_ue(u, at);
        }
    }

    /// A usage record of bearer `ebi` of the PDN connection of `pdn` (kept in
    /// `self.records` until the input's outputs are flushed). The bearer must still
    /// be in the slice (its counters are read).
    pub(crate) fn record(
        &mut self,
        now: Instant,
        cp: &mut ControlPlane,
        id: u32,
        pdn: u8,
        ebi: u8,
        cause: RecordCause,
    ) {
        let Some(u) = self.ue(cp, id) else { return };
        let (Some(slot), Some(imsi)) = (u.slot, u.imsi) else {
            return;
        };
        let Ok(usage) = cp.usage(slot, ebi) else {
            return;
        };
        let qci = cp.ue(slot).and_then(|c| c.bearer(ebi)).map_or(0, |b| b.qci);
        let vols = cp.rule_volumes(slot, ebi).ok();
        let rec = self.session_of(cp, id, pdn, |s| {
            let b = s.bearers.iter_mut().find(|b| b.0 == ebi)?;
            let seq = b.2;
            b.2 += 1;
            Some(UsageRecord {
                imsi,
                apn: s.apn.clone(),
                ue_ip: s.ue_ip,
                ebi,
                default_ebi: pdn,
                qci,
                rules: s
                    .rules
                    .iter()
                    .filter(|r| r.ebi == ebi)
                    .map(|r| rule_usage(r, vols.as_ref()))
                    .collect(),
                usage,
                duration: now.saturating_duration_since(b.1),
                cause,
                sequence: seq,
            })
        });
        if let Some(Some(r)) = rec {
            self.stats.usage_records += 1;
            self.records.push(Output::UsageRecord(Box::new(r)));
        }
    }

    /// The PDN connection of default bearer `pdn` goes (PDN disconnect, detach, the
    /// context's end): records of its bearers, CCR-T if the PCRF held a session.
    /// Call while its bearers are still in the slice.
    pub(crate) fn end_session(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        pdn: u8,
        cause: RecordCause,
    ) {
        let now = self.now;
        let bearers: Vec<u8> = self
            .session_of(cp, id, pdn, |s| s.bearers.iter().map(|b| b.0).collect())
            .unwrap_or_default();
        for b in bearers {
            self.record(now, cp, id, pdn, b, cause);
        }
        let imsi = self.ue(cp, id).and_then(|u| u.imsi);
        let Some(u) = self.ue_mut(cp, id) else { return };
        let Some(p) = u.policy.as_mut() else { return };
        let Some(i) = p.sessions.iter().position(|s| s.ebi == pdn) else {
            return;
        };
        let s = p.sessions.remove(i);
        if let (true, Some(imsi)) = (s.gx, imsi) {
            self.stats.pcrf_terminations += 1;
            self.records.push(Output::Pcrf(PcrfRequest::Terminate {
                session: PolicySession {
                    imsi,
                    apn: s.apn,
                    ebi: s.ebi,
                    ue_ip: s.ue_ip,
                },
                usage: vec![],
            }));
        }
        self.refresh_rule_set(cp, id);
    }

    /// Every session of UE `id` ends (its session or context goes).
    pub(crate) fn end_sessions(&mut self, cp: &mut ControlPlane, id: u32, cause: RecordCause) {
        let pdns: Vec<u8> = self
            .ue(cp, id)
            .and_then(|u| u.policy.as_ref())
            .map(|p| p.sessions.iter().map(|s| s.ebi).collect())
            .unwrap_or_default();
        for pdn in pdns {
            self.end_session(cp, id, pdn, cause);
        }
        if let Some(set) = self
            .ue_mut(cp, id)
            .and_then(|u| u.policy.take())
            .and_then(|p| p.rule_set)
        {
            self.rule_sets.release(set);
        }
    }

    /// Dedicated bearer `ebi` goes: its record, and its rules leave the session.
    pub(crate) fn end_bearer(&mut self, cp: &mut ControlPlane, id: u32, ebi: u8) {
        let now = self.now;
        let Some(pdn) = self.ue(cp, id).and_then(|u| {
            u.policy
                .as_ref()?
                .sessions
                .iter()
                .find(|s| s.bearers.iter().any(|b| b.0 == ebi))
                .map(|s| s.ebi)
        }) else {
            return;
        };
        self.record(now, cp, id, pdn, ebi, RecordCause::BearerReleased);
        let had_rules = self
            .session_of(cp, id, pdn, |s| {
                s.bearers.retain(|b| b.0 != ebi);
                let n = s.rules.len();
                s.rules.retain(|r| r.ebi != ebi);
                n != s.rules.len()
            })
            .unwrap_or(false);
        if had_rules {
            self.refresh_rule_set(cp, id);
        }
    }

    /// A UE-requested dedicated bearer joins its PDN connection's records.
    pub(crate) fn note_bearer(&mut self, cp: &mut ControlPlane, id: u32, pdn: u8, ebi: u8) {
        let now = self.now;
        self.session_of(cp, id, pdn, |s| {
            if !s.bearers.iter().any(|b| b.0 == ebi) {
                s.bearers.push((ebi, now, 0));
            }
        });
    }

    /// A UE's first session: its interim records start.
    pub(crate) fn schedule_interim(&mut self, u: &mut Ue, now: Instant, id: u32) {
        if let Some(every) = self.cfg.policy.interim {
            push_due(&mut self.interims, &self.index, now + every, id);
            set_interim_due_ue(u, now + every);
        }
    }

    /// The earliest policy timer (usage checks, interim records).
    pub(crate) fn policy_timeout(&self) -> Option<Instant> {
        let a = self.usage_checks.front().map(|x| x.0);
        let b = self
            .cfg
            .policy
            .interim
            .and(self.interims.front().map(|x| x.0));
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

impl Mme {
    /// The usage record of a rule leaving a bearer that stays (`RuleRemoved`): the
    /// bearer's figures, and that rule alone with its volume.
    pub(super) fn rule_record(
        &mut self,
        now: Instant,
        cp: &mut ControlPlane,
        id: u32,
        pdn: u8,
        b: &Bound,
    ) {
        if b.counter.is_none() {
            return;
        }
        let before = self.records.len();
        self.record(now, cp, id, pdn, b.ebi, RecordCause::RuleRemoved);
        let vols = self
            .ue(cp, id)
            .and_then(|u| u.slot)
            .and_then(|s| cp.rule_volumes(s, b.ebi).ok());
        if let Some(Output::UsageRecord(r)) = self.records.get_mut(before) {
            r.rules = vec![rule_usage(b, vols.as_ref())];
        }
    }
}

pub(super) const RULE_PAIRS: usize = pepc_slice::counters::RULE_COUNTERS_PER_BEARER;

/// A bound rule's volumes from its bearer's per-rule counters.
pub(super) fn rule_usage(b: &Bound, vols: Option<&[(u64, u64); RULE_PAIRS]>) -> RuleUsage {
    let v = b.counter.and_then(|(k, ub, db)| {
        vols.map(|v| v[k as usize])
            .map(|(u, d)| (u.wrapping_sub(ub), d.wrapping_sub(db)))
    });
    RuleUsage {
        name: b.rule.name.clone(),
        rating_group: b.rule.rating_group,
        ul_bytes: v.map(|v| v.0),
        dl_bytes: v.map(|v| v.1),
    }
}

/// Queue `(at, id)` on a policy timer queue (interim records, usage checks). The
/// entry of a context that goes stays queued until due (an hour for interim records)
/// and is skipped then, so with attach churn they came one per attach and the queue
/// grew with the attaches since start, its housekeeping (`Mme::compact`) run only by
/// a UE timer expiring, which a storm whose procedures all complete never has. Here
/// they go instead of the queue growing: once it is full and its entries outnumber
/// twice the contexts, those of contexts gone leave it; room for as many again as
/// stay, so a pass comes after at least as many pushes as it kept (amortized O(1)
/// per push) and the capacity stays within about four times the contexts at their
/// peak.
pub(crate) fn push_due(
    q: &mut VecDeque<(Instant, u32)>,
    index: &crate::mme::index::UeIndex,
    at: Instant,
    id: u32,
) {
    if q.len() == q.capacity() && q.len() > 2 * index.len() + 1024 {
        q.retain(|&(_, i)| index.contains(i));
        q.reserve(q.len());
    }
    q.push_back((at, id));
}

impl Mme {
    /// Interim usage records queued, and the queue's capacity (for tests and the
    /// memory benchmark: the queue is bounded).
    pub fn interims_queued(&self) -> (usize, usize) {
        (self.interims.len(), self.interims.capacity())
    }
}

/// The due time of UE `u`'s next interim record.
pub(super) fn set_interim_due_ue(u: &mut Ue, at: Instant) {
    // Scheduled with the UE's first session, before its policy state exists.
    u.policy.get_or_insert_with(Default::default).interim_due = Some(at);
}
