//! The OTel instruments of a hub's families and their callbacks.

use std::collections::HashSet;
use std::sync::{Mutex, Weak};
use std::time::Instant;

use opentelemetry::metrics::{AsyncInstrument, Meter};
use opentelemetry::KeyValue;
use pipetel_recorders::{Family, Kind};

use super::config::HistogramExport;
use super::state::State;
use super::view::View;
use crate::global::{Installed, Rebind};
use crate::sync::lock;

/// Where a hub's instruments go.
pub(super) enum Meters {
    /// The meters `init` installed (the installed context): a hub made before `init` registers
    /// its instruments again when it runs.
    Installed,
    /// Fixed meters: values, and histograms as counters.
    Fixed { meter: Meter, push_meter: Meter },
}

/// The OTel instruments of a hub's families.
pub(super) struct Instruments {
    pub(super) meters: Meters,
    pub(super) state: Weak<Mutex<State>>,
    pub(super) histograms: HistogramExport,
    /// Families whose instruments are registered, and the context generation they were
    /// registered in. Separate from `state` on purpose: the SDK runs callbacks (which lock
    /// `state`) under its own pipeline lock, and registering an instrument takes that pipeline
    /// lock, so registering while holding `state` could deadlock.
    pub(super) registered: Mutex<(u64, HashSet<String>)>,
}

impl Instruments {
    /// The generation of the meters and the meters: the installed context's, where histograms
    /// go as counters only when something pushes (the pull endpoint renders them directly);
    /// before `init`, the global provider's, push-only scope included.
    fn meters(&self) -> (u64, Meter, Option<Meter>) {
        match &self.meters {
            Meters::Fixed { meter, push_meter } => (0, meter.clone(), Some(push_meter.clone())),
            Meters::Installed => {
                let installed = crate::global::current();
                let push = match installed.generation {
                    0 => Some(opentelemetry::global::meter(crate::global::PUSH_ONLY_SCOPE)),
                    _ => installed.push_only,
                };
                (installed.generation, installed.meter, push)
            }
        }
    }

    /// Registers the OTel instruments of a family once per generation of the meters.
    pub(super) fn register(&self, family: &Family) {
        let mut registered = lock(&self.registered);
        let (generation, meter, push_meter) = self.meters();
        if registered.0 != generation {
            *registered = (generation, HashSet::new());
        }
        if !registered.1.insert(family.name().to_owned()) {
            return;
        }
        let name = family.name().to_owned();
        let help = family.help().to_owned();
        let unit = family.unit().to_owned();
        let weak = self.state.clone();
        // An observable instrument whose callback reads the family's current view.
        macro_rules! observable {
            ($meter:expr, $builder:ident($instrument:expr), $description:expr, $unit:expr, |$o:ident, $view:ident| $read:expr) => {{
                let (n, w) = (name.clone(), weak.clone());
                $meter
                    .$builder($instrument)
                    .with_description($description)
                    .with_unit($unit)
                    .with_callback(move |$o| observe(&w, &n, |$view| $read))
                    .build();
            }};
        }
        match family.kind() {
            Kind::Counter => {
                observable!(meter, f64_observable_counter(name.clone()), help, unit, |o, view| view.observe_values(o))
            }
            Kind::Gauge => {
                observable!(meter, f64_observable_gauge(name.clone()), help, unit, |o, view| view.observe_values(o))
            }
            Kind::Histogram if self.histograms == HistogramExport::Counters => {
                let Some(push_meter) = push_meter else { return };
                // Named as the pull endpoint renders the family (`<prom>_bucket{le}`, `_sum`,
                // `_count`) and non-monotonic, so a collector's Prometheus translation keeps the
                // names as they are (a monotonic sum would gain `_total`, a unit a word).
                use crate::exposition::{prometheus_name, unit_keeping_name, MetricType};
                let prom = prometheus_name(&name, &unit, false, false);
                let series = |suffix: &str, unit: &str| {
                    let n = format!("{prom}_{suffix}");
                    let u = unit_keeping_name(&n, unit, MetricType::UpDownSum).to_owned();
                    (n, u)
                };
                let (bucket, bucket_unit) = series("bucket", "{observation}");
                let bucket_help = format!("{help} (cumulative count per bucket upper bound `le`)");
                observable!(push_meter, i64_observable_up_down_counter(bucket), bucket_help, bucket_unit, |o, view| {
                    view.observe_buckets(&AsI64(o))
                });
                let (count, count_unit) = series("count", "{observation}");
                let count_help = format!("{help} (count of observations)");
                observable!(push_meter, i64_observable_up_down_counter(count), count_help, count_unit, |o, view| {
                    view.observe_counts(&AsI64(o))
                });
                let (sum, sum_unit) = series("sum", &unit);
                let sum_help = format!("{help} (sum of observations)");
                observable!(push_meter, f64_observable_up_down_counter(sum), sum_help, sum_unit, |o, view| {
                    view.observe_sums(o)
                });
            }
            Kind::Histogram => {}
        }
    }
}

/// A hub made with [`SnapshotHub::new`](super::SnapshotHub::new) registers its families'
/// instruments again on the meter provider `init` installs.
impl Rebind for Instruments {
    fn rebind(&self, _: &Installed) {
        let Some(state) = self.state.upgrade() else { return };
        // Collected first: registering must not hold the state lock (see `registered`).
        let families: Vec<Family> = lock(&state).families.values().map(|e| e.family.clone()).collect();
        drop(state);
        for family in &families {
            self.register(family);
        }
    }
}

/// Counts observed into an `i64` up-down counter (the push form of a histogram's buckets and
/// count); a count beyond `i64::MAX` reads as `i64::MAX`.
struct AsI64<'a>(&'a dyn AsyncInstrument<i64>);

impl AsyncInstrument<u64> for AsI64<'_> {
    fn observe(&self, measurement: u64, attributes: &[KeyValue]) {
        self.0.observe(i64::try_from(measurement).unwrap_or(i64::MAX), attributes);
    }
}

/// A callback body: the family's current view, if the hub still exists.
fn observe(state: &Weak<Mutex<State>>, name: &str, f: impl FnOnce(&View)) {
    // A dropped hub leaves its callbacks registered with the SDK; they then observe nothing.
    let Some(state) = state.upgrade() else { return };
    let mut state = lock(&state);
    if let Some(view) = state.view(name, Instant::now()) {
        f(view);
    }
}
