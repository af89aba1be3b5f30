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

/// Contents of our signed state cookie: everything needed to build the association
/// when the COOKIE ECHO arrives, so INIT is answered without keeping state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieData {
    pub created_ms: u64,
    pub local_vtag: u32,
    pub peer_vtag: u32,
    pub local_init_tsn: u32,
    pub peer_init_tsn: u32,
    pub peer_rwnd: u32,
    pub out_streams: u16,
    pub in_streams: u16,
    pub local_port: u16,
    pub peer_port: u16,
    pub tie_local: u32,
    pub tie_peer: u32,
}

pub(crate) const COOKIE_BODY_LEN: usize = 44;

impl CookieData {
    pub(crate) fn encode(&self) -> [u8; COOKIE_BODY_LEN] {
        let mut b = [0u8; COOKIE_BODY_LEN];
        b[0..8].copy_from_slice(&self.created_ms.to_be_bytes());
        b[8..12].copy_from_slice(&self.local_vtag.to_be_bytes());
        b[12..16].copy_from_slice(&self.peer_vtag.to_be_bytes());
        b[16..20].copy_from_slice(&self.local_init_tsn.to_be_bytes());
        b[20..24].copy_from_slice(&self.peer_init_tsn.to_be_bytes());
        b[24..28].copy_from_slice(&self.peer_rwnd.to_be_bytes());
        b[28..30].copy_from_slice(&self.out_streams.to_be_bytes());
        b[30..32].copy_from_slice(&self.in_streams.to_be_bytes());
        b[32..34].copy_from_slice(&self.local_port.to_be_bytes());
        b[34..36].copy_from_slice(&self.peer_port.to_be_bytes());
        b[36..40].copy_from_slice(&self.tie_local.to_be_bytes());
        b[40..44].copy_from_slice(&self.tie_peer.to_be_bytes());
        b
    }
    pub(crate) fn decode(b: &[u8]) -> Option<CookieData> {
        if b.len() < COOKIE_BODY_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut ms = [0u8; 8];
        ms.copy_from_slice(&b[0..8]);
        Some(CookieData {
            created_ms: u64::from_be_bytes(ms),
            local_vtag: u32_at(8),
            peer_vtag: u32_at(12),
            local_init_tsn: u32_at(16),
            peer_init_tsn: u32_at(20),
            peer_rwnd: u32_at(24),
            out_streams: u16_at(28),
            in_streams: u16_at(30),
            local_port: u16_at(32),
            peer_port: u16_at(34),
            tie_local: u32_at(36),
            tie_peer: u32_at(40),
        })
    }
}

/// A random u64 from std's per-process randomly keyed hasher (no extra dependency).
pub(crate) fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CTR: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(CTR.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

pub(crate) fn random_nonzero_u32() -> u32 {
    loop {
        let v = random_u64() as u32;
        if v != 0 {
            return v;
        }
    }
}

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

    /// Processes one received SCTP packet (already stripped of UDP). Invalid packets
    /// (bad CRC, wrong ports, wrong verification tag) are dropped silently.
    pub fn handle_packet(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(pkt) = SctpPacket::new_checked(bytes) else {
            return;
        };
        if pkt.verify_checksum().is_err() {
            return;
        }
        self.handle_verified(now, &pkt);
    }

    /// [`Association::handle_packet`] for a packet whose CRC was already checked.
    pub(crate) fn handle_verified(&mut self, now: Instant, pkt: &SctpPacket<&[u8]>) {
        if pkt.dst_port() != self.local_port || pkt.src_port() != self.peer_port {
            return;
        }
        let bytes: &[u8] = pkt.as_bytes();
        let vtag = pkt.verification_tag();
        let mut chunks = wire::chunk_iter(&bytes[COMMON_HEADER_LEN..]);
        let Some(Ok(first)) = chunks.clone().next() else {
            return;
        };
        // Verification tag rules (RFC 9260 §8.5, §8.5.1).
        let ok = match first.chunk_type {
            chunk_type::INIT => false, // endpoint's business
            chunk_type::ABORT | chunk_type::SHUTDOWN_COMPLETE => {
                let t = first.flags & 1 != 0;
                (!t && vtag == self.local_vtag)
                    || (t && self.peer_vtag != 0 && vtag == self.peer_vtag)
            }
            _ => vtag == self.local_vtag,
        };
        if !ok {
            return;
        }
        let mut had_data = false;
        for raw in chunks.by_ref() {
            let Ok(raw) = raw else { break };
            let chunk = match raw.parse() {
                Ok(c) => c,
                Err(_) => break,
            };
            match chunk {
                Chunk::Data(d) => {
                    had_data = true;
                    self.on_data(now, &d);
                }
                Chunk::Sack(s) => self.on_sack(now, &s),
                Chunk::InitAck(c) => self.on_init_ack(now, &c),
                Chunk::CookieAck => {
                    if self.state == State::CookieEchoed {
                        self.t1 = None;
                        self.establish(now);
                    }
                }
                Chunk::CookieEcho { .. } => {
                    // The endpoint validated the cookie; an established association just
                    // repeats its COOKIE ACK (ours may have been lost).
                    if matches!(
                        self.state,
                        State::Established | State::ShutdownPending | State::ShutdownReceived
                    ) {
                        self.pending.cookie_ack = true;
                    }
                }
                Chunk::Heartbeat { info } => {
                    if self.state != State::CookieWait && self.pending.heartbeat_acks.len() < 8 {
                        self.pending.heartbeat_acks.push(info.to_vec());
                    }
                }
                Chunk::HeartbeatAck { info } => self.on_heartbeat_ack(now, info),
                Chunk::Abort { .. } => {
                    self.pending.abort = None;
                    self.close(CloseReason::AbortedByPeer);
                    return;
                }
                Chunk::Shutdown { cum_tsn_ack } => self.on_shutdown(now, cum_tsn_ack),
                Chunk::ShutdownAck => {
                    if matches!(self.state, State::ShutdownSent | State::ShutdownAckSent) {
                        self.pending.shutdown_complete = true;
                        self.close(CloseReason::Shutdown);
                        return;
                    }
                }
                Chunk::ShutdownComplete { .. } => {
                    if self.state == State::ShutdownAckSent {
                        self.close(CloseReason::Shutdown);
                        return;
                    }
                }
                Chunk::Error { causes } => {
                    let stale = wire::ParamIter::new(causes)
                        .flatten()
                        .any(|p| p.param_type == cause::STALE_COOKIE);
                    if stale && self.state == State::CookieEchoed {
                        // Start over with a fresh INIT (RFC 9260 §5.2.6).
                        self.state = State::CookieWait;
                        self.pending.init = true;
                        self.pending.cookie_echo = false;
                        self.t1 = Some(now + self.rto);
                    }
                }
                Chunk::Init(_) => {}
                Chunk::Unknown(raw) => {
                    let action = raw.chunk_type >> 6;
                    if action & 1 == 1 {
                        let mut v = Vec::with_capacity(4 + raw.value.len() + 4);
                        v.push(raw.chunk_type);
                        v.push(raw.flags);
                        v.extend_from_slice(&((raw.value.len() + 4) as u16).to_be_bytes());
                        v.extend_from_slice(raw.value);
                        if self.pending.errors.len() < 512 {
                            wire::emit_param(
                                &mut self.pending.errors,
                                cause::UNRECOGNIZED_CHUNK_TYPE,
                                &v,
                            );
                        }
                    }
                    if action & 2 == 0 {
                        break;
                    }
                }
            }
            if self.state == State::Closed {
                return;
            }
        }
        if had_data {
            self.sack_needed = true;
            self.pkts_since_sack += 1;
            if self.pkts_since_sack >= 2 || self.state != State::Established {
                self.sack_now = true;
            }
            if self.state == State::ShutdownSent {
                // RFC 9260 §9.2: ack at once and repeat SHUTDOWN.
                self.pending.shutdown = true;
                self.t2 = Some(now + self.rto);
            }
            if !self.sack_now && self.sack_timer.is_none() {
                self.sack_timer = Some(now + self.config.sack_delay);
            }
        }
    }

    fn on_init_ack(&mut self, now: Instant, c: &InitChunk<'_>) {
        if self.state != State::CookieWait {
            return;
        }
        if c.initiate_tag == 0 || c.out_streams == 0 || c.in_streams == 0 {
            let mut causes = Vec::new();
            wire::emit_param(&mut causes, cause::INVALID_MANDATORY_PARAMETER, &[]);
            self.state = State::CookieEchoed; // so the ABORT is sent (peer tag is known)
            self.peer_vtag = c.initiate_tag;
            self.abort_with(
                CloseReason::ProtocolViolation("INIT ACK with zero tag or streams"),
                causes,
            );
            return;
        }
        let Some(cookie) = c.state_cookie() else {
            self.peer_vtag = c.initiate_tag;
            self.state = State::CookieEchoed;
            let mut causes = Vec::new();
            wire::emit_param(
                &mut causes,
                cause::MISSING_MANDATORY_PARAMETER,
                &[0, 0, 0, 1, 0, 7, 0, 0],
            );
            self.abort_with(
                CloseReason::ProtocolViolation("INIT ACK without state cookie"),
                causes,
            );
            return;
        };
        let out = self.config.out_streams.min(c.in_streams);
        let inn = self.config.in_streams.min(c.out_streams);
        self.set_peer_params(c.initiate_tag, c.initial_tsn, c.a_rwnd, out, inn);
        self.cookie = cookie.to_vec();
        self.state = State::CookieEchoed;
        self.pending.init = false;
        self.pending.cookie_echo = true;
        self.t1_count = 0;
        self.t1 = Some(now + self.rto);
    }

    fn on_heartbeat_ack(&mut self, now: Instant, info: &[u8]) {
        if info.len() < HB_INFO_LEN {
            return;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&info[4..12]);
        let nonce = u64::from_be_bytes(n);
        if let Some((want, sent)) = self.hb_outstanding {
            if want == nonce {
                self.hb_outstanding = None;
                self.error_count = 0;
                self.update_rtt(now.saturating_duration_since(sent));
                if matches!(
                    self.state,
                    State::Established | State::ShutdownPending | State::ShutdownReceived
                ) {
                    self.hb_timer = Some(now + self.config.heartbeat_interval + self.rto);
                }
            }
        }
    }

    fn on_shutdown(&mut self, now: Instant, cum_tsn_ack: u32) {
        match self.state {
            State::Established | State::ShutdownPending | State::ShutdownReceived => {
                self.apply_cum_ack(now, cum_tsn_ack, None);
                self.state = State::ShutdownReceived;
                self.check_shutdown(now);
            }
            State::ShutdownSent => {
                // Both sides shut down at once (RFC 9260 §9.2).
                self.state = State::ShutdownAckSent;
                self.pending.shutdown = false;
                self.pending.shutdown_ack = true;
                self.t2 = Some(now + self.rto);
            }
            State::ShutdownAckSent => self.pending.shutdown_ack = true,
            _ => {}
        }
    }

    fn on_data(&mut self, now: Instant, d: &DataChunk<'_>) {
        let _ = now;
        match self.state {
            State::Established | State::ShutdownPending | State::ShutdownSent => {}
            _ => return,
        }
        if d.payload.is_empty() {
            let mut causes = Vec::new();
            wire::emit_param(&mut causes, cause::NO_USER_DATA, &d.tsn.to_be_bytes());
            self.abort_with(
                CloseReason::ProtocolViolation("DATA chunk without user data"),
                causes,
            );
            return;
        }
        self.counters.data_chunks_rx += 1;
        let tsn = unwrap_tsn(self.cum_recv, d.tsn);
        if tsn <= self.cum_recv || self.rx_above.contains(&tsn) {
            self.counters.dup_tsns_rx += 1;
            if self.rx_dups.len() < MAX_DUPS {
                self.rx_dups.push(d.tsn);
            }
            self.sack_now = true;
            return;
        }
        if tsn - self.cum_recv > 65535 {
            return; // cannot be described by a gap block; the peer will retransmit
        }
        // Drop beyond our window, but always accept the next in-order TSN so we make
        // progress and can drain what is buffered.
        let buffered = self.frag_bytes + self.wait_bytes;
        if tsn != self.cum_recv + 1 && buffered + d.payload.len() > self.config.rwnd as usize {
            return;
        }
        if tsn == self.cum_recv + 1 {
            self.cum_recv += 1;
            while self.rx_above.first() == Some(&(self.cum_recv + 1)) {
                self.rx_above.pop_first();
                self.cum_recv += 1;
            }
        } else {
            self.rx_above.insert(tsn);
            self.sack_now = true; // gap: report it at once (RFC 9260 §6.7)
        }
        if d.immediate() {
            self.sack_now = true;
        }
        if d.stream >= self.num_in {
            let mut v = [0u8; 4];
            v[0..2].copy_from_slice(&d.stream.to_be_bytes());
            if self.pending.errors.len() < 512 {
                wire::emit_param(
                    &mut self.pending.errors,
                    cause::INVALID_STREAM_IDENTIFIER,
                    &v,
                );
            }
            self.sack_now = true;
            return;
        }
        if d.beginning() && d.ending() {
            self.deliver(d.stream, d.ssn, d.ppid, d.unordered(), d.payload.to_vec());
        } else {
            self.frag_bytes += d.payload.len();
            self.frags.insert(
                tsn,
                Frag {
                    stream: d.stream,
                    ssn: d.ssn,
                    ppid: d.ppid,
                    flags: d.flags,
                    data: d.payload.to_vec(),
                },
            );
            self.try_reassemble(tsn);
        }
    }

    fn try_reassemble(&mut self, tsn: u64) {
        let mut first = tsn;
        loop {
            let Some(f) = self.frags.get(&first) else {
                return;
            };
            if f.flags & data_flags::B != 0 {
                break;
            }
            if first != tsn && f.flags & data_flags::E != 0 {
                return;
            }
            first -= 1;
        }
        let mut last = tsn;
        loop {
            let Some(f) = self.frags.get(&last) else {
                return;
            };
            if f.flags & data_flags::E != 0 {
                break;
            }
            if last != tsn && f.flags & data_flags::B != 0 {
                return;
            }
            last += 1;
        }
        let Some(head) = self.frags.remove(&first) else {
            return;
        };
        let (stream, ssn, ppid, flags) = (head.stream, head.ssn, head.ppid, head.flags);
        let total: usize = head.data.len()
            + self
                .frags
                .range(first + 1..=last)
                .map(|(_, f)| f.data.len())
                .sum::<usize>();
        let mut data = head.data;
        data.reserve(total - data.len());
        for t in first + 1..=last {
            if let Some(f) = self.frags.remove(&t) {
                data.extend_from_slice(&f.data);
            }
        }
        self.frag_bytes -= total;
        self.deliver(stream, ssn, ppid, flags & data_flags::U != 0, data);
    }

    fn deliver(&mut self, stream: u16, ssn: u16, ppid: u32, unordered: bool, data: Vec<u8>) {
        if unordered {
            self.counters.delivered += 1;
            self.events.push_back(Event::Data { stream, ppid, data });
            return;
        }
        let expected = self.in_ssn[stream as usize];
        if ssn == expected {
            self.counters.delivered += 1;
            self.events.push_back(Event::Data { stream, ppid, data });
            let mut next = expected.wrapping_add(1);
            while let Some((ppid, data)) = self.ordered_wait.remove(&(stream, next)) {
                self.wait_bytes -= data.len();
                self.counters.delivered += 1;
                self.events.push_back(Event::Data { stream, ppid, data });
                next = next.wrapping_add(1);
            }
            self.in_ssn[stream as usize] = next;
        } else if ssn.wrapping_sub(expected) < 0x8000 {
            self.wait_bytes += data.len();
            if let Some((_, old)) = self.ordered_wait.insert((stream, ssn), (ppid, data)) {
                self.wait_bytes -= old.len();
            }
        }
    }

    /// Processes a cumulative ack (from SACK or SHUTDOWN). Returns acked bytes.
    fn apply_cum_ack(&mut self, now: Instant, cum: u32, rwnd: Option<u32>) -> (usize, bool) {
        let cum = unwrap_tsn(self.tx_cum, cum);
        if cum < self.tx_cum || cum >= self.next_tsn {
            return (0, false); // stale, or acks what we never sent
        }
        let mut acked = 0;
        let advanced = cum > self.tx_cum;
        while let Some(c) = self.inflight.front() {
            if c.tsn > cum {
                break;
            }
            let Some(c) = self.inflight.pop_front() else {
                break;
            };
            if c.in_flight {
                self.flight_size -= c.data.len();
            }
            if !c.gap_acked {
                acked += c.data.len();
            }
            if c.marked {
                self.marked -= 1;
            }
            self.queued_bytes -= c.data.len();
            if let Some((t, sent)) = self.rtt_probe {
                if t == c.tsn {
                    self.rtt_probe = None;
                    if c.tx_count == 1 {
                        self.update_rtt(now.saturating_duration_since(sent));
                    }
                }
            }
        }
        self.tx_cum = cum;
        if let Some(w) = rwnd {
            self.peer_rwnd = w.saturating_sub(self.flight_size as u32);
        }
        (acked, advanced)
    }

    fn on_sack(&mut self, now: Instant, s: &SackChunk<'_>) {
        match self.state {
            State::Established
            | State::ShutdownPending
            | State::ShutdownSent
            | State::ShutdownReceived => {}
            _ => return,
        }
        let cum_before = self.tx_cum;
        let probe_cum = unwrap_tsn(self.tx_cum, s.cum_tsn_ack);
        if probe_cum < self.tx_cum {
            return; // out-of-order old SACK
        }
        let flight_before = self.flight_size;
        let (mut acked, advanced) = self.apply_cum_ack(now, s.cum_tsn_ack, None);
        if self.tx_cum != probe_cum {
            return; // acked something never sent
        }
        let _ = cum_before;
        // Gap blocks: mark covered chunks, un-mark reneged ones, count miss indications.
        let cum = self.tx_cum;
        let mut blocks: Vec<(u64, u64)> = Vec::with_capacity(s.num_gap_blocks());
        for (a, b) in s.gap_blocks() {
            if a <= b && a > 0 {
                blocks.push((cum + a as u64, cum + b as u64));
            }
        }
        let mut highest_newly_acked = 0u64;
        if !blocks.is_empty() || self.inflight.iter().any(|c| c.gap_acked) {
            for c in self.inflight.iter_mut() {
                let in_gap = blocks.iter().any(|&(a, b)| c.tsn >= a && c.tsn <= b);
                if in_gap && !c.gap_acked {
                    c.gap_acked = true;
                    acked += c.data.len();
                    highest_newly_acked = highest_newly_acked.max(c.tsn);
                    if c.in_flight {
                        c.in_flight = false;
                        self.flight_size -= c.data.len();
                    }
                    if c.marked {
                        c.marked = false;
                        self.marked -= 1;
                    }
                } else if !in_gap && c.gap_acked {
                    c.gap_acked = false; // reneged: T3 will resend it
                }
            }
        }
        // Fast retransmit (RFC 9260 §7.2.4).
        if highest_newly_acked > 0 {
            let mut enter_recovery = false;
            for c in self.inflight.iter_mut() {
                if c.tsn >= highest_newly_acked {
                    break;
                }
                if !c.gap_acked && !c.marked && c.tx_count > 0 {
                    c.misses = c.misses.saturating_add(1);
                    if c.misses == 3 {
                        self.counters.fast_retransmits += 1;
                        c.marked = true;
                        self.marked += 1;
                        if c.in_flight {
                            c.in_flight = false;
                            self.flight_size -= c.data.len();
                        }
                        enter_recovery = true;
                    }
                }
            }
            if enter_recovery && self.fast_recovery_exit.is_none() {
                let pmtu = self.config.pmtu;
                self.ssthresh = (self.cwnd / 2).max(4 * pmtu);
                self.cwnd = self.ssthresh;
                self.partial_bytes_acked = 0;
                self.fast_recovery_exit = Some(self.next_tsn - 1);
            }
        }
        if let Some(exit) = self.fast_recovery_exit {
            if self.tx_cum >= exit {
                self.fast_recovery_exit = None;
            }
        }
        self.peer_rwnd = s.a_rwnd.saturating_sub(self.flight_size as u32);
        if advanced {
            self.error_count = 0;
            if self.fast_recovery_exit.is_none() {
                let pmtu = self.config.pmtu;
                if self.cwnd <= self.ssthresh {
                    if flight_before >= self.cwnd {
                        self.cwnd += acked.min(pmtu);
                    }
                } else {
                    self.partial_bytes_acked += acked;
                    if self.partial_bytes_acked >= self.cwnd && flight_before >= self.cwnd {
                        self.partial_bytes_acked -= self.cwnd;
                        self.cwnd += pmtu;
                    }
                }
            }
        }
        if self.inflight.is_empty() {
            self.t3 = None;
            self.partial_bytes_acked = 0;
        } else if advanced {
            self.t3 = Some(now + self.rto);
        }
        self.check_shutdown(now);
    }

    /// Next SCTP packet to send (to be carried in one UDP datagram), if any.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Vec<u8>> {
        let mut v = Vec::new();
        if self.poll_transmit_into(now, &mut v) {
            Some(v)
        } else {
            None
        }
    }

    /// Like [`Association::poll_transmit`] but appends the packet to `out` (so the
    /// caller can reuse one buffer). Returns false when there is nothing to send.
    pub fn poll_transmit_into(&mut self, now: Instant, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        let (lp, pp) = (self.local_port, self.peer_port);
        if let Some(causes) = self.pending.abort.take() {
            let mut b = PacketBuilder::new(out, lp, pp, self.peer_vtag);
            b.push(&Chunk::Abort {
                t: false,
                causes: &causes,
            });
            b.finish();
            return true;
        }
        if self.pending.shutdown_complete {
            self.pending.shutdown_complete = false;
            let mut b = PacketBuilder::new(out, lp, pp, self.peer_vtag);
            b.push(&Chunk::ShutdownComplete { t: false });
            b.finish();
            return true;
        }
        if self.state == State::Closed {
            return false;
        }
        if self.pending.init {
            self.pending.init = false;
            let mut params = Vec::new();
            // Supported Address Types: IPv4 (our UDP path is IPv4/IPv6 agnostic).
            wire::emit_param(&mut params, param_type::SUPPORTED_ADDRESS_TYPES, &[0, 5]);
            let mut b = PacketBuilder::new(out, lp, pp, 0);
            b.push(&Chunk::Init(InitChunk {
                initiate_tag: self.local_vtag,
                a_rwnd: self.config.rwnd,
                out_streams: self.config.out_streams,
                in_streams: self.config.in_streams,
                initial_tsn: self.local_init_tsn,
                params: &params,
            }));
            b.finish();
            return true;
        }
        let pmtu = self.config.pmtu;
        let mut b = PacketBuilder::new(out, lp, pp, self.peer_vtag);
        if self.pending.cookie_echo {
            self.pending.cookie_echo = false;
            b.push(&Chunk::CookieEcho {
                cookie: &self.cookie,
            });
        }
        if self.pending.cookie_ack {
            self.pending.cookie_ack = false;
            b.push(&Chunk::CookieAck);
        }
        if self.pending.shutdown_ack {
            self.pending.shutdown_ack = false;
            b.push(&Chunk::ShutdownAck);
        }
        while let Some(info) = self.pending.heartbeat_acks.pop() {
            if b.len() + 4 + info.len() + 3 > pmtu && !b.is_empty() {
                self.pending.heartbeat_acks.push(info);
                break;
            }
            b.push(&Chunk::HeartbeatAck { info: &info });
        }
        if self.pending.heartbeat {
            self.pending.heartbeat = false;
            let nonce = random_u64();
            let mut info = [0u8; HB_INFO_LEN];
            info[0..2].copy_from_slice(&param_type::HEARTBEAT_INFO.to_be_bytes());
            info[2..4].copy_from_slice(&(HB_INFO_LEN as u16).to_be_bytes());
            info[4..12].copy_from_slice(&nonce.to_be_bytes());
            b.push(&Chunk::Heartbeat { info: &info });
            self.hb_outstanding = Some((nonce, now));
        }
        if !self.pending.errors.is_empty() && b.len() + 4 + self.pending.errors.len() <= pmtu {
            let causes = std::mem::take(&mut self.pending.errors);
            b.push(&Chunk::Error { causes: &causes });
        }
        let can_data = matches!(
            self.state,
            State::Established | State::ShutdownPending | State::ShutdownReceived
        );
        let data_ready = can_data && (self.marked > 0 || self.can_send_new());
        if self.sack_needed && (self.sack_now || data_ready || !b.is_empty()) {
            self.emit_sack(&mut b);
        }
        if self.pending.shutdown {
            self.pending.shutdown = false;
            b.push(&Chunk::Shutdown {
                cum_tsn_ack: self.cum_recv as u32,
            });
        }
        if can_data {
            self.emit_data(now, &mut b);
        }
        if b.is_empty() {
            out.truncate(start);
            return false;
        }
        b.finish();
        true
    }

    fn can_send_new(&self) -> bool {
        match self.queue.front() {
            None => false,
            Some(c) => {
                self.flight_size == 0
                    || (self.flight_size < self.cwnd && self.peer_rwnd as usize >= c.data.len())
            }
        }
    }

    fn emit_sack(&mut self, b: &mut PacketBuilder<'_>) {
        let mut gaps = Vec::new();
        let mut run: Option<(u64, u64)> = None;
        let room = self.config.pmtu.saturating_sub(b.len() + 16 + 4 * MAX_DUPS) / 4;
        let max_blocks = MAX_GAP_BLOCKS.min(room.max(1));
        let mut nblocks = 0;
        for &t in self.rx_above.iter() {
            let off = t - self.cum_recv;
            if off > 0xffff {
                break;
            }
            match run {
                Some((s, e)) if e + 1 == off => run = Some((s, off)),
                Some((s, e)) => {
                    wire::emit_gap_block(&mut gaps, s as u16, e as u16);
                    nblocks += 1;
                    run = Some((off, off));
                    if nblocks == max_blocks {
                        run = None;
                        break;
                    }
                }
                None => run = Some((off, off)),
            }
        }
        if let Some((s, e)) = run {
            wire::emit_gap_block(&mut gaps, s as u16, e as u16);
        }
        let mut dups = Vec::with_capacity(self.rx_dups.len() * 4);
        for d in self.rx_dups.drain(..) {
            dups.extend_from_slice(&d.to_be_bytes());
        }
        let buffered = (self.frag_bytes + self.wait_bytes) as u32;
        b.push(&Chunk::Sack(SackChunk {
            cum_tsn_ack: self.cum_recv as u32,
            a_rwnd: self.config.rwnd.saturating_sub(buffered),
            gap_blocks: &gaps,
            dup_tsns: &dups,
        }));
        self.sack_needed = false;
        self.sack_now = false;
        self.sack_timer = None;
        self.pkts_since_sack = 0;
    }

    fn emit_data(&mut self, now: Instant, b: &mut PacketBuilder<'_>) {
        let pmtu = self.config.pmtu;
        let mut sent_any = false;
        // Retransmissions first, lowest TSN first; they obey cwnd like new data except
        // that one packet may always go (flight_size == 0 after T3 expiry).
        if self.marked > 0 {
            for c in self.inflight.iter_mut() {
                if !c.marked {
                    continue;
                }
                let need = DATA_HEADER_LEN + c.data.len().next_multiple_of(4);
                if b.len() + need > pmtu {
                    break;
                }
                if self.flight_size >= self.cwnd && self.flight_size > 0 && sent_any {
                    break;
                }
                push_data(b, c);
                self.counters.retransmissions += 1;
                self.counters.data_chunks_tx += 1;
                c.marked = false;
                c.misses = 0;
                c.tx_count += 1;
                c.in_flight = true;
                self.flight_size += c.data.len();
                self.marked -= 1;
                sent_any = true;
                if self.rtt_probe.is_some_and(|(t, _)| t == c.tsn) {
                    self.rtt_probe = None; // Karn: no RTT from retransmitted chunks
                }
            }
        }
        while let Some(c) = self.queue.front() {
            let need = DATA_HEADER_LEN + c.data.len().next_multiple_of(4);
            if b.len() + need > pmtu {
                break;
            }
            if self.flight_size > 0
                && (self.flight_size >= self.cwnd || (self.peer_rwnd as usize) < c.data.len())
            {
                break;
            }
            let Some(mut c) = self.queue.pop_front() else {
                break;
            };
            push_data(b, &c);
            self.counters.data_chunks_tx += 1;
            c.tx_count = 1;
            c.in_flight = true;
            self.flight_size += c.data.len();
            self.peer_rwnd = self.peer_rwnd.saturating_sub(c.data.len() as u32);
            if self.rtt_probe.is_none() {
                self.rtt_probe = Some((c.tsn, now));
            }
            self.inflight.push_back(c);
            sent_any = true;
        }
        if sent_any {
            if self.t3.is_none() {
                self.t3 = Some(now + self.rto);
            }
            // Data is flowing: T3 watches the path, so postpone heartbeats.
            if self.hb_outstanding.is_none() && self.hb_timer.is_some() {
                self.hb_timer = Some(now + self.config.heartbeat_interval + self.rto);
            }
        }
    }
}

fn push_data(b: &mut PacketBuilder<'_>, c: &OutChunk) {
    b.push(&Chunk::Data(DataChunk {
        flags: c.flags,
        tsn: c.tsn as u32,
        stream: c.stream,
        ssn: c.ssn,
        ppid: c.ppid,
        payload: &c.data,
    }));
}
