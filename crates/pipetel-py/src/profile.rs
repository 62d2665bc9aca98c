//! The Python side of the CPU profiler (`PIPETEL_PROFILE=cpu`): a thread that publishes the
//! Python stack of every thread running a shard, for the profiler's samples of those threads.
//!
//! The profiler's signal handler cannot read Python frames (they are interpreter objects), so
//! this thread reads them, under the GIL, as often as the profiler samples (`PIPETEL_PROFILE_HZ`),
//! and publishes each thread's stack as an id in the core's thread table. A sample of such a
//! thread is then that Python stack, followed by the native frames the thread ran below the
//! interpreter (pipetel's binding, or any other extension): one stack with both. A Python stack
//! is at most one period old when a sample takes it.
//!
//! Only threads that run a shard are read, and only while the profiler runs. Each code object
//! is named once (`qualname (file.py:first line)`) and kept alive by the cache, so its address
//! cannot be reused for another function while it names one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use pipetel::pipeline::profile as labels;
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Frames read per stack, innermost ones.
const MAX_FRAMES: usize = 128;

static RUNNING: AtomicBool = AtomicBool::new(false);
/// Set at interpreter exit: no more GIL work.
static STOPPED: AtomicBool = AtomicBool::new(false);

/// Starts the publishing thread when the profiler runs (once per profiler).
pub(crate) fn start(py: Python<'_>) -> PyResult<()> {
    let Some(hz) = labels::hz() else { return Ok(()) };
    if RUNNING.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let stop = wrap_pyfunction!(_stop_python_sampler, py)?;
    py.import("atexit")?.call_method1("register", (stop,))?;
    let period = Duration::from_secs_f64(1.0 / f64::from(hz.max(1)));
    let spawned = std::thread::Builder::new().name("pipetel-pystacks".into()).spawn(move || {
        let mut sampler = Sampler::default();
        while labels::is_on() && !STOPPED.load(Ordering::Acquire) {
            std::thread::sleep(period);
            let threads = labels::labelled_threads();
            if threads.is_empty() || STOPPED.load(Ordering::Acquire) {
                continue;
            }
            Python::attach(|py| sampler.publish(py, &threads));
        }
        RUNNING.store(false, Ordering::Release);
    });
    if spawned.is_err() {
        RUNNING.store(false, Ordering::Release);
    }
    Ok(())
}

/// Registered with `atexit`: the thread stops before the interpreter finalises.
#[pyfunction]
fn _stop_python_sampler() {
    STOPPED.store(true, Ordering::Release);
}

#[derive(Default)]
struct Sampler {
    /// OS thread id → `threading` ident.
    idents: HashMap<i32, Py<PyAny>>,
    /// Code object address → (the code object, kept alive; its name).
    names: HashMap<usize, (Py<PyAny>, String)>,
    /// Code object addresses, root first → the published stack id.
    stacks: HashMap<Vec<usize>, u32>,
}

impl Sampler {
    fn publish(&mut self, py: Python<'_>, threads: &[(i32, u32)]) {
        // A failure (the interpreter shutting down, a thread gone) skips this round only.
        let _ = self.try_publish(py, threads);
    }

    fn try_publish(&mut self, py: Python<'_>, threads: &[(i32, u32)]) -> PyResult<()> {
        if threads.iter().any(|(tid, _)| !self.idents.contains_key(tid)) {
            self.idents = crate::pipeline::stacks::thread_idents(py)?;
        }
        let frames = py.import("sys")?.call_method0("_current_frames")?;
        let frames = frames.cast::<PyDict>()?;
        for &(tid, _) in threads {
            let Some(ident) = self.idents.get(&tid) else { continue };
            let Some(frame) = frames.get_item(ident.bind(py))? else {
                labels::set_python_stack(tid, 0);
                continue;
            };
            let id = self.stack_id(frame)?;
            labels::set_python_stack(tid, id);
        }
        Ok(())
    }

    /// The id of the stack from `frame` to the root, interned on first sight.
    fn stack_id(&mut self, frame: Bound<'_, PyAny>) -> PyResult<u32> {
        let mut codes: Vec<Bound<'_, PyAny>> = Vec::new();
        let mut current = Some(frame);
        while let Some(f) = current {
            if codes.len() == MAX_FRAMES {
                break;
            }
            codes.push(f.getattr("f_code")?);
            let back = f.getattr("f_back")?;
            current = (!back.is_none()).then_some(back);
        }
        codes.reverse();
        let key: Vec<usize> = codes.iter().map(|c| c.as_ptr() as usize).collect();
        if let Some(id) = self.stacks.get(&key) {
            return Ok(*id);
        }
        let mut names = Vec::with_capacity(codes.len());
        for code in &codes {
            let addr = code.as_ptr() as usize;
            let name = match self.names.entry(addr) {
                std::collections::hash_map::Entry::Occupied(known) => known.get().1.clone(),
                std::collections::hash_map::Entry::Vacant(slot) => {
                    let name = code_name(code)?;
                    slot.insert((code.clone().unbind(), name.clone()));
                    name
                }
            };
            names.push(name);
        }
        let id = labels::intern_python_stack(names);
        self.stacks.insert(key, id);
        Ok(id)
    }
}

/// `qualname (file.py:first line)`.
fn code_name(code: &Bound<'_, PyAny>) -> PyResult<String> {
    // `co_qualname` is Python 3.11+; 3.10 has `co_name` only.
    let name = match code.getattr("co_qualname") {
        Ok(n) => n.extract::<String>()?,
        Err(_) => code.getattr("co_name")?.extract::<String>()?,
    };
    let file = code.getattr("co_filename")?.extract::<String>()?;
    let file = file.rsplit('/').next().unwrap_or(&file).to_string();
    let line = code.getattr("co_firstlineno")?.extract::<i64>()?;
    Ok(format!("{name} ({file}:{line})"))
}
