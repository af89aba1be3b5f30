//! Key containers: fixed-size, zeroized on drop, never printed.

use core::fmt;
use subtle::ConstantTimeEq;
use zeroize::{Zeroize, ZeroizeOnDrop};

/// Why a key could not be built from text or bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("key must be {expected} bytes ({} hex digits), got {got} bytes", expected * 2)]
    Length { expected: usize, got: usize },
    #[error("key is not valid hex: {0}")]
    Hex(String),
}

macro_rules! key_type {
    ($(#[$m:meta])* $name:ident, $n:literal) => {
        $(#[$m])*
        #[derive(Clone)]
        pub struct $name(pub(crate) [u8; $n]);

        impl $name {
            /// Length in bytes.
            pub const LEN: usize = $n;

            pub const fn new(bytes: [u8; $n]) -> Self {
                Self(bytes)
            }

            pub fn as_bytes(&self) -> &[u8; $n] {
                &self.0
            }

            pub fn from_slice(bytes: &[u8]) -> Result<Self, KeyError> {
                let arr: [u8; $n] = bytes.try_into().map_err(|_| KeyError::Length {
                    expected: $n,
                    got: bytes.len(),
                })?;
                Ok(Self(arr))
            }

            /// Parse hex digits; spaces, ':' and a leading "0x" are tolerated
            /// because operators paste keys in all of those forms.
            pub fn from_hex(text: &str) -> Result<Self, KeyError> {
                let t = text.trim();
                let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
                let mut digits: String = t.chars().filter(|c| !c.is_whitespace() && *c != ':').collect();
                let mut out = [0u8; $n];
                let res = if digits.len() != 2 * $n {
                    Err(KeyError::Length { expected: $n, got: digits.len() / 2 })
                } else {
                    hex::decode_to_slice(&digits, &mut out).map_err(|e| KeyError::Hex(e.to_string()))
                };
                digits.zeroize();
                res.map(|()| Self(out))
            }
        }

        impl Drop for $name {
            fn drop(&mut self) {
                self.0.zeroize();
            }
        }
        impl ZeroizeOnDrop for $name {}

        impl From<[u8; $n]> for $name {
            fn from(bytes: [u8; $n]) -> Self {
                Self(bytes)
            }
        }

        /// Constant-time: a timing difference must not reveal where keys differ.
        impl PartialEq for $name {
            fn eq(&self, other: &Self) -> bool {
                self.0.ct_eq(&other.0).into()
            }
        }
        impl Eq for $name {}

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(concat!(stringify!($name), "(<redacted>)"))
            }
        }
    };
}

key_type!(
    /// A 128-bit key (K, OPc, CK, IK, KNASenc, KNASint, KRRC*, KUP*).
    Key128,
    16
);
key_type!(
    /// A 256-bit key (KASME, KeNB, NH, KeNB*).
    Key256,
    32
);
