//! The control thread's reads of the data thread's counters, as inputs of the MME.
//!
//! A bearer's usage (in usage records, PCRF reports and UE snapshots) is the one thing
//! the MME reads that the data thread writes, so it is not a function of the MME's
//! inputs. Recording an MME (`[debug] record`) keeps every such read in the order it
//! was made; a replay gives the same values back in the same order, so the outputs that
//! carry them come out byte-identical.

use super::*;
use std::cell::RefCell;
use std::collections::VecDeque;

/// Where counter reads come from: the data thread's counters, the same while each
/// value read is kept, or values given back from a recording.
#[derive(Debug, Default)]
pub(crate) enum CounterTap {
    #[default]
    Live,
    Record(Vec<u64>),
    Replay {
        words: VecDeque<u64>,
        /// Reads that found no recorded value left (read as 0).
        short: u64,
    },
}

impl CounterTap {
    /// `live` read through the tap: kept when recording, replaced when replaying.
    fn words<const N: usize>(&mut self, live: impl FnOnce() -> [u64; N]) -> [u64; N] {
        match self {
            CounterTap::Live => live(),
            CounterTap::Record(v) => {
                let w = live();
                v.extend_from_slice(&w);
                w
            }
            CounterTap::Replay { words, short } => std::array::from_fn(|_| {
                words.pop_front().unwrap_or_else(|| {
                    *short += 1;
                    0
                })
            }),
        }
    }
}

pub(crate) type Tap = RefCell<CounterTap>;

impl<S> ControlPlane<S> {
    /// Keep every counter value the control thread reads from now on, for
    /// [`Self::take_counter_reads`].
    pub fn record_counter_reads(&mut self) {
        *self.tap.get_mut() = CounterTap::Record(Vec::new());
    }

    /// Counter reads come from the data thread again, nothing kept (a recording
    /// stopped).
    pub fn live_counter_reads(&mut self) {
        *self.tap.get_mut() = CounterTap::Live;
    }

    /// The counter values read since the last call (recording), in order.
    pub fn take_counter_reads(&mut self) -> Vec<u64> {
        match self.tap.get_mut() {
            CounterTap::Record(v) => std::mem::take(v),
            _ => Vec::new(),
        }
    }

    /// Counter reads return `words` from now on, in order, instead of the data thread's
    /// counters (a replay of a recording).
    pub fn replay_counter_reads(&mut self, words: &[u64]) {
        match self.tap.get_mut() {
            CounterTap::Replay { words: w, .. } => w.extend(words.iter().copied()),
            t => {
                *t = CounterTap::Replay {
                    words: words.iter().copied().collect(),
                    short: 0,
                }
            }
        }
    }

    /// Replaying: recorded values not read yet, and reads that found none left.
    pub fn replay_counter_balance(&self) -> (usize, u64) {
        match &*self.tap.borrow() {
            CounterTap::Replay { words, short } => (words.len(), *short),
            _ => (0, 0),
        }
    }

    /// A bearer's usage as the data thread counts it, through the tap.
    pub(crate) fn bearer_usage(&self, bearer_slot: u32) -> Usage {
        let w = self.tap.borrow_mut().words(|| {
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

    /// A (UL, DL) byte pair of a rule counter, through the tap.
    pub(crate) fn tapped_pair(&self, live: impl FnOnce() -> (u64, u64)) -> (u64, u64) {
        let [a, b] = self.tap.borrow_mut().words(|| {
            let (a, b) = live();
            [a, b]
        });
        (a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_kept_given_back_and_counted_when_short() {
        let mut t = CounterTap::Record(Vec::new());
        assert_eq!(t.words(|| [1, 2]), [1, 2]);
        assert_eq!(t.words(|| [3]), [3]);
        let CounterTap::Record(kept) = &t else {
            panic!("recording")
        };
        assert_eq!(kept, &[1, 2, 3]);
        // Replayed: the recorded values, whatever the data thread says now.
        let mut t = CounterTap::Replay {
            words: [1, 2, 3].into(),
            short: 0,
        };
        assert_eq!(t.words(|| [9, 9]), [1, 2]);
        assert_eq!(t.words(|| [9, 9]), [3, 0]);
        assert!(matches!(t, CounterTap::Replay { short: 1, .. }));
        // Live: nothing kept.
        let mut t = CounterTap::Live;
        assert_eq!(t.words(|| [7]), [7]);
        assert!(matches!(t, CounterTap::Live));
    }
}
