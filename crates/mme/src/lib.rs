//! MME signaling procedures as sans-IO state machines.
//!
//! One [`Mme`] runs on each slice control thread. The driver feeds it S1AP octets,
//! association events and the slice's [`ControlEvent`]s with the current time, and
//! sends the [`Output`]s; the MME writes UE state only through the slice's
//! [`ControlPlane`] (no GTP-C: the S/P-GW user plane is in the same slice).
//!
//! **One UE context.** The MME has no UE table of its own: a UE's MME state
//! (`Ue`'s fields: EMM/ECM state, security context, S1AP IDs, location, GUTI,
//! the procedure in progress, timers) is the *signaling part* of the UE's entry in the
//! slice's table, beside the data path's part (see `pepc_slice::control`). The entry is
//! taken at the UE's first message, its session is created in it, and both go
//! together. The MME keeps indexes only (MME UE S1AP ID, S1 connection, IMSI, M-TMSI →
//! entry). The procedure in progress is one enum, `Procedure`, one state per
//! awaited message (rustls's style).
//!
//! * [`config`]: [`MmeConfig`] with documented defaults.
//! * [`endpoint`]: the node's S1AP endpoint: S1 Setup, eNB Configuration Update,
//!   Reset, Error Indication, Paging fan-out, and the demux of UE signaling to slices.
//! * [`hss`]: the HSS seam: [`hss::HssRequest`] out, [`hss::HssAnswer`] in (served by
//!   the node's proxy: the embedded HSS of `pepc-hss` or Diameter S6a).
//! * [`mme`]: the [`Mme`] of one slice, its UE state and procedure states, input
//!   routing, timers, S1 send.
//! * `s1ap`: where a UE-associated S1AP PDU goes in the slice; `enb`: what a slice
//!   does when its eNBs are set up, reset or lost.
//! * `nas`: NAS security, transport and retransmission; `parked`: parked contexts.
//! * `emm/`: attach, auth, security_mode, guti, tau, service, detach (TS 24.301 §5).
//! * `esm/`: pdn (default bearers, PDN connections), bearer (dedicated) (TS 24.301 §6).
//! * `handover/`: x2 (Path Switch), s1 (Handover Required .. Notify); `paging`.
//! * [`pcrf`]: the PCRF seam (Gx): [`pcrf::PcrfRequest`] out, [`pcrf::PcrfAnswer`] in,
//!   PCC rules and usage records (served by the node's proxy: the embedded PCRF of
//!   `pepc-pcrf` or Diameter Gx); `esm/policy` binds the rules to bearers.
//! * [`cause`]: EMM and ESM cause values ([`EmmCause`], [`EsmCause`]).
//! * [`nasx`]: the NAS codec/security surface used by the procedures.
//! * [`snapshot`]: a UE's MME context as the `mme` section of a UE snapshot, and whole-UE
//!   snapshot/restore with the slice's section.
#![forbid(unsafe_code)]

pub mod cause;
pub mod config;
pub mod endpoint;
pub mod hss;
pub mod mme;
pub mod nasx;
pub mod overload;
pub mod pcrf;
pub mod record;
pub mod snapshot;
pub mod view;

// Unit tests that reach the MME's internals drive it with the test kit: its sources,
// compiled in as a module, so that its `pepc_mme` paths name this crate (a
// dev-dependency on the kit would link a second copy of this crate's types).
#[cfg(test)]
extern crate self as pepc_mme;
#[cfg(test)]
#[path = "../../testkit/src/harness/mod.rs"]
#[allow(dead_code)]
pub(crate) mod sim;

mod emm;
mod enb;
mod esm;
mod gate;
mod handover;
mod nas;
mod paging;
mod parked;
mod prelude;
pub mod restoring;
mod s1ap;

pub use cause::{EmmCause, EsmCause, HssFailureCause};
pub use config::MmeConfig;
pub use endpoint::{
    EnbView, EndpointOut, EndpointStats, S1apEndpoint, SlicePolicy, SliceRole, UnknownSlicePolicy,
};
pub use hss::{CancellationType, HssAnswer, HssFailure, HssRef, HssRequest};
pub use mme::context::Ue;
pub use mme::{AssocId, Input, Mme, MmeError, MmeStats, Output, SnapshotBytes};
pub use overload::{OverloadConfig, OverloadControl, OverloadStats};
pub use pcrf::{PcrfAnswer, PcrfRequest, PolicyDecision};
pub use pepc_slice::control::ControlEvent;

/// The slice's control table with the MME's UEs as the signaling part of its entries.
pub type ControlPlane = pepc_slice::control::ControlPlane<Ue>;
