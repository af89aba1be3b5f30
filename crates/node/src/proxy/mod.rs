//! The node's HSS proxy (PEPC §3.3): the slices' MMEs do not reach the HSS themselves;
//! they send [`Output::Hss`] requests and wait for [`Input::Hss`] answers, which the
//! proxy produces.
//!
//! The proxy is a backend ([`HssBackend`]: a request in, its answer now or later) and a
//! thin driver per slice ([`Proxy`]) that a slice's control thread calls after the MME:
//!
//! The backends (the adapters between the seam and what answers) live here together:
//! * `embedded.rs`: the embedded HSS (`pepc_hss::seam`) and PCRF (`pepc-pcrf`) answer
//!   in a few µs: they run inline on the slice's thread ([`Proxy::embedded`]), with no
//!   hop and no wake-up, so an attach costs what it did when the MME called the HSS
//!   directly. [`ThreadedBackend`] is the embedded HSS on a thread of its own: the
//!   shape of a remote HSS client (tests).
//! * [`s6a`] and [`gx`]: Diameter S6a and Gx clients, answering from threads of their
//!   own: their answers come back through [`HssBackend::poll`] / [`PcrfBackend::poll`],
//!   and the slice's idle wait also watches their `wake_fd`.

mod embedded;
pub mod gx;
pub mod s6a;

pub use embedded::ThreadedBackend;

use pepc_hss::seam::EmbeddedHss;
use pepc_hss::Hss;
use pepc_mme::hss::Proxied;
use pepc_mme::ControlPlane;
use pepc_mme::{HssAnswer, HssRequest, Input, Mme, Output};
use pepc_mme::{PcrfAnswer, PcrfRequest};
use pepc_pcrf::EmbeddedPcrf;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Instant;

/// Where the proxy gets its answers.
pub trait HssBackend: Send {
    /// Take a request; a backend that answers at once pushes the answer to `answers`.
    fn submit(&mut self, req: HssRequest, answers: &mut Vec<HssAnswer>);

    /// Answers that arrived since the last call (asynchronous backends).
    fn poll(&mut self, _answers: &mut Vec<HssAnswer>) {}

    /// Readable when [`HssBackend::poll`] may have answers (asynchronous backends).
    fn wake_fd(&self) -> Option<RawFd> {
        None
    }

    /// What the HSS started since the last call (S6a CLR, IDR), as MME inputs
    /// ([`Input::HssCancelLocation`], [`Input::HssInsertSubscriberData`]). Ready
    /// when [`HssBackend::wake_fd`] is readable.
    fn poll_initiated(&mut self, _inputs: &mut Vec<Initiated>) {}

    /// Whether this slice's MME knows the subscriber of the request `token` of an
    /// [`Initiated`] (the backend's answer to the HSS depends on it).
    fn initiated_outcome(&mut self, _token: u64, _known: bool) {}
}

/// Where the proxy gets policy (Gx, TS 29.212): the embedded PCRF answers inline; a
/// Diameter Gx client answers from its own thread, and what the PCRF pushes (RAR)
/// comes back as [`Input::PolicyUpdate`]s.
pub trait PcrfBackend: Send {
    /// Take a request; a backend that answers at once pushes the answer to `answers`.
    fn submit(&mut self, req: PcrfRequest, answers: &mut Vec<PcrfAnswer>);

    /// Answers, and policy pushed by the PCRF, since the last call.
    fn poll(&mut self, _answers: &mut Vec<PcrfAnswer>, _pushed: &mut Vec<Input>) {}

    /// Readable when [`PcrfBackend::poll`] may have something.
    fn wake_fd(&self) -> Option<RawFd> {
        None
    }
}

/// A request the HSS started, as the MME's input; `token`: the backend waits for
/// [`HssBackend::initiated_outcome`] before it answers.
#[derive(Debug)]
pub struct Initiated {
    pub input: Input,
    pub token: Option<u64>,
}

/// Figures of one slice's proxy driver.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyStats {
    pub requests: u64,
    pub answers: u64,
    /// HSS-initiated requests (CLR, IDR) handed to the MME.
    pub initiated: u64,
    /// Requests to the PCRF, its answers and the policy it pushed.
    pub pcrf_requests: u64,
    pub pcrf_answers: u64,
    pub pcrf_pushed: u64,
    /// From a vector request (AIR) handed to the backend to its answer.
    pub vector_latency: pepc_mme::mme::LatencyHistogram,
}

/// Vector requests whose answer is awaited, at most (older ones are forgotten: the
/// MME gave up on them at its HSS timeout).
const MAX_TIMED: usize = 65_536;

/// One slice's driver of the node's proxy: serves its MME's HSS requests.
pub struct Proxy {
    backend: Box<dyn HssBackend>,
    answers: Vec<HssAnswer>,
    pcrf: Box<dyn PcrfBackend>,
    pcrf_answers: Vec<PcrfAnswer>,
    pushed: Vec<Input>,
    initiated: Vec<Initiated>,
    /// When each awaited vector request was handed to the backend.
    timed: std::collections::HashMap<pepc_mme::HssRef, Instant>,
    pub stats: ProxyStats,
}

impl Proxy {
    pub fn new(backend: Box<dyn HssBackend>) -> Proxy {
        Proxy {
            backend,
            answers: Vec::new(),
            pcrf: Box::new(EmbeddedPcrf::default()),
            pcrf_answers: Vec::new(),
            pushed: Vec::new(),
            initiated: Vec::new(),
            timed: std::collections::HashMap::new(),
            stats: ProxyStats::default(),
        }
    }

    /// The PCRF backend (by default an embedded PCRF without rules).
    pub fn with_pcrf(mut self, pcrf: Box<dyn PcrfBackend>) -> Proxy {
        self.pcrf = pcrf;
        self
    }

    /// The embedded HSS, inline; `rand` is the RAND source of its vectors.
    pub fn embedded(hss: Arc<Hss>, rand: Box<dyn FnMut() -> [u8; 16] + Send>) -> Proxy {
        Proxy::new(Box::new(EmbeddedHss::new(hss, rand)))
    }

    /// Takes the [`Output::Hss`] requests out of `out` (from index `from` on) to the
    /// backend; answers it has at once go to `mme` straight away, and what they lead
    /// to is served in turn. The other outputs stay in `out`, in order.
    pub fn serve(
        &mut self,
        mme: &mut Mme,
        now: Instant,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
        from: usize,
    ) {
        pepc_mme::hss::serve_requests(out, from, |req, o| {
            let req = match req {
                Proxied::Hss(r) => r,
                Proxied::Pcrf(r) => {
                    self.stats.pcrf_requests += 1;
                    self.pcrf.submit(r, &mut self.pcrf_answers);
                    return self.feed(mme, now, cp, o);
                }
            };
            self.stats.requests += 1;
            if matches!(req, HssRequest::Vector { .. } | HssRequest::Resync { .. }) {
                if self.timed.len() >= MAX_TIMED {
                    let old = Instant::now() - std::time::Duration::from_secs(30);
                    self.timed.retain(|_, t| *t > old);
                }
                if self.timed.len() < MAX_TIMED {
                    self.timed.insert(req.reference(), Instant::now());
                }
            }
            self.backend.submit(req, &mut self.answers);
            self.feed(mme, now, cp, o);
        });
    }

    /// Answers of an asynchronous backend to `mme` (then serves what they lead to);
    /// true if there were any.
    pub fn poll(
        &mut self,
        mme: &mut Mme,
        now: Instant,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> bool {
        let start = out.len();
        self.backend.poll(&mut self.answers);
        self.backend.poll_initiated(&mut self.initiated);
        self.pcrf.poll(&mut self.pcrf_answers, &mut self.pushed);
        if self.answers.is_empty()
            && self.initiated.is_empty()
            && self.pcrf_answers.is_empty()
            && self.pushed.is_empty()
        {
            return false;
        }
        self.feed(mme, now, cp, out);
        for i in std::mem::take(&mut self.pushed) {
            self.stats.pcrf_pushed += 1;
            mme.handle(now, i, cp, out);
        }
        for i in self.initiated.drain(..) {
            self.stats.initiated += 1;
            if let Some(token) = i.token {
                let imsi = match &i.input {
                    Input::HssInsertSubscriberData { imsi, .. }
                    | Input::HssCancelLocation { imsi, .. } => Some(*imsi),
                    _ => None,
                };
                let known = imsi.is_some_and(|imsi| mme.mme_ue_id_of(imsi).is_some());
                self.backend.initiated_outcome(token, known);
            }
            mme.handle(now, i.input, cp, out);
        }
        self.serve(mme, now, cp, out, start);
        true
    }

    fn feed(&mut self, mme: &mut Mme, now: Instant, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        for a in self.answers.drain(..) {
            self.stats.answers += 1;
            if let Some(t) = self.timed.remove(&a.r) {
                self.stats.vector_latency.observe(t.elapsed());
            }
            mme.handle(now, Input::Hss(a), cp, out);
        }
        for a in std::mem::take(&mut self.pcrf_answers) {
            self.stats.pcrf_answers += 1;
            mme.handle(now, Input::Pcrf(a), cp, out);
        }
    }

    /// What the slice's idle wait watches: [`HssBackend::wake_fd`] and
    /// [`PcrfBackend::wake_fd`].
    pub fn wake_fds(&self) -> impl Iterator<Item = RawFd> {
        self.backend
            .wake_fd()
            .into_iter()
            .chain(self.pcrf.wake_fd())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::io::wait_any_readable;
    use pepc_mme::MmeConfig;
    use pepc_s1ap::msg::S1apMessage;
    use pepc_s1ap::{EnbId, GlobalEnbId};
    use pepc_slice::slice::{build_with_signaling, SliceConfig};
    use pepc_testkit::{initial_ue, subscriber, Harness, SimUe};
    use std::time::Duration;

    const IMSI: &str = "001010000000001";

    /// An MME with an eNB set up on association 1, and the Initial UE Message of an
    /// attach by IMSI (also the S6a backend's tests' start).
    pub(crate) fn mme_and_attach() -> (Mme, ControlPlane, Vec<u8>) {
        let cfg = MmeConfig::default();
        let plmn = cfg.plmn;
        let mut mme = Mme::new(cfg.clone(), std::time::Instant::now());
        let (mut cp, _dp) = build_with_signaling(&SliceConfig::for_users(16));
        let mut out = vec![];
        mme.handle(
            Instant::now(),
            Input::EnbSetup {
                assoc: 1,
                out_streams: 2,
                global_id: GlobalEnbId {
                    plmn,
                    enb_id: EnbId::Macro(1),
                },
            },
            &mut cp,
            &mut out,
        );
        // Only for building the message: the harness knows the PLMN and codes.
        let h = Harness::new(1, cfg);
        let ue = SimUe::new(IMSI, 7);
        let msg: S1apMessage = initial_ue(&h, &ue, ue.attach_request(None, false), None).into();
        (mme, cp, msg.encode().unwrap())
    }

    fn hss() -> Arc<Hss> {
        let hss = Arc::new(Hss::in_memory().unwrap());
        hss.add(&subscriber(IMSI)).unwrap();
        hss
    }

    fn rand() -> Box<dyn FnMut() -> [u8; 16] + Send> {
        Box::new(|| [7u8; 16])
    }

    fn authentication_request_sent(out: &[Output]) -> bool {
        out.iter().any(|o| {
            matches!(o, Output::S1ap { bytes, .. }
                if matches!(S1apMessage::decode(bytes), Ok(S1apMessage::DownlinkNasTransport(_))))
        })
    }

    #[test]
    fn embedded_proxy_answers_inline() {
        let (mut mme, mut cp, bytes) = mme_and_attach();
        let mut p = Proxy::embedded(hss(), rand());
        let mut out = vec![];
        let now = Instant::now();
        mme.handle_s1ap(now, 1, 1, &bytes, &mut cp, &mut out);
        // Authentication first (TS 23.401 §5.3.2.1): the vector is asked, not the
        // subscription data, which waits for the UE to be authenticated.
        assert!(matches!(
            out.last(),
            Some(Output::Hss(HssRequest::Vector { .. }))
        ));
        p.serve(&mut mme, now, &mut cp, &mut out, 0);
        // The vector, answered at once: the challenge is out.
        assert_eq!(
            (p.stats.requests, p.stats.answers, p.stats.initiated),
            (1, 1, 0)
        );
        // The one vector request was timed.
        assert_eq!(p.stats.vector_latency.count(), 1);
        assert!(!out.iter().any(|o| matches!(o, Output::Hss(_))));
        assert!(authentication_request_sent(&out), "{out:?}");
        assert!(p.wake_fds().next().is_none());
    }

    #[test]
    fn threaded_backend_answers_later_through_poll_and_its_descriptor() {
        let (mut mme, mut cp, bytes) = mme_and_attach();
        let backend = ThreadedBackend::start(EmbeddedHss::new(hss(), rand())).unwrap();
        let mut p = Proxy::new(Box::new(backend));
        let fd = p
            .wake_fds()
            .next()
            .expect("asynchronous backend has a descriptor");
        let mut out = vec![];
        let now = Instant::now();
        mme.handle_s1ap(now, 1, 1, &bytes, &mut cp, &mut out);
        p.serve(&mut mme, now, &mut cp, &mut out, 0);
        assert!(
            out.is_empty(),
            "the request went to the HSS thread: {out:?}"
        );
        let t0 = Instant::now();
        while !authentication_request_sent(&out) {
            assert!(t0.elapsed() < Duration::from_secs(5), "no answer: {out:?}");
            wait_any_readable(&[fd], Duration::from_millis(100)).unwrap();
            p.poll(&mut mme, now, &mut cp, &mut out);
        }
        assert_eq!(
            (p.stats.requests, p.stats.answers, p.stats.initiated),
            (1, 1, 0)
        );
        // The one vector request was timed.
        assert_eq!(p.stats.vector_latency.count(), 1);
        assert_eq!(mme.stats.hss_late_answers, 0);
    }
}
