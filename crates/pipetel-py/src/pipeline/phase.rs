//! Phases of a Python shard (`shard.phase(name)`): a context manager that is also a decorator,
//! and a stage's answers (`stage.answers()`) as a dict.
//!
//! `with shard.phase(name):` is on the hot path of a pipeline's inner loop, so a shard keeps one
//! phase object per name (found by the name object's identity, without a lock), holding the name
//! as the Python string it was given and the core's handle of the phase (its slot looked up
//! once): a block allocates nothing, takes no lock and costs the core's two switches (a clock
//! read and three relaxed atomics each) and a push and a pop on the object's stack of
//! previous phases, packed in one integer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use pipetel::pipeline::answers::{Distribution, StageAnswers};
use pipetel::pipeline::phase::{check_phase_name, MAX_PHASES};
use pipetel::pipeline::store::fields::QUANTILES;
use pipetel::pipeline::{PhaseHandle, PreviousPhase, Shard};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use super::running::Running;
use crate::errors::guard;

/// Checks a phase name, raising `ValueError` naming it.
fn checked_name<'py>(name: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyString>> {
    let Ok(s) = name.cast::<PyString>() else {
        return Err(PyTypeError::new_err(format!("name: expected a str, got a {}", crate::args::type_name(name))));
    };
    check_phase_name(s.to_str()?).map_err(|e| PyValueError::new_err(format!("name: {e}")))?;
    Ok(s.clone())
}

/// A phase name as Python writes it (`'decode'`).
fn quoted(name: &Bound<'_, PyString>) -> String {
    name.repr().map(|r| r.to_string()).unwrap_or_default()
}

/// The core's handle of phase `name` (checked) of `shard`: `None` once the shard has ended (a
/// phase of an ended shard counts nothing, as in Rust).
fn handle(shard: &Running<Shard>, name: &Bound<'_, PyString>) -> PyResult<Option<PhaseHandle>> {
    let name = name.to_str()?;
    Ok(shard.with(|s| guard(|| Ok(s.phase_handle(name).ok()))).ok().flatten())
}

// A previous phase takes four bits of `Entered::packed`.
const _: () = assert!(MAX_PHASES < 16);

/// The phases a phase object's open blocks go back to, innermost last: up to 15 packed four
/// bits each above a marker bit (1: none), deeper ones in a vector. The interpreter holds the
/// GIL through `__enter__` and `__exit__`, so a plain load and store cannot race.
struct Entered {
    packed: AtomicU64,
    deeper: Mutex<Vec<PreviousPhase>>,
}

impl Entered {
    const NONE: u64 = 1;
    /// The marker bit's place once 15 phases are packed.
    const FULL: u32 = 60;

    fn new() -> Self {
        Entered { packed: AtomicU64::new(Self::NONE), deeper: Mutex::new(Vec::new()) }
    }

    fn push(&self, previous: PreviousPhase) {
        let packed = self.packed.load(Ordering::Relaxed);
        if packed >> Self::FULL == 0 {
            self.packed.store((packed << 4) | u64::from(previous.to_bits()), Ordering::Relaxed);
        } else {
            self.deeper.lock().unwrap_or_else(PoisonError::into_inner).push(previous);
        }
    }

    /// The innermost open block's previous phase (`None` when no block is open).
    fn pop(&self) -> Option<PreviousPhase> {
        let packed = self.packed.load(Ordering::Relaxed);
        if packed >> Self::FULL != 0 {
            if let Some(previous) = self.deeper.lock().unwrap_or_else(PoisonError::into_inner).pop() {
                return Some(previous);
            }
        }
        if packed == Self::NONE {
            return None;
        }
        self.packed.store(packed >> 4, Ordering::Relaxed);
        // Four bits are at most 15 = MAX_PHASES: always a phase.
        PreviousPhase::from_bits((packed & 0xf) as u8)
    }
}

/// `shard.phase(name)`: a phase of a running shard. `with` it, and the shard's time in the block
/// counts in the phase (a phase entered inside another pauses the outer one); call it on a
/// function (`@shard.phase("decode")`) and each call of the function runs inside the phase.
/// One object per shard and name (the shard's phase cache), entered any number of times, nested too.
#[pyclass(module = "pipetel.pipeline", name = "Phase", frozen)]
pub struct PyPhase {
    /// `None`: made after the shard ended (its blocks count nothing).
    handle: Option<PhaseHandle>,
    index: u32,
    name: Py<PyString>,
    entered: Entered,
}

#[pymethods]
impl PyPhase {
    fn __enter__(slf: &Bound<'_, Self>) -> Py<Self> {
        let this = slf.get();
        if let Some(handle) = &this.handle {
            this.entered.push(handle.enter_unguarded());
        }
        slf.clone().unbind()
    }

    /// Leaves the phase (an exception leaving the block goes on).
    fn __exit__(&self, _exc_type: &Bound<'_, PyAny>, _exc: &Bound<'_, PyAny>, _traceback: &Bound<'_, PyAny>) -> bool {
        if let (Some(handle), Some(previous)) = (&self.handle, self.entered.pop()) {
            handle.leave(previous);
        }
        false
    }

    /// Wraps `func` so each of its calls runs inside this phase (a generator or coroutine function
    /// is refused: its body runs later, outside the call).
    fn __call__(&self, py: Python<'_>, func: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        if !func.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "shard.phase({}) decorates a function, got a {}",
                quoted(self.name.bind(py)),
                crate::args::type_name(func)
            )));
        }
        let inspect = py.import("inspect")?;
        for check in ["isgeneratorfunction", "iscoroutinefunction", "isasyncgenfunction"] {
            if inspect.call_method1(check, (func,))?.is_truthy()? {
                return Err(PyTypeError::new_err(format!(
                    "shard.phase({}) cannot decorate {}: its body runs after the call returns; \
                     use `with shard.phase(...)` inside it",
                    quoted(self.name.bind(py)),
                    crate::args::repr(func)
                )));
            }
        }
        let wrapper = Py::new(
            py,
            PyPhaseFunction { handle: self.handle.clone(), name: self.name.clone_ref(py), func: func.clone().unbind() },
        )?;
        py.import("functools")?.call_method1("update_wrapper", (&wrapper, func))?;
        Ok(wrapper.into_any())
    }

    /// The phase name.
    #[getter]
    fn name(&self, py: Python<'_>) -> Py<PyString> {
        self.name.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("Phase(name={}, shard={})", quoted(self.name.bind(py)), self.index)
    }
}

/// A shard's phase objects, one per name, in a fixed row of cells read without a lock:
/// `shard.phase("decode")` in a loop allocates nothing after the first time (the name is found
/// by identity first: a literal is the same object at every call).
#[derive(Default)]
pub(super) struct PhaseCache([OnceLock<Py<PyPhase>>; MAX_PHASES + 1]);

impl PhaseCache {
    /// The phase object of `name` (checked, `ValueError` naming it) for shard `index`.
    pub(super) fn get(
        &self,
        shard: &Arc<Running<Shard>>,
        index: u32,
        name: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyPhase>> {
        let py = name.py();
        let cached = || self.0.iter().map_while(OnceLock::get);
        if let Some(p) = cached().find(|p| p.get().name.as_ptr() == name.as_ptr()) {
            return Ok(p.clone_ref(py));
        }
        let name = checked_name(name)?;
        let text = name.to_str()?;
        let same_text = |p: &&Py<PyPhase>| p.get().name.bind(py).to_str().is_ok_and(|t| t == text);
        if let Some(p) = cached().find(same_text) {
            return Ok(p.clone_ref(py));
        }
        let phase =
            PyPhase { handle: handle(shard, &name)?, index, name: name.clone().unbind(), entered: Entered::new() };
        let phase = Py::new(py, phase)?;
        // A shard holds at most MAX_PHASES names (more count outside any phase): keep as many.
        // Another thread may have cached the same name meanwhile (making the object can run
        // Python code, which can let it run): the first one cached wins.
        for cell in &self.0 {
            let kept = cell.get_or_init(|| phase.clone_ref(py));
            if kept.as_ptr() == phase.as_ptr() || same_text(&kept) {
                return Ok(kept.clone_ref(py));
            }
        }
        Ok(phase)
    }
}

/// A function wrapped by `@shard.phase(name)`: each call runs inside the phase.
#[pyclass(module = "pipetel.pipeline", name = "PhaseFunction", frozen, dict)]
pub struct PyPhaseFunction {
    /// `None`: made after the shard ended (its calls count nothing).
    handle: Option<PhaseHandle>,
    name: Py<PyString>,
    func: Py<PyAny>,
}

#[pymethods]
impl PyPhaseFunction {
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let _phase = self.handle.as_ref().map(PhaseHandle::enter);
        Ok(self.func.bind(py).call(args, kwargs)?.unbind())
    }

    /// As a class attribute, a method: bound to the instance like the function it wraps.
    fn __get__(
        slf: &Bound<'_, Self>,
        obj: &Bound<'_, PyAny>,
        _owner: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        if obj.is_none() {
            return Ok(slf.clone().into_any().unbind());
        }
        let method = slf.py().import("types")?.getattr("MethodType")?;
        Ok(method.call1((slf, obj))?.unbind())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        format!("PhaseFunction({}, phase={})", crate::args::repr(self.func.bind(py)), quoted(self.name.bind(py)))
    }
}

fn distribution<'py>(py: Python<'py>, d: Option<Distribution>) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(d) = d else { return Ok(None) };
    let out = PyDict::new(py);
    for (q, v) in QUANTILES.iter().zip(d.points()) {
        out.set_item(*q, v)?;
    }
    Ok(Some(out))
}

/// A stage's answers as a dict: `shard_elapsed` and `shard_item_rate` (`{p0, p25, p50, p75,
/// p90, max}` over the finished shards, or `None` before any finished), `skew`, `skewed`,
/// `stragglers`, `stalls`, `phases` (name → seconds), `unphased_seconds`, `off_cpu_seconds`.
pub(super) fn answers_dict<'py>(py: Python<'py>, a: &StageAnswers) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("shard_elapsed", distribution(py, a.shard_elapsed)?)?;
    d.set_item("shard_item_rate", distribution(py, a.shard_item_rate)?)?;
    d.set_item("skew", a.skew)?;
    d.set_item("skewed", a.skewed)?;
    d.set_item("stragglers", a.stragglers)?;
    d.set_item("stalls", a.stalls)?;
    let phases = PyDict::new(py);
    for (name, secs) in &a.phases {
        phases.set_item(name, secs)?;
    }
    d.set_item("phases", phases)?;
    d.set_item("unphased_seconds", a.unphased_seconds)?;
    d.set_item("off_cpu_seconds", a.off_cpu_seconds)?;
    Ok(d)
}
