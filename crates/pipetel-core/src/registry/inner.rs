//! A registry's shared state (its families by name, text collectors, default buckets and where
//! its instruments go), how `init` binds it again, and how the pull endpoint reads it.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use opentelemetry::metrics::Meter;

use super::collector::{self, TextFn};
use super::family::AnyFamily;
use super::kind::Kind;
use crate::global::{Installed, Rebind};
use crate::sync::{read, write};

/// Where a registry's instruments go.
pub(super) enum Binding {
    /// The meters `init` installed (the installed context), bound again when it runs.
    Global,
    /// Fixed meters (tests, or a provider of the caller's own).
    Fixed { meter: Meter, push_only: Meter },
}

/// What every clone of a [`Registry`](super::Registry) shares.
pub(super) struct Inner {
    pub(super) prefix: String,
    pub(super) families: RwLock<BTreeMap<String, Arc<dyn AnyFamily>>>,
    pub(super) text_collectors: RwLock<Vec<Arc<TextFn>>>,
    pub(super) default_buckets: RwLock<Arc<[f64]>>,
    /// [`Registry::set_default_buckets`](super::Registry::set_default_buckets) chose the
    /// default buckets: `init` leaves them alone.
    pub(super) buckets_chosen: AtomicBool,
    pub(super) binding: Binding,
    pub(super) text_warned: AtomicBool,
}

/// A registry on the global binding is told when `init` installs the real meter provider:
/// instruments taken from the global provider before then are no-ops forever, so every family
/// bound in an older generation registers its instruments again.
impl Rebind for Inner {
    fn rebind(&self, installed: &Installed) {
        // `init` resolved the configured default buckets: histograms registered from now on
        // without their own use them, unless the program chose others.
        if !self.buckets_chosen.load(Ordering::Relaxed) {
            *write(&self.default_buckets) = Arc::from(crate::global::service_config().histogram_buckets);
        }
        let families = read(&self.families);
        for family in families.values() {
            if family.meta().bound.swap(installed.generation, Ordering::AcqRel) != installed.generation {
                family.clone().bind(&installed.meter, installed.push_only.as_ref());
            }
        }
    }
}

impl crate::exposition::ExpositionSource for Inner {
    fn write_exposition(&self, page: &mut crate::exposition::Page<'_>) {
        let families = read(&self.families);
        let mut taken = collector::taken_names(&families);
        for family in families.values() {
            // Histograms and summaries are read from the registry's own state (their OTel form
            // is push-only); so are counters and gauges without push exporters, which otherwise
            // reach the pull endpoint through their OTel instruments.
            let meta = family.meta();
            if matches!(meta.kind, Kind::Histogram | Kind::Summary) || meta.direct.load(Ordering::Acquire) {
                family.write_pull(page);
            }
        }
        drop(families);
        let format = page.format();
        self.write_text_collectors(&mut taken, page.text(), format);
    }
}

impl Inner {
    pub(super) fn write_text_collectors(
        &self,
        taken: &mut HashSet<String>,
        out: &mut String,
        format: crate::exposition::Format,
    ) {
        let collectors: Vec<Arc<TextFn>> = read(&self.text_collectors).iter().cloned().collect();
        if let Some((line, why)) = collector::write_text_collectors(&collectors, taken, out, format) {
            if !self.text_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    target: "pipetel",
                    registry = %self.prefix,
                    line,
                    "text collector output dropped: {why} (logged once per registry)"
                );
            }
        }
    }
}
