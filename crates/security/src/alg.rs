//! EIA/EEA (TS 33.401 Annex B) over oxirush-security's implementations.

use crate::keys::Key128;
use oxirush_security::nas_eps::{KNasEnc, KNasInt};
use oxirush_security::{Bearer, CipheringAlgorithm, Direction, IntegrityAlgorithm};

/// Unknown algorithm identity (3 bits on the wire; only 0..=3 are defined).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AlgError {
    #[error("unknown EPS integrity algorithm identity {0} (EIA0..EIA3 defined)")]
    UnknownEia(u8),
    #[error("unknown EPS encryption algorithm identity {0} (EEA0..EEA3 defined)")]
    UnknownEea(u8),
    #[error("bit length {bits} exceeds the {bytes}-byte buffer")]
    BitLength { bits: u64, bytes: usize },
}

/// EPS integrity algorithms; the discriminant is the identity of TS 24.301 9.9.3.23.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Eia {
    Eia0 = 0,
    Eia1 = 1,
    Eia2 = 2,
    Eia3 = 3,
}

/// EPS encryption algorithms; the discriminant is the identity of TS 24.301 9.9.3.23.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Eea {
    Eea0 = 0,
    Eea1 = 1,
    Eea2 = 2,
    Eea3 = 3,
}

impl TryFrom<u8> for Eia {
    type Error = AlgError;
    fn try_from(v: u8) -> Result<Self, AlgError> {
        Ok(match v {
            0 => Eia::Eia0,
            1 => Eia::Eia1,
            2 => Eia::Eia2,
            3 => Eia::Eia3,
            _ => return Err(AlgError::UnknownEia(v)),
        })
    }
}

impl TryFrom<u8> for Eea {
    type Error = AlgError;
    fn try_from(v: u8) -> Result<Self, AlgError> {
        Ok(match v {
            0 => Eea::Eea0,
            1 => Eea::Eea1,
            2 => Eea::Eea2,
            3 => Eea::Eea3,
            _ => return Err(AlgError::UnknownEea(v)),
        })
    }
}

impl From<Eia> for u8 {
    fn from(a: Eia) -> u8 {
        a as u8
    }
}
impl From<Eea> for u8 {
    fn from(a: Eea) -> u8 {
        a as u8
    }
}

pub(crate) fn ia(a: Eia) -> IntegrityAlgorithm {
    match a {
        Eia::Eia0 => IntegrityAlgorithm::EIA0,
        Eia::Eia1 => IntegrityAlgorithm::EIA1,
        Eia::Eia2 => IntegrityAlgorithm::EIA2,
        Eia::Eia3 => IntegrityAlgorithm::EIA3,
    }
}

pub(crate) fn ea(a: Eea) -> CipheringAlgorithm {
    match a {
        Eea::Eea0 => CipheringAlgorithm::EEA0,
        Eea::Eea1 => CipheringAlgorithm::EEA1,
        Eea::Eea2 => CipheringAlgorithm::EEA2,
        Eea::Eea3 => CipheringAlgorithm::EEA3,
    }
}

/// BEARER is 5 bits and DIRECTION 1 bit on the wire; higher bits are ignored
/// so a caller cannot make these infallible functions fail.
pub(crate) fn bearer(b: u8) -> Bearer {
    Bearer::try_from(b & 0x1f).unwrap_or(Bearer::ZERO)
}

pub(crate) fn direction(d: u8) -> Direction {
    if d & 1 == 0 {
        Direction::Uplink
    } else {
        Direction::Downlink
    }
}

/// 32-bit MAC (MAC-I / NAS-MAC) over whole bytes, big-endian. EIA0 gives zeros.
/// `direction`: 0 uplink, 1 downlink. `bearer`: 5 bits (0 for NAS).
pub fn eia_mac(alg: Eia, key: &Key128, count: u32, bearer_id: u8, dir: u8, msg: &[u8]) -> [u8; 4] {
    let k = KNasInt::new(key.as_bytes());
    oxirush_security::nia_mac(&k, count, bearer(bearer_id), direction(dir), msg, ia(alg))
        .to_be_bytes()
}

/// As [`eia_mac`] over the first `bit_len` bits of `msg` (3GPP test data use
/// non-octet lengths).
pub fn eia_mac_bits(
    alg: Eia,
    key: &Key128,
    count: u32,
    bearer_id: u8,
    dir: u8,
    msg: &[u8],
    bit_len: u64,
) -> Result<[u8; 4], AlgError> {
    let k = KNasInt::new(key.as_bytes());
    oxirush_security::nia_mac_bits(
        &k,
        count,
        bearer(bearer_id),
        direction(dir),
        msg,
        bit_len,
        ia(alg),
    )
    .map(u32::to_be_bytes)
    .map_err(|_| AlgError::BitLength {
        bits: bit_len,
        bytes: msg.len(),
    })
}

/// Cipher or decipher in place (the same operation). EEA0 leaves data unchanged.
pub fn eea_apply(alg: Eea, key: &Key128, count: u32, bearer_id: u8, dir: u8, data: &mut [u8]) {
    let k = KNasEnc::new(key.as_bytes());
    oxirush_security::nea_cipher(&k, count, bearer(bearer_id), direction(dir), data, ea(alg));
}

/// As [`eea_apply`] over the first `bit_len` bits; unused low bits of the
/// last byte are left as they were.
pub fn eea_apply_bits(
    alg: Eea,
    key: &Key128,
    count: u32,
    bearer_id: u8,
    dir: u8,
    data: &mut [u8],
    bit_len: u64,
) -> Result<(), AlgError> {
    let k = KNasEnc::new(key.as_bytes());
    let len = data.len();
    oxirush_security::nea_cipher_bits(
        &k,
        count,
        bearer(bearer_id),
        direction(dir),
        data,
        bit_len,
        ea(alg),
    )
    .map_err(|_| AlgError::BitLength {
        bits: bit_len,
        bytes: len,
    })
}
