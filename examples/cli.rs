//! The command-line plumbing the examples share (each one's `mod cli;`): an option with a
//! default, a switch, `--linger-seconds`, `--interval-ms`, and the exit status of a run. Each
//! example uses the parts it needs.
#![allow(dead_code)]

use std::time::Duration;

/// The option of every example that serves metrics: how long it keeps serving after its work.
const LINGER: &str = "linger-seconds";
/// The option of the examples that record batches in a loop: the pause between two.
const INTERVAL: &str = "interval-ms";

/// A `--name N` option with a default.
pub(crate) fn number(name: &'static str, help: &'static str, default: &'static str) -> clap::Arg {
    clap::Arg::new(name).long(name).value_name("N").default_value(default).help(help)
}

/// A `--name` switch, off unless given.
pub(crate) fn flag(name: &'static str, help: &'static str) -> clap::Arg {
    clap::Arg::new(name).long(name).action(clap::ArgAction::SetTrue).help(help)
}

/// `--linger-seconds N` (default 0): keep serving metrics this long after the work, so that a
/// scraper still reads the final values.
pub(crate) fn linger(help: &'static str) -> clap::Arg {
    number(LINGER, help, "0").value_parser(clap::value_parser!(u64))
}

/// The `--linger-seconds` given (to a command with [`linger`]).
pub(crate) fn linger_of(m: &clap::ArgMatches) -> Duration {
    Duration::from_secs(m.get_one(LINGER).copied().unwrap_or(0))
}

/// `--interval-ms N` (default 500): the pause between two batches.
pub(crate) fn interval() -> clap::Arg {
    number(INTERVAL, "Milliseconds between batches", "500").value_parser(clap::value_parser!(u64))
}

/// The `--interval-ms` given (to a command with [`interval`]).
pub(crate) fn interval_of(m: &clap::ArgMatches) -> Duration {
    Duration::from_millis(m.get_one(INTERVAL).copied().unwrap_or(500))
}

/// Success, or the error printed and failure. Display, not Debug: the error names the culprit
/// in words.
pub(crate) fn exit_code(run: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    let Err(e) = run else { return std::process::ExitCode::SUCCESS };
    eprintln!("error: {e}");
    std::process::ExitCode::FAILURE
}
