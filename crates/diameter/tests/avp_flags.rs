//! Every AVP of every message we send, grouped AVPs' members too, has the V and M bits
//! its dictionary entry says: the entry is Wireshark's (`dictionary.xml` and the files
//! it includes, installed with tshark), an independent reading of RFC 6733, RFC 4006,
//! TS 29.272 and TS 29.212. A receiver that knows an AVP as "M must not" may reject our
//! message over it (an HSS flagged RAT-Type sent with M), so each wrong bit fails the
//! test with the message and the AVP named, and so does an AVP the dictionary does not
//! know.
//!
//! The messages come from our clients as they run (base, S6a, Gx), driven by the
//! peers' requests and answers built here, with every optional AVP our code can emit
//! present: CER, DWR, DWA, DPR, DPA, the CEA we refuse a CER with, answers with
//! Failed-AVP or Experimental-Result; AIR (plain and resync), ULR, PUR, CLA, IDA, the
//! answer to a command we do not serve; CCR-I/U/T, RAA.

use pepc_diameter::base::{self, Action, Client};
use pepc_diameter::codec::{flags, AvpData as D, AvpRepr, MessageRepr, MessageView};
use pepc_diameter::dict::{app, avp as a, avp3, cmd, VENDOR_3GPP as V};
use pepc_diameter::gx::{GxClient, GxConfig};
use pepc_diameter::s6a::{S6aClient, S6aConfig, S6aEvent, IDR_OUTCOME_TIMEOUT};
use pepc_seams::pcrf::{PcrfRequest, PolicySession, SessionQos, UsageReport};
use pepc_seams::{HssRef, HssRequest};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const DICTIONARY: &str = "/usr/share/wireshark/diameter/dictionary.xml";

/// A flag rule of the dictionary (`mandatory`, `vendor-bit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rule {
    Must,
    May,
    MustNot,
    ShouldNot,
}

impl Rule {
    fn parse(s: &str) -> Rule {
        match s {
            "must" => Rule::Must,
            "may" => Rule::May,
            "mustnot" => Rule::MustNot,
            "shouldnot" => Rule::ShouldNot,
            other => panic!("dictionary: flag rule {other:?} is none of the DTD's"),
        }
    }

    /// Whether a bit set (or not) keeps the rule; "should not" is kept only by a clear
    /// bit: nothing makes us set it.
    fn allows(self, set: bool) -> bool {
        match self {
            Rule::Must => set,
            Rule::May => true,
            Rule::MustNot | Rule::ShouldNot => !set,
        }
    }
}

#[derive(Debug, Clone)]
struct Entry {
    name: String,
    mandatory: Rule,
    vendor_bit: Rule,
    grouped: bool,
    file: String,
}

/// Wireshark's AVP entries by (vendor, code).
struct Dictionary {
    avps: HashMap<(u32, u32), Vec<Entry>>,
}

/// The text with its `<!-- -->` comments left out (commented-out entries are no
/// entries).
fn strip_comments(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("<!--") {
        out.push_str(&rest[..i]);
        rest = match rest[i..].find("-->") {
            Some(j) => &rest[i + j + 3..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The attributes of a start tag's text (after its name), `name="value"` or with
/// single quotes.
fn attributes(tag: &str) -> HashMap<String, String> {
    let mut out = HashMap::new();
    let mut rest = tag;
    while let Some(eq) = rest.find('=') {
        let name = rest[..eq]
            .trim()
            .rsplit(char::is_whitespace)
            .next()
            .unwrap_or("");
        let after = rest[eq + 1..].trim_start();
        let Some(q) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            break;
        };
        let Some(end) = after[1..].find(q) else { break };
        out.insert(name.to_string(), after[1..1 + end].to_string());
        rest = &after[end + 2..];
    }
    out
}

/// The start tags named `name` in `text`: their attribute text and, unless the tag
/// closes itself, the element's body up to its end tag.
fn elements<'a>(text: &'a str, name: &str) -> Vec<(&'a str, &'a str)> {
    let open = format!("<{name}");
    let close = format!("</{name}>");
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find(&open) {
        let after = &rest[i + open.len()..];
        // `<avp` must not match `<avps` or the like.
        if !after.starts_with(char::is_whitespace) {
            rest = after;
            continue;
        }
        let end = tag_end(after).expect("dictionary: an unclosed start tag");
        let tag = &after[..end];
        if let Some(attrs) = tag.strip_suffix('/') {
            out.push((attrs, ""));
            rest = &after[end + 1..];
        } else {
            let body_and_rest = &after[end + 1..];
            let b = body_and_rest
                .find(&close)
                .unwrap_or_else(|| panic!("dictionary: <{name}> without {close}"));
            out.push((tag, &body_and_rest[..b]));
            rest = &body_and_rest[b + close.len()..];
        }
    }
    out
}

/// Where a start tag ends (its `>`), quotes respected.
fn tag_end(s: &str) -> Option<usize> {
    let mut quote = None;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (None, '>') => return Some(i),
            _ => {}
        }
    }
    None
}

impl Dictionary {
    /// `dictionary.xml` and every file its DOCTYPE declares as an entity.
    fn load(path: &Path) -> Dictionary {
        let dir = path.parent().expect("a directory");
        let main = std::fs::read_to_string(path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; install tshark (Debian: tshark, wireshark-common), as \
                 scripts/test.sh does",
                path.display()
            )
        });
        let mut files: Vec<(String, String)> = vec![];
        for decl in main.split("<!ENTITY").skip(1) {
            let decl = &decl[..decl.find('>').expect("an ENTITY declaration ends")];
            let Some(s) = decl.find("SYSTEM") else {
                continue;
            };
            let f = decl[s + 6..].trim().trim_matches('"');
            let p: PathBuf = dir.join(f);
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| {
                panic!("{}: {e} (included by {})", p.display(), path.display())
            });
            files.push((f.to_string(), strip_comments(&text)));
        }
        files.push(("dictionary.xml".into(), strip_comments(&main)));
        let mut vendors: HashMap<String, u32> = HashMap::new();
        for (_, text) in &files {
            for (tag, _) in elements(text, "vendor") {
                let at = attributes(tag);
                if let (Some(id), Some(code)) = (at.get("vendor-id"), at.get("code")) {
                    vendors.insert(id.clone(), code.parse().expect("a vendor code"));
                }
            }
        }
        let mut avps: HashMap<(u32, u32), Vec<Entry>> = HashMap::new();
        for (file, text) in &files {
            for (tag, body) in elements(text, "avp") {
                let at = attributes(tag);
                let name = at.get("name").cloned().unwrap_or_default();
                let code: u32 = at
                    .get("code")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or_else(|| panic!("{file}: AVP {name} without a numeric code"));
                let vendor = match at.get("vendor-id").map(String::as_str) {
                    None | Some("None") => 0,
                    Some(v) => *vendors
                        .get(v)
                        .unwrap_or_else(|| panic!("{file}: AVP {name}: unknown vendor {v}")),
                };
                // The DTD's defaults: mandatory "may", vendor-bit "mustnot".
                let mandatory = Rule::parse(at.get("mandatory").map_or("may", String::as_str));
                let vendor_bit =
                    Rule::parse(at.get("vendor-bit").map_or("mustnot", String::as_str));
                avps.entry((vendor, code)).or_default().push(Entry {
                    name,
                    mandatory,
                    vendor_bit,
                    grouped: body.contains("<grouped"),
                    file: file.clone(),
                });
            }
        }
        Dictionary { avps }
    }
}

/// Walks the AVPs of `data` (a message's after its header, or a grouped AVP's data)
/// and notes every one whose flags its entry does not allow. Read straight from the
/// octets, not through our decoder, so the check does not lean on the codec it checks.
fn check_avps(dict: &Dictionary, msg: &str, path: &str, mut data: &[u8], bad: &mut Vec<String>) {
    while !data.is_empty() {
        assert!(data.len() >= 8, "{msg}: {path}: a truncated AVP header");
        let code = u32::from_be_bytes(data[0..4].try_into().unwrap());
        let f = data[4];
        let len = u32::from_be_bytes([0, data[5], data[6], data[7]]) as usize;
        let v_bit = f & 0x80 != 0;
        let m_bit = f & 0x40 != 0;
        let (vendor, hl) = if v_bit {
            (u32::from_be_bytes(data[8..12].try_into().unwrap()), 12)
        } else {
            (0, 8)
        };
        assert!(
            len >= hl && len <= data.len(),
            "{msg}: {path}: AVP {code} length {len}"
        );
        let inner = &data[hl..len];
        let padded = (len + 3) & !3;
        data = &data[padded.min(data.len())..];
        assert_eq!(
            f & 0x1f,
            0,
            "{msg}: {path}: AVP {code}: reserved flag bits set"
        );
        let Some(entries) = dict.avps.get(&(vendor, code)) else {
            // A wrong V bit shows as a code looked up under the wrong vendor.
            let mut elsewhere: Vec<String> = dict
                .avps
                .iter()
                .filter(|((_, c), _)| *c == code)
                .map(|((v, _), e)| format!("{} of vendor {v}", e[0].name))
                .collect();
            elsewhere.sort();
            bad.push(format!(
                "{msg}: {path}AVP code {code} vendor {vendor} (V={}): not in the dictionary{}",
                v_bit as u8,
                if elsewhere.is_empty() {
                    String::new()
                } else {
                    format!(" (the code is {})", elsewhere.join(", "))
                }
            ));
            continue;
        };
        let e = &entries[0];
        let here = format!("{path}{} ({code})", e.name);
        for e in entries {
            if !e.vendor_bit.allows(v_bit) {
                bad.push(format!(
                    "{msg}: {here}: V={} but vendor-bit is {:?} ({})",
                    v_bit as u8, e.vendor_bit, e.file
                ));
            }
            if !e.mandatory.allows(m_bit) {
                bad.push(format!(
                    "{msg}: {here}: M={} but mandatory is {:?} ({})",
                    m_bit as u8, e.mandatory, e.file
                ));
            }
        }
        // Failed-AVP holds copies of the peer's AVPs: their flags are the peer's.
        if entries.iter().any(|e| e.grouped) && (vendor, code) != (0, a::FAILED_AVP) {
            check_avps(dict, msg, &format!("{here} / "), inner, bad);
        }
    }
}

/// The messages in a peer's transmit buffer.
fn split(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut rest = b;
    while !rest.is_empty() {
        let len = u32::from_be_bytes([0, rest[1], rest[2], rest[3]]) as usize;
        out.push(rest[..len].to_vec());
        rest = &rest[len..];
    }
    out
}

/// What we sent, by name.
struct Sent(Vec<(String, Vec<u8>)>);

impl Sent {
    /// Takes what `c` queued for peer 0: exactly one message per name given.
    fn take(&mut self, c: &mut Client, names: &[&str]) {
        let msgs = split(&std::mem::take(c.tx(0)));
        assert_eq!(
            msgs.len(),
            names.len(),
            "expected {names:?}, got {} messages",
            msgs.len()
        );
        for (n, m) in names.iter().zip(msgs) {
            self.0.push((n.to_string(), m));
        }
    }
}

fn id(code: u32, s: &str) -> AvpRepr {
    AvpRepr::new(code, 0, D::DiameterIdentity(s.into()))
}
fn u3(code: u32, v: u32) -> AvpRepr {
    AvpRepr::new(code, V, D::Unsigned32(v))
}
fn e3(code: u32, v: i32) -> AvpRepr {
    AvpRepr::new(code, V, D::Enumerated(v))
}
fn g3(code: u32, members: Vec<AvpRepr>) -> AvpRepr {
    AvpRepr::new(code, V, D::Grouped(members))
}

fn emit(flags: u8, command: u32, application: u32, hbh: u32, avps: Vec<AvpRepr>) -> Vec<u8> {
    let m = MessageRepr {
        flags,
        command,
        application,
        hop_by_hop: hbh,
        end_to_end: hbh,
        avps,
    };
    let mut b = vec![];
    m.emit(&mut b);
    b
}

/// The peer's answer to our request `req`: success, its identity, `extra`.
fn answer(req: &[u8], extra: Vec<AvpRepr>) -> Vec<u8> {
    let v = MessageView::new_checked(req).unwrap();
    let mut avps = vec![];
    if let Ok(Some(s)) = v.find(0, a::SESSION_ID) {
        avps.push(AvpRepr::new(
            a::SESSION_ID,
            0,
            D::Utf8String(s.utf8().unwrap().into()),
        ));
    }
    avps.push(AvpRepr::new(a::RESULT_CODE, 0, D::Unsigned32(2001)));
    avps.extend([id(a::ORIGIN_HOST, "peer.test"), id(a::ORIGIN_REALM, "test")]);
    avps.extend(extra);
    let m = MessageRepr {
        flags: v.flags() & flags::PROXIABLE,
        command: v.command_code(),
        application: v.application_id(),
        hop_by_hop: v.hop_by_hop(),
        end_to_end: v.end_to_end(),
        avps,
    };
    let mut b = vec![];
    m.emit(&mut b);
    b
}

fn cea(cer: &[u8], application: u32) -> Vec<u8> {
    answer(
        cer,
        vec![
            AvpRepr::new(
                a::HOST_IP_ADDRESS,
                0,
                D::Address("127.0.0.2".parse().unwrap()),
            ),
            AvpRepr::new(a::VENDOR_ID, 0, D::Unsigned32(0)),
            AvpRepr::new(a::PRODUCT_NAME, 0, D::Utf8String("peer".into())),
            AvpRepr::new(
                a::VENDOR_SPECIFIC_APPLICATION_ID,
                0,
                D::Grouped(vec![
                    AvpRepr::new(a::VENDOR_ID, 0, D::Unsigned32(V)),
                    AvpRepr::new(a::AUTH_APPLICATION_ID, 0, D::Unsigned32(application)),
                ]),
            ),
        ],
    )
}

/// A base request of the peer's (DWR, DPR, CER) with `extra` AVPs.
fn peer_base_request(command: u32, hbh: u32, extra: Vec<AvpRepr>) -> Vec<u8> {
    let mut avps = vec![id(a::ORIGIN_HOST, "peer.test"), id(a::ORIGIN_REALM, "test")];
    avps.extend(extra);
    emit(flags::REQUEST, command, app::COMMON, hbh, avps)
}

/// An S6a request of the HSS's (CLR, IDR, DSR) with `extra` AVPs.
fn hss_request(command: u32, hbh: u32, extra: Vec<AvpRepr>) -> Vec<u8> {
    let mut avps = vec![
        AvpRepr::new(a::SESSION_ID, 0, D::Utf8String(format!("hss.test;{hbh}"))),
        AvpRepr::new(
            a::VENDOR_SPECIFIC_APPLICATION_ID,
            0,
            D::Grouped(vec![
                AvpRepr::new(a::VENDOR_ID, 0, D::Unsigned32(V)),
                AvpRepr::new(a::AUTH_APPLICATION_ID, 0, D::Unsigned32(app::S6A)),
            ]),
        ),
        AvpRepr::new(a::AUTH_SESSION_STATE, 0, D::Enumerated(1)),
        id(a::ORIGIN_HOST, "hss.test"),
        id(a::ORIGIN_REALM, "test"),
        id(a::DESTINATION_HOST, "mme.pepc.test"),
        id(a::DESTINATION_REALM, "pepc.test"),
        AvpRepr::new(a::USER_NAME, 0, D::Utf8String("001010000000001".into())),
    ];
    avps.extend(extra);
    emit(
        flags::REQUEST | flags::PROXIABLE,
        command,
        app::S6A,
        hbh,
        avps,
    )
}

/// An IDR's Subscription-Data that changes the UE-AMBR.
fn ambr_update() -> AvpRepr {
    g3(
        avp3::SUBSCRIPTION_DATA,
        vec![g3(
            avp3::AMBR,
            vec![
                u3(avp3::MAX_REQUESTED_BANDWIDTH_UL, 1000),
                u3(avp3::MAX_REQUESTED_BANDWIDTH_DL, 2000),
            ],
        )],
    )
}

fn config(host: &str, application: u32) -> base::Config {
    let mut cfg = base::Config::new(host, "pepc.test");
    // Every optional AVP of the CER: Host-IP-Address of both families.
    cfg.host_ip = vec!["127.0.0.1".parse().unwrap(), "::1".parse().unwrap()];
    cfg.applications = vec![application];
    cfg.watchdog = Duration::from_secs(6);
    cfg
}

/// The base and S6a messages, driven through the S6a client.
fn s6a_messages(sent: &mut Sent) {
    let now = Instant::now();
    let s6a = S6aConfig {
        destination_realm: "test".into(),
        destination_host: Some("hss.test".into()),
        visited_plmn: [0x00, 0xf1, 0x10],
    };
    let mut c = S6aClient::new(
        Client::new(config("mme.pepc.test", app::S6A), 1, now, 7),
        s6a,
        7,
    );
    c.handle_timeout(now);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, now);
    sent.take(c.base(), &["CER"]);
    let cea = cea(&sent.0.last().unwrap().1, app::S6A);
    c.base().on_bytes(0, now, &cea);

    let r = |seq| HssRef { mme_ue_id: 1, seq };
    let imsi = 1010000000001;
    let plmn = [0x00, 0xf1, 0x10];
    c.submit(
        now,
        HssRequest::Vector {
            r: r(1),
            imsi,
            plmn,
        },
    );
    c.submit(
        now,
        HssRequest::Resync {
            r: r(2),
            imsi,
            plmn,
            rand: [1; 16],
            auts: [2; 14],
        },
    );
    c.submit(now, HssRequest::Profile { r: r(3), imsi });
    c.purge(now, imsi);
    sent.take(c.base(), &["AIR", "AIR (resync)", "ULR", "PUR"]);

    let idr_token = |c: &mut S6aClient, hbh| {
        let m = hss_request(cmd::INSERT_SUBSCRIBER_DATA, hbh, vec![ambr_update()]);
        c.base().on_bytes(0, now, &m);
        c.process();
        loop {
            match c.poll_event().expect("the IDR reported") {
                S6aEvent::InsertSubscriberData { token, .. } => return token,
                _ => continue,
            }
        }
    };
    let t = idr_token(&mut c, 900);
    c.idr_outcome(t, true);
    sent.take(c.base(), &["IDA"]);
    let t = idr_token(&mut c, 901);
    c.idr_outcome(t, false);
    sent.take(c.base(), &["IDA (user unknown: Experimental-Result)"]);
    idr_token(&mut c, 902);
    // The client's clock may be a little ahead of ours (it reads its own at start).
    c.handle_timeout(now + IDR_OUTCOME_TIMEOUT + Duration::from_millis(500));
    sent.take(c.base(), &["IDA (no outcome in time)"]);

    for (m, name) in [
        (
            hss_request(
                cmd::CANCEL_LOCATION,
                910,
                vec![e3(avp3::CANCELLATION_TYPE, 2), u3(avp3::CLR_FLAGS, 2)],
            ),
            "CLA",
        ),
        (
            // An M AVP our IDR does not take (Acct-Application-Id): AVP unsupported.
            hss_request(
                cmd::INSERT_SUBSCRIBER_DATA,
                911,
                vec![
                    ambr_update(),
                    AvpRepr::new(a::ACCT_APPLICATION_ID, 0, D::Unsigned32(1)),
                ],
            ),
            "IDA (AVP unsupported: Failed-AVP)",
        ),
        (
            hss_request(cmd::DELETE_SUBSCRIBER_DATA, 912, vec![]),
            "DSA (command unsupported)",
        ),
    ] {
        c.base().on_bytes(0, now, &m);
        c.process();
        sent.take(c.base(), &[name]);
    }

    // The base protocol on the same connection: the peer's DWR (plain and with an AVP
    // we do not know) and CER, then our DWR and DPR.
    c.base().on_bytes(
        0,
        now,
        &peer_base_request(cmd::DEVICE_WATCHDOG, 950, vec![]),
    );
    sent.take(c.base(), &["DWA"]);
    let odd = AvpRepr::new(a::USER_NAME, 0, D::Utf8String("x".into()));
    c.base().on_bytes(
        0,
        now,
        &peer_base_request(cmd::DEVICE_WATCHDOG, 951, vec![odd]),
    );
    sent.take(c.base(), &["DWA (AVP unsupported: Failed-AVP)"]);
    c.base().on_bytes(
        0,
        now,
        &peer_base_request(
            cmd::CAPABILITIES_EXCHANGE,
            952,
            vec![AvpRepr::new(
                a::HOST_IP_ADDRESS,
                0,
                D::Address("127.0.0.2".parse().unwrap()),
            )],
        ),
    );
    sent.take(c.base(), &["CEA (unable to comply)"]);
    c.handle_timeout(now + Duration::from_secs(6));
    sent.take(c.base(), &["DWR"]);
    c.base().disconnect(now + Duration::from_secs(6));
    sent.take(c.base(), &["DPR"]);
}

/// The Gx messages, driven through the Gx client, and the DPA of a peer that leaves.
fn gx_messages(sent: &mut Sent) {
    let now = Instant::now();
    let mut c = GxClient::new(
        Client::new(config("pgw.pepc.test", app::GX), 1, now, 7),
        GxConfig {
            destination_realm: "test".into(),
            destination_host: Some("pcrf.test".into()),
            ..GxConfig::default()
        },
        7,
    );
    c.handle_timeout(now);
    assert_eq!(c.base().poll_action(), Some(Action::Connect(0)));
    c.base().on_connected(0, now);
    sent.take(c.base(), &["CER (Gx)"]);
    let cea = cea(&sent.0.last().unwrap().1, app::GX);
    c.base().on_bytes(0, now, &cea);

    let session = PolicySession {
        imsi: 1010000000001,
        apn: "internet".into(),
        ebi: 5,
        ue_ip: "10.45.0.2".parse().unwrap(),
    };
    let r = HssRef {
        mme_ue_id: 1,
        seq: 1,
    };
    let usage = vec![UsageReport {
        key: "mk1".into(),
        ul_bytes: 10,
        dl_bytes: 20,
    }];
    c.submit(
        now,
        PcrfRequest::Establish {
            r,
            session: session.clone(),
            subscribed: SessionQos {
                qci: 9,
                arp_priority: 8,
                ambr_ul: 1000,
                ambr_dl: 2000,
            },
        },
    );
    c.submit(
        now,
        PcrfRequest::Report {
            r,
            session: session.clone(),
            usage: usage.clone(),
        },
    );
    sent.take(c.base(), &["CCR-I", "CCR-U"]);
    let sid = {
        let ccr = &sent.0.last().unwrap().1;
        let v = MessageView::new_checked(&ccr[..]).unwrap();
        v.find(0, a::SESSION_ID)
            .unwrap()
            .unwrap()
            .utf8()
            .unwrap()
            .to_string()
    };
    let rar = |hbh, sid: &str, extra: Vec<AvpRepr>| {
        let mut avps = vec![
            AvpRepr::new(a::SESSION_ID, 0, D::Utf8String(sid.into())),
            AvpRepr::new(a::AUTH_APPLICATION_ID, 0, D::Unsigned32(app::GX)),
            id(a::ORIGIN_HOST, "pcrf.test"),
            id(a::ORIGIN_REALM, "test"),
            id(a::DESTINATION_REALM, "pepc.test"),
            id(a::DESTINATION_HOST, "pgw.pepc.test"),
            AvpRepr::new(a::RE_AUTH_REQUEST_TYPE, 0, D::Enumerated(0)),
        ];
        avps.extend(extra);
        emit(
            flags::REQUEST | flags::PROXIABLE,
            cmd::RE_AUTH,
            app::GX,
            hbh,
            avps,
        )
    };
    for (m, name) in [
        (rar(960, &sid, vec![]), "RAA"),
        (rar(961, "no.such;1", vec![]), "RAA (unknown session)"),
        (
            rar(962, &sid, vec![e3(avp3::SESSION_RELEASE_CAUSE, 0)]),
            "RAA (unable to comply)",
        ),
        (
            rar(
                963,
                &sid,
                vec![AvpRepr::new(a::USER_NAME, 0, D::Utf8String("x".into()))],
            ),
            "RAA (AVP unsupported: Failed-AVP)",
        ),
        (
            emit(
                flags::REQUEST | flags::PROXIABLE,
                cmd::CREDIT_CONTROL,
                app::GX,
                964,
                vec![AvpRepr::new(a::SESSION_ID, 0, D::Utf8String(sid.clone()))],
            ),
            "CCA (command unsupported)",
        ),
    ] {
        c.base().on_bytes(0, now, &m);
        c.process();
        sent.take(c.base(), &[name]);
    }
    c.submit(now, PcrfRequest::Terminate { session, usage });
    sent.take(c.base(), &["CCR-T"]);
    c.base().on_bytes(
        0,
        now,
        &peer_base_request(
            cmd::DISCONNECT_PEER,
            970,
            vec![AvpRepr::new(a::DISCONNECT_CAUSE, 0, D::Enumerated(0))],
        ),
    );
    // The connection closes after the DPA: it is in what is left to write.
    let rest = loop {
        match c.base().poll_action() {
            Some(Action::Close(0, rest)) => break rest,
            Some(_) => continue,
            None => panic!("the peer's DPR did not close the connection"),
        }
    };
    let dpa = split(&rest);
    assert_eq!(dpa.len(), 1, "DPA");
    sent.0.push(("DPA".into(), dpa.into_iter().next().unwrap()));
}

#[test]
fn every_avp_we_send_has_the_flags_of_its_dictionary_entry() {
    let dict = Dictionary::load(Path::new(DICTIONARY));
    // The loader read the dictionary, not an empty shell: a few entries every
    // release has.
    for (key, name) in [
        ((0, a::SESSION_ID), "Session-Id"),
        ((V, avp3::RAT_TYPE), "RAT-Type"),
        ((V, avp3::ULR_FLAGS), "ULR-Flags"),
    ] {
        let e = dict
            .avps
            .get(&key)
            .unwrap_or_else(|| panic!("no {name} in {DICTIONARY}"));
        assert_eq!(e[0].name, name);
    }
    let mut sent = Sent(vec![]);
    s6a_messages(&mut sent);
    gx_messages(&mut sent);
    let mut bad = vec![];
    for (name, m) in &sent.0 {
        let v = MessageView::new_checked(&m[..]).unwrap_or_else(|e| panic!("{name}: {e}"));
        // A message with nothing to check would pass for the wrong reason.
        assert!(v.avps().count() > 2, "{name}: hardly any AVPs");
        check_avps(&dict, name, "", &m[20..], &mut bad);
    }
    assert!(
        bad.is_empty(),
        "AVP flags against {DICTIONARY}:\n{}",
        bad.join("\n")
    );
}

/// The check itself: an M bit the entry forbids, a member of a grouped AVP, an AVP
/// sent without its vendor and one the dictionary does not know are each named.
#[test]
fn the_check_names_each_wrong_avp() {
    use pepc_diameter::codec::AvpWriter;
    let dict = Dictionary::load(Path::new(DICTIONARY));
    let mut m = vec![0u8; 20];
    let mut w = AvpWriter::new(&mut m);
    w.str(a::SESSION_ID, 0, true, "ok;1");
    w.i32(avp3::RAT_TYPE, V, true, 1004);
    w.grouped(avp3::DEFAULT_EPS_BEARER_QOS, V, false, |w| {
        w.u32(avp3::QOS_CLASS_IDENTIFIER, V, true, 9);
        w.u32(avp3::PRIORITY_LEVEL, V, false, 1);
    });
    // Vendor 0 for a 3GPP AVP: the V bit is wrong.
    w.u32(avp3::ULR_FLAGS, 0, true, 2);
    w.u32(4242, V, true, 0);
    let mut bad = vec![];
    check_avps(&dict, "probe", "", &m[20..], &mut bad);
    let want = [
        "probe: RAT-Type (1032): M=1 but mandatory is MustNot",
        "probe: Default-EPS-Bearer-QoS (1049) / Priority-Level (1046): M=0 but mandatory is Must",
        "probe: AVP code 1405 vendor 0 (V=0): not in the dictionary (the code is ",
        "probe: AVP code 4242 vendor 10415 (V=1): not in the dictionary",
    ];
    assert_eq!(bad.len(), want.len(), "{bad:#?}");
    for (got, want) in bad.iter().zip(want) {
        assert!(got.starts_with(want), "{got:?} is not {want:?}");
    }
    assert!(bad[2].contains("ULR-Flags of vendor 10415"), "{}", bad[2]);
}
