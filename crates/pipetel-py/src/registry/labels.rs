//! Labels as TeleFuser takes them: `MetricLabel`, a dict of names to values, or a list of
//! label objects, turned into the sorted `(name, value)` pairs that pick a series.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::args::{arg, repr, type_name};

/// A label: name and value (TeleFuser's `MetricLabel`).
#[pyclass(module = "pipetel.registry", name = "MetricLabel", frozen, eq, hash, from_py_object)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyMetricLabel {
    pub(crate) name: String,
    pub(crate) value: String,
}

#[pymethods]
impl PyMetricLabel {
    #[new]
    fn new(#[pyo3(from_py_with = arg::name)] name: String, value: &Bound<'_, PyAny>) -> PyResult<Self> {
        let value = label_value("value", &name, value)?;
        Ok(PyMetricLabel { name, value })
    }

    /// The label's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The label's value.
    #[getter]
    fn value(&self) -> &str {
        &self.value
    }

    /// `name="value"`, as in the exposition (the value escaped).
    fn to_prometheus(&self) -> String {
        let escaped = self.value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        format!("{}=\"{escaped}\"", self.name)
    }

    fn __repr__(&self) -> String {
        format!("MetricLabel(name={:?}, value={:?})", self.name, self.value)
    }
}

/// A label value: a `str`, or an `int`, `float` or `bool` written as Python's `str()` does;
/// `what` names the argument it came in.
fn label_value(what: &str, name: &str, value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned());
    }
    let py = value.py();
    let scalar = value.is_instance(&py.get_type::<PyInt>())? || value.is_instance(&py.get_type::<PyFloat>())?;
    if scalar {
        return Ok(value.str()?.to_cow()?.into_owned());
    }
    Err(PyTypeError::new_err(format!(
        "{what}: the value of label {name:?} must be a str (or an int or float), got {}",
        type_name(value)
    )))
}

/// Labels as TeleFuser takes them: `None`, a dict of names to values, or a list of
/// `MetricLabel` (or any objects with `name` and `value`), sorted by name as TeleFuser does.
pub(crate) fn labels_of(labels: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(String, String)>> {
    let Some(labels) = labels.filter(|l| !l.is_none()) else { return Ok(Vec::new()) };
    let mut pairs = Vec::new();
    if let Ok(dict) = labels.cast::<PyDict>() {
        for (k, v) in dict.iter() {
            let Ok(name) = k.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!(
                    "labels: label names must be str, got {} ({})",
                    repr(&k),
                    type_name(&k)
                )));
            };
            let name = name.to_cow()?.into_owned();
            let value = label_value("labels", &name, &v)?;
            pairs.push((name, value));
        }
    } else if labels.cast::<PyList>().is_ok() || labels.cast::<PyTuple>().is_ok() {
        for (i, item) in labels.try_iter()?.enumerate() {
            let item = item?;
            if let Ok(label) = item.cast::<PyMetricLabel>() {
                let label = label.get();
                pairs.push((label.name.clone(), label.value.clone()));
                continue;
            }
            let (Ok(name), Ok(value)) = (item.getattr("name"), item.getattr("value")) else {
                return Err(PyTypeError::new_err(format!(
                    "labels[{i}] must be a MetricLabel (an object with name and value), got {}",
                    type_name(&item)
                )));
            };
            let Ok(name) = name.cast::<PyString>() else {
                return Err(PyTypeError::new_err(format!("labels[{i}].name must be a str")));
            };
            let name = name.to_cow()?.into_owned();
            let value = label_value("labels", &name, &value)?;
            pairs.push((name, value));
        }
    } else {
        return Err(PyTypeError::new_err(format!(
            "labels must be a dict of str to str or a list of MetricLabel, got {}",
            type_name(labels)
        )));
    }
    pairs.sort();
    Ok(pairs)
}
