//! The Python stack of a stalled shard's thread, for its `stalled` row (`pipeline.stack`).
//!
//! The core's sampler thread asks for the stack ([`set_stack_reader`]) and must never block on
//! Python: the thread that stalled, or any other, may hold the GIL for as long as it likes. So
//! the GIL work happens on one dedicated thread (`pipetel-stacks`, started at the first read);
//! the sampler hands it the thread id and waits at most [`READ_TIMEOUT`] for the answer. While
//! a read that timed out is still waiting for the GIL, further reads give up at once: one stuck
//! thread, never a queue of them.
//!
//! [`set_stack_reader`]: pipetel::pipeline::answers::set_stack_reader

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender, SyncSender};
use std::sync::{Mutex, OnceLock, PoisonError};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// How long the sampler waits for a stack.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_secs(1);
/// Frames kept, innermost ones (`traceback.format_stack`'s `limit`).
pub(crate) const STACK_FRAMES: usize = 20;

/// A read in progress (set by the asker, cleared by the reader thread once it answered).
static BUSY: AtomicBool = AtomicBool::new(false);
/// Set at interpreter exit: no more GIL work (a thread taking the GIL while the interpreter
/// finalises may be stopped or hang).
static STOPPED: AtomicBool = AtomicBool::new(false);

type Request = (i32, SyncSender<Option<String>>);

/// The reader thread's inbox, made with the thread at the first read (`None`: it could not be
/// spawned).
static INBOX: OnceLock<Option<Mutex<Sender<Request>>>> = OnceLock::new();

fn inbox() -> Option<&'static Mutex<Sender<Request>>> {
    INBOX
        .get_or_init(|| {
            let (tx, rx) = mpsc::channel::<Request>();
            let spawned = std::thread::Builder::new().name("pipetel-stacks".into()).spawn(move || {
                for (tid, reply) in rx {
                    let stack = if STOPPED.load(Ordering::Acquire) { None } else { python_stack_of(tid) };
                    // The asker may have given up: its receiver is gone, which is fine.
                    let _ = reply.send(stack);
                    BUSY.store(false, Ordering::Release);
                }
            });
            spawned.ok().map(|_| Mutex::new(tx))
        })
        .as_ref()
}

/// The stack reader given to the core: the Python stack of OS thread `tid`, innermost frame
/// last, or `None` (no Python thread with that id, Python not answering within
/// [`READ_TIMEOUT`], a previous read still stuck, or the interpreter exiting).
pub(crate) fn read(tid: i32) -> Option<String> {
    read_within(tid, READ_TIMEOUT)
}

pub(crate) fn read_within(tid: i32, timeout: Duration) -> Option<String> {
    if STOPPED.load(Ordering::Acquire) || BUSY.swap(true, Ordering::AcqRel) {
        return None;
    }
    let Some(inbox) = inbox() else {
        BUSY.store(false, Ordering::Release);
        return None;
    };
    let (reply, answer) = mpsc::sync_channel(1);
    let sent = inbox.lock().unwrap_or_else(PoisonError::into_inner).send((tid, reply));
    if sent.is_err() {
        BUSY.store(false, Ordering::Release);
        return None;
    }
    // On a timeout BUSY stays set until the reader thread gets the GIL and answers.
    answer.recv_timeout(timeout).ok().flatten()
}

/// Takes the GIL (on the reader thread) and formats the stack of the Python thread whose
/// `native_id` is `tid`.
fn python_stack_of(tid: i32) -> Option<String> {
    Python::attach(|py| python_stack(py, tid).ok().flatten())
}

fn python_stack(py: Python<'_>, tid: i32) -> PyResult<Option<String>> {
    let Some(ident) = thread_idents(py)?.remove(&tid) else { return Ok(None) };
    let frames = py.import("sys")?.call_method0("_current_frames")?;
    let Some(frame) = frames.cast::<PyDict>()?.get_item(ident)? else { return Ok(None) };
    let lines = py.import("traceback")?.call_method1("format_stack", (frame, STACK_FRAMES))?;
    let text = PyString::new(py, "").call_method1("join", (lines,))?;
    Ok(Some(text.extract::<String>()?.trim_end().to_string()))
}

/// The `threading` ident (the key of `sys._current_frames()`) of every Python thread, by its OS
/// thread id (`native_id`).
pub(crate) fn thread_idents(py: Python<'_>) -> PyResult<HashMap<i32, Py<PyAny>>> {
    let mut idents = HashMap::new();
    for thread in py.import("threading")?.call_method0("enumerate")?.try_iter()? {
        let thread = thread?;
        let native = thread.getattr("native_id")?.extract::<Option<i64>>()?;
        if let Some(tid) = native.and_then(|n| i32::try_from(n).ok()) {
            idents.insert(tid, thread.getattr("ident")?.unbind());
        }
    }
    Ok(idents)
}

/// Registered with `atexit`: stack reads stop before the interpreter finalises.
#[pyfunction]
fn _stop_stack_reader() {
    STOPPED.store(true, Ordering::Release);
}

/// Installs the reader in the core and stops it at interpreter exit.
pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let stop = wrap_pyfunction!(_stop_stack_reader, m)?;
    m.py().import("atexit")?.call_method1("register", (stop,))?;
    pipetel::pipeline::answers::set_stack_reader(read);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_that_is_still_stuck_makes_the_next_one_give_up_at_once() {
        // Another read holds the slot (as a read whose thread waits for the GIL does).
        BUSY.store(true, Ordering::Release);
        let t0 = std::time::Instant::now();
        assert_eq!(read_within(1, Duration::from_secs(5)), None);
        assert!(t0.elapsed() < Duration::from_millis(100), "{:?}", t0.elapsed());
        BUSY.store(false, Ordering::Release);
    }
}
