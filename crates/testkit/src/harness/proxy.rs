//! The HSS and PCRF requests of an MME answered inline, as the node's proxy does with
//! the embedded HSS and PCRF: for the harness and the in-process attach benchmark.

use super::*;
use pepc_hss::seam::EmbeddedHss;
use pepc_mme::hss::{serve_requests, Proxied};
use pepc_pcrf::EmbeddedPcrf;

/// The embedded HSS and PCRF, answering inline.
pub struct InlineProxy {
    pub hss: EmbeddedHss,
    /// No rules unless given some.
    pub pcrf: EmbeddedPcrf,
}

impl InlineProxy {
    pub fn new(hss: Arc<Hss>, rand: Box<dyn FnMut() -> [u8; 16] + Send>) -> InlineProxy {
        InlineProxy {
            hss: EmbeddedHss::new(hss, rand),
            pcrf: EmbeddedPcrf::default(),
        }
    }

    /// Answer one HSS request (`None`: a purge, which has no answer).
    pub fn answer(&mut self, req: HssRequest) -> Option<pepc_mme::HssAnswer> {
        self.hss.answer(req)
    }

    /// Answer every HSS and PCRF request in `out` (from index `from`) and feed the
    /// answers to `mme`, until none is left (an answer may lead to the next request).
    /// The other outputs stay in `out`, in order.
    pub fn serve(
        &mut self,
        mme: &mut Mme,
        now: Instant,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
        from: usize,
    ) {
        serve_requests(out, from, |req, o| match req {
            Proxied::Hss(req) => {
                if let Some(a) = self.hss.answer(req) {
                    mme.handle(now, Input::Hss(a), cp, o);
                }
            }
            Proxied::Pcrf(req) => {
                if let Some(a) = self.pcrf.answer(req) {
                    mme.handle(now, Input::Pcrf(a), cp, o);
                }
            }
        });
    }
}
