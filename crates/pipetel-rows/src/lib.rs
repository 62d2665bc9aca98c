//! The local rows store: where pipetel appends its stage and worker rows when nothing else is
//! configured, and where the `pipetel rows` tool reads them. Both depend on this crate (std only)
//! so the library and the tool agree on the path, the rotation and the line format without the
//! tool pulling in the OpenTelemetry stack.
//!
//! # Where
//! The default store of a service is `<dir>/<service>.jsonl` ([`default_file`]), where `<dir>` is
//! the first of:
//! 1. `$PIPETEL_ROWS_DIR` ([`ROWS_DIR_VAR`]),
//! 2. `$XDG_STATE_HOME/pipetel/rows`,
//! 3. `$HOME/.local/state/pipetel/rows`,
//! 4. `<temp dir>/pipetel/rows` (no home directory).
//!
//! The service name is made file-name safe ([`file_stem`]).
//!
//! # Format and rotation
//! One JSON object per line. Each line is appended with a single `write` call on a file opened
//! for appending, so a process killed mid-run (SIGKILL) leaves at worst one torn last line;
//! readers skip it. When the next line would take the file past its size limit, the file is
//! rotated: `<file>.1` becomes `<file>.2` and so on up to the kept count, `<file>` becomes
//! `<file>.1`, and a new `<file>` starts. [`store_files`] lists a store's files oldest first.

use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

/// The variable that names the directory of default stores.
pub const ROWS_DIR_VAR: &str = "PIPETEL_ROWS_DIR";

/// The extension of a store's current file.
pub const EXTENSION: &str = "jsonl";

/// Default size at which a store's file rotates: 64 MiB.
pub const DEFAULT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Default number of rotated files kept besides the current one.
pub const DEFAULT_KEEP: u32 = 3;

/// The directory of default stores, from the process environment (see the crate docs).
pub fn default_dir() -> PathBuf {
    default_dir_from(|name| std::env::var_os(name))
}

/// The directory of default stores, reading variables through `lookup` (see the crate docs).
pub fn default_dir_from(lookup: impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(ROWS_DIR_VAR) {
        return dir;
    }
    if let Some(state) = set("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return state.join("pipetel").join("rows");
    }
    if let Some(home) = set("HOME") {
        return home.join(".local").join("state").join("pipetel").join("rows");
    }
    std::env::temp_dir().join("pipetel").join("rows")
}

/// The service name made safe as a file name: characters outside `[A-Za-z0-9._-]` become `_`,
/// and an empty or dot-only name becomes `unknown_service`.
pub fn file_stem(service: &str) -> String {
    let stem: String = service
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .collect();
    if stem.chars().all(|c| c == '.') {
        "unknown_service".to_string()
    } else {
        stem
    }
}

/// The default store of `service` in `dir`: `<dir>/<file_stem(service)>.jsonl`.
pub fn default_file(dir: &Path, service: &str) -> PathBuf {
    dir.join(format!("{}.{EXTENSION}", file_stem(service)))
}

/// The `n`-th rotated file of the store `path` (`<path>.<n>`; 1 is the newest).
pub fn rotated(path: &Path, n: u32) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{n}"));
    PathBuf::from(s)
}

/// The existing files of the store `path`, oldest first: the rotated ones from the highest
/// number down, then the current file.
pub fn store_files(path: &Path) -> Vec<PathBuf> {
    let mut rotated_files = Vec::new();
    let mut n = 1;
    loop {
        let p = rotated(path, n);
        if !p.exists() {
            break;
        }
        rotated_files.push(p);
        n += 1;
    }
    rotated_files.reverse();
    if path.exists() {
        rotated_files.push(path.to_path_buf());
    }
    rotated_files
}

/// The stores in `dir`: its `*.jsonl` files, sorted.
pub fn stores_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == EXTENSION))
        .collect();
    out.sort();
    out
}

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

/// Appends whole lines to a store, rotating it by size.
#[derive(Debug)]
pub struct StoreWriter {
    path: PathBuf,
    file: File,
    size: u64,
    /// The file does not end in a newline (a torn line): the next write starts a new line.
    torn: bool,
    rotation: Rotation,
}

impl StoreWriter {
    /// Opens the store `path` for appending, creating it and its directory as needed.
    ///
    /// # Errors
    /// The directory or the file cannot be created or opened.
    pub fn open(path: &Path, rotation: Rotation) -> io::Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        Self::open_file(path, rotation)
    }

    /// Opens the store `path` for appending, creating the file but not its directory (for a
    /// file the user named: a missing directory is more likely a typo than a wish).
    ///
    /// # Errors
    /// The file cannot be created or opened.
    pub fn open_file(path: &Path, rotation: Rotation) -> io::Result<Self> {
        let (file, size, torn) = open_append(path)?;
        Ok(StoreWriter { path: path.to_path_buf(), file, size, torn, rotation })
    }

    /// The store's current file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (without its newline) with one `write` call, rotating first when the
    /// line would take the file past its size limit.
    ///
    /// # Errors
    /// The write failed or wrote only part of the line (disk full); the next line then starts
    /// on a new line, so one torn line never spoils the next.
    pub fn append(&mut self, line: &str) -> io::Result<()> {
        let mut buf = String::with_capacity(line.len() + 2);
        if self.torn {
            buf.push('\n');
        }
        buf.push_str(line);
        buf.push('\n');
        let len = buf.len() as u64;
        if self.rotation.max_bytes > 0 && self.size > 0 && self.size + len > self.rotation.max_bytes {
            self.rotate()?;
            if self.torn {
                buf.remove(0);
            }
        }
        match self.file.write(buf.as_bytes()) {
            Ok(n) if n == buf.len() => {
                self.size += n as u64;
                self.torn = false;
                Ok(())
            }
            Ok(n) => {
                self.size += n as u64;
                self.torn = true;
                Err(io::Error::new(io::ErrorKind::WriteZero, format!("wrote {n} of {} bytes", buf.len())))
            }
            Err(e) => Err(e),
        }
    }

    fn rotate(&mut self) -> io::Result<()> {
        let keep = self.rotation.keep;
        if keep == 0 {
            remove_if_present(&self.path)?;
        } else {
            remove_if_present(&rotated(&self.path, keep))?;
            for n in (1..keep).rev() {
                rename_if_present(&rotated(&self.path, n), &rotated(&self.path, n + 1))?;
            }
            rename_if_present(&self.path, &rotated(&self.path, 1))?;
        }
        let (file, size, torn) = open_append(&self.path)?;
        self.file = file;
        self.size = size;
        self.torn = torn;
        Ok(())
    }
}

fn open_append(path: &Path) -> io::Result<(File, u64, bool)> {
    let mut file = OpenOptions::new().create(true).append(true).read(true).open(path)?;
    let size = file.metadata()?.len();
    let torn = if size > 0 {
        let mut last = [0u8; 1];
        file.seek(SeekFrom::End(-1))?;
        file.read_exact(&mut last)?;
        last[0] != b'\n'
    } else {
        false
    };
    Ok((file, size, torn))
}

fn remove_if_present(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_present(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// One line of a store as a reader sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line<'a> {
    /// A complete line (its newline seen), 1-based line number.
    Whole(usize, &'a str),
    /// The last line of the file, without its newline: torn by a kill mid-write, or still being
    /// written.
    Torn(usize, &'a str),
}

/// Splits a store file's text into lines, the last one marked torn when it has no newline.
pub fn lines(text: &str) -> Vec<Line<'_>> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut number = 0;
    while !rest.is_empty() {
        number += 1;
        match rest.find('\n') {
            Some(i) => {
                out.push(Line::Whole(number, &rest[..i]));
                rest = &rest[i + 1..];
            }
            None => {
                out.push(Line::Torn(number, rest));
                rest = "";
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pipetel-rows-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_default_dir_follows_the_documented_order() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(*v))
        };
        assert_eq!(default_dir_from(env(&[(ROWS_DIR_VAR, "/r"), ("HOME", "/h")])), PathBuf::from("/r"));
        assert_eq!(
            default_dir_from(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            PathBuf::from("/s/pipetel/rows")
        );
        // A relative XDG_STATE_HOME is invalid by the spec and ignored.
        assert_eq!(
            default_dir_from(env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])),
            PathBuf::from("/h/.local/state/pipetel/rows")
        );
        assert_eq!(default_dir_from(env(&[])), std::env::temp_dir().join("pipetel/rows"));
        assert_eq!(default_file(Path::new("/d"), "my svc/1"), PathBuf::from("/d/my_svc_1.jsonl"));
        assert_eq!(file_stem(".."), "unknown_service");
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
        assert_eq!(files, vec![rotated(&path, 2), rotated(&path, 1), path.clone()]);
        let all: Vec<String> = files.iter().map(|f| std::fs::read_to_string(f).expect("read")).collect();
        assert_eq!(all.concat(), (4..13).map(|i| format!("{{\"n\":{i:02}}}\n")).collect::<String>());
        assert!(all.iter().all(|t| t.len() <= 40));
    }

    #[test]
    fn a_torn_last_line_is_isolated_by_the_next_writer() {
        let dir = temp("torn");
        let path = dir.join("s.jsonl");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(&path, "{\"a\":1}\n{\"b\":").expect("write");
        let mut w = StoreWriter::open(&path, Rotation::default()).expect("open");
        w.append("{\"c\":3}").expect("append");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(
            lines(&text),
            vec![Line::Whole(1, "{\"a\":1}"), Line::Whole(2, "{\"b\":"), Line::Whole(3, "{\"c\":3}")]
        );
        assert_eq!(lines("x\ny"), vec![Line::Whole(1, "x"), Line::Torn(2, "y")]);
    }

    #[test]
    fn an_unwritable_path_is_an_error_not_a_panic() {
        let dir = temp("bad");
        std::fs::create_dir_all(&dir).expect("dir");
        let blocker = dir.join("file");
        std::fs::write(&blocker, "").expect("write");
        assert!(StoreWriter::open(&blocker.join("sub").join("s.jsonl"), Rotation::default()).is_err());
    }
}
