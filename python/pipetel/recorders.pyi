from typing import BinaryIO, Iterator

from ._pipetel import Counter as Counter
from ._pipetel import DecodeError as DecodeError
from ._pipetel import EdgeTransfers as EdgeTransfers
from ._pipetel import Envelope as Envelope
from ._pipetel import Family as Family
from ._pipetel import Gauge as Gauge
from ._pipetel import Histogram as Histogram
from ._pipetel import HubError as HubError
from ._pipetel import MetricSnapshot as MetricSnapshot
from ._pipetel import SnapshotHub as SnapshotHub
from ._pipetel import SourceStatus as SourceStatus
from ._pipetel import StreamReader as StreamReader
from ._pipetel import TransportReport as TransportReport
from ._pipetel import merge as merge

MAX_FRAME_LEN: int

def write_frame(stream: BinaryIO, envelope: Envelope) -> None: ...
def read_frames(stream: BinaryIO, max_frame_len: int = ...) -> Iterator[Envelope]: ...
