//! The S1-MME driver of a slice's control thread: moves S1AP between the SCTP transport
//! (PPID 18) and the sans-IO MME, feeds the MME the data thread's requests (paging),
//! and fires its timers. The MME itself owns no socket or clock.

use crate::io::wait_any_readable;
use crate::runtime::ControlDriver;
use pepc_mme::{Input, LogLevel, Mme, Output};
use pepc_sctp::transport::{S1Transport, TransportEvent, S1AP_PPID};
use pepc_slice::control::{ControlEvent, ControlPlane};
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

pub struct MmeDriver {
    transport: Box<dyn S1Transport>,
    pub mme: Mme,
    events: Vec<TransportEvent>,
    out: Vec<Output>,
    control: Vec<ControlEvent>,
    pub verbose: bool,
}

impl MmeDriver {
    pub fn new(transport: Box<dyn S1Transport>, mme: Mme) -> Self {
        MmeDriver {
            transport,
            mme,
            events: Vec::with_capacity(256),
            out: Vec::with_capacity(256),
            control: Vec::new(),
            verbose: false,
        }
    }

    fn emit(&mut self) {
        for o in self.out.drain(..) {
            match o {
                Output::S1ap {
                    assoc,
                    stream,
                    bytes,
                } => {
                    if let Err(e) = self.transport.send(assoc, stream, S1AP_PPID, &bytes) {
                        eprintln!("s1-mme: send to association {assoc} failed: {e}");
                    }
                }
                Output::CloseAssoc { assoc } => self.transport.close(assoc),
                Output::Log(level, msg) => {
                    if self.verbose || level == LogLevel::Warn {
                        eprintln!("mme: {msg}");
                    }
                }
            }
        }
        let _ = self.transport.flush();
    }
}

impl ControlDriver for MmeDriver {
    fn prewarm(&mut self, cp: &mut ControlPlane, users: usize) {
        self.mme.prewarm(users);
        cp.prewarm(users);
    }

    fn run_once(&mut self, cp: &mut ControlPlane, now: Instant) -> bool {
        // Events read by `wait_idle` are the newest there are: handle them first
        // (in order) and skip the poll, which would only find nothing.
        if self.events.is_empty() {
            if let Err(e) = self.transport.poll(Duration::ZERO, &mut self.events) {
                eprintln!("s1-mme: poll failed: {e}");
            }
        }
        let mut busy = !self.events.is_empty();
        let events = std::mem::take(&mut self.events);
        for ev in events.iter() {
            let input = match ev {
                TransportEvent::Up {
                    assoc, out_streams, ..
                } => Input::EnbUp {
                    assoc: *assoc,
                    out_streams: *out_streams,
                },
                TransportEvent::Down { assoc, .. } => Input::EnbDown { assoc: *assoc },
                TransportEvent::Data {
                    assoc,
                    stream,
                    ppid,
                    data,
                } => {
                    if *ppid != S1AP_PPID {
                        continue; // not S1AP: ignore (TS 36.412 §7)
                    }
                    Input::S1ap {
                        assoc: *assoc,
                        stream: *stream,
                        bytes: data.clone(),
                    }
                }
            };
            self.mme.handle(now, input, cp, &mut self.out);
        }
        self.events = events;
        self.events.clear();
        self.control.clear();
        if cp.poll_requests(&mut self.control) > 0 {
            busy = true;
        }
        for ev in self.control.drain(..) {
            self.mme.handle(now, Input::Control(ev), cp, &mut self.out);
        }
        if self.mme.next_timeout().is_some_and(|t| t <= now) {
            self.mme.handle_timeout(now, cp, &mut self.out);
            busy = true;
        }
        self.emit();
        busy
    }

    /// Blocks until S1-MME input arrives, the data thread wakes us, the MME's or the
    /// transport's next timer is due, or `max` passes. With a pollable transport the
    /// next `run_once` reads the input; otherwise the transport's own `poll` waits
    /// and what it returns stays in `events` for the next `run_once`.
    fn wait_idle(&mut self, _cp: &ControlPlane, max: Duration, wake: Option<RawFd>) {
        if !self.events.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut deadline = now + max;
        if let Some(t) = self.mme.next_timeout() {
            deadline = deadline.min(t);
        }
        if let Some(fd) = self.transport.wait_fd() {
            if let Some(t) = self.transport.next_deadline() {
                deadline = deadline.min(t);
            }
            let wait = deadline.saturating_duration_since(now);
            if wait.is_zero() {
                return;
            }
            let fds = [fd, wake.unwrap_or(-1)];
            let n = if wake.is_some() { 2 } else { 1 };
            if let Err(e) = wait_any_readable(&fds[..n], wait) {
                eprintln!("s1-mme: wait failed: {e}");
                std::thread::sleep(wait); // do not spin on a broken descriptor
            }
            return;
        }
        let wait = deadline.saturating_duration_since(now);
        if wait.is_zero() {
            return;
        }
        if let Err(e) = self.transport.poll(wait, &mut self.events) {
            eprintln!("s1-mme: poll failed: {e}");
            std::thread::sleep(wait); // do not spin on a broken socket
        }
    }

    /// The association carries every UE's signaling and the MME is one slice's; there
    /// is no S1AP demux across slices yet.
    fn max_slices(&self) -> Option<usize> {
        Some(1)
    }
}
