//! The Diameter base protocol as a sans-IO client (RFC 6733, watchdog of RFC 3539):
//! a table of peers, each a connection state machine, and the table of requests
//! waiting for their answers.
//!
//! The driver feeds it what happened ([`Client::on_connected`], [`Client::on_bytes`],
//! [`Client::on_closed`], [`Client::handle_timeout`]) and carries out what it asks:
//! [`Action`]s (connect, close), the bytes in [`Client::tx`], a wake-up at
//! [`Client::next_timeout`]. The application gets [`Event`]s: answers by token,
//! failures (timeout, no peer), requests from a peer (HSS-initiated CLR, IDR…).
//!
//! Requests go to the first peer (in configuration order) that is up; when it fails
//! (watchdog, reset, DPR) its unanswered requests are sent once more, T flag set, to
//! the next one (RFC 6733 §5.5.4), and new requests return to it once it has answered
//! three watchdogs again (RFC 3539 REOPEN).

use crate::codec::{self, flags, AvpIter, AvpView, AvpWriter, DecodeError, MessageView};
use crate::dict::{app, avp, cmd, result, VENDOR_3GPP};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};
use thiserror::Error;

/// What we are, and the timers and bounds of the protocol.
#[derive(Debug, Clone)]
pub struct Config {
    pub origin_host: String,
    pub origin_realm: String,
    pub host_ip: Vec<IpAddr>,
    /// Our Vendor-Id in CER (0: none registered).
    pub vendor_id: u32,
    pub product_name: String,
    /// The 3GPP applications we advertise (Vendor-Specific-Application-Id, vendor
    /// 10415), e.g. [`app::S6A`].
    pub applications: Vec<u32>,
    /// Tw of RFC 3539 (30 s by default; shorter in tests). No jitter is applied.
    pub watchdog: Duration,
    /// Tc: how long after a failure a connection is tried again.
    pub reconnect: Duration,
    /// How long CEA (or DPA) may take.
    pub cea_timeout: Duration,
    /// How long an answer may take before the request fails.
    pub request_timeout: Duration,
    /// At most this many requests wait for answers; more are refused.
    pub max_pending: usize,
    /// A message announcing more than this is a framing error: the connection closes.
    pub max_message: usize,
}

impl Config {
    pub fn new(origin_host: &str, origin_realm: &str) -> Config {
        Config {
            origin_host: origin_host.into(),
            origin_realm: origin_realm.into(),
            host_ip: vec![IpAddr::from([127, 0, 0, 1])],
            vendor_id: 0,
            product_name: "pepc".into(),
            applications: vec![app::S6A],
            watchdog: Duration::from_secs(30),
            reconnect: Duration::from_secs(5),
            cea_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(4),
            max_pending: 65536,
            max_message: 1 << 20,
        }
    }
}

/// The state of one peer connection (RFC 6733 §5.6, RFC 3539 §3.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// No connection; one is tried at the peer's timer.
    Closed,
    /// The driver was asked to connect.
    Connecting,
    /// CER sent, waiting for CEA.
    WaitCea,
    /// Open and answering: requests go here.
    Okay,
    /// A watchdog went unanswered for Tw: failed over, one more Tw before closing.
    Suspect,
    /// Reconnected after a failure: three DWAs before requests come back here.
    Reopen,
    /// DPR sent, waiting for DPA.
    Closing,
}

/// What the driver is asked to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Open a transport connection to peer `.0`; then [`Client::on_connected`] or
    /// [`Client::on_closed`].
    Connect(usize),
    /// Close peer `.0`'s connection after writing what is left to write (`.1`, e.g.
    /// the DPA to a DPR).
    Close(usize, Vec<u8>),
}

/// Why a request got no answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequestError {
    #[error("no answer in time")]
    Timeout,
    #[error("{0} requests already pending")]
    Overloaded(usize),
    #[error("the peer was lost after the request had already been retried")]
    PeerLost,
    #[error("the request is not a Diameter message: {0}")]
    Malformed(DecodeError),
}

/// What the application is told.
#[derive(Debug)]
pub enum Event {
    PeerUp {
        peer: usize,
        host: String,
    },
    PeerDown {
        peer: usize,
        reason: String,
    },
    /// The answer to the request sent with `token` (whole message).
    Answer {
        token: u64,
        msg: Vec<u8>,
    },
    Failed {
        token: u64,
        error: RequestError,
    },
    /// A request of an advertised application from `peer`; answer it with
    /// [`Client::answer`].
    Request {
        peer: usize,
        msg: Vec<u8>,
    },
}

/// A Result-Code or a (vendor's) Experimental-Result-Code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultCode {
    Base(u32),
    Experimental { vendor: u32, code: u32 },
}

impl ResultCode {
    pub fn is_success(&self) -> bool {
        let c = match self {
            ResultCode::Base(c) => c,
            ResultCode::Experimental { code, .. } => code,
        };
        (2000..3000).contains(c)
    }
}

/// The Result-Code, else the Experimental-Result, of an answer.
pub fn result_of<T: AsRef<[u8]>>(m: &MessageView<T>) -> Result<Option<ResultCode>, DecodeError> {
    let mut exp = None;
    for a in m.avps() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (0, avp::RESULT_CODE) => return Ok(Some(ResultCode::Base(a.u32()?))),
            (0, avp::EXPERIMENTAL_RESULT) => {
                let (mut vendor, mut code) = (0, None);
                for g in a.grouped() {
                    let g = g?;
                    match (g.vendor_id(), g.code()) {
                        (0, avp::VENDOR_ID) => vendor = g.u32()?,
                        (0, avp::EXPERIMENTAL_RESULT_CODE) => code = Some(g.u32()?),
                        _ => {}
                    }
                }
                let code = code.ok_or(DecodeError::Missing {
                    name: "Experimental-Result-Code",
                    code: avp::EXPERIMENTAL_RESULT_CODE,
                })?;
                exp = Some(ResultCode::Experimental { vendor, code });
            }
            _ => {}
        }
    }
    Ok(exp)
}

/// The first top-level AVP with the M bit that is not in `known` (vendor, code): a
/// request carrying one is answered DIAMETER_AVP_UNSUPPORTED (RFC 6733 §4.1).
pub fn unknown_mandatory<'a>(
    avps: AvpIter<'a>,
    known: &[(u32, u32)],
) -> Result<Option<AvpView<&'a [u8]>>, DecodeError> {
    for a in avps {
        let a = a?;
        if a.is_mandatory() && !known.contains(&(a.vendor_id(), a.code())) {
            return Ok(Some(a));
        }
    }
    Ok(None)
}

/// Figures of the client.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    pub answers: u64,
    pub timeouts: u64,
    pub refused: u64,
    /// Answers whose hop-by-hop id no request waits for (late, duplicate).
    pub unmatched_answers: u64,
    /// Requests sent again to another peer after theirs failed.
    pub retransmits: u64,
    pub watchdogs_sent: u64,
    /// Connections closed on bytes that are not Diameter.
    pub framing_errors: u64,
    pub connections: u64,
}

struct Peer {
    state: PeerState,
    tx: Vec<u8>,
    rx: Vec<u8>,
    timer: Option<Instant>,
    dw_pending: bool,
    num_dwa: i32,
    /// Has been up before: a new connection goes through REOPEN.
    failed_before: bool,
    /// The Origin-Host of its CEA.
    host: String,
}

struct Pending {
    token: u64,
    peer: Option<usize>,
    retried: bool,
    msg: Vec<u8>,
}

/// The sans-IO Diameter client: see the module documentation.
pub struct Client {
    cfg: Config,
    origin_state_id: u32,
    peers: Vec<Peer>,
    pending: HashMap<u32, Pending>,
    /// Request deadlines in sending order (one timeout for all: they are sorted);
    /// entries of answered requests are skipped when they come up.
    deadlines: VecDeque<(Instant, u32)>,
    /// Requests waiting for a peer that is up.
    unsent: VecDeque<u32>,
    next_hbh: u32,
    next_e2e: u32,
    events: VecDeque<Event>,
    actions: VecDeque<Action>,
    shutting_down: bool,
    pub stats: Stats,
}

impl Client {
    /// `peers` connections, all tried at once; `origin_state_id` changes at each start
    /// (RFC 6733 §8.16), e.g. the start time in seconds.
    pub fn new(cfg: Config, peers: usize, now: Instant, origin_state_id: u32) -> Client {
        Client {
            peers: (0..peers)
                .map(|_| Peer {
                    state: PeerState::Closed,
                    tx: Vec::new(),
                    rx: Vec::new(),
                    timer: Some(now),
                    dw_pending: false,
                    num_dwa: 0,
                    failed_before: false,
                    host: String::new(),
                })
                .collect(),
            cfg,
            origin_state_id,
            pending: HashMap::new(),
            deadlines: VecDeque::new(),
            unsent: VecDeque::new(),
            // RFC 6733 §3: the high 12 bits of End-to-End from the clock, low random-ish.
            next_hbh: origin_state_id.wrapping_mul(2654435761),
            next_e2e: origin_state_id << 20,
            events: VecDeque::new(),
            actions: VecDeque::new(),
            shutting_down: false,
            stats: Stats::default(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }
    pub fn peer_state(&self, peer: usize) -> PeerState {
        self.peers[peer].state
    }
    pub fn pending(&self) -> usize {
        self.pending.len()
    }
    /// Entries of the queue of requests waiting for a peer (some may be stale).
    pub fn queued(&self) -> usize {
        self.unsent.len()
    }
    /// Bytes to write to peer `peer`; the driver drains what it wrote.
    pub fn tx(&mut self, peer: usize) -> &mut Vec<u8> {
        &mut self.peers[peer].tx
    }
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
    /// All connections closed after [`Client::disconnect`].
    pub fn is_closed(&self) -> bool {
        self.shutting_down && self.peers.iter().all(|p| p.state == PeerState::Closed)
    }

    pub fn next_timeout(&self) -> Option<Instant> {
        let peers = self.peers.iter().filter_map(|p| p.timer);
        peers.chain(self.deadlines.front().map(|d| d.0)).min()
    }

    /// Send a request (a whole message: its hop-by-hop and end-to-end ids are set
    /// here); its answer or failure comes back as an [`Event`] with `token`.
    pub fn send_request(
        &mut self,
        now: Instant,
        mut msg: Vec<u8>,
        token: u64,
    ) -> Result<(), RequestError> {
        MessageView::new_checked(&msg[..]).map_err(RequestError::Malformed)?;
        if self.pending.len() >= self.cfg.max_pending {
            self.stats.refused += 1;
            return Err(RequestError::Overloaded(self.pending.len()));
        }
        let hbh = loop {
            self.next_hbh = self.next_hbh.wrapping_add(1);
            if !self.pending.contains_key(&self.next_hbh) {
                break self.next_hbh;
            }
        };
        self.next_e2e = self.next_e2e.wrapping_add(1);
        let mut v = MessageView::new_unchecked(&mut msg[..]);
        v.set_hop_by_hop(hbh);
        v.set_end_to_end(self.next_e2e);
        self.stats.requests += 1;
        self.pending.insert(
            hbh,
            Pending {
                token,
                peer: None,
                retried: false,
                msg,
            },
        );
        self.deadlines
            .push_back((now + self.cfg.request_timeout, hbh));
        self.unsent.push_back(hbh);
        self.dispatch();
        Ok(())
    }

    /// Answer the request `req` that came from `peer`: same command, application and
    /// ids, Session-Id copied, Result-Code `code` (E bit for protocol errors, 3xxx),
    /// the offending AVP in Failed-AVP, then what `extra` writes.
    pub fn answer(
        &mut self,
        peer: usize,
        req: &[u8],
        code: u32,
        failed: Option<&[u8]>,
        extra: impl FnOnce(&mut AvpWriter<'_>),
    ) {
        self.answer_with(peer, req, ResultCode::Base(code), failed, extra)
    }

    /// [`Client::answer`] with a Result-Code or an Experimental-Result.
    pub fn answer_with(
        &mut self,
        peer: usize,
        req: &[u8],
        result: ResultCode,
        failed: Option<&[u8]>,
        extra: impl FnOnce(&mut AvpWriter<'_>),
    ) {
        let Ok(v) = MessageView::new_checked(req) else {
            return;
        };
        let mut f = v.flags() & flags::PROXIABLE;
        if matches!(result, ResultCode::Base(c) if (3000..4000).contains(&c)) {
            f |= flags::ERROR;
        }
        let mut out = Vec::with_capacity(128);
        codec::begin(
            &mut out,
            f,
            v.command_code(),
            v.application_id(),
            v.hop_by_hop(),
            v.end_to_end(),
        );
        let mut w = AvpWriter::new(&mut out);
        if let Ok(Some(s)) = v.find(0, avp::SESSION_ID) {
            w.raw(s.as_bytes());
        }
        match result {
            ResultCode::Base(code) => w.u32(avp::RESULT_CODE, 0, true, code),
            ResultCode::Experimental { vendor, code } => {
                w.grouped(avp::EXPERIMENTAL_RESULT, 0, true, |w| {
                    w.u32(avp::VENDOR_ID, 0, true, vendor);
                    w.u32(avp::EXPERIMENTAL_RESULT_CODE, 0, true, code);
                })
            }
        }
        w.str(avp::ORIGIN_HOST, 0, true, &self.cfg.origin_host);
        w.str(avp::ORIGIN_REALM, 0, true, &self.cfg.origin_realm);
        extra(&mut w);
        if let Some(a) = failed {
            w.grouped(avp::FAILED_AVP, 0, true, |w| w.raw(a));
        }
        codec::finish(&mut out);
        if let Some(p) = self.peers.get_mut(peer) {
            if p.state != PeerState::Closed {
                p.tx.extend_from_slice(&out);
            }
        }
    }

    /// Send DPR (Disconnect-Cause REBOOTING: we go away for now) to every open peer
    /// and stop reconnecting; [`Client::is_closed`] once all are closed.
    pub fn disconnect(&mut self, now: Instant) {
        self.shutting_down = true;
        for i in 0..self.peers.len() {
            match self.peers[i].state {
                PeerState::Okay | PeerState::Suspect | PeerState::Reopen => {
                    let mut m = Vec::new();
                    self.base_request(&mut m, cmd::DISCONNECT_PEER);
                    AvpWriter::new(&mut m).u32(avp::DISCONNECT_CAUSE, 0, true, 0);
                    codec::finish(&mut m);
                    let p = &mut self.peers[i];
                    p.tx.extend_from_slice(&m);
                    p.state = PeerState::Closing;
                    p.timer = Some(now + self.cfg.cea_timeout);
                }
                PeerState::Closing => {}
                _ => self.close(i, now, "shutting down"),
            }
        }
    }

    /// The driver's connection to `peer` is up: capabilities exchange.
    pub fn on_connected(&mut self, peer: usize, now: Instant) {
        if self.peers[peer].state != PeerState::Connecting {
            return;
        }
        self.stats.connections += 1;
        let mut m = Vec::new();
        self.base_request(&mut m, cmd::CAPABILITIES_EXCHANGE);
        let mut w = AvpWriter::new(&mut m);
        for ip in &self.cfg.host_ip {
            w.address(avp::HOST_IP_ADDRESS, 0, true, *ip);
        }
        w.u32(avp::VENDOR_ID, 0, true, self.cfg.vendor_id);
        w.str(avp::PRODUCT_NAME, 0, false, &self.cfg.product_name);
        w.u32(avp::SUPPORTED_VENDOR_ID, 0, true, VENDOR_3GPP);
        for a in &self.cfg.applications {
            w.grouped(avp::VENDOR_SPECIFIC_APPLICATION_ID, 0, true, |w| {
                w.u32(avp::VENDOR_ID, 0, true, VENDOR_3GPP);
                w.u32(avp::AUTH_APPLICATION_ID, 0, true, *a);
            });
        }
        codec::finish(&mut m);
        let p = &mut self.peers[peer];
        p.rx.clear();
        p.tx.clear();
        p.tx.extend_from_slice(&m);
        p.state = PeerState::WaitCea;
        p.timer = Some(now + self.cfg.cea_timeout);
    }

    /// The connection to `peer` failed, closed or was reset.
    pub fn on_closed(&mut self, peer: usize, now: Instant, why: &str) {
        if self.peers[peer].state != PeerState::Closed {
            self.close(peer, now, why);
        }
    }

    /// Bytes read from `peer`'s connection.
    pub fn on_bytes(&mut self, peer: usize, now: Instant, data: &[u8]) {
        if matches!(
            self.peers[peer].state,
            PeerState::Closed | PeerState::Connecting
        ) {
            return;
        }
        let mut rx = std::mem::take(&mut self.peers[peer].rx);
        rx.extend_from_slice(data);
        let mut off = 0;
        while rx.len() - off >= 4 {
            let b = &rx[off..];
            let len = u32::from_be_bytes([0, b[1], b[2], b[3]]) as usize;
            if b[0] != 1
                || len < codec::HEADER_LEN
                || !len.is_multiple_of(4)
                || len > self.cfg.max_message
            {
                self.stats.framing_errors += 1;
                let why = format!("not a Diameter stream (version {}, length {len})", b[0]);
                self.close(peer, now, &why);
                return;
            }
            if b.len() < len {
                break;
            }
            self.on_message(peer, now, &rx[off..off + len]);
            off += len;
            if self.peers[peer].state == PeerState::Closed {
                return;
            }
        }
        rx.drain(..off);
        self.peers[peer].rx = rx;
    }

    /// Timers: watchdogs, reconnections, CEA/DPA and request deadlines.
    pub fn handle_timeout(&mut self, now: Instant) {
        for i in 0..self.peers.len() {
            if self.peers[i].timer.is_some_and(|t| t <= now) {
                self.peer_timer(i, now);
            }
        }
        while let Some(&(t, hbh)) = self.deadlines.front() {
            if t > now {
                break;
            }
            self.deadlines.pop_front();
            if let Some(p) = self.pending.remove(&hbh) {
                self.stats.timeouts += 1;
                self.events.push_back(Event::Failed {
                    token: p.token,
                    error: RequestError::Timeout,
                });
            }
        }
        // Entries of answered requests are dropped as they come up: the deadlines stay
        // bounded by the requests sent within one timeout. Requests that waited for a
        // peer in vain leave stale entries in `unsent`: sweep them while no peer is up.
        if self.pending.is_empty() {
            self.deadlines.clear();
            self.unsent.clear();
        } else if self.unsent.len() > 2 * self.pending.len() + 64 {
            let pending = &self.pending;
            self.unsent.retain(|h| pending.contains_key(h));
        }
    }

    fn peer_timer(&mut self, i: usize, now: Instant) {
        let tw = self.cfg.watchdog;
        let p = &mut self.peers[i];
        match p.state {
            PeerState::Closed => {
                p.timer = None;
                if !self.shutting_down {
                    p.state = PeerState::Connecting;
                    self.actions.push_back(Action::Connect(i));
                }
            }
            PeerState::Connecting => p.timer = None,
            PeerState::WaitCea => self.close(i, now, "no CEA in time"),
            PeerState::Closing => self.close(i, now, "no DPA in time"),
            PeerState::Okay => {
                if p.dw_pending {
                    p.state = PeerState::Suspect;
                    p.timer = Some(now + tw);
                    self.failover(i, false);
                } else {
                    self.send_watchdog(i, now);
                }
            }
            PeerState::Suspect => self.close(i, now, "watchdog: no answer in 2 Tw"),
            PeerState::Reopen => {
                if p.dw_pending {
                    if p.num_dwa < 0 {
                        self.close(i, now, "watchdog: no answer while reopening");
                    } else {
                        p.num_dwa = -1;
                        p.timer = Some(now + tw);
                    }
                } else {
                    self.send_watchdog(i, now);
                }
            }
        }
    }

    fn send_watchdog(&mut self, i: usize, now: Instant) {
        let mut m = Vec::new();
        self.base_request(&mut m, cmd::DEVICE_WATCHDOG);
        codec::finish(&mut m);
        self.stats.watchdogs_sent += 1;
        let p = &mut self.peers[i];
        p.tx.extend_from_slice(&m);
        p.dw_pending = true;
        p.timer = Some(now + self.cfg.watchdog);
    }

    /// Starts a base request (CER, DWR, DPR) with Origin-Host/Realm/State-Id.
    fn base_request(&mut self, m: &mut Vec<u8>, command: u32) {
        self.next_hbh = self.next_hbh.wrapping_add(1);
        self.next_e2e = self.next_e2e.wrapping_add(1);
        codec::begin(
            m,
            flags::REQUEST,
            command,
            app::COMMON,
            self.next_hbh,
            self.next_e2e,
        );
        let mut w = AvpWriter::new(m);
        w.str(avp::ORIGIN_HOST, 0, true, &self.cfg.origin_host);
        w.str(avp::ORIGIN_REALM, 0, true, &self.cfg.origin_realm);
        w.u32(avp::ORIGIN_STATE_ID, 0, true, self.origin_state_id);
    }

    fn close(&mut self, i: usize, now: Instant, why: &str) {
        let p = &mut self.peers[i];
        let was_up = matches!(
            p.state,
            PeerState::Okay | PeerState::Suspect | PeerState::Reopen | PeerState::Closing
        );
        if was_up {
            p.failed_before = true;
        }
        p.state = PeerState::Closed;
        p.dw_pending = false;
        p.rx = Vec::new();
        let rest = std::mem::take(&mut p.tx);
        p.timer = (!self.shutting_down).then(|| now + self.cfg.reconnect);
        // The driver drops the socket, if it has one, after writing what is left.
        self.actions.push_back(Action::Close(i, rest));
        if was_up {
            self.events.push_back(Event::PeerDown {
                peer: i,
                reason: why.to_string(),
            });
        }
        self.failover(i, true);
    }

    /// Peer `i` stopped answering (`closed`: or is gone): its requests that were not
    /// retried yet go to another peer once, T flag set; retried ones fail if it is
    /// gone, or wait for their deadline if it is only suspect.
    fn failover(&mut self, i: usize, closed: bool) {
        let mut moved: Vec<u32> = Vec::new();
        let mut lost: Vec<u32> = Vec::new();
        for (&hbh, p) in self.pending.iter_mut() {
            if p.peer != Some(i) {
                continue;
            }
            if !p.retried {
                p.retried = true;
                p.peer = None;
                MessageView::new_unchecked(&mut p.msg[..]).set_retransmit();
                moved.push(hbh);
            } else if closed {
                lost.push(hbh);
            }
        }
        for hbh in lost {
            if let Some(p) = self.pending.remove(&hbh) {
                self.events.push_back(Event::Failed {
                    token: p.token,
                    error: RequestError::PeerLost,
                });
            }
        }
        // Oldest first, ahead of requests that never left.
        moved.sort_unstable_by_key(|h| std::cmp::Reverse(*h));
        for hbh in moved {
            self.stats.retransmits += 1;
            self.unsent.push_front(hbh);
        }
        self.dispatch();
    }

    /// The first peer that takes requests.
    fn usable(&self) -> Option<usize> {
        self.peers.iter().position(|p| p.state == PeerState::Okay)
    }

    /// Sends the requests that wait for a peer, if one is up.
    fn dispatch(&mut self) {
        let Some(i) = self.usable() else { return };
        while let Some(hbh) = self.unsent.pop_front() {
            if let Some(p) = self.pending.get_mut(&hbh) {
                p.peer = Some(i);
                self.peers[i].tx.extend_from_slice(&p.msg);
            }
        }
    }

    fn on_message(&mut self, i: usize, now: Instant, bytes: &[u8]) {
        let Ok(m) = MessageView::new_checked(bytes) else {
            return;
        };
        // Any message shows the peer alive (RFC 3539 §3.4.1).
        let tw = self.cfg.watchdog;
        let is_dwa = !m.is_request() && m.command_code() == cmd::DEVICE_WATCHDOG;
        let p = &mut self.peers[i];
        match p.state {
            PeerState::Okay => {
                p.timer = Some(now + tw);
                if is_dwa {
                    p.dw_pending = false;
                }
            }
            PeerState::Suspect => {
                p.state = PeerState::Okay;
                p.dw_pending = false;
                p.timer = Some(now + tw);
                self.dispatch();
            }
            PeerState::Reopen if is_dwa => {
                p.dw_pending = false;
                p.num_dwa += 1;
                if p.num_dwa >= 3 {
                    p.state = PeerState::Okay;
                    p.timer = Some(now + tw);
                    let host = p.host.clone();
                    self.events.push_back(Event::PeerUp { peer: i, host });
                    self.dispatch();
                }
            }
            _ => {}
        }
        if m.is_request() {
            self.on_request(i, now, &m);
        } else {
            self.on_answer(i, now, &m);
        }
    }

    fn on_request(&mut self, i: usize, now: Instant, m: &MessageView<&[u8]>) {
        let bytes = m.as_bytes();
        let known_base: &[(u32, u32)] = &[
            (0, avp::ORIGIN_HOST),
            (0, avp::ORIGIN_REALM),
            (0, avp::ORIGIN_STATE_ID),
            (0, avp::DISCONNECT_CAUSE),
        ];
        match (m.application_id(), m.command_code()) {
            (app::COMMON, cmd::DEVICE_WATCHDOG) | (app::COMMON, cmd::DISCONNECT_PEER) => {
                let (code, failed) = match unknown_mandatory(m.avps(), known_base) {
                    Ok(None) => (result::SUCCESS, None),
                    Ok(Some(a)) => (result::AVP_UNSUPPORTED, Some(a.as_bytes().to_vec())),
                    Err(_) => (result::INVALID_AVP_BITS, None),
                };
                let osi = self.origin_state_id;
                self.answer(i, bytes, code, failed.as_deref(), |w| {
                    w.u32(avp::ORIGIN_STATE_ID, 0, true, osi)
                });
                if m.command_code() == cmd::DISCONNECT_PEER && code == result::SUCCESS {
                    self.close(i, now, "peer sent DPR");
                }
            }
            (app::COMMON, cmd::CAPABILITIES_EXCHANGE) => {
                // We open connections; a CER on an open one is not ours to elect.
                self.answer(i, bytes, result::UNABLE_TO_COMPLY, None, |_| {});
            }
            (a, _) if self.cfg.applications.contains(&a) => {
                if matches!(self.peers[i].state, PeerState::Okay | PeerState::Suspect) {
                    self.events.push_back(Event::Request {
                        peer: i,
                        msg: bytes.to_vec(),
                    });
                }
            }
            _ => self.answer(i, bytes, result::APPLICATION_UNSUPPORTED, None, |_| {}),
        }
    }

    fn on_answer(&mut self, i: usize, now: Instant, m: &MessageView<&[u8]>) {
        match (m.application_id(), m.command_code()) {
            (app::COMMON, cmd::CAPABILITIES_EXCHANGE) => self.on_cea(i, now, m),
            (app::COMMON, cmd::DEVICE_WATCHDOG) => {}
            (app::COMMON, cmd::DISCONNECT_PEER) => {
                if self.peers[i].state == PeerState::Closing {
                    self.close(i, now, "disconnected (DPA)");
                }
            }
            _ => match self.pending.remove(&m.hop_by_hop()) {
                Some(p) => {
                    self.stats.answers += 1;
                    self.events.push_back(Event::Answer {
                        token: p.token,
                        msg: m.as_bytes().to_vec(),
                    });
                }
                None => self.stats.unmatched_answers += 1,
            },
        }
    }

    fn on_cea(&mut self, i: usize, now: Instant, m: &MessageView<&[u8]>) {
        if self.peers[i].state != PeerState::WaitCea {
            return;
        }
        match result_of(m) {
            Ok(Some(ResultCode::Base(result::SUCCESS))) => {}
            Ok(r) => return self.close(i, now, &format!("CEA refused: {r:?}")),
            Err(e) => return self.close(i, now, &format!("CEA malformed: {e}")),
        }
        let (host, common) = match cea_host_and_apps(m, &self.cfg.applications) {
            Ok(x) => x,
            Err(e) => return self.close(i, now, &format!("CEA malformed: {e}")),
        };
        if !common {
            return self.close(i, now, "CEA: no common application");
        }
        let tw = self.cfg.watchdog;
        let p = &mut self.peers[i];
        p.dw_pending = false;
        p.host.clone_from(&host);
        if p.failed_before {
            // RFC 3539 REOPEN: a watchdog at once, three answers before traffic.
            p.state = PeerState::Reopen;
            p.num_dwa = 0;
            self.send_watchdog(i, now);
        } else {
            p.state = PeerState::Okay;
            p.timer = Some(now + tw);
            self.events.push_back(Event::PeerUp { peer: i, host });
            self.dispatch();
        }
    }
}

/// A CEA's Origin-Host, and whether it shares one of `ours` (or relays).
fn cea_host_and_apps<T: AsRef<[u8]>>(
    m: &MessageView<T>,
    ours: &[u32],
) -> Result<(String, bool), DecodeError> {
    let mut host = None;
    let mut common = false;
    for a in m.avps() {
        let a = a?;
        match (a.vendor_id(), a.code()) {
            (0, avp::ORIGIN_HOST) => host = Some(a.identity()?.to_string()),
            (0, avp::AUTH_APPLICATION_ID) | (0, avp::ACCT_APPLICATION_ID) => {
                let id = a.u32()?;
                common |= id == app::RELAY || ours.contains(&id);
            }
            (0, avp::VENDOR_SPECIFIC_APPLICATION_ID) => {
                for g in a.grouped() {
                    let g = g?;
                    if matches!(
                        (g.vendor_id(), g.code()),
                        (0, avp::AUTH_APPLICATION_ID) | (0, avp::ACCT_APPLICATION_ID)
                    ) {
                        let id = g.u32()?;
                        common |= id == app::RELAY || ours.contains(&id);
                    }
                }
            }
            _ => {}
        }
    }
    let host = host.ok_or(DecodeError::Missing {
        name: "Origin-Host",
        code: avp::ORIGIN_HOST,
    })?;
    Ok((host, common))
}
