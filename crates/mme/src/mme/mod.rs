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

pub(crate) mod context;
mod events;
mod index;
mod stats;
mod timers;
pub(crate) use timers::TimerKind;

pub(crate) use context::*;
pub use events::*;
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
    pub(crate) unauth: Map<AssocId, u32>,
    pub(crate) unauth_total: usize,
    /// Contexts awaiting authentication passed 3/4 of a bound (of the slice, or of
    /// the eNB kept here): the MME is congested by its own measure until they are
    /// under half of it again (overload control; the node hears of it).
    pub(crate) crowded: Option<Option<AssocId>>,
    pub(crate) crowded_told: bool,
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
    /// which the driver has served (e.g. by [`crate::hss::HssProxy`], which also
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
            congested: false,
            parked: Map::default(),
            restoring: None,
            parked_order: VecDeque::new(),
            parked_by_imsi: Map::default(),
            unauth: Map::default(),
            unauth_total: 0,
            crowded: None,
            crowded_told: false,
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
            self.arm_ue(u, id, kind, at);
        }
    }

    /// [`Mme::arm`] on UE `id`'s context `u`, already looked up.
    pub(crate) fn arm_ue(&mut self, u: &mut Ue, id: u32, kind: TimerKind, at: Instant) {
        *u.timer_mut(kind) = Some(at);
        self.timers.push(at, id, kind);
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
        self.expire_hss_requests(now, cp, out);
        self.check_usage(now, cp, out);
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
            let _span = ue_span(id, u.conn.map(|c| c.1), u.proc.name()).entered();
            match kind {
                TimerKind::Nas => self.nas_timer_expired(now, id, cp, out),
                TimerKind::Paging => self.paging_expired(now, id, cp, out),
                TimerKind::Reachable => {
                    self.stats.implicit_detaches += 1;
                    tracing::info!("implicit detach of UE {id}");
                    // The context goes with its subscription data: Purge UE.
                    self.remove_ue(id, false, cp);
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
                    self.remove_ue(id, true, cp);
                } else {
                    self.make_idle(id, cp, out);
                }
            }
            _ if u.sec.is_none() => {
                self.stats.unauth_expired += 1;
                tracing::debug!("UE {id}: no security context in time, context released");
                if u.conn.is_some() {
                    self.release(cp, id, Cause::NAS_UNSPECIFIED, true, out);
                } else {
                    self.remove_ue(id, false, cp);
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
        if self.unauth.capacity() > 1024 && self.unauth.len() * 8 < self.unauth.capacity() {
            self.unauth.shrink_to_fit();
        }
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
            self.authenticated_ue(u);
        }
    }

    /// [`Mme::authenticated`] on the UE's context `u`, already looked up.
    pub(crate) fn authenticated_ue(&mut self, u: &mut Ue) {
        u.guard_timer = None;
        if let Some(a) = u.unauth_on.take() {
            self.uncount_unauth(a);
        }
    }

    fn uncount_unauth(&mut self, assoc: AssocId) {
        self.unauth_total = self.unauth_total.saturating_sub(1);
        if let Some(n) = self.unauth.get_mut(&assoc) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.unauth.remove(&assoc);
            }
        }
        let relieved = match self.crowded {
            Some(None) => self.unauth_total * 2 < self.cfg.max_unauth_contexts,
            Some(Some(a)) => {
                (self.unauth.get(&a).map_or(0, |n| *n as usize)) * 2 < self.cfg.max_unauth_per_enb
            }
            None => false,
        };
        if relieved {
            self.crowded = None;
        }
    }

    /// Congested, by the node's measure (backlog) or by its own (contexts awaiting
    /// authentication near their bound): new non-emergency attaches are turned away.
    pub(crate) fn congested(&self) -> bool {
        self.congested || self.crowded.is_some()
    }

    /// Room for one more context without security from eNB `assoc`?
    fn unauth_room(&self, assoc: AssocId) -> bool {
        self.unauth_total < self.cfg.max_unauth_contexts
            && self.unauth.get(&assoc).map_or(0, |n| *n as usize) < self.cfg.max_unauth_per_enb
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
        self.on_s1ap(now, assoc, stream, bytes, cp, out);
        self.flush_released(cp, out);
        self.end_call(rec, cp, out, None);
    }

    pub(crate) fn flush_released(&mut self, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        // Most inputs leave nothing here: one test for them.
        if self.records.is_empty()
            && self.released.is_empty()
            && self.forgotten.is_empty()
            && self.dirty.is_empty()
            && self.crowded.is_some() == self.crowded_told
        {
            return;
        }
        out.append(&mut self.records);
        let crowded = self.crowded.is_some();
        if crowded != self.crowded_told {
            self.crowded_told = crowded;
            tracing::info!(
                "contexts awaiting authentication {} (slice {}, eNB {}): new attaches {}",
                if crowded {
                    "near their bound"
                } else {
                    "back under half of it"
                },
                self.unauth_total,
                self.crowded
                    .flatten()
                    .map_or(0, |a| self.unauth.get(&a).copied().unwrap_or(0)),
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
        if self.cfg.checkpoints && !self.dirty.contains(&id) {
            self.dirty.push(id);
        }
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
                if let Some(old) = self.index.by_imsi(imsi) {
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
                ControlEvent::EnbErrorIndication { enb_teid, enb_addr } => {
                    pepc_ratelog::peer_warn!(
                        pepc_ratelog::Kind::EnbReport,
                        "eNB {enb_addr} reported unknown S1-U TEID {enb_teid:#x}"
                    )
                }
            },
            Input::Hss(a) => self.hss_answer(now, a, cp, out),
            Input::HssCancelLocation {
                imsi,
                cancellation_type,
                reattach_required,
            } => self.hss_cancel_location(now, imsi, cancellation_type, reattach_required, cp, out),
            Input::HssInsertSubscriberData { imsi, update } => {
                self.hss_insert_subscriber_data(imsi, update, cp, out)
            }
            Input::Pcrf(a) => self.pcrf_answer(now, a, cp, out),
            Input::PolicyUpdate {
                imsi,
                ebi,
                decision,
            } => {
                self.policy_update(now, imsi, ebi, decision, cp, out);
            }
        }
        self.flush_released(cp, out);
    }

    pub(crate) fn stream_for(&self, assoc: AssocId, id: u32) -> u16 {
        let n = self.enbs.get(&assoc).map(|e| e.out_streams).unwrap_or(1);
        if n <= 1 {
            0
        } else {
            1 + (id % (n as u32 - 1)) as u16
        }
    }

    pub(crate) fn send(
        &self,
        assoc: AssocId,
        ue: Option<u32>,
        msg: S1apMessage,
        out: &mut Vec<Output>,
    ) {
        let stream = ue.map(|i| self.stream_for(assoc, i)).unwrap_or(0);
        match msg.encode() {
            Ok(bytes) => out.push(Output::S1ap {
                assoc,
                stream,
                bytes,
            }),
            Err(e) => tracing::warn!("cannot encode {}: {e}", msg.name()),
        }
    }

    /// Drop the UE's S1 connection; a registered UE becomes ECM-IDLE, a UE in the
    /// middle of attach is forgotten.
    pub(crate) fn make_idle(&mut self, id: u32, cp: &mut ControlPlane, out: &mut Vec<Output>) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        if let Some(c) = u.conn.take() {
            self.index.unlink_conn(c);
        }
        if let Some(c) = u.old_conn.take() {
            self.index.unlink_conn(c);
        }
        u.x2_source = None;
        u.handover = None;
        u.guard_timer = None;
        u.nas_secured = false;
        u.proc = Procedure::Idle;
        u.retx = None;
        u.nas_timer = None;
        if u.emm == Emm_::Registered {
            let page = std::mem::take(&mut u.page_after_release);
            if let Some(s) = u.slot {
                warn_cp(id, "release to idle", cp.release_to_idle(s));
            }
            self.stats.releases += 1;
            self.procedure_done(id);
            let at = self.now + self.cfg.mobile_reachable;
            {
                self.arm(cp, id, TimerKind::Reachable, at);
                // Downlink came while the connection was being released.
                if page {
                    if let Some(u) = self.ue_mut(cp, id) {
                        u.paging_left = self.cfg.paging_attempts;
                    }
                    self.send_paging(cp, at - self.cfg.mobile_reachable, id, out);
                }
            }
        } else {
            self.remove_ue(id, true, cp);
        }
    }

    /// Drop UE `id`'s session (the data-path part of its entry: PDN connections,
    /// bearers, tunnels); its signaling part stays.
    pub(crate) fn drop_session(&mut self, cp: &mut ControlPlane, id: u32) {
        self.end_sessions(cp, id, crate::pcrf::RecordCause::Detached);
        if let Some(s) = self.ue_mut(cp, id).and_then(|u| u.slot.take()) {
            warn_cp(id, "detach", cp.detach(s));
        }
    }

    /// The index of subscribed APN `apn` (0 if the table is full: an APN beyond the
    /// 65535 first ones is then not known as subscribed).
    pub(crate) fn apn_id(&mut self, apn: &str) -> u16 {
        if apn.is_empty() {
            return 0;
        }
        if let Some(i) = self.apn_ids.get(apn) {
            return *i;
        }
        let Ok(i) = u16::try_from(self.apns.len() + 1) else {
            return 0;
        };
        self.apns.push(apn.into());
        self.apn_ids.insert(apn.into(), i);
        i
    }

    /// The subscribed APN of index `i`.
    pub(crate) fn apn_name(&self, i: u16) -> Option<&str> {
        self.apns.get(usize::from(i).checked_sub(1)?).map(|a| &**a)
    }

    /// Drop a UE context. `park`: the UE detached (or was rejected) and keeps its EPS
    /// security context, so we keep it too for a GUTI re-attach. The subscription data
    /// goes with the context: if the HSS holds this MME for the subscriber, a Purge UE
    /// tells it now, or when the parked context goes (`Mme::expire_parked`).
    pub(crate) fn remove_ue(&mut self, id: u32, park: bool, cp: &mut ControlPlane) {
        if self.index.contains(id) {
            self.end_sessions(cp, id, crate::pcrf::RecordCause::Detached);
        }
        let Some(slot) = self.index.remove(id) else {
            return;
        };
        // The whole entry goes: the data-path part if any (detach), and this part.
        let Some(mut u) = cp.release_ue(slot) else {
            return;
        };
        if let Some(a) = u.unauth_on.take() {
            self.uncount_unauth(a);
        }
        // Only the subscriber's current context speaks for it to the HSS (a superseded
        // one has no IMSI; a newer context has the subscriber's index).
        let current = u.imsi.is_some_and(|i| self.index.is_imsi_of(i, id));
        let mut purge = current && u.hss_location;
        if park && u.emm == Emm_::Deregistered && u.m_tmsi != 0 {
            if let (Some(sec), Some(imsi)) = (u.sec.take(), u.imsi) {
                self.park(self.now, u.m_tmsi, imsi, sec, purge);
                purge = false;
            }
        }

        if let Some(c) = u.conn {
            self.index.unlink_conn(c);
        }
        if let Some(c) = u.old_conn {
            self.index.unlink_conn(c);
        }
        if let Some(i) = u.imsi {
            if self.index.is_imsi_of(i, id) {
                self.index.unlink_imsi(i);
                if !self.role.is_home_of(i) {
                    self.released.push(i);
                }
                if self.cfg.checkpoints {
                    self.forgotten.push(i);
                }
            }
        }
        self.index.unlink_tmsi_of(u.m_tmsi, id);
        if let Procedure::ExpectGutiReallocComplete { m_tmsi } = u.proc {
            self.index.unlink_tmsi_of(m_tmsi, id);
        }
        if let (true, Some(imsi)) = (purge, u.imsi) {
            self.purge_subscriber(imsi);
        }
    }

    /// A new UE context for a UE's first message on S1 connection (`assoc`,
    /// `enb_ue_id`): its entry in the slice's table. `None` when the slice has no
    /// entry left (counted; the message is not served).
    pub(crate) fn new_ue(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        enb_ue_id: u32,
        tai: Tai,
        ecgi: Ecgi,
    ) -> Option<u32> {
        if !self.unauth_room(assoc) {
            self.stats.unauth_refused += 1;
            return None;
        }
        self.new_context(cp, assoc, enb_ue_id, tai, ecgi, true)
    }

    /// A context for a new S1 connection; `unauth`: it counts against the bounds on
    /// contexts without security (a context made only to send a reject and release
    /// does not: its release guard bounds it).
    pub(crate) fn new_context(
        &mut self,
        cp: &mut ControlPlane,
        assoc: AssocId,
        enb_ue_id: u32,
        tai: Tai,
        ecgi: Ecgi,
        unauth: bool,
    ) -> Option<u32> {
        let id = self.alloc_mme_ue_id();
        let ue = Box::new(Ue {
            imsi: None,
            emm: Emm_::Deregistered,
            conn: Some((assoc, enb_ue_id)),
            proc: Procedure::Idle,
            sec: None,
            nas_secured: false,
            claim_imsi: false,
            ue_net_cap: vec![],
            pti: 0,
            apn: String::new(),
            subscribed_apn: 0,
            slot: None,
            m_tmsi: 0,
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
            guard_timer: None,
            unauth_on: unauth.then_some(assoc),
            started: None,
            ckpt_dl: 0,
            handover: None,
            old_conn: None,
            x2_source: None,
            ambr: self.cfg.default_ambr,
            qci: 9,
            arp_priority: 9,
            next_ksi: 0,
            pending_bearers: vec![],
            esm_info_flag: false,
            resumed: false,
            superseded: false,
            hss_location: false,
            page_after_release: false,
            policy: None,
        });
        let slot = match cp.reserve_ue(ue) {
            Ok(s) => s,
            Err(_) => {
                self.stats.no_ue_entry += 1;
                return None;
            }
        };
        self.index.insert(id, slot);
        self.index.link_conn((assoc, enb_ue_id), id);
        if !unauth {
            return Some(id);
        }
        let n = self.unauth.entry(assoc).or_insert(0);
        *n += 1;
        let n = *n as usize;
        self.unauth_total += 1;
        if self.crowded.is_none() {
            if self.unauth_total * 4 > self.cfg.max_unauth_contexts * 3 {
                self.crowded = Some(None);
            } else if n * 4 > self.cfg.max_unauth_per_enb * 3 {
                self.crowded = Some(Some(assoc));
            }
        }
        let at = self.now + self.cfg.unauth_context_ttl;
        self.arm(cp, id, TimerKind::Guard, at);
        Some(id)
    }

    pub(crate) fn release(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        cause: Cause,
        then_remove: bool,
        out: &mut Vec<Output>,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        let Some((assoc, enb_ue_id)) = u.conn else {
            return;
        };
        u.proc = Procedure::ExpectReleaseComplete { then_remove };
        // The release ends the NAS procedure it replaces: its retransmission timer
        // goes with it. Left running, it re-sent a Downlink NAS Transport after the
        // UE Context Release Command, for a UE the eNB had already let go (seen
        // under SCTP loss, where retransmissions are pending more often).
        u.nas_timer = None;
        u.retx = None;
        // Not for ever: an eNB that never completes is not keeping the context.
        let at = self.now + self.cfg.release_guard;
        self.arm(cp, id, TimerKind::Guard, at);
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

    /// Release a registered UE's S1 connection, keeping the UE (ECM-CONNECTED → IDLE).
    /// Its eNB tunnels go first, as Release Access Bearers does before the UE Context
    /// Release Command (TS 23.401 §5.3.5): downlink from now on is buffered and pages
    /// the UE once the release completes, instead of going to the released eNB.
    pub(crate) fn release_connection(
        &mut self,
        id: u32,
        cause: Cause,
        cp: &mut ControlPlane,
        out: &mut Vec<Output>,
    ) {
        if let Some(u) = self.ue(cp, id) {
            if let (Some(s), true) = (u.slot, u.emm == Emm_::Registered) {
                warn_cp(
                    id,
                    "release of the eNB tunnels",
                    cp.release_access_bearers(s),
                );
            }
        }
        self.release(cp, id, cause, false, out);
    }

    /// Give idle UE `id` the S1 connection its unverified first message came on, for
    /// a re-authentication only: nothing else of the context changes (location,
    /// timers) unless it succeeds.
    pub(crate) fn bind_conn(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        assoc: AssocId,
        enb_ue_id: u32,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        u.conn = Some((assoc, enb_ue_id));
        u.nas_secured = false;
        self.index.link_conn((assoc, enb_ue_id), id);
    }

    /// Give a known UE a new S1 connection (idle → connected).
    pub(crate) fn attach_conn(
        &mut self,
        cp: &mut ControlPlane,
        id: u32,
        assoc: AssocId,
        enb_ue_id: u32,
        tai: Tai,
        ecgi: Ecgi,
    ) {
        let Some(u) = self.ue_mut(cp, id) else {
            return;
        };
        if let Some(c) = u.conn.take() {
            if matches!(u.proc, Procedure::ExpectReleaseComplete { .. }) && c != (assoc, enb_ue_id)
            {
                // The old connection's release is still in flight (its Release Complete
                // may come late, after a loss): it stays known, to be taken quietly.
                if let Some(o) = u.old_conn.replace(c) {
                    self.index.unlink_conn(o);
                }
            } else {
                self.index.unlink_conn(c);
            }
        }
        u.conn = Some((assoc, enb_ue_id));
        u.nas_secured = false; // a new NAS signalling connection
        u.tai = tai;
        u.ecgi = ecgi;
        u.reach_timer = None;
        // A paged UE that answers with another procedure than a Service Request (a
        // TAU without the active flag) is reachable, but its downlink still waits:
        // paging ends here and starts again once this connection is released, unless
        // a bearer setup delivers the data first.
        if u.paging_timer.take().is_some() {
            u.page_after_release = true;
        }
        self.index.link_conn((assoc, enb_ue_id), id);
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
