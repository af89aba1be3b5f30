//! S1AP (TS 36.413) codec interface.
//!
//! Wraps `oxirush-s1ap` (aligned PER, generated from the ASN.1) behind a small surface:
//! [`decode`]/[`encode`] of whole PDUs, and in [`msg`] one plain struct per message the
//! MME and the eNB exchange, with builders (`to_pdu`/`encode`) and extractors
//! (`TryFrom<&S1apPdu>`), plus [`msg::S1apMessage`] over all of them. Callers never
//! name the underlying crate's types, so it can be replaced.
#![forbid(unsafe_code)]

pub mod container;
mod enums;
mod fast;
pub mod msg;
pub mod peek;
mod types;

pub use types::*;

/// An S1AP PDU as the codec holds it (owned, `'static`).
pub type S1apPdu = oxirush_s1ap::s1ap::S1AP_PDU;

/// The underlying bindings, for the rare caller that needs an IE we do not model.
/// Everything else should go through [`msg`].
pub use oxirush_s1ap as raw;

/// What went wrong in S1AP decoding, encoding or building.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum S1apError {
    /// The octets are not an S1AP PDU (truncated, trailing garbage, out-of-range value).
    Decode(String),
    /// A value did not encode (outside its constraint).
    Encode(String),
    /// The PDU holds another message than the one asked for.
    WrongMessage { expected: &'static str, got: String },
    /// A mandatory IE is missing.
    MissingIe(String),
    /// An IE is present but its value does not decode, or is outside what we model.
    InvalidIe { ie: &'static str, reason: String },
    /// A value given to a builder is not representable (e.g. an MNC of 4 digits).
    Invalid(String),
}

impl core::fmt::Display for S1apError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            S1apError::Decode(s) => write!(f, "S1AP decode error: {s}"),
            S1apError::Encode(s) => write!(f, "S1AP encode error: {s}"),
            S1apError::WrongMessage { expected, got } => {
                write!(f, "S1AP PDU holds {got}, not {expected}")
            }
            S1apError::MissingIe(s) => write!(f, "S1AP mandatory IE missing: {s}"),
            S1apError::InvalidIe { ie, reason } => write!(f, "S1AP IE {ie} invalid: {reason}"),
            S1apError::Invalid(s) => write!(f, "invalid S1AP value: {s}"),
        }
    }
}

impl std::error::Error for S1apError {}

impl From<oxirush_s1ap::Error> for S1apError {
    fn from(e: oxirush_s1ap::Error) -> Self {
        use oxirush_s1ap::ErrorKind as K;
        let s = e.to_string();
        match e.kind() {
            K::Decode => S1apError::Decode(s),
            K::Encode => S1apError::Encode(s),
            K::WrongMessage => S1apError::WrongMessage {
                expected: "the requested message",
                got: s,
            },
            K::MissingIe => S1apError::MissingIe(s),
            K::UndecodableIe => S1apError::InvalidIe {
                ie: "(see reason)",
                reason: s,
            },
            _ => S1apError::Invalid(s),
        }
    }
}

/// Decode one S1AP PDU (the payload of one SCTP DATA chunk with PPID 18).
/// Only the envelope is checked here; IEs are decoded when read (see [`msg`]).
pub fn decode(bytes: &[u8]) -> Result<S1apPdu, S1apError> {
    // The underlying decoder is written not to panic; the catch is a belt-and-braces
    // guard so that a bug there cannot take a node down on hostile input.
    match std::panic::catch_unwind(|| S1apPdu::decode(bytes)) {
        Ok(r) => r.map_err(S1apError::from),
        Err(_) => Err(S1apError::Decode("decoder panicked on this input".into())),
    }
}

/// Encode one S1AP PDU to aligned PER.
pub fn encode(pdu: &S1apPdu) -> Result<Vec<u8>, S1apError> {
    pdu.encode().map_err(S1apError::from)
}

/// The procedure code of a PDU (TS 36.413 §9.3.7).
pub fn procedure_code(pdu: &S1apPdu) -> u8 {
    pdu.procedure_code()
}

/// The direction of a PDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    Initiating,
    Successful,
    Unsuccessful,
}

/// Which of the three PDU alternatives this is.
pub fn direction(pdu: &S1apPdu) -> Direction {
    use oxirush_s1ap::s1ap::S1APPDU as P;
    match pdu {
        P::initiatingMessage(_) => Direction::Initiating,
        P::successfulOutcome(_) => Direction::Successful,
        P::unsuccessfulOutcome(_) => Direction::Unsuccessful,
        // The CHOICE is extensible; no extension exists in TS 36.413 today.
        _ => Direction::Initiating,
    }
}

/// The ASN.1 name of the PDU's procedure, e.g. "initialUEMessage", "S1Setup".
pub fn procedure_name(pdu: &S1apPdu) -> &'static str {
    pdu.procedure_name()
}
