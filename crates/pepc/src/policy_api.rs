//! The embedded PCRF's policy through the management API:
//!
//! * `GET /api/v1/policies`: every entry (APNs, then subscribers), paged;
//! * `GET|PUT|DELETE /api/v1/policies/apns/{apn}`: the rules and monitoring of an
//!   APN's sessions; a change applies to sessions set up from then on;
//! * `GET|PUT|DELETE /api/v1/policies/subscribers/{imsi}`: a subscriber's own (they
//!   add to their APN's); a change reaches the subscriber's live sessions at once,
//!   as a PCRF push (Gx RAR) would: its dedicated bearers follow.
//!
//! A rule is written as in the `[[pcrf.rule]]` table (`crate::policy`), without
//! `apn`/`imsi` (the path gives them). With `[pcrf] mode = "diameter"` the PCRF is
//! external: these answer 409.

use crate::api::NodeApi;
use crate::policy::{rule_of, RuleSection};
use pepc_mgmt::api::{ApiRequest, ApiResponse, Method};
use pepc_mme::pcrf::{PccRule, UsageGrant};
use pepc_node::s1mme::MgmtRequest;
use pepc_pcrf::{PolicyEntry, PolicyTable};
use serde::Deserialize;
use std::sync::Arc;

/// An entry as the API takes it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryIn {
    #[serde(default)]
    rules: Vec<RuleSection>,
    #[serde(default)]
    monitoring: Vec<GrantIn>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantIn {
    key: String,
    octets: u64,
}

fn rule_json(r: &PccRule) -> serde_json::Value {
    let dir = match r.flows.first().map(|f| f.direction) {
        Some(pepc_mme::pcrf::FlowDirection::Downlink) => "downlink",
        Some(pepc_mme::pcrf::FlowDirection::Uplink) => "uplink",
        _ => "both",
    };
    serde_json::json!({
        "name": r.name,
        "qci": r.qci,
        "arp": r.arp_priority,
        "mbr_ul": r.mbr.0,
        "mbr_dl": r.mbr.1,
        "gbr_ul": r.gbr.0,
        "gbr_dl": r.gbr.1,
        "precedence": r.precedence,
        "rating_group": r.rating_group,
        "monitoring_key": r.monitoring_key.clone().unwrap_or_default(),
        "flows": r.flows.iter().map(|f| f.describe()).collect::<Vec<_>>(),
        "direction": dir,
    })
}

fn entry_json(owner: (&str, String), e: &PolicyEntry) -> serde_json::Value {
    let mut v = serde_json::json!({
        "rules": e.rules.iter().map(rule_json).collect::<Vec<_>>(),
        "monitoring": e.monitoring.iter().map(|g| serde_json::json!({"key": g.key, "octets": g.octets})).collect::<Vec<_>>(),
    });
    v[owner.0] = serde_json::Value::String(owner.1);
    v
}

/// An APN network identifier (TS 23.003 §9.1), lower case.
fn apn_key(apn: &str) -> Result<String, ApiResponse> {
    let ok = (1..=100).contains(&apn.len())
        && apn
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphanumeric())
        && apn
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    if ok {
        Ok(apn.to_ascii_lowercase())
    } else {
        Err(ApiResponse::error(
            404,
            format!("{apn:?} is not an APN (1-100 letters, digits, '.', '-')"),
        ))
    }
}

fn imsi_key(s: &str) -> Result<u64, ApiResponse> {
    if (6..=15).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit()) {
        s.parse()
            .map_err(|_| ApiResponse::error(404, format!("IMSI {s:?}")))
    } else {
        Err(ApiResponse::error(
            404,
            format!("{s:?} is not an IMSI (6-15 digits)"),
        ))
    }
}

fn entry_in(r: &ApiRequest) -> Result<PolicyEntry, ApiResponse> {
    let b: EntryIn = crate::api::object_body(r)?;
    let mut e = PolicyEntry::default();
    for (i, rule) in b.rules.iter().enumerate() {
        if !rule.apn.is_empty() || !rule.imsi.is_empty() {
            return Err(ApiResponse::error(
                400,
                format!("rules[{i}]: `apn`/`imsi` are not taken here, the path gives them"),
            ));
        }
        let p = rule_of(rule).map_err(|m| ApiResponse::error(400, format!("rules[{i}]: {m}")))?;
        if e.rules.iter().any(|x| x.name == p.name) {
            return Err(ApiResponse::error(
                400,
                format!("rules[{i}]: a second rule named {:?}", p.name),
            ));
        }
        e.rules.push(p);
    }
    for (i, g) in b.monitoring.iter().enumerate() {
        if g.key.is_empty() || g.key.len() > 64 || g.octets == 0 {
            return Err(ApiResponse::error(
                400,
                format!("monitoring[{i}]: a `key` of 1-64 characters and `octets` > 0"),
            ));
        }
        e.monitoring.push(UsageGrant {
            key: g.key.clone(),
            octets: g.octets,
        });
    }
    PolicyTable::validate(&e).map_err(|m| ApiResponse::error(400, m.to_string()))?;
    Ok(e)
}

impl NodeApi {
    /// The `/policies` routes; `None` if the path is not one of them.
    pub(crate) fn policy_route(&self, r: &ApiRequest, parts: &[&str]) -> Option<ApiResponse> {
        let owner = match parts {
            ["policies"] => None,
            ["policies", kind @ ("apns" | "subscribers"), key] => Some((*kind, *key)),
            _ => return None,
        };
        let allow = if owner.is_some() {
            "GET, PUT, DELETE"
        } else {
            "GET"
        };
        let Some(pcrf) = &self.pcrf else {
            return Some(ApiResponse::error(
                409,
                "the PCRF is external (`pcrf.mode` is not embedded): policies are the PCRF's",
            ));
        };
        Some(match (&r.method, owner) {
            (&Method::GET, None) => self.list_policies(&pcrf.table, &r.query),
            (m, Some((kind, key))) if [Method::GET, Method::PUT, Method::DELETE].contains(m) => {
                self.policy_entry(pcrf, m, kind, key, r)
            }
            (m, _) => ApiResponse::error(
                405,
                format!(
                    "{m} {}: no such operation (see /api/v1/openapi.json)",
                    r.path
                ),
            )
            .allow(allow),
        })
    }

    fn list_policies(&self, table: &std::sync::RwLock<PolicyTable>, query: &str) -> ApiResponse {
        let (offset, limit) = match crate::api::page(query, 1000) {
            Ok(p) => p,
            Err(e) => return e,
        };
        let Ok(t) = table.read() else {
            return ApiResponse::error(500, "policy table poisoned");
        };
        let mut apns: Vec<_> = t.by_apn.iter().collect();
        apns.sort_by(|a, b| a.0.cmp(b.0));
        let mut subs: Vec<_> = t.by_imsi.iter().collect();
        subs.sort_by_key(|s| *s.0);
        let total = apns.len() + subs.len();
        let items: Vec<serde_json::Value> = apns
            .into_iter()
            .map(|(a, e)| entry_json(("apn", a.clone()), e))
            .chain(
                subs.into_iter()
                    .map(|(i, e)| entry_json(("imsi", format!("{i:015}")), e)),
            )
            .skip(offset)
            .take(limit)
            .collect();
        ApiResponse::ok(serde_json::json!({"total": total, "offset": offset, "items": items}))
    }

    fn policy_entry(
        &self,
        pcrf: &pepc_pcrf::EmbeddedPcrf,
        m: &Method,
        kind: &str,
        key: &str,
        r: &ApiRequest,
    ) -> ApiResponse {
        enum Key {
            Apn(String),
            Imsi(u64),
        }
        let k = match kind {
            "apns" => apn_key(key).map(Key::Apn),
            _ => imsi_key(key).map(Key::Imsi),
        };
        let k = match k {
            Ok(k) => k,
            Err(e) => return e,
        };
        let shown = |e: &PolicyEntry| match &k {
            Key::Apn(a) => entry_json(("apn", a.clone()), e),
            Key::Imsi(i) => entry_json(("imsi", format!("{i:015}")), e),
        };
        let new = if *m == Method::PUT {
            match entry_in(r) {
                Ok(e) => Some(e),
                Err(e) => return e,
            }
        } else {
            None
        };
        let Ok(mut t) = pcrf.table.write() else {
            return ApiResponse::error(500, "policy table poisoned");
        };
        let slot = match &k {
            Key::Apn(a) => t.by_apn.get(a).cloned(),
            Key::Imsi(i) => t.by_imsi.get(i).cloned(),
        };
        let resp = match (m, new) {
            (&Method::GET, _) => match slot {
                Some(e) => ApiResponse::ok(shown(&e)),
                None => return ApiResponse::error(404, format!("no policy for {key}")),
            },
            (&Method::PUT, Some(e)) => {
                let v = shown(&e);
                match &k {
                    Key::Apn(a) => t.by_apn.insert(a.clone(), e),
                    Key::Imsi(i) => t.by_imsi.insert(*i, e),
                };
                ApiResponse::ok(v)
            }
            _ => {
                let gone = match &k {
                    Key::Apn(a) => t.by_apn.remove(a),
                    Key::Imsi(i) => t.by_imsi.remove(i),
                };
                if gone.is_none() {
                    return ApiResponse::error(404, format!("no policy for {key}"));
                }
                ApiResponse::ok(serde_json::json!({ "removed": key }))
            }
        };
        drop(t);
        // A subscriber's change reaches its live sessions now (a PCRF push).
        if let (Key::Imsi(imsi), true) = (&k, *m != Method::GET) {
            let table = pcrf.table.clone();
            let imsi = *imsi;
            let decide: pepc_node::s1mme::PolicyOracle = Arc::new(move |apn: &str| {
                table
                    .read()
                    .map(|t| t.decide(imsi, apn))
                    .unwrap_or_default()
            });
            let pushed = self
                .ask(|reply| MgmtRequest::Repolicy {
                    imsi,
                    decide: decide.clone(),
                    reply,
                })
                .map(|v| v.iter().any(|(_, d)| *d))
                .unwrap_or(false);
            let mut resp = resp;
            resp.body["applied_to_sessions"] = serde_json::Value::Bool(pushed);
            return resp;
        }
        resp
    }
}
