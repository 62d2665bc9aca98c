//! `pipetel profile` on a profile store written as the profiler writes it (`StoreWriter` and
//! `ProfileLine::to_json`, beside the rows store of the service): the top frame of a stage, each
//! filter, the folded stacks, the flame graph, and the message when nothing matches.

mod cli_support;

use std::path::{Path, PathBuf};

use pipetel_rows::profile::{profile_file, ProfileLine};
use pipetel_rows::{Rotation, StoreWriter};

const TRACE_A: &str = "0af7651916cd43dd8448eb211c80319c";
const TRACE_B: &str = "1bf7651916cd43dd8448eb211c80319d";

/// Runs `pipetel` with `args`: stdout, stderr and the exit code.
fn pipetel(args: &[&str]) -> (String, String, Option<i32>) {
    cli_support::run(args)
}

fn line(stage: &str, shard: u32, phase: &str, trace: &str, samples: u64, stack: &[&str]) -> ProfileLine {
    ProfileLine {
        timestamp_ms: 1_700_000_000_000,
        host: "node-a".into(),
        pid: 4242,
        stage: Some(stage.into()),
        execution: Some(if trace == TRACE_A { "run-1" } else { "run-2" }.into()),
        shard: Some(shard),
        phase: Some(phase.into()),
        trace_id: Some(trace.into()),
        span_id: Some("b7ad6b7169203331".into()),
        language: "rust".into(),
        period_ns: 10_000_000,
        samples,
        stack: stack.iter().map(|f| f.to_string()).collect(),
    }
}

/// The store of service `svc` in a new directory: `tokenize` (shard 0 in run-1, shard 1 in
/// run-2) spends most of its samples in `tokenize` itself, `parse` in `memchr`.
fn store(name: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pipetel-cli-profile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = profile_file(&dir, "svc");
    let mut w = StoreWriter::open_file(&path, Rotation::default()).expect("open the store");
    for l in [
        line("tokenize", 0, "compute", TRACE_A, 60, &["main", "run", "tokenize"]),
        line("tokenize", 0, "load", TRACE_A, 20, &["main", "run", "read_input"]),
        line("tokenize", 1, "compute", TRACE_B, 15, &["main", "run", "tokenize", "split"]),
        line("tokenize", 1, "compute", TRACE_B, 5, &["main", "run", "tokenize"]),
        line("parse", 2, "compute", TRACE_B, 30, &["main", "parse", "memchr"]),
    ] {
        w.append(&l.to_json()).expect("append");
    }
    (dir, path)
}

/// The frame names of a report's table, in order.
fn frames(report: &str) -> Vec<String> {
    report
        .lines()
        .skip_while(|l| !l.contains("SELF%"))
        .skip(1)
        .map(|l| l.split_whitespace().nth(2).unwrap_or_default().to_string())
        .collect()
}

fn dir_args(dir: &Path) -> Vec<String> {
    vec!["--dir".into(), dir.to_str().expect("utf-8").into(), "--service".into(), "svc".into()]
}

fn profile(dir: &Path, extra: &[&str]) -> (String, String, Option<i32>) {
    let mut args: Vec<String> = vec!["profile".into()];
    args.extend(dir_args(dir));
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    pipetel(&refs)
}

#[test]
fn the_top_frame_of_a_stage_is_its_hottest_leaf() {
    let (dir, path) = store("top");
    let (out, err, code) = profile(&dir, &["--stage", "tokenize"]);
    assert_eq!(code, Some(0), "{err}");
    // 100 samples of 10 ms: 1 CPU second.
    assert!(out.starts_with("stage tokenize: 100 samples, 1.00 CPU s"), "{out}");
    assert_eq!(frames(&out), ["tokenize", "read_input", "split", "main", "run"], "{out}");
    let first: Vec<&str> = out.lines().find(|l| l.ends_with(" tokenize")).expect("row").split_whitespace().collect();
    // Self: 65 of 100 samples end in tokenize; total: 80 have it on the stack.
    assert_eq!(first, ["65.0", "80.0", "tokenize"], "{out}");
    assert!(out.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["0.0", "100.0", "main"]), "{out}");
    assert!(err.is_empty(), "{err}");

    // --top cuts the table; the rows store's path, or the .stacks file itself, name the same store.
    let (out, _, _) = profile(&dir, &["--stage", "tokenize", "--top", "2"]);
    assert_eq!(frames(&out), ["tokenize", "read_input"], "{out}");
    let rows_store = dir.join("svc.jsonl");
    for file in [rows_store.to_str().expect("utf-8"), path.to_str().expect("utf-8")] {
        let (out, err, code) = pipetel(&["profile", "--stage", "parse", file]);
        assert_eq!(code, Some(0), "{file}: {err}");
        assert_eq!(frames(&out)[0], "memchr", "{out}");
    }
    // No filter, no service: every sample of the only profile store in the directory.
    let (out, err, code) = pipetel(&["profile", "--dir", dir.to_str().expect("utf-8")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("every sample: 130 samples, 1.30 CPU s"), "{out}");
    assert_eq!(frames(&out)[..2], ["tokenize", "memchr"], "{out}");
    // With two, the message names them.
    std::fs::write(dir.join("other.stacks"), "").expect("a second store");
    let (_, err, code) = pipetel(&["profile", "--dir", dir.to_str().expect("utf-8")]);
    assert_eq!(code, Some(1));
    assert!(err.contains("several profile stores in") && err.contains("other.stacks, "), "{err}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn shard_phase_execution_and_trace_filters_pick_their_samples() {
    let (dir, _) = store("filters");
    let cases: [(&[&str], &str, &str); 5] = [
        (&["--stage", "tokenize", "--shard", "1"], "stage tokenize, shard 1: 20 samples", "split"),
        (&["--phase", "load"], "phase load: 20 samples", "read_input"),
        (&["--execution", "run-2", "--stage", "parse"], "stage parse, execution run-2: 30 samples", "memchr"),
        (
            &["--trace", TRACE_A, "--phase", "compute"],
            "phase compute, trace 0af7651916cd43dd8448eb211c80319c: 60",
            "tokenize",
        ),
        // A trace id is matched without regard to case.
        (
            &["--trace", &TRACE_B.to_ascii_uppercase(), "--shard", "2"],
            "shard 2, trace 1bf7651916cd43dd8448eb211c80319d: 30",
            "memchr",
        ),
    ];
    for (args, header, top) in cases {
        let (out, err, code) = profile(&dir, args);
        assert_eq!(code, Some(0), "{args:?}: {err}");
        assert!(out.starts_with(header), "{args:?}: {out}");
        assert_eq!(frames(&out)[0], top, "{args:?}: {out}");
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn folded_stacks_sum_the_samples_of_each_stack() {
    let (dir, _) = store("folded");
    let (out, err, code) = profile(&dir, &["--stage", "tokenize", "--folded"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out, "main;run;read_input 20\nmain;run;tokenize 65\nmain;run;tokenize;split 15\n");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn svg_writes_a_flame_graph_of_the_matching_samples() {
    let (dir, _) = store("svg");
    let svg = dir.join("tokenize.svg");
    let (out, err, code) = profile(&dir, &["--stage", "tokenize", "--svg", svg.to_str().expect("utf-8")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.starts_with("stage tokenize: 100 samples"), "the table is still printed: {out}");
    let text = std::fs::read_to_string(&svg).expect("the SVG");
    let start = text.find("<svg").expect("an <svg> element");
    assert!(text[start..].trim_end().ends_with("</svg>"), "a whole document");
    for name in ["tokenize", "read_input", "split", "main"] {
        assert!(text.contains(&format!(">{name} (")), "{name} drawn: {text}");
    }
    assert!(!text.contains("memchr"), "only the stage's samples");
    assert!(text.contains("pipetel profile: stage tokenize"), "titled with the filter");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn no_match_names_the_filter_and_the_stages_held() {
    let (dir, path) = store("none");
    // A hostile stage name and a torn last line in the store.
    let mut w = StoreWriter::open_file(&path, Rotation::default()).expect("open");
    w.append(&line("evil\u{1b}[2J", 0, "compute", TRACE_A, 1, &["x"]).to_json()).expect("append");
    drop(w);
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).expect("open current");
    std::io::Write::write_all(&mut f, b"{\"event\":\"pipeline.prof").expect("tear");

    let (out, err, code) = profile(&dir, &["--stage", "tokenise", "--shard", "9"]);
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("no samples of stage tokenise, shard 9 in "), "{err}");
    assert!(err.contains("svc.stacks"), "{err}");
    assert!(err.contains("stages: evil\\x1b[2J, parse, tokenize"), "{err}");
    assert!(err.contains("1 torn or invalid lines skipped"), "{err}");
    assert!(!err.contains('\u{1b}') && !out.contains('\u{1b}'), "{err}");

    // No store at all: the path it looked for.
    let (_, err, code) = pipetel(&["profile", "--dir", dir.to_str().expect("utf-8"), "--service", "other"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no profile store at") && err.contains("other.stacks"), "{err}");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn help_lists_the_profile_command_and_bad_arguments_exit_2() {
    let (out, _, code) = pipetel(&["profile", "--help"]);
    assert_eq!(code, Some(0));
    assert!(out.starts_with("usage: pipetel profile [OPTIONS] [FILE]"), "{out}");
    for option in ["--stage", "--shard", "--phase", "--execution", "--trace", "--top", "--folded", "--svg"] {
        assert!(out.contains(option), "{option}: {out}");
    }
    assert!(!out.contains('\u{1b}'), "the help prints no escape character");
    let (out, _, _) = pipetel(&["--help"]);
    assert!(out.contains("pipetel profile [OPTIONS] [FILE]"), "{out}");
    let (_, err, code) = pipetel(&["profile", "--top", "x"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--top \"x\"") && err.contains("pipetel profile --help"), "{err}");
}
