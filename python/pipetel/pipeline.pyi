from ._pipetel import Shard as Shard
from ._pipetel import Stage as Stage
from ._pipetel import _StatsWriterCore
from ._pipetel import stage as stage

# emit_stage_stat and emit_worker_stat are the native base's.
class RowWriter(_StatsWriterCore):
    def __init__(self) -> None: ...
