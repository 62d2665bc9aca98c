//! What the hub did with an envelope, why it refused one, and how it sees a source.

use std::time::Duration;

use pipetel_recorders::DecodeError;

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
    /// Accepting the envelope would track more sources than
    /// [`HubConfig::max_sources`](super::HubConfig::max_sources).
    #[error("source {source_id:?} refused: the hub already tracks {limit} sources")]
    TooManySources {
        /// The refused source.
        source_id: String,
        /// The limit.
        limit: usize,
    },
    /// Accepting the envelope would track more families than
    /// [`HubConfig::max_families`](super::HubConfig::max_families).
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

/// What a source looks like to the hub, from [`SnapshotHub::sources`](super::SnapshotHub::sources).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SourceStatus {
    /// The source id.
    pub source: String,
    /// The sequence of its latest accepted envelope.
    pub sequence: u64,
    /// Time since its latest accepted envelope.
    pub silent_for: Duration,
    /// Whether it is left out of gauges
    /// ([`HubConfig::stale_after`](super::HubConfig::stale_after) passed).
    pub stale: bool,
    /// Restarts recognised so far.
    pub restarts: u64,
}
