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

/// Burst of a bucket at `rate_bps` bytes/s, in nano-bytes: 100 ms at the rate, at
/// least 3000 bytes so a full-size packet always fits.
#[inline(always)]
fn burst_nb(rate_bps: u64) -> u64 {
    (rate_bps / 10).max(3000).saturating_mul(NANO)
}

/// The refill-and-take step shared by every bucket shape.
#[inline(always)]
fn take(
    tokens_nb: &mut u64,
    last_ns: &mut u64,
    rate_bps: u64,
    burst_nb: u64,
    len: usize,
    now_ns: u64,
) -> bool {
    let elapsed = now_ns.saturating_sub(*last_ns);
    *last_ns = now_ns.max(*last_ns);
    *tokens_nb = tokens_nb
        .saturating_add(elapsed.saturating_mul(rate_bps))
        .min(burst_nb);
    let need = len as u64 * NANO;
    if *tokens_nb >= need {
        *tokens_nb -= need;
        true
    } else {
        false
    }
}

impl TokenBucket {
    /// `rate_bits_per_s` = 0 means unlimited. Burst defaults to 100 ms at the rate
    /// (at least 3000 bytes so a full-size packet always fits).
    pub fn new(rate_bits_per_s: u64) -> Self {
        let rate_bps = rate_bits_per_s / 8;
        TokenBucket {
            rate_bps,
            burst_nb: burst_nb(rate_bps),
            tokens_nb: burst_nb(rate_bps),
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

    /// Give back `len` bytes taken for a packet that did not leave after all.
    pub fn refund(&mut self, len: usize) {
        if self.rate_bps != 0 {
            let back = (len as u64).saturating_mul(NANO);
            self.tokens_nb = self.tokens_nb.saturating_add(back).min(self.burst_nb);
        }
    }

    /// Take `len` bytes if available at time `now_ns`.
    #[inline]
    pub fn allow(&mut self, len: usize, now_ns: u64) -> bool {
        if self.rate_bps == 0 {
            return true;
        }
        take(
            &mut self.tokens_nb,
            &mut self.last_ns,
            self.rate_bps,
            self.burst_nb,
            len,
            now_ns,
        )
    }
}

/// One direction of UE-AMBR in 20 bytes, so it fits the data path's one line per
/// direction next to the forwarding state and counters ([`TokenBucket`] is 32 bytes).
/// The rate is bytes/s in 32 bits: a rate of 2^32 B/s (34 Gbit/s) or more, beyond any
/// LTE UE category, is stored as unlimited. The burst is derived from the rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AmbrBucket {
    tokens: u64,
    last: u64,
    rate: u32,
}

fn rate32(bits_per_s: u64) -> u32 {
    u32::try_from(bits_per_s / 8).unwrap_or(0)
}

impl AmbrBucket {
    /// A full bucket at `bits_per_s` (0 = unlimited).
    pub fn new(bits_per_s: u64) -> Self {
        let rate = rate32(bits_per_s);
        AmbrBucket {
            tokens: burst_nb(rate as u64),
            last: 0,
            rate,
        }
    }

    /// (tokens, last refill, rate in bytes/s): how a line of atomics stores it.
    pub(crate) fn parts(&self) -> (u64, u64, u32) {
        (self.tokens, self.last, self.rate)
    }

    pub(crate) fn from_parts(tokens: u64, last: u64, rate: u32) -> Self {
        AmbrBucket { tokens, last, rate }
    }

    #[inline]
    pub fn allow(&mut self, len: usize, now_ns: u64) -> bool {
        self.rate == 0
            || take(
                &mut self.tokens,
                &mut self.last,
                self.rate as u64,
                burst_nb(self.rate as u64),
                len,
                now_ns,
            )
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
    fn ambr_bucket_matches_token_bucket() {
        let (mut ul, mut dl) = (TokenBucket::new(8_000_000), TokenBucket::new(800_000));
        let (mut a_ul, mut a_dl) = (AmbrBucket::new(8_000_000), AmbrBucket::new(800_000));
        let mut t = 0u64;
        for i in 0..20_000u64 {
            let len = 200 + (i as usize * 37) % 1200;
            assert_eq!(a_ul.allow(len, t), ul.allow(len, t), "ul at {i}");
            assert_eq!(a_dl.allow(len, t), dl.allow(len, t), "dl at {i}");
            t += 50_000 + (i * 7919) % 200_000;
        }
        let (tokens, last, rate) = a_ul.parts();
        assert_eq!(AmbrBucket::from_parts(tokens, last, rate), a_ul);
        // Beyond 32 bits of bytes/s: unlimited.
        let mut huge = AmbrBucket::new(1 << 40);
        assert!((0..1000).all(|_| huge.allow(1500, 0)));
    }

    #[test]
    fn unlimited_always_allows() {
        let mut b = TokenBucket::unlimited();
        assert!(b.allow(usize::MAX / NANO as usize, 0));
    }
}
