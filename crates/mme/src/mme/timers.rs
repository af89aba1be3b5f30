//! The MME's UE timers. A UE holds at most one deadline of each [`TimerKind`] (its
//! own fields, `Ue::timer`); the table orders every arming by deadline. An entry is
//! live while the UE's deadline of its kind is still the entry's time: stopping or
//! re-arming a timer leaves a stale entry, dropped when met (no search on re-arm).
//! Ties go by MME UE S1AP ID and kind, never by anything hashed, so expiries come
//! out in the same order on a replay.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

/// A UE's timers, one deadline of each kind at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum TimerKind {
    /// The NAS procedure's retransmission timer (T3450, T3460, T3470, T3422).
    Nas,
    /// T3413, the paging retransmission timer.
    Paging,
    /// The mobile reachable timer (implicit detach when it expires).
    Reachable,
    /// The release guard, or the lifetime of a context without security.
    Guard,
}

impl TimerKind {
    pub(crate) const ALL: [TimerKind; 4] = [
        TimerKind::Nas,
        TimerKind::Paging,
        TimerKind::Reachable,
        TimerKind::Guard,
    ];
}

/// One arming: (deadline, MME UE S1AP ID, kind).
pub(crate) type Arming = (Instant, u32, TimerKind);

#[derive(Default)]
pub(crate) struct TimerTable {
    heap: BinaryHeap<Reverse<Arming>>,
}

impl TimerTable {
    pub(crate) fn push(&mut self, at: Instant, id: u32, kind: TimerKind) {
        self.heap.push(Reverse((at, id, kind)));
    }

    /// The earliest arming, live or stale.
    pub(crate) fn peek(&self) -> Option<Arming> {
        self.heap.peek().map(|r| r.0)
    }

    pub(crate) fn pop(&mut self) {
        self.heap.pop();
    }

    /// After a storm: drop stale entries once they outnumber the live contexts, and
    /// give back capacity once mostly empty. `live` says whether an arming is live.
    pub(crate) fn compact(&mut self, contexts: usize, live: impl Fn(Arming) -> bool) {
        if self.heap.len() > 4 * contexts + 1024 {
            self.heap.retain(|r| live(r.0));
            self.heap.shrink_to_fit();
        } else if self.heap.capacity() > 4096 && self.heap.len() * 8 < self.heap.capacity() {
            self.heap.shrink_to_fit();
        }
    }
}
