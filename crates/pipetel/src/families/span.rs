//! The span-metrics family.

use super::family::{Family, Instrument::*};

/// Wall time of closed spans, by name, target and status.
pub const DURATION: Family = Family::new(
    "span.duration",
    Histogram,
    "s",
    "Duration of closed tracing spans",
    &["span.name", "span.target", "status"],
);

/// Every family of the table.
pub const ALL: &[Family] = &[DURATION];
