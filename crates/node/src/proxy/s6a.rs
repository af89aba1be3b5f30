//! The HSS proxy's Diameter backend: the MME's HSS requests served by an
//! external HSS over S6a (TS 29.272), through `pepc_diameter`'s client on a thread of
//! its own. Answers come back through [`HssBackend::poll`] and the backend's wake
//! descriptor, as with [`crate::proxy::ThreadedBackend`].
//!
//! A node runs one client for all its slices ([`S6aBackend::start_routed`]): the HSS
//! sees one MME (one Origin-Host, one set of connections), as it must. Two slices
//! with one identity would be two connections a Diameter peer refuses as duplicates,
//! and with one identity each a UE moving between slices would look to the HSS like
//! a change of MME (a CLR to the old "MME"). Answers go back to the slice whose MME
//! UE S1AP ID their reference carries.
//!
//! What the HSS asks of us (CLR, IDR) goes to every slice as an MME input
//! ([`HssBackend::poll_initiated`]); only the slice holding the IMSI acts. The
//! answers follow TS 29.272: a CLA says DIAMETER_SUCCESS at once (§5.2.1.2.2 asks
//! success also for an IMSI the MME does not know); an IDA waits until the slices
//! said whether one of them knows the IMSI ([`HssBackend::initiated_outcome`]):
//! DIAMETER_SUCCESS as soon as one does, DIAMETER_ERROR_USER_UNKNOWN once none
//! does (§5.2.2.1.2), DIAMETER_UNABLE_TO_COMPLY if they have not said within
//! `pepc_diameter::s6a::IDR_OUTCOME_TIMEOUT`. An IDR whose Subscription-Data cannot
//! be read gets DIAMETER_UNABLE_TO_COMPLY at once and goes no further.

use crate::proxy::{HssBackend, Initiated};
use pepc_diameter::driver::{DriverConfig, Route, S6aDriver};
use pepc_diameter::s6a::S6aEvent;
use pepc_mme::{HssAnswer, HssRequest, Input};
use std::collections::VecDeque;
use std::os::fd::RawFd;

/// Bound on HSS-initiated requests and events kept for the node: past it the oldest
/// are dropped (and counted), so an HSS flooding CLRs cannot grow our memory.
const MAX_EVENTS: usize = 4096;

/// Figures of one slice's S6a backend.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct S6aBackendStats {
    /// Events dropped because the node did not take them in time.
    pub events_dropped: u64,
    /// CLR/IDR not handed to the MME: a User-Name that is no IMSI (no subscriber
    /// of ours: CLA success, IDA DIAMETER_ERROR_USER_UNKNOWN).
    pub initiated_unusable: u64,
    /// PURs the HSS confirmed, and those it did not.
    pub purges_confirmed: u64,
    pub purge_failures: u64,
}

pub struct S6aBackend {
    driver: S6aDriver,
    /// Peer changes and failed purges (for [`S6aBackend::take_events`]).
    events: VecDeque<S6aEvent>,
    initiated: VecDeque<Initiated>,
    pub stats: S6aBackendStats,
}

impl S6aBackend {
    /// One backend with a client of its own.
    pub fn start(cfg: DriverConfig) -> std::io::Result<S6aBackend> {
        Ok(Self::new(S6aDriver::start(cfg)?))
    }

    /// One backend per slice over one client: answers to slice `route(mme_ue_id)`.
    pub fn start_routed(
        cfg: DriverConfig,
        slices: usize,
        route: Route,
        thread: &str,
    ) -> std::io::Result<Vec<S6aBackend>> {
        Ok(S6aDriver::start_routed(cfg, slices, route, thread)?
            .into_iter()
            .map(Self::new)
            .collect())
    }

    fn new(driver: S6aDriver) -> S6aBackend {
        S6aBackend {
            driver,
            events: VecDeque::new(),
            initiated: VecDeque::new(),
            stats: S6aBackendStats::default(),
        }
    }

    pub fn driver(&self) -> &S6aDriver {
        &self.driver
    }

    /// Peer changes and failed purges, oldest first (CLR and IDR go to the MME).
    pub fn take_events(&mut self) -> Vec<S6aEvent> {
        self.collect();
        self.events.drain(..).collect()
    }

    fn collect(&mut self) {
        let mut new = Vec::new();
        self.driver.poll_events(&mut new);
        for e in new {
            let input = match e {
                S6aEvent::CancelLocation {
                    imsi,
                    cancellation_type,
                    reattach_required,
                } => imsi.parse().ok().map(|imsi| Initiated {
                    input: Input::HssCancelLocation {
                        imsi,
                        cancellation_type: cancellation_type.into(),
                        reattach_required,
                    },
                    token: None,
                }),
                S6aEvent::InsertSubscriberData {
                    imsi,
                    update,
                    token,
                } => match imsi.parse() {
                    Ok(imsi) => Some(Initiated {
                        input: Input::HssInsertSubscriberData { imsi, update },
                        token: Some(token),
                    }),
                    Err(_) => {
                        // No IMSI: no subscriber of ours.
                        self.driver.idr_outcome(token, false);
                        None
                    }
                },
                S6aEvent::Purged { result: Ok(()), .. } => {
                    self.stats.purges_confirmed += 1;
                    continue;
                }
                S6aEvent::Purged { result: Err(_), .. } => {
                    self.stats.purge_failures += 1;
                    push_bounded(&mut self.events, e, &mut self.stats.events_dropped);
                    continue;
                }
                e => {
                    push_bounded(&mut self.events, e, &mut self.stats.events_dropped);
                    continue;
                }
            };
            match input {
                Some(i) => push_bounded(&mut self.initiated, i, &mut self.stats.events_dropped),
                None => self.stats.initiated_unusable += 1,
            }
        }
    }
}

fn push_bounded<T>(q: &mut VecDeque<T>, x: T, dropped: &mut u64) {
    if q.len() == MAX_EVENTS {
        q.pop_front();
        *dropped += 1;
    }
    q.push_back(x);
}

impl HssBackend for S6aBackend {
    fn submit(&mut self, req: HssRequest, _answers: &mut Vec<HssAnswer>) {
        self.driver.submit(req);
    }

    fn poll(&mut self, answers: &mut Vec<HssAnswer>) {
        self.driver.poll(answers);
        self.collect();
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.driver.wake_fd())
    }

    fn poll_initiated(&mut self, inputs: &mut Vec<Initiated>) {
        self.collect();
        inputs.extend(self.initiated.drain(..));
    }

    fn initiated_outcome(&mut self, token: u64, known: bool) {
        self.driver.idr_outcome(token, known);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::wait_any_readable;
    use crate::proxy::Proxy;
    use pepc_diameter::base;
    use pepc_diameter::s6a::S6aConfig;
    use pepc_mme::{MmeConfig, Output};
    use pepc_s1ap::msg::S1apMessage;
    use std::io::Read;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    /// The test HSS of pepc-diameter (pycrate, an independent codec) on a free port.
    struct Hss(Child);
    impl Drop for Hss {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn start_hss(dir: &std::path::Path) -> Option<(Hss, u16)> {
        let ok = Command::new("python3")
            .args(["-c", "import pycrate_diameter.Diameter3GPP"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ok {
            eprintln!("SKIP: python3 with pycrate_diameter missing (scripts/test.sh installs it)");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../diameter/tests/py/diam.py");
        let mut child = Command::new("python3")
            .args([script, "hss", &port.to_string()])
            .arg(dir.join("hss.log"))
            .args(["hss", "normal", ""])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut ready = [0u8; 6];
        child.stdout.take().unwrap().read_exact(&mut ready).unwrap();
        Some((Hss(child), port))
    }

    use crate::proxy::tests::mme_and_attach;

    /// An attach's ULR and AIR go over Diameter to the test HSS; its answers reach
    /// the MME, which sends the Authentication Request.
    #[test]
    fn an_attach_is_served_by_a_diameter_hss() {
        let dir = std::env::temp_dir().join(format!("pepc-node-s6a-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let Some((_hss, port)) = start_hss(&dir) else {
            return;
        };
        let mut b = base::Config::new("mme.pepc.test", "pepc.test");
        b.request_timeout = Duration::from_secs(3);
        let cfg = DriverConfig {
            peers: vec![format!("127.0.0.1:{port}")],
            base: b,
            app: S6aConfig {
                destination_realm: "test".into(),
                destination_host: None,
                visited_plmn: MmeConfig::default().plmn.0,
            },
            connect_timeout: Duration::from_millis(500),
        };
        let backend = S6aBackend::start(cfg).unwrap();
        let t0 = Instant::now();
        while !backend.driver().is_up() {
            assert!(t0.elapsed() < Duration::from_secs(10), "HSS never up");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut p = Proxy::new(Box::new(backend));
        let fd = p.wake_fds().next().unwrap();
        let (mut mme, mut cp, bytes) = mme_and_attach();
        let mut out = vec![];
        let now = Instant::now();
        mme.handle_s1ap(now, 1, 1, &bytes, &mut cp, &mut out);
        p.serve(&mut mme, now, &mut cp, &mut out, 0);
        assert!(out.is_empty(), "{out:?}");
        let t0 = Instant::now();
        let auth_request = |out: &[Output]| {
            out.iter().any(|o| {
                matches!(o, Output::S1ap { bytes, .. }
                if matches!(S1apMessage::decode(bytes), Ok(S1apMessage::DownlinkNasTransport(_))))
            })
        };
        while !auth_request(&out) {
            assert!(t0.elapsed() < Duration::from_secs(10), "no answer: {out:?}");
            wait_any_readable(&[fd], Duration::from_millis(100)).unwrap();
            p.poll(&mut mme, now, &mut cp, &mut out);
        }
        // The AIR alone: the ULR waits for the UE's authentication.
        assert_eq!((p.stats.requests, p.stats.answers), (1, 1));
        assert_eq!(mme.stats.hss_failures, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
