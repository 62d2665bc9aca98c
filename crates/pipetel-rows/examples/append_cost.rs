//! What the rotation lock costs: processes appending lines to one store through
//! [`StoreWriter`] (`locked`: lock shared around each append, exclusive around rotation), against
//! the same processes appending with one plain `write` a line and no lock or check, either to one
//! shared file (`shared`: what every process did before the lock, rotation aside) or each to a
//! file of its own (`own-file`: the floor of a one-file-per-process store).
//!
//! ```text
//! cargo run --release -p pipetel-rows --example append_cost -- [PROCESSES] [LINES] [MAX_BYTES]
//! ```
//! Defaults: 4 processes, 200000 lines each, rotation at 20 kB (0: never), 1000 files kept;
//! `--help` says so too.

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
    use clap::{value_parser, Arg, Command};
    let positional = |name: &'static str, default: &'static str, help: &'static str| {
        Arg::new(name).value_parser(value_parser!(u64)).default_value(default).help(help)
    };
    let m = Command::new("append_cost")
        .about("What the rows store's rotation lock costs: processes appending lines locked, shared and each to its own file")
        .arg(positional("PROCESSES", "4", "Processes appending at once"))
        .arg(positional("LINES", "200000", "Lines each process appends"))
        .arg(positional("MAX_BYTES", "20000", "Rotation size in bytes (0: never)"))
        // A child process of this program: MODE LINES MAX_BYTES PATH.
        .arg(Arg::new("child").long("child").num_args(4).value_names(["MODE", "LINES", "MAX_BYTES", "PATH"]).hide(true))
        .get_matches();
    if let Some(child_args) = m.get_many::<String>("child") {
        let child_args: Vec<&String> = child_args.collect();
        let (mode, lines, max_bytes, path) = (child_args[0], child_args[1], child_args[2], child_args[3]);
        if let Err(e) = child(mode, Path::new(path), lines.parse().unwrap_or(0), max_bytes.parse().unwrap_or(0)) {
            eprintln!("append_cost child: {e}");
            std::process::exit(1);
        }
        return;
    }
    let number = |name: &str, default: u64| m.get_one::<u64>(name).copied().unwrap_or(default);
    let processes = usize::try_from(number("PROCESSES", 4)).unwrap_or(usize::MAX);
    let lines = usize::try_from(number("LINES", 200_000)).unwrap_or(usize::MAX);
    let max_bytes = number("MAX_BYTES", 20_000);
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
