//! Scaffolding shared by the end-to-end tests: the test kit's (a test eNB, the
//! fault relay, the Python Diameter peer, process helpers), and nodes of this crate.
#![allow(dead_code, unused_imports)]

pub mod node;

pub use pepc_testkit::process::*;
pub use pepc_testkit::{diameter, enb, relay};
