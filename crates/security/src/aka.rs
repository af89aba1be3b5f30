//! EPS-AKA (TS 33.102 §6.3, TS 33.401 §6.1): HSS vector generation, USIM
//! check with SQN freshness, and HSS-side resynchronisation.

use crate::kdf::kasme;
use crate::keys::{Key128, Key256};
use crate::milenage::Milenage;
use oxirush_security::milenage::{Amf, Auts, Sqn};
use oxirush_security::{Autn, Rand};

/// Largest accepted jump SQN - SQN_MS (TS 33.102 Annex C.2.1 example Δ = 2^28);
/// guards against a replayed-but-far-future SQN exhausting the space.
pub const SQN_DELTA: u64 = 1 << 28;
/// SQN is 48 bits.
pub const SQN_MAX: u64 = (1 << 48) - 1;

/// 48-bit SQN as a number.
pub fn sqn_to_u64(sqn: [u8; 6]) -> u64 {
    let mut b = [0u8; 8];
    b[2..].copy_from_slice(&sqn);
    u64::from_be_bytes(b)
}

/// Low 48 bits of `v` as an SQN.
pub fn sqn_from_u64(v: u64) -> [u8; 6] {
    let b = (v & SQN_MAX).to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// An E-UTRAN authentication vector (TS 33.401 §6.1.2). `Debug` shows RAND
/// and AUTN only.
#[derive(Clone, PartialEq, Eq)]
pub struct AuthVector {
    pub rand: [u8; 16],
    /// XRES (8 bytes with MILENAGE), in place: no allocation per vector.
    pub xres: [u8; 8],
    pub autn: [u8; 16],
    pub kasme: Key256,
}

impl core::fmt::Debug for AuthVector {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AuthVector")
            .field("rand", &hex::encode(self.rand))
            .field("autn", &hex::encode(self.autn))
            .field("xres", &"<redacted>")
            .field("kasme", &self.kasme)
            .finish()
    }
}

impl Drop for AuthVector {
    fn drop(&mut self) {
        zeroize::Zeroize::zeroize(&mut self.xres);
    }
}

/// HSS: build AUTN = SQN^AK || AMF || MAC-A and derive KASME for the serving
/// PLMN (`plmn` encoded as in TS 24.301 / 24.008 10.5.1.3).
pub fn generate_vector(
    mil: &Milenage,
    sqn: [u8; 6],
    amf: [u8; 2],
    rand: [u8; 16],
    plmn: [u8; 3],
) -> AuthVector {
    let v = mil
        .inner()
        .authentication_vector(&Rand::new(&rand), &Sqn::new(&sqn), &Amf::new(&amf));
    let autn = *v.autn().as_octets();
    let ck = Key128::new(*v.ck().as_octets());
    let ik = Key128::new(*v.ik().as_octets());
    let sqn_xor_ak: [u8; 6] = autn[..6].try_into().unwrap_or([0; 6]);
    AuthVector {
        rand,
        xres: *v.xres().as_octets(),
        autn,
        kasme: kasme(&ck, &ik, plmn, sqn_xor_ak),
    }
}

/// USIM result after a successful AUTN check. `Debug` hides RES, CK, IK.
#[derive(Clone)]
pub struct UsimOk {
    pub res: [u8; 8],
    pub ck: Key128,
    pub ik: Key128,
    /// The SQN recovered from AUTN; the caller stores it as the new SQN_MS.
    pub sqn: u64,
}

impl core::fmt::Debug for UsimOk {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("UsimOk")
            .field("sqn", &self.sqn)
            .finish_non_exhaustive()
    }
}

/// Why the USIM/ME rejects a challenge; each maps to an EMM cause of
/// TS 24.301 (#20, #21, #26).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UsimError {
    #[error("MAC failure: AUTN was not produced with this subscriber's K")]
    MacFailure,
    #[error("synch failure: SQN out of range, AUTS carries SQN_MS")]
    SynchFailure { auts: [u8; 14] },
    #[error("non-EPS authentication unacceptable: AMF separation bit is 0")]
    NonEpsAuthUnacceptable,
}

/// HSS-side resynchronisation failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("MAC-S in AUTS does not verify")]
    MacFailure,
}

/// UE side: verify MAC-A, the EPS separation bit (TS 33.401 §6.1.1), and SQN
/// freshness: accept iff `sqn_ms_max < SQN <= sqn_ms_max + SQN_DELTA`
/// (`sqn_ms_max` is the highest SQN this USIM accepted). Out of range gives
/// AUTS = (SQN_MS ^ AK*) || MAC-S.
pub fn usim_check(
    mil: &Milenage,
    rand: [u8; 16],
    autn: [u8; 16],
    sqn_ms_max: u64,
) -> Result<UsimOk, UsimError> {
    let rand_t = Rand::new(&rand);
    let resp = mil
        .inner()
        .check_autn(&rand_t, &Autn::new(&autn))
        .map_err(|_| UsimError::MacFailure)?;
    if !resp.amf().separation_bit() {
        return Err(UsimError::NonEpsAuthUnacceptable);
    }
    let sqn = resp.sqn().get();
    let fresh = sqn > sqn_ms_max && sqn - sqn_ms_max <= SQN_DELTA;
    if !fresh {
        let sqn_ms = Sqn::new(&sqn_from_u64(sqn_ms_max));
        let auts = *mil.inner().auts(&rand_t, &sqn_ms).as_octets();
        return Err(UsimError::SynchFailure { auts });
    }
    Ok(UsimOk {
        res: *resp.res().as_octets(),
        ck: Key128::new(*resp.ck().as_octets()),
        ik: Key128::new(*resp.ik().as_octets()),
        sqn,
    })
}

/// UE side, explicit: AUTS for SQN_MS (AMF 0000 in MAC-S, TS 33.102 §6.3.3).
pub fn make_auts(mil: &Milenage, rand: [u8; 16], sqn_ms: [u8; 6]) -> [u8; 14] {
    *mil.inner()
        .auts(&Rand::new(&rand), &Sqn::new(&sqn_ms))
        .as_octets()
}

/// HSS side: verify MAC-S of AUTS (AMF 0000) and recover SQN_MS.
pub fn resync_sqn(mil: &Milenage, rand: [u8; 16], auts: [u8; 14]) -> Result<[u8; 6], AuthError> {
    mil.inner()
        .verify_auts(&Rand::new(&rand), &Auts::new(&auts))
        .map(|s| *s.as_octets())
        .map_err(|_| AuthError::MacFailure)
}
