//! Promotion buffering: packets of a UE whose state is not in the primary table yet
//! (evicted, or idle and being paged) wait here, bounded per UE and in all, until the
//! control thread promotes the UE, refuses it, or the wait times out.

use super::*;

impl DataPlane {
    /// Keep a packet for a UE being promoted (swapping buffers: no copy), and ask the
    /// control thread once per UE.
    pub(super) fn buffer(
        &mut self,
        buf: &mut PacketBuf,
        ue_slot: u32,
        uplink: bool,
        req: DpRequest,
        now: u64,
    ) {
        // Uplink misses on an evicted bearer don't know the UE slot yet: key by the
        // request's bearer slot with the high bit set until the UE is installed.
        let key = match (ue_slot, req) {
            (NO_SLOT, DpRequest::PromoteBearer { slot, .. }) => slot | 0x8000_0000,
            _ => ue_slot,
        };
        let idx = match self.pending.iter().position(|p| p.ue_slot == key) {
            Some(i) => i,
            None if self.pending.len() < PENDING_UES => {
                self.pending.push(PendingUe {
                    ue_slot: key,
                    since_ns: now,
                    requested: false,
                    count: 0,
                    bufs: [(0, false); PENDING_PER_UE],
                });
                self.pending.len() - 1
            }
            None => return self.drop(buf, DropReason::BufferFull),
        };
        if self.pending[idx].count == PENDING_PER_UE {
            return self.drop(buf, DropReason::BufferFull);
        }
        let Some(free) = self.pool_free.pop() else {
            return self.drop(buf, DropReason::BufferFull);
        };
        std::mem::swap(buf, &mut self.pool[free as usize]);
        buf.reset();
        buf.meta.verdict = Verdict::Consumed;
        let p = &mut self.pending[idx];
        p.bufs[p.count] = (free, uplink);
        p.count += 1;
        bump(&self.counters.buffered, 1);
        if !p.requested {
            p.requested = true;
            self.request(req);
        }
    }

    /// A UE (or its bearer) was installed: its buffered packets become ready to re-run.
    pub(super) fn release_pending(&mut self, ue_slot: u32) {
        let mut i = 0;
        while i < self.pending.len() {
            let key = self.pending[i].ue_slot;
            let hit = key == ue_slot
                || (key & 0x8000_0000 != 0
                    && self.dl_line(ue_slot).is_some_and(|l| {
                        l.flags() & HOT_VALID != 0
                            && self.ue_cold[ue_slot as usize]
                                .bearers
                                .contains(&(key & 0x7fff_ffff))
                    }));
            if hit {
                let p = self.pending.swap_remove(i);
                self.ready.extend_from_slice(&p.bufs[..p.count]);
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn refuse_pending(&mut self, ue_slot: u32) {
        if let Some(i) = self.pending.iter().position(|p| p.ue_slot == ue_slot) {
            let p = self.pending.swap_remove(i);
            for &(b, _) in &p.bufs[..p.count] {
                self.pool_free.push(b);
            }
            bump(
                &self.counters.drops[DropReason::PromotionFailed as usize],
                p.count as u64,
            );
        }
    }

    pub(super) fn expire_pending(&mut self, now: u64) {
        let mut i = 0;
        while i < self.pending.len() {
            if now.saturating_sub(self.pending[i].since_ns) > PENDING_TIMEOUT_NS {
                let key = self.pending[i].ue_slot;
                self.refuse_pending(key);
            } else {
                i += 1;
            }
        }
    }

    /// How many buffered packets are ready to re-run.
    pub fn ready_len(&self) -> usize {
        self.ready.len()
    }

    /// Move ready buffered packets of one direction into `batch` (swapping buffers) so
    /// the driver runs them through the pipeline again; returns how many.
    pub fn take_ready(&mut self, batch: &mut Batch, uplink: bool) -> usize {
        batch.len = 0;
        let mut i = 0;
        while i < self.ready.len() && batch.len < batch.capacity() {
            let (idx, ul) = self.ready[i];
            if ul != uplink {
                i += 1;
                continue;
            }
            self.ready.swap_remove(i);
            std::mem::swap(&mut batch.bufs[batch.len], &mut self.pool[idx as usize]);
            self.pool[idx as usize].reset();
            self.pool_free.push(idx);
            batch.len += 1;
        }
        bump(&self.counters.drained, batch.len as u64);
        batch.len
    }

    /// Buffered packets currently held (for tests and stats).
    pub fn buffered_now(&self) -> usize {
        self.pool.len() - self.pool_free.len()
    }
}

pub(super) struct PendingUe {
    ue_slot: u32,
    since_ns: u64,
    requested: bool,
    count: usize,
    bufs: [(u16, bool); PENDING_PER_UE], // (pool index, uplink?)
}
