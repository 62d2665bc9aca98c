//! The exceptions TeleFuser programs catch, each a subclass of one of pipetel's exceptions and
//! of the Python exception TeleFuser raised (`InvalidValueError` is a `pipetel.RecordError` and
//! a `ValueError`), and the mapping of registry errors onto them.

use pipetel::registry::RegistryError;
use pyo3::create_exception;
use pyo3::exceptions::{PyKeyError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

use crate::errors::{FamilyError, PipetelError, RecordError};

create_exception!(
    pipetel,
    MetricAlreadyRegisteredError,
    FamilyError,
    "The name is taken by a metric of another kind, label names, buckets or quantiles."
);

/// An exception type with two bases (one of pipetel's, one of Python's), made once.
struct DualException {
    cell: PyOnceLock<Py<PyType>>,
    name: &'static str,
    doc: &'static str,
}

impl DualException {
    const fn new(name: &'static str, doc: &'static str) -> Self {
        DualException { cell: PyOnceLock::new(), name, doc }
    }

    fn get<'py>(
        &self,
        py: Python<'py>,
        bases: impl FnOnce(Python<'py>) -> (Bound<'py, PyType>, Bound<'py, PyType>),
    ) -> PyResult<&Bound<'py, PyType>> {
        let ty = self.cell.get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let (a, b) = bases(py);
            let ns = PyDict::new(py);
            ns.set_item("__module__", "pipetel")?;
            ns.set_item("__doc__", self.doc)?;
            let made = py.get_type::<PyType>().call1((self.name, PyTuple::new(py, [a, b])?, ns))?;
            Ok(made.cast_into::<PyType>()?.unbind())
        })?;
        Ok(ty.bind(py))
    }
}

static INVALID_VALUE: DualException = DualException::new(
    "InvalidValueError",
    "A value a metric cannot record: NaN, a negative counter increment, a non-finite amount.",
);
static UNSUPPORTED: DualException = DualException::new(
    "UnsupportedOperationError",
    "An operation the metric's kind does not allow (a counter's dec or set).",
);
static INVALID_METRIC: DualException = DualException::new(
    "InvalidMetricError",
    "An invalid metric definition: name, label names or values, buckets or quantiles.",
);
static NOT_FOUND: DualException = DualException::new("MetricNotFoundError", "No metric of that name is registered.");

fn invalid_value_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    INVALID_VALUE.get(py, |py| (py.get_type::<RecordError>(), py.get_type::<PyValueError>()))
}
fn unsupported_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    UNSUPPORTED.get(py, |py| (py.get_type::<RecordError>(), py.get_type::<PyRuntimeError>()))
}
fn invalid_metric_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    INVALID_METRIC.get(py, |py| (py.get_type::<FamilyError>(), py.get_type::<PyValueError>()))
}
fn not_found_type(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    NOT_FOUND.get(py, |py| (py.get_type::<PipetelError>(), py.get_type::<PyKeyError>()))
}

/// `InvalidValueError(message)`.
pub(crate) fn invalid_value(message: String) -> PyErr {
    Python::attach(|py| match invalid_value_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

pub(crate) fn unsupported(message: String) -> PyErr {
    Python::attach(|py| match unsupported_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

pub(crate) fn not_found(message: String) -> PyErr {
    Python::attach(|py| match not_found_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

/// A registry error as the exception TeleFuser code expects: a conflict is
/// `MetricAlreadyRegisteredError`, anything else `InvalidMetricError`; the message is Rust's.
pub(crate) fn registry_error(error: RegistryError) -> PyErr {
    refused(error, None, None)
}

/// [`registry_error`] for a registration's refusal, its message starting with the argument at
/// fault: `name_arg` for an invalid name, `labels` for label names or values, `option_arg` for
/// buckets, quantiles or the window.
pub(crate) fn registration_error(error: RegistryError, name_arg: &str, option_arg: &str) -> PyErr {
    refused(error, Some(name_arg), Some(option_arg))
}

fn refused(error: RegistryError, name_arg: Option<&str>, option_arg: Option<&str>) -> PyErr {
    let arg = match &error {
        RegistryError::Conflict { .. } => return MetricAlreadyRegisteredError::new_err(error.to_string()),
        RegistryError::InvalidName { .. } => name_arg,
        RegistryError::InvalidLabelName { .. } | RegistryError::LabelMismatch { .. } => name_arg.map(|_| "labels"),
        RegistryError::InvalidOption { .. } => option_arg,
        _ => None,
    };
    let message = match arg {
        Some(arg) => format!("{arg}: {error}"),
        None => error.to_string(),
    };
    Python::attach(|py| match invalid_metric_type(py) {
        Ok(ty) => PyErr::from_type(ty.clone(), message),
        Err(e) => e,
    })
}

/// Adds the exception types to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("MetricAlreadyRegisteredError", py.get_type::<MetricAlreadyRegisteredError>())?;
    m.add("InvalidValueError", invalid_value_type(py)?)?;
    m.add("UnsupportedOperationError", unsupported_type(py)?)?;
    m.add("InvalidMetricError", invalid_metric_type(py)?)?;
    m.add("MetricNotFoundError", not_found_type(py)?)?;
    Ok(())
}
