//! Full MME flows through S1AP with a scripted eNB + UE and a real slice (one slice;
//! tests/flows_sliced.rs runs the same flows on nodes of two and three slices).

const SLICES: usize = 1;
include!("flows/body.rs");
