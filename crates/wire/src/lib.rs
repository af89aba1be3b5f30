//! Zero-copy wire formats for the pepc data path, in the style of smoltcp's `wire`
//! module: a typed view (`XxxPacket<T: AsRef<[u8]>>`) that checks lengths once and reads
//! fields in place, plus a plain `XxxRepr` to parse and emit off the hot path.
//!
//! Decoders never panic: every malformed input yields a [`WireError`] naming what was
//! wrong.

pub mod buf;
pub mod checksum;
mod error;
pub mod pcap;

pub use buf::{Batch, PacketBuf, PacketMeta, Verdict, BATCH_SIZE, BUF_SIZE, HEADROOM};
pub use error::WireError;
