//! Helpers shared by the fake-driver tests: collect what the SDK's in-memory exporter got,
//! flattened into points, and look values up by name, device and attributes.
// Each test binary uses its own subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::error::Error;

use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, SdkMeterProvider};
use pipetel_gpu::names;

/// One collected data point, flattened.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Point {
    pub(crate) name: String,
    pub(crate) unit: String,
    pub(crate) kind: &'static str,
    pub(crate) attrs: BTreeMap<String, String>,
    pub(crate) value: f64,
}

pub(crate) fn collect(
    exporter: &InMemoryMetricExporter,
    provider: &SdkMeterProvider,
) -> Result<Vec<Point>, Box<dyn Error>> {
    exporter.reset();
    provider.force_flush()?;
    let mut points = Vec::new();
    for rm in exporter.get_finished_metrics()? {
        for sm in rm.scope_metrics() {
            for m in sm.metrics() {
                let mut push = |kind, attrs: BTreeMap<String, String>, value: f64| {
                    points.push(Point { name: m.name().to_owned(), unit: m.unit().to_owned(), kind, attrs, value });
                };
                fn attrs<'a>(it: impl Iterator<Item = &'a opentelemetry::KeyValue>) -> BTreeMap<String, String> {
                    it.map(|kv| (kv.key.as_str().to_owned(), kv.value.as_str().into_owned())).collect()
                }
                match m.data() {
                    AggregatedMetrics::F64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            push("gauge", attrs(p.attributes()), p.value());
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Gauge(g)) => {
                        for p in g.data_points() {
                            push("gauge", attrs(p.attributes()), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::F64(MetricData::Sum(s)) => {
                        let kind = if s.is_monotonic() { "counter" } else { "updown" };
                        for p in s.data_points() {
                            push(kind, attrs(p.attributes()), p.value());
                        }
                    }
                    AggregatedMetrics::U64(MetricData::Sum(s)) => {
                        let kind = if s.is_monotonic() { "counter" } else { "updown" };
                        for p in s.data_points() {
                            push(kind, attrs(p.attributes()), p.value() as f64);
                        }
                    }
                    AggregatedMetrics::I64(MetricData::Sum(s)) => {
                        let kind = if s.is_monotonic() { "counter" } else { "updown" };
                        for p in s.data_points() {
                            push(kind, attrs(p.attributes()), p.value() as f64);
                        }
                    }
                    other => return Err(format!("unexpected data for {}: {other:?}", m.name()).into()),
                }
            }
        }
    }
    Ok(points)
}

/// Points of `name` on device `index` whose attributes include every `extra` pair.
pub(crate) fn find<'a>(points: &'a [Point], name: &str, index: u32, extra: &[(&str, &str)]) -> Vec<&'a Point> {
    let index = index.to_string();
    points
        .iter()
        .filter(|p| p.name == name)
        .filter(|p| p.attrs.get(names::GPU_INDEX) == Some(&index))
        .filter(|p| extra.iter().all(|(k, v)| p.attrs.get(*k).map(String::as_str) == Some(*v)))
        .collect()
}

/// The single value of `name` on device `index` with `extra` attributes.
pub(crate) fn value(points: &[Point], name: &str, index: u32, extra: &[(&str, &str)]) -> Result<f64, String> {
    match find(points, name, index, extra).as_slice() {
        [p] => Ok(p.value),
        found => Err(format!("{name} gpu {index} {extra:?}: expected one point, got {found:?}")),
    }
}

pub(crate) fn assert_close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() < 1e-9, "{actual} != {expected}");
}
