//! A slice's link to the node's state store (issue 11, restart without re-attach):
//! its MME's checkpoints go to the node's group-commit thread
//! ([`pepc_store::Checkpointer`]), and the checkpoints a dead process left are
//! restored into the slice on its control thread before its first event.

use pepc_mme::snapshot::restore_checkpoint;
use pepc_mme::{Mme, Output};
use pepc_slice::control::ControlPlane;
use pepc_store::CheckpointSink;
use std::time::Instant;

/// What a slice restored at start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Restored {
    pub ues: u64,
    pub failed: u64,
}

/// One slice's side of the state store (and of the charging records' writer).
#[derive(Default)]
pub struct SliceState {
    pub sink: Option<CheckpointSink>,
    /// Usage records (CDRs) go here; none: they are not kept.
    pub cdr: Option<crate::charging::CdrSink>,
    /// (IMSI, snapshot) to restore at start; emptied once done.
    pub restore: Vec<(u64, Vec<u8>)>,
}

impl SliceState {
    /// Take a checkpoint output to the store; anything else is handed back.
    #[inline]
    pub fn offer(&self, o: Output) -> Option<Output> {
        match o {
            Output::Checkpoint { imsi, snapshot } => {
                if let Some(s) = &self.sink {
                    s.put(imsi, snapshot.0);
                }
                None
            }
            Output::Forget { imsi } => {
                if let Some(s) = &self.sink {
                    s.delete(imsi);
                }
                None
            }
            Output::UsageRecord(r) => {
                if let Some(c) = &self.cdr {
                    c.put(*r);
                }
                None
            }
            o => Some(o),
        }
    }

    /// Restore the dead process's UEs of this slice. A UE held here outside its
    /// policy slice is claimed from the node's endpoint (its IMSI route), as a live
    /// one would be. Failures are counted and said (never with the snapshot's bytes).
    pub fn restore_into(
        &mut self,
        mme: &mut Mme,
        cp: &mut ControlPlane,
        now: Instant,
        out: &mut Vec<Output>,
    ) -> Restored {
        let mut r = Restored::default();
        if self.restore.is_empty() {
            return r;
        }
        let t = std::time::Instant::now();
        let found = self.restore.len();
        for (imsi, bytes) in std::mem::take(&mut self.restore) {
            match restore_checkpoint(mme, cp, &bytes, now) {
                Ok(w) => {
                    r.ues += 1;
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
        tracing::info!(
            "restored {} of {found} checkpointed UEs in {} ms ({} failed)",
            r.ues,
            t.elapsed().as_millis(),
            r.failed
        );
        r
    }
}
