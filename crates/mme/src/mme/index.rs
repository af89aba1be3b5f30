//! The MME's index of its UEs: which entry of the slice's table holds the context an
//! MME UE S1AP ID names, and which context an S1 connection, an IMSI or an M-TMSI
//! names; with the allocators of the IDs and M-TMSIs this slice hands out. Keys are
//! typed, so an M-TMSI never looks up an ID. Every "forget this name if it is still
//! this UE's" is one method here, not a get-and-compare at each caller.

use super::{AssocId, Map};
use pepc_slice::ids::SignalingIds;
use pepc_types::{Imsi, MTmsi, MmeUeId, UeSlot};

/// A UE's S1 connection: the eNB's association and its eNB UE S1AP ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ConnKey {
    pub(crate) assoc: AssocId,
    pub(crate) enb_ue_id: u32,
}

impl ConnKey {
    pub(crate) fn new(assoc: AssocId, enb_ue_id: u32) -> ConnKey {
        ConnKey { assoc, enb_ue_id }
    }
}

impl From<(AssocId, u32)> for ConnKey {
    fn from((assoc, enb_ue_id): (AssocId, u32)) -> Self {
        ConnKey { assoc, enb_ue_id }
    }
}

pub(crate) struct UeIndex {
    slots: Map<MmeUeId, UeSlot>,
    conns: Map<ConnKey, MmeUeId>,
    imsis: Map<Imsi, MmeUeId>,
    tmsis: Map<MTmsi, MmeUeId>,
    /// Next MME UE S1AP ID and M-TMSI to try (part of the MME's state: a replay hands
    /// out the same ones).
    next_id: u32,
    next_tmsi: u32,
}

impl UeIndex {
    pub(crate) fn new() -> UeIndex {
        UeIndex {
            slots: Map::default(),
            conns: Map::default(),
            imsis: Map::default(),
            tmsis: Map::default(),
            next_id: 1,
            next_tmsi: 0x1000_0001,
        }
    }

    pub(crate) fn reserve(&mut self, users: usize) {
        self.slots.reserve(users);
        self.conns.reserve(users);
        self.imsis.reserve(users);
        self.tmsis.reserve(users);
    }

    /// Give back spare capacity once mostly empty (after a storm).
    pub(crate) fn shrink(&mut self) {
        fn shrink<K: std::hash::Hash + Eq, V>(m: &mut Map<K, V>) {
            if m.capacity() > 1024 && m.len() * 8 < m.capacity() {
                m.shrink_to_fit();
            }
        }
        shrink(&mut self.slots);
        shrink(&mut self.conns);
        shrink(&mut self.imsis);
        shrink(&mut self.tmsis);
    }

    /// Serve slice `index` under `ids`: the allocators continue inside its bits.
    pub(crate) fn set_slice(&mut self, ids: SignalingIds, index: usize) {
        self.next_id = ids.compose(index, self.next_id).max(1);
        self.next_tmsi = ids.compose(index, self.next_tmsi);
    }

    /// The next free MME UE S1AP ID of slice `index` (never 0).
    pub(crate) fn alloc_id(&mut self, ids: SignalingIds, index: usize) -> u32 {
        loop {
            let id = self.next_id;
            self.next_id = ids.compose(index, id.wrapping_add(1));
            if id != 0 && !self.slots.contains_key(&MmeUeId(id)) {
                return id;
            }
        }
    }

    /// The next M-TMSI of slice `index` that no context here holds and `taken` (parked
    /// or restoring contexts) does not name.
    pub(crate) fn alloc_tmsi(
        &mut self,
        ids: SignalingIds,
        index: usize,
        taken: impl Fn(u32) -> bool,
    ) -> u32 {
        loop {
            let t = self.next_tmsi;
            self.next_tmsi = ids.compose(index, t.wrapping_add(0x9e37_79b9) | 1);
            if !self.tmsis.contains_key(&MTmsi(t)) && !taken(t) {
                return t;
            }
        }
    }

    // Contexts by MME UE S1AP ID.

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    #[inline]
    pub(crate) fn slot(&self, id: u32) -> Option<u32> {
        self.slots.get(&MmeUeId(id)).map(|s| s.0)
    }

    pub(crate) fn contains(&self, id: u32) -> bool {
        self.slots.contains_key(&MmeUeId(id))
    }

    pub(crate) fn insert(&mut self, id: u32, slot: u32) {
        self.slots.insert(MmeUeId(id), UeSlot(slot));
    }

    pub(crate) fn remove(&mut self, id: u32) -> Option<u32> {
        self.slots.remove(&MmeUeId(id)).map(|s| s.0)
    }

    // S1 connections.

    pub(crate) fn conn_count(&self) -> usize {
        self.conns.len()
    }

    pub(crate) fn by_conn(&self, c: ConnKey) -> Option<u32> {
        self.conns.get(&c).map(|i| i.0)
    }

    pub(crate) fn has_conn(&self, c: ConnKey) -> bool {
        self.conns.contains_key(&c)
    }

    pub(crate) fn link_conn(&mut self, c: ConnKey, id: u32) {
        self.conns.insert(c, MmeUeId(id));
    }

    pub(crate) fn unlink_conn(&mut self, c: ConnKey) {
        self.conns.remove(&c);
    }

    /// Forget connection `c` if it still names UE `id`.
    pub(crate) fn unlink_conn_of(&mut self, k: ConnKey, id: u32) {
        if self.conns.get(&k) == Some(&MmeUeId(id)) {
            self.conns.remove(&k);
        }
    }

    /// Every connection and its UE, in no particular order.
    pub(crate) fn conns(&self) -> impl Iterator<Item = (AssocId, u32, u32)> + '_ {
        self.conns.iter().map(|(k, i)| (k.assoc, k.enb_ue_id, i.0))
    }

    // Subscribers.

    pub(crate) fn imsi_count(&self) -> usize {
        self.imsis.len()
    }

    #[inline]
    pub(crate) fn by_imsi(&self, imsi: u64) -> Option<u32> {
        self.imsis.get(&Imsi(imsi)).map(|i| i.0)
    }

    pub(crate) fn has_imsi(&self, imsi: u64) -> bool {
        self.imsis.contains_key(&Imsi(imsi))
    }

    /// `imsi` names UE `id` from now on; the UE it named before, if any.
    pub(crate) fn link_imsi(&mut self, imsi: u64, id: u32) -> Option<u32> {
        self.imsis.insert(Imsi(imsi), MmeUeId(id)).map(|i| i.0)
    }

    /// Whether `imsi` names UE `id` (its current context).
    pub(crate) fn is_imsi_of(&self, imsi: u64, id: u32) -> bool {
        self.imsis.get(&Imsi(imsi)) == Some(&MmeUeId(id))
    }

    pub(crate) fn unlink_imsi(&mut self, imsi: u64) {
        self.imsis.remove(&Imsi(imsi));
    }

    /// Every subscriber and its UE, in no particular order.
    pub(crate) fn imsis(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.imsis.iter().map(|(k, i)| (k.0, i.0))
    }

    // M-TMSIs.

    pub(crate) fn by_tmsi(&self, t: u32) -> Option<u32> {
        self.tmsis.get(&MTmsi(t)).map(|i| i.0)
    }

    pub(crate) fn has_tmsi(&self, t: u32) -> bool {
        self.tmsis.contains_key(&MTmsi(t))
    }

    pub(crate) fn link_tmsi(&mut self, t: u32, id: u32) {
        self.tmsis.insert(MTmsi(t), MmeUeId(id));
    }

    pub(crate) fn unlink_tmsi(&mut self, t: u32) {
        self.tmsis.remove(&MTmsi(t));
    }

    /// Forget `t` if it still names UE `id`.
    pub(crate) fn unlink_tmsi_of(&mut self, t: u32, id: u32) {
        if self.tmsis.get(&MTmsi(t)) == Some(&MmeUeId(id)) {
            self.tmsis.remove(&MTmsi(t));
        }
    }
}
