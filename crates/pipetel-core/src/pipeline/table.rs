//! The shared tables: one entry per live or recently finished stage, each holding its shards'
//! hot-path cells, sample state and counters. The handles write them, the observable
//! instruments and the sampler read them at collection / sample time.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant, SystemTime};

use opentelemetry::KeyValue;

use super::answers::Watch;
use super::gpu::GpuTally;
use super::keys::{self, CounterKey, CounterSums, CounterValue};
use super::phase::PhaseBook;
use super::process::ProcessSampler;
use super::row::{Namespaces, StageStat, StageStatus, WorkerStat, WorkerStatus};
use super::sample::{SampleState, Taken};

// ----- states -----

pub(crate) const RUNNING: u8 = 0;
pub(crate) const SUCCEEDED: u8 = 1;
pub(crate) const FAILED: u8 = 2;

/// Ends a running shard or stage: its `state` goes from [`RUNNING`] to [`FAILED`] when
/// `failed`, to [`SUCCEEDED`] otherwise. False when it had already ended.
pub(crate) fn end_state(state: &AtomicU8, failed: bool) -> bool {
    let end = if failed { FAILED } else { SUCCEEDED };
    state.compare_exchange(RUNNING, end, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

// ----- shards -----

/// The hot-path cells of one shard, alone on their cache lines so shards on different threads
/// never share one.
#[repr(align(128))]
pub(crate) struct Cells {
    pub(crate) items: AtomicU64,
    pub(crate) bytes: AtomicU64,
}

impl Cells {
    /// Adds processed items and bytes: two relaxed atomic adds, no lock, no allocation.
    #[inline]
    pub(crate) fn record(&self, items: u64, bytes: u64) {
        self.items.fetch_add(items, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
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
    /// Declared counters' integer parts (the atomic path).
    pub(crate) counters: Vec<(CounterKey, AtomicI64)>,
    /// Undeclared counters, and the float parts of declared ones (the locked path).
    pub(crate) extra_counters: Mutex<Vec<(CounterKey, CounterValue)>>,
    pub(crate) sample: Mutex<SampleState>,
    pub(crate) span: Mutex<Option<tracing::Span>>,
    /// Where the shard's time went.
    pub(crate) phases: PhaseBook,
    /// Nanoseconds from start to end, once ended (0 while running).
    pub(crate) ended_nanos: AtomicU64,
    /// The sampler's straggler and stall state.
    pub(crate) watch: Mutex<Watch>,
    /// The name of the thread that started it.
    pub(crate) thread_name: Option<String>,
    /// Its end row, once it ended.
    pub(crate) end_row: Mutex<Option<WorkerStat>>,
    /// The GPU use attributed to it (see [`super::gpu`]).
    pub(crate) gpu: Mutex<GpuTally>,
    /// Its label for the CPU profiler (see [`super::profile`]); 0 when not profiled.
    pub(crate) profile_label: AtomicU32,
}

impl std::fmt::Debug for ShardInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard").field("stage", &self.stage.name).field("index", &self.index).finish_non_exhaustive()
    }
}

pub(crate) fn new_shard(stage: &StageInner, index: u32, tid: Option<i32>, sampled: bool) -> ShardInner {
    let mut attrs = vec![KeyValue::new(keys::NAMESPACE, stage.meta.worker_namespace)];
    attrs.extend(stage.meta.attrs.iter().filter(|kv| kv.key.as_str() != keys::NAMESPACE).cloned());
    attrs.push(KeyValue::new(keys::SHARD_INDEX, i64::from(index)));
    let started = Instant::now();
    ShardInner {
        cells: Cells { items: AtomicU64::new(0), bytes: AtomicU64::new(0) },
        index,
        stage: stage.meta.clone(),
        attrs,
        state: AtomicU8::new(RUNNING),
        started,
        tid,
        sampled,
        counters: stage.counters.iter().map(|k| (k.clone(), AtomicI64::new(0))).collect(),
        extra_counters: Mutex::new(Vec::new()),
        sample: Mutex::new(SampleState::default()),
        span: Mutex::new(None),
        phases: PhaseBook::new(started),
        ended_nanos: AtomicU64::new(0),
        watch: Mutex::new(Watch::new(started)),
        thread_name: sampled.then(|| std::thread::current().name().map(str::to_string)).flatten(),
        end_row: Mutex::new(None),
        gpu: Mutex::new(GpuTally::default()),
        profile_label: AtomicU32::new(0),
    }
}

impl ShardInner {
    pub(crate) fn items(&self) -> u64 {
        self.cells.items.load(Ordering::Relaxed)
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.cells.bytes.load(Ordering::Relaxed)
    }

    /// The shard's counters: declared ones first, in declaration order, then the others in
    /// first-use order; a declared counter that also took floats is a float.
    pub(crate) fn counters_snapshot(&self) -> Vec<(String, CounterValue)> {
        let mut out = CounterSums::from_entries(
            self.counters.iter().map(|(k, v)| (k.name().to_string(), CounterValue::Int(v.load(Ordering::Relaxed)))),
        );
        {
            let extra = crate::sync::lock(&self.extra_counters);
            for (k, v) in extra.iter() {
                out.add(k.name(), *v);
            }
        }
        out.into_vec()
    }

    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) == RUNNING
    }

    /// Seconds from start to end once ended, else to now.
    pub(crate) fn elapsed(&self) -> f64 {
        match self.ended_nanos.load(Ordering::Acquire) {
            0 => self.started.elapsed().as_secs_f64(),
            n => n as f64 / 1e9,
        }
    }

    /// Marks the shard's end time and closes its phases (before its end row is built).
    pub(crate) fn mark_ended(&self) {
        let n = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1);
        let _ = self.ended_nanos.compare_exchange(0, n, Ordering::AcqRel, Ordering::Acquire);
        self.phases.close();
    }

    /// What the last sample computed (none while the sample state's lock is poisoned).
    pub(crate) fn last_sample(&self) -> Option<Taken> {
        Some(crate::sync::lock(&self.sample).last)
    }

    /// Wall-clock time of the last sample, seconds since the epoch (0 before the first).
    pub(crate) fn heartbeat(&self) -> Option<f64> {
        Some(crate::sync::lock(&self.sample).heartbeat)
    }

    fn cpu_percent_avg(&self) -> Option<f64> {
        crate::sync::lock(&self.sample).cpu_percent_avg()
    }

    /// Takes a sample now and builds the worker row for `status`.
    pub(crate) fn row(&self, status: WorkerStatus, process: &mut ProcessSampler, reason: Option<String>) -> WorkerStat {
        let items = self.items();
        let bytes = self.bytes();
        let mut sample = crate::sync::lock(&self.sample);
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

// ----- remote shards -----

/// What a stage's owner keeps of one shard run in another process (all attempts of one index
/// there), from its reports (see [`super::remote`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RemoteShard {
    pub(crate) items: u64,
    pub(crate) bytes: u64,
    pub(crate) state: u8,
    pub(crate) attempts: u32,
    /// Seconds of its last attempt (so far, while it runs), when the report gave them.
    pub(crate) elapsed: Option<f64>,
    pub(crate) counters: CounterSums,
}

/// The remote shards of one stage, per (source, index), and each source's latest sequence.
#[derive(Debug, Default)]
pub(crate) struct RemoteShards {
    pub(crate) sequences: HashMap<String, u64>,
    pub(crate) shards: BTreeMap<(String, u32), RemoteShard>,
}

// ----- stages -----

/// What never changes about a stage.
pub(crate) struct StageMeta {
    pub(crate) name: String,
    pub(crate) execution_id: String,
    pub(crate) namespace: &'static str,
    /// The worker stream's name (the namespace of shard rows and worker metrics).
    pub(crate) worker_namespace: &'static str,
    pub(crate) attrs: Vec<KeyValue>,
}

pub(crate) fn stage_meta(ns: Namespaces, name: &str, execution_id: &str) -> Arc<StageMeta> {
    Arc::new(StageMeta {
        name: name.to_string(),
        execution_id: execution_id.to_string(),
        namespace: ns.stage,
        worker_namespace: ns.worker,
        attrs: vec![
            KeyValue::new(keys::NAMESPACE, ns.stage),
            KeyValue::new(keys::STAGE_NAME, name.to_string()),
            KeyValue::new(keys::EXECUTION_ID, execution_id.to_string()),
        ],
    })
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
    /// Shards named stragglers, and stalls of its shards.
    pub(crate) stragglers: AtomicU64,
    pub(crate) stalls: AtomicU64,
    /// Attribute sets of `pipeline.stage.shards`, one per state, built once.
    pub(crate) state_attrs: [Vec<KeyValue>; 4],
    /// Shards run in other processes, as their reports gave them (see [`super::remote`]).
    pub(crate) remote: Mutex<RemoteShards>,
    /// A remote view ([`super::Stage::remote`]): its shards' worker metrics are exported here,
    /// its stage metrics only by the owning process (which counts these shards from reports).
    pub(crate) view: bool,
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
            stragglers: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            state_attrs,
            remote: Mutex::new(RemoteShards::default()),
            view: false,
        }
    }

    /// This stage as a remote view (see [`StageInner::view`]).
    pub(crate) fn into_view(mut self) -> Self {
        self.view = true;
        self
    }

    pub(crate) fn shards(&self) -> Vec<Arc<ShardInner>> {
        crate::sync::lock(&self.shards).clone()
    }

    pub(crate) fn is_running(&self) -> bool {
        self.state.load(Ordering::Acquire) == RUNNING
    }

    /// The aggregate row of this stage as of now.
    pub(crate) fn aggregate(&self, status: StageStatus, reason: Option<String>) -> StageStat {
        let shards = self.shards();
        let outcome = self.outcome(&shards);
        let (mut items, mut bytes) = self.remote_totals();
        let mut counters = self.declared_counters();
        for s in &shards {
            items = items.saturating_add(s.items());
            bytes = bytes.saturating_add(s.bytes());
            for (k, v) in s.counters_snapshot() {
                counters.add(&k, v);
            }
        }
        self.add_remote_counters(&mut counters);
        let counters = counters.into_vec();
        StageStat {
            stage_name: self.meta.name.clone(),
            execution_id: self.meta.execution_id.clone(),
            items,
            bytes,
            elapsed: self.started.elapsed(),
            total_shards: self.total_shards,
            shards_succeeded: outcome.succeeded,
            shards_failed: outcome.failed,
            shards_retried: outcome.retried,
            status,
            cpu_percent_avg: mean_cpu_percent_avg(&shards),
            counters,
            reason,
        }
    }

    /// Items and bytes: the given totals of an explicitly reported stage, else the shards' sum.
    pub(crate) fn totals(&self) -> (u64, u64) {
        if let Some(f) = crate::sync::lock(&self.fixed).as_ref().map(|s| (s.items, s.bytes)) {
            return f;
        }
        self.shards()
            .iter()
            .fold(self.remote_totals(), |(i, b), s| (i.saturating_add(s.items()), b.saturating_add(s.bytes())))
    }

    /// Items and bytes of the remote shards.
    fn remote_totals(&self) -> (u64, u64) {
        crate::sync::lock(&self.remote)
            .shards
            .values()
            .fold((0u64, 0u64), |(i, b), s| (i.saturating_add(s.items), b.saturating_add(s.bytes)))
    }

    /// The declared counters at zero, first in declaration order.
    fn declared_counters(&self) -> CounterSums {
        CounterSums::from_entries(self.counters.iter().map(|k| (k.name().to_string(), CounterValue::Int(0))))
    }

    fn add_remote_counters(&self, counters: &mut CounterSums) {
        let remote = crate::sync::lock(&self.remote);
        for s in remote.shards.values() {
            for (k, v) in s.counters.iter() {
                counters.add(k, *v);
            }
        }
    }

    /// The outcome of local `attempts` and the remote shards together.
    fn outcome(&self, attempts: &[Arc<ShardInner>]) -> ShardOutcome {
        let remote = crate::sync::lock(&self.remote);
        ShardOutcome::of_all(attempts, remote.shards.iter().map(|((_, i), s)| (*i, s.state, s.attempts)))
    }

    /// The stage's counters: the given ones of an explicitly reported stage, else the sum over
    /// its shards (declared counters first).
    pub(crate) fn counter_totals(&self) -> Vec<(String, CounterValue)> {
        if let Some(f) = crate::sync::lock(&self.fixed).as_ref().map(|s| s.counters.clone()) {
            return f;
        }
        let mut counters = self.declared_counters();
        for s in self.shards() {
            for (k, v) in s.counters_snapshot() {
                counters.add(&k, v);
            }
        }
        self.add_remote_counters(&mut counters);
        counters.into_vec()
    }

    /// Shards by the state of their last attempt: pending (declared but not started), running,
    /// done, failed. A retried shard counts once.
    pub(crate) fn shard_counts(&self) -> [u64; 4] {
        let o = self.outcome(&self.shards());
        let started = u64::from(o.running + o.succeeded + o.failed);
        [
            u64::from(self.total_shards).saturating_sub(started),
            u64::from(o.running),
            u64::from(o.succeeded),
            u64::from(o.failed),
        ]
    }

    /// Whether any shard's last attempt failed.
    pub(crate) fn any_shard_failed(&self) -> bool {
        self.outcome(&self.shards()).failed > 0
    }

    /// Shard attempts that retried an index already started, local and remote.
    pub(crate) fn retries(&self) -> u64 {
        u64::from(self.outcome(&self.shards()).retried)
    }

    /// Failed shards plus failures of the stage itself.
    pub(crate) fn errors(&self) -> u64 {
        let failed_shards = self.shards().iter().filter(|s| s.state.load(Ordering::Acquire) == FAILED).count() as u64;
        let failed_remote =
            crate::sync::lock(&self.remote).shards.values().filter(|s| s.state == FAILED).count() as u64;
        failed_shards + failed_remote + self.stage_errors.load(Ordering::Relaxed)
    }

    /// Mean over the shards of their average CPU %, when any shard was sampled.
    pub(crate) fn cpu_percent_avg(&self) -> Option<f64> {
        mean_cpu_percent_avg(&self.shards())
    }
}

/// The shards of a stage by their last attempt, and how many attempts were retries.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ShardOutcome {
    pub(crate) running: u32,
    pub(crate) succeeded: u32,
    pub(crate) failed: u32,
    pub(crate) retried: u32,
}

impl ShardOutcome {
    /// `attempts` in start order (a stage's shard list): the last one of each index decides.
    /// Local `attempts` and `remote` shards (index, state of its last attempt in its process,
    /// attempts there). An index run in several processes is succeeded when any of them
    /// succeeded, else running when any runs, else failed.
    pub(crate) fn of_all(attempts: &[Arc<ShardInner>], remote: impl Iterator<Item = (u32, u8, u32)>) -> Self {
        let mut last: std::collections::HashMap<u32, u8> = std::collections::HashMap::new();
        let mut total_attempts = attempts.len() as u64;
        for a in attempts {
            last.insert(a.index, a.state.load(Ordering::Acquire));
        }
        let rank = |s: u8| match s {
            SUCCEEDED => 2,
            RUNNING => 1,
            _ => 0,
        };
        for (index, state, n) in remote {
            total_attempts += u64::from(n.max(1));
            let slot = last.entry(index).or_insert(state);
            if rank(state) > rank(*slot) {
                *slot = state;
            }
        }
        let mut o = ShardOutcome {
            retried: u32::try_from(total_attempts - last.len() as u64).unwrap_or(u32::MAX),
            ..ShardOutcome::default()
        };
        for state in last.values() {
            match *state {
                RUNNING => o.running += 1,
                SUCCEEDED => o.succeeded += 1,
                FAILED => o.failed += 1,
                _ => {}
            }
        }
        o
    }
}

fn mean_cpu_percent_avg(shards: &[Arc<ShardInner>]) -> Option<f64> {
    let cpu: Vec<f64> = shards.iter().filter_map(|s| s.cpu_percent_avg()).collect();
    (!cpu.is_empty()).then(|| cpu.iter().sum::<f64>() / cpu.len() as f64)
}

// ----- the table -----

/// The stages the instruments and the sampler see: live ones, and finished ones until their
/// retention ends.
pub(crate) struct StageTable {
    stages: Mutex<Vec<Arc<StageInner>>>,
}

static TABLE: LazyLock<StageTable> = LazyLock::new(|| StageTable { stages: Mutex::new(Vec::new()) });

pub(crate) fn table() -> &'static StageTable {
    &TABLE
}

impl StageTable {
    /// Adds a stage, first dropping finished stages past `retention`.
    pub(crate) fn add(&self, stage: Arc<StageInner>, retention: Duration) {
        self.prune(retention);
        {
            let mut s = crate::sync::lock(&self.stages);
            s.push(stage);
        }
    }

    pub(crate) fn stages(&self) -> Vec<Arc<StageInner>> {
        crate::sync::lock(&self.stages).clone()
    }

    /// Drops finished stages older than `retention`, so a long-lived process stays bounded.
    pub(crate) fn prune(&self, retention: Duration) {
        {
            let mut stages = crate::sync::lock(&self.stages);
            stages.retain(|s| match *crate::sync::lock(&s.finished_at) {
                Some(at) => at.elapsed() < retention,
                None => true,
            });
        }
    }

    /// Number of live stage entries (for tests of the retention).
    #[cfg_attr(not(feature = "testing"), allow(dead_code))]
    pub(crate) fn len(&self) -> usize {
        crate::sync::lock(&self.stages).len()
    }
}
