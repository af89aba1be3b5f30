//! The UE identity an initial NAS message names (TS 24.301 §8.2: Attach Request,
//! Tracking Area Update Request, Detach Request), read in place for the node's S1AP
//! demux, which picks the UE's slice from it before any slice decodes the message.
//! Integrity-protected messages are read through their security header without
//! verification: the identity only steers the message, and the slice that owns the
//! UE verifies it.

/// What the demux routes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NasIdentity {
    /// IMSI as a number (at most 15 digits).
    Imsi(u64),
    /// GUTI: PLMN (TBCD octets), MME group ID, MME code, M-TMSI.
    Guti {
        plmn: [u8; 3],
        mme_group_id: u16,
        mme_code: u8,
        m_tmsi: u32,
    },
    /// A message without an identity the demux can use (a Service Request, an
    /// IMEI, a ciphered or unknown message, garbage).
    None,
}

const EMM_PD: u8 = 0x07;
const ATTACH_REQUEST: u8 = 0x41;
const DETACH_REQUEST: u8 = 0x45;
const TAU_REQUEST: u8 = 0x48;

/// The identity in an EPS mobile identity value (§9.9.3.12).
pub fn mobile_identity(v: &[u8]) -> NasIdentity {
    let Some(&first) = v.first() else {
        return NasIdentity::None;
    };
    match first & 0x07 {
        1 => {
            let odd = first & 0x08 != 0;
            let mut n = 0u64;
            let mut digits = 1usize;
            if first >> 4 > 9 {
                return NasIdentity::None;
            }
            n += u64::from(first >> 4);
            for (i, b) in v[1..].iter().enumerate() {
                let last = i == v.len() - 2;
                for d in [b & 0x0f, b >> 4] {
                    if d == 0x0f && last && !odd {
                        break;
                    }
                    // At most 15 digits (TS 23.003 §2.2); checked before the digit is
                    // added, as a longer value would overflow `n`.
                    if d > 9 || digits == 15 {
                        return NasIdentity::None;
                    }
                    n = n * 10 + u64::from(d);
                    digits += 1;
                }
            }
            NasIdentity::Imsi(n)
        }
        6 if v.len() >= 11 => NasIdentity::Guti {
            plmn: [v[1], v[2], v[3]],
            mme_group_id: u16::from_be_bytes([v[4], v[5]]),
            mme_code: v[6],
            m_tmsi: u32::from_be_bytes([v[7], v[8], v[9], v[10]]),
        },
        _ => NasIdentity::None,
    }
}

/// The identity an initial NAS message carries.
pub fn initial_identity(nas: &[u8]) -> NasIdentity {
    let Some(&h) = nas.first() else {
        return NasIdentity::None;
    };
    if h & 0x0f != EMM_PD {
        return NasIdentity::None;
    }
    // Security header types 1 and 3 (integrity only) carry a readable message after
    // the MAC and sequence number; 2 and 4 are ciphered; 12+ are short forms.
    let plain = match h >> 4 {
        0 => nas,
        1 | 3 => match nas.get(6..) {
            Some(p) if p.first().is_some_and(|b| b & 0x0f == EMM_PD && b >> 4 == 0) => p,
            _ => return NasIdentity::None,
        },
        _ => return NasIdentity::None,
    };
    match plain.get(1) {
        Some(&ATTACH_REQUEST) | Some(&DETACH_REQUEST) | Some(&TAU_REQUEST) => {}
        _ => return NasIdentity::None,
    }
    let Some(&len) = plain.get(3) else {
        return NasIdentity::None;
    };
    match plain.get(4..4 + usize::from(len)) {
        Some(v) => mobile_identity(v),
        None => NasIdentity::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imsi_and_guti_of_an_attach_request() {
        // 001010000000001: odd, 15 digits.
        let imsi = [0x09, 0x10, 0x10, 0x00, 0x00, 0x00, 0x00, 0x10];
        let mut m = vec![0x07, 0x41, 0x71, imsi.len() as u8];
        m.extend_from_slice(&imsi);
        m.extend_from_slice(&[0x02, 0xe0, 0xe0]);
        assert_eq!(initial_identity(&m), NasIdentity::Imsi(1010000000001));
        let guti = [
            0xf6, 0x00, 0xf1, 0x10, 0x00, 0x01, 0x01, 0xc0, 0x00, 0x00, 0x05,
        ];
        let mut m = vec![0x07, 0x48, 0x00, 11];
        m.extend_from_slice(&guti);
        let g = NasIdentity::Guti {
            plmn: [0x00, 0xf1, 0x10],
            mme_group_id: 1,
            mme_code: 1,
            m_tmsi: 0xc000_0005,
        };
        assert_eq!(initial_identity(&m), g);
        // Integrity protected: MAC and SQN, then the plain message.
        let mut p = vec![0x17, 1, 2, 3, 4, 0];
        p.extend_from_slice(&m);
        assert_eq!(initial_identity(&p), g);
        // Ciphered, service request, truncated, empty: nothing to route on.
        p[0] = 0x27;
        assert_eq!(initial_identity(&p), NasIdentity::None);
        assert_eq!(initial_identity(&[0xc7, 0, 0, 0]), NasIdentity::None);
        for n in 0..m.len() {
            assert_eq!(initial_identity(&m[..n]), NasIdentity::None, "{n}");
        }
    }

    #[test]
    fn imsi_digit_counts() {
        // 6 digits, even: 001010 -> F filler in the last high nibble.
        assert_eq!(
            mobile_identity(&[0x01, 0x10, 0x10, 0xf0]),
            NasIdentity::Imsi(1010)
        );
        assert_eq!(mobile_identity(&[0x01, 0x1a]), NasIdentity::None);
    }
}
