//! Shared by the `measure_*` and `span_metrics_*` tests: a meter provider with an in-memory
//! exporter, and lookups into what it exported.

#![allow(dead_code, unreachable_pub)]

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, HistogramDataPoint, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// A provider whose metrics tests read back.
pub struct Metrics {
    pub exporter: InMemoryMetricExporter,
    pub provider: SdkMeterProvider,
}

impl Metrics {
    /// A provider with an in-memory exporter (cumulative temporality).
    pub fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let reader = PeriodicReader::builder(exporter.clone()).build();
        let provider = SdkMeterProvider::builder().with_reader(reader).build();
        Metrics { exporter, provider }
    }

    /// Flushes and returns the latest cumulative export (serialised: tests run in parallel and
    /// share the exporter).
    pub fn collect(&self) -> Snapshot {
        static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one_at_a_time = LOCK.lock().unwrap_or_else(|e| e.into_inner());
        self.provider.force_flush().expect("flush");
        let mut all = self.exporter.get_finished_metrics().expect("metrics");
        self.exporter.reset();
        Snapshot(all.pop())
    }
}

/// One export.
pub struct Snapshot(Option<ResourceMetrics>);

fn matches(attrs: &mut dyn Iterator<Item = &KeyValue>, want: &[(&str, &str)]) -> bool {
    let attrs: Vec<(String, String)> = attrs.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect();
    want.iter().all(|(k, v)| attrs.iter().any(|(ak, av)| ak == k && av == v))
}

impl Snapshot {
    fn data(&self, name: &str) -> Vec<&AggregatedMetrics> {
        let Some(rm) = &self.0 else { return Vec::new() };
        rm.scope_metrics().flat_map(|s| s.metrics()).filter(|m| m.name() == name).map(|m| m.data()).collect()
    }

    /// The unit of metric `name`.
    pub fn unit(&self, name: &str) -> Option<String> {
        let rm = self.0.as_ref()?;
        rm.scope_metrics().flat_map(|s| s.metrics()).find(|m| m.name() == name).map(|m| m.unit().to_string())
    }

    /// Sum of the u64 counter `name` over points carrying `want`.
    pub fn counter(&self, name: &str, want: &[(&str, &str)]) -> u64 {
        self.data(name)
            .into_iter()
            .map(|d| match d {
                AggregatedMetrics::U64(MetricData::Sum(s)) => {
                    s.data_points().filter(|p| matches(&mut p.attributes(), want)).map(|p| p.value()).sum()
                }
                _ => 0,
            })
            .sum()
    }

    /// Sum of the i64 up-down counter `name` over points carrying `want`.
    pub fn up_down(&self, name: &str, want: &[(&str, &str)]) -> i64 {
        self.data(name)
            .into_iter()
            .map(|d| match d {
                AggregatedMetrics::I64(MetricData::Sum(s)) => {
                    s.data_points().filter(|p| matches(&mut p.attributes(), want)).map(|p| p.value()).sum()
                }
                _ => 0,
            })
            .sum()
    }

    /// (count, sum) of the f64 histogram `name` over points carrying `want`.
    pub fn histogram(&self, name: &str, want: &[(&str, &str)]) -> (u64, f64) {
        let mut out = (0, 0.0);
        for d in self.data(name) {
            if let AggregatedMetrics::F64(MetricData::Histogram(h)) = d {
                for p in h.data_points().filter(|p| matches(&mut p.attributes(), want)) {
                    out.0 += p.count();
                    out.1 += p.sum();
                }
            }
        }
        out
    }

    /// The bucket bounds of the first point of the f64 histogram `name` carrying `want`.
    pub fn bounds(&self, name: &str, want: &[(&str, &str)]) -> Vec<f64> {
        for d in self.data(name) {
            if let AggregatedMetrics::F64(MetricData::Histogram(h)) = d {
                let points: Vec<&HistogramDataPoint<f64>> =
                    h.data_points().filter(|p| matches(&mut p.attributes(), want)).collect();
                if let Some(p) = points.first() {
                    return p.bounds().collect();
                }
            }
        }
        Vec::new()
    }

    /// (count, sum) of the u64 histogram `name` over points carrying `want`.
    pub fn size_histogram(&self, name: &str, want: &[(&str, &str)]) -> (u64, u64) {
        let mut out = (0, 0);
        for d in self.data(name) {
            if let AggregatedMetrics::U64(MetricData::Histogram(h)) = d {
                for p in h.data_points().filter(|p| matches(&mut p.attributes(), want)) {
                    out.0 += p.count();
                    out.1 += p.sum();
                }
            }
        }
        out
    }
}
