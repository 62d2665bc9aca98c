//! The installed runtime: what `init` installs (namespaces, row sink, stage-run instruments,
//! retention), the sampler thread, and the two ways a row leaves (metrics, then sink).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use opentelemetry::trace::SpanContext;
use opentelemetry::KeyValue;
use opentelemetry_sdk::logs::SdkLogger;

use super::metrics::{self, StageRunInstruments};
use super::process::ProcessSampler;
use super::row::{worker_fields, Namespaces, StageStat, WorkerStat, WorkerStatus};
use super::sink::{count_lost, RowSink, StorePath};
use super::table::table;
use crate::global::Installed;
use crate::settings::PipelineSettings;

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

/// Emits a stage row: its duration and run metrics, its log record and JSON line.
pub(crate) fn emit_stage_row(stat: &StageStat, span: Option<&SpanContext>) {
    let Some(rt) = runtime() else { return not_initialised() };
    rt.stage_runs.record(rt.ns, stat);
    rt.sink.stage(rt.ns.stage, stat, span);
    super::progress::stage_ended(stat);
}

/// Emits a worker row: its log record and JSON line.
pub(crate) fn emit_worker_row(stat: &WorkerStat, span: Option<&SpanContext>) {
    let Some(rt) = runtime() else { return not_initialised() };
    rt.sink.worker(rt.ns.worker, stat, span);
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
        *crate::sync::write(&RUNTIME) = None;
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
    let store = match (&settings.rows, &settings.rows_file) {
        (false, _) => StorePath::Off,
        (true, Some(file)) => StorePath::Explicit(&file.value),
        (true, None) => {
            match settings.rows_dir.as_ref().map(|d| Ok(d.value.clone())).unwrap_or_else(pipetel_rows::default_dir) {
                Ok(dir) => StorePath::Default(pipetel_rows::default_file(&dir, service_name)),
                Err(no_dir) => StorePath::NoDir(no_dir),
            }
        }
    };
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

/// One sampler tick: a running row per running handle shard, then retention pruning.
pub(crate) fn sample_all(process: &mut ProcessSampler) {
    let table = table();
    for stage in table.stages() {
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
                use tracing_opentelemetry::OpenTelemetrySpanExt;
                span.add_event(
                    "sample",
                    worker_fields(stage.meta.worker_namespace, &row)
                        .into_iter()
                        .map(|(k, v)| KeyValue::new(k, v))
                        .collect(),
                );
            }
            let sc = span.as_ref().and_then(crate::sampling::span_context);
            emit_worker_row(&row, sc.as_ref());
            drop(span);
        }
    }
    table.prune(retention());
}
