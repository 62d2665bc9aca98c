//! A text collector's output, as the exposition linter receives it. See `checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // each target uses one check
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|text: &str| checks::exposition_lint(text));
