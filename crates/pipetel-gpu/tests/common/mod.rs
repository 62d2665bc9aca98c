//! The scaffolding every fake-library test shares: a [`Harness`] running GPU telemetry
//! against a fake vendor library and collecting what the SDK's in-memory exporter got,
//! flattened into points; lookups by name, device and attributes; the assertions both vendors
//! must pass alike; and [`capture_logs`] for the tests that read the log lines.
// Each test binary uses its own subset.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::error::Error;
use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use pipetel_gpu::test_support::{FakeKind, FakeLibrary};
use pipetel_gpu::{names, GpuConfig, GpuError, GpuMode, GpuState, GpuTelemetry};

pub(crate) type TestResult = Result<(), Box<dyn Error>>;

/// How long a test waits for the poller.
pub(crate) const WAIT: Duration = Duration::from_secs(10);

/// GPU telemetry in `on` mode against one fake library, with an in-memory exporter.
pub(crate) struct Harness<K: FakeKind> {
    pub(crate) fake: FakeLibrary<K>,
    pub(crate) exporter: InMemoryMetricExporter,
    pub(crate) provider: SdkMeterProvider,
    pub(crate) gpu: GpuTelemetry,
}

impl<K: FakeKind> Harness<K> {
    /// Writes `state`, starts GPU telemetry on the fake's platform with `config` tweaks,
    /// waits for the first poll and registers the instruments.
    pub(crate) fn start(state: &str, config: impl FnOnce(GpuConfig) -> GpuConfig) -> Result<Self, Box<dyn Error>> {
        Self::start_with(FakeLibrary::<K>::new()?, state, config)
    }

    /// [`Harness::start`] on a fake library already made (a variant of the default one).
    pub(crate) fn start_with(
        fake: FakeLibrary<K>,
        state: &str,
        config: impl FnOnce(GpuConfig) -> GpuConfig,
    ) -> Result<Self, Box<dyn Error>> {
        fake.write_state(state)?;
        let config = config(fake.gpu_config().with_mode(GpuMode::On).with_poll_interval(Duration::from_secs(60)));
        let gpu = pipetel_gpu::start(&config)?;
        match gpu.wait_started(WAIT) {
            GpuState::Running { platform, .. } => assert_eq!(platform, K::VENDOR),
            other => panic!("expected running, got {other:?}"),
        }
        let (exporter, provider) = in_memory();
        gpu.register_metrics(&provider.meter("pipetel-gpu-test"));
        Ok(Self { fake, exporter, provider, gpu })
    }

    /// Rewrites the fake's state and waits for a poll that has read it.
    pub(crate) fn update(&self, state: &str) -> TestResult {
        self.fake.write_state(state)?;
        assert!(self.gpu.refresh(WAIT), "poll did not happen");
        Ok(())
    }

    pub(crate) fn collect(&self) -> Result<Vec<Point>, Box<dyn Error>> {
        collect(&self.exporter, &self.provider)
    }

    /// [`Harness::update`] to `state`, then [`Harness::collect`].
    pub(crate) fn poll(&self, state: &str) -> Result<Vec<Point>, Box<dyn Error>> {
        self.update(state)?;
        self.collect()
    }

    /// One device described by `device` (its temperature `temperature`), made lost mid-poll
    /// by the state line `lost`: only its failed status is reported; back on its state, values
    /// return.
    pub(crate) fn assert_lost_then_back(device: &str, lost: &str, temperature: f64) -> TestResult {
        let state = format!("count=1\n{device}");
        let h = Self::start(&state, |c| c)?;
        let points = h.poll(&format!("{state}{lost}\n"))?;
        assert_close(value(&points, names::STATUS, 0, &[(names::HW_STATE, "failed")])?, 1.0);
        assert_close(value(&points, names::STATUS, 0, &[(names::HW_STATE, "ok")])?, 0.0);
        let others: Vec<_> = points.iter().filter(|p| p.name != names::STATUS).collect();
        assert!(others.is_empty(), "a lost GPU reports only its status: {others:#?}");
        let points = h.poll(&state)?;
        assert_close(value(&points, names::STATUS, 0, &[(names::HW_STATE, "ok")])?, 1.0);
        assert_close(value(&points, names::TEMPERATURE, 0, &[])?, temperature);
        Ok(())
    }

    /// `broken` makes the power read fail transiently (power 100 W in `state`): no series
    /// that poll, never a zero, and the value again the next poll; `call` was made each poll.
    pub(crate) fn assert_transient_power_error_skips_one_poll(
        &self,
        state: &str,
        broken: &str,
        call: &str,
    ) -> TestResult {
        let points = self.poll(broken)?;
        assert!(find(&points, names::POWER, 0, &[]).is_empty(), "{points:#?}");
        let points = self.poll(state)?;
        assert_close(value(&points, names::POWER, 0, &[])?, 100.0);
        assert_eq!(self.fake.call_count(0, call), 3);
        Ok(())
    }

    /// Stops telemetry; the fake was shut down with `shutdown_call` once and nothing is
    /// reported afterwards. Returns the fake for more checks.
    pub(crate) fn shutdown(self, shutdown_call: &str) -> Result<FakeLibrary<K>, Box<dyn Error>> {
        assert!(!self.collect()?.is_empty());
        let Self { fake, exporter, provider, gpu } = self;
        gpu.shutdown();
        assert_eq!(fake.call_count(-1, shutdown_call), 1);
        let points = collect(&exporter, &provider)?;
        assert!(points.is_empty(), "stopped telemetry must not report stale values: {points:#?}");
        Ok(fake)
    }
}

/// An in-memory exporter and a provider reading into it.
pub(crate) fn in_memory() -> (InMemoryMetricExporter, SdkMeterProvider) {
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder().with_reader(PeriodicReader::builder(exporter.clone()).build()).build();
    (exporter, provider)
}

/// Starts `config` in `auto` (must end off) and in `on` (must fail); returns both errors.
pub(crate) fn off_in_auto_and_error_in_on(config: &GpuConfig) -> Result<(GpuError, GpuError), Box<dyn Error>> {
    let gpu = pipetel_gpu::start(&config.clone().with_mode(GpuMode::Auto))?;
    let auto = match gpu.wait_started(WAIT) {
        GpuState::Off(e) => e,
        other => panic!("expected off, got {other:?}"),
    };
    assert!(gpu.latest().is_none());
    let on = pipetel_gpu::start(&config.clone().with_mode(GpuMode::On)).err().ok_or("on must fail")?;
    Ok((auto, on))
}

/// Identity attributes on the general utilisation series of device 0, and the same `hw.id`
/// on every series.
pub(crate) fn assert_identity(points: &[Point], id: &str, name: &str, vendor: &str) {
    let util = find(points, names::GPU_UTILIZATION, 0, &[(names::GPU_TASK, "general")]);
    assert_eq!(util.len(), 1, "{points:#?}");
    let attrs = &util[0].attrs;
    assert_eq!(attrs[names::HW_ID], id);
    assert_eq!(attrs[names::HW_NAME], name);
    assert_eq!(attrs[names::HW_VENDOR], vendor);
    assert_eq!(attrs[names::HW_TYPE], "gpu");
    assert_eq!(attrs[names::HW_MODEL], name, "the product name is the conventions' hw.model");
    // Every GPU series names the GPU; a fan is its own component whose parent is the GPU.
    for p in points {
        let get = |k: &str| p.attrs.get(k).map(String::as_str);
        if p.name == names::FAN_SPEED_RATIO {
            assert_eq!(get(names::HW_TYPE), Some("fan"), "{p:?}");
            assert_eq!(get(names::HW_PARENT), Some(id), "{p:?}");
            let fan = get(names::GPU_FAN_INDEX).unwrap_or("?");
            assert_eq!(get(names::HW_ID), Some(format!("{id}-fan-{fan}").as_str()), "{p:?}");
        } else {
            assert_eq!(get(names::HW_ID), Some(id), "{p:?}");
        }
    }
    assert!(points.iter().all(|p| p.attrs.get(names::HW_VENDOR).map(String::as_str) == Some(vendor)));
}

/// The units and kinds of the semantic conventions, the same for every vendor.
pub(crate) fn assert_units_and_kinds(points: &[Point]) {
    let unit_of = |name: &str| points.iter().find(|p| p.name == name).map(|p| (p.unit.as_str(), p.kind));
    for (name, unit, kind) in [
        (names::GPU_UTILIZATION, "1", "gauge"),
        (names::GPU_MEMORY_USAGE, "By", "gauge"),
        (names::GPU_MEMORY_LIMIT, "By", "gauge"),
        (names::GPU_MEMORY_UTILIZATION, "1", "gauge"),
        (names::POWER, "W", "gauge"),
        (names::ENERGY, "J", "counter"),
        (names::TEMPERATURE, "Cel", "gauge"),
        (names::ERRORS, "{error}", "counter"),
        (names::GPU_CLOCK, "Hz", "gauge"),
        (names::FAN_SPEED_RATIO, "1", "gauge"),
        (names::STATUS, "1", "updown"),
    ] {
        assert_eq!(unit_of(name), Some((unit, kind)), "{name}");
    }
}

/// A device reporting only memory (250 of 1000 bytes) and a 40 °C temperature: the other
/// metrics have no series.
pub(crate) fn assert_only_memory_and_temperature(points: &[Point]) -> TestResult {
    for absent in
        [names::GPU_UTILIZATION, names::POWER, names::ENERGY, names::ERRORS, names::GPU_CLOCK, names::FAN_SPEED_RATIO]
    {
        assert!(find(points, absent, 0, &[]).is_empty(), "{absent} must have no series: {points:#?}");
    }
    assert_close(value(points, names::GPU_MEMORY_UTILIZATION, 0, &[])?, 0.25);
    assert_close(value(points, names::TEMPERATURE, 0, &[])?, 40.0);
    Ok(())
}

/// A log writer that keeps what it was given.
#[derive(Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    /// Everything written so far.
    pub(crate) fn text(&self) -> Result<String, Box<dyn Error>> {
        Ok(String::from_utf8(self.0.lock().unwrap_or_else(PoisonError::into_inner).clone())?)
    }
}

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Installs a process-wide subscriber writing info lines and above to the returned capture.
/// Process-wide because the poller thread writes the lines: a test using it is its own binary.
pub(crate) fn capture_logs() -> Result<Capture, Box<dyn Error>> {
    let capture = Capture::default();
    let writer = capture.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init()
        .map_err(|e| e.to_string())?;
    Ok(capture)
}

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

/// One expected value: the family, the extra attributes of its series, the value.
pub(crate) type Expected<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

/// Asserts that device `index` reports each expected value (to 1e-9), in order.
pub(crate) fn assert_values(points: &[Point], index: u32, expected: &[Expected<'_>]) -> Result<(), String> {
    for &(name, extra, want) in expected {
        let got = value(points, name, index, extra)?;
        assert!((got - want).abs() < 1e-9, "{name} gpu {index} {extra:?}: {got} != {want}");
    }
    Ok(())
}
