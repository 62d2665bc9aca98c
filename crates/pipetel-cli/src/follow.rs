//! `--follow`: the store's rows so far, then each row as it is appended, by any process, across
//! rotation (the current file renamed to `<file>.1` and a new one started, perhaps several times
//! between two polls) and truncation.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pipetel_rows::{FileId, Snapshot};

use crate::args::{Mode, RowsArgs};
use crate::read::{self, Row};
use crate::show;

/// How often the file is polled for new rows.
const POLL: Duration = Duration::from_millis(200);

/// The current file being followed.
struct Tail {
    path: PathBuf,
    file: Option<File>,
    /// The identity of `file`, else of the newest rotated file read (what a rotation moves on
    /// from), else `None` (nothing read yet).
    id: Option<FileId>,
    offset: u64,
    /// Bytes after the last newline: a line still being written.
    pending: Vec<u8>,
    /// Lines of this file already handed on.
    lines: usize,
}

impl Tail {
    fn new(path: &Path, current: Option<(File, FileId)>, newest_read: Option<FileId>) -> Tail {
        let (file, id) = match current {
            Some((f, id)) => (Some(f), Some(id)),
            None => (None, newest_read),
        };
        Tail { path: path.to_path_buf(), file, id, offset: 0, pending: Vec::new(), lines: 0 }
    }

    /// The complete lines appended since the last call, parsed.
    fn read_new(&mut self, notes: &mut dyn Write) -> io::Result<Vec<Row>> {
        let Some(file) = self.file.as_mut() else { return Ok(Vec::new()) };
        file.seek(SeekFrom::Start(self.offset))?;
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

    /// The path now names another file than the one followed (rotated, or created).
    fn replaced(&self) -> bool {
        match pipetel_rows::path_id(&self.path) {
            Ok(Some(id)) => self.file.is_none() || Some(id) != self.id,
            _ => false,
        }
    }

    /// The followed file shrank (truncated in place).
    fn truncated(&self) -> bool {
        self.file.as_ref().and_then(|f| f.metadata().ok()).is_some_and(|m| m.len() < self.offset)
    }
}

/// The rotated files newer than `after` and the current file, or nothing while the store's
/// directory does not exist yet.
fn snapshot(path: &Path, after: Option<FileId>) -> io::Result<Snapshot> {
    match pipetel_rows::read_since(path, after) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Snapshot { rotated: Vec::new(), current: None }),
        r => r,
    }
}

/// A store read as it grows: the rows so far, then, at each [`Follower::poll`], the rows
/// appended since, across rotation and truncation. What `--follow` and `pipetel top` read a
/// local store with: each poll reads only the bytes added since the last one.
pub(crate) struct Follower {
    path: PathBuf,
    tail: Tail,
}

impl Follower {
    /// Opens the store `path`: the follower, and the rows of its rotated files (complete, read
    /// whole). The current file's rows come with the first [`Follower::poll`].
    pub(crate) fn open(path: &Path, notes: &mut dyn Write) -> io::Result<(Follower, Vec<Row>)> {
        let (tail, rows) = Self::catch_up(path, None, notes)?;
        Ok((Follower { path: path.to_path_buf(), tail }, rows))
    }

    /// Whether the store's current file exists (yet).
    pub(crate) fn exists(&self) -> bool {
        self.tail.file.is_some()
    }

    /// The rotated files newer than `after`, read whole, and the current file to follow.
    fn catch_up(path: &Path, after: Option<FileId>, notes: &mut dyn Write) -> io::Result<(Tail, Vec<Row>)> {
        let snap = snapshot(path, after)?;
        let newest = snap.rotated.last().map(|f| f.id).or(after);
        let mut rows = Vec::new();
        for f in &snap.rotated {
            rows.extend(read::parse_text(&String::from_utf8_lossy(&f.bytes), &f.path, 1, notes));
        }
        Ok((Tail::new(path, snap.current, newest), rows))
    }

    /// The rows appended since the last poll, in store order.
    pub(crate) fn poll(&mut self, notes: &mut dyn Write) -> io::Result<Vec<Row>> {
        let mut rows = self.tail.read_new(notes)?;
        if self.tail.replaced() {
            // Drain the old file once more: rows written to it before the rotation still count.
            // No process writes to it after (rotation waits for every writer to be out of it).
            rows.extend(self.tail.read_new(notes)?);
            if !self.tail.pending.is_empty() {
                read::note(notes, &self.tail.path, self.tail.lines + 1, "torn last line of the rotated file");
            }
            // The files rotated since, read whole, then the new current file.
            let (tail, rotated) = Self::catch_up(&self.path, self.tail.id, notes)?;
            rows.extend(rotated);
            self.tail = tail;
        } else if self.tail.truncated() {
            let shown = show::safe(&self.path.display().to_string());
            let _ = writeln!(notes, "pipetel: {shown} was truncated; reading it from the start");
            self.tail.offset = 0;
            self.tail.pending.clear();
            self.tail.lines = 0;
        }
        Ok(rows)
    }
}

/// Prints the store's matching rows, then follows it until interrupted.
pub(crate) fn follow(path: &Path, a: &RowsArgs, out: &mut dyn Write) -> io::Result<()> {
    let mut notes = io::stderr();
    let print = |rows: Vec<Row>, out: &mut dyn Write| -> io::Result<()> {
        for r in rows.iter().filter(|r| a.filters.matches(r)) {
            match a.mode {
                Mode::Json => writeln!(out, "{}", pipetel_rows::escape_json_controls(&r.raw))?,
                _ => writeln!(out, "{}", show::row_line(r))?,
            }
        }
        out.flush()
    };
    let (mut follower, rows) = Follower::open(path, &mut notes)?;
    print(rows, out)?;
    if !follower.exists() {
        let _ = writeln!(
            notes,
            "pipetel rows: {} does not exist yet; waiting for rows",
            show::safe(&path.display().to_string())
        );
    }
    loop {
        let rows = follower.poll(&mut notes)?;
        print(rows, out)?;
        std::thread::sleep(POLL);
    }
}
