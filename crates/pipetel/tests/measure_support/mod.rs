//! Shared by the `measure_*` and `span_metrics_*` tests: a meter provider with an in-memory
//! exporter (and the global one the `measure_*` tests install), and lookups into what it
//! exported.

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

/// A number type of exported data, picked out of [`AggregatedMetrics`].
trait Number: Copy + Default + std::ops::Add<Output = Self> + std::iter::Sum + 'static {
    fn data(d: &AggregatedMetrics) -> Option<&MetricData<Self>>;
}

macro_rules! number {
    ($($t:ty => $variant:ident),*) => {$(
        impl Number for $t {
            fn data(d: &AggregatedMetrics) -> Option<&MetricData<Self>> {
                match d {
                    AggregatedMetrics::$variant(m) => Some(m),
                    _ => None,
                }
            }
        }
    )*};
}

number!(u64 => U64, i64 => I64, f64 => F64);

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

    /// Sum of the `T` sum `name` over points carrying `want`.
    fn sum<T: Number>(&self, name: &str, want: &[(&str, &str)]) -> T {
        let sums = self.data(name).into_iter().filter_map(T::data).filter_map(|d| match d {
            MetricData::Sum(s) => Some(s),
            _ => None,
        });
        sums.flat_map(|s| s.data_points().filter(|p| matches(&mut p.attributes(), want)).map(|p| p.value())).sum()
    }

    /// The points of the `T` histogram `name` carrying `want`.
    fn histogram_points<T: Number>(&self, name: &str, want: &[(&str, &str)]) -> Vec<&HistogramDataPoint<T>> {
        let histograms = self.data(name).into_iter().filter_map(T::data).filter_map(|d| match d {
            MetricData::Histogram(h) => Some(h),
            _ => None,
        });
        histograms.flat_map(|h| h.data_points().filter(|p| matches(&mut p.attributes(), want))).collect()
    }

    /// (count, sum) of the `T` histogram `name` over points carrying `want`.
    fn count_and_sum<T: Number>(&self, name: &str, want: &[(&str, &str)]) -> (u64, T) {
        let points = self.histogram_points::<T>(name, want);
        points.iter().fold((0, T::default()), |(count, sum), p| (count + p.count(), sum + p.sum()))
    }

    /// Sum of the u64 counter `name` over points carrying `want`.
    pub fn counter(&self, name: &str, want: &[(&str, &str)]) -> u64 {
        self.sum(name, want)
    }

    /// Sum of the i64 up-down counter `name` over points carrying `want`.
    pub fn up_down(&self, name: &str, want: &[(&str, &str)]) -> i64 {
        self.sum(name, want)
    }

    /// (count, sum) of the f64 histogram `name` over points carrying `want`.
    pub fn histogram(&self, name: &str, want: &[(&str, &str)]) -> (u64, f64) {
        self.count_and_sum(name, want)
    }

    /// The bucket bounds of the first point of the f64 histogram `name` carrying `want`.
    pub fn bounds(&self, name: &str, want: &[(&str, &str)]) -> Vec<f64> {
        self.histogram_points::<f64>(name, want).first().map(|p| p.bounds().collect()).unwrap_or_default()
    }

    /// (count, sum) of the u64 histogram `name` over points carrying `want`.
    pub fn size_histogram(&self, name: &str, want: &[(&str, &str)]) -> (u64, u64) {
        self.count_and_sum(name, want)
    }

    /// Asserts what `#[measure]` recorded for `function` after `calls` calls of which one
    /// panicked: every call counted and timed, one `panic` error, none left in flight.
    pub fn assert_one_panic(&self, function: &str, calls: u64) {
        let at = [("function", function)];
        assert_eq!(self.counter("function.calls", &at), calls);
        assert_eq!(self.counter("function.errors", &[("function", function), ("error.type", "panic")]), 1);
        assert_eq!(self.up_down("function.in_flight", &at), 0);
        assert_eq!(self.histogram("function.duration", &at).0, calls);
    }
}

/// The provider of the `measure_*` tests, installed as the global one on first use: it must be
/// in place before the first measured call (`init` would re-resolve the handles; these tests
/// install their own provider instead).
pub fn global_metrics() -> &'static Metrics {
    static METRICS: std::sync::OnceLock<Metrics> = std::sync::OnceLock::new();
    METRICS.get_or_init(|| {
        let m = Metrics::new();
        opentelemetry::global::set_meter_provider(m.provider.clone());
        m
    })
}

/// The attributes of the measured function `name`.
pub fn f(name: &'static str) -> [(&'static str, &'static str); 1] {
    [("function", name)]
}
