//! Offline charging records: the slices' usage records
//! ([`pepc_mme::Output::UsageRecord`], one per bearer at its release, the session's end
//! and interim) written as JSON lines by a thread of their own, the file rotated by
//! size. A control thread never waits for the disk: records go through a bounded
//! queue, and those that find it full are counted as dropped (and said).
//!
//! One line per record:
//! `{"imsi":"001010000000001","apn":"internet","ue_ip":"10.45.0.2","ebi":6,
//! "default_ebi":5,"qci":1,"cause":"bearer-released","sequence":0,"start_unix_ms":..,
//! "end_unix_ms":..,"duration_ms":..,"ul_bytes":..,"dl_bytes":..,"ul_packets":..,
//! "dl_packets":..,"ul_dropped":..,"dl_dropped":..,"rules":[{"name":"voice",
//! "rating_group":100,"ul_bytes":..,"dl_bytes":..}]}`: the bearer's volumes, and
//! each rule's (null when the bearer had no counter left for it).

use pepc_mme::pcrf::UsageRecord;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

/// Where and how records are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdrConfig {
    pub path: PathBuf,
    /// A file past this size is rotated: `path` → `path.1` → ... → `path.<keep>`.
    pub rotate_bytes: u64,
    pub keep: usize,
}

/// Records waiting for the writer, at most; beyond, they are dropped and counted.
pub const QUEUE: usize = 65_536;

/// Figures of the writer.
#[derive(Debug, Default)]
pub struct CdrStats {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
    pub rotations: AtomicU64,
    pub write_errors: AtomicU64,
}

/// A slice's handle: hands records to the writer without waiting.
#[derive(Clone)]
pub struct CdrSink {
    tx: mpsc::SyncSender<UsageRecord>,
    stats: Arc<CdrStats>,
}

impl CdrSink {
    pub fn put(&self, r: UsageRecord) {
        if self.tx.try_send(r).is_err() {
            let n = self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            if n.is_power_of_two() {
                tracing::warn!(
                    "usage records dropped: the writer is behind ({} so far)",
                    n + 1
                );
            }
        }
    }
}

/// The writer thread; dropping it (after every sink) flushes and joins.
pub struct CdrWriter {
    sink: Option<CdrSink>,
    thread: Option<JoinHandle<()>>,
    pub stats: Arc<CdrStats>,
}

impl CdrWriter {
    /// Its thread, named `thread` (the node's plan names it).
    pub fn start(cfg: CdrConfig, thread: &str) -> std::io::Result<CdrWriter> {
        let file = open(&cfg.path)?;
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let stats = Arc::new(CdrStats::default());
        let st = stats.clone();
        let thread = std::thread::Builder::new()
            .name(thread.into())
            .spawn(move || run(cfg, file, rx, &st))?;
        Ok(CdrWriter {
            sink: Some(CdrSink {
                tx,
                stats: stats.clone(),
            }),
            thread: Some(thread),
            stats,
        })
    }

    pub fn sink(&self) -> CdrSink {
        self.sink.clone().expect("until dropped")
    }
}

impl Drop for CdrWriter {
    fn drop(&mut self) {
        self.sink = None;
        if let Some(t) = self.thread.take() {
            // It ends once every slice's sink is gone too (the slices stop first);
            // after a failure slice threads may live on: wait a little, not forever
            // (the writer flushes after every batch anyway).
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while !t.is_finished() && std::time::Instant::now() < until {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

fn open(path: &Path) -> std::io::Result<std::io::BufWriter<std::fs::File>> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    Ok(std::io::BufWriter::new(f))
}

fn run(
    cfg: CdrConfig,
    mut file: std::io::BufWriter<std::fs::File>,
    rx: mpsc::Receiver<UsageRecord>,
    stats: &CdrStats,
) {
    let mut size = std::fs::metadata(&cfg.path).map_or(0, |m| m.len());
    let mut line = Vec::with_capacity(512);
    while let Ok(first) = rx.recv() {
        for r in std::iter::once(first).chain(rx.try_iter()) {
            line.clear();
            write_line(&mut line, &r);
            if let Err(e) = file.write_all(&line) {
                stats.write_errors.fetch_add(1, Ordering::Relaxed);
                tracing::error!("usage record not written to {}: {e}", cfg.path.display());
                continue;
            }
            size += line.len() as u64;
            stats.written.fetch_add(1, Ordering::Relaxed);
            if size >= cfg.rotate_bytes {
                let _ = file.flush();
                match rotate(&cfg).and_then(|()| open(&cfg.path)) {
                    Ok(f) => {
                        file = f;
                        size = 0;
                        stats.rotations.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => tracing::error!("usage records not rotated: {e}"),
                }
            }
        }
        if let Err(e) = file.flush() {
            stats.write_errors.fetch_add(1, Ordering::Relaxed);
            tracing::error!("usage records not flushed to {}: {e}", cfg.path.display());
        }
    }
}

/// `path.<keep-1>` → `path.<keep>` ... `path` → `path.1` (the oldest beyond goes).
fn rotate(cfg: &CdrConfig) -> std::io::Result<()> {
    let name = |i: usize| {
        let mut p = cfg.path.clone().into_os_string();
        p.push(format!(".{i}"));
        PathBuf::from(p)
    };
    for i in (1..cfg.keep.max(1)).rev() {
        if name(i).exists() {
            std::fs::rename(name(i), name(i + 1))?;
        }
    }
    std::fs::rename(&cfg.path, name(1))
}

fn write_line(out: &mut Vec<u8>, r: &UsageRecord) {
    let end = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let dur = r.duration.as_millis() as u64;
    let rules: Vec<serde_json::Value> = r
        .rules
        .iter()
        .map(|u| {
            serde_json::json!({"name": u.name, "rating_group": u.rating_group,
                "ul_bytes": u.ul_bytes, "dl_bytes": u.dl_bytes})
        })
        .collect();
    let v = serde_json::json!({
        "imsi": format!("{:015}", r.imsi),
        "apn": r.apn,
        "ue_ip": r.ue_ip.to_string(),
        "ebi": r.ebi,
        "default_ebi": r.default_ebi,
        "qci": r.qci,
        "cause": r.cause.as_str(),
        "sequence": r.sequence,
        "start_unix_ms": end.saturating_sub(dur),
        "end_unix_ms": end,
        "duration_ms": dur,
        "ul_bytes": r.usage.ul_bytes,
        "dl_bytes": r.usage.dl_bytes,
        "ul_packets": r.usage.ul_packets,
        "dl_packets": r.usage.dl_packets,
        "ul_dropped": r.usage.ul_dropped,
        "dl_dropped": r.usage.dl_dropped,
        "rules": rules,
    });
    // A Value always serialises.
    let _ = serde_json::to_writer(&mut *out, &v);
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use pepc_mme::pcrf::RecordCause;

    fn rec(i: u64) -> UsageRecord {
        UsageRecord {
            imsi: 1010000000000 + i,
            apn: "internet".into(),
            ue_ip: std::net::Ipv4Addr::new(10, 45, 0, 2),
            ebi: 6,
            default_ebi: 5,
            qci: 1,
            rules: vec![pepc_mme::pcrf::RuleUsage {
                name: "voice".into(),
                rating_group: Some(100),
                ul_bytes: Some(10),
                dl_bytes: Some(20),
            }],
            usage: pepc_slice::counters::Usage {
                ul_bytes: 1000,
                dl_bytes: 2000,
                ..Default::default()
            },
            duration: std::time::Duration::from_secs(3),
            cause: RecordCause::BearerReleased,
            sequence: 0,
        }
    }

    #[test]
    fn records_are_json_lines_and_rotate() {
        let dir = std::env::temp_dir().join(format!("pepc-cdr-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cdr.jsonl");
        let w = CdrWriter::start(
            CdrConfig {
                path: path.clone(),
                rotate_bytes: 2000,
                keep: 2,
            },
            "test-cdr",
        )
        .unwrap();
        let s = w.sink();
        for i in 0..20 {
            s.put(rec(i));
        }
        drop(s);
        let stats = w.stats.clone();
        drop(w);
        assert_eq!(stats.written.load(Ordering::Relaxed), 20);
        assert!(stats.rotations.load(Ordering::Relaxed) >= 2);
        let mut lines = vec![];
        for p in [
            dir.join("cdr.jsonl.2"),
            dir.join("cdr.jsonl.1"),
            path.clone(),
        ] {
            if let Ok(t) = std::fs::read_to_string(&p) {
                lines.extend(t.lines().map(String::from));
            }
        }
        // Only `keep` rotated files stay: the oldest records went with the third.
        assert!(!dir.join("cdr.jsonl.3").exists());
        let last: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
        assert_eq!(last["imsi"], "001010000000019");
        assert_eq!(last["dl_bytes"], 2000);
        assert_eq!(last["rules"][0]["name"], "voice");
        assert_eq!(last["rules"][0]["dl_bytes"], 20);
        assert_eq!(last["cause"], "bearer-released");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
