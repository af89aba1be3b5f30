//! The embedded HSS and PCRF as the proxy's backends: inline, or (the HSS) on a
//! thread of its own.

use super::{HssBackend, PcrfBackend};
use pepc_hss::seam::EmbeddedHss;
use pepc_mme::{HssAnswer, HssRequest, PcrfAnswer, PcrfRequest};
use pepc_pcrf::EmbeddedPcrf;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

impl PcrfBackend for EmbeddedPcrf {
    fn submit(&mut self, req: PcrfRequest, answers: &mut Vec<PcrfAnswer>) {
        answers.extend(self.answer(req));
    }
}

/// The embedded HSS, answered inline.
impl HssBackend for EmbeddedHss {
    fn submit(&mut self, req: HssRequest, answers: &mut Vec<HssAnswer>) {
        answers.extend(self.answer(req));
    }
}

/// A backend answering from a thread of its own (the embedded HSS behind it): the
/// shape of a remote HSS client. Its thread writes an eventfd after each answer;
/// `poll` clears it before draining, so no answer waits unseen.
pub struct ThreadedBackend {
    to: Option<mpsc::Sender<HssRequest>>,
    from: mpsc::Receiver<HssAnswer>,
    wake: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl ThreadedBackend {
    pub fn start(mut proxy: EmbeddedHss) -> std::io::Result<ThreadedBackend> {
        // SAFETY: plain eventfd(2).
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        let wake = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
        let (to, rx) = mpsc::channel::<HssRequest>();
        let (tx, from) = mpsc::channel::<HssAnswer>();
        let w = wake.clone();
        let thread = std::thread::Builder::new()
            .name("pepc-hss".into())
            .spawn(move || {
                while let Ok(req) = rx.recv() {
                    let Some(a) = proxy.answer(req) else { continue };
                    if tx.send(a).is_err() {
                        break;
                    }
                    let one = 1u64.to_ne_bytes();
                    // SAFETY: 8-byte write to our eventfd; EAGAIN (counter full) still wakes.
                    unsafe { libc::write(w.as_raw_fd(), one.as_ptr() as *const libc::c_void, 8) };
                }
            })?;
        Ok(ThreadedBackend {
            to: Some(to),
            from,
            wake,
            thread: Some(thread),
        })
    }
}

impl HssBackend for ThreadedBackend {
    fn submit(&mut self, req: HssRequest, _answers: &mut Vec<HssAnswer>) {
        if let Some(to) = &self.to {
            // A gone thread never answers: the MME's HSS timer rejects the attach.
            let _ = to.send(req);
        }
    }

    fn poll(&mut self, answers: &mut Vec<HssAnswer>) {
        let mut b = [0u8; 8];
        // SAFETY: 8-byte read from our non-blocking eventfd (EAGAIN when clear).
        unsafe {
            libc::read(
                self.wake.as_raw_fd(),
                b.as_mut_ptr() as *mut libc::c_void,
                8,
            )
        };
        answers.extend(self.from.try_iter());
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.wake.as_raw_fd())
    }
}

impl Drop for ThreadedBackend {
    fn drop(&mut self) {
        self.to = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
