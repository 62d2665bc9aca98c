//! One worker file of the multiprocess directory, as the merged page reads it. See
//! `multiprocess.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../multiprocess.rs"]
mod multiprocess;

fuzz_target!(|data: &[u8]| multiprocess::multiprocess_envelope(data));
