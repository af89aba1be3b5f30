//! The drivers' RAND source: fresh, unpredictable values across buffer refills.

use std::collections::HashSet;

#[test]
fn urandom_values_are_distinct_across_refills() {
    let mut r = pepc_mme::mme::urandom();
    // 1000 values span several 4 KiB refills of the buffered source.
    let seen: HashSet<[u8; 16]> = (0..1000).map(|_| r()).collect();
    assert_eq!(seen.len(), 1000, "RAND values repeat");
    assert!(!seen.contains(&[0u8; 16]), "an all-zero RAND");
}
