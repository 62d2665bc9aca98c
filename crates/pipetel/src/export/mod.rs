//! Exporters: the Prometheus pull endpoint and OTLP push.

#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) mod delivery;
#[cfg(feature = "otlp")]
pub(crate) mod otlp;
#[cfg(feature = "prometheus")]
pub(crate) mod prometheus;

#[cfg(feature = "prometheus")]
pub use self::prometheus::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};

use std::sync::{Arc, RwLock, Weak};

/// The instrumentation scope whose metrics go to push exporters (OTLP, console) only: the pull
/// endpoint leaves them out, because an [`ExpositionSource`] renders the same data there in a
/// form OTel instruments cannot express (Prometheus summaries, native histograms of snapshots).
pub(crate) const PUSH_ONLY_SCOPE: &str = "pipetel.push_only";

/// Extra text for the Prometheus exposition, appended after the OTel families on every scrape
/// and by `PrometheusRender::render`. Implementations write complete families (`# HELP`,
/// `# TYPE`, samples) whose names do not collide with OTel instruments, in the format asked for.
pub(crate) trait ExpositionSource: Send + Sync {
    /// Appends this source's families to `out`, in `format`.
    fn write_exposition(&self, out: &mut String, format: crate::exposition::Format);
}

static SOURCES: RwLock<Vec<Weak<dyn ExpositionSource>>> = RwLock::new(Vec::new());

/// Registers a source for as long as it lives (sources are held weakly: dropping the `Arc`
/// removes it from later scrapes).
pub(crate) fn add_exposition_source(source: &Arc<dyn ExpositionSource>) {
    let mut sources = crate::sync::write(&SOURCES);
    sources.retain(|s| s.strong_count() > 0);
    sources.push(Arc::downgrade(source));
}

/// Appends every live source's text, in `format`.
#[cfg_attr(not(feature = "prometheus"), allow(dead_code))]
pub(crate) fn write_sources(out: &mut String, format: crate::exposition::Format) {
    let live: Vec<Arc<dyn ExpositionSource>> = crate::sync::read(&SOURCES).iter().filter_map(Weak::upgrade).collect();
    for source in live {
        source.write_exposition(out, format);
    }
}
