//! EIA/EEA with their key set up once (a NAS security context protects many
//! messages under one K_NASint / K_NASenc). 128-EIA2 and 128-EEA2 (TS 33.401
//! B.2.3, B.1.3) are AES-CMAC and AES-CTR, written here over RustCrypto's AES
//! block cipher (AES-NI where the CPU has it) with the round keys and CMAC subkeys
//! computed at setup; EIA1/EEA1 (SNOW 3G) and EIA3/EEA3 (ZUC) use oxirush-security's
//! keyed contexts. Results equal [`crate::eia_mac`] / [`crate::eea_apply`] (tests).

use crate::alg::{Eea, Eia};
use crate::keys::Key128;
use aes::cipher::{Array, BlockCipherEncrypt, KeyInit};
use aes::Aes128Enc;
use oxirush_security::nas_eps::{KNasEnc, KNasInt};
use oxirush_security::{Bearer, CipheringContext, Direction, IntegrityContext};
use zeroize::Zeroize;

fn bearer(b: u8) -> Bearer {
    Bearer::try_from(b & 0x1f).unwrap_or(Bearer::ZERO)
}

fn direction(d: u8) -> Direction {
    if d & 1 == 0 {
        Direction::Uplink
    } else {
        Direction::Downlink
    }
}

/// COUNT || BEARER || DIRECTION || 0^26, the first 64 bits of both B.1.3's counter
/// block and B.2.3's message.
fn iv_head(count: u32, bearer_id: u8, dir: u8) -> [u8; 8] {
    let c = count.to_be_bytes();
    [
        c[0],
        c[1],
        c[2],
        c[3],
        (bearer_id & 0x1f) << 3 | (dir & 1) << 2,
        0,
        0,
        0,
    ]
}

/// Doubling in GF(2^128) for the CMAC subkeys (SP 800-38B).
fn dbl(b: [u8; 16]) -> [u8; 16] {
    let v = u128::from_be_bytes(b);
    let r = (v << 1) ^ if v >> 127 == 1 { 0x87 } else { 0 };
    r.to_be_bytes()
}

#[derive(Clone)]
enum IntegrityInner {
    Null,
    Aes {
        aes: Aes128Enc,
        k1: [u8; 16],
        k2: [u8; 16],
    },
    Other(IntegrityContext),
}

/// An integrity key set up for its algorithm. Debug never shows key material.
#[derive(Clone)]
pub struct EiaKeyed(IntegrityInner);

impl EiaKeyed {
    pub fn new(alg: Eia, key: &Key128) -> EiaKeyed {
        EiaKeyed(match alg {
            Eia::Eia0 => IntegrityInner::Null,
            Eia::Eia2 => {
                let aes = Aes128Enc::new(&Array::from(*key.as_bytes()));
                let mut l = Array::from([0u8; 16]);
                aes.encrypt_block(&mut l);
                let mut l: [u8; 16] = l.into();
                let k1 = dbl(l);
                let k2 = dbl(k1);
                l.zeroize();
                IntegrityInner::Aes { aes, k1, k2 }
            }
            Eia::Eia1 | Eia::Eia3 => IntegrityInner::Other(IntegrityContext::new(
                &KNasInt::new(key.as_bytes()),
                crate::alg::ia(alg),
            )),
        })
    }

    /// The 32-bit MAC of `msg` (whole octets), as [`crate::eia_mac`] computes it.
    pub fn mac(&self, count: u32, bearer_id: u8, dir: u8, msg: &[u8]) -> [u8; 4] {
        match &self.0 {
            IntegrityInner::Null => [0; 4],
            IntegrityInner::Aes { aes, k1, k2 } => {
                cmac_head_msg(aes, k1, k2, &iv_head(count, bearer_id, dir), msg)
            }
            IntegrityInner::Other(c) => c
                .mac(count, bearer(bearer_id), direction(dir), msg)
                .to_be_bytes(),
        }
    }
}

/// The first 32 bits of AES-CMAC over `head || msg` (SP 800-38B), without building
/// the concatenation.
fn cmac_head_msg(
    aes: &Aes128Enc,
    k1: &[u8; 16],
    k2: &[u8; 16],
    head: &[u8; 8],
    msg: &[u8],
) -> [u8; 4] {
    let total = head.len() + msg.len();
    let byte = |i: usize| if i < 8 { head[i] } else { msg[i - 8] };
    // Every block but the last is chained as is; the last is padded / masked.
    let blocks = total.div_ceil(16).max(1);
    let mut x = [0u8; 16];
    for b in 0..blocks {
        let start = b * 16;
        let last = b + 1 == blocks;
        let mut block = [0u8; 16];
        if start >= 8 && start + 16 <= total {
            block.copy_from_slice(&msg[start - 8..start + 8]);
        } else {
            for (j, o) in block.iter_mut().enumerate() {
                if start + j < total {
                    *o = byte(start + j);
                }
            }
        }
        if last {
            let full = total > 0 && total.is_multiple_of(16);
            if !full {
                block[total - start] = 0x80;
            }
            let k = if full { k1 } else { k2 };
            for (o, kb) in block.iter_mut().zip(k) {
                *o ^= kb;
            }
        }
        for (o, xb) in block.iter_mut().zip(&x) {
            *o ^= xb;
        }
        let mut a = Array::from(block);
        aes.encrypt_block(&mut a);
        x = a.into();
        block.zeroize();
    }
    let out = [x[0], x[1], x[2], x[3]];
    x.zeroize();
    out
}

#[derive(Clone)]
enum CipherInner {
    Null,
    Aes(Aes128Enc),
    Other(CipheringContext),
}

/// A ciphering key set up for its algorithm. Debug never shows key material.
#[derive(Clone)]
pub struct EeaKeyed(CipherInner);

impl EeaKeyed {
    pub fn new(alg: Eea, key: &Key128) -> EeaKeyed {
        EeaKeyed(match alg {
            Eea::Eea0 => CipherInner::Null,
            Eea::Eea2 => CipherInner::Aes(Aes128Enc::new(&Array::from(*key.as_bytes()))),
            Eea::Eea1 | Eea::Eea3 => CipherInner::Other(CipheringContext::new(
                &KNasEnc::new(key.as_bytes()),
                crate::alg::ea(alg),
            )),
        })
    }

    /// Cipher or decipher `data` in place, as [`crate::eea_apply`] does.
    pub fn apply(&self, count: u32, bearer_id: u8, dir: u8, data: &mut [u8]) {
        match &self.0 {
            CipherInner::Null => {}
            CipherInner::Aes(aes) => {
                // B.1.3: counter blocks T1 = COUNT||BEARER||DIRECTION||0^26||0^64, the
                // low 64 bits incremented per block.
                let head = iv_head(count, bearer_id, dir);
                for (i, chunk) in data.chunks_mut(16).enumerate() {
                    let mut t = [0u8; 16];
                    t[..8].copy_from_slice(&head);
                    t[8..].copy_from_slice(&(i as u64).to_be_bytes());
                    let mut ks = Array::from(t);
                    aes.encrypt_block(&mut ks);
                    for (d, k) in chunk.iter_mut().zip(ks.iter()) {
                        *d ^= k;
                    }
                    ks.zeroize();
                }
            }
            CipherInner::Other(c) => c.cipher(count, bearer(bearer_id), direction(dir), data),
        }
    }
}

impl core::fmt::Debug for EiaKeyed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EiaKeyed(..)")
    }
}

impl core::fmt::Debug for EeaKeyed {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("EeaKeyed(..)")
    }
}

impl Drop for IntegrityInner {
    fn drop(&mut self) {
        if let IntegrityInner::Aes { k1, k2, .. } = self {
            k1.zeroize();
            k2.zeroize();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{eea_apply, eia_mac};

    fn key(seed: u8) -> Key128 {
        Key128::new(core::array::from_fn(|i| (i as u8).wrapping_mul(31) ^ seed))
    }

    #[test]
    fn keyed_mac_equals_the_one_shot_mac_for_every_algorithm_and_length() {
        for alg in [Eia::Eia0, Eia::Eia1, Eia::Eia2, Eia::Eia3] {
            for seed in 0..4u8 {
                let k = key(seed);
                let keyed = EiaKeyed::new(alg, &k);
                for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 100, 257] {
                    let msg: Vec<u8> = (0..len).map(|i| (i as u8) ^ seed).collect();
                    for (count, b, dir) in
                        [(0u32, 0u8, 0u8), (0x1234_5678, 3, 1), (u32::MAX, 31, 1)]
                    {
                        assert_eq!(
                            keyed.mac(count, b, dir, &msg),
                            eia_mac(alg, &k, count, b, dir, &msg),
                            "{alg:?} len {len} count {count:#x}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn keyed_cipher_equals_the_one_shot_cipher_for_every_algorithm_and_length() {
        for alg in [Eea::Eea0, Eea::Eea1, Eea::Eea2, Eea::Eea3] {
            let k = key(9);
            let keyed = EeaKeyed::new(alg, &k);
            for len in [0usize, 1, 15, 16, 17, 32, 33, 300] {
                let msg: Vec<u8> = (0..len).map(|i| i as u8).collect();
                for (count, b, dir) in [(0u32, 0u8, 0u8), (0xdead_beef, 5, 1)] {
                    let (mut ours, mut theirs) = (msg.clone(), msg.clone());
                    keyed.apply(count, b, dir, &mut ours);
                    eea_apply(alg, &k, count, b, dir, &mut theirs);
                    assert_eq!(ours, theirs, "{alg:?} len {len}");
                    keyed.apply(count, b, dir, &mut ours);
                    assert_eq!(ours, msg, "{alg:?} deciphers");
                }
            }
        }
    }
}
