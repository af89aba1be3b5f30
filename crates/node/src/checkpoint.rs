//! A slice's link to the node's state store (restart without re-attach):
//! its MME's checkpoints go to the node's group-commit thread
//! ([`pepc_store::Checkpointer`]), and the checkpoints a dead process left are
//! restored into the slice by its MME while it serves (`pepc_mme::restoring`).

use pepc_mme::Output;
use pepc_store::CheckpointSink;

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
    /// (IMSI, snapshot) to restore at start; handed to the MME when the slice starts.
    pub restore: Vec<(u64, Vec<u8>)>,
    /// `[debug] record`: the slice's MME is recorded into this file from its start.
    pub record: Option<std::fs::File>,
}

impl SliceState {
    /// Take a checkpoint output to the store; anything else is handed back.
    #[inline]
    pub fn offer(&mut self, o: Output) -> Option<Output> {
        match o {
            Output::Checkpoint { imsi, snapshot } => {
                if let Some(s) = &mut self.sink {
                    s.put(imsi, snapshot.0);
                }
                None
            }
            Output::Forget { imsi } => {
                if let Some(s) = &mut self.sink {
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

    /// Each round: checkpoints set aside while the store's queue was full go on.
    pub fn flush(&mut self) {
        if let Some(s) = &mut self.sink {
            s.flush();
        }
    }
}
