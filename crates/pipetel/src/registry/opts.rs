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

    /// Histogram bucket upper bounds: finite, strictly increasing, at least one (`+Inf` is
    /// implied). Default: the registry's default buckets ([`crate::buckets::SECONDS_BUCKETS`] unless
    /// [`Registry::set_default_buckets`](super::Registry::set_default_buckets) changed them).
    pub fn buckets(mut self, bounds: impl Into<Vec<f64>>) -> Self {
        self.buckets = Some(bounds.into());
        self
    }

    /// Summary quantiles, each in `[0, 1]`. Default [`DEFAULT_QUANTILES`](super::DEFAULT_QUANTILES).
    pub fn quantiles(mut self, quantiles: impl Into<Vec<f64>>) -> Self {
        self.quantiles = Some(quantiles.into());
        self
    }

    /// Summary window length. Default [`DEFAULT_MAX_AGE`](super::DEFAULT_MAX_AGE).
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.max_age = Some(max_age);
        self
    }

    /// Slices the summary window slides by (1 to 60). Default
    /// [`DEFAULT_AGE_BUCKETS`](super::DEFAULT_AGE_BUCKETS).
    pub fn age_buckets(mut self, n: u32) -> Self {
        self.age_buckets = Some(n);
        self
    }

    /// An OTel instrument name and unit other than the exposition name (for pipetel's own
    /// dotted, semantic-convention names whose translation gives the exposition name).
    pub(crate) fn otel(mut self, name: impl Into<String>, unit: impl Into<String>) -> Self {
        self.otel = Some((name.into(), unit.into()));
        self
    }
}
