//! Per-packet flow key extraction (for PCEF rules and per-flow counters).

use crate::ipv4::{PROTO_SCTP, PROTO_TCP, PROTO_UDP};
use crate::WireError;
use std::net::Ipv4Addr;

/// The classic 5-tuple of an IPv4 packet. Ports are 0 for protocols without them and for
/// non-first fragments (which carry no transport header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiveTuple {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub sport: u16,
    pub dport: u16,
    pub proto: u8,
}

impl FiveTuple {
    /// The tuple of the reply direction.
    #[inline]
    pub fn reversed(&self) -> Self {
        FiveTuple {
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
            proto: self.proto,
        }
    }
}

/// Extract the 5-tuple of the IPv4 packet `ip`. Checks only what it reads: version, IHL,
/// total length within the buffer and, when ports are read, that they are inside the
/// packet. Checksums are not verified (that is not this stage's job).
#[inline]
pub fn five_tuple(ip: &[u8]) -> Result<FiveTuple, WireError> {
    if ip.len() < 20 {
        return Err(WireError::Truncated {
            need: 20,
            have: ip.len(),
        });
    }
    let vihl = ip[0];
    if vihl >> 4 != 4 {
        return Err(WireError::BadVersion(vihl >> 4));
    }
    let hl = ((vihl & 0x0f) as usize) * 4;
    let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
    if hl < 20 || total < hl {
        return Err(WireError::BadLength {
            field: if hl < 20 {
                "IPv4 IHL"
            } else {
                "IPv4 total length"
            },
            value: if hl < 20 { hl } else { total },
        });
    }
    if total > ip.len() {
        return Err(WireError::Truncated {
            need: total,
            have: ip.len(),
        });
    }
    let proto = ip[9];
    let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let frag_off = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
    let (mut sport, mut dport) = (0, 0);
    if frag_off == 0 && matches!(proto, PROTO_TCP | PROTO_UDP | PROTO_SCTP) {
        // All three start with source and destination port.
        if total < hl + 4 {
            return Err(WireError::Truncated {
                need: hl + 4,
                have: total,
            });
        }
        sport = u16::from_be_bytes([ip[hl], ip[hl + 1]]);
        dport = u16::from_be_bytes([ip[hl + 2], ip[hl + 3]]);
    }
    Ok(FiveTuple {
        src,
        dst,
        sport,
        dport,
        proto,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(proto: u8, frag: u16, ihl: u8, l4: &[u8]) -> Vec<u8> {
        let hl = ihl as usize * 4;
        let total = hl + l4.len();
        let mut p = vec![0u8; total];
        p[0] = 0x40 | ihl;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[6..8].copy_from_slice(&frag.to_be_bytes());
        p[8] = 64;
        p[9] = proto;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[8, 8, 8, 8]);
        p[hl..].copy_from_slice(l4);
        p
    }

    #[test]
    fn ports_for_tcp_udp_sctp() {
        for proto in [PROTO_TCP, PROTO_UDP, PROTO_SCTP] {
            let t = five_tuple(&pkt(proto, 0, 5, &[0x30, 0x39, 0x00, 0x35, 0, 0, 0, 0])).unwrap();
            assert_eq!(
                t,
                FiveTuple {
                    src: Ipv4Addr::new(10, 0, 0, 1),
                    dst: Ipv4Addr::new(8, 8, 8, 8),
                    sport: 12345,
                    dport: 53,
                    proto
                }
            );
            assert_eq!(t.reversed().reversed(), t);
        }
        // Options move the transport header.
        let mut p = pkt(PROTO_UDP, 0, 6, &[0, 1, 0, 2, 0, 8, 0, 0]);
        p[20..24].fill(1); // option bytes must not be read as ports
        assert_eq!(five_tuple(&p).map(|t| (t.sport, t.dport)), Ok((1, 2)));
    }

    #[test]
    fn zero_ports_for_icmp_and_later_fragments() {
        let t = five_tuple(&pkt(1, 0, 5, &[8, 0, 1, 2, 3, 4])).unwrap();
        assert_eq!((t.sport, t.dport, t.proto), (0, 0, 1));
        let t = five_tuple(&pkt(PROTO_UDP, 0x0010, 5, &[1, 2, 3, 4])).unwrap();
        assert_eq!((t.sport, t.dport), (0, 0));
        // First fragment (MF set, offset 0) still has ports.
        let t = five_tuple(&pkt(PROTO_UDP, 0x2000, 5, &[1, 2, 3, 4])).unwrap();
        assert_eq!((t.sport, t.dport), (0x102, 0x304));
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(matches!(
            five_tuple(&[0x45; 10]),
            Err(WireError::Truncated { .. })
        ));
        let mut p = pkt(PROTO_UDP, 0, 5, &[1, 2, 3, 4]);
        p[0] = 0x65;
        assert_eq!(five_tuple(&p), Err(WireError::BadVersion(6)));
        let p = pkt(PROTO_UDP, 0, 5, &[1, 2]);
        assert!(matches!(
            five_tuple(&p),
            Err(WireError::Truncated { need: 24, have: 22 })
        ));
        let mut p = pkt(PROTO_UDP, 0, 5, &[1, 2, 3, 4]);
        p[0] = 0x44;
        assert!(matches!(five_tuple(&p), Err(WireError::BadLength { .. })));
        let mut p = pkt(PROTO_UDP, 0, 5, &[1, 2, 3, 4]);
        p[3] = 200;
        assert!(matches!(
            five_tuple(&p),
            Err(WireError::Truncated { need: 200, .. })
        ));
    }
}
