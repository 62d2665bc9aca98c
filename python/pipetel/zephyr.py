"""Marin Zephyr's stats writer (``zephyr`` stats module) on pipetel's explicit rows
(:class:`pipetel.pipeline.RowWriter`).

Replace ``from zephyr.stats import StatsWriter, ZephyrWorkerStatStatus`` (and the constants)
with ``from pipetel.zephyr import ...``; the rest of the code stays as it is.

* :class:`StatsWriter` with ``emit_stage_stat(stage_counters=, stage_name=, execution_id=,
  elapsed=, total_shards=, status=)`` and ``emit_worker_stat(shard_idx=, stage_name=,
  execution_id=, status=, ts=, items=, bytes_processed=, item_rate=, byte_rate=,
  cpu_time_total=, cpu_current_pct=, cpu_avg_pct=, mem_current_bytes=, mem_avg_bytes=,
  mem_peak_bytes=)``: each row becomes a pipetel stage or worker row (an OTel log record whose
  event name is the namespace, a JSON line when ``PIPETEL_ROWS_FILE`` is set) and the stage and
  worker metrics take its values. Bad inputs raise ``TypeError``/``ValueError`` naming the
  keyword (NaN, negative numbers, a non-``datetime`` ``ts``, an unknown status or keyword).
* :class:`ZephyrWorkerStatStatus`: ``START``, ``RUNNING``, ``END``, ``FAILED``.
* The namespace constants (``zephyr.stage``, ``zephyr.worker``: the rows' namespaces when
  pipetel's namespace is ``zephyr``) and the counter keys.

:meth:`StatsWriter.connect` initialises pipetel when the program has not (namespace ``zephyr``
unless ``PIPETEL_NAMESPACE`` or ``PIPETEL_CONFIG`` says otherwise; ``url``, when given, is the
OTLP endpoint); :meth:`StatsWriter.close` shuts down what ``connect`` started. A program that
calls :func:`pipetel.init` itself passes ``pipeline_namespace="zephyr"`` to get Zephyr's
namespaces.
"""

import enum
import os
from typing import Optional

from ._pipetel import Guard, init, is_initialized
from .pipeline import RowWriter

ZEPHYR_STAGE_STATS_NAMESPACE = "zephyr.stage"
ZEPHYR_WORKER_STATS_NAMESPACE = "zephyr.worker"

ZEPHYR_STAGE_ITEM_COUNT_KEY = "zephyr/item_count"
"""Counter key for items processed."""
ZEPHYR_STAGE_BYTES_PROCESSED_KEY = "zephyr/bytes_processed"
"""Counter key for bytes processed."""
ZEPHYR_WORKER_CPU_PCT_CURRENT_KEY = "zephyr/worker/cpu_pct_current"
"""Current CPU percentage."""
ZEPHYR_WORKER_CPU_PCT_AVERAGE_KEY = "zephyr/worker/cpu_pct_average"
"""Average CPU percentage."""
ZEPHYR_WORKER_CPU_TIME_KEY = "zephyr/worker/cpu_time"
"""Cumulative CPU time since shard start, in seconds."""
ZEPHYR_WORKER_MEM_CURRENT_KEY = "zephyr/worker/mem_current_bytes"
"""Current resident-set size in bytes."""
ZEPHYR_WORKER_MEM_AVERAGE_KEY = "zephyr/worker/mem_average_bytes"
"""Average resident-set size in bytes."""
ZEPHYR_WORKER_MEM_PEAK_KEY = "zephyr/worker/mem_peak_bytes"
"""Peak resident-set size in bytes."""


class ZephyrWorkerStatStatus(str, enum.Enum):
    """Lifecycle status of a worker or stage row."""

    START = "START"
    RUNNING = "RUNNING"
    END = "END"
    FAILED = "FAILED"

    def __str__(self) -> str:
        return self.value


class StatsWriter(RowWriter):
    """Emits Zephyr stage and worker rows through pipetel (see the module docstring).

    ``log_client`` is accepted for source compatibility and ignored: rows go wherever pipetel
    exports (OTLP logs, the rows file).
    """

    def __init__(self, log_client: Optional[object] = None) -> None:
        super().__init__()
        self._guard: Optional[Guard] = None

    @classmethod
    def connect(cls, url: Optional[str] = None) -> "StatsWriter":
        """A writer; initialises pipetel first when this process has not."""
        writer = cls(None)
        if not is_initialized():
            settings = {}
            if url:
                settings["otlp_endpoint"] = url
            if not os.environ.get("PIPETEL_NAMESPACE") and not os.environ.get("PIPETEL_CONFIG"):
                settings["pipeline_namespace"] = "zephyr"
            writer._guard = init(**settings)
        return writer

    @staticmethod
    def resolve_url() -> Optional[str]:
        """The OTLP endpoint from ``OTEL_EXPORTER_OTLP_ENDPOINT``, if set."""
        return os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None

    def close(self) -> None:
        """Flushes and shuts down pipetel if :meth:`connect` initialised it; else flushes nothing."""
        guard, self._guard = self._guard, None
        if guard is not None:
            guard.shutdown()


__all__ = [
    "StatsWriter",
    "ZephyrWorkerStatStatus",
    "ZEPHYR_STAGE_STATS_NAMESPACE",
    "ZEPHYR_WORKER_STATS_NAMESPACE",
    "ZEPHYR_STAGE_ITEM_COUNT_KEY",
    "ZEPHYR_STAGE_BYTES_PROCESSED_KEY",
    "ZEPHYR_WORKER_CPU_PCT_CURRENT_KEY",
    "ZEPHYR_WORKER_CPU_PCT_AVERAGE_KEY",
    "ZEPHYR_WORKER_CPU_TIME_KEY",
    "ZEPHYR_WORKER_MEM_CURRENT_KEY",
    "ZEPHYR_WORKER_MEM_AVERAGE_KEY",
    "ZEPHYR_WORKER_MEM_PEAK_KEY",
]
