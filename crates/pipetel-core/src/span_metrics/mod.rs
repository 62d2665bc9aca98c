//! Span-derived metrics: a `tracing` layer recording the duration of every closed span.
//!
//! Users already annotate their functions with `#[tracing::instrument]`; this layer turns those
//! spans into a histogram, so "how often did it run, how long did it take, how often did it
//! fail" is on a dashboard without any metric code.
//!
//! | metric | unit | kind | attributes |
//! |---|---|---|---|
//! | [`SPAN_DURATION`] (`span.duration`) | `s` | histogram, bounds [`crate::buckets::SECONDS_BUCKETS`] | [`ATTR_SPAN_NAME`] (`span.name`), [`ATTR_SPAN_TARGET`] (`span.target`, the `tracing` target, usually the module path), [`ATTR_STATUS`] (`status`: `ok` or `error`) |
//!
//! A span's status is `error` when it recorded an `error` field (any value but `false`), an
//! `otel.status_code` field equal to `ERROR`, or an `ERROR`-level event happened directly inside
//! it (as `#[instrument(err)]` emits, and as `tracing-opentelemetry` marks the trace span);
//! `ok` otherwise.
//!
//! # Wall time or busy time
//! [`SpanTime::Wall`] (the default) is the time from the span's creation to its close: what
//! users mean by "how long it took", await points included. [`SpanTime::Busy`] sums the time
//! the span was entered, which excludes the time an async task sat waiting; it costs two more
//! clock reads per enter/exit pair.
//!
//! # Cost
//! Each callsite is resolved once: the filter and allow list are evaluated and the histogram is
//! bound to the two attribute sets (`ok` and `error`), then cached by callsite in a table read
//! without locks. An open span's timing lives in a fixed table of atomics keyed by span id, not
//! in the span's extensions, so per span the layer does a cache read, a clock read and a slot
//! claim at creation, and a slot lookup, a clock read and one record on a pre-bound histogram
//! at close: no allocation, no lock, no lookup of the span. Spans that the filter or allow list
//! leave out cost the cache read and a table probe. When more than about a thousand spans are
//! open at once, the rest keep their timing in their extensions (an allocation each) and are
//! counted all the same. A layer keeps its resolved callsites (two bound histogram handles
//! each) for the rest of the process, so a span's timing may point at them without a
//! reference count; a program builds one layer. The clock is the CPU's time-stamp counter where it is invariant (about a
//! third of the OS clock's cost per read, calibrated once against it),
//! the OS monotonic clock elsewhere.
//!
//! # A measured function's span is timed once
//! A `#[pipetel::measure]` call times its function for `function.duration`, and its span is
//! timed here for `span.duration`: the two share one pair of clock readings instead of reading
//! the clock four times. The layer hands the reading it takes at the span's creation to the call
//! (`handoff::take_start`), and the call hands the reading it takes when the function returns
//! (or panics) to the layer for the span's close (`handoff::end_while`), through two
//! thread-local cells keyed by span id (and callsite, for the start). So both metrics carry the
//! same duration for a measured call: from the span's creation to the function's return. Every
//! other span is timed as before, to its close.
//!
//! # Exemplars
//! A span's duration keeps an exemplar (its bucket's latest: the span's value, trace id and
//! span id, shown on the pull endpoint in OpenMetrics) when the exemplar filter allows it (by
//! default: the span is sampled). The ids are read from the current OpenTelemetry context the
//! first time the span is entered, after the trace bridge made it current (this layer must
//! come after the bridge, as `init` and `pipetel::layers` stack them); a span never entered
//! keeps none. While the filter is `always_off` an enter costs what it did without exemplars.
//!
//! # Which spans count
//! Only spans that reach the layer: the traces filter (`PIPETEL_TRACES_FILTER`) applies first.
//! Then [`SpanMetricsConfig::filter`] (a [`Targets`] directive such as `info,hyper=off`) and
//! [`SpanMetricsConfig::allow`] (exact span names; empty means all) narrow them, so a chatty
//! library's spans do not flood the metrics.
//!
//! # Spans made outside `tracing`
//! [`ForeignSpanTimer`] times a span that is not a `tracing` span (the Python package's
//! `pipetel.span`) into the same histogram, with the layer `init` installed: its instrument (or
//! its directly rendered family), filter (the span's level taken as `INFO`) and allow list. At
//! most [`MAX_FOREIGN_SPAN_NAMES`] names are resolved per process.
//!
//! [`Targets`]: tracing_subscriber::filter::Targets

mod cache;
pub(crate) mod direct;
mod foreign;
pub(crate) mod handoff;
mod layer;
mod names;
mod site;
mod timing;

// The settings' one documented path is `settings` (`pipetel::config` in pipetel); these names
// stay for the programs written before the split.
#[doc(hidden)]
pub use crate::settings::{SpanMetricsConfig, SpanMetricsError, SpanTime};
pub use foreign::{ForeignSpanTimer, MAX_FOREIGN_SPAN_NAMES};
#[doc(hidden)]
pub use layer::layer;
pub use layer::SpanMetricsLayer;
pub use names::{ATTR_SPAN_NAME, ATTR_SPAN_TARGET, ATTR_STATUS, SPAN_DURATION};

#[cfg(test)]
mod tests;
