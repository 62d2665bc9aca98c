//! What every family knows of itself, whatever its kind: names, help, unit, labels, and the
//! flags the registry and the exporters read.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::kind::Kind;

/// What every family shares, whatever its kind.
pub(crate) struct Meta {
    /// The exposition base name: prefix and name, without `_total`.
    pub(crate) name: String,
    /// The OTel instrument name.
    pub(crate) otel_name: String,
    pub(crate) unit: String,
    pub(crate) help: String,
    pub(crate) kind: Kind,
    pub(crate) labels: Box<[String]>,
    /// The registry generation the family's instruments were last registered for.
    pub(crate) bound: AtomicU64,
    /// Set by `Registry::clear`: the family is no longer exported, though handles still record.
    pub(crate) removed: AtomicBool,
    /// A counter or gauge with no OTel instrument on the pull endpoint's meter (no push
    /// exporter installed): the pull endpoint renders it from the registry's own cells.
    pub(crate) direct: AtomicBool,
    warned: AtomicBool,
}

impl Meta {
    pub(crate) fn new(
        name: String,
        otel_name: String,
        unit: String,
        help: String,
        kind: Kind,
        labels: Box<[String]>,
    ) -> Self {
        Meta {
            name,
            otel_name,
            unit,
            help,
            kind,
            labels,
            bound: AtomicU64::new(0),
            removed: AtomicBool::new(false),
            direct: AtomicBool::new(false),
            warned: AtomicBool::new(false),
        }
    }

    /// The name under which the family's samples are exposed.
    pub(crate) fn exposed_name(&self) -> String {
        match self.kind {
            Kind::Counter => format!("{}_total", self.name),
            _ => self.name.clone(),
        }
    }

    /// Every sample name the family writes (for conflict checks).
    pub(crate) fn sample_names(&self) -> Vec<String> {
        let n = &self.name;
        match self.kind {
            Kind::Counter => vec![format!("{n}_total")],
            Kind::Gauge => vec![n.clone()],
            Kind::Histogram => vec![n.clone(), format!("{n}_bucket"), format!("{n}_sum"), format!("{n}_count")],
            Kind::Summary => vec![n.clone(), format!("{n}_sum"), format!("{n}_count")],
        }
    }

    /// Logs a refused recording once per family: recording calls return `()` and must not
    /// flood the log from a hot loop.
    pub(crate) fn warn_once(&self, what: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(target: "pipetel", metric = %self.exposed_name(), "{what}; ignored (logged once per metric)");
        }
    }
}
