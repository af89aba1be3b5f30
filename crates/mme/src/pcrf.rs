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

use crate::hss::HssRef;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

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

/// Which way a flow filter applies (Flow-Direction, TS 29.212 §5.3.65).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowDirection {
    Downlink,
    Uplink,
    Both,
}

/// One flow of a PCC rule from the UE's point of view: the remote (PDN side)
/// prefix and ports, the UE's ports, the protocol (`None`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowFilter {
    pub direction: FlowDirection,
    pub protocol: Option<u8>,
    pub remote: Ipv4Addr,
    pub remote_len: u8,
    pub remote_ports: (u16, u16),
    pub ue_ports: (u16, u16),
}

const ANY_PORT: (u16, u16) = (0, u16::MAX);

impl FlowFilter {
    /// An IPFilterRule (RFC 6733 §4.3.1) as Gx uses it in Flow-Description
    /// (TS 29.212 §5.4.2): `permit out <proto> from <remote> [ports] to assigned
    /// [ports]` (downlink: "out" is towards the UE) or `permit in <proto> from
    /// assigned [ports] to <remote> [ports]`. The UE's side may also be its address
    /// or `any`; `direction` says which way it applies (Flow-Direction).
    pub fn parse(s: &str, direction: FlowDirection) -> Result<FlowFilter, PolicyError> {
        let bad = |why: &str| PolicyError::BadFlow(format!("{s:?}: {why}"));
        let mut t = s.split_ascii_whitespace().peekable();
        if t.next() != Some("permit") {
            return Err(bad("only permit rules are taken"));
        }
        let out = match t.next() {
            Some("out") => true,
            Some("in") => false,
            _ => return Err(bad("expected in or out")),
        };
        let protocol = match t.next() {
            Some("ip") => None,
            Some(p) => Some(p.parse::<u8>().map_err(|_| bad("bad protocol"))?),
            None => return Err(bad("no protocol")),
        };
        if t.next() != Some("from") {
            return Err(bad("expected from"));
        }
        let src = t.next().ok_or_else(|| bad("no source"))?;
        let src_ports = ports(&mut t).map_err(&bad)?;
        if t.next() != Some("to") {
            return Err(bad("expected to"));
        }
        let dst = t.next().ok_or_else(|| bad("no destination"))?;
        let dst_ports = ports(&mut t).map_err(&bad)?;
        if let Some(x) = t.next() {
            return Err(bad(&format!("unsupported option {x:?}")));
        }
        let (remote, remote_ports, ue, ue_ports) = if out {
            (src, src_ports, dst, dst_ports)
        } else {
            (dst, dst_ports, src, src_ports)
        };
        // The UE's side: its address, whichever it is (`assigned`), or one written out.
        if ue != "assigned" {
            prefix(ue).map_err(|w| bad(&format!("the UE's side: {w}")))?;
        }
        let (remote, remote_len) = prefix(remote).map_err(&bad)?;
        Ok(FlowFilter {
            direction,
            protocol,
            remote,
            remote_len,
            remote_ports,
            ue_ports,
        })
    }

    /// The Flow-Description of this filter, downlink form.
    pub fn describe(&self) -> String {
        let proto = self.protocol.map_or("ip".to_string(), |p| p.to_string());
        let remote = if self.remote_len == 0 {
            "any".to_string()
        } else {
            format!("{}/{}", self.remote, self.remote_len)
        };
        format!(
            "permit out {proto} from {remote}{} to assigned{}",
            port_text(self.remote_ports),
            port_text(self.ue_ports)
        )
    }

    /// The data path's rule for this filter (PCEF, `pepc_slice::pcef`).
    pub fn pcef_rule(
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

fn port_text(p: (u16, u16)) -> String {
    match p {
        ANY_PORT => String::new(),
        (a, b) if a == b => format!(" {a}"),
        (a, b) => format!(" {a}-{b}"),
    }
}

/// The optional port (or range) after an address.
fn ports<'a>(
    t: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>,
) -> Result<(u16, u16), &'static str> {
    let Some(p) = t.peek().copied() else {
        return Ok(ANY_PORT);
    };
    if !p.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(ANY_PORT);
    }
    t.next();
    if p.contains(',') {
        return Err("port lists are not supported (one port or range per flow)");
    }
    let (a, b) = p.split_once('-').unwrap_or((p, p));
    let a: u16 = a.parse().map_err(|_| "bad port")?;
    let b: u16 = b.parse().map_err(|_| "bad port")?;
    if a > b {
        return Err("port range upside down");
    }
    Ok((a, b))
}

/// A remote address: `any`, `a.b.c.d` or `a.b.c.d/len`; the UE's side (`assigned`)
/// is no remote.
fn prefix(s: &str) -> Result<(Ipv4Addr, u8), &'static str> {
    match s {
        "any" => Ok((Ipv4Addr::UNSPECIFIED, 0)),
        "assigned" => Err("the remote side is the UE's (assigned)"),
        s => {
            let (a, l) = s.split_once('/').unwrap_or((s, "32"));
            let a: Ipv4Addr = a
                .parse()
                .map_err(|_| "bad IPv4 address (IPv6 is not served)")?;
            let l: u8 = l.parse().map_err(|_| "bad prefix length")?;
            if l > 32 {
                return Err("prefix longer than 32");
            }
            Ok((a, l))
        }
    }
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PcrfFailure {
    /// The PCRF refused the session (its Result-Code or Experimental-Result-Code).
    Rejected(u32),
    /// It could not be reached, or its answer could not be read.
    Unavailable(String),
    /// No answer in time.
    Timeout,
}

impl std::fmt::Display for PcrfFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PcrfFailure::Rejected(c) => write!(f, "PCRF refused the session (result {c})"),
            PcrfFailure::Unavailable(w) => write!(f, "PCRF unavailable: {w}"),
            PcrfFailure::Timeout => f.write_str("no PCRF answer in time"),
        }
    }
}

/// What is wrong with a rule or flow (configuration, API, a PCRF's message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    BadFlow(String),
    BadRule(String, String),
}

impl std::fmt::Display for PolicyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyError::BadFlow(w) => write!(f, "bad flow description {w}"),
            PolicyError::BadRule(n, w) => write!(f, "PCC rule {n:?}: {w}"),
        }
    }
}
impl std::error::Error for PolicyError {}

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

    #[test]
    fn flow_descriptions_parse_both_ways() {
        let f = FlowFilter::parse(
            "permit out 17 from 10.45.0.0/16 5060 to assigned 4000-4999",
            FlowDirection::Both,
        )
        .unwrap();
        assert_eq!(f.protocol, Some(17));
        assert_eq!((f.remote, f.remote_len), (Ipv4Addr::new(10, 45, 0, 0), 16));
        assert_eq!(f.remote_ports, (5060, 5060));
        assert_eq!(f.ue_ports, (4000, 4999));
        assert_eq!(
            f.describe(),
            "permit out 17 from 10.45.0.0/16 5060 to assigned 4000-4999"
        );
        let g = FlowFilter::parse(
            "permit in 17 from assigned 4000-4999 to 10.45.0.0/16 5060",
            FlowDirection::Both,
        )
        .unwrap();
        assert_eq!(f, g);
        let any = FlowFilter::parse(
            "permit out ip from any to assigned",
            FlowDirection::Downlink,
        )
        .unwrap();
        assert_eq!(
            (any.protocol, any.remote_len, any.ue_ports),
            (None, 0, ANY_PORT)
        );
        for bad in [
            "deny out ip from any to assigned",
            "permit out ip from assigned to any",
            "permit out 17 from 10.0.0.1 9-1 to assigned",
            "permit out 17 from 10.0.0.1 1,2 to assigned",
            "permit out 17 from 10.0.0.1/33 to assigned",
            "permit out 17 from fe80::1 to assigned",
            "permit out 300 from any to assigned",
            "permit out 17 from any to assigned frag",
            "permit",
        ] {
            assert!(
                FlowFilter::parse(bad, FlowDirection::Both).is_err(),
                "{bad}"
            );
        }
    }

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
