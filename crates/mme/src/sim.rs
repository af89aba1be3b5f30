//! A scripted eNB and UE around a real [`Mme`] and slice: every S1AP message is
//! encoded and decoded, the UE runs the USIM (Milenage) and NAS security. Used by the
//! tests and by `pepc bench attach` ([`run_inprocess_attaches`]).

use crate::cause::EmmCause;
use crate::endpoint::{EndpointOut, S1apEndpoint, SlicePolicy};
use crate::hss::{HssProxy, HssRequest};
use crate::mme::{AssocId, Input, Mme, Output};
use crate::nasx::{
    self, Direction, NasEmmMessage as Emm, NasEpsMessage, NasEsmMessage as Esm, UeSecCtx,
};
use crate::MmeConfig;
use pepc_hss::{Hss, OpKind, PdnType, Subscriber};
use pepc_s1ap::msg::*;
use pepc_s1ap::{ERabTunnel, Ecgi, EnbId, GlobalEnbId, SupportedTa, Tai};
use pepc_security::{Key128, Key256, Milenage};
use pepc_slice::control::ControlPlane;
use pepc_slice::datapath::DataPlane;
use pepc_slice::slice::{build, SliceConfig};
use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    pub proxy: HssProxy,
    pub hss_mode: HssMode,
    /// Requests held in [`HssMode::Hold`], with the slice that sent each, in order.
    pub held_hss: VecDeque<(usize, HssRequest)>,
    /// IMSIs the slices purged at the HSS ([`HssRequest::Purge`]), in order.
    pub purged: Vec<u64>,
    /// Usage records the slices wrote ([`Output::UsageRecord`]), in order.
    pub usage_records: Vec<crate::pcrf::UsageRecord>,
    /// Every request the slices sent the PCRF, in order.
    pub pcrf_requests: Vec<crate::pcrf::PcrfRequest>,
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
        let endpoint = S1apEndpoint::new(cfg.clone(), slices, SlicePolicy::ConsistentHash);
        let focus = endpoint.slice_of_imsi(FOCUS_IMSI);
        let layout =
            pepc_slice::ids::IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 8).expect("layout");
        let mut all: Vec<Option<SliceSim>> = (0..slices)
            .map(|s| {
                let mut sc = SliceConfig::for_users(users);
                sc.slice = s as u32;
                sc.layout = layout;
                let (cp, dp) = build(&sc);
                let mut mme = Mme::new(cfg.clone());
                mme.set_role(endpoint.role(s));
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
            proxy: HssProxy::new(hss.clone(), test_rand()),
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
            now: Instant::now(),
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
    pub fn stat(&mut self, f: impl Fn(&crate::MmeStats) -> u64) -> u64 {
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

    /// Let every slice's data plane apply published updates (data thread side).
    pub fn sync(&mut self) {
        for s in 0..self.slices() {
            self.slice(s).2.sync(0);
        }
    }
}

/// What the simulated UE did with a downlink NAS message.
#[derive(Debug)]
pub struct UeStep {
    pub got: String,
    pub reply: Option<Vec<u8>>,
}

/// A UE: USIM + NAS (EMM/ESM) with security. Keys stay inside.
pub struct SimUe {
    pub imsi: String,
    mil: Milenage,
    pub sqn_max: u64,
    pub sec: Option<UeSecCtx>,
    kasme: Option<Key256>,
    pub enb_ue_id: u32,
    pub mme_ue_id: Option<u32>,
    pub m_tmsi: Option<u32>,
    pub ue_ip: Option<Ipv4Addr>,
    pub net_cap: Vec<u8>,
    pub pti: u8,
    pub received: Vec<String>,
    /// Corrupt the next RES (to test the network's check).
    pub corrupt_k: bool,
    /// Default bearers of the UE's PDN connections with their addresses.
    pub pdns: Vec<(u8, Ipv4Addr)>,
    /// Dedicated bearers (EBI, linked EBI, TFT value).
    pub dedicated: Vec<(u8, u8, Vec<u8>)>,
    /// PTI of the last ESM message the network sent.
    pub last_pti: u8,
    /// RAND of the last Authentication Request (the key-leak test derives CK/IK).
    pub last_rand: Option<[u8; 16]>,
}

impl SimUe {
    pub fn new(imsi: &str, enb_ue_id: u32) -> SimUe {
        let k = Key128::from_hex(TEST_K).expect("valid");
        let opc = Key128::from_hex(TEST_OPC).expect("valid");
        SimUe {
            imsi: imsi.into(),
            mil: Milenage::new_with_opc(&k, *opc.as_bytes()),
            sqn_max: 0,
            sec: None,
            kasme: None,
            enb_ue_id,
            mme_ue_id: None,
            m_tmsi: None,
            ue_ip: None,
            // EEA0-2, EIA0-2
            net_cap: vec![0xe0, 0xe0],
            pti: 1,
            received: vec![],
            corrupt_k: false,
            pdns: vec![],
            dedicated: vec![],
            last_pti: 0,
            last_rand: None,
        }
    }

    /// A protected ESM message with a fresh PTI (2..=254).
    fn esm_request<T: Into<Esm>>(&mut self, m: T) -> Vec<u8> {
        self.pti = if self.pti >= 254 { 2 } else { self.pti + 1 };
        let msg = NasEpsMessage::new_esm(m, 0, self.pti);
        self.protect(&msg)
    }

    /// Standalone PDN Connectivity Request (TS 24.301 §6.5.1), IPv4.
    pub fn pdn_connectivity_request(&mut self, apn: Option<&str>) -> Vec<u8> {
        let mut p = nasx::NasPdnConnectivityRequest::new(
            nasx::NasRequestType::new(1),
            nasx::NasPdnType::new(1),
        );
        p.access_point_name = apn.map(|a| nasx::NasAccessPointName::new(nasx::apn_value(a)));
        self.esm_request(p)
    }

    /// PDN Disconnect Request for the PDN connection of default bearer `linked`.
    pub fn pdn_disconnect_request(&mut self, linked: u8) -> Vec<u8> {
        self.esm_request(nasx::NasPdnDisconnectRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(linked),
        ))
    }

    /// Bearer Resource Allocation Request: `qos` is the EPS QoS value, `tfa` the traffic
    /// flow aggregate value.
    pub fn bearer_resource_allocation_request(
        &mut self,
        linked: u8,
        qos: Vec<u8>,
        tfa: Vec<u8>,
    ) -> Vec<u8> {
        self.esm_request(nasx::NasBearerResourceAllocationRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(linked),
            nasx::NasTrafficFlowAggregateDescription::new(tfa),
            nasx::NasEpsQualityOfService::new(qos),
        ))
    }

    /// Bearer Resource Modification Request for bearer `ebi` with aggregate `tfa`.
    pub fn bearer_resource_modification_request(&mut self, ebi: u8, tfa: Vec<u8>) -> Vec<u8> {
        self.esm_request(nasx::NasBearerResourceModificationRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(ebi),
            nasx::NasTrafficFlowAggregateDescription::new(tfa),
        ))
    }

    /// A UE whose USIM has another K (MAC failure at the UE).
    pub fn with_wrong_key(mut self) -> SimUe {
        let k = Key128::from_hex("00112233445566778899aabbccddeeff").expect("valid");
        let opc = Key128::from_hex(TEST_OPC).expect("valid");
        self.mil = Milenage::new_with_opc(&k, *opc.as_bytes());
        self
    }

    fn pdn_request(&self, esm_info: bool) -> NasEpsMessage {
        let mut p = nasx::NasPdnConnectivityRequest::new(
            nasx::NasRequestType::new(1),
            nasx::NasPdnType::new(1),
        );
        if esm_info {
            p.esm_information_transfer_flag = Some(nasx::NasEsmInformationTransferFlag::new(1));
        }
        NasEpsMessage::new_esm(p, 0, self.pti)
    }

    /// Attach Request by IMSI (or by `guti` when given), plain.
    pub fn attach_request(&self, guti: Option<u32>, esm_info: bool) -> Vec<u8> {
        let id = match guti {
            Some(t) => nasx::guti_value([0x00, 0xf1, 0x10], 7, 9, t),
            None => nasx::imsi_value(&self.imsi),
        };
        let r = nasx::NasAttachRequest::new(
            nasx::NasEpsAttachType::new(1),
            nasx::NasKeySetIdentifier::new(7),
            nasx::NasEpsMobileIdentity::new(id),
            nasx::NasUeNetworkCapability::new(self.net_cap.clone()),
            nasx::NasEsmMessageContainer::from_esm_message(&self.pdn_request(esm_info))
                .expect("ESM"),
        );
        NasEpsMessage::new_emm(r).encode().expect("encodes")
    }

    /// Attach Request by the GUTI `m_tmsi` from this MME, integrity protected (not
    /// ciphered) with the UE's current EPS security context and its KSI, as a UE that
    /// kept its context after detach sends it (TS 24.301 §4.4.5, §5.5.1.2.2).
    pub fn attach_request_protected(&mut self, m_tmsi: u32) -> Vec<u8> {
        let ksi = self.sec.as_ref().expect("security context").ksi;
        let r = nasx::NasAttachRequest::new(
            nasx::NasEpsAttachType::new(1),
            nasx::NasKeySetIdentifier::new(ksi),
            nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, m_tmsi)),
            nasx::NasUeNetworkCapability::new(self.net_cap.clone()),
            nasx::NasEsmMessageContainer::from_esm_message(&self.pdn_request(false)).expect("ESM"),
        );
        let b = self
            .sec
            .as_mut()
            .expect("security context")
            .ctx
            .protect(
                &NasEpsMessage::new_emm(r),
                nasx::NasEpsSecurityHeaderType::IntegrityProtected,
                Direction::Uplink,
            )
            .expect("protects");
        self.up_count();
        b
    }

    pub fn protect(&mut self, m: &NasEpsMessage) -> Vec<u8> {
        let b = self
            .sec
            .as_mut()
            .expect("security context")
            .protect(m, false, Direction::Uplink)
            .expect("protects");
        self.up_count();
        b
    }

    pub fn service_request(&mut self) -> Vec<u8> {
        let s = self.sec.as_mut().expect("security context");
        let sr = s.ctx.protect_service_request(s.ksi).expect("SR");
        s.last_ul_count = s
            .ctx
            .nas_count(Direction::Uplink)
            .map(|c| c.get().wrapping_sub(1))
            .unwrap_or(0);
        NasEpsMessage::ServiceRequest(sr).encode().expect("encodes")
    }

    pub fn tau_request(&mut self, active: bool) -> Vec<u8> {
        let t = self.m_tmsi.expect("registered");
        let r = nasx::NasTrackingAreaUpdateRequest::new(
            nasx::NasEpsUpdateType::new(if active { 0x08 } else { 0 }),
            nasx::NasKeySetIdentifier::new(self.sec.as_ref().map(|s| s.ksi).unwrap_or(7)),
            nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, t)),
        );
        // TAU Request is integrity protected, not ciphered (TS 24.301 §4.4.5).
        let s = self.sec.as_mut().expect("security context");
        let b = s
            .ctx
            .protect(
                &NasEpsMessage::new_emm(r),
                nasx::NasEpsSecurityHeaderType::IntegrityProtected,
                Direction::Uplink,
            )
            .expect("protects");
        self.up_count();
        b
    }

    pub fn detach_request(&mut self, switch_off: bool) -> Vec<u8> {
        let t = self.m_tmsi.expect("registered");
        let r = nasx::NasDetachRequestUeOriginating::new(
            nasx::NasDetachType::new(if switch_off { 0x09 } else { 0x01 }),
            nasx::NasKeySetIdentifier::new(self.sec.as_ref().map(|s| s.ksi).unwrap_or(7)),
            nasx::NasEpsMobileIdentity::new(nasx::guti_value([0x00, 0xf1, 0x10], 1, 1, t)),
        );
        self.protect(&NasEpsMessage::new_emm(r))
    }

    /// KeNB the eNB should have been given: KDF(KASME, last uplink COUNT).
    pub fn expected_kenb(&self) -> Option<Key256> {
        let s = self.sec.as_ref()?;
        Some(pepc_security::kenb(&s.kasme, s.last_ul_count))
    }

    fn up_count(&mut self) {
        if let Some(s) = self.sec.as_mut() {
            s.last_ul_count = s
                .ctx
                .nas_count(Direction::Uplink)
                .map(|c| c.get().wrapping_sub(1))
                .unwrap_or(0);
        }
    }

    /// Process a downlink NAS PDU and produce the UE's answer.
    pub fn on_downlink(&mut self, bytes: &[u8]) -> Result<UeStep, String> {
        let sht = bytes.first().map(|b| b >> 4).unwrap_or(0);
        let msg = if sht == 0 {
            NasEpsMessage::decode(bytes).map_err(|e| e.to_string())?
        } else if sht == 3 {
            // Security Mode Command: build the new context from its algorithms, then verify.
            let inner = nasx::unverified_inner(bytes)
                .or_else(|| match NasEpsMessage::decode(bytes).ok()? {
                    NasEpsMessage::SecurityProtected(_, i) => Some(*i),
                    _ => None,
                })
                .ok_or("SMC undecodable")?;
            let NasEpsMessage::Emm(_, Emm::SecurityModeCommand(c)) = &inner else {
                return Err("SHT 3 without SMC".into());
            };
            let algs = c.selected_nas_security_algorithms.value;
            let eea = pepc_security::Eea::try_from((algs >> 4) & 7).map_err(|e| e.to_string())?;
            let eia = pepc_security::Eia::try_from(algs & 7).map_err(|e| e.to_string())?;
            let kasme = self.kasme.clone().ok_or("SMC before AKA")?;
            let mut ctx = UeSecCtx::new(kasme, c.nas_key_set_identifier.value & 7, eea, eia)?;
            let m = ctx
                .unprotect(bytes, Direction::Downlink)
                .map_err(|e| format!("SMC MAC: {e:?}"))?;
            self.sec = Some(ctx);
            m
        } else {
            let s = self
                .sec
                .as_mut()
                .ok_or("protected message without context")?;
            s.unprotect(bytes, Direction::Downlink)
                .map_err(|e| format!("DL unprotect: {e:?}"))?
        };
        let (got, reply) = match msg {
            NasEpsMessage::Emm(_, e) => self.on_emm(e)?,
            NasEpsMessage::Esm(h, e) => {
                self.on_esm(h.eps_bearer_identity, h.procedure_transaction_identity, e)?
            }
            other => (format!("{other:?}"), None),
        };
        self.received.push(got.clone());
        Ok(UeStep { got, reply })
    }

    fn on_emm(&mut self, e: Emm) -> Result<(String, Option<Vec<u8>>), String> {
        Ok(match e {
            Emm::IdentityRequest(_) => {
                let r = nasx::NasIdentityResponse::new(nasx::NasMobileIdentity::new(
                    nasx::imsi_value(&self.imsi),
                ));
                (
                    "IdentityRequest".into(),
                    Some(
                        NasEpsMessage::new_emm(r)
                            .encode()
                            .map_err(|e| e.to_string())?,
                    ),
                )
            }
            Emm::AuthenticationRequest(a) => {
                let mut rand = [0u8; 16];
                rand.copy_from_slice(&a.authentication_parameter_rand.value);
                let mut autn = [0u8; 16];
                autn.copy_from_slice(&a.authentication_parameter_autn.value);
                self.last_rand = Some(rand);
                let reply = match pepc_security::usim_check(&self.mil, rand, autn, self.sqn_max) {
                    Ok(ok) => {
                        self.sqn_max = ok.sqn;
                        let sqn_ak: [u8; 6] = autn[..6].try_into().expect("6");
                        self.kasme = Some(pepc_security::kasme(
                            &ok.ck,
                            &ok.ik,
                            [0x00, 0xf1, 0x10],
                            sqn_ak,
                        ));
                        let mut res = ok.res.to_vec();
                        if self.corrupt_k {
                            res[0] ^= 1;
                        }
                        NasEpsMessage::new_emm(nasx::NasAuthenticationResponse::new(
                            nasx::NasAuthenticationResponseParameter::new(res),
                        ))
                    }
                    Err(pepc_security::UsimError::SynchFailure { auts }) => {
                        let mut f = nasx::NasAuthenticationFailure::new(nasx::NasEmmCause::new(
                            EmmCause::SynchFailure.into(),
                        ));
                        f.authentication_failure_parameter =
                            Some(nasx::NasAuthenticationFailureParameter::new(auts.to_vec()));
                        NasEpsMessage::new_emm(f)
                    }
                    Err(_) => NasEpsMessage::new_emm(nasx::NasAuthenticationFailure::new(
                        nasx::NasEmmCause::new(EmmCause::MacFailure.into()),
                    )),
                };
                (
                    "AuthenticationRequest".into(),
                    Some(reply.encode().map_err(|e| e.to_string())?),
                )
            }
            Emm::SecurityModeCommand(_) => {
                let m = NasEpsMessage::new_emm(nasx::NasSecurityModeComplete::new());
                let s = self.sec.as_mut().ok_or("no ctx")?;
                let b = s.protect(&m, true, Direction::Uplink)?;
                self.up_count();
                ("SecurityModeCommand".into(), Some(b))
            }
            Emm::AttachAccept(a) => {
                if let Some(g) = a.guti.as_ref() {
                    if let nasx::Identity::Guti(_, _, _, t) = nasx::parse_identity(&g.value) {
                        self.m_tmsi = Some(t);
                    }
                }
                if let Ok(NasEpsMessage::Esm(h, Esm::ActivateDefaultEpsBearerContextRequest(r))) =
                    a.esm_message_container.decode_as_esm_message()
                {
                    self.ue_ip = r.pdn_address.ipv4().map(Ipv4Addr::from);
                    self.pdns.clear();
                    self.dedicated.clear();
                    if let Some(ip) = self.ue_ip {
                        self.pdns.push((h.eps_bearer_identity, ip));
                    }
                    let acc = NasEpsMessage::new_esm(
                        nasx::NasActivateDefaultEpsBearerContextAccept::new(),
                        h.eps_bearer_identity,
                        0,
                    );
                    let c = nasx::NasEsmMessageContainer::from_esm_message(&acc)
                        .map_err(|e| e.to_string())?;
                    let m = NasEpsMessage::new_emm(nasx::NasAttachComplete::new(c));
                    let b = self.protect(&m);
                    ("AttachAccept".into(), Some(b))
                } else {
                    return Err("Attach Accept without default bearer".into());
                }
            }
            Emm::DetachRequestUeTerminated(_) => {
                let b = self.protect(&NasEpsMessage::new_emm(nasx::NasDetachAccept::new()));
                ("DetachRequest".into(), Some(b))
            }
            Emm::GutiReallocationCommand(g) => {
                if let nasx::Identity::Guti(_, _, _, t) = nasx::parse_identity(&g.guti.value) {
                    self.m_tmsi = Some(t);
                }
                let b = self.protect(&NasEpsMessage::new_emm(
                    nasx::NasGutiReallocationComplete::new(),
                ));
                ("GutiReallocationCommand".into(), Some(b))
            }
            Emm::AttachReject(r) => (format!("AttachReject#{}", r.emm_cause.value), None),
            Emm::ServiceReject(r) => (format!("ServiceReject#{}", r.emm_cause.value), None),
            Emm::TrackingAreaUpdateReject(r) => (format!("TauReject#{}", r.emm_cause.value), None),
            other => (format!("{:?}", other.message_type()), None),
        })
    }

    fn on_esm(&mut self, ebi: u8, pti: u8, e: Esm) -> Result<(String, Option<Vec<u8>>), String> {
        self.last_pti = pti;
        Ok(match e {
            Esm::ActivateDefaultEpsBearerContextRequest(r) => {
                // Standalone PDN connectivity (the attach one rides in Attach Accept).
                let ip = r
                    .pdn_address
                    .ipv4()
                    .map(Ipv4Addr::from)
                    .ok_or("default bearer without an IPv4 address")?;
                self.pdns.retain(|(e, _)| *e != ebi);
                self.pdns.push((ebi, ip));
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasActivateDefaultEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("ActivateDefaultEpsBearerContextRequest".into(), Some(b))
            }
            Esm::PdnConnectivityReject(r) => {
                (format!("PdnConnectivityReject#{}", r.esm_cause.value), None)
            }
            Esm::PdnDisconnectReject(r) => {
                (format!("PdnDisconnectReject#{}", r.esm_cause.value), None)
            }
            Esm::BearerResourceAllocationReject(r) => (
                format!("BearerResourceAllocationReject#{}", r.esm_cause.value),
                None,
            ),
            Esm::BearerResourceModificationReject(r) => (
                format!("BearerResourceModificationReject#{}", r.esm_cause.value),
                None,
            ),
            Esm::EsmInformationRequest(_) => {
                let mut r = nasx::NasEsmInformationResponse::new();
                r.access_point_name = Some(nasx::NasAccessPointName::new(nasx::apn_value("ims")));
                let b = self.protect(&NasEpsMessage::new_esm(r, 0, self.pti));
                ("EsmInformationRequest".into(), Some(b))
            }
            Esm::ActivateDedicatedEpsBearerContextRequest(r) => {
                self.dedicated.retain(|(e, _, _)| *e != ebi);
                self.dedicated.push((
                    ebi,
                    r.linked_eps_bearer_identity.bearer_identity(),
                    r.tft.value.to_vec(),
                ));
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasActivateDedicatedEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("ActivateDedicatedEpsBearerContextRequest".into(), Some(b))
            }
            Esm::ModifyEpsBearerContextRequest(r) => {
                if let (Some(t), Some(d)) = (
                    r.tft.as_ref(),
                    self.dedicated.iter_mut().find(|(e, _, _)| *e == ebi),
                ) {
                    d.2 = t.value.to_vec();
                }
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasModifyEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("ModifyEpsBearerContextRequest".into(), Some(b))
            }
            Esm::DeactivateEpsBearerContextRequest(_) => {
                // A default bearer takes its PDN connection and linked bearers with it.
                if self.pdns.iter().any(|(e, _)| *e == ebi) {
                    self.pdns.retain(|(e, _)| *e != ebi);
                    self.dedicated.retain(|(_, l, _)| *l != ebi);
                }
                self.dedicated.retain(|(e, _, _)| *e != ebi);
                let b = self.protect(&NasEpsMessage::new_esm(
                    nasx::NasDeactivateEpsBearerContextAccept::new(),
                    ebi,
                    pti,
                ));
                ("DeactivateEpsBearerContextRequest".into(), Some(b))
            }
            other => (format!("{:?}", other.message_type()), None),
        })
    }
}

/// The eNB's downlink TEID for a UE's bearer in these simulations.
pub fn enb_teid(enb_ue_id: u32, ebi: u8) -> u32 {
    0x0100_0000 | (enb_ue_id << 4) | ebi as u32
}

pub const ENB_ADDR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// Run the eNB+UE side against everything the MME sent, until quiet. Returns the
/// names of the S1AP messages seen (in order).
pub fn pump(
    h: &mut Harness,
    ue: &mut SimUe,
    assoc: AssocId,
    mut pending: Vec<(AssocId, S1apMessage)>,
) -> Result<Vec<String>, String> {
    let mut seen = vec![];
    let tai = Tai {
        plmn: h.mme.config().plmn,
        tac: 1,
    };
    let ecgi = Ecgi {
        plmn: h.mme.config().plmn,
        cell_id: 0x101,
    };
    while !pending.is_empty() {
        let mut next = vec![];
        for (_a, m) in pending {
            seen.push(m.name().to_string());
            match m {
                S1apMessage::DownlinkNasTransport(d) => {
                    ue.mme_ue_id = Some(d.mme_ue_id);
                    let step = ue.on_downlink(&d.nas_pdu)?;
                    if let Some(r) = step.reply {
                        next.extend(h.send(
                            assoc,
                            UplinkNasTransport {
                                mme_ue_id: d.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                nas_pdu: r,
                                ecgi,
                                tai,
                            },
                        ));
                    }
                }
                S1apMessage::InitialContextSetupRequest(r) => {
                    ue.mme_ue_id = Some(r.mme_ue_id);
                    // The KeNB must be the one the UE derives (TS 33.401 A.3) from its
                    // last uplink COUNT before it answers.
                    let expected = ue.expected_kenb();
                    let mut reply = None;
                    if let Some(nas) = r.erabs.first().and_then(|e| e.nas_pdu.clone()) {
                        reply = ue.on_downlink(&nas)?.reply;
                    }
                    if let Some(k) = expected {
                        if k.as_bytes() != &r.security_key.0 {
                            return Err("KeNB mismatch".into());
                        }
                    }
                    let erabs = r
                        .erabs
                        .iter()
                        .map(|e| ERabTunnel {
                            id: e.id,
                            transport: ENB_ADDR,
                            teid: enb_teid(ue.enb_ue_id, e.id),
                        })
                        .collect();
                    next.extend(h.send(
                        assoc,
                        InitialContextSetupResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            erabs,
                            failed: vec![],
                        },
                    ));
                    if let Some(b) = reply {
                        next.extend(h.send(
                            assoc,
                            UplinkNasTransport {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                nas_pdu: b,
                                ecgi,
                                tai,
                            },
                        ));
                    }
                }
                S1apMessage::UeContextReleaseCommand(c) => {
                    // The eNB answers for the connection the command names (an older
                    // one of the UE's, when a new attach superseded it).
                    let (mme_ue_id, enb_ue_id) = match c.ids {
                        pepc_s1ap::UeS1apIds::Pair {
                            mme_ue_id,
                            enb_ue_id,
                        } => (mme_ue_id, enb_ue_id),
                        pepc_s1ap::UeS1apIds::MmeOnly(i) => (i, ue.enb_ue_id),
                    };
                    if h.hold_releases.contains(&mme_ue_id) {
                        h.held_releases
                            .push(S1apMessage::UeContextReleaseCommand(c));
                        continue;
                    }
                    next.extend(h.send(
                        assoc,
                        UeContextReleaseComplete {
                            mme_ue_id,
                            enb_ue_id,
                        },
                    ));
                }
                S1apMessage::ERabReleaseCommand(r) => {
                    let mut reply = None;
                    if let Some(nas) = r.nas_pdu.clone() {
                        reply = ue.on_downlink(&nas)?.reply;
                    }
                    next.extend(h.send(
                        assoc,
                        ERabReleaseResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            released: r.erabs.iter().map(|e| e.id).collect(),
                            failed: vec![],
                        },
                    ));
                    if let Some(b) = reply {
                        next.extend(h.send(
                            assoc,
                            UplinkNasTransport {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                nas_pdu: b,
                                ecgi,
                                tai,
                            },
                        ));
                    }
                }
                S1apMessage::ERabModifyRequest(r) => {
                    let mut reply = None;
                    if let Some(e) = r.erabs.first() {
                        reply = ue.on_downlink(&e.nas_pdu)?.reply;
                    }
                    next.extend(h.send(
                        assoc,
                        ERabModifyResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            modified: r.erabs.iter().map(|e| e.id).collect(),
                            failed: vec![],
                        },
                    ));
                    if let Some(b) = reply {
                        next.extend(h.send(
                            assoc,
                            UplinkNasTransport {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                nas_pdu: b,
                                ecgi,
                                tai,
                            },
                        ));
                    }
                }
                S1apMessage::ERabSetupRequest(r) => {
                    let mut reply = None;
                    if let Some(nas) = r.erabs.first().and_then(|e| e.nas_pdu.clone()) {
                        reply = ue.on_downlink(&nas)?.reply;
                    }
                    let setup = r
                        .erabs
                        .iter()
                        .map(|e| ERabTunnel {
                            id: e.id,
                            transport: ENB_ADDR,
                            teid: enb_teid(ue.enb_ue_id, e.id),
                        })
                        .collect();
                    next.extend(h.send(
                        assoc,
                        ERabSetupResponse {
                            mme_ue_id: r.mme_ue_id,
                            enb_ue_id: ue.enb_ue_id,
                            setup,
                            failed: vec![],
                        },
                    ));
                    if let Some(b) = reply {
                        next.extend(h.send(
                            assoc,
                            UplinkNasTransport {
                                mme_ue_id: r.mme_ue_id,
                                enb_ue_id: ue.enb_ue_id,
                                nas_pdu: b,
                                ecgi,
                                tai,
                            },
                        ));
                    }
                }
                _ => {}
            }
        }
        pending = next;
    }
    Ok(seen)
}

/// Initial UE Message carrying `nas`.
pub fn initial_ue(h: &Harness, ue: &SimUe, nas: Vec<u8>, s_tmsi: Option<u32>) -> InitialUeMessage {
    let plmn = h.mme.config().plmn;
    InitialUeMessage {
        enb_ue_id: ue.enb_ue_id,
        nas_pdu: nas,
        tai: Tai { plmn, tac: 1 },
        ecgi: Ecgi {
            plmn,
            cell_id: 0x101,
        },
        rrc_cause: 3,
        s_tmsi: s_tmsi.map(|m_tmsi| pepc_s1ap::STmsi {
            mmec: h.mme.config().mme_code,
            m_tmsi,
        }),
        gummei: None,
    }
}

/// A full attach by IMSI through S1AP; returns the S1AP message names seen.
pub fn attach(h: &mut Harness, ue: &mut SimUe, assoc: AssocId) -> Result<Vec<String>, String> {
    let nas = ue.attach_request(None, false);
    let first = h.send(assoc, initial_ue(h, ue, nas, None));
    pump(h, ue, assoc, first)
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttachBenchResult {
    pub attaches: usize,
    pub attaches_per_s: f64,
    pub completion_us_p50: f64,
    pub completion_us_p99: f64,
}

/// Full in-process attaches (all messages encoded and decoded, AKA and NAS security on
/// both sides, vectors from an in-memory HSS), one after the other.
pub fn run_inprocess_attaches(n: usize) -> AttachBenchResult {
    run_inprocess_attaches_keep(n, |_, _| {})
}

/// The same, calling `inspect` with the harness before the first attach (`false`) and
/// at the end, every UE still attached (`true`).
pub fn run_inprocess_attaches_keep(
    n: usize,
    mut inspect: impl FnMut(&Harness, bool),
) -> AttachBenchResult {
    let mut h = Harness::new(n + 16, MmeConfig::default());
    let subs: Vec<Subscriber> = (0..n)
        .map(|i| subscriber(&format!("00101{:010}", i + 1)))
        .collect();
    h.hss.add_many(&subs).expect("HSS add");
    h.enb_setup(1, 1, 1);
    let mut lat = Vec::with_capacity(n);
    inspect(&h, false);
    let t0 = Instant::now();
    for i in 0..n {
        let mut ue = SimUe::new(&format!("00101{:010}", i + 1), i as u32 + 1);
        let s = Instant::now();
        attach(&mut h, &mut ue, 1).expect("attach completes");
        lat.push(s.elapsed().as_secs_f64() * 1e6);
        if i % 256 == 0 {
            h.sync();
        }
    }
    let total = t0.elapsed().as_secs_f64();
    h.sync();
    inspect(&h, true);
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let q = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0.0)
    };
    AttachBenchResult {
        attaches: n,
        attaches_per_s: n as f64 / total.max(1e-9),
        completion_us_p50: q(0.5),
        completion_us_p99: q(0.99),
    }
}
