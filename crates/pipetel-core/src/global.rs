//! What `init` installed, and the one way for anything built before it to learn of it.
//!
//! Instruments taken from a meter provider before `init` installs the real one are no-ops
//! forever, and `init` may run after a registry, a snapshot hub or a measured function was
//! created. So nothing in the crate keeps its own idea of "the meter": everything that binds OTel
//! instruments for pipetel reads this context, and anything built before `init` registers here
//! to be told when it changes:
//!
//! - registries and snapshot hubs on the global binding register a [`Rebind`] listener (held
//!   weakly, so dropping them unregisters) and bind their instruments again when `init` runs;
//! - measured functions, whose handles live in statics and must cost nothing to look up, compare
//!   [`generation`] (one atomic load per call) with the generation of their handles and resolve
//!   them again on their next call;
//! - the pipeline runtime is installed by `init` with the context it is about to publish.
//!
//! Before `init` (or in a process that installs its own global meter provider instead), the
//! context is the global provider's meter for pipetel's scope, with no push-only meter.
//!
//! It also keeps the switches `init` resolved that code outside `init` must honour: whether
//! stage metrics are on (`PIPETEL_STAGE_METRICS`), the service-metrics settings that
//! [`crate::ServiceMetrics::new`] and [`crate::Registry::new`] apply, and a reader of the GPU
//! poller's latest sample.
//!
//! This module is a leaf: it imports nothing of the crate but `sync`, `limits` and `config`, so
//! the modules that register here never import the rest of `init` (nor the exporters).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock, Weak};

use opentelemetry::metrics::Meter;
use opentelemetry::InstrumentationScope;

use crate::settings::ServiceMetricsConfig;
use crate::sync::{read, write};

/// The name of pipetel's instrumentation scope (meter and tracer name).
pub const SCOPE_NAME: &str = "pipetel";

/// The instrumentation scope whose metrics go to push exporters (OTLP, console) only: the pull
/// endpoint leaves them out, because an exposition source renders the same data there in a
/// form OTel instruments cannot express (Prometheus summaries, direct histograms of snapshots).
#[doc(hidden)]
pub const PUSH_ONLY_SCOPE: &str = "pipetel.push_only";

/// What `init` installed: the meters pipetel's own instruments bind to.
#[derive(Debug, Clone)]
#[doc(hidden)]
pub struct Installed {
    /// Bumped by each publication; 0 before `init`.
    pub generation: u64,
    /// Pipetel's scope on the installed meter provider.
    pub meter: Meter,
    /// The push-only scope, present only when a push metric exporter (OTLP, console) exists:
    /// with the pull endpoint alone nothing would read it.
    pub push_only: Option<Meter>,
    /// The most series one metric keeps.
    pub cardinality_limit: usize,
}

impl Installed {
    /// A context to publish: the meters of `provider`, the push-only one when something pushes.
    pub fn new<P>(provider: &P, pushes: bool, cardinality_limit: usize) -> Self
    where
        P: opentelemetry::metrics::MeterProvider + ?Sized,
    {
        Installed {
            generation: 0,
            meter: provider.meter(SCOPE_NAME),
            push_only: pushes
                .then(|| provider.meter_with_scope(InstrumentationScope::builder(PUSH_ONLY_SCOPE).build())),
            cardinality_limit,
        }
    }
}

/// Something built before (or after) `init` that binds OTel instruments for pipetel.
#[doc(hidden)]
pub trait Rebind: Send + Sync {
    /// Binds the instruments again on what `init` just installed. Called outside the context's
    /// lock, so it may read [`current`].
    fn rebind(&self, installed: &Installed);
}

struct State {
    /// `init` ran (or is running) in this process.
    claimed: bool,
    current: Option<Installed>,
    listeners: Vec<Weak<dyn Rebind>>,
}

static STATE: RwLock<State> = RwLock::new(State { claimed: false, current: None, listeners: Vec::new() });
/// [`Installed::generation`] of the current context, readable with one load on recording paths.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The generation of the current context (0 before `init`).
#[inline]
#[doc(hidden)]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Acquire)
}

/// The current context: what `init` installed, or the global provider's meter before it.
#[doc(hidden)]
pub fn current() -> Installed {
    if let Some(installed) = &read(&STATE).current {
        return installed.clone();
    }
    Installed {
        generation: 0,
        meter: opentelemetry::global::meter(SCOPE_NAME),
        push_only: None,
        cardinality_limit: crate::limits::cardinality_limit(),
    }
}

/// The meter pipetel's own instruments use: pipetel's scope on the meter provider `init` built
/// (whether or not it also set it as the global one); before `init`, or when the SDK is
/// disabled, the global meter provider's (a no-op one unless the program set its own).
///
/// ```
/// let latency = pipetel_core::meter()
///     .f64_histogram("tokenize.latency")
///     .with_unit("s")
///     .with_boundaries(pipetel_core::buckets::SECONDS_BUCKETS.to_vec()) // the SDK's default bounds are for ms
///     .build();
/// latency.record(0.042, &[pipetel_core::opentelemetry::KeyValue::new("model", "small")]);
/// ```
pub fn meter() -> opentelemetry::metrics::Meter {
    current().meter
}

/// Registers `listener` to be rebound by every later publication, for as long as it lives.
#[doc(hidden)]
pub fn register(listener: Weak<dyn Rebind>) {
    let mut state = write(&STATE);
    state.listeners.retain(|l| l.strong_count() > 0);
    state.listeners.push(listener);
}

/// Claims `init` for this process: false when it was already claimed.
#[doc(hidden)]
pub fn claim() -> bool {
    !std::mem::replace(&mut write(&STATE).claimed, true)
}

/// Gives the claim back after a failed `init`, which installed nothing.
#[doc(hidden)]
pub fn release() {
    write(&STATE).claimed = false;
}

/// Publishes `installed` (with the next generation) and rebinds every live listener. The last
/// step of `init`: it cannot be undone.
#[doc(hidden)]
pub fn publish(mut installed: Installed) -> Installed {
    crate::limits::set_cardinality_limit(installed.cardinality_limit);
    let listeners: Vec<Arc<dyn Rebind>> = {
        let mut state = write(&STATE);
        installed.generation = state.current.as_ref().map_or(generation(), |c| c.generation) + 1;
        state.current = Some(installed.clone());
        GENERATION.store(installed.generation, Ordering::Release);
        state.listeners.retain(|l| l.strong_count() > 0);
        state.listeners.iter().filter_map(Weak::upgrade).collect()
    };
    for listener in listeners {
        listener.rebind(&installed);
    }
    installed
}

// ----- switches `init` resolved -----

/// `PIPETEL_STAGE_METRICS` as `init` resolved it; on before `init`.
static STAGE_METRICS: AtomicBool = AtomicBool::new(true);
/// The service-metrics settings `init` resolved.
static SERVICE: RwLock<Option<ServiceMetricsConfig>> = RwLock::new(None);

/// Whether stage metrics are on: `false` once `init` ran with `PIPETEL_STAGE_METRICS=false`
/// (or `pipeline.metrics = false`, or `with_stage_metrics(false)`). One relaxed load.
#[inline]
#[doc(hidden)]
pub fn stage_metrics() -> bool {
    STAGE_METRICS.load(Ordering::Relaxed)
}

/// Records the switches `init` resolved; called by `init` before it publishes its context, so
/// anything resolved in the new generation sees them.
#[doc(hidden)]
pub fn configure(stage_metrics: bool, service: &ServiceMetricsConfig) {
    STAGE_METRICS.store(stage_metrics, Ordering::Relaxed);
    *write(&SERVICE) = Some(service.clone());
}

/// The service-metrics settings in effect: those `init` resolved (code, then environment, then
/// file); before `init`, the service-metrics variables of the environment (read once: the
/// configuration file applies from `init` on). Variables that cannot be read give the
/// defaults, with one warning naming the culprit.
#[doc(hidden)]
pub fn service_config() -> ServiceMetricsConfig {
    if let Some(config) = read(&SERVICE).as_ref() {
        return config.clone();
    }
    static BEFORE_INIT: OnceLock<ServiceMetricsConfig> = OnceLock::new();
    BEFORE_INIT
        .get_or_init(|| match ServiceMetricsConfig::from_env() {
            Ok(config) => config,
            Err(error) => {
                tracing::warn!(
                    target: "pipetel",
                    %error,
                    "service metrics use their default settings: the configuration cannot be read"
                );
                ServiceMetricsConfig::default()
            }
        })
        .clone()
}
