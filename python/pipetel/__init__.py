"""pipetel: OpenTelemetry-native telemetry for data and ML pipelines, on a Rust core.

The package is organised by concept; the names most programs need are also here at the top:

* :mod:`pipetel.registry`: Prometheus-style metrics. ``pipetel.Counter``, ``Gauge``,
  ``Histogram`` and ``Summary`` are the registry's, declared as in prometheus_client
  (``Counter("requests", "Requests served", ["method"]).labels("GET").inc()``).
* :mod:`pipetel.pipeline`: stages and workers. ``with pipetel.stage("tokenize", shards=16) as
  stage:``, then ``with stage.shard(i) as shard: shard.record(items, nbytes)`` on the thread
  running each shard: stage and worker rows, metrics and spans. Explicit rows:
  :class:`pipetel.pipeline.RowWriter`.
* :mod:`pipetel.tracing`: spans and logs. :func:`span`, :func:`traced`, :func:`current_span`,
  :func:`traceparent`, :class:`LoggingHandler`.
* :mod:`pipetel.recorders`: mstar-style cumulative per-thread recorders (``Family``,
  ``recorders.Counter`` / ``Gauge`` / ``Histogram``, ``MetricSnapshot``, ``merge``,
  ``EdgeTransfers``, ``Envelope``) and the :class:`SnapshotHub` that merges workers' snapshots.
* The systems pipetel replaces, under their own names: :mod:`pipetel.zephyr` (Marin Zephyr's
  ``StatsWriter``), :mod:`pipetel.telefuser` (TeleFuser's ``telefuser.metrics``),
  :mod:`pipetel.mstar` (mstar's ``observability.recorders``).

Start-up::

    guard = pipetel.init("tokenize", prometheus_port=9464)   # or: with pipetel.init(...):

:func:`init` installs the same providers and exporters as Rust ``pipetel::init``, reading the
file named by ``config_file`` (or ``PIPETEL_CONFIG``), then the ``OTEL_*``/``PIPETEL_*``
variables, then its keywords: each a configuration-file key with ``.`` written ``_``
(``exporters_metrics=["prometheus", "otlp"]``, ``pipeline_namespace="zephyr"``), which beat the
variables and the file. Once per process (a second call raises :class:`AlreadyInitialized`).
``span_exporters=``, ``log_exporters=`` and ``metric_exporters=`` take exporters written for the
OpenTelemetry Python SDK (``InMemorySpanExporter``, the OTLP exporters, your own), which get
pipetel's spans, log records and metrics as the SDK's own objects, beside the configured
exporters or instead of them (``exporters_traces=["none"]``...).
The :class:`Guard` flushes and shuts down at ``shutdown()``, at the end of a ``with`` block or at
interpreter exit; ``flush()`` and ``shutdown()`` release the GIL.

Web services: :class:`pipetel.asgi.Middleware` and :class:`pipetel.wsgi.Middleware` give each
HTTP request a server span and the OTel HTTP server metrics; :func:`prometheus_text` is the pull
endpoint's whole page, for an application's own ``/metrics`` route.

Errors: every exception pipetel raises is a :class:`PipetelError` (settings:
:class:`ConfigError`; start-up: :class:`InitError`; flush and shutdown: :class:`ShutdownError`),
or a ``TypeError``/``ValueError`` naming the argument; a Rust panic becomes
:class:`InternalError`.

Fork safety: pipetel's exporters run on background threads, which a forked child does not have.
Call :func:`init` in each process that exports, after forking (``multiprocessing`` with the
``spawn`` or ``forkserver`` start method, or a worker initializer); in a child forked after
``init``, do not use the inherited guard, spans or stages (their data would not be exported),
call nothing but ``os._exit``-bound work or exec, and export from the parent or a fresh process.
"""

from . import mstar, pipeline, recorders, registry, telefuser, tracing, zephyr

# Start-up and errors.
from ._pipetel import (
    AlreadyInitialized,
    ConfigError,
    DecodeError,
    FamilyError,
    Guard,
    HubError,
    InitError,
    InternalError,
    MergeError,
    PipetelError,
    RecordError,
    ShutdownError,
    SnapshotError,
    ThreadError,
    __version__,
    init,
    is_initialized,
)

# Stages and workers.
from .pipeline import Shard, Stage, stage

# The metric registry (prometheus_client's meaning of these names).
from .registry import (
    Counter,
    Gauge,
    Histogram,
    InvalidMetricError,
    InvalidValueError,
    MetricAlreadyRegisteredError,
    MetricNotFoundError,
    MetricRegistry,
    Summary,
    UnsupportedOperationError,
)

# Recorders and the hub (the recorders' Counter, Gauge, Histogram: pipetel.recorders).
from .recorders import (
    EdgeTransfers,
    Envelope,
    Family,
    MetricSnapshot,
    SnapshotHub,
    SourceStatus,
    StreamReader,
    TransportReport,
    merge,
)

# Spans and logs.
from .tracing import LoggingHandler, Span, current_span, span, traced, traceparent

__all__ = [
    # modules
    "mstar",
    "pipeline",
    "recorders",
    "registry",
    "telefuser",
    "tracing",
    "zephyr",
    # start-up and errors
    "AlreadyInitialized",
    "ConfigError",
    "DecodeError",
    "FamilyError",
    "Guard",
    "HubError",
    "InitError",
    "InternalError",
    "MergeError",
    "PipetelError",
    "RecordError",
    "ShutdownError",
    "SnapshotError",
    "ThreadError",
    "__version__",
    "init",
    "is_initialized",
    # stages and workers
    "Shard",
    "Stage",
    "stage",
    # the metric registry
    "Counter",
    "Gauge",
    "Histogram",
    "InvalidMetricError",
    "InvalidValueError",
    "MetricAlreadyRegisteredError",
    "MetricNotFoundError",
    "MetricRegistry",
    "Summary",
    "UnsupportedOperationError",
    # recorders and the hub
    "EdgeTransfers",
    "Envelope",
    "Family",
    "MetricSnapshot",
    "SnapshotHub",
    "SourceStatus",
    "StreamReader",
    "TransportReport",
    "merge",
    # spans and logs
    "LoggingHandler",
    "Span",
    "current_span",
    "span",
    "traced",
    "traceparent",
]

# The pull endpoint's page for an application's own /metrics route; ASGI/WSGI middleware.
from . import asgi, wsgi  # noqa: E402
from ._pipetel import prometheus_text  # noqa: E402

__all__ += ["prometheus_text"]

# Stages across processes (a picklable handle per stage), Ray, multi-worker servers.
from . import remote  # noqa: E402
