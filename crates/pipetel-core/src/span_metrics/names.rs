//! The name and attributes of `span.duration` (its family: [`crate::families::span::DURATION`]).

/// Histogram of closed spans' durations, in seconds.
pub const SPAN_DURATION: &str = crate::families::span::DURATION.name;
/// Attribute: the span's name.
pub const ATTR_SPAN_NAME: &str = "span.name";
/// Attribute: the span's `tracing` target (the module path unless the span set one).
pub const ATTR_SPAN_TARGET: &str = "span.target";
/// Attribute: `ok` or `error`.
pub const ATTR_STATUS: &str = "status";
