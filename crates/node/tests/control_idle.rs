//! The slice control thread running the MME blocks on its S1-MME transport when idle
//! (no busy sleep loop), wakes as soon as S1AP arrives, and handles what arrived
//! during the wait in order. Real node threads; loopback only, bounded in time.

use pepc_hss::Hss;
use pepc_mme::ControlPlane;
use pepc_mme::{Mme, MmeConfig};
use pepc_node::config::NodeConfig;
use pepc_node::node::Node;
use pepc_node::proxy::Proxy;
use pepc_node::runtime::{ControlDriver, IDLE_WAIT_MAX};
use pepc_node::s1mme::SliceMme;
use pepc_sctp::transport::{AssocId, S1Transport, TransportEvent, UdpSctpTransport, S1AP_PPID};
use pepc_sctp::Config;
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Counts `run_once` calls of the driver it wraps.
struct Counting {
    inner: SliceMme,
    runs: Arc<AtomicUsize>,
}

impl ControlDriver for Counting {
    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.inner.run_once(cp, now)
    }
    fn wait_idle(&mut self, cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        self.inner.wait_idle(cp, max, wake)
    }
    fn max_slices(&self) -> Option<usize> {
        self.inner.max_slices()
    }
}

fn mme() -> Mme {
    Mme::new(MmeConfig::default(), std::time::Instant::now())
}

fn proxy() -> Proxy {
    let hss = Arc::new(Hss::in_memory().unwrap());
    Proxy::embedded(hss, pepc_mme::mme::urandom())
}

/// A one-slice node whose control thread runs `driver`. The SGi sink socket is
/// returned so it lives as long as the node.
fn start_node(driver: Box<dyn ControlDriver>) -> (Node, UdpSocket) {
    let pdn = UdpSocket::bind("127.0.0.1:0").unwrap();
    let cfg = format!(
        "[node]\nmax_users = 100\npin = false\n[s1u]\nbind = \"127.0.0.1:0\"\n[sgi]\nmode = \"udp\"\nsink_local = \"127.0.0.1:0\"\nsink_peer = \"{}\"\n",
        pdn.local_addr().unwrap()
    );
    let v = NodeConfig::parse(&cfg).unwrap().validate().unwrap();
    let mut d = Some(driver);
    let node = Node::start(&v, &pepc_node::plan::Plan::node_only(&v), &mut |_| d.take()).unwrap();
    (node, pdn)
}

fn poll_until(
    t: &mut UdpSctpTransport,
    limit: Duration,
    mut done: impl FnMut(&TransportEvent) -> bool,
) -> TransportEvent {
    let t0 = Instant::now();
    let mut ev = Vec::new();
    loop {
        t.poll(Duration::from_micros(200), &mut ev).unwrap();
        if let Some(i) = ev.iter().position(&mut done) {
            return ev.swap_remove(i);
        }
        ev.clear();
        assert!(t0.elapsed() < limit, "no matching event within {limit:?}");
    }
}

/// Undecodable S1AP: the MME answers each with an Error Indication on the same
/// association, so every message it handled is visible to the eNB.
const GARBAGE: [u8; 4] = [0xff, 0xff, 0xff, 0xff];

#[test]
fn idle_mme_control_thread_blocks_and_wakes_on_s1ap() {
    let server =
        UdpSctpTransport::bind("127.0.0.1:0".parse().unwrap(), 36412, Config::default()).unwrap();
    let server_addr = server.local_addr();
    let runs = Arc::new(AtomicUsize::new(0));
    let (node, _pdn) = start_node(Box::new(Counting {
        inner: SliceMme::inline(Box::new(server), mme(), proxy()),
        runs: runs.clone(),
    }));

    let mut enb = UdpSctpTransport::connect(
        "127.0.0.1:0".parse().unwrap(),
        server_addr,
        36412,
        Config::default(),
    )
    .unwrap();
    let assoc = match poll_until(&mut enb, Duration::from_secs(5), |e| {
        matches!(e, TransportEvent::Up { .. })
    }) {
        TransportEvent::Up { assoc, .. } => assoc,
        _ => unreachable!(),
    };

    // Idle: the association is up and nothing is sent. A sleep-and-poll loop at
    // 100 µs ran ~2000 times in 200 ms; a thread blocked on its socket only wakes
    // for the (growing) cap on its wait.
    std::thread::sleep(Duration::from_millis(100));
    let r0 = runs.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(200));
    let idle_runs = runs.load(Ordering::Relaxed) - r0;
    eprintln!("run_once calls in 200 ms idle: {idle_runs}");
    assert!(
        idle_runs < 50,
        "control thread ran {idle_runs} times in 200 ms of idleness"
    );

    // Prompt: after a long idle spell (the thread's wait is at its cap), a message
    // is answered about as fast as the loopback allows, not after the cap.
    let mut rtts = Vec::new();
    for i in 0..9u8 {
        std::thread::sleep(Duration::from_millis(30));
        let mut msg = GARBAGE.to_vec();
        msg.push(i);
        let t0 = Instant::now();
        enb.send(assoc, 0, S1AP_PPID, &msg).unwrap();
        enb.flush().unwrap();
        poll_until(
            &mut enb,
            Duration::from_secs(5),
            |e| matches!(e, TransportEvent::Data { assoc: a, ppid: S1AP_PPID, .. } if *a == assoc),
        );
        rtts.push(t0.elapsed());
    }
    rtts.sort();
    let median = rtts[rtts.len() / 2];
    eprintln!("answer times after idleness: {rtts:?}");
    assert!(
        median < IDLE_WAIT_MAX / 2,
        "median answer time {median:?} after idleness (all: {rtts:?})"
    );

    let (_cp, _dp) = node.shutdown().pop().unwrap();
}

/// An S1 transport fed by the test: `poll` blocks on a condition variable like the
/// real ones block on their socket, and returns early when events are pushed.
#[derive(Default)]
struct Shared {
    inbox: VecDeque<TransportEvent>,
    /// (association, payload) of every message the MME sent, in order.
    sent: Vec<(AssocId, Vec<u8>)>,
    /// Timeouts of the polls that waited (non-zero).
    waits: Vec<Duration>,
}

struct FakeTransport(Arc<(Mutex<Shared>, Condvar)>);

impl S1Transport for FakeTransport {
    fn poll(&mut self, timeout: Duration, events: &mut Vec<TransportEvent>) -> std::io::Result<()> {
        let (m, cv) = &*self.0;
        let mut g = m.lock().unwrap();
        if !timeout.is_zero() {
            g.waits.push(timeout);
            let deadline = Instant::now() + timeout;
            while g.inbox.is_empty() {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                g = cv.wait_timeout(g, left).unwrap().0;
            }
        }
        events.extend(g.inbox.drain(..));
        Ok(())
    }
    fn send(
        &mut self,
        assoc: AssocId,
        _stream: u16,
        ppid: u32,
        data: &[u8],
    ) -> std::io::Result<()> {
        assert_eq!(ppid, S1AP_PPID);
        self.0 .0.lock().unwrap().sent.push((assoc, data.to_vec()));
        Ok(())
    }
    fn close(&mut self, _assoc: AssocId) {}
    fn local_addr(&self) -> SocketAddr {
        "127.0.0.1:36412".parse().unwrap()
    }
}

fn data(assoc: AssocId, i: u8) -> TransportEvent {
    let mut d = GARBAGE.to_vec();
    d.push(i);
    TransportEvent::Data {
        assoc,
        stream: 0,
        ppid: S1AP_PPID,
        data: d,
    }
}

#[test]
fn events_arriving_during_the_wait_are_all_handled_in_order() {
    let shared = Arc::new((Mutex::new(Shared::default()), Condvar::new()));
    let runs = Arc::new(AtomicUsize::new(0));
    let (node, _pdn) = start_node(Box::new(Counting {
        inner: SliceMme::inline(Box::new(FakeTransport(shared.clone())), mme(), proxy()),
        runs: runs.clone(),
    }));
    let push = |evs: Vec<TransportEvent>| {
        let (m, cv) = &*shared;
        m.lock().unwrap().inbox.extend(evs);
        cv.notify_all();
    };
    let sent_len = || shared.0.lock().unwrap().sent.len();
    let wait_sent = |n: usize| {
        let t0 = Instant::now();
        while sent_len() < n {
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "only {} sent",
                sent_len()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        t0.elapsed()
    };

    // Let the thread go idle, then push a burst in one go while it waits: every
    // message is answered, on its association, in arrival order.
    std::thread::sleep(Duration::from_millis(100));
    let r0 = runs.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(200));
    let idle_runs = runs.load(Ordering::Relaxed) - r0;
    assert!(idle_runs < 50, "{idle_runs} runs in 200 ms of idleness");

    let order: Vec<AssocId> = vec![1, 2, 3, 1, 2, 7, 1];
    let burst: Vec<TransportEvent> = std::iter::once(TransportEvent::Up {
        assoc: 9,
        peer: "127.0.0.1:1".parse().unwrap(),
        out_streams: 2,
        in_streams: 2,
    })
    .chain(order.iter().enumerate().map(|(i, &a)| data(a, i as u8)))
    .collect();
    push(burst);
    wait_sent(order.len());
    // A second burst, a little later, while the thread waits again.
    std::thread::sleep(Duration::from_millis(20));
    push(vec![data(5, 100), data(4, 101)]);
    let took = wait_sent(order.len() + 2);
    assert!(
        took < Duration::from_millis(100),
        "second burst took {took:?}"
    );
    std::thread::sleep(Duration::from_millis(20));

    let (_cp, _dp) = node.shutdown().pop().unwrap();
    let g = shared.0.lock().unwrap();
    let got: Vec<AssocId> = g.sent.iter().map(|(a, _)| *a).collect();
    let mut want = order.clone();
    want.extend([5, 4]);
    assert_eq!(got, want, "answers in arrival order, none lost or extra");
    // The idle waits were real blocking waits, bounded by the cap.
    assert!(!g.waits.is_empty());
    assert!(g.waits.iter().all(|w| *w <= IDLE_WAIT_MAX), "{:?}", g.waits);
    assert!(g.waits.iter().any(|w| *w >= IDLE_WAIT_MAX / 2));
}

/// A socketless driver that waits on the data thread's wake-up only: it attaches one
/// UE, evicts it from the data plane on request, and notes when the data thread's
/// promotion request reaches it.
struct Promoter {
    attached: Arc<Mutex<Option<pepc_slice::control::Attached>>>,
    evict: Arc<AtomicUsize>,
    requests_seen: Arc<Mutex<Vec<Instant>>>,
    events: Vec<pepc_slice::control::ControlEvent>,
}

impl ControlDriver for Promoter {
    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        let mut a = self.attached.lock().unwrap();
        if a.is_none() {
            let mut p = pepc_slice::control::AttachParams::new(1);
            p.enb_addr = "127.0.0.1".parse().unwrap();
            p.enb_teid = 0x42;
            *a = Some(cp.attach(&p).unwrap());
            return true;
        }
        let slot = a.unwrap().ue_slot;
        if self.evict.load(Ordering::SeqCst) == 1 {
            cp.evict(slot).unwrap();
            self.evict.store(2, Ordering::SeqCst);
            return true;
        }
        self.events.clear();
        if cp.poll_requests(&mut self.events) > 0 {
            self.requests_seen.lock().unwrap().push(now);
            return true;
        }
        false
    }
    fn wait_idle(&mut self, _cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        let fd = wake.expect("the node gives its control thread a wake-up descriptor");
        pepc_node::io::wait_any_readable(&[fd], max).unwrap();
    }
}

#[test]
fn data_thread_requests_wake_the_idle_control_thread() {
    let attached = Arc::new(Mutex::new(None));
    let evict = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (node, pdn) = start_node(Box::new(Promoter {
        attached: attached.clone(),
        evict: evict.clone(),
        requests_seen: seen.clone(),
        events: Vec::new(),
    }));
    pdn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t0 = Instant::now();
    let a = loop {
        if let Some(a) = *attached.lock().unwrap() {
            break a;
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
        std::thread::sleep(Duration::from_millis(2));
    };
    let enb = UdpSocket::bind("127.0.0.1:0").unwrap();
    let inner =
        pepc_slice::packets::ipv4_udp(a.ue_ip, "198.51.100.1".parse().unwrap(), 4000, 9000, 64);
    let mut lat = Vec::new();
    for round in 0..7 {
        evict.store(1, Ordering::SeqCst);
        let t0 = Instant::now();
        while evict.load(Ordering::SeqCst) != 2 {
            assert!(t0.elapsed() < Duration::from_secs(5), "eviction not done");
            std::thread::sleep(Duration::from_millis(1));
        }
        // The data thread applies the eviction; then the control thread idles long
        // enough for its wait to reach the cap.
        std::thread::sleep(Duration::from_millis(60));
        let before = seen.lock().unwrap().len();
        let sent = Instant::now();
        enb.send_to(&pepc_slice::packets::gpdu(a.teid_ul, &inner), node.s1u_addr)
            .unwrap();
        let mut buf = [0u8; 2048];
        let (n, _) = pdn
            .recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("round {round}: buffered packet never delivered: {e}"));
        assert_eq!(
            &buf[..n],
            &inner[..],
            "the buffered uplink packet after promotion"
        );
        let s = seen.lock().unwrap();
        assert_eq!(s.len(), before + 1, "one promotion request per round");
        lat.push(s[before].saturating_duration_since(sent));
    }
    lat.sort();
    let median = lat[lat.len() / 2];
    eprintln!("request latencies after idleness: {lat:?}");
    assert!(
        median < IDLE_WAIT_MAX / 4,
        "median request latency {median:?} (all: {lat:?})"
    );
    node.shutdown();
}
