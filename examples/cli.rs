//! The command-line plumbing the examples share (each one's `mod cli;`): an option with a
//! default, and the exit status of a run.

/// A `--name N` option with a default.
pub(crate) fn number(name: &'static str, help: &'static str, default: &'static str) -> clap::Arg {
    clap::Arg::new(name).long(name).value_name("N").default_value(default).help(help)
}

/// Success, or the error printed and failure. Display, not Debug: the error names the culprit
/// in words.
pub(crate) fn exit_code(run: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    let Err(e) = run else { return std::process::ExitCode::SUCCESS };
    eprintln!("error: {e}");
    std::process::ExitCode::FAILURE
}
