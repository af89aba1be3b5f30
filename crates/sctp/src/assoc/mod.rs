//! Sans-IO SCTP association (RFC 9260): events in (`handle_packet`, `handle_timeout`,
//! `send`, `shutdown`, `abort`), actions out (`poll_transmit`, `poll_event`,
//! `poll_timeout`). No sockets, threads or clocks: time is passed in as `Instant`.
//!
//! Single-homed (one path): the association's peer is one transport address, so path
//! and association error counters are the same counter.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::wire::{
    self, cause, chunk_type, data_flags, param_type, Chunk, DataChunk, InitChunk, PacketBuilder,
    SackChunk, SctpPacket, COMMON_HEADER_LEN, DATA_HEADER_LEN,
};

/// Association tunables. Defaults follow RFC 9260 §16 except where noted.
#[derive(Debug, Clone)]
pub struct Config {
    /// Outbound streams we ask for (negotiated down to the peer's MIS).
    pub out_streams: u16,
    /// Maximum inbound streams we accept.
    pub in_streams: u16,
    pub rto_initial: Duration,
    pub rto_min: Duration,
    pub rto_max: Duration,
    /// Max.Init.Retransmits: T1-init / T1-cookie expiries before giving up.
    pub max_init_retransmits: u32,
    /// Association.Max.Retrans.
    pub assoc_max_retrans: u32,
    /// Path.Max.Retrans. Single-homed, so the association closes when the shared error
    /// counter exceeds the smaller of this and `assoc_max_retrans`.
    pub path_max_retrans: u32,
    /// HB.interval on idle paths.
    pub heartbeat_interval: Duration,
    /// Delayed SACK timer (a SACK also goes out for every second packet with DATA).
    pub sack_delay: Duration,
    /// Path MTU for the SCTP packet (without the UDP/IP headers of the encapsulation).
    pub pmtu: usize,
    /// Receive window we advertise (bytes).
    pub rwnd: u32,
    /// Valid.Cookie.Life.
    pub cookie_lifetime: Duration,
    /// Bytes that may wait in the send queue (not yet acked) before `send` refuses.
    pub max_send_buffer: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            out_streams: 32,
            in_streams: 32,
            rto_initial: Duration::from_secs(1),
            rto_min: Duration::from_secs(1),
            rto_max: Duration::from_secs(60),
            max_init_retransmits: 8,
            assoc_max_retrans: 10,
            path_max_retrans: 5,
            heartbeat_interval: Duration::from_secs(30),
            sack_delay: Duration::from_millis(200),
            // 1200 leaves room for IPv6 + UDP under a 1280-byte minimum MTU.
            pmtu: 1200,
            rwnd: 4 * 1024 * 1024,
            cookie_lifetime: Duration::from_secs(60),
            max_send_buffer: 64 * 1024 * 1024,
        }
    }
}

/// Why an association closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// Graceful SHUTDOWN sequence completed.
    Shutdown,
    /// The peer sent ABORT.
    AbortedByPeer,
    /// We aborted (`abort()`).
    AbortedLocally,
    /// T3-rtx / T2-shutdown expired too often (Association.Max.Retrans).
    RetransmitLimit,
    /// Heartbeats went unanswered (Path.Max.Retrans).
    HeartbeatFailure,
    /// T1-init / T1-cookie expired Max.Init.Retransmits times.
    InitFailed,
    /// The peer restarted the association (new INIT + COOKIE ECHO with tie tags).
    PeerRestarted,
    /// The peer violated the protocol in a way that forces an ABORT.
    ProtocolViolation(&'static str),
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CloseReason::Shutdown => f.write_str("shutdown"),
            CloseReason::AbortedByPeer => f.write_str("aborted by peer"),
            CloseReason::AbortedLocally => f.write_str("aborted locally"),
            CloseReason::RetransmitLimit => f.write_str("retransmission limit exceeded"),
            CloseReason::HeartbeatFailure => f.write_str("heartbeat limit exceeded (peer dead)"),
            CloseReason::InitFailed => f.write_str("association setup timed out"),
            CloseReason::PeerRestarted => f.write_str("peer restarted the association"),
            CloseReason::ProtocolViolation(w) => write!(f, "protocol violation: {w}"),
        }
    }
}

/// Something the application should know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Connected {
        out_streams: u16,
        in_streams: u16,
    },
    Data {
        stream: u16,
        ppid: u32,
        data: Vec<u8>,
    },
    Closed {
        reason: CloseReason,
    },
}

/// Why `send` refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The association is closed or closing.
    NotConnected,
    /// Stream id beyond the negotiated number of outbound streams.
    InvalidStream { stream: u16, out_streams: u16 },
    /// SCTP cannot carry empty user messages.
    EmptyMessage,
    /// `Config::max_send_buffer` reached.
    BufferFull,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::NotConnected => f.write_str("association not connected"),
            SendError::InvalidStream {
                stream,
                out_streams,
            } => write!(
                f,
                "stream {stream} invalid: {out_streams} outbound streams negotiated"
            ),
            SendError::EmptyMessage => f.write_str("empty message"),
            SendError::BufferFull => f.write_str("send buffer full"),
        }
    }
}

impl std::error::Error for SendError {}

/// Association state (RFC 9260 §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    CookieWait,
    CookieEchoed,
    Established,
    ShutdownPending,
    ShutdownSent,
    ShutdownReceived,
    ShutdownAckSent,
    Closed,
}

impl State {
    /// RFC 9260's name of the state, as metrics and the API show it.
    pub fn name(self) -> &'static str {
        match self {
            State::CookieWait => "COOKIE-WAIT",
            State::CookieEchoed => "COOKIE-ECHOED",
            State::Established => "ESTABLISHED",
            State::ShutdownPending => "SHUTDOWN-PENDING",
            State::ShutdownSent => "SHUTDOWN-SENT",
            State::ShutdownReceived => "SHUTDOWN-RECEIVED",
            State::ShutdownAckSent => "SHUTDOWN-ACK-SENT",
            State::Closed => "CLOSED",
        }
    }
}

/// One association as an operator sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssocView {
    pub id: u64,
    pub peer: std::net::SocketAddr,
    pub state: State,
    pub rto: Duration,
    pub srtt: Option<Duration>,
    pub out_streams: u16,
    pub in_streams: u16,
    pub counters: AssocCounters,
}

mod cookie;
mod receive;
mod transmit;

pub use cookie::CookieData;
pub(crate) use cookie::{random_nonzero_u32, random_u64, COOKIE_BODY_LEN};

/// An outgoing DATA chunk (one fragment of a user message).
#[derive(Debug)]
struct OutChunk {
    tsn: u64,
    stream: u16,
    ssn: u16,
    ppid: u32,
    flags: u8,
    data: Vec<u8>,
    tx_count: u32,
    /// Reported received by a gap ack block of the latest SACK.
    gap_acked: bool,
    /// Counted in `flight_size`.
    in_flight: bool,
    /// Waiting for retransmission.
    marked: bool,
    misses: u8,
}

/// A received fragment waiting for the rest of its message.
#[derive(Debug)]
struct Frag {
    stream: u16,
    ssn: u16,
    ppid: u32,
    flags: u8,
    data: Vec<u8>,
}

#[derive(Debug, Default)]
struct Pending {
    init: bool,
    cookie_echo: bool,
    cookie_ack: bool,
    shutdown: bool,
    shutdown_ack: bool,
    shutdown_complete: bool,
    abort: Option<Vec<u8>>,
    heartbeat: bool,
    heartbeat_acks: Vec<Vec<u8>>,
    errors: Vec<u8>,
}

/// One SCTP association.
/// What an association did on the wire (monotonic; for tests, benchmarks and the
/// operator). `delivered` counts user messages handed up, each exactly once.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AssocCounters {
    pub data_chunks_rx: u64,
    /// DATA chunks received again (a retransmission or a network duplicate):
    /// reported in SACK, never delivered twice.
    pub dup_tsns_rx: u64,
    pub delivered: u64,
    pub data_chunks_tx: u64,
    /// DATA chunks sent again (T3-rtx or fast retransmit).
    pub retransmissions: u64,
    pub t3_expiries: u64,
    pub fast_retransmits: u64,
    /// HEARTBEATs sent, and those the peer answered (RFC 4960 §8.3).
    pub heartbeats_sent: u64,
    pub heartbeat_acks: u64,
    /// Times the peer restarted this association (RFC 4960 §5.2.4 case A): the new
    /// association carries its predecessor's count.
    pub peer_restarts: u64,
}

impl std::ops::AddAssign for AssocCounters {
    fn add_assign(&mut self, o: Self) {
        self.data_chunks_rx += o.data_chunks_rx;
        self.dup_tsns_rx += o.dup_tsns_rx;
        self.delivered += o.delivered;
        self.data_chunks_tx += o.data_chunks_tx;
        self.retransmissions += o.retransmissions;
        self.t3_expiries += o.t3_expiries;
        self.fast_retransmits += o.fast_retransmits;
        self.heartbeats_sent += o.heartbeats_sent;
        self.heartbeat_acks += o.heartbeat_acks;
        self.peer_restarts += o.peer_restarts;
    }
}

pub struct Association {
    counters: AssocCounters,
    config: Arc<Config>,
    state: State,
    local_port: u16,
    peer_port: u16,
    local_vtag: u32,
    peer_vtag: u32,
    local_init_tsn: u32,
    cookie: Vec<u8>,
    t1: Option<Instant>,
    t1_count: u32,
    t2: Option<Instant>,
    // --- send side ---
    num_out: u16,
    num_in: u16,
    next_tsn: u64,
    tx_cum: u64,
    out_ssn: Vec<u16>,
    queue: VecDeque<OutChunk>,
    inflight: VecDeque<OutChunk>,
    marked: usize,
    queued_bytes: usize,
    flight_size: usize,
    cwnd: usize,
    ssthresh: usize,
    partial_bytes_acked: usize,
    peer_rwnd: u32,
    fast_recovery_exit: Option<u64>,
    rto: Duration,
    srtt: Option<Duration>,
    rttvar: Duration,
    rtt_probe: Option<(u64, Instant)>,
    t3: Option<Instant>,
    error_count: u32,
    // --- receive side ---
    cum_recv: u64,
    rx_above: BTreeSet<u64>,
    rx_dups: Vec<u32>,
    frags: BTreeMap<u64, Frag>,
    frag_bytes: usize,
    in_ssn: Vec<u16>,
    ordered_wait: HashMap<(u16, u16), (u32, Vec<u8>)>,
    wait_bytes: usize,
    sack_needed: bool,
    sack_now: bool,
    sack_timer: Option<Instant>,
    pkts_since_sack: u32,
    // --- heartbeat ---
    hb_timer: Option<Instant>,
    hb_outstanding: Option<(u64, Instant)>,
    // --- outputs ---
    pending: Pending,
    events: VecDeque<Event>,
}

impl fmt::Debug for Association {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Association")
            .field("state", &self.state)
            .field("local_port", &self.local_port)
            .field("peer_port", &self.peer_port)
            .field("local_vtag", &self.local_vtag)
            .field("peer_vtag", &self.peer_vtag)
            .finish_non_exhaustive()
    }
}

const EXT_BASE: u64 = 1 << 32;
const MAX_GAP_BLOCKS: usize = 64;
const MAX_DUPS: usize = 16;
/// HEARTBEAT info we send: Heartbeat Info TLV holding an 8-byte nonce.
const HB_INFO_LEN: usize = 12;

fn unwrap_tsn(reference: u64, tsn: u32) -> u64 {
    let delta = tsn.wrapping_sub(reference as u32) as i32 as i64;
    (reference as i64 + delta) as u64
}

impl Association {
    /// What this association did so far.
    pub fn counters(&self) -> AssocCounters {
        self.counters
    }

    fn blank(now: Instant, config: Arc<Config>, local_port: u16, peer_port: u16) -> Self {
        let _ = now;
        let rto = config.rto_initial;
        let pmtu = config.pmtu;
        Association {
            state: State::Closed,
            local_port,
            peer_port,
            local_vtag: 0,
            peer_vtag: 0,
            local_init_tsn: 0,
            cookie: Vec::new(),
            t1: None,
            t1_count: 0,
            t2: None,
            num_out: config.out_streams,
            num_in: config.in_streams,
            next_tsn: EXT_BASE,
            tx_cum: EXT_BASE - 1,
            out_ssn: vec![0; config.out_streams as usize],
            queue: VecDeque::new(),
            inflight: VecDeque::new(),
            marked: 0,
            queued_bytes: 0,
            flight_size: 0,
            cwnd: (4 * pmtu).min((2 * pmtu).max(4380)),
            ssthresh: usize::MAX,
            partial_bytes_acked: 0,
            peer_rwnd: 0,
            fast_recovery_exit: None,
            rto,
            srtt: None,
            rttvar: Duration::ZERO,
            rtt_probe: None,
            t3: None,
            error_count: 0,
            cum_recv: EXT_BASE - 1,
            rx_above: BTreeSet::new(),
            rx_dups: Vec::new(),
            counters: AssocCounters::default(),
            frags: BTreeMap::new(),
            frag_bytes: 0,
            in_ssn: vec![0; config.in_streams as usize],
            ordered_wait: HashMap::new(),
            wait_bytes: 0,
            sack_needed: false,
            sack_now: false,
            sack_timer: None,
            pkts_since_sack: 0,
            hb_timer: None,
            hb_outstanding: None,
            pending: Pending::default(),
            events: VecDeque::new(),
            config,
        }
    }

    /// Starts an association as the client: sends INIT.
    pub fn connect(now: Instant, config: Arc<Config>, local_port: u16, peer_port: u16) -> Self {
        let tag = random_nonzero_u32();
        let tsn = random_u64() as u32;
        Self::connect_with(now, config, local_port, peer_port, tag, tsn)
    }

    /// [`Association::connect`] with chosen verification tag and initial TSN
    /// (deterministic tests; INIT collision handling by the endpoint).
    pub fn connect_with(
        now: Instant,
        config: Arc<Config>,
        local_port: u16,
        peer_port: u16,
        local_vtag: u32,
        initial_tsn: u32,
    ) -> Self {
        let mut a = Self::blank(now, config, local_port, peer_port);
        a.state = State::CookieWait;
        a.local_vtag = local_vtag;
        a.set_local_init_tsn(initial_tsn);
        a.pending.init = true;
        a.t1 = Some(now + a.rto);
        a
    }

    fn set_local_init_tsn(&mut self, tsn: u32) {
        self.local_init_tsn = tsn;
        self.next_tsn = EXT_BASE + tsn as u64;
        self.tx_cum = self.next_tsn - 1;
    }

    fn set_peer_params(&mut self, peer_vtag: u32, peer_tsn: u32, rwnd: u32, out: u16, inn: u16) {
        self.peer_vtag = peer_vtag;
        self.cum_recv = EXT_BASE + peer_tsn as u64 - 1;
        self.peer_rwnd = rwnd;
        self.ssthresh = rwnd as usize;
        self.num_out = out;
        self.num_in = inn;
        self.out_ssn.resize(out as usize, 0);
        self.in_ssn.resize(inn as usize, 0);
    }

    /// Builds the server side from a validated cookie (COOKIE ECHO received).
    pub(crate) fn from_cookie(now: Instant, config: Arc<Config>, c: &CookieData) -> Self {
        let mut a = Self::blank(now, config, c.local_port, c.peer_port);
        a.local_vtag = c.local_vtag;
        a.set_local_init_tsn(c.local_init_tsn);
        a.set_peer_params(
            c.peer_vtag,
            c.peer_init_tsn,
            c.peer_rwnd,
            c.out_streams,
            c.in_streams,
        );
        a.establish(now);
        a.pending.cookie_ack = true;
        a
    }

    /// A valid COOKIE ECHO for this existing association (RFC 9260 §5.2.4 cases B, D).
    pub(crate) fn accept_cookie(&mut self, now: Instant, c: &CookieData) {
        match self.state {
            State::CookieWait | State::CookieEchoed => {
                self.set_peer_params(
                    c.peer_vtag,
                    c.peer_init_tsn,
                    c.peer_rwnd,
                    c.out_streams,
                    c.in_streams,
                );
                self.t1 = None;
                self.establish(now);
                self.pending.cookie_ack = true;
            }
            State::Closed => {}
            _ => self.pending.cookie_ack = true,
        }
    }

    fn establish(&mut self, now: Instant) {
        self.state = State::Established;
        self.error_count = 0;
        self.rto = self.config.rto_initial;
        self.hb_timer = Some(now + self.config.heartbeat_interval + self.rto);
        self.events.push_back(Event::Connected {
            out_streams: self.num_out,
            in_streams: self.num_in,
        });
        // Messages queued before establishment may name streams the peer refused.
        let n = self.num_out;
        if self.queue.iter().any(|c| c.stream >= n) {
            self.queue.retain(|c| c.stream < n);
            self.queued_bytes = self.queue.iter().map(|c| c.data.len()).sum();
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    /// The smoothed round-trip time (None before the first measurement).
    pub fn srtt(&self) -> Option<Duration> {
        self.srtt
    }
    /// A peer restart replaced `old` with this association.
    pub(crate) fn restarted_from(&mut self, old: &Association) {
        self.counters.peer_restarts = old.counters.peer_restarts + 1;
    }
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }
    /// Closed, and nothing is left to transmit or report.
    pub fn is_drained(&self) -> bool {
        self.state == State::Closed
            && self.events.is_empty()
            && self.pending.abort.is_none()
            && !self.pending.shutdown_complete
    }
    pub fn local_port(&self) -> u16 {
        self.local_port
    }
    pub fn peer_port(&self) -> u16 {
        self.peer_port
    }
    pub fn local_vtag(&self) -> u32 {
        self.local_vtag
    }
    pub fn peer_vtag(&self) -> u32 {
        self.peer_vtag
    }
    pub fn out_streams(&self) -> u16 {
        self.num_out
    }
    pub fn in_streams(&self) -> u16 {
        self.num_in
    }
    pub(crate) fn local_init_tsn(&self) -> u32 {
        self.local_init_tsn
    }
    /// Current retransmission timeout.
    pub fn rto(&self) -> Duration {
        self.rto
    }
    /// Bytes sent but not yet cumulatively acknowledged, plus bytes not yet sent.
    pub fn buffered_amount(&self) -> usize {
        self.queued_bytes
    }

    pub(crate) fn close(&mut self, reason: CloseReason) {
        if self.state == State::Closed {
            return;
        }
        self.state = State::Closed;
        self.t1 = None;
        self.t2 = None;
        self.t3 = None;
        self.hb_timer = None;
        self.sack_timer = None;
        self.queue.clear();
        self.inflight.clear();
        self.frags.clear();
        self.ordered_wait.clear();
        self.pending.init = false;
        self.pending.cookie_echo = false;
        self.pending.cookie_ack = false;
        self.pending.shutdown = false;
        self.pending.shutdown_ack = false;
        self.pending.heartbeat = false;
        self.pending.heartbeat_acks.clear();
        self.pending.errors.clear();
        self.sack_needed = false;
        self.events.push_back(Event::Closed { reason });
    }

    fn abort_with(&mut self, reason: CloseReason, causes: Vec<u8>) {
        if self.state == State::Closed {
            return;
        }
        // In COOKIE-WAIT the peer holds no state and we know no tag to use.
        if self.state != State::CookieWait {
            self.pending.abort = Some(causes);
        }
        self.close(reason);
    }

    /// Aborts the association (ABORT is sent; `Closed { AbortedLocally }` is reported).
    pub fn abort(&mut self) {
        let mut causes = Vec::new();
        wire::emit_param(&mut causes, cause::USER_INITIATED_ABORT, &[]);
        self.abort_with(CloseReason::AbortedLocally, causes);
    }

    /// Starts a graceful shutdown: queued data is delivered first.
    pub fn shutdown(&mut self, now: Instant) {
        match self.state {
            State::Established => {
                self.state = State::ShutdownPending;
                self.check_shutdown(now);
            }
            State::CookieWait | State::CookieEchoed => self.abort(),
            _ => {}
        }
    }

    fn check_shutdown(&mut self, now: Instant) {
        if !self.queue.is_empty() || !self.inflight.is_empty() {
            return;
        }
        match self.state {
            State::ShutdownPending => {
                self.state = State::ShutdownSent;
                self.pending.shutdown = true;
                self.t2 = Some(now + self.rto);
                self.t3 = None;
                self.hb_timer = None;
            }
            State::ShutdownReceived => {
                self.state = State::ShutdownAckSent;
                self.pending.shutdown_ack = true;
                self.t2 = Some(now + self.rto);
                self.t3 = None;
                self.hb_timer = None;
            }
            _ => {}
        }
    }

    /// Queues a user message. Messages larger than one packet are fragmented.
    pub fn send(
        &mut self,
        stream: u16,
        ppid: u32,
        data: &[u8],
        unordered: bool,
    ) -> Result<(), SendError> {
        match self.state {
            State::CookieWait | State::CookieEchoed | State::Established => {}
            _ => return Err(SendError::NotConnected),
        }
        if stream >= self.num_out {
            return Err(SendError::InvalidStream {
                stream,
                out_streams: self.num_out,
            });
        }
        if data.is_empty() {
            return Err(SendError::EmptyMessage);
        }
        if self.queued_bytes + data.len() > self.config.max_send_buffer {
            return Err(SendError::BufferFull);
        }
        let ssn = if unordered {
            0
        } else {
            let s = &mut self.out_ssn[stream as usize];
            let v = *s;
            *s = s.wrapping_add(1);
            v
        };
        let max_frag = self.max_fragment();
        let n = data.len().div_ceil(max_frag);
        for (i, part) in data.chunks(max_frag).enumerate() {
            let mut flags = if unordered { data_flags::U } else { 0 };
            if i == 0 {
                flags |= data_flags::B;
            }
            if i + 1 == n {
                flags |= data_flags::E;
            }
            self.queue.push_back(OutChunk {
                tsn: self.next_tsn,
                stream,
                ssn,
                ppid,
                flags,
                data: part.to_vec(),
                tx_count: 0,
                gap_acked: false,
                in_flight: false,
                marked: false,
                misses: 0,
            });
            self.next_tsn += 1;
        }
        self.queued_bytes += data.len();
        Ok(())
    }

    fn max_fragment(&self) -> usize {
        self.config
            .pmtu
            .saturating_sub(COMMON_HEADER_LEN + DATA_HEADER_LEN)
            .max(64)
    }

    /// Next instant at which `handle_timeout` must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.t1, self.t2, self.t3, self.sack_timer, self.hb_timer]
            .into_iter()
            .flatten()
            .min()
    }

    /// Next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Processes expired timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.t1.is_some_and(|t| t <= now) {
            self.t1_count += 1;
            if self.t1_count > self.config.max_init_retransmits {
                self.close(CloseReason::InitFailed);
                return;
            }
            self.backoff();
            match self.state {
                State::CookieWait => self.pending.init = true,
                State::CookieEchoed => self.pending.cookie_echo = true,
                _ => {}
            }
            self.t1 = Some(now + self.rto);
        }
        if self.t2.is_some_and(|t| t <= now) {
            self.error_count += 1;
            if self.error_count > self.max_errors() {
                self.abort_with(CloseReason::RetransmitLimit, Vec::new());
                return;
            }
            self.backoff();
            match self.state {
                State::ShutdownSent => self.pending.shutdown = true,
                State::ShutdownAckSent => self.pending.shutdown_ack = true,
                _ => {}
            }
            self.t2 = Some(now + self.rto);
        }
        if self.t3.is_some_and(|t| t <= now) {
            self.on_t3_expiry(now);
            if self.state == State::Closed {
                return;
            }
        }
        if self.sack_timer.is_some_and(|t| t <= now) {
            self.sack_timer = None;
            if self.sack_needed {
                self.sack_now = true;
            }
        }
        if self.hb_timer.is_some_and(|t| t <= now) {
            if self.hb_outstanding.is_some() {
                // The previous HEARTBEAT was not acknowledged within one RTO.
                self.error_count += 1;
                self.backoff();
                if self.error_count > self.max_errors() {
                    self.abort_with(CloseReason::HeartbeatFailure, Vec::new());
                    return;
                }
            }
            self.pending.heartbeat = true;
            self.hb_outstanding = None;
            self.hb_timer = Some(now + self.rto);
        }
    }

    fn max_errors(&self) -> u32 {
        self.config
            .assoc_max_retrans
            .min(self.config.path_max_retrans)
    }

    fn backoff(&mut self) {
        self.rto = (self.rto * 2).min(self.config.rto_max);
    }

    fn on_t3_expiry(&mut self, now: Instant) {
        self.counters.t3_expiries += 1;
        self.error_count += 1;
        if self.error_count > self.max_errors() {
            self.abort_with(CloseReason::RetransmitLimit, Vec::new());
            return;
        }
        let pmtu = self.config.pmtu;
        self.ssthresh = (self.cwnd / 2).max(4 * pmtu);
        self.cwnd = pmtu;
        self.partial_bytes_acked = 0;
        self.fast_recovery_exit = None;
        self.backoff();
        self.rtt_probe = None;
        for c in self.inflight.iter_mut() {
            if !c.gap_acked && !c.marked {
                c.marked = true;
                self.marked += 1;
            }
            if c.in_flight && !c.gap_acked {
                c.in_flight = false;
                self.flight_size -= c.data.len();
            }
        }
        self.t3 = Some(now + self.rto);
    }

    fn update_rtt(&mut self, r: Duration) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2;
            }
            Some(srtt) => {
                let diff = srtt.abs_diff(r);
                self.rttvar = self.rttvar * 3 / 4 + diff / 4;
                self.srtt = Some(srtt * 7 / 8 + r / 8);
            }
        }
        let rto = self.srtt.unwrap_or(r) + 4 * self.rttvar;
        self.rto = rto.clamp(self.config.rto_min, self.config.rto_max);
    }
}
