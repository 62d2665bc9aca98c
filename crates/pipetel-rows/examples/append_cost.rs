//! What the rotation lock costs: processes appending lines to one store through
//! [`StoreWriter`] (`locked`: lock shared around each append, exclusive around rotation), against
//! the same processes appending with one plain `write` a line and no lock or check, either to one
//! shared file (`shared`: what every process did before the lock, rotation aside) or each to a
//! file of its own (`own-file`: the floor of a one-file-per-process store).
//!
//! ```text
//! cargo run --release -p pipetel-rows --example append_cost -- [PROCESSES] [LINES] [MAX_BYTES]
//! ```
//! Defaults: 4 processes, 200000 lines each, rotation at 20 kB (0: never), 1000 files kept.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use pipetel_rows::{Rotation, StoreWriter};

const LINE: &str =
    "{\"event\":\"pipeline.worker\",\"timestamp_ms\":1750000000000,\"pipeline.stage.name\":\"tokenize\",\
                    \"pipeline.execution.id\":\"run-42\",\"pipeline.shard.index\":3,\"pipeline.status\":\"end\",\
                    \"pipeline.items\":1000,\"pipeline.bytes\":65536}";

fn child(mode: &str, path: &Path, lines: usize, max_bytes: u64) -> Result<(), Box<dyn std::error::Error>> {
    match mode {
        "locked" => {
            let mut w = StoreWriter::open(path, Rotation { max_bytes, keep: 1000 })?;
            for _ in 0..lines {
                w.append(LINE)?;
            }
        }
        _ => {
            let mut f = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
            let line = format!("{LINE}\n");
            for _ in 0..lines {
                f.write_all(line.as_bytes())?;
            }
        }
    }
    Ok(())
}

fn run(mode: &str, dir: &Path, processes: usize, lines: usize, max_bytes: u64) -> f64 {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("dir");
    let exe = std::env::current_exe().expect("exe");
    let t = Instant::now();
    let children: Vec<_> = (0..processes)
        .map(|p| {
            let path = if mode == "own-file" { dir.join(format!("svc.{p}.jsonl")) } else { dir.join("svc.jsonl") };
            Command::new(&exe)
                .args(["--child", mode, &lines.to_string(), &max_bytes.to_string()])
                .arg(path)
                .spawn()
                .expect("spawn")
        })
        .collect();
    for mut c in children {
        assert!(c.wait().expect("wait").success(), "a child failed");
    }
    t.elapsed().as_secs_f64()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let (mode, lines, max_bytes, path) = (&args[1], &args[2], &args[3], &args[4]);
        if let Err(e) = child(mode, Path::new(path), lines.parse().unwrap_or(0), max_bytes.parse().unwrap_or(0)) {
            eprintln!("append_cost child: {e}");
            std::process::exit(1);
        }
        return;
    }
    let processes: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(4);
    let lines: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(200_000);
    let max_bytes: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(20_000);
    let base: PathBuf = std::env::temp_dir().join(format!("pipetel-append-cost-{}", std::process::id()));
    println!("{processes} processes x {lines} lines of {} bytes, rotation at {max_bytes} bytes", LINE.len() + 1);
    // Alternated, so both see the machine in the same state.
    for round in 0..3 {
        for mode in ["own-file", "shared", "locked"] {
            let secs = run(mode, &base.join(mode), processes, lines, max_bytes);
            let per_line = secs * 1e9 / lines as f64;
            println!("round {round} {mode:>8}: {secs:.3} s wall, {per_line:.0} ns per line per process");
        }
    }
    let _ = std::fs::remove_dir_all(&base);
}
