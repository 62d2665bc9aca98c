//! The options of a histogram or summary.

use std::time::Duration;

/// Options of a histogram or summary: buckets, or quantiles and window.
#[derive(Debug, Clone, Default)]
pub struct Opts {
    pub(super) buckets: Option<Vec<f64>>,
    pub(super) quantiles: Option<Vec<f64>>,
    pub(super) max_age: Option<Duration>,
    pub(super) age_buckets: Option<u32>,
    pub(super) otel: Option<(String, String)>,
}

impl Opts {
    /// Default buckets / quantiles and window.
    pub fn new() -> Self {
        Self::default()
    }

    crate::field_setters::field_setters! {
        /// Histogram bucket upper bounds: finite, strictly increasing, at least one (`+Inf` is
        /// implied). Default: the registry's default buckets ([`crate::buckets::SECONDS_BUCKETS`] unless
        /// [`Registry::set_default_buckets`](super::Registry::set_default_buckets) changed them).
        pub fn buckets(buckets: impl Into<Vec<f64>>) = Some(buckets.into());
        /// Summary quantiles, each in `[0, 1]`. Default [`DEFAULT_QUANTILES`](super::DEFAULT_QUANTILES).
        pub fn quantiles(quantiles: impl Into<Vec<f64>>) = Some(quantiles.into());
        /// Summary window length. Default [`DEFAULT_MAX_AGE`](super::DEFAULT_MAX_AGE).
        pub fn max_age(max_age: Duration) = Some(max_age);
        /// Slices the summary window slides by (1 to 60). Default
        /// [`DEFAULT_AGE_BUCKETS`](super::DEFAULT_AGE_BUCKETS).
        pub fn age_buckets(age_buckets: u32) = Some(age_buckets);
    }

    /// An OTel instrument name and unit other than the exposition name (for pipetel's own
    /// dotted, semantic-convention names whose translation gives the exposition name).
    pub(crate) fn otel(mut self, name: impl Into<String>, unit: impl Into<String>) -> Self {
        self.otel = Some((name.into(), unit.into()));
        self
    }
}
