//! The PEPC node (§3.3): slices, the demux that steers traffic and signaling to them,
//! the runtime that drives their threads, and packet I/O.
// Unsafe only in the modules marked `#[allow(unsafe_code)]` below (system calls,
// shared memory), each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod charging;
pub mod checkpoint;
pub mod config;
pub mod demux;
pub mod dispatch;
#[allow(unsafe_code)]
pub mod io;
pub mod node;
pub mod plan;
#[allow(unsafe_code)]
pub mod proxy;
#[allow(unsafe_code)]
pub mod queues;
pub mod record;
pub mod ring;
#[allow(unsafe_code)]
pub mod runtime;
#[allow(unsafe_code)]
pub mod s1mme;
pub mod scheduler;
pub mod stats;
