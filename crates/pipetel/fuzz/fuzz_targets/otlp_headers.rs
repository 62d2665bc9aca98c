//! The value of OTEL_EXPORTER_OTLP_HEADERS. See `checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // each target uses one check
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|text: &str| checks::otlp_headers(text));
