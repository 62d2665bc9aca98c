//! Reading a store whole: every file of it, rotated ones included, taken under the store's lock
//! shared, so that no rotation moves a file between the listing and the reading (which would
//! read one file twice or miss one). Writers keep appending meanwhile; only a rotation waits
//! for the reader.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use crate::dir::{self, FileId, Policy, StoreDir};
use crate::paths;

/// One file of a store, read.
#[derive(Debug, Clone)]
pub struct StoreFile {
    /// Where it is.
    pub path: PathBuf,
    /// Its identity.
    pub id: FileId,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// The files of a store read so far, and its current file held open for following.
#[derive(Debug)]
pub struct Snapshot {
    /// Rotated files, oldest first, read whole.
    pub rotated: Vec<StoreFile>,
    /// The current file, opened but not read, with its identity; `None` when it does not exist.
    pub current: Option<(File, FileId)>,
}

/// A store opened for reading: its directory and its lock, when it has one (a store written by
/// an older version, or a directory this user cannot write, has none).
struct Store {
    dir: StoreDir,
    name: OsString,
    lock: Option<File>,
}

impl Store {
    fn open(path: &Path) -> io::Result<Store> {
        let (dir_path, name) = paths::split(path)?;
        let dir = StoreDir::open(&dir_path, Policy::Named)?;
        let lock = dir.open_read(paths::lock_file(Path::new(&name)).as_os_str())?;
        Ok(Store { dir, name, lock })
    }

    /// Runs `f` with the store's lock held shared.
    fn locked<T>(&self, f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
        if let Some(lock) = &self.lock {
            dir::lock(lock, false).map_err(|e| dir::at(self.dir.path(), &e, e.kind()))?;
        }
        let result = f();
        if let Some(lock) = &self.lock {
            let _ = dir::unlock(lock);
        }
        result
    }

    /// The numbers of the rotated files, highest (oldest) first.
    fn rotated_numbers(&self) -> io::Result<Vec<u32>> {
        let mut numbers: Vec<u32> =
            self.dir.entries()?.iter().filter_map(|e| paths::rotation_number(&self.name, e)).collect();
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        Ok(numbers)
    }

    fn read(&self, name: &OsStr) -> io::Result<Option<StoreFile>> {
        let path = self.dir.join(name);
        let Some(mut file) = self.dir.open_read(name)? else { return Ok(None) };
        let id = dir::file_id(&file).map_err(|e| dir::at(&path, &e, e.kind()))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| dir::at(&path, &e, e.kind()))?;
        Ok(Some(StoreFile { path, id, bytes }))
    }
}

fn numbered(name: &OsStr, n: u32) -> OsString {
    paths::rotated(Path::new(name), n).into_os_string()
}

/// The existing files of the store `path`, oldest first: the rotated ones from the highest
/// number down (gaps, as a rotation cut short by a kill leaves, are skipped over), then the
/// current file. A listing only: a rotation may move them right after; [`read_store`] reads
/// them consistently.
pub fn store_files(path: &Path) -> Vec<PathBuf> {
    let Ok(store) = Store::open(path) else { return Vec::new() };
    let mut files: Vec<PathBuf> =
        store.rotated_numbers().unwrap_or_default().into_iter().map(|n| paths::rotated(path, n)).collect();
    if matches!(store.dir.id_of(&store.name), Ok(Some(_))) {
        files.push(path.to_path_buf());
    }
    files
}

/// Every file of the store `path`, oldest first, read whole under the store's lock: each row
/// every process wrote before the call, once.
///
/// # Errors
/// The directory or a file cannot be opened or read (the message names it), or the store has
/// no file at all.
pub fn read_store(path: &Path) -> io::Result<Vec<StoreFile>> {
    let store = Store::open(path)?;
    let files = store.locked(|| {
        let mut files = Vec::new();
        for n in store.rotated_numbers()? {
            files.extend(store.read(&numbered(&store.name, n))?);
        }
        files.extend(store.read(&store.name)?);
        Ok(files)
    })?;
    if files.is_empty() {
        return Err(io::Error::new(io::ErrorKind::NotFound, format!("no rows store at {}", path.display())));
    }
    Ok(files)
}

/// For following a store: under the store's lock, the rotated files newer than the file `after`
/// (all of them when `after` is `None`, or when it is gone: only the oldest are removed), read
/// whole, and the current file opened. A follower that saw its file replaced calls this after
/// reading that file to its end; rotation happens only with every writer out of the old file,
/// so nothing is missed and nothing read twice.
///
/// # Errors
/// As [`read_store`], except that a store with no file yet is not an error.
pub fn read_since(path: &Path, after: Option<FileId>) -> io::Result<Snapshot> {
    let store = Store::open(path)?;
    store.locked(|| {
        let mut numbers = store.rotated_numbers()?;
        if let Some(after) = after {
            let mut seen = None;
            for (i, n) in numbers.iter().enumerate() {
                if store.dir.id_of(&numbered(&store.name, *n))? == Some(after) {
                    seen = Some(i);
                }
            }
            if let Some(i) = seen {
                numbers.drain(..=i);
            }
        }
        let mut rotated = Vec::new();
        for n in numbers {
            rotated.extend(store.read(&numbered(&store.name, n))?);
        }
        let current = match store.dir.open_read(&store.name)? {
            Some(file) => {
                let id = dir::file_id(&file).map_err(|e| dir::at(path, &e, e.kind()))?;
                Some((file, id))
            }
            None => None,
        };
        Ok(Snapshot { rotated, current })
    })
}

/// The stores in `dir`: its `*.jsonl` files (not symbolic links), sorted.
pub fn stores_in(dir: &Path) -> Vec<PathBuf> {
    files_in(dir, paths::EXTENSION)
}

/// The files of `dir` with extension `extension` (not symbolic links), sorted: [`stores_in`],
/// or the profile stores (`*.stacks`, [`crate::profile::EXTENSION`]).
pub fn files_in(dir: &Path, extension: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == extension))
        .collect();
    out.sort();
    out
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
