//! A remote stage report from another process, as the stage's owner ingests it
//! (`Stage::ingest_remote`). See `checks.rs`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)] // each target uses one check
#[path = "../checks.rs"]
mod checks;

fuzz_target!(|data: &[u8]| checks::remote_report(data));
