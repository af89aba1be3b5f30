//! `pepc replay FILE`: run a recording of `[debug] record` again and check that every
//! output comes out byte-identical. FILE is one slice's recording, or the configured
//! `record` path whose slices' files (`FILE.0`, `FILE.1`, ...) are all replayed.

use pepc_mme::record::replay::{replay, ReplayReport};
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

/// Replay every recording FILE names; a report per recording, or the first that
/// could not be read or differs.
pub fn run(path: &Path) -> Result<Vec<(PathBuf, ReplayReport)>, ReplayError> {
    let files = recordings(path);
    if files.is_empty() {
        return Err(ReplayError::NotFound(path.to_path_buf()));
    }
    let mut done = Vec::new();
    for f in files {
        let bytes = std::fs::read(&f).map_err(|e| ReplayError::Read(f.clone(), e))?;
        let r = replay(&bytes, std::time::Instant::now())
            .map_err(|e| ReplayError::Bad(f.clone(), e))?;
        if let Some(m) = r.mismatch.clone() {
            return Err(ReplayError::Differs {
                path: f,
                slice: r.slice.0,
                slices: r.slice.1,
                mismatch: Box::new(m),
            });
        }
        done.push((f, r));
    }
    Ok(done)
}
