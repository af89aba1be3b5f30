//! Cross-check against an independent S1AP implementation (pycrate 0.8.1, whose codec is
//! generated from the TS 36.413 ASN.1): what we encode, pycrate decodes to the same
//! field values (and re-encodes to the same octets); what pycrate encodes, we decode to
//! the same values (and re-encode to the same octets).
//!
//! Both directions compare against one function, [`expected`], which spells out the
//! ASN.1 value (TS 36.413 IE ids, criticalities, enumeration names, bit string sizes)
//! that a typed message stands for, in the JSON form `tests/py/s1ap_xcheck.py` prints.
//! Needs python3 with pycrate (scripts/test.sh installs it); fails, never skips, without.

use pepc_s1ap::msg::*;
use pepc_s1ap::*;
use serde_json::{json, Value};
use std::io::Write;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

// ---------------------------------------------------------------- running pycrate

fn script() -> String {
    format!("{}/tests/py/s1ap_xcheck.py", env!("CARGO_MANIFEST_DIR"))
}

/// Runs the script once (all PDUs in one process: pycrate's import costs ~0.4 s).
fn pycrate(mode: &str, stdin: &str) -> Value {
    let mut child = Command::new("python3")
        .arg(script())
        .arg(mode)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run python3 ({e}): the pycrate cross-check needs python3 and pycrate==0.8.1, which scripts/test.sh installs")
        });
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write to python3");
    let out = child.wait_with_output().expect("python3 output");
    assert!(
        out.status.success(),
        "{} {mode} failed ({}): {}\n(the pycrate cross-check needs python3 and pycrate==0.8.1, which scripts/test.sh installs)",
        script(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "pycrate output is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex from pycrate"))
        .collect()
}

/// Paths where two JSON values differ (empty when equal).
fn diff(path: &str, want: &Value, got: &Value, out: &mut Vec<String>) {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    Some(w) => diff(&format!("{path}.{k}"), v, w, out),
                    None => out.push(format!("{path}.{k}: missing in pycrate's value, want {v}")),
                }
            }
            for k in b.keys().filter(|k| !a.contains_key(*k)) {
                out.push(format!("{path}.{k}: unexpected {}", b[k]));
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (v, w)) in a.iter().zip(b).enumerate() {
                diff(&format!("{path}[{i}]"), v, w, out);
            }
        }
        _ if want == got => {}
        _ => out.push(format!("{path}: want {want}, pycrate has {got}")),
    }
}

// ---------------------------------------------------------------- the ASN.1 value of a message

fn bits(v: u64, n: u32) -> Value {
    json!({"bits": format!("{v:0w$x}", w = n.div_ceil(4) as usize), "len": n})
}
fn bits_of(b: &[u8]) -> Value {
    json!({"bits": hex(b), "len": b.len() * 8})
}
fn plmn(p: Plmn) -> Value {
    json!(hex(&p.0))
}
fn tai(t: Tai) -> Value {
    json!({"pLMNidentity": plmn(t.plmn), "tAC": hex(&t.tac.to_be_bytes())})
}
fn ecgi(e: Ecgi) -> Value {
    json!({"pLMNidentity": plmn(e.plmn), "cell-ID": bits(e.cell_id.into(), 28)})
}
fn addr(a: Ipv4Addr) -> Value {
    bits_of(&a.octets())
}
fn teid(t: u32) -> Value {
    json!(hex(&t.to_be_bytes()))
}
fn global_enb(g: &GlobalEnbId) -> Value {
    let id = match g.enb_id {
        EnbId::Macro(v) => json!({"macroENB-ID": bits(v.into(), 20)}),
        EnbId::Home(v) => json!({"homeENB-ID": bits(v.into(), 28)}),
        EnbId::ShortMacro(v) => json!({"short-macroENB-ID": bits(v.into(), 18)}),
        EnbId::LongMacro(v) => json!({"long-macroENB-ID": bits(v.into(), 21)}),
    };
    json!({"pLMNidentity": plmn(g.plmn), "eNB-ID": id})
}
fn ambr(a: Ambr) -> Value {
    json!({"uEaggregateMaximumBitRateDL": a.dl, "uEaggregateMaximumBitRateUL": a.ul})
}
fn caps(c: UeSecurityCapabilities) -> Value {
    json!({"encryptionAlgorithms": bits(c.eea.into(), 16), "integrityProtectionAlgorithms": bits(c.eia.into(), 16)})
}
fn sec_ctx(s: &SecurityContext) -> Value {
    json!({"nextHopChainingCount": s.ncc, "nextHopParameter": bits_of(&s.next_hop.0)})
}
fn qos(qci: u8, arp: Arp, gbr: Option<GbrQos>) -> Value {
    let mut q = json!({
        "qCI": qci,
        "allocationRetentionPriority": {
            "priorityLevel": arp.priority_level,
            "pre-emptionCapability": if arp.pre_emption_capability { "may-trigger-pre-emption" } else { "shall-not-trigger-pre-emption" },
            "pre-emptionVulnerability": if arp.pre_emption_vulnerability { "pre-emptable" } else { "not-pre-emptable" },
        },
    });
    if let Some(g) = gbr {
        q["gbrQosInformation"] = json!({
            "e-RAB-MaximumBitrateDL": g.mbr_dl, "e-RAB-MaximumBitrateUL": g.mbr_ul,
            "e-RAB-GuaranteedBitrateDL": g.gbr_dl, "e-RAB-GuaranteedBitrateUL": g.gbr_ul,
        });
    }
    q
}

/// TS 36.413 §9.2.1.3 enumeration names of the causes these tests use.
fn cause(c: Cause) -> Value {
    let (group, name) = match c {
        Cause::RadioNetwork(0) => ("radioNetwork", "unspecified"),
        Cause::RadioNetwork(2) => ("radioNetwork", "successful-handover"),
        Cause::RadioNetwork(16) => ("radioNetwork", "handover-desirable-for-radio-reason"),
        Cause::RadioNetwork(20) => ("radioNetwork", "user-inactivity"),
        Cause::RadioNetwork(21) => ("radioNetwork", "radio-connection-with-ue-lost"),
        Cause::RadioNetwork(30) => ("radioNetwork", "unknown-E-RAB-ID"),
        Cause::Transport(0) => ("transport", "transport-resource-unavailable"),
        Cause::Transport(1) => ("transport", "unspecified"),
        Cause::Nas(0) => ("nas", "normal-release"),
        Cause::Nas(2) => ("nas", "detach"),
        Cause::Protocol(3) => ("protocol", "message-not-compatible-with-receiver-state"),
        Cause::Protocol(5) => (
            "protocol",
            "abstract-syntax-error-falsely-constructed-message",
        ),
        Cause::Misc(3) => ("misc", "om-intervention"),
        Cause::Misc(5) => ("misc", "unknown-PLMN"),
        other => panic!("test table lacks the TS 36.413 name of {other:?}"),
    };
    json!({ group: name })
}

fn ie(id: u16, crit: &str, ty: &str, v: Value) -> Value {
    json!({"id": id, "criticality": crit, "value": { ty: v }})
}
const R: &str = "reject";
const I: &str = "ignore";

fn erab_items(list: &[ERabCause]) -> Value {
    list.iter()
        .map(|e| {
            ie(
                35,
                I,
                "E-RABItem",
                json!({"e-RAB-ID": e.id, "cause": cause(e.cause)}),
            )
        })
        .collect()
}
fn mme(id: u32, crit: &str) -> Value {
    ie(0, crit, "MME-UE-S1AP-ID", json!(id))
}
fn enb(id: u32, crit: &str) -> Value {
    ie(8, crit, "ENB-UE-S1AP-ID", json!(id))
}
fn nas(b: &[u8], crit: &str) -> Value {
    ie(26, crit, "NAS-PDU", json!(hex(b)))
}
fn ids_cause(m: u32, e: u32, c: Cause) -> Vec<Value> {
    vec![mme(m, R), enb(e, R), ie(2, I, "Cause", cause(c))]
}
fn ues(list: &[UeConnection], crit: &str) -> Value {
    list.iter()
        .map(|c| {
            let mut v = json!({});
            if let Some(m) = c.mme_ue_id {
                v["mME-UE-S1AP-ID"] = json!(m);
            }
            if let Some(e) = c.enb_ue_id {
                v["eNB-UE-S1AP-ID"] = json!(e);
            }
            ie(91, crit, "UE-associatedLogicalS1-ConnectionItem", v)
        })
        .collect()
}

/// The value pycrate should see for `m`: (PDU alternative, procedure criticality,
/// message type name, IEs in TS 36.413 order).
fn expected(m: &S1apMessage) -> Value {
    use S1apMessage as M;
    let (dir, code, crit, name, ies): (&str, u8, &str, &str, Vec<Value>) = match m {
        M::S1SetupRequest(s) => {
            let mut v = vec![ie(59, R, "Global-ENB-ID", global_enb(&s.global_enb_id))];
            if let Some(n) = &s.enb_name {
                v.push(ie(60, I, "ENBname", json!(n)));
            }
            let tas: Vec<Value> = s
                .supported_tas
                .iter()
                .map(|t| json!({"tAC": hex(&t.tac.to_be_bytes()), "broadcastPLMNs": t.plmns.iter().map(|p| plmn(*p)).collect::<Vec<_>>()}))
                .collect();
            v.push(ie(64, R, "SupportedTAs", json!(tas)));
            if let Some(d) = s.paging_drx {
                v.push(ie(137, I, "PagingDRX", json!(format!("v{d}"))));
            }
            ("initiatingMessage", 17, R, "S1SetupRequest", v)
        }
        M::S1SetupResponse(s) => {
            let mut v = vec![];
            if let Some(n) = &s.mme_name {
                v.push(ie(61, I, "MMEname", json!(n)));
            }
            let g: Vec<Value> = s
                .served_gummeis
                .iter()
                .map(|g| {
                    json!({
                        "servedPLMNs": g.plmns.iter().map(|p| plmn(*p)).collect::<Vec<_>>(),
                        "servedGroupIDs": g.group_ids.iter().map(|x| hex(&x.to_be_bytes())).collect::<Vec<_>>(),
                        "servedMMECs": g.codes.iter().map(|x| hex(&[*x])).collect::<Vec<_>>(),
                    })
                })
                .collect();
            v.push(ie(105, R, "ServedGUMMEIs", json!(g)));
            v.push(ie(87, I, "RelativeMMECapacity", json!(s.relative_capacity)));
            ("successfulOutcome", 17, R, "S1SetupResponse", v)
        }
        M::S1SetupFailure(s) => {
            let mut v = vec![ie(2, I, "Cause", cause(s.cause))];
            if let Some(t) = s.time_to_wait {
                let n = ["v1s", "v2s", "v5s", "v10s", "v20s", "v60s"][t as usize];
                v.push(ie(65, I, "TimeToWait", json!(n)));
            }
            ("unsuccessfulOutcome", 17, R, "S1SetupFailure", v)
        }
        M::InitialUeMessage(i) => {
            let rrc = [
                "emergency",
                "highPriorityAccess",
                "mt-Access",
                "mo-Signalling",
                "mo-Data",
                "delay-TolerantAccess",
                "mo-VoiceCall",
                "mo-ExceptionData",
            ][i.rrc_cause as usize];
            let mut v = vec![
                enb(i.enb_ue_id, R),
                nas(&i.nas_pdu, R),
                ie(67, R, "TAI", tai(i.tai)),
                ie(100, I, "EUTRAN-CGI", ecgi(i.ecgi)),
                ie(134, I, "RRC-Establishment-Cause", json!(rrc)),
            ];
            if let Some(s) = i.s_tmsi {
                v.push(ie(
                    96,
                    R,
                    "S-TMSI",
                    json!({"mMEC": hex(&[s.mmec]), "m-TMSI": hex(&s.m_tmsi.to_be_bytes())}),
                ));
            }
            if let Some(g) = i.gummei {
                v.push(ie(75, R, "GUMMEI", json!({"pLMN-Identity": plmn(g.plmn), "mME-Group-ID": hex(&g.mme_group_id.to_be_bytes()), "mME-Code": hex(&[g.mme_code])})));
            }
            ("initiatingMessage", 12, I, "InitialUEMessage", v)
        }
        M::UplinkNasTransport(u) => (
            "initiatingMessage",
            13,
            I,
            "UplinkNASTransport",
            vec![
                mme(u.mme_ue_id, R),
                enb(u.enb_ue_id, R),
                nas(&u.nas_pdu, R),
                ie(100, I, "EUTRAN-CGI", ecgi(u.ecgi)),
                ie(67, I, "TAI", tai(u.tai)),
            ],
        ),
        M::DownlinkNasTransport(d) => (
            "initiatingMessage",
            11,
            I,
            "DownlinkNASTransport",
            vec![mme(d.mme_ue_id, R), enb(d.enb_ue_id, R), nas(&d.nas_pdu, R)],
        ),
        M::NasNonDeliveryIndication(n) => (
            "initiatingMessage",
            16,
            I,
            "NASNonDeliveryIndication",
            vec![
                mme(n.mme_ue_id, R),
                enb(n.enb_ue_id, R),
                nas(&n.nas_pdu, I),
                ie(2, I, "Cause", cause(n.cause)),
            ],
        ),
        M::InitialContextSetupRequest(r) => {
            let items: Vec<Value> = r
                .erabs
                .iter()
                .map(|e| {
                    let mut it = json!({
                        "e-RAB-ID": e.id,
                        "e-RABlevelQoSParameters": qos(e.qci, e.arp, e.gbr),
                        "transportLayerAddress": addr(e.transport),
                        "gTP-TEID": teid(e.teid),
                    });
                    if let Some(n) = &e.nas_pdu {
                        it["nAS-PDU"] = json!(hex(n));
                    }
                    ie(52, R, "E-RABToBeSetupItemCtxtSUReq", it)
                })
                .collect();
            (
                "initiatingMessage",
                9,
                R,
                "InitialContextSetupRequest",
                vec![
                    mme(r.mme_ue_id, R),
                    enb(r.enb_ue_id, R),
                    ie(66, R, "UEAggregateMaximumBitrate", ambr(r.ue_ambr)),
                    ie(24, R, "E-RABToBeSetupListCtxtSUReq", json!(items)),
                    ie(
                        107,
                        R,
                        "UESecurityCapabilities",
                        caps(r.ue_security_capabilities),
                    ),
                    ie(73, R, "SecurityKey", bits_of(&r.security_key.0)),
                ],
            )
        }
        M::InitialContextSetupResponse(r) => {
            let items: Vec<Value> = r
                .erabs
                .iter()
                .map(|e| ie(50, I, "E-RABSetupItemCtxtSURes", json!({"e-RAB-ID": e.id, "transportLayerAddress": addr(e.transport), "gTP-TEID": teid(e.teid)})))
                .collect();
            let mut v = vec![
                mme(r.mme_ue_id, I),
                enb(r.enb_ue_id, I),
                ie(51, I, "E-RABSetupListCtxtSURes", json!(items)),
            ];
            if !r.failed.is_empty() {
                v.push(ie(48, I, "E-RABList", erab_items(&r.failed)));
            }
            ("successfulOutcome", 9, R, "InitialContextSetupResponse", v)
        }
        M::UeContextReleaseRequest(r) => (
            "initiatingMessage",
            18,
            I,
            "UEContextReleaseRequest",
            ids_cause(r.mme_ue_id, r.enb_ue_id, r.cause),
        ),
        M::UeContextReleaseCommand(c) => {
            let ids = match c.ids {
                UeS1apIds::Pair {
                    mme_ue_id,
                    enb_ue_id,
                } => {
                    json!({"uE-S1AP-ID-pair": {"mME-UE-S1AP-ID": mme_ue_id, "eNB-UE-S1AP-ID": enb_ue_id}})
                }
                UeS1apIds::MmeOnly(m) => json!({"mME-UE-S1AP-ID": m}),
            };
            (
                "initiatingMessage",
                23,
                R,
                "UEContextReleaseCommand",
                vec![
                    ie(99, R, "UE-S1AP-IDs", ids),
                    ie(2, I, "Cause", cause(c.cause)),
                ],
            )
        }
        M::UeContextReleaseComplete(c) => (
            "successfulOutcome",
            23,
            R,
            "UEContextReleaseComplete",
            vec![mme(c.mme_ue_id, I), enb(c.enb_ue_id, I)],
        ),
        M::UeContextModificationRequest(r) => {
            let mut v = vec![mme(r.mme_ue_id, R), enb(r.enb_ue_id, R)];
            if let Some(k) = &r.security_key {
                v.push(ie(73, R, "SecurityKey", bits_of(&k.0)));
            }
            if let Some(a) = r.ue_ambr {
                v.push(ie(66, I, "UEAggregateMaximumBitrate", ambr(a)));
            }
            if let Some(c) = r.ue_security_capabilities {
                v.push(ie(107, R, "UESecurityCapabilities", caps(c)));
            }
            (
                "initiatingMessage",
                21,
                R,
                "UEContextModificationRequest",
                v,
            )
        }
        M::Paging(p) => {
            let id = match &p.paging_id {
                PagingIdentity::STmsi(s) => {
                    json!({"s-TMSI": {"mMEC": hex(&[s.mmec]), "m-TMSI": hex(&s.m_tmsi.to_be_bytes())}})
                }
                PagingIdentity::Imsi(i) => json!({"iMSI": hex(i)}),
            };
            let tais: Vec<Value> = p
                .tai_list
                .iter()
                .map(|t| ie(47, I, "TAIItem", json!({"tAI": tai(*t)})))
                .collect();
            let dom = match p.cn_domain {
                CnDomain::Ps => "ps",
                CnDomain::Cs => "cs",
            };
            (
                "initiatingMessage",
                10,
                I,
                "Paging",
                vec![
                    ie(
                        80,
                        I,
                        "UEIdentityIndexValue",
                        bits(p.ue_identity_index.into(), 10),
                    ),
                    ie(43, I, "UEPagingID", id),
                    ie(109, I, "CNDomain", json!(dom)),
                    ie(46, I, "TAIList", json!(tais)),
                ],
            )
        }
        M::ERabSetupRequest(r) => {
            let items: Vec<Value> = r
                .erabs
                .iter()
                .map(|e| {
                    ie(
                        17,
                        R,
                        "E-RABToBeSetupItemBearerSUReq",
                        json!({
                            "e-RAB-ID": e.id,
                            "e-RABlevelQoSParameters": qos(e.qci, e.arp, e.gbr),
                            "transportLayerAddress": addr(e.transport),
                            "gTP-TEID": teid(e.teid),
                            "nAS-PDU": hex(e.nas_pdu.as_deref().unwrap_or_default()),
                        }),
                    )
                })
                .collect();
            let mut v = vec![mme(r.mme_ue_id, R), enb(r.enb_ue_id, R)];
            if let Some(a) = r.ue_ambr {
                v.push(ie(66, R, "UEAggregateMaximumBitrate", ambr(a)));
            }
            v.push(ie(16, R, "E-RABToBeSetupListBearerSUReq", json!(items)));
            ("initiatingMessage", 5, R, "E-RABSetupRequest", v)
        }
        M::ERabSetupResponse(r) => {
            let mut v = vec![mme(r.mme_ue_id, I), enb(r.enb_ue_id, I)];
            if !r.setup.is_empty() {
                let items: Vec<Value> = r
                    .setup
                    .iter()
                    .map(|e| ie(39, I, "E-RABSetupItemBearerSURes", json!({"e-RAB-ID": e.id, "transportLayerAddress": addr(e.transport), "gTP-TEID": teid(e.teid)})))
                    .collect();
                v.push(ie(28, I, "E-RABSetupListBearerSURes", json!(items)));
            }
            if !r.failed.is_empty() {
                v.push(ie(29, I, "E-RABList", erab_items(&r.failed)));
            }
            ("successfulOutcome", 5, R, "E-RABSetupResponse", v)
        }
        M::ERabReleaseCommand(r) => {
            let mut v = vec![mme(r.mme_ue_id, R), enb(r.enb_ue_id, R)];
            if let Some(a) = r.ue_ambr {
                v.push(ie(66, R, "UEAggregateMaximumBitrate", ambr(a)));
            }
            v.push(ie(33, I, "E-RABList", erab_items(&r.erabs)));
            if let Some(n) = &r.nas_pdu {
                v.push(nas(n, I));
            }
            ("initiatingMessage", 7, R, "E-RABReleaseCommand", v)
        }
        M::PathSwitchRequest(p) => {
            let items: Vec<Value> = p
                .erabs
                .iter()
                .map(|e| ie(23, R, "E-RABToBeSwitchedDLItem", json!({"e-RAB-ID": e.id, "transportLayerAddress": addr(e.transport), "gTP-TEID": teid(e.teid)})))
                .collect();
            (
                "initiatingMessage",
                3,
                R,
                "PathSwitchRequest",
                vec![
                    enb(p.enb_ue_id, R),
                    ie(22, R, "E-RABToBeSwitchedDLList", json!(items)),
                    ie(88, R, "MME-UE-S1AP-ID", json!(p.source_mme_ue_id)),
                    ie(100, I, "EUTRAN-CGI", ecgi(p.ecgi)),
                    ie(67, I, "TAI", tai(p.tai)),
                    ie(
                        107,
                        I,
                        "UESecurityCapabilities",
                        caps(p.ue_security_capabilities),
                    ),
                ],
            )
        }
        M::PathSwitchRequestAcknowledge(p) => {
            let mut v = vec![mme(p.mme_ue_id, I), enb(p.enb_ue_id, I)];
            if let Some(a) = p.ue_ambr {
                v.push(ie(66, I, "UEAggregateMaximumBitrate", ambr(a)));
            }
            if !p.erabs_switched_ul.is_empty() {
                let items: Vec<Value> = p
                    .erabs_switched_ul
                    .iter()
                    .map(|e| ie(94, I, "E-RABToBeSwitchedULItem", json!({"e-RAB-ID": e.id, "transportLayerAddress": addr(e.transport), "gTP-TEID": teid(e.teid)})))
                    .collect();
                v.push(ie(95, I, "E-RABToBeSwitchedULList", json!(items)));
            }
            if !p.erabs_to_release.is_empty() {
                v.push(ie(33, I, "E-RABList", erab_items(&p.erabs_to_release)));
            }
            v.push(ie(40, R, "SecurityContext", sec_ctx(&p.security_context)));
            ("successfulOutcome", 3, R, "PathSwitchRequestAcknowledge", v)
        }
        M::HandoverRequired(h) => {
            let target = match &h.target {
                TargetId::Enb {
                    global_enb_id,
                    tai: t,
                } => {
                    json!({"targeteNB-ID": {"global-ENB-ID": global_enb(global_enb_id), "selected-TAI": tai(*t)}})
                }
                TargetId::Other(_) => panic!("no expected value for a non-eNB target"),
            };
            (
                "initiatingMessage",
                0,
                R,
                "HandoverRequired",
                vec![
                    mme(h.mme_ue_id, R),
                    enb(h.enb_ue_id, R),
                    ie(1, R, "HandoverType", json!(ho_type(h.handover_type))),
                    ie(2, I, "Cause", cause(h.cause)),
                    ie(4, R, "TargetID", target),
                    ie(
                        104,
                        R,
                        "Source-ToTarget-TransparentContainer",
                        json!(hex(&h.container)),
                    ),
                ],
            )
        }
        M::HandoverCommand(h) => {
            let mut v = vec![
                mme(h.mme_ue_id, R),
                enb(h.enb_ue_id, R),
                ie(1, R, "HandoverType", json!(ho_type(h.handover_type))),
            ];
            if !h.erabs_forwarding.is_empty() {
                let items: Vec<Value> = h
                    .erabs_forwarding
                    .iter()
                    .map(|f| {
                        let mut it = json!({"e-RAB-ID": f.id});
                        if let Some((a, t)) = f.dl {
                            it["dL-transportLayerAddress"] = addr(a);
                            it["dL-gTP-TEID"] = teid(t);
                        }
                        if let Some((a, t)) = f.ul {
                            it["uL-TransportLayerAddress"] = addr(a);
                            it["uL-GTP-TEID"] = teid(t);
                        }
                        ie(14, I, "E-RABDataForwardingItem", it)
                    })
                    .collect();
                v.push(ie(12, I, "E-RABSubjecttoDataForwardingList", json!(items)));
            }
            if !h.erabs_to_release.is_empty() {
                v.push(ie(13, I, "E-RABList", erab_items(&h.erabs_to_release)));
            }
            v.push(ie(
                123,
                R,
                "Target-ToSource-TransparentContainer",
                json!(hex(&h.container)),
            ));
            ("successfulOutcome", 0, R, "HandoverCommand", v)
        }
        M::HandoverRequest(h) => {
            let items: Vec<Value> = h
                .erabs
                .iter()
                .map(|e| {
                    ie(
                        27,
                        R,
                        "E-RABToBeSetupItemHOReq",
                        json!({
                            "e-RAB-ID": e.id,
                            "transportLayerAddress": addr(e.transport),
                            "gTP-TEID": teid(e.teid),
                            "e-RABlevelQosParameters": qos(e.qci, e.arp, e.gbr),
                        }),
                    )
                })
                .collect();
            (
                "initiatingMessage",
                1,
                R,
                "HandoverRequest",
                vec![
                    mme(h.mme_ue_id, R),
                    ie(1, R, "HandoverType", json!(ho_type(h.handover_type))),
                    ie(2, I, "Cause", cause(h.cause)),
                    ie(66, R, "UEAggregateMaximumBitrate", ambr(h.ue_ambr)),
                    ie(53, R, "E-RABToBeSetupListHOReq", json!(items)),
                    ie(
                        104,
                        R,
                        "Source-ToTarget-TransparentContainer",
                        json!(hex(&h.container)),
                    ),
                    ie(
                        107,
                        R,
                        "UESecurityCapabilities",
                        caps(h.ue_security_capabilities),
                    ),
                    ie(40, R, "SecurityContext", sec_ctx(&h.security_context)),
                ],
            )
        }
        M::HandoverRequestAcknowledge(h) => {
            let items: Vec<Value> = h
                .admitted
                .iter()
                .map(|a| {
                    let mut it = json!({"e-RAB-ID": a.id, "transportLayerAddress": addr(a.transport), "gTP-TEID": teid(a.teid)});
                    if let Some((x, t)) = a.dl_forwarding {
                        it["dL-transportLayerAddress"] = addr(x);
                        it["dL-gTP-TEID"] = teid(t);
                    }
                    if let Some((x, t)) = a.ul_forwarding {
                        it["uL-TransportLayerAddress"] = addr(x);
                        it["uL-GTP-TEID"] = teid(t);
                    }
                    ie(20, I, "E-RABAdmittedItem", it)
                })
                .collect();
            let mut v = vec![
                mme(h.mme_ue_id, I),
                enb(h.enb_ue_id, I),
                ie(18, I, "E-RABAdmittedList", json!(items)),
            ];
            if !h.failed.is_empty() {
                let f: Vec<Value> = h
                    .failed
                    .iter()
                    .map(|e| {
                        ie(
                            21,
                            I,
                            "E-RABFailedToSetupItemHOReqAck",
                            json!({"e-RAB-ID": e.id, "cause": cause(e.cause)}),
                        )
                    })
                    .collect();
                v.push(ie(19, I, "E-RABFailedtoSetupListHOReqAck", json!(f)));
            }
            v.push(ie(
                123,
                R,
                "Target-ToSource-TransparentContainer",
                json!(hex(&h.container)),
            ));
            ("successfulOutcome", 1, R, "HandoverRequestAcknowledge", v)
        }
        M::HandoverNotify(h) => (
            "initiatingMessage",
            2,
            I,
            "HandoverNotify",
            vec![
                mme(h.mme_ue_id, R),
                enb(h.enb_ue_id, R),
                ie(100, I, "EUTRAN-CGI", ecgi(h.ecgi)),
                ie(67, I, "TAI", tai(h.tai)),
            ],
        ),
        M::EnbStatusTransfer(s) => (
            "initiatingMessage",
            24,
            I,
            "ENBStatusTransfer",
            vec![
                mme(s.mme_ue_id, R),
                enb(s.enb_ue_id, R),
                ie(
                    90,
                    R,
                    "ENB-StatusTransfer-TransparentContainer",
                    status_container_value(&s.container),
                ),
            ],
        ),
        M::MmeStatusTransfer(s) => (
            "initiatingMessage",
            25,
            I,
            "MMEStatusTransfer",
            vec![
                mme(s.mme_ue_id, R),
                enb(s.enb_ue_id, R),
                ie(
                    90,
                    R,
                    "ENB-StatusTransfer-TransparentContainer",
                    status_container_value(&s.container),
                ),
            ],
        ),
        M::ErrorIndication(e) => {
            let mut v = vec![];
            if let Some(m) = e.mme_ue_id {
                v.push(mme(m, I));
            }
            if let Some(x) = e.enb_ue_id {
                v.push(enb(x, I));
            }
            if let Some(c) = e.cause {
                v.push(ie(2, I, "Cause", cause(c)));
            }
            ("initiatingMessage", 15, I, "ErrorIndication", v)
        }
        M::OverloadStart(o) => {
            let action = match o.action {
                OverloadAction::RejectNonEmergencyMoDt => "reject-non-emergency-mo-dt",
                OverloadAction::RejectRrcCrSignalling => "reject-rrc-cr-signalling",
                OverloadAction::PermitEmergencyAndMtOnly => {
                    "permit-emergency-sessions-and-mobile-terminated-services-only"
                }
                OverloadAction::PermitHighPriorityAndMtOnly => {
                    "permit-high-priority-sessions-and-mobile-terminated-services-only"
                }
                OverloadAction::RejectDelayTolerantAccess => "reject-delay-tolerant-access",
            };
            let mut v = vec![ie(
                101,
                R,
                "OverloadResponse",
                json!({ "overloadAction": action }),
            )];
            if let Some(p) = o.traffic_load_reduction {
                v.push(ie(161, I, "TrafficLoadReductionIndication", json!(p)));
            }
            ("initiatingMessage", 34, I, "OverloadStart", v)
        }
        M::OverloadStop(_) => ("initiatingMessage", 35, R, "OverloadStop", vec![]),
        M::Reset(r) => {
            let rt = match &r.kind {
                ResetKind::All => json!({"s1-Interface": "reset-all"}),
                ResetKind::Partial(c) => json!({"partOfS1-Interface": ues(c, R)}),
            };
            (
                "initiatingMessage",
                14,
                R,
                "Reset",
                vec![
                    ie(2, I, "Cause", cause(r.cause)),
                    ie(92, R, "ResetType", rt),
                ],
            )
        }
        M::EnbConfigurationUpdate(u) => {
            let mut v = vec![];
            if let Some(n) = &u.enb_name {
                v.push(ie(60, I, "ENBname", json!(n)));
            }
            if let Some(tas) = &u.supported_tas {
                let tas: Vec<Value> = tas
                    .iter()
                    .map(|t| json!({"tAC": hex(&t.tac.to_be_bytes()), "broadcastPLMNs": t.plmns.iter().map(|p| plmn(*p)).collect::<Vec<_>>()}))
                    .collect();
                v.push(ie(64, R, "SupportedTAs", json!(tas)));
            }
            if let Some(d) = u.paging_drx {
                v.push(ie(137, I, "PagingDRX", json!(format!("v{d}"))));
            }
            ("initiatingMessage", 29, R, "ENBConfigurationUpdate", v)
        }
        M::EnbConfigurationUpdateAcknowledge(_) => (
            "successfulOutcome",
            29,
            R,
            "ENBConfigurationUpdateAcknowledge",
            vec![],
        ),
        M::EnbConfigurationUpdateFailure(f) => {
            let mut v = vec![ie(2, I, "Cause", cause(f.cause))];
            if let Some(t) = f.time_to_wait {
                let n = ["v1s", "v2s", "v5s", "v10s", "v20s", "v60s"][t as usize];
                v.push(ie(65, I, "TimeToWait", json!(n)));
            }
            (
                "unsuccessfulOutcome",
                29,
                R,
                "ENBConfigurationUpdateFailure",
                v,
            )
        }
        M::ResetAcknowledge(r) => {
            let mut v = vec![];
            if !r.connections.is_empty() {
                v.push(ie(
                    93,
                    I,
                    "UE-associatedLogicalS1-ConnectionListResAck",
                    ues(&r.connections, I),
                ));
            }
            ("successfulOutcome", 14, R, "ResetAcknowledge", v)
        }
        other => panic!("no expected value written for {}", other.name()),
    };
    json!({ dir: {"procedureCode": code, "criticality": crit, "value": { name: {"protocolIEs": ies}}}})
}

fn ho_type(t: u8) -> &'static str {
    [
        "intralte",
        "ltetoutran",
        "ltetogeran",
        "utrantolte",
        "gerantolte",
    ][t as usize]
}

// ---------------------------------------------------------------- eNB Status Transfer container

/// (E-RAB id, UL (PDCP-SN, HFN), DL (PDCP-SN, HFN)) of the status container used below.
/// (PDCP-SN, HFN).
type Count = (u16, u32);
const STATUS: [(u8, Count, Count); 2] =
    [(5, (4095, 1_048_575), (0, 0)), (9, (1234, 77), (2047, 1))];

/// Aligned-PER bit writer, just enough for the container below.
#[derive(Default)]
struct Bits(Vec<bool>);
impl Bits {
    fn put(&mut self, v: u64, n: u32) {
        (0..n).rev().for_each(|i| self.0.push(v >> i & 1 == 1));
    }
    fn align(&mut self) {
        while !self.0.len().is_multiple_of(8) {
            self.0.push(false);
        }
    }
    fn octets(mut self) -> Vec<u8> {
        self.align();
        self.0
            .chunks(8)
            .map(|c| c.iter().fold(0u8, |a, b| a << 1 | u8::from(*b)))
            .collect()
    }
}

/// ENB-StatusTransfer-TransparentContainer as APER, built by hand from X.691 (so that
/// it is not our codec that builds what pycrate checks).
fn status_container() -> Vec<u8> {
    // SEQUENCE preamble (ext, iE-Extensions absent) + list count - 1 in one aligned octet.
    let mut out = vec![0x00, (STATUS.len() - 1) as u8];
    for (erab, ul, dl) in STATUS {
        let mut b = Bits::default();
        // Item preamble: ext, receiveStatusofULPDCPSDUs absent, iE-Extensions absent;
        // e-RAB-ID INTEGER (0..15, ...): ext bit + 4 bits.
        b.put(0, 3);
        b.put(0, 1);
        b.put(erab.into(), 4);
        for (sn, hfn) in [ul, dl] {
            // COUNTvalue: ext, iE-Extensions absent; PDCP-SN (0..4095) in 2 aligned octets;
            // HFN (0..1048575): octet count (1..3) in 2 bits, then the aligned octets.
            b.put(0, 2);
            b.align();
            b.put(sn.into(), 16);
            let n = (1..=3).find(|n| u64::from(hfn) < 1 << (8 * n)).unwrap();
            b.put(n - 1, 2);
            b.align();
            b.put(hfn.into(), 8 * n as u32);
        }
        let value = b.octets();
        // ProtocolIE-SingleContainer: id 89, criticality ignore, open type length.
        out.extend_from_slice(&[0x00, 89, 0x40, value.len() as u8]);
        out.extend_from_slice(&value);
    }
    out
}

fn status_container_value(_bytes: &[u8]) -> Value {
    let items: Vec<Value> = STATUS
        .iter()
        .map(|(e, (us, uh), (ds, dh))| {
            ie(
                89,
                I,
                "Bearers-SubjectToStatusTransfer-Item",
                json!({
                    "e-RAB-ID": e,
                    "uL-COUNTvalue": {"pDCP-SN": us, "hFN": uh},
                    "dL-COUNTvalue": {"pDCP-SN": ds, "hFN": dh},
                }),
            )
        })
        .collect();
    json!({"bearers-SubjectToStatusTransferList": items})
}

// ---------------------------------------------------------------- the messages we encode

fn p(mcc: &str, mnc: &str) -> Plmn {
    Plmn::from_mcc_mnc(mcc, mnc).unwrap()
}

fn messages() -> Vec<S1apMessage> {
    let a = p("001", "01");
    let b = p("310", "410");
    let c = p("208", "93");
    let tai_a = Tai {
        plmn: a,
        tac: 0xBEEF,
    };
    let tai_b = Tai {
        plmn: b,
        tac: 0x0001,
    };
    let ecgi_a = Ecgi {
        plmn: a,
        cell_id: 0x0ABC_DEF1,
    };
    let ecgi_c = Ecgi {
        plmn: c,
        cell_id: 0x000_0001,
    };
    let arp = |l, c, v| Arp {
        priority_level: l,
        pre_emption_capability: c,
        pre_emption_vulnerability: v,
    };
    let gbr = GbrQos {
        mbr_dl: 10_000_000_000,
        mbr_ul: 1,
        gbr_dl: 128_000,
        gbr_ul: 64_000,
    };
    let key = |s: u8| Key256(core::array::from_fn(|i| s.wrapping_add(i as u8 * 7)));
    let caps = UeSecurityCapabilities {
        eea: 0xC000,
        eia: 0x6000,
    };
    let erab_default = ERab {
        id: 5,
        qci: 9,
        arp: arp(15, false, true),
        gbr: None,
        transport: Ipv4Addr::new(10, 11, 12, 13),
        teid: 0xDEAD_BEEF,
        nas_pdu: Some(vec![0x27, 0x11, 0x22, 0x33, 0x44, 0x05, 0x07, 0x42]),
    };
    let erab_gbr = ERab {
        id: 6,
        qci: 1,
        arp: arp(1, true, false),
        gbr: Some(gbr),
        transport: Ipv4Addr::new(192, 0, 2, 1),
        teid: 0x0000_0001,
        nas_pdu: Some(vec![0x27, 0xAA, 0xBB, 0xCC, 0xDD, 0x06, 0x62, 0xC5]),
    };
    let nas_pdu = vec![
        0x07, 0x41, 0x71, 0x08, 0x09, 0x10, 0x10, 0x00, 0x00, 0x00, 0x00, 0x01,
    ];
    vec![
        EnbConfigurationUpdate {
            enb_name: Some("xcheck-eNB/2".into()),
            supported_tas: Some(vec![SupportedTa {
                tac: 0x0102,
                plmns: vec![a, c],
            }]),
            paging_drx: Some(64),
        }
        .into(),
        EnbConfigurationUpdate::default().into(),
        EnbConfigurationUpdateAcknowledge {}.into(),
        EnbConfigurationUpdateFailure {
            cause: Cause::UNKNOWN_PLMN,
            time_to_wait: Some(2),
        }
        .into(),
        S1SetupRequest {
            global_enb_id: GlobalEnbId {
                plmn: a,
                enb_id: EnbId::Macro(0xF_EDCB),
            },
            enb_name: Some("xcheck-eNB/1".into()),
            supported_tas: vec![
                SupportedTa {
                    tac: 0xBEEF,
                    plmns: vec![a, b],
                },
                SupportedTa {
                    tac: 0x0002,
                    plmns: vec![c],
                },
            ],
            paging_drx: Some(256),
        }
        .into(),
        S1SetupRequest {
            global_enb_id: GlobalEnbId {
                plmn: b,
                enb_id: EnbId::LongMacro(0x1F_FFFF),
            },
            enb_name: None,
            supported_tas: vec![SupportedTa {
                tac: 7,
                plmns: vec![b],
            }],
            paging_drx: Some(32),
        }
        .into(),
        S1SetupResponse {
            mme_name: Some("pepc-mme".into()),
            served_gummeis: vec![ServedGummei {
                plmns: vec![a, c],
                group_ids: vec![0x8001, 2],
                codes: vec![0x5C, 0xFF],
            }],
            relative_capacity: 127,
        }
        .into(),
        S1SetupFailure {
            cause: Cause::UNKNOWN_PLMN,
            time_to_wait: Some(3),
        }
        .into(),
        InitialUeMessage {
            enb_ue_id: 0x00AB_CDEF,
            nas_pdu: nas_pdu.clone(),
            tai: tai_a,
            ecgi: ecgi_a,
            rrc_cause: 3,
            s_tmsi: Some(STmsi {
                mmec: 0x5C,
                m_tmsi: 0xC0FF_EE01,
            }),
            gummei: Some(Gummei {
                plmn: b,
                mme_group_id: 0x8001,
                mme_code: 0x5C,
            }),
        }
        .into(),
        InitialUeMessage {
            enb_ue_id: 0,
            nas_pdu: vec![0xC7, 0x01, 0x02, 0x03],
            tai: tai_b,
            ecgi: ecgi_c,
            rrc_cause: 2,
            s_tmsi: None,
            gummei: None,
        }
        .into(),
        DownlinkNasTransport {
            mme_ue_id: 0xFFFF_FFFF,
            enb_ue_id: 0x00FF_FFFF,
            nas_pdu: vec![0x07, 0x52, 0x00, 0x01, 0x02],
        }
        .into(),
        UplinkNasTransport {
            mme_ue_id: 0x1234_5678,
            enb_ue_id: 0x0009_8765,
            nas_pdu: vec![0x27, 0xA1, 0xB2, 0xC3, 0xD4, 0x07, 0x07, 0x43],
            ecgi: ecgi_c,
            tai: tai_b,
        }
        .into(),
        NasNonDeliveryIndication {
            mme_ue_id: 31,
            enb_ue_id: 32,
            nas_pdu: vec![0x07, 0x61, 0x43],
            cause: Cause::RADIO_CONNECTION_WITH_UE_LOST,
        }
        .into(),
        InitialContextSetupRequest {
            mme_ue_id: 0x8000_0001,
            enb_ue_id: 0x0007_0707,
            ue_ambr: Ambr {
                dl: 300_000_000,
                ul: 50_000_000,
            },
            erabs: vec![
                erab_default.clone(),
                ERab {
                    nas_pdu: None,
                    id: 15,
                    ..erab_gbr.clone()
                },
            ],
            ue_security_capabilities: caps,
            security_key: key(0x3A),
        }
        .into(),
        InitialContextSetupResponse {
            mme_ue_id: 0x8000_0001,
            enb_ue_id: 0x0007_0707,
            erabs: vec![ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(172, 16, 254, 1),
                teid: 0x0102_0304,
            }],
            failed: vec![ERabCause {
                id: 15,
                cause: Cause::Transport(0),
            }],
        }
        .into(),
        UeContextReleaseRequest {
            mme_ue_id: 41,
            enb_ue_id: 42,
            cause: Cause::USER_INACTIVITY,
        }
        .into(),
        UeContextReleaseCommand {
            ids: UeS1apIds::Pair {
                mme_ue_id: 43,
                enb_ue_id: 0x00F0_0F0F,
            },
            cause: Cause::NAS_DETACH,
        }
        .into(),
        UeContextReleaseCommand {
            ids: UeS1apIds::MmeOnly(0xABCD_0123),
            cause: Cause::Nas(0),
        }
        .into(),
        UeContextReleaseComplete {
            mme_ue_id: 44,
            enb_ue_id: 45,
        }
        .into(),
        UeContextModificationRequest {
            mme_ue_id: 46,
            enb_ue_id: 47,
            security_key: Some(key(0x91)),
            ue_ambr: Some(Ambr {
                dl: 1,
                ul: 10_000_000_000,
            }),
            ue_security_capabilities: Some(UeSecurityCapabilities {
                eea: 0xE000,
                eia: 0x2000,
            }),
        }
        .into(),
        Paging {
            ue_identity_index: 0x3FF,
            paging_id: PagingIdentity::STmsi(STmsi {
                mmec: 0x5C,
                m_tmsi: 0x1234_5678,
            }),
            cn_domain: CnDomain::Ps,
            tai_list: vec![tai_a, tai_b],
        }
        .into(),
        Paging {
            ue_identity_index: 513,
            paging_id: PagingIdentity::Imsi(vec![0x00, 0xF1, 0x10, 0x32, 0x54, 0x76, 0xF8]),
            cn_domain: CnDomain::Cs,
            tai_list: vec![tai_b],
        }
        .into(),
        ERabSetupRequest {
            mme_ue_id: 51,
            enb_ue_id: 52,
            ue_ambr: Some(Ambr {
                dl: 2_000_000,
                ul: 1_000_000,
            }),
            erabs: vec![erab_gbr.clone()],
        }
        .into(),
        ERabSetupResponse {
            mme_ue_id: 51,
            enb_ue_id: 52,
            setup: vec![ERabTunnel {
                id: 6,
                transport: Ipv4Addr::new(198, 18, 0, 66),
                teid: 0x7FFF_FFFF,
            }],
            failed: vec![ERabCause {
                id: 7,
                cause: Cause::RadioNetwork(30),
            }],
        }
        .into(),
        ERabReleaseCommand {
            mme_ue_id: 53,
            enb_ue_id: 54,
            ue_ambr: Some(Ambr { dl: 777, ul: 888 }),
            erabs: vec![
                ERabCause {
                    id: 6,
                    cause: Cause::Nas(0),
                },
                ERabCause {
                    id: 8,
                    cause: Cause::RadioNetwork(0),
                },
            ],
            nas_pdu: Some(vec![0x27, 0x01, 0x02, 0x03, 0x04, 0x05, 0x62, 0xCD]),
        }
        .into(),
        PathSwitchRequest {
            enb_ue_id: 61,
            erabs: vec![
                ERabTunnel {
                    id: 5,
                    transport: Ipv4Addr::new(203, 0, 113, 1),
                    teid: 0xCAFE_F00D,
                },
                ERabTunnel {
                    id: 6,
                    transport: Ipv4Addr::new(203, 0, 113, 2),
                    teid: 0x0BAD_CAFE,
                },
            ],
            source_mme_ue_id: 0xFEED_FACE,
            ecgi: ecgi_a,
            tai: tai_a,
            ue_security_capabilities: caps,
        }
        .into(),
        PathSwitchRequestAcknowledge {
            mme_ue_id: 0xFEED_FACE,
            enb_ue_id: 61,
            ue_ambr: Some(Ambr { dl: 100, ul: 200 }),
            erabs_switched_ul: vec![ERabTunnel {
                id: 5,
                transport: Ipv4Addr::new(10, 200, 0, 1),
                teid: 0x0000_1000,
            }],
            erabs_to_release: vec![ERabCause {
                id: 6,
                cause: Cause::Transport(0),
            }],
            security_context: SecurityContext {
                ncc: 7,
                next_hop: key(0x42),
            },
        }
        .into(),
        HandoverRequired {
            mme_ue_id: 71,
            enb_ue_id: 72,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            target: TargetId::Enb {
                global_enb_id: GlobalEnbId {
                    plmn: c,
                    enb_id: EnbId::Home(0x0FED_CBA9),
                },
                tai: tai_a,
            },
            container: (0..=40).collect(),
        }
        .into(),
        HandoverRequest {
            mme_ue_id: 73,
            handover_type: 0,
            cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
            ue_ambr: Ambr {
                dl: 4_000_000_000,
                ul: 3,
            },
            erabs: vec![
                ERab {
                    nas_pdu: None,
                    ..erab_default.clone()
                },
                ERab {
                    nas_pdu: None,
                    ..erab_gbr.clone()
                },
            ],
            container: vec![0x40, 0x80, 0xC0, 0xFF],
            ue_security_capabilities: caps,
            security_context: SecurityContext {
                ncc: 2,
                next_hop: key(0x01),
            },
        }
        .into(),
        HandoverRequestAcknowledge {
            mme_ue_id: 73,
            enb_ue_id: 74,
            admitted: vec![
                ERabAdmitted {
                    id: 5,
                    transport: Ipv4Addr::new(100, 64, 0, 5),
                    teid: 0x5555_AAAA,
                    dl_forwarding: Some((Ipv4Addr::new(100, 64, 0, 6), 0x6666_0000)),
                    ul_forwarding: Some((Ipv4Addr::new(100, 64, 0, 7), 0x0000_7777)),
                },
                ERabAdmitted {
                    id: 9,
                    transport: Ipv4Addr::new(100, 64, 0, 9),
                    teid: 9,
                    dl_forwarding: None,
                    ul_forwarding: None,
                },
            ],
            failed: vec![ERabCause {
                id: 6,
                cause: Cause::RadioNetwork(30),
            }],
            container: vec![0x00, 0x11, 0x22],
        }
        .into(),
        HandoverCommand {
            mme_ue_id: 71,
            enb_ue_id: 72,
            handover_type: 0,
            erabs_forwarding: vec![ERabForwarding {
                id: 5,
                dl: Some((Ipv4Addr::new(100, 64, 1, 6), 0x1111_2222)),
                ul: Some((Ipv4Addr::new(100, 64, 1, 7), 0x3333_4444)),
            }],
            erabs_to_release: vec![ERabCause {
                id: 6,
                cause: Cause::RadioNetwork(30),
            }],
            container: vec![0xAB; 17],
        }
        .into(),
        HandoverNotify {
            mme_ue_id: 73,
            enb_ue_id: 74,
            ecgi: ecgi_c,
            tai: tai_b,
        }
        .into(),
        EnbStatusTransfer {
            mme_ue_id: 71,
            enb_ue_id: 72,
            container: status_container(),
        }
        .into(),
        MmeStatusTransfer {
            mme_ue_id: 73,
            enb_ue_id: 74,
            container: status_container(),
        }
        .into(),
        ErrorIndication {
            mme_ue_id: Some(81),
            enb_ue_id: Some(82),
            cause: Some(Cause::MESSAGE_NOT_COMPATIBLE_WITH_RECEIVER_STATE),
        }
        .into(),
        ErrorIndication {
            mme_ue_id: None,
            enb_ue_id: Some(83),
            cause: Some(Cause::Protocol(5)),
        }
        .into(),
        OverloadStart {
            action: OverloadAction::PermitEmergencyAndMtOnly,
            traffic_load_reduction: None,
        }
        .into(),
        OverloadStart {
            action: OverloadAction::RejectRrcCrSignalling,
            traffic_load_reduction: Some(40),
        }
        .into(),
        OverloadStop {}.into(),
        Reset {
            cause: Cause::OM_INTERVENTION,
            kind: ResetKind::All,
        }
        .into(),
        Reset {
            cause: Cause::Misc(3),
            kind: ResetKind::Partial(vec![
                UeConnection {
                    mme_ue_id: Some(91),
                    enb_ue_id: Some(92),
                },
                UeConnection {
                    mme_ue_id: None,
                    enb_ue_id: Some(93),
                },
                UeConnection {
                    mme_ue_id: Some(94),
                    enb_ue_id: None,
                },
            ]),
        }
        .into(),
        ResetAcknowledge::default().into(),
        ResetAcknowledge {
            connections: vec![UeConnection {
                mme_ue_id: Some(91),
                enb_ue_id: Some(92),
            }],
        }
        .into(),
    ]
}

// ---------------------------------------------------------------- the tests

#[test]
fn pycrate_decodes_what_we_encode() {
    let msgs = messages();
    let encoded: Vec<Vec<u8>> = msgs
        .iter()
        .map(|m| m.encode().unwrap_or_else(|e| panic!("{}: {e}", m.name())))
        .collect();
    let input: String = encoded.iter().map(|b| hex(b) + "\n").collect();
    let out = pycrate("decode", &input);
    let out = out.as_array().expect("a list");
    assert_eq!(out.len(), msgs.len(), "one answer per PDU");
    let mut failures = vec![];
    for ((m, bytes), r) in msgs.iter().zip(&encoded).zip(out) {
        let tag = format!("{} ({})", m.name(), hex(bytes));
        if r["ok"] != json!(true) {
            failures.push(format!("{tag}: pycrate cannot decode it: {}", r["error"]));
            continue;
        }
        let mut d = vec![];
        diff("", &expected(m), &r["pdu"], &mut d);
        failures.extend(d.into_iter().map(|x| format!("{tag}: {x}")));
        if r["reencoded"] != json!(hex(bytes)) {
            failures.push(format!(
                "{tag}: pycrate re-encodes it as {}",
                r["reencoded"]
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreements with pycrate:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn we_decode_what_pycrate_encodes() {
    let out = pycrate("encode", "");
    let out = out.as_array().expect("a list");
    assert!(out.len() >= 10, "pycrate built {} PDUs", out.len());
    let mut failures = vec![];
    for r in out {
        let name = r["name"].as_str().expect("name");
        let h = r["hex"].as_str().expect("hex");
        let bytes = unhex(h);
        let tag = format!("{name} ({h})");
        let m = match S1apMessage::decode(&bytes) {
            Ok(m) => m,
            Err(e) => {
                failures.push(format!("{tag}: we cannot decode it: {e}"));
                continue;
            }
        };
        if m.name() != name {
            failures.push(format!("{tag}: decoded as {}", m.name()));
            continue;
        }
        let mut d = vec![];
        diff("", &expected(&m), &r["pdu"], &mut d);
        failures.extend(d.into_iter().map(|x| format!("{tag}: {x}")));
        match m.encode() {
            Ok(b) if b == bytes => {}
            Ok(b) => failures.push(format!("{tag}: we re-encode it as {}", hex(&b))),
            Err(e) => failures.push(format!("{tag}: we cannot re-encode it: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} disagreements with pycrate:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Spot checks that the reverse direction really carried pycrate's values into our
/// typed messages (the generic comparison above could not tell a value from its echo).
#[test]
fn pycrate_values_land_in_our_fields() {
    let out = pycrate("encode", "");
    let find = |n: &str| {
        let h = out
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == n)
            .unwrap_or_else(|| panic!("{n} not built"));
        S1apMessage::decode(&unhex(h["hex"].as_str().unwrap())).unwrap()
    };
    let plmn = p("123", "45");
    match find("InitialUEMessage") {
        S1apMessage::InitialUeMessage(m) => {
            assert_eq!(m.enb_ue_id, 0xABCDE);
            assert_eq!(m.nas_pdu, unhex("17deadbeef0507450bf6"));
            assert_eq!(m.tai, Tai { plmn, tac: 0x7A7B });
            assert_eq!(
                m.ecgi,
                Ecgi {
                    plmn,
                    cell_id: 0xBEEF123
                }
            );
            assert_eq!(m.rrc_cause, 4);
            assert_eq!(
                m.s_tmsi,
                Some(STmsi {
                    mmec: 0x5C,
                    m_tmsi: 0xC0FF_EE01
                })
            );
            assert_eq!(
                m.gummei,
                Some(Gummei {
                    plmn,
                    mme_group_id: 0x8001,
                    mme_code: 0x5C
                })
            );
        }
        m => panic!("{m:?}"),
    }
    match find("InitialContextSetupResponse") {
        S1apMessage::InitialContextSetupResponse(m) => {
            assert_eq!(
                m.erabs,
                vec![
                    ERabTunnel {
                        id: 5,
                        transport: Ipv4Addr::new(10, 20, 30, 40),
                        teid: 0x1122_3344
                    },
                    ERabTunnel {
                        id: 15,
                        transport: Ipv4Addr::new(192, 0, 2, 255),
                        teid: 0xFFFF_FFFE
                    },
                ]
            );
            assert_eq!(
                m.failed,
                vec![ERabCause {
                    id: 6,
                    cause: Cause::Transport(1)
                }]
            );
        }
        m => panic!("{m:?}"),
    }
    match find("UEContextModificationRequest") {
        S1apMessage::UeContextModificationRequest(m) => {
            let k: Vec<u8> = (0xa0..0xc0).collect();
            assert_eq!(m.security_key.map(|k| k.0.to_vec()), Some(k));
            assert_eq!(
                m.ue_ambr,
                Some(Ambr {
                    dl: 10_000_000_000,
                    ul: 1
                })
            );
        }
        m => panic!("{m:?}"),
    }
    match find("S1SetupRequest") {
        S1apMessage::S1SetupRequest(m) => {
            assert_eq!(
                m.global_enb_id,
                GlobalEnbId {
                    plmn,
                    enb_id: EnbId::Home(0xABCDEF1)
                }
            );
            assert_eq!(m.paging_drx, Some(64));
            assert_eq!(
                m.supported_tas[1],
                SupportedTa {
                    tac: 0xFEDC,
                    plmns: vec![p("999", "999")]
                }
            );
        }
        m => panic!("{m:?}"),
    }
}
