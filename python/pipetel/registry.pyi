from typing import Any, Callable, Iterable, Optional, Sequence, Tuple, Type, TypeVar, Union

from ._pipetel import InvalidMetricError as InvalidMetricError
from ._pipetel import InvalidValueError as InvalidValueError
from ._pipetel import MetricAlreadyRegisteredError as MetricAlreadyRegisteredError
from ._pipetel import MetricNotFoundError as MetricNotFoundError
from ._pipetel import UnsupportedOperationError as UnsupportedOperationError
from ._pipetel import _TfCounter as CounterSeries
from ._pipetel import _TfGauge as GaugeSeries
from ._pipetel import _TfHistogram as HistogramSeries
from ._pipetel import _TfMetricLabel as MetricLabel
from ._pipetel import _TfMetricRegistry as MetricRegistry
from ._pipetel import _TfSummary as SummarySeries

REGISTRY: MetricRegistry

_F = TypeVar("_F", bound=Callable[..., Any])
_LabelValue = Union[str, int, float]

class _BlockAndDecorator:
    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: Any) -> Any: ...
    def __call__(self, func: _F) -> _F: ...

class _Metric:
    def __init__(
        self,
        name: str,
        documentation: str = "",
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Optional[MetricRegistry] = None,
    ) -> None: ...
    @property
    def name(self) -> str: ...
    @property
    def documentation(self) -> str: ...
    @property
    def labelnames(self) -> Tuple[str, ...]: ...
    @property
    def registry(self) -> MetricRegistry: ...

class Counter(_Metric):
    def labels(self, *labelvalues: _LabelValue, **labelkwargs: _LabelValue) -> CounterSeries: ...
    def inc(self, amount: float = 1.0) -> None: ...
    def count_exceptions(self, exception: Type[BaseException] = ...) -> _BlockAndDecorator: ...

class Gauge(_Metric):
    def labels(self, *labelvalues: _LabelValue, **labelkwargs: _LabelValue) -> GaugeSeries: ...
    def inc(self, amount: float = 1.0) -> None: ...
    def dec(self, amount: float = 1.0) -> None: ...
    def set(self, value: float) -> None: ...
    def set_to_current_time(self) -> None: ...
    def track_inprogress(self) -> _BlockAndDecorator: ...
    def time(self) -> _BlockAndDecorator: ...

class _Observed(_Metric):
    def observe(self, amount: float) -> None: ...
    def time(self) -> _BlockAndDecorator: ...

class Histogram(_Observed):
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
    ) -> None: ...
    def labels(self, *labelvalues: _LabelValue, **labelkwargs: _LabelValue) -> HistogramSeries: ...

class Summary(_Observed):
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
    ) -> None: ...
    def labels(self, *labelvalues: _LabelValue, **labelkwargs: _LabelValue) -> SummarySeries: ...
