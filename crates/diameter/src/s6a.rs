//! The S6a client (TS 29.272) as a sans-IO layer over the base [`Client`]: the MME's
//! [`HssRequest`]s out as AIR/ULR, AIA/ULA back as [`HssAnswer`]s; PUR/PUA; the HSS's
//! CLR and IDR answered and surfaced as [`S6aEvent`]s.

use crate::base::{self, Client, Event, RequestError, ResultCode};
use crate::codec::{self, flags, AvpView, AvpWriter, DecodeError, MessageView};
use crate::dict::{app, avp, avp3, cmd, exp, result, VENDOR_3GPP};
use pepc_seams::hss::{DefaultApn, HssData, SubscriptionData, SubscriptionUpdate};
use pepc_seams::PdnType;
use pepc_seams::{HssAnswer, HssFailure, HssRef, HssRequest};
use pepc_security::{AuthVector, Key256};
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

const V: u32 = VENDOR_3GPP;

/// Where S6a requests go, and what they say of us.
#[derive(Debug, Clone)]
pub struct S6aConfig {
    pub destination_realm: String,
    /// Left out of requests when `None` (realm routing).
    pub destination_host: Option<String>,
    /// Our PLMN (TBCD, 3 bytes) for ULR's Visited-PLMN-Id: `HssRequest::Profile`
    /// does not carry one.
    pub visited_plmn: [u8; 3],
}

/// What the HSS asked of us, already answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum S6aEvent {
    /// CLR (→ network-initiated detach of `imsi`); `cancellation_type` per §7.3.24,
    /// `reattach_required` the Reattach-Required bit of CLR-Flags (§7.3.152).
    CancelLocation {
        imsi: String,
        cancellation_type: u32,
        reattach_required: bool,
    },
    /// IDR: what of the subscription it changed (an IDR whose Subscription-Data
    /// cannot be read is answered DIAMETER_UNABLE_TO_COMPLY and not reported).
    ///
    /// Its IDA waits for [`S6aClient::idr_outcome`] with `token` (whether the MME
    /// knows `imsi`, §5.2.2.1.2: DIAMETER_ERROR_USER_UNKNOWN if not), at most
    /// [`IDR_OUTCOME_TIMEOUT`] (then DIAMETER_UNABLE_TO_COMPLY).
    InsertSubscriberData {
        imsi: String,
        update: SubscriptionUpdate,
        token: u64,
    },
    /// The answer to [`S6aClient::purge`].
    Purged {
        imsi: String,
        result: Result<(), HssFailure>,
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

/// How long an IDR's answer waits for [`S6aClient::idr_outcome`].
pub const IDR_OUTCOME_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);
/// IDRs whose answer waits at once; beyond, DIAMETER_TOO_BUSY.
const MAX_PENDING_IDRS: usize = 4096;
const TOO_BUSY: u32 = 3004;

/// An IDR waiting for the MME to say whether it knows the subscriber.
struct PendingIdr {
    peer: usize,
    msg: Vec<u8>,
    deadline: Instant,
}

/// The identity of one request for the AVPs every S6a request starts with.
pub struct Head<'a> {
    pub session_id: &'a str,
    pub origin_host: &'a str,
    pub origin_realm: &'a str,
    pub destination_realm: &'a str,
    pub destination_host: Option<&'a str>,
    pub user_name: &'a str,
}

/// Starts an S6a request `command` in `buf` (ids left 0: the client sets them).
pub fn begin_request(buf: &mut Vec<u8>, command: u32, h: &Head<'_>) {
    codec::begin(
        buf,
        flags::REQUEST | flags::PROXIABLE,
        command,
        app::S6A,
        0,
        0,
    );
    let mut w = AvpWriter::new(buf);
    w.str(avp::SESSION_ID, 0, true, h.session_id);
    vendor_specific_app(&mut w);
    w.u32(avp::AUTH_SESSION_STATE, 0, true, 1); // NO_STATE_MAINTAINED
    w.str(avp::ORIGIN_HOST, 0, true, h.origin_host);
    w.str(avp::ORIGIN_REALM, 0, true, h.origin_realm);
    if let Some(d) = h.destination_host {
        w.str(avp::DESTINATION_HOST, 0, true, d);
    }
    w.str(avp::DESTINATION_REALM, 0, true, h.destination_realm);
    w.str(avp::USER_NAME, 0, true, h.user_name);
}

fn vendor_specific_app(w: &mut AvpWriter<'_>) {
    w.grouped(avp::VENDOR_SPECIFIC_APPLICATION_ID, 0, true, |w| {
        w.u32(avp::VENDOR_ID, 0, true, V);
        w.u32(avp::AUTH_APPLICATION_ID, 0, true, app::S6A);
    });
}

/// AIR (§7.2.5) for one E-UTRAN vector; with `resync` = (RAND, AUTS) the
/// Re-Synchronization-Info is RAND || AUTS (§7.3.15).
pub fn air(buf: &mut Vec<u8>, h: &Head<'_>, plmn: [u8; 3], resync: Option<(&[u8; 16], &[u8; 14])>) {
    begin_request(buf, cmd::AUTHENTICATION_INFORMATION, h);
    let mut w = AvpWriter::new(buf);
    w.grouped(avp3::REQUESTED_EUTRAN_AUTHENTICATION_INFO, V, true, |w| {
        w.u32(avp3::NUMBER_OF_REQUESTED_VECTORS, V, true, 1);
        w.u32(avp3::IMMEDIATE_RESPONSE_PREFERRED, V, true, 1);
        if let Some((rand, auts)) = resync {
            let mut r = [0u8; 30];
            r[..16].copy_from_slice(rand);
            r[16..].copy_from_slice(auts);
            w.octets(avp3::RE_SYNCHRONIZATION_INFO, V, true, &r);
        }
    });
    w.octets(avp3::VISITED_PLMN_ID, V, true, &plmn);
    codec::finish(buf);
}

/// ULR (§7.2.3) of an E-UTRAN attach from an S6a MME.
pub fn ulr(buf: &mut Vec<u8>, h: &Head<'_>, plmn: [u8; 3]) {
    begin_request(buf, cmd::UPDATE_LOCATION, h);
    let mut w = AvpWriter::new(buf);
    // V, not M (TS 29.272 Table 7.3.1/2, from TS 29.212; tests/avp_flags.rs).
    w.i32(avp3::RAT_TYPE, V, false, 1004); // EUTRAN
    w.u32(avp3::ULR_FLAGS, V, true, 1 << 1); // S6a/S6d-Indicator: S6a
    w.octets(avp3::VISITED_PLMN_ID, V, true, &plmn);
    codec::finish(buf);
}

/// PUR (§7.2.13).
pub fn pur(buf: &mut Vec<u8>, h: &Head<'_>) {
    begin_request(buf, cmd::PURGE_UE, h);
    AvpWriter::new(buf).u32(avp3::PUR_FLAGS, V, false, 0);
    codec::finish(buf);
}

/// The first E-UTRAN-Vector of an AIA's Authentication-Info.
pub fn parse_vector_of<T: AsRef<[u8]>>(m: &MessageView<T>) -> Result<AuthVector, DecodeError> {
    let info = m
        .find(V, avp3::AUTHENTICATION_INFO)?
        .ok_or(DecodeError::Missing {
            name: "Authentication-Info",
            code: avp3::AUTHENTICATION_INFO,
        })?;
    let vec =
        codec::find_in(info.grouped(), V, avp3::E_UTRAN_VECTOR)?.ok_or(DecodeError::Missing {
            name: "E-UTRAN-Vector",
            code: avp3::E_UTRAN_VECTOR,
        })?;
    let (mut rand, mut xres, mut autn, mut kasme) = (None, None, None, None);
    for a in vec.grouped() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (V, avp3::RAND) => rand = Some(fixed::<16>(&a, "RAND")?),
            (V, avp3::XRES) => xres = Some(fixed::<8>(&a, "XRES")?),
            (V, avp3::AUTN) => autn = Some(fixed::<16>(&a, "AUTN")?),
            (V, avp3::KASME) => kasme = Some(Key256::new(fixed::<32>(&a, "KASME")?)),
            _ => {}
        }
    }
    let missing = |name, code| DecodeError::Missing { name, code };
    Ok(AuthVector {
        rand: rand.ok_or(missing("RAND", avp3::RAND))?,
        xres: xres.ok_or(missing("XRES", avp3::XRES))?,
        autn: autn.ok_or(missing("AUTN", avp3::AUTN))?,
        kasme: kasme.ok_or(missing("KASME", avp3::KASME))?,
    })
}

fn fixed<const N: usize>(a: &AvpView<&[u8]>, what: &'static str) -> Result<[u8; N], DecodeError> {
    a.octets()
        .try_into()
        .map_err(|_| DecodeError::BadDataLength {
            code: a.code(),
            what,
            need: N,
            have: a.octets().len(),
        })
}

/// The Subscription-Data of a ULA or IDR, if it has one.
pub fn parse_subscription_data_of<T: AsRef<[u8]>>(
    m: &MessageView<T>,
) -> Result<Option<SubscriptionData>, DecodeError> {
    match m.find(V, avp3::SUBSCRIPTION_DATA)? {
        Some(s) => parse_subscription_data(&s).map(Some),
        None => Ok(None),
    }
}

/// What an IDR's Subscription-Data changes (§5.2.2.1: it may carry only that): the
/// UE-AMBR if present, the default APN and its QoS if an APN-Configuration-Profile
/// is.
pub fn parse_subscription_update(s: &AvpView<&[u8]>) -> Result<SubscriptionUpdate, DecodeError> {
    let mut u = SubscriptionUpdate::default();
    let mut profile = false;
    for a in s.grouped() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (V, avp3::AMBR) => u.ambr = Some(parse_ambr(&a)?),
            (V, avp3::APN_CONFIGURATION_PROFILE) => profile = true,
            _ => {}
        }
    }
    if profile {
        let d = parse_subscription_data(s)?;
        u.default_apn = Some(DefaultApn {
            apn: d.apn,
            pdn_type: d.pdn_type,
            qci: d.qci,
            arp_priority: d.arp_priority,
        });
    }
    Ok(u)
}

/// MSISDN, UE-AMBR, and the default APN's name, PDN type and QoS (§7.3.2).
pub fn parse_subscription_data(s: &AvpView<&[u8]>) -> Result<SubscriptionData, DecodeError> {
    let mut msisdn = String::new();
    let (mut ambr_ul_bps, mut ambr_dl_bps) = (0, 0);
    let mut profile = None;
    for a in s.grouped() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (V, avp3::MSISDN) => msisdn = tbcd_digits(a.octets()),
            (V, avp3::AMBR) => (ambr_ul_bps, ambr_dl_bps) = parse_ambr(&a)?,
            (V, avp3::APN_CONFIGURATION_PROFILE) => profile = Some(a),
            _ => {}
        }
    }
    let profile = profile.ok_or(DecodeError::Missing {
        name: "APN-Configuration-Profile",
        code: avp3::APN_CONFIGURATION_PROFILE,
    })?;
    let mut default_ctx = None;
    let mut chosen: Option<AvpView<&[u8]>> = None;
    for a in profile.grouped() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (V, avp3::CONTEXT_IDENTIFIER) => default_ctx = Some(a.u32()?),
            (V, avp3::APN_CONFIGURATION) => {
                let ctx = codec::find_in(a.grouped(), V, avp3::CONTEXT_IDENTIFIER)?
                    .map(|c| c.u32())
                    .transpose()?;
                // The default APN is the one the profile's Context-Identifier names
                // (it comes first in the profile); else the first configuration.
                if chosen.is_none() || (ctx.is_some() && ctx == default_ctx) {
                    chosen = Some(a);
                }
            }
            _ => {}
        }
    }
    let apn_cfg = chosen.ok_or(DecodeError::Missing {
        name: "APN-Configuration",
        code: avp3::APN_CONFIGURATION,
    })?;
    let (mut apn, mut pdn_type, mut qci, mut arp_priority) = (None, None, None, None);
    for a in apn_cfg.grouped() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (0, avp::SERVICE_SELECTION) => apn = Some(a.utf8()?.to_string()),
            (V, avp3::PDN_TYPE) => {
                pdn_type = Some(match a.enumerated()? {
                    0 => PdnType::Ipv4,
                    1 => PdnType::Ipv6,
                    // IPv4v6, IPv4_OR_IPv6: the UE may get both.
                    2 | 3 => PdnType::Ipv4v6,
                    v => return Err(bad("PDN-Type", avp3::PDN_TYPE, format!("value {v}"))),
                })
            }
            (V, avp3::EPS_SUBSCRIBED_QOS_PROFILE) => {
                for q in a.grouped() {
                    let q = q?;
                    match (q.vendor_id(), q.code()) {
                        (V, avp3::QOS_CLASS_IDENTIFIER) => qci = Some(q.enumerated()?),
                        (V, avp3::ALLOCATION_RETENTION_PRIORITY) => {
                            if let Some(p) = codec::find_in(q.grouped(), V, avp3::PRIORITY_LEVEL)? {
                                arp_priority = Some(p.u32()?);
                            }
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    let qci = qci.ok_or(DecodeError::Missing {
        name: "QoS-Class-Identifier",
        code: avp3::QOS_CLASS_IDENTIFIER,
    })?;
    let arp = arp_priority.ok_or(DecodeError::Missing {
        name: "Priority-Level",
        code: avp3::PRIORITY_LEVEL,
    })?;
    Ok(SubscriptionData {
        msisdn,
        apn: apn.ok_or(DecodeError::Missing {
            name: "Service-Selection",
            code: avp::SERVICE_SELECTION,
        })?,
        pdn_type: pdn_type.ok_or(DecodeError::Missing {
            name: "PDN-Type",
            code: avp3::PDN_TYPE,
        })?,
        qci: u8::try_from(qci).map_err(|_| {
            bad(
                "QoS-Class-Identifier",
                avp3::QOS_CLASS_IDENTIFIER,
                format!("{qci}"),
            )
        })?,
        arp_priority: u8::try_from(arp)
            .ok()
            .filter(|p| (1..=15).contains(p))
            .ok_or_else(|| bad("Priority-Level", avp3::PRIORITY_LEVEL, format!("{arp}")))?,
        ambr_ul_bps,
        ambr_dl_bps,
    })
}

fn bad(name: &'static str, code: u32, why: String) -> DecodeError {
    DecodeError::BadValue { name, code, why }
}

fn parse_ambr(a: &AvpView<&[u8]>) -> Result<(u64, u64), DecodeError> {
    let (mut ul, mut dl) = (0, 0);
    for g in a.grouped() {
        let g = g?;
        match (g.vendor_id(), g.code()) {
            (V, avp3::MAX_REQUESTED_BANDWIDTH_UL) => ul = g.u32()? as u64,
            (V, avp3::MAX_REQUESTED_BANDWIDTH_DL) => dl = g.u32()? as u64,
            _ => {}
        }
    }
    Ok((ul, dl))
}

/// TBCD (TS 29.002): two digits a byte, low nibble first, 0xF fills.
pub fn tbcd_digits(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        for n in [x & 0x0f, x >> 4] {
            match n {
                0..=9 => s.push((b'0' + n) as char),
                _ => return s,
            }
        }
    }
    s
}

/// The [`HssFailure`] an answer's result means (TS 29.272 §7.4), `None` on success.
pub fn failure_of(r: Option<ResultCode>) -> Option<HssFailure> {
    match r {
        Some(r) if r.is_success() => None,
        Some(ResultCode::Experimental { vendor: V, code }) => Some(match code {
            exp::ERROR_USER_UNKNOWN => HssFailure::UnknownSubscriber,
            exp::ERROR_UNKNOWN_EPS_SUBSCRIPTION => HssFailure::NoEpsSubscription,
            exp::AUTHENTICATION_DATA_UNAVAILABLE => {
                HssFailure::Unavailable("DIAMETER_AUTHENTICATION_DATA_UNAVAILABLE (4181)".into())
            }
            exp::ERROR_ROAMING_NOT_ALLOWED => HssFailure::RoamingNotAllowed,
            exp::ERROR_RAT_NOT_ALLOWED => HssFailure::RatNotAllowed,
            c => HssFailure::Unavailable(format!("3GPP experimental result {c}")),
        }),
        Some(ResultCode::Experimental { vendor, code }) => Some(HssFailure::Unavailable(format!(
            "experimental result {code} of vendor {vendor}"
        ))),
        Some(ResultCode::Base(c)) => Some(HssFailure::Unavailable(format!("Diameter result {c}"))),
        None => Some(HssFailure::Unavailable("answer without a result".into())),
    }
}

enum Want {
    Profile(HssRef),
    /// `resync`: the AIR carried Re-Synchronization-Info.
    Vector(HssRef, bool),
    Purge(String),
}

/// The IMSI as User-Name: the MME keeps IMSIs as numbers of 15 digits.
pub fn user_name(imsi: u64) -> String {
    format!("{imsi:015}")
}

/// The sans-IO S6a client over the base [`Client`].
pub struct S6aClient {
    base: Client,
    cfg: S6aConfig,
    wants: HashMap<u64, Want>,
    next_token: u64,
    session_seq: u32,
    session_hi: u32,
    buf: Vec<u8>,
    answers: Vec<HssAnswer>,
    events: VecDeque<S6aEvent>,
    idrs: HashMap<u64, PendingIdr>,
    next_idr: u64,
    /// The latest time the driver gave us (IDR deadlines count from it).
    now: Instant,
}

impl S6aClient {
    pub fn new(base: Client, cfg: S6aConfig, session_hi: u32) -> S6aClient {
        S6aClient {
            base,
            cfg,
            wants: HashMap::new(),
            next_token: 0,
            session_seq: 0,
            session_hi,
            buf: Vec::with_capacity(256),
            answers: Vec::new(),
            events: VecDeque::new(),
            idrs: HashMap::new(),
            next_idr: 0,
            now: Instant::now(),
        }
    }

    /// Answer the IDR of event `token`: the MME knows its subscriber (`known`:
    /// DIAMETER_SUCCESS) or not (DIAMETER_ERROR_USER_UNKNOWN). Unknown tokens (already
    /// answered, timed out) are ignored.
    pub fn idr_outcome(&mut self, token: u64, known: bool) {
        let Some(p) = self.idrs.remove(&token) else {
            return;
        };
        let result = if known {
            ResultCode::Base(result::SUCCESS)
        } else {
            ResultCode::Experimental {
                vendor: V,
                code: exp::ERROR_USER_UNKNOWN,
            }
        };
        self.base
            .answer_with(p.peer, &p.msg, result, None, s6a_answer_avps);
    }

    /// IDRs still waiting for [`S6aClient::idr_outcome`].
    pub fn pending_idrs(&self) -> usize {
        self.idrs.len()
    }

    /// The IDR of `token` still waits for its outcome.
    pub fn idr_pending(&self, token: u64) -> bool {
        self.idrs.contains_key(&token)
    }

    /// The base client's next timer or an IDR's deadline, whichever is first.
    pub fn next_timeout(&self) -> Option<Instant> {
        let idr = self.idrs.values().map(|p| p.deadline).min();
        match (self.base.next_timeout(), idr) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn base(&mut self) -> &mut Client {
        &mut self.base
    }

    /// Requests waiting for an answer.
    pub fn outstanding(&self) -> usize {
        self.wants.len()
    }

    /// Sends the request; a request that cannot be sent is answered at once
    /// (see [`S6aClient::take_answers`]).
    pub fn submit(&mut self, now: Instant, req: HssRequest) {
        self.now = self.now.max(now);
        let r = req.reference();
        let imsi = user_name(req.imsi());
        let (want, plmn) = match &req {
            HssRequest::Profile { .. } => (Want::Profile(r), self.cfg.visited_plmn),
            HssRequest::Vector { plmn, .. } => (Want::Vector(r, false), *plmn),
            HssRequest::Resync { plmn, .. } => (Want::Vector(r, true), *plmn),
            HssRequest::Purge { imsi } => return self.purge(now, *imsi),
        };
        let mut buf = std::mem::take(&mut self.buf);
        {
            let sid = self.session_id();
            let h = self.head(&sid, &imsi);
            match &req {
                HssRequest::Profile { .. } => ulr(&mut buf, &h, plmn),
                HssRequest::Vector { .. } => air(&mut buf, &h, plmn, None),
                HssRequest::Resync { rand, auts, .. } => {
                    air(&mut buf, &h, plmn, Some((rand, auts)))
                }
                HssRequest::Purge { .. } => unreachable!("sent above"),
            }
        }
        if let Err(e) = self.send(now, &buf, want) {
            self.answers.push(HssAnswer {
                r,
                result: Err(HssFailure::Unavailable(e.to_string())),
            });
        }
        self.buf = buf;
    }

    /// Purge `imsi` at the HSS (PUR); the outcome comes as [`S6aEvent::Purged`].
    pub fn purge(&mut self, now: Instant, imsi: u64) {
        self.now = self.now.max(now);
        let name = user_name(imsi);
        let mut buf = std::mem::take(&mut self.buf);
        let sid = self.session_id();
        pur(&mut buf, &self.head(&sid, &name));
        if let Err(e) = self.send(now, &buf, Want::Purge(name.clone())) {
            self.events.push_back(S6aEvent::Purged {
                imsi: name,
                result: Err(HssFailure::Unavailable(e.to_string())),
            });
        }
        self.buf = buf;
    }

    fn send(&mut self, now: Instant, msg: &[u8], want: Want) -> Result<(), RequestError> {
        self.next_token += 1;
        let token = self.next_token;
        self.base.send_request(now, msg.to_vec(), token)?;
        self.wants.insert(token, want);
        Ok(())
    }

    fn session_id(&mut self) -> String {
        self.session_seq = self.session_seq.wrapping_add(1);
        format!(
            "{};{};{}",
            self.base.config().origin_host,
            self.session_hi,
            self.session_seq
        )
    }

    fn head<'a>(&'a self, sid: &'a str, user: &'a str) -> Head<'a> {
        let c = self.base.config();
        Head {
            session_id: sid,
            origin_host: &c.origin_host,
            origin_realm: &c.origin_realm,
            destination_realm: &self.cfg.destination_realm,
            destination_host: self.cfg.destination_host.as_deref(),
            user_name: user,
        }
    }

    /// Timers of the base client, then [`S6aClient::process`].
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.base.handle_timeout(now);
        // Nobody said whether the subscriber is known: we could not process it.
        let late: Vec<u64> = self
            .idrs
            .iter()
            .filter(|(_, p)| p.deadline <= now)
            .map(|(t, _)| *t)
            .collect();
        for t in late {
            if let Some(p) = self.idrs.remove(&t) {
                self.base.answer(
                    p.peer,
                    &p.msg,
                    result::UNABLE_TO_COMPLY,
                    None,
                    s6a_answer_avps,
                );
            }
        }
        self.process();
    }

    /// Turns what the base client reported into answers and events (call after
    /// feeding it bytes or time).
    pub fn process(&mut self) {
        while let Some(e) = self.base.poll_event() {
            match e {
                Event::Answer { token, msg } => self.on_answer(token, &msg),
                Event::Failed { token, error } => {
                    let f = match error {
                        RequestError::Timeout => HssFailure::Timeout,
                        e => HssFailure::Unavailable(e.to_string()),
                    };
                    self.fail(token, f);
                }
                Event::Request { peer, msg } => self.on_request(peer, &msg),
                Event::PeerUp { peer, host } => {
                    self.events.push_back(S6aEvent::PeerUp { peer, host })
                }
                Event::PeerDown { peer, reason } => {
                    self.events.push_back(S6aEvent::PeerDown { peer, reason })
                }
            }
        }
    }

    pub fn take_answers(&mut self, out: &mut Vec<HssAnswer>) {
        out.append(&mut self.answers);
    }

    pub fn poll_event(&mut self) -> Option<S6aEvent> {
        self.events.pop_front()
    }

    fn fail(&mut self, token: u64, f: HssFailure) {
        match self.wants.remove(&token) {
            Some(Want::Profile(r)) | Some(Want::Vector(r, _)) => {
                self.answers.push(HssAnswer { r, result: Err(f) })
            }
            Some(Want::Purge(imsi)) => self.events.push_back(S6aEvent::Purged {
                imsi,
                result: Err(f),
            }),
            None => {}
        }
    }

    fn on_answer(&mut self, token: u64, msg: &[u8]) {
        let Some(want) = self.wants.remove(&token) else {
            return;
        };
        let resync = matches!(want, Want::Vector(_, true));
        let parsed = MessageView::new_checked(msg).and_then(|m| {
            let f = match base::result_of(&m)? {
                // TS 29.272 §5.2.3.1.3: an AUTS that does not verify is answered
                // with DIAMETER_AUTHENTICATION_DATA_UNAVAILABLE; to the MME that is a
                // refused resynchronisation (Authentication Reject), not an HSS
                // outage (#17).
                Some(ResultCode::Experimental {
                    vendor: V,
                    code: exp::AUTHENTICATION_DATA_UNAVAILABLE,
                }) if resync => Some(HssFailure::ResyncRefused),
                rc => failure_of(rc),
            };
            Ok((m, f))
        });
        let (m, failure) = match parsed {
            Ok(x) => x,
            Err(e) => {
                let f = HssFailure::Unavailable(format!("malformed answer: {e}"));
                return self.fail_want(want, f);
            }
        };
        if let Some(f) = failure {
            return self.fail_want(want, f);
        }
        match want {
            Want::Profile(r) => {
                let result = match parse_subscription_data_of(&m) {
                    _ if m.command_code() != cmd::UPDATE_LOCATION => Err(wrong_command(&m)),
                    Ok(Some(s)) => Ok(HssData::Profile(s)),
                    Ok(None) => Err(HssFailure::Unavailable(
                        "ULA without Subscription-Data".into(),
                    )),
                    Err(e) => Err(HssFailure::Unavailable(format!("ULA: {e}"))),
                };
                self.answers.push(HssAnswer { r, result });
            }
            Want::Vector(r, _) => {
                let result = match parse_vector_of(&m) {
                    _ if m.command_code() != cmd::AUTHENTICATION_INFORMATION => {
                        Err(wrong_command(&m))
                    }
                    Ok(v) => Ok(HssData::Vector(Box::new(v))),
                    Err(e) => Err(HssFailure::Unavailable(format!("AIA: {e}"))),
                };
                self.answers.push(HssAnswer { r, result });
            }
            Want::Purge(imsi) => self.events.push_back(S6aEvent::Purged {
                imsi,
                result: Ok(()),
            }),
        }
    }

    fn fail_want(&mut self, want: Want, f: HssFailure) {
        match want {
            Want::Profile(r) | Want::Vector(r, _) => {
                self.answers.push(HssAnswer { r, result: Err(f) })
            }
            Want::Purge(imsi) => self.events.push_back(S6aEvent::Purged {
                imsi,
                result: Err(f),
            }),
        }
    }

    /// CLR and IDR from the HSS: answered here (an IDR once the MME said whether it
    /// knows the subscriber), reported as events.
    fn on_request(&mut self, peer: usize, msg: &[u8]) {
        let now = self.now;
        let Ok(m) = MessageView::new_checked(msg) else {
            return;
        };
        let command = m.command_code();
        let mut known: Vec<(u32, u32)> = vec![
            (0, avp::SESSION_ID),
            (0, avp::VENDOR_SPECIFIC_APPLICATION_ID),
            (0, avp::AUTH_SESSION_STATE),
            (0, avp::ORIGIN_HOST),
            (0, avp::ORIGIN_REALM),
            (0, avp::DESTINATION_HOST),
            (0, avp::DESTINATION_REALM),
            (0, avp::USER_NAME),
            (0, avp::PROXY_INFO),
            (0, avp::ROUTE_RECORD),
            (V, avp3::SUPPORTED_FEATURES),
        ];
        match command {
            cmd::CANCEL_LOCATION => {
                known.extend([(V, avp3::CANCELLATION_TYPE), (V, avp3::CLR_FLAGS)])
            }
            cmd::INSERT_SUBSCRIBER_DATA => {
                known.extend([(V, avp3::SUBSCRIPTION_DATA), (V, avp3::IDR_FLAGS)])
            }
            _ => {
                return self.base.answer(
                    peer,
                    msg,
                    result::COMMAND_UNSUPPORTED,
                    None,
                    s6a_answer_avps,
                )
            }
        }
        match base::unknown_mandatory(m.avps(), &known) {
            Ok(None) => {}
            Ok(Some(a)) => {
                let a = a.as_bytes().to_vec();
                return self.base.answer(
                    peer,
                    msg,
                    result::AVP_UNSUPPORTED,
                    Some(&a),
                    s6a_answer_avps,
                );
            }
            Err(_) => {
                return self
                    .base
                    .answer(peer, msg, result::INVALID_AVP_BITS, None, s6a_answer_avps)
            }
        }
        let imsi = match m.find(0, avp::USER_NAME) {
            Ok(Some(u)) => match u.utf8() {
                Ok(s) => s.to_string(),
                Err(_) => {
                    let a = u.as_bytes().to_vec();
                    return self.base.answer(
                        peer,
                        msg,
                        result::UNABLE_TO_COMPLY,
                        Some(&a),
                        s6a_answer_avps,
                    );
                }
            },
            _ => {
                return self
                    .base
                    .answer(peer, msg, result::MISSING_AVP, None, s6a_answer_avps)
            }
        };
        let event = if command == cmd::CANCEL_LOCATION {
            let cancellation_type = m
                .find(V, avp3::CANCELLATION_TYPE)
                .ok()
                .flatten()
                .and_then(|c| c.enumerated().ok())
                .unwrap_or(0) as u32;
            let reattach_required = m
                .find(V, avp3::CLR_FLAGS)
                .ok()
                .flatten()
                .and_then(|c| c.u32().ok())
                .is_some_and(|f| f & 0b10 != 0);
            S6aEvent::CancelLocation {
                imsi,
                cancellation_type,
                reattach_required,
            }
        } else {
            let update = match m.find(V, avp3::SUBSCRIPTION_DATA) {
                Ok(Some(d)) => parse_subscription_update(&d),
                Ok(None) => {
                    return self
                        .base
                        .answer(peer, msg, result::MISSING_AVP, None, s6a_answer_avps)
                }
                Err(e) => Err(e),
            };
            match update {
                Ok(_) if self.idrs.len() >= MAX_PENDING_IDRS => {
                    return self.base.answer(peer, msg, TOO_BUSY, None, s6a_answer_avps)
                }
                Ok(update) => {
                    self.next_idr += 1;
                    let token = self.next_idr;
                    self.idrs.insert(
                        token,
                        PendingIdr {
                            peer,
                            msg: msg.to_vec(),
                            deadline: now + IDR_OUTCOME_TIMEOUT,
                        },
                    );
                    self.events.push_back(S6aEvent::InsertSubscriberData {
                        imsi,
                        update,
                        token,
                    });
                    return;
                }
                // Not applied, so not claimed applied: the HSS hears we could not.
                Err(_) => {
                    return self.base.answer(
                        peer,
                        msg,
                        result::UNABLE_TO_COMPLY,
                        None,
                        s6a_answer_avps,
                    )
                }
            }
        };
        self.base
            .answer(peer, msg, result::SUCCESS, None, s6a_answer_avps);
        self.events.push_back(event);
    }
}

/// The AVPs every S6a answer of ours carries after the Result-Code.
fn s6a_answer_avps(w: &mut AvpWriter<'_>) {
    vendor_specific_app(w);
    w.u32(avp::AUTH_SESSION_STATE, 0, true, 1);
}

fn wrong_command<T: AsRef<[u8]>>(m: &MessageView<T>) -> HssFailure {
    HssFailure::Unavailable(format!("answered with command {}", m.command_code()))
}
