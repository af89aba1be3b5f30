//! A small log-linear latency histogram (16 sub-buckets per power of two: ≤ 6.25% error).

#[derive(Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

const SUB: u32 = 16;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; 64 * SUB as usize],
            total: 0,
        }
    }
}

impl Histogram {
    #[inline]
    fn bucket(v: u64) -> usize {
        if v < SUB as u64 {
            return v as usize;
        }
        let exp = 63 - v.leading_zeros(); // >= 4
        let sub = (v >> (exp - 4)) & (SUB as u64 - 1);
        ((exp - 3) * SUB) as usize + sub as usize
    }

    fn value(b: usize) -> u64 {
        let b = b as u32;
        if b < SUB {
            return b as u64;
        }
        let exp = b / SUB + 3;
        let sub = (b % SUB) as u64;
        ((SUB as u64) | sub) << (exp - 4)
    }

    /// Record `n` samples of value `v`.
    #[inline]
    pub fn record_n(&mut self, v: u64, n: u64) {
        self.counts[Self::bucket(v)] += n;
        self.total += n;
    }

    pub fn merge(&mut self, o: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&o.counts) {
            *a += b;
        }
        self.total += o.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The value at quantile q (0..=1).
    pub fn quantile(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((self.total as f64 * q).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::value(b);
            }
        }
        Self::value(self.counts.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_close() {
        let mut h = Histogram::default();
        for v in 1..=10_000u64 {
            h.record_n(v, 1);
        }
        let p50 = h.quantile(0.5) as f64;
        let p99 = h.quantile(0.99) as f64;
        assert!((p50 - 5000.0).abs() / 5000.0 < 0.07, "{p50}");
        assert!((p99 - 9900.0).abs() / 9900.0 < 0.07, "{p99}");
    }
}
