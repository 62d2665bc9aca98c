//! The command line: `pipetel rows [OPTIONS] [FILE]`, parsed with std only.

use std::path::PathBuf;
use std::time::Duration;

pub(crate) const USAGE: &str = "\
usage: pipetel rows [OPTIONS] [FILE]
       pipetel rows --url URL [OPTIONS]

Lists the stage and worker rows of a pipetel rows store (JSON Lines): the rows of every
process that wrote it, with its rotated files, each row once; or of a whole fleet in
VictoriaLogs (--url).

Where:
  FILE, --file PATH    the store to read (its rotated files PATH.N too)
  --service NAME       the default store of this service (default: $OTEL_SERVICE_NAME)
  --dir DIR            where default stores are (default: $PIPETEL_ROWS_DIR, else
                       $XDG_STATE_HOME/pipetel/rows, else ~/.local/state/pipetel/rows)
                       Without FILE: $PIPETEL_ROWS_FILE, else the service's store, else the
                       only store in DIR.
  --url URL            the fleet's rows store instead: VictoriaLogs at URL (http://HOST:9428),
                       where the gateways write every worker's rows; --service then filters
                       by service name
  --timeout SECONDS    with --url: the read timeout, the longest wait to connect and for
                       each further part of the answer (default: 30)
  --max-bytes N        with --url: the cap on the whole answer in bytes (default: 268435456,
                       256 MiB); a line of the answer is capped at 1 MiB. A query past a cap
                       or the timeout fails with an error naming it and the URL.
Filters (all must match):
  --namespace NS       rows of stream NS or NS.* (`pipeline`, `zephyr.worker`, ...)
  --stage NAME         stage name
  --execution ID       execution id
  --shard N            shard index (worker rows)
  --status S           start, running, end, failed, succeeded
Output:
  (default)            one line per row
  --json               the matching rows as they are stored (JSON Lines)
  --summary            one line per stage execution: status, shards, items, bytes, time
  --timeline           per stage execution, one line per shard with its span in time
  --follow             keep reading rows as they are appended (follows rotation)
  -h, --help           this help

Torn or malformed lines are skipped with a note on stderr naming the file and line. Control
characters in names, reasons and error messages are printed escaped (\x1b).";

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Mode {
    #[default]
    List,
    Json,
    Summary,
    Timeline,
}

/// Row filters; `None` matches anything.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filters {
    pub(crate) namespace: Option<String>,
    pub(crate) stage: Option<String>,
    pub(crate) execution: Option<String>,
    pub(crate) shard: Option<u64>,
    pub(crate) status: Option<String>,
}

/// A parsed `pipetel rows` command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowsArgs {
    pub(crate) file: Option<PathBuf>,
    pub(crate) service: Option<String>,
    pub(crate) dir: Option<PathBuf>,
    pub(crate) filters: Filters,
    pub(crate) mode: Mode,
    pub(crate) follow: bool,
    /// The VictoriaLogs to read instead of a local store.
    pub(crate) url: Option<String>,
    /// `--timeout`: the read timeout of `--url`.
    pub(crate) timeout: Option<Duration>,
    /// `--max-bytes`: the cap on the whole answer of `--url`.
    pub(crate) max_bytes: Option<u64>,
}

/// What the command line asks for.
#[derive(Debug)]
// Built once per run: the size of the rows variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Command {
    Help,
    Rows(RowsArgs),
}

/// Parses the arguments after the program name.
///
/// # Errors
/// A message naming the offending argument.
pub(crate) fn parse(args: &[String]) -> Result<Command, String> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        None | Some("-h" | "--help" | "help") => return Ok(Command::Help),
        Some("rows") => {}
        Some(other) => return Err(format!("unknown command {other:?}: the one command is `rows`")),
    }
    let mut a = RowsArgs::default();
    let mut modes = Vec::new();
    while let Some(arg) = it.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone().or_else(|| it.next().cloned()) {
                Some(v) => Ok(v),
                None => Err(format!("{name} needs a value")),
            }
        };
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            "--file" => a.file = Some(PathBuf::from(value(flag)?)),
            "--service" => a.service = Some(value(flag)?),
            "--dir" => a.dir = Some(PathBuf::from(value(flag)?)),
            "--url" => a.url = Some(value(flag)?),
            "--timeout" => {
                let v = value(flag)?;
                a.timeout = Some(
                    v.parse::<f64>()
                        .ok()
                        .filter(|s| *s > 0.0)
                        .and_then(|s| Duration::try_from_secs_f64(s).ok())
                        .ok_or_else(|| format!("--timeout {v:?}: expected a number of seconds above 0"))?,
                );
            }
            "--max-bytes" => {
                let v = value(flag)?;
                a.max_bytes = Some(
                    v.parse::<u64>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("--max-bytes {v:?}: expected a number of bytes above 0"))?,
                );
            }
            "--namespace" => a.filters.namespace = Some(value(flag)?),
            "--stage" => a.filters.stage = Some(value(flag)?),
            "--execution" => a.filters.execution = Some(value(flag)?),
            "--shard" => {
                let v = value(flag)?;
                a.filters.shard =
                    Some(v.parse().map_err(|_| format!("--shard {v:?}: expected a shard index (a whole number)"))?);
            }
            "--status" => {
                let v = value(flag)?;
                if !["start", "running", "end", "failed", "succeeded"].contains(&v.as_str()) {
                    return Err(format!("--status {v:?}: expected start, running, end, failed or succeeded"));
                }
                a.filters.status = Some(v);
            }
            "--json" => modes.push((flag, Mode::Json)),
            "--summary" => modes.push((flag, Mode::Summary)),
            "--timeline" => modes.push((flag, Mode::Timeline)),
            "--follow" | "-f" => a.follow = true,
            f if f.starts_with('-') => return Err(format!("unknown option {f:?} (see `pipetel rows --help`)")),
            path if a.file.is_none() => a.file = Some(PathBuf::from(path)),
            extra => return Err(format!("unexpected argument {extra:?}: one store file at most")),
        }
    }
    if modes.len() > 1 {
        let names: Vec<&str> = modes.iter().map(|(f, _)| *f).collect();
        return Err(format!("{} cannot be combined: pick one", names.join(" and ")));
    }
    if a.url.is_some() && (a.file.is_some() || a.dir.is_some()) {
        return Err("--url reads the fleet's store: it does not combine with FILE, --file or --dir".into());
    }
    if a.url.is_none() && (a.timeout.is_some() || a.max_bytes.is_some()) {
        return Err("--timeout and --max-bytes apply to --url (a local store is read from disk)".into());
    }
    a.mode = modes.first().map_or(Mode::List, |(_, m)| *m);
    if a.follow && matches!(a.mode, Mode::Summary | Mode::Timeline) {
        return Err("--follow prints rows as they arrive; it does not combine with --summary or --timeline".into());
    }
    Ok(Command::Rows(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(args: &[&str]) -> Result<RowsArgs, String> {
        let mut v = vec!["rows".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        match parse(&v)? {
            Command::Rows(a) => Ok(a),
            Command::Help => Err("help".into()),
        }
    }

    #[test]
    fn options_values_and_errors_name_the_argument() {
        let a = rows(&["--stage", "tok", "--shard=3", "--summary", "f.jsonl"]).expect("valid");
        assert_eq!((a.filters.stage.as_deref(), a.filters.shard, a.mode), (Some("tok"), Some(3), Mode::Summary));
        assert_eq!(a.file, Some(PathBuf::from("f.jsonl")));
        assert!(rows(&["--shard", "x"]).expect_err("bad").contains("--shard \"x\""));
        assert!(rows(&["--status", "done"]).expect_err("bad").contains("--status \"done\""));
        assert!(rows(&["--bogus"]).expect_err("bad").contains("--bogus"));
        assert!(rows(&["--stage"]).expect_err("bad").contains("--stage needs a value"));
        assert!(rows(&["--summary", "--json"]).expect_err("bad").contains("--summary and --json"));
        assert!(rows(&["--follow", "--timeline"]).expect_err("bad").contains("--follow"));
        assert!(matches!(parse(&["nope".to_string()]), Err(e) if e.contains("nope")));
        let a = rows(&["--url", "http://h:1", "--timeout", "1.5", "--max-bytes=1000"]).expect("valid");
        assert_eq!((a.timeout, a.max_bytes), (Some(Duration::from_millis(1500)), Some(1000)));
        for bad in ["0", "-1", "x", "nan", "inf", "1e300"] {
            let e = rows(&["--url", "http://h:1", "--timeout", bad]).expect_err("bad");
            assert!(e.contains(&format!("--timeout \"{bad}\"")), "{e}");
        }
        assert!(rows(&["--url", "http://h:1", "--max-bytes", "0"]).expect_err("bad").contains("--max-bytes \"0\""));
        assert!(rows(&["--timeout", "3"]).expect_err("bad").contains("apply to --url"));
    }
}
