//! The store behind UE checkpoints (restart without re-attach; the cluster's store later): what a slice
//! writes at the end of every procedure, and what a restarted node (or, later, a
//! surviving one) reads back.
//!
//! * [`StateStore`]: the interface, one record per subscriber (IMSI → UE snapshot,
//!   `pepc_slice::snapshot`'s container). The embedded store ([`EmbeddedStore`], a
//!   redb file) implements it today; the cluster's Redis store will too.
//! * [`Checkpointer`]: group commit. Slices hand records to its thread through a
//!   channel ([`CheckpointSink`], never blocking the slice); the thread commits what
//!   came within [`GROUP_WINDOW`] in one durable transaction (fsync), so a record is
//!   durable within about 10 ms of the procedure's end, and an fsync is paid per
//!   batch, not per UE.
//!
//! Records carry key material (a snapshot is a UE's security context): nothing here
//! logs their bytes, and the file is created readable by its owner only.
#![forbid(unsafe_code)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};

/// How long the checkpointer gathers records before committing them together.
pub const GROUP_WINDOW: Duration = Duration::from_millis(4);
/// Records per transaction at most (a storm is committed in several).
pub const MAX_BATCH: usize = 8192;
/// Records waiting for the checkpointer at most. Beyond it (a store slower than the
/// procedures) each slice keeps the latest record per subscriber aside and hands it
/// on when there is room: memory stays bounded by the slice's UEs, and what reaches
/// the store is each UE's latest state.
pub const QUEUE: usize = 4 * MAX_BATCH;

const UES: TableDefinition<u64, &[u8]> = TableDefinition::new("ue_snapshots");

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {what}")]
    Db { path: String, what: String },
    /// The file is open in another process (another pepc): redb locks it.
    #[error("state store {path}: another pepc holds it")]
    Held { path: String },
}

/// One write: a subscriber's record, or its removal (the UE detached).
#[derive(Clone, PartialEq, Eq)]
pub enum Op {
    Put { imsi: u64, snapshot: Vec<u8> },
    Delete { imsi: u64 },
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Lengths only: a snapshot holds keys.
        match self {
            Op::Put { imsi, snapshot } => write!(f, "Put({imsi}, {} bytes)", snapshot.len()),
            Op::Delete { imsi } => write!(f, "Delete({imsi})"),
        }
    }
}

/// Where checkpoints live: the interface the embedded store and (next) Redis share.
pub trait StateStore: Send {
    /// Apply `ops` in order, durably, as one unit.
    fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError>;
    /// Every record, for a restart.
    fn load_all(&self) -> Result<Vec<(u64, Vec<u8>)>, StoreError>;
}

/// The embedded store: a redb file.
pub struct EmbeddedStore {
    db: Database,
    path: String,
}

impl EmbeddedStore {
    pub fn open(path: &std::path::Path) -> Result<EmbeddedStore, StoreError> {
        let p = path.display().to_string();
        let err = |e: &dyn std::fmt::Display| StoreError::Db {
            path: p.clone(),
            what: e.to_string(),
        };
        let db = Database::create(path).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => StoreError::Held { path: p.clone() },
            e => err(&e),
        })?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
        }
        let tx = db.begin_write().map_err(|e| err(&e))?;
        tx.open_table(UES).map_err(|e| err(&e))?;
        tx.commit().map_err(|e| err(&e))?;
        Ok(EmbeddedStore { db, path: p })
    }

    fn err(&self, e: impl std::fmt::Display) -> StoreError {
        StoreError::Db {
            path: self.path.clone(),
            what: e.to_string(),
        }
    }
}

impl StateStore for EmbeddedStore {
    fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
        let mut tx = self.db.begin_write().map_err(|e| self.err(e))?;
        tx.set_durability(Durability::Immediate)
            .map_err(|e| self.err(e))?;
        {
            let mut t = tx.open_table(UES).map_err(|e| self.err(e))?;
            for op in ops {
                match op {
                    Op::Put { imsi, snapshot } => {
                        t.insert(*imsi, snapshot.as_slice())
                            .map_err(|e| self.err(e))?;
                    }
                    Op::Delete { imsi } => {
                        t.remove(*imsi).map_err(|e| self.err(e))?;
                    }
                }
            }
        }
        tx.commit().map_err(|e| self.err(e))
    }

    fn load_all(&self) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
        let tx = self.db.begin_read().map_err(|e| self.err(e))?;
        let t = tx.open_table(UES).map_err(|e| self.err(e))?;
        let mut out = Vec::new();
        for row in t.iter().map_err(|e| self.err(e))? {
            let (k, v) = row.map_err(|e| self.err(e))?;
            out.push((k.value(), v.value().to_vec()));
        }
        Ok(out)
    }
}

/// Figures of a [`Checkpointer`].
#[derive(Debug, Default)]
pub struct CheckpointStats {
    pub records: AtomicU64,
    pub deletes: AtomicU64,
    pub commits: AtomicU64,
    pub bytes: AtomicU64,
    /// Longest time from a record's arrival to its commit, in µs.
    pub max_delay_us: AtomicU64,
    pub errors: AtomicU64,
    /// Records a slice had to set aside because the queue was full.
    pub set_aside: AtomicU64,
}

/// A slice's handle to the checkpointer: never blocks. When the checkpointer's queue
/// is full, a record waits here, one per subscriber (a later one replaces it: only
/// a UE's latest state matters, and a delete must not be overtaken by an older put),
/// until [`CheckpointSink::flush`] finds room.
pub struct CheckpointSink {
    tx: SyncSender<(Instant, Op)>,
    aside: HashMap<u64, (Instant, Op)>,
    stats: Arc<CheckpointStats>,
}

impl Clone for CheckpointSink {
    /// Another slice's sink: the same queue, nothing set aside yet.
    fn clone(&self) -> Self {
        CheckpointSink {
            tx: self.tx.clone(),
            aside: HashMap::new(),
            stats: self.stats.clone(),
        }
    }
}

impl CheckpointSink {
    pub fn put(&mut self, imsi: u64, snapshot: Vec<u8>) {
        self.offer(imsi, Instant::now(), Op::Put { imsi, snapshot });
    }

    pub fn delete(&mut self, imsi: u64) {
        self.offer(imsi, Instant::now(), Op::Delete { imsi });
    }

    fn offer(&mut self, imsi: u64, at: Instant, op: Op) {
        if let Some(w) = self.aside.get_mut(&imsi) {
            // Behind the one set aside (its time kept: the delay counts from it).
            w.1 = op;
            return;
        }
        match self.tx.try_send((at, op)) {
            Ok(()) => {}
            Err(TrySendError::Full((at, op))) => {
                self.stats.set_aside.fetch_add(1, Relaxed);
                self.aside.insert(imsi, (at, op));
            }
            // A stopped checkpointer drops it: the node is stopping.
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Hands on what was set aside while there is room; true if some still waits.
    pub fn flush(&mut self) -> bool {
        if self.aside.is_empty() {
            return false;
        }
        let imsis: Vec<u64> = self.aside.keys().copied().collect();
        for imsi in imsis {
            let Some(r) = self.aside.remove(&imsi) else {
                continue;
            };
            match self.tx.try_send(r) {
                Ok(()) => {}
                Err(TrySendError::Full(r)) => {
                    self.aside.insert(imsi, r);
                    return true;
                }
                Err(TrySendError::Disconnected(_)) => self.aside.clear(),
            }
        }
        !self.aside.is_empty()
    }

    /// Records set aside now.
    pub fn aside(&self) -> usize {
        self.aside.len()
    }
}

/// The group-commit thread over a [`StateStore`].
pub struct Checkpointer {
    tx: Option<SyncSender<(Instant, Op)>>,
    thread: Option<JoinHandle<()>>,
    /// Set by [`Checkpointer::stop`]: commit what is queued and end, even while
    /// sinks are still alive (a node stopping after a thread failed).
    stopping: Arc<std::sync::atomic::AtomicBool>,
    pub stats: Arc<CheckpointStats>,
}

impl Checkpointer {
    /// Its thread, named `thread` (the node's plan names it).
    pub fn start(store: Box<dyn StateStore>, thread: &str) -> std::io::Result<Checkpointer> {
        Self::start_with_queue(store, QUEUE, thread)
    }

    /// [`Self::start`] with a queue of `queue` records (tests: a small one).
    pub fn start_with_queue(
        store: Box<dyn StateStore>,
        queue: usize,
        thread: &str,
    ) -> std::io::Result<Checkpointer> {
        let (tx, rx) = mpsc::sync_channel(queue.max(1));
        let stats = Arc::new(CheckpointStats::default());
        let stopping = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s, st) = (stats.clone(), stopping.clone());
        let thread = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || commit_loop(store, rx, &s, &st))?;
        Ok(Checkpointer {
            tx: Some(tx),
            thread: Some(thread),
            stopping,
            stats,
        })
    }

    pub fn sink(&self) -> CheckpointSink {
        CheckpointSink {
            tx: self.tx.clone().expect("running"),
            aside: HashMap::new(),
            stats: self.stats.clone(),
        }
    }

    /// Commit what is queued and stop (what sinks send later is lost).
    pub fn stop(mut self) -> Arc<CheckpointStats> {
        self.stopping.store(true, Relaxed);
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.stats.clone()
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stopping.store(true, Relaxed);
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn commit_loop(
    mut store: Box<dyn StateStore>,
    rx: Receiver<(Instant, Op)>,
    stats: &CheckpointStats,
    stopping: &std::sync::atomic::AtomicBool,
) {
    let mut batch: Vec<Op> = Vec::new();
    let mut oldest: Option<Instant> = None;
    let mut open = true;
    while open || !batch.is_empty() {
        if open && stopping.load(Relaxed) {
            // What is queued now is the last: commit it and end.
            while let Ok((at, op)) = rx.try_recv() {
                oldest.get_or_insert(at);
                batch.push(op);
            }
            open = false;
        }
        if open {
            // Wait for the first record, then gather for the window (or to the bound).
            let wait = match oldest {
                None => Duration::from_millis(20),
                Some(t) => GROUP_WINDOW.saturating_sub(t.elapsed()),
            };
            match rx.recv_timeout(wait) {
                Ok((at, op)) => {
                    oldest.get_or_insert(at);
                    batch.push(op);
                    while batch.len() < MAX_BATCH {
                        match rx.try_recv() {
                            Ok((_, op)) => batch.push(op),
                            Err(_) => break,
                        }
                    }
                    if batch.len() < MAX_BATCH && oldest.is_some_and(|t| t.elapsed() < GROUP_WINDOW)
                    {
                        continue;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = false,
            }
        }
        if batch.is_empty() {
            continue;
        }
        for op in &batch {
            match op {
                Op::Put { snapshot, .. } => {
                    stats.records.fetch_add(1, Relaxed);
                    stats.bytes.fetch_add(snapshot.len() as u64, Relaxed);
                }
                Op::Delete { .. } => {
                    stats.deletes.fetch_add(1, Relaxed);
                }
            }
        }
        match store.apply(&batch) {
            Ok(()) => {
                stats.commits.fetch_add(1, Relaxed);
            }
            Err(_) => {
                // Counted; the next checkpoint of each UE writes it again.
                stats.errors.fetch_add(1, Relaxed);
            }
        }
        if let Some(t) = oldest.take() {
            stats
                .max_delay_us
                .fetch_max(t.elapsed().as_micros() as u64, Relaxed);
        }
        batch.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("pepc-store-{}-{name}.redb", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    #[test]
    fn records_survive_a_reopen_and_deletes_apply_in_order() {
        let p = tmp("reopen");
        {
            let mut s = EmbeddedStore::open(&p).unwrap();
            s.apply(&[
                Op::Put {
                    imsi: 1,
                    snapshot: vec![1, 2, 3],
                },
                Op::Put {
                    imsi: 2,
                    snapshot: vec![4],
                },
                Op::Delete { imsi: 1 },
                Op::Put {
                    imsi: 2,
                    snapshot: vec![5, 6],
                },
            ])
            .unwrap();
        }
        let s = EmbeddedStore::open(&p).unwrap();
        assert_eq!(s.load_all().unwrap(), vec![(2, vec![5, 6])]);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn the_checkpointer_commits_in_groups_within_the_window() {
        let p = tmp("group");
        let c =
            Checkpointer::start(Box::new(EmbeddedStore::open(&p).unwrap()), "test-ckpt").unwrap();
        let mut sink = c.sink();
        for i in 0..5000u64 {
            sink.put(i, vec![i as u8; 200]);
        }
        sink.delete(7);
        drop(sink);
        let st = c.stop();
        assert_eq!(st.records.load(Relaxed), 5000);
        assert_eq!(st.deletes.load(Relaxed), 1);
        let commits = st.commits.load(Relaxed);
        assert!(
            (1..100).contains(&commits),
            "{commits} commits for 5000 records"
        );
        assert_eq!(st.errors.load(Relaxed), 0);
        let s = EmbeddedStore::open(&p).unwrap();
        let all = s.load_all().unwrap();
        assert_eq!(all.len(), 4999);
        assert!(all.iter().all(|(k, v)| *k != 7 && v.len() == 200));
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn stop_commits_and_ends_while_a_sink_still_lives() {
        let p = tmp("stop");
        let c =
            Checkpointer::start(Box::new(EmbeddedStore::open(&p).unwrap()), "test-ckpt").unwrap();
        let mut sink = c.sink();
        sink.put(1, vec![1; 10]);
        let st = c.stop(); // `sink` still alive: stop must not wait for it
        assert_eq!(st.records.load(Relaxed), 1);
        drop(sink);
        assert_eq!(
            EmbeddedStore::open(&p).unwrap().load_all().unwrap().len(),
            1
        );
        let _ = std::fs::remove_file(&p);
    }

    /// A store that holds every transaction until it is opened, and keeps what it
    /// applied (IMSI → latest snapshot; None: deleted).
    #[derive(Clone, Default)]
    struct Gated {
        open: Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
        applied: Arc<std::sync::Mutex<std::collections::BTreeMap<u64, Option<Vec<u8>>>>>,
    }

    impl StateStore for Gated {
        fn apply(&mut self, ops: &[Op]) -> Result<(), StoreError> {
            let (m, cv) = &*self.open;
            let mut open = m.lock().unwrap();
            while !*open {
                open = cv.wait(open).unwrap();
            }
            let mut a = self.applied.lock().unwrap();
            for op in ops {
                match op {
                    Op::Put { imsi, snapshot } => a.insert(*imsi, Some(snapshot.clone())),
                    Op::Delete { imsi } => a.insert(*imsi, None),
                };
            }
            Ok(())
        }
        fn load_all(&self) -> Result<Vec<(u64, Vec<u8>)>, StoreError> {
            Ok(Vec::new())
        }
    }

    #[test]
    fn a_stalled_store_costs_one_record_per_ue_and_gets_each_ues_latest() {
        let store = Gated::default();
        let c = Checkpointer::start_with_queue(Box::new(store.clone()), 4, "test-ckpt").unwrap();
        let mut sink = c.sink();
        // 100 UEs end 50 procedures each while the store does not commit.
        for round in 0..50u8 {
            for imsi in 0..100u64 {
                sink.put(imsi, vec![round; 8]);
            }
        }
        // UE 7 detaches last: its delete must not be overtaken by an older put.
        sink.delete(7);
        // The queue (4) and the batch the store holds aside: everything else waits
        // in the sink, one record per UE.
        assert!(sink.aside() <= 100, "{} set aside", sink.aside());
        assert!(sink.aside() >= 90, "{} set aside", sink.aside());
        assert!(c.stats.set_aside.load(Relaxed) > 0);
        {
            let (m, cv) = &*store.open;
            *m.lock().unwrap() = true;
            cv.notify_all();
        }
        let t = Instant::now();
        while sink.flush() {
            assert!(t.elapsed() < Duration::from_secs(10), "never drained");
            std::thread::sleep(Duration::from_millis(1));
        }
        drop(sink);
        c.stop();
        let a = store.applied.lock().unwrap();
        assert_eq!(a.len(), 100);
        for (imsi, v) in a.iter() {
            if *imsi == 7 {
                assert_eq!(*v, None, "UE 7 was deleted last");
            } else {
                assert_eq!(v.as_deref(), Some(&[49u8; 8][..]), "UE {imsi}");
            }
        }
    }

    #[test]
    fn a_snapshot_never_shows_in_debug_output() {
        let op = Op::Put {
            imsi: 9,
            snapshot: vec![0xAB; 32],
        };
        let s = format!("{op:?}");
        assert!(
            !s.contains("171") && !s.to_lowercase().contains("ab, ab"),
            "{s}"
        );
    }
}
