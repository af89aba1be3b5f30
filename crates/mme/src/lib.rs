//! MME signaling procedures as sans-IO state machines.
//!
//! One [`Mme`] runs on each slice control thread. The driver feeds it S1AP octets,
//! association events and the slice's [`ControlEvent`]s with the current time, and
//! sends the [`Output`]s; the MME writes UE state only through the slice's
//! [`ControlPlane`] (no GTP-C: the S/P-GW user plane is in the same slice).
//!
//! * [`config`]: [`MmeConfig`] with documented defaults.
//! * [`endpoint`]: the node's S1AP endpoint: eNB procedures and the demux to slices.
//! * [`mme`]: the state machine (eNB handling, EMM/ESM procedures, handovers, timers).
//! * [`nasx`]: the NAS codec/security surface used by the procedures.
//! * [`sim`]: a scripted eNB + UE (full AKA and NAS security) for tests and benchmarks.

pub mod config;
pub mod endpoint;
pub mod mme;
pub mod nasx;
pub mod sim;

pub use config::MmeConfig;
pub use endpoint::{EndpointOut, EndpointStats, S1apEndpoint, SlicePolicy, SliceRole};
pub use mme::{AssocId, Input, LogLevel, Mme, MmeError, MmeStats, Output};
pub use pepc_slice::control::{ControlEvent, ControlPlane};
pub use sim::{run_inprocess_attaches, AttachBenchResult};
