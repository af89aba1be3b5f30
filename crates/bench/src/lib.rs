//! Benchmarks reproducing the PEPC paper's data-plane figures.

pub mod attach;
pub mod dataplane;
pub mod designs;
pub mod hist;
pub mod io;
pub mod lines;
pub mod netns;
pub mod paired;
pub mod sweep;
pub mod traffic;
