//! Shared-state designs compared by the data-plane benchmark.
pub mod locked;
