//! Python values as OpenTelemetry attribute values (span attributes, event attributes).

use pipetel::opentelemetry::{Array, KeyValue, StringValue, Value};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::args::{repr, type_name};

/// A Python value as an OTel attribute value; `what` names it in errors.
pub(crate) fn to_attribute(what: &str, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    to_attribute_named(&|| what.to_owned(), value)
}

/// [`to_attribute`] with the name made only for an error (a span's attributes are converted on
/// every span).
fn to_attribute_named(name: &dyn Fn() -> String, value: &Bound<'_, PyAny>) -> PyResult<Value> {
    if let Ok(b) = value.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if value.is_instance_of::<PyInt>() {
        let i: i64 = value
            .extract()
            .map_err(|_| PyValueError::new_err(format!("{}: {value} does not fit a 64-bit integer", name())))?;
        return Ok(Value::I64(i));
    }
    if let Ok(f) = value.cast::<PyFloat>() {
        return Ok(Value::F64(f.value()));
    }
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(Value::String(s.extract::<String>()?.into()));
    }
    if value.is_instance_of::<PyList>() || value.is_instance_of::<PyTuple>() {
        let items: Vec<Value> = value.try_iter()?.map(|v| to_attribute_named(name, &v?)).collect::<PyResult<_>>()?;
        let same = |f: fn(&Value) -> bool| items.iter().all(f);
        let array = if same(|v| matches!(v, Value::Bool(_))) {
            Array::Bool(items.into_iter().filter_map(|v| if let Value::Bool(b) = v { Some(b) } else { None }).collect())
        } else if same(|v| matches!(v, Value::I64(_))) {
            Array::I64(items.into_iter().filter_map(|v| if let Value::I64(i) = v { Some(i) } else { None }).collect())
        } else if same(|v| matches!(v, Value::F64(_))) {
            Array::F64(items.into_iter().filter_map(|v| if let Value::F64(f) = v { Some(f) } else { None }).collect())
        } else if same(|v| matches!(v, Value::String(_))) {
            Array::String(
                items
                    .into_iter()
                    .filter_map(|v| if let Value::String(s) = v { Some(s) } else { None })
                    .collect::<Vec<StringValue>>(),
            )
        } else {
            return Err(PyTypeError::new_err(format!("{}: a list attribute holds values of one type", name())));
        };
        return Ok(Value::Array(array));
    }
    Err(PyTypeError::new_err(format!(
        "{}: a {} is not a bool, int, float, str or a list of one of them",
        name(),
        type_name(value)
    )))
}

/// The attributes of `attrs` added to `out`: the dict passed as the argument `arg` (errors name
/// `arg["key"]`), or with `arg` `None` the keyword arguments (errors name the keyword).
pub(crate) fn attributes(
    arg: Option<&str>,
    attrs: Option<&Bound<'_, PyDict>>,
    out: &mut Vec<KeyValue>,
) -> PyResult<()> {
    let Some(attrs) = attrs else { return Ok(()) };
    for (k, v) in attrs.iter() {
        let key: String = k.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{}: attribute names are strings, got {} ({})",
                arg.unwrap_or("attributes"),
                repr(&k),
                type_name(&k)
            ))
        })?;
        let what = || match arg {
            Some(arg) => format!("{arg}[{key:?}]"),
            None => format!("attribute {key:?}"),
        };
        let value = to_attribute_named(&what, &v)?;
        out.push(KeyValue::new(key, value));
    }
    Ok(())
}
