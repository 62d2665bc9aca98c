//! A rows store file as `pipetel rows` reads it: the tool's own reader and printers, included
//! from its source (it is a binary crate), over arbitrary bytes: never a panic.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../../pipetel-cli/src/args.rs"]
mod args;
#[allow(dead_code)]
#[path = "../../../pipetel-cli/src/read.rs"]
mod read;
#[allow(dead_code)]
#[path = "../../../pipetel-cli/src/show.rs"]
mod show;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let rows = read::parse_text(&text, Path::new("fuzz.jsonl"), 1, &mut std::io::sink());
    for row in &rows {
        let _ = show::row_line(row);
    }
    let _ = show::summary(&rows);
    let _ = show::timeline(&rows);
});
