//! TS 33.401 Annex A key derivations: KDF of TS 33.220 B.2,
//! S = FC || P0 || L0 || P1 || L1 ..., key = HMAC-SHA-256(Key, S).
//! S is laid out from raw bytes so callers pass the PLMN / counters exactly as
//! they appear on the wire. HMAC is ours over the SHA-256 compression function of
//! RustCrypto's `sha2` (SHA-NI where the CPU has it): every key here is 32 bytes
//! and every S fits one block, so a keyed HMAC state ([`KasmeKdf`]) makes each
//! further derivation from the same key two compressions instead of four, and the
//! states are ours to wipe.

use crate::keys::{Key128, Key256};
use sha2::digest::generic_array::GenericArray;
use zeroize::Zeroize;

const SHA256_IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

fn compress(state: &mut [u32; 8], block: &[u8; 64]) {
    sha2::compress256(state, std::slice::from_ref(GenericArray::from_slice(block)));
}

/// SHA-256 of (`done` bytes already compressed into `state`) || `msg`.
fn finish(mut state: [u32; 8], done: u64, msg: &[u8]) -> [u8; 32] {
    let mut chunks = msg.chunks_exact(64);
    for c in &mut chunks {
        compress(&mut state, c.try_into().expect("64 bytes"));
    }
    let rest = chunks.remainder();
    let mut block = [0u8; 64];
    block[..rest.len()].copy_from_slice(rest);
    block[rest.len()] = 0x80;
    if rest.len() + 9 > 64 {
        compress(&mut state, &block);
        block.zeroize();
    }
    block[56..].copy_from_slice(&((done + msg.len() as u64) * 8).to_be_bytes());
    compress(&mut state, &block);
    block.zeroize();
    let mut out = [0u8; 32];
    for (o, w) in out.chunks_exact_mut(4).zip(state.iter()) {
        o.copy_from_slice(&w.to_be_bytes());
    }
    state.zeroize();
    out
}

/// HMAC-SHA-256 with its key hashed in once (RFC 2104): the inner and outer
/// states after the padded key block. Wiped when dropped.
#[derive(Clone)]
pub struct HmacSha256 {
    inner: [u32; 8],
    outer: [u32; 8],
}

impl HmacSha256 {
    /// Keys up to 64 bytes (all of Annex A's are 32).
    pub fn new(key: &[u8]) -> HmacSha256 {
        assert!(key.len() <= 64, "HMAC keys here are at most one block");
        let mut pad = [0u8; 64];
        pad[..key.len()].copy_from_slice(key);
        let (mut inner, mut outer) = (SHA256_IV, SHA256_IV);
        pad.iter_mut().for_each(|b| *b ^= 0x36);
        compress(&mut inner, &pad);
        pad.iter_mut().for_each(|b| *b ^= 0x36 ^ 0x5c);
        compress(&mut outer, &pad);
        pad.zeroize();
        HmacSha256 { inner, outer }
    }

    pub fn mac(&self, msg: &[u8]) -> [u8; 32] {
        let mut ih = finish(self.inner, 64, msg);
        let out = finish(self.outer, 64, &ih);
        ih.zeroize();
        out
    }
}

impl Drop for HmacSha256 {
    fn drop(&mut self) {
        self.inner.zeroize();
        self.outer.zeroize();
    }
}

impl core::fmt::Debug for HmacSha256 {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("HmacSha256(..)")
    }
}

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

/// The KDF keyed with `key`: S = FC || P0 || L0 || ... (every Annex A input fits
/// in 64 bytes).
fn derive_keyed(mac: &HmacSha256, fc: u8, params: &[&[u8]]) -> [u8; 32] {
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
    let out = mac.mac(&s[..n]);
    s.zeroize();
    out
}

fn derive(key: &[u8], fc: u8, params: &[&[u8]]) -> [u8; 32] {
    derive_keyed(&HmacSha256::new(key), fc, params)
}

/// 128 least significant bits of an algorithm key derivation (A.7).
fn low_half(mut full: [u8; 32]) -> Key128 {
    let mut low = [0u8; 16];
    low.copy_from_slice(&full[16..]);
    full.zeroize();
    Key128::new(low)
}

/// The KDF keyed once with a KASME, for the keys an MME derives from it one after
/// the other (K_NASenc, K_NASint, KeNB, NH): two SHA-256 compressions each instead
/// of four. Same results as the free functions.
#[derive(Clone, Debug)]
pub struct KasmeKdf(HmacSha256);

impl KasmeKdf {
    pub fn new(kasme: &Key256) -> KasmeKdf {
        KasmeKdf(HmacSha256::new(kasme.as_bytes()))
    }

    /// [`kenb`].
    pub fn kenb(&self, ul_nas_count: u32) -> Key256 {
        Key256::new(derive_keyed(
            &self.0,
            FC_KENB,
            &[&ul_nas_count.to_be_bytes()],
        ))
    }

    /// [`nh`].
    pub fn nh(&self, sync_input: &Key256) -> Key256 {
        Key256::new(derive_keyed(&self.0, FC_NH, &[sync_input.as_bytes()]))
    }

    /// [`algorithm_key`].
    pub fn algorithm_key(&self, type_distinguisher: u8, alg_id: u8) -> Key128 {
        low_half(derive_keyed(
            &self.0,
            FC_ALG_KEY,
            &[&[type_distinguisher], &[alg_id]],
        ))
    }

    /// [`nas_keys`]: (K_NASenc, K_NASint).
    pub fn nas_keys(&self, eea: u8, eia: u8) -> (Key128, Key128) {
        (
            self.algorithm_key(NAS_ENC_ALG, eea),
            self.algorithm_key(NAS_INT_ALG, eia),
        )
    }
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
    low_half(derive(
        key.as_bytes(),
        FC_ALG_KEY,
        &[&[type_distinguisher], &[alg_id]],
    ))
}

/// (KNASenc, KNASint) for the selected algorithm identities.
pub fn nas_keys(kasme: &Key256, eea: u8, eia: u8) -> (Key128, Key128) {
    (
        algorithm_key(kasme, NAS_ENC_ALG, eea),
        algorithm_key(kasme, NAS_INT_ALG, eia),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hx(s: &str) -> Vec<u8> {
        hex::decode(s).unwrap()
    }

    #[test]
    fn hmac_matches_rfc4231() {
        // RFC 4231 test cases 1-4 (5 truncates; 6 and 7 have keys over a block).
        let cases: [(&[u8], &[u8], &str); 4] = [
            (
                &[0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 20],
                &[0xdd; 50],
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            ),
            (
                &hx("0102030405060708090a0b0c0d0e0f10111213141516171819"),
                &[0xcd; 50],
                "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b",
            ),
        ];
        for (key, msg, mac) in cases {
            assert_eq!(hex::encode(HmacSha256::new(key).mac(msg)), mac);
        }
    }

    #[test]
    fn hmac_matches_oxirush_over_block_boundaries() {
        let key: Vec<u8> = (0..32u8).map(|i| i.wrapping_mul(37) ^ 0x5a).collect();
        let h = HmacSha256::new(&key);
        for len in [0usize, 1, 55, 56, 63, 64, 65, 119, 120, 128, 200] {
            let msg: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let theirs = oxirush_security::kdf::kdf(&key, &msg);
            assert_eq!(h.mac(&msg), *theirs, "message of {len} bytes");
        }
    }

    #[test]
    fn kasme_kdf_derives_what_the_free_functions_derive() {
        for seed in 0..16u8 {
            let kasme = Key256::new(core::array::from_fn(|i| (i as u8) ^ seed.wrapping_mul(29)));
            let sync = Key256::new([seed; 32]);
            let kdf = KasmeKdf::new(&kasme);
            let count = u32::from(seed) * 0x0101_0101;
            assert_eq!(kdf.kenb(count), kenb(&kasme, count));
            assert_eq!(kdf.nh(&sync), nh(&kasme, &sync));
            for td in 1..=6 {
                for alg in 0..=3 {
                    assert_eq!(kdf.algorithm_key(td, alg), algorithm_key(&kasme, td, alg));
                }
            }
            assert_eq!(kdf.nas_keys(2, 1), nas_keys(&kasme, 2, 1));
        }
    }
}
