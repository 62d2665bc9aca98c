//! `pipetel`: the command-line companion of the pipetel library.
//!
//! `pipetel rows` reads the local rows store the library writes by default (or any rows file):
//! lists and filters rows, prints a stage summary or a per-shard timeline, and follows a live
//! store across rotation. `pipetel top` shows the running stages and their slowest, straggling,
//! stalled and lost shards live, from a rows store, the fleet's store or pull endpoints.
//! `pipetel profile` shows which code the stages ran, from the profile store beside the rows
//! store: the frames with the most self time, folded stacks or a flame graph. See
//! `pipetel rows --help`, `pipetel top --help` and `pipetel profile --help`.

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod args;
mod follow;
mod lost;
mod profile;
mod read;
mod remote;
mod show;
mod top;

use std::io::{self, Write};
use std::process::ExitCode;

use args::{Command, Mode, RowsArgs};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match args::parse(&argv) {
        Err(e) => {
            let command = match argv.first().map(String::as_str) {
                Some("top") => "top",
                Some("profile") => "profile",
                _ => "rows",
            };
            eprintln!("pipetel: {}\n(see `pipetel {command} --help`)", show::safe(&e));
            ExitCode::from(2)
        }
        Ok(Command::Help) => {
            println!("{}", args::USAGE);
            ExitCode::SUCCESS
        }
        Ok(Command::TopHelp) => {
            println!("{}", args::top::USAGE);
            ExitCode::SUCCESS
        }
        Ok(Command::ProfileHelp) => {
            println!("{}", args::profile::USAGE);
            ExitCode::SUCCESS
        }
        Ok(Command::Profile(a)) => match profile::run(&a, &mut io::stdout().lock(), &mut io::stderr()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pipetel profile: {}", show::safe(&e.to_string()));
                ExitCode::from(1)
            }
        },
        Ok(Command::Top(a)) => match top::run(&a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pipetel top: {}", show::safe(&e.to_string()));
                ExitCode::from(1)
            }
        },
        Ok(Command::Rows(a)) => match rows(&a) {
            Ok(()) => ExitCode::SUCCESS,
            // `pipetel rows | head`: the reader went away, which is not a failure.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pipetel rows: {}", show::safe(&e.to_string()));
                ExitCode::from(1)
            }
        },
    }
}

fn rows(a: &RowsArgs) -> io::Result<()> {
    if let Some(url) = &a.url {
        return remote::rows(url, a, &mut io::BufWriter::new(io::stdout().lock()));
    }
    let path = read::store_path(a)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if a.follow {
        return follow::follow(&path, a, &mut out);
    }
    let rows = read::read_store(&path, &mut io::stderr())?;
    // Judged on every row: a filter (--status above all) may hide the rows that end a shard.
    let lost = show::Lost::judge(&rows, &lost::LostRule::now(a.sample_interval));
    let rows: Vec<read::Row> = rows.into_iter().filter(|r| a.filters.matches(r)).collect();
    match a.mode {
        Mode::List => show::listing(&rows, &lost, &mut out)?,
        Mode::Json => {
            for r in &rows {
                writeln!(out, "{}", pipetel_rows::escape_json_controls(&r.raw))?;
            }
        }
        Mode::Summary => out.write_all(show::summary(&rows, &lost).as_bytes())?,
        Mode::Timeline => out.write_all(show::timeline(&rows, &lost).as_bytes())?,
    }
    out.flush()
}
