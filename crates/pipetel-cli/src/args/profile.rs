//! `pipetel profile [OPTIONS] [FILE]`: its command line.

use std::path::PathBuf;

use pipetel_rows::profile::Filter;

use super::store::{flag_value, split_flag, store_option, RowsArgs};

pub(crate) const USAGE: &str = "\
usage: pipetel profile [OPTIONS] [FILE]

Which code the stages ran: the sampled CPU stacks of the profile store beside the rows store
(<dir>/<service>.stacks next to <dir>/<service>.jsonl, with its rotated files), each sample
labelled with the stage, execution, shard, phase and shard span of the thread it interrupted.
Prints the matching samples (their number and the CPU time they stand for), then the frames
with the most self time: SELF% (samples where the frame is the leaf: time in its own code),
TOTAL% (samples where it is anywhere on the stack: time in it and in what it called).

Where (found as `pipetel rows` finds the rows store, then the .stacks file beside it):
  FILE, --file PATH    a profile store (.stacks), or a rows store whose .stacks is beside it
  --service NAME       the store of this service (default: $OTEL_SERVICE_NAME)
  --dir DIR            where default stores are (default: $PIPETEL_ROWS_DIR, else
                       $XDG_STATE_HOME/pipetel/rows, else ~/.local/state/pipetel/rows)
                       Without FILE: beside $PIPETEL_ROWS_FILE, else the service's store,
                       else the only profile store in DIR, else the one beside the only
                       rows store in DIR.
Filters (all must match):
  --stage NAME         stage name
  --shard N            shard index
  --phase P            named phase (pipeline.phase)
  --execution ID       execution id
  --trace TRACE_ID     the shard span's trace (32 hexadecimal digits)
Output:
  --top N              the N frames with the most self time (default: 20)
  --folded             the folded stacks instead (`root;mid;leaf COUNT` a line), the input
                       of flame-graph tools
  --svg FILE           also write a flame graph of the matching samples to FILE (SVG)
  -h, --help           this help

No sample matching the filters: a message naming them and the stages the store holds, exit
status 1. Torn or invalid lines are skipped with a count on stderr. Control characters in
names are printed escaped (\\x1b).";

/// The default `--top`.
pub(crate) const DEFAULT_TOP: usize = 20;

/// A parsed `pipetel profile` command line.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProfileArgs {
    /// The store options, as `pipetel rows` takes them (`--file`, `--dir`, `--service`).
    pub(crate) store: RowsArgs,
    /// The labels the samples must carry.
    pub(crate) filter: Filter,
    /// `--top`.
    pub(crate) top: usize,
    /// `--folded`.
    pub(crate) folded: bool,
    /// `--svg`.
    pub(crate) svg: Option<PathBuf>,
}

/// Parses the arguments after `profile`: `None` asks for the help.
///
/// # Errors
/// A message naming the offending argument.
pub(crate) fn parse(args: &[String]) -> Result<Option<ProfileArgs>, String> {
    let mut a = ProfileArgs { top: DEFAULT_TOP, ..ProfileArgs::default() };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, inline) = split_flag(arg);
        let mut value = |name: &str| flag_value(inline, &mut it, name);
        match flag {
            "-h" | "--help" => return Ok(None),
            "--url" | "--timeout" | "--max-bytes" | "--sample-interval" => {
                return Err(format!("{flag} does not apply to `pipetel profile`: profiles are read from a local store"))
            }
            f if store_option(&mut a.store, f, &mut value)? => {}
            "--stage" => a.filter.stage = Some(value(flag)?),
            "--execution" => a.filter.execution = Some(value(flag)?),
            "--phase" => a.filter.phase = Some(value(flag)?),
            "--shard" => {
                let v = value(flag)?;
                a.filter.shard =
                    Some(v.parse().map_err(|_| format!("--shard {v:?}: expected a shard index (a whole number)"))?);
            }
            "--trace" => {
                let v = value(flag)?;
                if v.len() != 32 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(format!("--trace {v:?}: expected a trace id (32 hexadecimal digits)"));
                }
                a.filter.trace_id = Some(v.to_ascii_lowercase());
            }
            "--top" => {
                let v = value(flag)?;
                a.top = v
                    .parse()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("--top {v:?}: expected a number of frames above 0"))?;
            }
            "--folded" => a.folded = true,
            "--svg" => a.svg = Some(PathBuf::from(value(flag)?)),
            f if f.starts_with('-') => return Err(format!("unknown option {f:?} (see `pipetel profile --help`)")),
            path if a.store.file.is_none() => a.store.file = Some(path.into()),
            extra => return Err(format!("unexpected argument {extra:?}: one store file at most")),
        }
    }
    Ok(Some(a))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(args: &[&str]) -> Result<ProfileArgs, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse(&v)?.ok_or_else(|| "help".to_string())
    }

    #[test]
    fn options_values_and_errors_name_the_argument() {
        let a = profile(&["--stage", "tok", "--shard=3", "--phase", "load", "--execution", "run-1", "x.stacks"])
            .expect("valid");
        assert_eq!(a.filter.stage.as_deref(), Some("tok"));
        assert_eq!((a.filter.shard, a.filter.phase.as_deref()), (Some(3), Some("load")));
        assert_eq!(a.filter.execution.as_deref(), Some("run-1"));
        assert_eq!((a.store.file, a.top, a.folded), (Some(PathBuf::from("x.stacks")), DEFAULT_TOP, false));
        let a = profile(&["--trace", "0AF7651916CD43DD8448EB211C80319C", "--top", "5", "--folded", "--svg", "f.svg"])
            .expect("valid");
        assert_eq!(a.filter.trace_id.as_deref(), Some("0af7651916cd43dd8448eb211c80319c"));
        assert_eq!((a.top, a.folded, a.svg), (5, true, Some(PathBuf::from("f.svg"))));
        let a = profile(&["--dir", "d", "--service", "s"]).expect("valid");
        assert_eq!((a.store.dir, a.store.service), (Some(PathBuf::from("d")), Some("s".to_string())));
        assert!(profile(&["--trace", "abc"]).expect_err("bad").contains("--trace \"abc\""));
        assert!(profile(&["--top", "0"]).expect_err("bad").contains("--top \"0\""));
        assert!(profile(&["--shard", "-1"]).expect_err("bad").contains("--shard \"-1\""));
        assert!(profile(&["--url", "http://h:1"]).expect_err("bad").contains("local store"));
        assert!(profile(&["--svg"]).expect_err("bad").contains("--svg needs a value"));
        assert!(profile(&["--bogus"]).expect_err("bad").contains("--bogus"));
        assert!(profile(&["a", "b"]).expect_err("bad").contains("\"b\""));
        assert!(matches!(parse(&["--help".to_string()]), Ok(None)));
    }
}
