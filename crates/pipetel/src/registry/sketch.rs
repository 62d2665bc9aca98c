//! The relative-error sketch behind summaries' quantiles: plain data, no clock, no threads.
//!
//! A DDSketch-style histogram with bins of bounded relative width. The bin of a value `v ≠ 0`
//! comes straight from the bits of `|v|`: the exponent `e` and the top 6 bits of the mantissa
//! `m` (`|v| = m·2^e`, `1 ≤ m < 2`), that is `⌊64·(e + m − 1)⌋` — a piecewise-linear `log2`,
//! so indexing costs a shift and a subtraction instead of a logarithm. A bin spans a mantissa
//! step of `1/64`, so its upper bound is at most `1 + 1/64` times its lower bound, and the value
//! it reports, the harmonic mean `2·lo·hi / (lo + hi)` of its bounds, is within
//! `(hi − lo) / (hi + lo) ≤ 1/129` (0.78 %) of every value in it. Negative values have bins of
//! their own, values of magnitude below `1e-9` count as zero, and each sketch keeps its smallest
//! and largest value: quantile 0 and 1 return them exactly, and every estimate is clamped to
//! them (which can only bring it closer to the value it stands for).
//!
//! Bins are a dense array per sign that grows to cover the values seen, at most 4096 bins (64
//! octaves, more than 19 orders of magnitude); past that, the lowest bins collapse into the
//! lowest kept one, so tiny values beside huge ones of the same sign read too high.
//!
//! # Error bound
//! For a window holding `n` observations, the value returned for quantile `q` is within
//! [`RELATIVE_ERROR`] (relative) of the exact value of rank `⌊q·(n−1)⌋` in the sorted
//! observations (the smallest value for `q = 0`, the largest for `q = 1`), for values whose
//! magnitude is above `1e-9` (smaller ones read as 0) and within 19 orders of magnitude of the
//! largest one of their sign.

/// The relative accuracy of the summaries' quantiles (see the module docs).
pub const RELATIVE_ERROR: f64 = 0.01;

/// Magnitudes below this count as zero.
const ZERO_BELOW: f64 = 1e-9;
/// Bins per octave: the top `BIN_BITS` bits of the mantissa pick the bin within an octave.
const BIN_BITS: u32 = 6;
/// The shift that keeps the exponent and the top `BIN_BITS` bits of the mantissa.
const SHIFT: u32 = 52 - BIN_BITS;
/// The bin of 1.0 (the exponent bias, in bins).
const BIAS: i32 = 1023 << BIN_BITS;
/// The most bins a store keeps per sign.
const MAX_BINS: usize = 4096;
/// Extra bins allocated beside a new value, so a drifting distribution does not grow the store
/// one bin at a time.
const SLACK: i32 = 32;

/// The bin of a finite magnitude `a >= ZERO_BELOW`.
#[inline]
fn bin(a: f64) -> i32 {
    // A finite positive f64 shifted right keeps 17 bits: this cannot overflow an i32.
    (a.to_bits() >> SHIFT) as i32 - BIAS
}

/// The lower bound of bin `key`.
fn lower_bound(key: i32) -> f64 {
    f64::from_bits(((key + BIAS).max(0) as u64) << SHIFT)
}

/// The value a bin reports: the harmonic mean of its bounds, which has the same relative
/// distance to both.
fn estimate(key: i32) -> f64 {
    let (lo, hi) = (lower_bound(key), lower_bound(key + 1));
    // Written so that the last finite bin (whose upper bound is +Inf) gives a finite value.
    lo * (2.0 / (1.0 + lo / hi))
}

/// Counts per bin of one sign: `bins[i]` counts bin `offset + i`.
#[derive(Default, Clone)]
struct Store {
    bins: Vec<u64>,
    offset: i32,
}

impl Store {
    #[inline]
    fn add(&mut self, key: i32) {
        // A key below `offset` wraps to a huge index and takes the slow path too.
        match self.bins.get_mut(key.wrapping_sub(self.offset) as u32 as usize) {
            Some(c) => *c += 1,
            None => self.add_slow(key, 1),
        }
    }

    #[cold]
    #[inline(never)]
    fn add_slow(&mut self, key: i32, n: u64) {
        let (lo, hi) = match self.range() {
            None => (key - SLACK, key + SLACK),
            Some((lo, hi)) if key < lo => (key - SLACK, hi),
            Some((lo, hi)) => (lo, hi.max(key + SLACK)),
        };
        self.cover(lo, hi);
        self.add_n(key, n);
    }

    /// Adds `n` to bin `key`, which `cover` made sure exists unless it collapsed.
    fn add_n(&mut self, key: i32, n: u64) {
        let i = key.max(self.offset).wrapping_sub(self.offset) as u32 as usize;
        if let Some(c) = self.bins.get_mut(i) {
            *c += n;
        }
    }

    /// The lowest and highest bin in use.
    fn range(&self) -> Option<(i32, i32)> {
        let first = self.bins.iter().position(|c| *c > 0)?;
        let last = self.bins.iter().rposition(|c| *c > 0).unwrap_or(first);
        Some((self.offset + first as i32, self.offset + last as i32))
    }

    /// Makes the bins cover `lo..=hi` (and the bins in use), keeping at most `MAX_BINS`: past
    /// that, the lowest bins fold into the lowest kept one.
    fn cover(&mut self, lo: i32, hi: i32) {
        let used = self.range();
        let (mut lo, hi) = match used {
            Some((ulo, uhi)) => (lo.min(ulo), hi.max(uhi)),
            None => (lo, hi),
        };
        lo = lo.max(hi - (MAX_BINS as i32 - 1));
        if lo >= self.offset && hi - self.offset < self.bins.len() as i32 {
            // Already covered (a collapsed store starts at `lo`: nothing below it to fold).
            return;
        }
        let mut bins = vec![0u64; (hi - lo + 1) as usize];
        if let Some((ulo, uhi)) = used {
            for key in ulo..=uhi {
                let c = self.bins[(key - self.offset) as usize];
                if c > 0 {
                    bins[(key.max(lo) - lo) as usize] += c;
                }
            }
        }
        self.bins = bins;
        self.offset = lo;
    }

    /// Adds every count of `other`.
    fn merge(&mut self, other: &Store) {
        let Some((olo, ohi)) = other.range() else { return };
        self.cover(olo, ohi);
        for key in olo..=ohi {
            let c = other.bins[(key - other.offset) as usize];
            if c > 0 {
                self.add_n(key, c);
            }
        }
    }

    /// The values counted (summed when asked: an observation saves the update).
    fn total(&self) -> u64 {
        self.bins.iter().sum()
    }

    /// The bin holding the value of rank `rank` (0-based, by increasing magnitude).
    fn key_at_rank(&self, rank: u64) -> i32 {
        let mut seen = 0u64;
        for (i, c) in self.bins.iter().enumerate() {
            seen += c;
            if seen > rank {
                return self.offset + i as i32;
            }
        }
        self.offset + self.bins.len().saturating_sub(1) as i32
    }

    fn clear(&mut self) {
        // Keeps the bins: the next slice of the window likely needs the same ones.
        self.bins.fill(0);
    }
}

/// A relative-error sketch of a set of values (see the module docs).
#[derive(Clone)]
pub(super) struct Sketch {
    positive: Store,
    negative: Store,
    zero: u64,
    min: f64,
    max: f64,
}

impl Default for Sketch {
    fn default() -> Self {
        Sketch {
            positive: Store::default(),
            negative: Store::default(),
            zero: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }
}

impl Sketch {
    /// Adds a finite value.
    #[inline]
    pub(super) fn add(&mut self, v: f64) {
        let a = v.abs();
        if a < ZERO_BELOW {
            self.zero += 1;
        } else if v > 0.0 {
            self.positive.add(bin(a));
        } else {
            self.negative.add(bin(a));
        }
        // Branches rather than `f64::min`/`max`: the value is finite, and new extremes are rare.
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.min > self.max
    }

    pub(super) fn merge(&mut self, other: &Sketch) {
        self.positive.merge(&other.positive);
        self.negative.merge(&other.negative);
        self.zero += other.zero;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The value of quantile `q` (clamped to `[0, 1]`), `None` when empty.
    pub(super) fn quantile(&self, q: f64) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let neg = self.negative.total();
        let n = neg + self.zero + self.positive.total();
        if q.is_nan() || q <= 0.0 {
            return Some(self.min);
        }
        if q >= 1.0 {
            return Some(self.max);
        }
        let rank = (q * (n - 1) as f64) as u64;
        let v = if rank < neg {
            // Negative values in increasing order are magnitudes in decreasing order.
            -estimate(self.negative.key_at_rank(neg - 1 - rank))
        } else if rank < neg + self.zero {
            0.0
        } else {
            estimate(self.positive.key_at_rank(rank - neg - self.zero))
        };
        Some(v.clamp(self.min, self.max))
    }

    pub(super) fn clear(&mut self) {
        self.positive.clear();
        self.negative.clear();
        self.zero = 0;
        self.min = f64::INFINITY;
        self.max = f64::NEG_INFINITY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(sorted: &[f64], q: f64) -> f64 {
        sorted[(q * (sorted.len() as f64 - 1.0)) as usize]
    }

    /// Every quantile of `values` read from one sketch, against the exact ones.
    fn check(values: &[f64], what: &str) {
        let mut s = Sketch::default();
        for v in values {
            s.add(*v);
        }
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        for q in (0..=1000).map(|i| i as f64 / 1000.0).chain([0.999, 0.9999]) {
            let want = exact(&sorted, q);
            let got = s.quantile(q).expect("non-empty sketch");
            let ok = if want.abs() < ZERO_BELOW {
                got.abs() < ZERO_BELOW
            } else {
                (got - want).abs() <= RELATIVE_ERROR * want.abs()
            };
            assert!(ok, "{what}, q={q}: {got} vs exact {want}");
        }
    }

    /// A small deterministic generator (xorshift), so the tests need no dependency.
    fn uniform01(state: &mut u64) -> f64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        (*state >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn quantiles_stay_within_the_stated_error() {
        let values: Vec<f64> = (0..5000u64).map(|i| ((i * 7919) % 5000) as f64 / 100.0 + 0.001).collect();
        check(&values, "a spread of 5000 values");
    }

    #[test]
    fn many_quantiles_of_several_distributions_stay_within_the_error() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let uniform: Vec<f64> = (0..20_000).map(|_| uniform01(&mut s) * 3.0).collect();
        check(&uniform, "uniform [0, 3)");
        // Log-uniform over six decades (1e-3 to 1e3): every octave's bins are used.
        let spread: Vec<f64> = (0..20_000).map(|_| 10f64.powf(uniform01(&mut s) * 6.0 - 3.0)).collect();
        check(&spread, "log-uniform over 6 decades");
        // Log-normal-like: the product of a few uniforms, scaled.
        let lognormal: Vec<f64> =
            (0..20_000).map(|_| (0..4).map(|_| 0.05 + 2.0 * uniform01(&mut s)).product::<f64>() * 1e-2).collect();
        check(&lognormal, "log-normal-like");
        let mixed: Vec<f64> =
            (0..20_000).map(|_| (uniform01(&mut s) - 0.4) * 10f64.powf(uniform01(&mut s) * 4.0)).collect();
        check(&mixed, "negatives and positives over 4 decades");
        let with_zeros: Vec<f64> = (0..5_000).map(|i| if i % 3 == 0 { 0.0 } else { -(i as f64) }).collect();
        check(&with_zeros, "negatives and zeros");
        // Exact bin bounds and huge magnitudes.
        let edges: Vec<f64> =
            (0..4_000).map(|i| lower_bound(i - 2_000) * if i % 2 == 0 { 1.0 } else { -1.0 }).collect();
        check(&edges, "bin bounds");
        // The largest magnitudes (the last bin's upper bound is +Inf), within the 19 decades.
        check(&[f64::MAX, 1e300, 1e295, -f64::MAX, -1e290, -1e300], "extremes");
    }

    #[test]
    fn every_bin_estimate_is_within_the_bound_of_its_values() {
        for key in [-1_900, -64, -1, 0, 1, 63, 64, 65, 1_000, 65_534] {
            let (lo, hi, e) = (lower_bound(key), lower_bound(key + 1), estimate(key));
            assert!(bin(lo) == key && bin(f64::from_bits(hi.to_bits() - 1)) == key, "bin {key}");
            if hi.is_finite() {
                assert!((e - lo) / lo <= 1.0 / 129.0 + 1e-15 && (hi - e) / hi <= 1.0 / 129.0 + 1e-15, "bin {key}");
            }
        }
    }

    #[test]
    fn the_lowest_bins_collapse_past_the_cap() {
        let mut s = Sketch::default();
        // 25 decades of one sign: the lowest ones fold into the lowest kept bin.
        for e in -9..=16 {
            s.add(10f64.powi(e));
        }
        assert_eq!(s.quantile(0.0), Some(1e-9), "the minimum stays exact");
        assert_eq!(s.quantile(1.0), Some(1e16), "the maximum stays exact");
        assert!(s.positive.bins.len() <= MAX_BINS, "{} bins", s.positive.bins.len());
        assert_eq!(s.positive.total(), 26);
        // More tiny values fold into the lowest kept bin (after at most one shift of the range
        // down by the slack kept above the largest value) without growing the store again.
        s.add(1e-8);
        let (offset, len) = (s.positive.offset, s.positive.bins.len());
        s.add(1e-7);
        assert_eq!((s.positive.offset, s.positive.bins.len(), s.positive.total()), (offset, len, 28));
        assert!(len <= MAX_BINS);
    }

    #[test]
    fn negative_values_and_zero_are_kept() {
        let mut s = Sketch::default();
        for v in [-5.0, 0.0, 5.0] {
            s.add(v);
        }
        assert_eq!([0.0, 0.5, 1.0].map(|q| s.quantile(q)), [Some(-5.0), Some(0.0), Some(5.0)]);
        s.clear();
        assert!(s.is_empty() && s.quantile(0.5).is_none());
    }
}
