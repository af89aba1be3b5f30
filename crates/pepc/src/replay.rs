//! `pepc replay FILE`: run a recording of `[debug] record` again and check that every
//! output comes out byte-identical. FILE is one slice's recording, or the configured
//! `record` path whose slices' files (`FILE.0`, `FILE.1`, ...) are all replayed.

use pepc_mme::record::replay::{replay, ReplayReport};
use pepc_mme::record::replay_ue::{replay_ues, Pick, UeReplayReport};
use std::path::{Path, PathBuf};

/// Why a replay could not be run, or where it differed.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("no recording at {0} (nor {0}.0, {0}.1, ...)")]
    NotFound(PathBuf),
    #[error("reading {0}: {1}")]
    Read(PathBuf, std::io::Error),
    #[error("{0}: {1}")]
    Bad(PathBuf, pepc_mme::record::RecordError),
    #[error("{path}: slice {slice} of {slices}: the replay differs at {mismatch}")]
    Differs {
        path: PathBuf,
        slice: usize,
        slices: usize,
        mismatch: Box<pepc_mme::record::replay::Mismatch>,
    },
    #[error(
        "{path}: slice {slice} of {slices}: UE {imsi} replayed on its own from its \
         snapshot (taken before call {snapshot_at}) differs at {mismatch}"
    )]
    UeDiffers {
        path: PathBuf,
        slice: usize,
        slices: usize,
        imsi: u64,
        snapshot_at: u64,
        mismatch: Box<pepc_mme::record::replay::Mismatch>,
    },
}

/// One recording replayed: the whole of it, and the UEs replayed on their own.
pub struct Replayed {
    pub path: PathBuf,
    pub whole: ReplayReport,
    /// The call from which the UEs' snapshots were taken (`None`: none asked for).
    pub from_call: Option<u64>,
    pub ues: Vec<UeReplayReport>,
}

/// The recordings FILE names: itself, or its slices' files.
fn recordings(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    (0..)
        .map(|s| pepc_node::record::slice_path(path, s))
        .take_while(|p| p.is_file())
        .collect()
}

/// Replay every recording FILE names, and (`ues`) UEs on their own from their
/// snapshots taken from a percentage of each recording's calls on; a report per
/// recording, or the first that could not be read or differs.
pub fn run(path: &Path, ues: Option<(Pick, u8)>) -> Result<Vec<Replayed>, ReplayError> {
    let files = recordings(path);
    if files.is_empty() {
        return Err(ReplayError::NotFound(path.to_path_buf()));
    }
    let mut done = Vec::new();
    for f in files {
        let bytes = std::fs::read(&f).map_err(|e| ReplayError::Read(f.clone(), e))?;
        let bad = |e| ReplayError::Bad(f.clone(), e);
        let epoch = std::time::Instant::now();
        let (whole, from_call, ue_reports) = match &ues {
            None => (replay(&bytes, epoch).map_err(bad)?, None, Vec::new()),
            Some((pick, at)) => {
                let calls = pepc_mme::record::Records::new(&bytes)
                    .map_err(bad)?
                    .filter(|r| matches!(r, Ok(pepc_mme::record::Record::Call(_))))
                    .count() as u64;
                let from = calls * u64::from(*at) / 100;
                let (w, u) = replay_ues(&bytes, epoch, pick, from).map_err(bad)?;
                (w, Some(from), u)
            }
        };
        if let Some(m) = whole.mismatch.clone() {
            return Err(ReplayError::Differs {
                path: f,
                slice: whole.slice.0,
                slices: whole.slice.1,
                mismatch: Box::new(m),
            });
        }
        if let Some(u) = ue_reports.iter().find(|u| u.mismatch.is_some()) {
            return Err(ReplayError::UeDiffers {
                path: f,
                slice: whole.slice.0,
                slices: whole.slice.1,
                imsi: u.imsi,
                snapshot_at: u.snapshot_at.unwrap_or_default(),
                mismatch: Box::new(u.mismatch.clone().expect("found by it")),
            });
        }
        done.push(Replayed {
            path: f,
            whole,
            from_call,
            ues: ue_reports,
        });
    }
    Ok(done)
}
