//! `pipetel rows --follow` prints the rows so far, then rows as they are appended, across a
//! rotation of the file, and holds back a line until it is complete.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

fn row(stage: &str, status: &str) -> String {
    format!(
        "{{\"event\":\"pipeline.stage\",\"timestamp_ms\":1000,\"pipeline.stage.name\":\"{stage}\",\
         \"pipeline.execution.id\":\"x\",\"pipeline.status\":\"{status}\"}}\n"
    )
}

#[test]
fn follow_prints_new_rows_and_survives_rotation() {
    let dir = std::env::temp_dir().join(format!("pipetel-cli-follow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let store = dir.join("svc.jsonl");
    std::fs::write(&store, row("before", "succeeded")).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .args(["rows", "--follow", "--json", "--stage"])
        .args(["before", "--stage", "during", "--file"]) // the last --stage wins
        .arg(&store)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let next = || rx.recv_timeout(Duration::from_secs(20)).expect("a followed row");
    let append = |text: &str| {
        let mut f = std::fs::OpenOptions::new().append(true).create(true).open(&store).expect("open");
        f.write_all(text.as_bytes()).expect("append");
    };

    // Filtered out (stage `before`), then a row in two pieces: printed once complete.
    let half = row("during", "failed");
    append(&half[..20]);
    std::thread::sleep(Duration::from_millis(500));
    assert!(rx.try_recv().is_err(), "half a line is held back");
    append(&half[20..]);
    assert_eq!(next(), half.trim_end());

    // Rotation: a row written to the old file just before, then rows in the new file.
    append(&row("during", "running"));
    std::fs::rename(&store, pipetel_rows_rotated(&store)).expect("rotate");
    append(&row("during", "succeeded"));
    assert_eq!(next(), row("during", "running").trim_end());
    assert_eq!(next(), row("during", "succeeded").trim_end());
    child.kill().expect("stop following");
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

fn pipetel_rows_rotated(store: &std::path::Path) -> std::path::PathBuf {
    let mut s = store.as_os_str().to_owned();
    s.push(".1");
    s.into()
}

/// Two writers rotate the store many times between two polls of the follower: every row still
/// comes out once (the files rotated meanwhile are read whole, in order). The follower starts
/// before the store's directory exists.
#[test]
fn follow_misses_nothing_when_the_store_rotates_between_polls() {
    use pipetel::pipeline::store::{Rotation, StoreWriter};
    let dir = std::env::temp_dir().join(format!("pipetel-cli-follow-fast-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = dir.join("svc.jsonl");
    let rotation = Rotation { max_bytes: 600, keep: 10_000 };
    // Started before the store (or its directory) exists: it waits for it.
    let mut child = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .args(["rows", "--follow", "--json", "--file"])
        .arg(&store)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(300));
    StoreWriter::open(&store, rotation).expect("open").append(row("first", "start").trim_end()).expect("append");
    assert!(rx.recv_timeout(Duration::from_secs(20)).expect("the first row").contains("\"first\""));
    const LINES: usize = 400;
    std::thread::scope(|s| {
        for w in 0..2 {
            let store = &store;
            s.spawn(move || {
                let mut writer = StoreWriter::open(store, rotation).expect("open");
                for i in 0..LINES {
                    writer.append(row(&format!("w{w}-{i}"), "end").trim_end()).expect("append");
                    if i % 100 == 99 {
                        // Bursts of rotations, then a poll.
                        std::thread::sleep(Duration::from_millis(250));
                    }
                }
            });
        }
    });
    let mut seen = std::collections::HashMap::<String, usize>::new();
    while seen.len() < 2 * LINES {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(5)) else { break };
        let row: serde_json::Value = serde_json::from_str(&line).expect("a whole row");
        *seen.entry(row["pipeline.stage.name"].as_str().expect("stage").to_string()).or_default() += 1;
    }
    // A little longer: a repeated row would come now.
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(700)) {
        let row: serde_json::Value = serde_json::from_str(&line).expect("a whole row");
        *seen.entry(row["pipeline.stage.name"].as_str().expect("stage").to_string()).or_default() += 1;
    }
    child.kill().expect("stop following");
    let _ = child.wait();
    let rotated = pipetel::pipeline::store::store_files(&store).len();
    assert!(rotated > 20, "the store rotated many times: {rotated} files");
    let missing: Vec<String> =
        (0..2).flat_map(|w| (0..LINES).map(move |i| format!("w{w}-{i}"))).filter(|k| seen.get(k) != Some(&1)).collect();
    assert!(missing.is_empty(), "{} rows missing or repeated, first {:?}", missing.len(), missing.first());
    let _ = std::fs::remove_dir_all(&dir);
}
