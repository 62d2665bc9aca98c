"""mstar's ``observability.recorders``, on pipetel's Rust recorders.

A program written against mstar's recorders changes only its import line::

    from pipetel.mstar import Counter, Gauge, Histogram, EdgeTransfers, merge   # was: mstar's

Every name here is pipetel's own class (no wrapper on the hot path): ``Counter(family).inc(labels,
amount=1.0)``, ``Gauge(family).set(labels, value)``, ``Histogram(family).observe(labels, value)``,
``snapshot()`` returning a :class:`MetricSnapshot` (``name``, ``label_values``, ``values``,
``bucket_counts`` cumulative with ``+Inf`` last, ``sums``), ``merge(family, snapshots)``,
``EdgeTransfers(transport).record(src, dst, nbytes, tensors, seconds)`` with ``publish()`` and
``latest``, and :class:`Envelope` with ``encode()`` / ``encode_frame()`` / ``decode()``. The bytes
are those of the Rust ``pipetel-recorders`` codec, so a worker written this way feeds a Rust or
Python :class:`SnapshotHub`.

Thread-safety is mstar's: recorders are per-thread (using one from another thread raises
:class:`pipetel.ThreadError`); families, snapshots and envelopes are immutable.

Besides the recorders, this module has the two ends of a stream: :func:`write_frame` (a worker
sending an envelope on a binary stream such as ``sys.stdout.buffer``) and :func:`read_frames`
(the envelopes of a stream, for a process that wants them one by one; a :class:`SnapshotHub`
reads a stream itself with ``read_stream`` / ``spawn_reader``).
"""

from typing import BinaryIO, Iterator

from ._pipetel import (
    Counter,
    DecodeError,
    EdgeTransfers,
    Envelope,
    Family,
    Gauge,
    Histogram,
    HubError,
    MetricSnapshot,
    SnapshotHub,
    SourceStatus,
    StreamReader,
    TransportReport,
    merge,
)

#: The largest frame :func:`read_frames` accepts (the Rust ``FrameReader`` default).
MAX_FRAME_LEN = 64 << 20


def write_frame(stream: BinaryIO, envelope: Envelope) -> None:
    """Writes ``envelope`` as one frame (u32 little-endian length, then the encoding) and flushes."""
    stream.write(envelope.encode_frame())
    stream.flush()


def _read_exactly(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def read_frames(stream: BinaryIO, max_frame_len: int = MAX_FRAME_LEN) -> Iterator[Envelope]:
    """The envelopes of a stream of frames, until it ends cleanly between two frames.

    Raises :class:`DecodeError` for a truncated frame, a length over ``max_frame_len`` (the
    stream is then out of step) or a payload that is not an envelope.
    """
    while True:
        prefix = _read_exactly(stream, 4)
        if not prefix:
            return
        if len(prefix) < 4:
            raise DecodeError(f"stream ended inside a frame: {len(prefix)} of 4 bytes of the length prefix")
        length = int.from_bytes(prefix, "little")
        if length > max_frame_len:
            raise DecodeError(f"frame of {length} bytes exceeds the limit of {max_frame_len} bytes")
        payload = _read_exactly(stream, length)
        if len(payload) < length:
            raise DecodeError(f"stream ended inside a frame: {len(payload)} of {length} bytes of the payload")
        yield Envelope.decode(payload)


__all__ = [
    "Counter",
    "DecodeError",
    "EdgeTransfers",
    "Envelope",
    "Family",
    "Gauge",
    "Histogram",
    "HubError",
    "MAX_FRAME_LEN",
    "MetricSnapshot",
    "SnapshotHub",
    "SourceStatus",
    "StreamReader",
    "TransportReport",
    "merge",
    "read_frames",
    "write_frame",
]
