//! The Prometheus exposition, in one place: the text writer (family header, label block,
//! sample, histogram, summary), its escaping and number rules, the OTel → Prometheus name and
//! label translation, the linter for text that collectors hand in, and the contract of the
//! pull endpoint's page: a [`Page`] (the text, its format, its streaming) handed to the OTel
//! encoder and to every [`ExpositionSource`], and [`OwnFamily`], a family written as the
//! encoder writes an instrument of pipetel's own scope.
//!
//! Always compiled and free of SDK types: the registry's `prometheus_text()` needs it without
//! the `prometheus` feature, and the pull endpoint's encoder, the registry's direct families,
//! the snapshot hub's direct histograms, measured functions' and span metrics' direct
//! histograms and the stage table's families all write through it, so they cannot drift apart.
//! Producers of extra families depend on this module, never on the exporter.
//!
//! # Formats
//! [`Format`] names the exposition a [`Writer`] produces: the classic text format (0.0.4), or
//! OpenMetrics 1.0 (what a scraper asking for `application/openmetrics-text` gets, and the
//! only one that carries [`exemplar`]s). Every difference between the two is a `match` on the
//! format inside [`Writer`], nowhere else; text collectors' output (always 0.0.4) is rewritten
//! line by line by [`append_checked`].

// Plumbing between this crate and `pipetel` (hidden from the docs): its docs name the private
// items they are written for.
#![allow(rustdoc::private_intra_doc_links)]

mod bucket;
pub(crate) mod direct;
#[doc(hidden)]
pub mod exemplar;
mod lint;
pub mod merge;
mod names;
mod page;
pub mod pull;
mod scope;
mod source;
mod text;

pub(crate) use bucket::bucket_index;
pub(crate) use lint::append_checked;
pub(crate) use names::{label_key, prometheus_name, translate, unit_keeping_name, MetricType};
pub(crate) use page::Page;
pub(crate) use scope::{attribute_labels, scope_block, OwnFamily};
pub(crate) use source::{
    add_exposition_source, join_sources, write_sources, EncodedFamily, ExpositionSource, ListSource,
};
#[doc(hidden)]
pub use text::CHUNK;
pub(crate) use text::{BoundsText, Format, LabelBlock, Number, Writer};
