//! A family's merged, exported view: monotonic, with its attributes built once.

use opentelemetry::metrics::AsyncInstrument;
use opentelemetry::KeyValue;
use pipetel_recorders::{Family, Kind, MetricSnapshot};

use super::config::BUCKET_BOUND_ATTRIBUTE;

/// A family's merged, exported view, cached until its inputs change.
pub(super) struct View {
    pub(super) generation: u64,
    /// For gauges: which sources were live when it was built.
    pub(super) live: Vec<String>,
    pub(super) snapshot: MetricSnapshot,
    /// Attributes per series.
    attrs: Vec<Vec<KeyValue>>,
    /// For histograms: attributes per series and bucket (the series' attributes plus `le`).
    bucket_attrs: Vec<Vec<KeyValue>>,
}

impl View {
    pub(super) fn observe_values(&self, o: &dyn AsyncInstrument<f64>) {
        for (v, attrs) in self.snapshot.values().iter().zip(&self.attrs) {
            o.observe(*v, attrs);
        }
    }

    pub(super) fn observe_sums(&self, o: &dyn AsyncInstrument<f64>) {
        for (v, attrs) in self.snapshot.sums().iter().zip(&self.attrs) {
            o.observe(*v, attrs);
        }
    }

    pub(super) fn observe_counts(&self, o: &dyn AsyncInstrument<u64>) {
        for (s, attrs) in self.snapshot.series().zip(&self.attrs) {
            o.observe(s.count(), attrs);
        }
    }

    pub(super) fn observe_buckets(&self, o: &dyn AsyncInstrument<u64>) {
        for (c, attrs) in self.snapshot.bucket_counts().iter().zip(&self.bucket_attrs) {
            o.observe(*c, attrs);
        }
    }
}

/// A view over `merged`: monotonic against `previous` for counters and histogram sums, with
/// attributes reused from `previous` when the series are the same.
pub(super) fn build_view(
    family: &Family,
    merged: MetricSnapshot,
    previous: Option<View>,
    live: Vec<String>,
    generation: u64,
) -> View {
    let kind = family.kind();
    let snapshot = match (&previous, kind) {
        (Some(prev), Kind::Counter | Kind::Histogram) => clamp(merged, &prev.snapshot),
        _ => merged,
    };
    let (attrs, bucket_attrs) = match previous {
        Some(prev) if prev.snapshot.label_values() == snapshot.label_values() => (prev.attrs, prev.bucket_attrs),
        _ => attributes(family, &snapshot),
    };
    View { generation, live, snapshot, attrs, bucket_attrs }
}

/// `merged` with every counter value and histogram sum at least what `previous` had for the
/// same series. Differences are float rounding only (inputs are cumulative and carried across
/// restarts), but one ulp down would read as a counter reset downstream.
pub(super) fn clamp(merged: MetricSnapshot, previous: &MetricSnapshot) -> MetricSnapshot {
    let hist = merged.kind() == Kind::Histogram;
    let mut raised: Vec<(usize, f64)> = Vec::new();
    let mut j = 0;
    for (i, s) in merged.series().enumerate() {
        while j < previous.len() && previous.row(j) < s.labels {
            j += 1;
        }
        if j < previous.len() && previous.row(j) == s.labels {
            let before = if hist { previous.sums()[j] } else { previous.values()[j] };
            let now = if hist { s.sum } else { s.value };
            if now < before {
                raised.push((i, before));
            }
        }
    }
    if raised.is_empty() {
        return merged;
    }
    let columns = merged.clone().into_columns();
    let (mut values, mut sums) = (columns.values, columns.sums);
    for (i, v) in raised {
        if hist {
            sums[i] = v;
        } else {
            values[i] = v;
        }
    }
    MetricSnapshot::from_columns(columns.family, columns.label_values.to_vec(), values, columns.bucket_counts, sums)
        .unwrap_or(merged)
}

fn attributes(family: &Family, snapshot: &MetricSnapshot) -> (Vec<Vec<KeyValue>>, Vec<Vec<KeyValue>>) {
    let names: Vec<opentelemetry::Key> =
        family.label_names().iter().map(|n| opentelemetry::Key::new(n.clone())).collect();
    let attrs: Vec<Vec<KeyValue>> = snapshot
        .series()
        .map(|s| names.iter().zip(s.labels).map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect())
        .collect();
    let mut bucket_attrs = Vec::new();
    if family.kind() == Kind::Histogram {
        let bounds: Vec<String> =
            family.bounds().iter().map(|b| b.to_string()).chain(std::iter::once("+Inf".to_owned())).collect();
        bucket_attrs.reserve(attrs.len() * bounds.len());
        for series in &attrs {
            for bound in &bounds {
                let mut a = series.clone();
                a.push(KeyValue::new(BUCKET_BOUND_ATTRIBUTE, bound.clone()));
                bucket_attrs.push(a);
            }
        }
    }
    (attrs, bucket_attrs)
}
