//! The `pepc` library's errors: a configuration that cannot run ([`ConfigError`]) and a
//! node that cannot start ([`StartError`]). Every message names the config key, file,
//! address or thread, as the operator reads it (and the tests assert on some texts).

use std::net::{AddrParseError, IpAddr};
use std::path::PathBuf;

/// What is wrong with a `pepc run` configuration (file, TOML or a key's value).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The node's sections (`[node]`, `[s1u]`, `[sgi]`, `[synthetic]`) and the file.
    #[error(transparent)]
    Node(#[from] pepc_node::config::ConfigError),
    /// Not TOML, an unknown key or section, or a value of the wrong type: toml's
    /// message, the line in the operator's file and the key it is about.
    #[error("config{}: {message}{}", key.as_ref().map(|k| format!(" key `{k}`")).unwrap_or_default(), line.map(|l| format!(" (line {l})")).unwrap_or_default())]
    Syntax {
        line: Option<usize>,
        key: Option<String>,
        message: String,
    },
    /// An error about a key the file sets, with that key's line.
    #[error("{source} (line {line})")]
    At {
        line: usize,
        #[source]
        source: Box<ConfigError>,
    },
    /// The file could not be read, or an error in it (`path` names the file).
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: Box<ConfigError>,
    },
    /// A key's value is out of its range, not one of its choices, or conflicts.
    #[error("config key `{key}`: {reason}")]
    Invalid { key: String, reason: String },
    /// Two keys that only make sense together (`keys` is their quoted names).
    #[error("config keys {keys}: {reason}")]
    Keys {
        keys: &'static str,
        reason: &'static str,
    },
    /// A key of the `[[pcrf.rule]]` named `rule`.
    #[error("config key `{key}` of {rule:?}: {reason}")]
    Rule {
        key: &'static str,
        rule: String,
        reason: String,
    },
    /// A flow of the `[[pcrf.rule]]` named `rule` is no IPFilterRule we take.
    #[error("config key `pcrf.rule.flows` of {rule:?}: {source}")]
    Flows {
        rule: String,
        #[source]
        source: pepc_mme::pcrf::PolicyError,
    },
    /// A PCC rule or a policy entry is inconsistent.
    #[error("config key `{key}`: {source}")]
    Policy {
        key: &'static str,
        #[source]
        source: pepc_mme::pcrf::PolicyError,
    },
    #[error("config key `mme.plmn`: {0}")]
    Plmn(#[from] PlmnParseError),
    #[error("config key `mme.slice_policy`: {0}")]
    SlicePolicy(#[from] pepc_mme::UnknownSlicePolicy),
    #[error("config key `log.level`: {level:?}: {source}")]
    LogLevel {
        level: String,
        #[source]
        source: tracing_subscriber::filter::ParseError,
    },
    /// `api.listen` or `metrics.listen` is not an address:port.
    #[error("config key `{key}`: {value:?} is not an address:port ({source})")]
    Listen {
        key: &'static str,
        value: String,
        #[source]
        source: AddrParseError,
    },
    /// The API on a non-loopback address without `api.token`.
    #[error(transparent)]
    ApiToken(#[from] pepc_mgmt::api::NeedsToken),
}

impl ConfigError {
    /// The dotted key ("node.slices") the error is about, if one.
    pub fn key(&self) -> Option<String> {
        use pepc_node::config::ConfigError as N;
        match self {
            ConfigError::Node(N::Invalid { key, .. }) => Some(key.clone()),
            ConfigError::Node(N::Layout { key, .. }) => Some(key.to_string()),
            ConfigError::Node(_) => None,
            ConfigError::Syntax { key, .. } => key.clone(),
            ConfigError::At { source, .. } | ConfigError::File { source, .. } => source.key(),
            ConfigError::Invalid { key, .. } => Some(key.clone()),
            // The first of the keys (`a` and `b`).
            ConfigError::Keys { keys, .. } => keys.split('`').nth(1).map(str::to_string),
            ConfigError::Rule { key, .. } | ConfigError::Policy { key, .. } => {
                Some(key.to_string())
            }
            ConfigError::Flows { .. } => Some("pcrf.rule.flows".into()),
            ConfigError::Plmn(_) => Some("mme.plmn".into()),
            ConfigError::SlicePolicy(_) => Some("mme.slice_policy".into()),
            ConfigError::LogLevel { .. } => Some("log.level".into()),
            ConfigError::Listen { key, .. } => Some(key.to_string()),
            ConfigError::ApiToken(_) => Some("api.listen".into()),
        }
    }
}

/// PLMN digits that are no MCC + MNC.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlmnParseError {
    #[error("{0:?} must be digits only")]
    NotDigits(String),
    #[error("{digits:?} must be 5 or 6 digits (MCC + MNC), got {len}")]
    Length { digits: String, len: usize },
    #[error(transparent)]
    Tbcd(#[from] pepc_s1ap::PlmnError),
}

/// Why [`crate::epc::Epc::start`] (or [`crate::epc::open_hss`]) failed.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A thread the node was about to start is not in its plan (a bug: the plan is
    /// built from the same configuration).
    #[error("the node's plan has no {0} thread")]
    NotPlanned(String),
    /// The S1-MME transport could not listen.
    #[error("S1-MME listener ({backend:?} on {ip} SCTP port {sctp_port} / UDP port {udp_port}): {source}")]
    S1mme {
        backend: pepc_sctp::transport::Backend,
        ip: IpAddr,
        sctp_port: u16,
        udp_port: u16,
        #[source]
        source: std::io::Error,
    },
    /// The HSS database (`hss.db`, or the in-memory one) could not be opened.
    #[error("{}: {source}", match path { Some(p) => format!("config key `hss.db` ({})", p.display()), None => "in-memory HSS".to_string() })]
    Hss {
        path: Option<PathBuf>,
        #[source]
        source: pepc_hss::HssError,
    },
    /// A file's directory (`key` names the file) does not exist.
    #[error("config key `{key}`: directory {} does not exist", dir.display())]
    NoDir { key: &'static str, dir: PathBuf },
    /// The state store (`[state]`) could not be opened or read.
    #[error(transparent)]
    StateStore(#[from] pepc_store::StoreError),
    /// The metrics endpoint or the API could not listen (`key` names its address).
    #[error("config key `{key}`: {source}")]
    Listen {
        key: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The API refused its configuration (a token is needed off loopback).
    #[error(transparent)]
    ApiToken(#[from] pepc_mgmt::api::NeedsToken),
    /// A thread or client of the node could not be started (`what` names it).
    #[error("{what}: {source}")]
    Spawn {
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// The usage record file could not be opened.
    #[error("usage records (`charging.cdr_path`): {0}")]
    Cdr(#[source] std::io::Error),
    /// A slice's MME recording file could not be created.
    #[error("config key `debug.record`: cannot create {}: {source}", path.display())]
    Record {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The node (ports, slices, demux).
    #[error(transparent)]
    Node(#[from] pepc_node::node::StartError),
}

impl StartError {
    pub(crate) fn spawn(what: &'static str) -> impl FnOnce(std::io::Error) -> StartError {
        move |source| StartError::Spawn { what, source }
    }
}

/// `ConfigError::Invalid` for key `$key` (a format string: `"{sec}.peers"`), the reason
/// formatted from the rest.
macro_rules! invalid {
    ($key:literal, $($reason:tt)+) => {
        $crate::error::ConfigError::Invalid {
            key: format!($key),
            reason: format!($($reason)+),
        }
    };
}
pub(crate) use invalid;
