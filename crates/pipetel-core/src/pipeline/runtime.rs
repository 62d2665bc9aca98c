//! The installed runtime: what `init` installs (namespaces, row sink, stage-run instruments,
//! retention), the sampler thread, and the two ways a row leaves (metrics, then sink).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use opentelemetry::trace::{SpanContext, Status};
use opentelemetry::KeyValue;
use opentelemetry_sdk::logs::SdkLogger;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::answers::StallChange;
use super::findings::{attribute_gpu, end_extra, finding_extra, finding_row, judge, Finding};
use super::metrics::{self, StageRunInstruments};
use super::process::ProcessSampler;
use super::row::{worker_fields, Extra, Namespaces, StageStat, WorkerStat, WorkerStatus};
use super::sink::{count_lost, RowSink, StorePath};
use super::table::{end_state, table, ShardInner};
use crate::global::Installed;
use crate::settings::{AnswerSettings, PipelineSettings, StallAction};

/// How long finished stages stay exported when no runtime is installed.
const DEFAULT_RETENTION: Duration = Duration::from_secs(300);

struct Runtime {
    ns: Namespaces,
    sink: RowSink,
    stage_runs: StageRunInstruments,
    retention: Duration,
}

static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

fn runtime() -> Option<Arc<Runtime>> {
    crate::sync::read(&RUNTIME).clone()
}

/// The installed stream names (the defaults before `init`).
pub(crate) fn namespaces() -> Namespaces {
    runtime().map(|r| r.ns).unwrap_or(Namespaces::DEFAULT)
}

/// How long finished stages stay exported.
pub(crate) fn retention() -> Duration {
    runtime().map(|r| r.retention).unwrap_or(DEFAULT_RETENTION)
}

/// The rules for skew, stragglers and stalls (the defaults before `init`).
pub(crate) use super::answers::rules as answer_settings;

/// Emits a stage row: its duration and run metrics, its log record and JSON line.
pub(crate) fn emit_stage_row(stat: &StageStat, extra: Extra, span: Option<&SpanContext>) {
    let Some(rt) = runtime() else { return not_initialised() };
    rt.stage_runs.record(rt.ns, stat);
    rt.sink.stage(rt.ns.stage, stat, extra, span);
    super::progress::stage_ended(stat);
}

/// Emits a worker row: its log record and JSON line.
pub(crate) fn emit_worker_row(stat: &WorkerStat, extra: Extra, span: Option<&SpanContext>) {
    let Some(rt) = runtime() else { return not_initialised() };
    if matches!(stat.status, WorkerStatus::End | WorkerStatus::Failed) {
        if let Some(elapsed) = extra.iter().find(|(k, _)| k == super::keys::ELAPSED).and_then(|(_, v)| match v {
            opentelemetry::Value::F64(e) => Some(*e),
            _ => None,
        }) {
            rt.stage_runs.record_shard(rt.ns, stat, elapsed);
        }
    }
    rt.sink.worker(rt.ns.worker, stat, extra, span);
}

/// Writes a stage's or shard's end on its span: the row's fields (and `extra`) as attributes,
/// and its status: an error with the reason when it failed (span-derived metrics count it).
pub(crate) fn close_span(
    span: &tracing::Span,
    fields: Vec<(String, opentelemetry::Value)>,
    extra: &Extra,
    reason: Option<&str>,
) {
    for (k, v) in fields.into_iter().chain(extra.iter().cloned()) {
        span.set_attribute(k, v);
    }
    span.set_status(match reason {
        Some(r) => Status::error(r.to_string()),
        None => Status::Ok,
    });
    if let Some(r) = reason {
        span.record("error", r);
    }
}

/// Ends a running shard: its state, its span's attributes and status, its end row (under the
/// span lock, which the sampler holds from its "still running?" check to its sample row).
/// `None` when it had already ended.
pub(crate) fn end_shard(
    inner: &ShardInner,
    span: &tracing::Span,
    status: WorkerStatus,
    reason: Option<String>,
) -> Option<WorkerStat> {
    let mut emission = crate::sync::lock(&inner.span);
    if !inner.is_running() {
        return None;
    }
    inner.mark_ended();
    let row = inner.row(status, &mut ProcessSampler::new(), reason);
    if !end_state(&inner.state, status == WorkerStatus::Failed) {
        return None;
    }
    let mut extra = end_extra(inner, &row);
    if let Some(samples) = super::profile::shard_ended(inner) {
        extra.push((pipetel_rows::fields::PROFILE_SAMPLES.into(), i64::try_from(samples).unwrap_or(i64::MAX).into()));
    }
    close_span(span, worker_fields(inner.stage.worker_namespace, &row), &extra, row.reason.as_deref());
    emit_worker_row(&row, extra, crate::sampling::span_context(span).as_ref());
    *emission = None;
    *crate::sync::lock(&inner.end_row) = Some(row.clone());
    Some(row)
}

/// A row emitted while no runtime is installed (before `init`, or after its guard dropped):
/// it is dropped and counted lost, and the first one warns. Through `tracing` when a global
/// subscriber exists; otherwise on stderr, since before `init` a `tracing` event would go
/// nowhere, which is the silent loss this warning is for.
fn not_initialised() {
    static WARNED: AtomicBool = AtomicBool::new(false);
    count_lost();
    if WARNED.swap(true, Ordering::Relaxed) {
        return;
    }
    const MSG: &str = "a pipeline row was emitted while pipetel is not initialised (before `pipetel::init`, or \
                       after its guard was dropped); it is dropped. This warning is shown once";
    if tracing::dispatcher::has_been_set() {
        tracing::warn!(target: "pipetel", "{MSG}");
    } else {
        eprintln!("pipetel: warning: {MSG}");
    }
}

// ----- install / uninstall -----

/// What `init` keeps: stops the sampler and clears the runtime on drop.
pub struct PipelineGuard {
    stop: Arc<(Mutex<bool>, Condvar)>,
    sampler: Option<std::thread::JoinHandle<()>>,
    /// The progress display, when `PIPETEL_PROGRESS` turned it on.
    progress: Option<super::progress::ProgressGuard>,
    /// Keeps the stage and worker families on the pull endpoint (an exposition source lives as
    /// long as its `Arc`).
    _direct: Option<Arc<dyn crate::exposition::ExpositionSource>>,
}

impl Drop for PipelineGuard {
    fn drop(&mut self) {
        // Its last frame prints the summary lines of the stages that ended by now.
        drop(self.progress.take());
        let (lock, cvar) = &*self.stop;
        *crate::sync::lock(lock) = true;
        cvar.notify_all();
        if let Some(t) = self.sampler.take() {
            let _ = t.join();
        }
        // The rules stay: the meter provider's last collection, after this guard, must export
        // the same worker series as the collections before it.
        *crate::sync::write(&RUNTIME) = None;
    }
}

/// The rows store `install` appends to for these settings (`None`: rows off, or no default
/// store directory), for what is written beside it (the profiler's `<store>.stacks`).
pub fn rows_store(settings: &PipelineSettings, service_name: &str) -> Option<std::path::PathBuf> {
    match store_path(settings, service_name) {
        StorePath::Explicit(path) => Some(path.to_path_buf()),
        StorePath::Default(path) => Some(path),
        StorePath::Off | StorePath::NoDir(_) => None,
    }
}

fn store_path<'a>(settings: &'a PipelineSettings, service_name: &str) -> StorePath<'a> {
    match (&settings.rows, &settings.rows_file) {
        (false, _) => StorePath::Off,
        (true, Some(file)) => StorePath::Explicit(&file.value),
        (true, None) => {
            match settings.rows_dir.as_ref().map(|d| Ok(d.value.clone())).unwrap_or_else(pipetel_rows::default_dir) {
                Ok(dir) => StorePath::Default(pipetel_rows::default_file(&dir, service_name)),
                Err(no_dir) => StorePath::NoDir(no_dir),
            }
        }
    }
}

/// Installs the runtime and starts the sampler thread, with the meter and cardinality limit of
/// the context `init` is about to publish (stages made before `init` are in the stage table,
/// which the instruments read at collection, so they export from now on too).
///
/// Rows go to the rows file when one is configured, else to the default store of
/// `service_name` (see [`pipetel_rows`]); nowhere when rows are off.
///
/// # Errors
/// The configured rows file cannot be opened for appending, or the sampler thread cannot be
/// spawned. (The default store failing to open is not an error: it warns at the first row.)
pub fn install(
    settings: &PipelineSettings,
    service_name: &str,
    installed: &Installed,
    logger: Option<SdkLogger>,
) -> Result<PipelineGuard, std::io::Error> {
    let store = store_path(settings, service_name);
    let sink = RowSink::open(logger, store, settings.rows_rotation)?;
    let meter = &installed.meter;
    // With the pull endpoint alone, the endpoint writes the stage and worker families from the
    // stage table and no observable instrument exists: the SDK keeps no series of them. With a
    // push exporter (OTLP, console) they are observable instruments of pipetel's meter, which
    // the push exporters and the pull endpoint both read, as before.
    let pull_only = installed.push_only.is_none();
    let direct = (settings.metrics && pull_only).then(|| metrics::DirectFamilies::install(installed.cardinality_limit));
    if settings.metrics {
        if !pull_only {
            metrics::register(meter, installed.cardinality_limit);
        }
        if settings.counter_metrics {
            metrics::register_counters(meter, installed.cardinality_limit);
        }
    }
    metrics::register_rows_lost(meter);
    let rt = Runtime {
        ns: Namespaces::from_prefix(&settings.namespace),
        sink,
        stage_runs: StageRunInstruments::new(meter),
        retention: settings.retention,
    };
    super::answers::set_rules(Some(settings.answers));
    *crate::sync::write(&RUNTIME) = Some(Arc::new(rt));
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let stop2 = stop.clone();
    let interval = settings.sample_interval;
    let sampler =
        std::thread::Builder::new().name("pipetel-sampler".into()).spawn(move || sampler_loop(interval, &stop2))?;
    let progress = super::progress::start(settings.progress);
    Ok(PipelineGuard { stop, sampler: Some(sampler), progress, _direct: direct })
}

// ----- the sampler -----

fn sampler_loop(interval: Duration, stop: &(Mutex<bool>, Condvar)) {
    let mut process = ProcessSampler::new();
    let (lock, cvar) = stop;
    loop {
        {
            let guard = crate::sync::lock(lock);
            let (stopped, _) = cvar
                .wait_timeout_while(guard, interval, |stopped| !*stopped)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if *stopped {
                return;
            }
        }
        sample_all(&mut process);
    }
}

/// One sampler tick: a running row per running handle shard, the answers (stragglers, stalls)
/// it finds, then retention pruning.
pub(crate) fn sample_all(process: &mut ProcessSampler) {
    let table = table();
    let rules = answer_settings();
    let stages = table.stages();
    // GPU use since the last tick, shared by the shards that ran through it (before any ends).
    attribute_gpu(&stages, Instant::now());
    for stage in stages {
        for shard in stage.shards() {
            if !shard.sampled {
                continue;
            }
            // Held from the running check to the emission: the shard's end (which takes the same
            // lock to change state and emit its end row) cannot slip in between, so no sample
            // row follows an end row, and a running shard always has its span here.
            let span = crate::sync::lock(&shard.span);
            if !shard.is_running() {
                continue;
            }
            let row = shard.row(WorkerStatus::Running, process, None);
            if let Some(span) = span.as_ref() {
                span.add_event("sample", event_fields(&worker_fields(stage.meta.worker_namespace, &row), &[]));
            }
            let sc = span.as_ref().and_then(crate::sampling::span_context);
            emit_worker_row(&row, Vec::new(), sc.as_ref());
            drop(span);
        }
        for (shard, finding) in judge(&stage, Instant::now(), &rules) {
            report(&shard, finding, &rules);
        }
    }
    table.prune(retention());
}

fn event_fields(fields: &[(String, opentelemetry::Value)], extra: &[(String, opentelemetry::Value)]) -> Vec<KeyValue> {
    fields.iter().chain(extra.iter()).map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect()
}

/// Emits the row and span event of a finding; a stall under `PIPETEL_STALL_ACTION=fail` then
/// ends the shard as failed.
fn report(shard: &ShardInner, finding: Finding, rules: &AnswerSettings) {
    let (status, event) = match finding {
        Finding::Straggler(_) => (WorkerStatus::Straggler, "pipeline.straggler"),
        Finding::Stall(StallChange::Stalled(_)) => (WorkerStatus::Stalled, "pipeline.stalled"),
        Finding::Stall(StallChange::Resumed(_)) => (WorkerStatus::Resumed, "pipeline.resumed"),
    };
    let stack = (status == WorkerStatus::Stalled).then(|| super::answers::read_stack(shard.tid)).flatten();
    let span = {
        let span = crate::sync::lock(&shard.span);
        if !shard.is_running() {
            return;
        }
        let row = finding_row(shard, status);
        let extra = finding_extra(shard, finding, stack);
        if let Some(span) = span.as_ref() {
            span.add_event(event, event_fields(&worker_fields(shard.stage.worker_namespace, &row), &extra));
        }
        let sc = span.as_ref().and_then(crate::sampling::span_context);
        emit_worker_row(&row, extra, sc.as_ref());
        span.clone()
    };
    if let (Finding::Stall(StallChange::Stalled(d)), StallAction::Fail, Some(span)) =
        (finding, rules.stall_action, span)
    {
        let _ = end_shard(shard, &span, WorkerStatus::Failed, Some(format!("stalled for {} s", d.as_secs())));
    }
}
