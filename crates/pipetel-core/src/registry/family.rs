//! A family of series by label values, the per-kind cell behind each series, and the view the
//! registry has of a family of any kind.

use std::any::Any;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock, Weak};

use opentelemetry::metrics::Meter;

use super::error::RegistryError;
use super::kind::Kind;
use super::labels::Labels;
use super::meta::Meta;
use super::opts::Opts;
use super::series::{join, Entry, Series};
use crate::exposition::{Format, Page};
use crate::limits::{self, OVERFLOW_MARK};

/// A registry's view of a family of any kind.
pub(crate) trait AnyFamily: Send + Sync + 'static {
    fn meta(&self) -> &Meta;
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    /// Writes the family as `prometheus_text()` shows it.
    fn write_text(&self, out: &mut String);
    /// Writes the family on the pull endpoint's page; only the families it renders directly
    /// (histograms, summaries, counters and gauges without a pull-side OTel instrument) are
    /// asked, and they override this.
    fn write_pull(&self, page: &mut Page<'_>) {
        if page.format() == Format::Text {
            self.write_text(page.text());
        }
    }
    fn reset(&self);
    /// Registers the OTel instruments on these meters; `push_only` is `None` when nothing would
    /// read the instruments only push exporters see.
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>);
}

/// The kind-specific part of a family.
pub(crate) trait Cell: Send + Sync + Sized + 'static {
    /// The kind.
    const KIND: Kind;
    /// The kind's options (buckets, quantiles and window), compared on registration.
    type Spec: Send + Sync + PartialEq + 'static;
    /// The kind's options from `opts`, checked; `default_buckets` are the registry's.
    fn spec(metric: &str, opts: &Opts, default_buckets: &Arc<[f64]>) -> Result<Self::Spec, RegistryError>;
    /// State the kind keeps once per family.
    type Shared: Default + Send + Sync + 'static;
    fn new(spec: &Self::Spec) -> Self;
    fn reset(&self);
    fn write(family: &Family<Self>, out: &mut String);
    /// Writes the family on the pull endpoint's page; counters and gauges are asked only while
    /// [`Meta::direct`] is set.
    fn write_pull(family: &Family<Self>, page: &mut Page<'_>) {
        if page.format() == Format::Text {
            Self::write(family, page.text());
        }
    }
    fn bind(family: Arc<Family<Self>>, meter: &Meter, push_only: Option<&Meter>);
}

/// Series by their key (label values in the declared order of the label names).
type SeriesMap<C> = RwLock<HashSet<Entry<C>>>;

/// A metric family: its series by label values.
pub(crate) struct Family<C: Cell> {
    pub(crate) meta: Meta,
    pub(crate) spec: C::Spec,
    pub(crate) shared: C::Shared,
    series: SeriesMap<C>,
}

impl<C: Cell> Family<C> {
    pub(crate) fn new(meta: Meta, spec: C::Spec) -> Self {
        Family { meta, spec, shared: C::Shared::default(), series: RwLock::new(HashSet::new()) }
    }

    /// The series for `labels`, created on first use; past the cardinality limit, new label
    /// sets share the overflow series (see [`crate::limits`]).
    pub(crate) fn series(&self, labels: &dyn Labels) -> Result<Arc<Series<C>>, RegistryError> {
        let pairs = labels.label_pairs();
        let declared = &self.meta.labels;
        let mismatch = || RegistryError::LabelMismatch {
            metric: self.meta.exposed_name(),
            expected: declared.to_vec(),
            given: pairs.iter().map(|(k, _)| k.to_string()).collect(),
        };
        if pairs.len() != declared.len() {
            return Err(mismatch());
        }
        let mut found_values: Vec<&str> = Vec::with_capacity(declared.len());
        for name in declared.iter() {
            let mut found = pairs.iter().filter(|(k, _)| k == name);
            match (found.next(), found.next()) {
                (Some((_, v)), None) => found_values.push(v),
                _ => return Err(mismatch()),
            }
        }
        let key = join(found_values.iter().copied());
        if let Some(s) = crate::sync::read(&self.series).get(&key[..]) {
            return Ok(s.0.clone());
        }
        let mut map = crate::sync::write(&self.series);
        if let Some(s) = map.get(&key[..]) {
            return Ok(s.0.clone());
        }
        let key = if limits::admits(map.len(), || self.meta.exposed_name()) {
            key
        } else {
            join(std::iter::repeat_n(OVERFLOW_MARK, declared.len()))
        };
        if let Some(s) = map.get(&key[..]) {
            return Ok(s.0.clone());
        }
        let series = Arc::new(Series::new(key, C::new(&self.spec)));
        map.insert(Entry(series.clone()));
        Ok(series)
    }

    /// Runs `f` for each series, in no particular order (the pull endpoint's).
    pub(crate) fn each(&self, mut f: impl FnMut(&Series<C>)) {
        for s in crate::sync::read(&self.series).iter() {
            f(&s.0);
        }
    }

    /// Runs `f` for each series in the order of their label values (`prometheus_text()`'s).
    pub(crate) fn each_sorted(&self, mut f: impl FnMut(&Series<C>)) {
        let n = self.meta.labels.len();
        let mut all: Vec<Arc<Series<C>>> = crate::sync::read(&self.series).iter().map(|s| s.0.clone()).collect();
        all.sort_by(|a, b| a.values(n).cmp(b.values(n)));
        for s in &all {
            f(s);
        }
    }

    /// Whether the family has no series yet.
    pub(crate) fn is_empty(&self) -> bool {
        crate::sync::read(&self.series).is_empty()
    }
}

impl<C: Cell> AnyFamily for Family<C> {
    fn meta(&self) -> &Meta {
        &self.meta
    }
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
    fn write_text(&self, out: &mut String) {
        C::write(self, out);
    }
    fn write_pull(&self, page: &mut Page<'_>) {
        C::write_pull(self, page);
    }
    fn reset(&self) {
        self.each(|s| s.cell.reset());
    }
    fn bind(self: Arc<Self>, meter: &Meter, push_only: Option<&Meter>) {
        C::bind(self, meter, push_only);
    }
}

/// Runs `f` for each series of a live family, from an observable instrument's callback.
pub(crate) fn observe_live<C: Cell>(weak: &Weak<Family<C>>, f: impl FnMut(&Series<C>)) {
    if let Some(family) = weak.upgrade() {
        if !family.meta.removed.load(Ordering::Acquire) {
            family.each(f);
        }
    }
}
