//! The node's S1AP endpoint on a thread of its own (N slices): it owns the S1-MME
//! transport and the eNB associations, steers each UE's messages over a ring to the
//! MME of its slice, sends the slices' answers, and runs overload control on what
//! waits in each ring.

use super::driver::{Link, RingEnd, SliceMme};
use super::gauges::EndpointGauges;
use super::wire::Wire;
use super::{MAX_BACKLOG, S1AP_RING as RING};
use crate::plan::{Job, Plan};
use crate::proxy::Proxy;
use crate::runtime::IdleWake;
use pepc_mme::{EndpointOut, Input, Mme, Output, S1apEndpoint};
use pepc_sctp::transport::S1Transport;
use pepc_slice::spsc::{self, Consumer, Producer};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the endpoint thread holds of one slice.
struct SliceLink {
    to: Producer<Input>,
    /// Inputs the ring had no room for, in order.
    backlog: VecDeque<Input>,
    pushed: u64,
    inbox_wake: Arc<IdleWake>,
    from: Consumer<Output>,
    outbox_wake: Arc<IdleWake>,
    /// Overload control's word to the slice, beside the ring rather than in it: the
    /// attaches already queued there are the ones it must turn away.
    congested: Arc<AtomicBool>,
}

/// The node's S1AP endpoint on its own thread.
pub struct EndpointThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<S1apEndpoint>>,
    pub gauges: Arc<EndpointGauges>,
}

impl EndpointThread {
    /// The thread ended while it should run (it panicked).
    pub fn failed(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.handle.as_ref().is_some_and(|h| h.is_finished())
    }

    /// Stops the thread; returns the endpoint (its counters).
    pub fn stop(mut self) -> Option<S1apEndpoint> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.take().and_then(|h| h.join().ok())
    }
}

impl Drop for EndpointThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Starts the endpoint thread on `transport` with one MME per slice (`mmes[s]`
/// serves slice `s`, reaching the HSS through its proxy driver; their roles are set
/// here); returns it and the slices' drivers.
pub fn start_signaling(
    transport: Box<dyn S1Transport>,
    mut endpoint: S1apEndpoint,
    mmes: Vec<(Mme, Proxy)>,
    plan: &Plan,
) -> std::io::Result<(EndpointThread, Vec<SliceMme>)> {
    let mut links = Vec::with_capacity(mmes.len());
    let mut drivers = Vec::with_capacity(mmes.len());
    for (s, (mut mme, hss)) in mmes.into_iter().enumerate() {
        mme.set_role(endpoint.role(s));
        let (to_slice, from_node) = spsc::channel::<Input>(RING);
        let (to_node, from_slice) = spsc::channel::<Output>(RING);
        let inbox_wake = Arc::new(IdleWake::new()?);
        let outbox_wake = Arc::new(IdleWake::new()?);
        let congested = Arc::new(AtomicBool::new(false));
        links.push(SliceLink {
            to: to_slice,
            backlog: VecDeque::new(),
            pushed: 0,
            inbox_wake: inbox_wake.clone(),
            from: from_slice,
            outbox_wake: outbox_wake.clone(),
            congested: congested.clone(),
        });
        let ring = RingEnd {
            from: from_node,
            inbox_wake,
            inbox_mark: 0,
            to: to_node,
            backlog: VecDeque::new(),
            pushed: 0,
            outbox_wake,
            congested,
            told_congested: false,
        };
        drivers.push(SliceMme::on(s, mme, hss, Link::Ring(ring)));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let gauges = Arc::new(EndpointGauges::default());
    let (st, g) = (stop.clone(), gauges.clone());
    let mut wire = Wire::new(transport, gauges.sctp.clone());
    let core = plan.core(Job::S1apEndpoint);
    let handle = std::thread::Builder::new()
        .name(Job::S1apEndpoint.thread_name())
        .spawn(move || {
            if let Some(c) = core {
                pepc_slice::slice::pin_current_thread(c);
            }
            endpoint_loop(&mut wire, &mut endpoint, &mut links, &st, &g);
            wire.shutdown();
            endpoint
        })?;
    Ok((
        EndpointThread {
            stop,
            handle: Some(handle),
            gauges,
        },
        drivers,
    ))
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn endpoint_loop(
    wire: &mut Wire,
    ep: &mut S1apEndpoint,
    links: &mut [SliceLink],
    stop: &AtomicBool,
    gauges: &EndpointGauges,
) {
    let mut eo = EndpointOut::default();
    let mut idle_rounds = 0u32;
    let mut last_cpu = Instant::now();
    let mut last_setups = u64::MAX;
    while !stop.load(Ordering::Relaxed) {
        let marks: Vec<u64> = links.iter().map(|l| l.outbox_wake.posted()).collect();
        wire.poll();
        let mut busy = wire.feed(ep, &mut eo);
        for (s, l) in links.iter_mut().enumerate() {
            while let Some(o) = l.from.pop() {
                busy = true;
                ep.on_slice_output(s, o, &mut eo);
            }
        }
        for (s, input) in eo.slices.drain(..) {
            let l = &mut links[s];
            if let Input::Congestion { on } = input {
                l.congested.store(on, Ordering::Relaxed);
                continue;
            }
            if l.backlog.len() >= MAX_BACKLOG {
                gauges.dropped_inputs.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            l.backlog.push_back(input);
        }
        for l in links.iter_mut() {
            let before = l.pushed;
            while let Some(i) = l.backlog.pop_front() {
                match l.to.push(i) {
                    Ok(()) => l.pushed += 1,
                    Err(i) => {
                        l.backlog.push_front(i);
                        busy = true;
                        break;
                    }
                }
            }
            if l.pushed != before {
                l.inbox_wake.post(l.pushed);
            }
        }
        // Overload control sees every slice's backlog each round.
        let now = Instant::now();
        let depths = gauges
            .backlogs
            .get_or_init(|| links.iter().map(|_| AtomicU64::new(0)).collect());
        for (s, l) in links.iter().enumerate() {
            let depth = l.backlog.len() + l.to.len();
            ep.observe_backlog(now, s, depth, &mut eo);
            depths[s].store(depth as u64, Ordering::Relaxed);
        }
        busy |= !eo.slices.is_empty();
        for o in eo.wire.drain(..) {
            wire.emit(o);
        }
        wire.flush();
        gauges
            .overload_starts
            .store(ep.overload_stats().starts, Ordering::Relaxed);
        gauges.overloaded.store(ep.overloaded(), Ordering::Relaxed);
        let enbs = ep.enb_count() as u64;
        let setups = ep.stats.s1_setups + ep.stats.enb_config_updates;
        if enbs != gauges.enbs.load(Ordering::Relaxed) || setups != last_setups {
            last_setups = setups;
            if let Ok(mut v) = gauges.enb_views.lock() {
                *v = ep.enb_views();
            }
        }
        gauges.enbs.store(enbs, Ordering::Relaxed);
        gauges.demuxed.store(ep.stats.demuxed, Ordering::Relaxed);
        gauges
            .s1ap_decode_errors
            .store(ep.stats.s1ap_decode_errors, Ordering::Relaxed);
        gauges
            .unknown_ue_ids
            .store(ep.stats.unknown_ue_ids, Ordering::Relaxed);
        if last_cpu.elapsed() > Duration::from_millis(10) {
            gauges.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
            last_cpu = Instant::now();
        }
        wire.publish(now);
        if busy {
            idle_rounds = 0;
            continue;
        }
        idle_rounds = idle_rounds.saturating_add(1);
        let max = crate::runtime::idle_wait_cap(idle_rounds);
        // Wait only if no slice posted since we read its ring.
        let mut armed = Vec::with_capacity(links.len());
        let mut posted = false;
        for (l, m) in links.iter().zip(&marks) {
            if l.outbox_wake.begin_wait(*m) {
                armed.push(l);
            } else {
                posted = true;
                break;
            }
        }
        if !posted {
            let fds: Vec<RawFd> = links.iter().map(|l| l.outbox_wake.fd()).collect();
            wire.wait(Instant::now() + max, &fds, true);
        }
        for l in armed {
            l.outbox_wake.end_wait();
        }
    }
    gauges.cpu_ns.store(thread_cpu_ns(), Ordering::Relaxed);
}
