//! Which bucket of a histogram's bounds a value falls in: one lookup for the registry's
//! histograms and the direct histograms of spans and measured functions.

/// Bucket bounds up to which `observe` scans linearly.
const LINEAR_SCAN_MAX: usize = 16;

/// The bucket of `v` (`le` semantics: a value equal to a bound belongs to that bucket); the
/// last one, `bounds.len()`, is `+Inf`.
#[inline]
pub(crate) fn bucket_index(bounds: &[f64], v: f64) -> usize {
    if bounds.len() <= LINEAR_SCAN_MAX {
        // Observed values cluster in a few buckets, so a scan's exit branch predicts well: on the
        // default 14 bounds it beat a binary search by a quarter on a repeated value and trailed
        // it by a tenth on values spread over every bucket.
        bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len())
    } else {
        bounds.partition_point(|b| *b < v)
    }
}
