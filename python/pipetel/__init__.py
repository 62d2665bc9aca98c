"""pipetel: OpenTelemetry-native telemetry for data and ML pipelines, on a Rust core.

The classes and functions are implemented in Rust (``pipetel._pipetel``); this module re-exports
them and adds the :func:`traced` decorator.

Start-up::

    guard = pipetel.init("tokenize", prometheus_port=9464)   # or: with pipetel.init(...):

:func:`init` installs the same providers and exporters as Rust ``pipetel::init``, reading the
file named by ``config_file`` (or ``PIPETEL_CONFIG``), then the ``OTEL_*``/``PIPETEL_*``
variables, then its keywords: each a configuration-file key with ``.`` written ``_``
(``exporters_metrics=["prometheus", "otlp"]``, ``pipeline_namespace="zephyr"``), which beat the
variables and the file. Once per process (a second call raises :class:`AlreadyInitialized`).
The :class:`Guard` flushes and shuts down at ``shutdown()``, at the end of a ``with`` block or at
interpreter exit; ``flush()`` and ``shutdown()`` release the GIL.

Spans: :func:`span` (``with pipetel.span("load", rows=3) as s:``) and :func:`traced` (sync and
async functions) make OTel spans with the tracer ``init`` installed. The current span lives in a
``contextvars.ContextVar``: asyncio tasks inherit it, a new thread starts without one (pass
``parent=``: a :class:`Span`, :class:`Stage`, :class:`Shard` or a W3C ``traceparent`` string,
which is also how a trace continues in another process; :func:`traceparent` gives the current
one). An exception leaving a span ends it with status error and goes on.

Stages: ``with pipetel.stage("tokenize", shards=16) as stage:`` then, on the thread running
each shard, ``with stage.shard(i) as shard: shard.record(items, nbytes)``: stage and worker rows
(log records and JSON lines), metrics and spans; an exception leaving a shard ends it failed with
the exception as reason and goes on. Marin Zephyr's ``StatsWriter`` is :mod:`pipetel.zephyr`.

mstar-style cumulative recorders: :class:`Family`, :class:`Counter`, :class:`Gauge`,
:class:`Histogram`, :class:`MetricSnapshot`, :func:`merge`, :class:`EdgeTransfers`,
:class:`Envelope` (byte-compatible with the Rust ``pipetel-recorders`` codec, so a Python worker
can feed a Rust ``SnapshotHub``). ``Counter``, ``Gauge``, ``Histogram`` and ``EdgeTransfers``
are per-thread recorders, as in Rust; using one from a thread other than the one that created it
raises ``ThreadError``. Take one recorder per thread and :func:`merge` their snapshots.

Logs: ``logging.getLogger().addHandler(pipetel.LoggingHandler())`` sends each record of Python's
``logging`` as an OTel log record through the log exporter :func:`init` installed, with the
trace and span ids of the current :func:`span` (see :class:`LoggingHandler`).

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

import functools
import inspect
import logging
import traceback

from ._pipetel import (
    AlreadyInitialized,
    ConfigError,
    Counter,
    DecodeError,
    EdgeTransfers,
    Envelope,
    Family,
    FamilyError,
    Gauge,
    Guard,
    Histogram,
    InitError,
    InternalError,
    MergeError,
    MetricSnapshot,
    PipetelError,
    RecordError,
    Shard,
    ShutdownError,
    SnapshotError,
    Span,
    Stage,
    ThreadError,
    __version__,
    _log_record,
    current_span,
    init,
    is_initialized,
    merge,
    span,
    stage,
    traceparent,
)


def traced(func=None, *, name=None, attributes=None):
    """Runs each call of a function (sync or ``async``) in a span named ``name`` (default: the
    function's qualified name) with ``attributes``; the span is a child of the current span.
    Use as ``@pipetel.traced`` or ``@pipetel.traced(name="load", attributes={"table": "t"})``.
    An exception ends the span with status error and goes on."""

    def decorate(fn):
        span_name = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "call")
        attrs = dict(attributes or {})
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with span(span_name, attributes=attrs):
                    return await fn(*args, **kwargs)

            return async_wrapper

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with span(span_name, attributes=attrs):
                return fn(*args, **kwargs)

        return wrapper

    if func is not None:
        if not callable(func):
            raise TypeError(f"func: traced expects a function, got {type(func).__name__}")
        return decorate(func)
    return decorate


class LoggingHandler(logging.Handler):
    """A :class:`logging.Handler` that sends each record as an OTel log record through the log
    exporter :func:`init` installed (``OTEL_LOGS_EXPORTER``, by default OTLP when an OTLP endpoint
    is configured), carrying the trace and span ids of the current :func:`span` (a record logged
    outside every span has none). Before ``init``, or with no log exporter, it drops records.

    Use ``logging.getLogger().addHandler(pipetel.LoggingHandler())``. Each record becomes:

    - severity from the level (``DEBUG``, ``INFO``, ``WARN``, ``ERROR``, ``FATAL`` for
      ``CRITICAL``; a level between two, such as 25, takes the lower one plus the remainder, up
      to ``INFO4``), severity text the standard name of that level;
    - body the message with its arguments (``record.getMessage()``), or ``self.format(record)``
      when the handler was given a formatter;
    - the time the record was created;
    - attributes ``logger.name``, ``code.file.path``, ``code.line.number``,
      ``code.function.name``, ``thread.id``, ``thread.name``, and with exception info
      ``exception.type``, ``exception.message``, ``exception.stacktrace``.

    ``emit`` never raises: an error goes to :meth:`logging.Handler.handleError`, which prints it
    to stderr while ``logging.raiseExceptions`` is true."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            body = self.format(record) if self.formatter is not None else record.getMessage()
            exc_type = exc_message = exc_stacktrace = None
            if record.exc_info and record.exc_info[0] is not None:
                etype, evalue, tb = record.exc_info
                module = getattr(etype, "__module__", "builtins")
                qualname = getattr(etype, "__qualname__", etype.__name__)
                exc_type = qualname if module == "builtins" else f"{module}.{qualname}"
                exc_message = str(evalue)
                exc_stacktrace = "".join(traceback.format_exception(etype, evalue, tb))
            _log_record(
                record.levelno,
                body,
                record.created,
                record.name,
                record.pathname,
                record.lineno,
                record.funcName,
                thread_id=record.thread,
                thread_name=record.threadName,
                exception_type=exc_type,
                exception_message=exc_message,
                exception_stacktrace=exc_stacktrace,
            )
        except Exception:
            self.handleError(record)


__all__ = [
    "AlreadyInitialized",
    "ConfigError",
    "Counter",
    "DecodeError",
    "EdgeTransfers",
    "Envelope",
    "Family",
    "FamilyError",
    "Gauge",
    "Guard",
    "Histogram",
    "InitError",
    "InternalError",
    "LoggingHandler",
    "MergeError",
    "MetricSnapshot",
    "PipetelError",
    "RecordError",
    "Shard",
    "ShutdownError",
    "SnapshotError",
    "Span",
    "Stage",
    "ThreadError",
    "__version__",
    "current_span",
    "init",
    "is_initialized",
    "merge",
    "span",
    "stage",
    "traceparent",
    "traced",
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

# --- stages across processes, Ray (py-scale) ---
from . import remote  # noqa: E402
