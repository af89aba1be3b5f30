//! The MME flows of tests/flows.rs on nodes of two and three slices: the node's S1AP
//! endpoint steers every message to the slice of the UE (its IMSI's policy slice),
//! whose MME allocates identifiers carrying the slice.

mod two_slices {
    const SLICES: usize = 2;
    include!("flows/body.rs");
}

mod three_slices {
    const SLICES: usize = 3;
    include!("flows/body.rs");
}
