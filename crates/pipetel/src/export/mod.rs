//! Exporters: the built-in ones (the Prometheus pull endpoint, OTLP push, the console), each
//! declared once in its own module as a [`BuiltIn`](entry::BuiltIn) and listed once in
//! [`BUILT_IN`] (here); what they share (batch processors, delivery ledgers).
//!
//! `init` builds each signal's pipeline from the entries the configuration names, the
//! configuration reads the allowed names (and its "expected ..." error) from [`BUILT_IN`], and the
//! exporters guide's list of built-in exporters is written from it (a test keeps it current).

/// `Some(builder)` in a build with `feature`, `None` without, for a [`Serves`](entry::Serves):
/// `init` then answers with the entry's [`disabled`](entry::BuiltIn::disabled) error.
macro_rules! built_with {
    ($feature:literal, $build:path) => {{
        #[cfg(feature = $feature)]
        let build = Some($build as _);
        #[cfg(not(feature = $feature))]
        let build = None;
        build
    }};
}

pub(crate) mod batch;
pub(crate) mod console;
#[cfg_attr(not(feature = "otlp"), allow(dead_code))]
pub(crate) mod delivery;
pub(crate) mod entry;
pub(crate) mod ledgers;
pub(crate) mod otlp;
pub(crate) mod profiles;
pub(crate) mod prometheus;
pub(crate) mod registry;

#[cfg(feature = "prometheus")]
pub use self::prometheus::{PrometheusRender, OPENMETRICS_CONTENT_TYPE, TEXT_CONTENT_TYPE};

/// Every built-in exporter, once: adding one is its module (above) and its line here. The order
/// is the order of the names in the "expected ..." error and in the exporters guide's list.
pub(crate) static BUILT_IN: &[&entry::BuiltIn] = &[&prometheus::EXPORTER, &otlp::EXPORTER, &console::EXPORTER];

#[cfg(test)]
mod tests {
    use super::registry::entry;
    use crate::config::{LogExporter as L, MetricExporter as M, TraceExporter as T};

    /// Every variant of the public exporter enums is an entry's: a new variant fails to compile in
    /// the matches below until it is listed, and then fails here until an entry serves it.
    #[test]
    fn every_variant_has_its_entry() {
        for v in [M::Prometheus, M::Otlp, M::Console] {
            match v {
                M::Prometheus | M::Otlp | M::Console => assert!(entry(v).is_some(), "{v:?}"),
            }
        }
        for v in [T::Otlp, T::Console] {
            match v {
                T::Otlp | T::Console => assert!(entry(v).is_some(), "{v:?}"),
            }
        }
        for v in [L::Otlp, L::Console] {
            match v {
                L::Otlp | L::Console => assert!(entry(v).is_some(), "{v:?}"),
            }
        }
    }
}
