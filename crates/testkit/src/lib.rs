//! pepc's test kit, used by the tests of the MME, the node and `pepc`, and as the load
//! of `pepc bench attach --transport inprocess` ([`run_inprocess_attaches`]); never by
//! the node itself:
//! * the scripted eNB and UE around a real MME and slice ([`Harness`], [`SimUe`]), and
//!   the test subscribers ([`subscriber`]);
//! * [`enb`]: a test eNB over SCTP-in-UDP against a running node;
//! * [`relay`]: a lossy, duplicating, reordering link for SCTP-in-UDP;
//! * [`diameter`]: the Python (pycrate) HSS and PCRF peers;
//! * [`process`]: bounded child processes, `/metrics` scrapes, the demo ports' lock.
#![forbid(unsafe_code)]

mod harness;

pub mod diameter;
pub mod enb;
pub mod process;
pub mod relay;

pub use harness::*;
