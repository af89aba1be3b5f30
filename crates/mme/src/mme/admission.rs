//! Admission of contexts without security (overload of the slice by its own measure):
//! how many there are, per eNB and in all, against `max_unauth_per_enb` and
//! `max_unauth_contexts`, and whether the slice calls itself crowded.

use super::{AssocId, Map};
use crate::config::MmeConfig;

#[derive(Default)]
pub(crate) struct Admission {
    /// Contexts without a security context, per eNB and in all.
    pub(crate) per_enb: Map<AssocId, u32>,
    pub(crate) total: usize,
    /// Contexts awaiting authentication passed 3/4 of a bound (of the slice, or of
    /// the eNB kept here): the MME is congested by its own measure until they are
    /// under half of it again (overload control; the node hears of it).
    pub(crate) crowded: Option<Option<AssocId>>,
    pub(crate) crowded_told: bool,
}

impl Admission {
    /// Room for one more context without security from eNB `assoc`?
    pub(crate) fn room(&self, cfg: &MmeConfig, assoc: AssocId) -> bool {
        self.total < cfg.max_unauth_contexts
            && self.per_enb.get(&assoc).map_or(0, |n| *n as usize) < cfg.max_unauth_per_enb
    }

    /// One more context without security from `assoc`.
    pub(crate) fn count(&mut self, cfg: &MmeConfig, assoc: AssocId) {
        let n = self.per_enb.entry(assoc).or_insert(0);
        *n += 1;
        let n = *n as usize;
        self.total += 1;
        if self.crowded.is_none() {
            if self.total * 4 > cfg.max_unauth_contexts * 3 {
                self.crowded = Some(None);
            } else if n * 4 > cfg.max_unauth_per_enb * 3 {
                self.crowded = Some(Some(assoc));
            }
        }
    }

    /// A context from `assoc` got security or went.
    pub(crate) fn uncount(&mut self, cfg: &MmeConfig, assoc: AssocId) {
        self.total = self.total.saturating_sub(1);
        if let Some(n) = self.per_enb.get_mut(&assoc) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_enb.remove(&assoc);
            }
        }
        let relieved = match self.crowded {
            Some(None) => self.total * 2 < cfg.max_unauth_contexts,
            Some(Some(a)) => {
                (self.per_enb.get(&a).map_or(0, |n| *n as usize)) * 2 < cfg.max_unauth_per_enb
            }
            None => false,
        };
        if relieved {
            self.crowded = None;
        }
    }

    /// Give back spare capacity once mostly empty.
    pub(crate) fn shrink(&mut self) {
        if self.per_enb.capacity() > 1024 && self.per_enb.len() * 8 < self.per_enb.capacity() {
            self.per_enb.shrink_to_fit();
        }
    }
}
