//! GTP-U (TS 29.281): the header view, its owned form, the G-PDU encap/decap used per
//! packet on the data path, and the path-management / tunnel-management messages (Echo,
//! Error Indication, End Marker) with their information elements.

use crate::buf::PacketBuf;
use crate::WireError;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// UDP port of GTP-U (§4.4.2).
pub const GTPU_PORT: u16 = 2152;

pub const ECHO_REQUEST: u8 = 1;
pub const ECHO_RESPONSE: u8 = 2;
pub const ERROR_INDICATION: u8 = 26;
pub const SUPPORTED_EXT_HEADERS_NOTIFICATION: u8 = 31;
pub const END_MARKER: u8 = 254;
pub const G_PDU: u8 = 255;

/// Flag bits of octet 1 (§5.1).
pub const FLAG_PN: u8 = 0x01;
pub const FLAG_S: u8 = 0x02;
pub const FLAG_E: u8 = 0x04;
pub const FLAG_PT: u8 = 0x10;
/// Version 1, PT = 1, no optional fields.
pub const FLAGS_V1_PT: u8 = 0x30;

/// The mandatory header.
pub const HEADER_LEN: usize = 8;
/// Sequence number, N-PDU number and next extension type, present if any of E/S/PN.
pub const OPT_LEN: usize = 4;

/// Extension header types (§5.2.1, Figure 5.2.1-3).
pub mod ext {
    pub const NO_MORE: u8 = 0x00;
    pub const LONG_PDCP_PDU_NUMBER_03: u8 = 0x03;
    pub const SERVICE_CLASS_INDICATOR: u8 = 0x20;
    pub const UDP_PORT: u8 = 0x40;
    pub const RAN_CONTAINER: u8 = 0x81;
    pub const LONG_PDCP_PDU_NUMBER: u8 = 0x82;
    pub const XW_RAN_CONTAINER: u8 = 0x83;
    pub const NR_RAN_CONTAINER: u8 = 0x84;
    pub const PDU_SESSION_CONTAINER: u8 = 0x85;
    pub const PDCP_PDU_NUMBER: u8 = 0xc0;

    /// Types this implementation knows (it can skip or read them).
    #[inline]
    pub fn is_known(t: u8) -> bool {
        matches!(
            t,
            LONG_PDCP_PDU_NUMBER_03
                | SERVICE_CLASS_INDICATOR
                | UDP_PORT
                | RAN_CONTAINER
                | LONG_PDCP_PDU_NUMBER
                | XW_RAN_CONTAINER
                | NR_RAN_CONTAINER
                | PDU_SESSION_CONTAINER
                | PDCP_PDU_NUMBER
        )
    }

    /// §5.2.1 Table 5.2.1-2: the two high bits 10 or 11 mean the receiver must
    /// understand the extension.
    #[inline]
    pub fn comprehension_required(t: u8) -> bool {
        t & 0x80 != 0
    }
}

/// Information element types used by GTP-U messages (§8).
pub mod ie {
    pub const RECOVERY: u8 = 14;
    pub const TEID_DATA_I: u8 = 16;
    pub const PEER_ADDRESS: u8 = 133;
    pub const EXT_HEADER_TYPE_LIST: u8 = 141;
    pub const PRIVATE_EXTENSION: u8 = 255;
}

mod field {
    use core::ops::Range;
    pub const FLAGS: usize = 0;
    pub const TYPE: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const TEID: Range<usize> = 4..8;
    pub const SEQ: Range<usize> = 8..10;
    pub const NPDU: usize = 10;
    pub const NEXT_EXT: usize = 11;
}

/// A read/write view of a GTP-U message. After [`GtpuPacket::new_checked`] the header,
/// optional fields and extension chain lie within both the buffer and the length field.
#[derive(Debug, Clone)]
pub struct GtpuPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> GtpuPacket<T> {
    /// Wrap without checking; accessors may panic on malformed input.
    pub const fn new_unchecked(buf: T) -> Self {
        GtpuPacket { buf }
    }

    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let p = GtpuPacket { buf };
        p.check()?;
        Ok(p)
    }

    /// Validate everything the accessors rely on; returns the header length.
    pub fn check(&self) -> Result<usize, WireError> {
        let b = self.buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                need: HEADER_LEN,
                have: b.len(),
            });
        }
        let flags = b[field::FLAGS];
        if flags >> 5 != 1 {
            return Err(WireError::BadVersion(flags >> 5));
        }
        if flags & FLAG_PT == 0 {
            return Err(WireError::NotGtpu);
        }
        // The length counts everything after the mandatory 8 octets; extra bytes in the
        // buffer (e.g. link padding) are ignored.
        let end = HEADER_LEN + self.length() as usize;
        if b.len() < end {
            return Err(WireError::Truncated {
                need: end,
                have: b.len(),
            });
        }
        if flags & (FLAG_E | FLAG_S | FLAG_PN) == 0 {
            return Ok(HEADER_LEN);
        }
        if end < HEADER_LEN + OPT_LEN {
            return Err(WireError::BadLength {
                field: "GTP-U length (too short for the optional fields)",
                value: end - HEADER_LEN,
            });
        }
        let mut off = HEADER_LEN + OPT_LEN;
        if flags & FLAG_E == 0 {
            return Ok(off);
        }
        let mut next = b[field::NEXT_EXT];
        while next != ext::NO_MORE {
            if !ext::is_known(next) && ext::comprehension_required(next) {
                return Err(WireError::UnknownExtension(next));
            }
            if off >= end {
                return Err(WireError::BadLength {
                    field: "GTP-U length (extension header past the end)",
                    value: end - HEADER_LEN,
                });
            }
            let units = b[off] as usize;
            if units == 0 {
                return Err(WireError::BadLength {
                    field: "GTP-U extension header length",
                    value: 0,
                });
            }
            let ext_end = off + units * 4;
            if ext_end > end {
                return Err(WireError::BadLength {
                    field: "GTP-U extension header length (past the message end)",
                    value: units,
                });
            }
            next = b[ext_end - 1];
            off = ext_end;
        }
        Ok(off)
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS] >> 5
    }

    /// The whole first octet (version, PT, E, S, PN).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS]
    }

    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buf.as_ref()[field::TYPE]
    }

    /// The length field: octets after the mandatory header.
    #[inline]
    pub fn length(&self) -> u16 {
        let b = self.buf.as_ref();
        u16::from_be_bytes([b[field::LENGTH.start], b[field::LENGTH.start + 1]])
    }

    #[inline]
    pub fn teid(&self) -> u32 {
        let b = &self.buf.as_ref()[field::TEID];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    #[inline]
    fn has_opt(&self) -> bool {
        self.flags() & (FLAG_E | FLAG_S | FLAG_PN) != 0
    }

    /// The sequence number, if the S flag is set.
    #[inline]
    pub fn seq(&self) -> Option<u16> {
        if self.flags() & FLAG_S == 0 {
            return None;
        }
        let b = &self.buf.as_ref()[field::SEQ];
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    /// The N-PDU number, if the PN flag is set.
    #[inline]
    pub fn npdu(&self) -> Option<u8> {
        if self.flags() & FLAG_PN == 0 {
            return None;
        }
        Some(self.buf.as_ref()[field::NPDU])
    }

    /// The first extension header type, if the E flag is set.
    #[inline]
    pub fn next_ext_type(&self) -> Option<u8> {
        if self.flags() & FLAG_E == 0 {
            return None;
        }
        Some(self.buf.as_ref()[field::NEXT_EXT])
    }

    /// Header length including optional fields and the extension chain.
    #[inline]
    pub fn header_len(&self) -> usize {
        let f = self.flags();
        if f & (FLAG_E | FLAG_S | FLAG_PN) == 0 {
            return HEADER_LEN; // the G-PDU fast path
        }
        let mut off = HEADER_LEN + OPT_LEN;
        for (_, content) in self.extensions() {
            off += content.len() + 2;
        }
        off
    }

    /// End of the message per the length field.
    #[inline]
    fn end(&self) -> usize {
        HEADER_LEN + self.length() as usize
    }

    /// The T-PDU (G-PDU) or the information elements (other messages).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..self.end()]
    }

    /// Extension headers as (type, content), where content excludes the length octet
    /// and the next-type octet.
    pub fn extensions(&self) -> Extensions<'_> {
        let b = self.buf.as_ref();
        let (next, end) = if self.has_opt() && self.flags() & FLAG_E != 0 {
            (b[field::NEXT_EXT], self.end().min(b.len()))
        } else {
            (ext::NO_MORE, 0)
        };
        Extensions {
            buf: b,
            off: HEADER_LEN + OPT_LEN,
            end,
            next,
        }
    }

    /// Information elements of a signalling message (not meaningful for G-PDU).
    pub fn ies(&self) -> Ies<'_> {
        Ies {
            buf: self.payload(),
            off: 0,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> GtpuPacket<T> {
    #[inline]
    pub fn set_flags(&mut self, v: u8) {
        self.buf.as_mut()[field::FLAGS] = v;
    }

    #[inline]
    pub fn set_msg_type(&mut self, v: u8) {
        self.buf.as_mut()[field::TYPE] = v;
    }

    #[inline]
    pub fn set_length(&mut self, v: u16) {
        self.buf.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_teid(&mut self, v: u32) {
        self.buf.as_mut()[field::TEID].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, e) = (self.header_len(), self.end());
        &mut self.buf.as_mut()[h..e]
    }
}

/// Iterator over a checked packet's extension headers. Stops (without panicking) at the
/// first inconsistency, which [`GtpuPacket::new_checked`] would have reported.
pub struct Extensions<'a> {
    buf: &'a [u8],
    off: usize,
    end: usize,
    next: u8,
}

impl<'a> Iterator for Extensions<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.next == ext::NO_MORE || self.off >= self.end {
            return None;
        }
        let units = self.buf[self.off] as usize;
        let ext_end = self.off + units * 4;
        if units == 0 || ext_end > self.end {
            self.next = ext::NO_MORE;
            return None;
        }
        let t = self.next;
        let content = &self.buf[self.off + 1..ext_end - 1];
        self.next = self.buf[ext_end - 1];
        self.off = ext_end;
        Some((t, content))
    }
}

/// One information element of a GTP-U signalling message (§8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ie<'a> {
    /// Restart counter (always 0 in GTP-U, §8.2).
    Recovery(u8),
    TeidDataI(u32),
    PeerAddress(IpAddr),
    /// Extension header types the sender supports (§8.5).
    ExtHeaderTypeList(&'a [u8]),
    PrivateExtension(&'a [u8]),
    /// A TLV type we do not interpret.
    Unknown {
        ie_type: u8,
        value: &'a [u8],
    },
}

/// Iterator over information elements; yields an error (then stops) on a truncated IE
/// or an unknown TV type, whose length cannot be known.
pub struct Ies<'a> {
    buf: &'a [u8],
    off: usize,
}

impl<'a> Ies<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        let have = self.buf.len() - self.off;
        if have < n {
            self.off = self.buf.len();
            return Err(WireError::Truncated { need: n, have });
        }
        let s = &self.buf[self.off..self.off + n];
        self.off += n;
        Ok(s)
    }

    fn next_ie(&mut self) -> Result<Ie<'a>, WireError> {
        let t = self.take(1)?[0];
        match t {
            ie::RECOVERY => Ok(Ie::Recovery(self.take(1)?[0])),
            ie::TEID_DATA_I => {
                let v = self.take(4)?;
                Ok(Ie::TeidDataI(u32::from_be_bytes([v[0], v[1], v[2], v[3]])))
            }
            // Extension Header Type List has a one-octet length (§8.5).
            ie::EXT_HEADER_TYPE_LIST => {
                let n = self.take(1)?[0] as usize;
                Ok(Ie::ExtHeaderTypeList(self.take(n)?))
            }
            t if t >= 128 => {
                let l = self.take(2)?;
                let v = self.take(u16::from_be_bytes([l[0], l[1]]) as usize)?;
                match t {
                    ie::PEER_ADDRESS => match v.len() {
                        4 => Ok(Ie::PeerAddress(IpAddr::V4(Ipv4Addr::new(
                            v[0], v[1], v[2], v[3],
                        )))),
                        16 => {
                            let a: [u8; 16] = v.try_into().expect("length checked");
                            Ok(Ie::PeerAddress(IpAddr::V6(Ipv6Addr::from(a))))
                        }
                        n => Err(WireError::BadLength {
                            field: "GTP-U Peer Address IE",
                            value: n,
                        }),
                    },
                    ie::PRIVATE_EXTENSION => Ok(Ie::PrivateExtension(v)),
                    _ => Ok(Ie::Unknown {
                        ie_type: t,
                        value: v,
                    }),
                }
            }
            t => {
                self.off = self.buf.len();
                Err(WireError::BadField {
                    field: "GTP-U IE type (unknown TV type)",
                    value: t as u32,
                })
            }
        }
    }
}

impl<'a> Iterator for Ies<'a> {
    type Item = Result<Ie<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.off >= self.buf.len() {
            return None;
        }
        Some(self.next_ie())
    }
}

/// The owned form of a GTP-U header. Extension contents exclude the length octet and
/// next-type octet, so their length is 4n − 2.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GtpuRepr {
    pub msg_type: u8,
    pub teid: u32,
    pub seq: Option<u16>,
    pub npdu: Option<u8>,
    pub ext: Vec<(u8, Vec<u8>)>,
    pub payload_len: usize,
}

impl GtpuRepr {
    pub fn parse<T: AsRef<[u8]>>(p: &GtpuPacket<T>) -> Result<Self, WireError> {
        let hl = p.check()?;
        let ext: Vec<(u8, Vec<u8>)> = p.extensions().map(|(t, c)| (t, c.to_vec())).collect();
        Ok(GtpuRepr {
            msg_type: p.msg_type(),
            teid: p.teid(),
            seq: p.seq(),
            npdu: p.npdu(),
            ext,
            payload_len: p.end() - hl,
        })
    }

    /// A G-PDU header for `payload_len` bytes of T-PDU.
    pub fn gpdu(teid: u32, payload_len: usize) -> Self {
        GtpuRepr {
            msg_type: G_PDU,
            teid,
            payload_len,
            ..Default::default()
        }
    }

    fn has_opt(&self) -> bool {
        self.seq.is_some() || self.npdu.is_some() || !self.ext.is_empty()
    }

    pub fn header_len(&self) -> usize {
        if !self.has_opt() {
            return HEADER_LEN;
        }
        HEADER_LEN + OPT_LEN + self.ext.iter().map(|(_, c)| c.len() + 2).sum::<usize>()
    }

    /// Total message length: header plus payload.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Write the header into the front of the packet's buffer; the payload (if already
    /// in place after [`GtpuRepr::header_len`] bytes) is left untouched.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut GtpuPacket<T>,
    ) -> Result<(), WireError> {
        let hl = self.header_len();
        let length = hl - HEADER_LEN + self.payload_len;
        if length > u16::MAX as usize {
            return Err(WireError::BadLength {
                field: "GTP-U length",
                value: length,
            });
        }
        for (t, c) in &self.ext {
            if *t == ext::NO_MORE || (c.len() + 2) % 4 != 0 || (c.len() + 2) / 4 > 255 {
                return Err(WireError::BadLength {
                    field: "GTP-U extension content (must be 4n-2 bytes, type non-zero)",
                    value: c.len(),
                });
            }
        }
        let b = p.buf.as_mut();
        if b.len() < hl {
            return Err(WireError::NoRoom {
                need: hl,
                have: b.len(),
            });
        }
        let mut flags = FLAGS_V1_PT;
        if self.seq.is_some() {
            flags |= FLAG_S;
        }
        if self.npdu.is_some() {
            flags |= FLAG_PN;
        }
        if !self.ext.is_empty() {
            flags |= FLAG_E;
        }
        b[field::FLAGS] = flags;
        b[field::TYPE] = self.msg_type;
        b[field::LENGTH].copy_from_slice(&(length as u16).to_be_bytes());
        b[field::TEID].copy_from_slice(&self.teid.to_be_bytes());
        if !self.has_opt() {
            return Ok(());
        }
        b[field::SEQ].copy_from_slice(&self.seq.unwrap_or(0).to_be_bytes());
        b[field::NPDU] = self.npdu.unwrap_or(0);
        b[field::NEXT_EXT] = self.ext.first().map_or(ext::NO_MORE, |e| e.0);
        let mut off = HEADER_LEN + OPT_LEN;
        for (i, (_, c)) in self.ext.iter().enumerate() {
            let n = c.len() + 2;
            b[off] = (n / 4) as u8;
            b[off + 1..off + 1 + c.len()].copy_from_slice(c);
            b[off + n - 1] = self.ext.get(i + 1).map_or(ext::NO_MORE, |e| e.0);
            off += n;
        }
        Ok(())
    }
}

/// Prepend an 8-octet G-PDU header for `teid` to the packet in place (no copy).
#[inline]
pub fn encap_gpdu(buf: &mut PacketBuf, teid: u32) -> Result<(), WireError> {
    let len = buf.len();
    if len > u16::MAX as usize {
        return Err(WireError::BadLength {
            field: "GTP-U length",
            value: len,
        });
    }
    let have = buf.headroom();
    let h = buf.prepend(HEADER_LEN).ok_or(WireError::NoRoom {
        need: HEADER_LEN,
        have,
    })?;
    let l = (len as u16).to_be_bytes();
    let t = teid.to_be_bytes();
    h.copy_from_slice(&[FLAGS_V1_PT, G_PDU, l[0], l[1], t[0], t[1], t[2], t[3]]);
    Ok(())
}

/// Validate a G-PDU, strip its header (and any bytes after the length field) in place,
/// and return its TEID. Other message types are refused.
#[inline]
pub fn decap_gpdu(buf: &mut PacketBuf) -> Result<u32, WireError> {
    let (teid, hl, end) = {
        let p = GtpuPacket::new_unchecked(buf.as_slice());
        let hl = p.check()?;
        if p.msg_type() != G_PDU {
            return Err(WireError::BadField {
                field: "GTP-U message type (expected G-PDU)",
                value: p.msg_type() as u32,
            });
        }
        (p.teid(), hl, p.end())
    };
    buf.truncate(end);
    buf.strip(hl);
    Ok(teid)
}

fn room(out: &[u8], need: usize) -> Result<(), WireError> {
    if out.len() < need {
        Err(WireError::NoRoom {
            need,
            have: out.len(),
        })
    } else {
        Ok(())
    }
}

/// Echo Request (§7.2.1): TEID 0, S flag set.
pub fn echo_request(seq: u16, out: &mut [u8]) -> Result<usize, WireError> {
    let r = GtpuRepr {
        msg_type: ECHO_REQUEST,
        seq: Some(seq),
        ..Default::default()
    };
    let n = r.buffer_len();
    room(out, n)?;
    r.emit(&mut GtpuPacket::new_unchecked(&mut out[..]))?;
    Ok(n)
}

/// Echo Response (§7.2.2) to `req`: same sequence number, Recovery IE with restart
/// counter 0 (§8.2: not used in GTP-U).
pub fn echo_response(req: &GtpuPacket<&[u8]>, out: &mut [u8]) -> Result<usize, WireError> {
    if req.msg_type() != ECHO_REQUEST {
        return Err(WireError::BadField {
            field: "GTP-U message type (expected Echo Request)",
            value: req.msg_type() as u32,
        });
    }
    let r = GtpuRepr {
        msg_type: ECHO_RESPONSE,
        seq: Some(req.seq().unwrap_or(0)),
        payload_len: 2,
        ..Default::default()
    };
    let n = r.buffer_len();
    room(out, n)?;
    r.emit(&mut GtpuPacket::new_unchecked(&mut out[..]))?;
    out[n - 2] = ie::RECOVERY;
    out[n - 1] = 0;
    Ok(n)
}

/// Error Indication (§7.3.1) for a G-PDU received on unknown `teid_data_i`: TEID 0, S
/// flag set, UDP Port extension (§5.2.2.1) with the triggering G-PDU's source port, IEs
/// Tunnel Endpoint Identifier Data I and GTP-U Peer Address (our address).
pub fn error_indication(
    teid_data_i: u32,
    peer: Ipv4Addr,
    udp_port: u16,
    out: &mut [u8],
) -> Result<usize, WireError> {
    let r = GtpuRepr {
        msg_type: ERROR_INDICATION,
        seq: Some(0),
        ext: vec![(ext::UDP_PORT, udp_port.to_be_bytes().to_vec())],
        payload_len: 5 + 7,
        ..Default::default()
    };
    let n = r.buffer_len();
    room(out, n)?;
    r.emit(&mut GtpuPacket::new_unchecked(&mut out[..]))?;
    let ies = &mut out[r.header_len()..n];
    ies[0] = ie::TEID_DATA_I;
    ies[1..5].copy_from_slice(&teid_data_i.to_be_bytes());
    ies[5] = ie::PEER_ADDRESS;
    ies[6..8].copy_from_slice(&4u16.to_be_bytes());
    ies[8..12].copy_from_slice(&peer.octets());
    Ok(n)
}

/// End Marker (§7.3.2) on tunnel `teid`: no IEs.
pub fn end_marker(teid: u32, out: &mut [u8]) -> Result<usize, WireError> {
    room(out, HEADER_LEN)?;
    GtpuRepr {
        msg_type: END_MARKER,
        teid,
        ..Default::default()
    }
    .emit(&mut GtpuPacket::new_unchecked(&mut out[..]))?;
    Ok(HEADER_LEN)
}

/// Supported Extension Headers Notification (§7.2.3) listing `types`.
pub fn supported_ext_headers_notification(
    seq: u16,
    types: &[u8],
    out: &mut [u8],
) -> Result<usize, WireError> {
    if types.len() > u8::MAX as usize {
        return Err(WireError::BadLength {
            field: "Extension Header Type List",
            value: types.len(),
        });
    }
    let r = GtpuRepr {
        msg_type: SUPPORTED_EXT_HEADERS_NOTIFICATION,
        seq: Some(seq),
        payload_len: 2 + types.len(),
        ..Default::default()
    };
    let n = r.buffer_len();
    room(out, n)?;
    r.emit(&mut GtpuPacket::new_unchecked(&mut out[..]))?;
    let ies = &mut out[r.header_len()..n];
    ies[0] = ie::EXT_HEADER_TYPE_LIST;
    ies[1] = types.len() as u8;
    ies[2..].copy_from_slice(types);
    Ok(n)
}

/// A decoded Echo Request or Response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Echo {
    pub response: bool,
    pub seq: Option<u16>,
    /// Recovery IE (mandatory in a response).
    pub recovery: Option<u8>,
}

/// Decode an Echo Request/Response, checking the IEs.
pub fn parse_echo<T: AsRef<[u8]>>(p: &GtpuPacket<T>) -> Result<Echo, WireError> {
    let response = match p.msg_type() {
        ECHO_REQUEST => false,
        ECHO_RESPONSE => true,
        t => {
            return Err(WireError::BadField {
                field: "GTP-U message type (expected Echo)",
                value: t as u32,
            })
        }
    };
    let mut recovery = None;
    for ie in p.ies() {
        if let Ie::Recovery(v) = ie? {
            recovery = Some(v);
        }
    }
    if response && recovery.is_none() {
        return Err(WireError::BadField {
            field: "Echo Response without Recovery IE",
            value: 0,
        });
    }
    Ok(Echo {
        response,
        seq: p.seq(),
        recovery,
    })
}

/// A decoded Error Indication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorIndication {
    pub teid_data_i: u32,
    pub peer: IpAddr,
    /// From the UDP Port extension header, if present.
    pub udp_port: Option<u16>,
}

/// Decode an Error Indication; both mandatory IEs must be present.
pub fn parse_error_indication<T: AsRef<[u8]>>(
    p: &GtpuPacket<T>,
) -> Result<ErrorIndication, WireError> {
    if p.msg_type() != ERROR_INDICATION {
        return Err(WireError::BadField {
            field: "GTP-U message type (expected Error Indication)",
            value: p.msg_type() as u32,
        });
    }
    let (mut teid, mut peer) = (None, None);
    for ie in p.ies() {
        match ie? {
            Ie::TeidDataI(t) => teid = Some(t),
            Ie::PeerAddress(a) => peer = Some(a),
            _ => {}
        }
    }
    let udp_port = p
        .extensions()
        .find(|(t, c)| *t == ext::UDP_PORT && c.len() == 2)
        .map(|(_, c)| u16::from_be_bytes([c[0], c[1]]));
    Ok(ErrorIndication {
        teid_data_i: teid.ok_or(WireError::BadField {
            field: "Error Indication without TEID Data I IE",
            value: 0,
        })?,
        peer: peer.ok_or(WireError::BadField {
            field: "Error Indication without GTP-U Peer Address IE",
            value: 0,
        })?,
        udp_port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encap_decap_in_place() {
        let mut b = PacketBuf::new();
        b.fill(&[
            0x45, 0, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
        ]);
        let before = b.headroom();
        encap_gpdu(&mut b, 0x1234_5678).unwrap();
        assert_eq!(b.headroom(), before - 8);
        assert_eq!(
            &b.as_slice()[..8],
            &[0x30, 0xff, 0, 20, 0x12, 0x34, 0x56, 0x78]
        );
        assert_eq!(decap_gpdu(&mut b).unwrap(), 0x1234_5678);
        assert_eq!(b.len(), 20);
        assert_eq!(b.headroom(), before);
    }

    #[test]
    fn decap_refuses_non_gpdu_and_keeps_buffer() {
        let mut out = [0u8; 16];
        let n = end_marker(7, &mut out).unwrap();
        let mut b = PacketBuf::new();
        b.fill(&out[..n]);
        assert!(matches!(
            decap_gpdu(&mut b),
            Err(WireError::BadField { .. })
        ));
        assert_eq!(b.as_slice(), &out[..n]);
    }
}
