//! The HSS proxy's Diameter backend (issue 13): the MME's HSS requests served by an
//! external HSS over S6a (TS 29.272), through `pepc_diameter`'s client on a thread of
//! its own. Answers come back through [`HssBackend::poll`] and the backend's wake
//! descriptor, as with [`crate::proxy::ThreadedBackend`].
//!
//! What the HSS asks of us (CLR, IDR) is already answered by the client; it waits
//! here as [`S6aEvent`]s until the node takes it ([`S6aBackend::take_events`]) to
//! detach the UE or apply the new subscription.

use crate::proxy::HssBackend;
use pepc_diameter::driver::{DriverConfig, S6aDriver};
use pepc_diameter::s6a::S6aEvent;
use pepc_mme::{HssAnswer, HssRequest};
use std::os::fd::RawFd;

/// Bound on HSS-initiated events kept for the node: past it the oldest are dropped
/// (and counted), so an HSS flooding CLRs cannot grow our memory.
const MAX_EVENTS: usize = 4096;

pub struct S6aBackend {
    driver: S6aDriver,
    events: std::collections::VecDeque<S6aEvent>,
    /// Events dropped because the node did not take them in time.
    pub events_dropped: u64,
}

impl S6aBackend {
    pub fn start(cfg: DriverConfig) -> std::io::Result<S6aBackend> {
        Ok(S6aBackend {
            driver: S6aDriver::start(cfg)?,
            events: Default::default(),
            events_dropped: 0,
        })
    }

    pub fn driver(&self) -> &S6aDriver {
        &self.driver
    }

    /// CLR/IDR (already answered) and peer changes, oldest first.
    pub fn take_events(&mut self) -> Vec<S6aEvent> {
        self.collect();
        self.events.drain(..).collect()
    }

    fn collect(&mut self) {
        let mut new = Vec::new();
        self.driver.poll_events(&mut new);
        for e in new {
            if self.events.len() == MAX_EVENTS {
                self.events.pop_front();
                self.events_dropped += 1;
            }
            self.events.push_back(e);
        }
    }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::wait_any_readable;
    use crate::proxy::Proxy;
    use pepc_diameter::base;
    use pepc_diameter::s6a::S6aConfig;
    use pepc_mme::sim::{initial_ue, Harness, SimUe};
    use pepc_mme::{Input, Mme, MmeConfig, Output};
    use pepc_s1ap::msg::S1apMessage;
    use pepc_s1ap::{EnbId, GlobalEnbId};
    use pepc_slice::slice::{build, SliceConfig};
    use std::io::Read;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    const IMSI: &str = "001010000000001";

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

    fn mme_and_attach() -> (Mme, pepc_slice::control::ControlPlane, Vec<u8>) {
        let cfg = MmeConfig::default();
        let plmn = cfg.plmn;
        let mut mme = Mme::new(cfg.clone());
        let (mut cp, _dp) = build(&SliceConfig::for_users(16));
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
        let h = Harness::new(1, cfg);
        let ue = SimUe::new(IMSI, 7);
        let msg: S1apMessage = initial_ue(&h, &ue, ue.attach_request(None, false), None).into();
        (mme, cp, msg.encode().unwrap())
    }

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
            s6a: S6aConfig {
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
        let fd = p.wake_fd().unwrap();
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
        assert_eq!((p.stats.requests, p.stats.answers), (2, 2));
        assert_eq!(mme.stats.hss_failures, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
