"""Marin Zephyr's stats writer on pipetel: a coordinator's stage row and each shard's worker rows.

The calls are Zephyr's (``StatsWriter.connect()``, ``emit_worker_stat`` for a shard's START, a
RUNNING sample and its END, ``emit_stage_stat`` with the coordinator's reduced counters,
``close()``); only the imports name ``pipetel.zephyr`` instead of Zephyr's stats module.
Configure where the rows go with the usual variables (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``PIPETEL_ROWS_FILE``, ``OTEL_EXPORTER_PROMETHEUS_PORT``...).

    python python/examples/zephyr_stats.py           # emit and exit
    python python/examples/zephyr_stats.py --hold    # then keep serving metrics until stdin closes
"""

import sys
from datetime import datetime, timezone

from pipetel.zephyr import (
    ZEPHYR_STAGE_BYTES_PROCESSED_KEY,
    ZEPHYR_STAGE_ITEM_COUNT_KEY,
    ZEPHYR_WORKER_CPU_PCT_AVERAGE_KEY,
    ZEPHYR_WORKER_CPU_TIME_KEY,
    ZEPHYR_WORKER_MEM_AVERAGE_KEY,
    ZEPHYR_WORKER_MEM_PEAK_KEY,
    StatsWriter,
    ZephyrWorkerStatStatus,
)


def now():
    return datetime.now(timezone.utc).replace(tzinfo=None)


def main():
    stats_writer = StatsWriter.connect()
    execution_id = "tokenize-2026-12-01"
    shards = [(0, 1200, 4_800_000), (1, 800, 3_200_000)]
    for shard_idx, items, nbytes in shards:
        stats_writer.emit_worker_stat(
            shard_idx=shard_idx,
            stage_name="tokenize",
            execution_id=execution_id,
            status=ZephyrWorkerStatStatus.START,
            ts=now(),
            items=0,
            bytes_processed=0,
            item_rate=0.0,
            byte_rate=0.0,
            cpu_time_total=0.0,
            cpu_current_pct=0.0,
            cpu_avg_pct=0.0,
            mem_current_bytes=50_000_000,
            mem_avg_bytes=50_000_000,
            mem_peak_bytes=50_000_000,
        )
        stats_writer.emit_worker_stat(
            shard_idx=shard_idx,
            stage_name="tokenize",
            execution_id=execution_id,
            status=ZephyrWorkerStatStatus.END,
            ts=now(),
            items=items,
            bytes_processed=nbytes,
            item_rate=items / 4.0,
            byte_rate=nbytes / 4.0,
            cpu_time_total=3.5,
            cpu_current_pct=95.0,
            cpu_avg_pct=87.5,
            mem_current_bytes=120_000_000,
            mem_avg_bytes=100_000_000,
            mem_peak_bytes=130_000_000,
        )
    stats_writer.emit_stage_stat(
        stage_counters={
            ZEPHYR_STAGE_ITEM_COUNT_KEY: sum(s[1] for s in shards),
            ZEPHYR_STAGE_BYTES_PROCESSED_KEY: sum(s[2] for s in shards),
            ZEPHYR_WORKER_CPU_PCT_AVERAGE_KEY: 87.5,
            ZEPHYR_WORKER_CPU_TIME_KEY: 7.0,
            ZEPHYR_WORKER_MEM_AVERAGE_KEY: 100_000_000,
            ZEPHYR_WORKER_MEM_PEAK_KEY: 130_000_000,
        },
        stage_name="tokenize",
        execution_id=execution_id,
        elapsed=4.25,
        total_shards=len(shards),
        status=ZephyrWorkerStatStatus.END,
    )
    if "--hold" in sys.argv:
        print("emitted", flush=True)
        sys.stdin.read()
    stats_writer.close()


if __name__ == "__main__":
    main()
