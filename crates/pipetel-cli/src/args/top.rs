//! `pipetel top [OPTIONS] [FILE]`: its command line.

use std::time::Duration;

use super::store::{check_store, flag_value, seconds, split_flag, store_option, RowsArgs};

pub(crate) const USAGE: &str = "\
usage: pipetel top [OPTIONS] [FILE]
       pipetel top --url URL [OPTIONS]
       pipetel top --endpoint URL [--endpoint URL ...] [OPTIONS]

A live view of the running stages, redrawn every --interval: per stage its shards
done/running/pending/total, items, items/s, elapsed time, ETA (the time so far scaled by the
shards left over the shards done) and skew (the slowest finished shard's elapsed time over the
75th percentile's, `!` when the skew rule holds: over 1.5 x p75 and 10 s beyond it); the ten
slowest running shards (stage, shard, host, pid, elapsed, items/s, current phase); the shards
marked straggler or stalled (a straggler or stalled row not followed by resumed or an end);
lost shards and stages (a running shard silent for over 3 sample intervals: see
`pipetel rows --help`).

Where (the local rows store is the default, found as `pipetel rows` finds it):
  FILE, --file PATH    the store to read (its rotated files PATH.N too)
  --service NAME       the default store of this service (default: $OTEL_SERVICE_NAME)
  --dir DIR            where default stores are (default: $PIPETEL_ROWS_DIR, ...)
  --url URL            the fleet's rows store: VictoriaLogs at URL (http://HOST:9428), with
                       --timeout SECONDS and --max-bytes N as in `pipetel rows`
  --endpoint URL       a Prometheus pull endpoint (http://HOST:9464/metrics), repeatable:
                       the stage and worker families of each; per stage only what metrics
                       carry (no elapsed time or ETA; stragglers and stalls as counts), a
                       shard as running while its heartbeat is fresh; an endpoint that stops
                       answering has its stages shown lost
Options:
  --interval SECONDS   time between frames (default: 1); with --endpoint, rates are the
                       change between two scrapes this far apart
  --once               print one frame, without escape codes, and exit (with --endpoint:
                       after two scrapes one --interval apart, for the rates)
  --sample-interval SECONDS
                       the sample interval of shards with fewer than two periodic rows
                       (default: 10)
  -h, --help           this help

The local store is read incrementally: each frame reads only the bytes appended since the last.
Live mode clears the screen (ANSI) before each frame and changes no terminal mode: Ctrl-C ends
it and leaves the terminal as it was.";

/// A parsed `pipetel top` command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct TopArgs {
    /// The store options, as `pipetel rows` takes them.
    pub(crate) store: RowsArgs,
    /// `--endpoint`: pull endpoints to scrape instead of a store.
    pub(crate) endpoints: Vec<String>,
    /// `--interval`.
    pub(crate) interval: Duration,
    /// `--once`.
    pub(crate) once: bool,
}

/// The default `--interval`.
pub(crate) const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);

/// Parses the arguments after `top`: `None` asks for the help.
///
/// # Errors
/// A message naming the offending argument.
pub(crate) fn parse(args: &[String]) -> Result<Option<TopArgs>, String> {
    let mut a = TopArgs { interval: DEFAULT_INTERVAL, ..TopArgs::default() };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = split_flag(arg);
        let mut value = |name: &str| flag_value(inline, &mut it, name);
        match flag {
            "-h" | "--help" => return Ok(None),
            f if store_option(&mut a.store, f, &mut value)? => {}
            "--endpoint" => {
                let v = value(flag)?;
                if !v.starts_with("http://") {
                    return Err(format!("--endpoint {v:?}: expected an http:// URL (http://HOST:PORT/metrics)"));
                }
                a.endpoints.push(v);
            }
            "--interval" => a.interval = seconds(flag, &value(flag)?)?,
            "--once" => a.once = true,
            f if f.starts_with('-') => return Err(format!("unknown option {f:?} (see `pipetel top --help`)")),
            path if a.store.file.is_none() => a.store.file = Some(path.into()),
            extra => return Err(format!("unexpected argument {extra:?}: one store file at most")),
        }
    }
    check_store(&a.store)?;
    let s = &a.store;
    if !a.endpoints.is_empty() && (s.url.is_some() || s.file.is_some() || s.dir.is_some() || s.service.is_some()) {
        return Err(
            "--endpoint reads pull endpoints: it does not combine with a store (FILE, --dir, --service, --url)".into(),
        );
    }
    Ok(Some(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn top(args: &[&str]) -> Result<TopArgs, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&v)?.ok_or_else(|| "help".to_string())
    }

    #[test]
    fn options_values_and_errors_name_the_argument() {
        let a = top(&["--once", "--interval", "0.5", "--dir", "d", "--sample-interval=2"]).expect("valid");
        assert!(a.once);
        assert_eq!((a.interval, a.store.sample_interval), (Duration::from_millis(500), Some(Duration::from_secs(2))));
        let a = top(&["--endpoint", "http://h:1/metrics", "--endpoint=http://h:2/metrics"]).expect("valid");
        assert_eq!(a.endpoints.len(), 2);
        assert_eq!(top(&[]).expect("valid").interval, DEFAULT_INTERVAL);
        assert!(top(&["--interval", "0"]).expect_err("bad").contains("--interval \"0\""));
        assert!(top(&["--endpoint", "h:1"]).expect_err("bad").contains("--endpoint \"h:1\""));
        assert!(top(&["--endpoint", "http://h:1", "--dir", "d"]).expect_err("bad").contains("does not combine"));
        assert!(top(&["--url", "http://h:1", "f.jsonl"]).expect_err("bad").contains("--url"));
        assert!(top(&["--bogus"]).expect_err("bad").contains("--bogus"));
        assert!(matches!(parse(&["-h".to_string()]), Ok(None)));
    }
}
