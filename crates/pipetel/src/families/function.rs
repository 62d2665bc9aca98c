//! The families of `#[pipetel::measure]`d functions.

use super::family::{Family, Instrument::*};

const BASE: &[&str] = &["function", "module", "stage"];

/// Calls started.
pub const CALLS: Family = Family::new("function.calls", Counter, "{call}", "Calls started", BASE);
/// Calls that returned `Err` or panicked, by `error.type` (`err` / `panic`).
pub const ERRORS: Family = Family::new(
    "function.errors",
    Counter,
    "{error}",
    "Calls that returned an error or panicked",
    &["function", "module", "stage", "error.type"],
);
/// Calls running now.
pub const IN_FLIGHT: Family = Family::new("function.in_flight", UpDownCounter, "{call}", "Calls running now", BASE);
/// Wall time of completed calls (returned or panicked).
pub const DURATION: Family = Family::new("function.duration", Histogram, "s", "Wall time of completed calls", BASE);
/// The `input_size = expr` of a call.
pub const INPUT_SIZE: Family = Family::new("function.input.size", Histogram, "By", "Size of a call's input", BASE);
/// The `output_size = expr` of a call.
pub const OUTPUT_SIZE: Family = Family::new("function.output.size", Histogram, "By", "Size of a call's output", BASE);

/// Every family of the table, in the reference's order.
pub const ALL: &[Family] = &[CALLS, ERRORS, IN_FLIGHT, DURATION, INPUT_SIZE, OUTPUT_SIZE];
