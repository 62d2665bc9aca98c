//! A Prometheus-compatible metrics registry on top of OpenTelemetry.
//!
//! For code written against a Prometheus client — counters, gauges, histograms and summaries
//! registered by name with help text, label sets, custom collectors, the text exposition — with
//! every metric exported through pipetel's OTel providers, so it reaches the pull endpoint and
//! OTLP alike.
//!
//! One type per kind, as in the `prometheus` and `prometheus-client` crates: a [`Counter`],
//! [`Gauge`], [`Histogram`] or [`Summary`] is one series, cheap to clone, the handle to record
//! through; a [`CounterVec`], [`GaugeVec`], [`HistogramVec`] or [`SummaryVec`] (a
//! [`MetricVec`]) is a labelled metric whose [`with`](MetricVec::with) gives the series of one
//! label set.
//!
//! ```
//! use pipetel_core::registry::{Opts, Registry};
//!
//! # fn main() -> Result<(), pipetel_core::registry::RegistryError> {
//! let app = Registry::new("app")?;
//! let requests = app.counter_vec("requests", "Requests served", &["method"])?; // a CounterVec
//! let get = requests.with([("method", "GET")])?; // a Counter: keep it, the hot path is `get.inc()`
//! get.inc();
//! let latency = app.histogram("request_duration_seconds", "Request latency")?; // a Histogram
//! latency.observe(0.042);
//! let sizes = app.histogram_with("request_size_bytes", "Request sizes", Opts::new().buckets([1e3, 1e6]))?;
//! sizes.observe(5e4);
//! assert!(app.prometheus_text().contains("app_requests_total{method=\"GET\"} 1"));
//! # Ok(()) }
//! ```
//!
//! # Names
//! - A registry's prefix and a metric's name join with `_`: prefix `app`, name `requests` →
//!   `app_requests`. The global registry ([`global`]) has no prefix.
//! - Names are snake_case (`[a-z_][a-z0-9_]*`, not starting with `__`) and should end with their
//!   unit (`_seconds`, `_bytes`): the unit is part of the name here, as Prometheus advises.
//! - Counters are exposed with `_total`. Pass the name with or without it: `requests` and
//!   `requests_total` are the same counter, `app_requests_total` in the exposition and
//!   `app_requests` as the OTel instrument (the OTel → Prometheus translation adds `_total`).
//! - Histogram and summary names may not end with `_bucket`, `_sum` or `_count`.
//! - Label names: `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`, not `otel_scope_name` /
//!   `otel_scope_version` (the exporter adds those), not `le` on histograms nor `quantile` on
//!   summaries; no label twice.
//! - Registering a name again with the same kind, labels and buckets/quantiles returns the same
//!   metric (a `*_vec` without labels is the same metric as the plain kind); with anything else it is [`RegistryError::Conflict`]. Several registries may coexist;
//!   give them different prefixes, since their metrics share the OTel meter.
//!
//! # Export
//! A handle's `inc` is one atomic add on the registry's own cell. The pull endpoint renders every
//! kind from the registry's own state, straight into its (streamed) page: counters and gauges as
//! its encoder writes OTel observable instruments (the translated name, labels sorted by name,
//! then `otel_scope_name="pipetel"`), histograms as it writes OTel histograms (`_bucket{le}`,
//! `_sum`, `_count`, the same labels), summaries as real Prometheus summaries (`quantile`
//! labels, `_sum`, `_count`). Counters and gauges become OTel observable instruments whose
//! callbacks read the same cells only where something else reads them: once `init` installed a
//! push metric exporter (then the pull endpoint reads them through the SDK, as before), or on a
//! registry made with [`Registry::with_meters`]. With the pull endpoint alone (the default) the
//! SDK keeps no second copy of the registry's series. A series holds its label values in one
//! allocation, beside its cell. Push exporters (OTLP, console) get a
//! histogram as an OTel histogram with the same buckets that each observation also records
//! into, and a summary as `<name>_sum` / `<name>_count` counters and a `<name>` gauge with a
//! `quantile` attribute. For a registry on the global meter provider those push-only instruments
//! exist only once `init` installed a push metric exporter, so with the pull endpoint alone (the
//! default) a histogram observation touches nothing but the registry's atomics; a registry made
//! with [`Registry::with_meters`] always feeds its `push_only` meter. Metrics registered before
//! `init` are re-registered with the real providers when `init` runs.
//!
//! # Cardinality
//! A metric keeps at most [`set_cardinality_limit`] label sets (2,000 unless `init` or you set
//! another); further label sets share one overflow series marked `otel_metric_overflow="true"`,
//! with one warning per metric.
//!
//! # Summaries: quantiles and their error
//! The quantile `q` of the `n` observations in the window is the observation of rank `⌈q·n⌉`
//! (1-based, at least 1) in increasing order, the nearest-rank rule: of three observations,
//! 0.5 reads the middle one and 0.9 the largest. Each slice of the window (default 10 min in 5
//! slices, sliding one slice at a time) keeps its first [`EXACT_OBSERVATIONS`] (128)
//! observations as they are, so quantiles are exact while no slice in the window received
//! more; past that, the slice moves them into a relative-error sketch (after DDSketch, with bins
//! indexed straight from a value's bits) and each reported quantile is within
//! ±[`RELATIVE_ERROR`] (1 %, relative) of the exact one. `_sum` and `_count` are totals since
//! creation.
//!
//! An observation takes a short lock and needs the time, to know the slice it belongs to.
//! Reading the clock would cost as much as the rest of the observation, so on Linux the first
//! summary starts a thread, `pipetel-clock`, that keeps a recent time for observations to read,
//! refreshed often enough for the window's slices.

//
// Layout: one file per kind (`counter`, `gauge`, `histogram`, `summary` with its `sketch`) and
// per collector; what the kinds share (`family`, `series`, `meta`, `handle`, `values`); the
// registry itself (`set`, its shared state in `inner`); and the types every file names (`kind`,
// `error`, `labels`, `opts`, `rules`). This file only declares and re-exports.

mod collector;
mod counter;
mod error;
mod family;
mod gauge;
mod handle;
mod histogram;
mod inner;
mod kind;
mod labels;
mod meta;
mod opts;
mod rules;
mod series;
mod set;
mod sketch;
mod summary;
mod values;

pub use collector::Sample;
pub use counter::{Counter, CounterVec};
pub use error::RegistryError;
pub use gauge::{Gauge, GaugeVec};
pub use handle::{Metric, MetricVec};
pub use histogram::{Histogram, HistogramValue, HistogramVec};
pub use kind::Kind;
pub use labels::Labels;
pub use opts::Opts;
pub use set::{global, Registry};
pub use sketch::{EXACT_OBSERVATIONS, RELATIVE_ERROR};
pub use summary::{Summary, SummaryValue, SummaryVec, DEFAULT_AGE_BUCKETS, DEFAULT_MAX_AGE, DEFAULT_QUANTILES};

pub use crate::limits::set_cardinality_limit;

#[cfg(test)]
mod tests;
