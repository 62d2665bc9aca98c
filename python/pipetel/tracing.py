"""Spans and logs: OpenTelemetry traces and log records from Python, on pipetel's Rust tracer.

Map:

* :func:`span` (``with pipetel.span("load", rows=3) as s:``) and the :func:`traced` decorator
  (sync and ``async`` functions) make OTel spans with the tracer :func:`pipetel.init` installed;
  a :class:`Span` has ``set_attribute``, ``add_event``, ``fail``, ``end`` and its ids.
* :func:`current_span` and :func:`traceparent`: the current span and its W3C ``traceparent``.
* :class:`LoggingHandler`: Python ``logging`` records as OTel log records, with the trace and
  span ids of the current span.

The current span lives in a ``contextvars.ContextVar``: asyncio tasks inherit it, a new thread
starts without one (pass ``parent=``: a :class:`Span`, a :class:`pipetel.pipeline.Stage` or
:class:`pipetel.pipeline.Shard`, or a W3C ``traceparent`` string, which is also how a trace
continues in another process). An exception leaving a span ends it with status error and goes
on.

Every name here is also at the top level (``pipetel.span``, ``pipetel.traced``...).
"""

import functools
import inspect
import logging
import traceback
from typing import Any, Callable, Dict, Optional, TypeVar, overload

from ._pipetel import Span, _log_record, current_span, span, traceparent

__all__ = ["LoggingHandler", "Span", "current_span", "span", "traced", "traceparent"]


_F = TypeVar("_F", bound=Callable[..., Any])


@overload
def traced(func: _F, *, name: Optional[str] = None, attributes: Optional[Dict[str, Any]] = None) -> _F: ...
@overload
def traced(
    func: None = None, *, name: Optional[str] = None, attributes: Optional[Dict[str, Any]] = None
) -> Callable[[_F], _F]: ...
def traced(
    func: Optional[_F] = None, *, name: Optional[str] = None, attributes: Optional[Dict[str, Any]] = None
) -> Any:
    """Runs each call of a function (sync or ``async``) in a span named ``name`` (default: the
    function's qualified name) with ``attributes``; the span is a child of the current span.
    Use as ``@pipetel.traced`` or ``@pipetel.traced(name="load", attributes={"table": "t"})``.
    An exception ends the span with status error and goes on."""

    def decorate(fn: _F) -> _F:
        span_name = name or getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "call")
        attrs = dict(attributes or {})
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args, **kwargs):
                with span(span_name, attributes=attrs):
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with span(span_name, attributes=attrs):
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    if func is not None:
        if not callable(func):
            raise TypeError(f"func: traced expects a function, got {type(func).__name__}")
        return decorate(func)
    return decorate


class LoggingHandler(logging.Handler):
    """A :class:`logging.Handler` that sends each record as an OTel log record through the log
    exporter :func:`pipetel.init` installed (``OTEL_LOGS_EXPORTER``, by default OTLP when an OTLP
    endpoint is configured), carrying the trace and span ids of the current :func:`span` (a
    record logged outside every span has none). Before ``init``, or with no log exporter, it
    drops records.

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
