//! Span-derived metrics: a `tracing` layer recording the duration of closed spans.
