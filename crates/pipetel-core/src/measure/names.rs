//! The names of the measured functions' metrics (from their family table,
//! [`crate::families::function`]) and attributes, and the size buckets.

use crate::families::function as fam;

/// Counter: calls started.
pub const FUNCTION_CALLS: &str = fam::CALLS.name;
/// Counter: calls that returned `Err` or panicked (attribute `error.type`).
pub const FUNCTION_ERRORS: &str = fam::ERRORS.name;
/// Up-down counter: calls running now.
pub const FUNCTION_IN_FLIGHT: &str = fam::IN_FLIGHT.name;
/// Histogram, seconds: wall time of completed calls (returned or panicked).
pub const FUNCTION_DURATION: &str = fam::DURATION.name;
/// Histogram, bytes: the `input_size` expression.
pub const FUNCTION_INPUT_SIZE: &str = fam::INPUT_SIZE.name;
/// Histogram, bytes: the `output_size` expression.
pub const FUNCTION_OUTPUT_SIZE: &str = fam::OUTPUT_SIZE.name;
/// Attribute: the function's name.
pub const ATTR_FUNCTION: &str = "function";
/// Attribute: the function's module path.
pub const ATTR_MODULE: &str = "module";
/// Attribute: the `stage = "..."` option.
pub const ATTR_STAGE: &str = "stage";
/// Attribute on `function.errors`: `err` (returned `Err`) or `panic`.
pub const ATTR_ERROR_TYPE: &str = "error.type";

/// Bucket bounds of the size histograms: powers of four from 64 B to 1 GiB.
pub const SIZE_BUCKETS: &[f64] = &[
    64.0,
    256.0,
    1024.0,
    4096.0,
    16384.0,
    65536.0,
    262_144.0,
    1_048_576.0,
    4_194_304.0,
    16_777_216.0,
    67_108_864.0,
    268_435_456.0,
    1_073_741_824.0,
];
