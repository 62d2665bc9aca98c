//! The hub itself: intake of envelopes and the merged view.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use opentelemetry::metrics::Meter;
use pipetel_recorders::{Envelope, MetricSnapshot};

use super::config::HubConfig;
use super::direct::DirectHistograms;
use super::instruments::{Instruments, Meters};
use super::outcome::{HubError, Ingested, SourceStatus};
use super::state::State;
use crate::sync::lock;

/// Keeps the latest cumulative snapshots per source and exports their sum through OTel
/// observable instruments. Cheap to clone (clones share the state); `Send` and `Sync`.
///
/// See the [module docs](super) for the rules and the representation.
#[derive(Clone)]
pub struct SnapshotHub {
    state: Arc<Mutex<State>>,
    instruments: Arc<Instruments>,
    _exposition: Arc<dyn crate::exposition::ExpositionSource>,
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
    /// A hub exporting through [`crate::meter`]: the meter provider `pipetel::init` installs,
    /// also when the hub is made before `init` (its instruments are registered again when `init`
    /// runs); before `init`, the global meter provider.
    pub fn new(config: HubConfig) -> SnapshotHub {
        let hub = SnapshotHub::with_meters(config, Meters::Installed);
        let listener: Weak<Instruments> = Arc::downgrade(&hub.instruments);
        crate::global::register(listener);
        hub
    }

    /// A hub exporting through `meter`.
    pub fn with_meter(config: HubConfig, meter: Meter) -> SnapshotHub {
        SnapshotHub::with_meters(config, Meters::Fixed { meter: meter.clone(), push_meter: meter })
    }

    fn with_meters(config: HubConfig, meters: Meters) -> SnapshotHub {
        let histograms = config.histograms;
        let state = Arc::new(Mutex::new(State::new(config)));
        let exposition: Arc<dyn crate::exposition::ExpositionSource> =
            Arc::new(DirectHistograms(Arc::downgrade(&state)));
        crate::exposition::add_exposition_source(&exposition);
        let instruments = Arc::new(Instruments {
            meters,
            state: Arc::downgrade(&state),
            histograms,
            registered: Mutex::new((0, HashSet::new())),
        });
        SnapshotHub { state, instruments, _exposition: exposition }
    }

    /// Decodes `bytes` (an [`Envelope::encode`] output, e.g. one frame's payload) and ingests it.
    ///
    /// # Errors
    /// [`HubError::Decode`] for garbage, truncated or wrong-version bytes; otherwise as
    /// [`SnapshotHub::ingest`].
    pub fn ingest_bytes(&self, bytes: &[u8]) -> Result<Ingested, HubError> {
        self.ingest(Envelope::decode(bytes)?)
    }

    /// Ingests one envelope (see the [module docs](super) for the rules).
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

    pub(super) fn ingest_at(&self, envelope: Envelope, new_stream: bool, now: Instant) -> Result<Ingested, HubError> {
        let (outcome, new_families) = lock(&self.state).ingest(envelope, new_stream, now)?;
        // Outside the state lock: see `registered`.
        for family in new_families {
            self.instruments.register(&family);
        }
        Ok(outcome)
    }

    /// The merged view now, one snapshot per family in name order: counters and histograms
    /// summed over every source (with restarted sources' earlier totals), gauges over live
    /// sources. These are the values the instruments export; an encoder that renders direct
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
