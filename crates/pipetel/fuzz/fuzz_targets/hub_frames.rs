//! Length-prefixed frames of recorder envelopes, as other processes send them to a snapshot hub. See `checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // each target uses one check
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::hub_frames(data));
