//! Histogram bucket bounds pipetel offers by name (`PIPETEL_HISTOGRAM_BUCKETS`).

/// Histogram bucket bounds for durations in seconds (5 ms to 10 s), as the OTel semantic
/// conventions advise; the SDK's default bounds are meant for milliseconds.
pub const SECONDS_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0];

/// TeleFuser's default histogram bounds (5 ms to 10 s, 11 bounds), selected with
/// `PIPETEL_HISTOGRAM_BUCKETS=telefuser` (`seconds` names [`SECONDS_BUCKETS`]).
pub const TELEFUSER_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];
