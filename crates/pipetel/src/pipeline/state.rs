//! Process-wide state: the runtime `init` installs (namespaces, logger, row file, instruments),
//! the registry of live and recently finished stages that the observable instruments read at
//! collection time, and the sampler thread.

use std::fs::File;
use std::io::BufWriter;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::metrics::{Counter, Histogram, Meter};
use opentelemetry::KeyValue;
use opentelemetry_sdk::logs::SdkLogger;

use super::keys::{self, CounterKey};
use super::row::{StageStat, StageStatus, WorkerStat, WorkerStatus};
use super::sample::{ProcessSampler, SampleState};

/// The stream names rows carry (`<prefix>.stage`, `<prefix>.worker`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Namespaces {
    pub(crate) stage: &'static str,
    pub(crate) worker: &'static str,
}

impl Namespaces {
    pub(crate) const DEFAULT: Namespaces = Namespaces { stage: "pipeline.stage", worker: "pipeline.worker" };

    pub(crate) fn from_prefix(prefix: &str) -> Self {
        if prefix == "pipeline" {
            return Self::DEFAULT;
        }
        // Leaked once per `init`: OTel log records take event names as `&'static str`.
        Namespaces {
            stage: Box::leak(format!("{prefix}.stage").into_boxed_str()),
            worker: Box::leak(format!("{prefix}.worker").into_boxed_str()),
        }
    }
}

pub(crate) struct Runtime {
    pub(crate) ns: Namespaces,
    pub(crate) logger: Option<SdkLogger>,
    pub(crate) rows_file: Option<Mutex<BufWriter<File>>>,
    rows_file_warned: AtomicBool,
    pub(crate) stage_duration: Histogram<f64>,
    pub(crate) stage_runs: Counter<u64>,
    pub(crate) retention: Duration,
    pub(crate) cardinality_limit: usize,
}

impl Runtime {
    pub(crate) fn warn_once_rows_file(&self, error: &std::io::Error) {
        if !self.rows_file_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", %error, "cannot append to the rows file; rows still go to the log exporters");
        }
    }
}

static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

pub(crate) fn runtime() -> Option<Arc<Runtime>> {
    RUNTIME.read().ok().and_then(|g| g.clone())
}

pub(crate) fn namespaces() -> Namespaces {
    runtime().map(|r| r.ns).unwrap_or(Namespaces::DEFAULT)
}

// ----- cells -----

pub(crate) const RUNNING: u8 = 0;
pub(crate) const SUCCEEDED: u8 = 1;
pub(crate) const FAILED: u8 = 2;

/// The hot-path cells of one shard, alone on their cache lines so shards on different threads
/// never share one.
#[repr(align(128))]
pub(crate) struct Cells {
    pub(crate) items: AtomicU64,
    pub(crate) bytes: AtomicU64,
}

pub(crate) struct ShardInner {
    pub(crate) cells: Cells,
    pub(crate) index: u32,
    pub(crate) stage: Arc<StageMeta>,
    pub(crate) attrs: Vec<KeyValue>,
    pub(crate) state: AtomicU8,
    pub(crate) started: Instant,
    /// The OS thread whose CPU time the samples report (the one that called `start`).
    pub(crate) tid: Option<i32>,
    /// Handle shards are sampled periodically; shards reported through `emit_worker_stat` are not.
    pub(crate) sampled: bool,
    pub(crate) counters: Vec<(CounterKey, AtomicU64)>,
    pub(crate) extra_counters: Mutex<Vec<(CounterKey, u64)>>,
    pub(crate) sample: Mutex<SampleState>,
    pub(crate) span: Mutex<Option<tracing::Span>>,
}

impl ShardInner {
    pub(crate) fn counters_snapshot(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> =
            self.counters.iter().map(|(k, v)| (k.name().to_string(), v.load(Ordering::Relaxed))).collect();
        if let Ok(extra) = self.extra_counters.lock() {
            out.extend(extra.iter().map(|(k, v)| (k.name().to_string(), *v)));
        }
        out
    }

    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) == RUNNING
    }

    /// Takes a sample now and builds the worker row for `status`.
    pub(crate) fn row(&self, status: WorkerStatus, process: &mut ProcessSampler, reason: Option<String>) -> WorkerStat {
        let items = self.cells.items.load(Ordering::Relaxed);
        let bytes = self.cells.bytes.load(Ordering::Relaxed);
        let mut sample = self.sample.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let reading = process.read(self.tid);
        let now = Instant::now();
        let taken = sample.update(now, self.started, items, bytes, reading, status == WorkerStatus::Start);
        WorkerStat {
            shard_index: self.index,
            stage_name: self.stage.name.clone(),
            execution_id: self.stage.execution_id.clone(),
            status,
            timestamp: SystemTime::now(),
            items,
            bytes,
            item_rate: taken.item_rate,
            byte_rate: taken.byte_rate,
            cpu_time: taken.cpu_time,
            cpu_percent: taken.cpu_percent,
            cpu_percent_avg: taken.cpu_percent_avg,
            memory_current: taken.memory_current,
            memory_avg: taken.memory_avg,
            memory_peak: taken.memory_peak,
            counters: self.counters_snapshot(),
            reason,
        }
    }
}

/// What never changes about a stage.
pub(crate) struct StageMeta {
    pub(crate) name: String,
    pub(crate) execution_id: String,
    pub(crate) namespace: &'static str,
    /// The worker stream's name (the namespace of shard rows and worker metrics).
    pub(crate) worker_namespace: &'static str,
    pub(crate) attrs: Vec<KeyValue>,
}

pub(crate) struct StageInner {
    pub(crate) meta: Arc<StageMeta>,
    pub(crate) total_shards: u32,
    pub(crate) counters: Vec<CounterKey>,
    pub(crate) started: Instant,
    pub(crate) state: AtomicU8,
    pub(crate) finished_at: Mutex<Option<Instant>>,
    pub(crate) shards: Mutex<Vec<Arc<ShardInner>>>,
    /// Set for stages reported through `emit_stage_stat`: their totals are given, not summed.
    pub(crate) fixed: Mutex<Option<StageStat>>,
    /// Stage-level failures (the stage itself failed), added to `pipeline.stage.errors`.
    pub(crate) stage_errors: AtomicU64,
    /// Attribute sets of `pipeline.stage.shards`, one per state, built once.
    pub(crate) state_attrs: [Vec<KeyValue>; 4],
}

impl StageInner {
    pub(crate) fn new(meta: Arc<StageMeta>, total_shards: u32, counters: Vec<CounterKey>) -> Self {
        let state_attrs = ["pending", "running", "done", "failed"].map(|s| {
            let mut a = meta.attrs.clone();
            a.push(KeyValue::new(keys::SHARD_STATE, s));
            a
        });
        Self {
            meta,
            total_shards,
            counters,
            started: Instant::now(),
            state: AtomicU8::new(RUNNING),
            finished_at: Mutex::new(None),
            shards: Mutex::new(Vec::new()),
            fixed: Mutex::new(None),
            stage_errors: AtomicU64::new(0),
            state_attrs,
        }
    }

    pub(crate) fn shards(&self) -> Vec<Arc<ShardInner>> {
        self.shards.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The aggregate row of this stage as of now.
    pub(crate) fn aggregate(&self, status: StageStatus, reason: Option<String>) -> StageStat {
        let shards = self.shards();
        let mut items = 0u64;
        let mut bytes = 0u64;
        let mut cpu = Vec::new();
        let mut counters: Vec<(String, u64)> = self.counters.iter().map(|k| (k.name().to_string(), 0)).collect();
        for s in &shards {
            items = items.saturating_add(s.cells.items.load(Ordering::Relaxed));
            bytes = bytes.saturating_add(s.cells.bytes.load(Ordering::Relaxed));
            if let Some(avg) = s.sample.lock().ok().and_then(|g| g.cpu_percent_avg()) {
                cpu.push(avg);
            }
            for (k, v) in s.counters_snapshot() {
                match counters.iter_mut().find(|(name, _)| *name == k) {
                    Some(slot) => slot.1 = slot.1.saturating_add(v),
                    None => counters.push((k, v)),
                }
            }
        }
        StageStat {
            stage_name: self.meta.name.clone(),
            execution_id: self.meta.execution_id.clone(),
            items,
            bytes,
            elapsed: self.started.elapsed(),
            total_shards: self.total_shards,
            status,
            cpu_percent_avg: (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64),
            counters,
            reason,
        }
    }

    pub(crate) fn totals(&self) -> (u64, u64) {
        if let Some(f) = self.fixed.lock().ok().and_then(|f| f.as_ref().map(|s| (s.items, s.bytes))) {
            return f;
        }
        self.shards().iter().fold((0u64, 0u64), |(i, b), s| {
            (
                i.saturating_add(s.cells.items.load(Ordering::Relaxed)),
                b.saturating_add(s.cells.bytes.load(Ordering::Relaxed)),
            )
        })
    }
}

// ----- the registry the instruments read -----

pub(crate) struct Registry {
    stages: Mutex<Vec<Arc<StageInner>>>,
    overflow_warned: AtomicBool,
}

static REGISTRY: LazyLock<Registry> =
    LazyLock::new(|| Registry { stages: Mutex::new(Vec::new()), overflow_warned: AtomicBool::new(false) });

pub(crate) fn registry() -> &'static Registry {
    &REGISTRY
}

pub(crate) fn stage_meta(name: &str, execution_id: &str) -> Arc<StageMeta> {
    let ns = namespaces();
    let namespace = ns.stage;
    Arc::new(StageMeta {
        name: name.to_string(),
        execution_id: execution_id.to_string(),
        namespace,
        worker_namespace: ns.worker,
        attrs: vec![
            KeyValue::new(keys::NAMESPACE, namespace),
            KeyValue::new(keys::STAGE_NAME, name.to_string()),
            KeyValue::new(keys::EXECUTION_ID, execution_id.to_string()),
        ],
    })
}

impl Registry {
    pub(crate) fn add(&self, stage: Arc<StageInner>) {
        self.prune();
        if let Ok(mut s) = self.stages.lock() {
            s.push(stage);
        }
    }

    pub(crate) fn stages(&self) -> Vec<Arc<StageInner>> {
        self.stages.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Drops finished stages older than the retention, so a long-lived process stays bounded.
    pub(crate) fn prune(&self) {
        let retention = runtime().map(|r| r.retention).unwrap_or(Duration::from_secs(300));
        if let Ok(mut stages) = self.stages.lock() {
            stages.retain(|s| match s.finished_at.lock().ok().and_then(|f| *f) {
                Some(at) => at.elapsed() < retention,
                None => true,
            });
        }
    }

    /// Number of live stage entries (for tests of the retention).
    pub(crate) fn len(&self) -> usize {
        self.stages.lock().map(|s| s.len()).unwrap_or(0)
    }

    fn find_or_add(&self, name: &str, execution_id: &str, total_shards: u32) -> Arc<StageInner> {
        if let Ok(stages) = self.stages.lock() {
            if let Some(s) = stages.iter().find(|s| s.meta.name == name && s.meta.execution_id == execution_id) {
                return s.clone();
            }
        }
        let stage = Arc::new(StageInner::new(stage_meta(name, execution_id), total_shards, Vec::new()));
        self.add(stage.clone());
        stage
    }

    pub(crate) fn record_explicit_stage(&self, stat: &StageStat) {
        let stage = self.find_or_add(&stat.stage_name, &stat.execution_id, stat.total_shards);
        if let Ok(mut f) = stage.fixed.lock() {
            *f = Some(stat.clone());
        }
        let state = match stat.status {
            StageStatus::Running => RUNNING,
            StageStatus::Succeeded => SUCCEEDED,
            StageStatus::Failed => FAILED,
        };
        stage.state.store(state, Ordering::Release);
        if state != RUNNING {
            if let Ok(mut at) = stage.finished_at.lock() {
                at.get_or_insert_with(Instant::now);
            }
        }
    }

    pub(crate) fn record_explicit_worker(&self, stat: &WorkerStat) {
        let stage = self.find_or_add(&stat.stage_name, &stat.execution_id, 0);
        let shard = {
            let Ok(mut shards) = stage.shards.lock() else { return };
            match shards.iter().find(|s| s.index == stat.shard_index) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(new_shard(&stage, stat.shard_index, None, false));
                    shards.push(s.clone());
                    s
                }
            }
        };
        shard.cells.items.store(stat.items, Ordering::Relaxed);
        shard.cells.bytes.store(stat.bytes, Ordering::Relaxed);
        if let Ok(mut s) = shard.sample.lock() {
            s.set_from_row(stat);
        }
        let state = match stat.status {
            WorkerStatus::Start | WorkerStatus::Running => RUNNING,
            WorkerStatus::End => SUCCEEDED,
            WorkerStatus::Failed => FAILED,
        };
        shard.state.store(state, Ordering::Release);
    }

    fn warn_overflow(&self, series: usize, limit: usize) {
        if series > limit && !self.overflow_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: "pipetel",
                series,
                limit,
                "worker series exceed the cardinality limit; the excess folds into one series marked otel.metric.overflow=true (raise PIPETEL_CARDINALITY_LIMIT, or rely on the worker rows, which always carry every shard)"
            );
        }
    }
}

pub(crate) fn new_shard(stage: &StageInner, index: u32, tid: Option<i32>, sampled: bool) -> ShardInner {
    let mut attrs = vec![KeyValue::new(keys::NAMESPACE, stage.meta.worker_namespace)];
    attrs.extend(stage.meta.attrs.iter().filter(|kv| kv.key.as_str() != keys::NAMESPACE).cloned());
    attrs.push(KeyValue::new(keys::SHARD_INDEX, i64::from(index)));
    ShardInner {
        cells: Cells { items: AtomicU64::new(0), bytes: AtomicU64::new(0) },
        index,
        stage: stage.meta.clone(),
        attrs,
        state: AtomicU8::new(RUNNING),
        started: Instant::now(),
        tid,
        sampled,
        counters: stage.counters.iter().map(|k| (k.clone(), AtomicU64::new(0))).collect(),
        extra_counters: Mutex::new(Vec::new()),
        sample: Mutex::new(SampleState::default()),
        span: Mutex::new(None),
    }
}

// ----- install / uninstall -----

/// What `init` keeps: stops the sampler and clears the runtime on drop.
pub(crate) struct PipelineGuard {
    stop: Arc<(Mutex<bool>, std::sync::Condvar)>,
    sampler: Option<std::thread::JoinHandle<()>>,
}

impl Drop for PipelineGuard {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.stop;
        if let Ok(mut stopped) = lock.lock() {
            *stopped = true;
        }
        cvar.notify_all();
        if let Some(t) = self.sampler.take() {
            let _ = t.join();
        }
        if let Ok(mut rt) = RUNTIME.write() {
            *rt = None;
        }
    }
}

/// Settings `init` passes in.
pub(crate) struct PipelineSettings {
    pub(crate) namespace: String,
    pub(crate) sample_interval: Duration,
    pub(crate) retention: Duration,
    pub(crate) rows_file: Option<std::path::PathBuf>,
    pub(crate) cardinality_limit: usize,
    /// Whether the stage/worker instruments are registered (rows and spans flow either way).
    pub(crate) metrics: bool,
}

pub(crate) fn install(
    settings: PipelineSettings,
    meter: &Meter,
    logger: Option<SdkLogger>,
) -> Result<PipelineGuard, std::io::Error> {
    let rows_file = match &settings.rows_file {
        Some(path) => {
            Some(Mutex::new(BufWriter::new(std::fs::OpenOptions::new().create(true).append(true).open(path)?)))
        }
        None => None,
    };
    if settings.metrics {
        super::metrics::register(meter);
    }
    let rt = Runtime {
        ns: Namespaces::from_prefix(&settings.namespace),
        logger,
        rows_file,
        rows_file_warned: AtomicBool::new(false),
        stage_duration: meter
            .f64_histogram("pipeline.stage.duration")
            .with_unit("s")
            .with_description("Wall time of finished stages")
            .with_boundaries(vec![
                0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0,
            ])
            .build(),
        stage_runs: meter
            .u64_counter("pipeline.stage.runs")
            .with_unit("{run}")
            .with_description("Finished stage runs by status")
            .build(),
        retention: settings.retention,
        cardinality_limit: settings.cardinality_limit,
    };
    if let Ok(mut slot) = RUNTIME.write() {
        *slot = Some(Arc::new(rt));
    }
    let stop = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
    let stop2 = stop.clone();
    let interval = settings.sample_interval;
    let sampler =
        std::thread::Builder::new().name("pipetel-sampler".into()).spawn(move || sampler_loop(interval, &stop2))?;
    Ok(PipelineGuard { stop, sampler: Some(sampler) })
}

fn sampler_loop(interval: Duration, stop: &(Mutex<bool>, std::sync::Condvar)) {
    let mut process = ProcessSampler::new();
    let (lock, cvar) = stop;
    loop {
        {
            let Ok(guard) = lock.lock() else { return };
            let Ok((stopped, _)) = cvar.wait_timeout_while(guard, interval, |stopped| !*stopped) else { return };
            if *stopped {
                return;
            }
        }
        sample_all(&mut process);
    }
}

/// One sampler tick: a running row per running shard, then retention pruning.
pub(crate) fn sample_all(process: &mut ProcessSampler) {
    let reg = registry();
    for stage in reg.stages() {
        for shard in stage.shards() {
            if !shard.is_running() || !shard.sampled {
                continue;
            }
            let row = shard.row(WorkerStatus::Running, process, None);
            let span = shard.span.lock().ok().and_then(|s| s.clone());
            if let Some(span) = &span {
                use tracing_opentelemetry::OpenTelemetrySpanExt;
                span.add_event(
                    "sample",
                    super::row::worker_fields(stage.meta.worker_namespace, &row)
                        .into_iter()
                        .map(|(k, v)| KeyValue::new(k, v))
                        .collect(),
                );
            }
            let sc = span.as_ref().and_then(super::row::span_context);
            super::row::emit_worker_row(&row, sc.as_ref());
        }
    }
    reg.prune();
}

pub(crate) fn check_overflow(series: usize) {
    let limit = runtime().map(|r| r.cardinality_limit).unwrap_or(usize::MAX);
    registry().warn_overflow(series, limit);
}
