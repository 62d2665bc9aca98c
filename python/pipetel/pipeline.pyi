import datetime as _datetime
from typing import Mapping, Union

from ._pipetel import Shard as Shard
from ._pipetel import Stage as Stage
from ._pipetel import stage as stage

__all__ = ["RowWriter", "Shard", "Stage", "stage"]

class RowWriter:
    def __init__(self) -> None: ...
    def emit_stage_stat(
        self,
        stage_counters: Mapping[str, Union[int, float]],
        stage_name: str,
        execution_id: str,
        elapsed: float,
        total_shards: int,
        status: str,
    ) -> None: ...
    def emit_worker_stat(
        self,
        shard_idx: int,
        stage_name: str,
        execution_id: str,
        status: str,
        ts: _datetime.datetime,
        items: int,
        bytes_processed: int,
        item_rate: float,
        byte_rate: float,
        cpu_time_total: float,
        cpu_current_pct: float,
        cpu_avg_pct: float,
        mem_current_bytes: int,
        mem_avg_bytes: int,
        mem_peak_bytes: int,
    ) -> None: ...
