//! EPS security: Milenage, TS 33.401 key derivation, EIA/EEA (SNOW 3G, AES, ZUC).
//!
//! A thin, stable API over `oxirush-security` (which does the cryptography,
//! wipes keys and runs in constant time). Keys are [`Key128`] / [`Key256`]:
//! zeroized on drop and printed as `Key128(<redacted>)`.
#![forbid(unsafe_code)]

mod aka;
mod alg;
mod kdf;
mod keyed;
mod keys;
mod milenage;

pub use aka::{
    generate_vector, make_auts, resync_sqn, sqn_from_u64, sqn_to_u64, usim_check, AuthError,
    AuthVector, UsimError, UsimOk, SQN_DELTA, SQN_MAX,
};
pub use alg::{eea_apply, eea_apply_bits, eia_mac, eia_mac_bits, AlgError, Eea, Eia};
pub use kdf::{
    algorithm_key, kasme, kenb, kenb_star, nas_keys, nh, HmacSha256, KasmeKdf, FC_ALG_KEY,
    FC_KASME, FC_KENB, FC_KENB_STAR, FC_NH, NAS_ENC_ALG, NAS_INT_ALG, RRC_ENC_ALG, RRC_INT_ALG,
    UP_ENC_ALG, UP_INT_ALG,
};
pub use keyed::{EeaKeyed, EiaKeyed};
pub use keys::{Key128, Key256, KeyError};
pub use milenage::Milenage;
