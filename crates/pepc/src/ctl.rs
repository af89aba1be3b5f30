//! `pepc ctl`: the management API from the command line, against a running node —
//! UEs, eNBs, slices, the node, subscribers, network-initiated detach. Tables by
//! default, `--json` for scripts. The token comes from `--token` or `PEPC_API_TOKEN`
//! (never echoed).

use crate::subscriber::AddArgs;
use clap::{Args, Subcommand};
use serde_json::Value;
use std::path::PathBuf;

#[derive(Args)]
pub struct CtlArgs {
    /// The node's API (`[api] listen`).
    #[arg(long, global = true, default_value = "http://127.0.0.1:8080")]
    pub api: String,
    /// Bearer token (`[api] token`); default: $PEPC_API_TOKEN.
    #[arg(long, global = true)]
    pub token: Option<String>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub cmd: CtlCmd,
}

#[derive(Subcommand)]
pub enum CtlCmd {
    /// UEs the node holds.
    Ues {
        /// all | connected | idle
        #[arg(long, default_value = "all")]
        state: String,
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
    /// One UE: slice, state, eNB, PDNs, bearers and usage.
    Ue { imsi: String },
    /// Detach a UE (network-initiated).
    Detach { imsi: String },
    /// eNBs set up, with their TAIs and connected UEs.
    Enbs,
    /// Per-slice figures.
    Slices,
    /// Version, uptime, configuration (secrets removed).
    Node,
    /// Subscribers of the running node's HSS.
    #[command(subcommand)]
    Subscriber(CtlSubscriber),
}

#[derive(Subcommand)]
pub enum CtlSubscriber {
    List {
        #[arg(long, default_value_t = 100)]
        limit: u32,
        #[arg(long, default_value_t = 0)]
        offset: u64,
    },
    Show {
        imsi: String,
    },
    Add(AddArgs),
    Remove {
        imsi: String,
    },
    /// Bulk import (CSV with a header row, as `pepc subscriber import`).
    Import {
        file: PathBuf,
    },
}

struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

/// Why a `pepc ctl` command failed: its arguments, the HTTP exchange, or the node's
/// answer (its status and error message).
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error(transparent)]
    Args(#[from] crate::subscriber::SubscriberError),
    #[error("{0} without a body")]
    NoBody(String),
    #[error("{url}: {source}")]
    Http {
        url: String,
        #[source]
        source: ureq::Error,
    },
    /// The API answered with an error status (its message, when it gave one).
    #[error("{url}: {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    /// Something answered at `url` that is not pepc's management API (no JSON).
    #[error("{url}: {status}: not pepc's management API (`--api`): it answered {body:?}")]
    NotApi {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{}: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Client {
    fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<(&str, String)>,
    ) -> Result<Value, CtlError> {
        let url = format!("{}/api/v1{path}", self.base.trim_end_matches('/'));
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let r = match (method, body) {
            ("GET", _) => {
                let mut q = self.agent.get(&url);
                if let Some(a) = &auth {
                    q = q.header("Authorization", a);
                }
                q.call()
            }
            ("DELETE", _) => {
                let mut q = self.agent.delete(&url);
                if let Some(a) = &auth {
                    q = q.header("Authorization", a);
                }
                q.call()
            }
            (_, Some((ct, b))) => {
                let mut q = self.agent.post(&url).header("Content-Type", ct);
                if let Some(a) = &auth {
                    q = q.header("Authorization", a);
                }
                q.send(b)
            }
            (m, None) => return Err(CtlError::NoBody(m.to_string())),
        };
        let mut r = r.map_err(|source| CtlError::Http {
            url: url.clone(),
            source,
        })?;
        let status = r.status().as_u16();
        let text = r
            .body_mut()
            .read_to_string()
            .map_err(|source| CtlError::Http {
                url: url.clone(),
                source,
            })?;
        // Every answer of the API, errors included, is JSON: anything else came from
        // another server at `--api`.
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            return Err(CtlError::NotApi {
                url,
                status,
                body: text.chars().take(80).collect(),
            });
        };
        if status >= 400 {
            let msg = v["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or(v.to_string());
            return Err(CtlError::Refused {
                url,
                status,
                message: msg,
            });
        }
        Ok(v)
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        o => o.to_string(),
    }
}

/// Rows of objects as an aligned table of the given columns.
/// `ctl slices`' second table: each slice's egress classes that queued or dropped
/// (empty when no egress was ever congested).
fn egress_table(v: &Value) -> String {
    let rows: Vec<Value> = v
        .as_array()
        .map_or(&[][..], |x| x)
        .iter()
        .flat_map(|s| {
            let slice = s["slice"].clone();
            s["egress"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(move |mut e| {
                    e["slice"] = slice.clone();
                    e["dropped_total"] = e["dropped"]
                        .as_object()
                        .map_or(0, |d| d.values().filter_map(|n| n.as_u64()).sum::<u64>())
                        .into();
                    e
                })
        })
        .collect();
    if rows.is_empty() {
        return String::new();
    }
    "\n".to_string()
        + &table(
            &rows,
            &[
                ("SLICE", "slice"),
                ("EGRESS", "direction"),
                ("QCI", "qci"),
                ("DEPTH", "depth"),
                ("SENT", "sent"),
                ("PUSHED-BACK", "pushed_back"),
                ("DROPPED", "dropped_total"),
                ("P50-US<=", "delay_us_p50"),
                ("P99-US<=", "delay_us_p99"),
            ],
        )
}

fn table(rows: &[Value], cols: &[(&str, &str)]) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            cols.iter()
                .map(|(_, path)| {
                    let mut v = r;
                    for k in path.split('.') {
                        v = &v[k];
                    }
                    cell(v)
                })
                .collect()
        })
        .collect();
    let widths: Vec<usize> = cols
        .iter()
        .enumerate()
        .map(|(i, (h, _))| {
            cells
                .iter()
                .map(|c| c[i].len())
                .chain([h.len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |vals: Vec<&str>| {
        vals.iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}"))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = line(cols.iter().map(|(h, _)| *h).collect());
    for c in &cells {
        out.push('\n');
        out += &line(c.iter().map(String::as_str).collect());
    }
    out
}

/// How a command's answer is shown as text.
type Render = Box<dyn Fn(&Value) -> String>;

const UE_COLS: &[(&str, &str)] = &[
    ("IMSI", "imsi"),
    ("SLICE", "slice"),
    ("EMM", "emm"),
    ("ECM", "ecm"),
    ("TAC", "tai.tac"),
    ("MME-UE-ID", "mme_ue_s1ap_id"),
    ("PROCEDURE", "procedure"),
];

/// Runs one command; returns what to print.
pub fn run(a: &CtlArgs) -> Result<String, CtlError> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(10)))
        .build()
        .into();
    let c = Client {
        agent,
        base: a.api.clone(),
        token: a
            .token
            .clone()
            .or_else(|| std::env::var("PEPC_API_TOKEN").ok())
            .filter(|t| !t.is_empty()),
    };
    let (v, render): (Value, Render) = match &a.cmd {
        CtlCmd::Ues {
            state,
            limit,
            offset,
        } => (
            c.call(
                "GET",
                &format!("/ues?state={state}&limit={limit}&offset={offset}"),
                None,
            )?,
            Box::new(|v| {
                let rows = v["items"].as_array().cloned().unwrap_or_default();
                format!("{}\n{} UE(s)", table(&rows, UE_COLS), cell(&v["total"]))
            }),
        ),
        CtlCmd::Ue { imsi } => (
            c.call("GET", &format!("/ues/{imsi}"), None)?,
            Box::new(|v| {
                let mut s = table(std::slice::from_ref(v), UE_COLS);
                s += "\n\n";
                s += &table(
                    v["pdns"].as_array().map_or(&[][..], |x| x),
                    &[
                        ("APN", "apn"),
                        ("ADDRESS", "address"),
                        ("DEFAULT-EBI", "default_ebi"),
                    ],
                );
                s += "\n\n";
                s += &table(
                    v["bearers"].as_array().map_or(&[][..], |x| x),
                    &[
                        ("EBI", "ebi"),
                        ("QCI", "qci"),
                        ("ARP", "arp"),
                        ("TEID-UL", "teid_ul"),
                        ("ENB-TEID", "enb_teid"),
                        ("UL-BYTES", "usage.ul_bytes"),
                        ("DL-BYTES", "usage.dl_bytes"),
                    ],
                );
                s
            }),
        ),
        CtlCmd::Detach { imsi } => (
            c.call("DELETE", &format!("/ues/{imsi}"), None)?,
            Box::new(|v| format!("detach of {} started", cell(&v["detached"]))),
        ),
        CtlCmd::Enbs => (
            c.call("GET", "/enbs", None)?,
            Box::new(|v| {
                let rows: Vec<Value> = v
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .map(|mut e| {
                        let tacs: Vec<String> = e["tais"]
                            .as_array()
                            .map_or(vec![], |t| t.iter().map(|x| cell(&x["tac"])).collect());
                        e["tacs"] = Value::String(tacs.join(","));
                        e
                    })
                    .collect();
                table(
                    &rows,
                    &[
                        ("ASSOC", "association"),
                        ("PLMN", "plmn"),
                        ("ENB-ID", "enb_id"),
                        ("KIND", "enb_id_kind"),
                        ("TACS", "tacs"),
                        ("UES", "ues_connected"),
                    ],
                )
            }),
        ),
        CtlCmd::Slices => (
            c.call("GET", "/slices", None)?,
            Box::new(|v| {
                table(
                    v.as_array().map_or(&[][..], |x| x),
                    &[
                        ("SLICE", "slice"),
                        ("UES", "ue_contexts"),
                        ("CONNECTED", "ue_connected"),
                        ("ATTACHES", "attaches"),
                        ("UL-FWD", "ul_forwarded"),
                        ("DL-FWD", "dl_forwarded"),
                        ("DROPS", "drops"),
                        ("EG-QUEUED", "egress_queued"),
                        ("EG-DROPS", "egress_dropped"),
                    ],
                ) + &egress_table(v)
            }),
        ),
        CtlCmd::Node => (
            c.call("GET", "/node", None)?,
            Box::new(|v| {
                format!(
                    "pepc {}  up {} s  {} slice(s)\nS1-U: {}\nSGi: {}\n{}",
                    cell(&v["version"]),
                    cell(&v["uptime_s"]),
                    cell(&v["slices"]),
                    cell(&v["io"]["s1u"]),
                    cell(&v["io"]["sgi"]),
                    serde_json::to_string_pretty(&v["config"]).unwrap_or_default()
                )
            }),
        ),
        CtlCmd::Subscriber(s) => {
            let sub_cols: &'static [(&str, &str)] = &[
                ("IMSI", "imsi"),
                ("MSISDN", "msisdn"),
                ("APN", "apn"),
                ("PDN", "pdn_type"),
                ("QCI", "qci"),
                ("ARP", "arp"),
                ("AMBR-UL", "ambr_ul"),
                ("AMBR-DL", "ambr_dl"),
                ("SQN", "sqn"),
            ];
            match s {
                CtlSubscriber::List { limit, offset } => (
                    c.call(
                        "GET",
                        &format!("/subscribers?limit={limit}&offset={offset}"),
                        None,
                    )?,
                    Box::new(move |v| {
                        let rows = v["items"].as_array().cloned().unwrap_or_default();
                        format!(
                            "{}\n{} subscriber(s)",
                            table(&rows, sub_cols),
                            cell(&v["total"])
                        )
                    }),
                ),
                CtlSubscriber::Show { imsi } => (
                    c.call("GET", &format!("/subscribers/{imsi}"), None)?,
                    Box::new(move |v| table(std::slice::from_ref(v), sub_cols)),
                ),
                CtlSubscriber::Add(add) => {
                    // The same checks as `pepc subscriber add`, before anything is sent.
                    add.subscriber()?;
                    let mut body = serde_json::json!({
                        "imsi": add.imsi, "k": add.k, "amf": add.amf, "sqn": add.sqn,
                        "msisdn": add.msisdn, "apn": add.apn, "pdn_type": add.pdn_type,
                        "qci": add.qci, "arp": add.arp, "ambr_ul": add.ambr_ul, "ambr_dl": add.ambr_dl,
                    });
                    match (&add.opc, &add.op) {
                        (Some(o), _) => body["opc"] = Value::String(o.clone()),
                        (_, Some(o)) => body["op"] = Value::String(o.clone()),
                        _ => {}
                    }
                    (
                        c.call(
                            "POST",
                            "/subscribers",
                            Some(("application/json", body.to_string())),
                        )?,
                        Box::new(|v| format!("added {}", cell(&v["imsi"]))),
                    )
                }
                CtlSubscriber::Remove { imsi } => (
                    c.call("DELETE", &format!("/subscribers/{imsi}"), None)?,
                    Box::new(|v| format!("removed {}", cell(&v["removed"]))),
                ),
                CtlSubscriber::Import { file } => {
                    let csv = std::fs::read_to_string(file).map_err(|source| CtlError::Read {
                        path: file.clone(),
                        source,
                    })?;
                    (
                        c.call("POST", "/subscribers/import", Some(("text/csv", csv)))?,
                        Box::new(|v| format!("imported {} subscriber(s)", cell(&v["imported"]))),
                    )
                }
            }
        }
    };
    Ok(if a.json {
        serde_json::to_string_pretty(&v).unwrap_or_default()
    } else {
        render(&v)
    })
}
