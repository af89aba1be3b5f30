//! Restart: the UEs a dead process checkpointed come back while the node already
//! serves. Restoring a million contexts takes seconds (memory-bound: fresh contexts
//! and indexes); the node does not wait for it. The snapshots wait here, indexed by
//! the identities a UE shows up with (S-TMSI, IMSI); the control loop restores them a
//! chunk per round, and a UE whose signaling arrives first is restored on the spot,
//! so no registered UE is ever told it is unknown (which would make it re-attach).

use crate::mme::Mme;
use crate::snapshot::{restore_checkpoint, snapshot_tmsis};
use crate::ControlPlane;
use crate::Output;
use std::collections::HashMap;
use std::time::Instant;

/// Checkpoints waiting to be restored.
#[derive(Default)]
pub struct Restoring {
    /// (IMSI, snapshot); taken when restored.
    items: Vec<Option<(u64, Vec<u8>)>>,
    by_tmsi: HashMap<u32, u32>,
    by_imsi: HashMap<u64, u32>,
    /// The background cursor: items before it are done.
    next: usize,
    left: usize,
    started: Option<Instant>,
    pub restored: u64,
    pub failed: u64,
    /// Restored on demand (their signaling came before the background reached them).
    pub on_demand: u64,
}

/// How a restore went, once done.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreReport {
    pub restored: u64,
    pub failed: u64,
    pub on_demand: u64,
}

impl Restoring {
    /// Index `items` (IMSI, snapshot) by their identities. A snapshot whose identities
    /// cannot be read is still restored in the background (and fails there, counted).
    pub fn new(items: Vec<(u64, Vec<u8>)>) -> Restoring {
        let mut r = Restoring {
            by_tmsi: HashMap::with_capacity(items.len()),
            by_imsi: HashMap::with_capacity(items.len()),
            left: items.len(),
            ..Restoring::default()
        };
        r.items.reserve_exact(items.len());
        for (i, (imsi, bytes)) in items.into_iter().enumerate() {
            let i = i as u32;
            if let Ok((t, pending)) = snapshot_tmsis(&bytes) {
                for t in [Some(t), pending].into_iter().flatten().filter(|&t| t != 0) {
                    r.by_tmsi.insert(t, i);
                }
            }
            r.by_imsi.insert(imsi, i);
            r.items.push(Some((imsi, bytes)));
        }
        r
    }

    /// Whether M-TMSI `t` may belong to a UE still waiting (new UEs must not get it).
    pub fn holds_tmsi(&self, t: u32) -> bool {
        self.by_tmsi.contains_key(&t)
    }

    /// Snapshots still waiting.
    pub fn left(&self) -> usize {
        self.left
    }

    fn take(&mut self, i: u32) -> Option<(u64, Vec<u8>)> {
        let it = self.items.get_mut(i as usize)?.take()?;
        self.left -= 1;
        Some(it)
    }
}

impl Mme {
    /// Start restoring `items` (IMSI, snapshot) a dead process checkpointed: call
    /// [`Mme::restore_some`] each round until it says done.
    pub fn begin_restore(&mut self, items: Vec<(u64, Vec<u8>)>, now: Instant) {
        if items.is_empty() {
            return;
        }
        let rec = self.begin_call(now, None, 0, crate::record::put::begin_restore(&items));
        self.start_restoring(items, now);
        self.close_call(rec, None, &[], None);
    }

    fn start_restoring(&mut self, items: Vec<(u64, Vec<u8>)>, now: Instant) {
        self.now = now;
        let mut r = Restoring::new(items);
        r.started = Some(now);
        tracing::info!("restoring {} checkpointed UEs while serving", r.left());
        self.restoring = Some(Box::new(r));
    }

    /// Whether checkpoints still wait to be restored.
    pub fn restoring(&self) -> bool {
        self.restoring.is_some()
    }

    /// Restore up to `max` waiting UEs. Returns the report once the last is done
    /// (and the MME is no longer restoring).
    pub fn restore_some(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        max: usize,
        out: &mut Vec<Output>,
    ) -> Option<RestoreReport> {
        self.restoring.as_ref()?;
        let call = crate::record::put::restore_some(max);
        self.run_recorded(now, cp, out, call, |m, cp, out| {
            m.restore_next(cp, now, max, out)
        })
    }

    fn restore_next(
        &mut self,
        cp: &mut ControlPlane,
        now: Instant,
        max: usize,
        out: &mut Vec<Output>,
    ) -> Option<RestoreReport> {
        self.now = now;
        let mut r = self.restoring.take()?;
        let mut n = 0;
        while n < max && r.next < r.items.len() {
            let i = r.next as u32;
            r.next += 1;
            if let Some(it) = r.take(i) {
                self.restore_item(&mut r, cp, it, now, out);
                n += 1;
            }
        }
        if r.next < r.items.len() {
            self.restoring = Some(r);
            return None;
        }
        tracing::info!(
            "restored {} checkpointed UEs in {} ms ({} on demand, {} failed)",
            r.restored,
            r.started.map_or(0, |t| now.duration_since(t).as_millis()),
            r.on_demand,
            r.failed
        );
        Some(RestoreReport {
            restored: r.restored,
            failed: r.failed,
            on_demand: r.on_demand,
        })
    }

    fn restore_item(
        &mut self,
        r: &mut Restoring,
        cp: &mut ControlPlane,
        (imsi, bytes): (u64, Vec<u8>),
        now: Instant,
        out: &mut Vec<Output>,
    ) {
        match restore_checkpoint(self, cp, &bytes, now) {
            Ok(w) => {
                r.restored += 1;
                if w.mme.imsi_exception {
                    out.push(Output::ClaimImsi { imsi });
                }
            }
            Err(e) => {
                r.failed += 1;
                tracing::warn!("checkpoint of a UE not restored: {e}");
            }
        }
    }

    /// The UE with M-TMSI `t` is about to be looked up: restore it first if its
    /// checkpoint still waits.
    pub(crate) fn restore_tmsi_first(
        &mut self,
        cp: &mut ControlPlane,
        t: u32,
        out: &mut Vec<Output>,
    ) {
        let Some(mut r) = self.restoring.take() else {
            return;
        };
        if let Some(i) = r.by_tmsi.remove(&t) {
            self.restore_on_demand(&mut r, cp, i, out);
        }
        self.restoring = Some(r);
    }

    /// As [`Mme::restore_tmsi_first`], by IMSI.
    pub(crate) fn restore_imsi_first(
        &mut self,
        cp: &mut ControlPlane,
        imsi: u64,
        out: &mut Vec<Output>,
    ) {
        let Some(mut r) = self.restoring.take() else {
            return;
        };
        if let Some(i) = r.by_imsi.remove(&imsi) {
            self.restore_on_demand(&mut r, cp, i, out);
        }
        self.restoring = Some(r);
    }

    fn restore_on_demand(
        &mut self,
        r: &mut Restoring,
        cp: &mut ControlPlane,
        i: u32,
        out: &mut Vec<Output>,
    ) {
        if let Some(it) = r.take(i) {
            r.on_demand += 1;
            let now = self.now;
            self.restore_item(r, cp, it, now, out);
        }
    }
}
