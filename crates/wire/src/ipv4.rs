//! IPv4 header (RFC 791) over any buffer.

use crate::checksum;
use crate::WireError;
use std::net::Ipv4Addr;

pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_SCTP: u8 = 132;

/// Minimum (option-less) header length.
pub const HEADER_LEN: usize = 20;

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// A read/write view of an IPv4 packet. After [`Ipv4Packet::new_checked`] every accessor
/// is in bounds: version 4, IHL ≥ 5, header and total length within the buffer.
#[derive(Debug, Clone)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wrap without checking; accessors may panic on a short buffer.
    pub const fn new_unchecked(buf: T) -> Self {
        Ipv4Packet { buf }
    }

    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let p = Ipv4Packet { buf };
        p.check_len()?;
        Ok(p)
    }

    /// Validate version, IHL and lengths against the buffer. The buffer may be longer
    /// than the total length (link padding): [`Ipv4Packet::payload`] stops at total length.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buf.as_ref();
        if b.len() < HEADER_LEN {
            return Err(WireError::Truncated {
                need: HEADER_LEN,
                have: b.len(),
            });
        }
        if b[0] >> 4 != 4 {
            return Err(WireError::BadVersion(b[0] >> 4));
        }
        let hl = self.header_len();
        if hl < HEADER_LEN {
            return Err(WireError::BadLength {
                field: "IPv4 IHL",
                value: hl,
            });
        }
        let total = self.total_len() as usize;
        if total < hl {
            return Err(WireError::BadLength {
                field: "IPv4 total length",
                value: total,
            });
        }
        if b.len() < total {
            return Err(WireError::Truncated {
                need: total,
                have: b.len(),
            });
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buf.as_ref()[field::VER_IHL] & 0x0f) as usize) * 4
    }

    #[inline]
    pub fn dscp_ecn(&self) -> u8 {
        self.buf.as_ref()[field::DSCP_ECN]
    }

    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(&self.buf.as_ref()[field::LENGTH])
    }

    #[inline]
    pub fn ident(&self) -> u16 {
        be16(&self.buf.as_ref()[field::IDENT])
    }

    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.buf.as_ref()[field::FLG_OFF.start] & 0x40 != 0
    }

    #[inline]
    pub fn more_frags(&self) -> bool {
        self.buf.as_ref()[field::FLG_OFF.start] & 0x20 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(&self.buf.as_ref()[field::FLG_OFF]) & 0x1fff) << 3
    }

    /// True for any fragment (first or not) of a fragmented datagram.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        be16(&self.buf.as_ref()[field::FLG_OFF]) & 0x3fff != 0
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[field::TTL]
    }

    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buf.as_ref()[field::PROTOCOL]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(&self.buf.as_ref()[field::CHECKSUM])
    }

    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buf.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buf.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(&self.buf.as_ref()[..self.header_len()]) == 0
    }

    /// Header options (between byte 20 and the header length).
    pub fn options(&self) -> &[u8] {
        &self.buf.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload, up to the total length (not the buffer end).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Set version 4 and the header length in bytes (a multiple of 4, 20..=60).
    #[inline]
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buf.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    #[inline]
    pub fn set_dscp_ecn(&mut self, v: u8) {
        self.buf.as_mut()[field::DSCP_ECN] = v;
    }

    #[inline]
    pub fn set_total_len(&mut self, v: u16) {
        self.buf.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        self.buf.as_mut()[field::IDENT].copy_from_slice(&v.to_be_bytes());
    }

    /// Set DF, MF and the fragment offset (bytes, a multiple of 8).
    #[inline]
    pub fn set_flags_and_frag_offset(&mut self, df: bool, mf: bool, offset: u16) {
        let v = ((df as u16) << 14) | ((mf as u16) << 13) | ((offset >> 3) & 0x1fff);
        self.buf.as_mut()[field::FLG_OFF].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buf.as_mut()[field::TTL] = v;
    }

    #[inline]
    pub fn set_protocol(&mut self, v: u8) {
        self.buf.as_mut()[field::PROTOCOL] = v;
    }

    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        self.buf.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buf.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Compute and store the header checksum.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let c = checksum::checksum(&self.buf.as_ref()[..self.header_len()]);
        self.set_checksum(c);
    }

    /// Decrement TTL, updating the checksum incrementally (RFC 1624). Returns the new TTL.
    pub fn decrement_ttl(&mut self) -> u8 {
        let b = self.buf.as_mut();
        let old = u16::from_be_bytes([b[field::TTL], b[field::PROTOCOL]]);
        b[field::TTL] = b[field::TTL].wrapping_sub(1);
        let new = u16::from_be_bytes([b[field::TTL], b[field::PROTOCOL]]);
        let c = checksum::update(be16(&b[field::CHECKSUM]), old, new);
        b[field::CHECKSUM].copy_from_slice(&c.to_be_bytes());
        b[field::TTL]
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (h, t) = (self.header_len(), self.total_len() as usize);
        &mut self.buf.as_mut()[h..t]
    }
}

/// The owned form of an option-less IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub payload_len: usize,
    pub ttl: u8,
    pub dscp_ecn: u8,
    pub ident: u16,
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Parse a checked packet. Fragments, options and bad checksums are errors: a `Repr`
    /// describes a whole datagram we can rebuild exactly.
    pub fn parse<T: AsRef<[u8]>>(p: &Ipv4Packet<T>) -> Result<Self, WireError> {
        p.check_len()?;
        if p.header_len() != HEADER_LEN {
            return Err(WireError::BadField {
                field: "IPv4 options (unsupported in Ipv4Repr)",
                value: p.header_len() as u32,
            });
        }
        if p.is_fragment() {
            return Err(WireError::BadField {
                field: "IPv4 fragment (unsupported in Ipv4Repr)",
                value: be16(&p.buf.as_ref()[field::FLG_OFF]) as u32,
            });
        }
        if p.buf.as_ref()[field::FLG_OFF.start] & 0x80 != 0 {
            return Err(WireError::BadField {
                field: "IPv4 reserved flag",
                value: 1,
            });
        }
        if !p.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        Ok(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            payload_len: p.total_len() as usize - HEADER_LEN,
            ttl: p.ttl(),
            dscp_ecn: p.dscp_ecn(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header (with checksum) into the first 20 bytes of the packet's buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut Ipv4Packet<T>,
    ) -> Result<(), WireError> {
        let total = HEADER_LEN + self.payload_len;
        if total > u16::MAX as usize {
            return Err(WireError::BadLength {
                field: "IPv4 total length",
                value: total,
            });
        }
        let have = p.buf.as_ref().len();
        if have < HEADER_LEN {
            return Err(WireError::NoRoom {
                need: HEADER_LEN,
                have,
            });
        }
        p.set_version_and_header_len(HEADER_LEN);
        p.set_dscp_ecn(self.dscp_ecn);
        p.set_total_len(total as u16);
        p.set_ident(self.ident);
        p.set_flags_and_frag_offset(self.dont_frag, false, 0);
        p.set_ttl(self.ttl);
        p.set_protocol(self.protocol);
        p.set_src_addr(self.src);
        p.set_dst_addr(self.dst);
        p.fill_checksum();
        Ok(())
    }
}

#[inline]
fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real header (Wikipedia "IPv4 header checksum" example): checksum 0xb861.
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn pkt() -> Vec<u8> {
        let mut v = HDR.to_vec();
        v.resize(0x73, 0xaa);
        v
    }

    #[test]
    fn parse_known_header() {
        let b = pkt();
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(p.protocol(), PROTO_UDP);
        assert_eq!((p.ttl(), p.total_len(), p.header_len()), (64, 0x73, 20));
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.payload().len(), 0x73 - 20);
        let r = Ipv4Repr::parse(&p).unwrap();
        let mut out = vec![0u8; 0x73];
        out[20..].fill(0xaa);
        r.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]))
            .unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn rejects_bad_headers() {
        let b = pkt();
        for cut in 0..b.len() {
            assert!(matches!(
                Ipv4Packet::new_checked(&b[..cut]),
                Err(WireError::Truncated { .. })
            ));
        }
        let mut v6 = b.clone();
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).err(),
            Some(WireError::BadVersion(6))
        );
        let mut ihl = b.clone();
        ihl[0] = 0x44;
        assert!(matches!(
            Ipv4Packet::new_checked(&ihl[..]),
            Err(WireError::BadLength { .. })
        ));
        let mut tl = b.clone();
        tl[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert!(matches!(
            Ipv4Packet::new_checked(&tl[..]),
            Err(WireError::BadLength { .. })
        ));
        let mut cs = b.clone();
        cs[10] ^= 1;
        let p = Ipv4Packet::new_checked(&cs[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), Err(WireError::BadChecksum));
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut b = pkt();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        assert_eq!(p.decrement_ttl(), 63);
        assert!(p.verify_checksum());
    }

    #[test]
    fn fragments() {
        let mut b = pkt();
        let mut p = Ipv4Packet::new_checked(&mut b[..]).unwrap();
        p.set_flags_and_frag_offset(false, true, 1480);
        p.fill_checksum();
        assert!(p.more_frags() && p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        assert!(matches!(
            Ipv4Repr::parse(&p),
            Err(WireError::BadField { .. })
        ));
    }
}
