//! Scaffolding shared by the end-to-end tests.
#![allow(dead_code)]

pub mod diameter;
pub mod enb;
pub mod node;
pub mod relay;
