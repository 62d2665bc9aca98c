//! Spans made outside `tracing` (the Python package's `pipetel.span`), timed into the same
//! `span.duration` histogram as the layer `init` installed: the same instrument (or, for a
//! pull-only `init`, the same directly rendered family), the same filter and allow list, with
//! the span's level taken as `INFO`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use opentelemetry::metrics::Histogram;
use opentelemetry::trace::SpanContext;
use tracing::Level;
use tracing_subscriber::filter::Targets;

use super::site::{Series, Site};
use crate::exposition::exemplar::SpanIds;

/// At most this many distinct span names are timed from outside `tracing` (a resolved name's
/// series live for the rest of the process); spans of further names are not counted, so names
/// made from data cannot grow the page without bound.
pub const MAX_FOREIGN_SPAN_NAMES: usize = 1000;

/// A target's resolved span names; `None`: spans of that name do not count.
type ByName = HashMap<Box<str>, Option<&'static Site>>;

/// What the installed layer resolves names with, and the names resolved so far.
struct Resolver {
    histogram: Option<Histogram<f64>>,
    targets: Targets,
    allow: Vec<String>,
    /// By target, then by name; `None`: that span does not count.
    sites: Mutex<HashMap<&'static str, ByName>>,
}

/// The resolver of the layer `init` installed last; `None` before `init` or with span metrics
/// off.
static RESOLVER: Mutex<Option<Arc<Resolver>>> = Mutex::new(None);

/// Makes the layer `init` is installing the one foreign spans are timed with.
pub(super) fn install(histogram: Option<Histogram<f64>>, targets: Targets, allow: Vec<String>) {
    let resolver = Resolver { histogram, targets, allow, sites: Mutex::new(HashMap::new()) };
    *crate::sync::lock(&RESOLVER) = Some(Arc::new(resolver));
}

impl Resolver {
    fn site(&self, name: &str, target: &'static str) -> Option<&'static Site> {
        let mut sites = crate::sync::lock(&self.sites);
        if let Some(site) = sites.get(target).and_then(|by_name| by_name.get(name)) {
            return *site;
        }
        if sites.values().map(HashMap::len).sum::<usize>() >= MAX_FOREIGN_SPAN_NAMES {
            return None;
        }
        let counts = self.targets.would_enable(target, &Level::INFO)
            && (self.allow.is_empty() || self.allow.iter().any(|n| n == name));
        let site = counts.then(|| self.resolve(name, target));
        sites.entry(target).or_default().insert(Box::from(name), site);
        site
    }

    fn resolve(&self, name: &str, target: &'static str) -> &'static Site {
        // Kept for the rest of the process, as the layer keeps its callsites' sites.
        let name: &'static str = Box::leak(Box::from(name));
        let series = |status| Series::of(self.histogram.as_ref(), name, target, status);
        let site: &'static Site =
            Box::leak(Box::new(Site { ok: series("ok"), error: series("error"), status_fields: false, name, target }));
        super::direct::add(site);
        site
    }
}

/// A span made outside `tracing`, being timed for `span.duration` (see the [module
/// docs](crate::span_metrics)). Dropping it without [`ForeignSpanTimer::end`] records nothing.
#[derive(Debug)]
pub struct ForeignSpanTimer {
    site: &'static Site,
    start: u64,
}

impl ForeignSpanTimer {
    /// Starts timing a span named `name` with `span.target` `target`; `None` when span metrics
    /// are off (or `init` has not run), when the filter or allow list leave the span out, or
    /// past [`MAX_FOREIGN_SPAN_NAMES`] names.
    pub fn start(name: &str, target: &'static str) -> Option<Self> {
        let resolver = crate::sync::lock(&RESOLVER).clone()?;
        let site = resolver.site(name, target)?;
        Some(ForeignSpanTimer { site, start: crate::sync::clock().raw() })
    }

    /// Records the span's duration now, under `status` `error` when `failed`; `span` is its
    /// context, whose ids the bucket's exemplar keeps when the exemplar filter allows.
    pub fn end(self, failed: bool, span: Option<&SpanContext>) {
        let end = crate::sync::clock().raw();
        let series = if failed { &self.site.error } else { &self.site.ok };
        series.record(end.saturating_sub(self.start), end, SpanIds::filtered(span));
    }
}
