//! Stage and worker telemetry, the handle form: `pipetel.stage(...)`, `Stage.shard(i)`,
//! `Shard.record`, on `pipetel::pipeline` (the explicit Zephyr form is in [`crate::zephyr`]).
//!
//! `Shard.record(items, nbytes)` is the hot path: a `frozen` class whose method is bound
//! directly (no Python wrapper), holding a lock-free [`pipetel::pipeline::ShardRecorder`]: two
//! relaxed atomic adds, no lock, no GIL release (it costs less than releasing it would).

use std::sync::Arc;

use pipetel::opentelemetry::Context;
use pipetel::pipeline::{CounterKey, CounterValue, RemoteIngested, Shard, ShardRecorder, Stage, StageStat, WorkerStat};
use pipetel::tracing_opentelemetry::OpenTelemetrySpanExt as _;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyTuple};

use crate::args::{arg, type_name};
use crate::context::{current_context, describe_exception, extract_traceparent, traceparent_of, PySpan};
use crate::errors::{exiting_exception, guard};

mod phase;
mod running;
pub(crate) mod stacks;

pub use phase::{PyPhase, PyPhaseFunction};
use running::Running;

/// The context of a stage or shard object, for `parent=`.
pub(crate) fn context_of(obj: &Bound<'_, PyAny>) -> Option<Context> {
    if let Ok(stage) = obj.cast::<PyStage>() {
        return Some(stage.get().cx.clone());
    }
    obj.cast::<PyShard>().ok().map(|shard| shard.get().cx.clone())
}

/// A counter value: an int or a finite float, never a bool; `negative_ok` for shard counters
/// (deltas), never for Zephyr's aggregated `stage_counters`.
pub(crate) fn counter_value(what: &str, value: &Bound<'_, PyAny>, negative_ok: bool) -> PyResult<CounterValue> {
    if value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!("{what}: expected an int or a float, got a bool")));
    }
    let v = if value.is_instance_of::<PyInt>() {
        let i: i64 = value
            .extract()
            .map_err(|_| PyValueError::new_err(format!("{what}: {value} does not fit a 64-bit integer")))?;
        if i < 0 && !negative_ok {
            return Err(PyValueError::new_err(format!("{what}: {i} is negative")));
        }
        CounterValue::Int(i)
    } else if let Ok(f) = value.cast::<PyFloat>() {
        let f = f.value();
        if !f.is_finite() {
            return Err(PyValueError::new_err(format!("{what}: {f} is not a finite number")));
        }
        if f < 0.0 && !negative_ok {
            return Err(PyValueError::new_err(format!("{what}: {f} is negative")));
        }
        CounterValue::Float(f)
    } else {
        return Err(PyTypeError::new_err(format!("{what}: expected an int or a float, got a {}", type_name(value))));
    };
    Ok(v)
}

/// A counter key, refused with a `ValueError` naming `what`, the argument it came in.
pub(crate) fn counter_key(what: &str, key: &str) -> PyResult<CounterKey> {
    CounterKey::new(key).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// A stage row as a dict (field names as in `pipetel::pipeline::StageStat`).
fn stage_row<'py>(py: Python<'py>, s: &StageStat) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    set_shared_fields(&d, &s.stage_name, &s.execution_id, s.status.as_str(), s.items, s.bytes)?;
    d.set_item("elapsed", s.elapsed.as_secs_f64())?;
    d.set_item("total_shards", s.total_shards)?;
    d.set_item("shards_succeeded", s.shards_succeeded)?;
    d.set_item("shards_failed", s.shards_failed)?;
    d.set_item("shards_retried", s.shards_retried)?;
    d.set_item("cpu_percent_avg", s.cpu_percent_avg)?;
    set_last_fields(&d, &s.counters, &s.reason)?;
    Ok(d)
}

/// A worker row as a dict (field names as in `pipetel::pipeline::WorkerStat`).
fn worker_row<'py>(py: Python<'py>, w: &WorkerStat) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("shard_index", w.shard_index)?;
    set_shared_fields(&d, &w.stage_name, &w.execution_id, w.status.as_str(), w.items, w.bytes)?;
    d.set_item("cpu_time", w.cpu_time.as_secs_f64())?;
    set_last_fields(&d, &w.counters, &w.reason)?;
    Ok(d)
}

/// The fields stage and worker rows share, in their order: the stage, the status and the work.
fn set_shared_fields(
    d: &Bound<'_, PyDict>,
    stage_name: &str,
    execution_id: &str,
    status: &str,
    items: u64,
    bytes: u64,
) -> PyResult<()> {
    d.set_item("stage_name", stage_name)?;
    d.set_item("execution_id", execution_id)?;
    d.set_item("status", status)?;
    d.set_item("items", items)?;
    d.set_item("bytes", bytes)
}

/// The last fields of a stage or worker row: the user counters and the reason.
fn set_last_fields(
    d: &Bound<'_, PyDict>,
    counters: &[(String, CounterValue)],
    reason: &Option<String>,
) -> PyResult<()> {
    d.set_item("counters", counters_dict(d.py(), counters)?)?;
    d.set_item("reason", reason)
}

fn counters_dict<'py>(py: Python<'py>, counters: &[(String, CounterValue)]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in counters {
        match v {
            CounterValue::Int(i) => d.set_item(k, i)?,
            CounterValue::Float(f) => d.set_item(k, f)?,
        }
    }
    Ok(d)
}

/// The `#[pymethods]` block of a stage or shard handle (a class has one): the methods given,
/// then what both have: the span's `traceparent`, and `with`, which makes the span current and
/// on the way out ends the handle unless it ended inside the block: failed with the exception as
/// reason when one leaves the block, else through `$finish` (its outcome `$outcome`).
macro_rules! span_handle_methods {
    ($ty:ident, $slot:ident, $what:literal, else $outcome:literal by $finish:expr, { $($methods:tt)* }) => {
        #[pymethods]
        impl $ty {
            $($methods)*

            #[doc = concat!("The ", $what, " span's W3C `traceparent` (`None` when traces are not exported).")]
            #[getter]
            fn traceparent(&self) -> Option<String> {
                traceparent_of(&self.cx)
            }

            fn __enter__(slf: &Bound<'_, Self>) -> PyResult<Py<Self>> {
                PySpan::enter(slf.get().current.bind(slf.py()))?;
                Ok(slf.clone().unbind())
            }

            #[doc = concat!(
                "Ends the ", $what, " unless it ended inside the block: failed with the exception as reason when\n",
                "one leaves the block (and goes on), else ", $outcome, "."
            )]
            #[pyo3(signature = (*exc_info))]
            fn __exit__(&self, py: Python<'_>, exc_info: &Bound<'_, PyTuple>) -> PyResult<bool> {
                self.current.get().leave(py)?;
                if self.$slot.has_ended() {
                    return Ok(false);
                }
                match exiting_exception(exc_info) {
                    Some(e) => {
                        let (kind, message) = describe_exception(&e);
                        self.fail(py, format!("{kind}: {message}"))?;
                    }
                    None => {
                        let finish: fn(&$ty, Python<'_>) -> PyResult<Py<PyDict>> = $finish;
                        finish(self, py)?;
                    }
                }
                Ok(false)
            }
        }
    };
}

/// `pipetel.stage(name, shards=0, execution_id=None, counters=())`: starts a stage now (its
/// span a child of the current span). A context manager: `with` makes its span the current span
/// and ends the stage on the way out, failed (the exception as reason) when an exception leaves
/// the block.
#[pyfunction]
#[pyo3(signature = (name, /, shards = 0, execution_id = None, counters = Vec::new()))]
fn stage(
    py: Python<'_>,
    #[pyo3(from_py_with = arg::name)] name: String,
    #[pyo3(from_py_with = arg::shards)] shards: u32,
    #[pyo3(from_py_with = arg::execution_id)] execution_id: Option<String>,
    #[pyo3(from_py_with = arg::counters)] counters: Vec<String>,
) -> PyResult<PyStage> {
    let parent = current_context(py)?;
    let keys: Vec<CounterKey> = counters.iter().map(|k| counter_key("counters", k)).collect::<PyResult<_>>()?;
    guard(|| {
        let mut builder = pipetel::stage(name.clone()).shards(shards);
        if let Some(id) = execution_id {
            builder = builder.execution_id(id);
        }
        for key in keys {
            builder = builder.counter(key);
        }
        // The stage's span takes the current Python span as its parent.
        let stage = {
            let _attached = parent.attach();
            builder.start()
        };
        let cx = stage.span().map(|s| s.context()).unwrap_or_default();
        PyStage::new(py, stage, cx, name)
    })
}

/// A running stage (`pipetel.stage(...)`): thread-safe; start shards with `shard(i)` on the
/// thread that runs them.
#[pyclass(module = "pipetel.pipeline", name = "Stage", frozen)]
pub struct PyStage {
    stage: Running<Stage>,
    cx: Context,
    current: Py<PySpan>,
    name: String,
}

impl PyStage {
    /// The handle of a stage whose span has context `cx`.
    fn new(py: Python<'_>, stage: Stage, cx: Context, name: String) -> PyResult<Self> {
        let current = Py::new(py, PySpan::borrowed(format!("stage {name}"), cx.clone()))?;
        Ok(PyStage { stage: Running::new(stage, format!("stage {name:?}")), cx, current, name })
    }
}

span_handle_methods!(PyStage, stage, "stage", else "succeeded" by |stage, py| stage.finish(py, false), {
    /// Starts shard `index` on the calling thread (its CPU time is this thread's): its start row
    /// is emitted and its span opens as a child of the stage's span.
    fn shard(&self, py: Python<'_>, #[pyo3(from_py_with = arg::index)] index: u32) -> PyResult<PyShard> {
        let shard = self.stage.with(|stage| guard(|| Ok(stage.shard(index).start())))?;
        let cx = shard.span().context();
        let current = Py::new(py, PySpan::borrowed(format!("shard {index} of {}", self.name), cx.clone()))?;
        let recorder = shard.recorder();
        Ok(PyShard { recorder, shard: Arc::new(Running::new(shard, format!("shard {index}"))),
            phases: Default::default(), cx, current, index })
    }

    /// Ends the stage and returns its row as a dict. `strict=True` ends it failed when a shard's
    /// last attempt failed.
    #[pyo3(signature = (strict = false))]
    fn finish(&self, py: Python<'_>, #[pyo3(from_py_with = arg::strict)] strict: bool) -> PyResult<Py<PyDict>> {
        self.stage.end(py, move |s| if strict { s.finish_strict() } else { s.finish() }, stage_row)
    }

    /// Ends the stage as failed with `reason` and returns its row as a dict.
    fn fail(&self, py: Python<'_>, #[pyo3(from_py_with = arg::reason)] reason: String) -> PyResult<Py<PyDict>> {
        self.stage.end(py, move |s| s.fail(reason), stage_row)
    }

    /// A picklable handle on this stage for shards that run in other processes
    /// (`pipetel.remote.RemoteStage`): see that class for the keywords.
    #[pyo3(signature = (**kwargs))]
    fn remote<'py>(slf: &Bound<'py, Self>, kwargs: Option<&Bound<'py, PyDict>>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let class = py.import("pipetel.remote")?.getattr("RemoteStage")?;
        class.call_method("of", (slf,), kwargs)
    }

    /// The remote view of a stage another process owns (`Stage.remote()`'s handle makes one in
    /// each process that runs shards): its shards are children of that stage's span and report
    /// under its name and execution id; it emits no stage row.
    #[staticmethod]
    fn _remote_view(
        py: Python<'_>,
        #[pyo3(from_py_with = arg::name)] name: String,
        #[pyo3(from_py_with = arg::execution_id)] execution_id: Option<String>,
        traceparent: &str,
    ) -> PyResult<PyStage> {
        let cx = extract_traceparent("traceparent", traceparent)?;
        let Some(execution_id) = execution_id else {
            return Err(PyValueError::new_err("execution_id: a remote view needs the owner's execution id"));
        };
        let stage = guard(|| {
            pipetel::pipeline::Stage::remote(name.clone(), execution_id, traceparent)
                .map_err(|e| PyValueError::new_err(format!("traceparent: {e}")))
        })?;
        PyStage::new(py, stage, cx, name)
    }

    /// The cumulative report of this process's shards of a remote view (an encoded envelope
    /// from `source`), for the owner's `_ingest_remote`.
    fn _remote_report<'py>(&self, py: Python<'py>, source: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.stage.with(|stage| guard(|| Ok(stage.remote_report(source).encode())))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Counts a remote view's report in this stage's row and metrics: `"accepted"`, or
    /// `"superseded"` for a report not newer than the latest from its source. Raises
    /// `ValueError` naming what is wrong for a report refused whole.
    /// Decoding and checking take time linear in the report's size, without the GIL: other
    /// Python threads run meanwhile (the bytes object is immutable and outlives the call).
    fn _ingest_remote(&self, py: Python<'_>, report: &[u8]) -> PyResult<&'static str> {
        let stage = &self.stage;
        py.detach(|| {
            stage.with(|stage| {
                guard(|| match stage.ingest_remote(report) {
                    Ok(RemoteIngested::Superseded) => Ok("superseded"),
                    Ok(_) => Ok("accepted"),
                    Err(e) => Err(PyValueError::new_err(format!("report: {e}"))),
                })
            })
        })
    }

    /// The stage's answers as of now, as a dict: the finished shards' distribution
    /// (`shard_elapsed`, `shard_item_rate`: `{p0, p25, p50, p75, p90, max}` or `None`), `skew`,
    /// `skewed`, `stragglers`, `stalls`, `phases` (name to seconds, summed over its shards),
    /// `unphased_seconds` and `off_cpu_seconds` (`None` where CPU time is not measured).
    fn answers(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        let answers = self.stage.with(|stage| guard(|| Ok(stage.answers())))?;
        Ok(phase::answers_dict(py, &answers)?.unbind())
    }

    /// The stage name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// The execution id (generated when not given).
    #[getter]
    fn execution_id(&self) -> Option<String> {
        self.stage.with(|s| Ok(s.execution_id().to_owned())).ok()
    }

    fn __repr__(&self) -> String {
        format!("Stage(name={:?}, execution_id={:?})", self.name, self.execution_id())
    }
});

/// A running shard (`stage.shard(i)`). `record(items, nbytes)` is the hot path. A context
/// manager: `with` makes its span the current span and ends the shard on the way out, failed
/// (the exception as reason) when an exception leaves the block.
#[pyclass(module = "pipetel.pipeline", name = "Shard", frozen)]
pub struct PyShard {
    recorder: ShardRecorder,
    shard: Arc<Running<Shard>>,
    phases: phase::PhaseCache,
    cx: Context,
    current: Py<PySpan>,
    index: u32,
}

span_handle_methods!(PyShard, shard, "shard", else "finished" by PyShard::finish, {
    /// Adds processed items and bytes: two relaxed atomic adds, no lock. Both are ints in
    /// `0..2**64` (another type raises `TypeError`, an int out of range `ValueError`, each
    /// naming the argument).
    #[pyo3(signature = (items, nbytes = 0))]
    fn record(&self, #[pyo3(from_py_with = arg::items)] items: u64, #[pyo3(from_py_with = arg::nbytes)] nbytes: u64) {
        self.recorder.record(items, nbytes);
    }

    /// Adds to a user counter (`/`-separated key such as `zephyr/item_count`; an int or a finite
    /// float).
    fn add(&self, #[pyo3(from_py_with = arg::key)] key: String, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let value = counter_value(&format!("value: counter {key:?}"), value, true)?;
        let key = counter_key("key", &key)?;
        self.shard.with(|shard| {
            guard(|| shard.try_add(&key, value).map_err(|e| PyValueError::new_err(format!("value: {e}"))))
        })
    }

    /// Ends the shard as finished and returns its end row as a dict.
    fn finish(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        self.shard.end(py, Shard::finish, worker_row)
    }

    /// Ends the shard as failed with `reason` and returns its end row as a dict.
    fn fail(&self, py: Python<'_>, #[pyo3(from_py_with = arg::reason)] reason: String) -> PyResult<Py<PyDict>> {
        self.shard.end(py, move |s| s.fail(reason), worker_row)
    }

    /// A phase of this shard (`wait.input`, `wait.output`, `io` or a name of your own: 1 to 64
    /// of `a-z A-Z 0-9 _ . -`; another raises `ValueError` naming it). `with` it and the
    /// shard's time in the block counts in the phase; decorate a function with it and each call
    /// does. A phase inside another pauses the outer one.
    fn phase(&self, name: &Bound<'_, PyAny>) -> PyResult<Py<PyPhase>> {
        self.phases.get(&self.shard, self.index, name)
    }

    /// The phase the shard is in now (`None` outside any phase, or once it ended).
    #[getter]
    fn current_phase(&self) -> Option<String> {
        self.shard.with(|shard| Ok(shard.current_phase())).ok().flatten()
    }

    /// The shard index.
    #[getter]
    fn index(&self) -> u32 {
        self.index
    }

    fn __repr__(&self) -> String {
        format!("Shard(index={})", self.index)
    }
});

/// Adds the functions and classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(stage, m)?)?;
    m.add_class::<PyStage>()?;
    m.add_class::<PyShard>()?;
    m.add_class::<PyPhase>()?;
    m.add_class::<PyPhaseFunction>()?;
    stacks::register(m)
}
