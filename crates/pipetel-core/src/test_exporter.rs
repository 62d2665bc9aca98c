//! For unit tests that read back what the OTel SDK exported: a meter provider with an
//! in-memory exporter, and its latest export flattened into points.

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

/// A meter provider whose exports a test reads back.
pub(crate) struct TestExporter {
    pub(crate) provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

/// One exported value.
pub(crate) struct Point {
    /// The instrumentation scope's name.
    pub(crate) scope: String,
    /// The metric's name; a histogram gives two points, `<name>#count` and `<name>#sum`.
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) description: String,
    /// The attributes, sorted.
    pub(crate) attrs: Vec<(String, String)>,
    pub(crate) value: f64,
}

impl TestExporter {
    pub(crate) fn new() -> Self {
        let exporter = InMemoryMetricExporter::default();
        let provider =
            SdkMeterProvider::builder().with_reader(PeriodicReader::builder(exporter.clone()).build()).build();
        TestExporter { provider, exporter }
    }

    /// Collects now and returns the points of that export, in export order.
    pub(crate) fn collect(&self) -> Vec<Point> {
        self.exporter.reset();
        self.provider.force_flush().expect("flush");
        let batches = self.exporter.get_finished_metrics().expect("metrics");
        let mut out = Vec::new();
        let Some(rm) = batches.last() else { return out };
        for sm in rm.scope_metrics() {
            for m in sm.metrics() {
                let mut push = |suffix: &str, attrs: &mut dyn Iterator<Item = &KeyValue>, value: f64| {
                    let mut attrs: Vec<(String, String)> =
                        attrs.map(|kv| (kv.key.to_string(), kv.value.to_string())).collect();
                    attrs.sort();
                    out.push(Point {
                        scope: sm.scope().name().to_string(),
                        name: format!("{}{suffix}", m.name()),
                        unit: m.unit().to_string(),
                        description: m.description().to_string(),
                        attrs,
                        value,
                    });
                };
                match m.data() {
                    AggregatedMetrics::F64(MetricData::Sum(s)) => {
                        s.data_points().for_each(|p| push("", &mut p.attributes(), p.value()))
                    }
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        s.data_points().for_each(|p| push("", &mut p.attributes(), p.value() as f64))
                    }
                    AggregatedMetrics::I64(MetricData::Sum(s)) => {
                        s.data_points().for_each(|p| push("", &mut p.attributes(), p.value() as f64))
                    }
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        g.data_points().for_each(|p| push("", &mut p.attributes(), p.value()))
                    }
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => h.data_points().for_each(|p| {
                        push("#count", &mut p.attributes(), p.count() as f64);
                        push("#sum", &mut p.attributes(), p.sum());
                    }),
                    _ => panic!("unexpected aggregation for {}", m.name()),
                }
            }
        }
        out
    }
}
