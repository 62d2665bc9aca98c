//! `pipetel rows` on a store written by the real pipeline: the library's default store (rows
//! dir + service name), listed, filtered, summarised, laid out as a timeline and passed through
//! as JSON by the real binary.

mod cli_support;
mod rows_support;

use std::path::{Path, PathBuf};

use rows_support::init_with_rows_dir;

/// Runs `pipetel` with `args`: stdout, stderr and whether it succeeded.
fn pipetel(args: &[&str]) -> (String, String, bool) {
    let (out, err, code) = cli_support::run(args);
    (out, err, code == Some(0))
}

/// Runs a stage of three shards (one fails) and a second stage through the real pipeline into
/// the default store under `dir`, and returns that store's path.
fn write_store(dir: &Path) -> PathBuf {
    let telemetry = init_with_rows_dir("cli test", dir);
    let stage = pipetel::stage("tokenize").execution_id("run-1").shards(3).start();
    std::thread::scope(|s| {
        for i in 0..3u32 {
            let stage = &stage;
            s.spawn(move || {
                let shard = stage.shard(i).start();
                shard.record(10 * u64::from(i + 1), 100);
                if i == 1 {
                    shard.fail("bad input");
                } else {
                    shard.finish();
                }
            });
        }
    });
    let shard = stage.shard(2).start();
    pipetel::testing::sample_now();
    drop(shard);
    stage.finish();
    let other = pipetel::stage("detokenize").execution_id("run-1").shards(1).start();
    other.shard(0).start().finish();
    other.finish();
    drop(telemetry);
    pipetel::pipeline::store::default_file(dir, "cli test")
}

#[test]
fn lists_filters_summarises_and_passes_rows_through() {
    let dir = std::env::temp_dir().join(format!("pipetel-cli-rows-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = write_store(&dir);
    assert_eq!(store, dir.join("cli_test.jsonl"), "the default store is <dir>/<service>.jsonl");
    let stored = std::fs::read_to_string(&store).expect("the default store was written");
    let d = dir.to_str().expect("utf-8 path");

    // The only store in the directory is the default; every stored row is listed.
    let (list, err, ok) = pipetel(&["rows", "--dir", d]);
    assert!(ok && err.is_empty(), "{err}");
    assert_eq!(list.lines().count(), stored.lines().count(), "{list}");
    assert!(
        list.lines().any(|l| l.contains("tokenize run-1 shard=1 failed") && l.contains("reason=\"bad input\"")),
        "{list}"
    );

    // Filters: shard and status; stage; namespace.
    let (failed, _, ok) =
        pipetel(&["rows", "--dir", d, "--service", "cli test", "--stage", "tokenize", "--status", "failed"]);
    assert!(ok);
    let failed: Vec<&str> = failed.lines().collect();
    assert_eq!(failed.len(), 2, "shard 1 failed, and the dropped retry of shard 2: {failed:?}");
    let (one, _, _) = pipetel(&["rows", store.to_str().expect("utf-8"), "--shard", "0", "--stage", "tokenize"]);
    let statuses: Vec<&str> = one.lines().map(|l| l.split_whitespace().nth(5).expect("status column")).collect();
    assert_eq!(statuses, ["start", "end"], "{one}");
    let (stages, _, _) = pipetel(&["rows", "--dir", d, "--namespace", "pipeline.stage"]);
    assert_eq!(stages.lines().count(), 2, "{stages}");
    assert!(stages.lines().all(|l| l.contains("pipeline.stage ")), "{stages}");

    // --json passes the stored lines through unchanged.
    let (json, _, _) = pipetel(&["rows", "--dir", d, "--json", "--stage", "detokenize"]);
    let expected: Vec<&str> = stored.lines().filter(|l| l.contains("\"detokenize\"")).collect();
    assert_eq!(json.lines().collect::<Vec<_>>(), expected);

    // --summary: one line per stage execution, with the shards' outcome and totals.
    let (summary, _, ok) = pipetel(&["rows", "--dir", d, "--summary"]);
    assert!(ok);
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 3, "{summary}");
    assert!(lines[0].starts_with("STAGE") && lines[0].contains("ITEMS"), "{summary}");
    let tok: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&tok[..3], ["tokenize", "run-1", "succeeded"], "{summary}");
    assert_eq!(tok[4], "60", "items of the stage row: 10 + 20 + 30, and the retry's 0: {summary}");
    assert!(lines[2].starts_with("detokenize"), "{summary}");

    // --timeline: a header per stage execution, a line per shard, the retried one marked.
    let (timeline, _, ok) = pipetel(&["rows", "--dir", d, "--timeline", "--stage", "tokenize"]);
    assert!(ok);
    let lines: Vec<&str> = timeline.lines().collect();
    assert!(lines[0].starts_with("tokenize run-1 (succeeded"), "{timeline}");
    assert_eq!(lines.len(), 4, "{timeline}");
    assert!(lines[2].trim_start().starts_with("shard 1") && lines[2].contains("failed"), "{timeline}");
    assert!(lines[3].contains("2 attempts") && lines[3].contains("1 samples"), "{timeline}");

    // Errors name their culprit.
    let (_, err, ok) = pipetel(&["rows", "--dir", d, "--shard", "x"]);
    assert!(!ok && err.contains("--shard \"x\""), "{err}");
    let (_, err, ok) = pipetel(&["rows", "--dir", d, "--service", "nobody"]);
    assert!(!ok && err.contains("nobody.jsonl"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}
