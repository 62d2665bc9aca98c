//! The Prometheus exposition, in one place: the text writer (family header, label block,
//! sample, histogram, summary), its escaping and number rules, the OTel → Prometheus name
//! translation, and the linter for text that collectors hand in.
//!
//! Always compiled and free of SDK types: the registry's `prometheus_text()` needs it without
//! the `prometheus` feature, and the pull endpoint's encoder, the registry's native histograms
//! and summaries, and the snapshot hub's native histograms all write through it, so the three
//! cannot drift apart.
//!
//! # Formats
//! [`Format`] names the exposition a [`Writer`] produces: the classic text format (0.0.4), or
//! OpenMetrics 1.0 (what a scraper asking for `application/openmetrics-text` gets, and the
//! only one that carries [`exemplar`]s). Every difference between the two is a `match` on the
//! format inside [`Writer`], nowhere else; text collectors' output (always 0.0.4) is rewritten
//! line by line by [`append_checked`].

// Without the pull endpoint only the registry's `prometheus_text()` writes: the name translation
// and some of the writer wait unused.
#![cfg_attr(not(feature = "prometheus"), allow(dead_code, unused_imports))]

mod bucket;
pub(crate) mod exemplar;
mod lint;
mod names;
pub(crate) mod native;
mod text;

pub(crate) use bucket::bucket_index;
pub(crate) use lint::append_checked;
pub(crate) use names::{label_key, label_key_cow, prometheus_name, translate, unit_keeping_name, MetricType};
pub(crate) use text::{
    escape_label_value, scope_labels, streamed, BoundsText, Format, LabelBlock, Number, Writer, CHUNK,
};
