//! The handles callers record through: one series of a family ([`Handle`], inside each metric
//! type), the [`Metric`] trait those types share, and [`MetricVec`], a labelled metric.

use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use super::error::RegistryError;
use super::family::{AnyFamily, Cell, Family};
use super::labels::Labels;
use super::series::Series;

/// One series and its family: what a metric handle ([`super::Counter`], ...) holds.
pub(crate) struct Handle<C: Cell> {
    pub(crate) family: Arc<Family<C>>,
    pub(crate) series: Arc<Series<C>>,
}

impl<C: Cell> Clone for Handle<C> {
    fn clone(&self) -> Self {
        Handle { family: self.family.clone(), series: self.series.clone() }
    }
}

impl<C: Cell> Handle<C> {
    /// The series of `labels` in `family`.
    pub(crate) fn of(family: Arc<Family<C>>, labels: &dyn Labels) -> Result<Self, RegistryError> {
        let series = family.series(labels)?;
        Ok(Handle { family, series })
    }

    /// The only series of a family without labels.
    pub(crate) fn unlabelled(family: Arc<Family<C>>) -> Result<Self, RegistryError> {
        Self::of(family, &NO_LABELS)
    }

    /// The exposition name.
    pub(crate) fn name(&self) -> String {
        self.family.meta.exposed_name()
    }

    pub(crate) fn debug(&self, kind: &str, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<&str> = self.series.values(self.family.meta.labels.len()).collect();
        f.debug_struct(kind).field("name", &self.name()).field("labels", &labels).finish()
    }
}

/// The label set of an unlabelled series.
const NO_LABELS: [(&str, &str); 0] = [];

/// A kind of metric handle: [`super::Counter`], [`super::Gauge`], [`super::Histogram`],
/// [`super::Summary`]. Sealed: the registry makes them.
pub trait Metric: Clone + sealed::Sealed {}

pub(crate) mod sealed {
    use std::any::Any;
    use std::sync::Arc;

    use super::super::error::RegistryError;
    use super::super::labels::Labels;

    /// How [`super::MetricVec`] makes handles of a kind.
    pub trait Sealed: Sized {
        /// The handle of series `labels` of `family`, a family of this kind.
        fn of(family: Arc<dyn Any + Send + Sync>, labels: &dyn Labels) -> Result<Self, RegistryError>;
    }
}

/// Declares a metric handle type ([`super::Counter`], ...), a series of a `Cell` kind, and its
/// [`MetricVec`] type, with what every handle shares: `Clone`, `name()`, `Debug`, and
/// [`Metric`], through which a [`MetricVec`] makes it.
macro_rules! metric_handle {
    (
        $(#[$meta:meta])*
        pub struct $ty:ident($cell:ident);
        $(#[$vec_meta:meta])*
        pub type $vec:ident;
    ) => {
        $(#[$meta])*
        #[derive(Clone)]
        pub struct $ty(pub(crate) super::handle::Handle<$cell>);

        $(#[$vec_meta])*
        pub type $vec = super::handle::MetricVec<$ty>;

        impl $ty {
            /// The name in the Prometheus exposition (with `_total` for counters).
            pub fn name(&self) -> String {
                self.0.name()
            }
        }

        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.0.debug(stringify!($ty), f)
            }
        }

        impl super::handle::Metric for $ty {}

        impl super::handle::sealed::Sealed for $ty {
            fn of(
                family: std::sync::Arc<dyn std::any::Any + Send + Sync>,
                labels: &dyn super::labels::Labels,
            ) -> Result<Self, super::error::RegistryError> {
                super::handle::handle_of(family, labels).map($ty)
            }
        }
    };
}
pub(crate) use metric_handle;

/// Makes handles of the kind whose family `family` is; the registry only ever pairs a family
/// with its own kind's handle type.
pub(crate) fn handle_of<C: Cell>(
    family: Arc<dyn Any + Send + Sync>,
    labels: &dyn Labels,
) -> Result<Handle<C>, RegistryError> {
    match family.downcast::<Family<C>>() {
        Ok(family) => Handle::of(family, labels),
        // Unreachable: `MetricVec<M>` is built from a family of `M`'s kind.
        Err(_) => Err(RegistryError::InvalidOption {
            metric: String::new(),
            reason: "internal: a metric family of another kind".to_string(),
        }),
    }
}

/// A labelled metric: one `M` ([`super::Counter`], [`super::Gauge`], [`super::Histogram`] or
/// [`super::Summary`]) per label set, created on first use. Cheap to clone; clones are the same
/// metric. Aliased as [`super::CounterVec`], [`super::GaugeVec`], [`super::HistogramVec`],
/// [`super::SummaryVec`].
pub struct MetricVec<M: Metric> {
    family: Arc<dyn AnyFamily>,
    _kind: PhantomData<fn() -> M>,
}

impl<M: Metric> Clone for MetricVec<M> {
    fn clone(&self) -> Self {
        MetricVec { family: self.family.clone(), _kind: PhantomData }
    }
}

impl<M: Metric> std::fmt::Debug for MetricVec<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricVec")
            .field("name", &self.family.meta().exposed_name())
            .field("labels", &self.family.meta().labels)
            .finish()
    }
}

impl<M: Metric> MetricVec<M> {
    pub(crate) fn new(family: Arc<dyn AnyFamily>) -> Self {
        MetricVec { family, _kind: PhantomData }
    }

    /// The metric of the series with these label values, created on first use: as pairs
    /// (`[("method", "GET")]`, a `Vec`) or a map (`HashMap`, `BTreeMap`), in any order. Keep
    /// it: recording through it touches only that series. Past the cardinality limit
    /// ([`crate::registry::set_cardinality_limit`]), new label sets share one overflow series.
    ///
    /// # Errors
    /// [`RegistryError::LabelMismatch`] when the label names differ from those the metric was
    /// registered with.
    pub fn with(&self, labels: impl Labels) -> Result<M, RegistryError> {
        M::of(self.family.clone().as_any(), &labels)
    }

    /// The name in the Prometheus exposition (with `_total` for counters).
    pub fn name(&self) -> String {
        self.family.meta().exposed_name()
    }

    /// The label names, in the order they were declared.
    pub fn label_names(&self) -> &[String] {
        &self.family.meta().labels
    }

    /// Resets every series to its initial state.
    pub fn reset(&self) {
        self.family.reset();
    }
}
