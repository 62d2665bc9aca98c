//! `pipetel.multiprocess`'s page work, done by the core's exposition code
//! ([`pipetel_core::exposition::merge`]): a worker's page read back into recorder snapshots,
//! and the workers' files merged and written as one page with the pull endpoint's writer (its
//! escaping and number rules).
//!
//! `python/pipetel/multiprocess.py` keeps the directory's rules, the file I/O, which worker is
//! alive (its pid on this host) and the shared port; every text read or written is here.

use std::collections::HashMap;

use pipetel_core::exposition::merge::{self, Merge};
use pipetel_recorders::Envelope;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::errors::guard;
use crate::recorders::PySnapshot;

/// One sample as `read_page` returns it: sample name, family name, type, help, labels, value.
type Sample = (String, String, String, String, HashMap<String, String>, f64);

/// The samples of a text exposition (0.0.4) as `(sample name, family name, type, help, labels,
/// value)`, label values and help unescaped; `ValueError` for a sample whose labels or value
/// cannot be read. Without the GIL.
#[pyfunction]
fn _read_page(py: Python<'_>, text: &str) -> PyResult<Vec<Sample>> {
    let samples = py.detach(|| guard(|| merge::read_page(text).map_err(PyValueError::new_err)))?;
    Ok(samples
        .into_iter()
        .map(|s| (s.sample, s.family, s.kind, s.help, s.labels.into_iter().collect(), s.value))
        .collect())
}

/// A page as the recorder snapshots a worker writes (see `pipetel.multiprocess.page_snapshots`).
/// Without the GIL.
#[pyfunction]
fn _page_snapshots(py: Python<'_>, text: &str) -> PyResult<Vec<PySnapshot>> {
    let snapshots = py.detach(|| guard(|| merge::page_snapshots(text).map_err(PyValueError::new_err)))?;
    Ok(snapshots.into_iter().map(PySnapshot).collect())
}

/// The merged page of worker files: `files` are the files' bytes (envelopes), `live(source)`
/// tells whether the worker that wrote an envelope still runs (its gauges count only then).
/// Returns the page and the positions of the files skipped as not envelopes and of those with
/// a series skipped for invalid names: `(page, undecodable, invalid_names)`. Decoding, merging
/// and writing run without the GIL; `live` is called with it, once per decoded file.
#[pyfunction]
fn _merged_page(
    py: Python<'_>,
    files: Vec<Bound<'_, PyBytes>>,
    live: Bound<'_, PyAny>,
) -> PyResult<(String, Vec<usize>, Vec<usize>)> {
    let bytes: Vec<&[u8]> = files.iter().map(|f| f.as_bytes()).collect();
    let decoded: Vec<Option<Envelope>> =
        py.detach(|| bytes.iter().map(|b| Envelope::decode(b).ok()).collect::<Vec<_>>());
    let mut alive = Vec::with_capacity(decoded.len());
    for envelope in &decoded {
        alive.push(match envelope {
            Some(e) => live.call1((e.source.as_str(),))?.is_truthy()?,
            None => false,
        });
    }
    py.detach(|| {
        guard(|| {
            let mut merge = Merge::new();
            let (mut undecodable, mut invalid) = (Vec::new(), Vec::new());
            for (i, (envelope, live)) in decoded.iter().zip(alive).enumerate() {
                match envelope {
                    None => undecodable.push(i),
                    Some(e) => {
                        if !merge.add(e, live) {
                            invalid.push(i);
                        }
                    }
                }
            }
            Ok((merge.page(), undecodable, invalid))
        })
    })
}

/// Adds the functions to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_read_page, m)?)?;
    m.add_function(wrap_pyfunction!(_page_snapshots, m)?)?;
    m.add_function(wrap_pyfunction!(_merged_page, m)?)?;
    Ok(())
}
