//! The cardinality limit and the one overflow rule every pipetel metric follows.
//!
//! A metric keeps at most [`cardinality_limit`] series (label sets), one of them reserved for
//! the overflow series: past [`room`] series, new label sets share that one series, marked by
//! the attribute `otel.metric.overflow=true` (the label `otel_metric_overflow="true"` on the
//! Prometheus side), as the OTel SDK does for its own instruments. Memory stays bounded and no
//! recorded value is lost; the first overflow of each metric is logged once.
//!
//! Two forms share the rule: a store that creates series on first use (the registry) asks
//! [`admits`] before creating one and records into [`OVERFLOW_MARK`]'s series otherwise; an
//! observable instrument that walks its series at collection (the pipeline's worker metrics)
//! runs them through a [`Folder`].

// Plumbing between this crate and `pipetel` (hidden from the docs): its docs name the private
// items they are written for.
#![allow(rustdoc::private_intra_doc_links)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use opentelemetry::KeyValue;

/// The attribute marking the overflow series.
pub(crate) const OVERFLOW_ATTRIBUTE: &str = "otel.metric.overflow";
/// [`OVERFLOW_ATTRIBUTE`] as a Prometheus label, with its value: the overflow series' labels.
pub(crate) const OVERFLOW_LABELS: &str = "otel_metric_overflow=\"true\"";
/// The label values a store keys its overflow series by (no real label value starts with NUL
/// and matches this).
pub(crate) const OVERFLOW_MARK: &str = "\u{0}otel.metric.overflow";

static LIMIT: AtomicUsize = AtomicUsize::new(crate::settings::DEFAULT_CARDINALITY_LIMIT);

/// Sets the most series (label sets) one metric keeps, process-wide (at least 2; default
/// 2,000); further label sets share one overflow series marked `otel_metric_overflow="true"`.
///
/// `init` sets it from `PIPETEL_CARDINALITY_LIMIT`, together with the meter provider's own
/// limit, so call it only for registries on a meter provider of your own
/// ([`Registry::with_meters`](crate::registry::Registry::with_meters)), with that provider's
/// cardinality limit: a registry limit above the provider's would have the SDK fold what the
/// registry keeps apart.
pub fn set_cardinality_limit(limit: usize) {
    LIMIT.store(limit.max(2), Ordering::Relaxed);
}

/// The most series one metric keeps, the overflow series included.
pub(crate) fn cardinality_limit() -> usize {
    LIMIT.load(Ordering::Relaxed)
}

/// The series a metric keeps before new ones fold (one slot stays for the overflow series).
pub(crate) fn room() -> usize {
    cardinality_limit().saturating_sub(1).max(1)
}

/// Whether a store that holds `series` series may create one more; when not, the new label
/// set records into the overflow series and the first overflow of the metric `metric()` names
/// is logged.
pub(crate) fn admits(series: usize, metric: impl FnOnce() -> String) -> bool {
    let ok = series < room();
    if !ok {
        warn_once(&metric(), ADVICE);
    }
    ok
}

/// The attributes of the overflow series.
pub(crate) fn overflow_attributes() -> [KeyValue; 1] {
    [KeyValue::new(OVERFLOW_ATTRIBUTE, true)]
}

/// What the overflow warning advises by default.
const ADVICE: &str = "raise PIPETEL_CARDINALITY_LIMIT, or keep unbounded values such as request ids out of labels";

/// Logs once per metric that its series reached the limit, with `advice` on what to do.
fn warn_once(metric: &str, advice: &str) {
    static WARNED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    if crate::sync::lock(&WARNED).insert(metric.to_string()) {
        tracing::warn!(
            target: "pipetel",
            metric,
            limit = cardinality_limit(),
            "label sets reached the cardinality limit; new ones share one series marked otel_metric_overflow=\"true\" ({advice})"
        );
    }
}

/// The overflow rule for an observable instrument's callback, which sees every series at
/// collection: the first [`room`] series are observed as they are, the values of the rest
/// fold into the overflow series.
///
/// ```ignore
/// let mut folder = Folder::new("pipeline.worker.items");
/// for (value, attrs) in series {
///     if folder.admit() { obs.observe(value, attrs) } else { folder.fold(value, |a, b| a + b) }
/// }
/// if let Some(sum) = folder.finish() { obs.observe(sum, &overflow_attributes()) }
/// ```
#[derive(Debug)]
pub(crate) struct Folder<'a, T> {
    metric: &'a str,
    advice: &'a str,
    room: usize,
    series: usize,
    folded: Option<T>,
}

impl<'a, T> Folder<'a, T> {
    /// A folder for one collection of `metric` under the process-wide limit.
    #[cfg(test)]
    pub(crate) fn new(metric: &'a str) -> Self {
        Folder::with_limit(metric, cardinality_limit())
    }

    /// A folder for one collection of `metric` under `limit` (the overflow series included;
    /// below 2 it still keeps one series of its own).
    pub(crate) fn with_limit(metric: &'a str, limit: usize) -> Self {
        Folder { metric, advice: ADVICE, room: limit.saturating_sub(1).max(1), series: 0, folded: None }
    }

    /// Replaces what the overflow warning advises (for series whose values are not labels a
    /// user chose, such as the worker series).
    pub(crate) fn advice(mut self, advice: &'a str) -> Self {
        self.advice = advice;
        self
    }

    /// Counts the next series; `true` when it is observed as its own, `false` when its value
    /// goes to [`Folder::fold`] (or is dropped, for values that do not add up, such as gauges).
    pub(crate) fn admit(&mut self) -> bool {
        self.series += 1;
        self.series <= self.room
    }

    /// Folds the value of a series [`Folder::admit`] refused into the overflow value.
    pub(crate) fn fold(&mut self, value: T, combine: impl FnOnce(T, T) -> T) {
        self.folded = Some(match self.folded.take() {
            Some(acc) => combine(acc, value),
            None => value,
        });
    }

    /// The overflow series' value, if anything folded; logs the metric's first overflow.
    pub(crate) fn finish(self) -> Option<T> {
        if self.series > self.room {
            warn_once(self.metric, self.advice);
        }
        self.folded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_keeps_room_series_and_folds_the_rest() {
        let room = room();
        let mut folder = Folder::new("test.metric");
        let mut kept = 0;
        for v in 0..room as u64 + 3 {
            if folder.admit() {
                kept += 1;
            } else {
                folder.fold(v, |a, b| a + b);
            }
        }
        assert_eq!(kept, room);
        let r = room as u64;
        assert_eq!(folder.finish(), Some(r + r + 1 + r + 2));
        let mut quiet: Folder<'_, u64> = Folder::new("test.metric");
        assert!(quiet.admit());
        assert_eq!(quiet.finish(), None);
        assert!(admits(room - 1, || "test.metric".into()) && !admits(room, || "test.metric".into()));
    }
}
