"""The keywords of one valid Zephyr worker row and one valid stage row (``StatsWriter``'s
``emit_worker_stat`` and ``emit_stage_stat``), for tests that change some of them."""

from datetime import datetime
from typing import Any, Dict

from pipetel.zephyr import ZephyrWorkerStatStatus


def worker_stat(**over: Any) -> Dict[str, Any]:
    """A running shard's row of ``tokenize``, with ``over`` laid over it."""
    return {
        "shard_idx": 0,
        "stage_name": "tokenize",
        "execution_id": "e1",
        "status": ZephyrWorkerStatStatus.RUNNING,
        "ts": datetime(2026, 12, 1, 12, 0, 0),
        "items": 10,
        "bytes_processed": 100,
        "item_rate": 1.5,
        "byte_rate": 15.0,
        "cpu_time_total": 0.5,
        "cpu_current_pct": 50.0,
        "cpu_avg_pct": 40.0,
        "mem_current_bytes": 1000,
        "mem_avg_bytes": 900,
        "mem_peak_bytes": 1100,
        **over,
    }


def stage_stat(**over: Any) -> Dict[str, Any]:
    """The ended stage ``tokenize``'s row, with ``over`` laid over it."""
    return {
        "stage_counters": {"zephyr/item_count": 10, "zephyr/worker/cpu_pct_average": 12.5},
        "stage_name": "tokenize",
        "execution_id": "e1",
        "elapsed": 2.0,
        "total_shards": 1,
        "status": ZephyrWorkerStatStatus.END,
        **over,
    }
