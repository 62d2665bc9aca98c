//! `pipetel.rows`: the fleet's rows store read from Python through the one reader of
//! `pipetel-rows` ([`pipetel_rows::fleet`]), the reader of `pipetel rows --url`: the same query,
//! the same rows with the same types, the same read timeout, caps and errors.
//!
//! `python/pipetel/rows.py` checks the filters' Python types and wraps the rows in a
//! `pandas.DataFrame` when asked; everything else happens here and in the reader.

use std::time::Duration;

use pipetel_rows::fleet::{FieldValue, FleetErrorKind, FleetReader, FleetRow, Limits, Query};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::guard;

create_exception!(
    pipetel.rows,
    RowsQueryError,
    PyException,
    "The store could not be asked, or its answer is not what VictoriaLogs answers."
);

/// The LogsQL query for these filters (what `pipetel rows --url` sends).
#[pyfunction]
#[pyo3(signature = (*, namespace=None, stage=None, execution=None, shard=None, status=None, service=None))]
fn _rows_logsql(
    namespace: Option<String>,
    stage: Option<String>,
    execution: Option<String>,
    shard: Option<u64>,
    status: Option<String>,
    service: Option<String>,
) -> PyResult<String> {
    guard(|| Ok(Query { namespace, stage, execution, shard, status, service }.logsql()))
}

/// One row as a dict, its keys in the row's order (`event`, `timestamp_ms`, the trace ids, then
/// the `pipeline.*` fields by name).
fn row_dict<'py>(py: Python<'py>, row: &FleetRow) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (key, value) in &row.fields {
        match value {
            FieldValue::Text(t) => d.set_item(key, t)?,
            FieldValue::Int(n) => d.set_item(key, n)?,
            FieldValue::Float(f) => d.set_item(key, f)?,
            FieldValue::Bool(b) => d.set_item(key, b)?,
        }
    }
    Ok(d)
}

/// The rows `logsql` selects in the VictoriaLogs at `url`, oldest first, as dicts. The query
/// runs without the GIL.
#[pyfunction]
#[pyo3(signature = (url, logsql, *, start=None, end=None, timeout=30.0, max_bytes=None))]
fn _rows_query<'py>(
    py: Python<'py>,
    url: &str,
    logsql: &str,
    start: Option<String>,
    end: Option<String>,
    timeout: f64,
    max_bytes: Option<u64>,
) -> PyResult<Bound<'py, PyList>> {
    guard(|| {
        let timeout =
            Some(timeout).filter(|t| *t > 0.0).and_then(|t| Duration::try_from_secs_f64(t).ok()).ok_or_else(|| {
                PyValueError::new_err(format!("timeout must be a number of seconds above 0, not {timeout}"))
            })?;
        if max_bytes == Some(0) {
            return Err(PyValueError::new_err("max_bytes must be a number of bytes above 0, not 0"));
        }
        let limits = Limits { timeout, max_bytes: max_bytes.unwrap_or(Limits::DEFAULT_MAX_BYTES), ..Limits::default() };
        let mut reader = FleetReader::new(url, limits).map_err(|e| PyValueError::new_err(format!("url {e}")))?;
        let rows = py.detach(|| reader.rows(logsql, start.as_deref(), end.as_deref())).map_err(|e| match e.kind() {
            FleetErrorKind::Url => PyValueError::new_err(format!("url {e}")),
            _ => RowsQueryError::new_err(e.to_string()),
        })?;
        let dicts = rows.iter().map(|r| row_dict(py, r)).collect::<PyResult<Vec<_>>>()?;
        PyList::new(py, dicts)
    })
}

/// Adds `_RowsQueryError` (re-exported as `pipetel.rows.RowsQueryError`, the name its class
/// carries), `_rows_logsql`, `_rows_query` and `_ROW_FIELDS` (the row schema's field of each
/// filter of `pipetel.rows`) to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use pipetel_rows::fields;
    m.add("_RowsQueryError", m.py().get_type::<RowsQueryError>())?;
    let schema = pyo3::types::PyDict::new(m.py());
    for (filter, field) in [
        ("namespace", fields::NAMESPACE),
        ("stage", fields::STAGE_NAME),
        ("execution", fields::EXECUTION_ID),
        ("shard", fields::SHARD_INDEX),
        ("status", fields::STATUS),
    ] {
        schema.set_item(filter, field)?;
    }
    m.add("_ROW_FIELDS", schema)?;
    m.add_function(wrap_pyfunction!(_rows_logsql, m)?)?;
    m.add_function(wrap_pyfunction!(_rows_query, m)?)?;
    Ok(())
}
