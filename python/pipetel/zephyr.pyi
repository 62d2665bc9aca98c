import enum
from typing import Optional

from .pipeline import RowWriter

ZEPHYR_STAGE_STATS_NAMESPACE: str
ZEPHYR_WORKER_STATS_NAMESPACE: str
ZEPHYR_STAGE_ITEM_COUNT_KEY: str
ZEPHYR_STAGE_BYTES_PROCESSED_KEY: str
ZEPHYR_WORKER_CPU_PCT_CURRENT_KEY: str
ZEPHYR_WORKER_CPU_PCT_AVERAGE_KEY: str
ZEPHYR_WORKER_CPU_TIME_KEY: str
ZEPHYR_WORKER_MEM_CURRENT_KEY: str
ZEPHYR_WORKER_MEM_AVERAGE_KEY: str
ZEPHYR_WORKER_MEM_PEAK_KEY: str

class ZephyrWorkerStatStatus(str, enum.Enum):
    START = "START"
    RUNNING = "RUNNING"
    END = "END"
    FAILED = "FAILED"

class StatsWriter(RowWriter):
    def __init__(self, log_client: Optional[object] = None) -> None: ...
    @classmethod
    def connect(cls, url: Optional[str] = None) -> "StatsWriter": ...
    @staticmethod
    def resolve_url() -> Optional[str]: ...
    def close(self) -> None: ...
