//! Thin drivers that run a slice's two halves on their own threads (pinned when the
//! machine allows): the data thread moves batches between the S1-U and SGi ports and the
//! pipeline; the control thread runs a [`ControlDriver`] (the MME, or synthetic events)
//! against the slice's control plane.

use crate::io::{wait_any_readable, PacketIo};
use pepc_slice::control::ControlPlane;
use pepc_slice::datapath::DataPlane;
use pepc_slice::slice::pin_current_thread;
use pepc_wire::{Batch, Verdict};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What runs on a slice's control thread.
pub trait ControlDriver: Send {
    /// Do whatever is due; return false when idle (the thread then waits a little).
    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool;
    /// How long the thread may sleep when idle.
    fn idle_wait(&self) -> Duration {
        Duration::from_micros(200)
    }
    /// Slices per node this driver can serve (None: any). A driver that owns a
    /// node-wide resource (the S1-MME association) without a signaling demux says 1.
    fn max_slices(&self) -> Option<usize> {
        None
    }
}

/// The data thread's loop. Returns the data plane when `stop` is set.
pub fn data_loop(
    mut dp: DataPlane,
    mut s1u: Box<dyn PacketIo>,
    mut sgi: Box<dyn PacketIo>,
    stop: Arc<AtomicBool>,
) -> DataPlane {
    let mut ul = Batch::default();
    let mut dl = Batch::default();
    let t0 = crate::io::now_ns();
    let mut idle = 0u32;
    let fds: Vec<_> = [s1u.poll_fd(), sgi.poll_fd()]
        .into_iter()
        .flatten()
        .collect();
    while !stop.load(Ordering::Relaxed) {
        let now = crate::io::now_ns() - t0 + 1;
        let mut busy = false;
        if s1u.recv_batch(&mut ul).unwrap_or(0) > 0 {
            dp.uplink(&mut ul, now);
            let _ = sgi.send_batch(&ul, Verdict::ToSgi);
            let _ = s1u.send_batch(&ul, Verdict::ToS1u);
            busy = true;
        }
        if sgi.recv_batch(&mut dl).unwrap_or(0) > 0 {
            dp.downlink(&mut dl, now);
            let _ = s1u.send_batch(&dl, Verdict::ToS1u);
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
                let _ = sgi.send_batch(&ul, Verdict::ToSgi);
            }
            if dp.take_ready(&mut dl, false) > 0 {
                dp.downlink(&mut dl, now);
                let _ = s1u.send_batch(&dl, Verdict::ToS1u);
            }
        }
        if busy {
            idle = 0;
        } else {
            idle += 1;
            // Spin briefly, then sleep on the sockets so an idle node costs no core.
            // Ring-fed ports have no descriptor: nap briefly instead.
            if idle > 256 {
                if fds.is_empty() {
                    std::thread::sleep(Duration::from_micros(100));
                } else {
                    let _ = wait_any_readable(&fds, Duration::from_micros(500));
                }
            }
        }
    }
    dp
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

/// Start a slice's two threads.
pub fn spawn_slice(
    mut cp: ControlPlane,
    dp: DataPlane,
    s1u: Box<dyn PacketIo>,
    sgi: Box<dyn PacketIo>,
    mut driver: Box<dyn ControlDriver>,
    control_core: Option<usize>,
    data_core: Option<usize>,
) -> std::io::Result<SliceThreads> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let data = std::thread::Builder::new()
        .name("pepc-data".into())
        .spawn(move || {
            if let Some(c) = data_core {
                pin_current_thread(c);
            }
            data_loop(dp, s1u, sgi, s)
        })?;
    let s = stop.clone();
    let control = std::thread::Builder::new()
        .name("pepc-control".into())
        .spawn(move || {
            if let Some(c) = control_core {
                pin_current_thread(c);
            }
            while !s.load(Ordering::Relaxed) {
                let busy = driver.run_once(&mut cp, Instant::now());
                cp.flush();
                if !busy {
                    std::thread::sleep(driver.idle_wait());
                }
            }
            cp
        })?;
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
