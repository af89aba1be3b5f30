//! Embedded HSS: persistent subscriber store and EPS-AKA vector generation.
//!
//! Storage is `redb` (ACID, copy-on-write B-trees). Tables: `subscribers` (IMSI ->
//! binary profile record, see [`record`]), `sqn` (IMSI -> SQN high-water mark),
//! `sqn_gen` (IMSI -> the generation that mark was written in) and `meta`
//! (`generation`). The SQN lives apart so the hot path rewrites 8 bytes, not the
//! profile.
//!
//! SQN policy (TS 33.102 Annex C.3.2): SQN = SEQ << 5 | IND. Each new vector
//! takes SEQ + 1 and the next IND (mod 32), so SQNs strictly increase.
//!
//! SQN leases and generations. Every process that issues vectors durably increments
//! the *generation* G before its first one (opens that only manage subscribers do
//! not). A subscriber's stored pair (v, g) means: in generation g no SQN
//! above v was issued, and in each later generation g' < G at most the *implicit
//! lease* `(v + 32·(g'-g-1), v + 32·(g'-g)]` (in SQN steps) was. So in generation
//! G > g the HSS may issue the implicit lease `(v + 32·(G-g-1), v + 32·(G-g)]` with
//! **no write at all**: a restart moves to G + 1, whose implicit lease lies above.
//! Only a subscriber that uses up its implicit lease within one generation needs a
//! durable commit (`Durability::Immediate`), which reserves [`Hss::set_lease`]
//! steps beyond the last SQN issued and records g = G. With `set_lease(1)` every
//! vector is committed before it leaves (implicit leases are not used).
//!
//! So the attach path never waits for an fsync in the common case; profiles are
//! read in batches ([`READ_AHEAD`] following subscribers in IMSI order, one read
//! transaction) and kept with a ready MILENAGE instance, for at most
//! [`Hss::set_max_leased`] subscribers ([`MAX_LEASED`] by default): beyond it the least
//! recently used are dropped, after a durable mark for any SQN they issued above
//! where a reload would start.
//! A node calls [`Hss::preload`] when it starts, so an attach storm after a restart
//! reads nothing from the database whatever order subscribers come in. Each restart skips at most
//! 32 SEQ values per subscriber, which the USIM accepts (SQN > SQN_MS, within Δ).
//!
//! Measured cost (`cargo run --release -p pepc-hss --example hss_bench /tmp`, shared
//! 2-core VM, ext4 on virtio disk): `next_vector` over 1000 subscribers 1.13 µs per
//! vector on disk (no fsync: implicit leases), 0.88 µs in memory; before leases it
//! was ~230 µs on disk (an fsync per vector). `next_vectors(n = 32)` needs a durable
//! extension per call: ~32 µs per vector on disk. Crypto alone (Milenage + KASME)
//! ~0.38 µs.
#![forbid(unsafe_code)]

mod csv_import;
/// Subscribers from CSV (the import's format), checked, nothing stored.
pub use csv_import::parse as parse_csv;
mod model;
pub mod record;
pub mod seam;

pub use model::{OpKind, PdnType, Subscriber};

use pepc_security::{generate_vector, resync_sqn, sqn_from_u64, AuthVector, Key128, Milenage};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::collections::HashMap;
use std::ops::Bound;

/// Boxed entries: growing the map moves 16-byte slots, not whole leases.
type LeaseMap = HashMap<u64, Box<Leased>, foldhash::fast::FixedState>;

/// A subscriber's IMSI as the HSS keys it in memory: the digits as a number with the
/// digit count in the top byte, so leading zeros stay significant. An MME that holds
/// IMSIs as numbers looks subscribers up with it without formatting digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ImsiKey(u64);

impl ImsiKey {
    /// The key of an IMSI string of 1-15 digits.
    pub fn parse(imsi: &str) -> Option<ImsiKey> {
        imsi_key(imsi).map(ImsiKey)
    }

    /// The key of the 15-digit IMSI `imsi` (leading zeros implied), as an MME that
    /// formats IMSIs with `{:015}` names it; `None` above 15 digits.
    pub fn fifteen_digits(imsi: u64) -> Option<ImsiKey> {
        (imsi < 1_000_000_000_000_000).then_some(ImsiKey(15 << 56 | imsi))
    }

    /// The IMSI's digits.
    pub fn digits(self) -> String {
        let len = (self.0 >> 56) as usize;
        format!("{:0len$}", self.0 & ((1 << 56) - 1))
    }
}

/// The lease table's key (see [`ImsiKey`]). `None` for a string that is not 1-15
/// digits (no stored subscriber has such an IMSI).
fn imsi_key(imsi: &str) -> Option<u64> {
    if imsi.is_empty() || imsi.len() > 15 {
        return None;
    }
    let mut v = 0u64;
    for b in imsi.bytes() {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + u64::from(b - b'0');
    }
    Some((imsi.len() as u64) << 56 | v)
}
use std::path::Path;
use std::sync::{Arc, Mutex};

const SUBSCRIBERS: TableDefinition<&str, &[u8]> = TableDefinition::new("subscribers");
const SQN: TableDefinition<&str, u64> = TableDefinition::new("sqn");
const SQN_GEN: TableDefinition<&str, u64> = TableDefinition::new("sqn_gen");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// SQN steps of one implicit lease. Part of the stored format: past generations'
/// implicit leases are recomputed with it, so it must never change.
const IMPLICIT_STEPS: u64 = 32;

/// SEQ increment unit: IND occupies the low 5 bits (TS 33.102 C.3.2).
pub const IND_BITS: u32 = 5;
const IND_MASK: u64 = (1 << IND_BITS) - 1;

/// HSS errors. Messages never contain key material.
#[derive(Debug, thiserror::Error)]
pub enum HssError {
    #[error("unknown IMSI {0}")]
    UnknownImsi(String),
    #[error("database error: {0}")]
    Db(#[from] redb::Error),
    #[error("CSV line {line}, column {column}: {what}")]
    Csv {
        line: u64,
        column: String,
        what: String,
    },
    #[error("invalid subscriber field {field}: {what}")]
    Invalid { field: &'static str, what: String },
    #[error("stored record for IMSI {imsi} is corrupt: {what}")]
    Corrupt {
        imsi: String,
        what: record::RecordError,
    },
    #[error("resynchronisation for IMSI {0} refused: MAC-S in AUTS does not verify")]
    ResyncMacFailure(String),
    #[error("SQN space exhausted for IMSI {0}")]
    SqnExhausted(String),
    /// The file is open in another process (another pepc): redb locks it.
    #[error("another pepc holds {}", .0.display())]
    Held(std::path::PathBuf),
}

macro_rules! db_err {
    ($($t:ty),*) => {$(
        impl From<$t> for HssError {
            fn from(e: $t) -> Self {
                HssError::Db(e.into())
            }
        }
    )*};
}
db_err!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError
);

/// Most subscribers following one that is not in memory which are read in the same
/// read transaction. The read-ahead adapts between [`READ_AHEAD_MIN`] and this: it
/// doubles while most of what it read was then asked for (subscribers attaching in
/// IMSI order, as after a mass provisioning or in a test), and halves when little was
/// (random order, where reading ahead is wasted work).
pub const READ_AHEAD: usize = 256;
/// The smallest read-ahead, kept so that a sequential pattern is noticed again.
pub const READ_AHEAD_MIN: usize = 4;

/// A subscriber with a live SQN lease.
struct Leased {
    /// The decoded profile, so `get` on a leased subscriber needs no read or decode.
    profile: Arc<Subscriber>,
    mil: Milenage,
    amf: [u8; 2],
    /// Last SQN handed out.
    issued: u64,
    /// SQNs up to here may be handed out without a commit (the implicit lease, or a
    /// durable high-water mark).
    reserved: u64,
    /// Where a reload from the database in this generation would start: SQNs issued
    /// above it must be made durable before the entry may be dropped.
    reload_start: u64,
    /// Last use (the HSS's call counter), for evicting the least recently used.
    touched: u64,
    /// Read ahead and not asked for yet (counts a read-ahead hit when it is).
    prefetched: bool,
}

/// A read snapshot of the three tables, kept between loads so that a subscriber
/// not in memory costs one B-tree lookup rather than a new transaction and three
/// table opens. Every commit of this process drops it (see [`Hss::invalidate`]), so
/// a load never sees a mark older than one this process wrote.
struct Snapshot {
    subscribers: redb::ReadOnlyTable<&'static str, &'static [u8]>,
    sqn: redb::ReadOnlyTable<&'static str, u64>,
    sqn_gen: redb::ReadOnlyTable<&'static str, u64>,
}

/// The subscriber store. `Hss` is `Send + Sync`; writes are serialised by redb and
/// the lease table by a mutex (the HSS is shared by the slices' control threads).
pub struct Hss {
    db: Database,
    leases: Mutex<LeaseMap>,
    lease_steps: std::sync::atomic::AtomicU32,
    /// This process's generation (see the module docs).
    generation: u64,
    /// Durable commits made to extend a lease (operators watch this: each is an
    /// fsync on the vector path).
    lease_commits: std::sync::atomic::AtomicU64,
    /// Most subscribers kept in memory; beyond it the least recently used are dropped.
    max_leased: std::sync::atomic::AtomicUsize,
    /// Calls served so far (the clock of `Leased::touched`).
    tick: std::sync::atomic::AtomicU64,
    evicted: std::sync::atomic::AtomicU64,
    /// Read-ahead state, changed under the lease lock: current size, subscribers the
    /// last read-ahead loaded, and how many of them have been asked for since.
    ahead: std::sync::atomic::AtomicUsize,
    ahead_loaded: std::sync::atomic::AtomicUsize,
    ahead_hits: std::sync::atomic::AtomicUsize,
    snapshot: Mutex<Option<Arc<Snapshot>>>,
    /// Whether `generation` is durable yet (see `claim_generation`).
    claimed: std::sync::atomic::AtomicBool,
}

/// Subscribers kept in memory by default (about 400 bytes each).
pub const MAX_LEASED: usize = 1 << 20;

/// HSS figures for operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HssStats {
    /// This process's generation (one more than the last process that issued vectors).
    pub generation: u64,
    /// Subscribers held in memory with a lease.
    pub leased: usize,
    /// Durable commits made on the vector path to extend a lease.
    pub lease_commits: u64,
    /// Subscribers dropped from memory to stay within the bound.
    pub evicted: u64,
}

/// `sqn` advanced by `steps` SQN steps (saturating at the last valid SQN): SEQ
/// grows by `steps`, IND by `steps` mod 32.
fn advance(sqn: u64, steps: u64) -> u64 {
    let seq = (sqn >> IND_BITS).saturating_add(steps);
    let ind = (sqn & IND_MASK).wrapping_add(steps) & IND_MASK;
    if seq > pepc_security::SQN_MAX >> IND_BITS {
        // Only whole steps count: the last SQN reachable from `sqn`.
        let left = (pepc_security::SQN_MAX >> IND_BITS) - (sqn >> IND_BITS);
        return ((sqn >> IND_BITS) + left) << IND_BITS | ((sqn & IND_MASK) + left) & IND_MASK;
    }
    seq << IND_BITS | ind
}

/// Advances a side table's IMSI-ordered range iterator past `imsi` and returns the
/// value stored for it, if any (a merge step: the main table drives the walk).
fn merged_value<'a>(
    rows: &mut std::iter::Peekable<redb::Range<'a, &'static str, u64>>,
    imsi: &str,
) -> Result<Option<u64>, HssError> {
    let mut found = None;
    loop {
        match rows.peek() {
            Some(Ok((k, v))) => match k.value().cmp(imsi) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => found = Some(v.value()),
                std::cmp::Ordering::Greater => return Ok(found),
            },
            Some(Err(_)) => {
                rows.next().transpose()?;
            }
            None => return Ok(found),
        }
        rows.next();
    }
}

/// Where a subscriber stored as (v, g) stands in generation `now`: the highest SQN
/// that may already have been issued, and the end of this generation's implicit
/// lease (equal to the first when g = now: the mark was written in this process).
fn implicit_lease(v: u64, g: u64, now: u64) -> (u64, u64) {
    if g >= now {
        return (v, v);
    }
    let before = now - g - 1;
    let start = advance(v, IMPLICIT_STEPS.saturating_mul(before));
    (start, advance(start, IMPLICIT_STEPS))
}

impl core::fmt::Debug for Hss {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Hss")
    }
}

/// Next SQN after `sqn`: SEQ + 1, IND + 1 mod 32.
pub fn next_sqn(sqn: u64) -> Option<u64> {
    let seq = (sqn >> IND_BITS) + 1;
    let ind = ((sqn & IND_MASK) + 1) & IND_MASK;
    let next = (seq << IND_BITS) | ind;
    (next <= pepc_security::SQN_MAX).then_some(next)
}

fn milenage_of(s: &Subscriber) -> Milenage {
    match s.op_kind {
        OpKind::Opc(opc) => Milenage::new_with_opc(&s.k, opc),
        OpKind::Op(op) => Milenage::new_with_op(&s.k, op),
    }
}

fn decode(imsi: &str, bytes: &[u8]) -> Result<Subscriber, HssError> {
    record::decode(bytes).map_err(|what| HssError::Corrupt {
        imsi: imsi.to_string(),
        what,
    })
}

impl Hss {
    /// Open or create the database file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Hss, HssError> {
        let db = Database::create(path.as_ref()).map_err(|e| match e {
            redb::DatabaseError::DatabaseAlreadyOpen => HssError::Held(path.as_ref().to_path_buf()),
            e => HssError::from(redb::Error::from(e)),
        })?;
        Self::init(db)
    }

    /// A volatile store (tests, emulators).
    pub fn in_memory() -> Result<Hss, HssError> {
        Self::init(Database::builder().create_with_backend(redb::backends::InMemoryBackend::new())?)
    }

    fn init(db: Database) -> Result<Hss, HssError> {
        let mut tx = db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        tx.open_table(SUBSCRIBERS)?;
        tx.open_table(SQN)?;
        tx.open_table(SQN_GEN)?;
        // This process's generation: made durable before its first vector leaves
        // (`claim_generation`), so opens that issue none (subscriber management)
        // do not move anyone's SQN.
        let generation = tx
            .open_table(META)?
            .get("generation")?
            .map(|v| v.value())
            .unwrap_or(0)
            + 1;
        tx.commit()?;
        Ok(Hss {
            db,
            leases: Mutex::new(LeaseMap::default()),
            lease_steps: std::sync::atomic::AtomicU32::new(32),
            generation,
            lease_commits: std::sync::atomic::AtomicU64::new(0),
            max_leased: std::sync::atomic::AtomicUsize::new(MAX_LEASED),
            tick: std::sync::atomic::AtomicU64::new(0),
            evicted: std::sync::atomic::AtomicU64::new(0),
            ahead: std::sync::atomic::AtomicUsize::new(READ_AHEAD),
            ahead_loaded: std::sync::atomic::AtomicUsize::new(0),
            ahead_hits: std::sync::atomic::AtomicUsize::new(0),
            snapshot: Mutex::new(None),
            claimed: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Makes this process's generation durable, once, before any vector leaves: a
    /// restart after that moves to the next generation and so above every implicit
    /// lease of this one.
    fn claim_generation(&self) -> Result<(), HssError> {
        if self.claimed.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        {
            let mut m = tx.open_table(META)?;
            let stored = m.get("generation")?.map(|v| v.value()).unwrap_or(0);
            m.insert("generation", stored.max(self.generation))?;
        }
        tx.commit()?;
        self.invalidate();
        self.claimed
            .store(true, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// SQN steps reserved per durable commit (1 = a commit per vector, the strictest
    /// policy; larger leases trade unused SQNs at a restart for fewer fsyncs).
    pub fn set_lease(&self, steps: u32) {
        self.lease_steps
            .store(steps.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// Current figures.
    pub fn stats(&self) -> HssStats {
        HssStats {
            generation: self.generation,
            leased: self.leases().len(),
            lease_commits: self
                .lease_commits
                .load(std::sync::atomic::Ordering::Relaxed),
            evicted: self.evicted.load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// Most subscribers kept in memory (at least 2; default [`MAX_LEASED`]). Beyond it
    /// the least recently used are dropped; one that has issued SQNs not yet covered
    /// by a durable mark gets its mark written first, in one commit per eviction round.
    pub fn set_max_leased(&self, n: usize) {
        self.max_leased
            .store(n.max(2), std::sync::atomic::Ordering::Relaxed);
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, LeaseMap> {
        // A poisoned lock only means another thread panicked mid-call; the map holds
        // no partial state (entries are replaced whole), so keep serving.
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Insert or replace a subscriber (profile and SQN).
    pub fn add(&self, s: &Subscriber) -> Result<(), HssError> {
        self.add_many(std::slice::from_ref(s))
    }

    /// Insert or replace many subscribers in one transaction.
    pub fn add_many(&self, subs: &[Subscriber]) -> Result<(), HssError> {
        for s in subs {
            s.validate()?;
        }
        let tx = self.db.begin_write()?;
        {
            let mut t = tx.open_table(SUBSCRIBERS)?;
            let mut q = tx.open_table(SQN)?;
            let mut qg = tx.open_table(SQN_GEN)?;
            for s in subs {
                t.insert(s.imsi.as_str(), record::encode(s).as_slice())?;
                // Marked as of the previous generation: nothing above `sqn` was
                // issued, so this generation's implicit lease starts right after it.
                q.insert(s.imsi.as_str(), s.sqn)?;
                qg.insert(s.imsi.as_str(), self.generation - 1)?;
            }
        }
        tx.commit()?;
        let mut leases = self.leases();
        self.invalidate();
        for s in subs {
            if let Some(k) = imsi_key(&s.imsi) {
                leases.remove(&k);
            }
        }
        Ok(())
    }

    /// The subscriber with its current SQN, or `None`.
    pub fn get(&self, imsi: &str) -> Result<Option<Subscriber>, HssError> {
        let Some(key) = imsi_key(imsi) else {
            return Ok(None);
        };
        if let Some(l) = self.leases().get(&key) {
            let mut s = Subscriber::clone(&l.profile);
            s.sqn = l.issued;
            return Ok(Some(s));
        }
        let tx = self.db.begin_read()?;
        let t = tx.open_table(SUBSCRIBERS)?;
        let q = tx.open_table(SQN)?;
        let qg = tx.open_table(SQN_GEN)?;
        let Some(v) = t.get(imsi)? else {
            return Ok(None);
        };
        let mut s = decode(imsi, v.value())?;
        s.sqn = self.stored_mark(imsi, s.sqn, &q, &qg)?.0;
        if let Some(l) = self.leases().get(&key) {
            s.sqn = l.issued;
        }
        Ok(Some(s))
    }

    /// The subscriber's profile, shared. `sqn` in it is not live (use [`Hss::get`]
    /// for that). This is what the attach path reads: a leased subscriber's profile
    /// comes from memory with no copy; otherwise it is read and decoded.
    pub fn profile(&self, imsi: &str) -> Result<Option<Arc<Subscriber>>, HssError> {
        let Some(key) = imsi_key(imsi) else {
            return Ok(None);
        };
        if let Some(l) = self.leases().get(&key) {
            return Ok(Some(l.profile.clone()));
        }
        Ok(self.get(imsi)?.map(Arc::new))
    }

    /// All subscribers, ordered by IMSI. `sqn` is the last SQN issued when this
    /// process holds the subscriber's lease, else the highest SQN that may have
    /// been issued before (the durable mark plus past generations' implicit leases).
    pub fn list(&self) -> Result<Vec<Subscriber>, HssError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(SUBSCRIBERS)?;
        let q = tx.open_table(SQN)?;
        let qg = tx.open_table(SQN_GEN)?;
        let mut out = Vec::new();
        for item in t.iter()? {
            let (k, v) = item?;
            let mut s = decode(k.value(), v.value())?;
            s.sqn = self.stored_mark(k.value(), s.sqn, &q, &qg)?.0;
            out.push(s);
        }
        let leases = self.leases();
        for s in &mut out {
            if let Some(l) = imsi_key(&s.imsi).and_then(|k| leases.get(&k)) {
                s.sqn = l.issued;
            }
        }
        Ok(out)
    }

    /// Remove a subscriber; `Ok(false)` if it did not exist.
    pub fn remove(&self, imsi: &str) -> Result<bool, HssError> {
        let tx = self.db.begin_write()?;
        let existed = {
            let mut t = tx.open_table(SUBSCRIBERS)?;
            let mut q = tx.open_table(SQN)?;
            q.remove(imsi)?;
            tx.open_table(SQN_GEN)?.remove(imsi)?;
            let existed = t.remove(imsi)?.is_some();
            existed
        };
        tx.commit()?;
        let mut leases = self.leases();
        self.invalidate();
        if let Some(k) = imsi_key(imsi) {
            leases.remove(&k);
        }
        Ok(existed)
    }

    /// Import a CSV file (header `imsi,k,opc,op,amf,sqn,msisdn,apn,pdn_type,qci,arp,ambr_ul,ambr_dl`).
    /// All-or-nothing: any bad line aborts before anything is written.
    pub fn import_csv(&self, path: impl AsRef<Path>) -> Result<usize, HssError> {
        let file = std::fs::File::open(path.as_ref()).map_err(|e| HssError::Csv {
            line: 0,
            column: String::new(),
            what: format!("cannot open {}: {e}", path.as_ref().display()),
        })?;
        let subs = csv_import::parse(file)?;
        self.add_many(&subs)?;
        Ok(subs.len())
    }

    /// [`Hss::profile`] by key: no digits to parse when the subscriber is in memory.
    pub fn profile_of(&self, key: ImsiKey) -> Result<Option<Arc<Subscriber>>, HssError> {
        if let Some(l) = self.leases().get(&key.0) {
            return Ok(Some(l.profile.clone()));
        }
        self.profile(&key.digits())
    }

    /// [`Hss::next_vector`] by key. A subscriber in memory whose lease covers the
    /// next SQN (the usual case) costs one lookup and no allocation; anything else
    /// takes the general path.
    pub fn next_vector_of(
        &self,
        key: ImsiKey,
        plmn: [u8; 3],
        rand_source: &mut impl FnMut() -> [u8; 16],
    ) -> Result<AuthVector, HssError> {
        {
            let mut leases = self.leases();
            self.claim_generation()?;
            if let Some(l) = leases.get_mut(&key.0) {
                if let Some(sqn) = next_sqn(l.issued).filter(|&q| q <= l.reserved) {
                    l.touched = self.tick.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                    if l.prefetched {
                        l.prefetched = false;
                        self.ahead_hits
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    l.issued = sqn;
                    return Ok(generate_vector(
                        &l.mil,
                        sqn_from_u64(sqn),
                        l.amf,
                        rand_source(),
                        plmn,
                    ));
                }
            }
        }
        self.next_vector(&key.digits(), plmn, rand_source)
    }

    /// One authentication vector; the new SQN is durable before this returns.
    pub fn next_vector(
        &self,
        imsi: &str,
        plmn: [u8; 3],
        rand_source: &mut impl FnMut() -> [u8; 16],
    ) -> Result<AuthVector, HssError> {
        let mut v = self.next_vectors(imsi, plmn, 1, rand_source)?;
        Ok(v.remove(0))
    }

    /// `n` vectors for one subscriber with consecutive SQNs and a single
    /// durable commit (the MME may keep spares, TS 33.401 §6.1.2).
    pub fn next_vectors(
        &self,
        imsi: &str,
        plmn: [u8; 3],
        n: usize,
        rand_source: &mut impl FnMut() -> [u8; 16],
    ) -> Result<Vec<AuthVector>, HssError> {
        let mut out = self.next_vector_batch(&[imsi], plmn, n, rand_source)?;
        out.remove(0)
    }

    /// `n` vectors for each of several subscribers, with at most one durable commit
    /// (none when every subscriber's lease covers `n` more SQNs, the usual case).
    /// Per-IMSI failures (unknown IMSI, exhausted SQN) are returned in place and do
    /// not abort the others; database errors abort the whole batch and release
    /// nothing.
    pub fn next_vector_batch(
        &self,
        imsis: &[&str],
        plmn: [u8; 3],
        n: usize,
        rand_source: &mut impl FnMut() -> [u8; 16],
    ) -> Result<Vec<Result<Vec<AuthVector>, HssError>>, HssError> {
        let steps = u64::from(
            self.lease_steps
                .load(std::sync::atomic::Ordering::Relaxed)
                .max(n as u32),
        );
        let mut leases = self.leases();
        self.claim_generation()?;
        let tick = self.tick.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
        if imsis
            .iter()
            .any(|i| imsi_key(i).is_some_and(|k| !leases.contains_key(&k)))
        {
            self.make_room(&mut leases, imsis)?;
            self.load(&mut leases, imsis)?;
        }
        let short = |l: &Leased| advance(l.issued, n as u64) > l.reserved;
        if imsis.iter().any(|i| {
            imsi_key(i)
                .and_then(|k| leases.get(&k))
                .is_some_and(|l| short(l))
        }) {
            self.extend_leases(&mut leases, imsis, n as u64, steps)?;
        }
        let mut out = Vec::with_capacity(imsis.len());
        for &imsi in imsis {
            let Some(l) = imsi_key(imsi).and_then(|k| leases.get_mut(&k)) else {
                out.push(Err(HssError::UnknownImsi(imsi.to_string())));
                continue;
            };
            l.touched = tick;
            if l.prefetched {
                l.prefetched = false;
                self.ahead_hits
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let mut vs = Vec::with_capacity(n);
            let mut sqn = l.issued;
            for _ in 0..n {
                match next_sqn(sqn) {
                    Some(next) if next <= l.reserved => {
                        sqn = next;
                        vs.push(generate_vector(
                            &l.mil,
                            sqn_from_u64(sqn),
                            l.amf,
                            rand_source(),
                            plmn,
                        ));
                    }
                    _ => break,
                }
            }
            l.issued = sqn;
            out.push(if vs.len() < n {
                Err(HssError::SqnExhausted(imsi.to_string()))
            } else {
                Ok(vs)
            });
        }
        Ok(out)
    }

    /// A subscriber's stored (v, g) seen from this generation: (highest SQN that may
    /// already be issued, end of this generation's implicit lease).
    fn stored_mark(
        &self,
        imsi: &str,
        profile_sqn: u64,
        q: &impl ReadableTable<&'static str, u64>,
        qg: &impl ReadableTable<&'static str, u64>,
    ) -> Result<(u64, u64), HssError> {
        let v = q.get(imsi)?.map(|g| g.value()).unwrap_or(profile_sqn);
        // No generation stored: a mark written before generations existed, when
        // every mark was durable before use.
        let g = qg.get(imsi)?.map(|g| g.value()).unwrap_or(0);
        Ok(implicit_lease(v, g, self.generation))
    }

    /// The current read snapshot, opened if there is none.
    fn snapshot(&self) -> Result<Arc<Snapshot>, HssError> {
        let mut g = self.snapshot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = g.as_ref() {
            return Ok(s.clone());
        }
        let tx = self.db.begin_read()?;
        let s = Arc::new(Snapshot {
            subscribers: tx.open_table(SUBSCRIBERS)?,
            sqn: tx.open_table(SQN)?,
            sqn_gen: tx.open_table(SQN_GEN)?,
        });
        *g = Some(s.clone());
        Ok(s)
    }

    /// Drops the read snapshot: called right after every commit, before the lease
    /// table is used again.
    fn invalidate(&self) {
        *self.snapshot.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Drops the least recently used subscribers when loading `imsis` (plus some
    /// read-ahead) would pass the bound. Those that issued SQNs above where a reload
    /// would start get that SQN written as their mark first (one durable commit), so
    /// nothing is ever issued twice.
    fn make_room(&self, leases: &mut LeaseMap, imsis: &[&str]) -> Result<(), HssError> {
        let max = self.max_leased.load(std::sync::atomic::Ordering::Relaxed);
        let need = imsis.len()
            + self
                .ahead
                .load(std::sync::atomic::Ordering::Relaxed)
                .min(max / 8);
        if leases.len() + need <= max {
            return Ok(());
        }
        // Evict down to 7/8 of the bound so rounds stay rare.
        let count = (leases.len() + need)
            .saturating_sub(max - max / 8)
            .min(leases.len());
        let keep: Vec<u64> = imsis.iter().filter_map(|i| imsi_key(i)).collect();
        let mut by_age: Vec<(u64, u64)> = leases
            .iter()
            .filter(|(k, _)| !keep.contains(k))
            .map(|(&k, l)| (l.touched, k))
            .collect();
        let count = count.min(by_age.len());
        if count == 0 {
            return Ok(());
        }
        by_age.select_nth_unstable(count - 1);
        let victims = &by_age[..count];
        let dirty: Vec<(u64, u64)> = victims
            .iter()
            .filter_map(|&(_, k)| {
                let l = &leases[&k];
                (l.issued > l.reload_start).then_some((k, l.issued))
            })
            .collect();
        if !dirty.is_empty() {
            let mut tx = self.db.begin_write()?;
            tx.set_durability(Durability::Immediate)?;
            {
                let mut q = tx.open_table(SQN)?;
                let mut qg = tx.open_table(SQN_GEN)?;
                for &(k, issued) in &dirty {
                    let imsi = leases[&k].profile.imsi.as_str();
                    q.insert(imsi, issued)?;
                    qg.insert(imsi, self.generation)?;
                }
            }
            tx.commit()?;
            self.invalidate();
            self.lease_commits
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        for &(_, k) in victims {
            leases.remove(&k);
        }
        self.evicted
            .fetch_add(count as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Read `imsis` that are not in memory, and up to [`READ_AHEAD`] subscribers
    /// following the first in IMSI order, in one read transaction; each gets this
    /// generation's implicit lease (no write).
    fn load(&self, leases: &mut LeaseMap, imsis: &[&str]) -> Result<(), HssError> {
        let snap = self.snapshot()?;
        for &imsi in imsis {
            let Some(key) = imsi_key(imsi) else { continue };
            if leases.contains_key(&key) {
                continue;
            }
            if let Some(raw) = snap.subscribers.get(imsi)? {
                let sub = decode(imsi, raw.value())?;
                let mark = self.stored_mark(imsi, sub.sqn, &snap.sqn, &snap.sqn_gen)?;
                leases.insert(key, self.new_lease(sub, mark));
            }
        }
        let Some(&first) = imsis.first() else {
            return Ok(());
        };
        let room = self
            .max_leased
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_sub(leases.len());
        let size = self.adapt_read_ahead().min(room);
        let ahead = self.read_in_order(leases, &snap, Bound::Excluded(first), size, true)?;
        self.ahead_loaded
            .store(ahead, std::sync::atomic::Ordering::Relaxed);
        self.ahead_hits
            .store(0, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// A lease for a profile just read, with this generation's implicit lease `mark`.
    fn new_lease(&self, sub: Subscriber, (issued, end): (u64, u64)) -> Box<Leased> {
        let strict = self.lease_steps.load(std::sync::atomic::Ordering::Relaxed) <= 1;
        Box::new(Leased {
            mil: milenage_of(&sub),
            amf: sub.amf,
            profile: Arc::new(sub),
            issued,
            // Strict policy: every vector is committed first.
            reserved: if strict { issued } else { end },
            reload_start: issued,
            touched: self.tick.load(std::sync::atomic::Ordering::Relaxed),
            prefetched: false,
        })
    }

    /// Up to `limit` subscribers after `from` in IMSI order that are not in memory
    /// yet, read into `leases`. The walk goes over the three tables side by side (a
    /// merge: a subscriber may lack an `sqn` or `sqn_gen` row) rather than doing two
    /// B-tree lookups per subscriber. Returns how many were read.
    fn read_in_order(
        &self,
        leases: &mut LeaseMap,
        snap: &Snapshot,
        from: Bound<&str>,
        limit: usize,
        prefetched: bool,
    ) -> Result<usize, HssError> {
        let range = (from, Bound::Unbounded);
        let mut marks = snap.sqn.range::<&str>(range)?.peekable();
        let mut gens = snap.sqn_gen.range::<&str>(range)?.peekable();
        let mut read = 0;
        for item in snap.subscribers.range::<&str>(range)? {
            if read >= limit {
                break;
            }
            let (k, v) = item?;
            let imsi = k.value();
            let Some(key) = imsi_key(imsi) else { continue };
            if leases.contains_key(&key) {
                continue;
            }
            read += 1;
            let sub = decode(imsi, v.value())?;
            let stored = merged_value(&mut marks, imsi)?.unwrap_or(sub.sqn);
            let generation = merged_value(&mut gens, imsi)?.unwrap_or(0);
            let mut l = self.new_lease(sub, implicit_lease(stored, generation, self.generation));
            l.prefetched = prefetched;
            leases.insert(key, l);
        }
        Ok(read)
    }

    /// Reads subscribers in IMSI order into memory, up to the bound
    /// ([`Hss::set_max_leased`]), so that attaches after a start need no database
    /// read; the node calls it when it starts. Costs about 1 µs per subscriber.
    /// Returns how many were read.
    pub fn preload(&self) -> Result<usize, HssError> {
        let mut leases = self.leases();
        let room = self
            .max_leased
            .load(std::sync::atomic::Ordering::Relaxed)
            .saturating_sub(leases.len());
        let snap = self.snapshot()?;
        self.read_in_order(&mut leases, &snap, Bound::Unbounded, room, false)
    }

    /// The read-ahead size for the next load, from how much of the last one was used:
    /// doubled when at least half was, halved when less (see [`READ_AHEAD`]).
    fn adapt_read_ahead(&self) -> usize {
        use std::sync::atomic::Ordering::Relaxed;
        let size = self.ahead.load(Relaxed);
        let loaded = self.ahead_loaded.load(Relaxed);
        if loaded == 0 {
            return size;
        }
        let hits = self.ahead_hits.load(Relaxed);
        let next = if hits * 2 >= loaded {
            (size * 2).min(READ_AHEAD)
        } else {
            (size / 2).max(READ_AHEAD_MIN)
        };
        self.ahead.store(next, Relaxed);
        next
    }

    /// One durable commit reserving `steps` SQN steps beyond the last issued for
    /// each of `imsis` whose lease does not cover `n` more (marked with this
    /// generation, so the next generation starts above it).
    fn extend_leases(
        &self,
        leases: &mut LeaseMap,
        imsis: &[&str],
        n: u64,
        steps: u64,
    ) -> Result<(), HssError> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        let mut fresh = Vec::new();
        {
            let mut q = tx.open_table(SQN)?;
            let mut qg = tx.open_table(SQN_GEN)?;
            for &imsi in imsis {
                let Some(key) = imsi_key(imsi) else { continue };
                let Some(l) = leases.get(&key) else { continue };
                if advance(l.issued, n) <= l.reserved {
                    continue;
                }
                let reserved = advance(l.issued, steps);
                if reserved == l.issued {
                    continue; // SQN space exhausted: next_vector_batch reports it
                }
                q.insert(imsi, reserved)?;
                qg.insert(imsi, self.generation)?;
                fresh.push((key, reserved));
            }
        }
        tx.commit()?;
        self.invalidate();
        self.lease_commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // Only now, with the high-water marks durable, may these SQNs be used.
        for (key, reserved) in fresh {
            if let Some(l) = leases.get_mut(&key) {
                l.reserved = reserved;
                // A reload now starts at the durable mark.
                l.reload_start = reserved;
            }
        }
        Ok(())
    }

    /// Handle an AUTS from a synch failure (TS 33.102 §6.3.5): verify MAC-S,
    /// then set the stored SQN to SQN_MS so the next vector is SEQ_MS + 1.
    pub fn resync(&self, imsi: &str, rand: [u8; 16], auts: [u8; 14]) -> Result<(), HssError> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        {
            let t = tx.open_table(SUBSCRIBERS)?;
            let mut q = tx.open_table(SQN)?;
            let mut qg = tx.open_table(SQN_GEN)?;
            let sub = match t.get(imsi)? {
                Some(raw) => decode(imsi, raw.value())?,
                None => return Err(HssError::UnknownImsi(imsi.to_string())),
            };
            let sqn_ms = resync_sqn(&milenage_of(&sub), rand, auts)
                .map_err(|_| HssError::ResyncMacFailure(imsi.to_string()))?;
            q.insert(imsi, pepc_security::sqn_to_u64(sqn_ms))?;
            // As of the previous generation: the implicit lease follows SQN_MS.
            qg.insert(imsi, self.generation - 1)?;
        }
        tx.commit()?;
        // The next vector must follow SQN_MS: drop the lease so it is re-read.
        let mut leases = self.leases();
        self.invalidate();
        if let Some(k) = imsi_key(imsi) {
            leases.remove(&k);
        }
        Ok(())
    }
}

/// Re-exported so users can build subscribers without depending on pepc-security.
pub type SubscriberKey = Key128;

#[cfg(test)]
mod tests {
    use super::*;

    fn test_subscriber(imsi: &str, sqn: u64) -> Subscriber {
        Subscriber {
            imsi: imsi.into(),
            k: Key128::from_hex("465B5CE8B199B49FAA5F0A2EE238A6BC").unwrap(),
            op_kind: model::OpKind::Opc([7; 16]),
            amf: [0x80, 0],
            sqn,
            msisdn: String::new(),
            apn: "internet".into(),
            pdn_type: model::PdnType::Ipv4,
            qci: 9,
            arp_priority: 8,
            ambr_ul_bps: 1,
            ambr_dl_bps: 1,
        }
    }

    #[test]
    fn advance_matches_stepping_and_saturates() {
        for start in [0u64, 5, 31, 32, 33, 1000, 0xABCDEF] {
            for steps in [0u64, 1, 31, 32, 33, 100] {
                let mut s = start;
                for _ in 0..steps {
                    s = next_sqn(s).unwrap();
                }
                assert_eq!(advance(start, steps), s, "{start} + {steps}");
            }
        }
        let near_end = pepc_security::SQN_MAX - 3 * 32;
        let last = advance(near_end, 1 << 40);
        assert!(last <= pepc_security::SQN_MAX);
        assert_eq!(next_sqn(last), None, "saturates at the last reachable SQN");
        assert_eq!(advance(last, 5), last);
    }

    #[test]
    fn implicit_leases_of_successive_generations_do_not_overlap() {
        let v = 1000;
        assert_eq!(
            implicit_lease(v, 7, 7),
            (v, v),
            "written in this generation"
        );
        let mut prev_end = v;
        for now in 8..20 {
            let (start, end) = implicit_lease(v, 7, now);
            assert_eq!(
                start,
                prev_end,
                "generation {now} starts where {} ended",
                now - 1
            );
            assert_eq!(end, advance(start, IMPLICIT_STEPS));
            prev_end = end;
        }
    }

    #[test]
    fn read_ahead_merge_matches_per_subscriber_lookups() {
        let hss = Hss::in_memory().unwrap();
        let subs: Vec<Subscriber> = (0..40u64)
            .map(|i| test_subscriber(&format!("00101{:010}", i * 3), i * 100))
            .collect();
        hss.add_many(&subs).unwrap();
        // Rows as several histories leave them: a legacy mark with no generation, a
        // mark written in this generation, marks from older generations, no mark.
        let tx = hss.db.begin_write().unwrap();
        {
            let mut q = tx.open_table(SQN).unwrap();
            let mut qg = tx.open_table(SQN_GEN).unwrap();
            for (i, s) in subs.iter().enumerate() {
                match i % 5 {
                    0 => {
                        qg.remove(s.imsi.as_str()).unwrap();
                    }
                    1 => {
                        qg.insert(s.imsi.as_str(), hss.generation).unwrap();
                    }
                    2 => {
                        q.insert(s.imsi.as_str(), 5000 + i as u64).unwrap();
                    }
                    3 => {
                        q.remove(s.imsi.as_str()).unwrap();
                        qg.remove(s.imsi.as_str()).unwrap();
                    }
                    _ => {}
                }
            }
        }
        tx.commit().unwrap();
        let mut leases = LeaseMap::default();
        hss.load(&mut leases, &[subs[0].imsi.as_str()]).unwrap();
        assert_eq!(leases.len(), subs.len());
        let tx = hss.db.begin_read().unwrap();
        let q = tx.open_table(SQN).unwrap();
        let qg = tx.open_table(SQN_GEN).unwrap();
        for s in &subs {
            let want = hss.stored_mark(&s.imsi, s.sqn, &q, &qg).unwrap();
            let l = &leases[&imsi_key(&s.imsi).unwrap()];
            assert_eq!((l.issued, l.reserved), want, "{}", s.imsi);
        }
    }

    #[test]
    fn read_ahead_shrinks_for_random_order_and_grows_back_for_imsi_order() {
        use std::sync::atomic::Ordering::Relaxed;
        let hss = Hss::in_memory().unwrap();
        let subs: Vec<Subscriber> = (0..4000u64)
            .map(|i| test_subscriber(&format!("00101{i:010}"), 0))
            .collect();
        hss.add_many(&subs).unwrap();
        let mut r = 0u128;
        let mut rand = || {
            r += 1;
            r.to_be_bytes()
        };
        // Far apart: each read-ahead goes unused.
        for k in 0..12 {
            let i = (k * 997 + 13) % 2000;
            hss.next_vector(&subs[i].imsi, [0, 0xf1, 0x10], &mut rand)
                .unwrap();
        }
        assert_eq!(hss.ahead.load(Relaxed), READ_AHEAD_MIN);
        // Then in IMSI order from 2000: the read-ahead is used and grows back.
        for s in &subs[2000..4000] {
            hss.next_vector(&s.imsi, [0, 0xf1, 0x10], &mut rand)
                .unwrap();
        }
        assert_eq!(hss.ahead.load(Relaxed), READ_AHEAD);
    }

    #[test]
    fn keyed_lookups_issue_what_the_string_path_issues() {
        let imsi = "001010000000042";
        let key = ImsiKey::parse(imsi).unwrap();
        assert_eq!(ImsiKey::fifteen_digits(1_010_000_000_042), Some(key));
        assert_eq!(key.digits(), imsi);
        assert_eq!(ImsiKey::parse("0042").unwrap().digits(), "0042");
        assert_eq!(ImsiKey::fifteen_digits(1_000_000_000_000_000), None);
        let (a, b) = (Hss::in_memory().unwrap(), Hss::in_memory().unwrap());
        for h in [&a, &b] {
            h.add(&test_subscriber(imsi, 5)).unwrap();
            // Short leases: the keyed path must hand over to the general one (which
            // extends the lease with a commit) and come back.
            h.set_lease(3);
        }
        assert_eq!(
            a.profile_of(key).unwrap().unwrap().imsi,
            b.profile(imsi).unwrap().unwrap().imsi
        );
        let rand = |seed: u8| {
            let mut n = seed;
            move || {
                n = n.wrapping_add(1);
                [n; 16]
            }
        };
        let (mut ra, mut rb) = (rand(0), rand(0));
        // More than one generation's implicit lease (32 steps).
        for i in 0..80 {
            let va = a.next_vector_of(key, [0, 0xf1, 0x10], &mut ra).unwrap();
            let vb = b.next_vector(imsi, [0, 0xf1, 0x10], &mut rb).unwrap();
            assert_eq!(va, vb, "vector {i}");
        }
        assert!(a.stats().lease_commits > 0, "leases were extended");
        let unknown = ImsiKey::parse("001010000000043").unwrap();
        assert!(a.profile_of(unknown).unwrap().is_none());
        assert!(matches!(
            a.next_vector_of(unknown, [0, 0xf1, 0x10], &mut ra),
            Err(HssError::UnknownImsi(i)) if i == "001010000000043"
        ));
    }

    #[test]
    fn imsi_keys_keep_leading_zeros_apart() {
        assert_ne!(imsi_key("001010000000001"), imsi_key("01010000000001"));
        assert_eq!(imsi_key("12a"), None);
        assert_eq!(imsi_key(""), None);
        assert_eq!(imsi_key("1234567890123456"), None);
    }
}
