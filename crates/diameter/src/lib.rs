//! Diameter for pepc (PEPC §3.3): the base protocol of RFC 6733 and the S6a
//! client of TS 29.272, which serves the MME's HSS requests
//! ([`pepc_seams::HssRequest`]) from an external HSS, and the Gx client of TS 29.212,
//! which serves its PCRF requests ([`pepc_seams::PcrfRequest`]).
//!
//! ```text
//! codec   the wire format: zero-copy views, an AVP writer, owned reprs
//! dict    command, application, AVP and result codes
//! base    the sans-IO client: peers (CER/CEA, DWR/DWA, DPR/DPA), pending requests,
//!         failover
//! s6a     AIR/ULR/PUR out, AIA/ULA/PUA in, CLR/IDR answered; results → HssFailure
//! gx      CCR-I/U/T out, CCA in (PCC rules, QoS, monitoring); RAR answered
//! driver  a thread owning the TCP connections, driving the S6a or Gx client
//! ```
//!
//! [`fuzz_decode`] runs any bytes through every view (a fuzz target's entry).
// Unsafe only in the modules marked `#[allow(unsafe_code)]` below (system calls,
// shared memory), each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod base;
pub mod codec;
pub mod dict;
#[allow(unsafe_code)]
pub mod driver;
pub mod gx;
pub mod s6a;

pub use codec::{fuzz_decode, AvpIter, AvpView, AvpWriter, DecodeError, MessageRepr, MessageView};
