//! Where a store's files are: the default directory, the file of a service, the rotated files
//! and the lock file beside it.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

/// The variable that names the directory of default stores.
pub const ROWS_DIR_VAR: &str = "PIPETEL_ROWS_DIR";

/// The extension of a store's current file.
pub const EXTENSION: &str = "jsonl";

/// The suffix of a store's lock file (`<file>.lock`), which serialises rotation across processes.
pub const LOCK_SUFFIX: &str = "lock";

/// No private directory can hold the default stores: none of the variables that name one is set.
/// The shared temporary directory is never used instead, since another local user could have
/// created the directory there first (or made it a symbolic link) and read or redirect the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoStoreDir;

impl fmt::Display for NoStoreDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no private directory for the rows store: {ROWS_DIR_VAR}, XDG_STATE_HOME (absolute) and HOME are \
             all unset (the shared temporary directory is never used); set {ROWS_DIR_VAR} to keep rows locally"
        )
    }
}

impl std::error::Error for NoStoreDir {}

impl From<NoStoreDir> for io::Error {
    fn from(e: NoStoreDir) -> Self {
        io::Error::new(io::ErrorKind::NotFound, e)
    }
}

/// The directory of default stores, from the process environment (see the crate docs).
///
/// # Errors
/// [`NoStoreDir`] when none of the variables that name a private directory is set.
pub fn default_dir() -> Result<PathBuf, NoStoreDir> {
    default_dir_from(|name| std::env::var_os(name))
}

/// The directory of default stores, reading variables through `lookup` (see the crate docs).
///
/// # Errors
/// [`NoStoreDir`] when none of the variables that name a private directory is set.
pub fn default_dir_from(lookup: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, NoStoreDir> {
    let set = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(ROWS_DIR_VAR) {
        return Ok(dir);
    }
    if let Some(state) = set("XDG_STATE_HOME").filter(|p| p.is_absolute()) {
        return Ok(state.join("pipetel").join("rows"));
    }
    if let Some(home) = set("HOME") {
        return Ok(home.join(".local").join("state").join("pipetel").join("rows"));
    }
    Err(NoStoreDir)
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
    with_suffix(path, &n.to_string())
}

/// The lock file of the store `path` (`<path>.lock`). Writers hold it shared while they append
/// and exclusively while they rotate; readers hold it shared while they read.
pub fn lock_file(path: &Path) -> PathBuf {
    with_suffix(path, LOCK_SUFFIX)
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".");
    s.push(suffix);
    PathBuf::from(s)
}

/// The rotation number of `entry` when it names a rotated file of the store file `name`
/// (`<name>.<n>`, `n` ≥ 1 in decimal without leading zeros).
pub(crate) fn rotation_number(name: &OsStr, entry: &OsStr) -> Option<u32> {
    let rest = entry.as_encoded_bytes().strip_prefix(name.as_encoded_bytes())?.strip_prefix(b".")?;
    if rest.is_empty() || rest[0] == b'0' || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(rest).ok()?.parse().ok()
}

/// The directory and the file name of a store path; `.` for a bare file name.
pub(crate) fn split(path: &Path) -> io::Result<(PathBuf, OsString)> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a file name", path.display())))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_dir_follows_the_documented_order_and_never_the_temp_dir() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(*v))
        };
        assert_eq!(default_dir_from(env(&[(ROWS_DIR_VAR, "/r"), ("HOME", "/h")])), Ok(PathBuf::from("/r")));
        assert_eq!(
            default_dir_from(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])),
            Ok(PathBuf::from("/s/pipetel/rows"))
        );
        // A relative XDG_STATE_HOME is invalid by the spec and ignored.
        assert_eq!(
            default_dir_from(env(&[("XDG_STATE_HOME", "rel"), ("HOME", "/h")])),
            Ok(PathBuf::from("/h/.local/state/pipetel/rows"))
        );
        // Nothing private named: no directory at all, and the error says what to set.
        assert_eq!(default_dir_from(env(&[("XDG_STATE_HOME", "rel"), ("HOME", "")])), Err(NoStoreDir));
        assert!(NoStoreDir.to_string().contains(ROWS_DIR_VAR));
        assert_eq!(default_file(Path::new("/d"), "my svc/1"), PathBuf::from("/d/my_svc_1.jsonl"));
        assert_eq!(file_stem(".."), "unknown_service");
    }

    #[test]
    fn rotated_files_are_recognised_by_their_number_alone() {
        let n = |entry: &str| rotation_number(OsStr::new("s.jsonl"), OsStr::new(entry));
        assert_eq!((n("s.jsonl.1"), n("s.jsonl.250")), (Some(1), Some(250)));
        for not in ["s.jsonl", "s.jsonl.", "s.jsonl.0", "s.jsonl.01", "s.jsonl.lock", "s.jsonl.1x", "t.jsonl.1"] {
            assert_eq!(n(not), None, "{not}");
        }
        assert_eq!(lock_file(Path::new("/d/s.jsonl")), PathBuf::from("/d/s.jsonl.lock"));
        assert_eq!(split(Path::new("s.jsonl")).expect("split"), (PathBuf::from("."), OsString::from("s.jsonl")));
    }
}
