//! The embedded PCRF (Gx, TS 29.212, without the Diameter): the operator's policy
//! table (entries per APN and per subscriber, from the configuration and the
//! management API) answering the MME's Gx-shaped requests of `pepc-seams`. The node's
//! proxy serves a slice's requests with it inline (or with a Diameter Gx client).
#![forbid(unsafe_code)]

use pepc_seams::pcrf::{
    PccRule, PcrfAnswer, PcrfFailure, PcrfRequest, PolicyDecision, PolicyError, UsageGrant,
    MAX_MONITORING_KEYS, MAX_RULES_PER_SESSION,
};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

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
    use pepc_seams::filter::{FlowDirection, FlowFilter};
    use pepc_seams::hss::HssRef;
    use pepc_seams::pcrf::{PolicySession, SessionQos, UsageReport};
    use std::net::Ipv4Addr;

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
