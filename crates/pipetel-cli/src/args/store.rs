//! What `pipetel rows` and `pipetel top` share: the store options (where the rows are), the
//! filters, and the parsing of their values.

use std::path::PathBuf;
use std::time::Duration;

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
    /// `--sample-interval`: the interval of shards with fewer than two samples.
    pub(crate) sample_interval: Option<Duration>,
}

/// `value` as a number of seconds above 0, or an error naming `flag`.
pub(crate) fn seconds(flag: &str, v: &str) -> Result<Duration, String> {
    v.parse::<f64>()
        .ok()
        .filter(|s| *s > 0.0)
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("{flag} {v:?}: expected a number of seconds above 0"))
}

/// Parses a store option shared by `rows`, `top` and `profile` into `a`; `Ok(false)` when `flag`
/// is not one.
pub(crate) fn store_option(
    a: &mut RowsArgs,
    flag: &str,
    value: &mut dyn FnMut(&str) -> Result<String, String>,
) -> Result<bool, String> {
    match flag {
        "--file" => a.file = Some(PathBuf::from(value(flag)?)),
        "--service" => a.service = Some(value(flag)?),
        "--dir" => a.dir = Some(PathBuf::from(value(flag)?)),
        "--url" => a.url = Some(value(flag)?),
        "--timeout" => a.timeout = Some(seconds(flag, &value(flag)?)?),
        "--sample-interval" => a.sample_interval = Some(seconds(flag, &value(flag)?)?),
        "--max-bytes" => {
            let v = value(flag)?;
            a.max_bytes = Some(
                v.parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("{flag} {v:?}: expected a number of bytes above 0"))?,
            );
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The checks of the store options once all are read.
pub(crate) fn check_store(a: &RowsArgs) -> Result<(), String> {
    if a.url.is_some() && (a.file.is_some() || a.dir.is_some()) {
        return Err("--url reads the fleet's store: it does not combine with FILE, --file or --dir".into());
    }
    if a.url.is_none() && (a.timeout.is_some() || a.max_bytes.is_some()) {
        return Err("--timeout and --max-bytes apply to --url (a local store is read from disk)".into());
    }
    Ok(())
}

/// `--flag=value` as the flag and its inline value; any other argument as it is, without one.
pub(crate) fn split_flag(arg: &str) -> (&str, Option<&str>) {
    match arg.split_once('=') {
        Some((flag, value)) if flag.starts_with("--") => (flag, Some(value)),
        _ => (arg, None),
    }
}

/// The value of option `name`: its inline value (`--name=value`), else the next argument.
///
/// # Errors
/// `<name> needs a value` when neither is there.
pub(crate) fn flag_value(
    inline: Option<&str>,
    rest: &mut std::slice::Iter<'_, String>,
    name: &str,
) -> Result<String, String> {
    match inline.map(str::to_string).or_else(|| rest.next().cloned()) {
        Some(v) => Ok(v),
        None => Err(format!("{name} needs a value")),
    }
}
