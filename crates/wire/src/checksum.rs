//! Internet checksum (RFC 1071) and incremental update (RFC 1624).

/// One's-complement sum of `data` folded into 32 bits (not yet complemented). Chain calls
/// by passing the previous result as `initial`; only the last chunk may have odd length.
#[inline]
pub fn sum(initial: u32, data: &[u8]) -> u32 {
    // Sum 32-bit words into a u64 so carries are never lost; fold at the end.
    let mut acc: u64 = initial as u64;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        acc += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let rest = chunks.remainder();
    let mut i = 0;
    while i + 1 < rest.len() {
        acc += u16::from_be_bytes([rest[i], rest[i + 1]]) as u64;
        i += 2;
    }
    if i < rest.len() {
        acc += (rest[i] as u64) << 8;
    }
    // Fold 64 → 32 bits keeping the one's-complement carries.
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc = (acc & 0xffff_ffff) + (acc >> 32);
    acc as u32
}

/// Fold a 32-bit running sum to 16 bits.
#[inline]
pub fn fold(mut s: u32) -> u16 {
    s = (s & 0xffff) + (s >> 16);
    s = (s & 0xffff) + (s >> 16);
    s as u16
}

/// The Internet checksum of `data`: the complement of its one's-complement sum.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(0, data))
}

/// The one's-complement sum of the IPv4 pseudo-header (RFC 768 / RFC 793).
#[inline]
pub fn pseudo_header_sum(src: [u8; 4], dst: [u8; 4], proto: u8, len: u16) -> u32 {
    let a = (u16::from_be_bytes([src[0], src[1]]) as u32)
        + (u16::from_be_bytes([src[2], src[3]]) as u32)
        + (u16::from_be_bytes([dst[0], dst[1]]) as u32)
        + (u16::from_be_bytes([dst[2], dst[3]]) as u32);
    a + proto as u32 + len as u32
}

/// RFC 1624 eqn. 3: the new checksum after a 16-bit field changes from `old` to `new`,
/// without touching the rest of the data.
#[inline]
pub fn update(csum: u16, old: u16, new: u16) -> u16 {
    // HC' = ~(~HC + ~m + m')
    !fold(!csum as u32 + !old as u32 + new as u32)
}

/// RFC 1624 update for a 32-bit field (e.g. an IPv4 address), as two 16-bit words.
#[inline]
pub fn update32(csum: u16, old: u32, new: u32) -> u16 {
    let s = !csum as u32
        + (!(old >> 16) as u16) as u32
        + (!(old as u16)) as u32
        + (new >> 16)
        + (new & 0xffff);
    !fold(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: words 0001 f203 f4f5 f6f7 sum to 0xddf2.
        let d = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &d)), 0xddf2);
        assert_eq!(checksum(&d), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(
            checksum(&[0x12, 0x34, 0x56]),
            checksum(&[0x12, 0x34, 0x56, 0x00])
        );
    }

    #[test]
    fn chained_sums_match_whole() {
        let d: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        let whole = checksum(&d);
        let part = !fold(sum(sum(0, &d[..64]), &d[64..]));
        assert_eq!(whole, part);
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut d: Vec<u8> = (0..40u32).map(|i| (i * 13 + 1) as u8).collect();
        let c0 = checksum(&d);
        let old = u16::from_be_bytes([d[10], d[11]]);
        d[10] = 0xab;
        d[11] = 0xcd;
        assert_eq!(update(c0, old, 0xabcd), checksum(&d));
        let old32 = u32::from_be_bytes(d[20..24].try_into().unwrap());
        d[20..24].copy_from_slice(&0xdead_beefu32.to_be_bytes());
        assert_eq!(
            update32(
                checksum(&{
                    let mut e = d.clone();
                    e[20..24].copy_from_slice(&old32.to_be_bytes());
                    e
                }),
                old32,
                0xdead_beef
            ),
            checksum(&d)
        );
    }
}
