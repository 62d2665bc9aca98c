"""pipetel: OpenTelemetry-native telemetry for data and ML pipelines, on a Rust core.

The classes and functions are implemented in Rust (``pipetel._pipetel``); this module only
re-exports them. What is bound so far:

* mstar-style cumulative recorders: :class:`Family`, :class:`Counter`, :class:`Gauge`,
  :class:`Histogram`, :class:`MetricSnapshot`, :func:`merge`, :class:`EdgeTransfers`,
  :class:`Envelope` (byte-compatible with the Rust ``pipetel-recorders`` codec, so a Python
  worker can feed a Rust ``SnapshotHub``);
* the :class:`PipetelError` exception hierarchy.

Thread-safety: ``Counter``, ``Gauge``, ``Histogram`` and ``EdgeTransfers`` are per-thread
recorders, as in Rust; using one from a thread other than the one that created it raises
``ThreadError``. Take one recorder per thread and :func:`merge` their snapshots.
"""

from ._pipetel import (
    Counter,
    DecodeError,
    EdgeTransfers,
    Envelope,
    Family,
    FamilyError,
    Gauge,
    Histogram,
    InternalError,
    MergeError,
    MetricSnapshot,
    PipetelError,
    RecordError,
    SnapshotError,
    ThreadError,
    __version__,
    merge,
)

__all__ = [
    "Counter",
    "DecodeError",
    "EdgeTransfers",
    "Envelope",
    "Family",
    "FamilyError",
    "Gauge",
    "Histogram",
    "InternalError",
    "MergeError",
    "MetricSnapshot",
    "PipetelError",
    "RecordError",
    "SnapshotError",
    "ThreadError",
    "__version__",
    "merge",
]

# TeleFuser's metrics API (`telefuser.metrics`): `pipetel.telefuser`, and its exceptions.
from . import telefuser  # noqa: E402
from ._pipetel import (  # noqa: E402
    InvalidMetricError,
    InvalidValueError,
    MetricAlreadyRegisteredError,
    MetricNotFoundError,
    UnsupportedOperationError,
)

__all__ += [
    "InvalidMetricError",
    "InvalidValueError",
    "MetricAlreadyRegisteredError",
    "MetricNotFoundError",
    "UnsupportedOperationError",
]

# --- mstar recorders and the snapshot hub (py-peers) ---
from . import mstar  # noqa: E402
from ._pipetel import HubError, SnapshotHub, SourceStatus, StreamReader, TransportReport  # noqa: E402

__all__ += ["HubError", "SnapshotHub", "SourceStatus", "StreamReader", "TransportReport"]
