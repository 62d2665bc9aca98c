from typing import Any, Callable, Dict, List, Optional, Set, TypeVar, Union

from ._pipetel import _TfServiceMetrics
from ._pipetel import _TfStageActive as StageActive
from ._pipetel import _TfStageCount as StageCount
from ._pipetel import _TfStageDuration as StageDuration
from ._pipetel import _TfStageMetricContext as StageMetricContext
from ._pipetel import _TfStageRun as StageRun
from .registry import CounterSeries as Counter
from .registry import GaugeSeries as Gauge
from .registry import HistogramSeries as Histogram
from .registry import InvalidMetricError as InvalidMetricError
from .registry import InvalidValueError as InvalidValueError
from .registry import MetricAlreadyRegisteredError as MetricAlreadyRegisteredError
from .registry import MetricLabel as MetricLabel
from .registry import MetricNotFoundError as MetricNotFoundError
from .registry import MetricRegistry as MetricRegistry
from .registry import SummarySeries as Summary
from .registry import UnsupportedOperationError as UnsupportedOperationError

DEFAULT_BUCKETS: List[float]
DEFAULT_QUANTILES: List[float]
Labels = Union[Dict[str, str], List[MetricLabel], None]
MetricsRegistry = MetricRegistry

_F = TypeVar("_F", bound=Callable[..., Any])

def get_metrics_registry(namespace: str = "telefuser") -> MetricRegistry: ...
def reset_global_registry() -> None: ...
def enabled_stages() -> List[str]: ...
def enable_stage_metrics(stage: Any, registry: Optional[MetricRegistry] = None) -> StageMetricContext: ...
def disable_stage_metrics(stage: Any, registry: Optional[MetricRegistry] = None) -> None: ...
def with_metrics(func: _F) -> _F: ...
def with_metrics_async(func: _F) -> _F: ...

class StageMetricsManager:
    def __init__(self, registry: Optional[MetricRegistry] = None) -> None: ...
    def enable_stage(self, stage: Any) -> None: ...
    def disable_stage(self, stage: Any) -> None: ...
    def enable_all_stages(self, stages: List[Any]) -> None: ...
    def disable_all_stages(self) -> None: ...
    def get_stage_context(self, stage_name: str) -> Optional[StageMetricContext]: ...
    @property
    def registry(self) -> MetricRegistry: ...
    @property
    def enabled_stages(self) -> Set[str]: ...

class MetricsConfig:
    enabled: bool
    enable_stage_metrics: bool
    enable_gpu_metrics: bool
    enable_http_metrics: bool
    enable_queue_metrics: bool
    gpu_metrics_interval: float
    histogram_buckets: List[float]
    metrics_path: str
    namespace: str
    gpu_platform: str
    port: Optional[int]
    def __init__(
        self,
        enabled: bool = True,
        enable_stage_metrics: bool = True,
        enable_gpu_metrics: bool = True,
        enable_http_metrics: bool = True,
        enable_queue_metrics: bool = True,
        gpu_metrics_interval: float = 5.0,
        histogram_buckets: List[float] = ...,
        metrics_path: str = "/metrics",
        namespace: str = "telefuser",
        gpu_platform: str = "auto",
        port: Optional[int] = None,
    ) -> None: ...
    def to_settings(self) -> Dict[str, Any]: ...

default_metrics_config: MetricsConfig

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
) -> MetricsConfig: ...
def init_metrics(config: Optional[MetricsConfig] = None, service_name: Optional[str] = None, **settings: Any) -> Any: ...

class ServiceMetrics(_TfServiceMetrics):
    async def start_periodic_collection(self) -> None: ...
    def update_service_metrics(self) -> None: ...
    @property
    def registry(self) -> MetricRegistry: ...  # type: ignore[override]

def get_service_metrics(
    registry: Optional[MetricRegistry] = None, config: Optional[MetricsConfig] = None
) -> ServiceMetrics: ...
def reset_service_metrics() -> None: ...
