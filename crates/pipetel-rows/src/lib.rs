//! The local rows store: where pipetel appends its stage and worker rows when nothing else is
//! configured, and where the `pipetel rows` tool reads them. Both depend on this crate (std,
//! `rustix` for the directory-relative system calls on Unix, `serde_json` to read profile lines)
//! so the library and the tool agree on the path, the rotation, the locking and the line format
//! without the tool pulling in the OpenTelemetry stack.
//!
//! # Where
//! The default store of a service is `<dir>/<service>.jsonl` ([`default_file`]), where `<dir>` is
//! the first of:
//! 1. `$PIPETEL_ROWS_DIR` ([`ROWS_DIR_VAR`]),
//! 2. `$XDG_STATE_HOME/pipetel/rows`,
//! 3. `$HOME/.local/state/pipetel/rows`.
//!
//! With none of them set there is no default store ([`NoStoreDir`]): the shared temporary
//! directory is never used, since another local user could have created the directory there
//! first. The service name is made file-name safe ([`file_stem`]).
//!
//! # Who may read it
//! The default store's directory is created 0700 and refused when it is a symbolic link, belongs
//! to another user or is writable by every user; its files are created 0600 and opened without
//! following symbolic links, through the directory's descriptor (see [`StoreWriter::open`]).
//!
//! # Format, rotation and many processes
//! One JSON object per line. Each line is appended with a single `write` call on a file opened
//! for appending, so lines of processes sharing a store never interleave, and a process killed
//! mid-run (SIGKILL) leaves at worst one torn line; readers skip it. When the next line would take
//! the file past its size limit, the file is rotated: `<file>.1` becomes `<file>.2` and so on up
//! to the kept count, `<file>` becomes `<file>.1`, and a new `<file>` starts. Rotation takes the
//! store's lock file `<file>.lock` exclusively, and appending takes it shared, so only one process
//! rotates a given file and no line lands in a file after it was rotated away. [`read_store`]
//! reads every file under the same lock, oldest first: each row once.
//!
//! # The fleet's store
//! With the feature `fleet`, the module `fleet` reads the rows of a whole fleet back from VictoriaLogs
//! (where the gateways write them): the one reader behind `pipetel rows --url` and Python's
//! `pipetel.rows.query`. [`escape_controls`] makes names from any store safe to print.
//!
//! # Profiles
//! The module [`profile`] holds the line format of the profile store beside the rows store
//! (`<dir>/<service>.stacks`: sampled CPU stacks labelled with stage, shard and phase), its
//! reader, and the arithmetic `pipetel profile` and the stage rows share (top frames, folded
//! stacks).
//!
//! # Example
//! ```
//! use pipetel_rows::{default_file, lines, read_store, Line, Rotation, StoreWriter};
//!
//! # fn main() -> std::io::Result<()> {
//! let dir = std::env::temp_dir().join(format!("pipetel-rows-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let store = default_file(&dir, "tokenize"); // <dir>/tokenize.jsonl
//! let mut writer = StoreWriter::open_file(&store, Rotation::default())?;
//! writer.append(r#"{"event":"pipeline.stage","pipeline.items":3}"#)?;
//! let files = read_store(&store)?; // every file of the store, oldest first
//! let text = String::from_utf8_lossy(&files[0].bytes).into_owned();
//! assert_eq!(lines(&text), [Line::Whole(1, r#"{"event":"pipeline.stage","pipeline.items":3}"#)]);
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod answers;
mod dir;
mod escape;
pub mod fields;
#[cfg(feature = "fleet")]
pub mod fleet;
mod paths;
pub mod profile;
mod read;
mod time;
mod writer;

pub use dir::{file_id, path_id, FileId};
pub use escape::{escape_controls, escape_json_controls, is_control};
pub use fields::{FLOAT_FIELDS, TEXT_FIELDS};
pub use paths::{
    default_dir, default_dir_from, default_file, file_stem, lock_file, rotated, NoStoreDir, EXTENSION, LOCK_SUFFIX,
    ROWS_DIR_VAR,
};
pub use read::{files_in, lines, read_since, read_store, store_files, stores_in, Line, Snapshot, StoreFile};
pub use time::parse_utc;
pub use writer::{Rotation, StoreWriter, DEFAULT_KEEP, DEFAULT_MAX_BYTES};
