//! UDP header (RFC 768) over any buffer, with the IPv4 pseudo-header checksum.

use crate::checksum;
use crate::ipv4::PROTO_UDP;
use crate::WireError;
use std::net::Ipv4Addr;

pub const HEADER_LEN: usize = 8;

mod field {
    use core::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A read/write view of a UDP datagram. After [`UdpPacket::new_checked`] the length field
/// is at least 8 and within the buffer; [`UdpPacket::payload`] stops at the length field.
#[derive(Debug, Clone)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const fn new_unchecked(buf: T) -> Self {
        UdpPacket { buf }
    }

    pub fn new_checked(buf: T) -> Result<Self, WireError> {
        let p = UdpPacket { buf };
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<(), WireError> {
        let have = self.buf.as_ref().len();
        if have < HEADER_LEN {
            return Err(WireError::Truncated {
                need: HEADER_LEN,
                have,
            });
        }
        let len = self.len() as usize;
        if len < HEADER_LEN {
            return Err(WireError::BadLength {
                field: "UDP length",
                value: len,
            });
        }
        if have < len {
            return Err(WireError::Truncated { need: len, have });
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buf
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(&self.buf.as_ref()[field::SRC_PORT])
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(&self.buf.as_ref()[field::DST_PORT])
    }

    /// The length field (header + payload).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(&self.buf.as_ref()[field::LENGTH])
    }

    /// True if the length field says there is no payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() as usize <= HEADER_LEN
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(&self.buf.as_ref()[field::CHECKSUM])
    }

    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[HEADER_LEN..self.len() as usize]
    }

    /// The checksum this datagram should carry between `src` and `dst`.
    pub fn compute_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> u16 {
        let d = &self.buf.as_ref()[..self.len() as usize];
        let s = checksum::pseudo_header_sum(src.octets(), dst.octets(), PROTO_UDP, self.len());
        // Sum header without the checksum field, then the payload.
        let s = checksum::sum(s, &d[..6]);
        let c = !checksum::fold(checksum::sum(s, &d[8..]));
        if c == 0 {
            0xffff
        } else {
            c
        }
    }

    /// The checksum verifies, or is zero (not computed, allowed over IPv4).
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let d = &self.buf.as_ref()[..self.len() as usize];
        let s = checksum::pseudo_header_sum(src.octets(), dst.octets(), PROTO_UDP, self.len());
        checksum::fold(checksum::sum(s, d)) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        self.buf.as_mut()[field::SRC_PORT].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        self.buf.as_mut()[field::DST_PORT].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_len(&mut self, v: u16) {
        self.buf.as_mut()[field::LENGTH].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        self.buf.as_mut()[field::CHECKSUM].copy_from_slice(&v.to_be_bytes());
    }

    /// Compute and store the checksum.
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let c = self.compute_checksum(src, dst);
        self.set_checksum(c);
    }

    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.len() as usize;
        &mut self.buf.as_mut()[HEADER_LEN..len]
    }
}

/// The owned form of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: usize,
}

impl UdpRepr {
    /// Parse, verifying the checksum against the IPv4 addresses.
    pub fn parse<T: AsRef<[u8]>>(
        p: &UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<Self, WireError> {
        p.check_len()?;
        if !p.verify_checksum(src, dst) {
            return Err(WireError::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: p.src_port(),
            dst_port: p.dst_port(),
            payload_len: p.len() as usize - HEADER_LEN,
        })
    }

    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header; the payload must already be in place (it is checksummed).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        p: &mut UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<(), WireError> {
        let len = HEADER_LEN + self.payload_len;
        if len > u16::MAX as usize {
            return Err(WireError::BadLength {
                field: "UDP length",
                value: len,
            });
        }
        let have = p.buf.as_ref().len();
        if have < len {
            return Err(WireError::NoRoom { need: len, have });
        }
        p.set_src_port(self.src_port);
        p.set_dst_port(self.dst_port);
        p.set_len(len as u16);
        p.fill_checksum(src, dst);
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

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 31);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 30);

    #[test]
    fn known_checksum() {
        // Computed by hand: pseudo header c0a8 001f c0a8 001e 0011 000a, header
        // 0014 000a 000a, payload 6869 ("hi"): sum 0x1ea39 → 0xea3a, checksum 0x15c5.
        let b = [0x00, 0x14, 0x00, 0x0a, 0x00, 0x0a, 0x15, 0xc5, b'h', b'i'];
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(p.compute_checksum(SRC, DST), 0x15c5);
        assert!(p.verify_checksum(SRC, DST));
        let r = UdpRepr::parse(&p, SRC, DST).unwrap();
        assert_eq!((r.src_port, r.dst_port, r.payload_len), (20, 10, 2));
        let mut out = [0u8; 10];
        out[8..].copy_from_slice(b"hi");
        r.emit(&mut UdpPacket::new_unchecked(&mut out[..]), SRC, DST)
            .unwrap();
        assert_eq!(out, b);
    }

    #[test]
    fn errors() {
        let b = [0x00, 0x14, 0x00, 0x0a, 0x00, 0x0a, 0x15, 0xc4, b'h', b'i'];
        let p = UdpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(UdpRepr::parse(&p, SRC, DST), Err(WireError::BadChecksum));
        for cut in 0..b.len() {
            assert!(matches!(
                UdpPacket::new_checked(&b[..cut]),
                Err(WireError::Truncated { .. })
            ));
        }
        let short = [0, 1, 0, 2, 0, 7, 0, 0];
        assert!(matches!(
            UdpPacket::new_checked(&short[..]),
            Err(WireError::BadLength { .. })
        ));
    }
}
