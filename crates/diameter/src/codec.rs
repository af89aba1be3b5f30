//! The Diameter wire format (RFC 6733 §3, §4): zero-copy views over any buffer for
//! reading, an [`AvpWriter`] that appends AVPs to a `Vec<u8>` for building, and plain
//! owned representations ([`MessageRepr`], [`AvpRepr`]) for tests and tools.
//!
//! Views check lengths once ([`MessageView::new_checked`], the [`AvpIter`]) and then
//! read in place; nothing here panics on any input.

use std::net::IpAddr;
use thiserror::Error;

/// The fixed Diameter header (version, length, flags, command, application, ids).
pub const HEADER_LEN: usize = 20;
/// An AVP header without / with the Vendor-Id.
pub const AVP_HEADER_LEN: usize = 8;
pub const AVP_VENDOR_HEADER_LEN: usize = 12;

/// Command flags (RFC 6733 §3).
pub mod flags {
    pub const REQUEST: u8 = 0x80;
    pub const PROXIABLE: u8 = 0x40;
    pub const ERROR: u8 = 0x20;
    pub const RETRANSMIT: u8 = 0x10;
}

/// AVP flags (RFC 6733 §4.1).
pub mod avp_flags {
    pub const VENDOR: u8 = 0x80;
    pub const MANDATORY: u8 = 0x40;
    pub const PROTECTED: u8 = 0x20;
}

mod field {
    use core::ops::Range;
    pub const VERSION: usize = 0;
    pub const LENGTH: Range<usize> = 1..4;
    pub const FLAGS: usize = 4;
    pub const COMMAND: Range<usize> = 5..8;
    pub const APPLICATION: Range<usize> = 8..12;
    pub const HOP_BY_HOP: Range<usize> = 12..16;
    pub const END_TO_END: Range<usize> = 16..20;
}

/// What was wrong with bytes that do not decode.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("unsupported Diameter version {0} (only 1)")]
    Version(u8),
    #[error("message length {0} is below the header or not a multiple of 4")]
    BadMessageLength(u32),
    #[error("AVP {code}: length {len} is shorter than its header ({min})")]
    BadAvpLength { code: u32, len: u32, min: usize },
    #[error("AVP {code}: non-zero padding")]
    BadPadding { code: u32 },
    #[error("AVP {code}: {what} data must be {need} bytes, has {have}")]
    BadDataLength {
        code: u32,
        what: &'static str,
        need: usize,
        have: usize,
    },
    #[error("AVP {code}: invalid UTF-8")]
    BadUtf8 { code: u32 },
    #[error("AVP {code}: address family {family} with {len} bytes")]
    BadAddress { code: u32, family: u16, len: usize },
    #[error("missing AVP {name} ({code})")]
    Missing { name: &'static str, code: u32 },
    #[error("AVP {name} ({code}): {why}")]
    BadValue {
        name: &'static str,
        code: u32,
        why: String,
    },
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// A Diameter message over any buffer.
#[derive(Debug, Clone)]
pub struct MessageView<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> MessageView<T> {
    /// No check: accessors may panic on a short buffer. Use [`Self::new_checked`] on
    /// bytes from the network.
    pub fn new_unchecked(buf: T) -> Self {
        MessageView { buf }
    }

    /// Checks the version, that the header's length is sane and that the buffer holds
    /// it. The AVPs are checked as they are iterated ([`Self::avps`]).
    pub fn new_checked(buf: T) -> Result<Self, DecodeError> {
        let v = MessageView { buf };
        let b = v.buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(DecodeError::Truncated {
                what: "message header",
                need: HEADER_LEN,
                have: b.len(),
            });
        }
        if b[field::VERSION] != 1 {
            return Err(DecodeError::Version(b[field::VERSION]));
        }
        let len = be24(&b[field::LENGTH]);
        if (len as usize) < HEADER_LEN || !len.is_multiple_of(4) {
            return Err(DecodeError::BadMessageLength(len));
        }
        if b.len() < len as usize {
            return Err(DecodeError::Truncated {
                what: "message",
                need: len as usize,
                have: b.len(),
            });
        }
        Ok(v)
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    pub fn length(&self) -> u32 {
        be24(&self.buf.as_ref()[field::LENGTH])
    }
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }
    pub fn is_request(&self) -> bool {
        self.flags() & flags::REQUEST != 0
    }
    pub fn is_proxiable(&self) -> bool {
        self.flags() & flags::PROXIABLE != 0
    }
    pub fn is_error(&self) -> bool {
        self.flags() & flags::ERROR != 0
    }
    pub fn is_retransmit(&self) -> bool {
        self.flags() & flags::RETRANSMIT != 0
    }
    pub fn command_code(&self) -> u32 {
        be24(&self.buf.as_ref()[field::COMMAND])
    }
    pub fn application_id(&self) -> u32 {
        be32(&self.buf.as_ref()[field::APPLICATION])
    }
    pub fn hop_by_hop(&self) -> u32 {
        be32(&self.buf.as_ref()[field::HOP_BY_HOP])
    }
    pub fn end_to_end(&self) -> u32 {
        be32(&self.buf.as_ref()[field::END_TO_END])
    }

    /// The message's bytes (the header's length, not the buffer's).
    pub fn as_bytes(&self) -> &[u8] {
        let b = self.buf.as_ref();
        &b[..(self.length() as usize).min(b.len())]
    }

    /// The top-level AVPs.
    pub fn avps(&self) -> AvpIter<'_> {
        AvpIter::new(self.as_bytes().get(HEADER_LEN..).unwrap_or(&[]))
    }

    /// The first top-level AVP with `code` and `vendor` (0 = IETF); a malformed AVP
    /// list ends the search with the error.
    pub fn find(&self, vendor: u32, code: u32) -> Result<Option<AvpView<&[u8]>>, DecodeError> {
        find_in(self.avps(), vendor, code)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MessageView<T> {
    pub fn set_flags(&mut self, f: u8) {
        self.buf.as_mut()[field::FLAGS] = f;
    }
    pub fn set_retransmit(&mut self) {
        self.buf.as_mut()[field::FLAGS] |= flags::RETRANSMIT;
    }
    pub fn set_hop_by_hop(&mut self, v: u32) {
        self.buf.as_mut()[field::HOP_BY_HOP].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_end_to_end(&mut self, v: u32) {
        self.buf.as_mut()[field::END_TO_END].copy_from_slice(&v.to_be_bytes());
    }
}

/// The first AVP of `iter` with `vendor`/`code`.
pub fn find_in<'a>(
    iter: AvpIter<'a>,
    vendor: u32,
    code: u32,
) -> Result<Option<AvpView<&'a [u8]>>, DecodeError> {
    for a in iter {
        let a = a?;
        if a.code() == code && a.vendor_id() == vendor {
            return Ok(Some(a));
        }
    }
    Ok(None)
}

/// One AVP (header, data, no padding) over any buffer.
#[derive(Debug, Clone, Copy)]
pub struct AvpView<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> AvpView<T> {
    /// Checks the header and that the buffer holds the AVP's length (padding is the
    /// iterator's business).
    pub fn new_checked(buf: T) -> Result<Self, DecodeError> {
        let b = buf.as_ref();
        if b.len() < AVP_HEADER_LEN {
            return Err(DecodeError::Truncated {
                what: "AVP header",
                need: AVP_HEADER_LEN,
                have: b.len(),
            });
        }
        let code = be32(&b[0..4]);
        let len = be24(&b[5..8]);
        let min = if b[4] & avp_flags::VENDOR != 0 {
            AVP_VENDOR_HEADER_LEN
        } else {
            AVP_HEADER_LEN
        };
        if (len as usize) < min {
            return Err(DecodeError::BadAvpLength { code, len, min });
        }
        if b.len() < len as usize {
            return Err(DecodeError::Truncated {
                what: "AVP",
                need: len as usize,
                have: b.len(),
            });
        }
        Ok(AvpView { buf })
    }

    pub fn code(&self) -> u32 {
        be32(&self.buf.as_ref()[0..4])
    }
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[4]
    }
    pub fn is_vendor(&self) -> bool {
        self.flags() & avp_flags::VENDOR != 0
    }
    pub fn is_mandatory(&self) -> bool {
        self.flags() & avp_flags::MANDATORY != 0
    }
    pub fn is_protected(&self) -> bool {
        self.flags() & avp_flags::PROTECTED != 0
    }
    /// The AVP length (header and data, no padding).
    pub fn length(&self) -> u32 {
        be24(&self.buf.as_ref()[5..8])
    }
    /// 0 when the V bit is clear (IETF AVPs).
    pub fn vendor_id(&self) -> u32 {
        if self.is_vendor() {
            be32(&self.buf.as_ref()[8..12])
        } else {
            0
        }
    }
    fn header_len(&self) -> usize {
        if self.is_vendor() {
            AVP_VENDOR_HEADER_LEN
        } else {
            AVP_HEADER_LEN
        }
    }
    /// The AVP's bytes, header and data, without padding.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf.as_ref()[..self.length() as usize]
    }
    pub fn data(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..self.length() as usize]
    }

    fn fixed<const N: usize>(&self, what: &'static str) -> Result<[u8; N], DecodeError> {
        self.data()
            .try_into()
            .map_err(|_| DecodeError::BadDataLength {
                code: self.code(),
                what,
                need: N,
                have: self.data().len(),
            })
    }
    pub fn u32(&self) -> Result<u32, DecodeError> {
        self.fixed::<4>("Unsigned32").map(u32::from_be_bytes)
    }
    pub fn u64(&self) -> Result<u64, DecodeError> {
        self.fixed::<8>("Unsigned64").map(u64::from_be_bytes)
    }
    pub fn i32(&self) -> Result<i32, DecodeError> {
        self.fixed::<4>("Integer32").map(i32::from_be_bytes)
    }
    pub fn i64(&self) -> Result<i64, DecodeError> {
        self.fixed::<8>("Integer64").map(i64::from_be_bytes)
    }
    /// Enumerated is an Integer32 on the wire.
    pub fn enumerated(&self) -> Result<i32, DecodeError> {
        self.fixed::<4>("Enumerated").map(i32::from_be_bytes)
    }
    pub fn octets(&self) -> &[u8] {
        self.data()
    }
    pub fn utf8(&self) -> Result<&str, DecodeError> {
        std::str::from_utf8(self.data()).map_err(|_| DecodeError::BadUtf8 { code: self.code() })
    }
    /// DiameterIdentity: an FQDN, ASCII in practice; read as UTF-8.
    pub fn identity(&self) -> Result<&str, DecodeError> {
        self.utf8()
    }
    /// Address (RFC 6733 §4.3.1): a 2-byte IANA family (1 IPv4, 2 IPv6) and the address.
    pub fn address(&self) -> Result<IpAddr, DecodeError> {
        let d = self.data();
        let bad = |family| DecodeError::BadAddress {
            code: self.code(),
            family,
            len: d.len(),
        };
        if d.len() < 2 {
            return Err(bad(0));
        }
        let family = u16::from_be_bytes([d[0], d[1]]);
        match (family, &d[2..]) {
            (1, a) if a.len() == 4 => Ok(IpAddr::from([a[0], a[1], a[2], a[3]])),
            (2, a) if a.len() == 16 => {
                let mut o = [0u8; 16];
                o.copy_from_slice(a);
                Ok(IpAddr::from(o))
            }
            _ => Err(bad(family)),
        }
    }
    /// The AVPs inside a Grouped AVP.
    pub fn grouped(&self) -> AvpIter<'_> {
        AvpIter::new(self.data())
    }
}

/// The AVPs of a message body or of a Grouped AVP's data. Yields an error once (then
/// ends) when an AVP is malformed, so a caller sees what was wrong.
#[derive(Debug, Clone)]
pub struct AvpIter<'a> {
    rest: &'a [u8],
}

impl<'a> AvpIter<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        AvpIter { rest: buf }
    }
}

impl<'a> Iterator for AvpIter<'a> {
    type Item = Result<AvpView<&'a [u8]>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let r = (|| {
            let a = AvpView::new_checked(self.rest)?;
            let len = a.length() as usize;
            let padded = (len + 3) & !3;
            if self.rest.len() < padded {
                return Err(DecodeError::Truncated {
                    what: "AVP padding",
                    need: padded,
                    have: self.rest.len(),
                });
            }
            if self.rest[len..padded].iter().any(|&b| b != 0) {
                return Err(DecodeError::BadPadding { code: a.code() });
            }
            let (this, rest) = self.rest.split_at(padded);
            self.rest = rest;
            Ok(AvpView { buf: &this[..len] })
        })();
        if r.is_err() {
            self.rest = &[];
        }
        Some(r)
    }
}

/// Appends AVPs to a buffer; grouped AVPs are written in place and their length
/// patched when the group closes, so building a message allocates nothing per AVP.
pub struct AvpWriter<'a> {
    pub buf: &'a mut Vec<u8>,
}

impl<'a> AvpWriter<'a> {
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        AvpWriter { buf }
    }

    fn header(&mut self, code: u32, vendor: u32, mandatory: bool, data_len: usize) {
        let mut f = 0;
        if vendor != 0 {
            f |= avp_flags::VENDOR;
        }
        if mandatory {
            f |= avp_flags::MANDATORY;
        }
        let hl = if vendor != 0 {
            AVP_VENDOR_HEADER_LEN
        } else {
            AVP_HEADER_LEN
        };
        let len = (hl + data_len) as u32;
        self.buf.extend_from_slice(&code.to_be_bytes());
        self.buf.push(f);
        self.buf.extend_from_slice(&len.to_be_bytes()[1..]);
        if vendor != 0 {
            self.buf.extend_from_slice(&vendor.to_be_bytes());
        }
    }

    fn pad(&mut self) {
        while !self.buf.len().is_multiple_of(4) {
            self.buf.push(0);
        }
    }

    /// An AVP whose data is `data` (OctetString, UTF8String, DiameterIdentity…).
    pub fn octets(&mut self, code: u32, vendor: u32, mandatory: bool, data: &[u8]) {
        self.header(code, vendor, mandatory, data.len());
        self.buf.extend_from_slice(data);
        self.pad();
    }
    pub fn str(&mut self, code: u32, vendor: u32, mandatory: bool, s: &str) {
        self.octets(code, vendor, mandatory, s.as_bytes())
    }
    pub fn u32(&mut self, code: u32, vendor: u32, mandatory: bool, v: u32) {
        self.octets(code, vendor, mandatory, &v.to_be_bytes())
    }
    pub fn u64(&mut self, code: u32, vendor: u32, mandatory: bool, v: u64) {
        self.octets(code, vendor, mandatory, &v.to_be_bytes())
    }
    pub fn i32(&mut self, code: u32, vendor: u32, mandatory: bool, v: i32) {
        self.octets(code, vendor, mandatory, &v.to_be_bytes())
    }
    pub fn address(&mut self, code: u32, vendor: u32, mandatory: bool, a: IpAddr) {
        match a {
            IpAddr::V4(v4) => {
                let mut d = [0u8; 6];
                d[..2].copy_from_slice(&1u16.to_be_bytes());
                d[2..].copy_from_slice(&v4.octets());
                self.octets(code, vendor, mandatory, &d)
            }
            IpAddr::V6(v6) => {
                let mut d = [0u8; 18];
                d[..2].copy_from_slice(&2u16.to_be_bytes());
                d[2..].copy_from_slice(&v6.octets());
                self.octets(code, vendor, mandatory, &d)
            }
        }
    }
    /// A Grouped AVP whose members `f` writes.
    pub fn grouped(
        &mut self,
        code: u32,
        vendor: u32,
        mandatory: bool,
        f: impl FnOnce(&mut AvpWriter<'_>),
    ) {
        let start = self.buf.len();
        self.header(code, vendor, mandatory, 0);
        f(&mut AvpWriter { buf: self.buf });
        let len = (self.buf.len() - start) as u32;
        self.buf[start + 5..start + 8].copy_from_slice(&len.to_be_bytes()[1..]);
    }
    /// An AVP copied as it is (e.g. into Failed-AVP), padded.
    pub fn raw(&mut self, avp: &[u8]) {
        self.buf.extend_from_slice(avp);
        self.pad();
    }
}

/// Starts a message in `buf` (cleared); [`finish`] sets its length.
pub fn begin(buf: &mut Vec<u8>, flags: u8, command: u32, app: u32, hbh: u32, e2e: u32) {
    buf.clear();
    buf.push(1);
    buf.extend_from_slice(&[0, 0, 0]);
    buf.push(flags);
    buf.extend_from_slice(&command.to_be_bytes()[1..]);
    buf.extend_from_slice(&app.to_be_bytes());
    buf.extend_from_slice(&hbh.to_be_bytes());
    buf.extend_from_slice(&e2e.to_be_bytes());
}

/// Writes the message length into the header [`begin`] wrote.
pub fn finish(buf: &mut [u8]) {
    let len = buf.len() as u32;
    buf[1..4].copy_from_slice(&len.to_be_bytes()[1..]);
}

/// The data of an owned AVP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AvpData {
    Unsigned32(u32),
    Unsigned64(u64),
    Integer32(i32),
    Integer64(i64),
    Enumerated(i32),
    OctetString(Vec<u8>),
    Utf8String(String),
    DiameterIdentity(String),
    Address(IpAddr),
    Grouped(Vec<AvpRepr>),
}

/// An owned AVP, for building in tests and tools; [`AvpRepr::parse`] reads any AVP
/// as [`AvpData::OctetString`] (the type is in a dictionary, not on the wire) unless
/// the caller names the grouped codes to descend into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AvpRepr {
    pub code: u32,
    pub vendor: u32,
    pub mandatory: bool,
    pub data: AvpData,
}

impl AvpRepr {
    pub fn new(code: u32, vendor: u32, data: AvpData) -> AvpRepr {
        AvpRepr {
            code,
            vendor,
            mandatory: true,
            data,
        }
    }

    /// `grouped(vendor, code)` says which AVPs to read as Grouped.
    pub fn parse<T: AsRef<[u8]>>(
        v: &AvpView<T>,
        grouped: &dyn Fn(u32, u32) -> bool,
    ) -> Result<AvpRepr, DecodeError> {
        let data = if grouped(v.vendor_id(), v.code()) {
            AvpData::Grouped(
                v.grouped()
                    .map(|a| AvpRepr::parse(&a?, grouped))
                    .collect::<Result<_, _>>()?,
            )
        } else {
            AvpData::OctetString(v.data().to_vec())
        };
        Ok(AvpRepr {
            code: v.code(),
            vendor: v.vendor_id(),
            mandatory: v.is_mandatory(),
            data,
        })
    }

    pub fn emit(&self, w: &mut AvpWriter<'_>) {
        let (c, v, m) = (self.code, self.vendor, self.mandatory);
        match &self.data {
            AvpData::Unsigned32(x) => w.u32(c, v, m, *x),
            AvpData::Unsigned64(x) => w.u64(c, v, m, *x),
            AvpData::Integer32(x) | AvpData::Enumerated(x) => w.i32(c, v, m, *x),
            AvpData::Integer64(x) => w.octets(c, v, m, &x.to_be_bytes()),
            AvpData::OctetString(x) => w.octets(c, v, m, x),
            AvpData::Utf8String(x) | AvpData::DiameterIdentity(x) => w.str(c, v, m, x),
            AvpData::Address(a) => w.address(c, v, m, *a),
            AvpData::Grouped(g) => w.grouped(c, v, m, |w| g.iter().for_each(|a| a.emit(w))),
        }
    }
}

/// An owned message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRepr {
    pub flags: u8,
    pub command: u32,
    pub application: u32,
    pub hop_by_hop: u32,
    pub end_to_end: u32,
    pub avps: Vec<AvpRepr>,
}

impl MessageRepr {
    pub fn parse<T: AsRef<[u8]>>(
        m: &MessageView<T>,
        grouped: &dyn Fn(u32, u32) -> bool,
    ) -> Result<MessageRepr, DecodeError> {
        Ok(MessageRepr {
            flags: m.flags(),
            command: m.command_code(),
            application: m.application_id(),
            hop_by_hop: m.hop_by_hop(),
            end_to_end: m.end_to_end(),
            avps: m
                .avps()
                .map(|a| AvpRepr::parse(&a?, grouped))
                .collect::<Result<_, _>>()?,
        })
    }

    pub fn emit(&self, buf: &mut Vec<u8>) {
        begin(
            buf,
            self.flags,
            self.command,
            self.application,
            self.hop_by_hop,
            self.end_to_end,
        );
        let mut w = AvpWriter::new(buf);
        for a in &self.avps {
            a.emit(&mut w);
        }
        finish(buf);
    }
}

/// Decodes `bytes` through every view, descending into every AVP as if it were
/// Grouped and reading it as every type: the entry point of a fuzz target
/// (`fuzz_target!(|d: &[u8]| { pepc_diameter::fuzz_decode(d); })`). Returns the
/// number of AVPs that decoded, so the work is not optimised away.
pub fn fuzz_decode(bytes: &[u8]) -> usize {
    fn walk(iter: AvpIter<'_>, depth: usize, n: &mut usize) {
        for a in iter {
            let Ok(a) = a else { return };
            *n += 1;
            let _ = (a.u32(), a.u64(), a.i32(), a.i64(), a.enumerated());
            let _ = (a.utf8(), a.address(), a.vendor_id(), a.is_mandatory());
            // Bounded: an AVP nests at most (len / 8) deep anyway, but keep the stack flat.
            if depth < 16 {
                walk(a.grouped(), depth + 1, n);
            }
        }
    }
    let mut n = 0;
    if let Ok(m) = MessageView::new_checked(bytes) {
        let _ = (m.command_code(), m.application_id(), m.hop_by_hop());
        walk(m.avps(), 0, &mut n);
        let _ = MessageRepr::parse(&m, &|_, _| true);
        let _ = crate::base::result_of(&m);
        let _ = crate::s6a::parse_subscription_data_of(&m);
        let _ = crate::s6a::parse_vector_of(&m);
        let (mut a, mut b) = (0, 0);
        let _ = crate::gx::parse_decision(&m, &mut a, &mut b);
    }
    // The Gx Flow-Description (IPFilterRule) parser on the bytes as text.
    if let Ok(t) = std::str::from_utf8(bytes) {
        let _ = pepc_seams::FlowFilter::parse(t, pepc_seams::FlowDirection::Both);
    }
    walk(AvpIter::new(bytes), 0, &mut n);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dict::{avp, avp3, cmd, VENDOR_3GPP as V};

    /// A ULA-like message with vendor AVPs, nesting three deep, odd lengths (padding)
    /// and every data type.
    fn sample() -> Vec<u8> {
        let mut b = Vec::new();
        begin(
            &mut b,
            flags::PROXIABLE,
            cmd::UPDATE_LOCATION,
            16777251,
            7,
            9,
        );
        let mut w = AvpWriter::new(&mut b);
        w.str(avp::SESSION_ID, 0, true, "mme;1;2");
        w.u32(avp::RESULT_CODE, 0, true, 2001);
        w.str(avp::ORIGIN_HOST, 0, true, "hss");
        w.address(avp::HOST_IP_ADDRESS, 0, true, "10.0.0.1".parse().unwrap());
        w.u64(55, 0, false, u64::MAX - 1);
        w.i32(avp3::RAT_TYPE, V, true, -1004);
        w.grouped(avp3::SUBSCRIPTION_DATA, V, true, |w| {
            w.octets(avp3::MSISDN, V, true, &[0x64, 0x21, 0xf3]);
            w.grouped(avp3::APN_CONFIGURATION_PROFILE, V, true, |w| {
                w.u32(avp3::CONTEXT_IDENTIFIER, V, true, 1);
                w.grouped(avp3::APN_CONFIGURATION, V, true, |w| {
                    w.str(avp::SERVICE_SELECTION, 0, true, "internet");
                });
            });
        });
        finish(&mut b);
        b
    }

    #[test]
    fn views_read_what_the_writer_wrote() {
        let b = sample();
        let m = MessageView::new_checked(&b[..]).unwrap();
        assert_eq!(m.length() as usize, b.len());
        assert_eq!(
            (
                m.command_code(),
                m.application_id(),
                m.hop_by_hop(),
                m.end_to_end()
            ),
            (316, 16777251, 7, 9)
        );
        assert!(m.is_proxiable() && !m.is_request() && !m.is_error() && !m.is_retransmit());
        let avps: Vec<_> = m.avps().collect::<Result<_, _>>().unwrap();
        assert_eq!(avps.len(), 7);
        assert_eq!(avps[0].utf8().unwrap(), "mme;1;2");
        assert_eq!(avps[0].length(), 8 + 7, "length excludes padding");
        assert_eq!(avps[1].u32().unwrap(), 2001);
        assert_eq!(
            avps[3].address().unwrap(),
            "10.0.0.1".parse::<IpAddr>().unwrap()
        );
        assert_eq!(avps[4].u64().unwrap(), u64::MAX - 1);
        assert!(!avps[4].is_mandatory());
        assert_eq!((avps[5].vendor_id(), avps[5].i32().unwrap()), (V, -1004));
        let sd = m.find(V, avp3::SUBSCRIPTION_DATA).unwrap().unwrap();
        let inner: Vec<_> = sd.grouped().collect::<Result<_, _>>().unwrap();
        assert_eq!(inner[0].octets(), &[0x64, 0x21, 0xf3]);
        let prof = &inner[1];
        let cfg = find_in(prof.grouped(), V, avp3::APN_CONFIGURATION)
            .unwrap()
            .unwrap();
        let apn = find_in(cfg.grouped(), 0, avp::SERVICE_SELECTION)
            .unwrap()
            .unwrap();
        assert_eq!(apn.utf8().unwrap(), "internet");
        // The owned form writes the same bytes back.
        let grouped = |v: u32, c: u32| {
            v == V
                && [
                    avp3::SUBSCRIPTION_DATA,
                    avp3::APN_CONFIGURATION_PROFILE,
                    avp3::APN_CONFIGURATION,
                ]
                .contains(&c)
        };
        let r = MessageRepr::parse(&m, &grouped).unwrap();
        let mut again = Vec::new();
        r.emit(&mut again);
        assert_eq!(again, b);
    }

    #[test]
    fn errors_say_what_was_wrong() {
        let b = sample();
        assert_eq!(
            MessageView::new_checked(&b[..10]).unwrap_err(),
            DecodeError::Truncated {
                what: "message header",
                need: 20,
                have: 10
            }
        );
        assert_eq!(
            MessageView::new_checked(&b[..b.len() - 4]).unwrap_err(),
            DecodeError::Truncated {
                what: "message",
                need: b.len(),
                have: b.len() - 4
            }
        );
        let mut v2 = b.clone();
        v2[0] = 2;
        assert_eq!(
            MessageView::new_checked(&v2[..]).unwrap_err(),
            DecodeError::Version(2)
        );
        let mut odd = b.clone();
        odd[3] = odd[3].wrapping_add(1);
        assert!(matches!(
            MessageView::new_checked(&odd[..]),
            Err(DecodeError::BadMessageLength(_))
        ));
        // Non-zero padding after the 7-byte Session-Id.
        let mut pad = b.clone();
        pad[20 + 15] = 1;
        let m = MessageView::new_checked(&pad[..]).unwrap();
        assert_eq!(
            m.avps().next().unwrap().unwrap_err(),
            DecodeError::BadPadding { code: 263 }
        );
        // An AVP length below its header.
        let mut short = b.clone();
        short[20 + 7] = 4;
        let m = MessageView::new_checked(&short[..]).unwrap();
        assert_eq!(
            m.avps().next().unwrap().unwrap_err(),
            DecodeError::BadAvpLength {
                code: 263,
                len: 4,
                min: 8
            }
        );
        let m = MessageView::new_checked(&b[..]).unwrap();
        let rc = m.find(0, avp::RESULT_CODE).unwrap().unwrap();
        assert_eq!(
            rc.u64().unwrap_err(),
            DecodeError::BadDataLength {
                code: 268,
                what: "Unsigned64",
                need: 8,
                have: 4
            }
        );
        let host = m.find(0, avp::ORIGIN_HOST).unwrap().unwrap();
        assert_eq!(
            host.address().unwrap_err(),
            DecodeError::BadAddress {
                code: 264,
                family: 0x6873,
                len: 3
            }
        );
    }

    /// Every truncation and every single-bit flip of valid messages decodes or fails
    /// cleanly through every view (the fuzz entry), with no panic.
    #[test]
    fn truncations_and_bit_flips_never_panic() {
        let mut msgs = vec![sample()];
        let mut air = Vec::new();
        let h = crate::s6a::Head {
            session_id: "mme;1;1",
            origin_host: "mme",
            origin_realm: "r",
            destination_realm: "test",
            destination_host: Some("hss"),
            user_name: "001010000000001",
        };
        crate::s6a::air(&mut air, &h, [0, 0xf1, 0x10], Some((&[1; 16], &[2; 14])));
        msgs.push(air);
        let mut decoded = 0;
        for m in &msgs {
            for n in 0..=m.len() {
                decoded += fuzz_decode(&m[..n]);
            }
            for bit in 0..m.len() * 8 {
                let mut f = m.clone();
                f[bit / 8] ^= 1 << (bit % 8);
                decoded += fuzz_decode(&f);
            }
        }
        assert!(decoded > 0);
    }
}
