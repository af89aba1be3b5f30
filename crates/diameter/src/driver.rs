//! The thin driver: a thread owning the TCP connections to the peers (RFC 6733 over
//! TCP), feeding a sans-IO application client ([`App`]: the [`S6aClient`], the
//! [`GxClient`]) bytes and time and carrying out what it asks. The MME side talks to
//! it through channels and an eventfd ([`Driver`]: [`S6aDriver`], [`GxDriver`]), the
//! shape of the node's `HssBackend` and `PcrfBackend`.
//!
//! Connections are opened with a blocking `connect_timeout` on this thread: a peer
//! that does not answer SYNs holds the others for that long (loopback and a LAN
//! answer at once; a non-blocking connect is a later refinement).

use crate::base::{self, Action, Client};
use crate::gx::{GxClient, GxConfig, GxEvent};
use crate::s6a::{S6aClient, S6aConfig, S6aEvent};
use pepc_seams::{HssAnswer, HssRequest, PcrfAnswer, PcrfRequest};
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

/// The peers and what to say to them.
#[derive(Debug, Clone)]
pub struct DriverConfig<C = S6aConfig> {
    /// "host:port", in order of preference: the first one up takes the requests.
    pub peers: Vec<String>,
    pub base: base::Config,
    /// The application's own (S6a, Gx).
    pub app: C,
    pub connect_timeout: Duration,
}

/// Where an event of the application goes.
pub enum EventRoute {
    /// To every consumer; `wake`: worth waking them for; `vote`: the application
    /// waits for every consumer's word ([`App::outcome`]) on the event of this token.
    All { wake: bool, vote: Option<u64> },
    /// To the consumer of this MME UE S1AP ID.
    One(u32),
}

/// A sans-IO Diameter application over the base [`Client`], as the driver runs it.
pub trait App: Send + Sized + 'static {
    type Config: Clone + Send + 'static;
    type Request: Send + 'static;
    type Answer: Send + 'static;
    type Event: Clone + Send + 'static;
    /// Its thread's name when it runs alone ([`Driver::start`]); a node names it.
    const THREAD: &'static str;
    fn new(base: Client, cfg: Self::Config, session_hi: u32) -> Self;
    fn base(&mut self) -> &mut Client;
    fn submit(&mut self, now: Instant, req: Self::Request);
    fn handle_timeout(&mut self, now: Instant);
    fn process(&mut self);
    fn next_timeout(&self) -> Option<Instant>;
    fn take_answers(&mut self, out: &mut Vec<Self::Answer>);
    fn poll_event(&mut self) -> Option<Self::Event>;
    /// The MME UE S1AP ID an answer goes back to.
    fn answer_route(a: &Self::Answer) -> u32;
    fn event_route(e: &Self::Event) -> EventRoute;
    /// A consumer's word on the event `token` (it holds its subject or not).
    fn outcome(&mut self, _token: u64, _known: bool) {}
    /// Whether the event `token` still waits for words.
    fn outcome_pending(&self, _token: u64) -> bool {
        false
    }
    fn pending_outcomes(&self) -> usize {
        0
    }
}

impl App for S6aClient {
    type Config = S6aConfig;
    type Request = HssRequest;
    type Answer = HssAnswer;
    type Event = S6aEvent;
    const THREAD: &'static str = "pepc-s6a";
    fn new(base: Client, cfg: S6aConfig, session_hi: u32) -> Self {
        S6aClient::new(base, cfg, session_hi)
    }
    fn base(&mut self) -> &mut Client {
        S6aClient::base(self)
    }
    fn submit(&mut self, now: Instant, req: HssRequest) {
        S6aClient::submit(self, now, req)
    }
    fn handle_timeout(&mut self, now: Instant) {
        S6aClient::handle_timeout(self, now)
    }
    fn process(&mut self) {
        S6aClient::process(self)
    }
    fn next_timeout(&self) -> Option<Instant> {
        S6aClient::next_timeout(self)
    }
    fn take_answers(&mut self, out: &mut Vec<HssAnswer>) {
        S6aClient::take_answers(self, out)
    }
    fn poll_event(&mut self) -> Option<S6aEvent> {
        S6aClient::poll_event(self)
    }
    fn answer_route(a: &HssAnswer) -> u32 {
        a.r.mme_ue_id
    }
    fn event_route(e: &S6aEvent) -> EventRoute {
        match e {
            S6aEvent::InsertSubscriberData { token, .. } => EventRoute::All {
                wake: true,
                vote: Some(*token),
            },
            S6aEvent::PeerUp { .. } | S6aEvent::PeerDown { .. } => EventRoute::All {
                wake: false,
                vote: None,
            },
            _ => EventRoute::All {
                wake: true,
                vote: None,
            },
        }
    }
    fn outcome(&mut self, token: u64, known: bool) {
        self.idr_outcome(token, known)
    }
    fn outcome_pending(&self, token: u64) -> bool {
        self.idr_pending(token)
    }
    fn pending_outcomes(&self) -> usize {
        self.pending_idrs()
    }
}

impl App for GxClient {
    type Config = GxConfig;
    type Request = PcrfRequest;
    type Answer = PcrfAnswer;
    type Event = GxEvent;
    const THREAD: &'static str = "pepc-gx";
    fn new(base: Client, cfg: GxConfig, session_hi: u32) -> Self {
        GxClient::new(base, cfg, session_hi)
    }
    fn base(&mut self) -> &mut Client {
        GxClient::base(self)
    }
    fn submit(&mut self, now: Instant, req: PcrfRequest) {
        GxClient::submit(self, now, req)
    }
    fn handle_timeout(&mut self, now: Instant) {
        GxClient::handle_timeout(self, now)
    }
    fn process(&mut self) {
        GxClient::process(self)
    }
    fn next_timeout(&self) -> Option<Instant> {
        GxClient::next_timeout(self)
    }
    fn take_answers(&mut self, out: &mut Vec<PcrfAnswer>) {
        GxClient::take_answers(self, out)
    }
    fn poll_event(&mut self) -> Option<GxEvent> {
        GxClient::poll_event(self)
    }
    fn answer_route(a: &PcrfAnswer) -> u32 {
        a.r.mme_ue_id
    }
    fn event_route(e: &GxEvent) -> EventRoute {
        match e {
            GxEvent::PolicyUpdate { route, .. } => EventRoute::One(*route),
            GxEvent::PeerUp { .. } | GxEvent::PeerDown { .. } => EventRoute::All {
                wake: false,
                vote: None,
            },
        }
    }
}

enum Cmd<R> {
    Request(R),
    /// A consumer's word on the event of `token`: it holds its subject or not.
    Outcome {
        token: u64,
        known: bool,
    },
}

/// One consumer's side of a Diameter client thread: it submits requests and gets
/// the answers to them, and the peer's requests (events), through its own channels
/// and wake descriptor. [`Driver::start`] makes one; [`Driver::start_routed`] one
/// per slice of a node, sharing the thread, the connections and the Diameter
/// identity.
pub struct Driver<A: App> {
    // Dropped first: the thread stops once every handle's sender is gone.
    to: Option<mpsc::Sender<Cmd<A::Request>>>,
    wake_in: Arc<OwnedFd>,
    answers: mpsc::Receiver<A::Answer>,
    events: mpsc::Receiver<A::Event>,
    wake_out: Arc<OwnedFd>,
    stats: Arc<Mutex<base::Stats>>,
    up: Arc<AtomicBool>,
    /// Joins the thread when the last handle goes.
    joiner: Option<Arc<Joiner>>,
}

/// The S6a client's driver (answers the MME's HSS requests).
pub type S6aDriver = Driver<S6aClient>;
/// The Gx client's driver (answers the MME's PCRF requests).
pub type GxDriver = Driver<GxClient>;

/// Which consumer an answer goes to, by the MME UE S1AP ID of its reference.
pub type Route = Box<dyn Fn(u32) -> usize + Send>;

struct Joiner(Mutex<Option<JoinHandle<()>>>);

impl Drop for Joiner {
    fn drop(&mut self) {
        if let Some(t) = self.0.get_mut().ok().and_then(Option::take) {
            // A panicked thread has nothing more to say.
            let _ = t.join();
        }
    }
}

/// Where the thread delivers one consumer's answers and events.
struct Outlet<A: App> {
    atx: mpsc::Sender<A::Answer>,
    etx: mpsc::Sender<A::Event>,
    wake: Arc<OwnedFd>,
}

fn eventfd() -> std::io::Result<Arc<OwnedFd>> {
    // SAFETY: plain eventfd(2).
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(Arc::new(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn signal(fd: &OwnedFd) {
    let one = 1u64.to_ne_bytes();
    // SAFETY: 8-byte write to our eventfd; EAGAIN (counter full) still wakes.
    unsafe { libc::write(fd.as_raw_fd(), one.as_ptr() as *const libc::c_void, 8) };
}

fn clear(fd: &OwnedFd) {
    let mut b = [0u8; 8];
    // SAFETY: 8-byte read from our non-blocking eventfd (EAGAIN when clear).
    unsafe { libc::read(fd.as_raw_fd(), b.as_mut_ptr() as *mut libc::c_void, 8) };
}

impl<A: App> Driver<A> {
    /// The client thread with one consumer.
    pub fn start(cfg: DriverConfig<A::Config>) -> std::io::Result<Driver<A>> {
        let mut v = Self::start_routed(cfg, 1, Box::new(|_| 0), A::THREAD)?;
        Ok(v.remove(0))
    }

    /// The client thread with `n` consumers (a node's slices): each gets the answers
    /// to the requests whose reference `route` maps to it (out of range: the last),
    /// and the events [`App::event_route`] sends it (S6a: every CLR, IDR, purge
    /// outcome and peer change; Gx: a RAR to the slice of its session).
    pub fn start_routed(
        cfg: DriverConfig<A::Config>,
        n: usize,
        route: Route,
        thread: &str,
    ) -> std::io::Result<Vec<Driver<A>>> {
        let n = n.max(1);
        let wake_in = eventfd()?;
        let (to, rx) = mpsc::channel();
        let stats = Arc::new(Mutex::new(base::Stats::default()));
        let up = Arc::new(AtomicBool::new(false));
        let mut outlets = Vec::with_capacity(n);
        let mut ends = Vec::with_capacity(n);
        for _ in 0..n {
            let wake = eventfd()?;
            let (atx, answers) = mpsc::channel();
            let (etx, events) = mpsc::channel();
            outlets.push(Outlet {
                atx,
                etx,
                wake: wake.clone(),
            });
            ends.push((answers, events, wake));
        }
        let mut t = Thread::<A> {
            cfg,
            rx,
            outlets,
            route,
            wake_in: wake_in.clone(),
            stats: stats.clone(),
            up: up.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || t.run())?;
        let joiner = Arc::new(Joiner(Mutex::new(Some(thread))));
        Ok(ends
            .into_iter()
            .map(|(answers, events, wake_out)| Driver {
                to: Some(to.clone()),
                wake_in: wake_in.clone(),
                answers,
                events,
                wake_out,
                stats: stats.clone(),
                up: up.clone(),
                joiner: Some(joiner.clone()),
            })
            .collect())
    }

    pub fn submit(&mut self, req: A::Request) {
        if let Some(to) = &self.to {
            // A gone thread never answers: the MME's timer fails the procedure.
            let _ = to.send(Cmd::Request(req));
            signal(&self.wake_in);
        }
    }

    /// Answers that arrived; clears the wake descriptor first so none waits unseen.
    pub fn poll(&mut self, answers: &mut Vec<A::Answer>) {
        clear(&self.wake_out);
        answers.extend(self.answers.try_iter());
    }

    /// Whether this consumer holds the subject of the event `token` (S6a: the
    /// subscriber of an IDR; the IDA says DIAMETER_SUCCESS once one consumer knows
    /// it, DIAMETER_ERROR_USER_UNKNOWN once all said they do not).
    pub fn outcome(&mut self, token: u64, known: bool) {
        if let Some(to) = &self.to {
            let _ = to.send(Cmd::Outcome { token, known });
            signal(&self.wake_in);
        }
    }

    /// What the peer asked (CLR, IDR, RAR) and peer changes.
    pub fn poll_events(&mut self, events: &mut Vec<A::Event>) {
        events.extend(self.events.try_iter());
    }

    /// Readable when answers or events may be waiting.
    pub fn wake_fd(&self) -> RawFd {
        self.wake_out.as_raw_fd()
    }

    pub fn stats(&self) -> base::Stats {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Some peer takes requests.
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
}

impl S6aDriver {
    /// PUR for `imsi`; the outcome comes as [`S6aEvent::Purged`].
    pub fn purge(&mut self, imsi: u64) {
        self.submit(HssRequest::Purge { imsi });
    }

    /// See [`Driver::outcome`].
    pub fn idr_outcome(&mut self, token: u64, known: bool) {
        self.outcome(token, known);
    }
}

impl<A: App> Drop for Driver<A> {
    fn drop(&mut self) {
        // Once every handle's sender is gone the thread sees the channel closed: DPR
        // to its peers, then it ends (bounded by the DPA timeout); the last handle
        // joins it.
        self.to = None;
        signal(&self.wake_in);
        self.joiner = None;
    }
}

struct Thread<A: App> {
    cfg: DriverConfig<A::Config>,
    rx: mpsc::Receiver<Cmd<A::Request>>,
    outlets: Vec<Outlet<A>>,
    route: Route,
    wake_in: Arc<OwnedFd>,
    stats: Arc<Mutex<base::Stats>>,
    up: Arc<AtomicBool>,
}

impl<A: App> Thread<A> {
    fn run(&mut self) {
        let n = self.cfg.peers.len();
        let osi = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs() as u32)
            .unwrap_or(1);
        let start = Instant::now();
        let base = Client::new(self.cfg.base.clone(), n, start, osi);
        let mut c = A::new(base, self.cfg.app.clone(), osi);
        let mut conns: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        let mut stopping: Option<Instant> = None;
        let mut buf = vec![0u8; 64 * 1024];
        let mut answers = Vec::new();
        // Event token -> consumers yet to say they do not know its subject.
        let mut idr_votes: std::collections::HashMap<u64, usize> = Default::default();
        loop {
            let now = Instant::now();
            clear(&self.wake_in);
            loop {
                match self.rx.try_recv() {
                    Ok(Cmd::Request(r)) => c.submit(now, r),
                    Ok(Cmd::Outcome { token, known }) => {
                        let Some(left) = idr_votes.get_mut(&token) else {
                            continue; // decided already
                        };
                        *left -= 1;
                        if known || *left == 0 {
                            idr_votes.remove(&token);
                            c.outcome(token, known);
                        }
                    }
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        if stopping.is_none() {
                            stopping = Some(now + self.cfg.base.cea_timeout);
                            c.base().disconnect(now);
                        }
                        break;
                    }
                }
            }
            c.handle_timeout(now);
            if idr_votes.len() > c.pending_outcomes() {
                // Timed out in the client (answered there): stop counting them.
                idr_votes.retain(|t, _| c.outcome_pending(*t));
            }
            self.actions(&mut c, &mut conns, now);
            self.write(&mut c, &mut conns, now);
            self.actions(&mut c, &mut conns, now);
            c.process();
            c.take_answers(&mut answers);
            // Figures before answers, so whoever sees an answer sees its figures.
            let up = (0..n).any(|i| c.base().peer_state(i) == base::PeerState::Okay);
            self.up.store(up, Ordering::Relaxed);
            if let Ok(mut s) = self.stats.lock() {
                s.clone_from(&c.base().stats);
            }
            let last = self.outlets.len() - 1;
            let mut woke = vec![false; self.outlets.len()];
            for a in answers.drain(..) {
                let k = (self.route)(A::answer_route(&a)).min(last);
                woke[k] = true;
                // A consumer gone (its slice stopped) takes nothing more.
                let _ = self.outlets[k].atx.send(a);
            }
            while let Some(e) = c.poll_event() {
                match A::event_route(&e) {
                    EventRoute::One(id) => {
                        let k = (self.route)(id).min(last);
                        woke[k] = true;
                        let _ = self.outlets[k].etx.send(e);
                    }
                    EventRoute::All { wake, vote } => {
                        if let Some(token) = vote {
                            idr_votes.insert(token, self.outlets.len());
                        }
                        for (k, o) in self.outlets.iter().enumerate() {
                            let _ = o.etx.send(e.clone());
                            woke[k] |= wake;
                        }
                    }
                }
            }
            for (o, w) in self.outlets.iter().zip(woke) {
                if w {
                    signal(&o.wake);
                }
            }
            if let Some(deadline) = stopping {
                if c.base().is_closed() || Instant::now() >= deadline {
                    for s in conns.iter_mut().filter_map(Option::take) {
                        let _ = s.shutdown(Shutdown::Both);
                    }
                    return;
                }
            }
            // Wait for bytes, a command or the next timer.
            let mut fds = vec![libc::pollfd {
                fd: self.wake_in.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            let mut which = Vec::new();
            for (i, s) in conns.iter().enumerate() {
                if let Some(s) = s {
                    let mut ev = libc::POLLIN;
                    if !c.base().tx(i).is_empty() {
                        ev |= libc::POLLOUT;
                    }
                    fds.push(libc::pollfd {
                        fd: s.as_raw_fd(),
                        events: ev,
                        revents: 0,
                    });
                    which.push(i);
                }
            }
            let wait = c
                .next_timeout()
                .map(|t| t.saturating_duration_since(Instant::now()))
                .unwrap_or(Duration::from_secs(1))
                .min(Duration::from_secs(1));
            // Round up so a timer is not polled for again a hair before it is due.
            let ms = (wait.as_micros().div_ceil(1000)) as libc::c_int;
            // SAFETY: fds is a valid array of pollfd of the length given.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
            let now = Instant::now();
            for (k, &i) in which.iter().enumerate() {
                if fds[k + 1].revents == 0 {
                    continue;
                }
                self.read(&mut c, &mut conns, i, now, &mut buf);
            }
        }
    }

    fn read(
        &self,
        c: &mut A,
        conns: &mut [Option<TcpStream>],
        i: usize,
        now: Instant,
        buf: &mut [u8],
    ) {
        loop {
            let Some(s) = conns[i].as_mut() else { return };
            match s.read(buf) {
                Ok(0) => {
                    conns[i] = None;
                    return c.base().on_closed(i, now, "connection closed by the peer");
                }
                Ok(k) => c.base().on_bytes(i, now, &buf[..k]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => {
                    conns[i] = None;
                    return c.base().on_closed(i, now, &format!("read: {e}"));
                }
            }
        }
    }

    fn write(&self, c: &mut A, conns: &mut [Option<TcpStream>], now: Instant) {
        for (i, conn) in conns.iter_mut().enumerate() {
            let Some(s) = conn.as_mut() else { continue };
            let tx = c.base().tx(i);
            let mut off = 0;
            let mut failed = None;
            while off < tx.len() {
                match s.write(&tx[off..]) {
                    Ok(0) => {
                        failed = Some("write: connection closed".to_string());
                        break;
                    }
                    Ok(k) => off += k,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => {
                        failed = Some(format!("write: {e}"));
                        break;
                    }
                }
            }
            tx.drain(..off);
            if let Some(why) = failed {
                *conn = None;
                c.base().on_closed(i, now, &why);
            }
        }
    }

    fn actions(&self, c: &mut A, conns: &mut [Option<TcpStream>], now: Instant) {
        while let Some(a) = c.base().poll_action() {
            match a {
                Action::Connect(i) => match self.connect(&self.cfg.peers[i]) {
                    Ok(s) => {
                        conns[i] = Some(s);
                        c.base().on_connected(i, now);
                    }
                    Err(e) => {
                        let why = format!("connect {}: {e}", self.cfg.peers[i]);
                        c.base().on_closed(i, now, &why);
                    }
                },
                Action::Close(i, rest) => {
                    if let Some(mut s) = conns[i].take() {
                        // Best effort (a DPA): the socket is non-blocking.
                        let _ = s.write(&rest);
                        let _ = s.shutdown(Shutdown::Both);
                    }
                }
            }
        }
    }

    fn connect(&self, peer: &str) -> std::io::Result<TcpStream> {
        let mut last = std::io::Error::new(ErrorKind::NotFound, "no address");
        for addr in peer.to_socket_addrs()? {
            match TcpStream::connect_timeout(&addr, self.cfg.connect_timeout) {
                Ok(s) => {
                    s.set_nonblocking(true)?;
                    s.set_nodelay(true)?;
                    return Ok(s);
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}
