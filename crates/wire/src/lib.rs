//! Zero-copy wire formats for the pepc data path, in the style of smoltcp's `wire`
//! module: a typed view (`XxxPacket<T: AsRef<[u8]>>`) that checks lengths once and reads
//! fields in place, plus a plain `XxxRepr` to parse and emit off the hot path.
//!
//! - [`gtpu`]: GTP-U (TS 29.281) view/Repr, in-place G-PDU encap/decap, Echo, Error
//!   Indication, End Marker builders and IE parsing.
//! - [`ipv4`], [`udp`], [`checksum`]: IPv4/UDP views and Reprs, Internet checksum and
//!   RFC 1624 incremental update.
//! - [`flow`]: the per-packet 5-tuple.
//! - [`pcap`]: capture reading (pcap/pcapng), writing (raw IP) and tshark checks, for tests.
//!
//! Decoders never panic: every malformed input yields a [`WireError`] naming what was
//! wrong.
#![forbid(unsafe_code)]

pub mod buf;
pub mod checksum;
mod error;
pub mod flow;
pub mod gtpu;
pub mod ipv4;
pub mod pcap;
pub mod udp;

pub use buf::{Batch, PacketBuf, PacketMeta, Verdict, BATCH_SIZE, BUF_SIZE, HEADROOM, NO_BEARER};
pub use error::WireError;
pub use flow::{five_tuple, FiveTuple};
pub use gtpu::{decap_gpdu, encap_gpdu, GtpuPacket, GtpuRepr, GTPU_PORT};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use udp::{UdpPacket, UdpRepr};
