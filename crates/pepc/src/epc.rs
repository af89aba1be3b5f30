//! A whole EPC node from one TOML file: the node's own sections (`[node]`, `[s1u]`,
//! `[sgi]`, `[synthetic]`, documented in `crates/node/src/config.rs`) plus the
//! signaling sections below. Every key has a default, so no file at all runs a node
//! on loopback with the MME over SCTP (userspace SCTP-in-UDP where the kernel has no
//! SCTP) and the embedded HSS in `pepc-hss.redb`.
//!
//! The keys, their defaults and what each means: `crates/pepc/pepc.toml` (the
//! one source; `pepc config default` prints it, docs/configuration.md is made
//! from it).
//!
//! `[log]` (level, format) is in `crate::logging`.

use crate::error::{invalid, ConfigError, PlmnParseError, StartError};
use pepc_diameter::driver::DriverConfig;
use pepc_hss::Hss;
use pepc_mme::{Mme, MmeConfig, S1apEndpoint, SlicePolicy};
use pepc_node::checkpoint::SliceState;
use pepc_node::config::{NodeConfig, Validated};
use pepc_node::node::Node;
use pepc_node::plan::{Job, Plan};
use pepc_node::proxy::s6a::S6aBackend;
use pepc_node::proxy::Proxy;
use pepc_node::runtime::ControlDriver;
use pepc_node::s1mme::{start_signaling, EndpointThread, SliceGauges, SliceMme};
use pepc_s1ap::Plmn;
use pepc_sctp::transport::{open_server, Backend, TransportConfig};
use pepc_security::{Eea, Eia};
use pepc_slice::ids::SignalingIds;
use pepc_store::{Checkpointer, EmbeddedStore, StateStore};
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// The whole file: the node's sections and ours, one struct, so every unknown key or
/// section is refused with every section named, at its line in the operator's file.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
struct ConfigFile {
    node: pepc_node::config::NodeSection,
    s1u: pepc_node::config::S1uSection,
    sgi: pepc_node::config::SgiSection,
    qos: pepc_node::config::QosSection,
    synthetic: pepc_node::config::SyntheticSection,
    mme: MmeSection,
    s1mme: S1mmeSection,
    hss: HssSection,
    state: StateSection,
    log: crate::logging::LogSection,
    metrics: MetricsSection,
    api: ApiSection,
    pcrf: crate::policy::PcrfSection,
    charging: crate::policy::ChargingSection,
    debug: DebugSection,
}

/// `[debug]`: tools for developers and for reproducing a fault.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct DebugSection {
    /// Record every input each slice's MME takes, with its time, and every output, to
    /// `<record>.<slice>` (mode 0600: it holds keys); `pepc replay <record>` runs
    /// them again and checks every output is byte-identical. "" = off.
    pub record: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiSection {
    pub listen: String,
    pub token: String,
}

impl Default for ApiSection {
    fn default() -> Self {
        ApiSection {
            listen: "127.0.0.1:8080".into(),
            token: String::new(),
        }
    }
}

/// Where the management API listens, and its token (never shown).
#[derive(Clone)]
pub struct ApiConfig {
    pub listen: std::net::SocketAddr,
    pub token: Option<String>,
}

impl std::fmt::Debug for ApiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiConfig")
            .field("listen", &self.listen)
            .field("token", &self.token.as_ref().map(|_| "<set>"))
            .finish()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MetricsSection {
    pub listen: String,
}

impl Default for MetricsSection {
    fn default() -> Self {
        MetricsSection {
            listen: "127.0.0.1:9090".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StateSection {
    pub store: String,
    pub path: String,
}

impl Default for StateSection {
    fn default() -> Self {
        StateSection {
            store: "embedded".into(),
            path: String::new(),
        }
    }
}

/// Where UE checkpoints go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateStoreConfig {
    None,
    Embedded(PathBuf),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MmeSection {
    pub enabled: bool,
    pub plmn: String,
    pub mme_group_id: u16,
    pub mme_code: u8,
    pub name: String,
    pub tacs: Vec<u16>,
    pub eea: Vec<String>,
    pub eia: Vec<String>,
    pub t3412_s: u64,
    pub t3413_s: u64,
    pub paging_attempts: u32,
    pub esm_info_request: bool,
    pub default_apn: String,
    pub network_name: String,
    pub ambr_ul: u64,
    pub ambr_dl: u64,
    pub slice_policy: String,
    pub hss_timeout_ms: u64,
    pub overload_high: usize,
    pub overload_low: usize,
    pub t3346_s: u64,
    pub overload_action: String,
}

impl Default for MmeSection {
    fn default() -> Self {
        let d = MmeConfig::default();
        MmeSection {
            enabled: true,
            plmn: "00101".into(),
            mme_group_id: d.mme_group_id,
            mme_code: d.mme_code,
            name: d.mme_name.unwrap_or_default(),
            tacs: d.served_tacs,
            eea: vec!["eea2".into(), "eea1".into(), "eea0".into()],
            eia: vec!["eia2".into(), "eia1".into()],
            t3412_s: d.t3412.as_secs(),
            t3413_s: d.t3413.as_secs(),
            paging_attempts: d.paging_attempts,
            esm_info_request: d.esm_info_request,
            default_apn: d.default_apn,
            network_name: d.network_name.unwrap_or_default(),
            ambr_ul: d.default_ambr.0,
            ambr_dl: d.default_ambr.1,
            slice_policy: "consistent-hash".into(),
            hss_timeout_ms: d.hss_timeout.as_millis() as u64,
            overload_high: d.overload.high,
            overload_low: d.overload.low,
            t3346_s: d.overload.t3346.as_secs(),
            overload_action: "permit-emergency-and-mt".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct S1mmeSection {
    pub transport: String,
    pub bind: String,
    pub sctp_port: u16,
    pub udp_port: u16,
    pub heartbeat_interval_s: u64,
    pub path_max_retrans: u32,
    pub assoc_max_retrans: u32,
    pub rto_initial_ms: u64,
    pub rto_min_ms: u64,
    pub rto_max_ms: u64,
}

impl Default for S1mmeSection {
    fn default() -> Self {
        S1mmeSection {
            transport: "auto".into(),
            bind: "127.0.0.1".into(),
            sctp_port: pepc_sctp::transport::S1AP_SCTP_PORT,
            udp_port: pepc_sctp::transport::SCTP_UDP_ENCAPS_PORT,
            heartbeat_interval_s: 30,
            path_max_retrans: 5,
            assoc_max_retrans: 10,
            rto_initial_ms: 1000,
            rto_min_ms: 1000,
            rto_max_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HssSection {
    pub mode: String,
    pub db: String,
    pub purge_on_detach: bool,
    pub peers: Vec<String>,
    pub origin_host: String,
    pub origin_realm: String,
    pub destination_realm: String,
    pub destination_host: String,
    pub watchdog_s: u64,
    pub request_timeout_ms: u64,
    pub reconnect_s: u64,
}

impl Default for HssSection {
    fn default() -> Self {
        HssSection {
            mode: "embedded".into(),
            db: "pepc-hss.redb".into(),
            purge_on_detach: false,
            peers: vec!["127.0.0.1:3868".into()],
            origin_host: "mme.pepc.localdomain".into(),
            origin_realm: "pepc.localdomain".into(),
            destination_realm: "epc.localdomain".into(),
            destination_host: String::new(),
            watchdog_s: 30,
            request_timeout_ms: 2000,
            reconnect_s: 5,
        }
    }
}

/// How the slices' MMEs reach the HSS.
#[derive(Debug, Clone)]
pub enum HssMode {
    /// The embedded HSS (`[hss] db`), inline on each slice's control thread.
    Embedded,
    /// An external HSS over Diameter S6a: one client for the node (boxed: the
    /// embedded case carries nothing).
    Diameter(Box<DriverConfig>),
}

/// Where the HSS lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HssStore {
    File(PathBuf),
    Memory,
}

/// A validated EPC configuration.
#[derive(Debug, Clone)]
pub struct EpcConfig {
    pub node: Validated,
    /// None: the MME is disabled and the control threads run synthetic events.
    pub mme: Option<MmeConfig>,
    pub transport: TransportConfig,
    pub hss: HssStore,
    pub hss_mode: HssMode,
    pub log: crate::logging::LogConfig,
    /// The Prometheus endpoint's address (None: off). See `crate::metrics`.
    pub metrics: Option<std::net::SocketAddr>,
    /// The management API (None: off). See `crate::api`.
    pub api: Option<ApiConfig>,
    /// How IMSIs (and foreign GUTIs) are spread over the slices.
    pub slice_policy: SlicePolicy,
    pub state: StateStoreConfig,
    /// The PCRF (embedded or Gx) and the usage records (see `crate::policy`).
    pub policy: crate::policy::PolicySetup,
    /// `[debug] record`: where each slice's MME recording goes (`<path>.<slice>`).
    pub record: Option<PathBuf>,
    /// A metrics endpoint or API that cannot listen is left off (said) instead of
    /// refusing the start: for `pepc demo` only, never from a file.
    pub mgmt_optional: bool,
    /// Every key as the node runs with it, in the file's own words: the defaults
    /// (`pepc config default`) with the file's keys over them. What the API shows.
    pub keys: toml::Table,
}

/// The defaults with `file`'s keys over them, section by section (an array of tables
/// in the file replaces the default one).
fn effective_keys(file: &str) -> toml::Table {
    let mut keys: toml::Table = crate::config_doc::DEFAULT_TOML.parse().unwrap_or_default();
    let Ok(over) = file.parse::<toml::Table>() else {
        return keys;
    };
    for (section, v) in over {
        match (keys.get_mut(&section), v) {
            (Some(toml::Value::Table(base)), toml::Value::Table(t)) => {
                for (k, v) in t {
                    base.insert(k, v);
                }
            }
            (_, v) => {
                keys.insert(section, v);
            }
        }
    }
    keys
}

/// Parse PLMN digits ("00101", "310410") into the TBCD octets of TS 24.008 10.5.1.13.
pub fn parse_plmn(s: &str) -> Result<Plmn, PlmnParseError> {
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PlmnParseError::NotDigits(s.to_string()));
    }
    match s.len() {
        5 | 6 => Ok(Plmn::from_mcc_mnc(&s[..3], &s[3..])?),
        len => Err(PlmnParseError::Length {
            digits: s.to_string(),
            len,
        }),
    }
}

fn parse_alg<T>(
    key: &str,
    names: &[String],
    parse: fn(&str) -> Option<T>,
) -> Result<Vec<T>, ConfigError> {
    if names.is_empty() {
        return Err(invalid!("{key}", "must list at least one algorithm"));
    }
    names
        .iter()
        .map(|n| {
            parse(&n.to_ascii_lowercase())
                .ok_or_else(|| invalid!("{key}", "unknown algorithm {n:?}"))
        })
        .collect()
}

fn eea_of(s: &str) -> Option<Eea> {
    Some(match s {
        "eea0" => Eea::Eea0,
        "eea1" => Eea::Eea1,
        "eea2" => Eea::Eea2,
        "eea3" => Eea::Eea3,
        _ => return None,
    })
}

fn eia_of(s: &str) -> Option<Eia> {
    Some(match s {
        "eia1" => Eia::Eia1,
        "eia2" => Eia::Eia2,
        "eia3" => Eia::Eia3,
        _ => return None,
    })
}

/// The association tunables of `[s1mme]`, checked against each other.
fn sctp_tunables(s: &S1mmeSection) -> Result<pepc_sctp::assoc::Config, ConfigError> {
    if s.heartbeat_interval_s == 0 {
        return Err(invalid!("s1mme.heartbeat_interval_s", "must be > 0"));
    }
    if s.path_max_retrans == 0 {
        return Err(invalid!("s1mme.path_max_retrans", "must be > 0"));
    }
    if s.assoc_max_retrans == 0 {
        return Err(invalid!("s1mme.assoc_max_retrans", "must be > 0"));
    }
    if s.rto_min_ms == 0 || s.rto_min_ms > s.rto_initial_ms {
        return Err(invalid!(
            "s1mme.rto_min_ms",
            "must be > 0 and at most rto_initial_ms ({}), got {}",
            s.rto_initial_ms,
            s.rto_min_ms
        ));
    }
    if s.rto_initial_ms > s.rto_max_ms {
        return Err(invalid!(
            "s1mme.rto_max_ms",
            "must be at least rto_initial_ms ({}), got {}",
            s.rto_initial_ms,
            s.rto_max_ms
        ));
    }
    Ok(pepc_sctp::assoc::Config {
        heartbeat_interval: Duration::from_secs(s.heartbeat_interval_s),
        path_max_retrans: s.path_max_retrans,
        assoc_max_retrans: s.assoc_max_retrans,
        rto_initial: Duration::from_millis(s.rto_initial_ms),
        rto_min: Duration::from_millis(s.rto_min_ms),
        rto_max: Duration::from_millis(s.rto_max_ms),
        ..Default::default()
    })
}

impl EpcConfig {
    /// Parse and validate a whole configuration file. Every section is read from
    /// `text` itself and every error names the key and, when the file sets it, its line.
    pub fn parse(text: &str) -> Result<EpcConfig, ConfigError> {
        let spans = crate::config_file::Spans::new(text);
        let file: ConfigFile = toml::from_str(text).map_err(|e| spans.toml_error(&e))?;
        let mut c = Self::from_file(file).map_err(|e| spans.place(e))?;
        c.keys = effective_keys(text);
        Ok(c)
    }

    pub fn load(path: &std::path::Path) -> Result<EpcConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| {
            pepc_node::config::ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Self::parse(&text).map_err(|e| ConfigError::File {
            path: path.to_path_buf(),
            source: Box::new(e),
        })
    }

    fn from_file(f: ConfigFile) -> Result<EpcConfig, ConfigError> {
        let node = NodeConfig {
            node: f.node.clone(),
            s1u: f.s1u.clone(),
            sgi: f.sgi.clone(),
            qos: f.qos.clone(),
            synthetic: f.synthetic.clone(),
        }
        .validate()?;
        Self::from_parts(node, &f)
    }

    /// The node's validated sections and the rest of the file (ours).
    fn from_parts(node: Validated, sig: &ConfigFile) -> Result<EpcConfig, ConfigError> {
        let m = &sig.mme;
        let s = &sig.s1mme;
        let mme = if m.enabled {
            if node.synthetic_users > 0 || node.synthetic_rate > 0 {
                return Err(invalid!("synthetic.users", "synthetic events and the MME cannot share a slice's control thread; set `mme.enabled = false` to run synthetic events"));
            }
            if m.tacs.is_empty() {
                return Err(invalid!("mme.tacs", "must list at least one TAC"));
            }
            if m.t3412_s == 0 || m.t3412_s > 186 * 60 {
                return Err(invalid!(
                    "mme.t3412_s",
                    "must be 1..=11160 s (GPRS timer 3 range used here), got {}",
                    m.t3412_s
                ));
            }
            if m.t3413_s == 0 {
                return Err(invalid!("mme.t3413_s", "must be > 0"));
            }
            if m.hss_timeout_ms == 0 {
                return Err(invalid!("mme.hss_timeout_ms", "must be > 0"));
            }
            if m.mme_group_id == 0 {
                return Err(invalid!("mme.mme_group_id", "must be > 0"));
            }
            let t3412 = Duration::from_secs(m.t3412_s);
            if m.overload_high > 0 && m.overload_low >= m.overload_high {
                return Err(invalid!(
                    "mme.overload_low",
                    "must be below `mme.overload_high` ({} >= {})",
                    m.overload_low,
                    m.overload_high
                ));
            }
            if !(2..=11160).contains(&m.t3346_s) {
                return Err(invalid!(
                    "mme.t3346_s",
                    "must be 2..=11160 s (GPRS timer 2), got {}",
                    m.t3346_s
                ));
            }
            use pepc_s1ap::msg::OverloadAction as A;
            let action = match m.overload_action.as_str() {
                "permit-emergency-and-mt" => A::PermitEmergencyAndMtOnly,
                "permit-high-priority-and-mt" => A::PermitHighPriorityAndMtOnly,
                "reject-signalling" => A::RejectRrcCrSignalling,
                "reject-mo-data" => A::RejectNonEmergencyMoDt,
                "reject-delay-tolerant" => A::RejectDelayTolerantAccess,
                other => {
                    return Err(invalid!(
                        "mme.overload_action", "must be permit-emergency-and-mt, permit-high-priority-and-mt, reject-signalling, reject-mo-data or reject-delay-tolerant, got {other:?}"
                    ))
                }
            };
            let overload = pepc_mme::OverloadConfig {
                high: m.overload_high,
                low: m.overload_low,
                t3346: Duration::from_secs(m.t3346_s),
                action,
                ..pepc_mme::OverloadConfig::default()
            };
            Some(MmeConfig {
                plmn: parse_plmn(&m.plmn)?,
                mme_group_id: m.mme_group_id,
                mme_code: m.mme_code,
                mme_name: (!m.name.is_empty()).then(|| m.name.clone()),
                served_tacs: m.tacs.clone(),
                eea_preference: parse_alg("mme.eea", &m.eea, eea_of)?,
                eia_preference: parse_alg("mme.eia", &m.eia, eia_of)?,
                t3412,
                t3413: Duration::from_secs(m.t3413_s),
                paging_attempts: m.paging_attempts.max(1),
                mobile_reachable: t3412 + Duration::from_secs(240),
                esm_info_request: m.esm_info_request,
                default_apn: m.default_apn.clone(),
                s1u_addr: advertised_s1u(*node.s1u_bind.ip()),
                network_name: (!m.network_name.is_empty()).then(|| m.network_name.clone()),
                default_ambr: (m.ambr_ul, m.ambr_dl),
                hss_timeout: Duration::from_millis(m.hss_timeout_ms),
                purge_on_detach: sig.hss.purge_on_detach,
                overload,
                ..MmeConfig::default()
            })
        } else {
            None
        };
        let backend = match s.transport.as_str() {
            "auto" => Backend::Auto,
            "kernel" => Backend::Kernel,
            "udp" => Backend::Udp,
            other => {
                return Err(invalid!(
                    "s1mme.transport",
                    "must be auto, kernel or udp, got {other:?}"
                ))
            }
        };
        let ip: IpAddr = s.bind.parse().map_err(|_| {
            invalid!(
                "s1mme.bind",
                "{:?} is not an IP address like 127.0.0.1",
                s.bind
            )
        })?;
        let transport = TransportConfig {
            backend,
            ip,
            sctp_port: s.sctp_port,
            udp_port: s.udp_port,
            assoc: sctp_tunables(s)?,
        };
        let hss = match sig.hss.db.as_str() {
            "" => return Err(invalid!("hss.db", "must be a file path or \":memory:\"")),
            ":memory:" => HssStore::Memory,
            p => HssStore::File(PathBuf::from(p)),
        };
        let slice_policy = SlicePolicy::parse(&m.slice_policy)?;
        let state = match (sig.state.store.as_str(), &hss) {
            ("none", _) | ("embedded", HssStore::Memory) if sig.state.path.is_empty() => {
                StateStoreConfig::None
            }
            ("embedded", _) if !sig.state.path.is_empty() => {
                StateStoreConfig::Embedded(PathBuf::from(&sig.state.path))
            }
            ("embedded", HssStore::File(p)) => {
                StateStoreConfig::Embedded(p.with_extension("state.redb"))
            }
            ("none", _) => {
                return Err(invalid!("state.path", "set, but `state.store` is \"none\""))
            }
            (other, _) => {
                return Err(invalid!(
                    "state.store",
                    "must be embedded or none, got {other:?}"
                ))
            }
        };
        let hss_db = match &hss {
            HssStore::File(p) => Some(p.as_path()),
            HssStore::Memory => None,
        };
        let policy = crate::policy::setup(&sig.pcrf, &sig.charging, hss_db)?;
        let mme = mme.map(|mut m| {
            m.checkpoints = state != StateStoreConfig::None;
            m.policy = policy.mme.clone();
            m
        });
        let hss_mode = hss_mode(&sig.hss, mme.as_ref())?;
        let mme_enabled_for_record = mme.as_ref().map(|_| ());
        Ok(EpcConfig {
            node,
            mme,
            transport,
            hss,
            hss_mode,
            log: sig.log.validate()?,
            api: match sig.api.listen.trim() {
                "" => None,
                a => {
                    let listen: std::net::SocketAddr =
                        a.parse().map_err(|source| ConfigError::Listen {
                            key: "api.listen",
                            value: a.to_string(),
                            source,
                        })?;
                    let token = (!sig.api.token.is_empty()).then(|| sig.api.token.clone());
                    pepc_mgmt::api::check_listen(listen, token.as_deref())?;
                    Some(ApiConfig { listen, token })
                }
            },
            metrics: match sig.metrics.listen.trim() {
                "" => None,
                a => Some(a.parse().map_err(|source| ConfigError::Listen {
                    key: "metrics.listen",
                    value: a.to_string(),
                    source,
                })?),
            },
            slice_policy,
            state,
            policy,
            mgmt_optional: false,
            keys: toml::Table::new(),
            record: match sig.debug.record.trim() {
                "" => None,
                p => {
                    if mme_enabled_for_record.is_none() {
                        return Err(
                            invalid!("debug.record", "set, but the MME is disabled (`mme.enabled = false`): there is nothing to record"),
                        );
                    }
                    Some(PathBuf::from(p))
                }
            },
        })
    }

    /// The defaults (what `pepc run` does with no file).
    pub fn default_config() -> EpcConfig {
        Self::parse("").expect("the defaults are valid")
    }
}

/// The `[hss]` section's backend; `mme` (when enabled) for the timer check.
fn hss_mode(h: &HssSection, mme: Option<&MmeConfig>) -> Result<HssMode, ConfigError> {
    match h.mode.as_str() {
        "embedded" => return Ok(HssMode::Embedded),
        "diameter" => {}
        other => {
            return Err(invalid!(
                "hss.mode",
                "must be embedded or diameter, got {other:?}"
            ))
        }
    }
    let base = diameter_base(
        "hss",
        &DiameterPeers {
            peers: &h.peers,
            origin_host: &h.origin_host,
            origin_realm: &h.origin_realm,
            destination_realm: &h.destination_realm,
            watchdog_s: h.watchdog_s,
            request_timeout_ms: h.request_timeout_ms,
            reconnect_s: h.reconnect_s,
        },
        pepc_diameter::dict::app::S6A,
    )?;
    if let Some(m) = mme {
        if m.hss_timeout <= 2 * base.request_timeout {
            return Err(invalid!(
                "mme.hss_timeout_ms", "must exceed twice `hss.request_timeout_ms` ({} ms > 2 x {} ms): a request that fails over to a second peer may take two request timeouts, and the MME must not give up on an answer still coming",
                m.hss_timeout.as_millis(),
                h.request_timeout_ms
            ));
        }
    }
    Ok(HssMode::Diameter(Box::new(DriverConfig {
        peers: h.peers.clone(),
        base,
        app: pepc_diameter::s6a::S6aConfig {
            destination_realm: h.destination_realm.clone(),
            destination_host: (!h.destination_host.is_empty()).then(|| h.destination_host.clone()),
            visited_plmn: mme.map_or(MmeConfig::default().plmn.0, |m| m.plmn.0),
        },
        connect_timeout: Duration::from_secs(1),
    })))
}

/// The Diameter peer keys a section (`[hss]`, `[pcrf]`) shares.
pub(crate) struct DiameterPeers<'a> {
    pub peers: &'a [String],
    pub origin_host: &'a str,
    pub origin_realm: &'a str,
    pub destination_realm: &'a str,
    pub watchdog_s: u64,
    pub request_timeout_ms: u64,
    pub reconnect_s: u64,
}

/// The base client's configuration from section `sec`'s peer keys (errors name the
/// key), advertising application `app`.
pub(crate) fn diameter_base(
    sec: &str,
    h: &DiameterPeers<'_>,
    app: u32,
) -> Result<pepc_diameter::base::Config, ConfigError> {
    if h.peers.is_empty() {
        return Err(invalid!(
            "{sec}.peers",
            "diameter mode needs at least one \"host:port\""
        ));
    }
    for p in h.peers {
        let port_ok = p.rsplit_once(':').is_some_and(|(host, port)| {
            !host.is_empty() && port.parse::<u16>().is_ok_and(|n| n > 0)
        });
        if !port_ok {
            return Err(invalid!(
                "{sec}.peers",
                "{p:?} is not \"host:port\" (e.g. \"127.0.0.1:3868\")"
            ));
        }
    }
    for (key, v) in [
        ("origin_host", h.origin_host),
        ("origin_realm", h.origin_realm),
        ("destination_realm", h.destination_realm),
    ] {
        if v.is_empty() || v.contains(char::is_whitespace) {
            return Err(invalid!(
                "{sec}.{key}",
                "must be a Diameter identity (a non-empty FQDN), got {v:?}"
            ));
        }
    }
    if h.watchdog_s < 6 {
        // RFC 3539 §3.4.1: Tw must not be set below 6 s.
        return Err(invalid!(
            "{sec}.watchdog_s",
            "RFC 3539 allows no less than 6 s, got {}",
            h.watchdog_s
        ));
    }
    if h.request_timeout_ms == 0 {
        return Err(invalid!("{sec}.request_timeout_ms", "must be > 0"));
    }
    if h.reconnect_s == 0 {
        return Err(invalid!("{sec}.reconnect_s", "must be > 0"));
    }
    let mut base = pepc_diameter::base::Config::new(h.origin_host, h.origin_realm);
    base.applications = vec![app];
    base.watchdog = Duration::from_secs(h.watchdog_s);
    base.request_timeout = Duration::from_millis(h.request_timeout_ms);
    base.reconnect = Duration::from_secs(h.reconnect_s);
    Ok(base)
}

/// Open the configured HSS.
pub fn open_hss(store: &HssStore) -> Result<Arc<Hss>, StartError> {
    if let HssStore::File(p) = store {
        dir_exists("hss.db", p)?;
    }
    let h = match store {
        HssStore::Memory => Hss::in_memory(),
        HssStore::File(p) => Hss::open(p),
    };
    h.map(Arc::new).map_err(|source| StartError::Hss {
        path: match store {
            HssStore::File(p) => Some(p.clone()),
            HssStore::Memory => None,
        },
        source,
    })
}

/// A metrics endpoint or API that could not start: an error, or with `optional` (the
/// demo) said and left off.
fn optional<T>(r: Option<Result<T, StartError>>, optional: bool) -> Result<Option<T>, StartError> {
    match r {
        Some(Err(e)) if optional => {
            tracing::error!("{e}: off");
            Ok(None)
        }
        r => r.transpose(),
    }
}

/// redb's "No such file or directory" names neither the key nor what is missing.
fn dir_exists(key: &'static str, file: &std::path::Path) -> Result<(), StartError> {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() && !d.is_dir() => Err(StartError::NoDir {
            key,
            dir: d.to_path_buf(),
        }),
        _ => Ok(()),
    }
}

/// The node's plan for `cfg` on `cores` cores: every thread, ring and port it runs.
pub fn plan_of(cfg: &EpcConfig, cores: usize) -> pepc_node::plan::Plan {
    let mme = cfg.mme.is_some();
    let t = &cfg.transport;
    let s1mme = mme.then(|| match t.backend {
        Backend::Udp => format!("SCTP-in-UDP {}:{}", t.ip, t.udp_port),
        Backend::Kernel => format!("SCTP {}:{}", t.ip, t.sctp_port),
        Backend::Auto => format!(
            "SCTP {}:{} (SCTP-in-UDP {} where the kernel has no SCTP)",
            t.ip, t.sctp_port, t.udp_port
        ),
    });
    let services = pepc_node::plan::Services {
        s1mme,
        s1ap_ring: pepc_node::s1mme::S1AP_RING,
        s6a: mme && matches!(cfg.hss_mode, HssMode::Diameter(_)),
        gx: mme && matches!(cfg.policy.mode, crate::policy::PcrfMode::Diameter(_)),
        hss_preload: mme && matches!(cfg.hss_mode, HssMode::Embedded),
        checkpoints: mme && matches!(cfg.state, StateStoreConfig::Embedded(_)),
        cdr: mme && cfg.policy.cdr.is_some(),
        metrics: cfg.metrics.map(|a| a.to_string()),
        api: cfg.api.as_ref().map(|a| a.listen.to_string()),
    };
    pepc_node::plan::Plan::new(&cfg.node, cores, &services)
}

/// A running EPC node.
pub struct Epc {
    /// What it runs: threads, rings, ports.
    pub plan: pepc_node::plan::Plan,
    pub node: Node,
    pub hss: Arc<Hss>,
    /// Where the S1-MME listener is (None when the MME is disabled).
    pub s1mme: Option<String>,
    /// The node's S1AP endpoint thread (with more than one slice).
    pub endpoint: Option<EndpointThread>,
    /// Each slice's signaling figures (empty when the MME is disabled).
    pub gauges: Vec<Arc<SliceGauges>>,
    /// The group-commit thread of UE checkpoints (with `[state] store`).
    pub checkpointer: Option<Checkpointer>,
    /// Checkpoints found at start (UEs of a previous process to restore).
    pub checkpoints_found: usize,
    /// The Prometheus endpoint (with `[metrics] listen`).
    pub metrics: Option<pepc_mgmt::MetricsServer>,
    /// The management API (with `[api] listen`).
    pub api: Option<pepc_mgmt::HttpServer>,
    /// The usage records' writer (with `[charging]`); dropped after the slices.
    pub cdr: Option<pepc_node::charging::CdrWriter>,
    /// The embedded PCRF (with `[pcrf] mode = "embedded"`), its table shared.
    pub pcrf: Option<pepc_pcrf::EmbeddedPcrf>,
}

/// The configuration as the API shows it: everything but secrets (the API token).
fn shown_config(cfg: &EpcConfig) -> serde_json::Value {
    // The operator's keys as `pepc config default` names them; the API token is a
    // secret: only whether it is set.
    let mut keys = cfg.keys.clone();
    if let Some(toml::Value::Table(api)) = keys.get_mut("api") {
        if let Some(t) = api.get_mut("token") {
            let set = t.as_str().is_some_and(|t| !t.is_empty());
            *t = toml::Value::String(if set { "<set>" } else { "" }.into());
        }
    }
    serde_json::to_value(&keys).unwrap_or(serde_json::Value::Null)
}

/// A slice's share of the checkpoints found at start: (IMSI, snapshot).
type Checkpoints = Vec<(u64, Vec<u8>)>;

/// The name the node's plan gives `job`'s thread: every thread the node starts is in
/// its plan (what `pepc plan` prints and `pepc run` logs), and is started under that
/// name, or the start fails.
fn thread_of(plan: &Plan, job: Job) -> Result<String, StartError> {
    plan.thread(job)
        .map(|t| t.name.clone())
        .ok_or(StartError::NotPlanned(job.thread_name()))
}

/// Open the state store, read what a previous process left, and start the
/// checkpointer; the records go to the slices by where their UE's identifiers lead:
/// the slice in its M-TMSI (what its S-TMSI routes to), else its IMSI's policy slice.
fn open_state(
    cfg: &StateStoreConfig,
    ep: &S1apEndpoint,
    slices: usize,
    plan: &Plan,
) -> Result<(Option<Checkpointer>, Vec<Checkpoints>, usize), StartError> {
    let mut per_slice = vec![Vec::new(); slices];
    let StateStoreConfig::Embedded(path) = cfg else {
        return Ok((None, per_slice, 0));
    };
    let t = std::time::Instant::now();
    dir_exists("state.path", path)?;
    let store = EmbeddedStore::open(path)?;
    let opened = t.elapsed();
    let records = store.load_all()?;
    let found = records.len();
    if found > 0 {
        tracing::info!(
            "state store {}: {found} checkpointed UEs read in {} ms (open {} ms)",
            path.display(),
            t.elapsed().as_millis(),
            opened.as_millis()
        );
    }
    let ids = SignalingIds::new(slices);
    for (imsi, bytes) in records {
        let s = match pepc_mme::snapshot::snapshot_m_tmsi(&bytes) {
            Ok(t) if t != 0 && ids.slice_of(t) < slices => ids.slice_of(t),
            _ => ep.slice_of_imsi(imsi),
        };
        per_slice[s].push((imsi, bytes));
    }
    let c = Checkpointer::start(Box::new(store), &thread_of(plan, Job::Checkpointer)?)
        .map_err(StartError::spawn("starting the checkpoint thread"))?;
    Ok((Some(c), per_slice, found))
}

impl Epc {
    /// Start the node: with one slice its control thread runs the S1AP endpoint and
    /// the MME on the S1-MME transport; with N the endpoint has a thread of its own
    /// and steers each UE's signaling to the MME in its slice's control thread (or
    /// the slices run synthetic events when the MME is disabled).
    pub fn start(cfg: &EpcConfig, hss: Arc<Hss>) -> Result<Epc, StartError> {
        let plan = plan_of(cfg, pepc_slice::slice::available_cores());
        let mut drivers: Vec<Option<Box<dyn ControlDriver>>> = Vec::new();
        let mut gauges = Vec::new();
        let mut s1mme = None;
        let mut endpoint = None;
        let mut checkpointer = None;
        let mut checkpoints_found = 0;
        let mut cdr = None;
        let mut embedded_pcrf = None;
        if let Some(mcfg) = &cfg.mme {
            let t = &cfg.transport;
            let transport = open_server(t).map_err(|source| StartError::S1mme {
                backend: t.backend,
                ip: t.ip,
                sctp_port: t.sctp_port,
                udp_port: t.udp_port,
                source: match t.backend {
                    // The UDP port is where SCTP-in-UDP listens: name who holds it.
                    Backend::Udp => pepc_node::io::holder::in_use(
                        source,
                        std::net::SocketAddr::new(t.ip, t.udp_port),
                        pepc_node::io::holder::Proto::Udp,
                    ),
                    _ => source,
                },
            })?;
            s1mme = Some(format!(
                "{} ({:?} backend requested)",
                transport.local_addr(),
                cfg.transport.backend
            ));
            // Profiles in memory before the first attach storm: it then needs no
            // database read. About 1 µs per subscriber here, so a node with millions
            // does it beside serving (a request meanwhile waits for it or reads the
            // database), not before.
            let preload = hss.clone();
            let preloading = plan.thread(Job::HssPreload).map(|t| t.name.clone());
            // With an external HSS there is nothing to preload.
            preloading
                .map(|name| {
                    std::thread::Builder::new().name(name).spawn(move || {
                        let t = std::time::Instant::now();
                        match preload.preload() {
                            Ok(n) => tracing::info!(
                                "HSS: {n} subscriber profiles preloaded in {} ms",
                                t.elapsed().as_millis()
                            ),
                            Err(e) => tracing::warn!("HSS preload: {e}"),
                        }
                    })
                })
                .transpose()
                .map_err(StartError::spawn("HSS preload thread"))?;
            let n = cfg.node.slices;
            let ep = S1apEndpoint::new(mcfg.clone(), n, cfg.slice_policy);
            let (ck, mut restore, found) = open_state(&cfg.state, &ep, n, &plan)?;
            checkpoints_found = found;
            if let Some(c) = &cfg.policy.cdr {
                cdr = Some(
                    pepc_node::charging::CdrWriter::start(c.clone(), &thread_of(&plan, Job::Cdr)?)
                        .map_err(StartError::Cdr)?,
                );
            }
            let cdr_sink = cdr.as_ref().map(|w| w.sink());
            // Every slice's recording file is created now: one that cannot be is a
            // start failure, not a silent gap.
            let mut records = (0..n)
                .map(|s| {
                    cfg.record
                        .as_ref()
                        .map(|base| {
                            let p = pepc_node::record::slice_path(base, s);
                            pepc_node::record::create(&p)
                                .map_err(|source| StartError::Record { path: p, source })
                        })
                        .transpose()
                })
                .collect::<Result<Vec<_>, StartError>>()?;
            let mut state = |s: usize| SliceState {
                sink: ck.as_ref().map(|c| c.sink()),
                cdr: cdr_sink.clone(),
                restore: std::mem::take(&mut restore[s]),
                record: records[s].take(),
            };
            // Policy: the embedded PCRF (its table shared with the API), or one Gx
            // client for the node.
            let mut pcrfs: Vec<Box<dyn pepc_node::proxy::PcrfBackend>> = match &cfg.policy.mode {
                crate::policy::PcrfMode::Embedded(t) => {
                    let p = pepc_pcrf::EmbeddedPcrf::new(t.clone());
                    embedded_pcrf = Some(p.clone());
                    (0..n).map(|_| Box::new(p.clone()) as _).collect()
                }
                crate::policy::PcrfMode::Diameter(d) => {
                    let ids = pepc_slice::ids::SignalingIds::new(n);
                    let route = Box::new(move |id| ids.slice_of(id));
                    let thread = thread_of(&plan, Job::Gx)?;
                    pepc_node::proxy::gx::GxBackend::start_routed((**d).clone(), n, route, &thread)
                        .map_err(StartError::spawn("starting the Gx client"))?
                        .into_iter()
                        .map(|b| Box::new(b) as _)
                        .collect()
                }
            };
            // Each slice reaches the HSS through the node's proxy: the embedded HSS
            // inline on its control thread, or one S6a client for the node whose
            // answers go back to the slice the MME UE S1AP ID names.
            let mut proxies: Vec<Proxy> = match &cfg.hss_mode {
                HssMode::Embedded => (0..n)
                    .map(|_| Proxy::embedded(hss.clone(), pepc_mme::mme::urandom()))
                    .collect(),
                HssMode::Diameter(d) => {
                    let ids = pepc_slice::ids::SignalingIds::new(n);
                    let route = Box::new(move |id| ids.slice_of(id));
                    let thread = thread_of(&plan, Job::S6a)?;
                    S6aBackend::start_routed((**d).clone(), n, route, &thread)
                        .map_err(StartError::spawn("starting the S6a client"))?
                        .into_iter()
                        .map(|b| Proxy::new(Box::new(b)))
                        .collect()
                }
            };
            let mut proxies: Vec<Proxy> = proxies
                .drain(..)
                .zip(pcrfs.drain(..))
                .map(|(p, b)| p.with_pcrf(b))
                .collect();
            if n == 1 {
                let mut mme = Mme::new(mcfg.clone(), std::time::Instant::now());
                mme.set_role(ep.role(0));
                // The endpoint runs inline in the only slice's control thread.
                let mut d = SliceMme::inline(transport, mme, proxies.remove(0));
                d.state = state(0);
                gauges.push(d.gauges());
                drivers.push(Some(Box::new(d)));
            } else {
                let mmes = proxies
                    .into_iter()
                    .map(|p| (Mme::new(mcfg.clone(), std::time::Instant::now()), p))
                    .collect();
                let (t, slices) = start_signaling(transport, ep, mmes, &plan)
                    .map_err(StartError::spawn("starting the S1AP endpoint thread"))?;
                endpoint = Some(t);
                for (s, mut d) in slices.into_iter().enumerate() {
                    d.state = state(s);
                    gauges.push(d.gauges());
                    drivers.push(Some(Box::new(d)));
                }
            }
            checkpointer = ck;
        }
        let node = Node::start(&cfg.node, &plan, &mut |s| {
            drivers.get_mut(s).and_then(|d| d.take())
        })?;
        use pepc_node::io::holder::{in_use, Proto};
        let metrics = match cfg.metrics {
            None => None,
            Some(a) => {
                let source = crate::metrics::NodeMetrics {
                    data: node.stats_reader(),
                    slices: gauges.clone(),
                    endpoint: endpoint.as_ref().map(|e: &EndpointThread| e.gauges.clone()),
                    started: std::time::Instant::now(),
                    ports: [("s1u", node.s1u_io.clone()), ("sgi", node.sgi_io.clone())],
                    checkpoints: checkpointer.as_ref().map(|c| c.stats.clone()),
                };
                let thread = thread_of(&plan, Job::Metrics)?;
                Some(
                    pepc_mgmt::MetricsServer::start(a, Arc::new(source), &thread).map_err(|e| {
                        StartError::Listen {
                            key: "metrics.listen",
                            source: in_use(e, a, Proto::Tcp),
                        }
                    }),
                )
            }
        };
        let api = match &cfg.api {
            None => None,
            Some(a) => {
                let backend = crate::api::NodeApi {
                    hss: hss.clone(),
                    slices: gauges.clone(),
                    data: node.stats_reader(),
                    endpoint: endpoint.as_ref().map(|e: &EndpointThread| e.gauges.clone()),
                    started: std::time::Instant::now(),
                    config: shown_config(cfg),
                    pcrf: embedded_pcrf.clone(),
                    io: (
                        node.s1u_io.description.clone(),
                        node.sgi_io.description.clone(),
                    ),
                };
                use pepc_mgmt::api::ApiStartError as E;
                let thread = thread_of(&plan, Job::Api)?;
                Some(
                    pepc_mgmt::api::start(a.listen, a.token.clone(), Arc::new(backend), &thread)
                        .map_err(|e| match e {
                            E::NeedsToken(t) => StartError::ApiToken(t),
                            E::Listen { listen, source } => StartError::Listen {
                                key: "api.listen",
                                source: in_use(source, listen, Proto::Tcp),
                            },
                        }),
                )
            }
        };
        // A node whose metrics or API cannot listen is refused at start: running on
        // without them (as before) left the operator blind with exit 0. The demo alone
        // takes them as optional (`mgmt_optional`).
        let o = cfg.mgmt_optional;
        let (metrics, api) = match (optional(metrics, o), optional(api, o)) {
            (Ok(m), Ok(a)) => (m, a),
            (Err(e), _) | (_, Err(e)) => {
                if let Some(e) = endpoint {
                    e.stop();
                }
                node.shutdown();
                if let Some(c) = checkpointer {
                    c.stop();
                }
                return Err(e);
            }
        };
        Ok(Epc {
            plan,
            node,
            hss,
            s1mme,
            endpoint,
            gauges,
            checkpointer,
            checkpoints_found,
            metrics,
            api,
            cdr,
            pcrf: embedded_pcrf,
        })
    }

    /// A thread of the node that stopped while it should run (it panicked), named.
    pub fn failed(&self) -> Option<String> {
        if self.endpoint.as_ref().is_some_and(|e| e.failed()) {
            return Some("the S1AP endpoint thread stopped".into());
        }
        self.node.failed()
    }

    /// Stop after a failure: commit the checkpoints already made and say so; the
    /// threads are left (the process exits).
    pub fn abort(mut self) -> String {
        match self.checkpointer.take() {
            Some(c) => {
                let st = c.stop();
                format!(
                    "; {} checkpoints committed",
                    st.records.load(std::sync::atomic::Ordering::Relaxed)
                )
            }
            None => String::new(),
        }
    }

    /// UEs restored from the state store at start (so far), and those that failed.
    pub fn restored(&self) -> (u64, u64) {
        self.gauges.iter().fold((0, 0), |(a, b), g| {
            (
                a + g.restored.load(std::sync::atomic::Ordering::Relaxed),
                b + g.restore_failed.load(std::sync::atomic::Ordering::Relaxed),
            )
        })
    }

    /// UEs each slice's MME holds now.
    pub fn slice_ues(&self) -> Vec<u64> {
        self.gauges
            .iter()
            .map(|g| g.ues.load(std::sync::atomic::Ordering::Relaxed))
            .collect()
    }

    /// Stop every thread; returns the node's final figures (per slice and demux).
    pub fn stop(self) -> String {
        fn overload_line(o: &pepc_mme::OverloadStats) -> String {
            format!(
                "overload control: {} periods ({} ms overloaded), {} slice congestions, peak backlog {} messages\n",
                o.starts, o.overloaded_ms, o.slice_congestions, o.peak_backlog
            )
        }
        let (restored, failed) = self.restored();
        let mut stats = self.node.stats().to_string();
        for (s, n) in self.slice_ues().iter().enumerate() {
            stats += &format!("slice {s}: {n} UEs\n");
        }
        fn sctp_line(c: &pepc_sctp::AssocCounters) -> String {
            format!(
                "s1-mme sctp: {} DATA chunks received ({} duplicates suppressed), {} messages delivered; {} sent, {} retransmitted ({} T3-rtx expiries, {} fast retransmits); {} heartbeats ({} answered), {} peer restarts\n",
                c.data_chunks_rx, c.dup_tsns_rx, c.delivered, c.data_chunks_tx, c.retransmissions, c.t3_expiries, c.fast_retransmits, c.heartbeats_sent, c.heartbeat_acks, c.peer_restarts
            )
        }
        if let Some(e) = self.endpoint {
            let g = e.gauges.clone();
            let ep = e.stop();
            if let Some(c) = g.sctp.final_totals.lock().ok().and_then(|c| *c) {
                stats += &sctp_line(&c);
            }
            if let Some(ep) = ep {
                let st = &ep.stats;
                stats += &format!(
                    "s1ap endpoint: {} eNBs set up, {} messages steered to slices, {} unknown UE IDs, {} decode errors\n",
                    st.s1_setups, st.demuxed, st.unknown_ue_ids, st.s1ap_decode_errors
                );
                stats += &overload_line(ep.overload_stats());
            }
        }
        self.node.shutdown();
        for (s, g) in self.gauges.iter().enumerate() {
            if let Some(o) = g.final_overload.lock().ok().and_then(|s| s.clone()) {
                stats += &overload_line(&o);
            }
            if let Some(c) = g.sctp.final_totals.lock().ok().and_then(|c| *c) {
                stats += &sctp_line(&c);
            }
            let Some(m) = g.final_stats.lock().ok().and_then(|s| s.clone()) else {
                continue;
            };
            stats += &format!(
                "mme slice {s}: {} attaches ({} rejected), {} service requests, {} TAU, {} detaches ({} implicit), {} pagings, {} handovers; NAS: {} bad MAC, {} replays, {} discarded by the security gate, {} re-authentications ({} failed); {} procedure timeouts, {} release guards, {} unauthenticated expired, {} refused, {} turned away for congestion (#22)\n",
                m.attaches,
                m.attach_rejects,
                m.service_requests,
                m.tau,
                m.detaches,
                m.implicit_detaches,
                m.pagings,
                m.path_switches + m.s1_handovers,
                m.nas_bad_mac,
                m.nas_replays,
                m.nas_gate_discards,
                m.nas_reauthentications,
                m.nas_reauth_failures,
                m.procedure_timeouts,
                m.release_guard_expiries,
                m.unauth_expired,
                m.unauth_refused,
                m.congestion_rejects,
            );
            stats += &ledger_line(s, &m.procedures);
        }
        if let Some(c) = self.checkpointer {
            // The slices are stopped: what they sent is committed before this returns.
            let st = c.stop();
            use std::sync::atomic::Ordering::Relaxed;
            stats += &format!(
                "state store: {} checkpoints and {} removals in {} commits (longest wait {} µs, {} errors); {} of {} found at start restored, {failed} failed\n",
                st.records.load(Relaxed),
                st.deletes.load(Relaxed),
                st.commits.load(Relaxed),
                st.max_delay_us.load(Relaxed),
                st.errors.load(Relaxed),
                restored,
                self.checkpoints_found,
            );
        }
        stats
    }
}

/// One slice's procedure ledger as the stop summary says it: each procedure that
/// started, with what became of it (the failures by cause).
fn ledger_line(slice: usize, l: &pepc_mme::mme::Ledger) -> String {
    use pepc_mme::mme::Proc;
    let mut parts = vec![];
    for p in Proc::ALL.into_iter().filter(|p| l.started(*p) > 0) {
        let mut part = format!(
            "{} {} started, {} succeeded, {} failed",
            p.name(),
            l.started(p),
            l.succeeded(p),
            l.failed(p)
        );
        let causes: Vec<String> = l
            .failures()
            .filter(|(q, _, _)| *q == p)
            .map(|(_, why, n)| format!("{} {n}", why.label()))
            .collect();
        if !causes.is_empty() {
            part += &format!(" ({})", causes.join(", "));
        }
        if l.open(p) > 0 {
            part += &format!(", {} in progress", l.open(p));
        }
        parts.push(part);
    }
    if parts.is_empty() {
        return String::new();
    }
    format!("procedures slice {slice}: {}\n", parts.join("; "))
}

/// The S1-U address our MME hands out when the node binds a wildcard address.
pub fn advertised_s1u(bind: Ipv4Addr) -> Ipv4Addr {
    if bind.is_unspecified() {
        Ipv4Addr::LOCALHOST
    } else {
        bind
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_run_the_mme_on_a_file_hss() {
        let c = EpcConfig::default_config();
        let m = c.mme.expect("MME on by default");
        assert_eq!(m.plmn, Plmn([0x00, 0xf1, 0x10]));
        assert_eq!(c.hss, HssStore::File("pepc-hss.redb".into()));
        assert_eq!(c.transport.udp_port, 9899);
        assert_eq!(c.transport.sctp_port, 36412);
        assert_eq!(c.node.slices, 1);
    }

    #[test]
    fn plmn_digits_become_tbcd() {
        assert_eq!(parse_plmn("00101").unwrap(), Plmn([0x00, 0xf1, 0x10]));
        assert_eq!(parse_plmn("310410").unwrap(), Plmn([0x13, 0x00, 0x14]));
        assert!(parse_plmn("0010").is_err());
        assert!(parse_plmn("0010a").is_err());
    }

    #[test]
    fn errors_name_the_key() {
        let e = EpcConfig::parse("[mme]\nplmn = \"12\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mme.plmn"), "{e}");
        let e = EpcConfig::parse("[mme]\neea = [\"eea9\"]\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mme.eea") && e.contains("eea9"), "{e}");
        let e = EpcConfig::parse("[mme]\nbogus = 1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("bogus"), "{e}");
        let e = EpcConfig::parse("[s1mme]\ntransport = \"tcp\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("s1mme.transport"), "{e}");
        let e = EpcConfig::parse("[s1u]\nbind = \"nowhere\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("s1u.bind"), "{e}");
        let e = EpcConfig::parse("[synthetic]\nusers = 10\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mme.enabled"), "{e}");
        let e = EpcConfig::parse("[hss]\ndb = \"\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("hss.db"), "{e}");
    }

    /// Every section's errors carry the line of the operator's file and the key: the
    /// node's sections were parsed from a re-serialised copy (wrong lines), ours had
    /// no line, and an unknown section's hint listed only the node's.
    #[test]
    fn errors_carry_the_files_line_and_the_key_in_every_section() {
        // Line numbers of `bad` in a file of comments, blank lines and other sections.
        let at = |section: &str, bad: &str| {
            let text = format!(
                "# a node\n\n[mme]\nname = \"x\"\n# comment\n\n[s1u]\nbind = \"127.0.0.1:2152\"\n\n{section}\n# before\n{bad}\n"
            );
            let line = text.lines().position(|l| l == bad).unwrap() + 1;
            (EpcConfig::parse(&text).unwrap_err().to_string(), line)
        };
        for (section, bad, key) in [
            ("[node]", "slicez = 2", "node.slicez"),
            ("[node]", "slices = 0", "node.slices"),
            ("[node]", "slices = \"two\"", "node.slices"),
            ("[node]", "ue_pool = \"10.0.0.0\"", "node.ue_pool"),
            ("[sgi]", "mode = \"pipe\"", "sgi.mode"),
            ("[synthetic]", "users = -1", "synthetic.users"),
            ("[s1mme]", "transport = \"tcp\"", "s1mme.transport"),
            ("[s1mme]", "udp_port = 70000", "s1mme.udp_port"),
            ("[s1mme]", "rto_min_ms = 5000", "s1mme.rto_min_ms"),
            (
                "[s1mme]",
                "heartbeat_interval_s = 0",
                "s1mme.heartbeat_interval_s",
            ),
            ("[s1mme]", "path_max_retrans = 0", "s1mme.path_max_retrans"),
            ("[hss]", "db = \"\"", "hss.db"),
            ("[hss]", "mode = \"s6a\"", "hss.mode"),
            ("[state]", "store = \"redis\"", "state.store"),
            ("[log]", "level = \"loud\"", "log.level"),
            ("[metrics]", "listen = \"nowhere\"", "metrics.listen"),
            ("[api]", "listen = \"0.0.0.0:1\"", "api.token"),
            ("[debug]", "recrd = \"x\"", "debug.recrd"),
            ("[charging]", "bogus = 1", "charging.bogus"),
        ] {
            let (e, line) = at(section, bad);
            assert!(
                e.contains(&format!("line {line}")) && e.contains(&format!("`{key}`")),
                "{bad}: wants line {line} and {key}: {e}"
            );
        }
        // The node's [qos] and egress keys are part of pepc's file too.
        let c = EpcConfig::parse(
            "[s1u]\negress_mbps = 100\n[qos]\nqueue_packets = 512\n[sgi]\negress_mbps = 200\n",
        )
        .unwrap();
        let [sgi, s1u] = &c.node.egress;
        assert_eq!((sgi.rate_mbps, s1u.rate_mbps), (200, 100));
        assert_eq!(sgi.queue_packets, 512);
        // [mme] is on line 3 with `name`: a key of a section given twice in the file
        // is found where the file sets it.
        let e = EpcConfig::parse("\n\n[mme]\nname = \"x\"\nplmn = \"12\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 5") && e.contains("mme.plmn"), "{e}");
        // An unknown section names every section in its hint.
        let (e, line) = at("[nodes]", "slices = 2");
        assert!(
            e.contains(&format!("line {}", line - 2)) && e.contains("nodes"),
            "{e}"
        );
        for s in [
            "node",
            "s1u",
            "sgi",
            "qos",
            "synthetic",
            "mme",
            "s1mme",
            "hss",
            "state",
            "log",
            "metrics",
            "api",
            "pcrf",
            "charging",
            "debug",
        ] {
            assert!(
                e.contains(&format!("`{s}`")),
                "{s} missing from the hint: {e}"
            );
        }
        // Not TOML at all: the line still.
        let e = EpcConfig::parse("[node]\nslices = = 2\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 2"), "{e}");
    }

    #[test]
    fn diameter_mode_is_validated_key_by_key() {
        let c = EpcConfig::default_config();
        assert!(matches!(c.hss_mode, HssMode::Embedded));
        let d = "[hss]\nmode = \"diameter\"\n";
        let c = EpcConfig::parse(&format!(
            "{d}peers = [\"127.0.0.1:3868\", \"hss2:3868\"]\ndestination_host = \"hss.test\"\n"
        ))
        .unwrap();
        let HssMode::Diameter(dc) = &c.hss_mode else {
            panic!("{:?}", c.hss_mode)
        };
        assert_eq!(dc.peers.len(), 2);
        assert_eq!(dc.base.request_timeout, Duration::from_millis(2000));
        assert_eq!(dc.base.watchdog, Duration::from_secs(30));
        assert_eq!(dc.app.destination_host.as_deref(), Some("hss.test"));
        assert_eq!(dc.app.visited_plmn, [0x00, 0xf1, 0x10]);
        for (extra, key) in [
            ("peers = []\n", "hss.peers"),
            ("peers = [\"nohost\"]\n", "hss.peers"),
            ("origin_host = \"\"\n", "hss.origin_host"),
            ("destination_realm = \"a b\"\n", "hss.destination_realm"),
            ("watchdog_s = 1\n", "hss.watchdog_s"),
            ("request_timeout_ms = 0\n", "hss.request_timeout_ms"),
            ("reconnect_s = 0\n", "hss.reconnect_s"),
        ] {
            let e = EpcConfig::parse(&format!("{d}{extra}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{extra}: {e}");
        }
        let e = EpcConfig::parse("[hss]\nmode = \"s6a\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("hss.mode"), "{e}");
        // 2 x 3000 ms is not below the MME's 5000 ms: refused, and said why.
        let e = EpcConfig::parse(&format!("{d}request_timeout_ms = 3000\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("mme.hss_timeout_ms") && e.contains("twice"),
            "{e}"
        );
        let c = EpcConfig::parse(&format!(
            "[mme]\nhss_timeout_ms = 7000\n{d}request_timeout_ms = 3000\n"
        ))
        .unwrap();
        assert_eq!(c.mme.unwrap().hss_timeout, Duration::from_secs(7));
    }

    #[test]
    fn synthetic_mode_disables_the_mme() {
        let c = EpcConfig::parse("[mme]\nenabled = false\n[synthetic]\nusers = 10\nrate = 5\n")
            .unwrap();
        assert!(c.mme.is_none());
        assert_eq!(c.node.synthetic_users, 10);
    }

    #[test]
    fn debug_record_names_a_path_and_needs_the_mme() {
        let c = EpcConfig::parse("[debug]\nrecord = \"/tmp/pepc.rec\"\n").unwrap();
        assert_eq!(c.record, Some(PathBuf::from("/tmp/pepc.rec")));
        assert_eq!(EpcConfig::parse("").unwrap().record, None);
        let e = EpcConfig::parse(
            "[mme]\nenabled = false\n[synthetic]\nusers = 10\nrate = 5\n[debug]\nrecord = \"x\"\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("debug.record"), "{e}");
    }

    /// The struct fields serde takes for `T` (its keys, with `deny_unknown_fields`).
    fn fields_of<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
        use serde::de::{Error, Visitor};
        struct Capture<'a>(&'a mut Option<&'static [&'static str]>);
        impl<'de> serde::Deserializer<'de> for Capture<'_> {
            type Error = serde::de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(Self::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                *self.0 = Some(fields);
                Err(Self::Error::custom("captured"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
                enum identifier ignored_any
            }
        }
        let mut f = None;
        let _ = T::deserialize(Capture(&mut f));
        f.expect("a struct")
    }

    /// `pepc config default` (crates/pepc/pepc.toml) is the default configuration:
    /// taken as it is, it gives what no file gives.
    #[test]
    fn the_default_file_is_the_default_configuration() {
        let from_file = EpcConfig::parse(crate::config_doc::DEFAULT_TOML).unwrap();
        assert_eq!(
            format!("{from_file:?}"),
            format!("{:?}", EpcConfig::default_config())
        );
    }

    /// Every key the code takes is in the reference, section by section, and every
    /// section of the file is one the code has.
    #[test]
    fn every_key_the_code_takes_is_documented() {
        use crate::config_doc::{documented_keys, sections};
        use pepc_node::config as n;
        let by_section: Vec<(&str, &[&str])> = vec![
            ("node", fields_of::<n::NodeSection>()),
            ("s1u", fields_of::<n::S1uSection>()),
            ("sgi", fields_of::<n::SgiSection>()),
            ("qos", fields_of::<n::QosSection>()),
            ("synthetic", fields_of::<n::SyntheticSection>()),
            ("mme", fields_of::<MmeSection>()),
            ("s1mme", fields_of::<S1mmeSection>()),
            ("hss", fields_of::<HssSection>()),
            ("state", fields_of::<StateSection>()),
            ("log", fields_of::<crate::logging::LogSection>()),
            ("metrics", fields_of::<MetricsSection>()),
            ("api", fields_of::<ApiSection>()),
            ("pcrf", fields_of::<crate::policy::PcrfSection>()),
            ("charging", fields_of::<crate::policy::ChargingSection>()),
            ("debug", fields_of::<DebugSection>()),
        ];
        let mut names: Vec<&str> = by_section.iter().map(|s| s.0).collect();
        let mut file_sections: Vec<&str> = fields_of::<ConfigFile>().to_vec();
        names.sort();
        file_sections.sort();
        assert_eq!(
            names, file_sections,
            "a section of the file is not checked here"
        );
        let mut doc_sections: Vec<String> = sections().into_iter().map(|s| s.name).collect();
        doc_sections.sort();
        assert_eq!(doc_sections, names);
        let mut missing = Vec::new();
        for (section, fields) in &by_section {
            let documented = documented_keys(section);
            for f in *fields {
                // Arrays of tables are documented by their example's keys.
                if (*section, *f) == ("pcrf", "rule") || (*section, *f) == ("pcrf", "monitoring") {
                    continue;
                }
                if !documented.iter().any(|d| d == f) {
                    missing.push(format!("{section}.{f}"));
                }
            }
        }
        for (table, fields) in [
            ("rule", fields_of::<crate::policy::RuleSection>()),
            (
                "monitoring",
                fields_of::<crate::policy::MonitoringSection>(),
            ),
        ] {
            let documented = documented_keys("pcrf");
            for f in fields {
                if !documented.iter().any(|d| d == f) {
                    missing.push(format!("pcrf.{table}.{f}"));
                }
            }
        }
        assert!(
            missing.is_empty(),
            "not in crates/pepc/pepc.toml: {missing:?}"
        );
    }
}
