//! The command line: `pipetel rows [OPTIONS] [FILE]`, `pipetel top [OPTIONS] [FILE]` ([`top`])
//! and `pipetel profile [OPTIONS] [FILE]` ([`profile`]), parsed with std only.

pub(crate) mod profile;
mod store;
pub(crate) mod top;

pub(crate) use store::{check_store, flag_value, split_flag, store_option, Filters, Mode, RowsArgs};

use std::path::PathBuf;

pub(crate) const USAGE: &str = "\
usage: pipetel rows [OPTIONS] [FILE]
       pipetel rows --url URL [OPTIONS]
       pipetel top [OPTIONS] [FILE]     (a live view of the running stages: pipetel top --help)
       pipetel profile [OPTIONS] [FILE] (which code the stages ran: pipetel profile --help)

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
  --status S           start, running, end, failed, succeeded, straggler, stalled, resumed
Output:
  (default)            one line per row
  --json               the matching rows as they are stored (JSON Lines)
  --summary            one line per stage execution: status, shards, items, bytes, time
  --timeline           per stage execution, one line per shard with its span in time
  --follow             keep reading rows as they are appended (follows rotation)
  --sample-interval SECONDS
                       the sample interval of shards with fewer than two periodic rows
                       (default: 10, the library's PIPETEL_SAMPLE_INTERVAL); a shard with
                       two or more has its own: the median gap between them
  -h, --help           this help

Lost: a shard whose last row leaves it running (start, running, straggler, stalled, resumed)
and is older than 3 sample intervals is lost (its process died without an end row): the
listing marks that row LOST, --timeline shows the shard lost. A stage with no stage row whose
shards all ended or are lost, one at least lost, is lost, with the time of its last row in
--summary's NOTE. Lost is judged on the rows before --status (with --url and --status, not at
all: the store does not send the rows that end a shard).

Torn or malformed lines are skipped with a note on stderr naming the file and line. Control
characters in names, reasons and error messages are printed escaped (\\x1b).";

/// What the command line asks for.
#[derive(Debug)]
// Built once per run: the size of the rows variant costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Command {
    Help,
    Rows(RowsArgs),
    TopHelp,
    Top(top::TopArgs),
    ProfileHelp,
    Profile(profile::ProfileArgs),
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
        Some("top") => {
            return Ok(match top::parse(&args[1..])? {
                Some(a) => Command::Top(a),
                None => Command::TopHelp,
            })
        }
        Some("profile") => {
            return Ok(match profile::parse(&args[1..])? {
                Some(a) => Command::Profile(a),
                None => Command::ProfileHelp,
            })
        }
        Some(other) => return Err(format!("unknown command {other:?}: the commands are `rows`, `top` and `profile`")),
    }
    let mut a = RowsArgs::default();
    let mut modes = Vec::new();
    while let Some(arg) = it.next() {
        let (flag, inline) = split_flag(arg);
        let mut value = |name: &str| flag_value(inline, &mut it, name);
        match flag {
            "-h" | "--help" => return Ok(Command::Help),
            f if store_option(&mut a, f, &mut value)? => {}
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
                const STATUSES: [&str; 8] =
                    ["start", "running", "end", "failed", "succeeded", "straggler", "stalled", "resumed"];
                if !STATUSES.contains(&v.as_str()) {
                    return Err(format!("--status {v:?}: expected one of {}", STATUSES.join(", ")));
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
    check_store(&a)?;
    a.mode = modes.first().map_or(Mode::List, |(_, m)| *m);
    if a.follow && matches!(a.mode, Mode::Summary | Mode::Timeline) {
        return Err("--follow prints rows as they arrive; it does not combine with --summary or --timeline".into());
    }
    Ok(Command::Rows(a))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn rows(args: &[&str]) -> Result<RowsArgs, String> {
        let mut v = vec!["rows".to_string()];
        v.extend(args.iter().map(|s| s.to_string()));
        match parse(&v)? {
            Command::Rows(a) => Ok(a),
            _ => Err("not rows".into()),
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
