//! Environment variable values, for each variable alone and as NAME=value lines. See `checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // each target uses one check
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|text: &str| checks::config_env(text));
