//! The span-metrics family.

use super::family::families;

families! {
    /// Wall time of closed spans, by name, target and status.
    DURATION = "span.duration", Histogram, "s", &["span.name", "span.target", "status"],
        "Duration of closed tracing spans";
}
