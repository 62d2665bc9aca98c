from . import asgi as asgi
from . import mstar as mstar
from . import pipeline as pipeline
from . import recorders as recorders
from . import registry as registry
from . import telefuser as telefuser
from . import tracing as tracing
from . import wsgi as wsgi
from . import zephyr as zephyr
from ._pipetel import AlreadyInitialized as AlreadyInitialized
from ._pipetel import ConfigError as ConfigError
from ._pipetel import DecodeError as DecodeError
from ._pipetel import FamilyError as FamilyError
from ._pipetel import Guard as Guard
from ._pipetel import HubError as HubError
from ._pipetel import InitError as InitError
from ._pipetel import InternalError as InternalError
from ._pipetel import MergeError as MergeError
from ._pipetel import PipetelError as PipetelError
from ._pipetel import prometheus_text as prometheus_text
from ._pipetel import RecordError as RecordError
from ._pipetel import ShutdownError as ShutdownError
from ._pipetel import SnapshotError as SnapshotError
from ._pipetel import ThreadError as ThreadError
from ._pipetel import __version__ as __version__
from ._pipetel import init as init
from ._pipetel import is_initialized as is_initialized
from .pipeline import Shard as Shard
from .pipeline import Stage as Stage
from .pipeline import stage as stage
from .registry import Counter as Counter
from .registry import Gauge as Gauge
from .registry import Histogram as Histogram
from .registry import InvalidMetricError as InvalidMetricError
from .registry import InvalidValueError as InvalidValueError
from .registry import MetricAlreadyRegisteredError as MetricAlreadyRegisteredError
from .registry import MetricNotFoundError as MetricNotFoundError
from .registry import MetricRegistry as MetricRegistry
from .registry import Summary as Summary
from .registry import UnsupportedOperationError as UnsupportedOperationError
from .recorders import EdgeTransfers as EdgeTransfers
from .recorders import Envelope as Envelope
from .recorders import Family as Family
from .recorders import MetricSnapshot as MetricSnapshot
from .recorders import SnapshotHub as SnapshotHub
from .recorders import SourceStatus as SourceStatus
from .recorders import StreamReader as StreamReader
from .recorders import TransportReport as TransportReport
from .recorders import merge as merge
from .tracing import LoggingHandler as LoggingHandler
from .tracing import Span as Span
from .tracing import current_span as current_span
from .tracing import span as span
from .tracing import traced as traced
from .tracing import traceparent as traceparent

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
