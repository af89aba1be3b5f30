//! Benchmarks reproducing the PEPC paper's data-plane figures.
// Unsafe only in the modules marked `#[allow(unsafe_code)]` below (system calls,
// shared memory), each block with its SAFETY comment.
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod attach;
pub mod dataplane;
pub mod designs;
pub mod hist;
#[allow(unsafe_code)]
pub mod io;
pub mod lines;
#[allow(unsafe_code)]
pub mod netns;
pub mod paired;
pub mod qos;
mod qos_net;
pub mod sweep;
pub mod traffic;
