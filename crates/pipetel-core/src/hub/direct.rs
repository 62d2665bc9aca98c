//! The merged histograms on the pull endpoint.

use std::sync::{Mutex, Weak};
use std::time::Instant;

use pipetel_recorders::Kind;

use super::config::HistogramExport;
use super::state::State;
use crate::sync::lock;

/// Renders the merged histograms as real Prometheus histograms on the pull endpoint
/// (`<name>_bucket{le}`, `<name>_sum`, `<name>_count`), while push exporters get the counters.
pub(super) struct DirectHistograms(pub(super) Weak<Mutex<State>>);

impl crate::exposition::ExpositionSource for DirectHistograms {
    fn write_exposition(&self, page: &mut crate::exposition::Page<'_>) {
        use crate::exposition::{label_key, BoundsText, MetricType, OwnFamily};
        let Some(state) = self.0.upgrade() else { return };
        let mut state = lock(&state);
        if state.config.histograms != HistogramExport::Counters {
            return;
        }
        let now = Instant::now();
        let names: Vec<String> =
            state.families.iter().filter(|(_, e)| e.family.kind() == Kind::Histogram).map(|(n, _)| n.clone()).collect();
        for name in names {
            let Some(family) = state.families.get(&name).map(|e| e.family.clone()) else { continue };
            let Some(view) = state.view(&name, now) else { continue };
            // Named and labelled as the encoder writes an OTel histogram of pipetel's meter.
            let (unit, help) = (family.unit(), family.help());
            let mut own =
                OwnFamily::new(page.writer(), family.name(), unit, MetricType::Histogram, help).with_unit_line(unit);
            own.header();
            let keys: Vec<String> = family.label_names().iter().map(|k| label_key(k)).collect();
            let bounds = BoundsText::of(family.bounds());
            for series in view.snapshot.series() {
                let s = own.series(|labels| {
                    for (k, v) in keys.iter().zip(series.labels.iter()) {
                        labels.pair(k, v.as_ref());
                    }
                });
                let cumulative = series.bucket_counts.iter().copied();
                s.writer
                    .histogram_with(s.name, s.labels, bounds.get(), cumulative, series.count(), series.sum, |_| None);
            }
        }
    }
}
