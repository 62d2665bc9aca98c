//! Bindings of `pipetel::service` (TeleFuser's `ServiceMetrics`), `pipetel::stage_metrics`
//! (TeleFuser's `enable_stage_metrics` / `StageMetricContext`) and `pipetel::gpu_snapshot`
//! (TeleFuser's `collect_gpu_metrics`), for `pipetel.telefuser`.

use std::sync::Mutex;
use std::time::Duration;

use pipetel::registry::{HistogramValue, Opts};
use pipetel::service::ServiceMetricsConfig;
use pipetel::stage_metrics::{self, StageMetrics};
use pipetel::ServiceMetrics;
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args::{arg, named};
use crate::errors::{exiting_exception, guard};
use crate::registry::{
    invalid_value, registration_error, registry_error, PyCounter, PyGauge, PyHistogram, SeriesHandle,
};

/// Seconds as a `Duration`: finite and non-negative, else `InvalidValueError` naming `what`.
fn seconds(value: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| invalid_value(format!("{what} must be a finite, non-negative number of seconds, got {value}")))
}

/// A count: an int >= 0, else `InvalidValueError` naming `what`.
fn count(value: i64, what: &str) -> PyResult<u64> {
    u64::try_from(value).map_err(|_| invalid_value(format!("{what} must be >= 0, got {value}")))
}

/// The task and queue metrics of a service (TeleFuser's `ServiceMetrics`).
///
/// Made without `config`, it follows the settings `pipetel.init` resolved (prefix
/// `service.prefix`, buckets `metrics.histogram_buckets`, switch `service.queue_metrics`),
/// resolved at each call; with a `MetricsConfig`, from its `namespace`, `histogram_buckets` and
/// `enable_queue_metrics`.
#[pyclass(module = "pipetel.telefuser", name = "ServiceMetrics", frozen, subclass)]
pub struct PyServiceMetrics {
    fixed: Option<ServiceMetrics>,
}

impl PyServiceMetrics {
    fn metrics(&self) -> ServiceMetrics {
        self.fixed.clone().unwrap_or_else(pipetel::service_metrics)
    }

    fn read_config(config: &Bound<'_, PyAny>) -> PyResult<ServiceMetricsConfig> {
        let mut out = ServiceMetricsConfig::default();
        let attr = |name: &str| {
            config.getattr(name).map_err(|_| {
                PyTypeError::new_err(format!("config must be a MetricsConfig (it has no attribute {name:?})"))
            })
        };
        out.prefix = named(&attr("namespace")?, "config.namespace")?;
        out.queue_metrics = named(&attr("enable_queue_metrics")?, "config.enable_queue_metrics")?;
        out.http_metrics = named(&attr("enable_http_metrics")?, "config.enable_http_metrics")?;
        let buckets: Option<Vec<f64>> = named(&attr("histogram_buckets")?, "config.histogram_buckets")?;
        if let Some(mut buckets) = buckets {
            // The `+Inf` bucket is implied; anything else Rust checks (finite, strictly increasing).
            if buckets.last() == Some(&f64::INFINITY) {
                buckets.pop();
            }
            out.histogram_buckets = buckets;
        }
        Ok(out)
    }
}

/// The options a service metric is registered with: none for a counter or a gauge.
fn no_options(_: &ServiceMetrics) -> Option<Opts> {
    Some(Opts::new())
}

/// A service histogram's options: the buckets it has (None when the metrics are disabled).
fn buckets_of(value: Option<HistogramValue>) -> Option<Opts> {
    value.map(|v| Opts::new().buckets(v.buckets.iter().map(|(b, _)| *b).collect::<Vec<f64>>()))
}

impl PyServiceMetrics {
    /// The handle of the service metric `name` (registered again with the options `opts` gives,
    /// which finds it), or None when the metrics are disabled.
    fn handle<H: SeriesHandle>(
        &self,
        name: &str,
        opts: impl FnOnce(&ServiceMetrics) -> Option<Opts>,
    ) -> PyResult<Option<H>> {
        let metrics = self.metrics();
        let (Some(registry), Some(opts)) = (metrics.registry(), opts(&metrics)) else { return Ok(None) };
        let series = (H::ONE)(registry, name, "", opts).map_err(registry_error)?;
        Ok(Some(H::of(series, "", Vec::new())))
    }
}

/// The `#[pymethods]` block of `ServiceMetrics` (a class has one): the methods given, one
/// method per record listed, `fn record(seconds);`, calling the service metrics' method of that
/// name (with the argument `seconds` as a duration, when there is one), then one getter per
/// metric listed, `getter: Handle = "name", opts;`, returning [`PyServiceMetrics::handle`].
macro_rules! service_methods {
    (
        { $($methods:tt)* }
        records { $($(#[$record_doc:meta])* fn $record:ident($($seconds:ident)?);)* }
        metrics { $($(#[$doc:meta])* $getter:ident: $handle:ident = $name:literal, $opts:expr;)* }
    ) => {
        #[pymethods]
        impl PyServiceMetrics {
            $($methods)*

            $(
                $(#[$record_doc])*
                fn $record(&self, $(#[pyo3(from_py_with = arg::$seconds)] $seconds: f64)?) -> PyResult<()> {
                    self.metrics().$record($(seconds($seconds, stringify!($seconds))?)?);
                    Ok(())
                }
            )*

            $(
                $(#[$doc])*
                #[getter]
                fn $getter(&self) -> PyResult<Option<$handle>> {
                    self.handle($name, $opts)
                }
            )*
        }
    };
}

service_methods! {
{
    /// `registry` is accepted for TeleFuser's signature and not used: the service metrics live
    /// in a registry of their own, named by the prefix.
    #[new]
    #[pyo3(signature = (registry = None, config = None))]
    fn new(registry: Option<&Bound<'_, PyAny>>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let _ = registry;
        let Some(config) = config.filter(|c| !c.is_none()) else { return Ok(PyServiceMetrics { fixed: None }) };
        let config = Self::read_config(config)?;
        guard(|| {
            let metrics = ServiceMetrics::from_config(&config)
                .map_err(|e| registration_error(e, "config.namespace", "config.histogram_buckets"))?;
            Ok(PyServiceMetrics { fixed: Some(metrics) })
        })
    }

    /// Counts a failed task; with `duration` (seconds) also records it.
    #[pyo3(signature = (duration = None))]
    fn record_task_failed(&self, #[pyo3(from_py_with = arg::duration)] duration: Option<f64>) -> PyResult<()> {
        match duration {
            None => self.metrics().record_task_failed(),
            Some(d) => {
                let d = seconds(d, "duration")?;
                self.metrics().record_task_failed_after(d);
            }
        }
        Ok(())
    }

    /// Sets the queue gauges.
    fn update_queue_metrics(
        &self,
        #[pyo3(from_py_with = arg::size)] size: i64,
        #[pyo3(from_py_with = arg::pending)] pending: i64,
        #[pyo3(from_py_with = arg::processing)] processing: i64,
    ) -> PyResult<()> {
        let (size, pending, processing) =
            (count(size, "size")?, count(pending, "pending")?, count(processing, "processing")?);
        let as_usize = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        self.metrics().update_queue_metrics(as_usize(size), as_usize(pending), as_usize(processing));
        Ok(())
    }

    /// Whether the metrics record (false with `service.queue_metrics` / `enable_queue_metrics` off).
    #[getter]
    fn enabled(&self) -> bool {
        self.metrics().is_enabled()
    }

    /// The name prefix (`namespace`) of the metrics, None when disabled.
    #[getter]
    fn prefix(&self) -> Option<String> {
        self.metrics().registry().map(|r| r.prefix().to_owned())
    }

    /// `(created, completed, failed, cancelled)` so far.
    fn task_counts(&self) -> (u64, u64, u64, u64) {
        self.metrics().task_counts()
    }

    /// The exposition of the service metrics' registry ("" when disabled); bucket bounds as
    /// prometheus_client writes them (`le="1.0"`).
    fn get_prometheus_format(&self, py: Python<'_>) -> String {
        let metrics = self.metrics();
        py.detach(move || {
            metrics.registry().map(|r| crate::registry::prometheus_client_bounds(r.prometheus_text())).unwrap_or_default()
        })
    }

    /// The latest sample of the GPU poller `pipetel.init` started, one dict per device with
    /// TeleFuser's keys (`device_id`, `name`, `memory_used`, `memory_total`, `utilization` in
    /// percent, `temperature`) plus `uuid` and `power_watts`; [] when there is none (no GPU,
    /// GPU telemetry off, before the first poll, or no `init`). The poller itself exports the
    /// GPU gauges; this only reads its latest sample.
    fn collect_gpu_metrics<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        gpu_devices(py)
    }

    /// Whether the GPU poller has a sample.
    #[getter]
    fn gpu_available(&self) -> bool {
        pipetel::gpu_snapshot().is_some_and(|s| !s.devices.is_empty())
    }
}
records {
    /// Counts a task created.
    fn record_task_created();
    /// Counts a completed task and records its duration (seconds).
    fn record_task_completed(duration);
    /// Counts a cancelled task.
    fn record_task_cancelled();
    /// Records a queue wait (seconds).
    fn record_queue_wait(wait_time);
}
metrics {
    /// The counter of tasks created (None when disabled).
    tasks_created: PyCounter = "tasks_created", no_options;
    /// The counter of tasks completed.
    tasks_completed: PyCounter = "tasks_completed", no_options;
    /// The counter of tasks failed.
    tasks_failed: PyCounter = "tasks_failed", no_options;
    /// The counter of tasks cancelled.
    tasks_cancelled: PyCounter = "tasks_cancelled", no_options;
    /// The queue size gauge.
    queue_size: PyGauge = "queue_size", no_options;
    /// The pending tasks gauge.
    queue_pending: PyGauge = "queue_pending", no_options;
    /// The tasks-in-progress gauge.
    queue_processing: PyGauge = "queue_processing", no_options;
    /// The task duration histogram.
    task_duration: PyHistogram = "task_duration_seconds", |m| buckets_of(m.task_duration());
    /// The queue wait histogram.
    task_queue_wait: PyHistogram = "task_queue_wait_seconds", |m| buckets_of(m.task_queue_wait());
}
}

/// The GPU poller's latest sample as TeleFuser's per-device dicts.
fn gpu_devices(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    let Some(sample) = pipetel::gpu_snapshot() else { return Ok(Vec::new()) };
    let mut out = Vec::with_capacity(sample.devices.len());
    for device in &sample.devices {
        let d = PyDict::new(py);
        d.set_item("device_id", device.info.index)?;
        d.set_item("uuid", &device.info.id)?;
        d.set_item("name", &device.info.name)?;
        d.set_item("memory_used", device.memory_used_bytes)?;
        d.set_item("memory_total", device.memory_total_bytes)?;
        d.set_item("utilization", device.utilization.map(|u| u * 100.0))?;
        d.set_item("temperature", device.temperature_celsius)?;
        d.set_item("power_watts", device.power_watts)?;
        out.push(d);
    }
    Ok(out)
}

/// The GPU poller's latest sample (see `ServiceMetrics.collect_gpu_metrics`).
#[pyfunction]
fn gpu_snapshot(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyDict>>> {
    gpu_devices(py)
}

/// A view of one stage's metrics for TeleFuser code: the class (documented as given) holding
/// the stage's `StageMetrics` and the fields listed, and its `#[pymethods]` block: the methods
/// given and, for a `number` view, `int()` and a repr of its `value`.
macro_rules! stage_view {
    (
        $(#[$doc:meta])* $ty:ident, $py_name:literal, { $($field:ident: $field_ty:ty),* }
        $(number $number:ty,)? { $($methods:tt)* }
    ) => {
        $(#[$doc])*
        #[pyclass(module = "pipetel.telefuser", name = $py_name, frozen)]
        pub struct $ty {
            stage: StageMetrics,
            $($field: $field_ty,)*
        }

        #[pymethods]
        impl $ty {
            $($methods)*
            $(
                fn __int__(&self) -> $number {
                    self.value()
                }
                fn __repr__(&self) -> String {
                    format!(concat!($py_name, "(value={})"), self.value())
                }
            )?
        }
    };
}

stage_view!(
    /// A count of a stage's executions or errors (read-only: the context records).
    PyStageCount, "StageCount", { errors: bool } number u64, {
    /// The count so far.
    #[getter]
    fn value(&self) -> u64 {
        if self.errors {
            self.stage.errors().value()
        } else {
            self.stage.total().value()
        }
    }
    /// Adds `amount` (default 1) by hand, for code that records executions itself
    /// (TeleFuser's `context.total.inc()`); an int >= 0.
    #[pyo3(signature = (amount = 1))]
    fn inc(&self, #[pyo3(from_py_with = arg::amount)] amount: i64) -> PyResult<()> {
        let n = count(amount, "amount")?;
        if self.errors {
            self.stage.errors().inc_by(n);
        } else {
            self.stage.total().inc_by(n);
        }
        Ok(())
    }
});

stage_view!(
    /// A stage's executions in flight.
    PyStageActive, "StageActive", {} number i64, {
    /// Executions in flight now.
    #[getter]
    fn value(&self) -> i64 {
        self.stage.active().value()
    }
    /// One more execution in flight, by hand (TeleFuser's `context.active.inc()`).
    #[pyo3(signature = (amount = 1))]
    fn inc(&self, #[pyo3(from_py_with = arg::amount)] amount: i64) {
        self.stage.active().add(amount);
    }
    /// One execution fewer in flight, by hand.
    #[pyo3(signature = (amount = 1))]
    fn dec(&self, #[pyo3(from_py_with = arg::amount)] amount: i64) {
        self.stage.active().add(amount.saturating_neg());
    }
});

stage_view!(
    /// A stage's recorded durations: count, sum and average, in seconds.
    PyStageDuration, "StageDuration", {} {
    /// Durations recorded.
    #[getter]
    fn count(&self) -> u64 {
        self.stage.duration().count()
    }
    /// Their sum, seconds.
    #[getter]
    fn sum(&self) -> f64 {
        self.stage.duration().sum().as_secs_f64()
    }
    /// Their mean, seconds; 0.0 before the first (as TeleFuser's histogram).
    #[getter]
    fn average(&self) -> f64 {
        self.stage.duration().average().map_or(0.0, |d| d.as_secs_f64())
    }
    /// Records one duration (seconds) by hand, without counting an execution (TeleFuser's
    /// `context.duration.observe(0.5)`).
    fn observe(&self, #[pyo3(from_py_with = arg::value)] value: f64) -> PyResult<()> {
        let d = seconds(value, "value, the duration,")?;
        self.stage.duration().observe(d);
        Ok(())
    }
    fn __repr__(&self) -> String {
        format!("StageDuration(count={}, sum={})", self.count(), self.sum())
    }
});

/// The metrics of one stage (TeleFuser's `StageMetricContext`), on the Rust stage context.
#[pyclass(module = "pipetel.telefuser", name = "StageMetricContext", frozen)]
pub struct PyStageMetricContext {
    stage: StageMetrics,
}

#[pymethods]
impl PyStageMetricContext {
    /// Turns metrics on for the stage `stage_name` and returns its context (the same counts for
    /// the same name).
    #[new]
    fn new(#[pyo3(from_py_with = arg::stage_name)] stage_name: String) -> PyResult<Self> {
        if stage_name.is_empty() {
            return Err(PyValueError::new_err("stage_name: the stage name is empty"));
        }
        guard(|| Ok(PyStageMetricContext { stage: stage_metrics::enable_stage_metrics(&stage_name) }))
    }

    /// The stage's name.
    #[getter]
    fn stage_name(&self) -> &str {
        self.stage.name()
    }
    /// Whether the stage records (false after `disable_stage_metrics`).
    #[getter]
    fn enabled(&self) -> bool {
        self.stage.is_enabled()
    }
    /// Executions so far.
    #[getter]
    fn total(&self) -> PyStageCount {
        PyStageCount { stage: self.stage.clone(), errors: false }
    }
    /// Failed executions so far.
    #[getter]
    fn errors(&self) -> PyStageCount {
        PyStageCount { stage: self.stage.clone(), errors: true }
    }
    /// Executions in flight.
    #[getter]
    fn active(&self) -> PyStageActive {
        PyStageActive { stage: self.stage.clone() }
    }
    /// Durations recorded.
    #[getter]
    fn duration(&self) -> PyStageDuration {
        PyStageDuration { stage: self.stage.clone() }
    }

    /// Records one execution measured elsewhere: `duration` seconds, whether it succeeded,
    /// and its input and output sizes in bytes when known.
    #[pyo3(signature = (duration, success = true, input_size = None, output_size = None))]
    fn record_execution(
        &self,
        #[pyo3(from_py_with = arg::duration)] duration: f64,
        #[pyo3(from_py_with = arg::success)] success: bool,
        #[pyo3(from_py_with = arg::input_size)] input_size: Option<i64>,
        #[pyo3(from_py_with = arg::output_size)] output_size: Option<i64>,
    ) -> PyResult<()> {
        let duration = seconds(duration, "duration")?;
        let input = input_size.map(|n| count(n, "input_size")).transpose()?;
        let output = output_size.map(|n| count(n, "output_size")).transpose()?;
        guard(|| {
            self.stage.record_execution(duration, success, input, output);
            Ok(())
        })
    }

    /// Starts one execution: counted now (total and active); `succeed()` or `fail()` ends it
    /// and records its duration. Also a context manager: an exception inside ends it as failed.
    fn start(&self) -> PyStageRun {
        PyStageRun { run: Mutex::new(Some(self.stage.start())) }
    }

    fn __repr__(&self) -> String {
        format!(
            "StageMetricContext(stage_name={:?}, total={}, errors={}, active={})",
            self.stage.name(),
            self.stage.total().value(),
            self.stage.errors().value(),
            self.stage.active().value()
        )
    }
}

/// One execution of a stage, from `StageMetricContext.start()`.
#[pyclass(module = "pipetel.telefuser", name = "StageRun", frozen)]
pub struct PyStageRun {
    run: Mutex<Option<pipetel::stage_metrics::StageRun>>,
}

impl PyStageRun {
    fn take(&self) -> PyResult<pipetel::stage_metrics::StageRun> {
        self.run
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this stage execution has already ended"))
    }

    fn with(&self, f: impl FnOnce(&pipetel::stage_metrics::StageRun)) -> PyResult<()> {
        let run = self.run.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let run = run.as_ref().ok_or_else(|| PyRuntimeError::new_err("this stage execution has already ended"))?;
        f(run);
        Ok(())
    }
}

#[pymethods]
impl PyStageRun {
    /// Records the size of the input, in bytes.
    fn input_size(&self, #[pyo3(from_py_with = arg::nbytes)] nbytes: i64) -> PyResult<()> {
        let n = count(nbytes, "nbytes")?;
        self.with(|r| r.input_size(n))
    }
    /// Records the size of the output, in bytes.
    fn output_size(&self, #[pyo3(from_py_with = arg::nbytes)] nbytes: i64) -> PyResult<()> {
        let n = count(nbytes, "nbytes")?;
        self.with(|r| r.output_size(n))
    }
    /// Ends the execution as a success.
    fn succeed(&self) -> PyResult<()> {
        let run = self.take()?;
        guard(|| {
            run.succeed();
            Ok(())
        })
    }
    /// Ends the execution as a failure.
    fn fail(&self) -> PyResult<()> {
        let run = self.take()?;
        guard(|| {
            run.fail();
            Ok(())
        })
    }
    /// Whether the execution is still in flight.
    #[getter]
    fn active(&self) -> bool {
        self.run.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }
    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }
    #[pyo3(signature = (*exc_info))]
    fn __exit__(&self, exc_info: &Bound<'_, PyTuple>) -> PyResult<bool> {
        if self.active() {
            if exiting_exception(exc_info).is_some() {
                self.fail()?;
            } else {
                self.succeed()?;
            }
        }
        Ok(false)
    }
}

/// Turns metrics on for `stage_name` and returns its context.
#[pyfunction]
fn enable_stage_metrics_by_name(
    #[pyo3(from_py_with = arg::stage_name)] stage_name: String,
) -> PyResult<PyStageMetricContext> {
    PyStageMetricContext::new(stage_name)
}

/// Turns metrics off for `stage_name` (nothing for a stage never enabled).
#[pyfunction]
fn disable_stage_metrics_by_name(#[pyo3(from_py_with = arg::stage_name)] stage_name: String) {
    stage_metrics::disable_stage_metrics(&stage_name);
}

/// The names of the stages whose metrics are on, sorted.
#[pyfunction]
fn enabled_stages() -> Vec<String> {
    stage_metrics::enabled_stages()
}

/// Adds the classes and functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("_TfServiceMetrics", m.py().get_type::<PyServiceMetrics>())?;
    m.add("_TfStageMetricContext", m.py().get_type::<PyStageMetricContext>())?;
    m.add("_TfStageCount", m.py().get_type::<PyStageCount>())?;
    m.add("_TfStageActive", m.py().get_type::<PyStageActive>())?;
    m.add("_TfStageDuration", m.py().get_type::<PyStageDuration>())?;
    m.add("_TfStageRun", m.py().get_type::<PyStageRun>())?;
    m.add("_tf_gpu_snapshot", wrap_pyfunction!(gpu_snapshot, m)?)?;
    m.add("_tf_enable_stage", wrap_pyfunction!(enable_stage_metrics_by_name, m)?)?;
    m.add("_tf_disable_stage", wrap_pyfunction!(disable_stage_metrics_by_name, m)?)?;
    m.add("_tf_enabled_stages", wrap_pyfunction!(enabled_stages, m)?)?;
    Ok(())
}
