//! The name and attributes of `span.duration` (its family: [`crate::families::span::DURATION`]).

/// Histogram of closed spans' durations, in seconds.
pub const SPAN_DURATION: &str = crate::families::span::DURATION.name;
// Its attributes are declared once, with the family.
pub use crate::families::span::{ATTR_SPAN_NAME, ATTR_SPAN_TARGET, ATTR_STATUS};
