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
//! *generation* of the context `init` installed (`crate::installed`, one atomic load) with
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

/// Paths the macro's generated code refers to; not a public API.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicU8, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};
    use std::task::{Context, Poll};

    use opentelemetry::metrics::{BoundHistogram, ObservableCounter, ObservableUpDownCounter};
    use opentelemetry::KeyValue;

    pub use tracing;

    use crate::exposition::exemplar::{self, Exemplars, SpanIds};
    use crate::exposition::native::Native;
    use crate::exposition::{BoundsText, ExpositionSource, MetricType, OwnFamily, Page};
    use crate::installed;
    use crate::sync::StaticCell;

    /// Counter: calls started.
    pub const FUNCTION_CALLS: &str = "function.calls";
    /// Counter: calls that returned `Err` or panicked (attribute `error.type`).
    pub const FUNCTION_ERRORS: &str = "function.errors";
    /// Up-down counter: calls running now.
    pub const FUNCTION_IN_FLIGHT: &str = "function.in_flight";
    /// Histogram, seconds: wall time of completed calls (returned or panicked).
    pub const FUNCTION_DURATION: &str = "function.duration";
    /// Histogram, bytes: the `input_size` expression.
    pub const FUNCTION_INPUT_SIZE: &str = "function.input.size";
    /// Histogram, bytes: the `output_size` expression.
    pub const FUNCTION_OUTPUT_SIZE: &str = "function.output.size";
    /// Attribute: the function's name.
    pub const ATTR_FUNCTION: &str = "function";
    /// Attribute: the function's module path.
    pub const ATTR_MODULE: &str = "module";
    /// Attribute: the `stage = "..."` option.
    pub const ATTR_STAGE: &str = "stage";
    /// Attribute on `function.errors`: `err` (returned `Err`) or `panic`.
    pub const ATTR_ERROR_TYPE: &str = "error.type";

    /// Bucket bounds of the size histograms: powers of four from 64 B to 1 GiB.
    pub const SIZE_BUCKETS: &[f64] = &[
        64.0,
        256.0,
        1024.0,
        4096.0,
        16384.0,
        65536.0,
        262_144.0,
        1_048_576.0,
        4_194_304.0,
        16_777_216.0,
        67_108_864.0,
        268_435_456.0,
        1_073_741_824.0,
    ];

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
        info: SiteInfo,
        handles: StaticCell<Handles>,
        cells: Cells,
        attrs: OnceLock<Attrs>,
        /// The histograms kept in atomics, allocated when handles are first resolved for the
        /// pull endpoint alone (see [`Native`]); they outlive later resolutions.
        native: OnceLock<NativeSet>,
    }

    /// A site's native histograms: `function.duration`, and the sizes it was given.
    #[derive(Debug)]
    struct NativeSet {
        duration: Native,
        input: Option<Native>,
        output: Option<Native>,
    }

    /// The families the pull endpoint renders from the sites' native histograms, in the order
    /// of [`NativeSet`]: OTel name, description, unit.
    const NATIVE_FAMILIES: [(&str, &str, &str); 3] = [
        (FUNCTION_DURATION, "Wall time of completed calls", "s"),
        (FUNCTION_INPUT_SIZE, "Size of a call's input", "By"),
        (FUNCTION_OUTPUT_SIZE, "Size of a call's output", "By"),
    ];

    /// Renders every site's native histograms on the pull endpoint.
    struct NativeSource;

    impl ExpositionSource for NativeSource {
        fn write_exposition(&self, page: &mut Page<'_>) {
            let sites: Vec<&'static Site> = crate::sync::lock(&SITES).clone();
            write_native(&sites, page);
        }
    }

    /// Writes the native histograms of `sites`, one family per [`NATIVE_FAMILIES`] entry that
    /// has a series with an observation.
    fn write_native(sites: &[&'static Site], page: &mut Page<'_>) {
        for (which, (otel_name, help, unit)) in NATIVE_FAMILIES.iter().enumerate() {
            let of = |site: &'static Site| {
                let set = site.native.get()?;
                let attrs = site.attrs.get()?;
                let h = match which {
                    0 => Some(&set.duration),
                    1 => set.input.as_ref(),
                    _ => set.output.as_ref(),
                }?;
                Some((h, attrs))
            };
            let mut series = sites.iter().filter_map(|s| of(s)).peekable();
            let Some((first, _)) = series.peek() else { continue };
            let bounds = BoundsText::of(first.bounds());
            let mut family = OwnFamily::new(page.writer(), otel_name, unit, MetricType::Histogram, help);
            for (h, attrs) in series {
                // `function`, `module`, `stage`: already in the encoder's (sorted) order.
                let s = family.series(|labels| {
                    for kv in attrs.base.iter() {
                        labels.pair(kv.key.as_str(), &kv.value.as_str());
                    }
                });
                h.write(s.writer, s.name, s.labels, bounds.get());
            }
        }
    }

    /// Registers [`NativeSource`] once, for the life of the process.
    fn add_native_source() {
        static SOURCE: OnceLock<Arc<dyn ExpositionSource>> = OnceLock::new();
        SOURCE.get_or_init(|| {
            let source: Arc<dyn ExpositionSource> = Arc::new(NativeSource);
            crate::exposition::add_exposition_source(&source);
            source
        });
    }

    /// The counters of one site, read by the observable instruments at collection.
    #[derive(Debug)]
    struct Cells {
        calls: AtomicU64,
        /// Calls that ended (returned, panicked, or whose future was dropped): `function.in_flight`
        /// is `calls - ended`, so a call pays one atomic add at each end rather than two at entry.
        ended: AtomicU64,
        errors_err: AtomicU64,
        errors_panic: AtomicU64,
        /// Moves of `function.in_flight` made by hand (a stage context's `active.inc()`/`dec()`).
        in_flight_by_hand: AtomicI64,
    }

    impl Cells {
        /// Calls running now. `ended` is read first: a call counted in it was counted in `calls`
        /// before, so a concurrent call can only make the figure larger, never negative.
        fn in_flight(&self) -> i64 {
            let ended = self.ended.load(Ordering::Acquire);
            let calls = self.calls.load(Ordering::Acquire);
            let by_hand = self.in_flight_by_hand.load(Ordering::Relaxed);
            i64::try_from(calls.wrapping_sub(ended)).unwrap_or(0).saturating_add(by_hand)
        }
    }

    /// A site's attribute sets, built once.
    #[derive(Debug)]
    struct Attrs {
        base: Box<[KeyValue]>,
        err: Box<[KeyValue]>,
        panic: Box<[KeyValue]>,
    }

    impl Attrs {
        fn new(info: &SiteInfo) -> Self {
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
    static SITES: Mutex<Vec<&'static Site>> = Mutex::new(Vec::new());

    /// The observable instruments of the current meter provider, and the generation they belong to.
    type Observers = (ObservableCounter<u64>, ObservableCounter<u64>, ObservableUpDownCounter<i64>);
    static OBSERVERS: Mutex<Option<(u64, Observers)>> = Mutex::new(None);

    fn each_site(mut f: impl FnMut(&'static Site, &Attrs)) {
        let sites = crate::sync::lock(&SITES);
        for site in sites.iter() {
            if let Some(attrs) = site.attrs.get() {
                f(site, attrs);
            }
        }
    }

    /// Observes one value per site under its base attributes (`function`, `module`, `stage`).
    fn each_base<T>(o: &dyn opentelemetry::metrics::AsyncInstrument<T>, value: impl Fn(&Cells) -> T) {
        each_site(|site, attrs| o.observe(value(&site.cells), &attrs.base));
    }

    /// Registers `function.calls`, `function.errors` and `function.in_flight` on the current
    /// global meter, once per generation.
    fn observe(generation: u64) {
        let mut observers = crate::sync::lock(&OBSERVERS);
        if observers.as_ref().is_some_and(|(g, _)| *g == generation) {
            return;
        }
        let meter = crate::installed::meter();
        let calls = meter
            .u64_observable_counter(FUNCTION_CALLS)
            .with_unit("{call}")
            .with_description("Calls started")
            .with_callback(|o| each_base(o, |cells| cells.calls.load(Ordering::Relaxed)))
            .build();
        let errors = meter
            .u64_observable_counter(FUNCTION_ERRORS)
            .with_unit("{error}")
            .with_description("Calls that returned an error or panicked")
            .with_callback(|o| {
                each_site(|site, attrs| {
                    // Only kinds that happened: a function that never failed has no error series.
                    for (cell, attrs) in
                        [(&site.cells.errors_err, &attrs.err), (&site.cells.errors_panic, &attrs.panic)]
                    {
                        let n = cell.load(Ordering::Relaxed);
                        if n > 0 {
                            o.observe(n, attrs);
                        }
                    }
                })
            })
            .build();
        let in_flight = meter
            .i64_observable_up_down_counter(FUNCTION_IN_FLIGHT)
            .with_unit("{call}")
            .with_description("Calls running now")
            .with_callback(|o| each_base(o, Cells::in_flight))
            .build();
        *observers = Some((generation, (calls, errors, in_flight)));
    }

    #[derive(Debug)]
    struct Handles {
        generation: u64,
        /// Stage metrics on (`PIPETEL_STAGE_METRICS`) when these handles were resolved; when off,
        /// calls count nothing and the histograms are absent.
        enabled: bool,
        /// `function.duration`, `function.input.size`, `function.output.size`: in the site's
        /// atomics or in OTel histograms, whichever [`Handles::resolve`] chose.
        duration: Sink<f64>,
        input: Sink<u64>,
        output: Sink<u64>,
    }

    /// Where a site's histogram records.
    #[derive(Debug)]
    enum Sink<T> {
        /// Not recorded (stage metrics off, or no `input_size` / `output_size` option).
        Off,
        /// The site's own atomics, rendered by the pull endpoint: `init` installed no push
        /// exporter, so no OTel instrument would be read by anything but the pull endpoint.
        Native(&'static Native),
        /// An OTel histogram bound to the site's attributes, with the exemplars the pull
        /// endpoint's encoder finds for it: before `init` (the global meter provider, which the
        /// process may have installed itself) or with a push exporter (OTLP, console).
        Otel(BoundHistogram<T>, Arc<Exemplars>),
    }

    impl<T> Sink<T> {
        fn is_on(&self) -> bool {
            !matches!(self, Sink::Off)
        }
    }

    /// What a site's histogram records: seconds (`f64`) or a size (`u64`).
    trait Recorded: Copy {
        /// Records `self` into `h`; returns its bucket.
        fn into_native(self, h: &Native) -> usize;
    }

    impl Recorded for f64 {
        #[inline]
        fn into_native(self, h: &Native) -> usize {
            h.record_f64(self)
        }
    }

    impl Recorded for u64 {
        #[inline]
        fn into_native(self, h: &Native) -> usize {
            h.record_u64(self)
        }
    }

    impl<T: Recorded> Sink<T> {
        /// Records `v`; returns the exemplar cells and the bucket (`None`: to be searched) it
        /// went to, for [`Call::offer`].
        #[inline]
        fn record(&self, v: T) -> Option<(&Exemplars, Option<usize>)> {
            match self {
                Sink::Off => None,
                Sink::Native(h) => Some((h.exemplars(), Some(v.into_native(h)))),
                Sink::Otel(h, exemplars) => {
                    h.record(v);
                    Some((exemplars, None))
                }
            }
        }
    }

    impl Handles {
        fn resolve(site: &'static Site, attrs: &Attrs, generation: u64) -> Self {
            let info = &site.info;
            if !installed::stage_metrics() {
                return Handles {
                    generation,
                    enabled: false,
                    duration: Sink::Off,
                    input: Sink::Off,
                    output: Sink::Off,
                };
            }
            let installed = installed::current();
            // OTel keeps one bucket layout per metric: the first function to resolve
            // `function.duration` decides it. Say so when another one asks for a different one.
            static FIRST_LAYOUT: OnceLock<&'static [f64]> = OnceLock::new();
            let asked = info.buckets.unwrap_or(crate::buckets::SECONDS_BUCKETS);
            let layout = *FIRST_LAYOUT.get_or_init(|| asked);
            if layout != asked {
                tracing::warn!(
                    target: "pipetel",
                    function = info.function,
                    module = info.module,
                    "`buckets` differ from those `function.duration` was first created with; the first ones apply"
                );
            }
            observe(generation);
            // After an `init` that installed no push exporter, only the pull endpoint reads the
            // histograms: keep them in atomics and let it render them (no OTel instrument, no
            // SDK record per call). Otherwise the OTel histograms, as the push exporters (or
            // the process's own meter provider) read them.
            if installed.generation > 0 && installed.push_only.is_none() {
                let set = site.native.get_or_init(|| NativeSet {
                    duration: Native::new(layout, true),
                    input: info.input_size.then(|| Native::new(SIZE_BUCKETS, false)),
                    output: info.output_size.then(|| Native::new(SIZE_BUCKETS, false)),
                });
                add_native_source();
                let native = |h: &'static Option<Native>| h.as_ref().map_or(Sink::Off, Sink::Native);
                return Handles {
                    generation,
                    enabled: true,
                    duration: Sink::Native(&set.duration),
                    input: native(&set.input),
                    output: native(&set.output),
                };
            }
            let meter = installed.meter;
            let size = |name: &'static str, description: &'static str| {
                let histogram = meter
                    .u64_histogram(name)
                    .with_unit("By")
                    .with_description(description)
                    .with_boundaries(SIZE_BUCKETS.to_vec())
                    .build()
                    .bind(&attrs.base);
                Sink::Otel(histogram, exemplar::register(name, &attrs.base, SIZE_BUCKETS))
            };
            let duration = meter
                .f64_histogram(FUNCTION_DURATION)
                .with_unit("s")
                .with_description("Wall time of completed calls")
                .with_boundaries(layout.to_vec())
                .build()
                .bind(&attrs.base);
            Handles {
                generation,
                enabled: true,
                duration: Sink::Otel(duration, exemplar::register(FUNCTION_DURATION, &attrs.base, layout)),
                input: if info.input_size { size(FUNCTION_INPUT_SIZE, "Size of a call's input") } else { Sink::Off },
                output: if info.output_size {
                    size(FUNCTION_OUTPUT_SIZE, "Size of a call's output")
                } else {
                    Sink::Off
                },
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
                native: OnceLock::new(),
            }
        }

        #[inline]
        fn handles(&'static self) -> &'static Handles {
            let generation = installed::generation();
            let current = self.handles.get();
            match current {
                Some(handles) if handles.generation == generation => handles,
                _ => self.resolve(current, generation),
            }
        }

        #[cold]
        #[inline(never)]
        fn resolve(&'static self, seen: Option<&'static Handles>, generation: u64) -> &'static Handles {
            let mut first = false;
            let attrs = self.attrs.get_or_init(|| {
                first = true;
                Attrs::new(&self.info)
            });
            if first {
                crate::sync::lock(&SITES).push(self);
            }
            // Published handles are never freed (see the module docs); a thread that loses the
            // race to publish gets the winner's.
            self.handles.replace(seen, Handles::resolve(self, attrs, generation))
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

    /// The guard of one call: counts it on creation and records its outcome on `finish_*`, or on
    /// drop when the call panicked or its future was dropped.
    #[derive(Debug)]
    pub struct Call {
        site: &'static Site,
        handles: &'static Handles,
        mark_span: bool,
        /// A raw reading of [`crate::clock`] at the call's start: the span-metrics layer's, when
        /// it timed the span (see [`crate::span_metrics`]), else the call's own.
        start: u64,
        /// The raw reading taken when the call completed (0 before, or when not timed), handed
        /// to the span-metrics layer as the span's end.
        end: AtomicU64,
        /// The span-metrics layer timed the span (`start` is its reading): it gets `end`.
        layer_timed: bool,
        // Atomic rather than a `Cell` so an async fn's future, which holds `&Call` across its
        // await, stays `Send`.
        done: AtomicBool,
        span: tracing::Span,
        /// An async call's exemplar ids, read on its first poll: [`UNREAD`], [`NO_IDS`] (the
        /// filter allows none), or [`IDS`] (in `ids`).
        ids_state: AtomicU8,
        ids: [AtomicU64; 3],
    }

    const UNREAD: u8 = 0;
    const NO_IDS: u8 = 1;
    const IDS: u8 = 2;

    impl Call {
        /// Counts a call of `site` and keeps its span.
        #[inline]
        pub fn start(site: &'static Site, span: tracing::Span) -> Self {
            let handles = site.handles();
            if handles.enabled {
                site.cells.calls.fetch_add(1, Ordering::Release);
            }
            // The span-metrics layer read the clock as it created the span: share that reading.
            let shared = if crate::span_metrics::handoff::active() {
                span.id()
                    .zip(span.metadata())
                    .and_then(|(id, meta)| crate::span_metrics::handoff::take_start(id.into_u64(), meta))
            } else {
                None
            };
            let start = match shared {
                Some(ticks) => ticks,
                None if handles.duration.is_on() => crate::sync::clock().raw(),
                None => 0,
            };
            Call {
                site,
                handles,
                mark_span: site.info.mark_span,
                start,
                end: AtomicU64::new(0),
                layer_timed: shared.is_some(),
                done: AtomicBool::new(false),
                span,
                ids_state: AtomicU8::new(UNREAD),
                ids: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
            }
        }

        /// Reads the exemplar ids from the current context (inside the call's span), once.
        #[inline]
        fn capture_ids(&self) {
            if self.ids_state.load(Ordering::Relaxed) != UNREAD {
                return;
            }
            match exemplar::current() {
                Some(ids) => {
                    self.ids[0].store((ids.trace_id >> 64) as u64, Ordering::Relaxed);
                    self.ids[1].store(ids.trace_id as u64, Ordering::Relaxed);
                    self.ids[2].store(ids.span_id, Ordering::Relaxed);
                    self.ids_state.store(IDS, Ordering::Release);
                }
                None => self.ids_state.store(NO_IDS, Ordering::Relaxed),
            }
        }

        /// The ids a record made now carries: those an async call captured, else the current
        /// context's (a sync call records inside its span).
        #[inline]
        fn exemplar_ids(&self) -> Option<SpanIds> {
            match self.ids_state.load(Ordering::Acquire) {
                IDS => Some(SpanIds {
                    trace_id: (u128::from(self.ids[0].load(Ordering::Relaxed)) << 64)
                        | u128::from(self.ids[1].load(Ordering::Relaxed)),
                    span_id: self.ids[2].load(Ordering::Relaxed),
                }),
                NO_IDS => None,
                _ => exemplar::current(),
            }
        }

        /// Keeps `value`, just recorded (`kept`: where, from the sink's `record`), as an exemplar.
        #[inline]
        fn offer(&self, kept: Option<(&Exemplars, Option<usize>)>, value: f64) {
            if let Some((cells, bucket)) = kept {
                if let Some(ids) = self.exemplar_ids() {
                    cells.record(bucket, value, ids);
                }
            }
        }

        /// Whether the call is counted (stage metrics were on when it started).
        pub(crate) fn counted(&self) -> bool {
            self.handles.enabled
        }

        /// The call's span.
        #[inline]
        pub fn span(&self) -> &tracing::Span {
            &self.span
        }

        /// Records the `input_size` expression.
        #[inline]
        pub fn input_size<N: Size>(&self, size: N) {
            if self.handles.input.is_on() {
                let size = size.into_size();
                self.offer(self.handles.input.record(size), size as f64);
            }
        }

        /// Records the `output_size` expression.
        #[inline]
        pub fn output_size<N: Size>(&self, size: N) {
            if self.handles.output.is_on() {
                let size = size.into_size();
                self.offer(self.handles.output.record(size), size as f64);
            }
        }

        /// The call returned (a value that is not a `Result`).
        #[inline]
        pub fn finish_ok(&self) {
            self.complete(None);
        }

        /// The call returned a `Result`; `Err` counts as an error.
        #[inline]
        pub fn finish_result<T, E>(&self, result: &Result<T, E>) {
            self.complete(result.is_err().then_some("err"));
        }

        #[inline]
        fn complete(&self, error: Option<&'static str>) {
            // Only the thread running the call (or polling its future) touches `done`: a load and
            // a store, no read-modify-write.
            if self.done.load(Ordering::Relaxed) {
                return;
            }
            self.done.store(true, Ordering::Relaxed);
            if let Some(kind) = error {
                if self.mark_span {
                    self.span.record("error", true);
                }
                if self.handles.enabled {
                    let cells = &self.site.cells;
                    let cell = if kind == "panic" { &cells.errors_panic } else { &cells.errors_err };
                    cell.fetch_add(1, Ordering::Relaxed);
                }
            }
            if !self.handles.enabled {
                return;
            }
            self.site.cells.ended.fetch_add(1, Ordering::Release);
            match &self.handles.duration {
                Sink::Off => {}
                // The pull endpoint alone: the two readings' difference is bucketed and summed
                // as it is; seconds are computed only for an exemplar.
                Sink::Native(h) => {
                    let end = crate::sync::clock().raw();
                    self.end.store(end, Ordering::Relaxed);
                    let ticks = if end > self.start { end.wrapping_sub(self.start) } else { 0 };
                    let i = h.record_ticks(ticks);
                    if let Some(ids) = self.exemplar_ids() {
                        h.exemplars().record_at(Some(i), crate::sync::ticks_to_seconds(ticks), ids, end);
                    }
                }
                sink @ Sink::Otel(..) => {
                    let end = crate::sync::clock().raw();
                    self.end.store(end, Ordering::Relaxed);
                    let seconds = crate::sync::clock().delta_as_nanos(self.start, end) as f64 / 1e9;
                    self.offer(sink.record(seconds), seconds);
                }
            }
        }
    }

    impl Drop for Call {
        fn drop(&mut self) {
            if !self.done.load(Ordering::Relaxed) {
                if std::thread::panicking() {
                    self.complete(Some("panic"));
                } else {
                    // A future dropped before completion: not an error, no duration.
                    self.done.store(true, Ordering::Relaxed);
                    if self.handles.enabled {
                        self.site.cells.ended.fetch_add(1, Ordering::Release);
                    }
                }
            }
            // Close the span with the reading the call ended on, so the span-metrics layer
            // records the same duration without reading the clock again.
            let end = *self.end.get_mut();
            if end != 0 && self.layer_timed {
                if let Some(id) = self.span.id() {
                    let span = std::mem::replace(&mut self.span, tracing::Span::none());
                    crate::span_metrics::handoff::end_while(id.into_u64(), end, || drop(span));
                }
            }
        }
    }

    /// Polls `future` inside the call's span and records a panic at the moment it unwinds out
    /// of a poll: an async fn's locals are only dropped when its future is, typically after the
    /// executor caught the panic, when `std::thread::panicking()` no longer tells.
    pub fn poll_in<'a, F: Future + ?Sized>(
        call: &'a Call,
        mut future: Pin<&'a mut F>,
    ) -> impl Future<Output = F::Output> + 'a {
        std::future::poll_fn(move |cx: &mut Context<'_>| -> Poll<F::Output> {
            let _entered = call.span.enter();
            call.capture_ids();
            let _bomb = PanicBomb(call);
            future.as_mut().poll(cx)
        })
    }

    struct PanicBomb<'a>(&'a Call);

    impl Drop for PanicBomb<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                self.0.complete(Some("panic"));
            }
        }
    }

    /// The `Ok` value of a `Result` (`output_size` is recorded for successes only).
    #[inline]
    pub fn ok_ref<T, E>(result: &Result<T, E>) -> Option<&T> {
        result.as_ref().ok()
    }

    /// Applies the closure form of `output_size` (`output_size = |r| r.len()`).
    #[inline]
    pub fn apply<T: ?Sized, N, F: FnOnce(&T) -> N>(value: &T, f: F) -> N {
        f(value)
    }

    /// A size the `input_size` / `output_size` expressions may return: any primitive number
    /// (negative and NaN count as zero, fractions are truncated).
    pub trait Size {
        /// The size as recorded.
        fn into_size(self) -> u64;
    }

    macro_rules! size_unsigned {
        ($($t:ty),*) => {$(
            impl Size for $t {
                #[inline]
                fn into_size(self) -> u64 {
                    u64::try_from(self).unwrap_or(u64::MAX)
                }
            }
        )*};
    }
    macro_rules! size_signed {
        ($($t:ty),*) => {$(
            impl Size for $t {
                #[inline]
                fn into_size(self) -> u64 {
                    u64::try_from(self).unwrap_or(0)
                }
            }
        )*};
    }
    size_unsigned!(u8, u16, u32, u64, u128, usize);
    size_signed!(i8, i16, i32, i64, i128, isize);

    impl Size for f64 {
        #[inline]
        fn into_size(self) -> u64 {
            // `as` saturates and maps NaN to 0.
            self as u64
        }
    }

    impl Size for f32 {
        #[inline]
        fn into_size(self) -> u64 {
            f64::from(self).into_size()
        }
    }

    impl<N: Size + Copy> Size for &N {
        #[inline]
        fn into_size(self) -> u64 {
            (*self).into_size()
        }
    }

    #[cfg(test)]
    mod tests {
        use std::ptr;

        use super::*;
        use crate::exposition::Format;

        /// The pull endpoint's page shows a native histogram exactly as its encoder showed the
        /// OTel histogram it replaces: same family, labels, buckets, sum and count.
        #[cfg(feature = "prometheus")]
        #[test]
        fn native_histograms_render_as_the_encoder_renders_otel_ones() {
            use opentelemetry::metrics::MeterProvider as _;

            static SITE: Site = Site::new(SiteInfo {
                function: "native_f",
                module: "crate::m",
                stage: Some("tok\"en\\s"),
                buckets: None,
                input_size: true,
                output_size: true,
                mark_span: false,
            });
            let attrs = SITE.attrs.get_or_init(|| Attrs::new(&SITE.info));
            let set = SITE.native.get_or_init(|| NativeSet {
                duration: Native::new(crate::buckets::SECONDS_BUCKETS, true),
                input: Some(Native::new(SIZE_BUCKETS, false)),
                output: Some(Native::new(SIZE_BUCKETS, false)),
            });
            let reader = crate::export::prometheus::PullReader::new();
            let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder().with_reader(reader.clone()).build();
            let meter = provider.meter(crate::installed::SCOPE_NAME);
            let duration = meter
                .f64_histogram(FUNCTION_DURATION)
                .with_unit("s")
                .with_description("Wall time of completed calls")
                .with_boundaries(crate::buckets::SECONDS_BUCKETS.to_vec())
                .build();
            let size = |name: &'static str, description: &'static str| {
                meter
                    .u64_histogram(name)
                    .with_unit("By")
                    .with_description(description)
                    .with_boundaries(SIZE_BUCKETS.to_vec())
                    .build()
            };
            let (input, output) = (
                size(FUNCTION_INPUT_SIZE, "Size of a call's input"),
                size(FUNCTION_OUTPUT_SIZE, "Size of a call's output"),
            );
            for v in [0.0004, 0.003, 0.25, 0.25, 7.5, 1e9, 0.1 + 0.2] {
                duration.record(v, &attrs.base);
                set.duration.record_f64(v);
            }
            for v in [0u64, 64, 65, 1 << 20, u64::from(u32::MAX)] {
                input.record(v, &attrs.base);
                set.input.as_ref().expect("input").record_u64(v);
            }
            // `function.output.size` bound (as a site binds it when resolved) but never recorded:
            // a series of count 0 on both sides.
            let _bound = output.bind(&attrs.base);
            let ours = |text: &str| -> Vec<String> {
                text.lines().filter(|l| l.contains("function_")).map(str::to_string).collect()
            };
            for format in [Format::Text, Format::OpenMetrics] {
                let encoded = reader.encode_for_tests(format);
                let mut native = String::new();
                write_native(&[&SITE], &mut Page::new(&mut native, format));
                let expected = ours(&encoded);
                assert!(expected.len() > 2 * crate::buckets::SECONDS_BUCKETS.len(), "{encoded}");
                assert!(native.contains("function_output_size_bytes_count{"), "{native}");
                assert_eq!(ours(&native), expected, "{format:?}");
            }
        }

        /// A site of function `function` in module `m`, without options.
        const fn plain(function: &'static str) -> SiteInfo {
            SiteInfo {
                function,
                module: "m",
                stage: None,
                buckets: None,
                input_size: false,
                output_size: false,
                mark_span: false,
            }
        }

        /// The rendered family of a site's native duration histogram: its labels, count and sum.
        #[test]
        fn a_native_duration_renders_with_the_sites_labels() {
            static SITE: Site = Site::new(plain("ticks_f"));
            SITE.attrs.get_or_init(|| Attrs::new(&SITE.info));
            let set = SITE.native.get_or_init(|| NativeSet {
                duration: Native::new(crate::buckets::SECONDS_BUCKETS, true),
                input: None,
                output: None,
            });
            let rate = crate::sync::ticks_per_second();
            for seconds in [0.25, 2.0] {
                set.duration.record_ticks((seconds * rate) as u64);
            }
            set.duration.record_f64(0.5);
            let mut out = String::new();
            write_native(&[&SITE], &mut Page::new(&mut out, Format::Text));
            let line = out.lines().find(|l| l.starts_with("function_duration_seconds_sum{")).expect("sum");
            let rendered: f64 = line.rsplit(' ').next().and_then(|v| v.parse().ok()).expect("value");
            assert!((rendered - 2.75).abs() < 1e-6, "{line}");
            assert!(
                out.contains(
                    "function_duration_seconds_count{function=\"ticks_f\",module=\"m\",otel_scope_name=\"pipetel\"} 3"
                ),
                "{out}"
            );
            assert!(out.contains("# TYPE function_duration_seconds histogram"), "{out}");
        }

        #[test]
        fn handles_are_resolved_once_and_again_after_init() {
            static SITE: Site = Site::new(plain("f"));
            let first: *const Handles = SITE.handles();
            assert!(ptr::eq(first, SITE.handles()));
            // What `init` does last: publish a new context.
            let provider = opentelemetry::global::meter_provider();
            let limit = crate::limits::cardinality_limit();
            installed::publish(installed::Installed::new(&*provider, false, limit));
            let second: *const Handles = SITE.handles();
            assert!(!ptr::eq(first, second));
            assert!(ptr::eq(second, SITE.handles()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::__private::Size;

    #[test]
    fn sizes_never_panic() {
        assert_eq!((-3i32).into_size(), 0);
        assert_eq!(f64::NAN.into_size(), 0);
        assert_eq!((-1.5f64).into_size(), 0);
        assert_eq!(u128::MAX.into_size(), u64::MAX);
        assert_eq!(7usize.into_size(), 7);
        assert_eq!((&9u8).into_size(), 9);
    }
}
