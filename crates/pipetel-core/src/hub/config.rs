//! A hub's settings and their defaults.

use std::time::Duration;

/// How long a silent source still counts in gauges, unless configured.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);
/// The most sources a hub tracks, unless configured.
pub const DEFAULT_MAX_SOURCES: usize = 10_000;
/// The most families a hub tracks, unless configured.
pub const DEFAULT_MAX_FAMILIES: usize = 1_000;
/// The attribute naming a histogram bucket's upper bound (as in Prometheus).
pub const BUCKET_BOUND_ATTRIBUTE: &str = "le";

/// How histogram families are exported through OTel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HistogramExport {
    /// Observable up-down counters `<prom>_bucket` (with an `le` attribute), `<prom>_count` and
    /// `<prom>_sum`, where `<prom>` is the family's Prometheus name: exact, usable with
    /// `histogram_quantile()`, and named the same through a collector as on the pull endpoint.
    #[default]
    Counters,
    /// No OTel instruments; histograms are read through
    /// [`SnapshotHub::snapshot`](super::SnapshotHub::snapshot) by an encoder
    /// that renders direct histograms.
    SnapshotOnly,
}

/// Settings of a [`SnapshotHub`](super::SnapshotHub).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HubConfig {
    /// A source silent (nothing accepted) for longer than this is left out of gauges.
    pub stale_after: Duration,
    /// How histogram families are exported.
    pub histograms: HistogramExport,
    /// The most sources tracked; an envelope from one more is refused.
    pub max_sources: usize,
    /// The most families tracked; an envelope bringing one more is refused.
    pub max_families: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            stale_after: DEFAULT_STALE_AFTER,
            histograms: HistogramExport::default(),
            max_sources: DEFAULT_MAX_SOURCES,
            max_families: DEFAULT_MAX_FAMILIES,
        }
    }
}

impl HubConfig {
    crate::field_setters::field_setters! {
        /// Sets [`HubConfig::stale_after`].
        pub fn with_stale_after(stale_after: Duration);
        /// Sets [`HubConfig::histograms`].
        pub fn with_histograms(histograms: HistogramExport);
        /// Sets [`HubConfig::max_sources`].
        pub fn with_max_sources(max_sources: usize);
        /// Sets [`HubConfig::max_families`].
        pub fn with_max_families(max_families: usize);
    }
}
