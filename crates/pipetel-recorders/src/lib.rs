//! Dependency-free metric recorders for processes that are not the exporter.
//!
//! A worker process, a subprocess or a short-lived task keeps [`Counter`]s, [`Gauge`]s,
//! [`Histogram`]s and [`EdgeTransfers`], takes **cumulative** [`MetricSnapshot`]s of them and
//! sends those on a channel it already has (its stdout pipe, a socket, an in-process
//! [`channel`]). The exporting process keeps the latest [`Envelope`] per source and exports the
//! [`merge`] of them. Because snapshots are totals since the recorder started, never deltas, a
//! lost, repeated or reordered message cannot corrupt a counter: the next one supersedes it.
//!
//! The crate needs only `std` (plus a derive for its error types); `serde` support is behind a
//! feature.
//!
//! # Quick start
//! ```
//! use pipetel_recorders::{merge, Counter, Envelope, Family, Histogram};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Worker side: declare families once, record on the hot path, snapshot at an interval.
//! let items = Family::counter("pipeline.stage.items", "Items processed", "{item}",
//!                             &["pipeline.stage.name"])?;
//! let latency = Family::histogram("task.duration", "Task duration", "s", &[], &[0.01, 0.1, 1.0])?;
//! let counter = Counter::new(items.clone())?;
//! let histogram = Histogram::new(latency)?;
//! counter.add(&["tokenize"], 128.0)?;
//! counter.inc(&["detokenize"])?;
//! histogram.observe(&[], 0.042)?;
//!
//! let mut sequence = 0;
//! sequence += 1;
//! let bytes = Envelope::new("worker-1", sequence, vec![counter.snapshot(), histogram.snapshot()])
//!     .encode();
//! // ... write `bytes` to a pipe, e.g. with `FrameWriter::send` ...
//!
//! // Exporter side: decode what each source sent and merge per family.
//! let from_worker_1 = Envelope::decode(&bytes)?;
//! let from_worker_2 = from_worker_1.clone(); // another process, same families
//! let total = merge(&items, &[from_worker_1.snapshots[0].clone(),
//!                             from_worker_2.snapshots[0].clone()])?;
//! assert_eq!(total.get(&["tokenize"]).map(|s| s.value), Some(256.0));
//! assert_eq!(total.family().unit(), "{item}");
//! # Ok(())
//! # }
//! ```
//!
//! # Thread-safety
//! Recorders are deliberately not thread-safe: one recorder per thread, as with the recorders
//! this design follows. [`Counter`], [`Gauge`] and [`Histogram`] record through `&self` with
//! plain (non-atomic) adds, so they are [`Send`] (move one to the thread that records) but not
//! [`Sync`] (they cannot be shared between threads). [`EdgeTransfers`] records through
//! `&mut self`; other threads read its published snapshots through an [`EdgeReader`].
//! Snapshots, families and envelopes are plain immutable data, `Send` and `Sync`. Threads that
//! record the same family each take their own snapshot, and the snapshots are merged.
//!
//! # Pieces
//! | piece | what |
//! | --- | --- |
//! | [`Family`], [`Catalog`] | name, help, unit, [`Kind`], label names, bucket bounds; validated at construction |
//! | [`Counter`], [`Gauge`], [`Histogram`] | per-thread recorders keyed by label values |
//! | [`MetricSnapshot`], [`Series`] | columnar cumulative snapshot of one family, sorted by label values |
//! | [`merge`], [`MetricSnapshot::is_reset_from`] | sum across sources; detect a restarted source |
//! | [`EdgeTransfers`] | bytes / transfers / tensors / seconds per (src, dst) edge |
//! | [`Envelope`], [`codec`] | source id + sequence + snapshots; compact versioned binary encoding |
//! | [`FrameWriter`], [`FrameReader`], [`channel`] | length-prefixed frames over any stream; in-process channel |
//! | [`duration`] | the one text grammar of durations shared by every pipetel setting |
//!
//! # Features
//! | feature | default | what |
//! | --- | --- | --- |
//! | `serde` | no | `Serialize` / `Deserialize` for [`Family`], [`Kind`], [`MetricSnapshot`] and [`Envelope`] (deserializing validates like [`MetricSnapshot::from_columns`]) |

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod codec;
pub mod duration;
pub mod edge;
mod family;
mod index;
mod recorder;
mod snapshot;
pub mod transport;

pub use codec::DecodeError;
pub use edge::{EdgeFamilies, EdgeReader, EdgeTransfers, Endpoint, Published};
pub use family::{Catalog, CatalogError, Family, FamilyError, Kind, MAX_LABEL_NAMES, MAX_NAME_LEN};
pub use recorder::{Counter, Gauge, Histogram, RecordError};
pub use snapshot::{merge, Columns, Envelope, MergeError, MetricSnapshot, Series, SnapshotError};
pub use transport::{channel, FrameError, FrameReader, FrameWriter, Receiver, RecvError, SendError, Sender};
