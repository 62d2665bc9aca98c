//! The rows fuzz target on stable: `pipetel rows` (the real binary, with overflow checks) reads
//! each committed seed of `crates/pipetel/fuzz/corpus/rows` and deterministic mutations of it as
//! a store file, listing, summarising and drawing timelines: it never panics, whatever the file
//! holds, and reads the valid seeds whole.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../pipetel/fuzz/mutate.rs"]
mod mutate;

use mutate::{mutations, Rng};

const MODES: [&[&str]; 3] = [&[], &["--summary"], &["--timeline"]];

fn seeds() -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pipetel/fuzz/corpus/rows");
    let out = mutate::read_seeds(&dir);
    assert!(out.len() >= 4, "{} seeds", out.len());
    out
}

/// Writes `bytes` as the store `file` and runs `pipetel rows file <mode>`; fails on a panic.
fn read(file: &Path, bytes: &[u8], mode: &[&str]) -> Output {
    std::fs::write(file, bytes).expect("write the store");
    let out = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .arg("rows")
        .arg(file)
        .args(mode)
        .env_remove("PIPETEL_ROWS_FILE")
        .output()
        .expect("run pipetel");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.code() != Some(101) && !stderr.contains("panicked"),
        "pipetel rows {mode:?} panicked on {:?}:\n{stderr}",
        String::from_utf8_lossy(bytes)
    );
    out
}

fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-fuzz-rows-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir.join("store.jsonl")
}

#[test]
fn pipetel_rows_never_panics_on_a_mutated_store() {
    let file = scratch();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0usize;
    for (name, seed) in seeds() {
        for mode in MODES {
            let out = read(&file, &seed, mode);
            if name.starts_with("valid-") {
                assert!(out.status.success(), "{name} {mode:?}: {}", String::from_utf8_lossy(&out.stderr));
                assert!(out.stderr.is_empty(), "{name} {mode:?}: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        // One process per input: fewer mutations than the in-process targets, modes in turn.
        mutations(&seed, &mut rng, 24, 40, |input| {
            read(&file, input, MODES[cases % MODES.len()]);
            cases += 1;
        });
    }
    let _ = std::fs::remove_dir_all(file.parent().expect("scratch dir"));
    assert!(cases > 300, "{cases} inputs");
}
