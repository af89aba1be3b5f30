//! The node's logs: `tracing` events from every crate, written to stderr by one
//! subscriber installed at start. `RUST_LOG` (an `EnvFilter` directive such as
//! `info,pepc_mme=debug`) overrides `[log] level`; `[log] format` is `text` or `json`
//! (one object per line, for a log shipper).
//!
//! The keys, their defaults and what each means: `crates/pepc/pepc.toml` (the
//! one source; `pepc config default` prints it, docs/configuration.md is made
//! from it).
//!
//! Spans: `slice{slice=N}` around each slice thread, `ue{mme_ue_s1ap_id, enb_ue_s1ap_id,
//! procedure}` around a UE's signaling (DEBUG, so it costs nothing at INFO). No IMSI
//! and no key is ever a field; key types print as `<redacted>`.

use serde::Deserialize;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    pub level: String,
    pub format: String,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection {
            level: "info".into(),
            format: "text".into(),
        }
    }
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

/// A validated `[log]` section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogConfig {
    pub filter: String,
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogSection::default().validate().expect("valid defaults")
    }
}

impl LogSection {
    pub fn validate(&self) -> Result<LogConfig, crate::error::ConfigError> {
        let format = match self.format.as_str() {
            "text" => LogFormat::Text,
            "json" => LogFormat::Json,
            other => {
                return Err(crate::error::invalid!(
                    "log.format",
                    "must be text or json, got {other:?}"
                ))
            }
        };
        check_levels(&self.level)?;
        EnvFilter::builder().parse(&self.level).map_err(|source| {
            crate::error::ConfigError::LogLevel {
                level: self.level.clone(),
                source,
            }
        })?;
        Ok(LogConfig {
            filter: self.level.clone(),
            format,
        })
    }
}

const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];

/// `EnvFilter` reads a bare word as a target enabled at every level (`"loud"`,
/// `"warning"`: every event of a target no crate has, so nothing at all is logged).
/// Here each directive is a level, or `target[span]=level`, and a level is a name.
fn check_levels(spec: &str) -> Result<(), crate::error::ConfigError> {
    let bad = |d: &str, why: &str| {
        Err(crate::error::invalid!(
            "log.level",
            "{d:?} {why}: use one of {} or target=level (e.g. \"info,pepc_mme=debug\")",
            LEVELS.join(" | ")
        ))
    };
    if spec.trim().is_empty() {
        return bad(spec, "is empty");
    }
    for d in spec.split(',').map(str::trim) {
        // The level is after the last '=' (a span's field filter may hold '=' too).
        let level = match d.rsplit_once('=') {
            Some((_, l)) => l,
            None => d,
        };
        if !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level.trim())) {
            return bad(d, "is not a level");
        }
    }
    Ok(())
}

/// Installs the process's subscriber (once; later calls change nothing). `RUST_LOG`,
/// when set and valid, wins over the configured level.
pub fn init(cfg: &LogConfig) {
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| EnvFilter::builder().parse(v).ok())
        .unwrap_or_else(|| EnvFilter::new(&cfg.filter));
    use std::io::IsTerminal;
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(true)
        // Its report of a failed write is an eprintln!, which panics when stderr is a
        // closed pipe (`pepc run 2>&1 | head -1`): the line is dropped instead.
        .log_internal_errors(false);
    let _ = match cfg.format {
        LogFormat::Text => b.try_init(),
        LogFormat::Json => b
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .try_init(),
    };
}
