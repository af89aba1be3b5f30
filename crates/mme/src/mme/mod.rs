//! The [`Mme`]: its UE, eNB and parked contexts, input routing, accessors, timers and
//! S1 send plumbing. The procedures are in the sibling modules (see the crate docs).

use crate::endpoint::SliceRole;
use crate::hss::{HssAnswer, HssRequest};
use crate::prelude::*;

/// Downlink NAS COUNTs a UE may use past its last checkpoint: a restart resumes its
/// count this far above the checkpointed one ([`crate::snapshot::restore_checkpoint`]),
/// and a checkpoint is taken before half of it is used (a procedure sends a handful
/// of messages, each at most 5 times). Below 256: the UE finds the COUNT from the
/// 8-bit sequence number, so it must see a jump of less than 256.
pub const CHECKPOINT_DL_LEASE: u32 = 128;

/// The MME's maps: keys are small integers (some chosen by UEs or eNBs, e.g. IMSI and
/// eNB UE S1AP ID), so a fast hash with a per-map random seed instead of SipHash.
pub(crate) type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// An S1-MME association, as the transport names it.
pub type AssocId = u64;

pub(crate) mod admission;
pub(crate) mod context;
pub(crate) mod cx;
mod events;
pub(crate) mod index;
pub(crate) mod ledger;
pub(crate) mod lifecycle;
mod stats;
mod timers;
pub(crate) use timers::TimerKind;

pub(crate) use context::*;
pub(crate) use cx::Cx;
pub use events::*;
pub(crate) use index::ConnKey;
pub use ledger::{Ledger, Proc, ProcFailure};
pub use stats::*;

/// Why an operator's or the PCRF's request on a UE (detach, GUTI reallocation, bearer
/// activation/modification) was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MmeError {
    #[error("no such UE")]
    UnknownUe,
    #[error("the UE is not connected (ECM-IDLE or no S1 connection)")]
    NotConnected,
    #[error("no free EPS bearer identity (the UE has the maximum of bearers)")]
    Busy,
    #[error("no EPS bearer {0}")]
    NoBearer(u8),
    /// The slice's control plane refused the change.
    #[error("slice control plane: {0}")]
    Control(#[from] pepc_slice::control::CtrlError),
    /// The downlink NAS message could not be encoded or security-protected (no
    /// security context on the connection, or the encoder refused the message).
    #[error("the downlink NAS message could not be encoded or protected")]
    NasEncode,
}

pub(crate) struct Enb {
    pub(crate) out_streams: u16,
    pub(crate) global_id: Option<GlobalEnbId>,
}

pub struct Mme {
    pub(crate) cfg: MmeConfig,
    /// Sequence number of the last HSS request.
    pub(crate) hss_seq: u32,
    /// (deadline, MME UE S1AP ID, sequence number) of HSS requests in the order sent:
    /// the timeout is one value, so deadlines only grow. Entries answered stay until
    /// they reach the front (they are recognised as stale by the UE's procedure).
    pub(crate) hss_deadlines: VecDeque<(Instant, u32, u32)>,
    /// Subscribed APNs seen (index + 1 is a UE's `subscribed_apn`): operators have few.
    pub(crate) apns: Vec<Box<str>>,
    pub(crate) apn_ids: Map<Box<str>, u16>,
    pub(crate) enbs: Map<AssocId, Enb>,
    pub(crate) enb_by_gid: Map<GlobalEnbId, AssocId>,
    /// MME UE S1AP ID → the UE's entry (UE slot) in the slice's table, which holds
    /// the UE's one context: this MME's part of it ([`Ue`], its signaling part) and
    /// the data path's ([`ControlPlane`]); and the UE by S1 connection, IMSI, M-TMSI.
    pub(crate) index: index::UeIndex,
    /// UE timers by deadline.
    pub(crate) timers: timers::TimerTable,
    /// The time of the input being handled: every entry point sets it first (time
    /// comes in with the input; the MME never reads a clock).
    pub(crate) now: Instant,
    /// When the MME was built: a recording's times count from here.
    pub(crate) epoch: Instant,
    /// `[debug] record`: every call and its outputs ([`crate::record`]).
    pub(crate) recording: Option<Box<crate::record::Recording>>,
    /// The identifiers this MME draws (MME UE S1AP IDs, M-TMSIs, HSS request
    /// numbers): kept when recording, checked or given back when replaying
    /// ([`crate::record`]).
    pub(crate) draws: pepc_slice::control::CounterTap,
    /// The node's overload control finds this slice's backlog too long: new
    /// non-emergency attaches get #22 with T3346 (`crate::overload`).
    pub(crate) congested: bool,
    /// Parked security contexts by M-TMSI, bounded by `cfg.parked_contexts`.
    pub(crate) parked: Map<u32, Parked>,
    /// A dead process's checkpoints still being restored (`crate::restoring`).
    pub(crate) restoring: Option<Box<crate::restoring::Restoring>>,
    /// (expiry, M-TMSI) in parking order: expiry and eviction of the oldest.
    pub(crate) parked_order: VecDeque<(Instant, u32)>,
    /// The M-TMSI of each subscriber's parked context: one per subscriber.
    pub(crate) parked_by_imsi: Map<u64, u32>,
    /// Contexts without a security context, per eNB and in all (bounded by
    /// `cfg.max_unauth_per_enb` and `cfg.max_unauth_contexts`).
    pub(crate) admission: admission::Admission,
    /// Which slice of the node this MME serves (identifier bits, IMSI routing).
    pub(crate) role: SliceRole,
    /// IMSIs held outside their policy slice whose context went (for the node).
    pub(crate) released: Vec<u64>,
    /// UEs whose procedure ended in this input: checkpointed once it is handled.
    pub(crate) dirty: Vec<u32>,
    /// Subscribers whose context went in this input: their checkpoints go.
    pub(crate) forgotten: Vec<u64>,
    /// Buffers kept between checkpoints (no allocation but the snapshot's own).
    pub(crate) scratch: Option<Box<crate::snapshot::Scratch>>,
    /// PCEF rule sets given to the data path for UEs' PCC rules.
    pub(crate) rule_sets: crate::esm::policy::RuleSets,
    /// UEs with a session under usage monitoring, and when each is read next.
    pub(crate) monitored: std::collections::HashSet<u32>,
    pub(crate) usage_checks: VecDeque<(Instant, u32)>,
    /// When UEs' next interim usage records are due.
    pub(crate) interims: VecDeque<(Instant, u32)>,
    /// Usage records and PCRF terminations made while the input was handled.
    pub(crate) records: Vec<Output>,
    pub stats: MmeStats,
}

impl Mme {
    /// An MME without UEs. It reaches the HSS through [`Output::Hss`] requests,
    /// which the driver has served (e.g. by the node's proxy over the embedded HSS, which also
    /// holds the RAND source of the vectors).
    pub fn new(cfg: MmeConfig, now: Instant) -> Mme {
        Mme {
            cfg,
            hss_seq: 0,
            hss_deadlines: VecDeque::new(),
            apns: Vec::new(),
            apn_ids: Map::default(),
            enbs: Map::default(),
            enb_by_gid: Map::default(),
            index: index::UeIndex::new(),
            timers: timers::TimerTable::default(),
            now,
            epoch: now,
            recording: None,
            draws: Default::default(),
            congested: false,
            parked: Map::default(),
            restoring: None,
            parked_order: VecDeque::new(),
            admission: Default::default(),
            parked_by_imsi: Map::default(),
            role: SliceRole::default(),
            released: Vec::new(),
            dirty: Vec::new(),
            forgotten: Vec::new(),
            scratch: None,
            rule_sets: Default::default(),
            monitored: Default::default(),
            usage_checks: VecDeque::new(),
            interims: VecDeque::new(),
            records: Vec::new(),
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
        self.index.reserve(users);
        self.reserve_parked(users);
        pepc_slice::mem::prewarm_heap(users.saturating_mul(Self::HEAP_PER_UE));
    }

    /// Serve slice `role.index` of `role.count`: MME UE S1AP IDs and M-TMSIs carry
    /// the slice (`pepc_slice::ids::SignalingIds`) so the node's demux finds it.
    pub fn set_role(&mut self, role: SliceRole) {
        self.role = role;
        let ids = role.ids();
        self.index.set_slice(ids, role.index);
    }

    pub fn role(&self) -> SliceRole {
        self.role
    }

    pub fn config(&self) -> &MmeConfig {
        &self.cfg
    }

    /// Registered or in-progress UE contexts.
    /// UEs with an S1 connection now (ECM-CONNECTED).
    pub fn connection_count(&self) -> usize {
        self.index.conn_count()
    }

    /// S1 connections per eNB association.
    pub fn connections_by_enb(&self) -> Vec<(AssocId, usize)> {
        let mut m: std::collections::BTreeMap<AssocId, usize> = Default::default();
        for (a, _, _) in self.index.conns() {
            *m.entry(a).or_default() += 1;
        }
        m.into_iter().collect()
    }

    /// PCEF rule sets this MME gave the data path for UEs' PCC rules.
    pub fn policy_rule_sets(&self) -> usize {
        self.rule_sets.in_use()
    }

    pub fn ue_count(&self) -> usize {
        self.index.len()
    }

    /// The signaling part of UE `id`'s context, in its entry of the slice's table.
    #[inline]
    pub(crate) fn ue<'c>(&self, cp: &'c ControlPlane, id: u32) -> Option<&'c Ue> {
        cp.signaling(self.index.slot(id)?)
    }

    #[inline]
    pub(crate) fn ue_mut<'c>(&self, cp: &'c mut ControlPlane, id: u32) -> Option<&'c mut Ue> {
        cp.signaling_mut(self.index.slot(id)?)
    }

    /// The UE slot of UE `id`'s entry.
    pub(crate) fn entry_of(&self, id: u32) -> Option<u32> {
        self.index.slot(id)
    }

    /// The UE an S-TMSI names: its M-TMSI, or the new one of a GUTI reallocation it
    /// has not confirmed (both valid until then). An entry left by a reallocation
    /// that ended otherwise is dropped when met.
    pub(crate) fn ue_by_tmsi(&mut self, cp: &ControlPlane, t: u32) -> Option<u32> {
        let id = self.index.by_tmsi(t)?;
        let valid = self.ue(cp, id).is_some_and(|u| {
            u.m_tmsi == t
                || matches!(u.proc, Procedure::ExpectGutiReallocComplete { m_tmsi } if m_tmsi == t)
        });
        if !valid {
            self.index.unlink_tmsi(t);
        }
        valid.then_some(id)
    }

    /// UE `id` came back by S-TMSI `used` while a GUTI reallocation was pending: the
    /// GUTI it used is the one (TS 24.301 §5.4.1.4), the other goes.
    pub(crate) fn resolve_pending_guti(&mut self, cp: &mut ControlPlane, id: u32, used: u32) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        let Procedure::ExpectGutiReallocComplete { m_tmsi: new } = u.proc else {
            return;
        };
        u.proc = Procedure::Idle;
        u.nas_timer = None;
        u.retx = None;
        let old = u.m_tmsi;
        let gone = if used == new {
            u.m_tmsi = new;
            old
        } else {
            new
        };
        self.index.unlink_tmsi_of(gone, id);
        self.procedure_done(id);
    }

    /// The M-TMSI currently assigned to `imsi`, if registered.
    pub fn m_tmsi_of(&self, cp: &ControlPlane, imsi: u64) -> Option<u32> {
        let u = self.ue(cp, self.index.by_imsi(imsi)?)?;
        (u.emm == Emm_::Registered).then_some(u.m_tmsi)
    }

    /// The MME UE S1AP ID of `imsi`'s context.
    pub fn mme_ue_id_of(&self, imsi: u64) -> Option<u32> {
        self.index.by_imsi(imsi)
    }

    pub fn is_connected(&self, cp: &ControlPlane, imsi: u64) -> bool {
        self.index
            .by_imsi(imsi)
            .and_then(|i| self.ue(cp, i))
            .is_some_and(|u| u.conn.is_some())
    }

    pub fn next_timeout(&mut self, cp: &ControlPlane) -> Option<Instant> {
        let mut next = None;
        while let Some((t, id, kind)) = self.timers.peek() {
            if self.ue(cp, id).is_some_and(|u| u.timer(kind) == Some(t)) {
                next = Some(t);
                break;
            }
            self.timers.pop();
        }
        self.prune_hss_deadlines(cp);
        if let Some((t, _, _)) = self.hss_deadlines.front() {
            next = Some(next.map_or(*t, |n: Instant| n.min(*t)));
        }
        if let Some(t) = self.policy_timeout() {
            next = Some(next.map_or(t, |n: Instant| n.min(t)));
        }
        next
    }

    /// Drop the answered (or abandoned) requests at the front of `hss_deadlines`.
    pub(crate) fn prune_hss_deadlines(&mut self, cp: &ControlPlane) {
        while let Some(&(_, id, seq)) = self.hss_deadlines.front() {
            if self
                .ue(cp, id)
                .is_some_and(|u| u.proc.hss_seq() == Some(seq))
            {
                break;
            }
            self.hss_deadlines.pop_front();
        }
    }

    pub(crate) fn arm(&mut self, cp: &mut ControlPlane, id: u32, kind: TimerKind, at: Instant) {
        if let Some(u) = self.ue_mut(cp, id) {
            self.arm_ue(u, kind, at);
        }
    }

    /// [`Mme::arm`] on UE `id`'s context `u`, already looked up.
    pub(crate) fn arm_ue(&mut self, u: &mut Ue, kind: TimerKind, at: Instant) {
        cx::arm(&mut self.timers, u, kind, at)
    }

    pub fn handle_timeout(&mut self, now: Instant, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        let rec = self.begin_call(now, Some(cp), out.len(), crate::record::put::timeout);
        self.on_timeout(now, cp, out);
        self.end_call(rec, cp, out, None);
    }

    fn on_timeout(&mut self, now: Instant, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        self.now = now;
        // Keys of expired parked contexts do not outlive their TTL by more than a tick.
        self.expire_parked(now);
        self.expire_hss_requests(cp, out);
        self.check_usage(cp, out);
        self.interim_records(now, cp);
        while let Some((t, id, kind)) = self.timers.peek() {
            if t > now {
                break;
            }
            self.timers.pop();
            let Some(u) = self.ue_mut(cp, id) else {
                continue;
            };
            if u.timer(kind) != Some(t) {
                continue; // stale: stopped or armed again since
            }
            *u.timer_mut(kind) = None;
            let _span = ue_span(id, u.conn.map(|c| c.enb_ue_id), u.proc.name()).entered();
            match kind {
                TimerKind::Nas => self.nas_timer_expired(cp, id, out),
                TimerKind::Paging => self.paging_expired(cp, id, out),
                TimerKind::Reachable => {
                    self.stats.implicit_detaches += 1;
                    tracing::info!("implicit detach of UE {id}");
                    // The context goes with its subscription data: Purge UE.
                    self.remove_ue(cp, id, false);
                }
                TimerKind::Guard => self.guard_expired(id, cp, out),
            }
        }
        self.compact(cp);
        self.flush_released(cp, out);
    }

    /// The guard of UE `id` ran out: a release never completed is completed locally;
    /// a context still without security after its time to live goes.
    fn guard_expired(&mut self, id: u32, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        match u.proc {
            Procedure::ExpectReleaseComplete { then_remove } => {
                self.stats.release_guard_expiries += 1;
                tracing::info!("UE {id}: no UE Context Release Complete in time, released locally");
                if then_remove || u.emm == Emm_::Deregistered {
                    self.remove_ue(cp, id, true);
                } else {
                    self.make_idle(cp, id, out);
                }
            }
            _ if u.sec.is_none() => {
                self.stats.unauth_expired += 1;
                tracing::debug!("UE {id}: no security context in time, context released");
                if u.conn.is_some() {
                    self.release(cp, id, Cause::NAS_UNSPECIFIED, true, out);
                } else {
                    self.remove_ue(cp, id, false);
                }
            }
            _ => {}
        }
    }

    /// Give back memory after a storm: the timer heap loses its stale entries and the
    /// indexes their spare capacity once mostly empty, so state returns to its
    /// baseline size. Cheap unless there is something to give back.
    fn compact(&mut self, cp: &ControlPlane) {
        let live = self.index.len();
        let index = &self.index;
        self.timers.compact(live, |(t, id, kind)| {
            index
                .slot(id)
                .and_then(|s| cp.signaling(s))
                .is_some_and(|u| u.timer(kind) == Some(t))
        });
        self.index.shrink();
        self.admission.shrink();
        if self.hss_deadlines.capacity() > 1024
            && self.hss_deadlines.len() * 8 < self.hss_deadlines.capacity()
        {
            self.hss_deadlines.shrink_to_fit();
        }
        // Policy timers of contexts gone stay queued until due (an hour for interim
        // records): with attach churn they would pile up, so they go once they
        // outnumber the live contexts.
        let index = &self.index;
        for q in [&mut self.interims, &mut self.usage_checks] {
            if q.len() > 2 * live + 1024 {
                q.retain(|(_, id)| index.contains(*id));
                q.shrink_to_fit();
            }
        }
    }

    /// UE `id` has a security context now: it no longer counts as unauthenticated.
    pub(crate) fn authenticated(&mut self, cp: &mut ControlPlane, id: u32) {
        if let Some(u) = self.ue_mut(cp, id) {
            u.guard_timer = None;
            if let Some(a) = u.unauth_on.take() {
                self.admission.uncount(&self.cfg, a);
            }
        }
    }

    fn uncount_unauth(&mut self, assoc: AssocId) {
        self.admission.uncount(&self.cfg, assoc);
    }

    /// Congested, by the node's measure (backlog) or by its own (contexts awaiting
    /// authentication near their bound): new non-emergency attaches are turned away.
    pub(crate) fn congested(&self) -> bool {
        self.congested || self.admission.crowded.is_some()
    }

    /// Room for one more context without security from eNB `assoc`?
    fn unauth_room(&self, assoc: AssocId) -> bool {
        self.admission.room(&self.cfg, assoc)
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
        let rec = self.begin_call(
            now,
            Some(cp),
            out.len(),
            crate::record::put::s1ap(assoc, stream, bytes),
        );
        self.now = now;
        self.on_s1ap(cp, assoc, stream, bytes, out);
        self.flush_released(cp, out);
        self.end_call(rec, cp, out, None);
    }

    pub(crate) fn flush_released(&mut self, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        // Most inputs leave nothing here: one test for them.
        if self.records.is_empty()
            && self.released.is_empty()
            && self.forgotten.is_empty()
            && self.dirty.is_empty()
            && self.admission.crowded.is_some() == self.admission.crowded_told
        {
            return;
        }
        out.append(&mut self.records);
        let crowded = self.admission.crowded.is_some();
        if crowded != self.admission.crowded_told {
            self.admission.crowded_told = crowded;
            tracing::info!(
                "contexts awaiting authentication {} (slice {}, eNB {}): new attaches {}",
                if crowded {
                    "near their bound"
                } else {
                    "back under half of it"
                },
                self.admission.total,
                self.admission.crowded.flatten().map_or(0, |a| self
                    .admission
                    .per_enb
                    .get(&a)
                    .copied()
                    .unwrap_or(0)),
                if crowded {
                    "get #22 with T3346"
                } else {
                    "accepted again"
                }
            );
            out.push(Output::Congestion { on: crowded });
        }
        for imsi in self.released.drain(..) {
            out.push(Output::ReleaseImsi { imsi });
        }
        for imsi in self.forgotten.drain(..) {
            out.push(Output::Forget { imsi });
        }
        if !self.dirty.is_empty() {
            self.flush_checkpoints(cp, out);
        }
    }

    /// The end of a procedure of UE `id`: its state is worth a checkpoint once the
    /// input is handled (a registered UE's whole snapshot, or its removal).
    pub(crate) fn procedure_done(&mut self, id: u32) {
        cx::procedure_done(&self.cfg, &mut self.dirty, id)
    }

    fn flush_checkpoints(&mut self, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        let now = self.now;
        for id in std::mem::take(&mut self.dirty) {
            let Some(u) = self.ue(cp, id) else {
                continue;
            };
            let Some(imsi) = u.imsi.filter(|i| self.index.is_imsi_of(*i, id)) else {
                continue;
            };
            if u.emm != Emm_::Registered {
                out.push(Output::Forget { imsi });
                continue;
            }
            let dl = u.sec.as_ref().map_or(0, |s| s.ctx.dl_count);
            let mut snapshot = Vec::with_capacity(384);
            let key = crate::snapshot::UeKey::MmeUeId(id);
            let mut scratch = self.scratch.take().unwrap_or_default();
            let r = crate::snapshot::snapshot_whole_ue_with(
                &mut scratch,
                self,
                cp,
                key,
                now,
                &mut snapshot,
            );
            self.scratch = Some(scratch);
            match r {
                Ok(_) => {
                    if let Some(u) = self.ue_mut(cp, id) {
                        u.ckpt_dl = dl;
                    }
                    out.push(Output::Checkpoint {
                        imsi,
                        snapshot: SnapshotBytes(snapshot),
                    });
                }
                Err(e) => tracing::warn!("UE {id}: no checkpoint: {e}"),
            }
        }
    }

    pub fn handle(
        &mut self,
        now: Instant,
        input: Input,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        let rec = self.begin_call(now, Some(cp), out.len(), crate::record::put::handle(&input));
        self.on_input(now, input, cp, out);
        self.end_call(rec, cp, out, None);
    }

    fn on_input(
        &mut self,
        now: Instant,
        input: Input,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        self.now = now;
        match input {
            Input::Congestion { on } => {
                if on != self.congested {
                    tracing::info!(
                        "signaling backlog {}: new attaches {}",
                        if on { "over its bound" } else { "drained" },
                        if on {
                            "get #22 with T3346"
                        } else {
                            "accepted again"
                        }
                    );
                }
                self.congested = on;
            }
            Input::EnbUp { assoc, out_streams } => {
                self.enbs.insert(
                    assoc,
                    Enb {
                        out_streams: out_streams.max(1),
                        global_id: None,
                    },
                );
            }
            Input::EnbDown { assoc } => self.enb_gone(cp, assoc, out),
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
                self.reset(cp, assoc, connections, out);
                out.push(Output::ResetDone { token });
            }
            Input::Supersede { imsi } => {
                if let Some(old) = self.index.by_imsi(imsi) {
                    self.supersede(cp, old, out);
                }
            }
            Input::S1ap {
                assoc,
                stream,
                bytes,
            } => self.on_s1ap(cp, assoc, stream, &bytes, out),
            Input::Control(ev) => match ev {
                ControlEvent::Page { ue_slot, imsi } => self.page(cp, ue_slot, imsi, out),
                ControlEvent::EnbErrorIndication { enb_teid, enb_addr } => {
                    pepc_ratelog::peer_warn!(
                        pepc_ratelog::Kind::EnbReport,
                        "eNB {enb_addr} reported unknown S1-U TEID {enb_teid:#x}"
                    )
                }
            },
            Input::Hss(a) => self.hss_answer(cp, a, out),
            Input::HssCancelLocation {
                imsi,
                cancellation_type,
                reattach_required,
            } => self.hss_cancel_location(cp, imsi, cancellation_type, reattach_required, out),
            Input::HssInsertSubscriberData { imsi, update } => {
                self.hss_insert_subscriber_data(imsi, update, cp, out)
            }
            Input::Pcrf(a) => self.pcrf_answer(cp, a, out),
            Input::PolicyUpdate {
                imsi,
                ebi,
                decision,
            } => {
                self.policy_update(cp, imsi, ebi, decision, out);
            }
        }
        self.flush_released(cp, out);
    }

    pub(crate) fn send(
        &self,
        assoc: AssocId,
        ue: Option<u32>,
        msg: S1apMessage,
        out: &mut Vec<Output>,
    ) {
        cx::send_s1(&self.enbs, assoc, ue, msg, out)
    }
}

/// The span of a UE's signaling: IMSI-free identifiers only (an operator correlates
/// them with the eNB's; the IMSI stays out of logs). DEBUG, so that at the default
/// INFO level no span is built per message; events name the UE in their text.
pub(crate) fn ue_span(
    mme_ue_id: u32,
    enb_ue_id: Option<u32>,
    procedure: &'static str,
) -> tracing::Span {
    tracing::debug_span!(
        "ue",
        mme_ue_s1ap_id = mme_ue_id,
        enb_ue_s1ap_id = enb_ue_id,
        procedure
    )
}

/// Log the failure of a slice control-plane call that the procedure goes on without:
/// what failed for which MME UE S1AP ID, and the slice's error (IDs only, no keys).
pub(crate) fn log_cp<T>(
    lvl: tracing::Level,
    id: u32,
    what: impl std::fmt::Display,
    r: Result<T, CtrlError>,
) {
    if let Err(e) = r {
        match lvl {
            tracing::Level::WARN | tracing::Level::ERROR => {
                tracing::warn!("UE {id}: slice {what} failed: {e}")
            }
            tracing::Level::INFO => tracing::info!("UE {id}: slice {what} failed: {e}"),
            _ => tracing::debug!("UE {id}: slice {what} failed: {e}"),
        }
    }
}

/// [`log_cp`] at WARN: a failure nothing explains.
pub(crate) fn warn_cp<T>(id: u32, what: impl std::fmt::Display, r: Result<T, CtrlError>) {
    log_cp(tracing::Level::WARN, id, what, r)
}

pub(crate) fn gbr_of(b: &pepc_slice::context::BearerContext) -> Option<pepc_s1ap::GbrQos> {
    (b.qci <= 4 && b.qci > 0).then_some(pepc_s1ap::GbrQos {
        mbr_dl: b.mbr_dl,
        mbr_ul: b.mbr_ul,
        gbr_dl: b.gbr_dl,
        gbr_ul: b.gbr_ul,
    })
}

/// S1AP UE security capabilities from the NAS UE network capability: bit 1 of the
/// 16-bit strings is EEA1/EIA1 (TS 36.413 9.2.1.40); EEA0/EIA0 are implied.
pub(crate) fn sec_caps(cap: &[u8]) -> UeSecurityCapabilities {
    let e = cap.first().copied().unwrap_or(0) & 0x70;
    let i = cap.get(1).copied().unwrap_or(0) & 0x70;
    UeSecurityCapabilities {
        eea: (e as u16) << 9,
        eia: (i as u16) << 9,
    }
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
