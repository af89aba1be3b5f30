//! The `pepc` command's building blocks, shared by the binary and the end-to-end tests:
//! a whole EPC node from one config file ([`epc`]), subscriber management
//! ([`subscriber`]) and the demo (node + emulator on loopback, [`demo`]).
// Unsafe only where marked `#[allow(unsafe_code)]` (a thread's CPU clock in demo.rs).
#![deny(unsafe_code)]

pub mod alloc;
pub mod api;
pub mod config_doc;
mod config_file;
pub mod ctl;
pub mod demo;
pub mod epc;
pub mod error;
pub mod logging;
pub mod memory;
pub mod metrics;
pub mod policy;
mod policy_api;
pub mod replay;
pub mod subscriber;
