//! The relative-error sketch behind summaries' quantiles: plain data, no clock, no threads.
//!
//! # Quantile definition
//! The quantile `q` of `n` observations is the observation of rank `⌈q·n⌉` (1-based, at least 1)
//! in increasing order: the smallest observation with at least a fraction `q` of them at or
//! below it. This is the nearest-rank rule; it is what the Prometheus Go client's summaries
//! return while their buffer holds every observation. `q = 0` gives the smallest observation,
//! `q = 1` the largest; of three observations, quantile 0.5 is the middle one and 0.9 and 0.99
//! the largest. (`q·n` is taken as the whole number it is meant to be when floating point puts
//! it a few units in the last place above one: 0.7 of 10 observations is rank 7, not 8.)
//!
//! # Exact, then binned
//! A sketch first keeps its observations as they are, up to [`EXACT_OBSERVATIONS`] of them,
//! and quantiles read from those are exact. The observation after that moves them all into
//! bins, and from then on (until the sketch is cleared) quantiles are estimates within the error
//! bound below. Quantiles over several sketches (a summary's window) are exact while none of
//! them has binned its observations.
//!
//! # Bins
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
//! Once binned, the value returned for quantile `q` of `n` observations is within
//! [`RELATIVE_ERROR`] (relative) of the exact one, the observation of rank `⌈q·n⌉` (the
//! smallest for `q = 0`, the largest for `q = 1`), for values whose magnitude is above `1e-9`
//! (smaller ones read as 0) and within 19 orders of magnitude of the largest one of their sign.

/// The relative accuracy of the summaries' quantiles once their observations are binned (see
/// the module docs).
pub const RELATIVE_ERROR: f64 = 0.01;

/// The observations a sketch keeps exactly before it bins them: a summary's quantiles are exact
/// while no slice of its window received more than this many.
pub const EXACT_OBSERVATIONS: usize = 128;

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

/// The 0-based rank of quantile `q` among `n` values: `⌈q·n⌉ − 1` (see the module docs), 0 for
/// `q ≤ 0` or NaN (or no values), `n − 1` for `q ≥ 1`.
fn rank(q: f64, n: u64) -> u64 {
    if q.is_nan() || q <= 0.0 {
        return 0;
    }
    let x = q * n as f64;
    // A product a few ulps above a whole number stands for that number (0.7 · 10 reads
    // 7.000000000000001); a genuine fraction is far larger than this allowance.
    let whole = (x - x * 4.0 * f64::EPSILON).ceil();
    (whole as u64).min(n).max(1) - 1
}

/// The nearest-rank quantile `q` of values sorted in increasing order, `None` when there are none.
fn exact_quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let i = usize::try_from(rank(q, sorted.len() as u64)).ok()?;
    sorted.get(i).copied()
}

/// A sketch of a set of values: exact up to [`EXACT_OBSERVATIONS`] of them, a relative-error
/// histogram past that (see the module docs).
#[derive(Clone)]
pub(super) struct Sketch {
    /// The first values, as they are: `exact[..held]`, while not `binned`. Empty for a sketch
    /// that bins from the start.
    exact: Box<[f64]>,
    /// How many of `exact` hold values; left at `exact.len()` once binned, so that an
    /// observation's one bounds check sends it to the bins.
    held: usize,
    /// Every value is in the bins (and `exact` is ignored).
    binned: bool,
    positive: Store,
    negative: Store,
    zero: u64,
    /// The smallest and largest binned values.
    min: f64,
    max: f64,
}

impl Sketch {
    /// A sketch that keeps its first [`EXACT_OBSERVATIONS`] values exactly. Allocates their room
    /// now, so that adding a value never does until it bins.
    pub(super) fn new() -> Self {
        Self::with_room(EXACT_OBSERVATIONS)
    }

    /// A sketch that bins every value.
    pub(super) fn binned() -> Self {
        let mut s = Self::with_room(0);
        s.binned = true;
        s
    }

    fn with_room(room: usize) -> Self {
        Sketch {
            exact: vec![0.0; room].into_boxed_slice(),
            held: 0,
            binned: false,
            positive: Store::default(),
            negative: Store::default(),
            zero: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
        }
    }

    /// Adds a finite value.
    #[inline]
    pub(super) fn add(&mut self, v: f64) {
        if let Some(slot) = self.exact.get_mut(self.held) {
            *slot = v;
            self.held += 1;
            return;
        }
        if !self.binned {
            self.bin_held();
        }
        self.bin(v);
    }

    /// Moves the values kept exactly into the bins: the sketch's room is full.
    #[cold]
    #[inline(never)]
    fn bin_held(&mut self) {
        self.binned = true;
        for i in 0..self.held {
            self.bin(self.exact[i]);
        }
        self.held = self.exact.len();
    }

    #[inline]
    fn bin(&mut self, v: f64) {
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

    /// The values kept exactly (none once binned).
    fn held(&self) -> &[f64] {
        if self.binned {
            &[]
        } else {
            &self.exact[..self.held]
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        if self.binned {
            self.min > self.max
        } else {
            self.held == 0
        }
    }

    /// The values of all `parts` in one sketch, to read quantiles from: exact when no part has
    /// binned its values, binned otherwise.
    pub(super) fn merge_all<'a>(parts: impl Iterator<Item = &'a Sketch> + Clone) -> Sketch {
        if parts.clone().all(|s| !s.binned) {
            let values: Box<[f64]> = parts.flat_map(Sketch::held).copied().collect();
            let held = values.len();
            return Sketch { exact: values, held, ..Self::with_room(0) };
        }
        let mut merged = Self::binned();
        for s in parts {
            merged.merge(s);
        }
        merged
    }

    /// Adds every value of `other` to this sketch's bins (this sketch is binned).
    fn merge(&mut self, other: &Sketch) {
        if !other.binned {
            for v in other.held() {
                self.add(*v);
            }
            return;
        }
        self.positive.merge(&other.positive);
        self.negative.merge(&other.negative);
        self.zero += other.zero;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    /// The values of quantiles `qs` (each clamped to `[0, 1]`), `None` when empty.
    pub(super) fn quantiles(&self, qs: &[f64]) -> Vec<Option<f64>> {
        if !self.binned {
            let mut sorted = self.held().to_vec();
            sorted.sort_unstable_by(f64::total_cmp);
            return qs.iter().map(|q| exact_quantile(&sorted, *q)).collect();
        }
        qs.iter().map(|q| self.binned_quantile(*q)).collect()
    }

    /// The value of quantile `q`, `None` when empty.
    #[cfg(test)]
    pub(super) fn quantile(&self, q: f64) -> Option<f64> {
        self.quantiles(&[q])[0]
    }

    fn binned_quantile(&self, q: f64) -> Option<f64> {
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
        let rank = rank(q, n);
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
        // Keeps the room for exact values and the bins: the next slice of the window likely
        // needs the same.
        self.held = 0;
        self.binned = false;
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

    /// The nearest-rank quantile `i / 1000` of `sorted`, in whole numbers: rank `⌈i·n/1000⌉`.
    fn exact(sorted: &[f64], per_mille: usize) -> f64 {
        let rank = (per_mille * sorted.len()).div_ceil(1000).max(1);
        sorted[rank - 1]
    }

    /// The quantiles checked: every thousandth.
    fn per_mille() -> impl Iterator<Item = (usize, f64)> {
        (0..=1000).map(|i| (i, i as f64 / 1000.0))
    }

    fn sorted(values: &[f64]) -> Vec<f64> {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        sorted
    }

    fn within_error(got: f64, want: f64) -> bool {
        if want.abs() < ZERO_BELOW {
            got.abs() < ZERO_BELOW
        } else {
            (got - want).abs() <= RELATIVE_ERROR * want.abs()
        }
    }

    /// Every quantile of `values` read from a sketch: exact while they fit its room, within the
    /// stated error beyond; and from a sketch that bins from the start, within the error.
    fn check(values: &[f64], what: &str) {
        let (mut s, mut b) = (Sketch::new(), Sketch::binned());
        for v in values {
            s.add(*v);
            b.add(*v);
        }
        let sorted = sorted(values);
        let qs: Vec<f64> = per_mille().map(|(_, q)| q).collect();
        let (got, got_binned) = (s.quantiles(&qs), b.quantiles(&qs));
        for (i, q) in per_mille() {
            let want = exact(&sorted, i);
            let got = got[i].expect("non-empty sketch");
            if values.len() <= EXACT_OBSERVATIONS {
                assert_eq!(got, want, "{what}, q={q}: {got} vs exact {want}");
            } else {
                assert!(within_error(got, want), "{what}, q={q}: {got} vs exact {want}");
            }
            let got = got_binned[i].expect("non-empty sketch");
            assert!(within_error(got, want), "{what}, binned, q={q}: {got} vs exact {want}");
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
    fn the_rank_is_the_nearest_rank() {
        // Of three, 0.5 is the middle one and everything above 2/3 the largest.
        assert_eq!([0.0, 0.3, 0.34, 0.5, 0.66, 0.67, 0.9, 0.99, 1.0].map(|q| rank(q, 3)), [0, 0, 1, 1, 1, 2, 2, 2, 2]);
        // Products a few ulps above a whole number (0.7 · 10 = 7.000000000000001) are that number.
        assert_eq!([0.1, 0.3, 0.7, 0.9].map(|q| rank(q, 10)), [0, 2, 6, 8]);
        assert_eq!([0.95, 0.99].map(|q| rank(q, 100)), [94, 98]);
        assert_eq!([f64::NAN, -1.0, 2.0].map(|q| rank(q, 5)), [0, 0, 4]);
        assert_eq!(rank(0.5, 1), 0);
    }

    #[test]
    fn three_observations_give_each_quantile_its_own_order_statistic() {
        let mut s = Sketch::new();
        for v in [0.1, 0.5, 1.0] {
            s.add(v);
        }
        let got = s.quantiles(&[0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0]);
        assert_eq!(got, [0.1, 0.1, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0].map(Some));
    }

    #[test]
    fn random_samples_read_exact_order_statistics_while_they_fit_and_stay_within_the_error_beyond() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for n in [1, 2, 3, 4, 5, 7, 10, 17, 64, 99, 127, EXACT_OBSERVATIONS, EXACT_OBSERVATIONS + 1, 1_000, 4_321] {
            for round in 0..4 {
                // Log-uniform over four decades, a quarter of them negative, some repeated.
                let values: Vec<f64> = (0..n)
                    .map(|_| {
                        let v = 10f64.powf(uniform01(&mut state) * 4.0 - 2.0);
                        if uniform01(&mut state) < 0.25 {
                            -v
                        } else {
                            v
                        }
                    })
                    .map(|v| if round == 3 { (v * 4.0).round() / 4.0 } else { v })
                    .collect();
                check(&values, &format!("{n} random values, round {round}"));
            }
        }
    }

    #[test]
    fn sketches_read_together_are_exact_while_none_has_binned() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut parts = [Sketch::new(), Sketch::new(), Sketch::new()];
        let mut all = Vec::new();
        for (k, part) in parts.iter_mut().enumerate() {
            for _ in 0..EXACT_OBSERVATIONS - k {
                let v = uniform01(&mut state) * 100.0;
                part.add(v);
                all.push(v);
            }
        }
        let qs: Vec<f64> = per_mille().map(|(_, q)| q).collect();
        let sorted_all = sorted(&all);
        let got = Sketch::merge_all(parts.iter()).quantiles(&qs);
        for (i, q) in per_mille() {
            assert_eq!(got[i], Some(exact(&sorted_all, i)), "q={q}");
        }
        // One part bins: the window's quantiles are estimates, within the error.
        let v = uniform01(&mut state) * 100.0;
        parts[1].add(v);
        parts[1].add(v);
        all.extend([v, v]);
        let sorted_all = sorted(&all);
        let got = Sketch::merge_all(parts.iter()).quantiles(&qs);
        for (i, q) in per_mille() {
            let (got, want) = (got[i].expect("values"), exact(&sorted_all, i));
            assert!(within_error(got, want), "q={q}: {got} vs {want}");
        }
        // Cleared, the part keeps values exactly again.
        parts[1].clear();
        assert!(parts[1].is_empty());
        parts[1].add(42.0);
        assert_eq!(Sketch::merge_all(parts[1..2].iter()).quantiles(&[0.5]), [Some(42.0)]);
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
        let mut s = Sketch::binned();
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
        for mut s in [Sketch::new(), Sketch::binned()] {
            for v in [-5.0, 0.0, 5.0] {
                s.add(v);
            }
            assert_eq!([0.0, 0.5, 1.0].map(|q| s.quantile(q)), [Some(-5.0), Some(0.0), Some(5.0)]);
            s.clear();
            assert!(s.is_empty() && s.quantile(0.5).is_none());
        }
    }
}
