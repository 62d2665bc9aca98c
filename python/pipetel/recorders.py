"""Cumulative per-thread recorders and the snapshot hub (the Rust ``pipetel-recorders`` and
``pipetel-hub`` crates), for a worker that records on its own threads and ships snapshots.

Map:

* :class:`Family` (``Family.counter`` / ``gauge`` / ``histogram``: a metric's name, help, unit,
  label names and buckets) and the recorders of one family: :class:`Counter`
  (``inc(labels, amount=1.0)``), :class:`Gauge` (``set``, ``add``), :class:`Histogram`
  (``observe``). Each has ``snapshot()``, a :class:`MetricSnapshot` (``label_values``,
  ``values``, ``bucket_counts`` cumulative with ``+Inf`` last, ``sums``, ``get(labels)``).
* :func:`merge` adds the snapshots of one family (the recorders of several threads).
* :class:`EdgeTransfers`: bytes, tensors and seconds moved between two endpoints of a
  transport (``record(src, dst, nbytes, tensors, seconds)``, ``publish()``, ``latest``).
* :class:`Envelope`: a source, a sequence number and snapshots, with ``encode()`` /
  ``encode_frame()`` / ``decode()`` (the bytes of the Rust codec), and the two ends of a stream:
  :func:`write_frame` and :func:`read_frames`.
* :class:`SnapshotHub`: merges the envelopes of many workers into the metrics ``pipetel.init``
  exports (``read_stream`` / ``spawn_reader`` with a :class:`StreamReader`;
  :class:`SourceStatus`, :class:`TransportReport`).

These are not the registry's counters: ``pipetel.Counter`` is prometheus_client's kind of
counter (:mod:`pipetel.registry`); ``pipetel.recorders.Counter(family)`` is the per-thread
recorder. Recorders are per-thread, as in Rust: using one from a thread other than the one that
created it raises :class:`pipetel.ThreadError`; take one recorder per thread and :func:`merge`
their snapshots. Families, snapshots and envelopes are immutable. mstar's names for all this are
:mod:`pipetel.mstar`.
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
