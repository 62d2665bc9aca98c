"""TeleFuser's metrics API (``telefuser.metrics``) on pipetel's registry (:mod:`pipetel.registry`).

A TeleFuser program switches by changing its import lines only::

    from pipetel.telefuser import get_metrics_registry, enable_stage_metrics, with_metrics

TeleFuser's ``Counter``, ``Gauge``, ``Histogram`` and ``Summary`` are the series of
:mod:`pipetel.registry` (:class:`pipetel.registry.CounterSeries`...: what ``registry.counter()``
returns), and ``MetricRegistry`` is its registry. Registries, metrics, stage contexts and service
metrics are the Rust ones
(``pipetel::registry``, ``pipetel::stage_metrics``, ``pipetel::service``): a metric reaches the
pull endpoint and every OTLP exporter that :func:`pipetel.init` installed, and
``registry.get_prometheus_format()`` renders one registry alone (each registry is independent),
with bucket bounds as prometheus_client writes them (``le="1.0"``); on the global registry
(:func:`get_metrics_registry`) it adds the stage metrics, as TeleFuser's global registry held
them. :func:`pipetel.prometheus_text` is the whole page of the pull endpoint.
``counter.inc()`` is one atomic add behind a method bound straight to Rust.

What is deliberately different from TeleFuser (see docs/src/python.md, "TeleFuser metrics"):

* Counters are exposed with ``_total`` (``registry.counter("requests")`` is
  ``telefuser_requests_total``), as Prometheus and OpenMetrics require.
* ``labels=`` at registration pick one series of a labelled family: registering the same name
  with other label values gives the other series (TeleFuser returned the first metric again).
  The same name with other label *names*, or another kind, raises
  :class:`MetricAlreadyRegisteredError`.
* Bad values raise instead of being stored: NaN anywhere, a negative counter increment
  (:class:`InvalidValueError`, a ``ValueError``); a counter's ``dec``/``set`` raise
  :class:`UnsupportedOperationError` (a ``RuntimeError``), as in TeleFuser.
* The stage context's ``total``, ``errors``, ``active`` and ``duration`` are views of the Rust
  stage context (``.value``; ``.count``, ``.sum``, ``.average``) that can also be moved by hand
  (``total.inc()``, ``errors.inc()``, ``active.inc()``/``dec()``, ``duration.observe(s)``), as
  TeleFuser's docs show. Stage metrics are ``#[pipetel::measure]``'s instruments with the
  attribute ``stage`` (``function_calls_total{stage="..."}``...), not one family per stage name.
* GPU metrics come from the Rust poller that ``init`` starts (``gpu_mode``,
  ``gpu_poll_interval_ms``): ``collect_gpu_metrics()`` reads its latest sample, and
  ``start_periodic_collection()`` only keeps the ``asyncio`` task alive.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, TypeVar, Union

from . import _pipetel
from ._pipetel import _TfServiceMetrics as _RustServiceMetrics
from ._pipetel import _TfStageActive as StageActive
from ._pipetel import _TfStageCount as StageCount
from ._pipetel import _TfStageDuration as StageDuration
from ._pipetel import _TfStageMetricContext as StageMetricContext
from ._pipetel import _TfStageRun as StageRun
from .registry import CounterSeries as Counter
from .registry import GaugeSeries as Gauge
from .registry import HistogramSeries as Histogram
from .registry import (
    InvalidMetricError,
    InvalidValueError,
    MetricAlreadyRegisteredError,
    MetricLabel,
    MetricNotFoundError,
    MetricRegistry,
    UnsupportedOperationError,
)
from .registry import SummarySeries as Summary

__all__ = [
    "Counter",
    "DEFAULT_BUCKETS",
    "DEFAULT_QUANTILES",
    "Gauge",
    "Histogram",
    "InvalidMetricError",
    "InvalidValueError",
    "Labels",
    "MetricAlreadyRegisteredError",
    "MetricLabel",
    "MetricNotFoundError",
    "MetricRegistry",
    "MetricsConfig",
    "MetricsRegistry",
    "ServiceMetrics",
    "StageActive",
    "StageCount",
    "StageDuration",
    "StageMetricContext",
    "StageMetricsManager",
    "StageRun",
    "Summary",
    "UnsupportedOperationError",
    "create_metrics_config",
    "default_metrics_config",
    "disable_stage_metrics",
    "enable_stage_metrics",
    "enabled_stages",
    "get_metrics_registry",
    "get_service_metrics",
    "init_metrics",
    "reset_global_registry",
    "reset_service_metrics",
    "with_metrics",
    "with_metrics_async",
]

#: TeleFuser's default histogram buckets (seconds).
DEFAULT_BUCKETS: List[float] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]
#: TeleFuser's (and pipetel's) default summary quantiles.
DEFAULT_QUANTILES: List[float] = [0.5, 0.9, 0.95, 0.99]

#: Labels as TeleFuser takes them.
Labels = Union[Dict[str, str], List[MetricLabel], None]

#: The name used in this package's docs; TeleFuser's class is ``MetricRegistry``.
MetricsRegistry = MetricRegistry

F = TypeVar("F", bound=Callable[..., Any])

_registry_lock = threading.Lock()
_global_registry: Optional[MetricRegistry] = None


class _ProcessRegistry(MetricRegistry):
    """The process-wide registry: its exposition is what TeleFuser's global registry held."""

    def get_prometheus_format(self) -> str:
        """What TeleFuser's global registry held: this registry's metrics (with the service
        metrics of its namespace, which share it), then the stage contexts' metrics
        (``function_*{stage="..."}``, once :func:`pipetel.init` installed the Prometheus
        exporter). Not other registries' metrics, nor pipetel's own (spans, pipelines, GPU,
        process): :func:`pipetel.prometheus_text` is the whole page of the pull endpoint."""
        return super().get_prometheus_format() + _pipetel._tf_stage_metrics_text()


def get_metrics_registry(namespace: str = "telefuser") -> MetricRegistry:
    """The process-wide registry, made with ``namespace`` on the first call. Its
    ``get_prometheus_format()`` is its own metrics and the stage metrics, as TeleFuser's global
    registry's; :func:`pipetel.prometheus_text` is the whole page of the pull endpoint."""
    global _global_registry
    with _registry_lock:
        if _global_registry is None:
            _global_registry = _ProcessRegistry(namespace)
        return _global_registry


def reset_global_registry() -> None:
    """Clears the process-wide registry; the next :func:`get_metrics_registry` makes a new one.

    The registry of a namespace is shared in the process (with the service metrics of that
    prefix too): clearing it unregisters those metrics as well; their handles keep recording
    but are no longer exported."""
    global _global_registry
    with _registry_lock:
        if _global_registry is not None:
            _global_registry.clear()
        _global_registry = None


# --- stage metrics ---------------------------------------------------------------------------


def enabled_stages() -> List[str]:
    """The names of the stages whose metrics are on, sorted."""
    return list(_pipetel._tf_enabled_stages())


def _stage_name(stage: Any) -> str:
    if not hasattr(stage, "name"):
        raise ValueError(f"stage must have a 'name' attribute (got a {type(stage).__name__})")
    name = stage.name
    if not isinstance(name, str):
        raise TypeError(f"stage: its 'name' must be a str, got {type(name).__name__}")
    return name


def enable_stage_metrics(stage: Any, registry: Optional[MetricRegistry] = None) -> StageMetricContext:
    """Turns metrics on for ``stage`` (any object with a ``name``), sets its ``_metrics_hook``
    (read by :func:`with_metrics`) and returns its context. ``registry`` is accepted for
    TeleFuser's signature: stage contexts are process-wide, keyed by the stage name."""
    del registry
    context = _pipetel._tf_enable_stage(_stage_name(stage))
    stage._metrics_hook = context
    return context


def disable_stage_metrics(stage: Any, registry: Optional[MetricRegistry] = None) -> None:
    """Turns metrics off for ``stage``: its context records nothing until enabled again."""
    del registry
    if hasattr(stage, "_metrics_hook"):
        _pipetel._tf_disable_stage(getattr(stage, "name", "unknown"))
        stage._metrics_hook = None


def with_metrics(func: F) -> F:
    """Decorates a stage method: each call is one execution of the stage's context (counted
    and in flight while it runs, its duration recorded); an exception ends it as failed and is
    re-raised. Without ``_metrics_hook`` on ``self`` the method runs unmeasured."""

    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook = getattr(self, "_metrics_hook", None)
        if hook is None:
            return func(self, *args, **kwargs)
        # The run ends when the block does: failed if an exception (any) leaves it.
        with hook.start():
            return func(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


def with_metrics_async(func: F) -> F:
    """:func:`with_metrics` for ``async def`` methods: the execution is in flight from the first
    step of the coroutine to its end (a cancellation ends it as failed)."""
    if not inspect.iscoroutinefunction(func):
        raise TypeError(f"func: with_metrics_async needs an async def function, got {func!r}")

    @functools.wraps(func)
    async def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        hook = getattr(self, "_metrics_hook", None)
        if hook is None:
            return await func(self, *args, **kwargs)
        with hook.start():
            return await func(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]


class StageMetricsManager:
    """Enables and disables metrics on several stages (TeleFuser's ``StageMetricsManager``)."""

    def __init__(self, registry: Optional[MetricRegistry] = None) -> None:
        self._registry = registry or get_metrics_registry()
        self._enabled: Dict[str, StageMetricContext] = {}

    def enable_stage(self, stage: Any) -> None:
        self._enabled[_stage_name(stage)] = enable_stage_metrics(stage)

    def disable_stage(self, stage: Any) -> None:
        self._enabled.pop(getattr(stage, "name", ""), None)
        disable_stage_metrics(stage)

    def enable_all_stages(self, stages: List[Any]) -> None:
        for stage in stages:
            self.enable_stage(stage)

    def disable_all_stages(self) -> None:
        for name in list(self._enabled):
            _pipetel._tf_disable_stage(name)
        self._enabled.clear()

    def get_stage_context(self, stage_name: str) -> Optional[StageMetricContext]:
        return self._enabled.get(stage_name)

    @property
    def registry(self) -> MetricRegistry:
        return self._registry

    @property
    def enabled_stages(self) -> set:
        return set(self._enabled)


# --- configuration ---------------------------------------------------------------------------


def _bucket_bounds(bounds: Any, what: str) -> List[float]:
    """``bounds`` as Rust's ``metrics.histogram_buckets`` takes them: numbers, finite and
    strictly increasing, at least one; a trailing ``+Inf`` (the implied last bucket) is kept."""
    if isinstance(bounds, (str, bytes)) or not hasattr(bounds, "__iter__"):
        raise TypeError(f"{what} must be a list of numbers, got {type(bounds).__name__}")
    bounds = list(bounds)
    for b in bounds:
        if isinstance(b, bool) or not isinstance(b, (int, float)):
            raise TypeError(f"{what} must be numbers, got {b!r} ({type(b).__name__})")
    finite = bounds[:-1] if bounds and bounds[-1] == math.inf else bounds
    if not finite:
        raise ValueError(f"{what} cannot be empty")
    for i, b in enumerate(finite):
        if not math.isfinite(b):
            raise ValueError(f"{what}: bound {i} is {b}; bounds must be finite (+Inf is implied)")
        if i and b <= finite[i - 1]:
            raise ValueError(f"{what}: bounds must be strictly increasing, got {finite[i - 1]} then {b} at index {i}")
    return [float(b) for b in bounds]


@dataclass
class MetricsConfig:
    """TeleFuser's metrics configuration; :meth:`to_settings` maps it onto ``pipetel.init``'s
    keywords (the config file's keys with ``.`` written ``_``)."""

    enabled: bool = True
    enable_stage_metrics: bool = True
    enable_gpu_metrics: bool = True
    enable_http_metrics: bool = True
    enable_queue_metrics: bool = True
    gpu_metrics_interval: float = 5.0
    histogram_buckets: List[float] = field(default_factory=lambda: list(DEFAULT_BUCKETS))
    metrics_path: str = "/metrics"
    namespace: str = "telefuser"
    gpu_platform: str = "auto"
    #: The pull endpoint's port; None keeps pipetel's (``OTEL_EXPORTER_PROMETHEUS_PORT``, 9464).
    port: Optional[int] = None

    def __post_init__(self) -> None:
        for flag in ("enabled", "enable_stage_metrics", "enable_gpu_metrics", "enable_http_metrics", "enable_queue_metrics"):
            if not isinstance(getattr(self, flag), bool):
                raise TypeError(f"MetricsConfig.{flag} must be a bool, got {type(getattr(self, flag)).__name__}")
        interval = self.gpu_metrics_interval
        if isinstance(interval, bool) or not isinstance(interval, (int, float)):
            raise TypeError(f"MetricsConfig.gpu_metrics_interval must be a number, got {type(interval).__name__}")
        if not (math.isfinite(interval) and interval > 0):
            raise ValueError(f"gpu_metrics_interval must be positive, got {interval}")
        self.histogram_buckets = _bucket_bounds(self.histogram_buckets, "histogram_buckets")
        if self.gpu_platform not in ("nvidia", "amd", "auto"):
            raise ValueError(f"gpu_platform must be 'nvidia', 'amd' or 'auto', got {self.gpu_platform!r}")
        if not isinstance(self.namespace, str):
            raise TypeError(f"MetricsConfig.namespace must be a str, got {type(self.namespace).__name__}")
        if self.port is not None and (isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port <= 65535):
            raise ValueError(f"port must be an int in 0..65535, got {self.port!r}")

    def to_settings(self) -> Dict[str, Any]:
        """``pipetel.init`` keywords for this configuration."""
        settings: Dict[str, Any] = {
            "pipeline_metrics": self.enable_stage_metrics,
            "gpu_mode": "auto" if self.enable_gpu_metrics else "off",
            "service_http_metrics": self.enable_http_metrics,
            "service_queue_metrics": self.enable_queue_metrics,
            "gpu_poll_interval_ms": max(1, round(self.gpu_metrics_interval * 1000)),
            "metrics_histogram_buckets": [b for b in self.histogram_buckets if b != math.inf],
            "prometheus_path": self.metrics_path,
            "service_prefix": self.namespace,
            "gpu_platform": self.gpu_platform,
        }
        if not self.enabled:
            settings["exporters_metrics"] = ["none"]
        if self.port is not None:
            settings["prometheus_port"] = self.port
        return settings


default_metrics_config = MetricsConfig()


def create_metrics_config(
    enabled: bool = True,
    enable_stage_metrics: bool = True,
    enable_gpu_metrics: bool = True,
    enable_http_metrics: bool = True,
    enable_queue_metrics: bool = True,
    gpu_metrics_interval: float = 5.0,
    histogram_buckets: Optional[List[float]] = None,
    metrics_path: str = "/metrics",
    namespace: str = "telefuser",
    gpu_platform: str = "auto",
    port: Optional[int] = None,
) -> MetricsConfig:
    """A :class:`MetricsConfig` (TeleFuser's signature, plus ``port``)."""
    return MetricsConfig(
        enabled=enabled,
        enable_stage_metrics=enable_stage_metrics,
        enable_gpu_metrics=enable_gpu_metrics,
        enable_http_metrics=enable_http_metrics,
        enable_queue_metrics=enable_queue_metrics,
        gpu_metrics_interval=gpu_metrics_interval,
        histogram_buckets=list(histogram_buckets) if histogram_buckets else list(DEFAULT_BUCKETS),
        metrics_path=metrics_path,
        namespace=namespace,
        gpu_platform=gpu_platform,
        port=port,
    )


def init_metrics(config: Optional[MetricsConfig] = None, service_name: Optional[str] = None, **settings: Any) -> Any:
    """Starts pipetel with ``config`` (default :class:`MetricsConfig`): ``pipetel.init(service_name,
    **config.to_settings(), **settings)``; ``settings`` win over the config's. Returns the guard."""
    import pipetel

    merged = (config or MetricsConfig()).to_settings()
    merged.update(settings)
    return pipetel.init(service_name, **merged)


# --- service metrics -------------------------------------------------------------------------


class ServiceMetrics(_RustServiceMetrics):
    """Task and queue metrics (TeleFuser's ``ServiceMetrics``) on ``pipetel::service``."""

    async def start_periodic_collection(self) -> None:
        """Kept for TeleFuser code that starts it as a task: the Rust GPU poller started by
        ``init`` already samples every ``gpu_poll_interval_ms``, so this only sleeps until
        cancelled."""
        while True:
            await asyncio.sleep(3600)

    def update_service_metrics(self) -> None:
        """Kept for TeleFuser code; nothing to do (the exporters read the metrics live)."""

    @property
    def registry(self) -> MetricRegistry:
        """The process-wide registry (the service metrics live in one of their own, named by
        the prefix; see :meth:`get_prometheus_format`)."""
        return get_metrics_registry()


_service_lock = threading.Lock()
_service_metrics: Optional[ServiceMetrics] = None


def get_service_metrics(registry: Optional[MetricRegistry] = None, config: Optional[MetricsConfig] = None) -> ServiceMetrics:
    """The process-wide service metrics. Without ``config`` they follow ``pipetel.init``'s
    settings (``service_prefix``...); with one, its ``namespace``, ``histogram_buckets`` and
    ``enable_queue_metrics``. Only the first call's ``config`` counts."""
    global _service_metrics
    with _service_lock:
        if _service_metrics is None:
            _service_metrics = ServiceMetrics(registry, config)
        return _service_metrics


def reset_service_metrics() -> None:
    """Forgets the process-wide service metrics (the next call makes them again)."""
    global _service_metrics
    with _service_lock:
        _service_metrics = None
