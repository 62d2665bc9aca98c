//! The `PipetelError` exception hierarchy and the mapping of Rust errors and panics onto it.
//!
//! | exception | raised for |
//! | --- | --- |
//! | `PipetelError` | base of every pipetel exception (subclass of `Exception`) |
//! | `FamilyError` | an invalid metric family (name, labels, buckets) |
//! | `RecordError` | a record rejected by a recorder (label arity, negative counter increment, NaN) |
//! | `SnapshotError` | snapshot columns that do not form a valid snapshot |
//! | `MergeError` | snapshots that cannot be merged (different family, reset) |
//! | `DecodeError` | bytes that are not a valid envelope or frame |
//! | `ThreadError` | a per-thread recorder used from another thread |
//! | `ConfigError` | a bad setting: unknown `init` keyword, wrong type, refused value, bad variable or file key |
//! | `InitError` | `init` could not install pipetel (port in use, exporter not buildable, ...) |
//! | `AlreadyInitialized` | a second `init` in this process (subclass of `InitError`) |
//! | `ShutdownError` | flush or shutdown timed out, or exports lost data |
//! | `InternalError` | a Rust panic caught at the boundary (a bug in pipetel: please report it) |

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::PyTypeInfo;

/// The exception types, from one table (name, base, docstring), and their registration.
macro_rules! exceptions {
    ($($name:ident($base:ty): $doc:literal;)*) => {
        $(create_exception!(pipetel, $name, $base, $doc);)*

        /// Adds the exception types to the module.
        pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
            let py = m.py();
            $(m.add(stringify!($name), py.get_type::<$name>())?;)*
            Ok(())
        }
    };
}

exceptions! {
    PipetelError(PyException): "Base class of every exception raised by pipetel.";
    FamilyError(PipetelError): "An invalid metric family.";
    RecordError(PipetelError): "A record rejected by a recorder.";
    SnapshotError(PipetelError): "Snapshot columns that do not form a valid snapshot.";
    MergeError(PipetelError): "Snapshots that cannot be merged.";
    DecodeError(PipetelError): "Bytes that are not a valid envelope or frame.";
    ThreadError(PipetelError): "A per-thread recorder used from a thread other than the one that created it.";
    ConfigError(PipetelError):
        "A bad setting: an unknown init keyword, a value of the wrong type or refused, a bad variable or file key.";
    InitError(PipetelError): "init could not install pipetel.";
    AlreadyInitialized(InitError): "init was already called in this process.";
    ShutdownError(PipetelError): "Flush or shutdown timed out, or exports lost data.";
    InternalError(PipetelError): "A Rust panic caught at the Python boundary: a bug in pipetel.";
}

/// Runs `f`, turning a panic into `InternalError` (with the panic message) so that no panic
/// unwinds across the boundary.
pub(crate) fn guard<T>(f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let message = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(InternalError::new_err(format!("pipetel panicked: {message}")))
        }
    }
}

/// Turns a Rust error into the exception type `E` with the error's own message.
pub(crate) fn to_py<E: PyTypeInfo>(error: impl std::fmt::Display) -> PyErr {
    PyErr::new::<E, _>(error.to_string())
}

/// The exception leaving a `with` block, read from `__exit__`'s `(exc_type, exc, tb)` (taken as
/// `*exc_info`, so every context manager of the module reads them one way); `None` when the
/// block ended normally.
pub(crate) fn exiting_exception<'py>(exc_info: &Bound<'py, PyTuple>) -> Option<Bound<'py, PyAny>> {
    exc_info.get_item(1).ok().filter(|exc| !exc.is_none())
}
