//! Embedded HSS: persistent subscriber store and EPS-AKA vector generation.
//!
//! Storage is `redb` (ACID, copy-on-write B-trees). Two tables:
//! `subscribers` (IMSI -> JSON profile) and `sqn` (IMSI -> last issued SQN).
//! The SQN lives apart so the hot path rewrites 8 bytes, not the profile.
//!
//! SQN policy (TS 33.102 Annex C.3.2): SQN = SEQ << 5 | IND. Each new vector
//! takes SEQ + 1 and the next IND (mod 32), so SQNs strictly increase.
//!
//! SQN leases: the `sqn` table holds a per-subscriber *high-water mark*: no SQN at or
//! below it will ever be issued again. Before a vector leaves the HSS, its SQN is
//! covered by a high-water mark committed with `Durability::Immediate` (fsync). To
//! keep fsyncs off the attach path, one commit reserves a lease of [`Hss::set_lease`]
//! steps (32 by default) for the requested subscriber *and* for up to
//! [`READ_AHEAD`] following subscribers in IMSI order that hold no lease yet; vectors
//! within a lease come from memory (cached MILENAGE instance, no JSON decode, no
//! transaction). A restart loses at most the unused rest of each lease: the next
//! SQN is above the high-water mark, which the USIM accepts (SQN > SQN_MS, within Δ).
//!
//! Measured cost (`examples/hss_bench.rs`, release, shared 2-core VM, ext4 on
//! virtio disk) before leases: `next_vector` ~230 µs/call on disk (fsync-bound,
//! ~4.4K/s), ~24 µs in memory; the crypto alone (Milenage + KASME) ~0.4 µs.

mod csv_import;
mod model;

pub use model::{OpKind, PdnType, Subscriber};

use pepc_security::{generate_vector, resync_sqn, sqn_from_u64, AuthVector, Key128, Milenage};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

const SUBSCRIBERS: TableDefinition<&str, &[u8]> = TableDefinition::new("subscribers");
const SQN: TableDefinition<&str, u64> = TableDefinition::new("sqn");

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
    Corrupt { imsi: String, what: String },
    #[error("resynchronisation for IMSI {0} refused: MAC-S in AUTS does not verify")]
    ResyncMacFailure(String),
    #[error("SQN space exhausted for IMSI {0}")]
    SqnExhausted(String),
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

/// Subscribers following one that needs a lease which get one in the same commit.
pub const READ_AHEAD: usize = 256;

/// A subscriber with a live SQN lease.
struct Leased {
    /// The decoded profile, so `get` on a leased subscriber needs no read or decode.
    profile: Subscriber,
    mil: Arc<Milenage>,
    amf: [u8; 2],
    /// Last SQN handed out.
    issued: u64,
    /// Durable high-water mark: SQNs up to here may be handed out without a commit.
    reserved: u64,
}

/// The subscriber store. `Hss` is `Send + Sync`; writes are serialised by redb and
/// the lease table by a mutex (the HSS is shared by the slices' control threads).
pub struct Hss {
    db: Database,
    leases: Mutex<HashMap<String, Leased>>,
    lease_steps: std::sync::atomic::AtomicU32,
}

/// `sqn` advanced by `steps` SQN steps (saturating at the last valid SQN).
fn advance(sqn: u64, steps: u32) -> u64 {
    let mut s = sqn;
    for _ in 0..steps {
        match next_sqn(s) {
            Some(n) => s = n,
            None => break,
        }
    }
    s
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
    serde_json::from_slice(bytes).map_err(|e| HssError::Corrupt {
        imsi: imsi.to_string(),
        // Category and position only: serde messages can quote field values (keys).
        what: format!(
            "{:?} error at line {} column {}",
            e.classify(),
            e.line(),
            e.column()
        ),
    })
}

impl Hss {
    /// Open or create the database file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Hss, HssError> {
        Self::init(Database::create(path)?)
    }

    /// A volatile store (tests, emulators).
    pub fn in_memory() -> Result<Hss, HssError> {
        Self::init(Database::builder().create_with_backend(redb::backends::InMemoryBackend::new())?)
    }

    fn init(db: Database) -> Result<Hss, HssError> {
        let tx = db.begin_write()?;
        tx.open_table(SUBSCRIBERS)?;
        tx.open_table(SQN)?;
        tx.commit()?;
        Ok(Hss {
            db,
            leases: Mutex::new(HashMap::new()),
            lease_steps: std::sync::atomic::AtomicU32::new(32),
        })
    }

    /// SQN steps reserved per durable commit (1 = a commit per vector, the strictest
    /// policy; larger leases trade unused SQNs at a restart for fewer fsyncs).
    pub fn set_lease(&self, steps: u32) {
        self.lease_steps
            .store(steps.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    fn leases(&self) -> std::sync::MutexGuard<'_, HashMap<String, Leased>> {
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
            for s in subs {
                let json = serde_json::to_vec(s).map_err(|e| HssError::Invalid {
                    field: "subscriber",
                    what: e.to_string(),
                })?;
                t.insert(s.imsi.as_str(), json.as_slice())?;
                q.insert(s.imsi.as_str(), s.sqn)?;
            }
        }
        tx.commit()?;
        let mut leases = self.leases();
        for s in subs {
            leases.remove(&s.imsi);
        }
        Ok(())
    }

    /// The subscriber with its current SQN, or `None`.
    pub fn get(&self, imsi: &str) -> Result<Option<Subscriber>, HssError> {
        // A leased subscriber's profile is in memory (the attach path asks for it
        // right before its vectors).
        if let Some(l) = self.leases().get(imsi) {
            let mut s = l.profile.clone();
            s.sqn = l.issued;
            return Ok(Some(s));
        }
        let tx = self.db.begin_read()?;
        let t = tx.open_table(SUBSCRIBERS)?;
        let q = tx.open_table(SQN)?;
        let Some(v) = t.get(imsi)? else {
            return Ok(None);
        };
        let mut s = decode(imsi, v.value())?;
        s.sqn = q.get(imsi)?.map(|g| g.value()).unwrap_or(s.sqn);
        if let Some(l) = self.leases().get(imsi) {
            s.sqn = l.issued;
        }
        Ok(Some(s))
    }

    /// All subscribers, ordered by IMSI. `sqn` is the last SQN issued when this
    /// process holds the subscriber's lease, else the durable high-water mark.
    pub fn list(&self) -> Result<Vec<Subscriber>, HssError> {
        let tx = self.db.begin_read()?;
        let t = tx.open_table(SUBSCRIBERS)?;
        let q = tx.open_table(SQN)?;
        let mut out = Vec::new();
        for item in t.iter()? {
            let (k, v) = item?;
            let mut s = decode(k.value(), v.value())?;
            s.sqn = q.get(k.value())?.map(|g| g.value()).unwrap_or(s.sqn);
            out.push(s);
        }
        let leases = self.leases();
        for s in &mut out {
            if let Some(l) = leases.get(&s.imsi) {
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
            let existed = t.remove(imsi)?.is_some();
            existed
        };
        tx.commit()?;
        self.leases().remove(imsi);
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
    /// (none when every subscriber's lease covers `n` more SQNs). Per-IMSI failures
    /// (unknown IMSI, exhausted SQN) are returned in place and do not abort the
    /// others; database errors abort the whole batch and release nothing.
    pub fn next_vector_batch(
        &self,
        imsis: &[&str],
        plmn: [u8; 3],
        n: usize,
        rand_source: &mut impl FnMut() -> [u8; 16],
    ) -> Result<Vec<Result<Vec<AuthVector>, HssError>>, HssError> {
        let steps = self
            .lease_steps
            .load(std::sync::atomic::Ordering::Relaxed)
            .max(n as u32);
        let mut leases = self.leases();
        let needs_lease = |leases: &HashMap<String, Leased>, imsi: &str| {
            leases
                .get(imsi)
                .is_none_or(|l| advance(l.issued, n as u32) > l.reserved)
        };
        if imsis.iter().any(|i| needs_lease(&leases, i)) {
            self.extend_leases(&mut leases, imsis, n, steps)?;
        }
        let mut out = Vec::with_capacity(imsis.len());
        for &imsi in imsis {
            let Some(l) = leases.get_mut(imsi) else {
                out.push(Err(HssError::UnknownImsi(imsi.to_string())));
                continue;
            };
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

    /// One durable commit that (re)leases `imsis` and reads ahead to subscribers
    /// without a lease that follow the first one in IMSI order.
    fn extend_leases(
        &self,
        leases: &mut HashMap<String, Leased>,
        imsis: &[&str],
        n: usize,
        steps: u32,
    ) -> Result<(), HssError> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(Durability::Immediate)?;
        let mut fresh: Vec<(String, Leased)> = Vec::new();
        {
            let t = tx.open_table(SUBSCRIBERS)?;
            let mut q = tx.open_table(SQN)?;
            let lease = |imsi: &str,
                         raw: &[u8],
                         q: &mut redb::Table<&str, u64>,
                         leases: &HashMap<String, Leased>|
             -> Result<Option<Leased>, HssError> {
                let sub = decode(imsi, raw)?;
                // Start after whatever is durable or already issued here.
                let stored = q.get(imsi)?.map(|g| g.value()).unwrap_or(sub.sqn);
                let issued = leases.get(imsi).map_or(stored, |l| l.issued.max(stored));
                let reserved = advance(issued, steps);
                if reserved == issued {
                    return Ok(None); // SQN space exhausted: next_vector_batch reports it
                }
                q.insert(imsi, reserved)?;
                Ok(Some(Leased {
                    mil: Arc::new(milenage_of(&sub)),
                    amf: sub.amf,
                    profile: sub,
                    issued,
                    reserved,
                }))
            };
            for &imsi in imsis {
                let covered = leases
                    .get(imsi)
                    .is_some_and(|l| advance(l.issued, n as u32) <= l.reserved);
                if covered {
                    continue;
                }
                let Some(raw) = t.get(imsi)? else { continue };
                let raw = raw.value().to_vec();
                if let Some(l) = lease(imsi, &raw, &mut q, leases)? {
                    fresh.push((imsi.to_string(), l));
                }
            }
            if let Some(&first) = imsis.first() {
                let mut ahead = Vec::new();
                for item in t.range(first..)?.skip(1) {
                    if ahead.len() >= READ_AHEAD {
                        break;
                    }
                    let (k, v) = item?;
                    if !leases.contains_key(k.value()) && !imsis.contains(&k.value()) {
                        ahead.push((k.value().to_string(), v.value().to_vec()));
                    }
                }
                for (imsi, raw) in ahead {
                    if let Some(l) = lease(&imsi, &raw, &mut q, leases)? {
                        fresh.push((imsi, l));
                    }
                }
            }
        }
        tx.commit()?;
        // Only now, with the high-water marks durable, may these SQNs be used.
        leases.extend(fresh);
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
            let sub = match t.get(imsi)? {
                Some(raw) => decode(imsi, raw.value())?,
                None => return Err(HssError::UnknownImsi(imsi.to_string())),
            };
            let sqn_ms = resync_sqn(&milenage_of(&sub), rand, auts)
                .map_err(|_| HssError::ResyncMacFailure(imsi.to_string()))?;
            q.insert(imsi, pepc_security::sqn_to_u64(sqn_ms))?;
        }
        tx.commit()?;
        // The next vector must follow SQN_MS: drop the lease so it is re-read.
        self.leases().remove(imsi);
        Ok(())
    }
}

/// Re-exported so users can build subscribers without depending on pepc-security.
pub type SubscriberKey = Key128;
