//! What the management API (`/api/v1`, `pepc_mgmt::api`) does on a running node:
//! the node and slice figures (what the threads publish), and the subscribers of the
//! embedded HSS (the HSS is a database with its own transactions: a subscriber made
//! here is served by the next attach, no restart). K, OP and OPc are taken, never
//! returned. Bad input changes nothing and the error says what was wrong.
//!
//! The keys, their defaults and what each means: `crates/pepc/pepc.toml` (the
//! one source; `pepc config default` prints it, docs/configuration.md is made
//! from it).

use crate::subscriber::{to_json, AddArgs};
use pepc_hss::Hss;
use pepc_mgmt::api::{ApiBackend, ApiRequest, ApiResponse};
use pepc_mme::view::{UeFilter, UeView};
use pepc_node::node::StatsReader;
use pepc_node::s1mme::{MgmtRequest, SliceGauges, MAX_UE_PAGE};
use serde::Deserialize;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use std::time::Instant;

pub struct NodeApi {
    pub(crate) hss: Arc<Hss>,
    pub(crate) slices: Vec<Arc<SliceGauges>>,
    pub(crate) data: StatsReader,
    /// The node's S1AP endpoint thread's gauges (None: the endpoint runs inline in
    /// the one slice, whose gauges hold the eNBs).
    pub(crate) endpoint: Option<Arc<pepc_node::s1mme::EndpointGauges>>,
    pub(crate) started: Instant,
    /// The configuration as shown (secrets already removed).
    pub(crate) config: serde_json::Value,
    /// The embedded PCRF, whose policy `/policies` manages (None: external PCRF).
    pub(crate) pcrf: Option<pepc_pcrf::EmbeddedPcrf>,
    /// What the S1-U and SGi ports run on, as the node describes them at start.
    pub(crate) io: (String, String),
}

/// A subscriber as the API takes it: the CSV import's columns. The IMSI is in the
/// body on create (POST), in the path on replace (PUT).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SubscriberIn {
    #[serde(default, deserialize_with = "present")]
    imsi: Option<String>,
    #[serde(default, deserialize_with = "present")]
    k: Option<String>,
    #[serde(default, deserialize_with = "present")]
    opc: Option<String>,
    #[serde(default, deserialize_with = "present")]
    op: Option<String>,
    #[serde(default = "default_amf")]
    amf: String,
    #[serde(default)]
    sqn: u64,
    #[serde(default)]
    msisdn: String,
    #[serde(default = "default_apn")]
    apn: String,
    #[serde(default = "default_pdn_type")]
    pdn_type: String,
    #[serde(default = "default_qci")]
    qci: u8,
    #[serde(default = "default_arp")]
    arp: u8,
    #[serde(default = "default_ambr")]
    ambr_ul: u64,
    #[serde(default = "default_ambr")]
    ambr_dl: u64,
}

/// A field that is a string when present (absent is fine; `null` is not).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    String::deserialize(d).map(Some)
}

/// The largest AMBR taken: 2^32-1 kbit/s, what S1AP and S6a carry.
const MAX_AMBR: u64 = 4_294_967_295_000;

fn default_amf() -> String {
    "8000".into()
}
fn default_apn() -> String {
    "internet".into()
}
fn default_pdn_type() -> String {
    "ipv4".into()
}
fn default_qci() -> u8 {
    9
}
fn default_arp() -> u8 {
    8
}
fn default_ambr() -> u64 {
    100_000_000
}

/// What is wrong with a request's body or query (answered with 400 and this text).
#[derive(Debug, thiserror::Error)]
enum BodyError {
    #[error("field `k` is missing (32 hex digits)")]
    NoK,
    #[error("field `apn`: {0:?} is not an APN (1-100 letters, digits, '.', '-')")]
    Apn(String),
    #[error("fields `ambr_ul`/`ambr_dl`: at most {MAX_AMBR} bit/s")]
    Ambr,
    #[error("field `qci`: {0} is not a standardised QCI 1-9")]
    Qci(u8),
    /// The CLI's checks (`pepc subscriber add`), its flags named as the JSON fields.
    #[error("{}", as_fields(.0))]
    Checks(crate::subscriber::SubscriberError),
    #[error("query parameter `{key}`: {value:?} is not a number")]
    Query { key: &'static str, value: String },
}

/// A CLI flag's message with the flag named as the body's field.
fn as_fields(e: &crate::subscriber::SubscriberError) -> String {
    e.to_string()
        .replace("--pdn-type", "field `pdn_type`")
        .replace("--", "field ")
}

impl SubscriberIn {
    /// The subscriber; on a replace, `current` gives the keys the body leaves out.
    fn build(
        self,
        current: Option<&pepc_hss::Subscriber>,
    ) -> Result<pepc_hss::Subscriber, BodyError> {
        let (k, opc, op) = match (&self.k, &self.opc, &self.op, current) {
            (None, None, None, Some(c)) => {
                let mut s = self.build_with("0".repeat(32), Some("0".repeat(32)), None)?;
                s.k = c.k.clone();
                s.op_kind = c.op_kind.clone();
                return Ok(s);
            }
            (Some(k), opc, op, _) => (k.clone(), opc.clone(), op.clone()),
            (None, ..) => return Err(BodyError::NoK),
        };
        self.build_with(k, opc, op)
    }

    fn build_with(
        &self,
        k: String,
        opc: Option<String>,
        op: Option<String>,
    ) -> Result<pepc_hss::Subscriber, BodyError> {
        // An APN network identifier: labels of letters, digits, hyphens (TS 23.003 §9.1).
        let apn_ok = self.apn.len() <= 100
            && self
                .apn
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_alphanumeric())
            && self
                .apn
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
        if !apn_ok {
            return Err(BodyError::Apn(self.apn.clone()));
        }
        if self.ambr_ul > MAX_AMBR || self.ambr_dl > MAX_AMBR {
            return Err(BodyError::Ambr);
        }
        // The default bearer's QCI: a standardised one (TS 23.203 Table 6.1.7).
        if !(1..=9).contains(&self.qci) {
            return Err(BodyError::Qci(self.qci));
        }
        let a = AddArgs {
            imsi: self.imsi.clone().unwrap_or_default(),
            k,
            opc,
            op,
            amf: self.amf.clone(),
            sqn: self.sqn,
            msisdn: self.msisdn.clone(),
            apn: self.apn.clone(),
            pdn_type: self.pdn_type.clone(),
            qci: self.qci,
            arp: self.arp,
            ambr_ul: self.ambr_ul,
            ambr_dl: self.ambr_dl,
        };
        // The CLI's checks, its flags named as the JSON fields.
        a.subscriber().map_err(BodyError::Checks)
    }
}

fn query_u64(q: &str, key: &'static str, default: u64) -> Result<u64, BodyError> {
    for kv in q.split('&') {
        if let Some(v) = kv.strip_prefix(key).and_then(|r| r.strip_prefix('=')) {
            return v.parse().map_err(|_| BodyError::Query {
                key,
                value: v.to_string(),
            });
        }
    }
    Ok(default)
}

/// How long the API waits for a control thread's answer.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

fn ue_json(slice: usize, u: &UeView) -> serde_json::Value {
    serde_json::json!({
        "imsi": format!("{:015}", u.imsi),
        "slice": slice,
        "mme_ue_s1ap_id": u.mme_ue_s1ap_id,
        "emm": if u.registered { "registered" } else { "deregistered" },
        "ecm": if u.connected { "connected" } else { "idle" },
        "enb": u.enb.map(|(assoc, id)| serde_json::json!({"association": assoc, "enb_ue_s1ap_id": id})),
        "tai": { "tac": u.tac },
        "cell_id": u.cell_id,
        "m_tmsi": u.m_tmsi,
        "procedure": u.procedure,
        "ambr": { "ul": u.ambr_ul, "dl": u.ambr_dl },
        "pdns": u.pdns.iter().map(|p| serde_json::json!({
            "apn": p.apn, "address": p.ip.to_string(), "default_ebi": p.default_ebi,
        })).collect::<Vec<_>>(),
        "bearers": u.bearers.iter().map(|b| serde_json::json!({
            "ebi": b.ebi, "qci": b.qci, "arp": b.arp_priority,
            "teid_ul": b.teid_ul, "enb_teid": b.enb_teid, "enb_address": b.enb_addr.to_string(),
            "usage": { "ul_packets": b.ul_packets, "ul_bytes": b.ul_bytes,
                       "dl_packets": b.dl_packets, "dl_bytes": b.dl_bytes },
        })).collect::<Vec<_>>(),
    })
}

fn parse_imsi(s: &str) -> Result<u64, ApiResponse> {
    if (6..=15).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse()
            .map_err(|_| ApiResponse::error(400, format!("IMSI {s:?}")))
    } else {
        Err(ApiResponse::error(
            404,
            format!("no UE with IMSI {s:?} (6-15 digits)"),
        ))
    }
}

/// `offset` and `limit` of a listing (limit 1..=max, 100 by default).
pub(crate) fn page(query: &str, max: usize) -> Result<(usize, usize), ApiResponse> {
    let o = query_u64(query, "offset", 0).map_err(|e| ApiResponse::error(400, e.to_string()))?;
    let l = query_u64(query, "limit", 100).map_err(|e| ApiResponse::error(400, e.to_string()))?;
    if o > u64::from(u32::MAX) {
        return Err(ApiResponse::error(
            400,
            format!("query parameter `offset`: {o} is above {}", u32::MAX),
        ));
    }
    if !(1..=max as u64).contains(&l) {
        return Err(ApiResponse::error(
            400,
            format!("query parameter `limit`: {l} is not within 1..={max}"),
        ));
    }
    Ok((o as usize, l as usize))
}

impl NodeApi {
    /// Ask every slice's control thread; their answers in slice order.
    pub(crate) fn ask<T: Send + 'static>(
        &self,
        make: impl Fn(std::sync::mpsc::SyncSender<T>) -> MgmtRequest,
    ) -> Result<Vec<(usize, T)>, ApiResponse> {
        let mut waiting = Vec::new();
        for (s, g) in self.slices.iter().enumerate() {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            if g.request(make(tx)) {
                waiting.push((s, rx));
            }
        }
        if waiting.is_empty() {
            return Err(ApiResponse::error(
                503,
                "no slice runs an MME (`mme.enabled` is false)",
            ));
        }
        let mut out = Vec::new();
        for (s, rx) in waiting {
            match rx.recv_timeout(ANSWER_WAIT) {
                Ok(v) => out.push((s, v)),
                Err(_) => {
                    return Err(ApiResponse::error(
                        503,
                        format!("slice {s}'s control thread did not answer within {ANSWER_WAIT:?}"),
                    ))
                }
            }
        }
        Ok(out)
    }

    fn ue(&self, imsi: &str) -> ApiResponse {
        let i = match parse_imsi(imsi) {
            Ok(i) => i,
            Err(e) => return e,
        };
        match self.ask(|reply| MgmtRequest::Ue { imsi: i, reply }) {
            Ok(v) => match v.into_iter().find_map(|(s, u)| u.map(|u| (s, u))) {
                Some((s, u)) => ApiResponse::ok(ue_json(s, &u)),
                None => ApiResponse::error(404, format!("no UE with IMSI {imsi}")),
            },
            Err(e) => e,
        }
    }

    fn ues(&self, query: &str) -> ApiResponse {
        let filter = match query.split('&').find_map(|kv| kv.strip_prefix("state=")) {
            None | Some("all") => UeFilter::All,
            Some("connected") => UeFilter::Connected,
            Some("idle") => UeFilter::Idle,
            Some(o) => {
                return ApiResponse::error(
                    400,
                    format!("query parameter `state`: {o:?} is not all, connected or idle"),
                )
            }
        };
        let (offset, limit) = match page(query, MAX_UE_PAGE) {
            Ok(p) => p,
            Err(e) => return e,
        };
        // Each slice gives its first offset+limit; the page is cut from them in order.
        let want = offset.saturating_add(limit).min(u32::MAX as usize);
        match self.ask(|reply| MgmtRequest::Ues {
            filter,
            offset: 0,
            limit: want,
            reply,
        }) {
            Ok(v) => {
                let total: usize = v.iter().map(|(_, (t, _))| t).sum();
                let items: Vec<serde_json::Value> = v
                    .iter()
                    .flat_map(|(s, (_, us))| us.iter().map(move |u| ue_json(*s, u)))
                    .skip(offset)
                    .take(limit)
                    .collect();
                ApiResponse::ok(
                    serde_json::json!({ "total": total, "offset": offset, "items": items }),
                )
            }
            Err(e) => e,
        }
    }

    fn enbs(&self) -> ApiResponse {
        let views = match &self.endpoint {
            Some(e) => e.enb_views.lock().map(|v| v.clone()).unwrap_or_default(),
            None => self
                .slices
                .iter()
                .flat_map(|g| g.enb_views.lock().map(|v| v.clone()).unwrap_or_default())
                .collect(),
        };
        let counts = match self.ask(|reply| MgmtRequest::EnbConnections { reply }) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let ues = |assoc: u64| -> usize {
            counts
                .iter()
                .flat_map(|(_, c)| c.iter())
                .filter(|(a, _)| *a == assoc)
                .map(|(_, n)| n)
                .sum()
        };
        let v: Vec<serde_json::Value> = views
            .iter()
            .map(|e| {
                let (kind, id) = match e.global_id.enb_id {
                    pepc_s1ap::EnbId::Macro(v) => ("macro", v),
                    pepc_s1ap::EnbId::Home(v) => ("home", v),
                    pepc_s1ap::EnbId::ShortMacro(v) => ("short-macro", v),
                    pepc_s1ap::EnbId::LongMacro(v) => ("long-macro", v),
                };
                serde_json::json!({
                    "association": e.association,
                    "plmn": e.global_id.plmn.to_string(),
                    "enb_id": id,
                    "enb_id_kind": kind,
                    "tais": e.tais.iter().map(|t| serde_json::json!({"plmn": t.plmn.to_string(), "tac": t.tac})).collect::<Vec<_>>(),
                    "ues_connected": ues(e.association),
                })
            })
            .collect();
        ApiResponse::ok(serde_json::Value::Array(v))
    }

    fn detach(&self, imsi: &str) -> ApiResponse {
        let i = match parse_imsi(imsi) {
            Ok(i) => i,
            Err(e) => return e,
        };
        match self.ask(|reply| MgmtRequest::Detach { imsi: i, reply }) {
            Ok(v) if v.iter().any(|(_, done)| *done) => {
                ApiResponse::ok(serde_json::json!({ "detached": imsi }))
            }
            Ok(_) => ApiResponse::error(404, format!("no UE with IMSI {imsi}")),
            Err(e) => e,
        }
    }

    fn node(&self) -> ApiResponse {
        ApiResponse::ok(serde_json::json!({
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": self.started.elapsed().as_secs(),
            "slices": self.slices.len().max(self.data.read().slices.len()),
            "io": { "s1u": self.io.0, "sgi": self.io.1 },
            "config": self.config,
        }))
    }

    fn slices(&self) -> ApiResponse {
        let data = self.data.read();
        let v: Vec<serde_json::Value> = data
            .slices
            .iter()
            .map(|d| {
                let g = self.slices.get(d.slice);
                let registered = g.map_or(0, |g| g.sessions.load(Relaxed));
                let connected = g.map_or(0, |g| g.connected.load(Relaxed));
                // The MME's counters as its control thread last published them.
                let procedures: serde_json::Map<String, serde_json::Value> = g
                    .and_then(|g| g.live_stats())
                    .map(|m| {
                        crate::metrics::procedure_counts(&m)
                            .into_iter()
                            .map(|(p, started, ok, failed)| {
                                let v = serde_json::json!({
                                    "started": started, "succeeded": ok, "failed": failed,
                                });
                                (p.to_string(), v)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                serde_json::json!({
                    "slice": d.slice,
                    "ue_contexts": g.map_or(0, |g| g.ues.load(Relaxed)),
                    "ue_registered": registered,
                    "ue_connected": connected,
                    "ue_idle": registered.saturating_sub(connected),
                    "procedures": procedures,
                    "attaches": g.map_or(0, |g| g.attaches.load(Relaxed)),
                    "ul_forwarded": d.ul_forwarded,
                    "dl_forwarded": d.dl_forwarded,
                    "drops": d.drops,
                    "egress_queued": d.egress.iter().map(|e| e.depth).sum::<u64>(),
                    "egress_dropped": d.egress.iter().map(|e| e.dropped_total()).sum::<u64>(),
                    "egress_bypassed": {"uplink": d.egress_bypassed[0], "downlink": d.egress_bypassed[1]},
                    "egress": d.egress.iter().map(|e| serde_json::json!({
                        "direction": e.direction,
                        "qci": e.qci,
                        "depth": e.depth,
                        "sent": e.sent,
                        "sent_bytes": e.sent_bytes,
                        "pushed_back": e.pushed_back,
                        "dropped": e.dropped.iter().map(|(r, n)| (r.to_string(), serde_json::json!(n))).collect::<serde_json::Map<_, _>>(),
                        "delay_us_p50": e.delay_us_quantile(0.5),
                        "delay_us_p99": e.delay_us_quantile(0.99),
                        "delay_us_buckets": e.delay,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        ApiResponse::ok(serde_json::Value::Array(v))
    }

    fn subscribers(&self, query: &str) -> ApiResponse {
        let (offset, limit) = match page(query, 1000) {
            Ok(p) => p,
            Err(e) => return e,
        };
        match self.hss.list() {
            Ok(all) => ApiResponse::ok(serde_json::json!({
                "total": all.len(),
                "offset": offset,
                "items": all.iter().skip(offset).take(limit).map(to_json).collect::<Vec<_>>(),
            })),
            Err(e) => ApiResponse::error(500, format!("HSS: {e}")),
        }
    }

    fn body(r: &ApiRequest) -> Result<SubscriberIn, ApiResponse> {
        object_body(r)
    }

    fn create(&self, r: &ApiRequest) -> ApiResponse {
        let s = match Self::body(r).and_then(|b| {
            b.build(None)
                .map_err(|e| ApiResponse::error(400, e.to_string()))
        }) {
            Ok(s) => s,
            Err(e) => return e,
        };
        match self.hss.get(&s.imsi) {
            Ok(Some(_)) => {
                return ApiResponse::error(
                    409,
                    format!(
                        "subscriber {} exists (PUT /subscribers/{} replaces it)",
                        s.imsi, s.imsi
                    ),
                )
            }
            Ok(None) => {}
            Err(e) => return ApiResponse::error(500, format!("HSS: {e}")),
        }
        match self.hss.add(&s) {
            Ok(()) => ApiResponse {
                status: 201,
                ..ApiResponse::ok(to_json(&s))
            },
            Err(e) => ApiResponse::error(400, e.to_string()),
        }
    }

    fn replace(&self, imsi: &str, r: &ApiRequest) -> ApiResponse {
        let current = match self.hss.get(imsi) {
            Ok(Some(c)) => c,
            Ok(None) => return ApiResponse::error(404, format!("no subscriber with IMSI {imsi}")),
            Err(e) => return ApiResponse::error(500, format!("HSS: {e}")),
        };
        let mut b = match Self::body(r) {
            Ok(b) => b,
            Err(e) => return e,
        };
        if b.imsi.is_some() {
            return ApiResponse::error(400, "field `imsi`: not in a replace, the path gives it");
        }
        b.imsi = Some(imsi.to_string());
        let mut s = match b.build(Some(&current)) {
            Ok(s) => s,
            Err(e) => return ApiResponse::error(400, e.to_string()),
        };
        // The live SQN never goes back (vectors already issued stay fresh).
        s.sqn = s.sqn.max(current.sqn);
        match self.hss.add(&s) {
            Ok(()) => ApiResponse::ok(to_json(&s)),
            Err(e) => ApiResponse::error(400, e.to_string()),
        }
    }

    fn import(&self, r: &ApiRequest) -> ApiResponse {
        if !r.content_type.starts_with("text/csv") {
            return ApiResponse::error(
                415,
                format!(
                    "content type {:?}: the import takes text/csv",
                    r.content_type
                ),
            );
        }
        let subs = match pepc_hss::parse_csv(&r.body[..]) {
            Ok(s) => s,
            Err(e) => return ApiResponse::error(400, e.to_string()),
        };
        match self.hss.add_many(&subs) {
            Ok(()) => ApiResponse::ok(serde_json::json!({ "imported": subs.len() })),
            Err(e) => ApiResponse::error(400, e.to_string()),
        }
    }
}

impl ApiBackend for NodeApi {
    fn handle(&self, r: ApiRequest) -> ApiResponse {
        use pepc_mgmt::api::Method;
        let parts: Vec<&str> = r.path.trim_matches('/').split('/').collect();
        if let Some(resp) = self.policy_route(&r, &parts) {
            return resp;
        }
        match (&r.method, parts.as_slice()) {
            (&Method::GET, ["node"]) => self.node(),
            (&Method::GET, ["slices"]) => self.slices(),
            (&Method::GET, ["subscribers"]) => self.subscribers(&r.query),
            (&Method::GET, ["ues"]) => self.ues(&r.query),
            (&Method::GET, ["enbs"]) => self.enbs(),
            (&Method::GET, ["ues", imsi]) => self.ue(imsi),
            (&Method::DELETE, ["ues", imsi]) => self.detach(imsi),
            (&Method::POST, ["subscribers"]) => self.create(&r),
            (&Method::POST, ["subscribers", "import"]) => self.import(&r),
            (&Method::GET, ["subscribers", imsi]) => match self.hss.get(imsi) {
                Ok(Some(s)) => ApiResponse::ok(to_json(&s)),
                Ok(None) => ApiResponse::error(404, format!("no subscriber with IMSI {imsi}")),
                Err(e) => ApiResponse::error(500, format!("HSS: {e}")),
            },
            (&Method::PUT, ["subscribers", imsi]) => self.replace(imsi, &r),
            (&Method::DELETE, ["subscribers", imsi]) => match self.hss.remove(imsi) {
                Ok(true) => ApiResponse::ok(serde_json::json!({ "removed": imsi })),
                Ok(false) => ApiResponse::error(404, format!("no subscriber with IMSI {imsi}")),
                Err(e) => ApiResponse::error(500, format!("HSS: {e}")),
            },
            (m, p) => {
                let allow = match p {
                    ["node"] | ["slices"] => Some("GET"),
                    ["subscribers"] => Some("GET, POST"),
                    ["subscribers", "import"] => Some("POST"),
                    ["subscribers", _] => Some("GET, PUT, DELETE"),
                    ["ues"] | ["enbs"] => Some("GET"),
                    ["ues", _] => Some("GET, DELETE"),
                    _ => None,
                };
                let msg = format!(
                    "{m} {}: no such operation (see /api/v1/openapi.json)",
                    r.path
                );
                match allow {
                    Some(a) => ApiResponse::error(405, msg).allow(a),
                    None => ApiResponse::error(404, msg),
                }
            }
        }
    }
}

/// A request body that must be one JSON object, as the OpenAPI document says. serde
/// would also build a struct from an array of its fields in order (`[]` when every
/// field has a default), which the API does not take.
pub(crate) fn object_body<T: serde::de::DeserializeOwned>(
    r: &ApiRequest,
) -> Result<T, ApiResponse> {
    let v: serde_json::Value = serde_json::from_slice(&r.body)
        .map_err(|e| ApiResponse::error(400, format!("request body: {e}")))?;
    if !v.is_object() {
        let got = match v {
            serde_json::Value::Array(_) => "an array",
            serde_json::Value::String(_) => "a string",
            serde_json::Value::Number(_) => "a number",
            serde_json::Value::Bool(_) => "a boolean",
            _ => "null",
        };
        return Err(ApiResponse::error(
            400,
            format!("request body: a JSON object expected, got {got}"),
        ));
    }
    T::deserialize(v).map_err(|e| ApiResponse::error(400, format!("request body: {e}")))
}
