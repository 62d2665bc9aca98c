//! How a site finds its handles: resolved on its first call and again after each `init`, with
//! the observable instruments registered once per meter provider.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, OnceLock};

use opentelemetry::metrics::{ObservableCounter, ObservableUpDownCounter};

use super::direct::add_direct_source;
use super::names::{FUNCTION_CALLS, FUNCTION_DURATION, FUNCTION_ERRORS, FUNCTION_IN_FLIGHT, SIZE_BUCKETS};
use super::site::{Attrs, Cells, DirectSet, Handles, Sink, Site, SITES};
use crate::exposition::direct::Direct;
use crate::exposition::exemplar;
use crate::families::function as fam;
use crate::global;

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
    let meter = crate::global::meter();
    let calls = fam::CALLS
        .describe(meter.u64_observable_counter(FUNCTION_CALLS))
        .with_callback(|o| each_base(o, |cells| cells.calls.load(Ordering::Relaxed)))
        .build();
    let errors = fam::ERRORS
        .describe(meter.u64_observable_counter(FUNCTION_ERRORS))
        .with_callback(|o| {
            each_site(|site, attrs| {
                // Only kinds that happened: a function that never failed has no error series.
                for (cell, attrs) in [(&site.cells.errors_err, &attrs.err), (&site.cells.errors_panic, &attrs.panic)] {
                    let n = cell.load(Ordering::Relaxed);
                    if n > 0 {
                        o.observe(n, attrs);
                    }
                }
            })
        })
        .build();
    let in_flight = fam::IN_FLIGHT
        .describe(meter.i64_observable_up_down_counter(FUNCTION_IN_FLIGHT))
        .with_callback(|o| each_base(o, Cells::in_flight))
        .build();
    *observers = Some((generation, (calls, errors, in_flight)));
}

impl Handles {
    fn resolve(site: &'static Site, attrs: &Attrs, generation: u64) -> Self {
        let info = &site.info;
        if !global::stage_metrics() {
            return Handles { generation, enabled: false, duration: Sink::Off, input: Sink::Off, output: Sink::Off };
        }
        let installed = global::current();
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
            let set = site.direct.get_or_init(|| DirectSet {
                duration: Direct::new(layout, true),
                input: info.input_size.then(|| Direct::new(SIZE_BUCKETS, false)),
                output: info.output_size.then(|| Direct::new(SIZE_BUCKETS, false)),
            });
            add_direct_source();
            let direct = |h: &'static Option<Direct>| h.as_ref().map_or(Sink::Off, Sink::Direct);
            return Handles {
                generation,
                enabled: true,
                duration: Sink::Direct(&set.duration),
                input: direct(&set.input),
                output: direct(&set.output),
            };
        }
        let meter = installed.meter;
        let size = |family: &'static crate::families::Family| {
            let name = family.name;
            let histogram = family
                .describe(meter.u64_histogram(name))
                .with_boundaries(SIZE_BUCKETS.to_vec())
                .build()
                .bind(&attrs.base);
            Sink::Otel(histogram, exemplar::register(name, &attrs.base, SIZE_BUCKETS))
        };
        let duration = fam::DURATION
            .describe(meter.f64_histogram(FUNCTION_DURATION))
            .with_boundaries(layout.to_vec())
            .build()
            .bind(&attrs.base);
        Handles {
            generation,
            enabled: true,
            duration: Sink::Otel(duration, exemplar::register(FUNCTION_DURATION, &attrs.base, layout)),
            input: if info.input_size { size(&fam::INPUT_SIZE) } else { Sink::Off },
            output: if info.output_size { size(&fam::OUTPUT_SIZE) } else { Sink::Off },
        }
    }
}

impl Site {
    #[inline]
    pub(super) fn handles(&'static self) -> &'static Handles {
        let generation = global::generation();
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
        // Published handles are never freed (see the `measure` module docs); a thread that loses the
        // race to publish gets the winner's.
        self.handles.replace(seen, Handles::resolve(self, attrs, generation))
    }
}
