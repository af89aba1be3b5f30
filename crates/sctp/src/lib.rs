//! S1-MME transport: kernel SCTP or userspace SCTP over UDP (RFC 6951).
//!
//! - [`wire`]: zero-copy SCTP packet format (RFC 9260 §3).
//! - [`assoc`]: sans-IO association state machine.
//! - [`transport`]: the [`S1Transport`] interface and its UDP / kernel backends.
//! - [`endpoint`]: sans-IO endpoint (stateless cookie, many associations).
// Unsafe only in the modules marked `#[allow(unsafe_code)]` below (system calls,
// shared memory), each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod assoc;
pub mod endpoint;
#[allow(unsafe_code)]
pub mod transport;
pub mod wire;

pub use assoc::{AssocCounters, Association, CloseReason, Config, Event, SendError, State};
pub use endpoint::{AssocHandle, Endpoint};
#[cfg(target_os = "linux")]
pub use transport::KernelSctpTransport;
pub use transport::{
    open_server, AssocId, Backend, S1Transport, TransportConfig, TransportEvent, UdpSctpTransport,
    S1AP_PPID, S1AP_SCTP_PORT, SCTP_UDP_ENCAPS_PORT,
};
