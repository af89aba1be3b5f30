//! The PEPC slice (§3.2): all state of a set of UEs, with a control thread (MME work)
//! and a data thread (S/P-GW work), each the single writer of its part of the state.
//!
//! * [`context`]: the UE context split into control state and counter state.
//! * [`ids`]: identifiers that encode slice and slot (TEIDs, UE addresses).
//! * [`control`]: the control thread's secondary table and publication.
//! * [`datapath`]: the data thread's primary table and packet pipeline.
//! * [`spsc`], [`update`]: the only channel between the two threads.
//! * [`snapshot`]: a UE's state as versioned bytes, restored in another slice.
// Unsafe only in the modules marked `#[allow(unsafe_code)]` below (system calls,
// shared memory), each block with its SAFETY comment.
#![deny(unsafe_code)]

pub mod context;
pub mod control;
pub mod counters;
#[allow(unsafe_code)]
pub mod datapath;
pub mod ids;
#[allow(unsafe_code)]
pub mod mem;
pub mod packets;
pub mod pcef;
pub mod qos;
#[allow(unsafe_code)]
pub mod slice;
pub mod snapshot;
#[allow(unsafe_code)]
pub mod spsc;
pub mod synthetic;
pub mod update;
