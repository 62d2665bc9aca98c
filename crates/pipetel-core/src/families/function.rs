//! The families of `#[pipetel::measure]`d functions.

use super::family::families;

const BASE: &[&str] = &["function", "module", "stage"];

families! {
    CALLS = "function.calls", Counter, "{call}", BASE, "Calls started";
    /// Calls that returned `Err` or panicked, by `error.type` (`err` / `panic`).
    ERRORS = "function.errors", Counter, "{error}", &["function", "module", "stage", "error.type"],
        "Calls that returned an error or panicked";
    IN_FLIGHT = "function.in_flight", UpDownCounter, "{call}", BASE, "Calls running now";
    /// Wall time of completed calls (returned or panicked).
    DURATION = "function.duration", Histogram, "s", BASE, "Wall time of completed calls";
    /// The `input_size = expr` of a call.
    INPUT_SIZE = "function.input.size", Histogram, "By", BASE, "Size of a call's input";
    /// The `output_size = expr` of a call.
    OUTPUT_SIZE = "function.output.size", Histogram, "By", BASE, "Size of a call's output";
}
