//! PCEF match-action rules over the inner 5-tuple (PEPC §4.2: the policy and charging
//! enforcement function as an ordered match-action table).
//!
//! A rule matches from the UE's point of view, so one rule serves both directions:
//! `remote` is the PDN-side address (destination uplink, source downlink) and the port
//! ranges are the UE's and the remote's. The first matching rule wins; no match means
//! forward on the default bearer.

use crate::qos::TokenBucket;
use pepc_wire::flow::FiveTuple;

/// An IPv4 prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Prefix {
    addr: u32,
    mask: u32,
}

impl Prefix {
    pub fn new(addr: std::net::Ipv4Addr, len: u8) -> Self {
        let mask = if len == 0 {
            0
        } else {
            u32::MAX << (32 - len.min(32) as u32)
        };
        Prefix {
            addr: u32::from(addr) & mask,
            mask,
        }
    }

    pub const ANY: Prefix = Prefix { addr: 0, mask: 0 };

    #[inline]
    pub fn contains(&self, ip: u32) -> bool {
        ip & self.mask == self.addr
    }
}

/// An inclusive port range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub lo: u16,
    pub hi: u16,
}

impl PortRange {
    pub const ANY: PortRange = PortRange {
        lo: 0,
        hi: u16::MAX,
    };

    pub fn single(p: u16) -> Self {
        PortRange { lo: p, hi: p }
    }

    #[inline]
    pub fn contains(&self, p: u16) -> bool {
        self.lo <= p && p <= self.hi
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Both,
    Uplink,
    Downlink,
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Forward,
    Drop,
    /// Forward within the rule's own token bucket (bits/s), shared by the slice.
    RateLimit {
        bits_per_s: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub id: u32,
    pub direction: Direction,
    pub remote: Prefix,
    pub remote_ports: PortRange,
    pub ue_ports: PortRange,
    /// IP protocol number; `None` matches any.
    pub protocol: Option<u8>,
    pub action: Action,
    /// Charging key (rating group) the traffic is counted under; `None` keeps the bearer's.
    pub charging_key: Option<u32>,
    /// Downlink bearer binding (EPS bearer id); `None` means the default bearer.
    pub bearer: Option<u8>,
    /// The pair of the bearer's per-rule volumes (`counters::BearerRuleCounters`)
    /// this rule's bytes are counted in, if any.
    pub counter: Option<u8>,
}

impl Rule {
    /// A rule matching everything, forwarding.
    pub fn any(id: u32) -> Self {
        Rule {
            id,
            direction: Direction::Both,
            remote: Prefix::ANY,
            remote_ports: PortRange::ANY,
            ue_ports: PortRange::ANY,
            protocol: None,
            action: Action::Forward,
            charging_key: None,
            bearer: None,
            counter: None,
        }
    }

    #[inline]
    fn matches(&self, uplink: bool, ft: &FiveTuple) -> bool {
        let (remote, rport, uport) = if uplink {
            (u32::from(ft.dst), ft.dport, ft.sport)
        } else {
            (u32::from(ft.src), ft.sport, ft.dport)
        };
        (match self.direction {
            Direction::Both => true,
            Direction::Uplink => uplink,
            Direction::Downlink => !uplink,
        }) && self.protocol.is_none_or(|p| p == ft.proto)
            && self.remote.contains(remote)
            && self.remote_ports.contains(rport)
            && self.ue_ports.contains(uport)
    }
}

/// An ordered rule list as the data thread holds it: rules plus their rate-limit
/// buckets (data-thread state) and the index of each rule's counters.
#[derive(Debug, Clone)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
    pub(crate) buckets: Vec<TokenBucket>,
}

/// The outcome of running the PCEF over one packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Index of the matching rule in its set, if any.
    pub rule: Option<u16>,
    pub forward: bool,
    pub charging_key: Option<u32>,
    pub bearer: Option<u8>,
    /// The matching rule's per-rule volume pair in its bearer.
    pub counter: Option<u8>,
}

impl RuleSet {
    pub fn new(rules: Vec<Rule>) -> Self {
        let buckets = rules
            .iter()
            .map(|r| match r.action {
                Action::RateLimit { bits_per_s } => TokenBucket::new(bits_per_s),
                _ => TokenBucket::unlimited(),
            })
            .collect();
        RuleSet { rules, buckets }
    }

    pub fn empty() -> Self {
        Self::new(Vec::new())
    }

    /// What happens with no rule set: forward on the default bearer, uncounted by rule.
    #[inline]
    pub fn default_decision() -> Decision {
        Decision {
            rule: None,
            forward: true,
            charging_key: None,
            bearer: None,
            counter: None,
        }
    }

    /// Classify one packet and apply the rule's action.
    #[inline]
    pub fn apply(&mut self, uplink: bool, ft: &FiveTuple, len: usize, now_ns: u64) -> Decision {
        for (i, r) in self.rules.iter().enumerate() {
            if r.matches(uplink, ft) {
                let forward = match r.action {
                    Action::Forward => true,
                    Action::Drop => false,
                    Action::RateLimit { .. } => self.buckets[i].allow(len, now_ns),
                };
                return Decision {
                    rule: Some(i as u16),
                    forward,
                    charging_key: r.charging_key,
                    bearer: r.bearer,
                    counter: r.counter,
                };
            }
        }
        Decision {
            rule: None,
            forward: true,
            charging_key: None,
            bearer: None,
            counter: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ft(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, proto: u8) -> FiveTuple {
        FiveTuple {
            src: Ipv4Addr::from(src),
            dst: Ipv4Addr::from(dst),
            sport,
            dport,
            proto,
        }
    }

    #[test]
    fn first_match_wins_with_prefix_ports_and_protocol() {
        let mut block_dns = Rule::any(1);
        block_dns.remote = Prefix::new(Ipv4Addr::new(8, 8, 8, 0), 24);
        block_dns.remote_ports = PortRange::single(53);
        block_dns.protocol = Some(17);
        block_dns.action = Action::Drop;
        let mut video = Rule::any(2);
        video.remote_ports = PortRange { lo: 8000, hi: 8099 };
        video.charging_key = Some(42);
        video.bearer = Some(6);
        let mut rs = RuleSet::new(vec![block_dns, video, Rule::any(3)]);

        // Uplink DNS to 8.8.8.8: dropped by rule 0.
        let d = rs.apply(true, &ft([10, 0, 0, 1], [8, 8, 8, 8], 4000, 53, 17), 60, 0);
        assert_eq!((d.rule, d.forward), (Some(0), false));
        // Same over TCP: protocol differs, falls to the catch-all.
        let d = rs.apply(true, &ft([10, 0, 0, 1], [8, 8, 8, 8], 4000, 53, 6), 60, 0);
        assert_eq!((d.rule, d.forward), (Some(2), true));
        // DNS to another resolver: prefix differs.
        let d = rs.apply(true, &ft([10, 0, 0, 1], [9, 9, 9, 9], 4000, 53, 17), 60, 0);
        assert_eq!(d.rule, Some(2));
        // Downlink from port 8050: the remote side is the source; charging key and bearer.
        let d = rs.apply(
            false,
            &ft([1, 2, 3, 4], [10, 0, 0, 1], 8050, 5555, 6),
            60,
            0,
        );
        assert_eq!(
            d,
            Decision {
                rule: Some(1),
                forward: true,
                charging_key: Some(42),
                bearer: Some(6),
                counter: None,
            }
        );
        // Port range edges.
        let d = rs.apply(
            false,
            &ft([1, 2, 3, 4], [10, 0, 0, 1], 8100, 5555, 6),
            60,
            0,
        );
        assert_eq!(d.rule, Some(2));
    }

    #[test]
    fn direction_and_rate_limit() {
        let mut ul_only = Rule::any(1);
        ul_only.direction = Direction::Uplink;
        ul_only.action = Action::RateLimit {
            bits_per_s: 8 * 10_000,
        };
        let mut rs = RuleSet::new(vec![ul_only]);
        let f = ft([10, 0, 0, 1], [1, 1, 1, 1], 1, 2, 17);
        // Downlink does not match an uplink-only rule: default forward.
        assert_eq!(rs.apply(false, &f, 100, 0).rule, None);
        // Uplink: burst is 3000 bytes (min), then limited.
        let mut passed = 0;
        for _ in 0..100 {
            if rs.apply(true, &f, 100, 0).forward {
                passed += 1;
            }
        }
        assert_eq!(passed, 30);
        // One second later, 10 KB more.
        let mut later = 0;
        for _ in 0..200 {
            if rs.apply(true, &f, 100, 1_000_000_000).forward {
                later += 1;
            }
        }
        assert_eq!(later, 30, "bucket refills up to the burst only");
    }

    #[test]
    fn empty_rule_set_forwards_on_default() {
        let mut rs = RuleSet::empty();
        let d = rs.apply(true, &ft([1, 1, 1, 1], [2, 2, 2, 2], 1, 1, 6), 1, 0);
        assert!(d.forward && d.rule.is_none() && d.bearer.is_none());
    }
}
