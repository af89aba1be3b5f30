//! The MME's side of the PCRF (Gx, TS 29.212) as messages, as with the HSS: a PDN
//! connection being set up sends a [`PcrfRequest::Establish`] ([`crate::Output::Pcrf`],
//! a CCR-I) and waits, in a state of its own, for the [`PcrfAnswer`]
//! ([`crate::Input::Pcrf`], the CCA-I) with the same reference; usage reports
//! ([`PcrfRequest::Report`], CCR-U) and the end of the session
//! ([`PcrfRequest::Terminate`], CCR-T) follow. What the PCRF pushes later (a RAR)
//! comes as [`crate::Input::PolicyUpdate`]. The node's proxy serves the requests:
//! [`EmbeddedPcrf`] (rules per APN and per subscriber from the configuration and the
//! management API) inline, or a Diameter Gx client.
//!
//! A PCC rule ([`PccRule`]) is bound to a bearer by its QoS (TS 23.203 §6.1.10:
//! one bearer per QCI and ARP within a PDN connection): rules with the default
//! bearer's QCI and ARP ride on it, others share a dedicated bearer of their QCI and
//! ARP, activated when the first such rule comes and deactivated when the last goes.
//! The rule's flows become the bearer's TFT (for the UE) and the UE's PCEF rules (for
//! the data path's downlink bearer selection, gating and charging counters).

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

// The seam's types (requests, answers, rules, flows) live below the MME and the Gx
// client alike; here under their old paths.
pub use pepc_seams::filter::{FlowDirection, FlowFilter};
pub use pepc_seams::pcrf::{
    PccRule, PcrfAnswer, PcrfFailure, PcrfRequest, PolicyDecision, PolicyError, PolicySession,
    SessionQos, UsageGrant, UsageReport, MAX_FLOWS_PER_RULE, MAX_MONITORING_KEYS,
    MAX_RULES_PER_SESSION,
};

/// How the MME uses the PCRF.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyConfig {
    /// Ask the PCRF at each PDN connection (CCR-I); off: the subscription's QoS
    /// only, no rules, no Gx session.
    pub enabled: bool,
    /// How long the CCA-I may take (the attach waits for it).
    pub timeout: Duration,
    /// Failure-Handling (TS 29.212 §5.3.7) when the PCRF refuses, fails or does not
    /// answer the CCR-I: CONTINUE (true: the PDN connection goes on with the
    /// subscription's QoS) or TERMINATE (false: it is rejected, the attach with
    /// EMM #19 carrying ESM #30).
    pub continue_on_failure: bool,
    /// How often the volumes of sessions under usage monitoring are read.
    pub usage_check: Duration,
    /// Interim usage records of a long session, every this long (`None`: records only
    /// when bearers go).
    pub interim: Option<Duration>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            enabled: true,
            timeout: Duration::from_secs(3),
            continue_on_failure: false,
            usage_check: Duration::from_secs(1),
            interim: Some(Duration::from_secs(3600)),
        }
    }
}

/// Why a usage record was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordCause {
    /// The session goes on (a periodic record).
    Interim,
    /// This dedicated bearer was released (its rules removed, or by the UE).
    BearerReleased,
    /// The PDN connection was released.
    PdnReleased,
    /// A PCC rule was removed from a bearer that stays: the record lists that rule.
    RuleRemoved,
    /// The UE detached, or its context went.
    Detached,
}

impl RecordCause {
    pub fn as_str(&self) -> &'static str {
        match self {
            RecordCause::Interim => "interim",
            RecordCause::BearerReleased => "bearer-released",
            RecordCause::PdnReleased => "pdn-released",
            RecordCause::RuleRemoved => "rule-removed",
            RecordCause::Detached => "detached",
        }
    }
}

/// A PCC rule's share of a bearer's usage record: its rating group and the bytes
/// its flows carried since it was bound (`None`: the bearer had no volume counters
/// left for it, see `pepc_slice::counters::RULE_COUNTERS_PER_BEARER`; its traffic
/// is in the bearer's total).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleUsage {
    pub name: String,
    pub rating_group: Option<u32>,
    pub ul_bytes: Option<u64>,
    pub dl_bytes: Option<u64>,
}

/// A bearer's usage record for offline charging (CDR-like): the node writes it as
/// a JSON line. Volumes are those since the bearer was set up; `duration` too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub imsi: u64,
    pub apn: String,
    pub ue_ip: Ipv4Addr,
    /// The bearer and the default bearer of its PDN connection.
    pub ebi: u8,
    pub default_ebi: u8,
    pub qci: u8,
    /// The PCC rules bound to the bearer, with their volumes.
    pub rules: Vec<RuleUsage>,
    pub usage: pepc_slice::counters::Usage,
    pub duration: Duration,
    pub cause: RecordCause,
    /// 0 for the first record of the bearer, then one more per interim record.
    pub sequence: u32,
}

/// The data path's rule for a flow filter (PCEF, `pepc_slice::pcef`): the seam's
/// [`FlowFilter`] knows nothing of the slice, so the MME adds the conversion.
pub trait PcefRule {
    fn pcef_rule(
        &self,
        id: u32,
        bearer: u8,
        charging_key: Option<u32>,
        counter: Option<u8>,
    ) -> pepc_slice::pcef::Rule;
}

impl PcefRule for FlowFilter {
    fn pcef_rule(
        &self,
        id: u32,
        bearer: u8,
        charging_key: Option<u32>,
        counter: Option<u8>,
    ) -> pepc_slice::pcef::Rule {
        use pepc_slice::pcef::{Action, Direction, PortRange, Prefix, Rule};
        Rule {
            id,
            direction: match self.direction {
                FlowDirection::Downlink => Direction::Downlink,
                FlowDirection::Uplink => Direction::Uplink,
                FlowDirection::Both => Direction::Both,
            },
            remote: Prefix::new(self.remote, self.remote_len),
            remote_ports: PortRange {
                lo: self.remote_ports.0,
                hi: self.remote_ports.1,
            },
            ue_ports: PortRange {
                lo: self.ue_ports.0,
                hi: self.ue_ports.1,
            },
            protocol: self.protocol,
            action: Action::Forward,
            charging_key,
            bearer: Some(bearer),
            counter,
        }
    }
}

/// One policy entry of the embedded PCRF: rules and monitoring for the sessions of an
/// APN, or of one subscriber (whose entry, when it exists, adds to the APN's).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyEntry {
    pub rules: Vec<PccRule>,
    /// Monitoring keys with the volume granted each time.
    pub monitoring: Vec<UsageGrant>,
    /// Default bearer QCI/ARP and APN-AMBR overrides.
    pub default_qos: Option<(u8, u8)>,
    pub ambr: Option<(u64, u64)>,
}

/// The embedded PCRF's policy: entries per APN (lower case) and per IMSI.
#[derive(Debug, Clone, Default)]
pub struct PolicyTable {
    pub by_apn: HashMap<String, PolicyEntry>,
    pub by_imsi: HashMap<u64, PolicyEntry>,
}

impl PolicyTable {
    /// The decision for a new session: the APN's entry, then the subscriber's
    /// (its rules replace the APN's of the same name; its overrides win).
    pub fn decide(&self, imsi: u64, apn: &str) -> PolicyDecision {
        let mut d = PolicyDecision::default();
        for e in [
            self.by_apn.get(&apn.to_ascii_lowercase()),
            self.by_imsi.get(&imsi),
        ]
        .into_iter()
        .flatten()
        {
            for r in &e.rules {
                d.install.retain(|x| x.name != r.name);
                d.install.push(r.clone());
            }
            for g in &e.monitoring {
                d.monitoring.retain(|x| x.key != g.key);
                d.monitoring.push(g.clone());
            }
            d.default_qos = e.default_qos.or(d.default_qos);
            d.ambr = e.ambr.or(d.ambr);
        }
        d.install.truncate(MAX_RULES_PER_SESSION);
        d.monitoring.truncate(MAX_MONITORING_KEYS);
        d
    }

    /// Every rule and grant of an entry is valid.
    pub fn validate(e: &PolicyEntry) -> Result<(), PolicyError> {
        if e.rules.len() > MAX_RULES_PER_SESSION || e.monitoring.len() > MAX_MONITORING_KEYS {
            return Err(PolicyError::BadRule(
                String::new(),
                format!(
                    "at most {MAX_RULES_PER_SESSION} rules and {MAX_MONITORING_KEYS} monitoring keys"
                ),
            ));
        }
        e.rules.iter().try_for_each(PccRule::validate)
    }
}

/// The embedded PCRF: answers from a [`PolicyTable`] shared with the management API
/// (which changes it while the node runs). A usage report is granted the entry's
/// volume again (no quota is kept: online charging is not ours).
#[derive(Debug, Clone, Default)]
pub struct EmbeddedPcrf {
    pub table: Arc<RwLock<PolicyTable>>,
}

impl EmbeddedPcrf {
    pub fn new(table: PolicyTable) -> EmbeddedPcrf {
        EmbeddedPcrf {
            table: Arc::new(RwLock::new(table)),
        }
    }

    /// The answer to `req` (`None` for a Terminate).
    pub fn answer(&self, req: PcrfRequest) -> Option<PcrfAnswer> {
        let (r, s, report) = match req {
            PcrfRequest::Terminate { .. } => return None,
            PcrfRequest::Establish { r, session, .. } => (r, session, None),
            PcrfRequest::Report { r, session, usage } => (r, session, Some(usage)),
        };
        let Ok(t) = self.table.read() else {
            return Some(PcrfAnswer {
                r,
                imsi: s.imsi,
                ebi: s.ebi,
                result: Err(PcrfFailure::Unavailable("policy table poisoned".into())),
            });
        };
        let full = t.decide(s.imsi, &s.apn);
        let result = match report {
            None => full,
            // Grants again for the keys reported; nothing else changes.
            Some(usage) => PolicyDecision {
                monitoring: full
                    .monitoring
                    .into_iter()
                    .filter(|g| usage.iter().any(|u| u.key == g.key))
                    .collect(),
                ..PolicyDecision::default()
            },
        };
        Some(PcrfAnswer {
            r,
            imsi: s.imsi,
            ebi: s.ebi,
            result: Ok(result),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hss::HssRef;

    fn rule(name: &str, qci: u8) -> PccRule {
        PccRule {
            name: name.into(),
            precedence: 10,
            qci,
            arp_priority: 2,
            mbr: (128_000, 128_000),
            gbr: (64_000, 64_000),
            rating_group: Some(7),
            monitoring_key: None,
            flows: vec![FlowFilter::parse(
                "permit out 17 from any to assigned 5000",
                FlowDirection::Both,
            )
            .unwrap()],
        }
    }

    #[test]
    fn flows_become_pcef_rules() {
        let f = FlowFilter::parse(
            "permit out 17 from 10.45.0.0/16 5060 to assigned 4000-4999",
            FlowDirection::Uplink,
        )
        .unwrap();
        let r = f.pcef_rule(3, 6, Some(7), Some(1));
        assert_eq!(
            (r.id, r.bearer, r.charging_key, r.counter),
            (3, Some(6), Some(7), Some(1))
        );
        assert_eq!(r.direction, pepc_slice::pcef::Direction::Uplink);
        assert_eq!((r.remote_ports.lo, r.remote_ports.hi), (5060, 5060));
        assert_eq!((r.ue_ports.lo, r.ue_ports.hi), (4000, 4999));
        assert_eq!(r.protocol, Some(17));
    }

    #[test]
    fn embedded_pcrf_merges_apn_and_subscriber_entries() {
        let mut t = PolicyTable::default();
        t.by_apn.insert(
            "ims".into(),
            PolicyEntry {
                rules: vec![rule("voice", 1), rule("video", 2)],
                monitoring: vec![UsageGrant {
                    key: "mk".into(),
                    octets: 1000,
                }],
                ..Default::default()
            },
        );
        let mut mine = rule("voice", 1);
        mine.arp_priority = 1;
        t.by_imsi.insert(
            7,
            PolicyEntry {
                rules: vec![mine.clone()],
                ambr: Some((1, 2)),
                ..Default::default()
            },
        );
        let p = EmbeddedPcrf::new(t);
        let s = PolicySession {
            imsi: 7,
            apn: "IMS".into(),
            ebi: 5,
            ue_ip: Ipv4Addr::new(10, 0, 0, 1),
        };
        let r = HssRef {
            mme_ue_id: 1,
            seq: 1,
        };
        let q = SessionQos {
            qci: 9,
            arp_priority: 8,
            ambr_ul: 0,
            ambr_dl: 0,
        };
        let a = p
            .answer(PcrfRequest::Establish {
                r,
                session: s.clone(),
                subscribed: q,
            })
            .unwrap();
        let d = a.result.unwrap();
        assert_eq!(d.install.len(), 2);
        assert!(d.install.contains(&mine));
        assert_eq!(d.ambr, Some((1, 2)));
        let a = p
            .answer(PcrfRequest::Report {
                r,
                session: s.clone(),
                usage: vec![UsageReport {
                    key: "mk".into(),
                    ul_bytes: 600,
                    dl_bytes: 500,
                }],
            })
            .unwrap();
        let d = a.result.unwrap();
        assert!(d.install.is_empty());
        assert_eq!(d.monitoring[0].octets, 1000);
        assert!(p
            .answer(PcrfRequest::Terminate {
                session: s,
                usage: vec![]
            })
            .is_none());
    }
}
