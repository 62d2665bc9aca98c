//! A process writing rows is killed with SIGKILL mid-run: `pipetel rows` still reads its store.
//! A kill inside a write leaves at worst a torn last line, which the tool skips with a note
//! naming the line; the next run of the service starts on a new line, so the torn line never
//! spoils a row after it.

mod rows_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rows_support::init_with_rows_dir;

const CHILD_DIR: &str = "PIPETEL_CLI_TEST_CHILD_DIR";
const CHILD_ROUNDS: &str = "PIPETEL_CLI_TEST_CHILD_ROUNDS";
const TEST: &str = "a_sigkilled_writer_leaves_a_store_pipetel_rows_reads";

/// The child: stages of two shards through the real pipeline into the default store under
/// `dir`, for `rounds` stages or until killed.
fn write_rows(dir: &Path, rounds: Option<u32>) {
    let _telemetry = init_with_rows_dir("killed", dir);
    let mut n = 0u32;
    while rounds.is_none_or(|r| n < r) {
        let stage = pipetel::stage(format!("s{n}")).shards(2).start();
        for i in 0..2 {
            let shard = stage.shard(i).start();
            shard.record(1, 1);
            shard.finish();
        }
        stage.finish();
        n += 1;
    }
}

fn child(dir: &Path, rounds: Option<u32>) -> std::process::Child {
    let mut cmd = Command::new(std::env::current_exe().expect("test binary"));
    cmd.args(["--exact", TEST, "--nocapture"]).env(CHILD_DIR, dir).stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(r) = rounds {
        cmd.env(CHILD_ROUNDS, r.to_string());
    }
    cmd.spawn().expect("spawn the writer")
}

fn pipetel_rows(dir: &Path) -> (Vec<String>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .args(["rows", "--dir"])
        .arg(dir)
        .env_remove("PIPETEL_ROWS_FILE")
        .env_remove("OTEL_SERVICE_NAME")
        .output()
        .expect("run pipetel");
    assert!(out.status.success(), "pipetel rows failed: {}", String::from_utf8_lossy(&out.stderr));
    (
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn newlines(path: &Path) -> usize {
    std::fs::read(path).map(|b| b.iter().filter(|c| **c == b'\n').count()).unwrap_or(0)
}

#[test]
fn a_sigkilled_writer_leaves_a_store_pipetel_rows_reads() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        let rounds = std::env::var(CHILD_ROUNDS).ok().and_then(|r| r.parse().ok());
        write_rows(Path::new(&dir), rounds);
        return;
    }
    let dir = std::env::temp_dir().join(format!("pipetel-cli-killed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = dir.join("killed.jsonl");

    // Kill the writer while it is appending rows as fast as it can.
    let mut writer = child(&dir, None);
    let t = Instant::now();
    while newlines(&store) < 500 {
        assert!(t.elapsed() < Duration::from_secs(60), "the writer wrote no rows");
        std::thread::sleep(Duration::from_millis(5));
    }
    writer.kill().expect("SIGKILL");
    let status = writer.wait().expect("reap");
    assert!(!status.success(), "the writer was killed, not finished");

    let text = String::from_utf8_lossy(&std::fs::read(&store).expect("store")).into_owned();
    let whole = text.matches('\n').count();
    let (rows, notes) = pipetel_rows(&dir);
    assert_eq!(rows.len(), whole, "every complete line is a row the tool lists; notes: {notes}");
    if text.ends_with('\n') {
        assert!(notes.is_empty(), "{notes}");
    } else {
        assert!(notes.contains(&format!("line {}: torn last line", whole + 1)), "{notes}");
    }

    // What a kill inside a write leaves: half of a row, no newline.
    let last = text.lines().last().expect("a row");
    let torn_at = whole + usize::from(!text.ends_with('\n')) + 1;
    let mut f = std::fs::OpenOptions::new().append(true).open(&store).expect("open");
    if !text.ends_with('\n') {
        std::io::Write::write_all(&mut f, b"\n").expect("write");
    }
    std::io::Write::write_all(&mut f, &last.as_bytes()[..last.len() / 2]).expect("write");
    drop(f);
    let (rows, notes) = pipetel_rows(&dir);
    assert_eq!(rows.len(), whole);
    assert!(notes.contains(&format!("killed.jsonl: line {torn_at}: torn last line")), "{notes}");

    // The service runs again: its rows start on a new line after the torn one.
    let status = child(&dir, Some(3)).wait().expect("second run");
    assert!(status.success());
    let (rows, notes) = pipetel_rows(&dir);
    assert_eq!(rows.len(), whole + 3 * 5, "three stages of two shards: 5 rows each; notes: {notes}");
    assert!(rows.iter().rev().take(15).all(|r| r.contains(" s0 ") || r.contains(" s1 ") || r.contains(" s2 ")));
    assert!(notes.contains(&format!("line {torn_at}: not valid JSON")), "{notes}");
    assert!(!notes.contains("torn last line"), "{notes}");
    let _ = std::fs::remove_dir_all(&dir);
}
