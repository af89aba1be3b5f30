//! The node's S1AP endpoint (PEPC §3.3's demux, for signaling): it owns the eNB
//! associations, does the non-UE-associated procedures itself (S1 Setup, eNB
//! Configuration Update, Reset in both directions, Error Indication, Paging fan-out)
//! and steers every UE-associated message to the slice whose MME holds the UE:
//!
//! * by the slice bits of the MME UE S1AP ID (the Source MME UE S1AP ID of a Path
//!   Switch Request), which that slice allocated (`pepc_slice::ids::SignalingIds`);
//! * an Initial UE Message by the slice bits of its S-TMSI or of a GUTI of ours;
//! * an attach by IMSI, or by a GUTI this node did not allocate, by the node's
//!   user→slice [`SlicePolicy`] — except IMSIs that a slice claimed after learning
//!   them another way (a foreign GUTI's Identity Response, a parked context): those
//!   are in a small exception table kept here, so one IMSI has one context on the
//!   node whatever the order of identities.
//!
//! Sans-IO like the MME: one thread (or the only slice's control thread) feeds it the
//! transport's events and the slices' outputs, and sends what it returns. It reads
//! each message's routing fields in place ([`pepc_s1ap::peek`]) and decodes only
//! what it handles itself; slices decode the rest. It shares no state with the
//! slices: they learn of eNBs from [`Input::EnbSetup`] / [`Input::EnbDown`].

use crate::config::MmeConfig;
use crate::mme::{AssocId, Input, Output};
use crate::overload::{Change, OverloadControl, OverloadStats};
use pepc_nas::peek::{initial_identity, NasIdentity};
use pepc_s1ap::msg::*;
use pepc_s1ap::peek::{peek, procedure, PduKind};
use pepc_s1ap::{Cause, GlobalEnbId, ResetKind, ServedGummei, Tai, UeConnection};
use pepc_slice::ids::SignalingIds;
use std::collections::HashMap;
use std::time::Instant;

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// How the node assigns a user (by IMSI) to a slice when nothing else decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SlicePolicy {
    /// Jump consistent hash of the IMSI (Lamping & Veach): adding a slice moves
    /// only 1/(n+1) of the users.
    #[default]
    ConsistentHash,
    /// IMSI modulo the slice count (contiguous IMSIs spread round-robin).
    Modulo,
}

/// A slice policy name that is none of ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown slice policy {0:?} (\"consistent-hash\" or \"modulo\")")]
pub struct UnknownSlicePolicy(pub String);

impl SlicePolicy {
    pub fn parse(s: &str) -> Result<Self, UnknownSlicePolicy> {
        match s {
            "consistent-hash" | "hash" => Ok(SlicePolicy::ConsistentHash),
            "modulo" => Ok(SlicePolicy::Modulo),
            o => Err(UnknownSlicePolicy(o.to_string())),
        }
    }

    /// The slice of `key` (an IMSI, or an M-TMSI of another MME) among `slices`.
    pub fn slice_of(&self, key: u64, slices: usize) -> usize {
        if slices <= 1 {
            return 0;
        }
        match self {
            SlicePolicy::Modulo => (key % slices as u64) as usize,
            SlicePolicy::ConsistentHash => {
                // Jump consistent hash over a mixed key (IMSIs are sequential).
                let mut k = key.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (key >> 29);
                let (mut b, mut j) = (-1i64, 0i64);
                while j < slices as i64 {
                    b = j;
                    k = k.wrapping_mul(2_862_933_555_777_941_757).wrapping_add(1);
                    j = ((b + 1) as f64 * ((1u64 << 31) as f64 / ((k >> 33) + 1) as f64)) as i64;
                }
                b as usize
            }
        }
    }
}

/// Where the MME of slice `index` of `count` sits, so it allocates identifiers the
/// demux steers back to it and knows which users it holds by exception.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceRole {
    pub index: usize,
    pub count: usize,
    pub policy: SlicePolicy,
}

impl Default for SliceRole {
    fn default() -> Self {
        SliceRole {
            index: 0,
            count: 1,
            policy: SlicePolicy::default(),
        }
    }
}

impl SliceRole {
    pub fn ids(&self) -> SignalingIds {
        SignalingIds::new(self.count)
    }
    /// Whether the policy alone would bring `imsi` here.
    pub fn is_home_of(&self, imsi: u64) -> bool {
        self.policy.slice_of(imsi, self.count) == self.index
    }
}

/// Counters of the endpoint. Read by the driver for metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointStats {
    pub s1_setups: u64,
    pub s1_setup_failures: u64,
    pub enb_config_updates: u64,
    pub enb_config_update_failures: u64,
    pub resets_rx: u64,
    pub resets_tx: u64,
    pub error_indications_rx: u64,
    pub s1ap_decode_errors: u64,
    /// UE-associated messages on an association whose S1 Setup did not succeed.
    pub before_setup: u64,
    /// UE-associated messages naming no slice of this node.
    pub unknown_ue_ids: u64,
    /// Messages steered to a slice.
    pub demuxed: u64,
    /// Paging messages sent (one per eNB reached).
    pub pagings_sent: u64,
    /// IMSIs held outside their policy slice (claims in force).
    pub imsi_exceptions: u64,
    pub supersedes_sent: u64,
}

struct Enb {
    out_streams: u16,
    global_id: Option<GlobalEnbId>,
    tais: Vec<Tai>,
}

/// An eNB as the operator sees it (the management API's `/enbs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnbView {
    pub association: AssocId,
    pub global_id: GlobalEnbId,
    pub tais: Vec<Tai>,
}

/// A Reset from an eNB waiting for the slices to release its UEs.
struct PendingReset {
    assoc: AssocId,
    waiting: usize,
    /// Echoed in the Reset Acknowledge (empty for a full reset).
    connections: Vec<UeConnection>,
    /// Our own Reset: the eNB acknowledges, not us.
    ours: bool,
}

/// Most Resets in flight at once (each waits for every slice's answer, which comes
/// within one control-loop round; more means eNBs repeat Resets faster than that).
const MAX_PENDING_RESETS: usize = 256;

/// What the endpoint returns: messages for the transport (and logs), and inputs for
/// slices' MMEs, in order.
#[derive(Debug, Default)]
pub struct EndpointOut {
    pub wire: Vec<Output>,
    pub slices: Vec<(usize, Input)>,
}

impl EndpointOut {
    pub fn is_empty(&self) -> bool {
        self.wire.is_empty() && self.slices.is_empty()
    }
}

pub struct S1apEndpoint {
    cfg: MmeConfig,
    slices: usize,
    ids: SignalingIds,
    policy: SlicePolicy,
    enbs: Map<AssocId, Enb>,
    enb_by_gid: Map<GlobalEnbId, AssocId>,
    /// IMSI → slice, for IMSIs whose context is not in their policy slice.
    imsi_exceptions: Map<u64, u16>,
    resets: Map<u64, PendingReset>,
    next_token: u64,
    overload: OverloadControl,
    changes: Vec<Change>,
    pub stats: EndpointStats,
}

impl S1apEndpoint {
    pub fn new(cfg: MmeConfig, slices: usize, policy: SlicePolicy) -> Self {
        S1apEndpoint {
            slices: slices.max(1),
            ids: SignalingIds::new(slices),
            policy,
            enbs: Map::default(),
            enb_by_gid: Map::default(),
            imsi_exceptions: Map::default(),
            resets: Map::default(),
            next_token: 1,
            overload: OverloadControl::new(cfg.overload.clone(), slices),
            changes: Vec::new(),
            cfg,
            stats: EndpointStats::default(),
        }
    }

    /// Overload control (`crate::overload`): slice `slice` has `backlog` messages
    /// waiting at `now` (the driver reports it every round). A congested slice is
    /// told to turn new attaches away; while any is, every eNB is told OVERLOAD
    /// START, and OVERLOAD STOP once all have drained.
    pub fn observe_backlog(
        &mut self,
        now: Instant,
        slice: usize,
        backlog: usize,
        out: &mut EndpointOut,
    ) {
        self.overload
            .observe(now, slice, backlog, &mut self.changes);
        for c in std::mem::take(&mut self.changes) {
            match c {
                // Ahead of the slice's queued messages: the attaches waiting there
                // are the ones congestion must turn away.
                Change::Slice { slice, on } => {
                    out.slices.insert(0, (slice, Input::Congestion { on }))
                }
                Change::Node { on } => {
                    if on {
                        tracing::warn!(
                            "overload: slice {slice} congested (backlog {backlog}, bound {}); OVERLOAD START to {} eNB(s)",
                            self.overload.config().high,
                            self.enb_count()
                        );
                    } else {
                        tracing::warn!(
                            "overload over: every slice under its bounds; OVERLOAD STOP to {} eNB(s)",
                            self.enb_count()
                        );
                    }
                    let setup: Vec<AssocId> = self
                        .enbs
                        .iter()
                        .filter(|(_, e)| e.global_id.is_some())
                        .map(|(a, _)| *a)
                        .collect();
                    for a in setup {
                        self.send_overload(a, on, out);
                    }
                }
            }
        }
    }

    /// What overload control did so far.
    pub fn overload_stats(&self) -> &OverloadStats {
        &self.overload.stats
    }

    pub fn overloaded(&self) -> bool {
        self.overload.overloaded()
    }

    fn send_overload(&mut self, assoc: AssocId, on: bool, out: &mut EndpointOut) {
        let m: S1apMessage = if on {
            OverloadStart {
                action: self.overload.config().action,
                traffic_load_reduction: None,
            }
            .into()
        } else {
            OverloadStop {}.into()
        };
        self.send(assoc, m, out);
    }

    /// The role of slice `index` (for its MME).
    pub fn role(&self, index: usize) -> SliceRole {
        SliceRole {
            index,
            count: self.slices,
            policy: self.policy,
        }
    }

    pub fn slices(&self) -> usize {
        self.slices
    }

    /// The eNBs set up, by association (for the management API).
    pub fn enb_views(&self) -> Vec<EnbView> {
        let mut v: Vec<EnbView> = self
            .enbs
            .iter()
            .filter_map(|(a, e)| {
                Some(EnbView {
                    association: *a,
                    global_id: e.global_id?,
                    tais: e.tais.clone(),
                })
            })
            .collect();
        v.sort_by_key(|e| e.association);
        v
    }

    /// Associations whose S1 Setup succeeded.
    pub fn enb_count(&self) -> usize {
        self.enbs.values().filter(|e| e.global_id.is_some()).count()
    }

    /// The slice holding (or to hold) `imsi`.
    pub fn slice_of_imsi(&self, imsi: u64) -> usize {
        match self.imsi_exceptions.get(&imsi) {
            Some(s) => *s as usize,
            None => self.policy.slice_of(imsi, self.slices),
        }
    }

    /// A new association (S1 Setup not done yet).
    pub fn assoc_up(&mut self, assoc: AssocId, out_streams: u16) {
        self.enbs.insert(
            assoc,
            Enb {
                out_streams: out_streams.max(1),
                global_id: None,
                tais: vec![],
            },
        );
    }

    /// The association is gone: every slice makes that eNB's UEs idle (TS 23.401
    /// §5.3.5); idle UEs stay registered.
    pub fn assoc_down(&mut self, assoc: AssocId, out: &mut EndpointOut) {
        if let Some(e) = self.enbs.remove(&assoc) {
            if let Some(g) = e.global_id {
                if self.enb_by_gid.get(&g) == Some(&assoc) {
                    self.enb_by_gid.remove(&g);
                }
            }
        }
        self.resets.retain(|_, r| r.assoc != assoc);
        for s in 0..self.slices {
            out.slices.push((s, Input::EnbDown { assoc }));
        }
    }

    fn send(&self, assoc: AssocId, msg: S1apMessage, out: &mut EndpointOut) {
        match msg.encode() {
            Ok(bytes) => out.wire.push(Output::S1ap {
                assoc,
                stream: 0,
                bytes,
            }),
            Err(e) => tracing::warn!("cannot encode {}: {e}", msg.name()),
        }
    }

    fn error_indication(
        &mut self,
        assoc: AssocId,
        what: &str,
        mme: Option<u32>,
        enb: Option<u32>,
        cause: Cause,
        out: &mut EndpointOut,
    ) {
        crate::enb::send_error_indication(assoc, what, mme, enb, cause, &mut out.wire);
    }

    /// The slice an Initial UE Message goes to.
    fn initial_slice(&self, s_tmsi: Option<(u8, u32)>, nas: Option<&[u8]>) -> usize {
        let ours = |t: u32| {
            let s = self.ids.slice_of(t);
            (s < self.slices).then_some(s)
        };
        if let Some((mmec, t)) = s_tmsi {
            if mmec == self.cfg.mme_code {
                if let Some(s) = ours(t) {
                    return s;
                }
            }
        }
        match nas.map(initial_identity).unwrap_or(NasIdentity::None) {
            NasIdentity::Imsi(i) => self.slice_of_imsi(i),
            NasIdentity::Guti {
                plmn,
                mme_group_id,
                mme_code,
                m_tmsi,
            } => {
                let mine = plmn == self.cfg.plmn.0
                    && mme_group_id == self.cfg.mme_group_id
                    && mme_code == self.cfg.mme_code;
                match mine.then(|| ours(m_tmsi)).flatten() {
                    Some(s) => s,
                    // Another MME's GUTI: any slice will do until the IMSI is known.
                    None => self.policy.slice_of(u64::from(m_tmsi), self.slices),
                }
            }
            NasIdentity::None => match s_tmsi {
                Some((_, t)) => self.policy.slice_of(u64::from(t), self.slices),
                None => 0,
            },
        }
    }

    /// An S1AP PDU from an eNB.
    pub fn on_s1ap(&mut self, assoc: AssocId, stream: u16, bytes: Vec<u8>, out: &mut EndpointOut) {
        let setup = match self.enbs.get(&assoc) {
            Some(e) => e.global_id.is_some(),
            None => {
                self.assoc_up(assoc, 1);
                false
            }
        };
        let p = match peek(&bytes) {
            Ok(p) => p,
            Err(e) => {
                self.stats.s1ap_decode_errors += 1;
                pepc_ratelog::peer_warn!(
                    pepc_ratelog::Kind::S1apUndecodable,
                    "assoc {assoc}: undecodable S1AP: {e}"
                );
                let cause = Cause::TRANSFER_SYNTAX_ERROR;
                self.error_indication(assoc, "undecodable S1AP", None, None, cause, out);
                return;
            }
        };
        if p.is_non_ue_associated() {
            return self.non_ue_associated(assoc, &bytes, out);
        }
        let slice = match p.procedure {
            procedure::INITIAL_UE_MESSAGE if p.kind == PduKind::Initiating => {
                Some(self.initial_slice(p.s_tmsi, p.nas_pdu))
            }
            procedure::PATH_SWITCH_REQUEST if p.kind == PduKind::Initiating => p
                .source_mme_ue_id
                .map(|i| self.ids.slice_of(i))
                .filter(|s| *s < self.slices),
            _ => p
                .mme_ue_id
                .map(|i| self.ids.slice_of(i))
                .filter(|s| *s < self.slices),
        };
        if !setup {
            // TS 36.413 §8.7.3: the association carries UE signaling only after S1
            // Setup; answer as for a message out of state.
            self.stats.before_setup += 1;
            let cause = Cause::MESSAGE_NOT_COMPATIBLE_WITH_RECEIVER_STATE;
            let id = p.mme_ue_id.or(p.source_mme_ue_id);
            self.error_indication(assoc, "UE signaling before S1 Setup", id, None, cause, out);
            return;
        }
        let Some(slice) = slice else {
            self.stats.unknown_ue_ids += 1;
            let id = p.mme_ue_id.or(p.source_mme_ue_id);
            let cause = if id.is_some() {
                Cause::UNKNOWN_MME_UE_S1AP_ID
            } else {
                Cause::ABSTRACT_SYNTAX_ERROR_REJECT
            };
            self.error_indication(assoc, "UE-associated message", id, None, cause, out);
            return;
        };
        self.stats.demuxed += 1;
        out.slices.push((
            slice,
            Input::S1ap {
                assoc,
                stream,
                bytes,
            },
        ));
    }

    fn non_ue_associated(&mut self, assoc: AssocId, bytes: &[u8], out: &mut EndpointOut) {
        let msg = match S1apMessage::decode(bytes) {
            Ok(m) => m,
            Err(e) => {
                self.stats.s1ap_decode_errors += 1;
                crate::enb::undecodable_s1ap(assoc, &e, &mut out.wire);
                return;
            }
        };
        use S1apMessage as M;
        match msg {
            M::S1SetupRequest(m) => self.s1_setup(assoc, m, out),
            M::EnbConfigurationUpdate(m) => self.enb_configuration_update(assoc, m, out),
            M::Reset(m) => self.reset_from_enb(assoc, m, out),
            M::ResetAcknowledge(_) => {}
            M::ErrorIndication(m) => {
                self.stats.error_indications_rx += 1;
                pepc_ratelog::peer_warn!(
                    pepc_ratelog::Kind::ErrorIndication,
                    "assoc {assoc}: Error Indication {:?} (MME {:?}, eNB {:?})",
                    m.cause,
                    m.mme_ue_id,
                    m.enb_ue_id
                );
            }
            other => pepc_ratelog::peer_warn!(
                pepc_ratelog::Kind::S1apUnexpected,
                "assoc {assoc}: ignoring {}",
                other.name()
            ),
        }
    }

    fn serves_our_plmn(&self, tas: &[pepc_s1ap::SupportedTa]) -> bool {
        tas.iter().any(|ta| ta.plmns.contains(&self.cfg.plmn))
    }

    fn tais_of(tas: &[pepc_s1ap::SupportedTa]) -> Vec<Tai> {
        tas.iter()
            .flat_map(|ta| {
                ta.plmns.iter().map(|p| Tai {
                    plmn: *p,
                    tac: ta.tac,
                })
            })
            .collect()
    }

    /// S1 Setup (TS 36.413 §8.7.3).
    fn s1_setup(&mut self, assoc: AssocId, m: S1SetupRequest, out: &mut EndpointOut) {
        if !self.serves_our_plmn(&m.supported_tas) {
            self.stats.s1_setup_failures += 1;
            let f = S1SetupFailure {
                cause: Cause::UNKNOWN_PLMN,
                time_to_wait: None,
            };
            self.send(assoc, f.into(), out);
            return;
        }
        // Re-association of a known eNB: the old association is gone for good.
        if let Some(old) = self.enb_by_gid.get(&m.global_enb_id).copied() {
            if old != assoc {
                tracing::info!(
                    "eNB {:?} set up again on association {assoc}: association {old} replaced",
                    m.global_enb_id
                );
                self.assoc_down(old, out);
                out.wire.push(Output::CloseAssoc { assoc: old });
            }
        }
        let tais = Self::tais_of(&m.supported_tas);
        let e = self.enbs.entry(assoc).or_insert(Enb {
            out_streams: 1,
            global_id: None,
            tais: vec![],
        });
        e.global_id = Some(m.global_enb_id);
        e.tais = tais;
        let out_streams = e.out_streams;
        self.enb_by_gid.insert(m.global_enb_id, assoc);
        self.stats.s1_setups += 1;
        for s in 0..self.slices {
            out.slices.push((
                s,
                Input::EnbSetup {
                    assoc,
                    out_streams,
                    global_id: m.global_enb_id,
                },
            ));
        }
        let resp = S1SetupResponse {
            mme_name: self.cfg.mme_name.clone(),
            served_gummeis: vec![ServedGummei {
                plmns: vec![self.cfg.plmn],
                group_ids: vec![self.cfg.mme_group_id],
                codes: vec![self.cfg.mme_code],
            }],
            relative_capacity: self.cfg.relative_capacity,
        };
        self.send(assoc, resp.into(), out);
        // An eNB that joins during an overload learns of it at once.
        if self.overload.overloaded() {
            self.send_overload(assoc, true, out);
        }
    }

    /// eNB Configuration Update (TS 36.413 §8.7.4): new TAs replace the old ones
    /// (paging follows them); a list without our PLMN is refused and changes nothing.
    fn enb_configuration_update(
        &mut self,
        assoc: AssocId,
        m: EnbConfigurationUpdate,
        out: &mut EndpointOut,
    ) {
        let setup = self.enbs.get(&assoc).is_some_and(|e| e.global_id.is_some());
        let bad_tas = m
            .supported_tas
            .as_ref()
            .is_some_and(|t| !self.serves_our_plmn(t));
        if !setup || bad_tas {
            self.stats.enb_config_update_failures += 1;
            let cause = if setup {
                Cause::UNKNOWN_PLMN
            } else {
                Cause::MESSAGE_NOT_COMPATIBLE_WITH_RECEIVER_STATE
            };
            let f = EnbConfigurationUpdateFailure {
                cause,
                time_to_wait: None,
            };
            self.send(assoc, f.into(), out);
            return;
        }
        if let (Some(t), Some(e)) = (&m.supported_tas, self.enbs.get_mut(&assoc)) {
            e.tais = Self::tais_of(t);
        }
        self.stats.enb_config_updates += 1;
        self.send(assoc, EnbConfigurationUpdateAcknowledge {}.into(), out);
    }

    fn new_reset(&mut self, r: PendingReset) -> Option<u64> {
        if self.resets.len() >= MAX_PENDING_RESETS {
            return None;
        }
        let token = self.next_token;
        self.next_token += 1;
        self.resets.insert(token, r);
        Some(token)
    }

    /// Reset from an eNB (TS 36.413 §8.7.1.2.2): the slices holding the named (or
    /// all) UE-associated connections of that eNB release them, then we acknowledge.
    fn reset_from_enb(&mut self, assoc: AssocId, m: Reset, out: &mut EndpointOut) {
        self.stats.resets_rx += 1;
        // Which slices get which connections (None: all of the eNB's).
        let mut per_slice: Vec<Option<Vec<UeConnection>>> = vec![None; self.slices];
        let (echo, every) = match &m.kind {
            ResetKind::All => (vec![], true),
            ResetKind::Partial(list) => {
                for c in list {
                    match c.mme_ue_id.map(|i| self.ids.slice_of(i)) {
                        Some(s) if s < self.slices => {
                            per_slice[s].get_or_insert_with(Vec::new).push(*c)
                        }
                        Some(_) => {}
                        // Only the eNB's ID: every slice looks.
                        None => {
                            for l in per_slice.iter_mut() {
                                l.get_or_insert_with(Vec::new).push(*c);
                            }
                        }
                    }
                }
                (list.clone(), false)
            }
        };
        let targets: Vec<usize> = (0..self.slices)
            .filter(|s| every || per_slice[*s].is_some())
            .collect();
        if targets.is_empty() {
            self.send(assoc, ResetAcknowledge { connections: echo }.into(), out);
            return;
        }
        let Some(token) = self.new_reset(PendingReset {
            assoc,
            waiting: targets.len(),
            connections: echo,
            ours: false,
        }) else {
            pepc_ratelog::peer_warn!(
                pepc_ratelog::Kind::ResetRefused,
                "assoc {assoc}: Reset refused, {MAX_PENDING_RESETS} already pending"
            );
            return;
        };
        for s in targets {
            out.slices.push((
                s,
                Input::EnbReset {
                    assoc,
                    token,
                    connections: if every { None } else { per_slice[s].take() },
                },
            ));
        }
    }

    /// Our own Reset of every UE-associated connection of an eNB (TS 36.413
    /// §8.7.1.2.1), e.g. after the node lost their state; slices make the UEs idle.
    pub fn reset_enb(&mut self, assoc: AssocId, cause: Cause, out: &mut EndpointOut) {
        if self.enbs.get(&assoc).is_none_or(|e| e.global_id.is_none()) {
            return;
        }
        self.stats.resets_tx += 1;
        if let Some(token) = self.new_reset(PendingReset {
            assoc,
            waiting: self.slices,
            connections: vec![],
            ours: true,
        }) {
            for s in 0..self.slices {
                out.slices.push((
                    s,
                    Input::EnbReset {
                        assoc,
                        token,
                        connections: None,
                    },
                ));
            }
        }
        let m = Reset {
            cause,
            kind: ResetKind::All,
        };
        self.send(assoc, m.into(), out);
    }

    /// Something a slice's MME produced.
    pub fn on_slice_output(&mut self, slice: usize, o: Output, out: &mut EndpointOut) {
        match o {
            Output::Page { tais, bytes } => {
                let mut to: Vec<AssocId> = self
                    .enbs
                    .iter()
                    .filter(|(_, e)| {
                        e.global_id.is_some() && e.tais.iter().any(|t| tais.contains(t))
                    })
                    .map(|(a, _)| *a)
                    .collect();
                // Association order, not the map's (deterministic output).
                to.sort_unstable();
                for assoc in to {
                    self.stats.pagings_sent += 1;
                    out.wire.push(Output::S1ap {
                        assoc,
                        stream: 0,
                        bytes: bytes.clone(),
                    });
                }
            }
            Output::ResetDone { token } => {
                let Some(r) = self.resets.get_mut(&token) else {
                    return;
                };
                r.waiting = r.waiting.saturating_sub(1);
                if r.waiting != 0 {
                    return;
                }
                if let Some(r) = self.resets.remove(&token) {
                    if !r.ours && self.enbs.contains_key(&r.assoc) {
                        let ack = ResetAcknowledge {
                            connections: r.connections,
                        };
                        self.send(r.assoc, ack.into(), out);
                    }
                }
            }
            Output::ClaimImsi { imsi } => {
                let holder = self.slice_of_imsi(imsi);
                if holder != slice {
                    // TS 23.401 §5.3.2.1: the older context of the subscriber goes.
                    self.stats.supersedes_sent += 1;
                    out.slices.push((holder, Input::Supersede { imsi }));
                }
                if self.policy.slice_of(imsi, self.slices) == slice {
                    self.imsi_exceptions.remove(&imsi);
                } else {
                    self.imsi_exceptions.insert(imsi, slice as u16);
                }
                self.stats.imsi_exceptions = self.imsi_exceptions.len() as u64;
            }
            Output::ReleaseImsi { imsi } => {
                if self.imsi_exceptions.get(&imsi) == Some(&(slice as u16)) {
                    self.imsi_exceptions.remove(&imsi);
                }
                self.stats.imsi_exceptions = self.imsi_exceptions.len() as u64;
            }
            // Taken into account at the next backlog report (it brings the time).
            Output::Congestion { on } => self.overload.mme_congested(slice, on),
            o => out.wire.push(o),
        }
    }

    /// An eNB's TAIs (for tests and the management view).
    pub fn enb_tais(&self, assoc: AssocId) -> Option<&[Tai]> {
        self.enbs.get(&assoc).map(|e| &e.tais[..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_hash_spreads_and_moves_little() {
        for n in [2usize, 3, 4, 7] {
            let mut count = vec![0usize; n];
            let mut moved = 0;
            for imsi in 1010000000000u64..1010000000000 + 30_000 {
                let s = SlicePolicy::ConsistentHash.slice_of(imsi, n);
                count[s] += 1;
                if SlicePolicy::ConsistentHash.slice_of(imsi, n + 1) != s {
                    moved += 1;
                }
            }
            for c in &count {
                let share = *c as f64 / 30_000.0;
                assert!((share - 1.0 / n as f64).abs() < 0.02, "{n}: {count:?}");
            }
            // About 1/(n+1) of the users move when a slice is added.
            let m = moved as f64 / 30_000.0;
            assert!((m - 1.0 / (n + 1) as f64).abs() < 0.02, "{n}: {m}");
        }
        assert_eq!(SlicePolicy::Modulo.slice_of(7, 3), 1);
        assert_eq!(SlicePolicy::ConsistentHash.slice_of(7, 1), 0);
        assert!(SlicePolicy::parse("nope").is_err());
    }
}
