"""The metric registry: Prometheus-style counters, gauges, histograms and summaries with labels,
on the Rust ``pipetel::registry`` (the same metrics reach the pull endpoint and every OTLP
exporter :func:`pipetel.init` installed).

Map:

* :class:`Counter`, :class:`Gauge`, :class:`Histogram`, :class:`Summary`: metrics as
  prometheus_client declares them, ``Counter(name, documentation, labelnames=(), namespace="",
  subsystem="", unit="", registry=REGISTRY)``; ``.labels(*values)`` or ``.labels(**values)``
  gives one series, and a metric without label names records directly (``c.inc()``,
  ``g.set(3)``, ``h.observe(0.2)``, ``with h.time():``).
* The series those give, one pre-resolved series of the Rust registry each:
  :class:`CounterSeries` (``inc``, ``value``), :class:`GaugeSeries` (``inc``, ``dec``, ``set``,
  ``set_to_current_time``, ``value``), :class:`HistogramSeries` (``observe``, ``count``, ``sum``,
  ``bucket_counts``), :class:`SummarySeries` (``observe``, ``count``, ``sum``,
  ``quantile_values``). ``counter.inc()`` is one atomic add behind a method bound to Rust.
* :class:`MetricRegistry`: a registry of one namespace (name prefix) with
  ``counter`` / ``gauge`` / ``histogram`` / ``summary`` (each returns one series; ``labels=``
  picks it), ``get_prometheus_format()`` (this registry alone, in the text format),
  ``add_custom_collector``, ``list_metrics``, ``reset_all``, ``clear``. :data:`REGISTRY` is the
  one without a namespace, where the classes above register by default. :class:`MetricLabel` is
  one label (a name and a value).
* The errors: :class:`MetricAlreadyRegisteredError` (one name, another kind or other label
  names), :class:`InvalidMetricError`, :class:`InvalidValueError` (NaN, a negative counter
  increment), :class:`UnsupportedOperationError`, :class:`MetricNotFoundError`; all are
  :class:`pipetel.PipetelError`.

Counters are exposed with ``_total`` (``Counter("requests", ...)`` is ``requests_total``), as
Prometheus and OpenMetrics require. The per-thread, snapshot-shipping recorders of the same
names are another concept: :mod:`pipetel.recorders`. TeleFuser's names for this module are
:mod:`pipetel.telefuser`.
"""

import functools
import threading
import time
from typing import Any, Callable, Dict, Generic, Iterable, Literal, Optional, Sequence, Tuple, Type, TypeVar, Union

from ._pipetel import (
    InvalidMetricError,
    InvalidValueError,
    MetricAlreadyRegisteredError,
    MetricNotFoundError,
    UnsupportedOperationError,
)
from ._pipetel import _TfCounter as CounterSeries
from ._pipetel import _TfGauge as GaugeSeries
from ._pipetel import _TfHistogram as HistogramSeries
from ._pipetel import _TfMetricLabel as MetricLabel
from ._pipetel import _TfMetricRegistry as MetricRegistry
from ._pipetel import _TfSummary as SummarySeries

__all__ = [
    "REGISTRY",
    "Counter",
    "CounterSeries",
    "Gauge",
    "GaugeSeries",
    "Histogram",
    "HistogramSeries",
    "InvalidMetricError",
    "InvalidValueError",
    "MetricAlreadyRegisteredError",
    "MetricLabel",
    "MetricNotFoundError",
    "MetricRegistry",
    "Summary",
    "SummarySeries",
    "UnsupportedOperationError",
]

#: The process-wide registry without a namespace: where :class:`Counter`, :class:`Gauge`,
#: :class:`Histogram` and :class:`Summary` register unless given ``registry=``.
REGISTRY = MetricRegistry("")


class _Timer:
    """Observes the seconds a ``with`` block or each call of a decorated function took."""

    def __init__(self, observe: Callable[[float], None]) -> None:
        self._observe = observe
        self._start = 0.0

    def __enter__(self) -> "_Timer":
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._observe(max(time.perf_counter() - self._start, 0.0))

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with _Timer(self._observe):
                return func(*args, **kwargs)

        return wrapper


def _str_arg(what: str, value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return value


#: The series type of a metric class (what ``labels(...)`` returns).
_S = TypeVar("_S", bound=Union[CounterSeries, GaugeSeries, HistogramSeries, SummarySeries])


class _Metric(Generic[_S]):
    """What the four metric classes share: the name, the label names and the series."""

    _kind = ""
    _type_suffix = ""
    # Methods that record on the series of a metric without label names.
    _direct = ()  # type: Tuple[str, ...]

    def __init__(
        self,
        name: str,
        documentation: str = "",
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Optional[MetricRegistry] = None,
    ) -> None:
        if not isinstance(name, str):
            hint = ""
            if type(name).__name__ == "Family":
                hint = (
                    f"; pipetel.{type(self).__name__} is the registry's {self._kind} "
                    f"({type(self).__name__}(name, documentation, labelnames), as in prometheus_client), "
                    f"the per-thread recorder of a Family is pipetel.recorders.{type(self).__name__}"
                )
            raise TypeError(f"name must be a str, got {type(name).__name__}{hint}")
        documentation = _str_arg("documentation", documentation)
        for what, part in (("namespace", namespace), ("subsystem", subsystem), ("unit", unit)):
            _str_arg(what, part)
        if isinstance(labelnames, (str, bytes)):
            raise TypeError(f"labelnames must be a sequence of str, got a {type(labelnames).__name__}")
        labelnames = tuple(labelnames)
        for label in labelnames:
            _str_arg("labelnames: each label name", label)
        if len(set(labelnames)) != len(labelnames):
            raise ValueError(f"labelnames: duplicate label names in {list(labelnames)}")
        if registry is not None and not isinstance(registry, MetricRegistry):
            raise TypeError(f"registry must be a MetricRegistry, got {type(registry).__name__}")
        full = "_".join(part for part in (namespace, subsystem, name) if part)
        if self._type_suffix and full.endswith(self._type_suffix):
            full = full[: -len(self._type_suffix)]
        if unit and not full.endswith("_" + unit):
            full = f"{full}_{unit}"
        self._name = full
        self._documentation = documentation
        self._labelnames = labelnames
        self._registry = REGISTRY if registry is None else registry
        self._children: Dict[Tuple[str, ...], Any] = {}
        self._lock = threading.Lock()
        if not labelnames:
            # No labels: the one series is made now, and its methods are this object's own
            # (bound to Rust, no Python frame in between).
            series = self._series(())
            for method in self._direct:
                setattr(self, method, getattr(series, method))

    def _register(self, labels: Dict[str, str]) -> _S:
        raise NotImplementedError

    def _series(self, values: Tuple[str, ...]) -> _S:
        with self._lock:
            series = self._children.get(values)
            if series is None:
                series = self._register(dict(zip(self._labelnames, values)))
                self._children[values] = series
            return series

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> _S:
        """The series of these label values, by position (``labels("GET", "200")``) or by name
        (``labels(method="GET", code="200")``); values are turned into str. Made on the first
        call, the same series after."""
        if labelvalues and not labelkwargs:
            # The common call, with the values as strs: one dict read.
            series = self._children.get(labelvalues)
            if series is not None:
                return series
        if not self._labelnames:
            raise ValueError(f"{self._kind} {self._name!r} has no label names; record on it directly")
        if labelvalues and labelkwargs:
            raise ValueError("labels: give the label values by position or by name, not both")
        if labelkwargs:
            if sorted(labelkwargs) != sorted(self._labelnames):
                raise ValueError(f"labels: expected the label names {list(self._labelnames)}, got {sorted(labelkwargs)}")
            labelvalues = tuple(labelkwargs[n] for n in self._labelnames)
        if len(labelvalues) != len(self._labelnames):
            raise ValueError(
                f"labels: {self._kind} {self._name!r} has {len(self._labelnames)} label names "
                f"{list(self._labelnames)}, got {len(labelvalues)} values"
            )
        return self._series(tuple(str(v) for v in labelvalues))

    def _only_series(self) -> _S:
        if self._labelnames:
            raise ValueError(
                f"{self._kind} {self._name!r} has label names {list(self._labelnames)}: "
                "record on .labels(...) instead"
            )
        return self._series(())

    @property
    def name(self) -> str:
        """The name given with its namespace, subsystem and unit (a counter without ``_total``)."""
        return self._name

    @property
    def documentation(self) -> str:
        """The help text."""
        return self._documentation

    @property
    def labelnames(self) -> Tuple[str, ...]:
        """The label names, in the order ``labels(...)`` takes their values."""
        return self._labelnames

    @property
    def registry(self) -> MetricRegistry:
        """The registry the series are registered in."""
        return self._registry

    def __repr__(self) -> str:
        name, labelnames = getattr(self, "_name", None), list(getattr(self, "_labelnames", ()))
        return f"{type(self).__name__}(name={name!r}, labelnames={labelnames!r})"


class Counter(_Metric[CounterSeries]):
    """A counter, as prometheus_client declares it: ``Counter(name, documentation,
    labelnames=(), namespace="", subsystem="", unit="", registry=REGISTRY)``.

    ``c.inc(amount=1.0)`` (without label names) or ``c.labels(...).inc()`` (a
    :class:`CounterSeries`); :meth:`count_exceptions` counts the exceptions a block raises. A
    trailing ``_total`` in the name is dropped and added back in the exposition. A negative
    amount or NaN raises :class:`InvalidValueError`."""

    _kind = "counter"
    _type_suffix = "_total"
    _direct = ("inc",)

    def _register(self, labels: Dict[str, str]) -> CounterSeries:
        return self._registry.counter(self._name, self._documentation, labels or None)

    def inc(self, amount: float = 1.0) -> None:
        """Adds ``amount`` (default 1) to the counter without label names."""
        self._only_series().inc(amount)

    def count_exceptions(self, exception: Type[BaseException] = Exception) -> "_ExceptionCounter":
        """A context manager and decorator that adds 1 each time its block raises ``exception``
        (the exception goes on)."""
        return _ExceptionCounter(self._only_series(), exception)


class _ExceptionCounter:
    def __init__(self, series: CounterSeries, exception: Type[BaseException]) -> None:
        self._series = series
        self._exception = exception

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Literal[False]:
        if exc_type is not None and issubclass(exc_type, self._exception):
            self._series.inc()
        return False

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper


class Gauge(_Metric[GaugeSeries]):
    """A gauge, as prometheus_client declares it: ``Gauge(name, documentation, labelnames=(),
    namespace="", subsystem="", unit="", registry=REGISTRY)``.

    ``inc``, ``dec``, ``set``, ``set_to_current_time`` (without label names) or on
    ``g.labels(...)`` (a :class:`GaugeSeries`); :meth:`track_inprogress` and :meth:`time`."""

    _kind = "gauge"
    _direct = ("inc", "dec", "set", "set_to_current_time")

    def _register(self, labels: Dict[str, str]) -> GaugeSeries:
        return self._registry.gauge(self._name, self._documentation, labels or None)

    def inc(self, amount: float = 1.0) -> None:
        """Adds ``amount`` (default 1)."""
        self._only_series().inc(amount)

    def dec(self, amount: float = 1.0) -> None:
        """Subtracts ``amount`` (default 1)."""
        self._only_series().dec(amount)

    def set(self, value: float) -> None:
        """Sets the gauge to ``value``."""
        self._only_series().set(value)

    def set_to_current_time(self) -> None:
        """Sets the gauge to the current Unix time in seconds."""
        self._only_series().set_to_current_time()

    def track_inprogress(self) -> "_InProgress":
        """A context manager and decorator: the gauge is 1 higher while its block runs."""
        return _InProgress(self._only_series())

    def time(self) -> _Timer:
        """A context manager and decorator that sets the gauge to the seconds its block took."""
        return _Timer(self._only_series().set)


class _InProgress:
    def __init__(self, series: GaugeSeries) -> None:
        self._series = series

    def __enter__(self) -> None:
        self._series.inc()

    def __exit__(self, *exc: Any) -> None:
        self._series.dec()

    def __call__(self, func: Callable) -> Callable:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self:
                return func(*args, **kwargs)

        return wrapper


#: The series type of an observed metric.
_O = TypeVar("_O", HistogramSeries, SummarySeries)


class _Observed(_Metric[_O]):
    """What a histogram and a summary share: values are observed, one at a time or timed."""

    _direct = ("observe",)

    def observe(self, amount: float) -> None:
        """Records one value."""
        self._only_series().observe(amount)

    def time(self) -> _Timer:
        """A context manager and decorator that observes the seconds its block took."""
        return _Timer(self._only_series().observe)


class Histogram(_Observed[HistogramSeries]):
    """A histogram, as prometheus_client declares it: ``Histogram(name, documentation,
    labelnames=(), namespace="", subsystem="", unit="", registry=REGISTRY, buckets=None)``.

    ``buckets``: upper bounds, finite and increasing (``+Inf`` is implied); None takes pipetel's
    (``metrics.histogram_buckets``). ``h.observe(value)`` (without label names) or
    ``h.labels(...).observe(value)`` (a :class:`HistogramSeries`); :meth:`time` observes the
    seconds a block took."""

    _kind = "histogram"

    def __init__(
        self,
        name: str,
        documentation: str = "",
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Optional[MetricRegistry] = None,
        buckets: Optional[Sequence[float]] = None,
    ) -> None:
        self._buckets = None if buckets is None else list(buckets)
        super().__init__(name, documentation, labelnames, namespace, subsystem, unit, registry)

    def _register(self, labels: Dict[str, str]) -> HistogramSeries:
        return self._registry.histogram(self._name, self._documentation, labels or None, self._buckets)


class Summary(_Observed[SummarySeries]):
    """A summary, as prometheus_client declares it: ``Summary(name, documentation,
    labelnames=(), namespace="", subsystem="", unit="", registry=REGISTRY, quantiles=None,
    max_age_seconds=None)``.

    Unlike prometheus_client's, it also exposes quantiles (``quantiles``, default 0.5, 0.9,
    0.95, 0.99, over a sliding window of ``max_age_seconds``). ``s.observe(value)`` (without
    label names) or ``s.labels(...).observe(value)`` (a :class:`SummarySeries`); :meth:`time`
    observes the seconds a block took."""

    _kind = "summary"

    def __init__(
        self,
        name: str,
        documentation: str = "",
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Optional[MetricRegistry] = None,
        quantiles: Optional[Sequence[float]] = None,
        max_age_seconds: Optional[float] = None,
    ) -> None:
        self._quantiles = None if quantiles is None else list(quantiles)
        self._max_age_seconds = max_age_seconds
        super().__init__(name, documentation, labelnames, namespace, subsystem, unit, registry)

    def _register(self, labels: Dict[str, str]) -> SummarySeries:
        return self._registry.summary(
            self._name, self._documentation, labels or None, self._quantiles, self._max_age_seconds
        )
