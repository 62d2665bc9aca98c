//! Runtime of the `#[pipetel::measure]` attribute macro.
//!
//! The macro only rewrites the function; everything that touches OTel lives here, behind
//! `pipetel::__private`, so the generated code stays small and users depend on `pipetel` alone.
//!
//! # Handles resolved once per function, and `init` coming late
//! Each measured function owns a `static` [`__private::Site`]. Its first call resolves the
//! instruments and the pre-built attribute sets from the global meter provider and keeps them;
//! later calls cost two atomic loads to find them. But `pipetel::init` installs the global meter
//! provider at run time, possibly after a measured function already ran, and instruments taken
//! from the provider in place then (the no-op one) stay no-ops forever. So a site compares the
//! *generation* of the context `init` installed (`crate::global`, one atomic load) with
//! that of its handles, and resolves them again on its next call after `init`. The superseded handles are leaked on purpose:
//! at most one set per function per `init` (normally one), and leaking them is what lets a call
//! use its handles without a lock or a reference count.
//!
//! A process that installs its own meter provider with `opentelemetry::global::set_meter_provider`
//! instead of calling `init` must do so before the first measured call.
//!
//! # `PIPETEL_STAGE_METRICS=false`
//! Handles resolved after an `init` that turned stage metrics off are inert: no observable
//! instrument is registered, no histogram is built, and a call touches no counter (one boolean
//! test per call). The span stays.
//!
//! # Stage contexts
//! [`crate::stage_metrics`] records into the same instruments through a site of its own per stage
//! name, whose attributes are `stage` alone (no `function`, no `module`).
//!
//! # What a call records
//! | when | records |
//! |---|---|
//! | entry | `function.calls` +1, `function.in_flight` +1, `function.input.size` (with `input_size`) |
//! | return | `function.duration`, `function.in_flight` −1, `function.output.size` (with `output_size`, on `Ok` for a `Result`), `function.errors` +1 with `error.type=err` on `Err` |
//! | panic | `function.duration`, `function.in_flight` −1, `function.errors` +1 with `error.type=panic`; the panic goes on unchanged |
//! | future dropped before completion | `function.in_flight` −1 only |
//!
//! # Exemplars
//! Each histogram keeps, per bucket, the latest value recorded inside a sampled span (as the
//! exemplar filter allows) with the span's trace and span ids; the pull endpoint shows them in
//! OpenMetrics. A sync call reads them from the current context when it records (it is inside
//! its span then); an async call reads them on its first poll, inside its span, and keeps them
//! for the records made after its future completed.
//!
//! # Cost of a call
//! Calls, errors and in-flight are atomic adds on the site's own cells (one at entry, one at
//! the end: in-flight is calls started less calls ended); observable
//! instruments (one set per meter provider, registered with the first site resolved after
//! `init`) read every site's cells when a reader collects. As the cells live in the `static`
//! site, calls made before `init` are counted too and show up in the first collection after it.
//!
//! The histograms depend on what reads them:
//! - after an `init` that installed no push exporter (the pull endpoint alone, the default),
//!   they are the site's own atomics, which the pull endpoint renders as it rendered the OTel
//!   histograms of the same name, bounds and attributes: a call's duration is the difference
//!   of its two clock readings, bucketed against bounds converted to readings once and summed
//!   as readings (seconds are computed at render, and for an exemplar), so a call pays a
//!   bucket scan and two atomic adds;
//! - with a push exporter, or before `init` (the process's own meter provider), OTel
//!   histograms, each bound once to the site's attribute set, so a call pays no attribute
//!   lookup but the SDK's record.
//!
//! Under a subscriber with the span-metrics layer, the call and the layer share one pair of
//! clock readings (the layer's at the span's creation, the call's at its return), so the span is
//! not timed twice and `span.duration` equals `function.duration` for the call; see
//! [`crate::span_metrics`]. With stage metrics off, a call reads no clock.

mod call;
mod direct;
mod names;
mod resolve;
mod site;
mod size;

/// Paths the macro's generated code refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use tracing;

    pub use super::call::{apply, ok_ref, poll_in, Call};
    pub use super::names::{
        ATTR_ERROR_TYPE, ATTR_FUNCTION, ATTR_MODULE, ATTR_STAGE, FUNCTION_CALLS, FUNCTION_DURATION, FUNCTION_ERRORS,
        FUNCTION_INPUT_SIZE, FUNCTION_IN_FLIGHT, FUNCTION_OUTPUT_SIZE, SIZE_BUCKETS,
    };
    pub use super::site::{Site, SiteInfo};
    pub use super::size::Size;
}

#[cfg(test)]
mod tests;
