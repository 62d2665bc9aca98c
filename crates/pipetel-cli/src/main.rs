//! `pipetel`: the command-line companion of the pipetel library.
//!
//! `pipetel rows` reads the local rows store the library writes by default (or any rows file):
//! lists and filters rows, prints a stage summary or a per-shard timeline, and follows a live
//! store across rotation. See `pipetel rows --help`.

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod args;
mod follow;
mod read;
mod remote;
mod show;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use args::{Command, Mode, RowsArgs};

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    match args::parse(&argv) {
        Err(e) => {
            eprintln!("pipetel: {}\n(see `pipetel rows --help`)", show::safe(&e));
            ExitCode::from(2)
        }
        Ok(Command::Help) => {
            println!("{}", args::USAGE);
            ExitCode::SUCCESS
        }
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

/// The store to read: the given file, else `PIPETEL_ROWS_FILE`, else the default store of the
/// service, else the only store in the directory.
fn store_path(a: &RowsArgs) -> io::Result<PathBuf> {
    if let Some(f) = &a.file {
        return Ok(f.clone());
    }
    if let Some(f) = std::env::var_os("PIPETEL_ROWS_FILE").filter(|f| !f.is_empty()) {
        return Ok(PathBuf::from(f));
    }
    let dir = match &a.dir {
        Some(dir) => dir.clone(),
        None => pipetel_rows::default_dir()
            .map_err(|e| io::Error::new(io::ErrorKind::NotFound, format!("{e}, or pass --dir or FILE")))?,
    };
    let service = a.service.clone().or_else(|| std::env::var("OTEL_SERVICE_NAME").ok().filter(|s| !s.is_empty()));
    if let Some(service) = service {
        return Ok(pipetel_rows::default_file(&dir, &service));
    }
    let stores = pipetel_rows::stores_in(&dir);
    match stores.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no rows store in {} (name one with FILE, --service or --dir)", dir.display()),
        )),
        many => {
            let names: Vec<String> = many.iter().map(|p| p.display().to_string()).collect();
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "several rows stores in {}: {}; pick one with --service or FILE",
                    dir.display(),
                    names.join(", ")
                ),
            ))
        }
    }
}

fn rows(a: &RowsArgs) -> io::Result<()> {
    if let Some(url) = &a.url {
        return remote::rows(url, a, &mut io::BufWriter::new(io::stdout().lock()));
    }
    let path = store_path(a)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    if a.follow {
        return follow::follow(&path, a, &mut out);
    }
    let rows = read::read_store(&path, &mut io::stderr())?;
    let rows: Vec<read::Row> = rows.into_iter().filter(|r| a.filters.matches(r)).collect();
    match a.mode {
        Mode::List => {
            for r in &rows {
                writeln!(out, "{}", show::row_line(r))?;
            }
        }
        Mode::Json => {
            for r in &rows {
                writeln!(out, "{}", pipetel_rows::escape_json_controls(&r.raw))?;
            }
        }
        Mode::Summary => out.write_all(show::summary(&rows).as_bytes())?,
        Mode::Timeline => out.write_all(show::timeline(&rows).as_bytes())?,
    }
    out.flush()
}
