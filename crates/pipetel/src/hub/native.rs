//! The merged histograms on the pull endpoint.

use std::sync::{Mutex, Weak};
use std::time::Instant;

use pipetel_recorders::Kind;

use super::config::HistogramExport;
use super::state::State;
use crate::sync::lock;

/// Renders the merged histograms as real Prometheus histograms on the pull endpoint
/// (`<name>_bucket{le}`, `<name>_sum`, `<name>_count`), while push exporters get the counters.
pub(super) struct NativeHistograms(pub(super) Weak<Mutex<State>>);

impl crate::export::ExpositionSource for NativeHistograms {
    fn write_exposition(&self, out: &mut String, format: crate::exposition::Format) {
        use crate::exposition::{label_key, prometheus_name, scope_labels, BoundsText, LabelBlock, Writer};
        let Some(state) = self.0.upgrade() else { return };
        let mut state = lock(&state);
        if state.config.histograms != HistogramExport::Counters {
            return;
        }
        let now = Instant::now();
        let names: Vec<String> =
            state.families.iter().filter(|(_, e)| e.family.kind() == Kind::Histogram).map(|(n, _)| n.clone()).collect();
        let mut w = Writer::new(out, format);
        let mut labels = String::new();
        for name in names {
            let Some(family) = state.families.get(&name).map(|e| e.family.clone()) else { continue };
            let Some(view) = state.view(&name, now) else { continue };
            // Named and labelled as the encoder writes an OTel histogram of pipetel's meter.
            let prom = prometheus_name(family.name(), family.unit(), false, false);
            w.header(&prom, "histogram", family.help(), family.unit());
            let keys: Vec<String> = family.label_names().iter().map(|k| label_key(k)).collect();
            let bounds = BoundsText::of(family.bounds());
            for series in view.snapshot.series() {
                labels.clear();
                let mut block = LabelBlock::new(&mut labels);
                for (k, v) in keys.iter().zip(series.labels.iter()) {
                    block.pair(k, v.as_ref());
                }
                block.raw(&scope_labels(None));
                let cumulative = series.bucket_counts.iter().copied();
                w.histogram(&prom, &labels, bounds.get(), cumulative, series.count(), series.sum);
            }
        }
    }
}
