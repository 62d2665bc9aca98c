//! Arguments as Rust values, with the argument's name in the message of every refusal.
//!
//! PyO3 names an argument it could not convert only in a note attached to the exception
//! (`while processing 'items'`), which `str(error)` leaves out and Python < 3.11 never shows, and
//! it raises `OverflowError` for an int outside a Rust integer's range. So every argument of the
//! package is converted here instead, as `#[pyo3(from_py_with = arg::items)] items: u64`: a wrong
//! type is a `TypeError` and an int out of range a `ValueError`, each starting with the
//! argument's name (`items: -1 is out of range, expected an int in 0..=18446744073709551615`).
//! The conversion itself is PyO3's, so what is accepted is unchanged.

use pyo3::conversion::FromPyObjectOwned;
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// Converts `obj`, the argument `name`, to `T`; a refusal names the argument (see the module
/// docs).
pub(crate) fn named<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<T> {
    obj.extract::<T>().map_err(|e| rename::<T>(obj, name, e.into()))
}

/// `error`, raised converting `obj` to `T`, as the refusal of the argument `name`.
fn rename<T>(obj: &Bound<'_, PyAny>, name: &str, error: PyErr) -> PyErr {
    let py = obj.py();
    let renamed = if error.is_instance_of::<PyOverflowError>(py) {
        let range = int_range::<T>().map(|r| format!(", expected an int in {r}")).unwrap_or_default();
        PyValueError::new_err(format!("{name}: {} is out of range{range}", repr(obj)))
    } else if error.is_instance_of::<PyTypeError>(py) {
        PyTypeError::new_err(format!("{name}: {}", message(py, &error)))
    } else if error.is_instance_of::<PyValueError>(py) {
        PyValueError::new_err(format!("{name}: {}", message(py, &error)))
    } else {
        return error;
    };
    renamed.set_cause(py, Some(error));
    renamed
}

/// The range of the Rust integer type `T` (or of the integer in an `Option`), for a message.
fn int_range<T>() -> Option<String> {
    let ty = std::any::type_name::<T>();
    let ty = ty.strip_prefix("core::option::Option<").and_then(|t| t.strip_suffix('>')).unwrap_or(ty);
    Some(match ty {
        "u32" => format!("0..={}", u32::MAX),
        "u64" => format!("0..={}", u64::MAX),
        "usize" => format!("0..={}", usize::MAX),
        "i64" => format!("{}..={}", i64::MIN, i64::MAX),
        _ => return None,
    })
}

fn message(py: Python<'_>, error: &PyErr) -> String {
    error.value(py).str().map(|s| s.to_string()).unwrap_or_default()
}

/// `repr(obj)`, cut short for a message.
pub(crate) fn repr(obj: &Bound<'_, PyAny>) -> String {
    let text = obj.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".to_owned());
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// The name of `obj`'s type, for a message.
pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".to_owned())
}

/// One converter per argument name, for `#[pyo3(from_py_with = arg::NAME)]`.
macro_rules! arguments {
    ($($name:ident),* $(,)?) => {
        /// The converters, one per argument name (see [`named`]).
        pub(crate) mod arg {
            use pyo3::conversion::FromPyObjectOwned;
            use pyo3::prelude::*;
            $(
                #[doc = concat!("The argument `", stringify!($name), "`.")]
                pub(crate) fn $name<'py, T: FromPyObjectOwned<'py>>(obj: &Bound<'py, PyAny>) -> PyResult<T> {
                    super::named(obj, stringify!($name))
                }
            )*
        }
    };
}

arguments!(
    amount,
    attributes,
    bucket_counts,
    buckets,
    config_file,
    data,
    delta,
    description,
    dst,
    duration,
    earlier,
    envelope,
    execution_id,
    family,
    help,
    histograms,
    index,
    input_size,
    key,
    kind,
    label_values,
    labels,
    max_age_seconds,
    max_families,
    max_sources,
    name,
    namespace,
    nbytes,
    new_stream,
    openmetrics,
    output_size,
    pending,
    processing,
    quantiles,
    reason,
    seconds,
    sequence,
    service_name,
    shard_idx,
    shards,
    size,
    snapshots,
    source,
    src,
    stage_name,
    stale_after,
    strict,
    success,
    sums,
    tensors,
    total_shards,
    transport,
    unit,
    value,
    values,
    wait_time,
    counters,
    items,
);
