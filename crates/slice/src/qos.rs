//! Token buckets for UE-AMBR, APN-AMBR and bearer MBR enforcement (data-thread state).

/// A token bucket in integer arithmetic. Tokens are kept in nano-bytes (bytes × 1e9)
/// so that refill is `elapsed_ns × rate_bytes_per_s` with no division per packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenBucket {
    rate_bps: u64,
    burst_nb: u64,
    tokens_nb: u64,
    last_ns: u64,
}

const NANO: u64 = 1_000_000_000;

impl TokenBucket {
    /// `rate_bits_per_s` = 0 means unlimited. Burst defaults to 100 ms at the rate
    /// (at least 3000 bytes so a full-size packet always fits).
    pub fn new(rate_bits_per_s: u64) -> Self {
        let rate_bps = rate_bits_per_s / 8;
        let burst = (rate_bps / 10).max(3000);
        TokenBucket {
            rate_bps,
            burst_nb: burst.saturating_mul(NANO),
            tokens_nb: burst.saturating_mul(NANO),
            last_ns: 0,
        }
    }

    pub fn unlimited() -> Self {
        Self::default()
    }

    #[inline]
    pub fn is_unlimited(&self) -> bool {
        self.rate_bps == 0
    }

    /// Same configured rate? (Re-publishing control state must not refill the bucket.)
    pub fn same_rate(&self, other: &TokenBucket) -> bool {
        self.rate_bps == other.rate_bps
    }

    /// Take `len` bytes if available at time `now_ns`.
    #[inline]
    pub fn allow(&mut self, len: usize, now_ns: u64) -> bool {
        if self.rate_bps == 0 {
            return true;
        }
        let elapsed = now_ns.saturating_sub(self.last_ns);
        self.last_ns = now_ns.max(self.last_ns);
        self.tokens_nb = self
            .tokens_nb
            .saturating_add(elapsed.saturating_mul(self.rate_bps))
            .min(self.burst_nb);
        let need = len as u64 * NANO;
        if self.tokens_nb >= need {
            self.tokens_nb -= need;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enforces_rate_over_time() {
        // 8 Mbit/s = 1 MB/s; burst 100 KB.
        let mut b = TokenBucket::new(8_000_000);
        let mut sent = 0usize;
        let mut t = 0u64;
        // Offer 1000-byte packets every 100 us (10 MB/s) for 1 s.
        for _ in 0..10_000 {
            if b.allow(1000, t) {
                sent += 1000;
            }
            t += 100_000;
        }
        // 1 MB/s for 1 s plus the 100 KB initial burst, within one packet.
        assert!((1_090_000..=1_101_000).contains(&sent), "sent {sent}");
    }

    #[test]
    fn unlimited_always_allows() {
        let mut b = TokenBucket::unlimited();
        assert!(b.allow(usize::MAX / NANO as usize, 0));
    }
}
