//! The scripted eNB and UE around a real [`Mme`] and slice (every S1AP message is
//! encoded and decoded, the UE runs the USIM (Milenage) and NAS security), and the test
//! subscribers.

use pepc_hss::{Hss, OpKind, PdnType, Subscriber};
use pepc_mme::cause::EmmCause;
use pepc_mme::endpoint::{EndpointOut, S1apEndpoint, SlicePolicy};
use pepc_mme::hss::HssRequest;
use pepc_mme::mme::{AssocId, Input, Mme, Output};
use pepc_mme::nasx::{
    self, Direction, NasEmmMessage as Emm, NasEpsMessage, NasEsmMessage as Esm, UeSecCtx,
};
use pepc_mme::ControlPlane;
use pepc_mme::MmeConfig;
use pepc_s1ap::msg::*;
use pepc_s1ap::{ERabTunnel, Ecgi, EnbId, GlobalEnbId, SupportedTa, Tai};
use pepc_security::{Key128, Key256, Milenage};
use pepc_slice::datapath::DataPlane;
use pepc_slice::slice::{build_with_signaling, SliceConfig};
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod flow;
mod proxy;
mod ue;

pub use flow::*;
pub use proxy::*;
pub use ue::*;

/// Open5GS test keys (also in /work/shared/captures).
pub const TEST_K: &str = "465B5CE8B199B49FAA5F0A2EE238A6BC";
pub const TEST_OPC: &str = "E8ED289DEBA952E4283B54E88E6183CA";

pub fn subscriber(imsi: &str) -> Subscriber {
    let opc = Key128::from_hex(TEST_OPC).expect("valid");
    Subscriber {
        imsi: imsi.into(),
        k: Key128::from_hex(TEST_K).expect("valid"),
        op_kind: OpKind::Opc(*opc.as_bytes()),
        amf: [0x80, 0x00],
        sqn: 32,
        msisdn: "1".into(),
        apn: "internet".into(),
        pdn_type: PdnType::Ipv4,
        qci: 9,
        arp_priority: 8,
        ambr_ul_bps: 50_000_000,
        ambr_dl_bps: 100_000_000,
    }
}

/// One slice's MME, control plane and data plane.
pub struct SliceSim {
    pub mme: Mme,
    pub cp: ControlPlane,
    pub dp: DataPlane,
}

/// How the harness's proxy serves the slices' HSS requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HssMode {
    /// Answered at once, inline (as the node's embedded HSS is).
    #[default]
    Inline,
    /// Held in [`Harness::held_hss`] until [`Harness::answer_hss`] (a slow or absent
    /// HSS): other UEs' messages go on meanwhile.
    Hold,
}

/// The node's S1AP endpoint, its slices (MME + control + data plane each) and an
/// HSS behind the node's proxy, driven message by message with a manual clock. `mme`, `cp` and `dp` are the
/// *focus* slice, the one the policy gives the test IMSI [`FOCUS_IMSI`]; the others
/// are in `others` (None at the focus index).
pub struct Harness {
    pub endpoint: S1apEndpoint,
    pub mme: Mme,
    pub cp: ControlPlane,
    pub dp: DataPlane,
    pub focus: usize,
    pub others: Vec<Option<SliceSim>>,
    pub hss: Arc<Hss>,
    /// Serves every slice's [`Output::Hss`] (over `hss`).
    pub proxy: InlineProxy,
    pub hss_mode: HssMode,
    /// Requests held in [`HssMode::Hold`], with the slice that sent each, in order.
    pub held_hss: VecDeque<(usize, HssRequest)>,
    /// IMSIs the slices purged at the HSS ([`HssRequest::Purge`]), in order.
    pub purged: Vec<u64>,
    /// Usage records the slices wrote ([`Output::UsageRecord`]), in order.
    pub usage_records: Vec<pepc_mme::pcrf::UsageRecord>,
    /// Every request the slices sent the PCRF, in order.
    pub pcrf_requests: Vec<pepc_mme::pcrf::PcrfRequest>,
    /// The PCRF never answers (its requests are only recorded).
    pub pcrf_silent: bool,
    /// [`pump`] leaves UE Context Release Commands for these MME UE S1AP IDs
    /// unanswered, in `held_releases` (an eNB that has not answered yet).
    pub hold_releases: Vec<u32>,
    pub held_releases: Vec<S1apMessage>,
    /// The state store as the slices' checkpoints left it (IMSI → snapshot), with
    /// `MmeConfig::checkpoints`.
    pub checkpoints: std::collections::BTreeMap<u64, Vec<u8>>,
    pub now: Instant,
    pub logs: Vec<String>,
}

/// The IMSI whose policy slice is a harness's focus slice.
pub const FOCUS_IMSI: u64 = 1010000000001;

fn test_rand() -> Box<dyn FnMut() -> [u8; 16] + Send> {
    let mut ctr = 0u64;
    Box::new(move || {
        ctr += 1;
        let mut r = [0x5au8; 16];
        r[..8].copy_from_slice(&ctr.to_be_bytes());
        r
    })
}

impl Harness {
    pub fn new(users: usize, cfg: MmeConfig) -> Harness {
        Self::sliced(users, cfg, 1)
    }

    /// A node of `slices` slices (consistent-hash policy), each sized for `users`.
    pub fn sliced(users: usize, cfg: MmeConfig, slices: usize) -> Harness {
        let hss = Arc::new(Hss::in_memory().expect("in-memory HSS"));
        let now = Instant::now();
        let endpoint = S1apEndpoint::new(cfg.clone(), slices, SlicePolicy::ConsistentHash);
        let focus = endpoint.slice_of_imsi(FOCUS_IMSI);
        let layout =
            pepc_slice::ids::IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 8).expect("layout");
        let mut all: Vec<Option<SliceSim>> = (0..slices)
            .map(|s| {
                let mut sc = SliceConfig::for_users(users);
                sc.slice = s as u32;
                sc.layout = layout;
                let (mut cp, dp) = build_with_signaling(&sc);
                let mut mme = Mme::new(cfg.clone(), now);
                mme.set_role(endpoint.role(s));
                // Every harness run is recorded and, when the harness goes, replayed:
                // each test's scenario is also a determinism check.
                mme.start_recording(&mut cp);
                Some(SliceSim { mme, cp, dp })
            })
            .collect();
        let f = all[focus].take().expect("focus slice");
        Harness {
            endpoint,
            mme: f.mme,
            cp: f.cp,
            dp: f.dp,
            focus,
            others: all,
            proxy: InlineProxy::new(hss.clone(), test_rand()),
            hss,
            hss_mode: HssMode::Inline,
            held_hss: VecDeque::new(),
            purged: Vec::new(),
            usage_records: Vec::new(),
            pcrf_requests: Vec::new(),
            pcrf_silent: false,
            hold_releases: Vec::new(),
            held_releases: Vec::new(),
            checkpoints: Default::default(),
            now,
            logs: vec![],
        }
    }

    /// The `k`-th test IMSI (from [`FOCUS_IMSI`] up) whose slice is the focus slice.
    pub fn focus_imsi(&self, k: usize) -> String {
        let imsi = (FOCUS_IMSI..)
            .filter(|i| self.endpoint.slice_of_imsi(*i) == self.focus)
            .nth(k)
            .expect("IMSIs");
        format!("{imsi:015}")
    }

    pub fn slices(&self) -> usize {
        self.others.len()
    }

    /// Slice `s`'s MME and control plane.
    pub fn slice(&mut self, s: usize) -> (&mut Mme, &mut ControlPlane, &mut DataPlane) {
        if s == self.focus {
            (&mut self.mme, &mut self.cp, &mut self.dp)
        } else {
            let x = self.others[s].as_mut().expect("slice");
            (&mut x.mme, &mut x.cp, &mut x.dp)
        }
    }

    /// The slice whose control plane holds `imsi`, and its UE slot.
    pub fn find_imsi(&mut self, imsi: u64) -> Option<(usize, u32)> {
        (0..self.slices()).find_map(|s| {
            let (_, cp, _) = self.slice(s);
            cp.find_imsi(imsi).map(|(_, slot)| (s, slot))
        })
    }

    /// Sum of a counter over every slice's MME.
    pub fn stat(&mut self, f: impl Fn(&pepc_mme::MmeStats) -> u64) -> u64 {
        (0..self.slices()).map(|s| f(&self.slice(s).0.stats)).sum()
    }

    /// Registered or in-progress contexts over every slice.
    pub fn ue_count(&mut self) -> usize {
        (0..self.slices()).map(|s| self.slice(s).0.ue_count()).sum()
    }

    /// Run what the endpoint returned through the slices until nothing is left.
    fn drive(&mut self, mut eo: EndpointOut) -> Vec<(AssocId, S1apMessage)> {
        let mut wire = vec![];
        loop {
            wire.append(&mut eo.wire);
            if eo.slices.is_empty() {
                break;
            }
            let inputs = std::mem::take(&mut eo.slices);
            for (s, i) in inputs {
                let mut out = vec![];
                let now = self.now;
                let (mme, cp, _) = self.slice(s);
                mme.handle(now, i, cp, &mut out);
                for o in out {
                    self.route(s, o, &mut eo);
                }
            }
        }
        self.collect(wire)
    }

    /// A slice's output: HSS requests to the proxy (their answers back to the
    /// slice), the rest to the endpoint.
    fn route(&mut self, s: usize, o: Output, eo: &mut EndpointOut) {
        match o {
            // A purge is answered to no one: recorded for the tests, never held.
            Output::Hss(HssRequest::Purge { imsi }) => self.purged.push(imsi),
            Output::Hss(req) => match self.hss_mode {
                HssMode::Inline => {
                    if let Some(a) = self.proxy.answer(req) {
                        eo.slices.push((s, Input::Hss(a)))
                    }
                }
                HssMode::Hold => self.held_hss.push_back((s, req)),
            },
            // The embedded PCRF answers inline (unless silent), whatever the HSS mode.
            Output::Pcrf(req) => {
                self.pcrf_requests.push(req.clone());
                if self.pcrf_silent {
                    return;
                }
                if let Some(a) = self.proxy.pcrf.answer(req) {
                    eo.slices.push((s, Input::Pcrf(a)))
                }
            }
            Output::UsageRecord(r) => self.usage_records.push(*r),
            Output::Checkpoint { imsi, snapshot } => {
                self.checkpoints.insert(imsi, snapshot.0);
            }
            Output::Forget { imsi } => {
                self.checkpoints.remove(&imsi);
            }
            o => self.endpoint.on_slice_output(s, o, eo),
        }
    }

    /// Answer the `i`-th held HSS request now and run what follows.
    pub fn answer_hss(&mut self, i: usize) -> Vec<(AssocId, S1apMessage)> {
        let mut eo = EndpointOut::default();
        if let Some((s, Some(a))) = self
            .held_hss
            .remove(i)
            .map(|(s, req)| (s, self.proxy.answer(req)))
        {
            eo.slices.push((s, Input::Hss(a)));
        }
        self.drive(eo)
    }

    fn collect(&mut self, out: Vec<Output>) -> Vec<(AssocId, S1apMessage)> {
        let mut r = vec![];
        for o in out {
            match o {
                Output::S1ap { assoc, bytes, .. } => match S1apMessage::decode(&bytes) {
                    Ok(m) => r.push((assoc, m)),
                    Err(e) => self.logs.push(format!("MME sent undecodable S1AP: {e}")),
                },
                Output::CloseAssoc { assoc } => self.logs.push(format!("close {assoc}")),
                other => self.logs.push(format!("unrouted output {other:?}")),
            }
        }
        r
    }

    /// A transport event or slice input: `EnbUp`, `EnbDown` and `S1ap` go to the
    /// node's endpoint, the others to the focus slice's MME.
    pub fn input(&mut self, i: Input) -> Vec<(AssocId, S1apMessage)> {
        let mut eo = EndpointOut::default();
        match i {
            Input::EnbUp { assoc, out_streams } => self.endpoint.assoc_up(assoc, out_streams),
            Input::EnbDown { assoc } => self.endpoint.assoc_down(assoc, &mut eo),
            Input::S1ap {
                assoc,
                stream,
                bytes,
            } => self.endpoint.on_s1ap(assoc, stream, bytes, &mut eo),
            other => eo.slices.push((self.focus, other)),
        }
        self.drive(eo)
    }

    /// Overload control: slice `s` reports `depth` messages waiting (as the node's
    /// drivers do every round).
    pub fn backlog(&mut self, s: usize, depth: usize) -> Vec<(AssocId, S1apMessage)> {
        let mut eo = EndpointOut::default();
        let now = self.now;
        self.endpoint.observe_backlog(now, s, depth, &mut eo);
        self.drive(eo)
    }

    /// A slice input straight to slice `s` (data-path requests, tests).
    pub fn input_to(&mut self, s: usize, i: Input) -> Vec<(AssocId, S1apMessage)> {
        let mut eo = EndpointOut::default();
        eo.slices.push((s, i));
        self.drive(eo)
    }

    /// The node's own Reset of an eNB's UE-associated connections.
    pub fn reset_enb(&mut self, assoc: AssocId) -> Vec<(AssocId, S1apMessage)> {
        let mut eo = EndpointOut::default();
        self.endpoint
            .reset_enb(assoc, pepc_s1ap::Cause::OM_INTERVENTION, &mut eo);
        self.drive(eo)
    }

    pub fn send(
        &mut self,
        assoc: AssocId,
        m: impl Into<S1apMessage>,
    ) -> Vec<(AssocId, S1apMessage)> {
        let bytes = m.into().encode().expect("test message encodes");
        self.input(Input::S1ap {
            assoc,
            stream: 1,
            bytes,
        })
    }

    /// Advance the clock and run due timers of every slice.
    pub fn advance(&mut self, d: Duration) -> Vec<(AssocId, S1apMessage)> {
        self.now += d;
        let mut eo = EndpointOut::default();
        for s in 0..self.slices() {
            let mut out = vec![];
            let now = self.now;
            let (mme, cp, _) = self.slice(s);
            mme.handle_timeout(now, cp, &mut out);
            for o in out {
                self.route(s, o, &mut eo);
            }
        }
        self.drive(eo)
    }

    /// Association up + S1 Setup for an eNB with `gid` serving TAC `tac` of 001/01.
    pub fn enb_setup(&mut self, assoc: AssocId, gid: u32, tac: u16) -> S1apMessage {
        self.input(Input::EnbUp {
            assoc,
            out_streams: 4,
        });
        let plmn = self.mme.config().plmn;
        let req = S1SetupRequest {
            global_enb_id: GlobalEnbId {
                plmn,
                enb_id: EnbId::Macro(gid),
            },
            enb_name: Some(format!("enb{gid}")),
            supported_tas: vec![SupportedTa {
                tac,
                plmns: vec![plmn],
            }],
            paging_drx: Some(128),
        };
        self.send(assoc, req)
            .pop()
            .map(|x| x.1)
            .expect("S1 Setup answered")
    }

    /// Replay every slice's recording so far against a fresh MME and control plane
    /// (`crate::record`): the report of each, in slice order.
    pub fn replay_recordings(&mut self) -> Vec<pepc_mme::record::replay::ReplayReport> {
        (0..self.slices())
            .filter_map(|s| {
                let bytes = self.slice(s).0.recorded()?;
                Some(
                    pepc_mme::record::replay::replay(bytes, Instant::now())
                        .expect("a readable recording"),
                )
            })
            .collect()
    }

    /// Stop recording (a benchmark or a storm: nothing to replay).
    pub fn stop_recording(&mut self) {
        for s in 0..self.slices() {
            let (mme, cp, _) = self.slice(s);
            mme.stop_recording(cp);
        }
    }

    /// Let every slice's data plane apply published updates (data thread side).
    pub fn sync(&mut self) {
        for s in 0..self.slices() {
            self.slice(s).2.sync(0);
        }
    }
}

/// A harness that goes after its test passed replays what its slices recorded: every
/// output must come out byte-identical.
impl Drop for Harness {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        for r in self.replay_recordings() {
            if let Some(m) = r.mismatch {
                panic!(
                    "slice {} of {}: the replay of its recording differs at {m}",
                    r.slice.0, r.slice.1
                );
            }
        }
    }
}
