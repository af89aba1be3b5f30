//! Building test and benchmark traffic: inner IPv4/UDP packets and GTP-U G-PDUs.

use pepc_wire::checksum;
use std::net::Ipv4Addr;

/// An IPv4/UDP packet of exactly `total_len` bytes (>= 28) with valid checksums.
pub fn ipv4_udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, total_len: usize) -> Vec<u8> {
    let total_len = total_len.max(28);
    let mut p = vec![0u8; total_len];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&(total_len as u16).to_be_bytes());
    p[6] = 0x40; // DF
    p[8] = 64;
    p[9] = 17;
    p[12..16].copy_from_slice(&src.octets());
    p[16..20].copy_from_slice(&dst.octets());
    let c = checksum::checksum(&p[..20]);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let udp_len = (total_len - 20) as u16;
    p[20..22].copy_from_slice(&sport.to_be_bytes());
    p[22..24].copy_from_slice(&dport.to_be_bytes());
    p[24..26].copy_from_slice(&udp_len.to_be_bytes());
    for (i, b) in p[28..].iter_mut().enumerate() {
        *b = i as u8;
    }
    let s = checksum::pseudo_header_sum(src.octets(), dst.octets(), 17, udp_len);
    let mut c = !checksum::fold(checksum::sum(s, &p[20..]));
    if c == 0 {
        c = 0xffff;
    }
    p[26..28].copy_from_slice(&c.to_be_bytes());
    p
}

/// A GTP-U G-PDU (8-byte header, no optional fields) carrying `inner`.
pub fn gpdu(teid: u32, inner: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(8 + inner.len());
    p.extend_from_slice(&[0x30, 0xff]);
    p.extend_from_slice(&(inner.len() as u16).to_be_bytes());
    p.extend_from_slice(&teid.to_be_bytes());
    p.extend_from_slice(inner);
    p
}

/// Rewrite a G-PDU template in place for another UE: TEID and inner source address
/// (the IPv4 header checksum is updated incrementally, RFC 1624).
#[inline]
pub fn retarget_uplink(pkt: &mut [u8], teid: u32, src: Ipv4Addr) {
    pkt[4..8].copy_from_slice(&teid.to_be_bytes());
    retarget_ip(&mut pkt[8..], 12, src);
}

/// Rewrite a downlink IPv4 template's destination address in place.
#[inline]
pub fn retarget_downlink(pkt: &mut [u8], dst: Ipv4Addr) {
    retarget_ip(pkt, 16, dst);
}

#[inline]
fn retarget_ip(ip: &mut [u8], off: usize, addr: Ipv4Addr) {
    let old = u32::from_be_bytes([ip[off], ip[off + 1], ip[off + 2], ip[off + 3]]);
    let new = u32::from(addr);
    let c = u16::from_be_bytes([ip[10], ip[11]]);
    let c = checksum::update32(c, old, new);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip[off..off + 4].copy_from_slice(&addr.octets());
    // The UDP checksum covers the addresses too; 0 means "none" for IPv4 UDP.
    if ip[9] == 17 && ip.len() >= 28 {
        ip[26] = 0;
        ip[27] = 0;
    }
}
