//! Four processes append to one store at once with a rotation size of a few lines: every line
//! each wrote is read back exactly once, whole, in the order each process wrote its own lines.
//! (Before the rotation lock, two processes rotating the same file renamed each other's files
//! over one another and lines were lost.)

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use pipetel_rows::{read_store, Rotation, StoreWriter};
use support::together::{run_together, wait_for_go};

const CHILD: &str = "PIPETEL_ROWS_TEST_WRITER";
const STORE: &str = "PIPETEL_ROWS_TEST_STORE";
const TEST: &str = "four_processes_rotating_one_store_lose_and_repeat_nothing";
const PROCESSES: usize = 4;
const LINES: usize = 1500;
const ROTATION: Rotation = Rotation { max_bytes: 600, keep: 100_000 };

/// The child: waits for the go file (so the four overlap), then appends its lines.
fn write(index: usize, store: &Path) {
    wait_for_go(&store.with_extension("go"), Duration::from_secs(30));
    let mut w = StoreWriter::open(store, ROTATION).expect("open the store");
    for i in 0..LINES {
        // Lines of varying length, so rotations fall at different points in each process.
        let pad = "x".repeat((i * 7 + index) % 23);
        w.append(&format!("{{\"p\":{index},\"i\":{i},\"pad\":\"{pad}\"}}")).expect("append");
    }
}

#[test]
fn four_processes_rotating_one_store_lose_and_repeat_nothing() {
    if let Ok(index) = std::env::var(CHILD) {
        let store = PathBuf::from(std::env::var_os(STORE).expect("store"));
        write(index.parse().expect("index"), &store);
        return;
    }
    let dir = std::env::temp_dir().join(format!("pipetel-rows-many-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let store = dir.join("svc.jsonl");
    run_together(TEST, CHILD, PROCESSES, &store.with_extension("go"), |c| {
        c.env(STORE, &store);
    });

    let files = read_store(&store).expect("read the store");
    assert!(files.len() > 100, "the store rotated many times: {} files", files.len());
    let mut next = [0usize; PROCESSES];
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for f in &files {
        assert!(f.bytes.is_empty() || f.bytes.ends_with(b"\n"), "{}: ends in a torn line", f.path.display());
        for line in String::from_utf8(f.bytes.clone()).expect("utf-8").lines() {
            let row: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: torn or interleaved line {line:?}: {e}", f.path.display()));
            let num = |k: &str| row[k].as_u64().map(|n| n as usize).unwrap_or_else(|| panic!("{k} in {line}"));
            let (p, i) = (num("p"), num("i"));
            *seen.entry((p, i)).or_default() += 1;
            assert_eq!(i, next[p], "process {p}'s lines in the order it wrote them");
            next[p] += 1;
        }
    }
    let missing = PROCESSES * LINES - seen.len();
    let repeated: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    assert!(missing == 0 && repeated.is_empty(), "{missing} lines lost, repeated: {repeated:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
