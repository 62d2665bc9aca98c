//! A store's directory, opened once and then used only through its descriptor, so that renaming
//! or replacing the directory path afterwards cannot redirect a store's files; its files are
//! opened without following symbolic links.
//!
//! The default store's directory is private: created 0700 (parents too), refused when it is a
//! symbolic link, belongs to another user or is writable by every user; its files are created
//! 0600, and an existing one must be a regular file of this user (a broader mode left by an older
//! version is narrowed to 0600). A rows file the user named lives in a directory the user chose:
//! that directory must exist and is not checked; the file itself is still never a symbolic link,
//! and is created 0600.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// How a store's directory is trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// The default store's directory: created 0700, checked, files owned by this user.
    Private,
    /// The directory of a rows file the user named: must exist, not checked.
    Named,
}

/// The identity of a file (device and inode), to tell that a path now names another file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

/// A store's directory, held open.
#[derive(Debug)]
pub(crate) struct StoreDir {
    path: PathBuf,
    #[cfg_attr(not(unix), allow(dead_code))] // elsewhere nothing is checked
    policy: Policy,
    #[cfg(unix)]
    fd: File,
}

/// `error` with `path` in front, so the message names the culprit.
pub(crate) fn at(path: &Path, error: impl std::fmt::Display, kind: io::ErrorKind) -> io::Error {
    io::Error::new(kind, format!("{}: {error}", path.display()))
}

fn named_error(path: &Path, e: io::Error) -> io::Error {
    at(path, &e, e.kind())
}

impl StoreDir {
    /// The directory `path` under `policy` (see the module docs).
    ///
    /// # Errors
    /// The directory cannot be created or opened, or is refused by the policy; the message names
    /// the directory and why.
    pub(crate) fn open(path: &Path, policy: Policy) -> io::Result<StoreDir> {
        if policy == Policy::Private {
            create_private(path).map_err(|e| named_error(path, e))?;
        }
        imp::open_dir(path, policy)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The path of the entry `name`, for messages and for readers that want it.
    pub(crate) fn join(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// Opens the entry `name` for appending (and reading its last byte), creating it 0600.
    ///
    /// # Errors
    /// It cannot be created or opened, is a symbolic link or not a regular file, or (private
    /// directory) belongs to another user.
    pub(crate) fn open_append(&self, name: &OsStr) -> io::Result<File> {
        imp::open_append(self, name).map_err(|e| named_error(&self.join(name), e))
    }

    /// Opens the entry `name` for reading; `None` when it does not exist.
    ///
    /// # Errors
    /// It cannot be opened, or is a symbolic link or not a regular file.
    pub(crate) fn open_read(&self, name: &OsStr) -> io::Result<Option<File>> {
        match imp::open_read(self, name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            r => r.map(Some).map_err(|e| named_error(&self.join(name), e)),
        }
    }

    /// The identity of the entry `name` (a symbolic link's own); `None` when it does not exist.
    ///
    /// # Errors
    /// It cannot be examined.
    pub(crate) fn id_of(&self, name: &OsStr) -> io::Result<Option<FileId>> {
        match imp::id_of(self, name) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            r => r.map(Some).map_err(|e| named_error(&self.join(name), e)),
        }
    }

    /// Renames the entry `from` to `to` (replacing `to`); a missing `from` is not an error.
    ///
    /// # Errors
    /// The rename failed otherwise.
    pub(crate) fn rename(&self, from: &OsStr, to: &OsStr) -> io::Result<()> {
        match imp::rename(self, from, to) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(named_error(&self.join(from), e)),
            _ => Ok(()),
        }
    }

    /// Removes the entry `name`; a missing one is not an error.
    ///
    /// # Errors
    /// The removal failed otherwise.
    pub(crate) fn remove(&self, name: &OsStr) -> io::Result<()> {
        match imp::remove(self, name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(named_error(&self.join(name), e)),
            _ => Ok(()),
        }
    }

    /// The names of the directory's entries.
    ///
    /// # Errors
    /// The directory cannot be read.
    pub(crate) fn entries(&self) -> io::Result<Vec<OsString>> {
        imp::entries(self).map_err(|e| named_error(&self.path, e))
    }
}

/// The identity of an open file.
///
/// # Errors
/// The file cannot be examined.
pub fn file_id(file: &File) -> io::Result<FileId> {
    imp::file_id(file)
}

/// The identity of the file `path` names (a symbolic link's own); `None` when it does not exist.
///
/// # Errors
/// It cannot be examined.
pub fn path_id(path: &Path) -> io::Result<Option<FileId>> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) => Ok(Some(imp::meta_id(&meta))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Takes the lock of `file` (a store's lock file), shared or exclusive, waiting for it. Taking
/// the other kind while holding one converts it (not atomically: callers re-check after).
pub(crate) fn lock(file: &File, exclusive: bool) -> io::Result<()> {
    imp::lock(file, Some(exclusive))
}

/// Releases the lock of `file`.
pub(crate) fn unlock(file: &File) -> io::Result<()> {
    imp::lock(file, None)
}

/// Creates `path` and its missing parents 0700 (whatever the umask).
fn create_private(path: &Path) -> io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

#[cfg(unix)]
mod imp {
    use std::ffi::{OsStr, OsString};
    use std::fs::File;
    use std::io;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::path::Path;

    use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags, CWD};

    use super::{at, FileId, Policy, StoreDir};

    const FILE_MODE: u32 = 0o600;
    const LOOP: rustix::io::Errno = rustix::io::Errno::LOOP;

    fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    /// Retries a call interrupted by a signal.
    fn retry<T>(mut f: impl FnMut() -> rustix::io::Result<T>) -> io::Result<T> {
        loop {
            match f() {
                Err(rustix::io::Errno::INTR) => continue,
                r => return r.map_err(io::Error::from),
            }
        }
    }

    /// The plain error for a symbolic link met where none is followed (the kernel says "too
    /// many levels of symbolic links").
    fn no_symlink(e: io::Error, what: &str) -> io::Error {
        if e.raw_os_error() == Some(LOOP.raw_os_error()) {
            io::Error::new(io::ErrorKind::InvalidInput, format!("is a symbolic link; a rows store {what} never is one"))
        } else {
            e
        }
    }

    pub(super) fn open_dir(path: &Path, policy: Policy) -> io::Result<StoreDir> {
        let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
        if policy == Policy::Private {
            // The plain message first; the flag then makes the check hold against a swap.
            if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(at(path, no_symlink(LOOP.into(), "directory"), io::ErrorKind::InvalidInput));
            }
            flags |= OFlags::NOFOLLOW;
        }
        let fd = retry(|| rustix::fs::openat(CWD, path, flags, Mode::empty())).map_err(|e| {
            let e = no_symlink(e, "directory");
            at(path, &e, e.kind())
        })?;
        let fd = File::from(fd);
        if policy == Policy::Private {
            let meta = fd.metadata().map_err(|e| at(path, &e, e.kind()))?;
            let me = euid();
            if meta.uid() != me {
                return Err(at(
                    path,
                    format_args!(
                        "the rows directory belongs to uid {}, not to this user (uid {me}); refusing it",
                        meta.uid()
                    ),
                    io::ErrorKind::PermissionDenied,
                ));
            }
            if meta.mode() & 0o002 != 0 {
                return Err(at(
                    path,
                    format_args!(
                        "the rows directory is writable by every user (mode {:o}); refusing it (chmod o-w, or pick \
                         a private directory)",
                        meta.mode() & 0o7777
                    ),
                    io::ErrorKind::PermissionDenied,
                ));
            }
        }
        Ok(StoreDir { path: path.to_path_buf(), policy, fd })
    }

    fn open_at(dir: &StoreDir, name: &OsStr, flags: OFlags) -> io::Result<File> {
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
        let fd = retry(|| rustix::fs::openat(&dir.fd, name, flags, Mode::from_raw_mode(FILE_MODE)))
            .map_err(|e| no_symlink(e, "file"))?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"));
        }
        if dir.policy == Policy::Private && flags.contains(OFlags::CREATE) {
            let me = euid();
            if meta.uid() != me {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!("belongs to uid {}, not to this user (uid {me}); refusing it", meta.uid()),
                ));
            }
            if meta.mode() & 0o077 != 0 {
                // Left readable to others by an older version: rows are private from now on.
                file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))?;
            }
        }
        Ok(file)
    }

    pub(super) fn open_append(dir: &StoreDir, name: &OsStr) -> io::Result<File> {
        open_at(dir, name, OFlags::RDWR | OFlags::APPEND | OFlags::CREATE)
    }

    pub(super) fn open_read(dir: &StoreDir, name: &OsStr) -> io::Result<File> {
        open_at(dir, name, OFlags::RDONLY)
    }

    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    pub(super) fn id_of(dir: &StoreDir, name: &OsStr) -> io::Result<FileId> {
        let st = retry(|| rustix::fs::statat(&dir.fd, name, AtFlags::SYMLINK_NOFOLLOW))?;
        Ok(FileId { dev: st.st_dev as u64, ino: st.st_ino as u64 })
    }

    pub(super) fn rename(dir: &StoreDir, from: &OsStr, to: &OsStr) -> io::Result<()> {
        retry(|| rustix::fs::renameat(&dir.fd, from, &dir.fd, to))
    }

    pub(super) fn remove(dir: &StoreDir, name: &OsStr) -> io::Result<()> {
        retry(|| rustix::fs::unlinkat(&dir.fd, name, AtFlags::empty()))
    }

    pub(super) fn entries(dir: &StoreDir) -> io::Result<Vec<OsString>> {
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&dir.fd)? {
            let name = entry?.file_name().to_bytes().to_vec();
            if name != b"." && name != b".." {
                out.push(OsStr::from_bytes(&name).to_owned());
            }
        }
        Ok(out)
    }

    pub(super) fn file_id(file: &File) -> io::Result<FileId> {
        Ok(meta_id(&file.metadata()?))
    }

    pub(super) fn meta_id(meta: &std::fs::Metadata) -> FileId {
        FileId { dev: meta.dev(), ino: meta.ino() }
    }

    pub(super) fn lock(file: &File, exclusive: Option<bool>) -> io::Result<()> {
        let op = match exclusive {
            Some(true) => FlockOperation::LockExclusive,
            Some(false) => FlockOperation::LockShared,
            None => FlockOperation::Unlock,
        };
        retry(|| rustix::fs::flock(file, op))
    }
}

/// Elsewhere the directory is used by path and nothing is locked: one writing process per store.
#[cfg(not(unix))]
mod imp {
    use std::ffi::{OsStr, OsString};
    use std::fs::{File, OpenOptions};
    use std::io;
    use std::path::Path;

    use super::{FileId, Policy, StoreDir};

    pub(super) fn open_dir(path: &Path, policy: Policy) -> io::Result<StoreDir> {
        if !std::fs::metadata(path)?.is_dir() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("{}: not a directory", path.display())));
        }
        Ok(StoreDir { path: path.to_path_buf(), policy })
    }

    fn regular(file: File) -> io::Result<File> {
        if file.metadata()?.is_file() {
            Ok(file)
        } else {
            Err(io::Error::new(io::ErrorKind::InvalidInput, "not a regular file"))
        }
    }

    pub(super) fn open_append(dir: &StoreDir, name: &OsStr) -> io::Result<File> {
        regular(OpenOptions::new().create(true).append(true).read(true).open(dir.join(name))?)
    }

    pub(super) fn open_read(dir: &StoreDir, name: &OsStr) -> io::Result<File> {
        regular(File::open(dir.join(name))?)
    }

    pub(super) fn id_of(dir: &StoreDir, name: &OsStr) -> io::Result<FileId> {
        Ok(meta_id(&std::fs::symlink_metadata(dir.join(name))?))
    }

    pub(super) fn rename(dir: &StoreDir, from: &OsStr, to: &OsStr) -> io::Result<()> {
        std::fs::rename(dir.join(from), dir.join(to))
    }

    pub(super) fn remove(dir: &StoreDir, name: &OsStr) -> io::Result<()> {
        std::fs::remove_file(dir.join(name))
    }

    pub(super) fn entries(dir: &StoreDir) -> io::Result<Vec<OsString>> {
        std::fs::read_dir(&dir.path)?.map(|e| e.map(|e| e.file_name())).collect()
    }

    pub(super) fn file_id(file: &File) -> io::Result<FileId> {
        Ok(meta_id(&file.metadata()?))
    }

    /// No inode here: the creation time stands in for it.
    pub(super) fn meta_id(meta: &std::fs::Metadata) -> FileId {
        let created = meta.created().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        FileId { dev: 0, ino: created.map_or(0, |d| d.as_nanos() as u64) }
    }

    pub(super) fn lock(_file: &File, _exclusive: Option<bool>) -> io::Result<()> {
        Ok(())
    }
}
