//! Service metrics for inference and task-queue services: tasks created / completed / failed /
//! cancelled, task duration and queue wait, queue size / pending / processing.
//!
//! ```
//! let service = pipetel_core::service_metrics();  // prefix, buckets and switch from the configuration
//! let task = service.task_created();      // counted; the queue wait starts
//! task.started();                         // queue wait recorded; the duration starts
//! task.completed();                       // duration recorded (or `failed()` / `cancelled()`)
//! service.update_queue_metrics(8, 5, 3);  // size, pending, processing
//!
//! // Or, as TeleFuser's `ServiceMetrics`, with durations measured elsewhere:
//! service.record_task_created();
//! service.record_task_completed(std::time::Duration::from_millis(42));
//! ```
//!
//! # Where the configuration applies
//! The settings in effect are those `init` resolved (code, then `PIPETEL_*` variables, then the
//! file); before `init`, the file and the variables, read once.
//!
//! | setting | [`service_metrics`] | [`ServiceMetrics::new`] / [`ServiceMetrics::with_labels`] | [`ServiceMetrics::from_config`] |
//! |---|---|---|---|
//! | `PIPETEL_QUEUE_METRICS=false` | records nothing | records nothing | records nothing |
//! | `PIPETEL_HISTOGRAM_BUCKETS` | applies | applies | the config's |
//! | `PIPETEL_SERVICE_PREFIX` | applies | the `prefix` argument wins (code beats configuration) | the config's |
//!
//! The settings are read when the handle is made: make handles after `init` (a handle made
//! before it keeps the settings read then; [`service_metrics`] follows `init`).
//!
//! | OTel name (prefix `service`) | unit | Prometheus name |
//! |---|---|---|
//! | `service.tasks.created` | `{task}` | `service_tasks_created_total` |
//! | `service.tasks.completed` | `{task}` | `service_tasks_completed_total` |
//! | `service.tasks.failed` | `{task}` | `service_tasks_failed_total` |
//! | `service.tasks.cancelled` | `{task}` | `service_tasks_cancelled_total` |
//! | `service.task.duration` | `s` | `service_task_duration_seconds` (histogram) |
//! | `service.task.queue.wait` | `s` | `service_task_queue_wait_seconds` (histogram) |
//! | `service.queue.size` | `{task}` | `service_queue_size` |
//! | `service.queue.pending` | `{task}` | `service_queue_pending` |
//! | `service.queue.processing` | `{task}` | `service_queue_processing` |
//!
//! The metrics live in a [`Registry`] with the prefix as its name prefix (one per prefix and
//! process, shared by every `ServiceMetrics` of that prefix), so they reach every exporter and
//! `registry().prometheus_text()` shows them alone.

use crate::families::{service as fam, Family};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::registry::{Counter, Gauge, Histogram, Opts, Registry, RegistryError};
// The settings' one documented path is `settings` (`pipetel::config` in pipetel); these names
// stay for the programs written before the split.
#[doc(hidden)]
pub use crate::settings::{
    parse_buckets, ServiceMetricsConfig, DEFAULT_SERVICE_PREFIX as DEFAULT_PREFIX, PIPETEL_HISTOGRAM_BUCKETS,
    PIPETEL_HTTP_METRICS, PIPETEL_QUEUE_METRICS, PIPETEL_SERVICE_PREFIX, SERVICE_ENV_VARS as ENV_VARS,
};

struct Inner {
    registry: Registry,
    created: Counter,
    completed: Counter,
    failed: Counter,
    cancelled: Counter,
    duration: Histogram,
    queue_wait: Histogram,
    queue_size: Gauge,
    queue_pending: Gauge,
    queue_processing: Gauge,
}

/// The task and queue metrics of a service. Cheap to clone.
#[derive(Clone)]
pub struct ServiceMetrics {
    inner: Option<Arc<Inner>>,
}

impl std::fmt::Debug for ServiceMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceMetrics").field("enabled", &self.inner.is_some()).finish()
    }
}

/// One registry per prefix and process, so several `ServiceMetrics` of one prefix (say, one per
/// model, told apart by labels) share their families.
fn registry_for(prefix: &str) -> Result<Registry, RegistryError> {
    static REGISTRIES: Mutex<Option<HashMap<String, Registry>>> = Mutex::new(None);
    let mut map = crate::sync::lock(&REGISTRIES);
    let map = map.get_or_insert_with(HashMap::new);
    if let Some(r) = map.get(prefix) {
        return Ok(r.clone());
    }
    let r = Registry::new(prefix)?;
    map.insert(prefix.to_string(), r.clone());
    Ok(r)
}

/// The process-wide registry of `prefix`: the one the service metrics of that prefix live in,
/// for code that registers its own metrics beside them (TeleFuser's global registry holds its
/// service metrics). Registries share the OTel meter, so one registry per prefix also keeps two
/// metrics of one name from being exported twice.
///
/// # Errors
/// [`RegistryError::InvalidName`] when the prefix is not snake_case.
pub fn registry_of(prefix: &str) -> Result<Registry, RegistryError> {
    registry_for(prefix)
}

impl ServiceMetrics {
    /// The service metrics under `prefix` (`service` gives `service_tasks_created_total`, ...),
    /// with the configured histogram buckets (`PIPETEL_HISTOGRAM_BUCKETS`); a handle that records
    /// nothing when `PIPETEL_QUEUE_METRICS=false`. The prefix is the argument's:
    /// [`service_metrics`] takes `PIPETEL_SERVICE_PREFIX`'s.
    ///
    /// # Errors
    /// [`RegistryError::InvalidName`] for a prefix that is empty or not snake_case.
    pub fn new(prefix: &str) -> Result<Self, RegistryError> {
        Self::with_labels(prefix, &[] as &[(&str, &str)])
    }

    /// As [`ServiceMetrics::new`], with constant labels on every series (e.g. `model`). Every
    /// `ServiceMetrics` of one prefix must use the same label names.
    ///
    /// # Errors
    /// As [`ServiceMetrics::new`]; [`RegistryError::InvalidLabelName`] for an invalid label
    /// name; [`RegistryError::Conflict`] when the prefix is in use with other label names.
    pub fn with_labels(prefix: &str, labels: &[(&str, &str)]) -> Result<Self, RegistryError> {
        let config = crate::global::service_config();
        if !config.queue_metrics {
            // Still refuse what would be refused with the metrics on.
            if prefix.is_empty() {
                return Err(RegistryError::InvalidName { name: String::new(), reason: "the prefix is empty" });
            }
            Registry::new(prefix)?;
            return Ok(Self::disabled());
        }
        Self::build(prefix, labels, &config.histogram_buckets)
    }

    /// From a configuration: a handle that records nothing when `queue_metrics` is off.
    ///
    /// # Errors
    /// As [`ServiceMetrics::new`].
    pub fn from_config(config: &ServiceMetricsConfig) -> Result<Self, RegistryError> {
        if !config.queue_metrics {
            return Ok(Self::disabled());
        }
        Self::build(&config.prefix, &[] as &[(&str, &str)], &config.histogram_buckets)
    }

    /// A handle that records nothing.
    pub fn disabled() -> Self {
        ServiceMetrics { inner: None }
    }

    /// Whether the handle records (false when built with the queue metrics off).
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    fn build(prefix: &str, labels: &[(&str, &str)], buckets: &[f64]) -> Result<Self, RegistryError> {
        if prefix.is_empty() {
            return Err(RegistryError::InvalidName { name: String::new(), reason: "the prefix is empty" });
        }
        let registry = registry_for(prefix)?;
        let opts = |f: &Family| Opts::new().otel(format!("{prefix}.{}", f.name), f.unit);
        let counter = |f: &Family| registry.series(&f.registry_name(), f.description, labels, opts(f)).map(Counter);
        let gauge = |f: &Family| registry.series(&f.registry_name(), f.description, labels, opts(f)).map(Gauge);
        let histogram = |f: &Family| {
            registry.series(&f.registry_name(), f.description, labels, opts(f).buckets(buckets.to_vec())).map(Histogram)
        };
        let inner = Inner {
            created: counter(&fam::TASKS_CREATED)?,
            completed: counter(&fam::TASKS_COMPLETED)?,
            failed: counter(&fam::TASKS_FAILED)?,
            cancelled: counter(&fam::TASKS_CANCELLED)?,
            duration: histogram(&fam::TASK_DURATION)?,
            queue_wait: histogram(&fam::TASK_QUEUE_WAIT)?,
            queue_size: gauge(&fam::QUEUE_SIZE)?,
            queue_pending: gauge(&fam::QUEUE_PENDING)?,
            queue_processing: gauge(&fam::QUEUE_PROCESSING)?,
            registry,
        };
        Ok(ServiceMetrics { inner: Some(Arc::new(inner)) })
    }

    /// Counts a new task and returns its guard, which measures the queue wait (until
    /// [`Task::started`]) and the duration (until [`Task::completed`] or [`Task::failed`]).
    pub fn task_created(&self) -> Task {
        self.record(|inner| inner.created.inc());
        Task { inner: self.inner.clone(), created: Instant::now(), started: Cell::new(None), done: false }
    }

    /// Counts a task created, for callers that measure durations themselves (TeleFuser's
    /// `record_task_created`).
    pub fn record_task_created(&self) {
        self.record(|inner| inner.created.inc());
    }

    /// Counts a completed task and records its duration, measured elsewhere (TeleFuser's
    /// `record_task_completed(duration)`).
    pub fn record_task_completed(&self, duration: Duration) {
        self.record(|inner| inner.ended(Outcome::Completed, Some(duration)));
    }

    /// Counts a failed task (TeleFuser's `record_task_failed()`: no duration).
    pub fn record_task_failed(&self) {
        self.record(|inner| inner.ended(Outcome::Failed, None));
    }

    /// Counts a failed task and records its duration, as [`Task::failed`] does.
    pub fn record_task_failed_after(&self, duration: Duration) {
        self.record(|inner| inner.ended(Outcome::Failed, Some(duration)));
    }

    /// Counts a cancelled task (no duration, as [`Task::cancelled`]).
    pub fn record_task_cancelled(&self) {
        self.record(|inner| inner.ended(Outcome::Cancelled, None));
    }

    /// Records a queue wait measured elsewhere.
    pub fn record_queue_wait(&self, wait: Duration) {
        self.record(|inner| inner.queue_wait.observe(wait.as_secs_f64()));
    }

    /// Sets the queue gauges, for callers that own the queue.
    pub fn update_queue_metrics(&self, size: usize, pending: usize, processing: usize) {
        self.record(|inner| {
            inner.queue_size.set(size as f64);
            inner.queue_pending.set(pending as f64);
            inner.queue_processing.set(processing as f64);
        });
    }

    /// Records into the metrics, unless the handle records nothing.
    fn record(&self, record: impl FnOnce(&Inner)) {
        if let Some(inner) = &self.inner {
            record(inner);
        }
    }

    /// The registry holding the metrics (`None` when disabled).
    pub fn registry(&self) -> Option<&Registry> {
        self.inner.as_ref().map(|i| &i.registry)
    }

    /// Counters so far: `(created, completed, failed, cancelled)` (zeros when disabled).
    pub fn task_counts(&self) -> (u64, u64, u64, u64) {
        self.inner.as_ref().map_or((0, 0, 0, 0), |i| {
            (i.created.value() as u64, i.completed.value() as u64, i.failed.value() as u64, i.cancelled.value() as u64)
        })
    }

    /// The duration histogram's readings (`count`, `sum`, ...), `None` when disabled.
    pub fn task_duration(&self) -> Option<crate::registry::HistogramValue> {
        self.inner.as_ref().map(|i| i.duration.value())
    }

    /// The queue-wait histogram's readings, `None` when disabled.
    pub fn task_queue_wait(&self) -> Option<crate::registry::HistogramValue> {
        self.inner.as_ref().map(|i| i.queue_wait.value())
    }
}

/// The settings in effect for service metrics: those `init` resolved, or before `init` the
/// file and the environment (see [the module docs](self)).
pub fn config() -> ServiceMetricsConfig {
    crate::global::service_config()
}

/// The process-wide service metrics, built from the settings in effect
/// (`PIPETEL_SERVICE_PREFIX`, `PIPETEL_HISTOGRAM_BUCKETS`, `PIPETEL_QUEUE_METRICS`), as
/// TeleFuser's `get_service_metrics()`. Cheap after the first call; a call after `init` changed
/// the settings builds the metrics again from the new ones. When they cannot be built (the
/// configured prefix is in use with labels by [`ServiceMetrics::with_labels`]), a handle that
/// records nothing, with one warning.
pub fn service_metrics() -> ServiceMetrics {
    static GLOBAL: Mutex<Option<(ServiceMetricsConfig, ServiceMetrics)>> = Mutex::new(None);
    let config = crate::global::service_config();
    let mut global = crate::sync::lock(&GLOBAL);
    if let Some((built_from, metrics)) = global.as_ref() {
        if *built_from == config {
            return metrics.clone();
        }
    }
    let metrics = ServiceMetrics::from_config(&config).unwrap_or_else(|error| {
        tracing::warn!(target: "pipetel", %error, prefix = %config.prefix, "service metrics off");
        ServiceMetrics::disabled()
    });
    *global = Some((config, metrics.clone()));
    metrics
}

/// The guard of one task. Finish it with [`Task::completed`], [`Task::failed`] or
/// [`Task::cancelled`]; dropped unfinished (early return, panic) it counts as cancelled.
///
/// Queue wait is creation → [`Task::started`]. Duration is started → completed or failed
/// (from creation when `started` was never called); cancelled tasks record no duration.
#[derive(Debug)]
#[must_use = "a task dropped at once counts as cancelled"]
pub struct Task {
    inner: Option<Arc<Inner>>,
    created: Instant,
    // A `Cell` so `started` takes `&self`, as in `let t = ...; t.started();`.
    started: Cell<Option<Instant>>,
    done: bool,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceMetrics").finish_non_exhaustive()
    }
}

impl Task {
    /// The task left the queue and starts running: records its queue wait. A second call is
    /// ignored.
    pub fn started(&self) {
        if self.started.get().is_some() {
            return;
        }
        let now = Instant::now();
        self.started.set(Some(now));
        if let Some(inner) = &self.inner {
            inner.queue_wait.observe(now.saturating_duration_since(self.created).as_secs_f64());
        }
    }

    /// The time spent in the queue, once started.
    pub fn queue_wait(&self) -> Option<Duration> {
        self.started.get().map(|s| s.saturating_duration_since(self.created))
    }

    /// The task succeeded.
    pub fn completed(mut self) {
        self.finish(Outcome::Completed);
    }

    /// The task failed.
    pub fn failed(mut self) {
        self.finish(Outcome::Failed);
    }

    /// The task was cancelled.
    pub fn cancelled(mut self) {
        self.finish(Outcome::Cancelled);
    }

    fn finish(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let Some(inner) = &self.inner else { return };
        let since = self.started.get().unwrap_or(self.created);
        let duration = match outcome {
            Outcome::Cancelled => None,
            Outcome::Completed | Outcome::Failed => Some(since.elapsed()),
        };
        inner.ended(outcome, duration);
    }
}

impl Inner {
    /// Counts a task that ended, and records its duration when it has one.
    fn ended(&self, outcome: Outcome, duration: Option<Duration>) {
        match outcome {
            Outcome::Completed => self.completed.inc(),
            Outcome::Failed => self.failed.inc(),
            Outcome::Cancelled => self.cancelled.inc(),
        }
        if let Some(duration) = duration {
            self.duration.observe(duration.as_secs_f64());
        }
    }
}

enum Outcome {
    Completed,
    Failed,
    Cancelled,
}

impl Drop for Task {
    fn drop(&mut self) {
        self.finish(Outcome::Cancelled);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_counts_each_outcome() {
        let s = ServiceMetrics::new("svc_guard").expect("metrics");
        let t = s.task_created();
        t.started();
        std::thread::sleep(Duration::from_millis(5));
        t.completed();
        let t = s.task_created();
        t.started();
        t.failed();
        s.task_created().cancelled();
        drop(s.task_created()); // dropped unfinished: cancelled
        let t = s.task_created();
        assert!(t.queue_wait().is_none());
        t.started();
        assert!(t.queue_wait().is_some());
        std::mem::forget(t); // neither finished nor dropped: counted as created only
        assert_eq!(s.task_counts(), (5, 1, 1, 2));
        let d = s.task_duration().expect("enabled");
        assert_eq!(d.count, 2);
        assert!(d.sum >= 0.005, "{d:?}");
        assert_eq!(s.task_queue_wait().expect("enabled").count, 3);
    }

    #[test]
    fn exposition_names_are_the_agreed_ones() {
        let s = ServiceMetrics::new("service").expect("metrics");
        s.update_queue_metrics(8, 5, 3);
        s.task_created().completed();
        let text = s.registry().expect("enabled").prometheus_text();
        for name in [
            "service_tasks_created_total 1",
            "service_tasks_completed_total 1",
            "service_tasks_failed_total 0",
            "service_tasks_cancelled_total 0",
            "service_task_duration_seconds_count 1",
            "service_task_queue_wait_seconds_count 0",
            "service_queue_size 8",
            "service_queue_pending 5",
            "service_queue_processing 3",
        ] {
            assert!(text.lines().any(|l| l.starts_with(name)), "{name} missing from\n{text}");
        }
        // The same prefix shares the families.
        let again = ServiceMetrics::new("service").expect("same prefix");
        assert_eq!(again.task_counts().0, 1);
    }

    #[test]
    fn labels_tell_services_apart() {
        let a = ServiceMetrics::with_labels("svc_models", &[("model", "a")]).expect("a");
        let b = ServiceMetrics::with_labels("svc_models", &[("model", "b")]).expect("b");
        a.task_created().completed();
        b.task_created().failed();
        assert_eq!(a.task_counts(), (1, 1, 0, 0));
        assert_eq!(b.task_counts(), (1, 0, 1, 0));
        let text = a.registry().expect("enabled").prometheus_text();
        assert!(text.contains("svc_models_tasks_failed_total{model=\"b\"} 1"), "{text}");
        // Other label names under the same prefix conflict.
        assert!(matches!(
            ServiceMetrics::with_labels("svc_models", &[("region", "x")]),
            Err(RegistryError::Conflict { .. })
        ));
    }

    #[test]
    fn durations_measured_elsewhere_are_recorded() {
        let s = ServiceMetrics::new("svc_elsewhere").expect("metrics");
        s.record_task_created();
        s.record_task_created();
        s.record_task_created();
        s.record_task_completed(Duration::from_millis(250));
        s.record_task_failed();
        s.record_task_failed_after(Duration::from_millis(750));
        s.record_task_cancelled();
        s.record_queue_wait(Duration::from_millis(5));
        assert_eq!(s.task_counts(), (3, 1, 2, 1));
        let d = s.task_duration().expect("enabled");
        assert_eq!(d.count, 2);
        assert!((d.sum - 1.0).abs() < 1e-9, "{d:?}");
        assert_eq!(s.task_queue_wait().expect("enabled").count, 1);
        let text = s.registry().expect("enabled").prometheus_text();
        assert!(text.contains("svc_elsewhere_task_duration_seconds_bucket{le=\"0.25\"} 1"), "{text}");
    }

    #[test]
    fn the_global_service_metrics_follow_the_configuration() {
        // No `init` in this test binary: the defaults (prefix `service`, queue metrics on).
        let s = service_metrics();
        assert!(s.is_enabled());
        assert_eq!(s.registry().expect("enabled").prefix(), config().prefix);
        let before = s.task_counts().0;
        service_metrics().record_task_created();
        assert_eq!(s.task_counts().0, before + 1, "one process-wide instance");
    }

    #[test]
    fn bad_prefixes_are_refused() {
        assert!(ServiceMetrics::new("").is_err());
        assert!(ServiceMetrics::new("Bad-Prefix").is_err());
    }

    #[test]
    fn disabled_records_nothing() {
        let config =
            ServiceMetricsConfig::from_lookup(|n| (n == PIPETEL_QUEUE_METRICS).then(|| "false".into())).expect("valid");
        let s = ServiceMetrics::from_config(&config).expect("disabled");
        s.task_created().completed();
        s.update_queue_metrics(1, 1, 1);
        assert_eq!(s.task_counts(), (0, 0, 0, 0));
        assert!(s.registry().is_none());
    }

    #[test]
    fn config_reads_and_names_bad_values() {
        let c = ServiceMetricsConfig::from_lookup(|_| None).expect("defaults");
        assert_eq!(c, ServiceMetricsConfig::default());
        let env: HashMap<&str, &str> = [
            (PIPETEL_QUEUE_METRICS, "on"),
            (PIPETEL_HTTP_METRICS, "0"),
            (PIPETEL_SERVICE_PREFIX, "telefuser"),
            (PIPETEL_HISTOGRAM_BUCKETS, "0.1, 1,10"),
        ]
        .into();
        let c = ServiceMetricsConfig::from_lookup(|n| env.get(n).map(|v| v.to_string())).expect("valid");
        assert!(c.queue_metrics && !c.http_metrics);
        assert_eq!(c.prefix, "telefuser");
        assert_eq!(c.histogram_buckets, vec![0.1, 1.0, 10.0]);
        let s = ServiceMetrics::from_config(&c).expect("metrics");
        s.task_created().completed();
        let text = s.registry().expect("enabled").prometheus_text();
        assert!(text.contains("telefuser_task_duration_seconds_bucket{le=\"10\"} 1"), "{text}");

        // Named bucket sets.
        for (name, bounds) in
            [("telefuser", crate::buckets::TELEFUSER_BUCKETS), (" Seconds ", crate::buckets::SECONDS_BUCKETS)]
        {
            let c = ServiceMetricsConfig::from_lookup(|n| (n == PIPETEL_HISTOGRAM_BUCKETS).then(|| name.to_string()))
                .expect("a named set");
            assert_eq!(c.histogram_buckets, bounds, "{name}");
        }
        assert_eq!(crate::buckets::TELEFUSER_BUCKETS.len(), 11);
        assert_eq!(parse_buckets("telefuser").expect("named"), crate::buckets::TELEFUSER_BUCKETS);
        let err = parse_buckets("tele").expect_err("unknown name");
        assert!(err.contains("telefuser") && err.contains("seconds"), "{err}");

        for (var, value, needle) in [
            (PIPETEL_QUEUE_METRICS, "maybe", "PIPETEL_QUEUE_METRICS"),
            (PIPETEL_HTTP_METRICS, "2", "PIPETEL_HTTP_METRICS"),
            (PIPETEL_SERVICE_PREFIX, "Tele-Fuser", "PIPETEL_SERVICE_PREFIX"),
            (PIPETEL_SERVICE_PREFIX, "", "PIPETEL_SERVICE_PREFIX"),
            (PIPETEL_HISTOGRAM_BUCKETS, "1,0.5", "PIPETEL_HISTOGRAM_BUCKETS"),
            (PIPETEL_HISTOGRAM_BUCKETS, "1,x", "PIPETEL_HISTOGRAM_BUCKETS"),
            (PIPETEL_HISTOGRAM_BUCKETS, "1,inf", "PIPETEL_HISTOGRAM_BUCKETS"),
            (PIPETEL_HISTOGRAM_BUCKETS, "fast", "PIPETEL_HISTOGRAM_BUCKETS"),
        ] {
            let err =
                ServiceMetricsConfig::from_lookup(|n| (n == var).then(|| value.to_string())).expect_err("refused");
            let msg = err.to_string();
            assert!(msg.contains(needle) && msg.contains(&format!("{value:?}")), "{msg}");
        }
    }
}
