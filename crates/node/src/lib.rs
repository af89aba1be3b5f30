//! The PEPC node (§3.3): slices, the demux that steers traffic and signaling to them,
//! the runtime that drives their threads, and packet I/O.

pub mod charging;
pub mod checkpoint;
pub mod config;
pub mod demux;
pub mod dispatch;
pub mod gx;
pub mod io;
pub mod node;
pub mod proxy;
pub mod queues;
pub mod record;
pub mod ring;
pub mod runtime;
pub mod s1mme;
pub mod s6a;
pub mod stats;
