//! Binding of `pipetel::hub::SnapshotHub`: a Python process hosts a hub that takes the envelopes
//! of worker processes (Python or Rust), keeps the latest per source and exports their sum
//! through the meters `pipetel.init` installed (before `init`: the global meter provider, and
//! the instruments move to `init`'s providers when it runs).
//!
//! Reading a stream (`read_stream`, `spawn_reader`) happens in Rust with the GIL released.

use std::fs::File;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use pipetel::hub::{HistogramExport, HubConfig, HubError as RustHubError, Ingested, SnapshotHub, TransportReport};
use pyo3::create_exception;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::args::{arg, type_name};
use crate::errors::{guard, to_py, DecodeError, PipetelError};
use crate::recorders::{PyEnvelope, PySnapshot};

create_exception!(
    pipetel,
    HubError,
    PipetelError,
    "An envelope the snapshot hub refused (a family clash, a repeated family, too many sources or families)."
);

fn outcome(result: Result<Ingested, RustHubError>) -> PyResult<&'static str> {
    match result {
        Ok(Ingested::Accepted) => Ok("accepted"),
        Ok(Ingested::Restarted) => Ok("restarted"),
        Ok(Ingested::Superseded) => Ok("superseded"),
        Ok(Ingested::Duplicate) => Ok("duplicate"),
        Ok(_) => Ok("accepted"),
        Err(e @ RustHubError::Decode(_)) => Err(to_py::<DecodeError>(e)),
        Err(e) => Err(to_py::<HubError>(e)),
    }
}

/// What a stream reader did: envelopes received, accepted (restarts included), restarts,
/// ignored (late or repeated), refused (invalid), and the stream error that ended it, if any.
#[pyclass(module = "pipetel.recorders", name = "TransportReport", frozen, get_all)]
pub struct PyTransportReport {
    received: u64,
    accepted: u64,
    restarts: u64,
    ignored: u64,
    refused: u64,
    error: Option<String>,
}

impl From<TransportReport> for PyTransportReport {
    fn from(r: TransportReport) -> Self {
        PyTransportReport {
            received: r.received,
            accepted: r.accepted,
            restarts: r.restarts,
            ignored: r.ignored,
            refused: r.refused,
            error: r.error.map(|e| e.to_string()),
        }
    }
}

#[pymethods]
impl PyTransportReport {
    fn __repr__(&self) -> String {
        format!(
            "TransportReport(received={}, accepted={}, restarts={}, ignored={}, refused={}, error={})",
            self.received,
            self.accepted,
            self.restarts,
            self.ignored,
            self.refused,
            self.error.as_deref().map_or_else(|| "None".to_owned(), |e| format!("{e:?}"))
        )
    }
}

/// A source as the hub sees it: id, latest sequence, seconds since its latest accepted
/// envelope, whether it is left out of gauges, restarts recognised.
#[pyclass(module = "pipetel.recorders", name = "SourceStatus", frozen, get_all)]
pub struct PySourceStatus {
    source: String,
    sequence: u64,
    silent_for: f64,
    stale: bool,
    restarts: u64,
}

#[pymethods]
impl PySourceStatus {
    fn __repr__(&self) -> String {
        format!(
            "SourceStatus(source={:?}, sequence={}, silent_for={:.3}, stale={}, restarts={})",
            self.source, self.sequence, self.silent_for, self.stale, self.restarts
        )
    }
}

/// A stream reader running on a Rust thread; `join()` waits for the stream to end.
#[pyclass(module = "pipetel.recorders", name = "StreamReader", frozen)]
pub struct PyStreamReader(Mutex<Option<JoinHandle<TransportReport>>>);

#[pymethods]
impl PyStreamReader {
    /// Waits (GIL released) until the stream ends; returns the report. A second call raises.
    fn join(&self, py: Python<'_>) -> PyResult<PyTransportReport> {
        let handle = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let Some(handle) = handle else {
            return Err(PyValueError::new_err("this reader was already joined"));
        };
        match py.detach(|| handle.join()) {
            Ok(report) => Ok(report.into()),
            Err(_) => Err(crate::errors::InternalError::new_err("pipetel panicked: the stream reader thread panicked")),
        }
    }

    /// Whether the stream ended (the reader thread finished).
    fn is_finished(&self) -> bool {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().is_none_or(JoinHandle::is_finished)
    }
}

/// The file descriptor of `stream`: an `int`, or an object with `fileno()`.
fn raw_fd(stream: &Bound<'_, PyAny>) -> PyResult<RawFd> {
    if let Ok(fd) = stream.extract::<RawFd>() {
        return Ok(fd);
    }
    if let Ok(fileno) = stream.getattr("fileno") {
        if let Ok(fd) = fileno.call0().and_then(|f| f.extract::<RawFd>()) {
            return Ok(fd);
        }
    }
    Err(PyTypeError::new_err(format!(
        "stream must be bytes, a file descriptor (int) or an object with fileno(), got {}",
        type_name(stream)
    )))
}

/// A `File` of its own over a duplicate of `fd` (the caller's descriptor stays open and theirs).
// The one `unsafe` of the binding: a descriptor handed over from Python as a number.
#[allow(unsafe_code)]
fn dup_file(fd: RawFd) -> PyResult<File> {
    if fd < 0 {
        return Err(PyValueError::new_err(format!("stream: invalid file descriptor {fd}")));
    }
    // SAFETY: the borrow lives only for the duplication below, within this call, while the
    // caller's stream object (or the number it passed) names the descriptor under the GIL;
    // `try_clone_to_owned` (F_DUPFD_CLOEXEC) fails with EBADF for a number that is not an open
    // descriptor, so nothing reads or writes through a closed one.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let owned: OwnedFd = borrowed
        .try_clone_to_owned()
        .map_err(|e| PyValueError::new_err(format!("stream: file descriptor {fd}: {e}")))?;
    Ok(File::from(owned))
}

/// Keeps the latest cumulative snapshots per source and exports their sum (see the Rust
/// `pipetel::hub` docs for the rules: latest per source, restarts carried forward, stale
/// sources left out of gauges, untrusted bytes validated). Thread-safe.
#[pyclass(module = "pipetel.recorders", name = "SnapshotHub", frozen)]
pub struct PySnapshotHub(SnapshotHub);

#[pymethods]
impl PySnapshotHub {
    #[new]
    #[pyo3(
        signature = (*, stale_after = 60.0, max_sources = None, max_families = None, histograms = "counters".to_owned()),
        text_signature = "(*, stale_after=60.0, max_sources=None, max_families=None, histograms=\"counters\")"
    )]
    fn new(
        #[pyo3(from_py_with = arg::stale_after)] stale_after: f64,
        #[pyo3(from_py_with = arg::max_sources)] max_sources: Option<usize>,
        #[pyo3(from_py_with = arg::max_families)] max_families: Option<usize>,
        #[pyo3(from_py_with = arg::histograms)] histograms: String,
    ) -> PyResult<Self> {
        guard(|| {
            let stale = match Duration::try_from_secs_f64(stale_after) {
                Ok(d) if !d.is_zero() => d,
                _ => {
                    return Err(PyValueError::new_err(format!(
                        "stale_after must be a positive number of seconds, got {stale_after}"
                    )))
                }
            };
            let histograms = match histograms.as_str() {
                "counters" => HistogramExport::Counters,
                "snapshot_only" => HistogramExport::SnapshotOnly,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "histograms must be \"counters\" or \"snapshot_only\", got {other:?}"
                    )))
                }
            };
            let mut config = HubConfig::default().with_stale_after(stale).with_histograms(histograms);
            if let Some(n) = max_sources {
                config = config.with_max_sources(n);
            }
            if let Some(n) = max_families {
                config = config.with_max_families(n);
            }
            Ok(PySnapshotHub(SnapshotHub::new(config)))
        })
    }

    /// Decodes and ingests one envelope's bytes (`Envelope.encode()`, a frame's payload).
    /// Returns `"accepted"`, `"restarted"`, `"superseded"` or `"duplicate"`; raises
    /// `DecodeError` for invalid bytes and `HubError` for a refused envelope. Decodes without
    /// the GIL (the bytes object is immutable and outlives the call).
    fn ingest_bytes(&self, #[pyo3(from_py_with = arg::data)] data: Bound<'_, PyBytes>) -> PyResult<&'static str> {
        let (bytes, hub) = (data.as_bytes(), &self.0);
        data.py().detach(|| guard(|| outcome(hub.ingest_bytes(bytes))))
    }

    /// Ingests one envelope; as `ingest_bytes`. With `new_stream=True` the envelope is the first
    /// of its source on a new stream (a restarted source whose sequence started again is then
    /// recognised at once).
    #[pyo3(signature = (envelope, *, new_stream = false))]
    fn ingest(
        &self,
        #[pyo3(from_py_with = arg::envelope)] envelope: PyEnvelope,
        #[pyo3(from_py_with = arg::new_stream)] new_stream: bool,
    ) -> PyResult<&'static str> {
        guard(|| {
            let envelope = envelope.into_inner();
            outcome(if new_stream { self.0.ingest_on_new_stream(envelope) } else { self.0.ingest(envelope) })
        })
    }

    /// Reads length-prefixed frames (`Envelope.encode_frame()`) until the stream ends and
    /// ingests each, with the GIL released; returns the report. `stream` is `bytes` (frames in
    /// memory), a file descriptor or an object with `fileno()` (a pipe, a socket, a file; read
    /// through a duplicate of its descriptor, which stays open).
    fn read_stream(&self, py: Python<'_>, stream: &Bound<'_, PyAny>) -> PyResult<PyTransportReport> {
        if let Ok(data) = stream.extract::<Vec<u8>>() {
            let hub = self.0.clone();
            return guard(|| Ok(py.detach(|| hub.read_stream(data.as_slice())).into()));
        }
        let file = dup_file(raw_fd(stream)?)?;
        let hub = self.0.clone();
        guard(|| Ok(py.detach(|| hub.read_stream(file)).into()))
    }

    /// Starts a Rust thread reading frames from `stream` (a file descriptor or an object with
    /// `fileno()`) until it ends; returns a `StreamReader` whose `join()` gives the report.
    fn spawn_reader(&self, stream: &Bound<'_, PyAny>) -> PyResult<PyStreamReader> {
        let file = dup_file(raw_fd(stream)?)?;
        guard(|| {
            let handle = self
                .0
                .spawn_reader(file)
                .map_err(|e| PipetelError::new_err(format!("cannot start a stream reader thread: {e}")))?;
            Ok(PyStreamReader(Mutex::new(Some(handle))))
        })
    }

    /// The merged view now, one `MetricSnapshot` per family in name order (the values the hub
    /// exports).
    fn snapshot(&self) -> PyResult<Vec<PySnapshot>> {
        guard(|| Ok(self.0.snapshot().into_iter().map(PySnapshot).collect()))
    }

    /// The sources seen so far, in id order.
    fn sources(&self) -> PyResult<Vec<PySourceStatus>> {
        guard(|| {
            Ok(self
                .0
                .sources()
                .into_iter()
                .map(|s| PySourceStatus {
                    source: s.source,
                    sequence: s.sequence,
                    silent_for: s.silent_for.as_secs_f64(),
                    stale: s.stale,
                    restarts: s.restarts,
                })
                .collect())
        })
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.0)
    }
}

/// Adds the hub classes and `HubError` to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("HubError", m.py().get_type::<HubError>())?;
    m.add_class::<PySnapshotHub>()?;
    m.add_class::<PyStreamReader>()?;
    m.add_class::<PyTransportReport>()?;
    m.add_class::<PySourceStatus>()?;
    Ok(())
}
