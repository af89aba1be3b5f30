//! S1-MME on a node: the node's S1AP endpoint ([`pepc_mme::S1apEndpoint`]) owns the
//! SCTP transport (PPID 18) and the eNB associations and steers each UE's messages
//! to the MME of its slice; each slice's control thread runs that MME against its own
//! control plane. Nothing on the message path is shared or locked: the endpoint and
//! the slices exchange messages over single-producer rings and wake each other with
//! eventfds ([`crate::runtime::IdleWake`]).
//!
//! One driver runs every slice's MME ([`SliceMme`]); its link to the endpoint is
//! * inline, with one slice ([`SliceMme::inline`]): the endpoint and the transport
//!   run on the slice's control thread (no extra hop);
//! * rings, with N slices ([`start_signaling`]): the endpoint has a thread of its own
//!   ([`EndpointThread`]).
//!
//! Either way a slice's MME reaches the HSS through its [`crate::proxy::Proxy`]
//! driver, called on the slice's control thread.
//!
//! Files: `driver` (the slice side), `endpoint` (the endpoint thread), `wire` (the
//! transport), `gauges` (figures for other threads), `mgmt` (the API's requests).

mod driver;
mod endpoint;
mod gauges;
mod mgmt;
mod wire;

pub use driver::SliceMme;
pub use endpoint::{start_signaling, EndpointThread};
pub use gauges::{EndpointGauges, SctpGauges, SliceGauges};
pub use mgmt::{MgmtRequest, PolicyOracle, MAX_UE_PAGE};

/// Messages a ring between the endpoint and a slice holds; beyond it they wait in
/// the sender's backlog (bounded by [`MAX_BACKLOG`]; the node's plan shows it).
pub const S1AP_RING: usize = 16 * 1024;
/// Messages one side keeps for a slow peer before it drops (and counts) more.
const MAX_BACKLOG: usize = 256 * 1024;
