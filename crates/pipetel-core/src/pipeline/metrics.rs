//! The stage and worker metrics: families whose series fold the shards' cells when they are
//! read, so the hot path never touches the SDK, and the two instruments recorded when a stage
//! row is emitted (duration and runs). With the pull endpoint alone, the endpoint writes the
//! families straight from the stage table (`DirectFamilies`); with a push exporter they are
//! observable instruments with the same callbacks, which every reader collects.

use std::collections::HashMap;
use std::ops::Add;
use std::sync::Arc;

use opentelemetry::metrics::{AsyncInstrument, AsyncInstrumentBuilder, Counter, Histogram, Meter};
use opentelemetry::KeyValue;

use super::answers::StageAnswers;
use super::keys;
use super::overflow::{Fold, Series};
use super::row::{Namespaces, StageStat};
use super::table::{table, ShardInner, StageInner};
use crate::families::pipeline as fam;
use crate::families::Family;

/// Buckets of `pipeline.stage.duration`, seconds: from 100 ms to a day.
const DURATION_BUCKETS: [f64; 14] =
    [0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0, 86400.0];

/// Sets the family's unit and description on the builder's instrument.
fn described<'a, I, M>(family: &Family, builder: AsyncInstrumentBuilder<'a, I, M>) -> AsyncInstrumentBuilder<'a, I, M> {
    family.describe(builder)
}

type StageValue<M> = fn(&StageInner) -> Option<M>;
type ShardValue<M> = fn(&ShardInner) -> Option<M>;

/// The table's stages, those with the same attributes (namespace, name, execution id) in one
/// group, groups in the order of their first stage: series of one attribute set are observed
/// once, as the SDK keeps one series per attribute set (the last observation winning). Remote
/// views only with `views` (worker metrics): their stage metrics belong to the owning process.
fn stage_groups(views: bool) -> Vec<Vec<Arc<StageInner>>> {
    let mut stages = table().stages();
    if !views {
        stages.retain(|s| !s.view);
    }
    let mut groups: Vec<Vec<Arc<StageInner>>> = Vec::with_capacity(stages.len());
    let mut seen: HashMap<(&str, &str, &str), usize> = HashMap::with_capacity(stages.len());
    for stage in &stages {
        let key = (stage.meta.namespace, stage.meta.name.as_str(), stage.meta.execution_id.as_str());
        match seen.get(&key) {
            Some(i) => groups[*i].push(stage.clone()),
            None => {
                seen.insert(key, groups.len());
                groups.push(vec![stage.clone()]);
            }
        }
    }
    groups
}

/// Where a family's callback hands each series' value and attributes: an OTel observable
/// instrument's observer, or the pull endpoint's writer.
type Observer<'a, M> = &'a mut dyn FnMut(M, &[KeyValue]);

/// A callback observing `value` once per exported stage, under the stage's attributes (for
/// stages sharing their attributes, the last one's value).
fn per_stage<M: 'static>(value: StageValue<M>) -> impl Fn(Observer<'_, M>) + Send + Sync + 'static {
    move |obs| {
        for group in stage_groups(false) {
            if let Some((stage, v)) = group.iter().rev().find_map(|s| value(s).map(|v| (s, v))) {
                obs(v, &stage.meta.attrs);
            }
        }
    }
}

/// The values of a stage group's shards, one per shard index: where a shard index ran more
/// than once (a retry), its last attempt with a value.
fn shard_values<M>(group: &[Vec<Arc<ShardInner>>], value: ShardValue<M>) -> Vec<(&ShardInner, M)> {
    let mut values: Vec<(&ShardInner, M)> =
        group.iter().flatten().filter_map(|s| value(s).map(|v| (s.as_ref(), v))).collect();
    let mut seen: Vec<u64> = Vec::new();
    let mut repeated = false;
    for (s, _) in &values {
        let (word, bit) = (s.index as usize / 64, 1u64 << (s.index % 64));
        if seen.len() <= word {
            seen.resize(word + 1, 0);
        }
        repeated |= seen[word] & bit != 0;
        seen[word] |= bit;
    }
    if repeated {
        // Stable: attempts of one index keep their order, and the last one stays.
        values.sort_by_key(|(s, _)| s.index);
        let mut kept: Vec<(&ShardInner, M)> = Vec::with_capacity(values.len());
        for entry in values {
            match kept.last_mut() {
                Some(last) if last.0.index == entry.0.index => *last = entry,
                _ => kept.push(entry),
            }
        }
        values = kept;
    }
    values
}

/// The shards of a stage group that have their own worker series (`PIPETEL_SHARD_METRICS`):
/// all, or the running ones up to the limit, the longest running first.
fn exported_shards(group: &[Arc<StageInner>]) -> Vec<Vec<Arc<ShardInner>>> {
    let shards: Vec<Vec<Arc<ShardInner>>> = group.iter().map(|s| s.shards()).collect();
    let Some(limit) = super::answers::shard_metrics_limit() else { return shards };
    shards
        .into_iter()
        .map(|mut stage| {
            stage.retain(|s| s.is_running());
            if stage.len() > limit {
                // Earliest started first: the longest running are the ones a user looks at.
                stage.sort_by_key(|s| s.started);
                stage.truncate(limit);
                stage.sort_by_key(|s| s.index);
            }
            stage
        })
        .collect()
}

/// A callback observing `value` once per shard index of each stage, under the shard's
/// attributes, within the cardinality `limit` (see [`super::overflow`]).
fn per_shard<M>(limit: usize, fold: Fold, value: ShardValue<M>) -> impl Fn(Observer<'_, M>) + Send + Sync + 'static
where
    M: Add<Output = M> + 'static,
{
    move |obs| {
        let mut series = Series::new(limit, fold);
        for group in stage_groups(true) {
            let shards = exported_shards(&group);
            for (shard, v) in shard_values(&shards, value) {
                series.observe(obs, v, &shard.attrs);
            }
        }
        series.finish(obs);
    }
}

type Observe<M> = Box<dyn Fn(Observer<'_, M>) + Send + Sync>;

/// One observable family: its instrument kind and number type, and the callback that observes
/// its series.
enum Values {
    CounterU64(Observe<u64>),
    CounterF64(Observe<f64>),
    UpDownI64(Observe<i64>),
    GaugeU64(Observe<u64>),
    GaugeF64(Observe<f64>),
}

/// A stage or worker family read from the stage table: an observable instrument for the SDK
/// (push exporters), or text the pull endpoint writes straight from the table.
pub(crate) struct Observable {
    family: &'static Family,
    values: Values,
}

impl Observable {
    fn new(family: &'static Family, values: Values) -> Self {
        Self { family, values }
    }

    /// The instrument its values are observed with (the family table's, a test checks).
    #[cfg(test)]
    fn instrument(&self) -> crate::families::Instrument {
        use crate::families::Instrument;
        match self.values {
            Values::CounterU64(_) | Values::CounterF64(_) => Instrument::Counter,
            Values::UpDownI64(_) => Instrument::UpDownCounter,
            Values::GaugeU64(_) | Values::GaugeF64(_) => Instrument::Gauge,
        }
    }

    /// Registers the family's observable instrument on `meter` (the SDK keeps the callback for
    /// the provider's lifetime).
    fn register(self, meter: &Meter) {
        let (family, name) = (self.family, self.family.name);
        // One registration, on the instrument builder of each kind of values.
        macro_rules! observe_with {
            ($builder:ident, $values:expr) => {{
                let values = $values;
                let _ =
                    described(family, meter.$builder(name)).with_callback(move |o| values(&mut observer(o))).build();
            }};
        }
        match self.values {
            Values::CounterU64(f) => observe_with!(u64_observable_counter, f),
            Values::CounterF64(f) => observe_with!(f64_observable_counter, f),
            Values::UpDownI64(f) => observe_with!(i64_observable_up_down_counter, f),
            Values::GaugeU64(f) => observe_with!(u64_observable_gauge, f),
            Values::GaugeF64(f) => observe_with!(f64_observable_gauge, f),
        }
    }
}

/// An OTel observable instrument's observer as an [`Observer`].
fn observer<M>(obs: &dyn AsyncInstrument<M>) -> impl FnMut(M, &[KeyValue]) + '_ {
    move |value, attrs| obs.observe(value, attrs)
}

/// The stage and worker families, in registration order; worker series past
/// `cardinality_limit` fold.
pub(crate) fn observables(cardinality_limit: usize) -> Vec<Observable> {
    fn b<M, F: Fn(Observer<'_, M>) + Send + Sync + 'static>(f: F) -> Observe<M> {
        Box::new(f)
    }
    let mut all = Vec::with_capacity(14);
    let stage_totals: [(&'static Family, StageValue<u64>); 2] =
        [(&fam::STAGE_ITEMS, |s| Some(s.totals().0)), (&fam::STAGE_BYTES, |s| Some(s.totals().1))];
    for (name, value) in stage_totals {
        all.push(Observable::new(name, Values::CounterU64(b(per_stage(value)))));
    }
    all.push(Observable::new(&fam::STAGE_ACTIVE, Values::UpDownI64(b(per_stage(|s| Some(i64::from(s.is_running())))))));
    all.push(Observable::new(
        &fam::STAGE_SHARDS,
        Values::GaugeU64(b(|obs: Observer<'_, u64>| {
            for group in stage_groups(false) {
                // The last stage of a group, as the SDK keeps the last observation.
                if let Some(stage) = group.last() {
                    for (count, attrs) in stage.shard_counts().iter().zip(stage.state_attrs.iter()) {
                        obs(*count, attrs);
                    }
                }
            }
        })),
    ));
    all.push(Observable::new(&fam::STAGE_ERRORS, Values::CounterU64(b(per_stage(|s| Some(s.errors()))))));
    all.push(Observable::new(&fam::STAGE_RETRIES, Values::CounterU64(b(per_stage(|s| Some(s.retries()))))));
    all.push(Observable::new(
        &fam::STAGE_CPU_UTILIZATION,
        Values::GaugeF64(b(per_stage(|s| s.cpu_percent_avg().map(|p| p / 100.0)))),
    ));

    all.push(Observable::new(&fam::STAGE_SKEW, Values::GaugeF64(b(per_stage(|s| answers_of(s).skew)))));
    all.push(Observable::new(
        &fam::STAGE_SKEWED,
        Values::GaugeU64(b(per_stage(|s| {
            let a = answers_of(s);
            a.shard_elapsed.map(|_| u64::from(a.skewed))
        }))),
    ));
    all.push(Observable::new(
        &fam::STAGE_STRAGGLERS,
        Values::CounterU64(b(per_stage(|s| Some(s.stragglers.load(std::sync::atomic::Ordering::Relaxed))))),
    ));
    all.push(Observable::new(
        &fam::STAGE_STALLS,
        Values::CounterU64(b(per_stage(|s| Some(s.stalls.load(std::sync::atomic::Ordering::Relaxed))))),
    ));
    all.push(Observable::new(
        &fam::STAGE_PHASE_TIME,
        Values::CounterF64(b(|obs: Observer<'_, f64>| {
            for group in stage_groups(false) {
                if let Some(stage) = group.last() {
                    let a = answers_of(stage);
                    let unphased = [(super::phase::UNPHASED.to_string(), a.unphased_seconds)];
                    for (phase, secs) in a.phases.iter().chain(unphased.iter()) {
                        let mut attrs = stage.meta.attrs.clone();
                        attrs.push(KeyValue::new(keys::PHASE_NAME, phase.clone()));
                        obs(*secs, &attrs);
                    }
                }
            }
        })),
    ));

    let gpu_f64: [(&'static Family, StageValue<f64>, bool); 5] = [
        (&fam::STAGE_GPU_TIME, |s| answers_of(s).gpu.map(|g| g.seconds), true),
        (&fam::STAGE_GPU_IDLE, |s| answers_of(s).gpu.map(|g| g.idle), true),
        (&fam::STAGE_GPU_ENERGY, |s| answers_of(s).gpu.map(|g| g.energy_joules), true),
        (&fam::STAGE_GPU_SM_ACTIVE, |s| answers_of(s).gpu.and_then(|g| g.sm_active()), false),
        (&fam::STAGE_GPU_TENSOR_ACTIVE, |s| answers_of(s).gpu.and_then(|g| g.tensor_active()), false),
    ];
    for (family, value, counter) in gpu_f64 {
        let values =
            if counter { Values::CounterF64(b(per_stage(value))) } else { Values::GaugeF64(b(per_stage(value))) };
        all.push(Observable::new(family, values));
    }
    all.push(Observable::new(
        &fam::STAGE_GPU_MEMORY_PEAK,
        Values::GaugeU64(b(per_stage(|s| answers_of(s).gpu.map(|g| g.peak_memory)))),
    ));

    let limit = cardinality_limit;
    let worker_totals: [(&'static Family, ShardValue<u64>); 2] =
        [(&fam::WORKER_ITEMS, |s| Some(s.items())), (&fam::WORKER_BYTES, |s| Some(s.bytes()))];
    for (name, value) in worker_totals {
        all.push(Observable::new(name, Values::CounterU64(b(per_shard(limit, Fold::Sum, value)))));
    }
    all.push(Observable::new(
        &fam::WORKER_CPU_TIME,
        Values::CounterF64(b(per_shard(limit, Fold::Sum, |s| s.last_sample().map(|t| t.cpu_time.as_secs_f64())))),
    ));
    all.push(Observable::new(
        &fam::WORKER_CPU_UTILIZATION,
        Values::GaugeF64(b(per_shard(limit, Fold::Drop, |s| {
            s.last_sample().and_then(|t| t.cpu_percent).map(|p| p / 100.0)
        }))),
    ));
    // Memory reads 0 where it cannot be read: no series rather than a false zero.
    let worker_memory: [(&'static Family, ShardValue<u64>); 3] = [
        (&fam::WORKER_MEMORY_USAGE, |s| s.last_sample().map(|t| t.memory_current).filter(|m| *m > 0)),
        (&fam::WORKER_MEMORY_AVERAGE, |s| s.last_sample().map(|t| t.memory_avg).filter(|m| *m > 0)),
        (&fam::WORKER_MEMORY_PEAK, |s| s.last_sample().map(|t| t.memory_peak).filter(|m| *m > 0)),
    ];
    for (name, value) in worker_memory {
        all.push(Observable::new(name, Values::GaugeU64(b(per_shard(limit, Fold::Drop, value)))));
    }
    all.push(Observable::new(
        &fam::WORKER_HEARTBEAT,
        Values::GaugeF64(b(per_shard(limit, Fold::Drop, |s| s.heartbeat().filter(|h| *h > 0.0)))),
    ));
    all
}

pub(crate) use direct::DirectFamilies;

mod direct {
    use std::sync::Arc;

    use opentelemetry::KeyValue;

    use super::{observables, Observable, Values};
    use crate::exposition::{attribute_labels, EncodedFamily, ExpositionSource, Number, OwnFamily, Page, Writer};

    /// The stage and worker families as the pull endpoint serves them: written from the stage
    /// table at each scrape, the same text the OTel instruments give through the encoder (series
    /// of a family in the table's order instead of the SDK's hash order), without the SDK's
    /// per-instrument tables of attribute sets. An exposition source while it lives.
    pub(crate) struct DirectFamilies {
        /// Each family with its exposition name and Prometheus type.
        families: Vec<(Observable, String, &'static str)>,
    }

    impl DirectFamilies {
        /// The families, worker series past `cardinality_limit` folding as the instruments fold
        /// them.
        pub(crate) fn new(cardinality_limit: usize) -> Self {
            let families = observables(cardinality_limit)
                .into_iter()
                .map(|o| {
                    let (name, kind) = o.exposition_name();
                    (o, name, kind)
                })
                .collect();
            Self { families }
        }

        /// As [`DirectFamilies::new`], registered as an exposition source while the returned
        /// `Arc` lives.
        pub(crate) fn install(cardinality_limit: usize) -> Arc<dyn ExpositionSource> {
            let direct: Arc<dyn ExpositionSource> = Arc::new(Self::new(cardinality_limit));
            crate::exposition::add_exposition_source(&direct);
            direct
        }
    }

    impl ExpositionSource for DirectFamilies {
        /// Where the encoder has a family with the name of a stage or worker family (a hub's
        /// family named as a pipeline metric, say), the table's series join its body, so that
        /// the page has one family of that name, as when both were OTel instruments; a family of
        /// the name but of another type is left out, a conflict on the page.
        fn join(&self, families: &mut [EncodedFamily<'_>], page: &mut Page<'_>) {
            for encoded in families.iter_mut() {
                let Some((family, _, own)) = self.families.iter().find(|(_, n, _)| n == encoded.name) else {
                    continue;
                };
                if *own == encoded.kind {
                    let lines = OwnFamily::named(Writer::new(encoded.body, page.format()), encoded.name, own, "");
                    family.write_text(lines.joining());
                } else {
                    page.conflict(format!(
                        "{} ({own}, from the stage table) conflicts with an earlier {} of the same exposition name {}",
                        family.family.name, encoded.kind, encoded.name
                    ));
                }
            }
        }

        /// The families the encoder has none of on the page (those it has, this source joined).
        fn write_exposition(&self, page: &mut Page<'_>) {
            for (family, name, kind) in &self.families {
                if !page.encoded(name) {
                    family.write_text(OwnFamily::named(page.writer(), name.as_str(), kind, family.family.description));
                }
            }
        }
    }

    /// A sample value the SDK keeps: it drops NaN and infinities.
    trait Finite: Number {
        fn finite(self) -> bool;
    }

    impl Finite for u64 {
        fn finite(self) -> bool {
            true
        }
    }

    impl Finite for i64 {
        fn finite(self) -> bool {
            true
        }
    }

    impl Finite for f64 {
        fn finite(self) -> bool {
            self.is_finite()
        }
    }

    /// A sample line of `family` as the encoder writes an OTel data point of pipetel's scope.
    fn sample<M: Finite>(family: &mut OwnFamily<'_>, value: M, attrs: &[KeyValue]) {
        if value.finite() {
            family.sample(|labels| attribute_labels(attrs.iter(), labels), value);
        }
    }

    impl Observable {
        /// The family's Prometheus name, as the encoder translates the instrument's, and type.
        pub(super) fn exposition_name(&self) -> (String, &'static str) {
            (self.family.prometheus_name(), self.family.instrument.metric_type().prometheus_type())
        }

        /// Writes the family's series from the table as the encoder writes the instrument's
        /// collected data, into `family` (its header before the first series, unless it is
        /// joining a family already begun; none without series).
        fn write_text(&self, mut family: OwnFamily<'_>) {
            match &self.values {
                Values::CounterU64(f) | Values::GaugeU64(f) => f(&mut |v, attrs| sample(&mut family, v, attrs)),
                Values::CounterF64(f) | Values::GaugeF64(f) => f(&mut |v, attrs| sample(&mut family, v, attrs)),
                Values::UpDownI64(f) => f(&mut |v, attrs| sample(&mut family, v, attrs)),
            }
        }
    }
}

/// Registers every stage and worker family as an observable instrument on `meter`; worker
/// series past `cardinality_limit` fold.
pub(crate) fn register(meter: &Meter, cardinality_limit: usize) {
    for family in observables(cardinality_limit) {
        family.register(meter);
    }
}

/// The attribute naming a user counter on `pipeline.stage.counters`.
pub(crate) const COUNTER_NAME: &str = "pipeline.counter.name";

/// Registers `pipeline.stage.counters`: per stage and counter key, the value summed over its
/// shards. A gauge, since counters may hold floats such as averages; at most
/// `cardinality_limit - 1` (stage, key) series, the rest dropped with one warning.
pub(crate) fn register_counters(meter: &Meter, cardinality_limit: usize) {
    let family = &fam::STAGE_COUNTERS;
    let _ = described(family, meter.f64_observable_gauge(family.name))
        .with_callback(move |obs| {
            let mut obs = observer(obs);
            let mut series = Series::named(
                cardinality_limit,
                Fold::Drop,
                family.name,
                "raise PIPETEL_CARDINALITY_LIMIT, use fewer counter keys, or set PIPETEL_STAGE_COUNTER_METRICS=false and read the counters from the stage rows",
            );
            for stage in table().stages().into_iter().filter(|s| !s.view) {
                for (key, value) in stage.counter_totals() {
                    let mut attrs = stage.meta.attrs.clone();
                    attrs.push(KeyValue::new(COUNTER_NAME, key));
                    series.observe(&mut obs, value.as_f64(), &attrs);
                }
            }
            series.finish(&mut obs);
        })
        .build();
}

/// Registers `pipeline.rows.lost` (always, whatever the stage-metrics switch says: it is how a
/// failing rows store shows).
pub(crate) fn register_rows_lost(meter: &Meter) {
    let _ = described(&fam::ROWS_LOST, meter.u64_observable_counter(fam::ROWS_LOST.name))
        .with_callback(|obs| obs.observe(super::sink::rows_lost(), &[]))
        .build();
}

/// How long a stage's answers are reused: one collection reads them for about ten families,
/// and each reading sorts the stage's finished shards.
const ANSWERS_REUSED_FOR: std::time::Duration = std::time::Duration::from_millis(50);

/// Answers computed within [`ANSWERS_REUSED_FOR`], by stage (its meta's address, checked
/// against the live meta so a freed stage's entry never serves a new one).
type AnswersCache = HashMap<usize, (std::time::Instant, std::sync::Weak<super::table::StageMeta>, Arc<StageAnswers>)>;
static ANSWERS: std::sync::Mutex<Option<AnswersCache>> = std::sync::Mutex::new(None);

/// A stage's answers under the installed rules, computed once per collection.
fn answers_of(stage: &StageInner) -> Arc<StageAnswers> {
    let key = Arc::as_ptr(&stage.meta) as usize;
    let now = std::time::Instant::now();
    {
        let cache = crate::sync::lock(&ANSWERS);
        if let Some((at, meta, answers)) = cache.as_ref().and_then(|c| c.get(&key)) {
            let same = meta.upgrade().is_some_and(|m| Arc::ptr_eq(&m, &stage.meta));
            if same && now.saturating_duration_since(*at) < ANSWERS_REUSED_FOR {
                return answers.clone();
            }
        }
    }
    let answers = Arc::new(super::findings::stage_answers(stage, super::answers::rules().skew_min));
    let mut cache = crate::sync::lock(&ANSWERS);
    let cache = cache.get_or_insert_with(HashMap::new);
    cache.retain(|_, (at, _, _)| now.saturating_duration_since(*at) < ANSWERS_REUSED_FOR);
    cache.insert(key, (now, Arc::downgrade(&stage.meta), answers.clone()));
    answers
}

/// Buckets of `pipeline.stage.shard.duration`, seconds: finer than the stage's, for the spread.
const SHARD_DURATION_BUCKETS: [f64; 19] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0,
    25000.0, 86400.0,
];

/// The instruments recorded once per stage row (its duration and its run, by status) and once
/// per shard end row (the shard's duration).
pub(crate) struct StageRunInstruments {
    duration: Histogram<f64>,
    runs: Counter<u64>,
    shard_duration: Histogram<f64>,
}

impl StageRunInstruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        let (duration, runs, shard) = (&fam::STAGE_DURATION, &fam::STAGE_RUNS, &fam::STAGE_SHARD_DURATION);
        Self {
            shard_duration: shard
                .describe(meter.f64_histogram(shard.name))
                .with_boundaries(SHARD_DURATION_BUCKETS.to_vec())
                .build(),
            duration: duration
                .describe(meter.f64_histogram(duration.name))
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            runs: runs.describe(meter.u64_counter(runs.name)).build(),
        }
    }

    /// Records nothing when stage metrics are off (`PIPETEL_STAGE_METRICS=false`): the SDK
    /// exports an instrument only once something was recorded into it.
    pub(crate) fn record(&self, ns: Namespaces, stat: &StageStat) {
        if !crate::global::stage_metrics() {
            return;
        }
        let attrs = [
            KeyValue::new(keys::NAMESPACE, ns.stage),
            KeyValue::new(keys::STAGE_NAME, stat.stage_name.clone()),
            KeyValue::new(keys::STATUS, stat.status.as_str()),
        ];
        self.duration.record(stat.elapsed.as_secs_f64(), &attrs);
        self.runs.add(1, &attrs);
    }

    /// Records a shard's wall time with its end row (of the stage stream, as the stage's
    /// duration), unless stage metrics are off.
    pub(crate) fn record_shard(&self, ns: Namespaces, stat: &super::row::WorkerStat, elapsed: f64) {
        if !crate::global::stage_metrics() {
            return;
        }
        let status = if stat.status == super::row::WorkerStatus::Failed { "failed" } else { "succeeded" };
        let attrs = [
            KeyValue::new(keys::NAMESPACE, ns.stage),
            KeyValue::new(keys::STAGE_NAME, stat.stage_name.clone()),
            KeyValue::new(keys::STATUS, status),
        ];
        self.shard_duration.record(elapsed, &attrs);
    }
}

/// The pull endpoint's text of the stage and worker families is the same whether the encoder
/// writes the observable instruments' collected data or [`DirectFamilies`] writes the table.
#[cfg(test)]
mod direct_tests {
    use std::collections::BTreeMap;
    use std::time::{Duration, SystemTime};

    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::SdkMeterProvider;

    use crate::exposition::pull::PrometheusRender;
    use crate::exposition::pull::PullReader;
    use crate::exposition::{ExpositionSource as _, Format, Page};
    use crate::pipeline::{emit_worker_stat, WorkerStat, WorkerStatus};

    /// Per family of the direct set: its header lines and its sample lines of execution `id`
    /// (other tests share the stage table), sorted: the SDK's series order is its hash order.
    fn families(text: &str, id: &str) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
        let names: Vec<String> = super::observables(0).iter().map(|o| o.exposition_name().0).collect();
        let mut out: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
        let mut current = String::new();
        let label = format!("pipeline_execution_id=\"{id}\"");
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                let name = rest.split(' ').nth(1).unwrap_or("");
                current = names
                    .iter()
                    .find(|n| name == n.as_str() || format!("{name}_total") == **n)
                    .cloned()
                    .unwrap_or_default();
                if !current.is_empty() {
                    out.entry(current.clone()).or_default().0.push(line.to_string());
                }
            } else if !current.is_empty() && line.contains(&label) {
                // A running shard's phase time grows between the two renders: its labels only.
                let line = match line.rsplit_once(' ') {
                    Some((series, _)) if current == "pipeline_stage_phase_time_seconds_total" => series,
                    _ => line,
                };
                out.entry(current.clone()).or_default().1.push(line.to_string());
            }
        }
        for (_, samples) in out.values_mut() {
            samples.sort();
        }
        out
    }

    fn worker_row(stage: &str, id: &str, index: u32, memory: u64) -> WorkerStat {
        WorkerStat {
            shard_index: index,
            stage_name: stage.to_string(),
            execution_id: id.to_string(),
            status: WorkerStatus::Running,
            timestamp: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_250),
            items: 10 + u64::from(index),
            bytes: 1_000,
            item_rate: 1.0,
            byte_rate: 2.0,
            cpu_time: Duration::from_millis(1_250),
            cpu_percent: Some(12.5),
            cpu_percent_avg: Some(33.3),
            memory_current: memory,
            memory_avg: memory / 2,
            memory_peak: memory * 2,
            counters: Vec::new(),
            reason: None,
        }
    }

    #[test]
    fn the_table_renders_the_same_text_as_the_instruments_through_the_encoder() {
        let id = format!("direct-{}", std::process::id());
        // Handle shards: one recording, one failed then retried (one series for its index),
        // one never sampled (no CPU or memory series).
        let stage = crate::pipeline::stage("direct \"quoted\"\\stage").execution_id(&id).shards(3).start();
        let first = stage.shard(0).start();
        first.record(5, 500);
        let failed = stage.shard(1).start();
        failed.record(1, 1);
        let _ = failed.fail("boom");
        let retry = stage.shard(1).start();
        retry.record(7, 70);
        // Explicit rows with every worker value, on a second stage; one with memory unreadable.
        for (index, memory) in [(0, 1 << 30), (1, 0), (2, 3 << 20)] {
            emit_worker_stat(&worker_row("explicit", &id, index, memory));
        }

        let reader = PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
        super::register(&provider.meter(crate::global::SCOPE_NAME), 100_000);
        let render = PrometheusRender::new(reader);
        let sdk_text = render.render();
        let sdk_open = render.render_openmetrics();

        let direct = super::DirectFamilies::new(100_000);
        let mut text = String::new();
        direct.write_exposition(&mut Page::new(&mut text, Format::Text));
        let mut open = String::new();
        direct.write_exposition(&mut Page::new(&mut open, Format::OpenMetrics));
        drop(direct);

        let (want, got) = (families(&sdk_text, &id), families(&text, &id));
        assert_eq!(got, want, "SDK:\n{sdk_text}\nnative:\n{text}");
        // Every stage and worker family but the skew pair (no shard of these stages finished).
        assert_eq!(got.len(), 18, "every stage and worker family: {got:#?}");
        let items = &got["pipeline_worker_items_total"].1;
        assert_eq!(items.iter().filter(|l| l.contains("pipeline_stage_name=\"explicit\"")).count(), 3, "{items:?}");
        let retried: Vec<&String> =
            items.iter().filter(|l| l.contains("pipeline_shard_index=\"1\"") && l.contains("quoted")).collect();
        assert_eq!(retried.len(), 1, "a retried shard is one series, its last attempt's: {retried:?}");
        assert!(retried[0].ends_with(" 7"), "{retried:?}");
        assert!(
            items.iter().any(|l| l.contains(r#"pipeline_stage_name="direct \"quoted\"\\stage""#)
                && l.contains("otel_scope_name=\"pipetel\"")),
            "{items:?}"
        );
        assert_eq!(got["pipeline_worker_memory_usage_bytes"].1.iter().filter(|l| l.contains("explicit")).count(), 2);

        let (want, got) = (families(&sdk_open, &id), families(&open, &id));
        assert_eq!(got, want, "SDK:\n{sdk_open}\nnative:\n{open}");
        assert!(
            got["pipeline_worker_items_total"].0.iter().any(|l| l == "# TYPE pipeline_worker_items counter"),
            "{got:#?}"
        );

        // Installed, the table's series join an OTel family of the same name (here the
        // instruments' own: every series twice, one family block).
        let installed = super::DirectFamilies::install(100_000);
        let merged = render.render();
        drop(installed);
        let mine = format!("pipeline_execution_id=\"{id}\"");
        let items = |text: &str| -> usize {
            text.lines().filter(|l| l.starts_with("pipeline_worker_items_total{") && l.contains(&mine)).count()
        };
        assert_eq!(items(&merged), 2 * items(&sdk_text), "{merged}");
        assert_eq!(merged.matches("# TYPE pipeline_worker_items_total counter").count(), 1, "{merged}");
        drop((first, retry, stage));
    }

    #[test]
    fn worker_series_past_the_limit_fold_the_same_way() {
        let id = format!("direct-fold-{}", std::process::id());
        for index in 0..4 {
            emit_worker_stat(&worker_row("fold", &id, index, 1 << 20));
        }
        let reader = PullReader::new();
        let provider = SdkMeterProvider::builder().with_reader(reader.clone()).build();
        super::register(&provider.meter(crate::global::SCOPE_NAME), 2);
        let sdk_text = PrometheusRender::new(reader).render();
        let direct = super::DirectFamilies::new(2);
        let mut text = String::new();
        direct.write_exposition(&mut Page::new(&mut text, Format::Text));
        drop(direct);
        // Other tests' shards share the table: compare which series exist, not the sums.
        let series = |text: &str| -> Vec<String> {
            let mut v: Vec<String> = text
                .lines()
                .filter(|l| l.starts_with("pipeline_worker_"))
                .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_string()))
                .filter(|s| s.contains("otel_metric_overflow"))
                .collect();
            v.sort();
            v
        };
        let (want, got) = (series(&sdk_text), series(&text));
        assert_eq!(got, want, "SDK:\n{sdk_text}\nnative:\n{text}");
        assert_eq!(
            got,
            [
                "pipeline_worker_bytes_total{otel_metric_overflow=\"true\",otel_scope_name=\"pipetel\"}",
                "pipeline_worker_cpu_time_seconds_total{otel_metric_overflow=\"true\",otel_scope_name=\"pipetel\"}",
                "pipeline_worker_items_total{otel_metric_overflow=\"true\",otel_scope_name=\"pipetel\"}",
            ],
            "counters fold into one overflow series, gauges drop: {text}"
        );
        // Within the limit: one series per gauge family besides nothing else.
        assert_eq!(text.lines().filter(|l| l.starts_with("pipeline_worker_memory_usage_bytes{")).count(), 1, "{text}");
    }
}

#[cfg(test)]
mod family_tests {
    #[test]
    fn every_family_is_observed_with_the_instrument_its_table_declares() {
        for o in super::observables(10) {
            assert_eq!(o.instrument(), o.family.instrument, "{}", o.family.name);
        }
    }
}
