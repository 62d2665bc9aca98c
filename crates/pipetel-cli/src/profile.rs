//! `pipetel profile`: the profile store beside the rows store, filtered by stage, shard, phase,
//! execution or trace, as a table of the frames with the most self time, as folded stacks, or
//! as a flame graph (SVG, drawn by inferno).

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use pipetel_rows::escape_controls;
use pipetel_rows::profile::{self as prof, ProfileLine};

use crate::args::profile::ProfileArgs;
use crate::args::RowsArgs;
use crate::read;

/// The profile store to read: the rows store as `pipetel rows` finds it, then the `.stacks`
/// file beside it; a `.stacks` file named directly is read as it is. Where `pipetel rows` would
/// take the only rows store in the directory, the only profile store there comes first (a
/// service may keep its rows elsewhere, or several services their rows there).
pub(crate) fn store_path(a: &RowsArgs) -> io::Result<PathBuf> {
    let named = a.file.is_some()
        || a.service.is_some()
        || ["PIPETEL_ROWS_FILE", "OTEL_SERVICE_NAME"]
            .iter()
            .any(|v| std::env::var_os(v).is_some_and(|v| !v.is_empty()));
    if !named {
        if let Some(dir) = a.dir.clone().or_else(|| pipetel_rows::default_dir().ok()) {
            match pipetel_rows::files_in(&dir, prof::EXTENSION).as_slice() {
                [] => {}
                [one] => return Ok(one.clone()),
                many => {
                    let names: Vec<String> = many.iter().map(|p| safe_path(p)).collect();
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "several profile stores in {}: {}; pick one with --service or FILE",
                            safe_path(&dir),
                            names.join(", ")
                        ),
                    ));
                }
            }
        }
    }
    let path = read::store_path(a)?;
    Ok(if path.extension().is_some_and(|e| e == prof::EXTENSION) { path } else { prof::beside(&path) })
}

/// Runs `pipetel profile`: the report (or the folded stacks) to `out`, notes about skipped lines
/// to `notes`, the flame graph to `--svg`'s file.
///
/// # Errors
/// The store cannot be read, no sample matches the filter (the message names the filter and
/// the stages the store holds), or the flame graph cannot be written.
pub(crate) fn run(a: &ProfileArgs, out: &mut dyn Write, notes: &mut dyn Write) -> io::Result<()> {
    let path = store_path(&a.store)?;
    let read = prof::read_profiles(&path)?;
    let shown = safe_path(&path);
    if read.skipped > 0 {
        writeln!(notes, "pipetel profile: {shown}: {} torn or invalid lines skipped", read.skipped)?;
    }
    let (lines, others): (Vec<ProfileLine>, Vec<ProfileLine>) =
        read.lines.into_iter().partition(|l| a.filter.matches(l));
    if prof::total_samples(&lines) == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no samples of {} in {shown}; {}", a.filter, holds(&lines, &others)),
        ));
    }
    if let Some(svg) = &a.svg {
        write_svg(svg, &lines, &title(a))?;
    }
    if a.folded {
        // Frame names are folded as stored: no control characters (nor `;`) left in them.
        out.write_all(prof::folded(&lines).as_bytes())?;
    } else {
        out.write_all(report(a, &shown, &lines).as_bytes())?;
    }
    out.flush()
}

/// What the store holds, for the message when nothing matches: the stages seen in `matched`
/// (lines without samples) and `others`.
fn holds(matched: &[ProfileLine], others: &[ProfileLine]) -> String {
    if matched.is_empty() && others.is_empty() {
        return "the store holds no samples".to_string();
    }
    let stages: BTreeSet<String> =
        matched.iter().chain(others).map(|l| l.stage.as_deref().map_or("(outside any stage)".into(), safe)).collect();
    let stages: Vec<String> = stages.into_iter().collect();
    format!("the store holds samples of the stages: {}", stages.join(", "))
}

/// The header line and the table of top frames.
fn report(a: &ProfileArgs, shown: &str, lines: &[ProfileLine]) -> String {
    let samples = prof::total_samples(lines);
    let mut text = format!(
        "{}: {samples} samples, {:.2} CPU s  ({shown})\n\n  SELF%  TOTAL%  FRAME\n",
        a.filter,
        prof::cpu_seconds(lines)
    );
    for f in prof::top_frames(lines, a.top) {
        text.push_str(&format!("  {:>5.1}  {:>6.1}  {}\n", f.self_share * 100.0, f.total_share * 100.0, safe(&f.name)));
    }
    text
}

/// The flame graph's title: what it shows.
fn title(a: &ProfileArgs) -> String {
    format!("pipetel profile: {}", a.filter)
}

/// Draws the flame graph of `lines` into `path` (rendered whole first, so a failure leaves no
/// half-written file).
fn write_svg(path: &Path, lines: &[ProfileLine], title: &str) -> io::Result<()> {
    let folded = prof::folded(lines);
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.count_name = "samples".to_string();
    let mut svg = Vec::new();
    inferno::flamegraph::from_lines(&mut options, folded.lines(), &mut svg)
        .map_err(|e| io::Error::new(e.kind(), format!("drawing the flame graph: {e}")))?;
    std::fs::write(path, svg).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", safe_path(path))))
}

fn safe(text: &str) -> String {
    escape_controls(text).into_owned()
}

fn safe_path(path: &Path) -> String {
    safe(&path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(stage: Option<&str>, samples: u64, stack: &[&str]) -> ProfileLine {
        ProfileLine {
            stage: stage.map(str::to_string),
            language: "rust".into(),
            period_ns: 1_000_000,
            samples,
            stack: stack.iter().map(|f| f.to_string()).collect(),
            ..ProfileLine::default()
        }
    }

    #[test]
    fn the_store_is_the_stacks_file_beside_the_rows_store() {
        let named = |file: &str| RowsArgs { file: Some(PathBuf::from(file)), ..RowsArgs::default() };
        assert_eq!(store_path(&named("/d/s.jsonl")).expect("path"), PathBuf::from("/d/s.stacks"));
        assert_eq!(store_path(&named("/d/s.stacks")).expect("path"), PathBuf::from("/d/s.stacks"));
        assert_eq!(store_path(&named("/d/s.log")).expect("path"), PathBuf::from("/d/s.log.stacks"));
    }

    #[test]
    fn the_report_heads_a_table_of_self_and_total_shares() {
        let a = ProfileArgs { top: 2, ..ProfileArgs::default() };
        let lines = [line(Some("tok"), 3, &["main", "parse"]), line(Some("tok"), 1, &["main", "walk\u{1b}[2J"])];
        let text = report(&a, "s.stacks", &lines);
        assert_eq!(
            text,
            "every sample: 4 samples, 0.00 CPU s  (s.stacks)\n\n  SELF%  TOTAL%  FRAME\n   75.0    75.0  parse\n   \
             25.0    25.0  walk_[2J\n"
        );
        assert_eq!(holds(&[], &[]), "the store holds no samples");
        let held = holds(&[line(Some("b\u{1b}"), 0, &["x"])], &[line(None, 1, &["y"]), line(Some("a"), 1, &["z"])]);
        assert_eq!(held, "the store holds samples of the stages: (outside any stage), a, b\\x1b");
    }
}
