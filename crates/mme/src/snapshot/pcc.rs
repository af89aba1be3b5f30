//! The PCC section of a UE snapshot: the UE's policy and charging state, so a restored
//! or moved UE keeps its PCC rules (and its dedicated bearers their bindings), its usage
//! monitoring grants and its charging figures, instead of falling back to the slice's
//! default rules. With the bearers' counters in the slice section, usage records and
//! reports come out as if the UE had never moved.
//!
//! ## PCC section, version 2 (container tag 0x81)
//! LEB128 integers (`v`), strings and byte strings length-prefixed (`v`):
//! ```text
//! version u8 (1) | [interim due: remaining µs v] (flag u8 0/1)
//! n_sessions v, each:
//!   ebi u8 | apn s | ue_ip 4 | gx u8 (0/1)
//!   n_rules v, each: rule (name s | precedence v | qci u8 | arp u8 | mbr v v | gbr v v
//!     | [rating group v] | [monitoring key s] | n_flows v, each: direction u8
//!     | [protocol u8] | remote 4 | remote_len u8 | remote ports v v | UE ports v v)
//!     | bearer ebi u8 | n_filters v, each: id u8 | precedence u8
//!     | [counter: pair u8 | UL bytes counted v | DL bytes counted v]
//!   n_monitors v, each: key s | threshold v | base v | reported u8
//!   n_bearers v, each: ebi u8 | age ns v | next record sequence v
//!   [pending decision]
//! ```
//! Version 1 carried the bearers' ages in µs (still read). In ns, a UE moved at an
//! instant reports its bearers' durations to the nanosecond, as if it had not moved.
//!
//! A rule's counter carries the bytes its pair counted since the rule was bound (not
//! the pair's raw value): the pair of the restoring slice starts wherever it is, and
//! the rule's base is set so that the count goes on from the carried figure.

use super::SnapshotError;
use crate::esm::policy::{Bound, Monitor, SessionPolicy, UePolicy};
use crate::mme::Mme;
use crate::record::codec::{get_decision, get_rule, put_decision, put_rule, R, W};
use crate::ControlPlane;
use std::time::{Duration, Instant};

const VERSION: u8 = 2;

/// Bounds of what a section may hold (the MME's own: `MAX_RULES_PER_SESSION` rules,
/// `MAX_MONITORING_KEYS` keys, a UE's PDN connections and bearers).
const MAX_SESSIONS: usize = 8;
const MAX_RULES: usize = 64;
const MAX_MONITORS: usize = 16;
const MAX_BEARERS: usize = 16;
const MAX_FILTERS: usize = 16;

impl From<crate::record::RecordError> for SnapshotError {
    fn from(_: crate::record::RecordError) -> Self {
        SnapshotError::Invalid("PCC section")
    }
}

/// Write `p`, the policy state of the UE in slice slot `slot`, as of `now`.
pub(crate) fn write(
    p: &UePolicy,
    interim_due: Option<Instant>,
    cp: &ControlPlane,
    slot: Option<u32>,
    now: Instant,
    out: &mut Vec<u8>,
) {
    let mut w = W(out);
    w.u8(VERSION);
    match interim_due {
        Some(t) => {
            w.u8(1);
            w.uv(super::section::remaining_us(t, now));
        }
        None => w.u8(0),
    }
    w.uv(p.sessions.len() as u64);
    for s in &p.sessions {
        let SessionPolicy {
            ebi,
            apn,
            ue_ip,
            gx,
            rules,
            monitors,
            bearers,
            pending,
        } = s;
        w.u8(*ebi);
        w.str(apn);
        w.ip(*ue_ip);
        w.bool(*gx);
        w.uv(rules.len() as u64);
        for b in rules {
            let Bound {
                rule,
                ebi,
                filters,
                counter,
            } = b;
            put_rule(&mut w, rule);
            w.u8(*ebi);
            w.uv(filters.len() as u64);
            for (id, prec) in filters {
                w.u8(*id);
                w.u8(*prec);
            }
            // What the pair counted for this rule so far.
            let counted = counter.map(|(k, ub, db)| {
                let now = slot
                    .and_then(|s| cp.rule_volumes(s, *ebi).ok())
                    .map(|v| v[k as usize])
                    .unwrap_or((ub, db));
                (k, now.0.wrapping_sub(ub), now.1.wrapping_sub(db))
            });
            match counted {
                Some((k, ul, dl)) => {
                    w.u8(1);
                    w.u8(k);
                    w.uv(ul);
                    w.uv(dl);
                }
                None => w.u8(0),
            }
        }
        w.uv(monitors.len() as u64);
        for m in monitors {
            let Monitor {
                key,
                threshold,
                base,
                reported,
            } = m;
            w.str(key);
            w.uv(*threshold);
            w.uv(*base);
            w.bool(*reported);
        }
        w.uv(bearers.len() as u64);
        for (e, since, seq) in bearers {
            w.u8(*e);
            w.uv(now.saturating_duration_since(*since).as_nanos() as u64);
            w.uv(u64::from(*seq));
        }
        match pending {
            Some(d) => {
                w.u8(1);
                put_decision(&mut w, d);
            }
            None => w.u8(0),
        }
    }
}

/// A PCC section read back: the policy state with each rule's counted bytes (its
/// counter's base is set against the restoring slice's pairs by [`Mme::restore_pcc`]).
pub(crate) struct Decoded {
    policy: UePolicy,
    interim_in: Option<Duration>,
}

fn bounded(r: &mut R<'_>, max: usize, what: &'static str) -> Result<usize, SnapshotError> {
    let n = usize::try_from(r.uv()?).map_err(|_| SnapshotError::Invalid(what))?;
    if n > max {
        return Err(SnapshotError::Invalid(what));
    }
    Ok(n)
}

pub(crate) fn read(bytes: &[u8], now: Instant) -> Result<Decoded, SnapshotError> {
    let mut r = R::new(bytes);
    let v = r.u8()?;
    if v != VERSION && v != 1 {
        return Err(SnapshotError::UnsupportedVersion(v));
    }
    let interim_in = if r.bool()? {
        Some(Duration::from_micros(r.uv()?))
    } else {
        None
    };
    let n = bounded(&mut r, MAX_SESSIONS, "PCC sessions")?;
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        let ebi = r.u8()?;
        let apn = r.str()?;
        let ue_ip = r.ip()?;
        let gx = r.bool()?;
        let nr = bounded(&mut r, MAX_RULES, "PCC rules")?;
        let mut rules = Vec::with_capacity(nr);
        for _ in 0..nr {
            let rule = get_rule(&mut r)?;
            let bearer = r.u8()?;
            let nf = bounded(&mut r, MAX_FILTERS, "packet filters")?;
            let filters = (0..nf)
                .map(|_| Ok((r.u8()?, r.u8()?)))
                .collect::<Result<Vec<_>, SnapshotError>>()?;
            // The counted bytes stand in the base until the restoring slice's pair
            // is known.
            let counter = if r.bool()? {
                Some((r.u8()?, r.uv()?, r.uv()?))
            } else {
                None
            };
            rules.push(Bound {
                rule,
                ebi: bearer,
                filters,
                counter,
            });
        }
        let nm = bounded(&mut r, MAX_MONITORS, "monitoring keys")?;
        let mut monitors = Vec::with_capacity(nm);
        for _ in 0..nm {
            monitors.push(Monitor {
                key: r.str()?,
                threshold: r.uv()?,
                base: r.uv()?,
                reported: r.bool()?,
            });
        }
        let nb = bounded(&mut r, MAX_BEARERS, "bearers")?;
        let mut bearers = Vec::with_capacity(nb);
        for _ in 0..nb {
            let e = r.u8()?;
            let age = match v {
                1 => Duration::from_micros(r.uv()?),
                _ => Duration::from_nanos(r.uv()?),
            };
            let seq = r.u32()?;
            bearers.push((e, now.checked_sub(age).unwrap_or(now), seq));
        }
        let pending = if r.bool()? {
            Some(get_decision(&mut r)?)
        } else {
            None
        };
        sessions.push(SessionPolicy {
            ebi,
            apn,
            ue_ip,
            gx,
            rules,
            monitors,
            bearers,
            pending,
        });
    }
    if !r.done() {
        return Err(SnapshotError::Trailing(r.b.len()));
    }
    Ok(Decoded {
        policy: UePolicy {
            sessions,
            rule_set: None,
            interim_due: None,
        },
        interim_in,
    })
}

impl Mme {
    /// The PCC state `d` into restored UE `id`: each rule's counter based on the pair
    /// of this slice so the counting goes on from the carried bytes, the UE's PCEF rule
    /// set acquired (shared by content), monitoring and interim records scheduled.
    pub(crate) fn restore_pcc(&mut self, cp: &mut ControlPlane, id: u32, d: Decoded, now: Instant) {
        let Decoded {
            mut policy,
            interim_in,
        } = d;
        let slot = self.ue(cp, id).and_then(|u| u.slot);
        for s in &mut policy.sessions {
            for b in &mut s.rules {
                if let Some((k, ul, dl)) = b.counter {
                    let pair = slot
                        .and_then(|sl| cp.rule_volumes(sl, b.ebi).ok())
                        .map(|v| v[usize::from(k).min(v.len() - 1)]);
                    b.counter = pair.map(|(pu, pd)| (k, pu.wrapping_sub(ul), pd.wrapping_sub(dl)));
                }
            }
        }
        let monitored = policy.sessions.iter().any(|s| !s.monitors.is_empty());
        let any = !policy.sessions.is_empty();
        let interim_at = interim_in.map(|d| now + d);
        policy.interim_due = interim_at;
        if let Some(u) = self.ue_mut(cp, id) {
            u.policy = Some(Box::new(policy));
        }
        self.refresh_rule_set(cp, id);
        if monitored && self.monitored.insert(id) {
            self.usage_checks
                .push_back((now + self.cfg.policy.usage_check, id));
        }
        if let (true, Some(at)) = (any, interim_at) {
            // In time order: the queue is read from its front.
            let i = self.interims.partition_point(|(t, _)| *t <= at);
            self.interims.insert(i, (at, id));
        }
    }
}
