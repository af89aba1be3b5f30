//! SCTP packet format (RFC 9260 §3): a zero-copy view of the common header plus a chunk
//! iterator, typed borrowed chunk representations for parsing, and emitters.
//!
//! Decoders never panic: every malformed input yields an [`Error`] naming what was wrong.

use core::fmt;

/// Length of the SCTP common header.
pub const COMMON_HEADER_LEN: usize = 12;
/// Length of a chunk header (type, flags, length).
pub const CHUNK_HEADER_LEN: usize = 4;
/// Length of a DATA chunk header including the chunk header.
pub const DATA_HEADER_LEN: usize = 16;

/// Chunk type codes (RFC 9260 §3.2).
pub mod chunk_type {
    pub const DATA: u8 = 0;
    pub const INIT: u8 = 1;
    pub const INIT_ACK: u8 = 2;
    pub const SACK: u8 = 3;
    pub const HEARTBEAT: u8 = 4;
    pub const HEARTBEAT_ACK: u8 = 5;
    pub const ABORT: u8 = 6;
    pub const SHUTDOWN: u8 = 7;
    pub const SHUTDOWN_ACK: u8 = 8;
    pub const ERROR: u8 = 9;
    pub const COOKIE_ECHO: u8 = 10;
    pub const COOKIE_ACK: u8 = 11;
    pub const SHUTDOWN_COMPLETE: u8 = 14;
}

/// INIT / INIT ACK parameter types (RFC 9260 §3.3.2).
pub mod param_type {
    pub const HEARTBEAT_INFO: u16 = 1;
    pub const IPV4_ADDRESS: u16 = 5;
    pub const IPV6_ADDRESS: u16 = 6;
    pub const STATE_COOKIE: u16 = 7;
    pub const UNRECOGNIZED_PARAMETER: u16 = 8;
    pub const COOKIE_PRESERVATIVE: u16 = 9;
    pub const HOST_NAME_ADDRESS: u16 = 11;
    pub const SUPPORTED_ADDRESS_TYPES: u16 = 12;
    pub const ECN_CAPABLE: u16 = 0x8000;
    pub const FORWARD_TSN_SUPPORTED: u16 = 0xC000;
}

/// Error cause codes (RFC 9260 §3.3.10).
pub mod cause {
    pub const INVALID_STREAM_IDENTIFIER: u16 = 1;
    pub const MISSING_MANDATORY_PARAMETER: u16 = 2;
    pub const STALE_COOKIE: u16 = 3;
    pub const OUT_OF_RESOURCE: u16 = 4;
    pub const UNRECOGNIZED_CHUNK_TYPE: u16 = 6;
    pub const INVALID_MANDATORY_PARAMETER: u16 = 7;
    pub const NO_USER_DATA: u16 = 9;
    pub const PROTOCOL_VIOLATION: u16 = 13;
    pub const USER_INITIATED_ABORT: u16 = 12;
}

/// DATA chunk flag bits.
pub mod data_flags {
    /// Ending fragment.
    pub const E: u8 = 0x01;
    /// Beginning fragment.
    pub const B: u8 = 0x02;
    /// Unordered.
    pub const U: u8 = 0x04;
    /// SACK immediately (RFC 7053).
    pub const I: u8 = 0x08;
}

/// What was wrong with an SCTP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer is shorter than the structure `what` needs.
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A length field is impossible (`what` names the field).
    BadLength { what: &'static str, value: usize },
    /// CRC32c does not match.
    BadChecksum { stored: u32, computed: u32 },
    /// A field holds a value the protocol forbids.
    BadField { what: &'static str, value: u32 },
    /// A chunk type was expected but another was found.
    WrongChunkType { expected: u8, found: u8 },
    /// A mandatory parameter is absent.
    MissingParameter { what: &'static str },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Error::Truncated { what, need, have } => {
                write!(f, "truncated {what}: need {need} bytes, have {have}")
            }
            Error::BadLength { what, value } => write!(f, "bad length in {what}: {value}"),
            Error::BadChecksum { stored, computed } => write!(
                f,
                "bad CRC32c: stored {stored:#010x}, computed {computed:#010x}"
            ),
            Error::BadField { what, value } => write!(f, "bad value {value:#x} in {what}"),
            Error::WrongChunkType { expected, found } => {
                write!(f, "expected chunk type {expected}, found {found}")
            }
            Error::MissingParameter { what } => write!(f, "missing mandatory parameter {what}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = core::result::Result<T, Error>;

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
#[inline]
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline]
fn need(what: &'static str, buf: &[u8], n: usize) -> Result<()> {
    if buf.len() < n {
        Err(Error::Truncated {
            what,
            need: n,
            have: buf.len(),
        })
    } else {
        Ok(())
    }
}

#[inline]
fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// CRC32c of a whole SCTP packet as if its checksum field were zero (RFC 9260 App. B).
pub fn compute_checksum(packet: &[u8]) -> u32 {
    if packet.len() < COMMON_HEADER_LEN {
        return crc32c::crc32c(packet);
    }
    let c = crc32c::crc32c(&packet[..8]);
    let c = crc32c::crc32c_append(c, &[0, 0, 0, 0]);
    crc32c::crc32c_append(c, &packet[COMMON_HEADER_LEN..])
}

/// Zero-copy view of an SCTP packet (common header + chunks).
#[derive(Debug, Clone, Copy)]
pub struct SctpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SctpPacket<T> {
    /// Wraps a buffer without checks; field accessors may panic on short buffers.
    /// Use [`SctpPacket::new_checked`] for untrusted input.
    pub fn new_unchecked(buffer: T) -> Self {
        SctpPacket { buffer }
    }

    /// Wraps a buffer after checking it holds at least the common header and that the
    /// chunk area is a whole number of 4-byte words or ends in a final unpadded chunk.
    pub fn new_checked(buffer: T) -> Result<Self> {
        need("SCTP common header", buffer.as_ref(), COMMON_HEADER_LEN)?;
        Ok(SctpPacket { buffer })
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 0)
    }
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }
    pub fn verification_tag(&self) -> u32 {
        be32(self.buffer.as_ref(), 4)
    }
    /// The checksum as stored (CRC32c is transmitted least significant byte first).
    pub fn checksum(&self) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_le_bytes([b[8], b[9], b[10], b[11]])
    }

    /// Checks the CRC32c.
    pub fn verify_checksum(&self) -> Result<()> {
        let computed = compute_checksum(self.buffer.as_ref());
        let stored = self.checksum();
        if computed == stored {
            Ok(())
        } else {
            Err(Error::BadChecksum { stored, computed })
        }
    }

    /// The bytes after the common header.
    pub fn chunk_bytes(&self) -> &[u8] {
        &self.buffer.as_ref()[COMMON_HEADER_LEN..]
    }

    /// Iterates over the chunks; yields an error (then stops) on a malformed chunk.
    pub fn chunks(&self) -> ChunkIter<'_> {
        ChunkIter {
            rest: self.chunk_bytes(),
            failed: false,
        }
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SctpPacket<T> {
    pub fn set_src_port(&mut self, v: u16) {
        self.buffer.as_mut()[0..2].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_dst_port(&mut self, v: u16) {
        self.buffer.as_mut()[2..4].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_verification_tag(&mut self, v: u32) {
        self.buffer.as_mut()[4..8].copy_from_slice(&v.to_be_bytes());
    }
    /// Computes and stores the CRC32c over the whole buffer.
    pub fn fill_checksum(&mut self) {
        let c = compute_checksum(self.buffer.as_ref());
        self.buffer.as_mut()[8..12].copy_from_slice(&c.to_le_bytes());
    }
}

/// One raw chunk: type, flags and the value (after the 4-byte header, without padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawChunk<'a> {
    pub chunk_type: u8,
    pub flags: u8,
    pub value: &'a [u8],
}

impl<'a> RawChunk<'a> {
    /// Parses the chunk into its typed form.
    pub fn parse(&self) -> Result<Chunk<'a>> {
        Chunk::parse(*self)
    }
}

/// Iterates over chunks in `bytes` (the part of a packet after the common header).
pub fn chunk_iter(bytes: &[u8]) -> ChunkIter<'_> {
    ChunkIter {
        rest: bytes,
        failed: false,
    }
}

/// Iterator over the chunks of a packet.
#[derive(Debug, Clone)]
pub struct ChunkIter<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> Iterator for ChunkIter<'a> {
    type Item = Result<RawChunk<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let b = self.rest;
        if b.len() < CHUNK_HEADER_LEN {
            self.failed = true;
            return Some(Err(Error::Truncated {
                what: "chunk header",
                need: CHUNK_HEADER_LEN,
                have: b.len(),
            }));
        }
        let len = be16(b, 2) as usize;
        if len < CHUNK_HEADER_LEN {
            self.failed = true;
            return Some(Err(Error::BadLength {
                what: "chunk length",
                value: len,
            }));
        }
        if len > b.len() {
            self.failed = true;
            return Some(Err(Error::Truncated {
                what: "chunk",
                need: len,
                have: b.len(),
            }));
        }
        let chunk = RawChunk {
            chunk_type: b[0],
            flags: b[1],
            value: &b[CHUNK_HEADER_LEN..len],
        };
        // The final chunk's padding may be missing; tolerate that.
        let adv = pad4(len).min(b.len());
        self.rest = &b[adv..];
        Some(Ok(chunk))
    }
}

/// Iterator over TLV parameters (INIT/INIT ACK parameters, error causes).
#[derive(Debug, Clone)]
pub struct ParamIter<'a> {
    rest: &'a [u8],
    failed: bool,
}

impl<'a> ParamIter<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        ParamIter {
            rest: bytes,
            failed: false,
        }
    }
}

/// One TLV parameter (or error cause): type and value without the 4-byte header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Param<'a> {
    pub param_type: u16,
    pub value: &'a [u8],
}

impl<'a> Iterator for ParamIter<'a> {
    type Item = Result<Param<'a>>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.rest.is_empty() {
            return None;
        }
        let b = self.rest;
        if b.len() < 4 {
            self.failed = true;
            return Some(Err(Error::Truncated {
                what: "parameter header",
                need: 4,
                have: b.len(),
            }));
        }
        let len = be16(b, 2) as usize;
        if len < 4 {
            self.failed = true;
            return Some(Err(Error::BadLength {
                what: "parameter length",
                value: len,
            }));
        }
        if len > b.len() {
            self.failed = true;
            return Some(Err(Error::Truncated {
                what: "parameter",
                need: len,
                have: b.len(),
            }));
        }
        let p = Param {
            param_type: be16(b, 0),
            value: &b[4..len],
        };
        self.rest = &b[pad4(len).min(b.len())..];
        Some(Ok(p))
    }
}

/// DATA chunk (RFC 9260 §3.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataChunk<'a> {
    /// Flag bits, see [`data_flags`].
    pub flags: u8,
    pub tsn: u32,
    pub stream: u16,
    pub ssn: u16,
    pub ppid: u32,
    pub payload: &'a [u8],
}

impl DataChunk<'_> {
    pub fn beginning(&self) -> bool {
        self.flags & data_flags::B != 0
    }
    pub fn ending(&self) -> bool {
        self.flags & data_flags::E != 0
    }
    pub fn unordered(&self) -> bool {
        self.flags & data_flags::U != 0
    }
    pub fn immediate(&self) -> bool {
        self.flags & data_flags::I != 0
    }
}

/// INIT or INIT ACK chunk (RFC 9260 §3.3.2, §3.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InitChunk<'a> {
    pub initiate_tag: u32,
    pub a_rwnd: u32,
    pub out_streams: u16,
    pub in_streams: u16,
    pub initial_tsn: u32,
    /// Raw encoded optional/variable parameters (TLVs, each padded to 4 bytes).
    pub params: &'a [u8],
}

impl<'a> InitChunk<'a> {
    pub fn params(&self) -> ParamIter<'a> {
        ParamIter::new(self.params)
    }
    /// The State Cookie parameter value (mandatory in INIT ACK).
    pub fn state_cookie(&self) -> Option<&'a [u8]> {
        self.params()
            .filter_map(|p| p.ok())
            .find(|p| p.param_type == param_type::STATE_COOKIE)
            .map(|p| p.value)
    }
}

/// SACK chunk (RFC 9260 §3.3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SackChunk<'a> {
    pub cum_tsn_ack: u32,
    pub a_rwnd: u32,
    /// Raw gap ack blocks: pairs of (start, end) offsets from `cum_tsn_ack`.
    pub gap_blocks: &'a [u8],
    /// Raw duplicate TSNs.
    pub dup_tsns: &'a [u8],
}

impl<'a> SackChunk<'a> {
    /// Gap ack blocks as (start, end) offsets relative to the cumulative TSN ack.
    pub fn gap_blocks(&self) -> impl Iterator<Item = (u16, u16)> + 'a {
        self.gap_blocks
            .chunks_exact(4)
            .map(|c| (be16(c, 0), be16(c, 2)))
    }
    pub fn dup_tsns(&self) -> impl Iterator<Item = u32> + 'a {
        self.dup_tsns.chunks_exact(4).map(|c| be32(c, 0))
    }
    pub fn num_gap_blocks(&self) -> usize {
        self.gap_blocks.len() / 4
    }
}

/// A parsed chunk borrowing from the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunk<'a> {
    Data(DataChunk<'a>),
    Init(InitChunk<'a>),
    InitAck(InitChunk<'a>),
    Sack(SackChunk<'a>),
    /// Value is the Heartbeat Info parameter TLV, echoed verbatim in the ACK.
    Heartbeat {
        info: &'a [u8],
    },
    HeartbeatAck {
        info: &'a [u8],
    },
    /// `t` = T bit (verification tag reflected); causes are raw TLVs.
    Abort {
        t: bool,
        causes: &'a [u8],
    },
    Shutdown {
        cum_tsn_ack: u32,
    },
    ShutdownAck,
    ShutdownComplete {
        t: bool,
    },
    Error {
        causes: &'a [u8],
    },
    CookieEcho {
        cookie: &'a [u8],
    },
    CookieAck,
    /// Any chunk type we do not implement.
    Unknown(RawChunk<'a>),
}

impl<'a> Chunk<'a> {
    /// Parses a raw chunk into its typed form.
    pub fn parse(raw: RawChunk<'a>) -> Result<Chunk<'a>> {
        use chunk_type::*;
        let v = raw.value;
        Ok(match raw.chunk_type {
            DATA => {
                need("DATA chunk", v, DATA_HEADER_LEN - CHUNK_HEADER_LEN)?;
                Chunk::Data(DataChunk {
                    flags: raw.flags,
                    tsn: be32(v, 0),
                    stream: be16(v, 4),
                    ssn: be16(v, 6),
                    ppid: be32(v, 8),
                    payload: &v[12..],
                })
            }
            INIT | INIT_ACK => {
                let what = if raw.chunk_type == INIT {
                    "INIT chunk"
                } else {
                    "INIT ACK chunk"
                };
                need(what, v, 16)?;
                let c = InitChunk {
                    initiate_tag: be32(v, 0),
                    a_rwnd: be32(v, 4),
                    out_streams: be16(v, 8),
                    in_streams: be16(v, 10),
                    initial_tsn: be32(v, 12),
                    params: &v[16..],
                };
                // Check the TLVs are well-formed now so users can trust the iterator.
                for p in c.params() {
                    p?;
                }
                if raw.chunk_type == INIT {
                    Chunk::Init(c)
                } else {
                    Chunk::InitAck(c)
                }
            }
            SACK => {
                need("SACK chunk", v, 12)?;
                let ngap = be16(v, 8) as usize;
                let ndup = be16(v, 10) as usize;
                let total = 12 + 4 * ngap + 4 * ndup;
                need("SACK gap/dup list", v, total)?;
                Chunk::Sack(SackChunk {
                    cum_tsn_ack: be32(v, 0),
                    a_rwnd: be32(v, 4),
                    gap_blocks: &v[12..12 + 4 * ngap],
                    dup_tsns: &v[12 + 4 * ngap..total],
                })
            }
            HEARTBEAT => Chunk::Heartbeat { info: v },
            HEARTBEAT_ACK => Chunk::HeartbeatAck { info: v },
            ABORT => Chunk::Abort {
                t: raw.flags & 1 != 0,
                causes: v,
            },
            SHUTDOWN => {
                need("SHUTDOWN chunk", v, 4)?;
                Chunk::Shutdown {
                    cum_tsn_ack: be32(v, 0),
                }
            }
            SHUTDOWN_ACK => Chunk::ShutdownAck,
            SHUTDOWN_COMPLETE => Chunk::ShutdownComplete {
                t: raw.flags & 1 != 0,
            },
            ERROR => Chunk::Error { causes: v },
            COOKIE_ECHO => Chunk::CookieEcho { cookie: v },
            COOKIE_ACK => Chunk::CookieAck,
            _ => Chunk::Unknown(raw),
        })
    }

    /// The chunk type code.
    pub fn chunk_type(&self) -> u8 {
        use chunk_type::*;
        match self {
            Chunk::Data(_) => DATA,
            Chunk::Init(_) => INIT,
            Chunk::InitAck(_) => INIT_ACK,
            Chunk::Sack(_) => SACK,
            Chunk::Heartbeat { .. } => HEARTBEAT,
            Chunk::HeartbeatAck { .. } => HEARTBEAT_ACK,
            Chunk::Abort { .. } => ABORT,
            Chunk::Shutdown { .. } => SHUTDOWN,
            Chunk::ShutdownAck => SHUTDOWN_ACK,
            Chunk::ShutdownComplete { .. } => SHUTDOWN_COMPLETE,
            Chunk::Error { .. } => ERROR,
            Chunk::CookieEcho { .. } => COOKIE_ECHO,
            Chunk::CookieAck => COOKIE_ACK,
            Chunk::Unknown(r) => r.chunk_type,
        }
    }

    /// Encoded length of the chunk without trailing padding.
    pub fn encoded_len(&self) -> usize {
        CHUNK_HEADER_LEN
            + match self {
                Chunk::Data(d) => 12 + d.payload.len(),
                Chunk::Init(c) | Chunk::InitAck(c) => 16 + unpadded_params_len(c.params),
                Chunk::Sack(s) => 12 + s.gap_blocks.len() + s.dup_tsns.len(),
                Chunk::Heartbeat { info } | Chunk::HeartbeatAck { info } => info.len(),
                Chunk::Abort { causes, .. } | Chunk::Error { causes } => causes.len(),
                Chunk::Shutdown { .. } => 4,
                Chunk::ShutdownAck | Chunk::ShutdownComplete { .. } | Chunk::CookieAck => 0,
                Chunk::CookieEcho { cookie } => cookie.len(),
                Chunk::Unknown(r) => r.value.len(),
            }
    }

    /// Appends the chunk (with zero padding to 4 bytes) to `out`.
    pub fn emit(&self, out: &mut Vec<u8>) {
        let len = self.encoded_len();
        let flags = match self {
            Chunk::Data(d) => d.flags,
            Chunk::Abort { t, .. } | Chunk::ShutdownComplete { t } => *t as u8,
            Chunk::Unknown(r) => r.flags,
            _ => 0,
        };
        out.reserve(pad4(len));
        out.push(self.chunk_type());
        out.push(flags);
        out.extend_from_slice(&(len as u16).to_be_bytes());
        match self {
            Chunk::Data(d) => {
                out.extend_from_slice(&d.tsn.to_be_bytes());
                out.extend_from_slice(&d.stream.to_be_bytes());
                out.extend_from_slice(&d.ssn.to_be_bytes());
                out.extend_from_slice(&d.ppid.to_be_bytes());
                out.extend_from_slice(d.payload);
            }
            Chunk::Init(c) | Chunk::InitAck(c) => {
                out.extend_from_slice(&c.initiate_tag.to_be_bytes());
                out.extend_from_slice(&c.a_rwnd.to_be_bytes());
                out.extend_from_slice(&c.out_streams.to_be_bytes());
                out.extend_from_slice(&c.in_streams.to_be_bytes());
                out.extend_from_slice(&c.initial_tsn.to_be_bytes());
                out.extend_from_slice(&c.params[..unpadded_params_len(c.params)]);
            }
            Chunk::Sack(s) => {
                out.extend_from_slice(&s.cum_tsn_ack.to_be_bytes());
                out.extend_from_slice(&s.a_rwnd.to_be_bytes());
                out.extend_from_slice(&((s.gap_blocks.len() / 4) as u16).to_be_bytes());
                out.extend_from_slice(&((s.dup_tsns.len() / 4) as u16).to_be_bytes());
                out.extend_from_slice(s.gap_blocks);
                out.extend_from_slice(s.dup_tsns);
            }
            Chunk::Heartbeat { info } | Chunk::HeartbeatAck { info } => out.extend_from_slice(info),
            Chunk::Abort { causes, .. } | Chunk::Error { causes } => out.extend_from_slice(causes),
            Chunk::Shutdown { cum_tsn_ack } => out.extend_from_slice(&cum_tsn_ack.to_be_bytes()),
            Chunk::CookieEcho { cookie } => out.extend_from_slice(cookie),
            Chunk::Unknown(r) => out.extend_from_slice(r.value),
            Chunk::ShutdownAck | Chunk::ShutdownComplete { .. } | Chunk::CookieAck => {}
        }
        out.resize(out.len() + (pad4(len) - len), 0);
    }
}

/// Length of a parameter list without the final parameter's padding: the chunk length
/// excludes it (RFC 9260 §3.2).
fn unpadded_params_len(params: &[u8]) -> usize {
    let mut last_end = params.len();
    for p in ParamIter::new(params).flatten() {
        let start = p.value.as_ptr() as usize - params.as_ptr() as usize;
        last_end = start + p.value.len();
    }
    last_end
}

/// Appends a TLV parameter (or error cause) with padding.
pub fn emit_param(out: &mut Vec<u8>, param_type: u16, value: &[u8]) {
    let len = 4 + value.len();
    out.extend_from_slice(&param_type.to_be_bytes());
    out.extend_from_slice(&(len as u16).to_be_bytes());
    out.extend_from_slice(value);
    out.resize(out.len() + (pad4(len) - len), 0);
}

/// Appends a SACK gap block (start, end offsets) to a raw gap list.
pub fn emit_gap_block(out: &mut Vec<u8>, start: u16, end: u16) {
    out.extend_from_slice(&start.to_be_bytes());
    out.extend_from_slice(&end.to_be_bytes());
}

/// Builds a packet in a `Vec<u8>`: common header, then chunks, then the checksum.
pub struct PacketBuilder<'b> {
    out: &'b mut Vec<u8>,
    start: usize,
}

impl<'b> PacketBuilder<'b> {
    /// Starts a packet at the end of `out`.
    pub fn new(out: &'b mut Vec<u8>, src_port: u16, dst_port: u16, vtag: u32) -> Self {
        let start = out.len();
        out.extend_from_slice(&src_port.to_be_bytes());
        out.extend_from_slice(&dst_port.to_be_bytes());
        out.extend_from_slice(&vtag.to_be_bytes());
        out.extend_from_slice(&[0; 4]);
        PacketBuilder { out, start }
    }
    /// Appends a chunk.
    pub fn push(&mut self, chunk: &Chunk<'_>) {
        chunk.emit(self.out);
    }
    /// Bytes written for this packet so far.
    pub fn len(&self) -> usize {
        self.out.len() - self.start
    }
    pub fn is_empty(&self) -> bool {
        self.len() <= COMMON_HEADER_LEN
    }
    /// Direct access for callers that write chunk bytes themselves.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        self.out
    }
    /// Fills in the checksum and returns the packet's length.
    pub fn finish(self) -> usize {
        let mut p = SctpPacket::new_unchecked(&mut self.out[self.start..]);
        p.fill_checksum();
        self.out.len() - self.start
    }
}

/// Parses and verifies a packet fully: checksum and every chunk. Handy for tests and
/// capture extraction; the association parses lazily instead.
pub fn parse_packet(bytes: &[u8]) -> Result<(SctpPacket<&[u8]>, Vec<Chunk<'_>>)> {
    let p = SctpPacket::new_checked(bytes)?;
    p.verify_checksum()?;
    let mut v = Vec::new();
    for raw in chunk_iter(&bytes[COMMON_HEADER_LEN..]) {
        v.push(Chunk::parse(raw?)?);
    }
    Ok((p, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(chunks: &[Chunk<'_>]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = PacketBuilder::new(&mut out, 36412, 5000, 0xdead_beef);
        for c in chunks {
            b.push(c);
        }
        b.finish();
        out
    }

    #[test]
    fn roundtrip_all_chunks() {
        let mut params = Vec::new();
        emit_param(&mut params, param_type::STATE_COOKIE, b"cookie!!");
        let mut gaps = Vec::new();
        emit_gap_block(&mut gaps, 2, 3);
        emit_gap_block(&mut gaps, 5, 5);
        let dups = 77u32.to_be_bytes();
        let mut hb = Vec::new();
        emit_param(&mut hb, param_type::HEARTBEAT_INFO, &[1, 2, 3, 4, 5]);
        let chunks = [
            Chunk::Data(DataChunk {
                flags: data_flags::B | data_flags::E | data_flags::U,
                tsn: 7,
                stream: 1,
                ssn: 9,
                ppid: 18,
                payload: b"hello",
            }),
            Chunk::Init(InitChunk {
                initiate_tag: 1,
                a_rwnd: 2,
                out_streams: 3,
                in_streams: 4,
                initial_tsn: 5,
                params: &[],
            }),
            Chunk::InitAck(InitChunk {
                initiate_tag: 1,
                a_rwnd: 2,
                out_streams: 3,
                in_streams: 4,
                initial_tsn: 5,
                params: &params,
            }),
            Chunk::Sack(SackChunk {
                cum_tsn_ack: 100,
                a_rwnd: 65535,
                gap_blocks: &gaps,
                dup_tsns: &dups,
            }),
            Chunk::Heartbeat { info: &hb },
            Chunk::HeartbeatAck { info: &hb },
            Chunk::Abort {
                t: true,
                causes: &[],
            },
            Chunk::Shutdown { cum_tsn_ack: 42 },
            Chunk::ShutdownAck,
            Chunk::ShutdownComplete { t: false },
            Chunk::Error { causes: &hb },
            Chunk::CookieEcho { cookie: b"abc" },
            Chunk::CookieAck,
        ];
        let bytes = build(&chunks);
        assert_eq!(bytes.len() % 4, 0);
        let (p, parsed) = parse_packet(&bytes).unwrap();
        assert_eq!(p.src_port(), 36412);
        assert_eq!(p.dst_port(), 5000);
        assert_eq!(p.verification_tag(), 0xdead_beef);
        assert_eq!(parsed.len(), chunks.len());
        for (a, b) in parsed.iter().zip(chunks.iter()) {
            assert_eq!(a, b);
        }
        if let Chunk::InitAck(c) = parsed[2] {
            assert_eq!(c.state_cookie(), Some(&b"cookie!!"[..]));
        }
        if let Chunk::Sack(s) = parsed[3] {
            assert_eq!(s.gap_blocks().collect::<Vec<_>>(), vec![(2, 3), (5, 5)]);
            assert_eq!(s.dup_tsns().collect::<Vec<_>>(), vec![77]);
        }
    }

    #[test]
    fn chunk_length_excludes_final_parameter_padding() {
        let mut params = Vec::new();
        emit_param(&mut params, param_type::SUPPORTED_ADDRESS_TYPES, &[0, 5]);
        assert_eq!(params.len(), 8);
        let init = Chunk::Init(InitChunk {
            initiate_tag: 1,
            a_rwnd: 2,
            out_streams: 3,
            in_streams: 4,
            initial_tsn: 5,
            params: &params,
        });
        let bytes = build(&[init, Chunk::CookieAck]);
        // Chunk length 4 + 16 + 6, then 2 bytes of chunk padding.
        assert_eq!(&bytes[14..16], &26u16.to_be_bytes());
        let (_, parsed) = parse_packet(&bytes).unwrap();
        let Chunk::Init(i) = parsed[0] else {
            panic!("not INIT")
        };
        let p: Vec<_> = i.params().collect::<Result<_>>().unwrap();
        assert_eq!(p[0].value, &[0, 5]);
        assert_eq!(parsed[1], Chunk::CookieAck);
    }

    #[test]
    fn checksum_known_vector() {
        // An INIT from a Linux kernel capture-like packet; checksum computed by the
        // RFC 3309 algorithm must round-trip and any bit flip must fail.
        let mut bytes = build(&[Chunk::CookieAck]);
        SctpPacket::new_checked(&bytes[..])
            .unwrap()
            .verify_checksum()
            .unwrap();
        bytes[13] ^= 1;
        let e = SctpPacket::new_checked(&bytes[..])
            .unwrap()
            .verify_checksum()
            .unwrap_err();
        assert!(matches!(e, Error::BadChecksum { .. }));
        // RFC 3720 B.4 test vector: 32 bytes of zeros -> 0x8a9136aa.
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(matches!(
            SctpPacket::new_checked(&[0u8; 5][..]),
            Err(Error::Truncated {
                what: "SCTP common header",
                ..
            })
        ));
        let mut bytes = build(&[Chunk::CookieAck]);
        bytes[14] = 0;
        bytes[15] = 2; // chunk length 2 < 4
        let p = SctpPacket::new_checked(&bytes[..]).unwrap();
        let e = p.chunks().next().unwrap().unwrap_err();
        assert_eq!(
            e,
            Error::BadLength {
                what: "chunk length",
                value: 2
            }
        );
        // DATA chunk too short.
        let raw = RawChunk {
            chunk_type: chunk_type::DATA,
            flags: 3,
            value: &[0; 5],
        };
        assert!(matches!(
            raw.parse(),
            Err(Error::Truncated {
                what: "DATA chunk",
                ..
            })
        ));
    }

    #[test]
    fn garbage_never_panics() {
        let mut x: u64 = 0x1234_5678_9abc_def0;
        for len in 0..600usize {
            let mut buf = vec![0u8; len];
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            // Make chunk lengths plausible sometimes.
            if len > 16 && x.is_multiple_of(2) {
                buf[14] = 0;
                buf[15] = (x >> 8) as u8 % 64;
                buf[12] = (x >> 16) as u8 % 15;
            }
            if let Ok(p) = SctpPacket::new_checked(&buf[..]) {
                let _ = p.verify_checksum();
                for c in p.chunks().flatten() {
                    {
                        if let Ok(Chunk::InitAck(i)) = c.parse() {
                            let _ = i.state_cookie();
                        }
                        if let Ok(Chunk::Sack(s)) = c.parse() {
                            let _ = s.gap_blocks().count();
                        }
                    }
                }
            }
        }
    }
}
