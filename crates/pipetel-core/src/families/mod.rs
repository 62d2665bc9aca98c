//! Every metric family pipetel produces itself, declared once: name, instrument, unit,
//! description and attributes. The OTel instruments, the pull endpoint's direct renderers and
//! the metrics reference (`docs/src/metrics-reference.md`, [`reference()`]) all read these
//! tables, so a family is added or renamed in one place.
//!
//! ```
//! use pipetel_core::families::{self, Instrument};
//!
//! let items = &families::pipeline::STAGE_ITEMS;
//! assert_eq!(items.name, "pipeline.stage.items");
//! assert_eq!(items.instrument, Instrument::Counter);
//! assert_eq!(items.prometheus_name(), "pipeline_stage_items_total");
//! ```

mod family;
pub mod function;
pub mod http;
pub mod pipeline;
pub mod process;
mod reference;
pub mod service;
pub mod span;

pub use family::{Family, Instrument};
pub use reference::{reference, reference_with, tables, Table};
