//! The snapshot hub: exports the latest merged view of recorder snapshots sent by other processes.
//!
//! Worker processes (or threads, or short-lived tasks) keep [`pipetel_recorders`] recorders and
//! send cumulative [`Envelope`]s — a source id, a sequence number and snapshots — over a channel
//! they already have. A [`SnapshotHub`] in the exporting process keeps the latest envelope per
//! source and exports the sum across sources through OTel observable instruments, under the
//! families' names, units and descriptions.
//!
//! ```
//! use pipetel_core::hub::{HubConfig, Ingested, SnapshotHub};
//! use pipetel_core::recorders::{Counter, Envelope, Family};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let hub = SnapshotHub::new(HubConfig::default()); // instruments on `pipetel_core::meter()`
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
//! | histogram ([`HistogramExport::SnapshotOnly`]) | none | whatever renders [`SnapshotHub::snapshot`] (a direct histogram encoder) |
//!
//! OTel has no observable histogram, and recording synthetic observations into a synchronous
//! histogram would lose the exact sum; the series above keep every number exact. They are
//! non-monotonic sums named in Prometheus form so that a collector's Prometheus exporter or
//! remote write (which add `_total` to monotonic sums and a unit word to names without it)
//! yields exactly the pull endpoint's `_bucket{le}`, `_sum` and `_count` series:
//! `histogram_quantile()` and the dashboards work the same on both routes (Prometheus types
//! them `gauge` through the collector, `histogram` on the pull endpoint).
//!
//! [`Envelope`]: pipetel_recorders::Envelope
//! [`MetricSnapshot::is_reset_from`]: pipetel_recorders::MetricSnapshot::is_reset_from

mod config;
mod direct;
mod instruments;
mod outcome;
mod snapshot_hub;
mod state;
mod transport;
mod view;

pub use config::{
    HistogramExport, HubConfig, BUCKET_BOUND_ATTRIBUTE, DEFAULT_MAX_FAMILIES, DEFAULT_MAX_SOURCES, DEFAULT_STALE_AFTER,
};
pub use outcome::{HubError, Ingested, SourceStatus};
pub use snapshot_hub::SnapshotHub;
pub use transport::TransportReport;

#[cfg(test)]
mod tests;
