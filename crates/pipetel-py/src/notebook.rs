//! Progress in a Jupyter notebook: `init` inside an IPython kernel that asks for the progress
//! display (`PIPETEL_PROGRESS`, `pipeline_progress=`) keeps the terminal display off and starts
//! `pipetel._notebook`'s display instead, which shows the frames of a
//! [`pipetel::pipeline::ProgressLines`] (`pipetel._pipetel._ProgressLines`) in one output per
//! cell, updated in place.
//!
//! Nothing here may break `init`: a failure to detect the kernel means "not in a kernel", and a
//! failure to start the notebook display is one Python warning.

use std::sync::Mutex;

use pipetel::config::ProgressMode;
use pyo3::prelude::*;

use crate::errors::guard;

/// `pipetel._pipetel._ProgressLines()`: the live progress frame as plain lines (see
/// [`pipetel::pipeline::ProgressLines`]).
#[pyclass(module = "pipetel._notebook", name = "_ProgressLines", frozen)]
pub struct PyProgressLines {
    inner: Mutex<pipetel::pipeline::ProgressLines>,
}

#[pymethods]
impl PyProgressLines {
    #[new]
    fn new() -> Self {
        PyProgressLines { inner: Mutex::new(pipetel::pipeline::ProgressLines::new()) }
    }

    /// The frame now: the stage table's header, the summary lines of the stages ended since this
    /// view was made, the live line of each running stage; empty while there is none.
    fn lines(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        // Reading the stage table takes its locks: let other Python threads run meanwhile.
        py.detach(|| {
            guard(|| {
                let mut view = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                Ok(view.lines())
            })
        })
    }
}

/// The progress mode `config` asks for, when this process is an IPython kernel and the mode is
/// on: `config` then draws no terminal display (its escape codes would garble the cell, and a
/// kernel's stderr is rarely a terminal anyway) and [`show`] takes over. Outside a kernel, or with
/// progress off, `config` is returned as it is, with `None`.
pub(crate) fn divert(py: Python<'_>, config: pipetel::Config) -> (pipetel::Config, Option<ProgressMode>) {
    let mode = config.progress();
    if mode == ProgressMode::Off || !in_kernel(py) {
        return (config, None);
    }
    (config.with_progress_mode(ProgressMode::Off), Some(mode))
}

/// Starts the notebook display when [`divert`] took the progress display over; a failure is one
/// Python warning, never an error of `init`.
pub(crate) fn show(py: Python<'_>, diverted: Option<ProgressMode>) {
    if diverted.is_none() {
        return;
    }
    let started = py.import("pipetel._notebook").and_then(|m| m.call_method0("start"));
    if let Err(e) = started {
        let message = format!("pipetel: no progress display in this notebook: {e}");
        if let Ok(warnings) = py.import("warnings") {
            // A warning turned into an error by the filters must not fail `init` either.
            let _ = warnings.call_method1("warn", (message, py.get_type::<pyo3::exceptions::PyRuntimeWarning>()));
        }
    }
}

/// Whether this process is an IPython kernel (`pipetel._notebook.in_kernel()`); `false` on any
/// error.
fn in_kernel(py: Python<'_>) -> bool {
    py.import("pipetel._notebook")
        .and_then(|m| m.call_method0("in_kernel"))
        .and_then(|r| r.extract::<bool>())
        .unwrap_or(false)
}

/// Adds `_ProgressLines`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProgressLines>()
}
