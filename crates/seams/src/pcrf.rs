//! The PCRF side of the seam (Gx, TS 29.212) as messages, as with the HSS: a PDN
//! connection being set up sends a [`PcrfRequest::Establish`] (a CCR-I) and waits for
//! the [`PcrfAnswer`] (the CCA-I) with the same reference; usage reports
//! ([`PcrfRequest::Report`], CCR-U) and the end of the session
//! ([`PcrfRequest::Terminate`], CCR-T) follow. A decision ([`PolicyDecision`]) carries
//! PCC rules ([`PccRule`]) whose flows are [`FlowFilter`]s.

// A rule's flows, here too: Gx's Flow-Information is part of a rule.
pub use crate::filter::{FlowDirection, FlowFilter};
use crate::hss::HssRef;
use std::net::Ipv4Addr;

/// The PDN connection a Gx session is for: a UE's PDN connection is known by its
/// default bearer (`ebi`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PolicySession {
    pub imsi: u64,
    pub apn: String,
    pub ebi: u8,
    pub ue_ip: Ipv4Addr,
}

/// The QoS the subscription gives the default bearer and the APN-AMBR (bit/s), sent
/// in the CCR-I (the PCRF may keep or change them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionQos {
    pub qci: u8,
    pub arp_priority: u8,
    pub ambr_ul: u64,
    pub ambr_dl: u64,
}

/// Volume used under a monitoring key since its last report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageReport {
    pub key: String,
    pub ul_bytes: u64,
    pub dl_bytes: u64,
}

/// A volume granted under a monitoring key (Usage-Monitoring-Information with
/// Granted-Service-Unit CC-Total-Octets, session level): reached, it is reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageGrant {
    pub key: String,
    pub octets: u64,
}

/// A PCC rule (Charging-Rule-Definition, TS 29.212 §5.3.4): what traffic it
/// matches, the QoS of the bearer that carries it and how it is charged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PccRule {
    pub name: String,
    /// Lower first (Precedence).
    pub precedence: u32,
    pub qci: u8,
    pub arp_priority: u8,
    /// Bit/s, UL and DL; GBR QCIs (1-4) need a guaranteed rate.
    pub mbr: (u64, u64),
    pub gbr: (u64, u64),
    /// Rating-Group: the rule's traffic is counted under it.
    pub rating_group: Option<u32>,
    pub monitoring_key: Option<String>,
    pub flows: Vec<FlowFilter>,
}

/// Bounds on what one PDN connection holds (a PCRF cannot grow our state at will).
pub const MAX_RULES_PER_SESSION: usize = 16;
pub const MAX_FLOWS_PER_RULE: usize = 8;
pub const MAX_MONITORING_KEYS: usize = 8;

impl PccRule {
    /// Checks a rule before it is taken: a name, a QCI of TS 23.203 Table 6.1.7, GBR
    /// rates for GBR QCIs, at least one flow, bounds.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let bad = |w: String| Err(PolicyError::BadRule(self.name.clone(), w));
        if self.name.is_empty() || self.name.len() > 64 {
            return bad("a name of 1 to 64 characters is needed".into());
        }
        if !(1..=9).contains(&self.qci) {
            return bad(format!("QCI {} is not a standardised one (1-9)", self.qci));
        }
        if !(1..=15).contains(&self.arp_priority) {
            return bad(format!("ARP priority {} is not 1-15", self.arp_priority));
        }
        if self.qci <= 4 && self.gbr == (0, 0) {
            return bad(format!(
                "QCI {} is a GBR QCI: a guaranteed rate is needed",
                self.qci
            ));
        }
        if self.flows.is_empty() || self.flows.len() > MAX_FLOWS_PER_RULE {
            return bad(format!("1 to {MAX_FLOWS_PER_RULE} flows are needed"));
        }
        Ok(())
    }

    /// The bearer QoS key the rule binds by (TS 23.203 §6.1.10).
    pub fn binding(&self) -> (u8, u8) {
        (self.qci, self.arp_priority)
    }
}

/// What the PCRF decided for a session: the CCA's (or RAR's) QoS and rules.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyDecision {
    /// Default-EPS-Bearer-QoS: QCI and ARP priority of the default bearer.
    pub default_qos: Option<(u8, u8)>,
    /// APN-AMBR (bit/s, UL and DL).
    pub ambr: Option<(u64, u64)>,
    /// Charging-Rule-Install.
    pub install: Vec<PccRule>,
    /// Charging-Rule-Remove, by name.
    pub remove: Vec<String>,
    /// Usage monitoring grants (a key granted again replaces its threshold).
    pub monitoring: Vec<UsageGrant>,
}

/// Why the PCRF did not give a decision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PcrfFailure {
    /// The PCRF refused the session (its Result-Code or Experimental-Result-Code).
    #[error("PCRF refused the session (result {0})")]
    Rejected(u32),
    /// It could not be reached, or its answer could not be read.
    #[error("PCRF unavailable: {0}")]
    Unavailable(String),
    /// No answer in time.
    #[error("no PCRF answer in time")]
    Timeout,
}

/// What is wrong with a rule or flow (configuration, API, a PCRF's message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("bad flow description {0}")]
    BadFlow(String),
    #[error("PCC rule {0:?}: {1}")]
    BadRule(String, String),
}

/// A request of the MME to the PCRF. Never contains key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PcrfRequest {
    /// CCR-I: a PDN connection is being set up; the answer says its policy.
    Establish {
        r: HssRef,
        session: PolicySession,
        subscribed: SessionQos,
    },
    /// CCR-U: volumes reached their grant (the answer may grant more). No answer is
    /// awaited by a procedure (`r` names the UE for the routing of the answer).
    Report {
        r: HssRef,
        session: PolicySession,
        usage: Vec<UsageReport>,
    },
    /// CCR-T: the PDN connection is gone, with the last usage. Not answered.
    Terminate {
        session: PolicySession,
        usage: Vec<UsageReport>,
    },
}

impl PcrfRequest {
    pub fn session(&self) -> &PolicySession {
        match self {
            PcrfRequest::Establish { session, .. }
            | PcrfRequest::Report { session, .. }
            | PcrfRequest::Terminate { session, .. } => session,
        }
    }
}

/// The answer to the request `r` (an Establish's or a Report's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcrfAnswer {
    pub r: HssRef,
    /// The session answered (the default bearer of `imsi`'s PDN connection).
    pub imsi: u64,
    pub ebi: u8,
    pub result: Result<PolicyDecision, PcrfFailure>,
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn rules_are_checked() {
        assert!(rule("voice", 1).validate().is_ok());
        assert!(rule("", 1).validate().is_err());
        assert!(rule("x", 10).validate().is_err());
        let mut r = rule("x", 1);
        r.gbr = (0, 0);
        assert!(r.validate().is_err());
        r.qci = 9;
        assert!(r.validate().is_ok());
        r.flows.clear();
        assert!(r.validate().is_err());
    }
}
