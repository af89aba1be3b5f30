//! Sans-IO eNB: the S1AP side of one emulated cell. S1AP PDUs and UE-side requests in,
//! S1AP PDUs and UE-side deliveries out. No sockets, no clocks.

use std::collections::HashMap;
use std::net::Ipv4Addr;

use pepc_s1ap::msg::*;
use pepc_s1ap::{
    Cause, ERabAdmitted, ERabCause, ERabTunnel, Ecgi, GlobalEnbId, PagingIdentity, Plmn, STmsi,
    SecurityContext, SupportedTa, Tai, TargetId, UeS1apIds, UeSecurityCapabilities,
};

/// Index of an emulated UE, global across all emulated eNBs.
pub type UeId = u32;

/// RRC establishment causes used in Initial UE Message (TS 36.413 RRC-Establishment-Cause).
pub mod rrc_cause {
    pub const MT_ACCESS: u8 = 2;
    pub const MO_SIGNALLING: u8 = 3;
    pub const MO_DATA: u8 = 4;
}

/// Static identity of one emulated eNB.
#[derive(Debug, Clone)]
pub struct EnbConfig {
    /// 0-based position among the emulated eNBs; also the high bits of its TEIDs.
    pub index: u32,
    pub global_enb_id: GlobalEnbId,
    pub plmn: Plmn,
    pub tac: u16,
    pub cell_id: u32,
    /// S1-U address advertised in E-RAB setup answers.
    pub gtpu_addr: Ipv4Addr,
    pub name: String,
    /// Number of SCTP outbound streams; UE-associated signalling uses streams 1.. .
    pub out_streams: u16,
}

impl EnbConfig {
    pub fn tai(&self) -> Tai {
        Tai {
            plmn: self.plmn,
            tac: self.tac,
        }
    }
    pub fn ecgi(&self) -> Ecgi {
        Ecgi {
            plmn: self.plmn,
            cell_id: self.cell_id,
        }
    }
}

/// One E-RAB as the eNB holds it: uplink (S-GW) and downlink (eNB) tunnel ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bearer {
    pub erab_id: u8,
    pub qci: u8,
    pub ul_addr: Ipv4Addr,
    pub ul_teid: u32,
    pub dl_teid: u32,
}

/// The UE context an X2 source hands to the target (what X2AP Handover Request carries).
#[derive(Debug, Clone)]
pub struct X2Context {
    pub ue: UeId,
    pub mme_ue_id: u32,
    pub bearers: Vec<Bearer>,
    pub ue_security_capabilities: UeSecurityCapabilities,
}

/// Something the driver asks of the eNB.
#[derive(Debug, Clone)]
pub enum EnbInput {
    /// One S1AP PDU from the MME.
    S1ap(Vec<u8>),
    /// A NAS message from a UE: Initial UE Message if the UE has no S1 connection here,
    /// else Uplink NAS Transport.
    UplinkNas {
        ue: UeId,
        nas: Vec<u8>,
        s_tmsi: Option<STmsi>,
        rrc_cause: u8,
    },
    /// eNB-initiated release (user inactivity): UE Context Release Request.
    ReleaseRequest { ue: UeId },
    /// S1 handover, source side: Handover Required toward `target`.
    StartS1Handover {
        ue: UeId,
        target: GlobalEnbId,
        target_tai: Tai,
    },
    /// S1 handover, target side: a Handover Request with this MME UE S1AP ID is for `ue`.
    ExpectHandover { ue: UeId, mme_ue_id: u32 },
    /// S1 handover, target side: the UE reached the cell; Handover Notify.
    UeArrived { ue: UeId },
    /// X2 handover, target side: the UE arrived with this context; Path Switch Request.
    X2HandoverIn(X2Context),
}

/// Something the eNB asks of the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnbOutput {
    /// Send on the S1-MME association.
    S1ap { stream: u16, pdu: Vec<u8> },
    /// Deliver a downlink NAS message to the UE.
    Nas { ue: UeId, nas: Vec<u8> },
    /// S1 Setup answered.
    SetupDone { ok: bool, cause: Option<Cause> },
    /// A user-plane tunnel is up (or its uplink end changed).
    TunnelUp { ue: UeId, bearer: Bearer },
    /// A user-plane tunnel is gone.
    TunnelDown { ue: UeId, erab_id: u8, dl_teid: u32 },
    /// The UE's S1 connection is released (it is idle, detached, or left the cell).
    Released { ue: UeId, cause: Cause },
    /// Paging for a UE with this identity.
    Paging(PagingIdentity),
    /// Initial Context Setup done (UE connected with bearers).
    ContextSetup { ue: UeId },
    /// X2 path switch ended.
    PathSwitched { ue: UeId, ok: bool, ncc: Option<u8> },
    /// S1 handover, source: Handover Command received; the UE may move to the target.
    HandoverCommand { ue: UeId },
    /// S1 handover, source: preparation failed.
    HandoverFailed { ue: UeId, cause: Cause },
    /// S1 handover, target: Handover Request acknowledged.
    HandoverPrepared { ue: UeId },
    /// A message could not be handled (decode error, unknown UE); counted as failures.
    Error(String),
    /// The MME is overloaded (OVERLOAD START) and this RRC connection's establishment
    /// cause is one its action rejects: RRC Connection Reject with a wait time (TS
    /// 36.331 §5.3.3.8); the UE backs off.
    RrcReject { ue: UeId },
    /// OVERLOAD START (`true`) or STOP received.
    Overload { on: bool },
}

#[derive(Debug, Clone)]
struct UeCtx {
    ue: UeId,
    enb_ue_id: u32,
    mme_ue_id: Option<u32>,
    bearers: Vec<Bearer>,
    caps: UeSecurityCapabilities,
    /// NH/NCC from the last Path Switch Ack / Handover Request (kept for the next hop).
    security: Option<SecurityContext>,
    /// The UE left via S1 handover; the coming release is not an idle transition.
    handed_over: bool,
}

/// One emulated eNB.
#[derive(Debug)]
pub struct Enb {
    cfg: EnbConfig,
    setup: bool,
    next_enb_ue_id: u32,
    next_teid: u32,
    by_ue: HashMap<UeId, u32>,
    ctx: HashMap<u32, UeCtx>,
    expected_ho: HashMap<u32, UeId>,
    /// The action of the MME's OVERLOAD START in force (TS 36.413 §8.7.6).
    overload: Option<pepc_s1ap::msg::OverloadAction>,
}

/// Source-to-Target container: the smallest valid HandoverPreparationInformation, the
/// target cell (cell 1 of the target eNB, as the driver numbers cells) and this cell as
/// the UE's history. The MME relays it untouched; a real target eNB parses it.
fn source_to_target_container(source: Ecgi, target: &GlobalEnbId) -> Vec<u8> {
    let enb_id = match target.enb_id {
        pepc_s1ap::EnbId::Macro(v)
        | pepc_s1ap::EnbId::ShortMacro(v)
        | pepc_s1ap::EnbId::LongMacro(v) => v,
        pepc_s1ap::EnbId::Home(v) => v >> 8,
    };
    let target_cell = Ecgi {
        plmn: target.plmn,
        cell_id: (enb_id & 0xf_ffff) << 8 | 1,
    };
    pepc_s1ap::container::source_to_target(
        &pepc_s1ap::container::MIN_HANDOVER_PREPARATION_INFORMATION,
        target_cell,
        &[(source, 30)],
    )
    .unwrap_or_default()
}

impl Enb {
    pub fn new(cfg: EnbConfig) -> Self {
        Enb {
            cfg,
            setup: false,
            next_enb_ue_id: 1,
            next_teid: 1,
            by_ue: HashMap::new(),
            ctx: HashMap::new(),
            expected_ho: HashMap::new(),
            overload: None,
        }
    }

    pub fn config(&self) -> &EnbConfig {
        &self.cfg
    }

    /// True once S1 Setup Response arrived.
    pub fn is_setup(&self) -> bool {
        self.setup
    }

    /// True while the MME has this eNB hold back (OVERLOAD START without its STOP).
    pub fn overloaded(&self) -> bool {
        self.overload.is_some()
    }

    /// Number of UEs with an S1 connection here.
    pub fn connected_ues(&self) -> usize {
        self.ctx.len()
    }

    /// True if `ue` has an S1 connection at this eNB.
    pub fn has_ue(&self, ue: UeId) -> bool {
        self.by_ue.contains_key(&ue)
    }

    /// Streams the association negotiated (from the transport's Up event).
    pub fn set_out_streams(&mut self, n: u16) {
        self.cfg.out_streams = n.max(1);
    }

    /// MME UE S1AP ID of a UE connected here.
    pub fn mme_ue_id(&self, ue: UeId) -> Option<u32> {
        self.by_ue
            .get(&ue)
            .and_then(|id| self.ctx.get(id))
            .and_then(|c| c.mme_ue_id)
    }

    /// Bearers of a UE at this eNB.
    pub fn bearers(&self, ue: UeId) -> Vec<Bearer> {
        self.by_ue
            .get(&ue)
            .and_then(|id| self.ctx.get(id))
            .map(|c| c.bearers.clone())
            .unwrap_or_default()
    }

    /// The S1 Setup Request to send once the association is up.
    pub fn s1_setup(&mut self, out: &mut Vec<EnbOutput>) {
        let m = S1SetupRequest {
            global_enb_id: self.cfg.global_enb_id,
            enb_name: Some(self.cfg.name.clone()),
            supported_tas: vec![SupportedTa {
                tac: self.cfg.tac,
                plmns: vec![self.cfg.plmn],
            }],
            paging_drx: Some(128),
        };
        self.send(0, m.into(), out);
    }

    /// X2 handover, source side: hands the UE's context to the target and forgets it
    /// (the X2 UE Context Release is implicit). `None` if the UE is not connected here.
    pub fn x2_take(&mut self, ue: UeId) -> Option<X2Context> {
        let id = self.by_ue.remove(&ue)?;
        let c = self.ctx.remove(&id)?;
        Some(X2Context {
            ue,
            mme_ue_id: c.mme_ue_id?,
            bearers: c.bearers,
            ue_security_capabilities: c.caps,
        })
    }

    /// Forget every UE (association lost).
    pub fn reset(&mut self) {
        self.by_ue.clear();
        self.ctx.clear();
        self.expected_ho.clear();
        self.setup = false;
        self.overload = None;
    }

    fn stream_for(&self, enb_ue_id: u32) -> u16 {
        if self.cfg.out_streams <= 1 {
            0
        } else {
            1 + (enb_ue_id % u32::from(self.cfg.out_streams - 1)) as u16
        }
    }

    fn send(&self, stream: u16, m: S1apMessage, out: &mut Vec<EnbOutput>) {
        match m.encode() {
            Ok(pdu) => out.push(EnbOutput::S1ap { stream, pdu }),
            Err(e) => out.push(EnbOutput::Error(format!("encode {}: {e}", m.name()))),
        }
    }

    fn alloc_enb_ue_id(&mut self) -> u32 {
        // 24-bit ID space; skip IDs still in use after a wrap.
        loop {
            let id = self.next_enb_ue_id;
            self.next_enb_ue_id = (self.next_enb_ue_id + 1) & 0x00ff_ffff;
            if !self.ctx.contains_key(&id) {
                return id;
            }
        }
    }

    /// TEIDs carry the eNB index in the top 12 bits so one shared S1-U socket can
    /// demultiplex every emulated eNB's tunnels.
    fn alloc_teid(&mut self) -> u32 {
        let low = self.next_teid & 0x000f_ffff;
        self.next_teid = if low == 0x000f_ffff { 1 } else { low + 1 };
        ((self.cfg.index + 1) & 0xfff) << 20 | low.max(1)
    }

    fn new_ctx(&mut self, ue: UeId) -> u32 {
        let id = self.alloc_enb_ue_id();
        self.by_ue.insert(ue, id);
        self.ctx.insert(
            id,
            UeCtx {
                ue,
                enb_ue_id: id,
                mme_ue_id: None,
                bearers: Vec::new(),
                caps: UeSecurityCapabilities::default(),
                security: None,
                handed_over: false,
            },
        );
        id
    }

    /// Feed one input; outputs are appended to `out`.
    pub fn handle(&mut self, input: EnbInput, out: &mut Vec<EnbOutput>) {
        match input {
            EnbInput::S1ap(bytes) => match S1apMessage::decode(&bytes) {
                Ok(m) => self.on_s1ap(m, out),
                Err(e) => out.push(EnbOutput::Error(format!("S1AP decode: {e}"))),
            },
            EnbInput::UplinkNas {
                ue,
                nas,
                s_tmsi,
                rrc_cause,
            } => self.uplink_nas(ue, nas, s_tmsi, rrc_cause, out),
            EnbInput::ReleaseRequest { ue } => {
                if let Some(c) = self.by_ue.get(&ue).and_then(|i| self.ctx.get(i)) {
                    if let Some(mme) = c.mme_ue_id {
                        let m = UeContextReleaseRequest {
                            mme_ue_id: mme,
                            enb_ue_id: c.enb_ue_id,
                            cause: Cause::USER_INACTIVITY,
                        };
                        self.send(self.stream_for(c.enb_ue_id), m.into(), out);
                    }
                }
            }
            EnbInput::StartS1Handover {
                ue,
                target,
                target_tai,
            } => {
                let Some(c) = self.by_ue.get(&ue).and_then(|i| self.ctx.get(i)) else {
                    out.push(EnbOutput::HandoverFailed {
                        ue,
                        cause: Cause::UNKNOWN_ENB_UE_S1AP_ID,
                    });
                    return;
                };
                let Some(mme) = c.mme_ue_id else {
                    out.push(EnbOutput::HandoverFailed {
                        ue,
                        cause: Cause::UNKNOWN_MME_UE_S1AP_ID,
                    });
                    return;
                };
                let m = HandoverRequired {
                    mme_ue_id: mme,
                    enb_ue_id: c.enb_ue_id,
                    handover_type: 0, // intraLTE
                    cause: Cause::HANDOVER_DESIRABLE_FOR_RADIO_REASON,
                    target: TargetId::Enb {
                        global_enb_id: target,
                        tai: target_tai,
                    },
                    container: source_to_target_container(self.cfg.ecgi(), &target),
                };
                self.send(self.stream_for(c.enb_ue_id), m.into(), out);
            }
            EnbInput::ExpectHandover { ue, mme_ue_id } => {
                self.expected_ho.insert(mme_ue_id, ue);
            }
            EnbInput::UeArrived { ue } => {
                let Some(c) = self.by_ue.get(&ue).and_then(|i| self.ctx.get(i)) else {
                    out.push(EnbOutput::Error(format!(
                        "UE {ue} arrived without preparation"
                    )));
                    return;
                };
                let m = HandoverNotify {
                    mme_ue_id: c.mme_ue_id.unwrap_or(0),
                    enb_ue_id: c.enb_ue_id,
                    ecgi: self.cfg.ecgi(),
                    tai: self.cfg.tai(),
                };
                self.send(self.stream_for(c.enb_ue_id), m.into(), out);
            }
            EnbInput::X2HandoverIn(x) => {
                let id = self.new_ctx(x.ue);
                let mut bearers = Vec::with_capacity(x.bearers.len());
                for b in &x.bearers {
                    let dl = self.alloc_teid();
                    bearers.push(Bearer { dl_teid: dl, ..*b });
                }
                let tunnels: Vec<ERabTunnel> = bearers
                    .iter()
                    .map(|b| ERabTunnel {
                        id: b.erab_id,
                        transport: self.cfg.gtpu_addr,
                        teid: b.dl_teid,
                    })
                    .collect();
                if let Some(c) = self.ctx.get_mut(&id) {
                    c.bearers = bearers.clone();
                    c.caps = x.ue_security_capabilities;
                    // The MME keeps the UE's MME UE S1AP ID across a path switch.
                    c.mme_ue_id = Some(x.mme_ue_id);
                }
                for b in bearers {
                    out.push(EnbOutput::TunnelUp {
                        ue: x.ue,
                        bearer: b,
                    });
                }
                let m = PathSwitchRequest {
                    enb_ue_id: id,
                    erabs: tunnels,
                    source_mme_ue_id: x.mme_ue_id,
                    ecgi: self.cfg.ecgi(),
                    tai: self.cfg.tai(),
                    ue_security_capabilities: x.ue_security_capabilities,
                };
                self.send(self.stream_for(id), m.into(), out);
            }
        }
    }

    fn uplink_nas(
        &mut self,
        ue: UeId,
        nas: Vec<u8>,
        s_tmsi: Option<STmsi>,
        rrc_cause: u8,
        out: &mut Vec<EnbOutput>,
    ) {
        if let Some(c) = self.by_ue.get(&ue).and_then(|i| self.ctx.get(i)) {
            if let Some(mme) = c.mme_ue_id {
                let m = UplinkNasTransport {
                    mme_ue_id: mme,
                    enb_ue_id: c.enb_ue_id,
                    nas_pdu: nas,
                    ecgi: self.cfg.ecgi(),
                    tai: self.cfg.tai(),
                };
                self.send(self.stream_for(c.enb_ue_id), m.into(), out);
                return;
            }
            // No MME ID yet (MME has not answered the Initial UE Message): the UE is
            // retrying; start over with a fresh S1 connection.
            let id = c.enb_ue_id;
            self.ctx.remove(&id);
            self.by_ue.remove(&ue);
        }
        // A new RRC connection: while the MME is overloaded, what its action names
        // is refused here and never reaches it.
        if self.overload.is_some_and(|a| a.rejects(rrc_cause)) {
            out.push(EnbOutput::RrcReject { ue });
            return;
        }
        let id = self.new_ctx(ue);
        let m = InitialUeMessage {
            enb_ue_id: id,
            nas_pdu: nas,
            tai: self.cfg.tai(),
            ecgi: self.cfg.ecgi(),
            rrc_cause,
            s_tmsi,
            gummei: None,
        };
        self.send(self.stream_for(id), m.into(), out);
    }

    fn ctx_mut(&mut self, enb_ue_id: u32, mme_ue_id: u32) -> Option<&mut UeCtx> {
        let c = self.ctx.get_mut(&enb_ue_id)?;
        match c.mme_ue_id {
            Some(m) if m != mme_ue_id => None,
            _ => {
                c.mme_ue_id = Some(mme_ue_id);
                Some(c)
            }
        }
    }

    fn unknown(&self, what: &str, mme: u32, enb: u32, out: &mut Vec<EnbOutput>) {
        out.push(EnbOutput::Error(format!(
            "{what} for unknown UE (MME {mme}, eNB {enb})"
        )));
        let m = ErrorIndication {
            mme_ue_id: Some(mme),
            enb_ue_id: Some(enb),
            cause: Some(Cause::UNKNOWN_PAIR_UE_S1AP_ID),
        };
        self.send(0, m.into(), out);
    }

    fn setup_bearers(&mut self, erabs: &[pepc_s1ap::ERab]) -> Vec<Bearer> {
        erabs
            .iter()
            .map(|e| Bearer {
                erab_id: e.id,
                qci: e.qci,
                ul_addr: e.transport,
                ul_teid: e.teid,
                dl_teid: self.alloc_teid(),
            })
            .collect()
    }

    fn on_s1ap(&mut self, m: S1apMessage, out: &mut Vec<EnbOutput>) {
        use S1apMessage as M;
        match m {
            M::S1SetupResponse(_) => {
                self.setup = true;
                out.push(EnbOutput::SetupDone {
                    ok: true,
                    cause: None,
                });
            }
            M::OverloadStart(o) => {
                self.overload = Some(o.action);
                out.push(EnbOutput::Overload { on: true });
            }
            M::OverloadStop(_) => {
                self.overload = None;
                out.push(EnbOutput::Overload { on: false });
            }
            M::S1SetupFailure(f) => out.push(EnbOutput::SetupDone {
                ok: false,
                cause: Some(f.cause),
            }),
            M::DownlinkNasTransport(d) => match self.ctx_mut(d.enb_ue_id, d.mme_ue_id) {
                Some(c) => out.push(EnbOutput::Nas {
                    ue: c.ue,
                    nas: d.nas_pdu,
                }),
                None => self.unknown("DownlinkNASTransport", d.mme_ue_id, d.enb_ue_id, out),
            },
            M::InitialContextSetupRequest(r) => {
                let bearers = self.setup_bearers(&r.erabs);
                let Some(c) = self.ctx_mut(r.enb_ue_id, r.mme_ue_id) else {
                    self.unknown("InitialContextSetupRequest", r.mme_ue_id, r.enb_ue_id, out);
                    return;
                };
                c.caps = r.ue_security_capabilities;
                let ue = c.ue;
                // Bearers re-established after idle replace the old ones.
                c.bearers.clone_from(&bearers);
                let resp = InitialContextSetupResponse {
                    mme_ue_id: r.mme_ue_id,
                    enb_ue_id: r.enb_ue_id,
                    erabs: bearers
                        .iter()
                        .map(|b| ERabTunnel {
                            id: b.erab_id,
                            transport: self.cfg.gtpu_addr,
                            teid: b.dl_teid,
                        })
                        .collect(),
                    failed: vec![],
                };
                for b in &bearers {
                    out.push(EnbOutput::TunnelUp { ue, bearer: *b });
                }
                self.send(self.stream_for(r.enb_ue_id), resp.into(), out);
                // NAS (Attach Accept) rides in the E-RAB items; deliver after the answer
                // as the radio side would after RRC reconfiguration.
                for e in &r.erabs {
                    if let Some(n) = &e.nas_pdu {
                        out.push(EnbOutput::Nas { ue, nas: n.clone() });
                    }
                }
                out.push(EnbOutput::ContextSetup { ue });
            }
            M::UeContextModificationRequest(r) => {
                if self.ctx_mut(r.enb_ue_id, r.mme_ue_id).is_none() {
                    self.unknown(
                        "UEContextModificationRequest",
                        r.mme_ue_id,
                        r.enb_ue_id,
                        out,
                    );
                    return;
                }
                let resp = UeContextModificationResponse {
                    mme_ue_id: r.mme_ue_id,
                    enb_ue_id: r.enb_ue_id,
                };
                self.send(self.stream_for(r.enb_ue_id), resp.into(), out);
            }
            M::UeContextReleaseCommand(r) => {
                let (mme, enb) = match r.ids {
                    UeS1apIds::Pair {
                        mme_ue_id,
                        enb_ue_id,
                    } => (mme_ue_id, Some(enb_ue_id)),
                    UeS1apIds::MmeOnly(m) => (m, None),
                };
                let enb = enb.or_else(|| {
                    self.ctx
                        .values()
                        .find(|c| c.mme_ue_id == Some(mme))
                        .map(|c| c.enb_ue_id)
                });
                let Some(enb) = enb else {
                    self.unknown("UEContextReleaseCommand", mme, 0, out);
                    return;
                };
                // Answer even for an unknown pair: the MME wants its context gone.
                let resp = UeContextReleaseComplete {
                    mme_ue_id: mme,
                    enb_ue_id: enb,
                };
                self.send(self.stream_for(enb), resp.into(), out);
                if let Some(c) = self.ctx.remove(&enb) {
                    if self.by_ue.get(&c.ue) == Some(&enb) {
                        self.by_ue.remove(&c.ue);
                    }
                    for b in &c.bearers {
                        out.push(EnbOutput::TunnelDown {
                            ue: c.ue,
                            erab_id: b.erab_id,
                            dl_teid: b.dl_teid,
                        });
                    }
                    let cause = if c.handed_over {
                        Cause::SUCCESSFUL_HANDOVER
                    } else {
                        r.cause
                    };
                    out.push(EnbOutput::Released { ue: c.ue, cause });
                }
            }
            M::Paging(p) => out.push(EnbOutput::Paging(p.paging_id)),
            M::ERabSetupRequest(r) => {
                let bearers = self.setup_bearers(&r.erabs);
                let Some(c) = self.ctx_mut(r.enb_ue_id, r.mme_ue_id) else {
                    self.unknown("E-RABSetupRequest", r.mme_ue_id, r.enb_ue_id, out);
                    return;
                };
                let ue = c.ue;
                let mut failed = vec![];
                let mut setup = vec![];
                for b in &bearers {
                    if c.bearers.iter().any(|x| x.erab_id == b.erab_id) {
                        failed.push(ERabCause {
                            id: b.erab_id,
                            cause: Cause::RadioNetwork(17), // multiple-E-RAB-ID-instances
                        });
                    } else {
                        c.bearers.push(*b);
                        setup.push(*b);
                    }
                }
                let resp = ERabSetupResponse {
                    mme_ue_id: r.mme_ue_id,
                    enb_ue_id: r.enb_ue_id,
                    setup: setup
                        .iter()
                        .map(|b| ERabTunnel {
                            id: b.erab_id,
                            transport: self.cfg.gtpu_addr,
                            teid: b.dl_teid,
                        })
                        .collect(),
                    failed,
                };
                for b in &setup {
                    out.push(EnbOutput::TunnelUp { ue, bearer: *b });
                }
                self.send(self.stream_for(r.enb_ue_id), resp.into(), out);
                for e in &r.erabs {
                    if let Some(n) = &e.nas_pdu {
                        out.push(EnbOutput::Nas { ue, nas: n.clone() });
                    }
                }
            }
            M::ERabModifyRequest(r) => {
                let Some(c) = self.ctx_mut(r.enb_ue_id, r.mme_ue_id) else {
                    self.unknown("E-RABModifyRequest", r.mme_ue_id, r.enb_ue_id, out);
                    return;
                };
                let ue = c.ue;
                let mut modified = vec![];
                let mut failed = vec![];
                for e in &r.erabs {
                    match c.bearers.iter_mut().find(|b| b.erab_id == e.id) {
                        Some(b) => {
                            b.qci = e.qci;
                            modified.push(e.id);
                        }
                        None => failed.push(ERabCause {
                            id: e.id,
                            cause: Cause::UNKNOWN_E_RAB_ID,
                        }),
                    }
                }
                let resp = ERabModifyResponse {
                    mme_ue_id: r.mme_ue_id,
                    enb_ue_id: r.enb_ue_id,
                    modified,
                    failed,
                };
                self.send(self.stream_for(r.enb_ue_id), resp.into(), out);
                for e in &r.erabs {
                    out.push(EnbOutput::Nas {
                        ue,
                        nas: e.nas_pdu.clone(),
                    });
                }
            }
            M::ERabReleaseCommand(r) => {
                let Some(c) = self.ctx_mut(r.enb_ue_id, r.mme_ue_id) else {
                    self.unknown("E-RABReleaseCommand", r.mme_ue_id, r.enb_ue_id, out);
                    return;
                };
                let ue = c.ue;
                let mut released = vec![];
                let mut failed = vec![];
                let mut down = vec![];
                for e in &r.erabs {
                    match c.bearers.iter().position(|b| b.erab_id == e.id) {
                        Some(i) => {
                            let b = c.bearers.remove(i);
                            down.push(b);
                            released.push(e.id);
                        }
                        None => failed.push(ERabCause {
                            id: e.id,
                            cause: Cause::UNKNOWN_E_RAB_ID,
                        }),
                    }
                }
                for b in down {
                    out.push(EnbOutput::TunnelDown {
                        ue,
                        erab_id: b.erab_id,
                        dl_teid: b.dl_teid,
                    });
                }
                let resp = ERabReleaseResponse {
                    mme_ue_id: r.mme_ue_id,
                    enb_ue_id: r.enb_ue_id,
                    released,
                    failed,
                };
                self.send(self.stream_for(r.enb_ue_id), resp.into(), out);
                if let Some(n) = r.nas_pdu {
                    out.push(EnbOutput::Nas { ue, nas: n });
                }
            }
            M::PathSwitchRequestAcknowledge(a) => {
                let Some(c) = self.ctx.get_mut(&a.enb_ue_id) else {
                    self.unknown(
                        "PathSwitchRequestAcknowledge",
                        a.mme_ue_id,
                        a.enb_ue_id,
                        out,
                    );
                    return;
                };
                c.mme_ue_id = Some(a.mme_ue_id);
                let ue = c.ue;
                let mut changed = vec![];
                for t in &a.erabs_switched_ul {
                    if let Some(b) = c.bearers.iter_mut().find(|b| b.erab_id == t.id) {
                        b.ul_addr = t.transport;
                        b.ul_teid = t.teid;
                        changed.push(*b);
                    }
                }
                let mut gone = vec![];
                for r in &a.erabs_to_release {
                    if let Some(i) = c.bearers.iter().position(|b| b.erab_id == r.id) {
                        gone.push(c.bearers.remove(i));
                    }
                }
                let ncc = a.security_context.ncc;
                c.security = Some(a.security_context);
                for b in changed {
                    out.push(EnbOutput::TunnelUp { ue, bearer: b });
                }
                for b in gone {
                    out.push(EnbOutput::TunnelDown {
                        ue,
                        erab_id: b.erab_id,
                        dl_teid: b.dl_teid,
                    });
                }
                out.push(EnbOutput::PathSwitched {
                    ue,
                    ok: true,
                    ncc: Some(ncc),
                });
            }
            M::PathSwitchRequestFailure(f) => {
                let ue = self.ctx.get(&f.enb_ue_id).map(|c| c.ue);
                match ue {
                    Some(ue) => {
                        // The target cannot serve the UE: drop it (radio link failure).
                        if let Some(c) = self.ctx.remove(&f.enb_ue_id) {
                            self.by_ue.remove(&c.ue);
                            for b in &c.bearers {
                                out.push(EnbOutput::TunnelDown {
                                    ue,
                                    erab_id: b.erab_id,
                                    dl_teid: b.dl_teid,
                                });
                            }
                        }
                        out.push(EnbOutput::PathSwitched {
                            ue,
                            ok: false,
                            ncc: None,
                        });
                    }
                    None => self.unknown("PathSwitchRequestFailure", f.mme_ue_id, f.enb_ue_id, out),
                }
            }
            M::HandoverCommand(h) => {
                let Some(c) = self.ctx_mut(h.enb_ue_id, h.mme_ue_id) else {
                    self.unknown("HandoverCommand", h.mme_ue_id, h.enb_ue_id, out);
                    return;
                };
                c.handed_over = true;
                let ue = c.ue;
                let bearers = c.bearers.clone();
                let st = EnbStatusTransfer {
                    mme_ue_id: h.mme_ue_id,
                    enb_ue_id: h.enb_ue_id,
                    container: status_container(&bearers),
                };
                self.send(self.stream_for(h.enb_ue_id), st.into(), out);
                out.push(EnbOutput::HandoverCommand { ue });
            }
            M::HandoverPreparationFailure(f) => {
                let ue = self.ctx.get(&f.enb_ue_id).map(|c| c.ue);
                match ue {
                    Some(ue) => out.push(EnbOutput::HandoverFailed { ue, cause: f.cause }),
                    None => {
                        self.unknown("HandoverPreparationFailure", f.mme_ue_id, f.enb_ue_id, out)
                    }
                }
            }
            M::HandoverRequest(r) => {
                let Some(ue) = self.expected_ho.remove(&r.mme_ue_id) else {
                    let m = HandoverFailure {
                        mme_ue_id: r.mme_ue_id,
                        cause: Cause::HO_TARGET_NOT_ALLOWED,
                    };
                    self.send(0, m.into(), out);
                    out.push(EnbOutput::Error(format!(
                        "unexpected Handover Request for MME UE {}",
                        r.mme_ue_id
                    )));
                    return;
                };
                let bearers = self.setup_bearers(&r.erabs);
                let id = self.new_ctx(ue);
                if let Some(c) = self.ctx.get_mut(&id) {
                    c.mme_ue_id = Some(r.mme_ue_id);
                    c.bearers.clone_from(&bearers);
                    c.caps = r.ue_security_capabilities;
                    c.security = Some(r.security_context.clone());
                }
                for b in &bearers {
                    out.push(EnbOutput::TunnelUp { ue, bearer: *b });
                }
                let ack = HandoverRequestAcknowledge {
                    mme_ue_id: r.mme_ue_id,
                    enb_ue_id: id,
                    admitted: bearers
                        .iter()
                        .map(|b| ERabAdmitted {
                            id: b.erab_id,
                            transport: self.cfg.gtpu_addr,
                            teid: b.dl_teid,
                            dl_forwarding: None,
                            ul_forwarding: None,
                        })
                        .collect(),
                    failed: vec![],
                    container: pepc_s1ap::container::target_to_source(
                        &pepc_s1ap::container::MIN_HANDOVER_COMMAND,
                    )
                    .unwrap_or_default(),
                };
                self.send(self.stream_for(id), ack.into(), out);
                out.push(EnbOutput::HandoverPrepared { ue });
            }
            M::MmeStatusTransfer(_) | M::HandoverCancelAcknowledge(_) => {}
            // The MME could not take a new UE (control processing overload): the eNB
            // drops that RRC connection, and the UE backs off as after an RRC reject.
            M::ErrorIndication(ErrorIndication {
                mme_ue_id: None,
                enb_ue_id: Some(id),
                cause: Some(Cause::CONTROL_PROCESSING_OVERLOAD),
            }) if self.ctx.get(&id).is_some_and(|c| c.mme_ue_id.is_none()) => {
                let c = self.ctx.remove(&id).expect("checked");
                self.by_ue.remove(&c.ue);
                out.push(EnbOutput::RrcReject { ue: c.ue });
            }
            M::ErrorIndication(e) => out.push(EnbOutput::Error(format!(
                "Error Indication from MME: {:?}",
                e.cause
            ))),
            M::Reset(r) => {
                let connections = match &r.kind {
                    pepc_s1ap::ResetKind::All => {
                        for c in self.ctx.values() {
                            out.push(EnbOutput::Released {
                                ue: c.ue,
                                cause: r.cause,
                            });
                        }
                        self.by_ue.clear();
                        self.ctx.clear();
                        vec![]
                    }
                    pepc_s1ap::ResetKind::Partial(list) => {
                        for conn in list {
                            let hit = self
                                .ctx
                                .values()
                                .find(|c| {
                                    Some(c.enb_ue_id) == conn.enb_ue_id
                                        || (c.mme_ue_id.is_some() && c.mme_ue_id == conn.mme_ue_id)
                                })
                                .map(|c| c.enb_ue_id);
                            if let Some(id) = hit.and_then(|id| self.ctx.remove(&id)) {
                                self.by_ue.remove(&id.ue);
                                out.push(EnbOutput::Released {
                                    ue: id.ue,
                                    cause: r.cause,
                                });
                            }
                        }
                        list.clone()
                    }
                };
                self.send(0, ResetAcknowledge { connections }.into(), out);
            }
            other => out.push(EnbOutput::Error(format!(
                "unexpected {} from the MME",
                other.name()
            ))),
        }
    }
}

/// ENB-StatusTransfer-TransparentContainer with one COUNT pair per bearer (PDCP SN and
/// HFN zero: the emulator has no PDCP).
fn status_container(bearers: &[Bearer]) -> Vec<u8> {
    use pepc_s1ap::raw::build_s1ap_ie;
    use pepc_s1ap::raw::s1ap as r;
    let count = || r::COUNTvalue::new(r::PDCPSN(0), r::HFN(0), None);
    let mut items = vec![];
    for b in bearers.iter().take(256) {
        let item = r::BearersSubjectToStatusTransferItem::new(
            r::ERABID(b.erab_id.into()),
            count(),
            count(),
            None,
            None,
        );
        if let Ok(f) = build_s1ap_ie!(IGNORE Bearers_SubjectToStatusTransfer_Item(item)) {
            items.push(f);
        }
    }
    if items.is_empty() {
        // The list is SIZE(1..maxnoofE-RABs); an E-RAB 5 placeholder keeps it valid.
        let item =
            r::BearersSubjectToStatusTransferItem::new(r::ERABID(5), count(), count(), None, None);
        if let Ok(f) = build_s1ap_ie!(IGNORE Bearers_SubjectToStatusTransfer_Item(item)) {
            items.push(f);
        }
    }
    let c = r::ENBStatusTransferTransparentContainer::new(
        r::BearersSubjectToStatusTransferList(items),
        None,
    );
    r::encode_open_type(&c)
        .map(|b| b.into_vec())
        .unwrap_or_default()
}
