//! S1-MME transport: kernel SCTP or userspace SCTP over UDP (RFC 6951).
//!
//! - [`wire`]: zero-copy SCTP packet format (RFC 9260 §3).

pub mod wire;
