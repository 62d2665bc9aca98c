//! The default store is private to its user: its directory is created 0700 and its files 0600;
//! a directory that is a symbolic link, belongs to another user or is writable by everyone is
//! refused; no file of a store is ever followed through a symbolic link, by a writer or a reader.
#![cfg(unix)]

use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use pipetel_rows::{lock_file, read_store, rotated, Rotation, StoreWriter};

/// A scratch directory of the test, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

/// A new scratch directory with the permissions `mode` (`None`: as created).
fn temp(name: &str, mode: Option<u32>) -> Scratch {
    let dir = std::env::temp_dir().join(format!("pipetel-rows-private-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    if let Some(mode) = mode {
        chmod(&dir, mode);
    }
    Scratch(dir)
}

/// The store `svc.jsonl` of `dir`, written with `text` and given the permissions `mode`.
fn store_file(dir: &Path, text: &str, mode: u32) -> PathBuf {
    let store = dir.join("svc.jsonl");
    std::fs::write(&store, text).expect("write");
    chmod(&store, mode);
    store
}

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path).expect("stat").mode() & 0o7777
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn euid() -> u32 {
    // The owner of a file this process just created.
    let probe = std::env::temp_dir().join(format!("pipetel-rows-euid-{}", std::process::id()));
    std::fs::write(&probe, "").expect("probe");
    let uid = std::fs::metadata(&probe).expect("stat").uid();
    let _ = std::fs::remove_file(&probe);
    uid
}

#[test]
fn the_directory_is_created_0700_and_the_files_0600() {
    let base = temp("modes", None);
    let dir = base.join("state").join("pipetel").join("rows");
    let store = dir.join("svc.jsonl");
    let mut w = StoreWriter::open(&store, Rotation { max_bytes: 30, keep: 5 }).expect("open");
    for i in 0..10 {
        w.append(&format!("{{\"n\":{i}}}")).expect("append");
    }
    for d in [base.join("state"), base.join("state/pipetel"), dir.clone()] {
        assert_eq!(mode(&d), 0o700, "{}", d.display());
    }
    for f in [store.clone(), rotated(&store, 1), lock_file(&store)] {
        assert_eq!(mode(&f), 0o600, "{}", f.display());
    }
}

#[test]
fn a_file_an_older_version_left_readable_becomes_private() {
    let dir = temp("narrowed", Some(0o700));
    let store = store_file(&dir, "{\"old\":1}\n", 0o644);
    StoreWriter::open(&store, Rotation::default()).expect("open").append("{\"new\":1}").expect("append");
    assert_eq!(mode(&store), 0o600);
    assert_eq!(std::fs::read_to_string(&store).expect("read"), "{\"old\":1}\n{\"new\":1}\n");
}

#[test]
fn a_directory_that_is_a_symbolic_link_is_refused() {
    let base = temp("dirlink", None);
    // Another user's directory, reached through a link planted where the store would be.
    let elsewhere = base.join("elsewhere");
    std::fs::create_dir(&elsewhere).expect("dir");
    let link = base.join("rows");
    symlink(&elsewhere, &link).expect("symlink");
    let e = StoreWriter::open(&link.join("svc.jsonl"), Rotation::default()).expect_err("a linked directory");
    let msg = e.to_string();
    assert!(msg.contains(&link.display().to_string()) && msg.contains("symbolic link"), "{msg}");
    assert_eq!(std::fs::read_dir(&elsewhere).expect("list").count(), 0, "nothing written through the link");
}

#[test]
fn a_directory_writable_by_everyone_is_refused() {
    let dir = temp("sticky", Some(0o1777));
    let e = StoreWriter::open(&dir.join("svc.jsonl"), Rotation::default()).expect_err("a shared directory");
    assert!(e.to_string().contains("writable by every user"), "{e}");
    assert!(!dir.join("svc.jsonl").exists());
}

#[test]
fn a_directory_of_another_user_is_refused() {
    let me = euid();
    let (dir, _scratch) = if me == 0 {
        // Root can make one: a directory given to `nobody`.
        let dir = temp("theirs", Some(0o755));
        std::os::unix::fs::chown(&*dir, Some(65534), Some(65534)).expect("chown");
        (dir.to_path_buf(), Some(dir))
    } else {
        // Anyone else has one: the root directory.
        (PathBuf::from("/"), None)
    };
    let e = StoreWriter::open(&dir.join("svc.jsonl"), Rotation::default()).expect_err("another user's directory");
    assert!(e.to_string().contains("not to this user"), "{e}");
    assert!(!dir.join("svc.jsonl").exists());
}

#[test]
fn a_store_file_of_another_user_is_refused() {
    if euid() != 0 {
        // Only root can give a file away; as anyone else the directory check above covers the case.
        eprintln!("skipped: needs root to create a file owned by another user");
        return;
    }
    let dir = temp("theirfile", Some(0o700));
    let store = store_file(&dir, "", 0o666);
    std::os::unix::fs::chown(&store, Some(65534), Some(65534)).expect("chown");
    let e = StoreWriter::open(&store, Rotation::default()).expect_err("another user's file");
    assert!(e.to_string().contains("not to this user") && e.to_string().contains("svc.jsonl"), "{e}");
    assert_eq!(std::fs::read_to_string(&store).expect("read"), "");
}

#[test]
fn no_file_of_a_store_is_followed_through_a_symbolic_link() {
    let dir = temp("filelink", Some(0o700));
    let victim = dir.join("victim");
    std::fs::write(&victim, "secret\n").expect("write");
    let store = dir.join("svc.jsonl");

    // The lock file, the current file: refused by the writer, whichever policy.
    for linked in [lock_file(&store), store.clone()] {
        symlink(&victim, &linked).expect("symlink");
        for e in [
            StoreWriter::open(&store, Rotation::default()).expect_err("a linked file"),
            StoreWriter::open_file(&store, Rotation::default()).expect_err("a linked file"),
        ] {
            let msg = e.to_string();
            assert!(msg.contains(&linked.display().to_string()) && msg.contains("symbolic link"), "{msg}");
        }
        std::fs::remove_file(&linked).expect("unlink");
    }
    assert_eq!(std::fs::read_to_string(&victim).expect("read"), "secret\n");

    // A rotated file: the reader names it and reads nothing through it.
    let mut w = StoreWriter::open(&store, Rotation::default()).expect("open");
    w.append("{\"n\":1}").expect("append");
    symlink(&victim, rotated(&store, 1)).expect("symlink");
    let e = read_store(&store).expect_err("a linked rotated file");
    assert!(e.to_string().contains("svc.jsonl.1") && e.to_string().contains("symbolic link"), "{e}");
}

#[test]
fn a_named_rows_file_lives_where_the_user_put_it() {
    // PIPETEL_ROWS_FILE's directory is the user's choice: it is used as it is, but must exist.
    let dir = temp("named", Some(0o777));
    let file = dir.join("rows.jsonl");
    StoreWriter::open_file(&file, Rotation::default()).expect("open").append("{\"n\":1}").expect("append");
    assert_eq!(mode(&file), 0o600, "created private all the same");
    assert_eq!(mode(&dir), 0o777, "the directory is left as it was");
}
