//! The baseline of the Python benchmarks (`python/benches/bench_record.py`): a frozen class whose
//! methods do nothing, so a benchmark can put the cost of any bound method next to the bare cost
//! of calling a PyO3 method at all. Not part of the public API (`pipetel._pipetel._BenchNoOp`).

use pyo3::prelude::*;

/// A frozen class whose methods do nothing: the cost of a bare PyO3 method call.
#[pyclass(module = "pipetel._pipetel", name = "_BenchNoOp", frozen)]
pub struct BenchNoOp;

#[pymethods]
impl BenchNoOp {
    #[new]
    fn new() -> Self {
        BenchNoOp
    }

    /// Does nothing (no arguments, as a registry `counter.inc()`).
    fn noop(&self) {}

    /// Does nothing with two integers (the arity of `shard.record(items, nbytes)`).
    fn noop2(&self, a: u64, b: u64) {
        let _ = (a, b);
    }
}

/// Adds the benchmark baseline class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<BenchNoOp>()
}
