//! Appending to a store from many processes at once.
//!
//! Every process appends whole lines with one `write` on a file opened for appending, so lines
//! of different processes never interleave. Rotation is the one step that must not run in two
//! processes at once (each renaming files the other just renamed loses them), so a lock file
//! beside the store serialises it: a writer holds the lock shared while it checks that it still
//! has the current file and appends, and exclusively while it rotates. Whoever takes the lock
//! exclusively checks the file's real size again and rotates only when it is still over the
//! limit; everyone else finds the new file at their next append. No line is ever written to a
//! file after it was rotated away, which is what lets readers take the store whole.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::dir::{self, FileId, Policy, StoreDir};
use crate::paths;

/// Default size at which a store's file rotates: 64 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Default number of rotated files kept besides the current one.
pub const DEFAULT_KEEP: u32 = 3;

/// When a store's file rotates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// Size past which the file rotates before the next line (0: never rotates).
    pub max_bytes: u64,
    /// Rotated files kept besides the current one (0: the full file is removed).
    pub keep: u32,
}

impl Default for Rotation {
    fn default() -> Self {
        Rotation { max_bytes: DEFAULT_MAX_BYTES, keep: DEFAULT_KEEP }
    }
}

/// Appends whole lines to a store that other processes may append to and rotate too.
#[derive(Debug)]
pub struct StoreWriter {
    dir: StoreDir,
    name: OsString,
    lock_name: OsString,
    path: PathBuf,
    lock: File,
    file: File,
    id: FileId,
    /// The file does not end in a newline (a torn line): the next write starts a new line.
    torn: bool,
    rotation: Rotation,
    /// The process that opened the files: a forked child opens its own (a lock shared with the
    /// parent through an inherited descriptor would not keep the two apart).
    pid: u32,
}

impl StoreWriter {
    /// Opens the default store `path` for appending: its directory is private (created 0700 with
    /// its parents, refused when it is a symbolic link, belongs to another user or is writable by
    /// every user), its files are created 0600 and never followed through a symbolic link.
    ///
    /// # Errors
    /// The directory is refused or cannot be created, or a file cannot be created or opened; the
    /// message names the culprit.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        Self::open_with(path, rotation, Policy::Private)
    }

    /// Opens the store `path` for appending, creating the file (0600) but not its directory (for
    /// a file the user named: a missing directory is more likely a typo than a wish, and the
    /// directory is the user's choice, so it is not checked). The file is never followed through
    /// a symbolic link.
    ///
    /// # Errors
    /// The directory does not exist, or the file cannot be created or opened.
    pub fn open_file(path: &Path, rotation: Rotation) -> io::Result<Self> {
        Self::open_with(path, rotation, Policy::Named)
    }

    fn open_with(path: &Path, rotation: Rotation, policy: Policy) -> io::Result<Self> {
        let (dir_path, name) = paths::split(path)?;
        let dir = StoreDir::open(&dir_path, policy)?;
        let lock_name = paths::lock_file(Path::new(&name)).into_os_string();
        let lock = dir.open_append(&lock_name)?;
        let (file, id, torn) = open_current(&dir, &name)?;
        let path = dir.join(&name);
        Ok(StoreWriter { dir, name, lock_name, path, lock, file, id, torn, rotation, pid: std::process::id() })
    }

    /// The store's current file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (without its newline) with one `write` call, rotating first when the
    /// line would take the file past its size limit.
    ///
    /// # Errors
    /// The lock or the files failed, or the write wrote only part of the line (disk full); the
    /// next line then starts on a new line, so one torn line never spoils the next.
    pub fn append(&mut self, line: &str) -> io::Result<()> {
        if self.pid != std::process::id() {
            self.lock = self.dir.open_append(&self.lock_name)?;
            self.reopen()?;
            self.pid = std::process::id();
        }
        dir::lock(&self.lock, false).map_err(|e| dir::at(&self.dir.join(&self.lock_name), &e, e.kind()))?;
        let result = self.append_locked(line);
        let unlocked = dir::unlock(&self.lock);
        result.and(unlocked)
    }

    /// [`append`](Self::append) with the lock held shared.
    fn append_locked(&mut self, line: &str) -> io::Result<()> {
        self.follow_current()?;
        let len = line.len() as u64 + 1 + u64::from(self.torn);
        if self.over_limit(len)? {
            dir::lock(&self.lock, true).map_err(|e| dir::at(&self.dir.join(&self.lock_name), &e, e.kind()))?;
            // Another process may have rotated between the two locks: look again.
            self.follow_current()?;
            if self.over_limit(len)? {
                self.rotate()?;
            }
        }
        let mut buf = String::with_capacity(line.len() + 2);
        if self.torn {
            buf.push('\n');
        }
        buf.push_str(line);
        buf.push('\n');
        match self.file.write(buf.as_bytes()) {
            Ok(n) if n == buf.len() => {
                self.torn = false;
                Ok(())
            }
            Ok(n) => {
                self.torn = true;
                Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    format!("{}: wrote {n} of {} bytes", self.path.display(), buf.len()),
                ))
            }
            Err(e) => Err(dir::at(&self.path, &e, e.kind())),
        }
    }

    /// Whether `len` more bytes would take the current file past the limit (its real size:
    /// other processes append to it too).
    fn over_limit(&self, len: u64) -> io::Result<bool> {
        if self.rotation.max_bytes == 0 {
            return Ok(false);
        }
        let size = self.file.metadata().map_err(|e| dir::at(&self.path, &e, e.kind()))?.len();
        Ok(size > 0 && size + len > self.rotation.max_bytes)
    }

    /// Reopens the store's file when the name now belongs to another one (another process
    /// rotated it) or to none.
    fn follow_current(&mut self) -> io::Result<()> {
        if self.dir.id_of(&self.name)? != Some(self.id) {
            self.reopen()?;
        }
        Ok(())
    }

    fn reopen(&mut self) -> io::Result<()> {
        let (file, id, torn) = open_current(&self.dir, &self.name)?;
        self.file = file;
        self.id = id;
        // A torn line of ours stays isolated in the file it is in; a new file is judged afresh.
        self.torn = torn;
        Ok(())
    }

    /// Shifts the rotated files up by one (dropping those past the kept count), makes the
    /// current file the newest rotated one and starts a new one. Runs with the lock exclusive.
    fn rotate(&mut self) -> io::Result<()> {
        let keep = self.rotation.keep;
        if keep == 0 {
            self.dir.remove(&self.name)?;
        } else {
            let mut numbers: Vec<u32> =
                self.dir.entries()?.iter().filter_map(|e| paths::rotation_number(&self.name, e)).collect();
            // From the highest down, so no rename replaces a file not yet moved.
            numbers.sort_unstable_by(|a, b| b.cmp(a));
            for n in numbers {
                let from = numbered(&self.name, n);
                if n >= keep {
                    self.dir.remove(&from)?;
                } else {
                    self.dir.rename(&from, &numbered(&self.name, n + 1))?;
                }
            }
            self.dir.rename(&self.name, &numbered(&self.name, 1))?;
        }
        self.reopen()
    }
}

fn numbered(name: &OsStr, n: u32) -> OsString {
    paths::rotated(Path::new(name), n).into_os_string()
}

/// Opens (creating) the store's current file: the file, its identity, and whether its last
/// line is torn.
fn open_current(dir: &StoreDir, name: &OsStr) -> io::Result<(File, FileId, bool)> {
    let file = dir.open_append(name)?;
    let path = || dir.join(name);
    let id = dir::file_id(&file).map_err(|e| dir::at(&path(), &e, e.kind()))?;
    let size = file.metadata().map_err(|e| dir::at(&path(), &e, e.kind()))?.len();
    let torn = size > 0 && last_byte(&file, size).map_err(|e| dir::at(&path(), &e, e.kind()))? != b'\n';
    Ok((file, id, torn))
}

fn last_byte(file: &File, size: u64) -> io::Result<u8> {
    let mut last = [0u8; 1];
    #[cfg(unix)]
    std::os::unix::fs::FileExt::read_exact_at(file, &mut last, size - 1)?;
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(size - 1))?;
        f.read_exact(&mut last)?;
    }
    Ok(last[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{lines, read_store, store_files, Line};

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pipetel-rows-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// The store `s.jsonl` in the new directory `temp(name)`, with its files written: `(0,
    /// text)` the current file, `(n, text)` the `n`th rotated one. Returns the directory and
    /// the store.
    fn seeded(name: &str, files: &[(u32, &str)]) -> (PathBuf, PathBuf) {
        let dir = temp(name);
        let path = dir.join("s.jsonl");
        std::fs::create_dir_all(&dir).expect("dir");
        for &(n, text) in files {
            let file = if n == 0 { path.clone() } else { crate::rotated(&path, n) };
            std::fs::write(file, text).expect("write");
        }
        (dir, path)
    }

    fn text(path: &Path) -> String {
        read_store(path).expect("read").iter().map(|f| String::from_utf8_lossy(&f.bytes).into_owned()).collect()
    }

    #[test]
    fn rotation_keeps_the_newest_files_and_every_line_whole() {
        let dir = temp("rotate");
        let path = dir.join("s.jsonl");
        let mut w = StoreWriter::open(&path, Rotation { max_bytes: 40, keep: 2 }).expect("open");
        // 9 bytes a line: 4 lines a file; 13 lines fill five files, of which three are kept.
        for i in 0..13 {
            w.append(&format!("{{\"n\":{i:02}}}")).expect("append");
        }
        let files = store_files(&path);
        assert_eq!(files, vec![crate::rotated(&path, 2), crate::rotated(&path, 1), path.clone()]);
        let all: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).expect("read")).collect();
        assert_eq!(all.concat(), (4..13).map(|i| format!("{{\"n\":{i:02}}}\n")).collect::<String>());
        assert!(all.iter().all(|t| t.len() <= 40));
        assert_eq!(text(&path), all.concat());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_gap_left_by_a_cut_short_rotation_loses_nothing_and_a_smaller_keep_applies() {
        // A rotation killed after moving .1 to .3 but before moving the current file: .2 is missing.
        let (dir, path) =
            seeded("gap", &[(4, "{\"n\":1}\n"), (3, "{\"n\":2}\n"), (1, "{\"n\":3}\n"), (0, "{\"n\":4}\n")]);
        assert_eq!(text(&path), "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n{\"n\":4}\n", "every file read, oldest first");
        let mut w = StoreWriter::open(&path, Rotation { max_bytes: 10, keep: 3 }).expect("open");
        w.append("{\"n\":5}").expect("append");
        // .4 and .3 were past the kept count; .1 and the current file moved up.
        assert_eq!(text(&path), "{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n");
        assert_eq!(store_files(&path), vec![crate::rotated(&path, 2), crate::rotated(&path, 1), path.clone()]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_torn_last_line_is_isolated_by_the_next_writer() {
        let (dir, path) = seeded("torn", &[(0, "{\"a\":1}\n{\"b\":")]);
        let mut w = StoreWriter::open(&path, Rotation::default()).expect("open");
        w.append("{\"c\":3}").expect("append");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(
            lines(&text),
            vec![Line::Whole(1, "{\"a\":1}"), Line::Whole(2, "{\"b\":"), Line::Whole(3, "{\"c\":3}")]
        );
        assert_eq!(lines("x\ny"), vec![Line::Whole(1, "x"), Line::Torn(2, "y")]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_rotated_by_another_writer_is_left_to_it() {
        let dir = temp("two");
        let path = dir.join("s.jsonl");
        let rotation = Rotation { max_bytes: 20, keep: 100 };
        let mut a = StoreWriter::open(&path, rotation).expect("open");
        let mut b = StoreWriter::open(&path, rotation).expect("open");
        // Both fill the file; whichever finds it full rotates it once, the other follows.
        for i in 0..20 {
            a.append(&format!("{{\"a\":{i:02}}}")).expect("append");
            b.append(&format!("{{\"b\":{i:02}}}")).expect("append");
        }
        let all = text(&path);
        let expected: String = (0..20).map(|i| format!("{{\"a\":{i:02}}}\n{{\"b\":{i:02}}}\n")).collect();
        assert_eq!(all, expected);
        let files = store_files(&path);
        assert_eq!(files.len(), 20, "two 10-byte lines a file: {files:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_unwritable_path_is_an_error_naming_it() {
        // A file where a directory should be.
        let (dir, blocker) = seeded("bad", &[(0, "")]);
        let e =
            StoreWriter::open(&blocker.join("sub").join("s.jsonl"), Rotation::default()).expect_err("a file is no dir");
        assert!(e.to_string().contains(&blocker.display().to_string()), "{e}");
        let e = StoreWriter::open_file(&dir.join("missing").join("s.jsonl"), Rotation::default()).expect_err("no dir");
        assert!(e.to_string().contains("missing"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
