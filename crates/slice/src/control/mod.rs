//! The slice's control thread state: the *secondary* table of every UE's control state,
//! identifier allocation, and publication to the data thread. Signaling (the MME
//! procedures, or the synthetic events of the benchmark) drives it; it is the single
//! writer of control state.
//!
//! ## One UE, one entry
//! A UE's entry in the table (its UE slot) holds all of its control state, in two
//! parts written by this thread alone:
//! * the **signaling part**: what the slice's MME keeps of the UE (EMM/ECM state,
//!   security context, S1AP IDs, the procedure in progress, timers, location, GUTI).
//!   The slice does not look inside it: it is the MME's type, the table's type
//!   parameter `S` (so this crate does not depend on the MME; see
//!   [`ControlPlane::reserve_ue`]). A slice without signaling uses [`NoSignaling`];
//! * the **data-path part** ([`UeContext`]): PDN connections, bearers, AMBR, rules,
//!   the part published to the data thread.
//!
//! A UE that signals gets its entry at its first message ([`ControlPlane::reserve_ue`]),
//! before anything of its session exists; the data-path part is created in the same
//! entry when its session is ([`AttachParams::ue_slot`]) and goes at detach, and the
//! entry with the signaling part ([`ControlPlane::release_ue`]). UEs without signaling
//! (the synthetic events) have the data-path part only.

use crate::context::*;
use crate::counters::{SliceCounters, Usage};
use crate::ids::{IdLayout, IotPool, SlotAllocator};
use crate::pcef::RuleSet;
use crate::snapshot::{SnapshotError, UeSliceSnapshot};
use crate::spsc::{Consumer, Producer};
use crate::update::{DpRequest, DpUpdate};
use std::collections::{HashMap, VecDeque};
use std::net::Ipv4Addr;
use std::sync::Arc;

mod iot;
mod sessions;
mod tap;
pub use tap::{CounterTap, ReplayBalance, TapKey};
mod ue_snapshot;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtrlError {
    UnknownUe(u32),
    UnknownImsi(u64),
    NoSuchBearer {
        ue_slot: u32,
        ebi: u8,
    },
    BearerExists {
        ue_slot: u32,
        ebi: u8,
    },
    /// An identifier space ran out (names which).
    Exhausted(&'static str),
    BadRuleSet(u16),
    /// No PDN connection has `ebi` as its default bearer.
    NoSuchPdn {
        ue_slot: u32,
        ebi: u8,
    },
    /// The UE's last PDN connection cannot be removed (detach instead).
    LastPdn(u32),
    /// A snapshot to restore is inconsistent.
    BadSnapshot(SnapshotError),
    /// A UE with this IMSI is already here (restore does not replace it).
    ImsiExists(u64),
}

impl std::fmt::Display for CtrlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtrlError::UnknownUe(s) => write!(f, "no UE in slot {s}"),
            CtrlError::UnknownImsi(i) => write!(f, "no UE with IMSI {i:015}"),
            CtrlError::NoSuchBearer { ue_slot, ebi } => {
                write!(f, "UE slot {ue_slot} has no bearer {ebi}")
            }
            CtrlError::BearerExists { ue_slot, ebi } => {
                write!(f, "UE slot {ue_slot} already has bearer {ebi}")
            }
            CtrlError::Exhausted(what) => write!(f, "{what} exhausted"),
            CtrlError::BadRuleSet(id) => write!(f, "rule set {id} out of range"),
            CtrlError::NoSuchPdn { ue_slot, ebi } => {
                write!(
                    f,
                    "UE slot {ue_slot} has no PDN connection with default bearer {ebi}"
                )
            }
            CtrlError::LastPdn(s) => write!(f, "UE slot {s}: the last PDN connection stays"),
            CtrlError::BadSnapshot(e) => write!(f, "cannot restore: {e}"),
            CtrlError::ImsiExists(i) => write!(f, "a UE with IMSI {i:015} is already here"),
        }
    }
}

impl std::error::Error for CtrlError {}

/// What the control thread must act on after reading the data thread's requests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ControlEvent {
    /// Downlink data for a UE in ECM-IDLE: page it (TS 23.401 §5.3.4.3). Its packets are
    /// buffered until a Service Request re-establishes the tunnel.
    Page { ue_slot: u32, imsi: u64 },
    /// The eNB does not know one of our downlink tunnels.
    EnbErrorIndication { enb_teid: u32, enb_addr: Ipv4Addr },
}

/// A new UE's parameters (from the subscription and the attach).
#[derive(Debug, Clone)]
pub struct AttachParams {
    pub imsi: u64,
    pub class: DeviceClass,
    /// The entry reserved for this UE by [`ControlPlane::reserve_ue`] (a UE whose
    /// signaling came first); `None`: a new entry.
    pub ue_slot: Option<u32>,
    pub ambr_ul: u64,
    pub ambr_dl: u64,
    pub default_ebi: u8,
    pub qci: u8,
    pub arp: Arp,
    pub charging_key: u32,
    /// The eNB's downlink tunnel, if already known (0 = not yet: ECM state follows).
    pub enb_teid: u32,
    pub enb_addr: Ipv4Addr,
    pub rule_set: Option<u16>,
    /// APN of the attach PDN connection (PDN index 0), for the record.
    pub apn: String,
}

impl AttachParams {
    pub fn new(imsi: u64) -> Self {
        AttachParams {
            imsi,
            class: DeviceClass::Normal,
            ue_slot: None,
            ambr_ul: 0,
            ambr_dl: 0,
            default_ebi: FIRST_EBI,
            qci: 9,
            arp: Arp::default(),
            charging_key: 0,
            enb_teid: 0,
            enb_addr: Ipv4Addr::UNSPECIFIED,
            rule_set: None,
            apn: String::new(),
        }
    }
}

/// The identifiers handed to a new UE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attached {
    pub ue_slot: u32,
    pub ue_ip: Ipv4Addr,
    /// Uplink S1-U TEID of the default bearer.
    pub teid_ul: u32,
    pub class: DeviceClass,
}

#[derive(Debug, Clone)]
pub struct ControlConfig {
    pub slice: u32,
    pub layout: IdLayout,
    pub iot: Option<IotPool>,
    pub ue_slots: usize,
    pub bearer_slots: usize,
    pub default_rule_set: u16,
}

/// A new UE's bearer as the MME asks for it.
#[derive(Debug, Clone, Copy)]
pub struct BearerParams {
    pub ebi: u8,
    /// Default bearer of the PDN connection the bearer joins (0: the first PDN).
    pub linked_ebi: u8,
    pub qci: u8,
    pub arp: Arp,
    pub mbr_ul: u64,
    pub mbr_dl: u64,
    pub gbr_ul: u64,
    pub gbr_dl: u64,
    pub charging_key: u32,
}

impl BearerParams {
    /// Bearer `ebi` of QCI `qci` on the first PDN connection, default ARP, no
    /// bit rates, charging key 0.
    pub fn new(ebi: u8, qci: u8) -> Self {
        BearerParams {
            ebi,
            linked_ebi: 0,
            qci,
            arp: Arp::default(),
            mbr_ul: 0,
            mbr_dl: 0,
            gbr_ul: 0,
            gbr_dl: 0,
            charging_key: 0,
        }
    }
}

/// An additional PDN connection (UE-requested PDN connectivity, TS 24.301 §6.5.1).
#[derive(Debug, Clone)]
pub struct PdnParams {
    pub apn: String,
    /// EBI of its default bearer.
    pub ebi: u8,
    pub qci: u8,
    pub arp: Arp,
    pub charging_key: u32,
}

/// What a new PDN connection got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PdnAdded {
    /// PDN index (address pool) used.
    pub pdn: u8,
    pub ue_ip: Ipv4Addr,
    /// Uplink S1-U TEID of its default bearer.
    pub teid_ul: u32,
}

/// The signaling part of a slice that has none (the synthetic events, benchmarks):
/// no value of it exists.
#[derive(Debug)]
pub enum NoSignaling {}

/// One UE's entry in the secondary table (see the module docs). The signaling part is
/// boxed: the table is dense, and most of a slice's slots are free or data-path only.
struct UeEntry<S> {
    /// The data-path part, once the UE has a session.
    ctx: Option<UeContext>,
    signaling: Option<Box<S>>,
}

impl<S> Default for UeEntry<S> {
    fn default() -> Self {
        UeEntry {
            ctx: None,
            signaling: None,
        }
    }
}

impl<S> UeEntry<S> {
    fn is_free(&self) -> bool {
        self.ctx.is_none() && self.signaling.is_none()
    }
}

/// The slice's control table; `S` is the signaling part of a UE's entry (the MME's
/// UE type; [`NoSignaling`] without an MME).
pub struct ControlPlane<S = NoSignaling> {
    cfg: ControlConfig,
    /// Secondary table: every UE of the slice, by UE slot.
    ues: Vec<UeEntry<S>>,
    /// Stateless-IoT devices, by pool index.
    iot_ues: Vec<Option<UeContext>>,
    iot_free: VecDeque<u32>,
    iot_next: u32,
    /// UE slot owning each bearer slot (0: none; UE slot 0 is never handed out).
    /// Dense and lazily committed, like the data thread's tables.
    bearer_owner: Box<[u32]>,
    by_imsi: Map<u64, (DeviceClass, u32)>,
    ue_alloc: SlotAllocator,
    bearer_alloc: SlotAllocator,
    updates: Producer<DpUpdate>,
    backlog: VecDeque<DpUpdate>,
    requests: Consumer<DpRequest>,
    counters: Arc<SliceCounters>,
    evict_cursor: usize,
    /// UEs with paging outstanding (downlink waiting).
    paging: Map<u32, ()>,
    /// Identifiers of restored UEs that do not follow this slice's layout, as installed
    /// in the data thread's exception tables: uplink TEID → bearer slot, UE address →
    /// UE slot. Empty unless UEs came from another slice.
    exc_teid: Map<u32, u32>,
    exc_ip: Map<u32, u32>,
    /// Counter reads: live, or kept / given back for a recording of the MME.
    tap: tap::Tap,
}

/// What [`ControlPlane::restore_ue`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// UE slot (stateless IoT: pool index) of the restored UE.
    pub ue_slot: u32,
    pub class: DeviceClass,
    /// Identifiers (TEIDs, addresses) kept though they do not follow this slice's
    /// layout: they go through the data path's exception tables. The node's demux must
    /// route them here too.
    pub exceptions: u8,
    /// Identifiers that could not be kept (the value is taken here, or names a slot
    /// this slice cannot give): replaced by new ones, which the MME must signal (the
    /// eNB's uplink TEID, the UE's address).
    pub renumbered: u8,
}

type Map<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

/// Into the ring, or behind what already waits for it (updates stay in order).
fn publish_to(updates: &mut Producer<DpUpdate>, backlog: &mut VecDeque<DpUpdate>, u: DpUpdate) {
    if backlog.is_empty() {
        if let Err(u) = updates.push(u) {
            backlog.push_back(u);
        }
    } else {
        backlog.push_back(u);
    }
}

impl<S> ControlPlane<S> {
    pub fn new(
        cfg: ControlConfig,
        updates: Producer<DpUpdate>,
        requests: Consumer<DpRequest>,
        counters: Arc<SliceCounters>,
    ) -> Self {
        // Slot 0 is never handed out: TEID 0 is reserved (TS 29.281) and UE address 0 of
        // a range is the network address.
        let ue_alloc = SlotAllocator::new(1, cfg.ue_slots.min(cfg.layout.max_ue_slots()) as u32);
        // Bearer slots below the UE slots' limit are reserved: UE `u`'s first default
        // bearer takes slot `u` (`alloc_default_bearer`), the others come after. Never
        // more than half of them, so dedicated bearers and further PDNs always have
        // room, whatever the configured counts.
        let bearer_limit = cfg.bearer_slots.min(cfg.layout.max_bearer_slots()) as u32;
        let bearer_alloc =
            SlotAllocator::with_reserved(1, ue_alloc.limit().min(bearer_limit / 2), bearer_limit);
        ControlPlane {
            // Reserved (virtual; pages are touched as slots are used) so that attaches
            // never move the whole table to grow it.
            ues: Vec::with_capacity(ue_alloc.limit() as usize),
            iot_ues: Vec::new(),
            iot_free: VecDeque::new(),
            iot_next: 0,
            bearer_owner: crate::mem::zeroed_slice(bearer_alloc.limit() as usize + 1),
            by_imsi: Map::default(),
            ue_alloc,
            bearer_alloc,
            updates,
            backlog: VecDeque::new(),
            requests,
            counters,
            evict_cursor: 0,
            paging: Map::default(),
            exc_teid: Map::default(),
            exc_ip: Map::default(),
            tap: Default::default(),
            cfg,
        }
    }

    /// Size this control plane's memory for `users` UEs now rather than during
    /// their attaches: the UE table's pages are faulted in and the lookup maps get
    /// their capacity (so they never rehash under load). Run on the control thread.
    pub fn prewarm(&mut self, users: usize) {
        let users = users.min(self.ue_alloc.limit() as usize);
        crate::mem::prefault_spare(&mut self.ues, users + 1);
        self.by_imsi.reserve(users);
        // A UE's default bearer, and as many again for dedicated ones.
        let bearers = users.saturating_mul(2).min(self.bearer_owner.len());
        self.bearer_owner[..bearers].fill(0);
        std::hint::black_box(&self.bearer_owner);
        self.updates.prefault();
    }

    pub fn config(&self) -> &ControlConfig {
        &self.cfg
    }

    pub fn counters(&self) -> &Arc<SliceCounters> {
        &self.counters
    }

    /// UEs in the secondary table (all registered UEs of the slice, IoT included).
    pub fn ue_count(&self) -> usize {
        self.by_imsi.len()
    }

    /// The data-path part of the UE in `ue_slot`.
    pub fn ue(&self, ue_slot: u32) -> Option<&UeContext> {
        self.ues.get(ue_slot as usize).and_then(|u| u.ctx.as_ref())
    }

    /// Entries in use: UEs with a signaling part, a data-path part or both.
    pub fn entry_count(&self) -> usize {
        self.ue_alloc.in_use()
    }

    /// Give a UE that starts signaling its entry: a UE slot holding `signaling` (the
    /// MME's state of it), and later its data-path part ([`AttachParams::ue_slot`]).
    pub fn reserve_ue(&mut self, signaling: Box<S>) -> Result<u32, CtrlError> {
        let (ue_slot, _) = self
            .draw_ue_slot()
            .ok_or(CtrlError::Exhausted("UE slots"))?;
        self.entry_mut(ue_slot).signaling = Some(signaling);
        Ok(ue_slot)
    }

    /// Put the signaling part into the entry of `ue_slot`, which has a data-path part
    /// and none yet (a UE restored from a snapshot).
    pub fn set_signaling(&mut self, ue_slot: u32, signaling: Box<S>) -> Result<(), CtrlError> {
        match self.ues.get_mut(ue_slot as usize) {
            Some(e) if e.ctx.is_some() && e.signaling.is_none() => {
                e.signaling = Some(signaling);
                Ok(())
            }
            _ => Err(CtrlError::UnknownUe(ue_slot)),
        }
    }

    /// The signaling part of the entry of `ue_slot`, if it has one.
    #[inline]
    pub fn signaling(&self, ue_slot: u32) -> Option<&S> {
        self.ues.get(ue_slot as usize)?.signaling.as_deref()
    }

    #[inline]
    pub fn signaling_mut(&mut self, ue_slot: u32) -> Option<&mut S> {
        self.ues.get_mut(ue_slot as usize)?.signaling.as_deref_mut()
    }

    /// Drop the UE's entry: its data-path part as [`Self::detach`] does, then its
    /// signaling part, which is returned; the slot is free again.
    pub fn release_ue(&mut self, ue_slot: u32) -> Option<Box<S>> {
        let e = self.ues.get_mut(ue_slot as usize)?;
        let signaling = e.signaling.take();
        if e.ctx.is_some() {
            // Detach frees the slot, now that the signaling part is gone.
            let _ = self.detach(ue_slot);
        } else if signaling.is_some() {
            self.ue_alloc.free(ue_slot);
        }
        signaling
    }

    fn entry_mut(&mut self, ue_slot: u32) -> &mut UeEntry<S> {
        if self.ues.len() <= ue_slot as usize {
            self.ues.resize_with(ue_slot as usize + 1, UeEntry::default);
        }
        &mut self.ues[ue_slot as usize]
    }

    pub fn find_imsi(&self, imsi: u64) -> Option<(DeviceClass, u32)> {
        self.by_imsi.get(&imsi).copied()
    }

    fn ue_mut(&mut self, ue_slot: u32) -> Result<&mut UeContext, CtrlError> {
        self.ues
            .get_mut(ue_slot as usize)
            .and_then(|u| u.ctx.as_mut())
            .ok_or(CtrlError::UnknownUe(ue_slot))
    }

    fn bearer_owner(&self, bearer_slot: u32) -> Option<u32> {
        match self.bearer_owner.get(bearer_slot as usize) {
            Some(&u) if u != 0 => Some(u),
            _ => None,
        }
    }

    /// A slot for a new default bearer of UE `ue_slot`: the bearer slot equal to the UE
    /// slot while free, so the data path finds the UE's hot record and this bearer's
    /// in one line per direction (`UplinkLine`, `DownlinkLine`); otherwise one from
    /// the free list. `pending`: bearers given slots but not yet owners (a restore in
    /// progress).
    fn alloc_default_bearer(
        &mut self,
        ue_slot: u32,
        pending: &[BearerContext],
    ) -> Option<(u32, u32)> {
        if self.bearer_alloc.reserved(ue_slot)
            && self.bearer_owner(ue_slot).is_none()
            && !pending.iter().any(|b| b.slot == ue_slot)
        {
            let gen = self.bearer_alloc.generation(ue_slot);
            if self.bearer_alloc.claim(ue_slot, gen) {
                return Some((ue_slot, gen));
            }
        }
        self.bearer_alloc.alloc()
    }

    fn set_bearer_owner(&mut self, bearer_slot: u32, ue_slot: u32) {
        if let Some(o) = self.bearer_owner.get_mut(bearer_slot as usize) {
            *o = ue_slot;
        }
    }

    fn publish(&mut self, u: DpUpdate) {
        publish_to(&mut self.updates, &mut self.backlog, u);
    }

    /// Push updates that did not fit in the ring; returns how many are still waiting.
    /// Call from the control loop.
    pub fn flush(&mut self) -> usize {
        while let Some(u) = self.backlog.pop_front() {
            if let Err(u) = self.updates.push(u) {
                self.backlog.push_front(u);
                break;
            }
        }
        self.backlog.len()
    }

    /// Updates published but not yet applied by the data thread, plus the backlog.
    pub fn in_flight(&self) -> usize {
        self.updates.len() + self.backlog.len()
    }

    /// Install PCEF rule set `id` on the data thread.
    pub fn install_rule_set(
        &mut self,
        id: u16,
        rules: Vec<crate::pcef::Rule>,
    ) -> Result<(), CtrlError> {
        if id as usize >= crate::counters::MAX_RULE_SETS
            || rules.len() > crate::counters::MAX_RULES_PER_SET
        {
            return Err(CtrlError::BadRuleSet(id));
        }
        self.publish(DpUpdate::RuleSet {
            id,
            rules: Box::new(RuleSet::new(rules)),
        });
        Ok(())
    }

    /// Create a UE with its default bearer (attach). A UE whose eNB tunnel is given is
    /// ECM-CONNECTED and goes straight into the primary table.
    pub fn attach(&mut self, p: &AttachParams) -> Result<Attached, CtrlError> {
        if let Some((class, slot)) = self.by_imsi.get(&p.imsi).copied() {
            // Re-attach: the old context is dropped first (TS 23.401 §5.3.2.1).
            match class {
                DeviceClass::Normal => self.detach(slot)?,
                DeviceClass::StatelessIot => self.detach_iot(slot)?,
            }
        }
        if p.class == DeviceClass::StatelessIot {
            return self.attach_iot(p);
        }
        let ue_slot = match p.ue_slot {
            // The entry the UE's signaling holds, without a data-path part yet.
            Some(s) => match self.ues.get(s as usize) {
                Some(e) if e.ctx.is_none() && e.signaling.is_some() => s,
                _ => return Err(CtrlError::UnknownUe(s)),
            },
            None => {
                self.draw_ue_slot()
                    .ok_or(CtrlError::Exhausted("UE slots"))?
                    .0
            }
        };
        let Some((bslot, gen)) = self.draw_bearer_slot(Some(ue_slot), &[]) else {
            if p.ue_slot.is_none() {
                self.ue_alloc.free(ue_slot);
            }
            return Err(CtrlError::Exhausted("bearer slots"));
        };
        let teid_ul = self.cfg.layout.teid(self.cfg.slice, bslot, gen);
        let ue_ip = self.cfg.layout.ue_ip(self.cfg.slice, ue_slot);
        let connected = p.enb_teid != 0;
        let ctx = UeContext {
            imsi: p.imsi,
            class: DeviceClass::Normal,
            ecm: if connected {
                EcmState::Connected
            } else {
                EcmState::Idle
            },
            ue_slot,
            ue_ip,
            ambr_ul: p.ambr_ul,
            ambr_dl: p.ambr_dl,
            rule_set: p.rule_set.unwrap_or(self.cfg.default_rule_set),
            default_ebi: p.default_ebi,
            pdns: vec![PdnContext {
                index: 0,
                apn: p.apn.clone(),
                ip: ue_ip,
                default_ebi: p.default_ebi,
            }],
            bearers: vec![BearerContext {
                ebi: p.default_ebi,
                qci: p.qci,
                arp: p.arp,
                mbr_ul: 0,
                mbr_dl: 0,
                gbr_ul: 0,
                gbr_dl: 0,
                slot: bslot,
                teid_ul,
                enb_teid: p.enb_teid,
                enb_addr: p.enb_addr,
                charging_key: p.charging_key,
                pdn: 0,
            }],
            version: 1,
            in_primary: false,
        };
        self.set_bearer_owner(bslot, ue_slot);
        self.by_imsi.insert(p.imsi, (DeviceClass::Normal, ue_slot));
        self.publish(DpUpdate::UeExists {
            slot: ue_slot,
            pdns: 1,
        });
        self.publish(DpUpdate::BearerExists {
            slot: bslot,
            teid: Some(teid_ul),
        });
        self.entry_mut(ue_slot).ctx = Some(ctx);
        self.promote(ue_slot)?;
        Ok(Attached {
            ue_slot,
            ue_ip,
            teid_ul,
            class: DeviceClass::Normal,
        })
    }

    /// Publish the UE and all its bearers into the primary table.
    pub fn promote(&mut self, ue_slot: u32) -> Result<(), CtrlError> {
        // Borrowed field by field: the UE is read while the ring is written.
        let ue = self
            .ues
            .get_mut(ue_slot as usize)
            .and_then(|u| u.ctx.as_mut())
            .ok_or(CtrlError::UnknownUe(ue_slot))?;
        ue.in_primary = true;
        let (updates, backlog) = (&mut self.updates, &mut self.backlog);
        for b in &ue.bearers {
            let rec = ue.dp_bearer(b);
            publish_to(updates, backlog, DpUpdate::Bearer { slot: b.slot, rec });
        }
        let rec = ue.dp_record();
        publish_to(updates, backlog, DpUpdate::Ue { slot: ue_slot, rec });
        Ok(())
    }

    /// Take the UE out of the primary table (idle eviction); it stays registered here.
    pub fn evict(&mut self, ue_slot: u32) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        if !ue.in_primary {
            return Ok(());
        }
        ue.in_primary = false;
        let slots: Vec<u32> = ue.bearers.iter().map(|b| b.slot).collect();
        self.publish(DpUpdate::EvictUe { slot: ue_slot });
        for s in slots {
            self.publish(DpUpdate::EvictBearer { slot: s });
        }
        Ok(())
    }

    /// Re-publish after a change to a UE that is in the primary table.
    fn republish(&mut self, ue_slot: u32) -> Result<(), CtrlError> {
        let ue = self.ue_mut(ue_slot)?;
        ue.version = ue.version.wrapping_add(1);
        if ue.in_primary {
            self.promote(ue_slot)?;
        }
        Ok(())
    }

    /// Delete the UE's data-path part (detach). Its identifiers become stale. The entry
    /// stays while it has a signaling part ([`Self::release_ue`] frees it).
    pub fn detach(&mut self, ue_slot: u32) -> Result<(), CtrlError> {
        let e = self
            .ues
            .get_mut(ue_slot as usize)
            .ok_or(CtrlError::UnknownUe(ue_slot))?;
        let ue = e.ctx.take().ok_or(CtrlError::UnknownUe(ue_slot))?;
        let keep_entry = e.signaling.is_some();
        self.publish(DpUpdate::EvictUe { slot: ue_slot });
        self.publish(DpUpdate::UeExists {
            slot: ue_slot,
            pdns: 0,
        });
        for b in &ue.bearers {
            self.retire_bearer(b.slot, b.teid_ul);
        }
        for p in &ue.pdns {
            self.drop_exception_ip(p.ip);
        }
        self.by_imsi.remove(&ue.imsi);
        self.paging.remove(&ue_slot);
        if !keep_entry {
            self.ue_alloc.free(ue_slot);
        }
        Ok(())
    }

    /// Detach by IMSI, whatever the device class.
    pub fn detach_imsi(&mut self, imsi: u64) -> Result<(), CtrlError> {
        match self.by_imsi.get(&imsi).copied() {
            Some((DeviceClass::Normal, s)) => self.detach(s),
            Some((DeviceClass::StatelessIot, i)) => self.detach_iot(i),
            None => Err(CtrlError::UnknownImsi(imsi)),
        }
    }

    /// Read the data thread's requests and act: promotions are served here; what needs
    /// signaling (paging, eNB error indications) is returned.
    pub fn poll_requests(&mut self, events: &mut Vec<ControlEvent>) -> usize {
        let mut n = 0;
        while let Some(r) = self.requests.pop() {
            n += 1;
            match r {
                DpRequest::PromoteBearer { slot, teid } => {
                    // Uplink on a live bearer's TEID (its generation checked) is the
                    // UE's, in ECM-IDLE too: the eNB forwards what it holds up to the
                    // release, and those packets can reach the data thread after the
                    // Release Complete reached us (an S-GW keeps its S1-U TEID). The
                    // UE goes back to the primary table; downlink still pages it.
                    let owner = self.bearer_owner(slot);
                    let ok = owner.and_then(|u| self.ue(u)).is_some_and(|ue| {
                        ue.bearers
                            .iter()
                            .any(|b| b.slot == slot && b.teid_ul == teid)
                    });
                    match (ok, owner) {
                        (true, Some(u)) => {
                            let _ = self.promote(u);
                        }
                        _ => self.publish(DpUpdate::PromotionRefused {
                            ue_slot: slot | 0x8000_0000,
                        }),
                    }
                }
                DpRequest::DownlinkData { ue_slot } => {
                    // Connected without a downlink tunnel: its access bearers were
                    // released (an S1 release under way): as idle, the MME pages.
                    let state = self.ue(ue_slot).map(|u| {
                        let tunnel = u.bearers.iter().any(|b| b.enb_teid != 0);
                        match u.ecm {
                            EcmState::Connected if tunnel => (EcmState::Connected, u.imsi),
                            _ => (EcmState::Idle, u.imsi),
                        }
                    });
                    match state {
                        Some((EcmState::Connected, _)) => {
                            let _ = self.promote(ue_slot);
                        }
                        Some((EcmState::Idle, imsi)) => {
                            if self.paging.insert(ue_slot, ()).is_none() {
                                events.push(ControlEvent::Page { ue_slot, imsi });
                            }
                        }
                        None => self.publish(DpUpdate::PromotionRefused { ue_slot }),
                    }
                }
                DpRequest::ErrorIndication { enb_teid, enb_addr } => {
                    events.push(ControlEvent::EnbErrorIndication { enb_teid, enb_addr })
                }
            }
        }
        n
    }

    /// Paging gave up (T3413 expiry): drop the buffered downlink.
    pub fn paging_failed(&mut self, ue_slot: u32) {
        self.paging.remove(&ue_slot);
        self.publish(DpUpdate::PromotionRefused { ue_slot });
    }

    /// Evict UEs whose bearers saw no packet for `idle_ns` (data-thread clock `now_ns`),
    /// scanning at most `budget` UE slots per call so the control loop stays responsive.
    /// Returns how many were evicted.
    pub fn evict_idle(&mut self, now_ns: u64, idle_ns: u64, budget: usize) -> usize {
        let mut evicted = 0;
        let len = self.ues.len();
        if len == 0 {
            return 0;
        }
        for _ in 0..budget.min(len) {
            self.evict_cursor = (self.evict_cursor + 1) % len;
            let slot = self.evict_cursor as u32;
            let Some(ue) = self.ue(slot) else { continue };
            if !ue.in_primary {
                continue;
            }
            let last = ue
                .bearers
                .iter()
                .map(|b| self.counters.last_active_ns(b.slot))
                .max()
                .unwrap_or(0);
            if now_ns.saturating_sub(last) > idle_ns && self.evict(slot).is_ok() {
                evicted += 1;
            }
        }
        evicted
    }

    fn drop_exception_ip(&mut self, ip: Ipv4Addr) {
        let ip = u32::from(ip);
        if !self.exc_ip.is_empty() && self.exc_ip.remove(&ip).is_some() {
            self.publish(DpUpdate::ExceptionIp { ip, slot: None });
        }
    }

    /// A bearer's per-rule volumes (UL, DL bytes of each pair), as counted so far.
    pub fn rule_volumes(
        &self,
        ue_slot: u32,
        ebi: u8,
    ) -> Result<[(u64, u64); crate::counters::RULE_COUNTERS_PER_BEARER], CtrlError> {
        let ue = self.ue(ue_slot).ok_or(CtrlError::UnknownUe(ue_slot))?;
        let b = ue
            .bearer(ebi)
            .ok_or(CtrlError::NoSuchBearer { ue_slot, ebi })?;
        let rc = &self.counters.bearer_rules[b.slot as usize];
        Ok(std::array::from_fn(|k| {
            self.tapped_pair(b.slot, k as u8, || {
                (
                    rc.ul_bytes[k].load(std::sync::atomic::Ordering::Relaxed),
                    rc.dl_bytes[k].load(std::sync::atomic::Ordering::Relaxed),
                )
            })
        }))
    }

    /// A bearer's counters, read from the data thread's counter state.
    pub fn usage(&self, ue_slot: u32, ebi: u8) -> Result<Usage, CtrlError> {
        let ue = self.ue(ue_slot).ok_or(CtrlError::UnknownUe(ue_slot))?;
        let b = ue
            .bearer(ebi)
            .ok_or(CtrlError::NoSuchBearer { ue_slot, ebi })?;
        Ok(self.bearer_usage(b.slot))
    }
}
