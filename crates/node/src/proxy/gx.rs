//! The PCRF proxy's Diameter backend: the MME's PCRF requests served by
//! an external PCRF over Gx (TS 29.212), through `pepc_diameter`'s client on a thread
//! of its own, one client for the node's slices (one Origin-Host to the PCRF, as for
//! S6a). Answers go back to the slice whose MME UE S1AP ID their reference carries,
//! and a RAR's decision to the slice that opened the session
//! ([`pepc_mme::Input::PolicyUpdate`]).

use crate::proxy::PcrfBackend;
use pepc_diameter::driver::{DriverConfig, GxDriver, Route};
use pepc_diameter::gx::{GxConfig, GxEvent};
use pepc_mme::{Input, PcrfAnswer, PcrfRequest};
use std::os::fd::RawFd;

pub struct GxBackend {
    driver: GxDriver,
    events: Vec<GxEvent>,
}

impl GxBackend {
    /// One backend per slice over one client: answers to slice `route(mme_ue_id)`.
    pub fn start_routed(
        cfg: DriverConfig<GxConfig>,
        slices: usize,
        route: Route,
        thread: &str,
    ) -> std::io::Result<Vec<GxBackend>> {
        Ok(GxDriver::start_routed(cfg, slices, route, thread)?
            .into_iter()
            .map(|driver| GxBackend {
                driver,
                events: Vec::new(),
            })
            .collect())
    }

    pub fn driver(&self) -> &GxDriver {
        &self.driver
    }
}

impl PcrfBackend for GxBackend {
    fn submit(&mut self, req: PcrfRequest, _answers: &mut Vec<PcrfAnswer>) {
        self.driver.submit(req);
    }

    fn poll(&mut self, answers: &mut Vec<PcrfAnswer>, pushed: &mut Vec<Input>) {
        self.driver.poll(answers);
        self.driver.poll_events(&mut self.events);
        for e in self.events.drain(..) {
            match e {
                GxEvent::PolicyUpdate {
                    imsi,
                    ebi,
                    decision,
                    ..
                } => pushed.push(Input::PolicyUpdate {
                    imsi,
                    ebi: Some(ebi),
                    decision,
                }),
                GxEvent::PeerUp { peer, host } => {
                    tracing::info!("Gx peer {peer} ({host}) up")
                }
                GxEvent::PeerDown { peer, reason } => {
                    tracing::warn!("Gx peer {peer} down: {reason}")
                }
            }
        }
    }

    fn wake_fd(&self) -> Option<RawFd> {
        Some(self.driver.wake_fd())
    }
}
