//! The snapshot hub: exports the latest merged view of recorder snapshots sent by other processes.
//!
//! Worker processes (or threads, or short-lived tasks) keep [`pipetel_recorders`] recorders and
//! send cumulative [`Envelope`]s — a source id, a sequence number and snapshots — over a channel
//! they already have. A [`SnapshotHub`] in the exporting process keeps the latest envelope per
//! source and exports the sum across sources through OTel observable instruments, under the
//! families' names, units and descriptions.
//!
//! ```
//! use pipetel::hub::{HubConfig, Ingested, SnapshotHub};
//! use pipetel::recorders::{Counter, Envelope, Family};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hub = SnapshotHub::new(HubConfig::default()); // instruments on `pipetel::meter()`
//!
//! // In a worker: record, snapshot, send the envelope's bytes (a pipe, a socket...).
//! let items = Counter::new(Family::counter("pipeline.stage.items", "Items", "{item}", &["stage"])?)?;
//! items.add(&["tokenize"], 128.0)?;
//! let bytes = Envelope::new("worker-1", 1, vec![items.snapshot()]).encode();
//!
//! // In the exporter: untrusted bytes in, validated, merged, exported.
//! assert_eq!(hub.ingest_bytes(&bytes)?, Ingested::Accepted);
//! assert_eq!(hub.ingest_bytes(&bytes)?, Ingested::Duplicate);
//! let merged = hub.snapshot();
//! assert_eq!(merged[0].get(&["tokenize"]).map(|s| s.value), Some(128.0));
//! # Ok(())
//! # }
//! ```
//!
//! # Rules
//! - **Latest per source.** An envelope whose sequence is not above the last accepted one from
//!   its source is a late or repeated message and is ignored ([`Ingested::Superseded`],
//!   [`Ingested::Duplicate`]); because snapshots are cumulative, a lost envelope is simply
//!   superseded by the next. A family missing from a newer envelope keeps its last snapshot, so a
//!   worker may send only what changed.
//! - **Restarts.** A source that restarts starts its recorders from zero. The hub recognises
//!   that by *value regression*: an envelope in which some counter or histogram series went
//!   down (or disappeared) against the latest one, see [`MetricSnapshot::is_reset_from`]. The
//!   previous totals are then carried forward as an offset, as Prometheus `rate()` does for
//!   counter resets, so an exported counter never goes backwards. A late message from before
//!   the restart also looks lower, so regression alone accepts it only when its sequence is
//!   *higher* ([`Ingested::Restarted`]); a restarted source whose sequence starts again from 1
//!   is recognised when the transport says the stream is new
//!   ([`SnapshotHub::ingest_on_new_stream`]; [`SnapshotHub::spawn_reader`] does so for each
//!   stream it reads) or, otherwise, as soon as its sequence passes the old one. Until then its
//!   new totals are held back (never lost: they are cumulative). A restarted source whose new
//!   totals already exceed the old ones before it is recognised is indistinguishable from
//!   growth and is undercounted, as with Prometheus counter resets between two scrapes.
//! - **Staleness.** A source that sent nothing accepted for [`HubConfig::stale_after`] is left
//!   out of gauges; its counters and histograms keep their contribution.
//! - **Monotonic export.** Sums of non-integer floats added in a different order can differ in
//!   the last bit; exported counter values and histogram sums are clamped to never fall below
//!   what was exported before, so `resets()` stays zero.
//! - **Untrusted input.** [`SnapshotHub::ingest_bytes`] decodes and validates; an envelope whose
//!   family clashes with one already known under that name (kind, unit, labels or bounds), that
//!   repeats a family, or that would exceed the source or family limits is refused whole, with
//!   an error naming the family. Nothing panics.
//!
//! # Representation
//! | family kind | OTel instrument(s) | Prometheus pull endpoint |
//! | --- | --- | --- |
//! | counter | `f64` observable counter `<name>` | `<name>_<unit>_total` |
//! | gauge | `f64` observable gauge `<name>` (sum of live sources) | `<name>_<unit>` |
//! | histogram ([`HistogramExport::Counters`]) | for push exporters (OTLP, console) only, named as the pull endpoint names the series (`<prom>` = `<name>_<unit>`): `i64` observable up-down counter `<prom>_bucket` with an extra `le` attribute (cumulative count per upper bound, `+Inf` last), `i64` observable up-down counter `<prom>_count`, `f64` observable up-down counter `<prom>_sum` | a real histogram rendered by the hub itself: `<name>_<unit>_bucket{le=..}`, `<name>_<unit>_sum`, `<name>_<unit>_count` |
//! | histogram ([`HistogramExport::SnapshotOnly`]) | none | whatever renders [`SnapshotHub::snapshot`] (a native histogram encoder) |
//!
//! OTel has no observable histogram, and recording synthetic observations into a synchronous
//! histogram would lose the exact sum; the series above keep every number exact. They are
//! non-monotonic sums named in Prometheus form so that a collector's Prometheus exporter or
//! remote write (which add `_total` to monotonic sums and a unit word to names without it)
//! yields exactly the pull endpoint's `_bucket{le}`, `_sum` and `_count` series:
//! `histogram_quantile()` and the dashboards work the same on both routes (Prometheus types
//! them `gauge` through the collector, `histogram` on the pull endpoint).

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;
use pipetel_recorders::{
    merge, DecodeError, Envelope, Family, FrameError, FrameReader, Kind, MetricSnapshot, Receiver, RecvError,
};

use crate::installed::{Installed, Rebind};
use crate::sync::lock;

#[cfg(test)]
mod tests;

/// How long a silent source still counts in gauges, unless configured.
pub const DEFAULT_STALE_AFTER: Duration = Duration::from_secs(60);
/// The most sources a hub tracks, unless configured.
pub const DEFAULT_MAX_SOURCES: usize = 10_000;
/// The most families a hub tracks, unless configured.
pub const DEFAULT_MAX_FAMILIES: usize = 1_000;
/// The attribute naming a histogram bucket's upper bound (as in Prometheus).
pub const BUCKET_BOUND_ATTRIBUTE: &str = "le";

/// How histogram families are exported through OTel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HistogramExport {
    /// Observable up-down counters `<prom>_bucket` (with an `le` attribute), `<prom>_count` and
    /// `<prom>_sum`, where `<prom>` is the family's Prometheus name: exact, usable with
    /// `histogram_quantile()`, and named the same through a collector as on the pull endpoint.
    #[default]
    Counters,
    /// No OTel instruments; histograms are read through [`SnapshotHub::snapshot`] by an encoder
    /// that renders native histograms.
    SnapshotOnly,
}

/// Settings of a [`SnapshotHub`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct HubConfig {
    /// A source silent (nothing accepted) for longer than this is left out of gauges.
    pub stale_after: Duration,
    /// How histogram families are exported.
    pub histograms: HistogramExport,
    /// The most sources tracked; an envelope from one more is refused.
    pub max_sources: usize,
    /// The most families tracked; an envelope bringing one more is refused.
    pub max_families: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            stale_after: DEFAULT_STALE_AFTER,
            histograms: HistogramExport::default(),
            max_sources: DEFAULT_MAX_SOURCES,
            max_families: DEFAULT_MAX_FAMILIES,
        }
    }
}

impl HubConfig {
    /// Sets [`HubConfig::stale_after`].
    pub fn with_stale_after(mut self, stale_after: Duration) -> Self {
        self.stale_after = stale_after;
        self
    }

    /// Sets [`HubConfig::histograms`].
    pub fn with_histograms(mut self, histograms: HistogramExport) -> Self {
        self.histograms = histograms;
        self
    }

    /// Sets [`HubConfig::max_sources`].
    pub fn with_max_sources(mut self, max_sources: usize) -> Self {
        self.max_sources = max_sources;
        self
    }

    /// Sets [`HubConfig::max_families`].
    pub fn with_max_families(mut self, max_families: usize) -> Self {
        self.max_families = max_families;
        self
    }
}

/// Why an envelope was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// The bytes are not a valid envelope.
    #[error("invalid envelope: {0}")]
    Decode(#[from] DecodeError),
    /// A snapshot's family differs from the family already known under its name.
    #[error("source {source_id:?} sent family {family:?} as {found}, but it is known as {expected}")]
    FamilyConflict {
        /// The sending source.
        source_id: String,
        /// The family name.
        family: String,
        /// The known family (kind, unit, labels, bounds).
        expected: String,
        /// What the envelope carried.
        found: String,
    },
    /// The envelope carries two snapshots of one family.
    #[error("source {source_id:?} sent family {family:?} twice in one envelope")]
    DuplicateFamily {
        /// The sending source.
        source_id: String,
        /// The family name.
        family: String,
    },
    /// Accepting the envelope would track more sources than [`HubConfig::max_sources`].
    #[error("source {source_id:?} refused: the hub already tracks {limit} sources")]
    TooManySources {
        /// The refused source.
        source_id: String,
        /// The limit.
        limit: usize,
    },
    /// Accepting the envelope would track more families than [`HubConfig::max_families`].
    #[error("family {family:?} from source {source_id:?} refused: the hub already tracks {limit} families")]
    TooManyFamilies {
        /// The sending source.
        source_id: String,
        /// The refused family.
        family: String,
        /// The limit.
        limit: usize,
    },
}

/// What the hub did with an envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Ingested {
    /// It is the source's latest.
    Accepted,
    /// The source restarted: its previous totals were carried forward and this envelope is its
    /// latest.
    Restarted,
    /// Its sequence is below the latest accepted one: a late message, ignored.
    Superseded,
    /// Its sequence equals the latest accepted one: a repeat, ignored.
    Duplicate,
}

/// What a source looks like to the hub, from [`SnapshotHub::sources`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SourceStatus {
    /// The source id.
    pub source: String,
    /// The sequence of its latest accepted envelope.
    pub sequence: u64,
    /// Time since its latest accepted envelope.
    pub silent_for: Duration,
    /// Whether it is left out of gauges ([`HubConfig::stale_after`] passed).
    pub stale: bool,
    /// Restarts recognised so far.
    pub restarts: u64,
}

/// What a transport helper did, returned when its thread ends.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct TransportReport {
    /// Envelopes (or frames) received.
    pub received: u64,
    /// Of those, accepted as the latest (including restarts).
    pub accepted: u64,
    /// Of those, recognised as restarts.
    pub restarts: u64,
    /// Of those, ignored as late or repeated.
    pub ignored: u64,
    /// Of those, refused as invalid (each logged).
    pub refused: u64,
    /// The stream error that ended a reader early (the stream is then out of step), if any.
    pub error: Option<FrameError>,
}

impl TransportReport {
    fn count(&mut self, outcome: &Result<Ingested, HubError>) {
        self.received += 1;
        match outcome {
            Ok(Ingested::Accepted) => self.accepted += 1,
            Ok(Ingested::Restarted) => {
                self.accepted += 1;
                self.restarts += 1;
            }
            Ok(Ingested::Superseded | Ingested::Duplicate) => self.ignored += 1,
            Err(error) => {
                self.refused += 1;
                // The first refusal names the problem; a flood of them must not flood the log.
                if self.refused == 1 {
                    tracing::warn!(target: "pipetel", %error, "snapshot hub refused an envelope");
                }
            }
        }
    }
}

/// Keeps the latest cumulative snapshots per source and exports their sum through OTel
/// observable instruments. Cheap to clone (clones share the state); `Send` and `Sync`.
///
/// See the [module docs](self) for the rules and the representation.
#[derive(Clone)]
pub struct SnapshotHub {
    state: Arc<Mutex<State>>,
    instruments: Arc<Instruments>,
    #[cfg(feature = "prometheus")]
    _exposition: Arc<dyn crate::exposition::ExpositionSource>,
}

/// Where a hub's instruments go.
enum Meters {
    /// The meters `init` installed (the installed context): a hub made before `init` registers
    /// its instruments again when it runs.
    Installed,
    /// Fixed meters: values, and histograms as counters.
    Fixed { meter: Meter, push_meter: Meter },
}

/// The OTel instruments of a hub's families.
struct Instruments {
    meters: Meters,
    state: Weak<Mutex<State>>,
    histograms: HistogramExport,
    /// Families whose instruments are registered, and the context generation they were
    /// registered in. Separate from `state` on purpose: the SDK runs callbacks (which lock
    /// `state`) under its own pipeline lock, and registering an instrument takes that pipeline
    /// lock, so registering while holding `state` could deadlock.
    registered: Mutex<(u64, HashSet<String>)>,
}

impl std::fmt::Debug for SnapshotHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = lock(&self.state);
        f.debug_struct("SnapshotHub")
            .field("sources", &state.sources.len())
            .field("families", &state.families.len())
            .field("config", &state.config)
            .finish_non_exhaustive()
    }
}

impl SnapshotHub {
    /// A hub exporting through [`crate::meter`]: the meter provider [`crate::init`] installs,
    /// also when the hub is made before `init` (its instruments are registered again when `init`
    /// runs); before `init`, the global meter provider.
    pub fn new(config: HubConfig) -> SnapshotHub {
        let hub = SnapshotHub::with_meters(config, Meters::Installed);
        let listener: Weak<Instruments> = Arc::downgrade(&hub.instruments);
        crate::installed::register(listener);
        hub
    }

    /// A hub exporting through `meter`.
    pub fn with_meter(config: HubConfig, meter: Meter) -> SnapshotHub {
        SnapshotHub::with_meters(config, Meters::Fixed { meter: meter.clone(), push_meter: meter })
    }

    fn with_meters(config: HubConfig, meters: Meters) -> SnapshotHub {
        let histograms = config.histograms;
        let state = Arc::new(Mutex::new(State::new(config)));
        #[cfg(feature = "prometheus")]
        let exposition: Arc<dyn crate::exposition::ExpositionSource> =
            Arc::new(NativeHistograms(Arc::downgrade(&state)));
        #[cfg(feature = "prometheus")]
        crate::exposition::add_exposition_source(&exposition);
        let instruments = Arc::new(Instruments {
            meters,
            state: Arc::downgrade(&state),
            histograms,
            registered: Mutex::new((0, HashSet::new())),
        });
        SnapshotHub {
            state,
            instruments,
            #[cfg(feature = "prometheus")]
            _exposition: exposition,
        }
    }

    /// Decodes `bytes` (an [`Envelope::encode`] output, e.g. one frame's payload) and ingests it.
    ///
    /// # Errors
    /// [`HubError::Decode`] for garbage, truncated or wrong-version bytes; otherwise as
    /// [`SnapshotHub::ingest`].
    pub fn ingest_bytes(&self, bytes: &[u8]) -> Result<Ingested, HubError> {
        self.ingest(Envelope::decode(bytes)?)
    }

    /// Ingests one envelope (see the [module docs](self) for the rules).
    ///
    /// # Errors
    /// [`HubError::FamilyConflict`] when a family clashes with the one known under its name,
    /// [`HubError::DuplicateFamily`], [`HubError::TooManySources`],
    /// [`HubError::TooManyFamilies`]. A refused envelope changes nothing.
    pub fn ingest(&self, envelope: Envelope) -> Result<Ingested, HubError> {
        self.ingest_at(envelope, false, Instant::now())
    }

    /// Ingests the first envelope a source sends on a new stream (a new pipe, connection or
    /// process). Besides the rules of [`SnapshotHub::ingest`], an envelope whose sequence is
    /// *not* above the latest but whose counters went down is then taken as a restarted source
    /// whose sequence started again, rather than as a late message: a stream that was just
    /// opened cannot carry messages older than the ones already received.
    ///
    /// # Errors
    /// As [`SnapshotHub::ingest`].
    pub fn ingest_on_new_stream(&self, envelope: Envelope) -> Result<Ingested, HubError> {
        self.ingest_at(envelope, true, Instant::now())
    }

    fn ingest_at(&self, envelope: Envelope, new_stream: bool, now: Instant) -> Result<Ingested, HubError> {
        let (outcome, new_families) = lock(&self.state).ingest(envelope, new_stream, now)?;
        // Outside the state lock: see `registered`.
        for family in new_families {
            self.instruments.register(&family);
        }
        Ok(outcome)
    }

    /// Starts a thread that reads length-prefixed frames ([`pipetel_recorders::FrameWriter`])
    /// from `reader` until it ends, ingesting each. The stream counts as new for each source:
    /// until an envelope of a source is accepted on it, envelopes of that source are ingested
    /// with [`SnapshotHub::ingest_on_new_stream`]. Invalid envelopes are counted and logged and
    /// the stream read on; a broken stream (truncated frame, oversized length, I/O error) ends
    /// the thread with the error in its report.
    ///
    /// # Errors
    /// The I/O error of the operating system refusing a thread.
    pub fn spawn_reader<R: Read + Send + 'static>(&self, reader: R) -> std::io::Result<JoinHandle<TransportReport>> {
        let hub = self.clone();
        std::thread::Builder::new().name("pipetel-hub-reader".into()).spawn(move || hub.read_stream(reader))
    }

    /// Reads length-prefixed frames from `reader` on this thread until it ends; as
    /// [`SnapshotHub::spawn_reader`].
    pub fn read_stream<R: Read>(&self, reader: R) -> TransportReport {
        let mut frames = FrameReader::new(reader);
        let mut report = TransportReport::default();
        let mut settled: HashSet<String> = HashSet::new();
        loop {
            match frames.read_frame() {
                Ok(None) => break,
                Ok(Some(payload)) => {
                    let outcome = Envelope::decode(&payload).map_err(HubError::from).and_then(|envelope| {
                        let source = envelope.source.clone();
                        let fresh = !settled.contains(&source);
                        let outcome = self.ingest_at(envelope, fresh, Instant::now());
                        if fresh && matches!(outcome, Ok(Ingested::Accepted | Ingested::Restarted)) {
                            settled.insert(source);
                        }
                        outcome
                    });
                    report.count(&outcome);
                }
                Err(error) => {
                    tracing::warn!(target: "pipetel", %error, "snapshot stream broken; reading stopped");
                    report.error = Some(error);
                    break;
                }
            }
        }
        report
    }

    /// Ingests every envelope queued on an in-process [`pipetel_recorders::channel`] now,
    /// without waiting; returns what it did.
    pub fn pump(&self, receiver: &Receiver) -> TransportReport {
        let mut report = TransportReport::default();
        for envelope in receiver.drain() {
            let outcome = self.ingest(envelope);
            report.count(&outcome);
        }
        report
    }

    /// Starts a thread that ingests envelopes from an in-process [`pipetel_recorders::channel`]
    /// as they arrive, until every sender is gone.
    ///
    /// # Errors
    /// The I/O error of the operating system refusing a thread.
    pub fn spawn_pump(&self, receiver: Receiver) -> std::io::Result<JoinHandle<TransportReport>> {
        let hub = self.clone();
        std::thread::Builder::new().name("pipetel-hub-pump".into()).spawn(move || {
            let mut report = TransportReport::default();
            loop {
                match receiver.recv_timeout(Duration::from_secs(3600)) {
                    Ok(envelope) => {
                        let outcome = hub.ingest(envelope);
                        report.count(&outcome);
                    }
                    Err(RecvError::Timeout) => {}
                    Err(_) => break,
                }
            }
            report
        })
    }

    /// The merged view now, one snapshot per family in name order: counters and histograms
    /// summed over every source (with restarted sources' earlier totals), gauges over live
    /// sources. These are the values the instruments export; an encoder that renders native
    /// histograms reads them here.
    pub fn snapshot(&self) -> Vec<MetricSnapshot> {
        let mut state = lock(&self.state);
        let now = Instant::now();
        let names: Vec<String> = state.families.keys().cloned().collect();
        names.iter().filter_map(|name| state.view(name, now).map(|v| v.snapshot.clone())).collect()
    }

    /// The sources seen so far, in id order.
    pub fn sources(&self) -> Vec<SourceStatus> {
        let state = lock(&self.state);
        let now = Instant::now();
        state
            .sources
            .iter()
            .map(|(id, s)| SourceStatus {
                source: id.clone(),
                sequence: s.sequence,
                silent_for: now.saturating_duration_since(s.last_accepted),
                stale: state.is_stale(s, now),
                restarts: s.restarts,
            })
            .collect()
    }
}

impl Instruments {
    /// The generation of the meters and the meters: the installed context's, where histograms
    /// go as counters only when something pushes (the pull endpoint renders them natively);
    /// before `init`, the global provider's, push-only scope included.
    fn meters(&self) -> (u64, Meter, Option<Meter>) {
        match &self.meters {
            Meters::Fixed { meter, push_meter } => (0, meter.clone(), Some(push_meter.clone())),
            Meters::Installed => {
                let installed = crate::installed::current();
                let push = match installed.generation {
                    0 => Some(opentelemetry::global::meter(crate::installed::PUSH_ONLY_SCOPE)),
                    _ => installed.push_only,
                };
                (installed.generation, installed.meter, push)
            }
        }
    }

    /// Registers the OTel instruments of a family once per generation of the meters.
    fn register(&self, family: &Family) {
        let mut registered = lock(&self.registered);
        let (generation, meter, push_meter) = self.meters();
        if registered.0 != generation {
            *registered = (generation, HashSet::new());
        }
        if !registered.1.insert(family.name().to_owned()) {
            return;
        }
        let name = family.name().to_owned();
        let help = family.help().to_owned();
        let unit = family.unit().to_owned();
        let weak = self.state.clone();
        match family.kind() {
            Kind::Counter => {
                meter
                    .f64_observable_counter(name.clone())
                    .with_description(help)
                    .with_unit(unit)
                    .with_callback(move |o| observe(&weak, &name, |view| view.observe_values(o)))
                    .build();
            }
            Kind::Gauge => {
                meter
                    .f64_observable_gauge(name.clone())
                    .with_description(help)
                    .with_unit(unit)
                    .with_callback(move |o| observe(&weak, &name, |view| view.observe_values(o)))
                    .build();
            }
            Kind::Histogram if self.histograms == HistogramExport::Counters => {
                let Some(push_meter) = push_meter else { return };
                // Named as the pull endpoint renders the family (`<prom>_bucket{le}`, `_sum`,
                // `_count`) and non-monotonic, so a collector's Prometheus translation keeps the
                // names as they are (a monotonic sum would gain `_total`, a unit a word).
                use crate::exposition::{prometheus_name, unit_keeping_name, MetricType};
                let prom = prometheus_name(&name, &unit, false, false);
                let series = |suffix: &str, unit: &str| {
                    let n = format!("{prom}_{suffix}");
                    let u = unit_keeping_name(&n, unit, MetricType::UpDownSum).to_owned();
                    (n, u)
                };
                let (n, w) = (name.clone(), weak.clone());
                let (bucket, bucket_unit) = series("bucket", "{observation}");
                push_meter
                    .i64_observable_up_down_counter(bucket)
                    .with_description(format!("{help} (cumulative count per bucket upper bound `le`)"))
                    .with_unit(bucket_unit)
                    .with_callback(move |o| observe(&w, &n, |view| view.observe_buckets(&AsI64(o))))
                    .build();
                let (n, w) = (name.clone(), weak.clone());
                let (count, count_unit) = series("count", "{observation}");
                push_meter
                    .i64_observable_up_down_counter(count)
                    .with_description(format!("{help} (count of observations)"))
                    .with_unit(count_unit)
                    .with_callback(move |o| observe(&w, &n, |view| view.observe_counts(&AsI64(o))))
                    .build();
                let (sum, sum_unit) = series("sum", &unit);
                push_meter
                    .f64_observable_up_down_counter(sum)
                    .with_description(format!("{help} (sum of observations)"))
                    .with_unit(sum_unit)
                    .with_callback(move |o| observe(&weak, &name, |view| view.observe_sums(o)))
                    .build();
            }
            Kind::Histogram => {}
        }
    }
}

/// A hub made with [`SnapshotHub::new`] registers its families' instruments again on the meter
/// provider `init` installs.
impl Rebind for Instruments {
    fn rebind(&self, _: &Installed) {
        let Some(state) = self.state.upgrade() else { return };
        // Collected first: registering must not hold the state lock (see `registered`).
        let families: Vec<Family> = lock(&state).families.values().map(|e| e.family.clone()).collect();
        drop(state);
        for family in &families {
            self.register(family);
        }
    }
}

/// Counts observed into an `i64` up-down counter (the push form of a histogram's buckets and
/// count); a count beyond `i64::MAX` reads as `i64::MAX`.
struct AsI64<'a>(&'a dyn AsyncInstrument<i64>);

impl AsyncInstrument<u64> for AsI64<'_> {
    fn observe(&self, measurement: u64, attributes: &[KeyValue]) {
        self.0.observe(i64::try_from(measurement).unwrap_or(i64::MAX), attributes);
    }
}

/// Renders the merged histograms as real Prometheus histograms on the pull endpoint
/// (`<name>_bucket{le}`, `<name>_sum`, `<name>_count`), while push exporters get the counters.
#[cfg(feature = "prometheus")]
struct NativeHistograms(Weak<Mutex<State>>);

#[cfg(feature = "prometheus")]
impl crate::exposition::ExpositionSource for NativeHistograms {
    fn write_exposition(&self, page: &mut crate::exposition::Page<'_>) {
        use crate::exposition::{label_key, BoundsText, MetricType, OwnFamily};
        let Some(state) = self.0.upgrade() else { return };
        let mut state = lock(&state);
        if state.config.histograms != HistogramExport::Counters {
            return;
        }
        let now = Instant::now();
        let names: Vec<String> =
            state.families.iter().filter(|(_, e)| e.family.kind() == Kind::Histogram).map(|(n, _)| n.clone()).collect();
        for name in names {
            let Some(family) = state.families.get(&name).map(|e| e.family.clone()) else { continue };
            let Some(view) = state.view(&name, now) else { continue };
            // Named and labelled as the encoder writes an OTel histogram of pipetel's meter.
            let (unit, help) = (family.unit(), family.help());
            let mut own =
                OwnFamily::new(page.writer(), family.name(), unit, MetricType::Histogram, help).with_unit_line(unit);
            own.header();
            let keys: Vec<String> = family.label_names().iter().map(|k| label_key(k)).collect();
            let bounds = BoundsText::of(family.bounds());
            for series in view.snapshot.series() {
                let s = own.series(|labels| {
                    for (k, v) in keys.iter().zip(series.labels.iter()) {
                        labels.pair(k, v.as_ref());
                    }
                });
                let cumulative = series.bucket_counts.iter().copied();
                s.writer.histogram(s.name, s.labels, bounds.get(), cumulative, series.count(), series.sum);
            }
        }
    }
}

/// A callback body: the family's current view, if the hub still exists.
fn observe(state: &Weak<Mutex<State>>, name: &str, f: impl FnOnce(&View)) {
    // A dropped hub leaves its callbacks registered with the SDK; they then observe nothing.
    let Some(state) = state.upgrade() else { return };
    let mut state = lock(&state);
    if let Some(view) = state.view(name, Instant::now()) {
        f(view);
    }
}

struct SourceState {
    sequence: u64,
    last_accepted: Instant,
    /// The latest snapshot per family name.
    latest: BTreeMap<String, MetricSnapshot>,
    /// Counter and histogram totals of earlier runs of this source, per family name.
    carried: BTreeMap<String, MetricSnapshot>,
    restarts: u64,
}

struct FamilyEntry {
    family: Family,
    /// Bumped whenever a snapshot of this family changes in any source.
    generation: u64,
    view: Option<View>,
}

/// A family's merged, exported view, cached until its inputs change.
struct View {
    generation: u64,
    /// For gauges: which sources were live when it was built.
    live: Vec<String>,
    snapshot: MetricSnapshot,
    /// Attributes per series.
    attrs: Vec<Vec<KeyValue>>,
    /// For histograms: attributes per series and bucket (the series' attributes plus `le`).
    bucket_attrs: Vec<Vec<KeyValue>>,
}

impl View {
    fn observe_values(&self, o: &dyn AsyncInstrument<f64>) {
        for (v, attrs) in self.snapshot.values().iter().zip(&self.attrs) {
            o.observe(*v, attrs);
        }
    }

    fn observe_sums(&self, o: &dyn AsyncInstrument<f64>) {
        for (v, attrs) in self.snapshot.sums().iter().zip(&self.attrs) {
            o.observe(*v, attrs);
        }
    }

    fn observe_counts(&self, o: &dyn AsyncInstrument<u64>) {
        for (s, attrs) in self.snapshot.series().zip(&self.attrs) {
            o.observe(s.count(), attrs);
        }
    }

    fn observe_buckets(&self, o: &dyn AsyncInstrument<u64>) {
        for (c, attrs) in self.snapshot.bucket_counts().iter().zip(&self.bucket_attrs) {
            o.observe(*c, attrs);
        }
    }
}

struct State {
    config: HubConfig,
    families: BTreeMap<String, FamilyEntry>,
    sources: BTreeMap<String, SourceState>,
}

impl State {
    fn new(config: HubConfig) -> State {
        State { config, families: BTreeMap::new(), sources: BTreeMap::new() }
    }

    fn is_stale(&self, source: &SourceState, now: Instant) -> bool {
        now.saturating_duration_since(source.last_accepted) > self.config.stale_after
    }

    /// Validates, then applies. Returns the outcome and the families seen for the first time.
    fn ingest(
        &mut self,
        envelope: Envelope,
        new_stream: bool,
        now: Instant,
    ) -> Result<(Ingested, Vec<Family>), HubError> {
        let new_families = self.validate(&envelope)?;
        let Envelope { source: id, sequence, snapshots } = envelope;
        let outcome = match self.sources.get(&id) {
            None => Ingested::Accepted,
            Some(source) => {
                let regressed = snapshots
                    .iter()
                    .any(|s| source.latest.get(s.name()).is_some_and(|earlier| s.is_reset_from(earlier)));
                if sequence > source.sequence {
                    if regressed {
                        Ingested::Restarted
                    } else {
                        Ingested::Accepted
                    }
                } else if new_stream && regressed {
                    Ingested::Restarted
                } else if sequence == source.sequence {
                    Ingested::Duplicate
                } else {
                    Ingested::Superseded
                }
            }
        };
        // Nothing is registered before the envelope is known to be applied.
        for family in &new_families {
            self.families
                .insert(family.name().to_owned(), FamilyEntry { family: family.clone(), generation: 0, view: None });
        }
        let mut touched: Vec<String> = snapshots.iter().map(|s| s.name().to_owned()).collect();
        match outcome {
            Ingested::Superseded | Ingested::Duplicate => return Ok((outcome, new_families)),
            Ingested::Accepted => {
                let source = self.sources.entry(id).or_insert_with(|| SourceState {
                    sequence,
                    last_accepted: now,
                    latest: BTreeMap::new(),
                    carried: BTreeMap::new(),
                    restarts: 0,
                });
                source.sequence = sequence;
                source.last_accepted = now;
                for snapshot in snapshots {
                    source.latest.insert(snapshot.name().to_owned(), snapshot);
                }
            }
            Ingested::Restarted => {
                let Some(source) = self.sources.get_mut(&id) else { return Ok((outcome, new_families)) };
                let previous = std::mem::take(&mut source.latest);
                for (name, snapshot) in previous {
                    touched.push(name.clone());
                    if snapshot.kind() == Kind::Gauge {
                        continue;
                    }
                    let total = match source.carried.remove(&name) {
                        // Same family object (the catalog's), so merging cannot fail; should it,
                        // keeping the larger run's totals is the least wrong answer.
                        Some(carried) => merge(snapshot.family(), &[carried, snapshot.clone()]).unwrap_or(snapshot),
                        None => snapshot,
                    };
                    source.carried.insert(name, total);
                }
                for snapshot in snapshots {
                    source.latest.insert(snapshot.name().to_owned(), snapshot);
                }
                source.sequence = sequence;
                source.last_accepted = now;
                source.restarts += 1;
            }
        }
        for name in touched {
            if let Some(entry) = self.families.get_mut(&name) {
                entry.generation += 1;
            }
        }
        Ok((outcome, new_families))
    }

    /// Checks an envelope against the catalog and the limits; returns the families it would add.
    fn validate(&self, envelope: &Envelope) -> Result<Vec<Family>, HubError> {
        let id = &envelope.source;
        if !self.sources.contains_key(id) && self.sources.len() >= self.config.max_sources {
            return Err(HubError::TooManySources { source_id: id.clone(), limit: self.config.max_sources });
        }
        let mut seen: HashSet<&str> = HashSet::new();
        let mut new_families = Vec::new();
        for snapshot in &envelope.snapshots {
            let family = snapshot.family();
            if !seen.insert(family.name()) {
                return Err(HubError::DuplicateFamily { source_id: id.clone(), family: family.name().to_owned() });
            }
            match self.families.get(family.name()) {
                Some(known) if known.family.compatible_with(family) => {}
                Some(known) => {
                    return Err(HubError::FamilyConflict {
                        source_id: id.clone(),
                        family: family.name().to_owned(),
                        expected: describe(&known.family),
                        found: describe(family),
                    })
                }
                None => {
                    if self.families.len() + new_families.len() >= self.config.max_families {
                        return Err(HubError::TooManyFamilies {
                            source_id: id.clone(),
                            family: family.name().to_owned(),
                            limit: self.config.max_families,
                        });
                    }
                    new_families.push(family.clone());
                }
            }
        }
        Ok(new_families)
    }

    /// The family's current view, rebuilt when its inputs changed.
    fn view(&mut self, name: &str, now: Instant) -> Option<&View> {
        let stale_after = self.config.stale_after;
        let entry = self.families.get_mut(name)?;
        let gauge = entry.family.kind() == Kind::Gauge;
        let live: Vec<String> = if gauge {
            self.sources
                .iter()
                .filter(|(_, s)| now.saturating_duration_since(s.last_accepted) <= stale_after)
                .map(|(id, _)| id.clone())
                .collect()
        } else {
            Vec::new()
        };
        let fresh = entry.view.as_ref().is_some_and(|v| v.generation == entry.generation && v.live == live);
        if !fresh {
            let mut inputs = Vec::new();
            for (id, source) in &self.sources {
                if gauge {
                    if live.binary_search(id).is_ok() {
                        inputs.extend(source.latest.get(name).cloned());
                    }
                } else {
                    inputs.extend(source.carried.get(name).cloned());
                    inputs.extend(source.latest.get(name).cloned());
                }
            }
            // Every input passed `compatible_with` against this family on intake.
            let merged = merge(&entry.family, &inputs).unwrap_or_else(|_| MetricSnapshot::empty(entry.family.clone()));
            let previous = entry.view.take();
            entry.view = Some(build_view(&entry.family, merged, previous, live, entry.generation));
        }
        entry.view.as_ref()
    }
}

/// A view over `merged`: monotonic against `previous` for counters and histogram sums, with
/// attributes reused from `previous` when the series are the same.
fn build_view(
    family: &Family,
    merged: MetricSnapshot,
    previous: Option<View>,
    live: Vec<String>,
    generation: u64,
) -> View {
    let kind = family.kind();
    let snapshot = match (&previous, kind) {
        (Some(prev), Kind::Counter | Kind::Histogram) => clamp(merged, &prev.snapshot),
        _ => merged,
    };
    let (attrs, bucket_attrs) = match previous {
        Some(prev) if prev.snapshot.label_values() == snapshot.label_values() => (prev.attrs, prev.bucket_attrs),
        _ => attributes(family, &snapshot),
    };
    View { generation, live, snapshot, attrs, bucket_attrs }
}

/// `merged` with every counter value and histogram sum at least what `previous` had for the
/// same series. Differences are float rounding only (inputs are cumulative and carried across
/// restarts), but one ulp down would read as a counter reset downstream.
fn clamp(merged: MetricSnapshot, previous: &MetricSnapshot) -> MetricSnapshot {
    let hist = merged.kind() == Kind::Histogram;
    let mut raised: Vec<(usize, f64)> = Vec::new();
    let mut j = 0;
    for (i, s) in merged.series().enumerate() {
        while j < previous.len() && previous.row(j) < s.labels {
            j += 1;
        }
        if j < previous.len() && previous.row(j) == s.labels {
            let before = if hist { previous.sums()[j] } else { previous.values()[j] };
            let now = if hist { s.sum } else { s.value };
            if now < before {
                raised.push((i, before));
            }
        }
    }
    if raised.is_empty() {
        return merged;
    }
    let columns = merged.clone().into_columns();
    let (mut values, mut sums) = (columns.values, columns.sums);
    for (i, v) in raised {
        if hist {
            sums[i] = v;
        } else {
            values[i] = v;
        }
    }
    MetricSnapshot::from_columns(columns.family, columns.label_values.to_vec(), values, columns.bucket_counts, sums)
        .unwrap_or(merged)
}

fn attributes(family: &Family, snapshot: &MetricSnapshot) -> (Vec<Vec<KeyValue>>, Vec<Vec<KeyValue>>) {
    let names: Vec<opentelemetry::Key> =
        family.label_names().iter().map(|n| opentelemetry::Key::new(n.clone())).collect();
    let attrs: Vec<Vec<KeyValue>> = snapshot
        .series()
        .map(|s| names.iter().zip(s.labels).map(|(k, v)| KeyValue::new(k.clone(), v.clone())).collect())
        .collect();
    let mut bucket_attrs = Vec::new();
    if family.kind() == Kind::Histogram {
        let bounds: Vec<String> =
            family.bounds().iter().map(|b| b.to_string()).chain(std::iter::once("+Inf".to_owned())).collect();
        bucket_attrs.reserve(attrs.len() * bounds.len());
        for series in &attrs {
            for bound in &bounds {
                let mut a = series.clone();
                a.push(KeyValue::new(BUCKET_BOUND_ATTRIBUTE, bound.clone()));
                bucket_attrs.push(a);
            }
        }
    }
    (attrs, bucket_attrs)
}

fn describe(family: &Family) -> String {
    let mut s = format!("a {} in {:?} with labels {:?}", family.kind(), family.unit(), family.label_names());
    if family.kind() == Kind::Histogram {
        s.push_str(&format!(" and bounds {:?}", family.bounds()));
    }
    s
}
