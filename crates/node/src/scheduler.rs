//! The node scheduler's decisions (PEPC §3.3): where a new user goes, which users
//! leave a slice that is drained, and how many users move to even out the slices'
//! loads. Pure functions over the slices' loads, like `pepc_mme::gate`: the driver
//! measures the loads, asks here, carries the moves out by live migration and logs
//! and counts every decision with the reason returned.
//!
//! A slice's *level* is the busiest of its three resources, each as a share of what
//! one slice is sized for ([`Capacity`]): UEs, packets/s, signaling events/s. A user
//! is assumed to bring its slice's average load per user, so moving `k` users from a
//! slice moves `k / ues` of its level.
//!
//! | Decision | Rule |
//! |---|---|
//! | new user | its home slice by the IMSI policy if that slice serves and is below capacity; else the serving slice of lowest level (lowest index on ties); none if no slice serves |
//! | drain `n` | every user of `n` leaves, filling the serving slices of lowest level first, none above the mean level after the move unless all are |
//! | rebalance | while the highest serving level exceeds the mean by more than the band, move users from the highest to the lowest until either reaches the mean; nothing when within the band |

use pepc_mme::SlicePolicy;

/// What one slice is sized for; a level of 1.0 is a full slice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    pub ues: u64,
    pub pps: f64,
    pub events_per_s: f64,
}

/// A slice's measured load.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SliceLoad {
    pub ues: u64,
    pub pps: f64,
    pub events_per_s: f64,
}

impl SliceLoad {
    /// The busiest resource's share of the capacity.
    pub fn level(&self, cap: &Capacity) -> f64 {
        let share = |x: f64, c: f64| if c > 0.0 { x / c } else { 0.0 };
        share(self.ues as f64, cap.ues as f64)
            .max(share(self.pps, cap.pps))
            .max(share(self.events_per_s, cap.events_per_s))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceState {
    /// Takes new users and users moved in.
    Serving,
    /// Being emptied before it goes: takes no one.
    Draining,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SliceView {
    pub slice: usize,
    pub state: SliceState,
    pub load: SliceLoad,
}

/// `ues` users to move from slice `from` to slice `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Move {
    pub from: usize,
    pub to: usize,
    pub ues: u64,
}

/// Where a new user went, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Its home slice by the IMSI policy.
    Home(usize),
    /// The least loaded serving slice: the home slice is draining, full or gone.
    Spilled { home: usize, to: usize },
    /// No slice serves.
    Refused,
}

/// Why a rebalance moved nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Balanced {
    /// Every serving slice is within the band of the mean level.
    WithinBand,
    /// Fewer than two slices serve.
    OneSlice,
    /// The most loaded slice has no users to give (its load is not per user).
    NothingToMove,
}

/// The slice for a new user `imsi` among `slices` (indexed by position: slice `i` is
/// `slices[i]`).
pub fn place(slices: &[SliceView], cap: &Capacity, policy: SlicePolicy, imsi: u64) -> Placement {
    if slices.is_empty() {
        return Placement::Refused;
    }
    let home = policy.slice_of(imsi, slices.len());
    let h = &slices[home];
    if h.state == SliceState::Serving && h.load.level(cap) < 1.0 {
        return Placement::Home(home);
    }
    match least_loaded(slices, cap, None) {
        Some(to) => Placement::Spilled { home, to },
        None => Placement::Refused,
    }
}

/// The moves that empty slice `n`. Empty if no other slice serves (the drain cannot
/// proceed) or `n` has no users.
pub fn drain(slices: &[SliceView], cap: &Capacity, n: usize) -> Vec<Move> {
    let Some(src) = slices.get(n) else {
        return Vec::new();
    };
    let mut left = src.load.ues;
    let per_ue = per_ue_load(&src.load);
    let mut loads: Vec<SliceLoad> = slices.iter().map(|s| s.load).collect();
    let mut moves: Vec<Move> = Vec::new();
    // One user at a time would be exact but slow for 10K users; in steps of a
    // sixteenth of what is left (at least one), each to the slice of lowest level.
    while left > 0 {
        let Some(to) = least_loaded_of(slices, &loads, cap, Some(n)) else {
            break;
        };
        let step = (left / 16).max(1);
        add(&mut loads[to], &per_ue, step as f64);
        left -= step;
        match moves.iter_mut().find(|m| m.to == to) {
            Some(m) => m.ues += step,
            None => moves.push(Move {
                from: n,
                to,
                ues: step,
            }),
        }
    }
    if left > 0 {
        return Vec::new();
    }
    moves.sort_by_key(|m| m.to);
    moves
}

/// The moves that bring every serving slice within `band` (a fraction, e.g. 0.1) of
/// the mean level, or why none are needed.
pub fn rebalance(slices: &[SliceView], cap: &Capacity, band: f64) -> Result<Vec<Move>, Balanced> {
    let serving: Vec<usize> = (0..slices.len())
        .filter(|&i| slices[i].state == SliceState::Serving)
        .collect();
    if serving.len() < 2 {
        return Err(Balanced::OneSlice);
    }
    let mut loads: Vec<SliceLoad> = slices.iter().map(|s| s.load).collect();
    let mean = serving.iter().map(|&i| loads[i].level(cap)).sum::<f64>() / serving.len() as f64;
    let mut moves: Vec<Move> = Vec::new();
    // Each round evens one pair out to the mean: at most one round per slice pair.
    for _ in 0..serving.len() * serving.len() {
        let level = |l: &[SliceLoad], i: usize| l[i].level(cap);
        let hi = *serving
            .iter()
            .max_by(|&&a, &&b| {
                level(&loads, a)
                    .total_cmp(&level(&loads, b))
                    .then(b.cmp(&a))
            })
            .expect("two slices");
        let lo = *serving
            .iter()
            .min_by(|&&a, &&b| {
                level(&loads, a)
                    .total_cmp(&level(&loads, b))
                    .then(a.cmp(&b))
            })
            .expect("two slices");
        let (l_hi, l_lo) = (level(&loads, hi), level(&loads, lo));
        if l_hi <= mean * (1.0 + band) || hi == lo {
            break;
        }
        let users = loads[hi].ues;
        if users == 0 {
            if moves.is_empty() {
                return Err(Balanced::NothingToMove);
            }
            break;
        }
        let per_ue = per_ue_load(&loads[hi]);
        let per_ue_level = l_hi / users as f64;
        // As many as bring the source down to the mean without lifting the
        // destination above it.
        // (The epsilon keeps 0.3 / 0.001 from flooring to 299.)
        let k = ((l_hi - mean).min(mean - l_lo) / per_ue_level + 1e-9).floor() as u64;
        let k = k.min(users);
        if k == 0 {
            break;
        }
        sub(&mut loads[hi], &per_ue, k as f64);
        add(&mut loads[lo], &per_ue, k as f64);
        match moves.iter_mut().find(|m| m.from == hi && m.to == lo) {
            Some(m) => m.ues += k,
            None => moves.push(Move {
                from: hi,
                to: lo,
                ues: k,
            }),
        }
    }
    if moves.is_empty() {
        Err(Balanced::WithinBand)
    } else {
        Ok(moves)
    }
}

fn per_ue_load(l: &SliceLoad) -> SliceLoad {
    if l.ues == 0 {
        return SliceLoad::default();
    }
    let n = l.ues as f64;
    SliceLoad {
        ues: 1,
        pps: l.pps / n,
        events_per_s: l.events_per_s / n,
    }
}

fn add(l: &mut SliceLoad, per_ue: &SliceLoad, k: f64) {
    l.ues += k as u64;
    l.pps += per_ue.pps * k;
    l.events_per_s += per_ue.events_per_s * k;
}

fn sub(l: &mut SliceLoad, per_ue: &SliceLoad, k: f64) {
    l.ues = l.ues.saturating_sub(k as u64);
    l.pps = (l.pps - per_ue.pps * k).max(0.0);
    l.events_per_s = (l.events_per_s - per_ue.events_per_s * k).max(0.0);
}

fn least_loaded(slices: &[SliceView], cap: &Capacity, except: Option<usize>) -> Option<usize> {
    let loads: Vec<SliceLoad> = slices.iter().map(|s| s.load).collect();
    least_loaded_of(slices, &loads, cap, except)
}

/// The serving slice of lowest level (lowest index on ties), other than `except`.
fn least_loaded_of(
    slices: &[SliceView],
    loads: &[SliceLoad],
    cap: &Capacity,
    except: Option<usize>,
) -> Option<usize> {
    (0..slices.len())
        .filter(|&i| slices[i].state == SliceState::Serving && Some(i) != except)
        .min_by(|&a, &b| {
            loads[a]
                .level(cap)
                .total_cmp(&loads[b].level(cap))
                .then(a.cmp(&b))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: Capacity = Capacity {
        ues: 1000,
        pps: 1_000_000.0,
        events_per_s: 10_000.0,
    };

    fn view(slice: usize, ues: u64, pps: f64, ev: f64) -> SliceView {
        SliceView {
            slice,
            state: SliceState::Serving,
            load: SliceLoad {
                ues,
                pps,
                events_per_s: ev,
            },
        }
    }

    fn draining(mut v: SliceView) -> SliceView {
        v.state = SliceState::Draining;
        v
    }

    #[test]
    fn the_level_is_the_busiest_resource() {
        let l = SliceLoad {
            ues: 100,
            pps: 500_000.0,
            events_per_s: 2_000.0,
        };
        assert_eq!(l.level(&CAP), 0.5);
        let none = Capacity {
            ues: 0,
            pps: 0.0,
            events_per_s: 0.0,
        };
        assert_eq!(
            l.level(&none),
            0.0,
            "no capacity given: not a divide by zero"
        );
    }

    #[test]
    fn a_new_user_goes_home_unless_home_cannot_take_it() {
        let p = SlicePolicy::Modulo;
        let s = [
            view(0, 10, 0.0, 0.0),
            view(1, 500, 0.0, 0.0),
            view(2, 20, 0.0, 0.0),
        ];
        // Home, below capacity.
        assert_eq!(place(&s, &CAP, p, 4), Placement::Home(1));
        // Home draining: the least loaded serving slice.
        let d = [s[0], draining(s[1]), s[2]];
        assert_eq!(place(&d, &CAP, p, 4), Placement::Spilled { home: 1, to: 0 });
        // Home full (by packets, not users).
        let f = [s[0], view(1, 5, 1_000_000.0, 0.0), s[2]];
        assert_eq!(place(&f, &CAP, p, 4), Placement::Spilled { home: 1, to: 0 });
        // Ties go to the lowest index.
        let t = [view(0, 7, 0.0, 0.0), draining(s[1]), view(2, 7, 0.0, 0.0)];
        assert_eq!(place(&t, &CAP, p, 1), Placement::Spilled { home: 1, to: 0 });
        // Nothing serves.
        let n = [draining(s[0]), draining(s[1])];
        assert_eq!(place(&n, &CAP, p, 1), Placement::Refused);
        assert_eq!(place(&[], &CAP, p, 1), Placement::Refused);
    }

    #[test]
    fn a_drain_moves_every_user_to_the_least_loaded_first() {
        let s = [
            draining(view(0, 300, 0.0, 0.0)),
            view(1, 100, 0.0, 0.0),
            view(2, 400, 0.0, 0.0),
        ];
        let m = drain(&s, &CAP, 0);
        assert_eq!(m.iter().map(|m| m.ues).sum::<u64>(), 300, "{m:?}");
        assert!(m.iter().all(|m| m.from == 0 && m.to != 0), "{m:?}");
        // Slice 1 is filled up to slice 2's level before slice 2 gets any.
        let to1 = m.iter().find(|m| m.to == 1).unwrap().ues;
        assert!(to1 >= 300, "{m:?}");
        // No other serving slice: the drain cannot proceed.
        assert!(drain(&[s[0], draining(s[1])], &CAP, 0).is_empty());
        // Empty slice, unknown slice: nothing to move.
        assert!(drain(&[draining(view(0, 0, 0.0, 0.0)), s[1]], &CAP, 0).is_empty());
        assert!(drain(&s, &CAP, 9).is_empty());
    }

    #[test]
    fn a_drain_of_many_users_keeps_the_slices_even() {
        let s = [
            view(0, 0, 0.0, 0.0),
            draining(view(1, 10_000, 0.0, 0.0)),
            view(2, 0, 0.0, 0.0),
            view(3, 0, 0.0, 0.0),
        ];
        let m = drain(&s, &CAP, 1);
        assert_eq!(m.iter().map(|m| m.ues).sum::<u64>(), 10_000);
        let (min, max) = m
            .iter()
            .fold((u64::MAX, 0), |(a, b), m| (a.min(m.ues), b.max(m.ues)));
        assert!(max - min <= 10_000 / 16, "{m:?}");
    }

    #[test]
    fn rebalance_moves_from_the_highest_to_the_lowest_until_within_the_band() {
        let s = [view(0, 900, 0.0, 0.0), view(1, 100, 0.0, 0.0)];
        let m = rebalance(&s, &CAP, 0.1).unwrap();
        assert_eq!(
            m,
            vec![Move {
                from: 0,
                to: 1,
                ues: 400
            }]
        );
        // Load by packets: users carry their slice's packets per user.
        let s = [view(0, 100, 800_000.0, 0.0), view(1, 100, 200_000.0, 0.0)];
        let m = rebalance(&s, &CAP, 0.1).unwrap();
        assert_eq!(
            m,
            vec![Move {
                from: 0,
                to: 1,
                ues: 37
            }]
        );
        // Three slices: the two extremes pair up first.
        let s = [
            view(0, 100, 0.0, 0.0),
            view(1, 700, 0.0, 0.0),
            view(2, 400, 0.0, 0.0),
        ];
        let m = rebalance(&s, &CAP, 0.05).unwrap();
        assert_eq!(
            m,
            vec![Move {
                from: 1,
                to: 0,
                ues: 300
            }]
        );
    }

    #[test]
    fn rebalance_says_why_it_moves_nothing() {
        let even = [view(0, 500, 0.0, 0.0), view(1, 520, 0.0, 0.0)];
        assert_eq!(rebalance(&even, &CAP, 0.1), Err(Balanced::WithinBand));
        let one = [view(0, 900, 0.0, 0.0), draining(view(1, 0, 0.0, 0.0))];
        assert_eq!(rebalance(&one, &CAP, 0.1), Err(Balanced::OneSlice));
        // Signaling load with no users attached to it (it cannot be moved).
        let odd = [view(0, 0, 0.0, 9_000.0), view(1, 0, 0.0, 0.0)];
        assert_eq!(rebalance(&odd, &CAP, 0.1), Err(Balanced::NothingToMove));
        // A draining slice is neither a source nor a destination.
        let d = [
            view(0, 900, 0.0, 0.0),
            draining(view(1, 0, 0.0, 0.0)),
            view(2, 100, 0.0, 0.0),
        ];
        let m = rebalance(&d, &CAP, 0.1).unwrap();
        assert_eq!(
            m,
            vec![Move {
                from: 0,
                to: 2,
                ues: 400
            }]
        );
    }
}
