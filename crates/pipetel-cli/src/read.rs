//! Reading a store: its files oldest first, each line parsed as one row; torn and malformed
//! lines are skipped with a note naming the file and line.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::args::{Filters, RowsArgs};

/// One row of the store: the stored line and its fields.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub(crate) raw: String,
    pub(crate) fields: Map<String, Value>,
}

impl Row {
    /// Parses one stored line: a JSON object with an `event` string.
    pub(crate) fn parse(line: &str) -> Result<Row, String> {
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(fields)) if fields.get("event").is_some_and(Value::is_string) => {
                Ok(Row { raw: line.to_string(), fields })
            }
            Ok(_) => Err("not a row (a JSON object with an `event`)".into()),
            Err(e) => Err(format!("not valid JSON ({e})")),
        }
    }

    pub(crate) fn str(&self, key: &str) -> &str {
        self.fields.get(key).and_then(Value::as_str).unwrap_or("")
    }

    pub(crate) fn u64(&self, key: &str) -> Option<u64> {
        self.fields.get(key).and_then(Value::as_u64)
    }

    pub(crate) fn f64(&self, key: &str) -> Option<f64> {
        self.fields.get(key).and_then(Value::as_f64)
    }

    pub(crate) fn event(&self) -> &str {
        self.str("event")
    }

    /// A stage row (stream `<prefix>.stage`); otherwise a worker row.
    pub(crate) fn is_stage(&self) -> bool {
        self.fields.get("pipeline.shard.index").is_none()
    }

    pub(crate) fn stage(&self) -> &str {
        self.str("pipeline.stage.name")
    }

    pub(crate) fn execution(&self) -> &str {
        self.str("pipeline.execution.id")
    }

    pub(crate) fn status(&self) -> &str {
        self.str("pipeline.status")
    }

    pub(crate) fn shard(&self) -> Option<u64> {
        self.u64("pipeline.shard.index")
    }

    pub(crate) fn timestamp_ms(&self) -> u64 {
        self.u64("timestamp_ms").unwrap_or(0)
    }
}

impl Filters {
    /// Whether `row` passes every filter.
    pub(crate) fn matches(&self, row: &Row) -> bool {
        let ns_ok = self.namespace.as_deref().is_none_or(|ns| {
            let e = row.event();
            e == ns || e.strip_prefix(ns).is_some_and(|rest| rest.starts_with('.'))
        });
        ns_ok
            && self.stage.as_deref().is_none_or(|s| row.stage() == s)
            && self.execution.as_deref().is_none_or(|x| row.execution() == x)
            && self.shard.is_none_or(|i| row.shard() == Some(i))
            && self.status.as_deref().is_none_or(|s| row.status() == s)
    }
}

/// Notes about skipped lines go to `notes` (stderr in the tool).
pub(crate) fn note(notes: &mut dyn Write, file: &Path, line: usize, what: &str) {
    let file = file.display().to_string();
    let (file, what) = (pipetel_rows::escape_controls(&file), pipetel_rows::escape_controls(what));
    let _ = writeln!(notes, "pipetel rows: {file}: line {line}: {what}, skipped");
}

/// Parses the text of one store file: the rows, in order, with notes for skipped lines. With
/// `partial_ok`, a last line without its newline is not noted (a follower waits for the rest).
pub(crate) fn parse_text(text: &str, file: &Path, first_line: usize, notes: &mut dyn Write) -> Vec<Row> {
    let mut rows = Vec::new();
    for line in pipetel_rows::lines(text) {
        match line {
            pipetel_rows::Line::Whole(n, l) => match Row::parse(l) {
                Ok(row) => rows.push(row),
                Err(_) if l.trim().is_empty() => {}
                Err(e) => note(notes, file, first_line + n - 1, &e),
            },
            pipetel_rows::Line::Torn(n, _) => note(
                notes,
                file,
                first_line + n - 1,
                "torn last line (no newline: the writer was killed mid-write or is still writing)",
            ),
        }
    }
    rows
}

/// Every row of the store `path`: every file of it (all the processes' rows, its rotated files
/// first), read under the store's lock so a rotation meanwhile neither hides nor repeats a file;
/// notes for skipped lines.
///
/// # Errors
/// No file of the store exists, or one cannot be read (the message names it).
pub(crate) fn read_store(path: &Path, notes: &mut dyn Write) -> io::Result<Vec<Row>> {
    let mut rows = Vec::new();
    for f in pipetel_rows::read_store(path)? {
        rows.extend(parse_text(&String::from_utf8_lossy(&f.bytes), &f.path, 1, notes));
    }
    Ok(rows)
}

/// The store to read: the given file, else `PIPETEL_ROWS_FILE`, else the default store of the
/// service, else the only store in the directory.
pub(crate) fn store_path(a: &RowsArgs) -> io::Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn torn_and_malformed_lines_are_noted_with_their_numbers() {
        let text =
            "{\"event\":\"pipeline.stage\",\"pipeline.stage.name\":\"a\"}\nnot json\n[1]\n{\"event\":\"pipeline.wor";
        let mut notes = Vec::new();
        let rows = parse_text(text, Path::new("s.jsonl"), 1, &mut notes);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].stage(), "a");
        let notes = String::from_utf8(notes).expect("utf8");
        assert!(notes.contains("s.jsonl: line 2: not valid JSON"), "{notes}");
        assert!(notes.contains("s.jsonl: line 3: not a row"), "{notes}");
        assert!(notes.contains("s.jsonl: line 4: torn last line"), "{notes}");
    }

    #[test]
    fn namespace_filter_matches_the_stream_or_its_prefix() {
        let row = Row::parse("{\"event\":\"zephyr.worker\",\"pipeline.shard.index\":2}").expect("row");
        let f = |ns: &str| Filters { namespace: Some(ns.into()), ..Filters::default() }.matches(&row);
        assert!(f("zephyr") && f("zephyr.worker"));
        assert!(!f("zeph") && !f("zephyr.stage") && !f("pipeline"));
        assert!(Filters { shard: Some(2), ..Filters::default() }.matches(&row));
        assert!(!Filters { shard: Some(1), ..Filters::default() }.matches(&row));
    }
}
