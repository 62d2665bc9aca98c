//! `--follow`: the store's rows so far, then each row as it is appended, across rotation (the
//! current file renamed to `<file>.1` and a new one started) and truncation.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::args::{Mode, RowsArgs};
use crate::read::{self, Row};
use crate::show;

/// How often the file is polled for new rows.
const POLL: Duration = Duration::from_millis(200);

/// The identity of a file, to see that the path now names another one (rotation).
fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        Some((meta.dev(), meta.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        None
    }
}

/// The current file being followed.
struct Tail {
    path: PathBuf,
    file: Option<File>,
    id: Option<(u64, u64)>,
    offset: u64,
    /// Bytes after the last newline: a line still being written.
    pending: Vec<u8>,
    /// Lines of this file already handed on.
    lines: usize,
}

impl Tail {
    fn open(path: &Path) -> Tail {
        let file = File::open(path).ok();
        let id = file.as_ref().and_then(|f| f.metadata().ok()).and_then(|m| identity(&m));
        Tail { path: path.to_path_buf(), file, id, offset: 0, pending: Vec::new(), lines: 0 }
    }

    /// The complete lines appended since the last call, parsed.
    fn read_new(&mut self, notes: &mut dyn Write) -> io::Result<Vec<Row>> {
        let Some(file) = self.file.as_mut() else { return Ok(Vec::new()) };
        let mut buf = Vec::new();
        file.read_to_end(&mut buf)?;
        self.offset += buf.len() as u64;
        self.pending.extend_from_slice(&buf);
        let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') else { return Ok(Vec::new()) };
        let complete: Vec<u8> = self.pending.drain(..=end).collect();
        let text = String::from_utf8_lossy(&complete);
        let rows = read::parse_text(&text, &self.path, self.lines + 1, notes);
        self.lines += text.matches('\n').count();
        Ok(rows)
    }

    /// The path now names another file (rotated) or this one shrank (truncated).
    fn replaced(&self) -> bool {
        match (std::fs::metadata(&self.path).ok(), self.file.is_some()) {
            (None, _) => false,
            (Some(_), false) => true,
            (Some(m), true) => identity(&m) != self.id || m.len() < self.offset,
        }
    }
}

/// Prints the store's matching rows, then follows it until interrupted.
pub(crate) fn follow(path: &Path, a: &RowsArgs, out: &mut dyn Write) -> io::Result<()> {
    let mut notes = io::stderr();
    let print = |rows: Vec<Row>, out: &mut dyn Write| -> io::Result<()> {
        for r in rows.iter().filter(|r| a.filters.matches(r)) {
            match a.mode {
                Mode::Json => writeln!(out, "{}", r.raw)?,
                _ => writeln!(out, "{}", show::row_line(r))?,
            }
        }
        out.flush()
    };
    // The rotated files are complete: read them whole.
    for f in pipetel_rows::store_files(path).iter().filter(|f| f.as_path() != path) {
        let bytes = std::fs::read(f)?;
        print(read::parse_text(&String::from_utf8_lossy(&bytes), f, 1, &mut notes), out)?;
    }
    let mut tail = Tail::open(path);
    if tail.file.is_none() {
        let _ = writeln!(notes, "pipetel rows: {} does not exist yet; waiting for rows", path.display());
    }
    loop {
        let rows = tail.read_new(&mut notes)?;
        print(rows, out)?;
        if tail.replaced() {
            // Drain the old file once more: rows written to it before the rotation still count.
            let rows = tail.read_new(&mut notes)?;
            print(rows, out)?;
            if !tail.pending.is_empty() {
                read::note(&mut notes, &tail.path, tail.lines + 1, "torn last line of the rotated file");
            }
            tail = Tail::open(path);
        } else if let Some(f) = tail.file.as_mut() {
            f.seek(SeekFrom::Start(tail.offset))?;
        }
        std::thread::sleep(POLL);
    }
}
