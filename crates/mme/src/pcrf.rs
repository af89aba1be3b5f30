//! The MME's side of the PCRF (Gx, TS 29.212) as messages, as with the HSS: a PDN
//! connection being set up sends a [`PcrfRequest::Establish`] ([`crate::Output::Pcrf`],
//! a CCR-I) and waits, in a state of its own, for the [`PcrfAnswer`]
//! ([`crate::Input::Pcrf`], the CCA-I) with the same reference; usage reports
//! ([`PcrfRequest::Report`], CCR-U) and the end of the session
//! ([`PcrfRequest::Terminate`], CCR-T) follow. What the PCRF pushes later (a RAR)
//! comes as [`crate::Input::PolicyUpdate`]. The node's proxy serves the requests:
//! the embedded PCRF (`pepc-pcrf`: rules per APN and per subscriber from the
//! configuration and the management API) inline, or a Diameter Gx client.
//!
//! A PCC rule ([`PccRule`]) is bound to a bearer by its QoS (TS 23.203 §6.1.10:
//! one bearer per QCI and ARP within a PDN connection): rules with the default
//! bearer's QCI and ARP ride on it, others share a dedicated bearer of their QCI and
//! ARP, activated when the first such rule comes and deactivated when the last goes.
//! The rule's flows become the bearer's TFT (for the UE) and the UE's PCEF rules (for
//! the data path's downlink bearer selection, gating and charging counters).

use std::net::Ipv4Addr;
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
