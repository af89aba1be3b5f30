//! NAS EPS (TS 24.301) codec interface and NAS security framing.
//!
//! [`msg`] has plain EMM/ESM messages over `oxirush-nas`'s framing; [`ie`] the plain IE
//! types; [`security`] the protection of NAS messages (§4.4, §9.1) with pepc-security's
//! EIA/EEA.
#![forbid(unsafe_code)]

pub mod ie;
pub mod msg;
pub mod peek;
pub mod security;

pub use ie::*;
pub use msg::*;

/// What went wrong in NAS decoding/encoding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NasError {
    /// The octets are not a valid NAS message / IE.
    Decode(String),
    /// A value could not be encoded.
    Encode(String),
    /// A valid message we do not model.
    Unsupported(String),
    /// A value given to a builder is out of range.
    Invalid(String),
    /// The message is security protected: use [`security::NasSecurityContext`].
    Protected,
}

impl core::fmt::Display for NasError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            NasError::Decode(s) => write!(f, "NAS decode error: {s}"),
            NasError::Encode(s) => write!(f, "NAS encode error: {s}"),
            NasError::Unsupported(s) => write!(f, "NAS message not supported: {s}"),
            NasError::Invalid(s) => write!(f, "invalid NAS value: {s}"),
            NasError::Protected => write!(f, "NAS message is security protected"),
        }
    }
}

impl std::error::Error for NasError {}

/// Runs a decoder of the underlying crate, turning its errors (and, defensively, a
/// panic on hostile input) into `NasError::Decode`.
pub(crate) fn guard<T, E: core::fmt::Display>(
    f: impl FnOnce() -> Result<T, E> + std::panic::UnwindSafe,
) -> Result<T, NasError> {
    match std::panic::catch_unwind(f) {
        Ok(r) => r.map_err(|e| NasError::Decode(e.to_string())),
        Err(_) => Err(NasError::Decode("decoder panicked on this input".into())),
    }
}
