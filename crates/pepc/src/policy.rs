//! The `[pcrf]` and `[charging]` sections: where policy comes from (the
//! embedded PCRF with rules per APN and per subscriber, or an external PCRF over
//! Diameter Gx) and where usage records go.
//!
//! The keys, their defaults and what each means: `crates/pepc/pepc.toml` (the
//! one source; `pepc config default` prints it, docs/configuration.md is made
//! from it).

use crate::error::{invalid, ConfigError};
use pepc_diameter::driver::DriverConfig;
use pepc_diameter::gx::GxConfig;
use pepc_mme::pcrf::{FlowDirection, FlowFilter, PccRule, PolicyConfig, UsageGrant};
use pepc_node::charging::CdrConfig;
use pepc_pcrf::{PolicyEntry, PolicyTable};
use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PcrfSection {
    pub mode: String,
    pub timeout_ms: u64,
    pub failure_handling: String,
    pub usage_check_ms: u64,
    pub peers: Vec<String>,
    pub origin_host: String,
    pub origin_realm: String,
    pub destination_realm: String,
    pub destination_host: String,
    pub watchdog_s: u64,
    pub request_timeout_ms: u64,
    pub reconnect_s: u64,
    pub rule: Vec<RuleSection>,
    pub monitoring: Vec<MonitoringSection>,
}

impl Default for PcrfSection {
    fn default() -> Self {
        PcrfSection {
            mode: "embedded".into(),
            timeout_ms: 3000,
            failure_handling: "terminate".into(),
            usage_check_ms: 1000,
            peers: vec!["127.0.0.1:3869".into()],
            origin_host: "pgw.pepc.localdomain".into(),
            origin_realm: "pepc.localdomain".into(),
            destination_realm: "epc.localdomain".into(),
            destination_host: String::new(),
            watchdog_s: 30,
            request_timeout_ms: 1000,
            reconnect_s: 5,
            rule: vec![],
            monitoring: vec![],
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct RuleSection {
    pub name: String,
    pub apn: String,
    pub imsi: String,
    pub qci: u8,
    pub arp: u8,
    pub mbr_ul: u64,
    pub mbr_dl: u64,
    pub gbr_ul: u64,
    pub gbr_dl: u64,
    pub precedence: u32,
    pub rating_group: Option<u32>,
    pub monitoring_key: String,
    pub flows: Vec<String>,
    pub direction: String,
}

#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct MonitoringSection {
    pub key: String,
    pub apn: String,
    pub imsi: String,
    pub octets: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ChargingSection {
    pub cdr_path: String,
    pub rotate_mb: u64,
    pub keep: usize,
    pub interim_s: u64,
}

impl Default for ChargingSection {
    fn default() -> Self {
        ChargingSection {
            cdr_path: String::new(),
            rotate_mb: 64,
            keep: 10,
            interim_s: 3600,
        }
    }
}

/// Where policy comes from.
#[derive(Debug, Clone)]
pub enum PcrfMode {
    /// The embedded PCRF with these rules (shared with the management API).
    Embedded(PolicyTable),
    /// An external PCRF over Gx: one client for the node.
    Diameter(Box<DriverConfig<GxConfig>>),
}

/// The policy part of a validated configuration.
#[derive(Debug, Clone)]
pub struct PolicySetup {
    pub mode: PcrfMode,
    /// Into the MME's configuration.
    pub mme: PolicyConfig,
    pub cdr: Option<CdrConfig>,
}

/// A policy entry key: an APN (lower case) or an IMSI.
enum Owner {
    Apn(String),
    Imsi(u64),
}

fn owner(what: &str, apn: &str, imsi: &str) -> Result<Owner, ConfigError> {
    match (apn.is_empty(), imsi.is_empty()) {
        (false, true) => Ok(Owner::Apn(apn.to_ascii_lowercase())),
        (true, false) => {
            if imsi.len() < 6 || imsi.len() > 15 || !imsi.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid!("{what}.imsi", "{imsi:?} is not an IMSI"));
            }
            Ok(Owner::Imsi(imsi.parse().expect("digits")))
        }
        _ => Err(invalid!("{what}", "give exactly one of `apn` and `imsi`")),
    }
}

fn entry(t: &mut PolicyTable, o: Owner) -> &mut PolicyEntry {
    match o {
        Owner::Apn(a) => t.by_apn.entry(a).or_default(),
        Owner::Imsi(i) => t.by_imsi.entry(i).or_default(),
    }
}

/// A `[[pcrf.rule]]` as a PCC rule (errors name the rule).
pub fn rule_of(r: &RuleSection) -> Result<PccRule, ConfigError> {
    let direction = match r.direction.as_str() {
        "" | "both" => FlowDirection::Both,
        "downlink" => FlowDirection::Downlink,
        "uplink" => FlowDirection::Uplink,
        d => {
            return Err(ConfigError::Rule {
                key: "pcrf.rule.direction",
                rule: r.name.clone(),
                reason: format!("must be both, downlink or uplink, got {d:?}"),
            })
        }
    };
    let flows = r
        .flows
        .iter()
        .map(|f| FlowFilter::parse(f, direction))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ConfigError::Flows {
            rule: r.name.clone(),
            source,
        })?;
    let rule = PccRule {
        name: r.name.clone(),
        precedence: r.precedence,
        qci: r.qci,
        arp_priority: if r.arp == 0 { 15 } else { r.arp },
        mbr: (r.mbr_ul, r.mbr_dl),
        gbr: (r.gbr_ul, r.gbr_dl),
        rating_group: r.rating_group,
        monitoring_key: (!r.monitoring_key.is_empty()).then(|| r.monitoring_key.clone()),
        flows,
    };
    rule.validate().map_err(|source| ConfigError::Policy {
        key: "pcrf.rule",
        source,
    })?;
    Ok(rule)
}

/// Validate the sections; `hss_db` places the default CDR file beside the HSS's.
pub fn setup(
    p: &PcrfSection,
    c: &ChargingSection,
    hss_db: Option<&std::path::Path>,
) -> Result<PolicySetup, ConfigError> {
    let continue_on_failure = match p.failure_handling.as_str() {
        "terminate" => false,
        "continue" => true,
        o => {
            return Err(invalid!(
                "pcrf.failure_handling",
                "must be terminate or continue, got {o:?}"
            ))
        }
    };
    if p.timeout_ms == 0 || p.usage_check_ms == 0 {
        return Err(ConfigError::Keys {
            keys: "`pcrf.timeout_ms` and `pcrf.usage_check_ms`",
            reason: "must be > 0",
        });
    }
    let mme = PolicyConfig {
        enabled: p.mode != "off",
        timeout: Duration::from_millis(p.timeout_ms),
        continue_on_failure,
        usage_check: Duration::from_millis(p.usage_check_ms),
        interim: (c.interim_s > 0).then(|| Duration::from_secs(c.interim_s)),
    };
    let mode = match p.mode.as_str() {
        "embedded" | "off" => {
            let mut t = PolicyTable::default();
            for r in &p.rule {
                let rule = rule_of(r)?;
                entry(&mut t, owner("pcrf.rule", &r.apn, &r.imsi)?)
                    .rules
                    .push(rule);
            }
            for m in &p.monitoring {
                if m.key.is_empty() || m.octets == 0 {
                    return Err(invalid!(
                        "pcrf.monitoring",
                        "a `key` and `octets` > 0 are needed"
                    ));
                }
                entry(&mut t, owner("pcrf.monitoring", &m.apn, &m.imsi)?)
                    .monitoring
                    .push(UsageGrant {
                        key: m.key.clone(),
                        octets: m.octets,
                    });
            }
            for e in t.by_apn.values().chain(t.by_imsi.values()) {
                PolicyTable::validate(e).map_err(|source| ConfigError::Policy {
                    key: "pcrf",
                    source,
                })?;
            }
            PcrfMode::Embedded(t)
        }
        "diameter" => {
            if !p.rule.is_empty() || !p.monitoring.is_empty() {
                return Err(ConfigError::Keys {
                    keys: "`pcrf.rule` / `pcrf.monitoring`",
                    reason: "the embedded PCRF's; with `pcrf.mode = \"diameter\"` the PCRF gives the rules",
                });
            }
            let base = crate::epc::diameter_base(
                "pcrf",
                &crate::epc::DiameterPeers {
                    peers: &p.peers,
                    origin_host: &p.origin_host,
                    origin_realm: &p.origin_realm,
                    destination_realm: &p.destination_realm,
                    watchdog_s: p.watchdog_s,
                    request_timeout_ms: p.request_timeout_ms,
                    reconnect_s: p.reconnect_s,
                },
                pepc_diameter::dict::app::GX,
            )?;
            if mme.timeout <= 2 * base.request_timeout {
                return Err(invalid!(
                    "pcrf.timeout_ms", "must exceed twice `pcrf.request_timeout_ms` ({} ms > 2 x {} ms): a request may fail over once",
                    p.timeout_ms, p.request_timeout_ms
                ));
            }
            PcrfMode::Diameter(Box::new(DriverConfig {
                peers: p.peers.clone(),
                base,
                app: GxConfig {
                    destination_realm: p.destination_realm.clone(),
                    destination_host: (!p.destination_host.is_empty())
                        .then(|| p.destination_host.clone()),
                    ..GxConfig::default()
                },
                connect_timeout: Duration::from_secs(1),
            }))
        }
        o => {
            return Err(invalid!(
                "pcrf.mode",
                "must be embedded, diameter or off, got {o:?}"
            ))
        }
    };
    if c.rotate_mb == 0 || c.keep == 0 {
        return Err(ConfigError::Keys {
            keys: "`charging.rotate_mb` and `charging.keep`",
            reason: "must be > 0",
        });
    }
    let path = match (c.cdr_path.as_str(), hss_db) {
        ("", Some(db)) => Some(db.with_extension("cdr.jsonl")),
        ("", None) => None,
        (p, _) => Some(PathBuf::from(p)),
    };
    Ok(PolicySetup {
        mode,
        mme,
        cdr: path.map(|path| CdrConfig {
            path,
            rotate_bytes: c.rotate_mb << 20,
            keep: c.keep,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<PolicySetup, ConfigError> {
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct S {
            pcrf: PcrfSection,
            charging: ChargingSection,
        }
        let s: S =
            toml::from_str(t).map_err(|e| crate::config_file::Spans::new(t).toml_error(&e))?;
        setup(
            &s.pcrf,
            &s.charging,
            Some(std::path::Path::new("x/pepc-hss.redb")),
        )
    }

    #[test]
    fn embedded_rules_and_monitoring_from_the_file() {
        let s = parse(
            r#"
[[pcrf.rule]]
name = "voice"
apn = "IMS"
qci = 1
arp = 2
gbr_ul = 64000
gbr_dl = 64000
flows = ["permit out 17 from 10.45.0.0/16 to assigned 5000-5999"]
[[pcrf.monitoring]]
key = "mk"
imsi = "001010000000001"
octets = 1000
"#,
        )
        .unwrap();
        let PcrfMode::Embedded(t) = s.mode else {
            panic!()
        };
        assert_eq!(t.by_apn["ims"].rules[0].qci, 1);
        assert_eq!(t.by_imsi[&1010000000001].monitoring[0].octets, 1000);
        assert_eq!(s.cdr.unwrap().path, PathBuf::from("x/pepc-hss.cdr.jsonl"));
        assert!(s.mme.enabled && !s.mme.continue_on_failure);
    }

    #[test]
    fn errors_name_the_key() {
        for (t, want) in [
            ("[pcrf]\nmode = \"x\"", "pcrf.mode"),
            ("[pcrf]\nfailure_handling = \"x\"", "pcrf.failure_handling"),
            ("[[pcrf.rule]]\nname = \"a\"\nqci = 1\nflows = [\"permit out ip from any to assigned\"]\napn = \"x\"", "GBR"),
            ("[[pcrf.rule]]\nname = \"a\"\nqci = 9\nflows = [\"permit out 17 from any to x\"]\napn = \"x\"", "pcrf.rule.flows"),
            ("[[pcrf.rule]]\nname = \"a\"\nqci = 9\nflows = [\"permit out ip from any to assigned\"]", "apn"),
            ("[pcrf]\nmode = \"diameter\"\ntimeout_ms = 1000", "pcrf.timeout_ms"),
            ("[pcrf]\nmode = \"diameter\"\npeers = [\"nope\"]", "pcrf.peers"),
        ] {
            let e = parse(t).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(want), "{t}: {e}");
        }
        let s = parse("[pcrf]\nmode = \"diameter\"\nfailure_handling = \"continue\"").unwrap();
        assert!(matches!(s.mode, PcrfMode::Diameter(_)) && s.mme.continue_on_failure);
        assert!(!parse("[pcrf]\nmode = \"off\"").unwrap().mme.enabled);
    }
}
