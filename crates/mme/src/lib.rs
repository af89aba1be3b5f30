//! MME signaling procedures as sans-IO state machines.
//!
//! One [`Mme`] runs on each slice control thread. The driver feeds it S1AP octets,
//! association events and the slice's [`ControlEvent`]s with the current time, and
//! sends the [`Output`]s; the MME writes UE state only through the slice's
//! [`ControlPlane`] (no GTP-C: the S/P-GW user plane is in the same slice).
//!
//! * [`config`]: [`MmeConfig`] with documented defaults.
//! * [`mme`]: the [`Mme`] and its contexts, input routing, timers, S1 send plumbing.
//! * `s1ap`: where an S1AP PDU goes; `enb`: S1 Setup, Reset, Error Indication.
//! * `nas`: NAS security, transport and retransmission; `parked`: parked contexts.
//! * `emm/`: attach, auth, security_mode, guti, tau, service, detach (TS 24.301 §5).
//! * `esm/`: pdn (default bearers, PDN connections), bearer (dedicated) (TS 24.301 §6).
//! * `handover/`: x2 (Path Switch), s1 (Handover Required .. Notify); `paging`.
//! * [`cause`]: EMM and ESM cause values ([`EmmCause`], [`EsmCause`]).
//! * [`nasx`]: the NAS codec/security surface used by the procedures.
//! * [`sim`]: a scripted eNB + UE (full AKA and NAS security) for tests and benchmarks.

pub mod cause;
pub mod config;
pub mod mme;
pub mod nasx;
pub mod sim;

mod emm;
mod enb;
mod esm;
mod handover;
mod nas;
mod paging;
mod parked;
mod prelude;
mod s1ap;

pub use cause::{EmmCause, EsmCause};
pub use config::MmeConfig;
pub use mme::{AssocId, Input, LogLevel, Mme, MmeError, MmeStats, Output};
pub use pepc_slice::control::{ControlEvent, ControlPlane};
pub use sim::{run_inprocess_attaches, AttachBenchResult};
