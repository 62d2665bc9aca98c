//! The span-metrics family.

use super::family::families;

/// Attribute: the span's name.
pub const ATTR_SPAN_NAME: &str = "span.name";
/// Attribute: the span's `tracing` target (the module path unless the span set one).
pub const ATTR_SPAN_TARGET: &str = "span.target";
/// Attribute: `ok` or `error`.
pub const ATTR_STATUS: &str = "status";

families! {
    /// Wall time of closed spans, by name, target and status.
    DURATION = "span.duration", Histogram, "s", &[ATTR_SPAN_NAME, ATTR_SPAN_TARGET, ATTR_STATUS],
        "Duration of closed tracing spans";
}
