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

/// UE-AMBR for both directions in 40 bytes, so it fits the data path's one-line UE
/// record next to the forwarding state ([`TokenBucket`] is 32 bytes per direction).
/// Rates are bytes/s in 32 bits: a rate of 2^32 B/s (34 Gbit/s) or more, beyond any
/// LTE UE category, is stored as unlimited. The burst is derived from the rate.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AmbrPair {
    tokens_ul: u64,
    tokens_dl: u64,
    last_ul: u64,
    last_dl: u64,
    rate_ul: u32,
    rate_dl: u32,
}

fn rate32(bits_per_s: u64) -> u32 {
    u32::try_from(bits_per_s / 8).unwrap_or(0)
}

impl AmbrPair {
    /// Full buckets at the given rates (bits/s; 0 = unlimited).
    pub fn new(ul_bits_per_s: u64, dl_bits_per_s: u64) -> Self {
        let (rate_ul, rate_dl) = (rate32(ul_bits_per_s), rate32(dl_bits_per_s));
        AmbrPair {
            tokens_ul: burst_nb(rate_ul as u64),
            tokens_dl: burst_nb(rate_dl as u64),
            last_ul: 0,
            last_dl: 0,
            rate_ul,
            rate_dl,
        }
    }

    /// As five words, for a record kept in a line of atomics.
    pub(crate) fn to_words(self) -> [u64; 5] {
        [
            self.tokens_ul,
            self.tokens_dl,
            self.last_ul,
            self.last_dl,
            self.rate_ul as u64 | (self.rate_dl as u64) << 32,
        ]
    }

    pub(crate) fn from_words(w: [u64; 5]) -> Self {
        AmbrPair {
            tokens_ul: w[0],
            tokens_dl: w[1],
            last_ul: w[2],
            last_dl: w[3],
            rate_ul: w[4] as u32,
            rate_dl: (w[4] >> 32) as u32,
        }
    }

    /// Same configured rates? (Re-publishing must not refill the buckets.)
    pub fn same_rates(&self, ul_bits_per_s: u64, dl_bits_per_s: u64) -> bool {
        (self.rate_ul, self.rate_dl) == (rate32(ul_bits_per_s), rate32(dl_bits_per_s))
    }

    #[inline]
    pub fn allow(&mut self, uplink: bool, len: usize, now_ns: u64) -> bool {
        let (tokens, last, rate) = if uplink {
            (&mut self.tokens_ul, &mut self.last_ul, self.rate_ul)
        } else {
            (&mut self.tokens_dl, &mut self.last_dl, self.rate_dl)
        };
        rate == 0
            || take(
                tokens,
                last,
                rate as u64,
                burst_nb(rate as u64),
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
    fn ambr_pair_matches_token_bucket() {
        let (mut ul, mut dl) = (TokenBucket::new(8_000_000), TokenBucket::new(800_000));
        let mut pair = AmbrPair::new(8_000_000, 800_000);
        let mut t = 0u64;
        for i in 0..20_000u64 {
            let len = 200 + (i as usize * 37) % 1200;
            assert_eq!(pair.allow(true, len, t), ul.allow(len, t), "ul at {i}");
            assert_eq!(pair.allow(false, len, t), dl.allow(len, t), "dl at {i}");
            t += 50_000 + (i * 7919) % 200_000;
        }
        assert!(pair.same_rates(8_000_000, 800_000) && !pair.same_rates(8_000_000, 0));
        // Beyond 32 bits of bytes/s: unlimited.
        let mut huge = AmbrPair::new(1 << 40, 0);
        assert!((0..1000).all(|_| huge.allow(true, 1500, 0) && huge.allow(false, 1500, 0)));
    }

    #[test]
    fn unlimited_always_allows() {
        let mut b = TokenBucket::unlimited();
        assert!(b.allow(usize::MAX / NANO as usize, 0));
    }
}
