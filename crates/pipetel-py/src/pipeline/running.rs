//! A stage or shard handle's Rust value while it runs (shared by the handle and its phases).

use std::sync::{PoisonError, RwLock};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::guard;

fn ended(what: &str) -> PyErr {
    PyRuntimeError::new_err(format!("{what} has already ended"))
}

/// A stage or shard while it runs: taken out when it ends, after which using it raises
/// `RuntimeError` naming it (`what`).
pub(super) struct Running<T> {
    slot: RwLock<Option<T>>,
    what: String,
}

impl<T: Send> Running<T> {
    pub(super) fn new(value: T, what: String) -> Self {
        Running { slot: RwLock::new(Some(value)), what }
    }

    /// `f` on the running stage or shard.
    pub(super) fn with<R>(&self, f: impl FnOnce(&T) -> PyResult<R>) -> PyResult<R> {
        let slot = self.slot.read().unwrap_or_else(PoisonError::into_inner);
        let Some(value) = slot.as_ref() else { return Err(ended(&self.what)) };
        f(value)
    }

    pub(super) fn has_ended(&self) -> bool {
        self.slot.read().unwrap_or_else(PoisonError::into_inner).is_none()
    }

    /// Ends it through `how` and returns its row (`to_dict`) as a dict. Ending emits the row (a
    /// log record, a JSON line): no GIL needed.
    pub(super) fn end<R: Send>(
        &self,
        py: Python<'_>,
        how: impl FnOnce(T) -> R + Send,
        to_dict: for<'py> fn(Python<'py>, &R) -> PyResult<Bound<'py, PyDict>>,
    ) -> PyResult<Py<PyDict>> {
        let taken = self.slot.write().unwrap_or_else(PoisonError::into_inner).take();
        let Some(value) = taken else { return Err(ended(&self.what)) };
        let row = py.detach(|| guard(|| Ok(how(value))))?;
        Ok(to_dict(py, &row)?.unbind())
    }
}
