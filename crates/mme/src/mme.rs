//! The MME state machine: S1 eNB handling, EMM/ESM procedures, handovers, timers.

use crate::config::MmeConfig;
use crate::endpoint::SliceRole;
use crate::nasx::{
    self, Direction, Identity, NasEmmMessage as Emm, NasEpsMessage, NasEsmMessage as Esm, SecCtx,
    UnprotectError,
};
use pepc_hss::{Hss, ImsiKey};
use pepc_s1ap::msg::*;
use pepc_s1ap::{
    Cause, Ecgi, GlobalEnbId, Key256 as S1Key, SecurityContext, Tai, UeS1apIds,
    UeSecurityCapabilities,
};
use pepc_security::{AuthVector, Eia, Key256};
use pepc_slice::context::{
    Arp, Ecgi as SEcgi, Guti as SGuti, Location, Plmn as SPlmn, Tai as STai,
};
use pepc_slice::control::{AttachParams, BearerParams, ControlEvent, ControlPlane, PdnParams};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};

/// The MME's maps: keys are small integers (some chosen by UEs or eNBs, e.g. IMSI and
/// eNB UE S1AP ID), so a fast hash with a per-map random seed instead of SipHash.
type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
use std::sync::Arc;
use std::time::Instant;

/// An S1-MME association, as the transport names it.
pub type AssocId = u64;

#[derive(Debug)]
pub enum Input {
    EnbUp {
        assoc: AssocId,
        out_streams: u16,
    },
    EnbDown {
        assoc: AssocId,
    },
    /// The node's endpoint completed S1 Setup with this eNB.
    EnbSetup {
        assoc: AssocId,
        out_streams: u16,
        global_id: GlobalEnbId,
    },
    /// The eNB (or the node) reset UE-associated connections of the association:
    /// `None` all of them, else those listed. Answered by [`Output::ResetDone`].
    EnbReset {
        assoc: AssocId,
        token: u64,
        connections: Option<Vec<pepc_s1ap::UeConnection>>,
    },
    /// Another slice took subscriber `imsi`: drop our context of it (TS 23.401 §5.3.2.1).
    Supersede {
        imsi: u64,
    },
    S1ap {
        assoc: AssocId,
        stream: u16,
        bytes: Vec<u8>,
    },
    Control(ControlEvent),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// Per-message diagnostics (printed only by verbose drivers).
    Debug,
    Info,
    Warn,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    S1ap {
        assoc: AssocId,
        stream: u16,
        bytes: Vec<u8>,
    },
    CloseAssoc {
        assoc: AssocId,
    },
    /// A Paging message for every eNB serving one of `tais` (the node fans it out).
    Page {
        tais: Vec<Tai>,
        bytes: Vec<u8>,
    },
    /// This slice has released what [`Input::EnbReset`] `token` named.
    ResetDone {
        token: u64,
    },
    /// This slice now holds subscriber `imsi`, learned other than by its IMSI route
    /// (an Identity Response after a foreign GUTI, a parked context): the node moves
    /// its IMSI route here and has any other slice drop its context.
    ClaimImsi {
        imsi: u64,
    },
    /// This slice no longer holds `imsi`, which it held outside its policy slice.
    ReleaseImsi {
        imsi: u64,
    },
    /// Never contains key material.
    Log(LogLevel, String),
}

/// Counters. Read by the driver for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MmeStats {
    pub s1_setups: u64,
    pub s1_setup_failures: u64,
    pub s1ap_decode_errors: u64,
    pub unknown_ue_ids: u64,
    pub error_indications_rx: u64,
    pub attach_requests: u64,
    pub attaches: u64,
    pub attach_rejects: u64,
    pub auth_rejects: u64,
    pub resyncs: u64,
    pub nas_bad_mac: u64,
    pub nas_replays: u64,
    pub nas_unprotected_dropped: u64,
    pub nas_decode_errors: u64,
    pub service_requests: u64,
    pub service_rejects: u64,
    pub tau: u64,
    pub detaches: u64,
    pub implicit_detaches: u64,
    pub pagings: u64,
    pub paging_failures: u64,
    pub path_switches: u64,
    pub s1_handovers: u64,
    pub retransmissions: u64,
    pub procedure_timeouts: u64,
    pub nas_non_delivery: u64,
    pub releases: u64,
    pub pdn_connects: u64,
    pub pdn_connect_rejects: u64,
    pub pdn_disconnects: u64,
    pub pdn_disconnect_rejects: u64,
    /// UE-requested bearer resource allocation and modification requests (§6.5.3/4).
    pub bearer_resource_allocations: u64,
    pub bearer_resource_rejects: u64,
    /// Attaches accepted under the parked EPS security context of a detached UE
    /// (no identity request, no AKA).
    pub parked_contexts_reused: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MmeError {
    UnknownUe,
    NotConnected,
    Busy,
    NoBearer(u8),
    Control(String),
    Codec(String),
}

impl std::fmt::Display for MmeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}
impl std::error::Error for MmeError {}

/// What a slice knows of an eNB (from the node's endpoint).
struct Enb {
    out_streams: u16,
    global_id: Option<GlobalEnbId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Emm_ {
    Deregistered,
    Registered,
}

/// What the UE's signaling connection is waiting for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Wait {
    None,
    Identity,
    AuthResponse,
    SmcComplete,
    EsmInfo,
    IcsResponse { attach: bool },
    AttachComplete,
    GutiReallocComplete,
    DetachAccept,
    ReleaseComplete { then_remove: bool },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TimerKind {
    Nas,
    Paging,
    Reachable,
}

struct HoState {
    target_assoc: AssocId,
    target_enb_ue_id: Option<u32>,
    admitted: Vec<pepc_s1ap::ERabAdmitted>,
    source: (AssocId, u32),
}

struct Ue {
    imsi: Option<u64>,
    emm: Emm_,
    /// Current S1 connection (assoc, eNB UE S1AP ID).
    conn: Option<(AssocId, u32)>,
    wait: Wait,
    sec: Option<SecCtx>,
    /// Context being established (after AKA, before SMC complete).
    // Boxed, like `retx` and `ho` below: each is held only during one procedure, and
    // keeping them out of line makes the context that stays per UE ~40% smaller.
    new_sec: Option<Box<SecCtx>>,
    vector: Option<Box<AuthVector>>,
    resync_done: bool,
    ue_net_cap: Vec<u8>,
    pti: u8,
    apn: String,
    slot: Option<u32>,
    m_tmsi: u32,
    pending_tmsi: Option<u32>,
    tai: Tai,
    ecgi: Ecgi,
    nh: Option<Key256>,
    ncc: u8,
    /// NAS retransmission: the plain message and how to send it.
    retx: Option<Box<(NasEpsMessage, bool)>>,
    retx_count: u32,
    nas_timer: Option<Instant>,
    paging_timer: Option<Instant>,
    paging_left: u32,
    reach_timer: Option<Instant>,
    gen: u64,
    ho: Option<Box<HoState>>,
    /// Source connection of a finished handover awaiting its release complete.
    old_conn: Option<(AssocId, u32)>,
    /// Source connection of the last X2 handover and until when it stays known. The
    /// source eNB answers over its own SCTP association, which has no ordering with the
    /// target's: its responses to what we sent before the Path Switch can arrive after
    /// it. The target releases the source over X2, so no Release Complete ends this.
    x2_source: Option<((AssocId, u32), Instant)>,
    ambr: (u64, u64),
    qci: u8,
    arp_priority: u8,
    next_ksi: u8,
    pending_bearers: Vec<u8>,
    /// The current security context was taken from `Mme::parked` by a verified
    /// Attach Request: the attach goes on without identity and AKA.
    resumed: bool,
    /// A newer context of the same subscriber replaced this one; it only waits for the
    /// UE Context Release Complete of its S1 connection.
    superseded: bool,
}

/// The EPS security context of a UE that detached, kept under the M-TMSI of the GUTI
/// we gave it: its next Attach Request, integrity protected with this context (TS
/// 24.301 §5.5.1.2.2, §4.4.4.3), is verified and accepted without identity and AKA.
struct Parked {
    imsi: u64,
    sec: SecCtx,
    until: Instant,
}

pub struct Mme {
    cfg: MmeConfig,
    hss: Arc<Hss>,
    rand: Box<dyn FnMut() -> [u8; 16] + Send>,
    enbs: Map<AssocId, Enb>,
    enb_by_gid: Map<GlobalEnbId, AssocId>,
    /// Boxed: a UE context is large and the map moves its values when it grows.
    ues: Map<u32, Box<Ue>>,
    by_conn: Map<(AssocId, u32), u32>,
    by_imsi: Map<u64, u32>,
    by_tmsi: Map<u32, u32>,
    next_id: u32,
    next_tmsi: u32,
    timers: BinaryHeap<Reverse<(Instant, u32, u64, u8)>>,
    last_now: Option<Instant>,
    /// Parked security contexts by M-TMSI, bounded by `cfg.parked_contexts`.
    parked: Map<u32, Parked>,
    /// (expiry, M-TMSI) in parking order: expiry and eviction of the oldest.
    parked_order: VecDeque<(Instant, u32)>,
    /// Which slice of the node this MME serves (identifier bits, IMSI routing).
    role: SliceRole,
    /// IMSIs held outside their policy slice whose context went (for the node).
    released: Vec<u64>,
    pub stats: MmeStats,
}

fn splmn(p: pepc_s1ap::Plmn) -> SPlmn {
    SPlmn(p.0)
}

impl Mme {
    /// `rand` supplies RAND values for AKA (a CSPRNG in production; see [`urandom`]).
    pub fn new(cfg: MmeConfig, hss: Arc<Hss>, rand: Box<dyn FnMut() -> [u8; 16] + Send>) -> Mme {
        Mme {
            cfg,
            hss,
            rand,
            enbs: Map::default(),
            enb_by_gid: Map::default(),
            ues: Map::default(),
            by_conn: Map::default(),
            by_imsi: Map::default(),
            by_tmsi: Map::default(),
            next_id: 1,
            next_tmsi: 0x1000_0001,
            timers: BinaryHeap::new(),
            last_now: None,
            parked: Map::default(),
            parked_order: VecDeque::new(),
            role: SliceRole::default(),
            released: Vec::new(),
            stats: MmeStats::default(),
        }
    }

    /// Heap a registered UE's MME state takes (context, security context, map
    /// entries), rounded up from `cargo run --release --example mem_per_ue`.
    pub const HEAP_PER_UE: usize = 2048;

    /// Size the MME for `users` UEs at start rather than during their attaches: the
    /// UE maps get their capacity (no rehash of a large table in a storm) and as much
    /// heap as their contexts take is faulted in on this (the control) thread.
    pub fn prewarm(&mut self, users: usize) {
        self.ues.reserve(users);
        self.by_conn.reserve(users);
        self.by_imsi.reserve(users);
        self.by_tmsi.reserve(users);
        pepc_slice::mem::prewarm_heap(users.saturating_mul(Self::HEAP_PER_UE));
    }

    /// Serve slice `role.index` of `role.count`: MME UE S1AP IDs and M-TMSIs carry
    /// the slice (`pepc_slice::ids::SignalingIds`) so the node's demux finds it.
    pub fn set_role(&mut self, role: SliceRole) {
        self.role = role;
        let ids = role.ids();
        self.next_id = ids.compose(role.index, self.next_id).max(1);
        self.next_tmsi = ids.compose(role.index, self.next_tmsi);
    }

    pub fn role(&self) -> SliceRole {
        self.role
    }

    pub fn config(&self) -> &MmeConfig {
        &self.cfg
    }

    /// Registered or in-progress UE contexts.
    pub fn ue_count(&self) -> usize {
        self.ues.len()
    }

    /// The M-TMSI currently assigned to `imsi`, if registered.
    pub fn m_tmsi_of(&self, imsi: u64) -> Option<u32> {
        let u = self.ues.get(self.by_imsi.get(&imsi)?)?;
        (u.emm == Emm_::Registered).then_some(u.m_tmsi)
    }

    /// The MME UE S1AP ID of `imsi`'s context.
    pub fn mme_ue_id_of(&self, imsi: u64) -> Option<u32> {
        self.by_imsi.get(&imsi).copied()
    }

    pub fn is_connected(&self, imsi: u64) -> bool {
        self.by_imsi
            .get(&imsi)
            .and_then(|i| self.ues.get(i))
            .is_some_and(|u| u.conn.is_some())
    }

    pub fn next_timeout(&mut self) -> Option<Instant> {
        while let Some(Reverse((t, id, gen, _))) = self.timers.peek().copied() {
            if self.ues.get(&id).is_some_and(|u| u.gen == gen) {
                return Some(t);
            }
            self.timers.pop();
        }
        None
    }

    fn arm(&mut self, id: u32, kind: TimerKind, at: Instant) {
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        match kind {
            TimerKind::Nas => u.nas_timer = Some(at),
            TimerKind::Paging => u.paging_timer = Some(at),
            TimerKind::Reachable => u.reach_timer = Some(at),
        }
        u.gen += 1;
        let gen = u.gen;
        // Re-push every live timer of the UE under the new generation (at most 3).
        for (t, k) in [(u.nas_timer, 0u8), (u.paging_timer, 1), (u.reach_timer, 2)] {
            if let Some(t) = t {
                self.timers.push(Reverse((t, id, gen, k)));
            }
        }
    }

    pub fn handle_timeout(&mut self, now: Instant, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        self.last_now = Some(now);
        // Keys of expired parked contexts do not outlive their TTL by more than a tick.
        self.expire_parked(now);
        while let Some(Reverse((t, id, gen, kind))) = self.timers.peek().copied() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(u) = self.ues.get_mut(&id) else {
                continue;
            };
            if u.gen != gen {
                continue;
            }
            match kind {
                0 if u.nas_timer == Some(t) => {
                    u.nas_timer = None;
                    self.nas_timer_expired(now, id, cp, out);
                }
                1 if u.paging_timer == Some(t) => {
                    u.paging_timer = None;
                    self.paging_expired(now, id, cp, out);
                }
                2 if u.reach_timer == Some(t) => {
                    u.reach_timer = None;
                    self.stats.implicit_detaches += 1;
                    log(out, LogLevel::Info, format!("implicit detach of UE {id}"));
                    self.remove_ue(id, false, cp);
                }
                _ => {}
            }
        }
        self.flush_released(out);
    }

    fn flush_released(&mut self, out: &mut Vec<Output>) {
        for imsi in self.released.drain(..) {
            out.push(Output::ReleaseImsi { imsi });
        }
    }

    /// [`Mme::handle`] of an S1AP PDU the caller keeps: a driver that reuses its
    /// receive buffers hands them over borrowed.
    pub fn handle_s1ap(
        &mut self,
        now: Instant,
        assoc: AssocId,
        stream: u16,
        bytes: &[u8],
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.last_now = Some(now);
        self.on_s1ap(now, assoc, stream, bytes, cp, out);
        self.flush_released(out);
    }

    pub fn handle(
        &mut self,
        now: Instant,
        input: Input,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.last_now = Some(now);
        match input {
            Input::EnbUp { assoc, out_streams } => {
                self.enbs.insert(
                    assoc,
                    Enb {
                        out_streams: out_streams.max(1),
                        global_id: None,
                    },
                );
            }
            Input::EnbDown { assoc } => self.enb_gone(assoc, cp, out),
            Input::EnbSetup {
                assoc,
                out_streams,
                global_id,
            } => {
                let e = self.enbs.entry(assoc).or_insert(Enb {
                    out_streams: 1,
                    global_id: None,
                });
                e.out_streams = out_streams.max(1);
                e.global_id = Some(global_id);
                self.enb_by_gid.insert(global_id, assoc);
            }
            Input::EnbReset {
                assoc,
                token,
                connections,
            } => {
                self.reset(assoc, connections, cp, out);
                out.push(Output::ResetDone { token });
            }
            Input::Supersede { imsi } => {
                if let Some(old) = self.by_imsi.get(&imsi).copied() {
                    self.supersede(old, cp, out);
                }
            }
            Input::S1ap {
                assoc,
                stream,
                bytes,
            } => self.on_s1ap(now, assoc, stream, &bytes, cp, out),
            Input::Control(ev) => match ev {
                ControlEvent::Page { ue_slot, imsi } => self.page(now, ue_slot, imsi, cp, out),
                ControlEvent::EnbErrorIndication { enb_teid, enb_addr } => log(
                    out,
                    LogLevel::Warn,
                    format!("eNB {enb_addr} reported unknown S1-U TEID {enb_teid:#x}"),
                ),
            },
        }
        self.flush_released(out);
    }

    // ---------------------------------------------------------------- S1 plumbing

    fn stream_for(&self, assoc: AssocId, id: u32) -> u16 {
        let n = self.enbs.get(&assoc).map(|e| e.out_streams).unwrap_or(1);
        if n <= 1 {
            0
        } else {
            1 + (id % (n as u32 - 1)) as u16
        }
    }

    fn send(&self, assoc: AssocId, ue: Option<u32>, msg: S1apMessage, out: &mut Vec<Output>) {
        let stream = ue.map(|i| self.stream_for(assoc, i)).unwrap_or(0);
        match msg.encode() {
            Ok(bytes) => out.push(Output::S1ap {
                assoc,
                stream,
                bytes,
            }),
            Err(e) => log(
                out,
                LogLevel::Warn,
                format!("cannot encode {}: {e}", msg.name()),
            ),
        }
    }

    /// `what` names the message that triggered it, for the log (IDs only, no keys).
    fn error_indication(
        &mut self,
        assoc: AssocId,
        what: &str,
        mme: Option<u32>,
        enb: Option<u32>,
        cause: Cause,
        out: &mut Vec<Output>,
    ) {
        log(
            out,
            LogLevel::Debug,
            format!(
                "assoc {assoc}: Error Indication {cause:?} for {what} (MME-UE-S1AP-ID {mme:?}, eNB-UE-S1AP-ID {enb:?})"
            ),
        );
        self.send(
            assoc,
            None,
            ErrorIndication {
                mme_ue_id: mme,
                enb_ue_id: enb,
                cause: Some(cause),
            }
            .into(),
            out,
        );
    }

    fn on_s1ap(
        &mut self,
        now: Instant,
        assoc: AssocId,
        _stream: u16,
        bytes: &[u8],
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.enbs.entry(assoc).or_insert(Enb {
            out_streams: 1,
            global_id: None,
        });
        let msg = match S1apMessage::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.s1ap_decode_errors += 1;
                let cause = match e {
                    pepc_s1ap::S1apError::Decode(_) => Cause::TRANSFER_SYNTAX_ERROR,
                    _ => Cause::ABSTRACT_SYNTAX_ERROR_REJECT,
                };
                log(
                    out,
                    LogLevel::Warn,
                    format!("assoc {assoc}: undecodable S1AP: {e}"),
                );
                self.error_indication(assoc, "undecodable S1AP", None, None, cause, out);
                return;
            }
        };
        use S1apMessage as M;
        match msg {
            M::InitialUeMessage(m) => self.initial_ue(now, assoc, m, cp, out),
            M::HandoverRequestAcknowledge(m) => self.ho_request_ack(assoc, m, out),
            M::HandoverFailure(m) => self.ho_failure(assoc, m, out),
            // Comes from the target eNB, which has no connection for the UE yet.
            M::PathSwitchRequest(m) => self.path_switch(assoc, m, cp, out),
            other => {
                let (Some(mme_id), enb_id) = (other.mme_ue_id(), other.enb_ue_id()) else {
                    log(
                        out,
                        LogLevel::Warn,
                        format!("assoc {assoc}: ignoring {}", other.name()),
                    );
                    return;
                };
                let Some(ue) = self.ues.get(&mme_id) else {
                    self.stats.unknown_ue_ids += 1;
                    self.error_indication(
                        assoc,
                        other.name(),
                        Some(mme_id),
                        enb_id,
                        Cause::UNKNOWN_MME_UE_S1AP_ID,
                        out,
                    );
                    return;
                };
                // The message must come from one of the UE's S1 connections.
                let known = |c: Option<(AssocId, u32)>| {
                    c.is_some_and(|(a, e)| a == assoc && Some(e) == enb_id)
                };
                let from_target = ue.ho.as_ref().is_some_and(|h| {
                    h.target_assoc == assoc
                        && (h.target_enb_ue_id == enb_id || h.target_enb_ue_id.is_none())
                });
                let from_x2_source = ue
                    .x2_source
                    .is_some_and(|(c, until)| known(Some(c)) && now < until);
                let ok = known(ue.conn)
                    || known(ue.old_conn)
                    || from_x2_source
                    || from_target
                    || matches!(other, M::PathSwitchRequest(_));
                if !ok {
                    self.stats.unknown_ue_ids += 1;
                    self.error_indication(
                        assoc,
                        other.name(),
                        Some(mme_id),
                        enb_id,
                        Cause::UNKNOWN_ENB_UE_S1AP_ID,
                        out,
                    );
                    return;
                }
                self.ue_message(now, assoc, mme_id, other, cp, out);
            }
        }
    }

    /// The eNB lost its association: its connected UEs go idle (TS 23.401 §5.3.5).
    fn enb_gone(&mut self, assoc: AssocId, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        if let Some(e) = self.enbs.remove(&assoc) {
            if let Some(g) = e.global_id {
                if self.enb_by_gid.get(&g) == Some(&assoc) {
                    self.enb_by_gid.remove(&g);
                }
            }
        }
        let ids: Vec<u32> = self
            .by_conn
            .iter()
            .filter(|((a, _), _)| *a == assoc)
            .map(|(_, id)| *id)
            .collect();
        for id in ids {
            self.make_idle(id, cp, out);
        }
    }

    /// The UE-associated connections of `assoc` that a Reset names (`None`: all of
    /// them) go: their UEs become ECM-IDLE (TS 36.413 §8.7.1; the node acknowledges).
    fn reset(
        &mut self,
        assoc: AssocId,
        connections: Option<Vec<pepc_s1ap::UeConnection>>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        match connections {
            None => {
                let ids: Vec<u32> = self
                    .by_conn
                    .iter()
                    .filter(|((a, _), _)| *a == assoc)
                    .map(|(_, id)| *id)
                    .collect();
                for id in ids {
                    self.make_idle(id, cp, out);
                }
            }
            Some(list) => {
                for c in list {
                    let id = c
                        .mme_ue_id
                        .filter(|i| {
                            self.ues
                                .get(i)
                                .is_some_and(|u| u.conn.map(|x| x.0) == Some(assoc))
                        })
                        .or_else(|| {
                            c.enb_ue_id
                                .and_then(|e| self.by_conn.get(&(assoc, e)).copied())
                        });
                    if let Some(id) = id {
                        self.make_idle(id, cp, out);
                    }
                }
            }
        }
    }

    /// Drop the UE's S1 connection; a registered UE becomes ECM-IDLE, a UE in the
    /// middle of attach is forgotten.
    fn make_idle(&mut self, id: u32, cp: &mut ControlPlane, _out: &mut Vec<Output>) {
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        if let Some(c) = u.conn.take() {
            self.by_conn.remove(&c);
        }
        if let Some(c) = u.old_conn.take() {
            self.by_conn.remove(&c);
        }
        u.x2_source = None;
        u.ho = None;
        u.wait = Wait::None;
        u.retx = None;
        u.nas_timer = None;
        if u.emm == Emm_::Registered {
            if let Some(s) = u.slot {
                let _ = cp.release_to_idle(s);
            }
            self.stats.releases += 1;
            let at = self.now_hint().map(|n| n + self.cfg.mobile_reachable);
            if let Some(at) = at {
                self.arm(id, TimerKind::Reachable, at);
            }
        } else {
            self.remove_ue(id, true, cp);
        }
    }

    fn now_hint(&self) -> Option<Instant> {
        self.last_now
    }

    /// Drop a UE context. `park`: the UE detached (or was rejected) and keeps its EPS
    /// security context, so we keep it too for a GUTI re-attach.
    fn remove_ue(&mut self, id: u32, park: bool, cp: &mut ControlPlane) {
        let Some(mut u) = self.ues.remove(&id) else {
            return;
        };
        if park && u.emm == Emm_::Deregistered && u.m_tmsi != 0 {
            if let (Some(sec), Some(imsi), Some(now)) = (u.sec.take(), u.imsi, self.last_now) {
                self.park(now, u.m_tmsi, imsi, sec);
            }
        }
        if let Some(c) = u.conn {
            self.by_conn.remove(&c);
        }
        if let Some(c) = u.old_conn {
            self.by_conn.remove(&c);
        }
        if let Some(i) = u.imsi {
            if self.by_imsi.get(&i) == Some(&id) {
                self.by_imsi.remove(&i);
                if !self.role.is_home_of(i) {
                    self.released.push(i);
                }
            }
        }
        if self.by_tmsi.get(&u.m_tmsi) == Some(&id) {
            self.by_tmsi.remove(&u.m_tmsi);
        }
        if let Some(s) = u.slot {
            let _ = cp.detach(s);
        }
    }

    /// Keep the security context of a UE that detached under its M-TMSI, evicting
    /// expired entries and, at the bound, the oldest.
    fn park(&mut self, now: Instant, m_tmsi: u32, imsi: u64, sec: SecCtx) {
        self.expire_parked(now);
        if self.cfg.parked_contexts == 0 {
            return;
        }
        while self.parked.len() >= self.cfg.parked_contexts {
            let Some((until, t)) = self.parked_order.pop_front() else {
                break;
            };
            if self.parked.get(&t).is_some_and(|p| p.until == until) {
                self.parked.remove(&t);
            }
        }
        let until = now + self.cfg.parked_context_ttl;
        self.parked.insert(m_tmsi, Parked { imsi, sec, until });
        self.parked_order.push_back((until, m_tmsi));
    }

    /// Drop expired parked contexts and the order records of contexts already taken.
    fn expire_parked(&mut self, now: Instant) {
        while let Some(&(until, t)) = self.parked_order.front() {
            let live = self.parked.get(&t).is_some_and(|p| p.until == until);
            if live && until > now {
                break;
            }
            self.parked_order.pop_front();
            if live {
                self.parked.remove(&t);
            }
        }
    }

    /// Security contexts parked for detached UEs (for metrics and tests).
    pub fn parked_count(&self) -> usize {
        self.parked.len()
    }

    /// An integrity-protected (not ciphered) Attach Request from a UE without a
    /// context here: if its GUTI is ours, a context is parked under it with the same
    /// KSI and the MAC verifies with it, the context becomes the UE's current one.
    /// Anything else leaves the parked context alone (`None`: identification goes on).
    fn unpark(&mut self, id: u32, bytes: &[u8]) -> Option<NasEpsMessage> {
        let now = self.last_now?;
        let NasEpsMessage::Emm(_, Emm::AttachRequest(r)) = nasx::unverified_inner(bytes)? else {
            return None;
        };
        let Identity::Guti(plmn, g, c, t) = nasx::parse_identity(&r.eps_mobile_identity.value)
        else {
            return None;
        };
        if (plmn, g, c) != (self.cfg.plmn.0, self.cfg.mme_group_id, self.cfg.mme_code) {
            return None;
        }
        let ksi = r.nas_key_set_identifier.value;
        let p = self.parked.get_mut(&t)?;
        // Native context (TSC 0) with the KSI we assigned, not expired.
        if ksi & 0x08 != 0 || ksi & 0x07 != p.sec.ksi || p.until <= now {
            return None;
        }
        let m = p.sec.unprotect(bytes, Direction::Uplink).ok()?;
        let p = self.parked.remove(&t)?;
        let u = self.ues.get_mut(&id)?;
        u.sec = Some(p.sec);
        u.imsi = Some(p.imsi);
        u.resumed = true;
        Some(m)
    }

    // ---------------------------------------------------------------- NAS plumbing

    fn new_ue(&mut self, assoc: AssocId, enb_ue_id: u32, tai: Tai, ecgi: Ecgi) -> u32 {
        let id = self.alloc_mme_ue_id();
        self.ues.insert(
            id,
            Box::new(Ue {
                imsi: None,
                emm: Emm_::Deregistered,
                conn: Some((assoc, enb_ue_id)),
                wait: Wait::None,
                sec: None,
                new_sec: None,
                vector: None,
                resync_done: false,
                ue_net_cap: vec![],
                pti: 0,
                apn: String::new(),
                slot: None,
                m_tmsi: 0,
                pending_tmsi: None,
                tai,
                ecgi,
                nh: None,
                ncc: 0,
                retx: None,
                retx_count: 0,
                nas_timer: None,
                paging_timer: None,
                paging_left: 0,
                reach_timer: None,
                gen: 0,
                ho: None,
                old_conn: None,
                x2_source: None,
                ambr: self.cfg.default_ambr,
                qci: 9,
                arp_priority: 9,
                next_ksi: 0,
                pending_bearers: vec![],
                resumed: false,
                superseded: false,
            }),
        );
        self.by_conn.insert((assoc, enb_ue_id), id);
        id
    }

    /// Encode (and protect when a context is in use) a downlink NAS message.
    fn nas_bytes(&mut self, id: u32, msg: &NasEpsMessage, new_ctx: bool) -> Option<Vec<u8>> {
        let u = self.ues.get_mut(&id)?;
        let r = if new_ctx {
            u.new_sec.as_mut()?.protect(msg, true, Direction::Downlink)
        } else if let Some(s) = u.sec.as_mut() {
            s.protect(msg, false, Direction::Downlink)
        } else {
            msg.encode().map_err(|e| e.to_string())
        };
        r.ok()
    }

    /// Send a NAS message in Downlink NAS Transport; `timer` arms T3450/T3460/T3470/T3422.
    fn send_nas(
        &mut self,
        now: Instant,
        id: u32,
        msg: NasEpsMessage,
        new_ctx: bool,
        timer: Option<std::time::Duration>,
        out: &mut Vec<Output>,
    ) {
        let Some(bytes) = self.nas_bytes(id, &msg, new_ctx) else {
            return;
        };
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        let Some((assoc, enb_ue_id)) = u.conn else {
            return;
        };
        if let Some(d) = timer {
            u.retx = Some(Box::new((msg, new_ctx)));
            u.retx_count = 0;
            self.arm(id, TimerKind::Nas, now + d);
        }
        self.send(
            assoc,
            Some(id),
            DownlinkNasTransport {
                mme_ue_id: id,
                enb_ue_id,
                nas_pdu: bytes,
            }
            .into(),
            out,
        );
    }

    fn stop_nas_timer(&mut self, id: u32) {
        if let Some(u) = self.ues.get_mut(&id) {
            u.nas_timer = None;
            u.retx = None;
        }
    }

    fn nas_timer_expired(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        u.retx_count += 1;
        // Retransmit on the first four expiries; abort on the fifth (TS 24.301 §5.4, §5.5).
        if u.retx_count >= 5 || u.retx.is_none() {
            self.stats.procedure_timeouts += 1;
            log(
                out,
                LogLevel::Warn,
                format!("UE {id}: NAS procedure {:?} timed out", u.wait),
            );
            u.retx = None;
            let registered = u.emm == Emm_::Registered
                && u.wait != Wait::DetachAccept
                && u.wait != Wait::AttachComplete;
            if u.wait == Wait::DetachAccept {
                self.release(id, Cause::NAS_DETACH, true, out);
            } else if registered {
                u.wait = Wait::None;
            } else {
                if let Some(s) = u.slot.take() {
                    let _ = cp.detach(s);
                }
                u.emm = Emm_::Deregistered;
                self.release(id, Cause::NAS_UNSPECIFIED, true, out);
            }
            return;
        }
        let (msg, new_ctx) = *u.retx.clone().expect("checked");
        let n = u.retx_count;
        let d = match u.wait {
            Wait::Identity => self.cfg.t3470,
            Wait::AuthResponse | Wait::SmcComplete => self.cfg.t3460,
            Wait::DetachAccept => self.cfg.t3422,
            _ => self.cfg.t3450,
        };
        self.stats.retransmissions += 1;
        // Protected messages are re-protected: a repeated COUNT would be a replay.
        if let Some(bytes) = self.nas_bytes(id, &msg, new_ctx) {
            if let Some((assoc, enb_ue_id)) = self.ues[&id].conn {
                self.send(
                    assoc,
                    Some(id),
                    DownlinkNasTransport {
                        mme_ue_id: id,
                        enb_ue_id,
                        nas_pdu: bytes,
                    }
                    .into(),
                    out,
                );
            }
        }
        self.arm(id, TimerKind::Nas, now + d);
        if let Some(u) = self.ues.get_mut(&id) {
            u.retx_count = n;
        }
    }

    fn release(&mut self, id: u32, cause: Cause, then_remove: bool, out: &mut Vec<Output>) {
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        let Some((assoc, enb_ue_id)) = u.conn else {
            return;
        };
        u.wait = Wait::ReleaseComplete { then_remove };
        self.send(
            assoc,
            Some(id),
            UeContextReleaseCommand {
                ids: UeS1apIds::Pair {
                    mme_ue_id: id,
                    enb_ue_id,
                },
                cause,
            }
            .into(),
            out,
        );
    }

    /// Decode an uplink NAS PDU, verifying its MAC first when a context exists.
    fn uplink_nas(
        &mut self,
        id: u32,
        bytes: &[u8],
        out: &mut Vec<Output>,
    ) -> Option<(NasEpsMessage, bool)> {
        let first = *bytes.first()?;
        let sht = first >> 4;
        let pd = first & 0x0f;
        let u = self.ues.get_mut(&id)?;
        if pd == 7 && (1..=4).contains(&sht) {
            // SMC Complete comes under the new context.
            let ctx = if sht == 4 && u.new_sec.is_some() {
                u.new_sec.as_deref_mut()
            } else {
                u.sec.as_mut()
            };
            if let Some(ctx) = ctx {
                return match ctx.unprotect(bytes, Direction::Uplink) {
                    Ok(m) => Some((m, true)),
                    Err(UnprotectError::BadMac) => {
                        self.stats.nas_bad_mac += 1;
                        // Some messages may still be processed unverified (§4.4.4.3).
                        let inner = nasx::unverified_inner(bytes)?;
                        if matches!(
                            inner,
                            NasEpsMessage::Emm(
                                _,
                                Emm::AttachRequest(_)
                                    | Emm::DetachRequestUeOriginating(_)
                                    | Emm::TrackingAreaUpdateRequest(_)
                            )
                        ) && u.conn.is_some()
                            && u.wait == Wait::None
                            && u.emm == Emm_::Deregistered
                        {
                            return Some((inner, false));
                        }
                        log(
                            out,
                            LogLevel::Warn,
                            format!("UE {id}: NAS MAC failure, message discarded"),
                        );
                        None
                    }
                    Err(UnprotectError::Replay) => {
                        self.stats.nas_replays += 1;
                        log(
                            out,
                            LogLevel::Warn,
                            format!("UE {id}: replayed NAS COUNT, message discarded"),
                        );
                        None
                    }
                    Err(UnprotectError::Malformed(e)) => {
                        self.stats.nas_decode_errors += 1;
                        log(out, LogLevel::Warn, format!("UE {id}: bad NAS: {e}"));
                        None
                    }
                };
            }
            // No context: an Attach Request may verify with a parked one.
            if sht == 1 {
                if let Some(m) = self.unpark(id, bytes) {
                    return Some((m, true));
                }
            }
            // No context: only the messages of §4.4.4.3 are taken, unverified. A ciphered
            // PDU is unreadable here (e.g. a UE answering with the context we dropped at
            // its detach): count and say so, it is otherwise a silent stall.
            let m = nasx::unverified_inner(bytes);
            if m.is_none() {
                self.stats.nas_unprotected_dropped += 1;
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: protected NAS (header type {sht}) without a security context, discarded"),
                );
            }
            return m.map(|m| (m, false));
        }
        match NasEpsMessage::decode(bytes) {
            Ok(m) => Some((m, false)),
            Err(e) => {
                self.stats.nas_decode_errors += 1;
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: undecodable NAS: {e}"),
                );
                None
            }
        }
    }

    // ---------------------------------------------------------------- Initial UE

    fn initial_ue(
        &mut self,
        now: Instant,
        assoc: AssocId,
        m: InitialUeMessage,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.last_now = Some(now);
        // Service Request: short header, the UE is known by S-TMSI.
        if m.nas_pdu
            .first()
            .is_some_and(|b| b >> 4 >= 12 && b & 0x0f == 7)
        {
            let id = m.s_tmsi.and_then(|s| self.by_tmsi.get(&s.m_tmsi).copied());
            self.service_request(now, assoc, id, m, cp, out);
            return;
        }
        // A UE we know (by S-TMSI) that starts a new connection: reuse its context.
        let known = m
            .s_tmsi
            .filter(|s| s.mmec == self.cfg.mme_code)
            .and_then(|s| self.by_tmsi.get(&s.m_tmsi).copied());
        let id = match known {
            Some(id) => {
                self.attach_conn(id, assoc, m.enb_ue_id, m.tai, m.ecgi);
                id
            }
            None => self.new_ue(assoc, m.enb_ue_id, m.tai, m.ecgi),
        };
        self.nas_in(now, id, &m.nas_pdu, cp, out);
    }

    /// Give a known UE a new S1 connection (idle → connected).
    fn attach_conn(&mut self, id: u32, assoc: AssocId, enb_ue_id: u32, tai: Tai, ecgi: Ecgi) {
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        if let Some(c) = u.conn.take() {
            self.by_conn.remove(&c);
        }
        u.conn = Some((assoc, enb_ue_id));
        u.tai = tai;
        u.ecgi = ecgi;
        u.reach_timer = None;
        self.by_conn.insert((assoc, enb_ue_id), id);
    }

    fn nas_in(
        &mut self,
        now: Instant,
        id: u32,
        bytes: &[u8],
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some((msg, verified)) = self.uplink_nas(id, bytes, out) else {
            return;
        };
        let has_ctx = self.ues.get(&id).is_some_and(|u| u.sec.is_some());
        match msg {
            NasEpsMessage::Emm(_, e) => {
                // After security is established every uplink message must be verified.
                let allowed_plain = matches!(
                    e,
                    Emm::AttachRequest(_)
                        | Emm::IdentityResponse(_)
                        | Emm::AuthenticationResponse(_)
                        | Emm::AuthenticationFailure(_)
                        | Emm::SecurityModeReject(_)
                        | Emm::DetachRequestUeOriginating(_)
                        | Emm::TrackingAreaUpdateRequest(_)
                );
                if !verified && !allowed_plain {
                    self.stats.nas_unprotected_dropped += 1;
                    return;
                }
                let _ = has_ctx;
                self.emm(now, id, e, verified, cp, out);
            }
            NasEpsMessage::Esm(h, e) if verified => self.esm(
                now,
                id,
                h.procedure_transaction_identity,
                h.eps_bearer_identity,
                e,
                cp,
                out,
            ),
            _ => {
                self.stats.nas_unprotected_dropped += 1;
            }
        }
    }

    fn emm(
        &mut self,
        now: Instant,
        id: u32,
        e: Emm,
        verified: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        match e {
            Emm::AttachRequest(r) => self.attach_request(now, id, *r, verified, cp, out),
            Emm::IdentityResponse(r) => {
                if self.ues[&id].wait != Wait::Identity {
                    return;
                }
                self.stop_nas_timer(id);
                match nasx::parse_identity(&r.mobile_identity.value) {
                    Identity::Imsi(imsi) => {
                        self.claim(imsi, out);
                        self.start_auth(now, id, imsi, cp, out)
                    }
                    _ => self.attach_reject(id, 96, out),
                }
            }
            Emm::AuthenticationResponse(r) => {
                self.auth_response(now, id, &r.authentication_response_parameter.value, out)
            }
            Emm::AuthenticationFailure(f) => {
                if self.ues[&id].wait != Wait::AuthResponse {
                    return;
                }
                self.stop_nas_timer(id);
                let cause = f.emm_cause.value;
                let auts = f
                    .authentication_failure_parameter
                    .as_ref()
                    .map(|p| p.value.to_vec());
                self.auth_failure(now, id, cause, auts, cp, out);
            }
            Emm::SecurityModeComplete(_) => self.smc_complete(now, id, cp, out),
            Emm::SecurityModeReject(_) => {
                self.stop_nas_timer(id);
                self.attach_reject(id, 23, out);
            }
            Emm::AttachComplete(c) => {
                if self.ues[&id].wait != Wait::AttachComplete {
                    return;
                }
                self.stop_nas_timer(id);
                let u = self.ues.get_mut(&id).expect("present");
                u.wait = Wait::None;
                u.emm = Emm_::Registered;
                self.stats.attaches += 1;
                let _ = c; // carries Activate Default EPS Bearer Context Accept
                if let Some(name) = self.cfg.network_name.clone() {
                    let mut info = nasx::NasEmmInformation::new();
                    info.full_name_for_network =
                        Some(nasx::NasNetworkName::new(nasx::network_name_value(&name)));
                    self.send_nas(now, id, NasEpsMessage::new_emm(info), false, None, out);
                }
            }
            Emm::DetachRequestUeOriginating(d) => {
                self.ue_detach(id, d.detach_type.value & 0x08 != 0, cp, out, now)
            }
            Emm::DetachAccept(_) if self.ues[&id].wait == Wait::DetachAccept => {
                self.stop_nas_timer(id);
                self.stats.detaches += 1;
                if let Some(s) = self.ues.get_mut(&id).and_then(|u| u.slot.take()) {
                    let _ = cp.detach(s);
                }
                self.ues.get_mut(&id).expect("present").emm = Emm_::Deregistered;
                self.release(id, Cause::NAS_DETACH, true, out);
            }
            Emm::TrackingAreaUpdateRequest(t) => self.tau(now, id, *t, verified, cp, out),
            Emm::TrackingAreaUpdateComplete(_) | Emm::GutiReallocationComplete(_) => {
                let u = self.ues.get_mut(&id).expect("present");
                if let Some(t) = u.pending_tmsi.take() {
                    self.by_tmsi.remove(&u.m_tmsi);
                    u.m_tmsi = t;
                    self.by_tmsi.insert(t, id);
                    if let Some(s) = u.slot {
                        let g = self.guti_of(t);
                        let _ = cp.set_guti(s, g);
                    }
                }
                if self.ues[&id].wait == Wait::GutiReallocComplete {
                    self.ues.get_mut(&id).expect("present").wait = Wait::None;
                }
                self.stop_nas_timer(id);
            }
            Emm::EmmStatus(_) => {}
            _ => {}
        }
    }

    fn guti_of(&self, m_tmsi: u32) -> SGuti {
        SGuti {
            plmn: splmn(self.cfg.plmn),
            mme_group_id: self.cfg.mme_group_id,
            mme_code: self.cfg.mme_code,
            m_tmsi,
        }
    }

    /// Tell the node this slice now holds `imsi` (learned by identity, not by the
    /// IMSI route), so no other slice keeps a context of it.
    fn claim(&self, imsi: u64, out: &mut Vec<Output>) {
        if self.role.count > 1 {
            out.push(Output::ClaimImsi { imsi });
        }
    }

    /// Next free MME UE S1AP ID of this slice (never 0).
    fn alloc_mme_ue_id(&mut self) -> u32 {
        let ids = self.role.ids();
        loop {
            let id = self.next_id;
            self.next_id = ids.compose(self.role.index, id.wrapping_add(1));
            if id != 0 && !self.ues.contains_key(&id) {
                return id;
            }
        }
    }

    fn alloc_tmsi(&mut self) -> u32 {
        let ids = self.role.ids();
        loop {
            let t = self.next_tmsi;
            self.next_tmsi = ids.compose(self.role.index, t.wrapping_add(0x9e37_79b9) | 1);
            // A parked context keeps its M-TMSI until it expires.
            if !self.by_tmsi.contains_key(&t) && !self.parked.contains_key(&t) {
                return t;
            }
        }
    }

    fn attach_request(
        &mut self,
        now: Instant,
        id: u32,
        r: nasx::NasAttachRequest,
        _verified: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.stats.attach_requests += 1;
        let esm = r.esm_message_container.decode_as_esm_message().ok();
        let u = self.ues.get_mut(&id).expect("present");
        u.ue_net_cap = r.ue_network_capability.value.to_vec();
        u.emm = Emm_::Deregistered;
        if let Some(NasEpsMessage::Esm(h, Esm::PdnConnectivityRequest(p))) = &esm {
            u.pti = h.procedure_transaction_identity;
            u.apn = p
                .access_point_name
                .as_ref()
                .map(|a| nasx::apn_string(&a.value))
                .unwrap_or_default();
            if p.esm_information_transfer_flag
                .is_some_and(|f| f.value & 1 == 1)
            {
                u.apn.clear();
                u.pending_bearers.push(0xff); // marker: ESM info requested by the UE
            }
        } else {
            self.attach_reject(id, 96, out);
            return;
        }
        // Verified with a parked context: the subscriber is known and the UE holds the
        // keys, so identity, AKA and SMC are skipped (TS 24.301 §5.5.1.2.3).
        let u = self.ues.get_mut(&id).expect("present");
        if std::mem::take(&mut u.resumed) {
            if let (true, Some(imsi)) = (_verified, u.imsi) {
                self.stats.parked_contexts_reused += 1;
                self.claim(imsi, out);
                if self.adopt_subscriber(id, imsi, cp, out) {
                    self.security_established(now, id, cp, out);
                }
                return;
            }
        }
        match nasx::parse_identity(&r.eps_mobile_identity.value) {
            Identity::Imsi(imsi) => self.start_auth(now, id, imsi, cp, out),
            Identity::Guti(plmn, g, c, t) => {
                let known = (plmn == self.cfg.plmn.0
                    && g == self.cfg.mme_group_id
                    && c == self.cfg.mme_code)
                    .then(|| self.by_tmsi.get(&t).copied())
                    .flatten()
                    .filter(|o| *o != id);
                match known.and_then(|o| self.ues.get(&o).and_then(|u| u.imsi)) {
                    // A GUTI we allocated: re-authenticate the known subscriber.
                    Some(imsi) => self.start_auth(now, id, imsi, cp, out),
                    None => {
                        let u = self.ues.get_mut(&id).expect("present");
                        u.wait = Wait::Identity;
                        let req = nasx::NasIdentityRequest::new(nasx::NasIdentityType2::new(1));
                        let t = self.cfg.t3470;
                        self.send_nas(now, id, NasEpsMessage::new_emm(req), false, Some(t), out);
                    }
                }
            }
            Identity::Other => self.attach_reject(id, 96, out),
        }
    }

    fn start_auth(
        &mut self,
        now: Instant,
        id: u32,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        if self.adopt_subscriber(id, imsi, cp, out) {
            self.send_auth_request(now, id, imsi, out);
        }
    }

    /// Retire the older context `old` of a subscriber that attaches again. Without an
    /// S1 connection it goes at once. With one, its MME UE S1AP ID stays valid until the
    /// eNB answers the release (TS 36.413 §8.3.3): the UE Context Release Complete, on
    /// another SCTP stream than the new Initial UE Message, may well arrive after it,
    /// and must not meet an Error Indication (unknown MME UE S1AP ID). A release already
    /// under way (switch-off detach, then re-attach) is not commanded twice.
    fn supersede(&mut self, old: u32, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        let Some(o) = self.ues.get_mut(&old) else {
            return;
        };
        if let Some(s) = o.slot.take() {
            let _ = cp.detach(s);
        }
        let Some((assoc, enb_ue_id)) = o.conn else {
            self.remove_ue(old, false, cp);
            return;
        };
        let commanded = matches!(o.wait, Wait::ReleaseComplete { .. });
        o.superseded = true;
        o.emm = Emm_::Deregistered;
        o.wait = Wait::ReleaseComplete { then_remove: true };
        // Nothing of the subscriber stays here: no keys (so nothing is parked at the
        // release), no timers, no identities that could find this context again.
        o.sec = None;
        o.new_sec = None;
        o.vector = None;
        o.nh = None;
        o.retx = None;
        o.ho = None;
        o.nas_timer = None;
        o.paging_timer = None;
        o.reach_timer = None;
        o.pending_bearers.clear();
        let imsi = o.imsi.take();
        let tmsis = [Some(std::mem::take(&mut o.m_tmsi)), o.pending_tmsi.take()];
        if let Some(i) = imsi {
            if self.by_imsi.get(&i) == Some(&old) {
                self.by_imsi.remove(&i);
            }
        }
        for t in tmsis.into_iter().flatten() {
            if self.by_tmsi.get(&t) == Some(&old) {
                self.by_tmsi.remove(&t);
            }
        }
        log(
            out,
            LogLevel::Debug,
            format!("UE {old} superseded by a new attach; awaiting its release complete"),
        );
        if !commanded {
            self.send(
                assoc,
                Some(old),
                UeContextReleaseCommand {
                    ids: UeS1apIds::Pair {
                        mme_ue_id: old,
                        enb_ue_id,
                    },
                    cause: Cause::NAS_NORMAL_RELEASE,
                }
                .into(),
                out,
            );
        }
    }

    /// Make `id` the context of subscriber `imsi` (superseding an older one) and load
    /// its profile; `false` when the subscriber is unknown (the attach was rejected).
    fn adopt_subscriber(
        &mut self,
        id: u32,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> bool {
        // An older context of the same subscriber is superseded.
        if let Some(old) = self.by_imsi.get(&imsi).copied() {
            if old != id {
                self.supersede(old, cp, out);
            }
        }
        self.by_imsi.insert(imsi, id);
        let sub = match ImsiKey::fifteen_digits(imsi).map(|k| self.hss.profile_of(k)) {
            Some(Ok(Some(s))) => s,
            _ => {
                self.ues.get_mut(&id).expect("present").imsi = Some(imsi);
                // Unknown subscriber (TS 29.272 USER_UNKNOWN → EMM #8).
                self.attach_reject(id, 8, out);
                return false;
            }
        };
        let u = self.ues.get_mut(&id).expect("present");
        u.imsi = Some(imsi);
        u.ambr = if sub.ambr_ul_bps > 0 {
            (sub.ambr_ul_bps, sub.ambr_dl_bps)
        } else {
            self.cfg.default_ambr
        };
        u.qci = sub.qci;
        u.arp_priority = sub.arp_priority;
        if u.apn.is_empty() && !u.pending_bearers.contains(&0xff) {
            u.apn = sub.apn.clone();
        }
        true
    }

    fn send_auth_request(&mut self, now: Instant, id: u32, imsi: u64, out: &mut Vec<Output>) {
        let v = match ImsiKey::fifteen_digits(imsi)
            .map(|k| self.hss.next_vector_of(k, self.cfg.plmn.0, &mut self.rand))
        {
            Some(Ok(v)) => v,
            _ => {
                self.attach_reject(id, 8, out);
                return;
            }
        };
        let u = self.ues.get_mut(&id).expect("present");
        let ksi = u.next_ksi % 7;
        u.next_ksi = (ksi + 1) % 7;
        let req = nasx::NasAuthenticationRequest::new(
            nasx::NasKeySetIdentifier::new(ksi),
            nasx::NasAuthenticationParameterRand::new(v.rand.to_vec()),
            nasx::NasAuthenticationParameterAutn::new(v.autn.to_vec()),
        );
        u.vector = Some(Box::new(v));
        u.wait = Wait::AuthResponse;
        u.new_sec = None;
        // The challenge goes protected when a context is in use (re-authentication).
        let t = self.cfg.t3460;
        self.ues.get_mut(&id).expect("present").new_sec = None;
        let ksi_store = ksi;
        self.send_nas(now, id, NasEpsMessage::new_emm(req), false, Some(t), out);
        self.ues.get_mut(&id).expect("present").next_ksi = (ksi_store + 1) % 7;
    }

    fn auth_response(&mut self, now: Instant, id: u32, res: &[u8], out: &mut Vec<Output>) {
        let u = self.ues.get_mut(&id).expect("present");
        if u.wait != Wait::AuthResponse {
            return;
        }
        let Some(v) = u.vector.take() else { return };
        u.nas_timer = None;
        u.retx = None;
        let ok = res.len() == v.xres.len()
            && res
                .iter()
                .zip(v.xres.iter())
                .fold(0u8, |a, (x, y)| a | (x ^ y))
                == 0;
        if !ok {
            self.stats.auth_rejects += 1;
            self.send_nas(
                now,
                id,
                NasEpsMessage::new_emm(nasx::NasAuthenticationReject::new()),
                false,
                None,
                out,
            );
            self.release(id, Cause::NAS_AUTHENTICATION_FAILURE, true, out);
            return;
        }
        // Algorithm selection by our preference among what the UE supports.
        let cap = u.ue_net_cap.clone();
        let eea = self
            .cfg
            .eea_preference
            .iter()
            .copied()
            .find(|a| cap.first().is_some_and(|c| c & (0x80 >> *a as u8) != 0));
        let eia = self
            .cfg
            .eia_preference
            .iter()
            .copied()
            .filter(|a| *a != Eia::Eia0)
            .find(|a| cap.get(1).is_some_and(|c| c & (0x80 >> *a as u8) != 0));
        let (Some(eea), Some(eia)) = (eea, eia) else {
            self.attach_reject(id, 23, out);
            return;
        };
        let ksi = (u.next_ksi + 6) % 7;
        let ctx = match SecCtx::new(v.kasme.clone(), ksi, eea, eia) {
            Ok(c) => c,
            Err(e) => {
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: security context: {e}"),
                );
                self.attach_reject(id, 23, out);
                return;
            }
        };
        u.new_sec = Some(Box::new(ctx));
        u.wait = Wait::SmcComplete;
        let mut replay = cap
            .get(..2)
            .map(|c| c.to_vec())
            .unwrap_or_else(|| vec![0, 0]);
        replay.resize(2, 0);
        let smc = nasx::NasSecurityModeCommand::new(
            nasx::NasSecurityAlgorithms::new(((eea as u8) << 4) | eia as u8),
            nasx::NasKeySetIdentifier::new(ksi),
            nasx::NasUeSecurityCapability::new(replay),
        );
        let t = self.cfg.t3460;
        self.send_nas(now, id, NasEpsMessage::new_emm(smc), true, Some(t), out);
    }

    fn auth_failure(
        &mut self,
        now: Instant,
        id: u32,
        cause: u8,
        auts: Option<Vec<u8>>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ues.get_mut(&id).expect("present");
        let imsi = u.imsi;
        match (cause, auts, imsi) {
            // Synch failure: resynchronise the HSS once, then a fresh challenge.
            (21, Some(auts), Some(imsi)) if !u.resync_done && auts.len() == 14 => {
                u.resync_done = true;
                let rand = u.vector.as_ref().map(|v| v.rand).unwrap_or([0; 16]);
                let mut a = [0u8; 14];
                a.copy_from_slice(&auts);
                self.stats.resyncs += 1;
                if self.hss.resync(&nasx::imsi_string(imsi), rand, a).is_err() {
                    self.auth_reject(now, id, out);
                    return;
                }
                self.send_auth_request(now, id, imsi, out);
            }
            _ => {
                let _ = cp;
                self.auth_reject(now, id, out);
            }
        }
    }

    fn auth_reject(&mut self, now: Instant, id: u32, out: &mut Vec<Output>) {
        self.stats.auth_rejects += 1;
        if let Some(u) = self.ues.get_mut(&id) {
            u.vector = None;
            u.wait = Wait::None;
        }
        self.send_nas(
            now,
            id,
            NasEpsMessage::new_emm(nasx::NasAuthenticationReject::new()),
            false,
            None,
            out,
        );
        self.release(id, Cause::NAS_AUTHENTICATION_FAILURE, true, out);
    }

    fn attach_reject(&mut self, id: u32, cause: u8, out: &mut Vec<Output>) {
        self.stats.attach_rejects += 1;
        let rej = nasx::NasAttachReject::new(nasx::NasEmmCause::new(cause));
        let now = self.last_now.unwrap_or_else(Instant::now);
        if let Some(u) = self.ues.get_mut(&id) {
            u.wait = Wait::None;
            // A reject to an unauthenticated UE is sent plain.
            if u.emm == Emm_::Deregistered {
                u.sec = None;
            }
        }
        self.send_nas(now, id, NasEpsMessage::new_emm(rej), false, None, out);
        self.release(id, Cause::NAS_UNSPECIFIED, true, out);
    }

    fn smc_complete(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ues.get_mut(&id).expect("present");
        if u.wait != Wait::SmcComplete {
            return;
        }
        u.nas_timer = None;
        u.retx = None;
        u.sec = u.new_sec.take().map(|b| *b);
        self.security_established(now, id, cp, out);
    }

    /// NAS security is in place for an attach: ESM information if wanted, then the
    /// session.
    fn security_established(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ues.get_mut(&id).expect("present");
        let want_info = self.cfg.esm_info_request || u.pending_bearers.contains(&0xff);
        u.pending_bearers.retain(|b| *b != 0xff);
        if want_info {
            u.wait = Wait::EsmInfo;
            let pti = u.pti;
            let msg = NasEpsMessage::new_esm(nasx::NasEsmInformationRequest::new(), 0, pti);
            let t = self.cfg.t3460;
            self.send_nas(now, id, msg, false, Some(t), out);
            return;
        }
        self.create_session(now, id, cp, out);
    }

    #[allow(clippy::too_many_arguments)]
    fn esm(
        &mut self,
        now: Instant,
        id: u32,
        pti: u8,
        ebi: u8,
        e: Esm,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        match e {
            Esm::EsmInformationResponse(r) => {
                if self.ues[&id].wait != Wait::EsmInfo {
                    return;
                }
                self.stop_nas_timer(id);
                let u = self.ues.get_mut(&id).expect("present");
                if let Some(a) = r.access_point_name.as_ref() {
                    u.apn = nasx::apn_string(&a.value);
                }
                self.create_session(now, id, cp, out);
            }
            Esm::PdnConnectivityRequest(r) => {
                if let Err(cause) = self.pdn_connect(id, pti, &r, cp, out) {
                    self.stats.pdn_connect_rejects += 1;
                    log(
                        out,
                        LogLevel::Info,
                        format!("UE {id}: PDN connectivity rejected, ESM cause #{cause}"),
                    );
                    let rej = nasx::NasPdnConnectivityReject::new(nasx::NasEsmCause::new(cause));
                    self.send_esm_reject(now, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::PdnDisconnectRequest(r) => {
                let linked = r.linked_eps_bearer_identity.bearer_identity();
                if let Err(cause) = self.pdn_disconnect(id, pti, linked, cp, out) {
                    self.stats.pdn_disconnect_rejects += 1;
                    let rej = nasx::NasPdnDisconnectReject::new(nasx::NasEsmCause::new(cause));
                    self.send_esm_reject(now, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::BearerResourceAllocationRequest(r) => {
                if let Err(cause) = self.bearer_resource_allocation(id, pti, &r, cp, out) {
                    self.stats.bearer_resource_rejects += 1;
                    let rej =
                        nasx::NasBearerResourceAllocationReject::new(nasx::NasEsmCause::new(cause));
                    self.send_esm_reject(now, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::BearerResourceModificationRequest(r) => {
                if let Err(cause) = self.bearer_resource_modification(id, pti, &r, cp, out) {
                    self.stats.bearer_resource_rejects += 1;
                    let rej = nasx::NasBearerResourceModificationReject::new(
                        nasx::NasEsmCause::new(cause),
                    );
                    self.send_esm_reject(now, id, NasEpsMessage::new_esm(rej, 0, pti), out);
                }
            }
            Esm::ActivateDefaultEpsBearerContextAccept(_) => {
                let u = self.ues.get_mut(&id).expect("present");
                if u.pending_bearers.contains(&ebi) {
                    u.pending_bearers.retain(|b| *b != ebi);
                    self.stats.pdn_connects += 1;
                }
            }
            Esm::ActivateDefaultEpsBearerContextReject(_) => {
                // The UE refused the new PDN connection: release it (never the last).
                let u = self.ues.get_mut(&id).expect("present");
                if u.pending_bearers.contains(&ebi) {
                    u.pending_bearers.retain(|b| *b != ebi);
                    if let Some(s) = u.slot {
                        let _ = cp.remove_pdn(s, ebi);
                    }
                }
            }
            Esm::ActivateDedicatedEpsBearerContextAccept(_)
            | Esm::ModifyEpsBearerContextAccept(_) => {
                self.ues
                    .get_mut(&id)
                    .expect("present")
                    .pending_bearers
                    .retain(|b| *b != ebi);
            }
            Esm::ActivateDedicatedEpsBearerContextReject(_)
            | Esm::DeactivateEpsBearerContextAccept(_) => {
                if let Some(s) = self.ues[&id].slot {
                    let _ = cp.remove_bearer(s, ebi);
                }
                self.ues
                    .get_mut(&id)
                    .expect("present")
                    .pending_bearers
                    .retain(|b| *b != ebi);
            }
            _ => {}
        }
    }

    fn location(&self, u: &Ue) -> Location {
        Location {
            tai: STai {
                plmn: splmn(u.tai.plmn),
                tac: u.tai.tac,
            },
            ecgi: SEcgi {
                plmn: splmn(u.ecgi.plmn),
                cell_id: u.ecgi.cell_id,
            },
            enb_assoc: u.conn.map(|c| c.0).unwrap_or(0),
        }
    }

    /// ControlPlane::attach, then Initial Context Setup with Attach Accept.
    fn create_session(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = self.ues.get_mut(&id).expect("present");
        if u.apn.is_empty() {
            u.apn = self.cfg.default_apn.clone();
        }
        let u = &self.ues[&id];
        let mut p = AttachParams::new(u.imsi.unwrap_or(0));
        p.apn = u.apn.clone();
        p.location = self.location(u);
        p.ambr_ul = u.ambr.0;
        p.ambr_dl = u.ambr.1;
        p.qci = u.qci;
        p.arp = Arp {
            priority_level: u.arp_priority,
            ..Arp::default()
        };
        let att = match cp.attach(&p) {
            Ok(a) => a,
            Err(e) => {
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: slice refused attach: {e}"),
                );
                self.attach_reject(id, 22, out);
                return;
            }
        };
        let tmsi = self.alloc_tmsi();
        let guti = self.guti_of(tmsi);
        let _ = cp.set_guti(att.ue_slot, guti);
        let u = self.ues.get_mut(&id).expect("present");
        self.by_tmsi.insert(tmsi, id);
        u.m_tmsi = tmsi;
        u.slot = Some(att.ue_slot);
        if u.apn.is_empty() {
            u.apn = self.cfg.default_apn.clone();
        }
        let plmn = self.cfg.plmn.0;
        let mut act = nasx::NasActivateDefaultEpsBearerContextRequest::new(
            nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(u.qci, None)),
            nasx::NasAccessPointName::new(nasx::apn_value(&u.apn)),
            nasx::NasPdnAddress::from_ipv4(att.ue_ip.octets()),
        );
        act.apn_ambr =
            nasx::NasApnAggregateMaximumBitRate::from_kbps(u.ambr.1 / 1000, u.ambr.0 / 1000).ok();
        let esm = NasEpsMessage::new_esm(act, pepc_slice::context::FIRST_EBI, u.pti);
        let Ok(container) = nasx::NasEsmMessageContainer::from_esm_message(&esm) else {
            return;
        };
        let mut acc = nasx::NasAttachAccept::new(
            nasx::NasEpsAttachResult::new(1),
            nasx::NasT3412Value::new(nasx::gprs_timer(self.cfg.t3412.as_secs())),
            nasx::NasTrackingAreaIdentityList::new(nasx::tai_list_value(
                plmn,
                &self.cfg.served_tacs,
            )),
            container,
        );
        acc.guti = Some(nasx::NasEpsMobileIdentity::new(nasx::guti_value(
            plmn,
            self.cfg.mme_group_id,
            self.cfg.mme_code,
            tmsi,
        )));
        let msg = NasEpsMessage::new_emm(acc);
        u.wait = Wait::IcsResponse { attach: true };
        let Some(nas) = self.nas_bytes(id, &msg, false) else {
            return;
        };
        let u = self.ues.get_mut(&id).expect("present");
        u.retx = Some(Box::new((msg, false)));
        u.retx_count = 0;
        let t = self.cfg.t3450;
        self.arm(id, TimerKind::Nas, now + t);
        self.send_ics(id, Some(nas), cp, out);
    }

    /// Initial Context Setup for all the UE's bearers, with a fresh KeNB from the
    /// latest uplink NAS COUNT (TS 33.401 A.3).
    fn send_ics(
        &mut self,
        id: u32,
        nas: Option<Vec<u8>>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ues.get_mut(&id) else {
            return;
        };
        let (Some((assoc, enb_ue_id)), Some(sec), Some(slot)) = (u.conn, u.sec.as_ref(), u.slot)
        else {
            return;
        };
        let kenb = sec.kdf.kenb(sec.last_ul_count);
        // NH chain restarts from the new KeNB with NCC 0 (TS 33.401 §7.2.8.1.1).
        u.nh = Some(kenb.clone());
        u.ncc = 0;
        let Some(ctx) = cp.ue(slot) else { return };
        let mut erabs = Vec::new();
        for (i, b) in ctx.bearers.iter().enumerate() {
            erabs.push(pepc_s1ap::ERab {
                id: b.ebi,
                qci: b.qci,
                arp: s1arp(b.arp),
                gbr: gbr_of(b),
                transport: self.cfg.s1u_addr,
                teid: b.teid_ul,
                nas_pdu: if i == 0 { nas.clone() } else { None },
            });
        }
        let req = InitialContextSetupRequest {
            mme_ue_id: id,
            enb_ue_id,
            ue_ambr: pepc_s1ap::Ambr {
                dl: u.ambr.1,
                ul: u.ambr.0,
            },
            erabs,
            ue_security_capabilities: sec_caps(&u.ue_net_cap),
            security_key: S1Key(*kenb.as_bytes()),
        };
        if !matches!(u.wait, Wait::IcsResponse { .. }) {
            u.wait = Wait::IcsResponse { attach: false };
        }
        self.send(assoc, Some(id), req.into(), out);
    }

    // ---------------------------------------------------------------- UE-associated S1AP

    fn ue_message(
        &mut self,
        now: Instant,
        assoc: AssocId,
        id: u32,
        msg: S1apMessage,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.last_now = Some(now);
        use S1apMessage as M;
        if self.ues.get(&id).is_some_and(|u| u.superseded)
            && !matches!(msg, M::UeContextReleaseComplete(_))
        {
            // The context only waits for its release: whatever crossed our command
            // (NAS, a Release Request, responses) has nobody to go to.
            log(
                out,
                LogLevel::Debug,
                format!("UE {id} superseded: ignoring {}", msg.name()),
            );
            return;
        }
        let enb_id = msg.enb_ue_id();
        let from_x2_source = self.ues.get(&id).is_some_and(|u| {
            let pair = enb_id.map(|e| (assoc, e));
            pair.is_some() && u.conn != pair && u.x2_source.map(|(c, _)| c) == pair
        });
        if from_x2_source {
            return self.x2_source_message(now, id, msg, cp, out);
        }
        match msg {
            M::UplinkNasTransport(m) => {
                if let Some(u) = self.ues.get_mut(&id) {
                    u.tai = m.tai;
                    u.ecgi = m.ecgi;
                }
                self.nas_in(now, id, &m.nas_pdu, cp, out);
            }
            M::InitialContextSetupResponse(m) => {
                let u = self.ues.get_mut(&id).expect("present");
                let attach = matches!(u.wait, Wait::IcsResponse { attach: true });
                let slot = u.slot;
                let loc = self.location(&self.ues[&id]);
                if let Some(s) = slot {
                    for t in &m.erabs {
                        let _ = cp.set_enb_tunnel(s, t.id, t.transport, t.teid);
                    }
                    let _ = cp.set_location(s, loc);
                }
                let u = self.ues.get_mut(&id).expect("present");
                u.paging_timer = None;
                u.wait = if attach {
                    Wait::AttachComplete
                } else {
                    Wait::None
                };
            }
            M::InitialContextSetupFailure(_) => {
                let attach = matches!(self.ues[&id].wait, Wait::IcsResponse { attach: true });
                if attach {
                    if let Some(s) = self.ues.get_mut(&id).and_then(|u| u.slot.take()) {
                        let _ = cp.detach(s);
                    }
                    self.stop_nas_timer(id);
                    self.release(id, Cause::NAS_UNSPECIFIED, true, out);
                } else {
                    self.release(id, Cause::RADIO_UNSPECIFIED, false, out);
                }
            }
            // A Release Request crossing our Release Command (TS 36.413 §8.3.2): the
            // command in flight answers it; a second one would be answered with a
            // second Release Complete for an already removed context.
            M::UeContextReleaseRequest(_)
                if matches!(self.ues[&id].wait, Wait::ReleaseComplete { .. }) => {}
            M::UeContextReleaseRequest(m) => self.release(id, m.cause, false, out),
            M::UeContextReleaseComplete(m) => {
                let u = self.ues.get_mut(&id).expect("present");
                if u.old_conn == Some((assoc, m.enb_ue_id)) {
                    // The source side of a finished handover.
                    u.old_conn = None;
                    self.by_conn.remove(&(assoc, m.enb_ue_id));
                    return;
                }
                let remove = matches!(u.wait, Wait::ReleaseComplete { then_remove: true })
                    || u.emm == Emm_::Deregistered;
                if remove {
                    self.remove_ue(id, true, cp);
                } else {
                    self.make_idle(id, cp, out);
                }
            }
            M::NasNonDeliveryIndication(m) => {
                self.stats.nas_non_delivery += 1;
                log(
                    out,
                    LogLevel::Warn,
                    format!(
                        "UE {id}: NAS not delivered ({:?}); T3450/T3460 will retransmit",
                        m.cause
                    ),
                );
            }
            M::ERabSetupResponse(m) => {
                if let Some(s) = self.ues[&id].slot {
                    for t in &m.setup {
                        let _ = cp.set_enb_tunnel(s, t.id, t.transport, t.teid);
                    }
                    for f in &m.failed {
                        let _ = cp.remove_bearer(s, f.id);
                    }
                }
            }
            M::ERabModifyResponse(_) | M::ERabReleaseResponse(_) => {}
            M::PathSwitchRequest(m) => self.path_switch(assoc, m, cp, out),
            M::HandoverRequired(m) => self.ho_required(assoc, m, cp, out),
            M::HandoverCancel(m) => {
                let u = self.ues.get_mut(&id).expect("present");
                if let Some(h) = u.ho.take() {
                    if let Some(t) = h.target_enb_ue_id {
                        self.send(
                            h.target_assoc,
                            Some(id),
                            UeContextReleaseCommand {
                                ids: UeS1apIds::Pair {
                                    mme_ue_id: id,
                                    enb_ue_id: t,
                                },
                                cause: Cause::HANDOVER_CANCELLED,
                            }
                            .into(),
                            out,
                        );
                    }
                }
                self.send(
                    assoc,
                    Some(id),
                    HandoverCancelAcknowledge {
                        mme_ue_id: id,
                        enb_ue_id: m.enb_ue_id,
                    }
                    .into(),
                    out,
                );
            }
            M::EnbStatusTransfer(m) => {
                if let Some(h) = self.ues[&id].ho.as_ref() {
                    if let Some(t) = h.target_enb_ue_id {
                        let ta = h.target_assoc;
                        self.send(
                            ta,
                            Some(id),
                            MmeStatusTransfer {
                                mme_ue_id: id,
                                enb_ue_id: t,
                                container: m.container,
                            }
                            .into(),
                            out,
                        );
                    }
                }
            }
            M::HandoverNotify(m) => self.ho_notify(assoc, m, cp, out),
            other => log(
                out,
                LogLevel::Info,
                format!("UE {id}: ignoring {}", other.name()),
            ),
        }
    }

    /// What the source eNB of an X2 handover sent before it handed the UE over, arriving
    /// after the target's Path Switch Request. The Path Switch is newer: it decided every
    /// bearer (switched ones have the target's tunnel, the others were released), and
    /// the UE's location is the target cell.
    fn x2_source_message(
        &mut self,
        now: Instant,
        id: u32,
        msg: S1apMessage,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        use S1apMessage as M;
        match msg {
            // NAS the UE sent through the source: integrity and COUNT checks as usual.
            M::UplinkNasTransport(m) => self.nas_in(now, id, &m.nas_pdu, cp, out),
            // Bearers the source set up keep the tunnel the Path Switch gave them (or
            // stay released); those it failed to set up are gone.
            M::ERabSetupResponse(m) => {
                if let Some(s) = self.ues[&id].slot {
                    for f in &m.failed {
                        let _ = cp.remove_bearer(s, f.id);
                    }
                }
            }
            M::ERabModifyResponse(_)
            | M::ERabReleaseResponse(_)
            | M::UeContextModificationResponse(_)
            | M::NasNonDeliveryIndication(_) => {}
            // Anything else (a Release Request, a handover) concerns a connection the
            // UE has left.
            other => log(
                out,
                LogLevel::Debug,
                format!("UE {id}: ignoring {} from the X2 source", other.name()),
            ),
        }
    }

    // ---------------------------------------------------------------- Service, TAU, detach

    fn service_request(
        &mut self,
        now: Instant,
        assoc: AssocId,
        id: Option<u32>,
        m: InitialUeMessage,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.stats.service_requests += 1;
        let sr = match NasEpsMessage::decode(&m.nas_pdu) {
            Ok(NasEpsMessage::ServiceRequest(sr)) => sr,
            _ => {
                self.stats.nas_decode_errors += 1;
                return;
            }
        };
        let Some(id) = id.filter(|i| {
            self.ues
                .get(i)
                .is_some_and(|u| u.emm == Emm_::Registered && u.sec.is_some())
        }) else {
            // Unknown UE: Service Reject #9 (UE identity cannot be derived), on a temporary context.
            self.stats.service_rejects += 1;
            let tmp = self.new_ue(assoc, m.enb_ue_id, m.tai, m.ecgi);
            let rej = nasx::NasServiceReject::new(nasx::NasEmmCause::new(9));
            self.send_nas(now, tmp, NasEpsMessage::new_emm(rej), false, None, out);
            self.release(tmp, Cause::NAS_UNSPECIFIED, true, out);
            return;
        };
        let res = self
            .ues
            .get_mut(&id)
            .and_then(|u| u.sec.as_mut())
            .map(|s| s.unprotect_service_request(&sr));
        match res {
            Some(Ok(_)) => {}
            Some(Err(UnprotectError::Replay)) => {
                self.stats.nas_replays += 1;
                return;
            }
            _ => {
                self.stats.nas_bad_mac += 1;
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: Service Request MAC failure, discarded"),
                );
                return;
            }
        }
        self.attach_conn(id, assoc, m.enb_ue_id, m.tai, m.ecgi);
        self.send_ics(id, None, cp, out);
    }

    fn tau(
        &mut self,
        now: Instant,
        id: u32,
        t: nasx::NasTrackingAreaUpdateRequest,
        verified: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let registered = self
            .ues
            .get(&id)
            .is_some_and(|u| u.emm == Emm_::Registered && u.sec.is_some());
        if !verified || !registered {
            // Unknown or unverifiable: the UE must attach again (#9 / #10).
            let rej =
                nasx::NasTrackingAreaUpdateReject::new(nasx::NasEmmCause::new(if registered {
                    10
                } else {
                    9
                }));
            if let Some(u) = self.ues.get_mut(&id) {
                if !registered {
                    u.sec = None;
                }
            }
            self.send_nas(now, id, NasEpsMessage::new_emm(rej), false, None, out);
            self.release(id, Cause::NAS_UNSPECIFIED, !registered, out);
            return;
        }
        self.stats.tau += 1;
        let active = t.eps_update_type.value & 0x08 != 0;
        let u = &self.ues[&id];
        if let Some(s) = u.slot {
            let loc = self.location(u);
            let _ = cp.set_location(s, loc);
        }
        let plmn = self.cfg.plmn.0;
        let mut acc = nasx::NasTrackingAreaUpdateAccept::new(nasx::NasEpsUpdateResult::new(0));
        acc.t3412_value = Some(nasx::NasT3412Value::new(nasx::gprs_timer(
            self.cfg.t3412.as_secs(),
        )));
        acc.tai_list = Some(nasx::NasTrackingAreaIdentityList::new(
            nasx::tai_list_value(plmn, &self.cfg.served_tacs),
        ));
        acc.eps_bearer_context_status = Some(nasx::NasEpsBearerContextStatus::new(bearer_status(
            cp, u.slot,
        )));
        self.send_nas(now, id, NasEpsMessage::new_emm(acc), false, None, out);
        if active {
            self.send_ics(id, None, cp, out);
        } else {
            self.release(id, Cause::NAS_NORMAL_RELEASE, false, out);
        }
    }

    fn ue_detach(
        &mut self,
        id: u32,
        switch_off: bool,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
        now: Instant,
    ) {
        self.stats.detaches += 1;
        if let Some(s) = self.ues.get_mut(&id).and_then(|u| u.slot.take()) {
            let _ = cp.detach(s);
        }
        if let Some(u) = self.ues.get_mut(&id) {
            u.emm = Emm_::Deregistered;
            u.nas_timer = None;
            u.retx = None;
        }
        if !switch_off {
            self.send_nas(
                now,
                id,
                NasEpsMessage::new_emm(nasx::NasDetachAccept::new()),
                false,
                None,
                out,
            );
        }
        self.release(id, Cause::NAS_DETACH, true, out);
    }

    // ---------------------------------------------------------------- Network-initiated API

    /// Network-initiated detach (re-attach required), supervised by T3422. An idle UE
    /// is detached locally.
    pub fn detach_ue(
        &mut self,
        now: Instant,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let id = *self.by_imsi.get(&imsi).ok_or(MmeError::UnknownUe)?;
        if self.ues[&id].conn.is_none() {
            self.stats.detaches += 1;
            self.remove_ue(id, false, cp);
            return Ok(());
        }
        self.ues.get_mut(&id).expect("present").wait = Wait::DetachAccept;
        let req = nasx::NasDetachRequestUeTerminated::new(nasx::NasDetachType::new(1));
        let t = self.cfg.t3422;
        self.send_nas(now, id, NasEpsMessage::new_emm(req), false, Some(t), out);
        Ok(())
    }

    /// GUTI Reallocation (connected UE), supervised by T3450.
    pub fn reallocate_guti(
        &mut self,
        now: Instant,
        imsi: u64,
        out: &mut Vec<Output>,
    ) -> Result<u32, MmeError> {
        let id = *self.by_imsi.get(&imsi).ok_or(MmeError::UnknownUe)?;
        if self.ues[&id].conn.is_none() {
            return Err(MmeError::NotConnected);
        }
        let t = self.alloc_tmsi();
        let plmn = self.cfg.plmn.0;
        let cmd = nasx::NasGutiReallocationCommand::new(nasx::NasEpsMobileIdentity::new(
            nasx::guti_value(plmn, self.cfg.mme_group_id, self.cfg.mme_code, t),
        ));
        let u = self.ues.get_mut(&id).expect("present");
        u.pending_tmsi = Some(t);
        u.wait = Wait::GutiReallocComplete;
        let d = self.cfg.t3450;
        self.send_nas(now, id, NasEpsMessage::new_emm(cmd), false, Some(d), out);
        Ok(t)
    }

    /// Dedicated bearer activation (as a PCRF would ask): E-RAB Setup carrying
    /// Activate Dedicated EPS Bearer Context Request. Returns the EBI.
    #[allow(clippy::too_many_arguments)]
    pub fn activate_dedicated_bearer(
        &mut self,
        imsi: u64,
        qci: u8,
        mbr: (u64, u64),
        gbr: (u64, u64),
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<u8, MmeError> {
        let id = *self.by_imsi.get(&imsi).ok_or(MmeError::UnknownUe)?;
        let slot = self.ues[&id].slot.ok_or(MmeError::NotConnected)?;
        let linked = cp.ue(slot).ok_or(MmeError::UnknownUe)?.default_ebi;
        let tft = nasx::default_tft_value();
        self.dedicated(id, linked, qci, mbr, gbr, 0, tft, cp, out)
    }

    /// Dedicated bearer activation on the PDN connection of `linked`, with procedure
    /// transaction `pti` (0: network-initiated) and TFT value `tft`.
    #[allow(clippy::too_many_arguments)]
    fn dedicated(
        &mut self,
        id: u32,
        linked: u8,
        qci: u8,
        mbr: (u64, u64),
        gbr: (u64, u64),
        pti: u8,
        tft: Vec<u8>,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<u8, MmeError> {
        let u = &self.ues[&id];
        let (Some(slot), Some((assoc, enb_ue_id))) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        let ctx = cp.ue(slot).ok_or(MmeError::UnknownUe)?;
        if ctx.pdn_by_default_ebi(linked).is_none() {
            return Err(MmeError::NoBearer(linked));
        }
        let ebi = free_ebi(ctx).ok_or(MmeError::Busy)?;
        let p = BearerParams {
            ebi,
            linked_ebi: linked,
            qci,
            arp: Arp::default(),
            mbr_ul: mbr.0,
            mbr_dl: mbr.1,
            gbr_ul: gbr.0,
            gbr_dl: gbr.1,
            charging_key: 0,
        };
        let teid = cp
            .add_bearer(slot, p)
            .map_err(|e| MmeError::Control(e.to_string()))?;
        let g = (qci <= 4).then_some((mbr.0, mbr.1, gbr.0, gbr.1));
        let req = nasx::NasActivateDedicatedEpsBearerContextRequest::new(
            nasx::NasLinkedEpsBearerIdentity::new(linked),
            nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(qci, g)),
            nasx::NasTrafficFlowTemplate::new(tft),
        );
        let Some(nas) = self.nas_bytes(id, &NasEpsMessage::new_esm(req, ebi, pti), false) else {
            let _ = cp.remove_bearer(slot, ebi);
            return Err(MmeError::Codec("NAS".into()));
        };
        self.ues
            .get_mut(&id)
            .expect("present")
            .pending_bearers
            .push(ebi);
        let erab = pepc_s1ap::ERab {
            id: ebi,
            qci,
            arp: pepc_s1ap::Arp::default(),
            gbr: (qci <= 4).then_some(pepc_s1ap::GbrQos {
                mbr_dl: mbr.1,
                mbr_ul: mbr.0,
                gbr_dl: gbr.1,
                gbr_ul: gbr.0,
            }),
            transport: self.cfg.s1u_addr,
            teid,
            nas_pdu: Some(nas),
        };
        self.send(
            assoc,
            Some(id),
            ERabSetupRequest {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![erab],
            }
            .into(),
            out,
        );
        Ok(ebi)
    }

    /// Bearer modification: E-RAB Modify with Modify EPS Bearer Context Request.
    pub fn modify_bearer(
        &mut self,
        imsi: u64,
        ebi: u8,
        qci: u8,
        mbr: (u64, u64),
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let id = *self.by_imsi.get(&imsi).ok_or(MmeError::UnknownUe)?;
        let u = &self.ues[&id];
        let (Some(slot), Some((assoc, enb_ue_id))) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        cp.modify_bearer_qos(slot, ebi, qci, mbr.0, mbr.1)
            .map_err(|_| MmeError::NoBearer(ebi))?;
        let mut req = nasx::NasModifyEpsBearerContextRequest::new();
        req.new_eps_qos = Some(nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(
            qci, None,
        )));
        let nas = self
            .nas_bytes(id, &NasEpsMessage::new_esm(req, ebi, 0), false)
            .ok_or(MmeError::Codec("NAS".into()))?;
        let m = pepc_s1ap::ERabModify {
            id: ebi,
            qci,
            arp: pepc_s1ap::Arp::default(),
            gbr: None,
            nas_pdu: nas,
        };
        self.send(
            assoc,
            Some(id),
            ERabModifyRequest {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![m],
            }
            .into(),
            out,
        );
        Ok(())
    }

    /// Dedicated bearer deactivation: E-RAB Release with Deactivate EPS Bearer Context Request.
    pub fn deactivate_bearer(
        &mut self,
        imsi: u64,
        ebi: u8,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let id = *self.by_imsi.get(&imsi).ok_or(MmeError::UnknownUe)?;
        self.deactivate(id, ebi, 0, cp, out)
    }

    /// Deactivate dedicated bearer `ebi` (Deactivate EPS Bearer Context Request #36 in
    /// E-RAB Release Command) with procedure transaction `pti`.
    fn deactivate(
        &mut self,
        id: u32,
        ebi: u8,
        pti: u8,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), MmeError> {
        let u = &self.ues[&id];
        let (Some(slot), Some((assoc, enb_ue_id))) = (u.slot, u.conn) else {
            return Err(MmeError::NotConnected);
        };
        let ctx = cp.ue(slot).ok_or(MmeError::UnknownUe)?;
        if ctx.bearer(ebi).is_none() || ctx.pdn_by_default_ebi(ebi).is_some() {
            return Err(MmeError::NoBearer(ebi));
        }
        let req = nasx::NasDeactivateEpsBearerContextRequest::new(nasx::NasEsmCause::new(36));
        let nas = self
            .nas_bytes(id, &NasEpsMessage::new_esm(req, ebi, pti), false)
            .ok_or(MmeError::Codec("NAS".into()))?;
        let _ = cp.remove_bearer(slot, ebi);
        self.send(
            assoc,
            Some(id),
            ERabReleaseCommand {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![pepc_s1ap::ERabCause {
                    id: ebi,
                    cause: Cause::NAS_NORMAL_RELEASE,
                }],
                nas_pdu: Some(nas),
            }
            .into(),
            out,
        );
        Ok(())
    }

    // ---------------------------------------------------------------- UE-requested ESM

    /// UE-requested PDN connectivity (TS 24.301 §6.5.1): a new default bearer and an
    /// address from the next PDN pool, E-RAB Setup carrying Activate Default EPS Bearer
    /// Context Request. `Err` is the ESM cause of the PDN Connectivity Reject.
    fn pdn_connect(
        &mut self,
        id: u32,
        pti: u8,
        r: &nasx::NasPdnConnectivityRequest,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), u8> {
        let u = &self.ues[&id];
        let (Some(slot), Some((assoc, enb_ue_id)), Some(imsi)) = (u.slot, u.conn, u.imsi) else {
            return Err(31);
        };
        if u.emm != Emm_::Registered {
            return Err(31);
        }
        if pti == 0 || pti == 0xff {
            return Err(81); // invalid PTI value
        }
        match r.request_type.request_type_raw() {
            1 => {}              // initial request
            4 => return Err(31), // emergency: no emergency APN here
            _ => return Err(31), // handover from non-3GPP access: not supported
        }
        // IPv4 addresses only (TS 24.301 §6.5.1.4: #50 for an IPv6-only request).
        if r.pdn_type.value & 0x07 == 2 {
            return Err(50);
        }
        let apn = r
            .access_point_name
            .as_ref()
            .map(|a| nasx::apn_string(&a.value))
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| self.cfg.default_apn.clone());
        let sub = ImsiKey::fifteen_digits(imsi).and_then(|k| self.hss.profile_of(k).ok().flatten());
        let subscribed = sub
            .as_ref()
            .is_some_and(|s| s.apn.eq_ignore_ascii_case(&apn));
        let extra = self
            .cfg
            .extra_apns
            .iter()
            .any(|a| a.eq_ignore_ascii_case(&apn));
        if !subscribed && !extra {
            return Err(27); // missing or unknown APN
        }
        let ctx = cp.ue(slot).ok_or(31)?;
        if ctx.pdns.iter().any(|p| p.apn.eq_ignore_ascii_case(&apn)) {
            return Err(55); // multiple PDN connections for a given APN not allowed
        }
        let ebi = free_ebi(ctx).ok_or(65)?; // maximum number of EPS bearers reached
        let qci = if apn.eq_ignore_ascii_case("ims") {
            5
        } else {
            u.qci
        };
        let arp = Arp {
            priority_level: u.arp_priority,
            ..Arp::default()
        };
        let ambr = u.ambr;
        let added = cp
            .add_pdn(
                slot,
                &PdnParams {
                    apn: apn.clone(),
                    ebi,
                    qci,
                    arp,
                    charging_key: 0,
                },
            )
            .map_err(|_| 26)?; // insufficient resources (no pool / bearer slot left)
        let mut act = nasx::NasActivateDefaultEpsBearerContextRequest::new(
            nasx::NasEpsQualityOfService::new(nasx::eps_qos_value(qci, None)),
            nasx::NasAccessPointName::new(nasx::apn_value(&apn)),
            nasx::NasPdnAddress::from_ipv4(added.ue_ip.octets()),
        );
        act.apn_ambr =
            nasx::NasApnAggregateMaximumBitRate::from_kbps(ambr.1 / 1000, ambr.0 / 1000).ok();
        let Some(nas) = self.nas_bytes(id, &NasEpsMessage::new_esm(act, ebi, pti), false) else {
            let _ = cp.remove_pdn(slot, ebi);
            return Err(31);
        };
        self.ues
            .get_mut(&id)
            .expect("present")
            .pending_bearers
            .push(ebi);
        let erab = pepc_s1ap::ERab {
            id: ebi,
            qci,
            arp: s1arp(arp),
            gbr: None,
            transport: self.cfg.s1u_addr,
            teid: added.teid_ul,
            nas_pdu: Some(nas),
        };
        log(
            out,
            LogLevel::Info,
            format!(
                "UE {id}: PDN connection to {apn} on bearer {ebi}, {}",
                added.ue_ip
            ),
        );
        self.send(
            assoc,
            Some(id),
            ERabSetupRequest {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: vec![erab],
            }
            .into(),
            out,
        );
        Ok(())
    }

    /// UE-requested PDN disconnect (TS 24.301 §6.5.2): Deactivate EPS Bearer Context
    /// Request (#36) for the default bearer in an E-RAB Release Command for every bearer
    /// of the PDN connection; the address is freed. `Err` is the ESM cause.
    fn pdn_disconnect(
        &mut self,
        id: u32,
        pti: u8,
        linked: u8,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), u8> {
        let u = &self.ues[&id];
        let (Some(slot), Some((assoc, enb_ue_id))) = (u.slot, u.conn) else {
            return Err(31);
        };
        if pti == 0 || pti == 0xff {
            return Err(81);
        }
        let ctx = cp.ue(slot).ok_or(31)?;
        if ctx.pdn_by_default_ebi(linked).is_none() {
            return Err(43); // invalid EPS bearer identity
        }
        if ctx.pdns.len() == 1 {
            return Err(49); // last PDN disconnection not allowed
        }
        let req = nasx::NasDeactivateEpsBearerContextRequest::new(nasx::NasEsmCause::new(36));
        let nas = self
            .nas_bytes(id, &NasEpsMessage::new_esm(req, linked, pti), false)
            .ok_or(31u8)?;
        let ebis = cp.remove_pdn(slot, linked).map_err(|_| 31u8)?;
        self.stats.pdn_disconnects += 1;
        self.ues
            .get_mut(&id)
            .expect("present")
            .pending_bearers
            .retain(|b| !ebis.contains(b));
        self.send(
            assoc,
            Some(id),
            ERabReleaseCommand {
                mme_ue_id: id,
                enb_ue_id,
                ue_ambr: None,
                erabs: ebis
                    .iter()
                    .map(|e| pepc_s1ap::ERabCause {
                        id: *e,
                        cause: Cause::NAS_NORMAL_RELEASE,
                    })
                    .collect(),
                nas_pdu: Some(nas),
            }
            .into(),
            out,
        );
        Ok(())
    }

    /// An ESM reject to the UE: plain ESM inside the UE's protected NAS, no bearer.
    fn send_esm_reject(&mut self, now: Instant, id: u32, m: NasEpsMessage, out: &mut Vec<Output>) {
        self.send_nas(now, id, m, false, None, out);
    }

    /// Checks shared by UE-requested bearer resource allocation and modification:
    /// counts the request; the UE must be connected (#31 otherwise) and the PTI
    /// assigned (#81, TS 24.301 §7.3.1). Returns the UE's slice slot.
    fn bearer_request_slot(&mut self, id: u32, pti: u8) -> Result<u32, u8> {
        self.stats.bearer_resource_allocations += 1;
        let u = &self.ues[&id];
        let (Some(slot), Some(_)) = (u.slot, u.conn) else {
            return Err(31);
        };
        if pti == 0 || pti == 0xff {
            return Err(81);
        }
        Ok(slot)
    }

    /// UE-requested bearer resource allocation (TS 24.301 §6.5.3): a dedicated bearer
    /// with the requested QoS and the aggregate's packet filters, activated with the
    /// request's PTI. `Err` is the ESM cause of the Bearer Resource Allocation Reject.
    fn bearer_resource_allocation(
        &mut self,
        id: u32,
        pti: u8,
        r: &nasx::NasBearerResourceAllocationRequest,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), u8> {
        let slot = self.bearer_request_slot(id, pti)?;
        let linked = r.linked_eps_bearer_identity.bearer_identity();
        let ctx = cp.ue(slot).ok_or(31)?;
        if ctx.pdn_by_default_ebi(linked).is_none() {
            return Err(43); // invalid EPS bearer identity
        }
        let (qci, rates) = nasx::parse_eps_qos(&r.required_traffic_flow_qos.value).ok_or(37)?;
        // GBR QCIs need their bit rates (TS 23.203 Table 6.1.7); none is a bad request.
        let gbr_qci = (1..=4).contains(&qci);
        let rates = match (gbr_qci, rates) {
            (true, Some(r)) if r.2 > 0 || r.3 > 0 => Some(r),
            (true, _) => return Err(37), // EPS QoS not accepted
            (false, r) => r,
        };
        if !(1..=9).contains(&qci) {
            return Err(37);
        }
        if !self.cfg.ue_requested_qcis.contains(&qci) {
            return Err(30); // refused by the P-GW policy
        }
        let tft = nasx::network_tft_from_aggregate(&r.traffic_flow_aggregate)?;
        if free_ebi(ctx).is_none() {
            return Err(65); // maximum number of EPS bearers reached
        }
        let (mu, md, gu, gd) = rates.unwrap_or((0, 0, 0, 0));
        let (mbr, gbr) = if gbr_qci {
            // MBR at least GBR.
            ((mu.max(gu), md.max(gd)), (gu, gd))
        } else {
            ((0, 0), (0, 0))
        };
        self.dedicated(id, linked, qci, mbr, gbr, pti, tft, cp, out)
            .map(|_| ())
            .map_err(|e| match e {
                MmeError::Busy => 65,
                MmeError::Control(_) => 26,
                _ => 31,
            })
    }

    /// UE-requested bearer resource modification (TS 24.301 §6.5.4), release case: a
    /// traffic flow aggregate deleting the TFT (or its packet filters) of a dedicated
    /// bearer deactivates that bearer with the request's PTI. Other modifications are
    /// refused with #31. `Err` is the ESM cause of the reject.
    fn bearer_resource_modification(
        &mut self,
        id: u32,
        pti: u8,
        r: &nasx::NasBearerResourceModificationRequest,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) -> Result<(), u8> {
        let slot = self.bearer_request_slot(id, pti)?;
        let ebi = r.eps_bearer_identity_for_packet_filter.bearer_identity();
        let ctx = cp.ue(slot).ok_or(31)?;
        if ctx.bearer(ebi).is_none() {
            return Err(43); // invalid EPS bearer identity
        }
        let op = nasx::tft_operation(&r.traffic_flow_aggregate.value).ok_or(41)?;
        // 2: delete existing TFT, 5: delete packet filters (all of a dedicated bearer's
        // filters going means the bearer goes, TS 24.301 §6.5.4.3).
        if op != 2 && op != 5 {
            return Err(31);
        }
        if ctx.pdn_by_default_ebi(ebi).is_some() {
            return Err(30); // a default bearer is released by PDN disconnect only
        }
        self.deactivate(id, ebi, pti, cp, out).map_err(|_| 31)
    }

    // ---------------------------------------------------------------- Paging

    fn page(
        &mut self,
        now: Instant,
        _slot: u32,
        imsi: u64,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let Some(id) = self.by_imsi.get(&imsi).copied() else {
            cp.paging_failed(_slot);
            return;
        };
        let u = &self.ues[&id];
        if u.conn.is_some() || u.paging_timer.is_some() {
            return;
        }
        self.ues.get_mut(&id).expect("present").paging_left = self.cfg.paging_attempts;
        self.send_paging(now, id, out);
    }

    fn send_paging(&mut self, now: Instant, id: u32, out: &mut Vec<Output>) {
        let u = self.ues.get_mut(&id).expect("present");
        u.paging_left = u.paging_left.saturating_sub(1);
        let imsi = u.imsi.unwrap_or(0);
        let tais: Vec<Tai> = self
            .cfg
            .served_tacs
            .iter()
            .map(|t| Tai {
                plmn: self.cfg.plmn,
                tac: *t,
            })
            .collect();
        let msg = Paging {
            ue_identity_index: (imsi % 1024) as u16,
            paging_id: pepc_s1ap::PagingIdentity::STmsi(pepc_s1ap::STmsi {
                mmec: self.cfg.mme_code,
                m_tmsi: u.m_tmsi,
            }),
            cn_domain: pepc_s1ap::CnDomain::Ps,
            tai_list: tais.clone(),
        };
        self.stats.pagings += 1;
        // Encoded once; the node's endpoint sends it to every eNB serving the TAIs.
        match S1apMessage::from(msg).encode() {
            Ok(bytes) => out.push(Output::Page { tais, bytes }),
            Err(e) => log(out, LogLevel::Warn, format!("cannot encode Paging: {e}")),
        }
        let t = self.cfg.t3413;
        self.arm(id, TimerKind::Paging, now + t);
    }

    fn paging_expired(
        &mut self,
        now: Instant,
        id: u32,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let u = &self.ues[&id];
        if u.conn.is_some() {
            return;
        }
        if u.paging_left > 0 {
            self.send_paging(now, id, out);
        } else {
            self.stats.paging_failures += 1;
            if let Some(s) = u.slot {
                cp.paging_failed(s);
            }
        }
    }

    // ---------------------------------------------------------------- Handover

    /// Next {NH, NCC}: NH_{n+1} = KDF(KASME, NH_n) (TS 33.401 A.4, §7.2.8.4).
    fn next_nh(&mut self, id: u32) -> Option<SecurityContext> {
        let u = self.ues.get_mut(&id)?;
        let sec = u.sec.as_ref()?;
        let prev = u.nh.clone()?;
        let nh = sec.kdf.nh(&prev);
        u.ncc = (u.ncc + 1) & 7;
        let sc = SecurityContext {
            ncc: u.ncc,
            next_hop: S1Key(*nh.as_bytes()),
        };
        u.nh = Some(nh);
        Some(sc)
    }

    fn path_switch(
        &mut self,
        assoc: AssocId,
        m: PathSwitchRequest,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let id = m.source_mme_ue_id;
        let fail = |s: &mut Self, out: &mut Vec<Output>, cause| {
            s.send(
                assoc,
                None,
                PathSwitchRequestFailure {
                    mme_ue_id: id,
                    enb_ue_id: m.enb_ue_id,
                    cause,
                }
                .into(),
                out,
            );
        };
        let Some(u) = self.ues.get(&id) else {
            return fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        let (Some(slot), true) = (u.slot, u.conn.is_some() && u.sec.is_some()) else {
            return fail(self, out, Cause::UNKNOWN_MME_UE_S1AP_ID);
        };
        for t in &m.erabs {
            if cp.set_enb_tunnel(slot, t.id, t.transport, t.teid).is_err() {
                return fail(self, out, Cause::UNKNOWN_E_RAB_ID);
            }
        }
        // Bearers the target did not switch are released (TS 23.401 §5.5.1.1.2); a PDN
        // connection whose default bearer was not switched goes with all its bearers.
        let switched: Vec<u8> = m.erabs.iter().map(|t| t.id).collect();
        let Some(released) = release_unlisted(cp, slot, &switched) else {
            return fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        // A late accept of a released bearer (through the source) completes nothing.
        self.ues
            .get_mut(&id)
            .expect("present")
            .pending_bearers
            .retain(|b| !released.contains(b));
        let old = self.ues[&id].conn;
        if let Some(c) = old {
            self.by_conn.remove(&c);
        }
        self.attach_conn(id, assoc, m.enb_ue_id, m.tai, m.ecgi);
        // Not in `by_conn`: the source frees its eNB UE S1AP ID at the X2 release and
        // may give it to a new UE; late messages carry our MME UE S1AP ID anyway.
        let now = self.now_hint();
        let u = self.ues.get_mut(&id).expect("present");
        u.x2_source = old
            .filter(|c| *c != (assoc, m.enb_ue_id))
            .zip(now.map(|n| n + X2_SOURCE_GRACE));
        let loc = self.location(&self.ues[&id]);
        let _ = cp.set_location(slot, loc);
        let Some(sc) = self.next_nh(id) else {
            return fail(self, out, Cause::MISC_UNSPECIFIED);
        };
        self.stats.path_switches += 1;
        let ack = PathSwitchRequestAcknowledge {
            mme_ue_id: id,
            enb_ue_id: m.enb_ue_id,
            ue_ambr: None,
            erabs_switched_ul: vec![],
            erabs_to_release: released
                .iter()
                .map(|e| pepc_s1ap::ERabCause {
                    id: *e,
                    cause: Cause::RADIO_UNSPECIFIED,
                })
                .collect(),
            security_context: sc,
        };
        self.send(assoc, Some(id), ack.into(), out);
    }

    fn ho_required(
        &mut self,
        assoc: AssocId,
        m: HandoverRequired,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        let prep_fail = |s: &mut Self, out: &mut Vec<Output>, cause| {
            s.send(
                assoc,
                Some(id),
                HandoverPreparationFailure {
                    mme_ue_id: id,
                    enb_ue_id: m.enb_ue_id,
                    cause,
                }
                .into(),
                out,
            );
        };
        let target = match &m.target {
            pepc_s1ap::TargetId::Enb { global_enb_id, .. } => {
                self.enb_by_gid.get(global_enb_id).copied()
            }
            _ => None,
        };
        let Some(target) = target else {
            return prep_fail(self, out, Cause::UNKNOWN_TARGET_ID);
        };
        let u = &self.ues[&id];
        let (Some(slot), true) = (u.slot, u.sec.is_some()) else {
            return prep_fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        let Some(ctx) = cp.ue(slot) else {
            return prep_fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        let erabs = ctx
            .bearers
            .iter()
            .map(|b| pepc_s1ap::ERab {
                id: b.ebi,
                qci: b.qci,
                arp: s1arp(b.arp),
                gbr: gbr_of(b),
                transport: self.cfg.s1u_addr,
                teid: b.teid_ul,
                nas_pdu: None,
            })
            .collect();
        let caps = sec_caps(&u.ue_net_cap);
        let ambr = pepc_s1ap::Ambr {
            dl: u.ambr.1,
            ul: u.ambr.0,
        };
        let Some(sc) = self.next_nh(id) else {
            return prep_fail(self, out, Cause::RADIO_UNSPECIFIED);
        };
        let req = HandoverRequest {
            mme_ue_id: id,
            handover_type: m.handover_type,
            cause: m.cause,
            ue_ambr: ambr,
            erabs,
            container: m.container.clone(),
            ue_security_capabilities: caps,
            security_context: sc,
        };
        self.ues.get_mut(&id).expect("present").ho = Some(Box::new(HoState {
            target_assoc: target,
            target_enb_ue_id: None,
            admitted: vec![],
            source: (assoc, m.enb_ue_id),
        }));
        self.send(target, Some(id), req.into(), out);
    }

    fn ho_request_ack(
        &mut self,
        assoc: AssocId,
        m: HandoverRequestAcknowledge,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        let Some(h) = self
            .ues
            .get_mut(&id)
            .and_then(|u| u.ho.as_mut())
            .filter(|h| h.target_assoc == assoc)
        else {
            self.stats.unknown_ue_ids += 1;
            self.error_indication(
                assoc,
                "Handover Request Acknowledge",
                Some(id),
                Some(m.enb_ue_id),
                Cause::UNKNOWN_MME_UE_S1AP_ID,
                out,
            );
            return;
        };
        h.target_enb_ue_id = Some(m.enb_ue_id);
        h.admitted = m.admitted.clone();
        let (sa, se) = h.source;
        self.by_conn.insert((assoc, m.enb_ue_id), id);
        let cmd = HandoverCommand {
            mme_ue_id: id,
            enb_ue_id: se,
            handover_type: 0,
            erabs_forwarding: vec![],
            erabs_to_release: m.failed.clone(),
            container: m.container,
        };
        self.send(sa, Some(id), cmd.into(), out);
    }

    fn ho_failure(&mut self, assoc: AssocId, m: HandoverFailure, out: &mut Vec<Output>) {
        let id = m.mme_ue_id;
        let Some(h) = self.ues.get_mut(&id).and_then(|u| u.ho.take()) else {
            return;
        };
        let _ = assoc;
        self.send(
            h.source.0,
            Some(id),
            HandoverPreparationFailure {
                mme_ue_id: id,
                enb_ue_id: h.source.1,
                cause: m.cause,
            }
            .into(),
            out,
        );
    }

    fn ho_notify(
        &mut self,
        assoc: AssocId,
        m: HandoverNotify,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let id = m.mme_ue_id;
        let Some(h) = self.ues.get_mut(&id).and_then(|u| u.ho.take()) else {
            return;
        };
        let slot = self.ues[&id].slot;
        if let Some(s) = slot {
            for a in &h.admitted {
                let _ = cp.set_enb_tunnel(s, a.id, a.transport, a.teid);
            }
            // Bearers the target did not admit are gone (the Handover Command listed
            // them for release).
            let admitted: Vec<u8> = h.admitted.iter().map(|a| a.id).collect();
            if release_unlisted(cp, s, &admitted).is_none() {
                log(
                    out,
                    LogLevel::Warn,
                    format!("UE {id}: target admitted no default bearer"),
                );
            }
        }
        let u = self.ues.get_mut(&id).expect("present");
        u.conn = Some((assoc, m.enb_ue_id));
        u.old_conn = Some(h.source);
        u.tai = m.tai;
        u.ecgi = m.ecgi;
        self.by_conn.insert((assoc, m.enb_ue_id), id);
        if let Some(s) = slot {
            let loc = self.location(&self.ues[&id]);
            let _ = cp.set_location(s, loc);
        }
        self.stats.s1_handovers += 1;
        self.send(
            h.source.0,
            Some(id),
            UeContextReleaseCommand {
                ids: UeS1apIds::Pair {
                    mme_ue_id: id,
                    enb_ue_id: h.source.1,
                },
                cause: Cause::SUCCESSFUL_HANDOVER,
            }
            .into(),
            out,
        );
    }
}

/// Remove the UE's bearers not in `kept` (a PDN connection whose default bearer is not
/// kept goes whole); returns the EBIs removed. `None` (nothing removed) when no PDN
/// connection's default bearer is kept: the UE would be left without one.
fn release_unlisted(cp: &mut ControlPlane, slot: u32, kept: &[u8]) -> Option<Vec<u8>> {
    let ctx = cp.ue(slot)?;
    if !ctx.pdns.iter().any(|p| kept.contains(&p.default_ebi)) {
        return None;
    }
    let gone_pdns: Vec<u8> = ctx
        .pdns
        .iter()
        .map(|p| p.default_ebi)
        .filter(|e| !kept.contains(e))
        .collect();
    let mut released = vec![];
    for d in gone_pdns {
        if let Ok(ebis) = cp.remove_pdn(slot, d) {
            released.extend(ebis);
        }
    }
    let gone: Vec<u8> = cp
        .ue(slot)?
        .bearers
        .iter()
        .map(|b| b.ebi)
        .filter(|e| !kept.contains(e))
        .collect();
    for e in gone {
        if cp.remove_bearer(slot, e).is_ok() {
            released.push(e);
        }
    }
    Some(released)
}

/// The lowest EPS bearer identity the UE does not use (5..=15).
fn free_ebi(ctx: &pepc_slice::context::UeContext) -> Option<u8> {
    (pepc_slice::context::FIRST_EBI..=15).find(|e| ctx.bearer(*e).is_none())
}

/// How long the source connection of an X2 handover stays known after the Path Switch:
/// far longer than messages in flight on another association can lag.
const X2_SOURCE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

fn log(out: &mut Vec<Output>, lvl: LogLevel, s: String) {
    out.push(Output::Log(lvl, s));
}

fn s1arp(a: Arp) -> pepc_s1ap::Arp {
    pepc_s1ap::Arp {
        priority_level: a.priority_level,
        pre_emption_capability: a.pre_emption_capability,
        pre_emption_vulnerability: a.pre_emption_vulnerability,
    }
}

fn gbr_of(b: &pepc_slice::context::BearerContext) -> Option<pepc_s1ap::GbrQos> {
    (b.qci <= 4 && b.qci > 0).then_some(pepc_s1ap::GbrQos {
        mbr_dl: b.mbr_dl,
        mbr_ul: b.mbr_ul,
        gbr_dl: b.gbr_dl,
        gbr_ul: b.gbr_ul,
    })
}

/// S1AP UE security capabilities from the NAS UE network capability: bit 1 of the
/// 16-bit strings is EEA1/EIA1 (TS 36.413 9.2.1.40); EEA0/EIA0 are implied.
fn sec_caps(cap: &[u8]) -> UeSecurityCapabilities {
    let e = cap.first().copied().unwrap_or(0) & 0x70;
    let i = cap.get(1).copied().unwrap_or(0) & 0x70;
    UeSecurityCapabilities {
        eea: (e as u16) << 9,
        eia: (i as u16) << 9,
    }
}

fn bearer_status(cp: &ControlPlane, slot: Option<u32>) -> Vec<u8> {
    let mut bits = 0u16;
    if let Some(u) = slot.and_then(|s| cp.ue(s)) {
        for b in &u.bearers {
            bits |= 1 << b.ebi;
        }
    }
    vec![(bits & 0xff) as u8, (bits >> 8) as u8]
}

/// RAND source reading the OS CSPRNG (for drivers; the state machine takes any source).
/// The device stays open and is read 4 KiB at a time: opening it per RAND cost an
/// open/read/close per attach (a fifth of the control core's time).
pub fn urandom() -> Box<dyn FnMut() -> [u8; 16] + Send> {
    use std::io::Read;
    const CHUNK: usize = 4096;
    let mut file = std::fs::File::open("/dev/urandom").ok();
    let mut buf = vec![0u8; CHUNK];
    let mut pos = CHUNK;
    Box::new(move || {
        let mut b = [0u8; 16];
        if pos + 16 > CHUNK {
            if file.is_none() {
                file = std::fs::File::open("/dev/urandom").ok();
            }
            match file.as_mut().map(|f| f.read_exact(&mut buf)) {
                Some(Ok(())) => pos = 0,
                _ => {
                    // Unreadable now: drop the handle so the next call reopens it.
                    file = None;
                    return b;
                }
            }
        }
        b.copy_from_slice(&buf[pos..pos + 16]);
        // A RAND is used once: the bytes handed out do not stay in the buffer.
        buf[pos..pos + 16].fill(0);
        pos += 16;
        b
    })
}
