//! S1-MME transport: kernel SCTP or userspace SCTP over UDP (RFC 6951).
//!
//! - [`wire`]: zero-copy SCTP packet format (RFC 9260 §3).
//! - [`assoc`]: sans-IO association state machine.
//! - [`endpoint`]: sans-IO endpoint (stateless cookie, many associations).

pub mod assoc;
pub mod endpoint;
pub mod wire;

pub use assoc::{Association, CloseReason, Config, Event, SendError, State};
pub use endpoint::{AssocHandle, Endpoint};
