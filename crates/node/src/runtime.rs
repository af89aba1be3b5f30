//! Thin drivers that run a slice's two halves on their own threads (pinned when the
//! machine allows): the data thread moves batches between the S1-U and SGi ports and the
//! pipeline; the control thread runs a [`ControlDriver`] (the MME, or synthetic events)
//! against the slice's control plane.

use crate::io::{wait_any_readable, PacketIo};
use pepc_mme::ControlPlane;
use pepc_slice::datapath::DataPlane;
use pepc_slice::slice::pin_current_thread;
use pepc_wire::{Batch, Verdict};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What runs on a slice's control thread.
pub trait ControlDriver: Send {
    /// Do whatever is due; return false when idle (the thread then calls
    /// [`ControlDriver::wait_idle`]).
    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool;
    /// How long the default [`ControlDriver::wait_idle`] sleeps.
    fn idle_wait(&self) -> Duration {
        Duration::from_micros(200)
    }
    /// Called when `run_once` found nothing to do: wait at most `max` for work. A
    /// driver with a descriptor blocks on it and on `wake` (readable when the data
    /// thread posted requests, e.g. paging) and returns as soon as either has
    /// something; what it read itself stays for the next `run_once`. The default
    /// sleeps [`ControlDriver::idle_wait`] (at most `max`).
    fn wait_idle(&mut self, cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        let _ = (cp, wake);
        std::thread::sleep(self.idle_wait().min(max));
    }
    /// Size the slice's control state for `users` UEs before the first event (see
    /// `node.prewarm_users`); runs on the control thread, whose heap it warms.
    fn prewarm(&mut self, cp: &mut ControlPlane, users: usize) {
        cp.prewarm(users);
    }
    /// Runs once on the control thread before the first event (after `prewarm`):
    /// e.g. restoring the slice's UEs from the node's state store.
    fn start(&mut self, cp: &mut ControlPlane) {
        let _ = cp;
    }
    /// Slices per node this driver can serve (None: any). A driver that owns a
    /// node-wide resource (the S1-MME association) without a signaling demux says 1.
    fn max_slices(&self) -> Option<usize> {
        None
    }
}

/// Lets the data thread wake the control thread out of its idle wait when it has
/// posted requests (promotion, paging) to the control plane's ring, which has no
/// descriptor of its own. The data thread publishes a running count of requesting
/// events after its pushes; the control thread waits only if the count did not move
/// since before it last read the ring (a Dekker handshake on `waiting`/`posted`).
#[derive(Debug)]
pub struct IdleWake {
    /// Non-blocking eventfd.
    fd: OwnedFd,
    waiting: AtomicBool,
    posted: AtomicU64,
}

impl IdleWake {
    pub fn new() -> std::io::Result<IdleWake> {
        // SAFETY: plain eventfd(2).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(IdleWake {
            // SAFETY: a fresh descriptor we own.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            waiting: AtomicBool::new(false),
            posted: AtomicU64::new(0),
        })
    }

    /// Readable while a wake-up is pending.
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Data thread: requests counted up to `seq` are in the ring.
    pub fn post(&self, seq: u64) {
        self.posted.store(seq, Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: 8-byte write to our eventfd. EAGAIN (counter full) still wakes.
            unsafe { libc::write(self.fd(), one.as_ptr() as *const libc::c_void, 8) };
        }
    }

    /// What was posted so far: read before the control thread reads the ring.
    pub fn posted(&self) -> u64 {
        self.posted.load(Ordering::SeqCst)
    }

    /// Control thread, about to wait: false if requests were posted since `mark`
    /// (then it must not wait).
    pub fn begin_wait(&self, mark: u64) -> bool {
        self.waiting.store(true, Ordering::SeqCst);
        if self.posted.load(Ordering::SeqCst) != mark {
            self.waiting.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Control thread, after the wait: clears a pending wake-up.
    pub fn end_wait(&self) {
        self.waiting.store(false, Ordering::SeqCst);
        let mut b = [0u8; 8];
        // SAFETY: 8-byte read from our non-blocking eventfd.
        unsafe { libc::read(self.fd(), b.as_mut_ptr() as *mut libc::c_void, 8) };
    }
}

/// The data thread's loop. Returns the data plane when `stop` is set.
pub fn data_loop(
    dp: DataPlane,
    s1u: Box<dyn PacketIo>,
    sgi: Box<dyn PacketIo>,
    stop: Arc<AtomicBool>,
) -> DataPlane {
    data_loop_waking(dp, s1u, sgi, stop, None, false)
}

/// [`data_loop`] that posts to `wake` whenever it may have pushed requests. A thread
/// with a core of its own (`own_core`: pinned, one core per thread) spins as long on
/// kernel sockets as on rings before it sleeps: no other thread wants that core, so
/// the spinning costs nothing and spares the wake-up.
pub fn data_loop_waking(
    mut dp: DataPlane,
    mut s1u: Box<dyn PacketIo>,
    mut sgi: Box<dyn PacketIo>,
    stop: Arc<AtomicBool>,
    wake: Option<Arc<IdleWake>>,
    own_core: bool,
) -> DataPlane {
    // Every request the data path pushes (promotion, paging, Error Indication
    // reports, backlog retries) wakes an idle control thread.
    let mut requested = dp.requests_pushed();
    let mut ul = Batch::default();
    let mut dl = Batch::default();
    let mut out = Batch::default();
    // Indexes of packets a port pushed back (kept, to allocate once).
    let mut held: Vec<u16> = Vec::new();
    let t0 = crate::io::now_ns();
    let mut idle = 0u32;
    let mut fds: Vec<_> = [s1u.poll_fd(), sgi.poll_fd(), s1u.wake_fd(), sgi.wake_fd()]
        .into_iter()
        .flatten()
        .collect();
    fds.sort_unstable();
    fds.dedup();
    let spin = if own_core {
        crate::io::IDLE_POLLS_MEMORY
    } else {
        s1u.idle_polls().min(sgi.idle_polls())
    };
    while !stop.load(Ordering::Relaxed) {
        let now = crate::io::now_ns() - t0 + 1;
        let mut busy = false;
        if s1u.recv_batch(&mut ul).unwrap_or(0) > 0 {
            dp.uplink(&mut ul, now);
            send_egress(&mut dp, &mut *sgi, &mut ul, true, false, &mut held, now);
            let _ = s1u.send_batch(&ul, Verdict::ToS1u);
            busy = true;
        }
        if sgi.recv_batch(&mut dl).unwrap_or(0) > 0 {
            dp.downlink(&mut dl, now);
            send_egress(&mut dp, &mut *s1u, &mut dl, false, false, &mut held, now);
            busy = true;
        }
        if !busy {
            dp.sync(now);
        }
        if dp.generated.len > 0 {
            let _ = s1u.send_batch(&dp.generated, Verdict::ToS1u);
            dp.generated.clear();
        }
        while dp.ready_len() > 0 {
            if dp.take_ready(&mut ul, true) > 0 {
                dp.uplink(&mut ul, now);
                send_egress(&mut dp, &mut *sgi, &mut ul, true, false, &mut held, now);
            }
            if dp.take_ready(&mut dl, false) > 0 {
                dp.downlink(&mut dl, now);
                send_egress(&mut dp, &mut *s1u, &mut dl, false, false, &mut held, now);
            }
        }
        // The egress schedulers' queues (only when an egress is congested: by its
        // rate, or by its port pushing back): what the egress allows now, in QoS
        // order, until the port pushes back. A backlog keeps the thread polling.
        for (uplink, port) in [(true, &mut sgi), (false, &mut s1u)] {
            if dp.egress_backlog(uplink) > 0 {
                while dp.egress_drain(uplink, &mut out, now) > 0 {
                    send_egress(&mut dp, &mut **port, &mut out, uplink, true, &mut held, now);
                    if !held.is_empty() {
                        break;
                    }
                }
                busy = true;
            }
        }
        if let Some(w) = &wake {
            let b = dp.requests_pushed();
            if b != requested {
                requested = b;
                w.post(b);
            }
        }
        if busy {
            idle = 0;
        } else {
            idle += 1;
            // Spin briefly (while an empty poll is cheap), then sleep on the sockets so
            // an idle node costs no core. Ring-fed ports have no descriptor: nap
            // briefly instead.
            if idle > spin {
                if fds.is_empty() {
                    std::thread::sleep(Duration::from_micros(100));
                } else {
                    // Both asked (not short-circuited): each says whether work came.
                    let (a, b) = (s1u.going_idle(), sgi.going_idle());
                    if a && b {
                        let _ = wait_any_readable(&fds, Duration::from_micros(500));
                    }
                    s1u.woke();
                    sgi.woke();
                }
            }
        }
    }
    dp
}

/// Send `batch`'s packets of an egress (`uplink`: toward SGi, else toward S1-U) on
/// `port`. What the port pushes back (a full socket buffer or TX ring) waits in the
/// slice's egress scheduler and leaves in QoS order as the port takes it: under
/// pushback the egress rate is the port's own. `drained`: the batch came from the
/// scheduler (its packets go back to the head of their queues).
fn send_egress(
    dp: &mut DataPlane,
    port: &mut dyn PacketIo,
    batch: &mut Batch,
    uplink: bool,
    drained: bool,
    held: &mut Vec<u16>,
    now: u64,
) {
    held.clear();
    let v = if uplink {
        Verdict::ToSgi
    } else {
        Verdict::ToS1u
    };
    let _ = port.send_batch_or_hold(batch, v, held);
    if !held.is_empty() {
        dp.egress_pushback(uplink, batch, held, drained, now);
    }
}

/// A running slice.
pub struct SliceThreads {
    pub stop: Arc<AtomicBool>,
    pub data: JoinHandle<DataPlane>,
    pub control: JoinHandle<ControlPlane>,
}

impl SliceThreads {
    /// Stop both threads and return the two halves.
    pub fn join(self) -> (ControlPlane, DataPlane) {
        self.stop.store(true, Ordering::Relaxed);
        let dp = self.data.join().expect("data thread panicked");
        let cp = self.control.join().expect("control thread panicked");
        (cp, dp)
    }
}

/// The control thread's first idle wait. Later ones in a row double up to
/// [`IDLE_WAIT_MAX`], so a long-idle thread wakes ~125 times a second only. Every
/// request the data thread pushes wakes it through [`IdleWake`]; the cap bounds what
/// does not (stop, and updates waiting for room in the ring).
pub const IDLE_WAIT_FIRST: Duration = Duration::from_micros(500);
/// The longest idle wait of the control thread (bounds paging latency and stop).
pub const IDLE_WAIT_MAX: Duration = Duration::from_millis(8);

/// The control thread's idle wait while updates wait for room in the ring.
const BACKLOG_RETRY: Duration = Duration::from_micros(200);

/// The cap on the control thread's wait after `rounds` idle rounds in a row.
pub fn idle_wait_cap(rounds: u32) -> Duration {
    IDLE_WAIT_FIRST
        .saturating_mul(1u32 << rounds.min(8))
        .min(IDLE_WAIT_MAX)
}

/// Start a slice's two threads.
/// Where a slice's threads run and what its control thread does before its first
/// event.
#[derive(Debug, Clone, Default)]
pub struct SliceStart {
    /// The slice's number in the node (logs carry it).
    pub index: usize,
    pub control_core: Option<usize>,
    pub data_core: Option<usize>,
    /// The threads' names (the node's plan gives them).
    pub control_name: String,
    pub data_name: String,
    /// UEs whose control state is sized and faulted in first (`node.prewarm_users`).
    pub prewarm_users: usize,
}

pub fn spawn_slice(
    mut cp: ControlPlane,
    dp: DataPlane,
    s1u: Box<dyn PacketIo>,
    sgi: Box<dyn PacketIo>,
    mut driver: Box<dyn ControlDriver>,
    start: SliceStart,
) -> std::io::Result<SliceThreads> {
    let SliceStart {
        index,
        control_core,
        data_core,
        control_name,
        data_name,
        prewarm_users,
    } = start;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    // Without an eventfd the control thread still sees requests within its cap.
    let wake = IdleWake::new().ok().map(Arc::new);
    let w = wake.clone();
    let data = std::thread::Builder::new().name(data_name).spawn(move || {
        if let Some(c) = data_core {
            pin_current_thread(c);
        }
        // Entered once for the thread's life: every event of it names the slice.
        let _slice = tracing::info_span!("slice", slice = index).entered();
        data_loop_waking(dp, s1u, sgi, s, w, data_core.is_some())
    })?;
    let s = stop.clone();
    // The slice counts as started once its control thread is sized (prewarm done),
    // so the first signaling never waits behind it.
    let (ready_tx, ready_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let control = std::thread::Builder::new()
        .name(control_name)
        .spawn(move || {
            if let Some(c) = control_core {
                pin_current_thread(c);
            }
            let _slice = tracing::info_span!("slice", slice = index).entered();
            if prewarm_users > 0 {
                driver.prewarm(&mut cp, prewarm_users);
            }
            // Started once sized: the restore of a previous life's UEs (`start`) runs
            // on every slice at once, not one slice after the other; signaling that
            // arrives meanwhile waits in the slice's ring.
            let _ = ready_tx.send(());
            driver.start(&mut cp);
            let mut idle_rounds = 0u32;
            while !s.load(Ordering::Relaxed) {
                let mark = wake.as_ref().map_or(0, |w| w.posted());
                let busy = driver.run_once(&mut cp, Instant::now());
                let backlog = cp.flush();
                if busy {
                    idle_rounds = 0;
                    continue;
                }
                let max = if backlog > 0 {
                    // Updates the ring could not take: retry soon.
                    BACKLOG_RETRY
                } else {
                    idle_wait_cap(idle_rounds)
                };
                idle_rounds = idle_rounds.saturating_add(1);
                match &wake {
                    Some(w) => {
                        if w.begin_wait(mark) {
                            driver.wait_idle(&cp, max, Some(w.fd()));
                            w.end_wait();
                        }
                    }
                    None => driver.wait_idle(&cp, max, None),
                }
            }
            cp
        })?;
    if ready_rx.recv().is_err() {
        stop.store(true, Ordering::Relaxed);
        return Err(std::io::Error::other(
            "the slice's control thread ended while sizing its memory",
        ));
    }
    Ok(SliceThreads {
        stop,
        data,
        control,
    })
}

/// Synthetic control events (the paper's second experiment set) as a control driver.
pub struct SyntheticDriver {
    pub syn: pepc_slice::synthetic::Synthetic,
    t0: Instant,
    events: Vec<pepc_slice::control::ControlEvent>,
}

impl SyntheticDriver {
    pub fn new(syn: pepc_slice::synthetic::Synthetic) -> Self {
        SyntheticDriver {
            syn,
            t0: Instant::now(),
            events: Vec::new(),
        }
    }
}

impl ControlDriver for SyntheticDriver {
    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        let n = self
            .syn
            .run_due(cp, now.duration_since(self.t0).as_nanos() as u64 + 1);
        self.events.clear();
        let r = cp.poll_requests(&mut self.events);
        // Synthetic UEs are never idle-with-paging; a page request means nothing to do.
        n + r > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_wait_cap_doubles_up_to_the_max() {
        assert_eq!(idle_wait_cap(0), IDLE_WAIT_FIRST);
        assert_eq!(idle_wait_cap(1), Duration::from_millis(1));
        assert_eq!(idle_wait_cap(2), Duration::from_millis(2));
        assert_eq!(idle_wait_cap(4), IDLE_WAIT_MAX);
        assert_eq!(idle_wait_cap(u32::MAX), IDLE_WAIT_MAX);
    }

    /// With an egress rate below the offered load, the data loop queues what the egress
    /// cannot take and drains it between batches: every forwarded packet is accounted
    /// for as bypassed, sent from a queue, dropped by the scheduler or still queued.
    #[test]
    fn the_data_loop_drains_a_congested_egress() {
        use crate::io::mem::MemGenerator;
        use pepc_slice::control::AttachParams;
        use pepc_slice::slice::{build, SliceConfig};
        use std::sync::atomic::Ordering::Relaxed;
        let mut cfg = SliceConfig::for_users(16);
        cfg.egress[1].rate_mbps = 10;
        let (mut cp, mut dp) = build(&cfg);
        let mut p = AttachParams::new(1_010_000_000_001);
        (p.enb_teid, p.enb_addr) = (0x100, std::net::Ipv4Addr::new(127, 1, 0, 1));
        let ue = cp.attach(&p).unwrap().ue_ip;
        while cp.in_flight() > 0 {
            cp.flush();
            dp.sync(0);
        }
        let pkt =
            pepc_slice::packets::ipv4_udp(std::net::Ipv4Addr::new(8, 8, 8, 8), ue, 1, 2, 1000);
        let sgi = MemGenerator::new(
            Box::new(move |b, _| {
                b.fill(&pkt);
            }),
            Some(20_000),
        );
        let s1u = MemGenerator::new(Box::new(|_, _| {}), Some(0));
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let t = std::thread::spawn(move || data_loop(dp, Box::new(s1u), Box::new(sgi), st));
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        let dp = t.join().unwrap();
        let c = dp.counters();
        let e = &c.egress[1];
        let sent: u64 = e.classes.iter().map(|k| k.sent.load(Relaxed)).sum();
        let depth: u64 = e.classes.iter().map(|k| k.depth.load(Relaxed)).sum();
        assert!(sent > 0, "nothing was drained");
        assert!(e.dropped() > 0, "20,000 packets at once overflow the queue");
        assert_eq!(
            e.bypassed.load(Relaxed) + sent + e.dropped() + depth,
            c.dl_forwarded.load(Relaxed)
        );
        assert_eq!(depth as usize, dp.egress_backlog(false));
    }
}
