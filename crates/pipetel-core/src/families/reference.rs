//! The metrics reference, written from the tables.

use std::fmt::Write as _;

use super::family::Family;
use super::{function, http, pipeline, process, service, span};
use crate::settings::DEFAULT_SERVICE_PREFIX;

/// The metrics reference as Markdown: a table per group of families, with each family's OTel
/// name, instrument, unit, name on the Prometheus page, attributes and description. The
/// checked-in `docs/src/metrics-reference.md` is [`reference_with`] the GPU table of
/// `pipetel-gpu` (a test fails when it is stale).
pub fn reference() -> String {
    reference_with(Vec::new())
}

/// [`reference()`] with `extra` tables after this crate's own (the GPU families of `pipetel-gpu`,
/// which depends on this crate).
pub fn reference_with(extra: Vec<Table>) -> String {
    let mut out = String::from(
        "# Metrics reference\n\n\
         <!-- Generated from crates/pipetel-core/src/families/ (and the GPU table of pipetel-gpu); \
         regenerate with `PIPETEL_BLESS=1 cargo test -p pipetel --all-features --test metric_families`. -->\n\n\
         Every metric family pipetel produces itself. The OTel name is what an OTLP backend \
         stores; the Prometheus name is what the pull endpoint and the collector's Prometheus \
         exporters write (OTel → Prometheus translation: unit suffix, `_ratio` for unit `1` \
         gauges, `_total` for counters; every series also has `otel_scope_name=\"pipetel\"`).\n",
    );
    for table in tables().into_iter().chain(extra) {
        let _ = write!(out, "\n## {}\n\n{}\n\n", table.title, table.about);
        let _ = writeln!(out, "<!-- ANCHOR: {} -->", table.anchor);
        out.push_str("| OTel name | unit | Prometheus name | instrument | attributes | description |\n");
        out.push_str("|---|---|---|---|---|---|\n");
        let under =
            |name: &str| if table.prefix.is_empty() { name.to_string() } else { format!("{}.{name}", table.prefix) };
        for f in &table.families {
            let attributes = if f.attributes.is_empty() {
                String::new()
            } else {
                f.attributes.iter().map(|a| format!("`{a}`")).collect::<Vec<_>>().join(", ")
            };
            let _ = writeln!(
                out,
                "| `{}` | `{}` | `{}` | {} | {} | {} |",
                under(f.name),
                f.unit,
                f.prometheus_name_under(table.prefix),
                f.instrument.as_str(),
                attributes,
                f.description.replace('|', "\\|"),
            );
        }
        let _ = writeln!(out, "<!-- ANCHOR_END: {} -->", table.anchor);
    }
    out
}

/// One table of the reference: a heading and its families.
#[derive(Debug, Clone)]
pub struct Table {
    /// The heading (`Pipeline stages and workers`).
    pub title: &'static str,
    /// A sentence on where the families come from and when they are there.
    pub about: &'static str,
    /// The families, in the order the reference lists them.
    pub families: Vec<Family>,
    /// The mdBook anchor of its table in the reference (`{{#include metrics-reference.md:pipeline}}`).
    pub anchor: &'static str,
    /// What the families' names are relative to (`service` for the service families, under
    /// their default prefix), or empty.
    pub prefix: &'static str,
}

/// Every table of this crate's families, in the reference's order (`pipetel-gpu` has the GPU
/// table).
pub fn tables() -> Vec<Table> {
    vec![
        Table {
            title: "Pipeline stages and workers",
            anchor: "pipeline",
            about: "The stage table's families (`PIPETEL_STAGE_METRICS`); worker series past `PIPETEL_CARDINALITY_LIMIT` fold.",
            families: pipeline::ALL.to_vec(),
            prefix: "",
        },
        Table {
            title: "Measured functions",
            anchor: "function",
            about: "`#[pipetel::measure]`: a series per function (`function`, `module`, `stage`).",
            families: function::ALL.to_vec(),
            prefix: "",
        },
        Table {
            title: "Spans",
            anchor: "span",
            about: "The span-metrics layer: one histogram over every span (`PIPETEL_SPAN_METRICS`).",
            families: span::ALL.to_vec(),
            prefix: "",
        },
        Table {
            title: "HTTP servers",
            anchor: "http",
            about: "The `http` layer (feature `http`), as the OTel HTTP semantic conventions name them.",
            families: http::ALL.to_vec(),
            prefix: "",
        },
        Table {
            title: "The process",
            anchor: "process",
            about: "`PIPETEL_PROCESS_METRICS` (Linux): the OTel process semantic conventions.",
            families: process::ALL.to_vec(),
            prefix: "",
        },
        Table {
            title: "Service tasks and queues",
            anchor: "service",
            about: "`ServiceMetrics`: names under its prefix (`PIPETEL_SERVICE_PREFIX`, default `service`).",
            families: service::ALL.to_vec(),
            prefix: DEFAULT_SERVICE_PREFIX,
        },
    ]
}
