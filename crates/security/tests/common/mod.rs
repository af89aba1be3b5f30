// Shared by the integration tests (included with `mod`).
#![allow(dead_code)]

pub fn h(s: &str) -> Vec<u8> {
    hex::decode(s.replace(' ', "")).expect("test vector hex")
}

pub fn a<const N: usize>(s: &str) -> [u8; N] {
    h(s).try_into().expect("test vector length")
}
