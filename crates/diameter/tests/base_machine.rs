//! The base client's state machine driven message by message and through time:
//! watchdog (RFC 3539), REOPEN, capabilities refused, the bounded pending table,
//! framing errors and garbage. (Interop of the bytes themselves is checked against
//! pycrate in pycrate_interop.rs; here the peer's messages are built with our writer.)

use pepc_diameter::base::{Action, Client, Config, Event, PeerState, RequestError};
use pepc_diameter::codec::{self, flags, AvpWriter, MessageView};
use pepc_diameter::dict::{app, avp, cmd, result, VENDOR_3GPP};
use std::time::{Duration, Instant};

const TW: Duration = Duration::from_secs(6);

fn cfg() -> Config {
    let mut c = Config::new("mme.a", "a");
    c.watchdog = TW;
    c.reconnect = Duration::from_secs(2);
    c.request_timeout = Duration::from_secs(4);
    c.max_pending = 3;
    c.max_message = 4096;
    c
}

fn split(b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = vec![];
    let mut rest = b;
    while !rest.is_empty() {
        let n = MessageView::new_checked(rest).unwrap().length() as usize;
        out.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    out
}

fn sent(c: &mut Client, peer: usize) -> Vec<Vec<u8>> {
    split(&std::mem::take(c.tx(peer)))
}

/// An answer to `req` with Result-Code `code`, and `extra`.
fn answer(req: &[u8], code: u32, extra: impl FnOnce(&mut AvpWriter<'_>)) -> Vec<u8> {
    let v = MessageView::new_checked(req).unwrap();
    let mut b = vec![];
    codec::begin(
        &mut b,
        0,
        v.command_code(),
        v.application_id(),
        v.hop_by_hop(),
        v.end_to_end(),
    );
    let mut w = AvpWriter::new(&mut b);
    w.u32(avp::RESULT_CODE, 0, true, code);
    w.str(avp::ORIGIN_HOST, 0, true, "hss.a");
    w.str(avp::ORIGIN_REALM, 0, true, "a");
    extra(&mut w);
    codec::finish(&mut b);
    b
}

fn s6a_app(w: &mut AvpWriter<'_>) {
    w.grouped(avp::VENDOR_SPECIFIC_APPLICATION_ID, 0, true, |w| {
        w.u32(avp::VENDOR_ID, 0, true, VENDOR_3GPP);
        w.u32(avp::AUTH_APPLICATION_ID, 0, true, app::S6A);
    });
}

fn request(command: u32) -> Vec<u8> {
    let mut b = vec![];
    codec::begin(
        &mut b,
        flags::REQUEST | flags::PROXIABLE,
        command,
        app::S6A,
        0,
        0,
    );
    AvpWriter::new(&mut b).str(avp::SESSION_ID, 0, true, "s;1");
    codec::finish(&mut b);
    b
}

/// Connect, CER, CEA: peer `peer` open.
fn open(c: &mut Client, peer: usize, now: Instant) {
    c.handle_timeout(now);
    while let Some(a) = c.poll_action() {
        if let Action::Connect(i) = a {
            c.on_connected(i, now);
        }
    }
    let cer = sent(c, peer).remove(0);
    c.on_bytes(peer, now, &answer(&cer, result::SUCCESS, s6a_app));
}

fn events(c: &mut Client) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

#[test]
fn pending_requests_are_bounded_and_time_out() {
    let t = Instant::now();
    let mut c = Client::new(cfg(), 1, t, 1);
    open(&mut c, 0, t);
    for i in 0..3 {
        c.send_request(t, request(cmd::UPDATE_LOCATION), i).unwrap();
    }
    assert_eq!(
        c.send_request(t, request(cmd::UPDATE_LOCATION), 9),
        Err(RequestError::Overloaded(3))
    );
    assert!(matches!(
        c.send_request(t, vec![1, 2, 3], 9),
        Err(RequestError::Malformed(_))
    ));
    let reqs = sent(&mut c, 0);
    assert_eq!(reqs.len(), 3);
    let hbh: Vec<u32> = reqs
        .iter()
        .map(|r| MessageView::new_checked(&r[..]).unwrap().hop_by_hop())
        .collect();
    assert!(hbh[0] != hbh[1] && hbh[1] != hbh[2], "{hbh:?}");
    // One answered, the others time out.
    c.on_bytes(0, t, &answer(&reqs[1], result::SUCCESS, |_| {}));
    // A second answer to it is unmatched.
    c.on_bytes(0, t, &answer(&reqs[1], result::SUCCESS, |_| {}));
    c.handle_timeout(t + Duration::from_secs(4));
    let e = events(&mut c);
    assert!(matches!(e[1], Event::Answer { token: 1, .. }), "{e:?}");
    assert!(matches!(
        e[2],
        Event::Failed {
            token: 0,
            error: RequestError::Timeout
        }
    ));
    assert!(matches!(
        e[3],
        Event::Failed {
            token: 2,
            error: RequestError::Timeout
        }
    ));
    assert_eq!(c.pending(), 0);
    assert_eq!(
        (c.stats.unmatched_answers, c.stats.timeouts, c.stats.refused),
        (1, 2, 1)
    );
}

#[test]
fn watchdog_suspect_down_reconnect_and_reopen_before_traffic() {
    let t = Instant::now();
    let mut cf = cfg();
    // Long enough for the request to wait through REOPEN.
    cf.request_timeout = Duration::from_secs(60);
    let mut c = Client::new(cf, 1, t, 1);
    open(&mut c, 0, t);
    assert!(matches!(
        events(&mut c)[..],
        [Event::PeerUp { peer: 0, .. }]
    ));
    // Tw idle: DWR. Another Tw unanswered: suspect. Another: down.
    c.handle_timeout(t + TW);
    let dwr = sent(&mut c, 0);
    assert_eq!(
        MessageView::new_checked(&dwr[0][..])
            .unwrap()
            .command_code(),
        cmd::DEVICE_WATCHDOG
    );
    c.handle_timeout(t + 2 * TW);
    assert_eq!(c.peer_state(0), PeerState::Suspect);
    // A request now waits: no peer takes it.
    c.send_request(t + 2 * TW, request(cmd::UPDATE_LOCATION), 5)
        .unwrap();
    assert!(c.tx(0).is_empty());
    c.handle_timeout(t + 3 * TW);
    assert_eq!(c.peer_state(0), PeerState::Closed);
    assert!(matches!(c.poll_action(), Some(Action::Close(0, _))));
    assert!(matches!(
        events(&mut c)[..],
        [
            Event::Failed { token: 5, .. },
            Event::PeerDown { peer: 0, .. }
        ] | [Event::PeerDown { peer: 0, .. }, ..]
    ));
    // Tc later: reconnect; the CEA leads to REOPEN, a DWR at once.
    let t2 = t + 3 * TW + Duration::from_secs(2);
    open(&mut c, 0, t2);
    assert_eq!(c.peer_state(0), PeerState::Reopen);
    c.send_request(t2, request(cmd::UPDATE_LOCATION), 6)
        .unwrap();
    for k in 0..3 {
        let out = sent(&mut c, 0);
        assert_eq!(
            out.len(),
            1,
            "only a watchdog while reopening ({k}): {out:?}"
        );
        let dwr = &out[0];
        assert_eq!(
            MessageView::new_checked(&dwr[..]).unwrap().command_code(),
            cmd::DEVICE_WATCHDOG
        );
        c.on_bytes(0, t2, &answer(dwr, result::SUCCESS, |_| {}));
        if k < 2 {
            c.handle_timeout(t2 + TW * (k + 1));
        }
    }
    assert_eq!(c.peer_state(0), PeerState::Okay);
    // Both waiting requests (the one asked while suspect, the one while reopening).
    let out = sent(&mut c, 0);
    assert_eq!(out.len(), 2);
    for m in &out {
        assert_eq!(
            MessageView::new_checked(&m[..]).unwrap().command_code(),
            cmd::UPDATE_LOCATION
        );
    }
}

#[test]
fn refused_capabilities_close_the_connection() {
    let t = Instant::now();
    for (code, app_avp) in [
        (result::NO_COMMON_APPLICATION, true),
        (result::SUCCESS, false),
    ] {
        let mut c = Client::new(cfg(), 1, t, 1);
        c.handle_timeout(t);
        assert_eq!(c.poll_action(), Some(Action::Connect(0)));
        c.on_connected(0, t);
        let cer = sent(&mut c, 0).remove(0);
        c.on_bytes(
            0,
            t,
            &answer(&cer, code, |w| {
                if app_avp {
                    s6a_app(w)
                } else {
                    // Gx only: nothing in common with our S6a.
                    w.u32(avp::AUTH_APPLICATION_ID, 0, true, app::GX)
                }
            }),
        );
        assert_eq!(c.peer_state(0), PeerState::Closed, "{code} {app_avp}");
        assert!(matches!(c.poll_action(), Some(Action::Close(0, _))));
        // Not up, so not "down".
        assert!(events(&mut c).is_empty());
        // No CEA at all: closed at the CEA timer.
        c.handle_timeout(t + Duration::from_secs(2));
        assert_eq!(c.poll_action(), Some(Action::Connect(0)));
        c.on_connected(0, t + Duration::from_secs(2));
        c.handle_timeout(t + Duration::from_secs(8));
        assert_eq!(c.peer_state(0), PeerState::Closed);
    }
}

#[test]
fn requests_of_unknown_applications_and_unknown_mandatory_avps_are_refused() {
    let t = Instant::now();
    let mut c = Client::new(cfg(), 1, t, 1);
    open(&mut c, 0, t);
    let mut gx = vec![];
    codec::begin(&mut gx, flags::REQUEST, 272, app::GX, 11, 12);
    codec::finish(&mut gx);
    c.on_bytes(0, t, &gx);
    let a = sent(&mut c, 0).remove(0);
    let v = MessageView::new_checked(&a[..]).unwrap();
    assert!(v.is_error() && !v.is_request());
    assert_eq!((v.hop_by_hop(), v.end_to_end()), (11, 12));
    assert_eq!(
        v.find(0, avp::RESULT_CODE).unwrap().unwrap().u32().unwrap(),
        result::APPLICATION_UNSUPPORTED
    );
    // A DWR with an unknown mandatory AVP: 5001, Failed-AVP holds it.
    let mut dwr = vec![];
    codec::begin(&mut dwr, flags::REQUEST, cmd::DEVICE_WATCHDOG, 0, 13, 14);
    let mut w = AvpWriter::new(&mut dwr);
    w.str(avp::ORIGIN_HOST, 0, true, "hss.a");
    w.octets(4242, 0, true, b"xyz");
    codec::finish(&mut dwr);
    c.on_bytes(0, t, &dwr);
    let a = sent(&mut c, 0).remove(0);
    let v = MessageView::new_checked(&a[..]).unwrap();
    assert!(!v.is_error());
    assert_eq!(
        v.find(0, avp::RESULT_CODE).unwrap().unwrap().u32().unwrap(),
        result::AVP_UNSUPPORTED
    );
    let f = v.find(0, avp::FAILED_AVP).unwrap().unwrap();
    let inner = f.grouped().next().unwrap().unwrap();
    assert_eq!((inner.code(), inner.octets()), (4242, &b"xyz"[..]));
    assert_eq!(c.peer_state(0), PeerState::Okay);
}

#[test]
fn garbage_and_oversized_frames_close_the_connection_and_nothing_panics() {
    let t = Instant::now();
    let mut c = Client::new(cfg(), 1, t, 1);
    open(&mut c, 0, t);
    c.on_bytes(0, t, &[2, 0, 0, 20, 0, 0, 0, 0]);
    assert_eq!(c.peer_state(0), PeerState::Closed);
    assert_eq!(c.stats.framing_errors, 1);
    let t2 = t + Duration::from_secs(2);
    open(&mut c, 0, t2);
    c.on_bytes(0, t2, &[1, 0x10, 0, 0]); // 1 MiB announced, over max_message
    assert_eq!(c.peer_state(0), PeerState::Closed);
    // Bit flips of a valid stream of answers and requests: never a panic, and
    // the pending table never grows past its bound.
    let mut stream = answer(&request(cmd::UPDATE_LOCATION), 2001, s6a_app);
    stream.extend(request(cmd::CANCEL_LOCATION));
    let mut tt = t2;
    for bit in 0..stream.len() * 8 {
        tt += Duration::from_secs(3);
        open(&mut c, 0, tt);
        let _ = c.send_request(tt, request(cmd::UPDATE_LOCATION), bit as u64);
        let mut f = stream.clone();
        f[bit / 8] ^= 1 << (bit % 8);
        for chunk in f.chunks(7) {
            c.on_bytes(0, tt, chunk);
        }
        c.handle_timeout(tt);
        events(&mut c);
        while c.poll_action().is_some() {}
        assert!(c.pending() <= 3);
        c.on_closed(0, tt, "test");
    }
}

#[test]
fn with_no_peer_up_requests_time_out_and_queues_stay_bounded() {
    let t = Instant::now();
    let mut c = Client::new(cfg(), 2, t, 1);
    let mut tt = t;
    for k in 0..10_000u64 {
        tt += Duration::from_millis(10);
        c.handle_timeout(tt);
        while c.poll_action().is_some() {}
        let _ = c.send_request(tt, request(cmd::UPDATE_LOCATION), k);
        events(&mut c);
        assert!(c.pending() <= 3);
        assert!(c.queued() <= 2 * 3 + 64 + 1, "{}", c.queued());
    }
    assert!(c.stats.timeouts > 0 && c.stats.refused > 0);
}
