//! A measured function's site: what the macro knows, its counting cells, its attribute sets and
//! the sinks its histograms record into.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use opentelemetry::metrics::BoundHistogram;
use opentelemetry::KeyValue;

use super::names::{ATTR_ERROR_TYPE, ATTR_FUNCTION, ATTR_MODULE, ATTR_STAGE};
use crate::exposition::direct::Direct;
use crate::exposition::exemplar::Exemplars;
use crate::sync::StaticCell;

/// What the macro knows about a function at compile time.
#[derive(Debug)]
pub struct SiteInfo {
    /// The function's name.
    pub function: &'static str,
    /// `module_path!()` where the function is defined.
    pub module: &'static str,
    /// The `stage = "..."` option.
    pub stage: Option<&'static str>,
    /// The `buckets = [...]` option (seconds).
    pub buckets: Option<&'static [f64]>,
    /// Whether `input_size` was given.
    pub input_size: bool,
    /// Whether `output_size` was given.
    pub output_size: bool,
    /// Whether the span has the `error` field the macro added (recorded `true` on failure).
    pub mark_span: bool,
}

/// One measured function: its compile-time facts, its counting cells and its resolved handles.
#[derive(Debug)]
pub struct Site {
    pub(super) info: SiteInfo,
    pub(super) handles: StaticCell<Handles>,
    pub(super) cells: Cells,
    pub(super) attrs: OnceLock<Attrs>,
    /// The histograms kept in atomics, allocated when handles are first resolved for the
    /// pull endpoint alone (see [`Direct`]); they outlive later resolutions.
    pub(super) direct: OnceLock<DirectSet>,
}

/// A site's direct histograms: `function.duration`, and the sizes it was given.
#[derive(Debug)]
pub(super) struct DirectSet {
    pub(super) duration: Direct,
    pub(super) input: Option<Direct>,
    pub(super) output: Option<Direct>,
}

/// The counters of one site, read by the observable instruments at collection.
#[derive(Debug)]
pub(super) struct Cells {
    pub(super) calls: AtomicU64,
    /// Calls that ended (returned, panicked, or whose future was dropped): `function.in_flight`
    /// is `calls - ended`, so a call pays one atomic add at each end rather than two at entry.
    pub(super) ended: AtomicU64,
    pub(super) errors_err: AtomicU64,
    pub(super) errors_panic: AtomicU64,
    /// Moves of `function.in_flight` made by hand (a stage context's `active.inc()`/`dec()`).
    pub(super) in_flight_by_hand: AtomicI64,
}

impl Cells {
    /// Calls running now. `ended` is read first: a call counted in it was counted in `calls`
    /// before, so a concurrent call can only make the figure larger, never negative.
    pub(super) fn in_flight(&self) -> i64 {
        let ended = self.ended.load(Ordering::Acquire);
        let calls = self.calls.load(Ordering::Acquire);
        let by_hand = self.in_flight_by_hand.load(Ordering::Relaxed);
        i64::try_from(calls.wrapping_sub(ended)).unwrap_or(0).saturating_add(by_hand)
    }
}

/// A site's attribute sets, built once.
#[derive(Debug)]
pub(super) struct Attrs {
    pub(super) base: Box<[KeyValue]>,
    pub(super) err: Box<[KeyValue]>,
    pub(super) panic: Box<[KeyValue]>,
}

impl Attrs {
    pub(super) fn new(info: &SiteInfo) -> Self {
        let mut base = Vec::new();
        // Empty for a stage context's site: its series carry `stage` alone.
        if !info.function.is_empty() {
            base.push(KeyValue::new(ATTR_FUNCTION, info.function));
        }
        if !info.module.is_empty() {
            base.push(KeyValue::new(ATTR_MODULE, info.module));
        }
        if let Some(stage) = info.stage {
            base.push(KeyValue::new(ATTR_STAGE, stage));
        }
        let with = |extra: &'static str| {
            let mut v = base.clone();
            v.push(KeyValue::new(ATTR_ERROR_TYPE, extra));
            v.into_boxed_slice()
        };
        let (err, panic) = (with("err"), with("panic"));
        Attrs { base: base.into_boxed_slice(), err, panic }
    }
}

/// Every site resolved so far: what the observable instruments' callbacks read.
pub(super) static SITES: Mutex<Vec<&'static Site>> = Mutex::new(Vec::new());

#[derive(Debug)]
pub(super) struct Handles {
    pub(super) generation: u64,
    /// Stage metrics on (`PIPETEL_STAGE_METRICS`) when these handles were resolved; when off,
    /// calls count nothing and the histograms are absent.
    pub(super) enabled: bool,
    /// `function.duration`, `function.input.size`, `function.output.size`: in the site's
    /// atomics or in OTel histograms, whichever [`Handles::resolve`] chose.
    pub(super) duration: Sink<f64>,
    pub(super) input: Sink<u64>,
    pub(super) output: Sink<u64>,
}

/// Where a site's histogram records.
#[derive(Debug)]
pub(super) enum Sink<T> {
    /// Not recorded (stage metrics off, or no `input_size` / `output_size` option).
    Off,
    /// The site's own atomics, rendered by the pull endpoint: `init` installed no push
    /// exporter, so no OTel instrument would be read by anything but the pull endpoint.
    Direct(&'static Direct),
    /// An OTel histogram bound to the site's attributes, with the exemplars the pull
    /// endpoint's encoder finds for it: before `init` (the global meter provider, which the
    /// process may have installed itself) or with a push exporter (OTLP, console).
    Otel(BoundHistogram<T>, Arc<Exemplars>),
}

impl<T> Sink<T> {
    pub(super) fn is_on(&self) -> bool {
        !matches!(self, Sink::Off)
    }
}

/// What a site's histogram records: seconds (`f64`) or a size (`u64`).
pub(super) trait Recorded: Copy {
    /// Records `self` into `h`; returns its bucket.
    fn into_direct(self, h: &Direct) -> usize;
}

impl Recorded for f64 {
    #[inline]
    fn into_direct(self, h: &Direct) -> usize {
        h.record_f64(self)
    }
}

impl Recorded for u64 {
    #[inline]
    fn into_direct(self, h: &Direct) -> usize {
        h.record_u64(self)
    }
}

impl<T: Recorded> Sink<T> {
    /// Records `v`; returns the exemplar cells and the bucket (`None`: to be searched) it
    /// went to, for [`Call::offer`](super::call::Call::offer).
    #[inline]
    pub(super) fn record(&self, v: T) -> Option<(&Exemplars, Option<usize>)> {
        match self {
            Sink::Off => None,
            Sink::Direct(h) => Some((h.exemplars(), Some(v.into_direct(h)))),
            Sink::Otel(h, exemplars) => {
                h.record(v);
                Some((exemplars, None))
            }
        }
    }
}

impl Site {
    /// A site whose handles are resolved on its first call.
    pub const fn new(info: SiteInfo) -> Self {
        Site {
            info,
            handles: StaticCell::new(),
            cells: Cells {
                calls: AtomicU64::new(0),
                errors_err: AtomicU64::new(0),
                ended: AtomicU64::new(0),
                errors_panic: AtomicU64::new(0),
                in_flight_by_hand: AtomicI64::new(0),
            },
            attrs: OnceLock::new(),
            direct: OnceLock::new(),
        }
    }
}

/// What [`crate::stage_metrics`] records through: a stage's own site.
impl Site {
    /// A site for the stage context `stage` (attributes: `stage` alone), leaked: call it once
    /// per stage name.
    pub(crate) fn leak_for_stage(stage: &str) -> &'static Site {
        let stage: &'static str = Box::leak(stage.to_owned().into_boxed_str());
        Box::leak(Box::new(Site::new(SiteInfo {
            function: "",
            module: "",
            stage: Some(stage),
            buckets: None,
            input_size: true,
            output_size: true,
            mark_span: false,
        })))
    }

    /// Records one execution measured elsewhere: a call, its duration, its error and sizes.
    /// Returns false when stage metrics are off (nothing recorded).
    pub(crate) fn record_execution(
        &'static self,
        seconds: f64,
        success: bool,
        input: Option<u64>,
        output: Option<u64>,
    ) -> bool {
        let handles = self.handles();
        if !handles.enabled {
            return false;
        }
        // Counted as started and ended: not in flight.
        self.cells.calls.fetch_add(1, Ordering::Release);
        self.cells.ended.fetch_add(1, Ordering::Release);
        if !success {
            self.cells.errors_err.fetch_add(1, Ordering::Relaxed);
        }
        handles.duration.record(seconds);
        for (size, histogram) in [(input, &handles.input), (output, &handles.output)] {
            if let Some(size) = size {
                histogram.record(size);
            }
        }
        true
    }

    /// Moves a stage context's counts by hand (TeleFuser's `context.total.inc()`,
    /// `errors.inc()`, `active.inc()`): calls, errors (as `error.type=err`) and calls in
    /// flight. Returns false when stage metrics are off (nothing recorded).
    pub(crate) fn adjust(&'static self, calls: u64, errors: u64, in_flight: i64) -> bool {
        if !self.handles().enabled {
            return false;
        }
        // Counted as started and ended: calls counted by hand are not in flight.
        self.cells.calls.fetch_add(calls, Ordering::Release);
        self.cells.ended.fetch_add(calls, Ordering::Release);
        self.cells.errors_err.fetch_add(errors, Ordering::Relaxed);
        self.cells.in_flight_by_hand.fetch_add(in_flight, Ordering::Relaxed);
        true
    }

    /// Records one duration without counting a call (TeleFuser's
    /// `context.duration.observe(seconds)`). Returns false when stage metrics are off.
    pub(crate) fn record_duration(&'static self, seconds: f64) -> bool {
        let handles = self.handles();
        if !handles.enabled {
            return false;
        }
        handles.duration.record(seconds);
        true
    }

    /// `(calls, errors, in flight)` so far.
    pub(crate) fn counts(&self) -> (u64, u64, i64) {
        let c = &self.cells;
        (
            c.calls.load(Ordering::Relaxed),
            c.errors_err.load(Ordering::Relaxed) + c.errors_panic.load(Ordering::Relaxed),
            c.in_flight(),
        )
    }
}
