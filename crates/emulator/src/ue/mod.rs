//! Sans-IO UE: USIM (EPS-AKA over Milenage) and the NAS EMM/ESM procedures of one
//! emulated UE. Commands and downlink NAS in, uplink NAS and procedure results out;
//! time is passed in as nanoseconds.

use std::net::Ipv4Addr;

use pepc_nas::security::{sht, NasSecurityContext, Role};
use pepc_nas::*;
use pepc_security::{
    kasme, sqn_from_u64, usim_check, Eea, Eia, Key128, Key256, Milenage, UsimError,
};

use crate::enb::rrc_cause;

mod emm;
mod esm;

pub use esm::{
    bearer_resource_allocation_request, bearer_resource_release_request, DEDICATED_FLOW_PORT,
};

/// Procedures the emulator times and counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub enum Procedure {
    Attach,
    Detach,
    /// Normal TAU ("TA updating"), without the active flag.
    Tau,
    /// Periodic TAU.
    TauPeriodic,
    /// Normal TAU with the active flag (bearers set up at the end).
    TauActive,
    ServiceRequest,
    /// Connected to idle (eNB-initiated release).
    Release,
    PdnConnect,
    PdnDisconnect,
    DedicatedBearer,
    BearerModify,
    BearerDeactivate,
    X2Handover,
    S1Handover,
}

impl Procedure {
    pub fn name(self) -> &'static str {
        match self {
            Procedure::Attach => "attach",
            Procedure::Detach => "detach",
            Procedure::Tau => "tau",
            Procedure::TauPeriodic => "tau_periodic",
            Procedure::TauActive => "tau_active",
            Procedure::ServiceRequest => "service_request",
            Procedure::Release => "release",
            Procedure::PdnConnect => "pdn_connect",
            Procedure::PdnDisconnect => "pdn_disconnect",
            Procedure::DedicatedBearer => "dedicated_bearer",
            Procedure::BearerModify => "bearer_modify",
            Procedure::BearerDeactivate => "bearer_deactivate",
            Procedure::X2Handover => "x2_handover",
            Procedure::S1Handover => "s1_handover",
        }
    }
}

/// Why a procedure failed.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Failure {
    Timeout,
    /// Reject with this EMM cause.
    Emm(u8),
    /// Reject with this ESM cause.
    Esm(u8),
    AuthReject,
    /// The UE refused the network's challenge (MAC failure, non-EPS AMF).
    AuthFailed(u8),
    /// Integrity check of a downlink NAS message failed.
    Integrity,
    /// The S1 connection went away mid-procedure.
    Released,
    /// Anything else (wrong state, undecodable message).
    Protocol(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout => write!(f, "timeout"),
            Failure::Emm(c) => write!(f, "emm_cause_{c}"),
            Failure::Esm(c) => write!(f, "esm_cause_{c}"),
            Failure::AuthReject => write!(f, "auth_reject"),
            Failure::AuthFailed(c) => write!(f, "auth_failure_{c}"),
            Failure::Integrity => write!(f, "integrity"),
            Failure::Released => write!(f, "released"),
            Failure::Protocol(s) => write!(f, "protocol: {s}"),
        }
    }
}

/// One subscriber as the USIM holds it. Debug hides K and OPc.
#[derive(Clone)]
pub struct UeConfig {
    pub imsi: String,
    pub k: Key128,
    pub opc: [u8; 16],
    /// Serving PLMN (TBCD octets), for KASME.
    pub plmn: [u8; 3],
    pub tac: u16,
    /// APN asked for in ESM Information Response / PDN connectivity; `None` = default.
    pub apn: Option<String>,
    /// Stateless IoT device (PEPC §4.5): only a flag carried in reports here.
    pub iot: bool,
    /// Highest SQN accepted so far (SQN_MS).
    pub sqn_ms: u64,
}

impl std::fmt::Debug for UeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UeConfig")
            .field("imsi", &self.imsi)
            .field("plmn", &self.plmn)
            .field("apn", &self.apn)
            .field("iot", &self.iot)
            .finish_non_exhaustive()
    }
}

/// A command or a network message for the UE.
#[derive(Debug, Clone)]
pub enum UeInput {
    /// Attach (by GUTI if one is held, else by IMSI).
    Attach,
    Detach {
        switch_off: bool,
    },
    Tau {
        periodic: bool,
        active: bool,
    },
    /// Uplink data pending while idle: Service Request.
    ServiceRequest,
    /// Paged: Service Request answering it.
    Paged,
    PdnConnect {
        apn: String,
    },
    PdnDisconnect {
        ebi: u8,
    },
    /// UE-requested bearer resource allocation (TS 24.301 6.5.3) for a flow on the
    /// PDN connection whose default bearer is `linked_ebi`; the network answers with
    /// a dedicated bearer (6.4.2) or a reject.
    BearerResourceAllocation {
        linked_ebi: u8,
    },
    /// UE-requested release of dedicated bearer `ebi` (bearer resource modification,
    /// TS 24.301 6.5.4, TFT operation "delete existing TFT").
    BearerResourceRelease {
        ebi: u8,
    },
    /// A downlink NAS PDU delivered by the eNB.
    Nas(Vec<u8>),
    /// The eNB set up the radio bearers (Initial Context Setup done).
    ContextSetup,
    /// The S1/RRC connection is released: back to idle.
    Released,
    /// The eNB refused the RRC connection (the MME asked it to, OVERLOAD START): the
    /// procedure is tried again after `wait_ns` (RRC wait time, TS 36.331 §5.3.3.8).
    RrcRejected {
        wait_ns: u64,
    },
}

/// Something the UE asks of its eNB or reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UeOutput {
    /// Send NAS uplink (Initial UE Message if no S1 connection, else Uplink NAS Transport).
    Uplink {
        nas: Vec<u8>,
        s_tmsi: Option<(u8, u32)>,
        rrc_cause: u8,
    },
    /// A procedure ended; `started_ns` is when it began.
    Done {
        procedure: Procedure,
        started_ns: u64,
        result: Result<(), Failure>,
    },
    /// PDN address of the default bearer.
    Address {
        ebi: u8,
        addr: Ipv4Addr,
    },
    BearerUp {
        ebi: u8,
        default: bool,
    },
    BearerDown {
        ebi: u8,
    },
    /// The procedure backs off and is tried again after `wait_ns`: the network is
    /// congested (`t3346`: an EMM #22 reject with T3346; else an RRC reject).
    BackOff {
        procedure: Procedure,
        wait_ns: u64,
        t3346: bool,
    },
}

/// EMM state (TS 24.301 §5.1.3.2, reduced).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmmState {
    Deregistered,
    RegisteredInitiated,
    Registered,
    DeregisteredInitiated,
    TauInitiated,
    ServiceRequestInitiated,
}

const IMEISV: &str = "3534900698733001";
/// EEA0-3 and EIA0-3.
const UE_CAPS: UeNetworkCapability = UeNetworkCapability {
    eea: 0xf0,
    eia: 0xf0,
    rest: Vec::new(),
};

/// One emulated UE.
pub struct Ue {
    cfg: UeConfig,
    mil: Milenage,
    state: EmmState,
    connected: bool,
    sec: Option<NasSecurityContext>,
    /// KASME and eKSI from the last successful challenge, until SMC takes them.
    pending_kasme: Option<(Key256, u8)>,
    guti: Option<Guti>,
    pending: Option<(Procedure, u64)>,
    pti: u8,
    /// Active EPS bearers: (EBI, default?).
    bearers: Vec<(u8, bool)>,
    /// Dedicated bearer -> its linked default bearer.
    linked: Vec<(u8, u8)>,
    /// PDN connections: (default EBI, UE address), first = the attach one.
    pdns: Vec<(u8, Ipv4Addr)>,
    /// PTI of the ESM procedure under way (the answer must carry it).
    esm_pti: u8,
    addr: Option<Ipv4Addr>,
    timeout_ns: u64,
    /// A procedure to start again once a back-off ends (ns).
    retry: Option<(UeInput, u64)>,
    /// The time of the input being handled (a back-off runs from it).
    now_ns: u64,
}

impl std::fmt::Debug for Ue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ue")
            .field("imsi", &self.cfg.imsi)
            .field("state", &self.state)
            .field("connected", &self.connected)
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl Ue {
    /// `timeout_ns`: how long a procedure may take before it counts as failed.
    pub fn new(cfg: UeConfig, timeout_ns: u64) -> Self {
        let mil = Milenage::new_with_opc(&cfg.k, cfg.opc);
        Ue {
            cfg,
            mil,
            state: EmmState::Deregistered,
            connected: false,
            sec: None,
            pending_kasme: None,
            guti: None,
            pending: None,
            pti: 0,
            bearers: Vec::new(),
            linked: Vec::new(),
            pdns: Vec::new(),
            esm_pti: 0,
            addr: None,
            timeout_ns,
            retry: None,
            now_ns: 0,
        }
    }

    pub fn imsi(&self) -> &str {
        &self.cfg.imsi
    }
    pub fn is_iot(&self) -> bool {
        self.cfg.iot
    }
    pub fn state(&self) -> EmmState {
        self.state
    }
    pub fn is_registered(&self) -> bool {
        matches!(
            self.state,
            EmmState::Registered | EmmState::TauInitiated | EmmState::ServiceRequestInitiated
        )
    }
    /// ECM-CONNECTED (has an S1 connection).
    pub fn is_connected(&self) -> bool {
        self.connected
    }
    /// A procedure is under way.
    pub fn busy(&self) -> bool {
        self.pending.is_some() || self.retry.is_some()
    }

    /// Backing off (T3346 or an RRC wait time) before trying again.
    pub fn backing_off(&self) -> bool {
        self.retry.is_some()
    }

    /// Back off: the pending procedure ends without a result and starts again at
    /// `now + wait_ns`. Only attach, service request and TAU are retried; anything
    /// else fails.
    fn back_off(&mut self, wait_ns: u64, t3346: bool, out: &mut Vec<UeOutput>) {
        let Some((p, _)) = self.pending else {
            return;
        };
        let again = match p {
            Procedure::Attach => UeInput::Attach,
            Procedure::ServiceRequest => UeInput::ServiceRequest,
            Procedure::Tau => UeInput::Tau {
                periodic: false,
                active: false,
            },
            Procedure::TauPeriodic => UeInput::Tau {
                periodic: true,
                active: false,
            },
            Procedure::TauActive => UeInput::Tau {
                periodic: false,
                active: true,
            },
            _ => {
                let why = if t3346 {
                    "EMM #22 congestion"
                } else {
                    "RRC connection rejected"
                };
                return self.fail(Failure::Protocol(why.into()), out);
            }
        };
        self.pending = None;
        self.state = match p {
            Procedure::Attach => EmmState::Deregistered,
            _ if self.state == EmmState::Deregistered => EmmState::Deregistered,
            _ => EmmState::Registered,
        };
        self.retry = Some((again, self.now_ns.saturating_add(wait_ns)));
        out.push(UeOutput::BackOff {
            procedure: p,
            wait_ns,
            t3346,
        });
    }
    pub fn guti(&self) -> Option<Guti> {
        self.guti
    }
    pub fn address(&self) -> Option<Ipv4Addr> {
        self.addr
    }
    pub fn bearers(&self) -> &[(u8, bool)] {
        &self.bearers
    }
    /// PDN connections: (default bearer EBI, UE address); the attach one first.
    pub fn pdns(&self) -> &[(u8, Ipv4Addr)] {
        &self.pdns
    }
    /// Dedicated bearers with the default bearer each is linked to.
    pub fn dedicated(&self) -> &[(u8, u8)] {
        &self.linked
    }
    /// S-TMSI (MME code, M-TMSI) from the GUTI.
    pub fn s_tmsi(&self) -> Option<(u8, u32)> {
        self.guti.map(|g| (g.mme_code, g.m_tmsi))
    }
    /// The SQN_MS the USIM holds now (persist across runs to avoid resyncs).
    pub fn sqn_ms(&self) -> u64 {
        self.cfg.sqn_ms
    }
    /// Current uplink NAS COUNT (for KeNB checks in tests).
    pub fn ul_count(&self) -> Option<u32> {
        self.sec.as_ref().map(|s| s.ul_count)
    }

    /// Mark the start of a procedure the driver times outside the UE (handover, release).
    pub fn begin_external(&mut self, procedure: Procedure, now_ns: u64) -> bool {
        if self.pending.is_some() {
            return false;
        }
        self.pending = Some((procedure, now_ns));
        true
    }

    /// End an externally timed procedure.
    pub fn end_external(&mut self, result: Result<(), Failure>, out: &mut Vec<UeOutput>) {
        if let Some((p, t)) = self.pending.take() {
            out.push(UeOutput::Done {
                procedure: p,
                started_ns: t,
                result,
            });
        }
    }

    /// Fail the pending procedure if it has run past the timeout.
    pub fn handle_timeout(&mut self, now_ns: u64, out: &mut Vec<UeOutput>) {
        if let Some((_, at)) = &self.retry {
            if *at <= now_ns {
                let (again, _) = self.retry.take().expect("checked");
                self.handle(again, now_ns, out);
                return;
            }
        }
        if let Some((p, t)) = self.pending {
            if now_ns.saturating_sub(t) > self.timeout_ns {
                self.fail(Failure::Timeout, out);
                if p == Procedure::Attach {
                    self.state = EmmState::Deregistered;
                }
            }
        }
    }

    /// Deadline of the pending procedure, if any.
    pub fn poll_timeout(&self) -> Option<u64> {
        let p = self.pending.map(|(_, t)| t + self.timeout_ns);
        match (&self.retry, p) {
            (Some((_, at)), Some(p)) => Some(p.min(*at)),
            (Some((_, at)), None) => Some(*at),
            (None, p) => p,
        }
    }

    fn begin(&mut self, p: Procedure, now: u64) {
        self.pending = Some((p, now));
    }

    fn done(&mut self, p: Procedure, out: &mut Vec<UeOutput>) {
        if let Some((q, t)) = self.pending {
            if q == p {
                self.pending = None;
                out.push(UeOutput::Done {
                    procedure: p,
                    started_ns: t,
                    result: Ok(()),
                });
            }
        }
    }

    fn fail(&mut self, f: Failure, out: &mut Vec<UeOutput>) {
        if let Some((p, t)) = self.pending.take() {
            match p {
                Procedure::Attach | Procedure::Detach => self.state = EmmState::Deregistered,
                Procedure::Tau
                | Procedure::TauPeriodic
                | Procedure::TauActive
                | Procedure::ServiceRequest
                    if self.state != EmmState::Deregistered =>
                {
                    self.state = EmmState::Registered
                }
                _ => {}
            }
            out.push(UeOutput::Done {
                procedure: p,
                started_ns: t,
                result: Err(f),
            });
        }
    }

    fn forget_bearers(&mut self) {
        self.bearers.clear();
        self.linked.clear();
        self.pdns.clear();
        self.addr = None;
    }

    /// Remove bearer `ebi`; a default bearer takes its PDN connection and the
    /// dedicated bearers linked to it along (TS 24.301 6.4.4.3).
    fn drop_bearer(&mut self, ebi: u8, out: &mut Vec<UeOutput>) {
        let mut gone = vec![ebi];
        if self.pdns.iter().any(|p| p.0 == ebi) {
            gone.extend(self.linked.iter().filter(|l| l.1 == ebi).map(|l| l.0));
            self.pdns.retain(|p| p.0 != ebi);
        }
        for e in gone {
            if self.bearers.iter().any(|b| b.0 == e) {
                self.bearers.retain(|b| b.0 != e);
                out.push(UeOutput::BearerDown { ebi: e });
            }
            self.linked.retain(|l| l.0 != e);
        }
        self.addr = self.pdns.first().map(|p| p.1);
    }

    fn next_pti(&mut self) -> u8 {
        self.pti = if self.pti >= 254 { 1 } else { self.pti + 1 };
        self.pti
    }

    /// Send a plain NAS message, protected with `t` if a context exists.
    fn send(&mut self, m: NasMessage, t: u8, cause: u8, out: &mut Vec<UeOutput>) {
        let plain = match m.encode() {
            Ok(p) => p,
            Err(e) => {
                self.fail(Failure::Protocol(format!("encode: {e}")), out);
                return;
            }
        };
        let nas = match self.sec.as_mut() {
            Some(s) if t != sht::PLAIN => match s.protect(&plain, t) {
                Ok(p) => p,
                Err(e) => {
                    self.fail(Failure::Protocol(format!("protect: {e}")), out);
                    return;
                }
            },
            _ => plain,
        };
        let s_tmsi = if self.connected { None } else { self.s_tmsi() };
        self.connected = true;
        out.push(UeOutput::Uplink {
            nas,
            s_tmsi,
            rrc_cause: cause,
        });
    }

    /// Send an already encoded plain ESM message, integrity protected and ciphered
    /// (the connection is up whenever the emulator starts an ESM procedure).
    fn send_raw(&mut self, plain: Vec<u8>, out: &mut Vec<UeOutput>) {
        let nas = match self.sec.as_mut() {
            Some(s) => match s.protect(&plain, sht::INTEGRITY_CIPHERED) {
                Ok(p) => p,
                Err(e) => return self.fail(Failure::Protocol(format!("protect: {e}")), out),
            },
            None => return self.fail(Failure::Protocol("no NAS security context".into()), out),
        };
        out.push(UeOutput::Uplink {
            nas,
            s_tmsi: None,
            rrc_cause: rrc_cause::MO_SIGNALLING,
        });
    }

    fn identity(&self) -> MobileIdentity {
        match self.guti {
            Some(g) => MobileIdentity::Guti(g),
            None => MobileIdentity::Imsi(self.cfg.imsi.clone()),
        }
    }

    fn ksi(&self) -> u8 {
        self.sec.as_ref().map(|s| s.ksi & 7).unwrap_or(7)
    }

    fn bearer_status(&self) -> u16 {
        self.bearers
            .iter()
            .fold(0u16, |a, (e, _)| a | 1 << (e & 15))
    }

    /// Feed one input at time `now_ns`; outputs are appended to `out`.
    pub fn handle(&mut self, input: UeInput, now_ns: u64, out: &mut Vec<UeOutput>) {
        self.now_ns = now_ns;
        match input {
            UeInput::RrcRejected { wait_ns } => self.back_off(wait_ns, false, out),
            UeInput::Attach => {
                if self.pending.is_some() {
                    return;
                }
                self.begin(Procedure::Attach, now_ns);
                self.state = EmmState::RegisteredInitiated;
                self.forget_bearers();
                let pti = self.next_pti();
                let esm = EsmMessage {
                    ebi: 0,
                    pti,
                    body: EsmBody::PdnConnectivityRequest(PdnConnectivityRequest {
                        request_type: 1,
                        pdn_type: 1,
                        esm_information_transfer: self.cfg.apn.is_some(),
                        apn: None,
                        pco: None,
                    }),
                };
                let esm_container = match esm.encode() {
                    Ok(e) => e,
                    Err(e) => return self.fail(Failure::Protocol(e.to_string()), out),
                };
                let m = EmmMessage::AttachRequest(AttachRequest {
                    attach_type: 1,
                    ksi: self.ksi(),
                    identity: self.identity(),
                    ue_network_capability: UE_CAPS,
                    esm_container,
                    last_visited_tai: Some(Tai {
                        plmn: Plmn(self.cfg.plmn),
                        tac: self.cfg.tac,
                    }),
                });
                // With a GUTI and a native context the request is integrity protected.
                self.send(m.into(), sht::INTEGRITY, rrc_cause::MO_SIGNALLING, out);
            }
            UeInput::Detach { switch_off } => {
                if self.pending.is_some() || self.state == EmmState::Deregistered {
                    return;
                }
                self.begin(Procedure::Detach, now_ns);
                self.state = EmmState::DeregisteredInitiated;
                let m = EmmMessage::DetachRequestUe(DetachRequestUe {
                    detach_type: 1,
                    switch_off,
                    ksi: self.ksi(),
                    identity: self.identity(),
                });
                // TS 24.301 §4.4.5: like Attach and TAU Request, a Detach Request that
                // may open the connection is integrity protected, not ciphered.
                self.send(m.into(), sht::INTEGRITY, rrc_cause::MO_SIGNALLING, out);
                if switch_off {
                    // No answer comes to a switch-off detach (TS 24.301 §5.5.2.2.2).
                    self.state = EmmState::Deregistered;
                    self.forget_bearers();
                    self.done(Procedure::Detach, out);
                }
            }
            UeInput::Tau { periodic, active } => {
                if self.pending.is_some() || self.state != EmmState::Registered {
                    return;
                }
                let Some(g) = self.guti else { return };
                let p = match (periodic, active) {
                    (true, _) => Procedure::TauPeriodic,
                    (false, true) => Procedure::TauActive,
                    (false, false) => Procedure::Tau,
                };
                self.begin(p, now_ns);
                self.state = EmmState::TauInitiated;
                let m = EmmMessage::TauRequest(TauRequest {
                    update_type: if periodic { 3 } else { 0 },
                    active_flag: active,
                    ksi: self.ksi(),
                    old_guti: MobileIdentity::Guti(g),
                    ue_network_capability: Some(UE_CAPS),
                    last_visited_tai: Some(Tai {
                        plmn: Plmn(self.cfg.plmn),
                        tac: self.cfg.tac,
                    }),
                    eps_bearer_context_status: Some(self.bearer_status()),
                });
                // TS 24.301 §4.4.5: a TAU Request is never ciphered (the MME may not
                // hold the context), only integrity protected, even in ECM-CONNECTED.
                self.send(m.into(), sht::INTEGRITY, rrc_cause::MO_SIGNALLING, out);
            }
            UeInput::ServiceRequest | UeInput::Paged => {
                if self.pending.is_some() || self.state != EmmState::Registered || self.connected {
                    return;
                }
                let Some(s) = self.sec.as_mut() else { return };
                let nas = s.protect_service_request().to_vec();
                self.begin(Procedure::ServiceRequest, now_ns);
                self.state = EmmState::ServiceRequestInitiated;
                let cause = if matches!(input, UeInput::Paged) {
                    rrc_cause::MT_ACCESS
                } else {
                    rrc_cause::MO_DATA
                };
                let s_tmsi = self.s_tmsi();
                self.connected = true;
                out.push(UeOutput::Uplink {
                    nas,
                    s_tmsi,
                    rrc_cause: cause,
                });
            }
            UeInput::PdnConnect { apn } => {
                if self.pending.is_some() || self.state != EmmState::Registered || !self.connected {
                    return;
                }
                self.begin(Procedure::PdnConnect, now_ns);
                let pti = self.next_pti();
                self.esm_pti = pti;
                let m = EsmMessage {
                    ebi: 0,
                    pti,
                    body: EsmBody::PdnConnectivityRequest(PdnConnectivityRequest {
                        request_type: 1,
                        pdn_type: 1,
                        esm_information_transfer: false,
                        apn: Some(apn),
                        pco: None,
                    }),
                };
                self.send(
                    m.into(),
                    sht::INTEGRITY_CIPHERED,
                    rrc_cause::MO_SIGNALLING,
                    out,
                );
            }
            UeInput::PdnDisconnect { ebi } => {
                if self.pending.is_some() || self.state != EmmState::Registered || !self.connected {
                    return;
                }
                if !self.pdns.iter().any(|p| p.0 == ebi) || self.pdns.len() < 2 {
                    // Only an extra PDN connection can go (the last one needs a detach).
                    return;
                }
                self.begin(Procedure::PdnDisconnect, now_ns);
                let pti = self.next_pti();
                self.esm_pti = pti;
                let m = EsmMessage {
                    ebi: 0,
                    pti,
                    body: EsmBody::PdnDisconnectRequest { linked_ebi: ebi },
                };
                self.send(
                    m.into(),
                    sht::INTEGRITY_CIPHERED,
                    rrc_cause::MO_SIGNALLING,
                    out,
                );
            }
            UeInput::BearerResourceAllocation { linked_ebi } => {
                if self.pending.is_some()
                    || self.state != EmmState::Registered
                    || !self.connected
                    || !self.pdns.iter().any(|p| p.0 == linked_ebi)
                {
                    return;
                }
                self.begin(Procedure::DedicatedBearer, now_ns);
                let pti = self.next_pti();
                self.esm_pti = pti;
                let nas = bearer_resource_allocation_request(pti, linked_ebi);
                self.send_raw(nas, out);
            }
            UeInput::BearerResourceRelease { ebi } => {
                if self.pending.is_some()
                    || self.state != EmmState::Registered
                    || !self.connected
                    || !self.linked.iter().any(|l| l.0 == ebi)
                {
                    return;
                }
                self.begin(Procedure::BearerDeactivate, now_ns);
                let pti = self.next_pti();
                self.esm_pti = pti;
                let nas = bearer_resource_release_request(pti, ebi);
                self.send_raw(nas, out);
            }
            UeInput::ContextSetup => {
                if self.state == EmmState::ServiceRequestInitiated {
                    self.state = EmmState::Registered;
                    self.done(Procedure::ServiceRequest, out);
                }
                // TAU with the active flag ends at the TAU Accept; nothing more here.
            }
            UeInput::Released => {
                self.connected = false;
                match self.pending {
                    Some((Procedure::Release, _)) => self.done(Procedure::Release, out),
                    Some((Procedure::Detach, _)) if self.state == EmmState::Deregistered => {}
                    // A TAU without the active flag ends with the release after Accept.
                    Some((Procedure::X2Handover | Procedure::S1Handover, _)) => {}
                    Some(_) => self.fail(Failure::Released, out),
                    None => {}
                }
            }
            UeInput::Nas(pdu) => self.downlink(pdu, now_ns, out),
        }
    }
}

/// ESM causes the UE sends (TS 24.301 9.9.4.4).
pub mod esm_cause {
    pub const REGULAR_DEACTIVATION: u8 = 36;
    pub const INVALID_EBI: u8 = 43;
    pub const INVALID_PTI: u8 = 81;
}

/// SQN_MS as the 6 octets the USIM keeps.
pub fn sqn_bytes(sqn: u64) -> [u8; 6] {
    sqn_from_u64(sqn)
}
