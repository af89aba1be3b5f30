//! `[debug] record`: each slice's MME recording (`pepc_mme::record`) written to a file
//! of its own, `<record>.<slice>`, between the control thread's rounds. The file holds
//! key material (HSS vectors, checkpoints), so it is created with mode 0600.

use pepc_mme::ControlPlane;
use pepc_mme::Mme;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The recording file of slice `slice` for the configured `base` path.
pub fn slice_path(base: &Path, slice: usize) -> PathBuf {
    let mut p = base.as_os_str().to_owned();
    p.push(format!(".{slice}"));
    PathBuf::from(p)
}

/// Create (truncate) a recording file, readable by its owner only.
pub fn create(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// A slice's recording on its way to its file.
pub struct RecordFile {
    w: BufWriter<File>,
    buf: Vec<u8>,
    bytes: u64,
}

impl RecordFile {
    /// Start recording `mme` (and the counter reads of `cp`) into `file`.
    pub fn start(file: File, mme: &mut Mme, cp: &mut ControlPlane) -> RecordFile {
        mme.start_recording(cp);
        let mut r = RecordFile {
            w: BufWriter::with_capacity(1 << 16, file),
            buf: Vec::new(),
            bytes: 0,
        };
        r.pump(mme, cp);
        r
    }

    /// Write what was recorded since the last call. A failed write stops the
    /// recording (logged once): the node goes on serving.
    pub fn pump(&mut self, mme: &mut Mme, cp: &mut ControlPlane) {
        if !mme.is_recording() {
            return;
        }
        mme.take_recorded(&mut self.buf);
        if self.buf.is_empty() {
            return;
        }
        if let Err(e) = self.w.write_all(&self.buf) {
            tracing::error!(
                "[debug] record: writing the recording failed after {} bytes ({e}); recording stopped",
                self.bytes
            );
            mme.stop_recording(cp);
        }
        self.bytes += self.buf.len() as u64;
        self.buf.clear();
    }

    /// Write the rest and flush (the driver stops).
    pub fn finish(&mut self, mme: &mut Mme) {
        if mme.is_recording() {
            mme.take_recorded(&mut self.buf);
            if let Err(e) = self.w.write_all(&self.buf) {
                tracing::error!("[debug] record: writing the recording's end failed: {e}");
            }
            self.buf.clear();
        }
        if let Err(e) = self.w.flush() {
            tracing::error!("[debug] record: flushing the recording failed: {e}");
        }
    }
}
