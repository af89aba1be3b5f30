//! TS 33.401 Annex A key derivations: KDF of TS 33.220 B.2,
//! S = FC || P0 || L0 || P1 || L1 ..., key = HMAC-SHA-256(Key, S).
//! HMAC comes from oxirush-security; we only lay out S from raw bytes so
//! callers can pass the PLMN / counters exactly as they appear on the wire.

use crate::keys::{Key128, Key256};
use zeroize::Zeroize;

/// FC values (TS 33.401 A.2, A.3, A.4, A.5, A.7).
pub const FC_KASME: u8 = 0x10;
pub const FC_KENB: u8 = 0x11;
pub const FC_NH: u8 = 0x12;
pub const FC_KENB_STAR: u8 = 0x13;
pub const FC_ALG_KEY: u8 = 0x15;

/// Algorithm type distinguishers (TS 33.401 A.7, table A.7-1).
pub const NAS_ENC_ALG: u8 = 0x01;
pub const NAS_INT_ALG: u8 = 0x02;
pub const RRC_ENC_ALG: u8 = 0x03;
pub const RRC_INT_ALG: u8 = 0x04;
pub const UP_ENC_ALG: u8 = 0x05;
pub const UP_INT_ALG: u8 = 0x06;

/// Generic KDF with short parameters (every Annex A input fits in 64 bytes).
fn derive(key: &[u8], fc: u8, params: &[&[u8]]) -> [u8; 32] {
    let mut s = [0u8; 64];
    s[0] = fc;
    let mut n = 1;
    for p in params {
        debug_assert!(n + p.len() + 2 <= s.len());
        s[n..n + p.len()].copy_from_slice(p);
        n += p.len();
        s[n..n + 2].copy_from_slice(&(p.len() as u16).to_be_bytes());
        n += 2;
    }
    let out = oxirush_security::kdf::kdf(key, &s[..n]);
    s.zeroize();
    *out
}

/// KASME (A.2): key CK||IK, P0 = SN id (PLMN as encoded in TS 24.301, 3 octets),
/// P1 = SQN xor AK.
pub fn kasme(ck: &Key128, ik: &Key128, plmn: [u8; 3], sqn_xor_ak: [u8; 6]) -> Key256 {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(ck.as_bytes());
    key[16..].copy_from_slice(ik.as_bytes());
    let out = Key256::new(derive(&key, FC_KASME, &[&plmn, &sqn_xor_ak]));
    key.zeroize();
    out
}

/// KeNB (A.3) from KASME and the 32-bit uplink NAS COUNT.
/// Use `0xFFFF_FFFF` for the KeNB derived at handover into E-UTRAN (A.3 note).
pub fn kenb(kasme: &Key256, ul_nas_count: u32) -> Key256 {
    Key256::new(derive(
        kasme.as_bytes(),
        FC_KENB,
        &[&ul_nas_count.to_be_bytes()],
    ))
}

/// NH (A.4). `sync_input` is KeNB for the first NH, then the previous NH.
pub fn nh(kasme: &Key256, sync_input: &Key256) -> Key256 {
    Key256::new(derive(kasme.as_bytes(), FC_NH, &[sync_input.as_bytes()]))
}

/// KeNB* (A.5) from KeNB (horizontal) or NH (vertical), target PCI and
/// EARFCN-DL. EARFCN-DL is 2 octets up to 65535 and 3 octets above (Rel-9+
/// extended EARFCN). Callers should pass PCI <= 503 and EARFCN <= 262143;
/// wider values are encoded as-is rather than rejected.
pub fn kenb_star(kenb_or_nh: &Key256, pci: u16, earfcn_dl: u32) -> Key256 {
    let e = earfcn_dl.to_be_bytes();
    let earfcn: &[u8] = if earfcn_dl <= 0xffff {
        &e[2..]
    } else {
        &e[1..]
    };
    Key256::new(derive(
        kenb_or_nh.as_bytes(),
        FC_KENB_STAR,
        &[&pci.to_be_bytes(), earfcn],
    ))
}

/// Algorithm key (A.7): the 128 least significant bits of
/// KDF(key, 0x15 || type_distinguisher || 0x0001 || alg_id || 0x0001).
pub fn algorithm_key(key: &Key256, type_distinguisher: u8, alg_id: u8) -> Key128 {
    let mut full = derive(
        key.as_bytes(),
        FC_ALG_KEY,
        &[&[type_distinguisher], &[alg_id]],
    );
    let mut low = [0u8; 16];
    low.copy_from_slice(&full[16..]);
    full.zeroize();
    Key128::new(low)
}

/// (KNASenc, KNASint) for the selected algorithm identities.
pub fn nas_keys(kasme: &Key256, eea: u8, eia: u8) -> (Key128, Key128) {
    (
        algorithm_key(kasme, NAS_ENC_ALG, eea),
        algorithm_key(kasme, NAS_INT_ALG, eia),
    )
}
