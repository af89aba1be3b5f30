//! The Gx client (TS 29.212) as a sans-IO layer over the base [`Client`]: the MME's
//! [`PcrfRequest`]s out as CCR-I/U/T, CCAs back as [`PcrfAnswer`]s; the PCRF's RAR
//! answered (RAA) and surfaced as [`GxEvent::PolicyUpdate`].
//!
//! One Gx session per PDN connection, keyed by (IMSI, default bearer): the
//! Session-Id is made at the CCR-I and kept until the CCR-T, with the session's
//! CC-Request-Number. The table is bounded ([`GxConfig::max_sessions`]); a RAR
//! for a session we do not hold gets DIAMETER_UNKNOWN_SESSION_ID (RFC 6733 §8.3).
//!
//! What a CCA or RAR decides is read into a [`PolicyDecision`]: dynamic PCC rules
//! (Charging-Rule-Definition: flows, QoS, precedence, rating group, monitoring key),
//! removals by name, Default-EPS-Bearer-QoS, APN-AMBR, and session-level usage
//! monitoring grants. Predefined rules (a Charging-Rule-Name or -Base-Name to install)
//! are not held by this PCEF: they are counted and left out.

use crate::base::{self, Client, Event, RequestError, ResultCode};
use crate::codec::{self, flags, AvpView, AvpWriter, DecodeError, MessageView};
use crate::dict::{app, avp, avp3, cmd, result, VENDOR_3GPP};
use pepc_seams::pcrf::{
    FlowDirection, FlowFilter, PccRule, PcrfAnswer, PcrfFailure, PcrfRequest, PolicyDecision,
    PolicySession, UsageGrant, UsageReport, MAX_FLOWS_PER_RULE, MAX_MONITORING_KEYS,
    MAX_RULES_PER_SESSION,
};
use pepc_seams::HssRef;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

const V: u32 = VENDOR_3GPP;

/// Where Gx requests go.
#[derive(Debug, Clone)]
pub struct GxConfig {
    pub destination_realm: String,
    /// Left out of requests when `None` (realm routing).
    pub destination_host: Option<String>,
    /// Gx sessions held at once; a CCR-I beyond is refused locally.
    pub max_sessions: usize,
}

impl Default for GxConfig {
    fn default() -> Self {
        GxConfig {
            destination_realm: "localdomain".into(),
            destination_host: None,
            max_sessions: 1 << 22,
        }
    }
}

/// What the PCRF asked of us, already answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GxEvent {
    /// A RAR for the session of `imsi`'s PDN connection of default bearer `ebi`:
    /// its decision, for the consumer of MME UE S1AP ID `route`.
    PolicyUpdate {
        imsi: u64,
        ebi: u8,
        decision: PolicyDecision,
        route: u32,
    },
    PeerUp {
        peer: usize,
        host: String,
    },
    PeerDown {
        peer: usize,
        reason: String,
    },
}

/// Figures of the Gx client beyond the base's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GxStats {
    pub sessions: usize,
    pub rars: u64,
    pub rars_unknown_session: u64,
    /// Predefined rules (by name or base name) asked to be installed: not held here.
    pub predefined_rules_ignored: u64,
    /// Rules or flows of a CCA/RAR that could not be read (left out).
    pub rules_unreadable: u64,
}

/// One Gx session.
#[derive(Debug, Clone)]
struct Session {
    imsi: u64,
    ebi: u8,
    /// The MME UE S1AP ID that opened it (its slice gets the RARs).
    route: u32,
    number: u32,
}

/// What a request waits for.
enum Want {
    /// A CCA-I or CCA-U for the MME's request `r` on session `sid`.
    Answer {
        r: HssRef,
        sid: String,
        initial: bool,
    },
    /// A CCA-T: nothing waits (the session is gone already).
    Terminate,
}

/// The identity of one request for the AVPs every Gx request starts with.
pub struct Head<'a> {
    pub session_id: &'a str,
    pub origin_host: &'a str,
    pub origin_realm: &'a str,
    pub destination_realm: &'a str,
    pub destination_host: Option<&'a str>,
}

/// CC-Request-Type values (RFC 4006 §8.3).
pub const INITIAL_REQUEST: u32 = 1;
pub const UPDATE_REQUEST: u32 = 2;
pub const TERMINATION_REQUEST: u32 = 3;
/// Event-Trigger USAGE_REPORT (TS 29.212 §5.3.7).
pub const USAGE_REPORT: u32 = 26;

/// A CCR (TS 29.212 §5.6.2) for `session`: the IMSI as Subscription-Id, the UE's
/// address, the APN, the bearer QoS at the CCR-I, usage at the CCR-U/T.
pub fn ccr(
    buf: &mut Vec<u8>,
    h: &Head<'_>,
    kind: u32,
    number: u32,
    session: &PolicySession,
    subscribed: Option<&pepc_seams::SessionQos>,
    usage: &[UsageReport],
) {
    codec::begin(
        buf,
        flags::REQUEST | flags::PROXIABLE,
        cmd::CREDIT_CONTROL,
        app::GX,
        0,
        0,
    );
    let mut w = AvpWriter::new(buf);
    w.str(avp::SESSION_ID, 0, true, h.session_id);
    w.u32(avp::AUTH_APPLICATION_ID, 0, true, app::GX);
    w.str(avp::ORIGIN_HOST, 0, true, h.origin_host);
    w.str(avp::ORIGIN_REALM, 0, true, h.origin_realm);
    if let Some(d) = h.destination_host {
        w.str(avp::DESTINATION_HOST, 0, true, d);
    }
    w.str(avp::DESTINATION_REALM, 0, true, h.destination_realm);
    w.u32(avp::CC_REQUEST_TYPE, 0, true, kind);
    w.u32(avp::CC_REQUEST_NUMBER, 0, true, number);
    w.grouped(avp::SUBSCRIPTION_ID, 0, true, |w| {
        w.u32(avp::SUBSCRIPTION_ID_TYPE, 0, true, 1); // END_USER_IMSI
        w.str(
            avp::SUBSCRIPTION_ID_DATA,
            0,
            true,
            &format!("{:015}", session.imsi),
        );
    });
    if kind == INITIAL_REQUEST {
        w.u32(avp3::NETWORK_REQUEST_SUPPORT, V, true, 1); // NETWORK_REQUEST_SUPPORTED
        w.octets(avp::FRAMED_IP_ADDRESS, 0, true, &session.ue_ip.octets());
        w.u32(avp3::IP_CAN_TYPE, V, true, 5); // 3GPP-EPS

        // V, not M (TS 29.212 Table 5.3.1), as every AVP marked false below: a
        // receiver that does not know one may ignore it (tests/avp_flags.rs).
        w.u32(avp3::RAT_TYPE, V, false, 1004); // EUTRAN
        if let Some(q) = subscribed {
            w.grouped(avp3::QOS_INFORMATION, V, true, |w| {
                w.u32(
                    avp3::APN_AGGREGATE_MAX_BITRATE_UL,
                    V,
                    false,
                    clamp32(q.ambr_ul),
                );
                w.u32(
                    avp3::APN_AGGREGATE_MAX_BITRATE_DL,
                    V,
                    false,
                    clamp32(q.ambr_dl),
                );
            });
            w.grouped(avp3::DEFAULT_EPS_BEARER_QOS, V, false, |w| {
                w.u32(avp3::QOS_CLASS_IDENTIFIER, V, true, u32::from(q.qci));
                arp(w, q.arp_priority);
            });
        }
        w.str(avp::CALLED_STATION_ID, 0, true, &session.apn);
    }
    if kind == TERMINATION_REQUEST {
        w.u32(avp::TERMINATION_CAUSE, 0, true, 1); // DIAMETER_LOGOUT
    }
    if kind == UPDATE_REQUEST && !usage.is_empty() {
        w.u32(avp3::EVENT_TRIGGER, V, true, USAGE_REPORT);
    }
    for u in usage {
        w.grouped(avp3::USAGE_MONITORING_INFORMATION, V, false, |w| {
            w.octets(avp3::MONITORING_KEY, V, false, u.key.as_bytes());
            w.grouped(avp::USED_SERVICE_UNIT, 0, true, |w| {
                w.u64(avp::CC_TOTAL_OCTETS, 0, true, u.ul_bytes + u.dl_bytes);
                w.u64(avp::CC_INPUT_OCTETS, 0, true, u.ul_bytes);
                w.u64(avp::CC_OUTPUT_OCTETS, 0, true, u.dl_bytes);
            });
            w.u32(avp3::USAGE_MONITORING_LEVEL, V, false, 0); // SESSION_LEVEL
        });
    }
    codec::finish(buf);
}

fn arp(w: &mut AvpWriter<'_>, priority: u8) {
    w.grouped(avp3::ALLOCATION_RETENTION_PRIORITY, V, true, |w| {
        w.u32(avp3::PRIORITY_LEVEL, V, true, u32::from(priority));
        w.u32(avp3::PRE_EMPTION_CAPABILITY, V, true, 1); // DISABLED
        w.u32(avp3::PRE_EMPTION_VULNERABILITY, V, true, 0); // ENABLED
    });
}

fn clamp32(v: u64) -> u32 {
    v.min(u64::from(u32::MAX)) as u32
}

fn bad(name: &'static str, code: u32, why: String) -> DecodeError {
    DecodeError::BadValue { name, code, why }
}

/// The decision a CCA or RAR carries. Rules that cannot be read are left out and
/// counted in `unreadable`; predefined ones in `predefined`.
pub fn parse_decision<T: AsRef<[u8]>>(
    m: &MessageView<T>,
    unreadable: &mut u64,
    predefined: &mut u64,
) -> Result<PolicyDecision, DecodeError> {
    let mut d = PolicyDecision::default();
    for a in m.avps() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (V, avp3::CHARGING_RULE_INSTALL) => {
                for r in a.grouped() {
                    let r = r?;
                    match (r.vendor_id(), r.code()) {
                        (V, avp3::CHARGING_RULE_DEFINITION) => match parse_rule(&r) {
                            Ok(rule) if d.install.len() < MAX_RULES_PER_SESSION => {
                                d.install.push(rule)
                            }
                            _ => *unreadable += 1,
                        },
                        (V, avp3::CHARGING_RULE_NAME | avp3::CHARGING_RULE_BASE_NAME) => {
                            *predefined += 1
                        }
                        _ => {}
                    }
                }
            }
            (V, avp3::CHARGING_RULE_REMOVE) => {
                for r in a.grouped() {
                    let r = r?;
                    if (r.vendor_id(), r.code()) == (V, avp3::CHARGING_RULE_NAME) {
                        d.remove
                            .push(String::from_utf8_lossy(r.octets()).into_owned());
                    }
                }
            }
            (V, avp3::DEFAULT_EPS_BEARER_QOS) => {
                let (qci, prio) = parse_qci_arp(&a)?;
                if let (Some(q), Some(p)) = (qci, prio) {
                    d.default_qos = Some((q, p));
                }
            }
            (V, avp3::QOS_INFORMATION) => {
                let (mut ul, mut dl) = (None, None);
                for q in a.grouped() {
                    let q = q?;
                    match (q.vendor_id(), q.code()) {
                        (V, avp3::APN_AGGREGATE_MAX_BITRATE_UL) => ul = Some(q.u32()?),
                        (V, avp3::APN_AGGREGATE_MAX_BITRATE_DL) => dl = Some(q.u32()?),
                        _ => {}
                    }
                }
                if let (Some(ul), Some(dl)) = (ul, dl) {
                    d.ambr = Some((u64::from(ul), u64::from(dl)));
                }
            }
            (V, avp3::USAGE_MONITORING_INFORMATION) => {
                let mut key = None;
                let mut octets = None;
                for u in a.grouped() {
                    let u = u?;
                    match (u.vendor_id(), u.code()) {
                        (V, avp3::MONITORING_KEY) => {
                            key = Some(String::from_utf8_lossy(u.octets()).into_owned())
                        }
                        (0, avp::GRANTED_SERVICE_UNIT) => {
                            if let Some(t) = codec::find_in(u.grouped(), 0, avp::CC_TOTAL_OCTETS)? {
                                octets = Some(t.u64()?);
                            }
                        }
                        _ => {}
                    }
                }
                if let (Some(key), Some(octets)) = (key, octets) {
                    if d.monitoring.len() < MAX_MONITORING_KEYS {
                        d.monitoring.push(UsageGrant { key, octets });
                    }
                }
            }
            _ => {}
        }
    }
    Ok(d)
}

/// QCI and ARP priority of a QoS-Information or Default-EPS-Bearer-QoS.
fn parse_qci_arp(a: &AvpView<&[u8]>) -> Result<(Option<u8>, Option<u8>), DecodeError> {
    let (mut qci, mut prio) = (None, None);
    for q in a.grouped() {
        let q = q?;
        match (q.vendor_id(), q.code()) {
            (V, avp3::QOS_CLASS_IDENTIFIER) => qci = Some(small(&q, "QCI")?),
            (V, avp3::ALLOCATION_RETENTION_PRIORITY) => {
                if let Some(p) = codec::find_in(q.grouped(), V, avp3::PRIORITY_LEVEL)? {
                    prio = Some(small(&p, "Priority-Level")?);
                }
            }
            _ => {}
        }
    }
    Ok((qci, prio))
}

fn small(a: &AvpView<&[u8]>, name: &'static str) -> Result<u8, DecodeError> {
    let v = a.u32()?;
    u8::try_from(v).map_err(|_| bad(name, a.code(), format!("value {v}")))
}

/// A Charging-Rule-Definition (TS 29.212 §5.3.4).
pub fn parse_rule(r: &AvpView<&[u8]>) -> Result<PccRule, DecodeError> {
    let mut name = None;
    let mut flows = Vec::new();
    let mut precedence = 255;
    let mut rating_group = None;
    let mut monitoring_key = None;
    let (mut qci, mut prio) = (None, None);
    let (mut mbr, mut gbr) = ((0, 0), (0, 0));
    for a in r.grouped() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (V, avp3::CHARGING_RULE_NAME) => {
                name = Some(String::from_utf8_lossy(a.octets()).into_owned())
            }
            (V, avp3::FLOW_INFORMATION) => {
                let (mut desc, mut dir) = (None, FlowDirection::Both);
                for f in a.grouped() {
                    let f = f?;
                    match (f.vendor_id(), f.code()) {
                        (V, avp3::FLOW_DESCRIPTION) => desc = Some(f.utf8()?.to_string()),
                        (V, avp3::FLOW_DIRECTION) => {
                            dir = match f.enumerated()? {
                                1 => FlowDirection::Downlink,
                                2 => FlowDirection::Uplink,
                                _ => FlowDirection::Both,
                            }
                        }
                        _ => {}
                    }
                }
                let desc = desc.ok_or(DecodeError::Missing {
                    name: "Flow-Description",
                    code: avp3::FLOW_DESCRIPTION,
                })?;
                let f = FlowFilter::parse(&desc, dir)
                    .map_err(|e| bad("Flow-Description", avp3::FLOW_DESCRIPTION, e.to_string()))?;
                if flows.len() >= MAX_FLOWS_PER_RULE {
                    return Err(bad(
                        "Flow-Information",
                        avp3::FLOW_INFORMATION,
                        format!("more than {MAX_FLOWS_PER_RULE}"),
                    ));
                }
                flows.push(f);
            }
            (V, avp3::QOS_INFORMATION) => {
                (qci, prio) = parse_qci_arp(&a)?;
                for q in a.grouped() {
                    let q = q?;
                    let v = || q.u32().map(u64::from);
                    match (q.vendor_id(), q.code()) {
                        (V, avp3::MAX_REQUESTED_BANDWIDTH_UL) => mbr.0 = v()?,
                        (V, avp3::MAX_REQUESTED_BANDWIDTH_DL) => mbr.1 = v()?,
                        (V, avp3::GUARANTEED_BITRATE_UL) => gbr.0 = v()?,
                        (V, avp3::GUARANTEED_BITRATE_DL) => gbr.1 = v()?,
                        _ => {}
                    }
                }
            }
            (V, avp3::PRECEDENCE) => precedence = a.u32()?,
            (0, avp::RATING_GROUP) => rating_group = Some(a.u32()?),
            (V, avp3::MONITORING_KEY) => {
                monitoring_key = Some(String::from_utf8_lossy(a.octets()).into_owned())
            }
            _ => {}
        }
    }
    let rule = PccRule {
        name: name.ok_or(DecodeError::Missing {
            name: "Charging-Rule-Name",
            code: avp3::CHARGING_RULE_NAME,
        })?,
        precedence,
        qci: qci.ok_or(DecodeError::Missing {
            name: "QoS-Class-Identifier",
            code: avp3::QOS_CLASS_IDENTIFIER,
        })?,
        arp_priority: prio.unwrap_or(15),
        mbr,
        gbr,
        rating_group,
        monitoring_key,
        flows,
    };
    rule.validate().map_err(|e| {
        bad(
            "Charging-Rule-Definition",
            avp3::CHARGING_RULE_DEFINITION,
            e.to_string(),
        )
    })?;
    Ok(rule)
}

/// The sans-IO Gx client over the base [`Client`].
pub struct GxClient {
    base: Client,
    cfg: GxConfig,
    sessions: HashMap<String, Session>,
    by_key: HashMap<(u64, u8), String>,
    wants: HashMap<u64, Want>,
    next_token: u64,
    session_seq: u32,
    session_hi: u32,
    buf: Vec<u8>,
    answers: Vec<PcrfAnswer>,
    events: VecDeque<GxEvent>,
    pub stats: GxStats,
}

impl GxClient {
    pub fn new(base: Client, cfg: GxConfig, session_hi: u32) -> GxClient {
        GxClient {
            base,
            cfg,
            sessions: HashMap::new(),
            by_key: HashMap::new(),
            wants: HashMap::new(),
            next_token: 0,
            session_seq: 0,
            session_hi,
            buf: Vec::with_capacity(512),
            answers: Vec::new(),
            events: VecDeque::new(),
            stats: GxStats::default(),
        }
    }

    pub fn base(&mut self) -> &mut Client {
        &mut self.base
    }

    pub fn next_timeout(&self) -> Option<Instant> {
        self.base.next_timeout()
    }

    /// Sessions held.
    pub fn sessions(&self) -> usize {
        self.sessions.len()
    }

    /// Sends the CCR; one that cannot be sent is answered at once (a failure).
    pub fn submit(&mut self, now: Instant, req: PcrfRequest) {
        let (kind, r, subscribed, usage) = match &req {
            PcrfRequest::Establish { r, subscribed, .. } => {
                (INITIAL_REQUEST, Some(*r), Some(*subscribed), &[][..])
            }
            PcrfRequest::Report { r, usage, .. } => (UPDATE_REQUEST, Some(*r), None, &usage[..]),
            PcrfRequest::Terminate { usage, .. } => (TERMINATION_REQUEST, None, None, &usage[..]),
        };
        let s = req.session();
        let key = (s.imsi, s.ebi);
        let fail = |this: &mut Self, why: String| {
            if let Some(r) = r {
                this.answers.push(PcrfAnswer {
                    r,
                    imsi: key.0,
                    ebi: key.1,
                    result: Err(PcrfFailure::Unavailable(why)),
                });
            }
        };
        let sid = match kind {
            INITIAL_REQUEST => {
                // A new CCR-I for a key replaces the old session (a UE that
                // re-attached): the old one is ended locally.
                if let Some(old) = self.by_key.remove(&key) {
                    self.sessions.remove(&old);
                }
                if self.sessions.len() >= self.cfg.max_sessions {
                    return fail(self, format!("{} Gx sessions held", self.sessions.len()));
                }
                let sid = self.session_id();
                self.sessions.insert(
                    sid.clone(),
                    Session {
                        imsi: s.imsi,
                        ebi: s.ebi,
                        route: r.map_or(0, |r| r.mme_ue_id),
                        number: 0,
                    },
                );
                self.by_key.insert(key, sid.clone());
                sid
            }
            _ => match self.by_key.get(&key) {
                Some(sid) => sid.clone(),
                None => return fail(self, "no Gx session for it".into()),
            },
        };
        let number = {
            let sess = self.sessions.get_mut(&sid).expect("indexed");
            let n = sess.number;
            sess.number += 1;
            n
        };
        if kind == TERMINATION_REQUEST {
            self.by_key.remove(&key);
            self.sessions.remove(&sid);
        }
        self.stats.sessions = self.sessions.len();
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        {
            let c = self.base.config();
            let h = Head {
                session_id: &sid,
                origin_host: &c.origin_host,
                origin_realm: &c.origin_realm,
                destination_realm: &self.cfg.destination_realm,
                destination_host: self.cfg.destination_host.as_deref(),
            };
            ccr(&mut buf, &h, kind, number, s, subscribed.as_ref(), usage);
        }
        let want = match r {
            Some(r) => Want::Answer {
                r,
                sid: sid.clone(),
                initial: kind == INITIAL_REQUEST,
            },
            None => Want::Terminate,
        };
        self.next_token += 1;
        let token = self.next_token;
        match self.base.send_request(now, buf.clone(), token) {
            Ok(()) => {
                self.wants.insert(token, want);
            }
            Err(e) => {
                if kind == INITIAL_REQUEST {
                    self.forget(&sid);
                }
                fail(self, e.to_string());
            }
        }
        self.buf = buf;
    }

    fn forget(&mut self, sid: &str) {
        if let Some(s) = self.sessions.remove(sid) {
            if self.by_key.get(&(s.imsi, s.ebi)).is_some_and(|x| x == sid) {
                self.by_key.remove(&(s.imsi, s.ebi));
            }
        }
        self.stats.sessions = self.sessions.len();
    }

    fn session_id(&mut self) -> String {
        self.session_seq = self.session_seq.wrapping_add(1);
        format!(
            "{};{};{};gx",
            self.base.config().origin_host,
            self.session_hi,
            self.session_seq
        )
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.base.handle_timeout(now);
        self.process();
    }

    pub fn process(&mut self) {
        while let Some(e) = self.base.poll_event() {
            match e {
                Event::Answer { token, msg } => self.on_answer(token, &msg),
                Event::Failed { token, error } => {
                    let f = match error {
                        RequestError::Timeout => PcrfFailure::Timeout,
                        e => PcrfFailure::Unavailable(e.to_string()),
                    };
                    self.fail(token, f);
                }
                Event::Request { peer, msg } => self.on_request(peer, &msg),
                Event::PeerUp { peer, host } => {
                    self.events.push_back(GxEvent::PeerUp { peer, host })
                }
                Event::PeerDown { peer, reason } => {
                    self.events.push_back(GxEvent::PeerDown { peer, reason })
                }
            }
        }
    }

    pub fn take_answers(&mut self, out: &mut Vec<PcrfAnswer>) {
        out.append(&mut self.answers);
    }

    pub fn poll_event(&mut self) -> Option<GxEvent> {
        self.events.pop_front()
    }

    fn fail(&mut self, token: u64, f: PcrfFailure) {
        if let Some(Want::Answer { r, sid, initial }) = self.wants.remove(&token) {
            let key = self.sessions.get(&sid).map(|s| (s.imsi, s.ebi));
            if initial {
                self.forget(&sid);
            }
            if let Some((imsi, ebi)) = key {
                self.answers.push(PcrfAnswer {
                    r,
                    imsi,
                    ebi,
                    result: Err(f),
                });
            }
        }
    }

    fn on_answer(&mut self, token: u64, msg: &[u8]) {
        let Some(want) = self.wants.remove(&token) else {
            return;
        };
        let Want::Answer { r, sid, initial } = want else {
            return; // CCA-T: the session is gone already
        };
        let Some((imsi, ebi)) = self.sessions.get(&sid).map(|s| (s.imsi, s.ebi)) else {
            return; // terminated meanwhile
        };
        let (mut unreadable, mut predefined) = (0, 0);
        let result = MessageView::new_checked(msg).and_then(|m| {
            if m.command_code() != cmd::CREDIT_CONTROL {
                return Ok(Err(PcrfFailure::Unavailable(format!(
                    "answered with command {}",
                    m.command_code()
                ))));
            }
            Ok(match base::result_of(&m)? {
                Some(rc) if rc.is_success() => {
                    Ok(parse_decision(&m, &mut unreadable, &mut predefined)?)
                }
                Some(ResultCode::Base(c)) | Some(ResultCode::Experimental { code: c, .. }) => {
                    Err(PcrfFailure::Rejected(c))
                }
                None => Err(PcrfFailure::Unavailable("CCA without a result".into())),
            })
        });
        self.stats.rules_unreadable += unreadable;
        self.stats.predefined_rules_ignored += predefined;
        let result = match result {
            Ok(r) => r,
            Err(e) => Err(PcrfFailure::Unavailable(format!("malformed CCA: {e}"))),
        };
        if initial && result.is_err() {
            self.forget(&sid);
        }
        self.answers.push(PcrfAnswer {
            r,
            imsi,
            ebi,
            result,
        });
    }

    /// A RAR: answered at once (RAA), its decision to the session's slice.
    fn on_request(&mut self, peer: usize, msg: &[u8]) {
        let Ok(m) = MessageView::new_checked(msg) else {
            return;
        };
        let answer_avps = |_: &mut AvpWriter<'_>| {};
        if m.command_code() != cmd::RE_AUTH {
            return self
                .base
                .answer(peer, msg, result::COMMAND_UNSUPPORTED, None, answer_avps);
        }
        self.stats.rars += 1;
        let known: Vec<(u32, u32)> = vec![
            (0, avp::SESSION_ID),
            (0, avp::AUTH_APPLICATION_ID),
            (0, avp::ORIGIN_HOST),
            (0, avp::ORIGIN_REALM),
            (0, avp::DESTINATION_HOST),
            (0, avp::DESTINATION_REALM),
            (0, avp::RE_AUTH_REQUEST_TYPE),
            (0, avp::PROXY_INFO),
            (0, avp::ROUTE_RECORD),
            (0, avp::ORIGIN_STATE_ID),
            (V, avp3::SESSION_RELEASE_CAUSE),
            (V, avp3::EVENT_TRIGGER),
            (V, avp3::CHARGING_RULE_INSTALL),
            (V, avp3::CHARGING_RULE_REMOVE),
            (V, avp3::DEFAULT_EPS_BEARER_QOS),
            (V, avp3::QOS_INFORMATION),
            (V, avp3::USAGE_MONITORING_INFORMATION),
            (V, avp3::SUPPORTED_FEATURES),
        ];
        match base::unknown_mandatory(m.avps(), &known) {
            Ok(None) => {}
            Ok(Some(a)) => {
                let a = a.as_bytes().to_vec();
                return self
                    .base
                    .answer(peer, msg, result::AVP_UNSUPPORTED, Some(&a), answer_avps);
            }
            Err(_) => {
                return self
                    .base
                    .answer(peer, msg, result::INVALID_AVP_BITS, None, answer_avps)
            }
        }
        let sid = match m.find(0, avp::SESSION_ID) {
            Ok(Some(s)) => String::from_utf8_lossy(s.octets()).into_owned(),
            _ => {
                return self
                    .base
                    .answer(peer, msg, result::MISSING_AVP, None, answer_avps)
            }
        };
        let Some(sess) = self.sessions.get(&sid).cloned() else {
            self.stats.rars_unknown_session += 1;
            return self
                .base
                .answer(peer, msg, result::UNKNOWN_SESSION_ID, None, answer_avps);
        };
        if matches!(m.find(V, avp3::SESSION_RELEASE_CAUSE), Ok(Some(_))) {
            // IP-CAN session termination is not served: the PCRF hears so.
            return self
                .base
                .answer(peer, msg, result::UNABLE_TO_COMPLY, None, answer_avps);
        }
        let (mut unreadable, mut predefined) = (0, 0);
        let decision = match parse_decision(&m, &mut unreadable, &mut predefined) {
            Ok(d) => d,
            Err(_) => {
                return self
                    .base
                    .answer(peer, msg, result::UNABLE_TO_COMPLY, None, answer_avps)
            }
        };
        self.stats.rules_unreadable += unreadable;
        self.stats.predefined_rules_ignored += predefined;
        self.base
            .answer(peer, msg, result::SUCCESS, None, answer_avps);
        self.events.push_back(GxEvent::PolicyUpdate {
            imsi: sess.imsi,
            ebi: sess.ebi,
            decision,
            route: sess.route,
        });
    }
}
