//! The control thread's reads of what its inputs do not determine, as inputs of the MME.
//!
//! A bearer's usage (in usage records, PCRF reports and UE snapshots) is the one thing
//! the MME reads that the data thread writes, so it is not a function of the MME's
//! inputs. Recording an MME (`[debug] record`) keeps every such read in the order it
//! was made; a replay gives the same values back in the same order, so the outputs that
//! carry them come out byte-identical.
//!
//! The identifiers a call draws from the slice's allocators (UE entries, bearer slots
//! with their generation, IoT pool indexes) go into the same stream. A replay of the
//! whole slice draws them again and checks each against the recorded one; a replay of
//! one UE from its snapshot, on a slice that holds that UE alone, takes the recorded
//! ones instead ([`ControlPlane::direct_counter_reads`]), since the other UEs' draws
//! that moved the allocators in between are not replayed.

use super::*;
use std::cell::RefCell;
use std::collections::VecDeque;

/// A draw that found the allocator exhausted, as recorded.
const EXHAUSTED: u64 = u64::MAX;

/// What a value read or drawn through a tap is, with the key that names it: a
/// replay of one UE finds its own values by it among those of the call, which may
/// hold other UEs' (the slice's calls serve several UEs at once now and then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TapKey {
    /// A bearer's usage (its bearer slot).
    BearerUsage(u32),
    /// One rule counter pair of a bearer (bearer slot, pair).
    RulePair(u32, u8),
    UeSlot,
    BearerSlot,
    IotIndex,
    MmeUeId,
    MTmsi,
    RequestNumber,
}

impl TapKey {
    /// The entry's header word: kind, payload length and key.
    fn header(self, len: usize) -> u64 {
        let (kind, key): (u64, u64) = match self {
            TapKey::BearerUsage(s) => (1, u64::from(s)),
            TapKey::RulePair(s, k) => (2, (u64::from(s) << 8) | u64::from(k)),
            TapKey::UeSlot => (3, 0),
            TapKey::BearerSlot => (4, 0),
            TapKey::IotIndex => (5, 0),
            TapKey::MmeUeId => (6, 0),
            TapKey::MTmsi => (7, 0),
            TapKey::RequestNumber => (8, 0),
        };
        (kind << 56) | ((len as u64 & 0xff) << 48) | (key & ((1 << 48) - 1))
    }
}

fn entry_len(header: u64) -> usize {
    ((header >> 48) & 0xff) as usize
}

/// Where counter reads and drawn identifiers come from: the data thread's counters and
/// the allocators, the same while each value is kept, or values given back from a
/// recording. (The MME draws its own identifiers through one too.)
///
/// Kept as entries `[header][value...]` ([`TapKey`]). A replay of the whole slice
/// takes them in order; a directed one (one UE on a slice that holds it alone) takes
/// the first entry of the key asked for, wherever it is among the call's.
#[derive(Debug, Default)]
pub enum CounterTap {
    #[default]
    Live,
    Record(Vec<u64>),
    Replay {
        words: VecDeque<u64>,
        /// Reads that found no recorded value left (read as 0).
        short: u64,
        /// Values are found by their key, and draws take the recorded identifier
        /// (claimed) instead of the allocator's.
        directed: bool,
        /// Values recorded under another key than the one asked for, and draws whose
        /// identifier differed from the recorded one (or, directed, whose recorded
        /// identifier could not be claimed).
        diverged: u64,
    },
}

/// What a replay left over: recorded values not read, reads past them, draws that
/// came out different.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayBalance {
    pub left: usize,
    pub short: u64,
    pub diverged: u64,
}

impl CounterTap {
    /// The recorded entry of `key` with `N` values: the next one, or (directed) the
    /// first of that key. `None` (counted as short) if there is none.
    fn take_entry<const N: usize>(&mut self, key: TapKey) -> Option<[u64; N]> {
        let CounterTap::Replay {
            words,
            short,
            directed,
            diverged,
        } = self
        else {
            return None;
        };
        let want = key.header(N);
        let at = if *directed {
            let mut at = 0;
            loop {
                match words.get(at) {
                    None => {
                        *short += 1;
                        return None;
                    }
                    Some(&h) if h == want => break at,
                    Some(&h) => at += 1 + entry_len(h),
                }
            }
        } else {
            match words.front() {
                None => {
                    *short += 1;
                    return None;
                }
                Some(&h) => {
                    *diverged += u64::from(h != want);
                    0
                }
            }
        };
        let mut got = words.drain(at..(at + 1 + N).min(words.len())).skip(1);
        let v = std::array::from_fn(|_| got.next().unwrap_or(0));
        Some(v)
    }

    /// `live` read through the tap under `key`: kept when recording, replaced when
    /// replaying.
    fn words<const N: usize>(&mut self, key: TapKey, live: impl FnOnce() -> [u64; N]) -> [u64; N] {
        match self {
            CounterTap::Live => live(),
            CounterTap::Record(v) => {
                let w = live();
                v.push(key.header(N));
                v.extend_from_slice(&w);
                w
            }
            CounterTap::Replay { .. } => self.take_entry(key).unwrap_or([0; N]),
        }
    }

    /// An identifier drawn through the tap under `key`. `alloc(None)` draws from the
    /// allocator; `alloc(Some(w))` claims `w` if it is free (`Some(w)`), else gives
    /// `None`.
    pub fn draw(
        &mut self,
        key: TapKey,
        mut alloc: impl FnMut(Option<u64>) -> Option<u64>,
    ) -> Option<u64> {
        let directed = match self {
            CounterTap::Live => return alloc(None),
            CounterTap::Record(v) => {
                let w = alloc(None);
                v.push(key.header(1));
                v.push(w.unwrap_or(EXHAUSTED));
                return w;
            }
            CounterTap::Replay { directed, .. } => *directed,
        };
        let Some([recorded]) = self.take_entry::<1>(key) else {
            return alloc(None);
        };
        let CounterTap::Replay { diverged, .. } = self else {
            return alloc(None);
        };
        if !directed {
            let w = alloc(None);
            *diverged += u64::from(w.unwrap_or(EXHAUSTED) != recorded);
            return w;
        }
        if recorded == EXHAUSTED {
            return None;
        }
        alloc(Some(recorded)).or_else(|| {
            *diverged += 1;
            alloc(None)
        })
    }
}

pub(crate) type Tap = RefCell<CounterTap>;

fn pack((slot, gen): (u32, u32)) -> u64 {
    (u64::from(slot) << 32) | u64::from(gen)
}

fn unpack(w: u64) -> (u32, u32) {
    ((w >> 32) as u32, w as u32)
}

impl CounterTap {
    /// Keep every value from now on, for [`Self::drain_kept`].
    pub fn record(&mut self) {
        *self = CounterTap::Record(Vec::new());
    }

    /// The values kept since the last take (recording), in order.
    #[cfg(test)]
    fn take(&mut self) -> Vec<u64> {
        match self {
            CounterTap::Record(v) => std::mem::take(v),
            _ => Vec::new(),
        }
    }

    /// The values kept since the last call, given to `f`, then dropped (their buffer
    /// kept: no allocation per call while recording).
    pub fn drain_kept(&mut self, f: impl FnOnce(&[u64])) {
        match self {
            CounterTap::Record(v) => {
                f(v);
                v.clear();
            }
            _ => f(&[]),
        }
    }

    /// Give `words` back from now on, in order; draws are checked against them, or
    /// (`directed`) take them.
    pub fn replay(&mut self, words: &[u64], directed: bool) {
        match self {
            CounterTap::Replay {
                words: w,
                directed: d,
                ..
            } => {
                w.extend(words.iter().copied());
                *d = directed;
            }
            t => {
                *t = CounterTap::Replay {
                    words: words.iter().copied().collect(),
                    short: 0,
                    directed,
                    diverged: 0,
                }
            }
        }
    }

    /// Replaying: what is left over; resets it (recorded values dropped, counts
    /// zeroed) for the next call.
    pub fn balance(&mut self) -> ReplayBalance {
        match self {
            CounterTap::Replay {
                words,
                short,
                diverged,
                ..
            } => {
                let b = ReplayBalance {
                    left: words.len(),
                    short: *short,
                    diverged: *diverged,
                };
                words.clear();
                *short = 0;
                *diverged = 0;
                b
            }
            _ => ReplayBalance::default(),
        }
    }
}

impl<S> ControlPlane<S> {
    /// Keep every counter value the control thread reads and every identifier it draws
    /// from now on, for [`Self::drain_counter_reads`].
    pub fn record_counter_reads(&mut self) {
        self.tap.get_mut().record();
    }

    /// Counter reads come from the data thread again, nothing kept (a recording
    /// stopped).
    pub fn live_counter_reads(&mut self) {
        *self.tap.get_mut() = CounterTap::Live;
    }

    /// [`CounterTap::drain_kept`] of the counter reads and slice draws (recording).
    pub fn drain_counter_reads(&mut self, f: impl FnOnce(&[u64])) {
        self.tap.get_mut().drain_kept(f);
    }

    /// Counter reads return `words` from now on, in order, instead of the data thread's
    /// counters, and draws are checked against them (a replay of a recording).
    pub fn replay_counter_reads(&mut self, words: &[u64]) {
        self.tap.get_mut().replay(words, false);
    }

    /// As [`Self::replay_counter_reads`], but draws take the recorded identifiers (a
    /// replay of one UE on a slice that holds it alone).
    pub fn direct_counter_reads(&mut self, words: &[u64]) {
        self.tap.get_mut().replay(words, true);
    }

    /// Replaying: what is left over, reset for the next call.
    pub fn replay_counter_balance(&mut self) -> ReplayBalance {
        self.tap.get_mut().balance()
    }

    /// A UE entry drawn through the tap.
    pub(crate) fn draw_ue_slot(&mut self) -> Option<(u32, u32)> {
        let (tap, alloc, ues) = (self.tap.get_mut(), &mut self.ue_alloc, &self.ues);
        tap.draw(TapKey::UeSlot, |claim| match claim {
            None => alloc.alloc().map(pack),
            Some(w) => {
                let (slot, gen) = unpack(w);
                (ues.get(slot as usize).is_none_or(UeEntry::is_free) && alloc.claim(slot, gen))
                    .then_some(w)
            }
        })
        .map(unpack)
    }

    /// A bearer slot drawn through the tap: `default_of` names the UE entry of a new
    /// default bearer (see [`Self::alloc_default_bearer`]), `pending` the bearers of
    /// a restore in progress.
    pub(crate) fn draw_bearer_slot(
        &mut self,
        default_of: Option<u32>,
        pending: &[BearerContext],
    ) -> Option<(u32, u32)> {
        let mut tap = std::mem::take(self.tap.get_mut());
        let w = tap.draw(TapKey::BearerSlot, |claim| match claim {
            None => match default_of {
                Some(ue_slot) => self.alloc_default_bearer(ue_slot, pending),
                None => self.bearer_alloc.alloc(),
            }
            .map(pack),
            Some(w) => {
                let (slot, gen) = unpack(w);
                (self.bearer_owner(slot).is_none()
                    && !pending.iter().any(|b| b.slot == slot)
                    && self.bearer_alloc.claim(slot, gen))
                .then_some(w)
            }
        });
        *self.tap.get_mut() = tap;
        w.map(unpack)
    }

    /// An index of the IoT pool drawn through the tap.
    pub(crate) fn draw_iot_index(&mut self, pool: IotPool) -> Result<u32, CtrlError> {
        let mut tap = std::mem::take(self.tap.get_mut());
        let w = tap.draw(TapKey::IotIndex, |claim| match claim {
            None => self.alloc_iot_index(pool).ok().map(u64::from),
            Some(w) => {
                let idx = u32::try_from(w).ok()?;
                self.take_iot_index(pool, idx).then_some(w)
            }
        });
        *self.tap.get_mut() = tap;
        w.map(|w| w as u32).ok_or(CtrlError::Exhausted("IoT pool"))
    }

    /// A bearer's usage as the data thread counts it, through the tap.
    pub(crate) fn bearer_usage(&self, bearer_slot: u32) -> Usage {
        let w = self
            .tap
            .borrow_mut()
            .words(TapKey::BearerUsage(bearer_slot), || {
                let u = self.counters.bearer_usage(bearer_slot);
                [
                    u.ul_packets,
                    u.ul_bytes,
                    u.dl_packets,
                    u.dl_bytes,
                    u.ul_dropped,
                    u.dl_dropped,
                ]
            });
        Usage {
            ul_packets: w[0],
            ul_bytes: w[1],
            dl_packets: w[2],
            dl_bytes: w[3],
            ul_dropped: w[4],
            dl_dropped: w[5],
        }
    }

    /// A (UL, DL) byte pair of rule counter `pair` of bearer `bearer_slot`, through the
    /// tap.
    pub(crate) fn tapped_pair(
        &self,
        bearer_slot: u32,
        pair: u8,
        live: impl FnOnce() -> (u64, u64),
    ) -> (u64, u64) {
        let [a, b] = self
            .tap
            .borrow_mut()
            .words(TapKey::RulePair(bearer_slot, pair), || {
                let (a, b) = live();
                [a, b]
            });
        (a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: TapKey = TapKey::BearerUsage(7);

    #[test]
    fn reads_are_kept_given_back_and_counted_when_short() {
        let mut t = CounterTap::Record(Vec::new());
        assert_eq!(t.words(K, || [1, 2]), [1, 2]);
        assert_eq!(t.words(TapKey::RulePair(7, 1), || [3]), [3]);
        let kept = t.take();
        assert_eq!(kept.len(), 5);
        // Replayed: the recorded values, whatever the data thread says now.
        let mut t = CounterTap::default();
        t.replay(&kept, false);
        assert_eq!(t.words(K, || [9, 9]), [1, 2]);
        assert_eq!(t.words(TapKey::RulePair(7, 1), || [9]), [3]);
        assert_eq!(t.words(K, || [9, 9]), [0, 0]);
        assert_eq!(
            t.balance(),
            ReplayBalance {
                left: 0,
                short: 1,
                diverged: 0
            }
        );
        // Live: nothing kept.
        let mut t = CounterTap::Live;
        assert_eq!(t.words(K, || [7]), [7]);
        assert!(matches!(t, CounterTap::Live));
    }

    #[test]
    fn a_directed_replay_finds_its_values_by_key() {
        let mut t = CounterTap::Record(Vec::new());
        t.words(TapKey::BearerUsage(1), || [10, 11]);
        t.draw(TapKey::UeSlot, |_| Some(5));
        t.words(TapKey::BearerUsage(2), || [20, 21]);
        t.draw(TapKey::BearerSlot, |_| Some(6));
        let kept = t.take();
        // Bearer 2's reads and the bearer draw, skipping bearer 1's and the UE draw.
        let mut t = CounterTap::default();
        t.replay(&kept, true);
        assert_eq!(t.words(TapKey::BearerUsage(2), || [0, 0]), [20, 21]);
        assert_eq!(t.draw(TapKey::BearerSlot, |c| c), Some(6));
        assert_eq!(
            t.balance(),
            ReplayBalance {
                left: 5,
                short: 0,
                diverged: 0
            }
        );
        // In order (whole replay), a read under another key is counted.
        let mut t = CounterTap::default();
        t.replay(&kept, false);
        assert_eq!(t.words(TapKey::BearerUsage(2), || [0, 0]), [10, 11]);
        assert_eq!(t.balance().diverged, 1);
    }

    #[test]
    fn draws_are_kept_checked_or_directed() {
        // An allocator of 10, 11, ... that claims any value not yet handed out.
        let mut next = 10u64;
        let mut taken = std::collections::BTreeSet::new();
        let mut alloc = |claim: Option<u64>| match claim {
            None => {
                next += 1;
                taken.insert(next - 1);
                Some(next - 1)
            }
            Some(w) => taken.insert(w).then_some(w),
        };
        let k = TapKey::UeSlot;
        let mut t = CounterTap::Record(Vec::new());
        assert_eq!(t.draw(k, &mut alloc), Some(10));
        assert_eq!(t.draw(k, |_| None), None);
        assert_eq!(t.take(), [k.header(1), 10, k.header(1), EXHAUSTED]);
        // Checked: the allocator's value, and a count when it is not the recorded one.
        let mut t = CounterTap::default();
        t.replay(&[k.header(1), 11, k.header(1), 99], false);
        assert_eq!(t.draw(k, &mut alloc), Some(11));
        assert_eq!(t.draw(k, &mut alloc), Some(12));
        assert_eq!(t.balance().diverged, 1);
        // Directed: the recorded value claimed; one that is taken is counted and drawn.
        let mut t = CounterTap::default();
        t.replay(
            &[k.header(1), 500, k.header(1), 11, k.header(1), EXHAUSTED],
            true,
        );
        assert_eq!(t.draw(k, &mut alloc), Some(500));
        assert_eq!(t.draw(k, &mut alloc), Some(13));
        assert_eq!(t.draw(k, &mut alloc), None);
        assert_eq!(t.balance().diverged, 1);
    }
}
