//! The signed state cookie (RFC 9260 §5.1.3): what an INIT ACK hands the peer so that
//! INIT is answered without keeping state.

use super::*;

/// Contents of our signed state cookie: everything needed to build the association
/// when the COOKIE ECHO arrives, so INIT is answered without keeping state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieData {
    pub created_ms: u64,
    pub local_vtag: u32,
    pub peer_vtag: u32,
    pub local_init_tsn: u32,
    pub peer_init_tsn: u32,
    pub peer_rwnd: u32,
    pub out_streams: u16,
    pub in_streams: u16,
    pub local_port: u16,
    pub peer_port: u16,
    pub tie_local: u32,
    pub tie_peer: u32,
}

pub(crate) const COOKIE_BODY_LEN: usize = 44;

impl CookieData {
    pub(crate) fn encode(&self) -> [u8; COOKIE_BODY_LEN] {
        let mut b = [0u8; COOKIE_BODY_LEN];
        b[0..8].copy_from_slice(&self.created_ms.to_be_bytes());
        b[8..12].copy_from_slice(&self.local_vtag.to_be_bytes());
        b[12..16].copy_from_slice(&self.peer_vtag.to_be_bytes());
        b[16..20].copy_from_slice(&self.local_init_tsn.to_be_bytes());
        b[20..24].copy_from_slice(&self.peer_init_tsn.to_be_bytes());
        b[24..28].copy_from_slice(&self.peer_rwnd.to_be_bytes());
        b[28..30].copy_from_slice(&self.out_streams.to_be_bytes());
        b[30..32].copy_from_slice(&self.in_streams.to_be_bytes());
        b[32..34].copy_from_slice(&self.local_port.to_be_bytes());
        b[34..36].copy_from_slice(&self.peer_port.to_be_bytes());
        b[36..40].copy_from_slice(&self.tie_local.to_be_bytes());
        b[40..44].copy_from_slice(&self.tie_peer.to_be_bytes());
        b
    }
    pub(crate) fn decode(b: &[u8]) -> Option<CookieData> {
        if b.len() < COOKIE_BODY_LEN {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut ms = [0u8; 8];
        ms.copy_from_slice(&b[0..8]);
        Some(CookieData {
            created_ms: u64::from_be_bytes(ms),
            local_vtag: u32_at(8),
            peer_vtag: u32_at(12),
            local_init_tsn: u32_at(16),
            peer_init_tsn: u32_at(20),
            peer_rwnd: u32_at(24),
            out_streams: u16_at(28),
            in_streams: u16_at(30),
            local_port: u16_at(32),
            peer_port: u16_at(34),
            tie_local: u32_at(36),
            tie_peer: u32_at(40),
        })
    }
}

/// A random u64 from std's per-process randomly keyed hasher (no extra dependency).
pub(crate) fn random_u64() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CTR: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(CTR.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

pub(crate) fn random_nonzero_u32() -> u32 {
    loop {
        let v = random_u64() as u32;
        if v != 0 {
            return v;
        }
    }
}
