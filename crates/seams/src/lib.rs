//! The seam between the MME and what serves it: the requests the MME sends to the HSS
//! (S6a-shaped, [`hss`]) and to the PCRF (Gx-shaped, [`pcrf`]) and the answers that come
//! back, the PCC rules and their flow filters ([`filter`], the IPFilterRule grammar of
//! Gx's Flow-Description), and the reference ([`HssRef`]) that ties an answer to its
//! request.
//!
//! Both sides use these types and neither owns them: the MME (`pepc-mme`) sends and
//! awaits them, the Diameter clients (`pepc-diameter`: S6a, Gx) and the embedded HSS
//! and PCRF serve them. No I/O here and no MME types, so a protocol client compiles
//! without the MME (STYLE.md §7).

#![forbid(unsafe_code)]

pub mod filter;
pub mod hss;
pub mod pcrf;

pub use filter::{FlowDirection, FlowFilter};
pub use hss::{
    CancellationType, DefaultApn, HssAnswer, HssData, HssFailure, HssRef, HssRequest,
    SubscriptionData, SubscriptionUpdate,
};
pub use pcrf::{
    PccRule, PcrfAnswer, PcrfFailure, PcrfRequest, PolicyDecision, PolicyError, PolicySession,
    SessionQos, UsageGrant, UsageReport,
};
pub use pepc_types::PdnType;
