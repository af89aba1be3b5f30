//! Identifiers allocated by the node so the data path finds a UE by indexing, not by a
//! general hash lookup.
//!
//! ## Uplink TEID layout (32 bits)
//! ```text
//!  31 | 30 ........ 31-S | ........................ | G-1 ...... 0
//!  P  |   slice (S bits) |  bearer slot (31-S-G bits)|  generation (G bits)
//! ```
//! * `P = 0`: a structured TEID. `S = ceil(log2(slices))` (0 for one slice) and
//!   `G = 6`; the slot indexes the slice's bearer table directly. The generation is
//!   bumped each time a slot is reused, and slots are reused in FIFO order, so a stale
//!   TEID (held by an eNB after release) names the right slot with the wrong generation
//!   and is rejected (the table also stores the full TEID and compares it).
//! * `P = 1`: the pool space: stateless-IoT TEIDs (a configured sub-range) and TEIDs
//!   that cannot follow the layout (a UE migrated from another slice keeps its TEID):
//!   those go through a small exception table.
//!
//! With one slice: 25 slot bits (33M bearers); with 16 slices: 21 bits (2M per slice).
//!
//! ## UE IPv4 address layout
//! A UE has one address per PDN connection. There is one address pool per *PDN index*
//! (up to [`MAX_PDNS`]), all of the same prefix length; PDN index 0 is the node's UE
//! pool `base/len` (default 10.0.0.0/8, 24 host bits) and is used by the attach PDN:
//! ```text
//!  address = pool[pdn] | [slice (S bits)][UE slot]
//! ```
//! A UE keeps its slot in every pool, so the address of PDN `k` of the UE in slot `s`
//! is `pool[k] + [slice][s]`, and the downlink finds (PDN index, slice, UE slot) from
//! the destination with at most [`MAX_PDNS`] prefix compares, a mask and a shift: no
//! per-PDN allocator and no lookup table. Address 0 of each slice's range is never
//! handed out. By default the extra pools are the prefixes that follow the UE pool
//! (10.0.0.0/8 → 11.0.0.0/8, 12.0.0.0/8, 13.0.0.0/8), dropping any that would wrap
//! past 255.255.255.255; [`IdLayout::with_pdn_pools`] sets them explicitly.
//! Stateless-IoT devices get addresses from their own prefix.
//!
//! ## MME UE S1AP ID and M-TMSI layout (32 bits)
//! ```text
//!  31 ........ 32-S | 31-S ..................................... 0
//!   slice (S bits)  |  allocated by that slice's MME (32-S bits)
//! ```
//! The same `S` as the TEID layout. The node's S1AP demux sends every UE-associated
//! message to the slice in the top bits of its MME UE S1AP ID (the Source MME UE
//! S1AP ID of a Path Switch Request), and an Initial UE Message with an S-TMSI or a
//! GUTI of ours to the slice in the top bits of its M-TMSI, with a shift and no
//! lookup ([`SignalingIds`]). The cluster's node bits will sit above the slice bits.

use std::collections::VecDeque;
use std::net::Ipv4Addr;

/// Generation bits in a structured TEID.
pub const GEN_BITS: u32 = 6;
const GEN_MASK: u32 = (1 << GEN_BITS) - 1;
/// Bit 31: pool space (IoT pool and exceptions).
pub const POOL_BIT: u32 = 1 << 31;

/// PDN connections a UE can hold at once: one address pool each.
pub const MAX_PDNS: usize = 4;

/// Where the slice sits in an MME UE S1AP ID or an M-TMSI (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SignalingIds {
    pub slice_bits: u32,
}

impl SignalingIds {
    /// Layout for `slices` slices (as [`IdLayout::new`] counts slice bits).
    pub fn new(slices: usize) -> Self {
        SignalingIds {
            slice_bits: usize::BITS - slices.max(1).saturating_sub(1).leading_zeros(),
        }
    }

    /// Bits a slice allocates on its own.
    #[inline]
    pub fn local_bits(&self) -> u32 {
        32 - self.slice_bits
    }

    #[inline]
    pub fn local_mask(&self) -> u32 {
        (u64::from(u32::MAX) >> self.slice_bits) as u32
    }

    /// The slice an identifier names.
    #[inline]
    pub fn slice_of(&self, id: u32) -> usize {
        if self.slice_bits == 0 {
            0
        } else {
            (id >> self.local_bits()) as usize
        }
    }

    /// Slice `slice`'s identifier with local part `local` (upper bits dropped).
    #[inline]
    pub fn compose(&self, slice: usize, local: u32) -> u32 {
        let high = if self.slice_bits == 0 {
            0
        } else {
            (slice as u32) << self.local_bits()
        };
        high | (local & self.local_mask())
    }
}

/// The node-wide identifier layout, fixed at node start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdLayout {
    pub slice_bits: u32,
    pub ue_pool: Ipv4Addr,
    pub ue_pool_len: u8,
    /// Address pool of each PDN index (`pdn_pools[0] == ue_pool`), prefix length
    /// `ue_pool_len`; only the first `pdn_count` are in use.
    pub pdn_pools: [Ipv4Addr; MAX_PDNS],
    pub pdn_count: u8,
}

/// Why an [`IdLayout`] or an [`IotPool`] cannot be built (the texts are what the
/// node's configuration errors show after the key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    #[error("slices must be 1..=64, got {0}")]
    Slices(usize),
    #[error("ue pool prefix length must be 8..=30, got {0}")]
    PrefixLen(u8),
    #[error("ue pool /{len} is too small for {slices} slices (needs > {needs} host bits)")]
    PoolTooSmall { len: u8, slices: usize, needs: u32 },
    #[error("ue pool {pool}/{len} has host bits set")]
    HostBits { pool: Ipv4Addr, len: u8 },
    #[error("at most {max} extra PDN pools, got {0}", max = MAX_PDNS - 1)]
    TooManyPdnPools(usize),
    #[error("PDN pool {pool}/{len} has host bits set")]
    PdnHostBits { pool: Ipv4Addr, len: u8 },
    #[error("PDN pool {pool}/{len} is used twice")]
    PdnTwice { pool: Ipv4Addr, len: u8 },
    #[error("iot teid_base {0:#x} must have bit 31 set")]
    IotTeidBase(u32),
    #[error("iot pool overflows the TEID or address space")]
    IotOverflow,
}

impl IdLayout {
    /// Layout for `slices` slices (1..=64) over the UE pool `pool/len` (len 8..=30).
    pub fn new(slices: usize, pool: Ipv4Addr, len: u8) -> Result<Self, LayoutError> {
        if slices == 0 || slices > 64 {
            return Err(LayoutError::Slices(slices));
        }
        if !(8..=30).contains(&len) {
            return Err(LayoutError::PrefixLen(len));
        }
        let slice_bits = usize::BITS - (slices - 1).leading_zeros();
        let host_bits = 32 - len as u32;
        if host_bits <= slice_bits + 1 {
            return Err(LayoutError::PoolTooSmall {
                len,
                slices,
                needs: slice_bits + 1,
            });
        }
        let mask = u32::MAX << host_bits;
        if u32::from(pool) & !mask != 0 {
            return Err(LayoutError::HostBits { pool, len });
        }
        // Default extra pools: the prefixes right after the UE pool, while they fit.
        let mut pdn_pools = [pool; MAX_PDNS];
        let mut pdn_count = 1u8;
        for (k, p) in pdn_pools.iter_mut().enumerate().skip(1) {
            match (k as u64)
                .checked_shl(host_bits)
                .map(|off| u32::from(pool) as u64 + off)
                .filter(|a| *a <= u32::MAX as u64)
            {
                Some(a) => {
                    *p = Ipv4Addr::from(a as u32);
                    pdn_count += 1;
                }
                None => break,
            }
        }
        Ok(IdLayout {
            slice_bits,
            ue_pool: pool,
            ue_pool_len: len,
            pdn_pools,
            pdn_count,
        })
    }

    /// Replace the extra PDN pools (PDN indexes 1..): each a prefix of the UE pool's
    /// length, host bits clear, distinct from each other and from the UE pool.
    pub fn with_pdn_pools(mut self, extra: &[Ipv4Addr]) -> Result<Self, LayoutError> {
        if extra.len() > MAX_PDNS - 1 {
            return Err(LayoutError::TooManyPdnPools(extra.len()));
        }
        let host_bits = self.ip_host_bits();
        let mask = u32::MAX << host_bits;
        let mut pools = [self.ue_pool; MAX_PDNS];
        for (i, p) in extra.iter().enumerate() {
            if u32::from(*p) & !mask != 0 {
                return Err(LayoutError::PdnHostBits {
                    pool: *p,
                    len: self.ue_pool_len,
                });
            }
            if pools[..=i].contains(p) {
                return Err(LayoutError::PdnTwice {
                    pool: *p,
                    len: self.ue_pool_len,
                });
            }
            pools[i + 1] = *p;
        }
        self.pdn_pools = pools;
        self.pdn_count = 1 + extra.len() as u8;
        Ok(self)
    }

    /// The layout of MME UE S1AP IDs and M-TMSIs (same slice bits).
    pub fn signaling(&self) -> SignalingIds {
        SignalingIds {
            slice_bits: self.slice_bits,
        }
    }

    /// Bits for the bearer slot in a structured TEID.
    #[inline]
    pub fn teid_slot_bits(&self) -> u32 {
        31 - self.slice_bits - GEN_BITS
    }

    /// How many bearer slots one slice can hold.
    pub fn max_bearer_slots(&self) -> usize {
        1usize << self.teid_slot_bits()
    }

    #[inline]
    fn ip_host_bits(&self) -> u32 {
        32 - self.ue_pool_len as u32
    }

    #[inline]
    fn ip_slot_bits(&self) -> u32 {
        self.ip_host_bits() - self.slice_bits
    }

    /// How many UE slots (addresses) one slice can hold; slot 0 is reserved.
    pub fn max_ue_slots(&self) -> usize {
        1usize << self.ip_slot_bits()
    }

    /// Where the slice sits in a structured TEID: `(teid >> shift) & mask`, as
    /// `(shift, mask)` (mask 0 with one slice), for steering outside this crate (the
    /// kernel's socket choice).
    pub fn teid_slice_field(&self) -> (u32, u32) {
        (
            self.teid_slot_bits() + GEN_BITS,
            (1u32 << self.slice_bits) - 1,
        )
    }

    /// Where the slice sits in a UE address of any PDN pool, as
    /// [`Self::teid_slice_field`] says it for a TEID.
    pub fn ip_slice_field(&self) -> (u32, u32) {
        (self.ip_slot_bits(), (1u32 << self.slice_bits) - 1)
    }

    /// Build a structured TEID.
    #[inline]
    pub fn teid(&self, slice: u32, slot: u32, gen: u32) -> u32 {
        let slot_bits = self.teid_slot_bits();
        (slice << (slot_bits + GEN_BITS)) | (slot << GEN_BITS) | (gen & GEN_MASK)
    }

    /// Split a structured TEID into (slice, slot, generation); `None` for pool space.
    #[inline]
    pub fn split_teid(&self, teid: u32) -> Option<(u32, u32, u32)> {
        if teid & POOL_BIT != 0 {
            return None;
        }
        let slot_bits = self.teid_slot_bits();
        let slot = (teid >> GEN_BITS) & ((1 << slot_bits) - 1);
        let slice = if self.slice_bits == 0 {
            0
        } else {
            teid >> (slot_bits + GEN_BITS)
        };
        Some((slice, slot, teid & GEN_MASK))
    }

    /// The address of UE slot `slot` in slice `slice` (PDN index 0: the attach PDN).
    #[inline]
    pub fn ue_ip(&self, slice: u32, slot: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ue_pool) | (slice << self.ip_slot_bits()) | slot)
    }

    /// The address of PDN index `pdn` of UE slot `slot` in slice `slice`; `None` when
    /// the layout has no pool for that index.
    #[inline]
    pub fn pdn_ip(&self, pdn: u8, slice: u32, slot: u32) -> Option<Ipv4Addr> {
        (pdn < self.pdn_count).then(|| {
            Ipv4Addr::from(
                u32::from(self.pdn_pools[pdn as usize]) | (slice << self.ip_slot_bits()) | slot,
            )
        })
    }

    /// Split a UE address of any PDN pool into (PDN index, slice, slot); `None`
    /// outside every pool.
    #[inline]
    pub fn split_pdn_ip(&self, ip: u32) -> Option<(u8, u32, u32)> {
        let host_bits = self.ip_host_bits();
        let mut k = 0;
        while k < self.pdn_count as usize && k < MAX_PDNS {
            if (ip ^ u32::from(self.pdn_pools[k])) >> host_bits == 0 {
                let host = ip & ((1u32 << host_bits) - 1);
                let slot_bits = self.ip_slot_bits();
                return Some((k as u8, host >> slot_bits, host & ((1 << slot_bits) - 1)));
            }
            k += 1;
        }
        None
    }

    /// Split a UE address (of any PDN pool) into (slice, slot); `None` outside the pools.
    #[inline]
    pub fn split_ue_ip(&self, ip: u32) -> Option<(u32, u32)> {
        self.split_pdn_ip(ip).map(|(_, slice, slot)| (slice, slot))
    }
}

/// Slot allocator with FIFO reuse and per-slot generations. Owned by the control
/// thread (the single writer of identifiers).
#[derive(Debug)]
pub struct SlotAllocator {
    first: u32,
    /// Slots `first..fifo_first` are reserved: never handed out by [`Self::alloc`],
    /// taken only by [`Self::claim`] by a caller that owns them by a rule of its own
    /// (a UE's first default bearer takes the bearer slot equal to its UE slot).
    fifo_first: u32,
    next_fresh: u32,
    limit: u32,
    free: VecDeque<u32>,
    gens: Vec<u8>,
    /// Slots taken out of order by [`Self::claim`] (a restored UE keeps its
    /// identifiers): each voids the one token that would otherwise hand it out again,
    /// its entry in `free` or its place in the fresh range, and is skipped there.
    claimed: std::collections::HashSet<u32, foldhash::fast::RandomState>,
    used: usize,
}

impl SlotAllocator {
    /// Slots `first..limit` (slot 0 may be reserved by passing first = 1).
    pub fn new(first: u32, limit: u32) -> Self {
        Self::with_reserved(first, first, limit)
    }

    /// Slots `first..limit`, of which `first..reserved_end` only by [`Self::claim`].
    pub fn with_reserved(first: u32, reserved_end: u32, limit: u32) -> Self {
        let fifo_first = reserved_end.clamp(first, limit.max(first));
        SlotAllocator {
            first,
            fifo_first,
            next_fresh: fifo_first,
            limit,
            free: VecDeque::new(),
            // Virtual until used: growing it would copy it on the attach path.
            gens: Vec::with_capacity(limit as usize),
            claimed: Default::default(),
            used: 0,
        }
    }

    /// Is `slot` in the reserved range (taken only by [`Self::claim`])?
    pub fn reserved(&self, slot: u32) -> bool {
        slot >= self.first && slot < self.fifo_first
    }

    /// One past the highest slot this allocator can hand out.
    pub fn limit(&self) -> u32 {
        self.limit
    }

    /// Allocate a slot; returns (slot, generation).
    pub fn alloc(&mut self) -> Option<(u32, u32)> {
        loop {
            let slot = if let Some(s) = self.free.pop_front() {
                s
            } else if self.next_fresh < self.limit {
                let s = self.next_fresh;
                self.next_fresh += 1;
                s
            } else {
                return None;
            };
            // Empty in the common case: one length check.
            if !self.claimed.is_empty() && self.claimed.remove(&slot) {
                continue;
            }
            self.used += 1;
            return Some((slot, self.generation(slot)));
        }
    }

    /// Take the specific free slot `slot` with generation `gen` (a restored UE keeps
    /// the identifiers built on it). The caller knows the slot is free (it owns the
    /// table of slots in use); slots never handed out yet are checked here. Cost: a
    /// hash-set insert, and one skipped entry when `alloc` later reaches the slot.
    pub fn claim(&mut self, slot: u32, gen: u32) -> bool {
        if slot < self.first || slot >= self.limit || self.claimed.contains(&slot) {
            return false;
        }
        if slot >= self.fifo_first {
            self.claimed.insert(slot);
        }
        self.set_generation(slot, gen);
        self.used += 1;
        true
    }

    fn set_generation(&mut self, slot: u32, gen: u32) {
        let i = slot as usize;
        if self.gens.len() <= i {
            self.gens.resize(i + 1, 0);
        }
        self.gens[i] = (gen & GEN_MASK) as u8;
    }

    /// Release a slot: its generation advances so identifiers built on the old one go stale.
    pub fn free(&mut self, slot: u32) {
        let gen = self.generation(slot) + 1;
        self.set_generation(slot, gen);
        self.used = self.used.saturating_sub(1);
        // A claimed slot's token (queue entry or fresh place) is still there: it
        // stands for this release. A reserved slot has none and gets none.
        if slot < self.fifo_first {
            return;
        }
        if self.claimed.is_empty() || !self.claimed.remove(&slot) {
            self.free.push_back(slot);
        }
    }

    pub fn generation(&self, slot: u32) -> u32 {
        self.gens.get(slot as usize).copied().unwrap_or(0) as u32
    }

    pub fn in_use(&self) -> usize {
        self.used
    }
}

/// The stateless-IoT pools: TEIDs and UE addresses are pre-assigned ranges, so the data
/// path infers the device class (and its policy) from the identifier alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IotPool {
    /// First TEID of the pool (must have [`POOL_BIT`] set).
    pub teid_base: u32,
    /// First address of the device prefix.
    pub ip_base: Ipv4Addr,
    /// Devices in the pool: TEID `teid_base + i` and address `ip_base + i`.
    pub size: u32,
}

impl IotPool {
    pub fn new(teid_base: u32, ip_base: Ipv4Addr, size: u32) -> Result<Self, LayoutError> {
        if teid_base & POOL_BIT == 0 {
            return Err(LayoutError::IotTeidBase(teid_base));
        }
        if teid_base.checked_add(size).is_none() || u32::from(ip_base).checked_add(size).is_none() {
            return Err(LayoutError::IotOverflow);
        }
        Ok(IotPool {
            teid_base,
            ip_base,
            size,
        })
    }

    /// Device index for an uplink TEID in the pool.
    #[inline]
    pub fn index_of_teid(&self, teid: u32) -> Option<u32> {
        let i = teid.wrapping_sub(self.teid_base);
        (i < self.size).then_some(i)
    }

    /// Device index for a downlink destination address in the pool.
    #[inline]
    pub fn index_of_ip(&self, ip: u32) -> Option<u32> {
        let i = ip.wrapping_sub(u32::from(self.ip_base));
        (i < self.size).then_some(i)
    }

    pub fn teid(&self, i: u32) -> u32 {
        self.teid_base + i
    }

    pub fn ip(&self, i: u32) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.ip_base) + i)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn signaling_ids_carry_the_slice_in_their_top_bits() {
        let one = SignalingIds::new(1);
        assert_eq!(one.slice_bits, 0);
        assert_eq!(one.compose(0, u32::MAX), u32::MAX);
        assert_eq!(one.slice_of(u32::MAX), 0);
        for slices in [2usize, 3, 4, 5, 16, 64] {
            let l = SignalingIds::new(slices);
            assert_eq!(
                l.slice_bits,
                IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 8)
                    .unwrap()
                    .slice_bits
            );
            for s in 0..slices {
                for local in [0u32, 1, 0x1234_5678, u32::MAX] {
                    let id = l.compose(s, local);
                    assert_eq!(l.slice_of(id), s);
                    assert_eq!(id & l.local_mask(), local & l.local_mask());
                }
            }
        }
    }
    use super::*;

    #[test]
    fn teid_round_trips_for_every_slice_count() {
        for slices in [1usize, 2, 3, 4, 16, 64] {
            let l = IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
            let max_slot = (l.max_bearer_slots() - 1) as u32;
            for s in 0..slices as u32 {
                for slot in [0, 1, 12345 % max_slot, max_slot] {
                    for gen in [0, 1, 63] {
                        let t = l.teid(s, slot, gen);
                        assert_eq!(t & POOL_BIT, 0);
                        assert_eq!(l.split_teid(t), Some((s, slot, gen)));
                    }
                }
            }
        }
        let l = IdLayout::new(1, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        assert_eq!(l.max_bearer_slots(), 1 << 25);
        assert_eq!(l.split_teid(0x8000_0001), None);
    }

    #[test]
    fn the_slice_fields_name_the_slice_of_every_teid_and_address() {
        for slices in [1usize, 2, 3, 4, 16, 64] {
            let l = IdLayout::new(slices, Ipv4Addr::new(10, 0, 0, 0), 10).unwrap();
            let ((ts, tm), (is, im)) = (l.teid_slice_field(), l.ip_slice_field());
            for s in 0..slices as u32 {
                let slot = (l.max_bearer_slots() - 1) as u32;
                assert_eq!((l.teid(s, slot, 63) >> ts) & tm, s);
                for pdn in 0..l.pdn_count {
                    let ip = l.pdn_ip(pdn, s, (l.max_ue_slots() - 1) as u32).unwrap();
                    assert_eq!((u32::from(ip) >> is) & im, s);
                }
            }
        }
    }

    #[test]
    fn ue_ip_round_trips_and_rejects_outside_pool() {
        let l = IdLayout::new(4, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        assert_eq!(l.max_ue_slots(), 1 << 22);
        let ip = l.ue_ip(3, 77);
        assert_eq!(l.split_ue_ip(u32::from(ip)), Some((3, 77)));
        assert_eq!(l.split_ue_ip(u32::from(Ipv4Addr::new(9, 0, 0, 1))), None);
        // 11/8..13/8 are the default extra PDN pools; 14/8 is outside.
        assert_eq!(l.split_ue_ip(u32::from(Ipv4Addr::new(14, 0, 0, 1))), None);
        assert!(IdLayout::new(1, Ipv4Addr::new(10, 0, 0, 1), 8).is_err());
        assert!(IdLayout::new(0, Ipv4Addr::new(10, 0, 0, 0), 8).is_err());
    }

    #[test]
    fn pdn_pools_follow_the_ue_pool_and_split_back() {
        let l = IdLayout::new(4, Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        assert_eq!(l.pdn_count as usize, MAX_PDNS);
        assert_eq!(l.pdn_pools[1], Ipv4Addr::new(11, 0, 0, 0));
        assert_eq!(l.pdn_ip(0, 3, 77), Some(l.ue_ip(3, 77)));
        let ip = l.pdn_ip(2, 3, 77).unwrap();
        assert_eq!(ip, Ipv4Addr::new(12, 0xc0, 0, 77));
        assert_eq!(l.split_pdn_ip(u32::from(ip)), Some((2, 3, 77)));
        // The node's demux routes every PDN's addresses to the right slice.
        assert_eq!(l.split_ue_ip(u32::from(ip)), Some((3, 77)));
        assert_eq!(l.pdn_ip(4, 0, 1), None);
        // Pools that would wrap past 255.255.255.255 are left out.
        let top = IdLayout::new(1, Ipv4Addr::new(254, 0, 0, 0), 8).unwrap();
        assert_eq!(top.pdn_count, 2);
        assert_eq!(
            top.split_ue_ip(u32::from(Ipv4Addr::new(255, 0, 0, 9))),
            Some((0, 9))
        );
        // Explicit pools.
        let e = l.with_pdn_pools(&[Ipv4Addr::new(172, 0, 0, 0)]).unwrap();
        assert_eq!(e.pdn_count, 2);
        assert_eq!(
            e.split_pdn_ip(u32::from(Ipv4Addr::new(172, 0, 0, 5))),
            Some((1, 0, 5))
        );
        assert_eq!(e.split_pdn_ip(u32::from(Ipv4Addr::new(11, 0, 0, 5))), None);
        assert!(l.with_pdn_pools(&[Ipv4Addr::new(172, 0, 0, 1)]).is_err());
        assert!(l.with_pdn_pools(&[Ipv4Addr::new(10, 0, 0, 0)]).is_err());
        let four = [Ipv4Addr::new(20, 0, 0, 0); 4];
        assert!(l.with_pdn_pools(&four).is_err());
    }

    #[test]
    fn allocator_reuses_fifo_with_new_generation() {
        let mut a = SlotAllocator::new(1, 4);
        let (s1, g1) = a.alloc().unwrap();
        let (s2, _) = a.alloc().unwrap();
        let (s3, _) = a.alloc().unwrap();
        assert_eq!((s1, s2, s3, g1), (1, 2, 3, 0));
        assert!(a.alloc().is_none());
        a.free(s2);
        a.free(s1);
        // FIFO: s2 first, with its generation advanced.
        assert_eq!(a.alloc(), Some((2, 1)));
        assert_eq!(a.alloc(), Some((1, 1)));
        assert_eq!(a.in_use(), 3);
    }

    #[test]
    fn claimed_slots_are_skipped_until_freed() {
        let mut a = SlotAllocator::new(1, 8);
        // Ahead of the fresh range, and one already released.
        assert!(a.claim(3, 5));
        assert!(!a.claim(3, 5), "claimed twice");
        assert!(!a.claim(0, 0) && !a.claim(8, 0), "outside the range");
        assert_eq!(a.alloc(), Some((1, 0)));
        assert_eq!(a.alloc(), Some((2, 0)));
        assert_eq!(a.alloc(), Some((4, 0)), "3 is skipped");
        a.free(1);
        assert!(a.claim(1, 9));
        assert_eq!(a.in_use(), 4);
        assert_eq!(a.alloc(), Some((5, 0)), "1's queue entry is skipped");
        assert_eq!(a.generation(3), 5);
        // Releasing a claimed slot makes it available once, with the next generation.
        a.free(3);
        assert_eq!(a.alloc(), Some((3, 6)));
        a.free(1);
        assert_eq!(a.alloc(), Some((1, 10)));
        assert_eq!(a.alloc(), Some((6, 0)));
        assert_eq!(a.alloc(), Some((7, 0)));
        assert_eq!(a.alloc(), None);
        assert_eq!(a.in_use(), 7);
    }

    #[test]
    fn reserved_slots_go_only_to_claims_and_never_to_the_fifo() {
        let mut a = SlotAllocator::with_reserved(1, 4, 6);
        assert_eq!(
            a.alloc(),
            Some((4, 0)),
            "the FIFO starts above the reserved range"
        );
        assert!(a.claim(2, a.generation(2)));
        a.free(2);
        assert_eq!(
            a.generation(2),
            1,
            "a released reserved slot's identifiers go stale"
        );
        assert_eq!(a.alloc(), Some((5, 0)));
        assert_eq!(a.alloc(), None, "2 went back to no queue");
        assert!(!a.claim(0, 0), "below the range");
        assert_eq!(a.in_use(), 2);
        // A range larger than the allocator's leaves no FIFO, never a panic.
        let mut b = SlotAllocator::with_reserved(1, 10, 4);
        assert_eq!(b.alloc(), None);
        assert!(b.claim(3, 0) && !b.claim(4, 0));
    }

    #[test]
    fn iot_pool_indexes() {
        let p = IotPool::new(0xC000_0000, Ipv4Addr::new(100, 64, 0, 0), 1000).unwrap();
        assert_eq!(p.index_of_teid(0xC000_0005), Some(5));
        assert_eq!(p.index_of_teid(0xC000_0000 + 1000), None);
        assert_eq!(
            p.index_of_ip(u32::from(Ipv4Addr::new(100, 64, 0, 9))),
            Some(9)
        );
        assert!(IotPool::new(5, Ipv4Addr::new(100, 64, 0, 0), 1).is_err());
    }
}
