"""mstar's ``observability.recorders``, on pipetel's Rust recorders (:mod:`pipetel.recorders`).

A program written against mstar's recorders changes only its import line::

    from pipetel.mstar import Counter, Gauge, Histogram, EdgeTransfers, merge   # was: mstar's

Every name here is :mod:`pipetel.recorders`' own (no wrapper on the hot path):
``Counter(family).inc(labels, amount=1.0)``, ``Gauge(family).set(labels, value)``,
``Histogram(family).observe(labels, value)``, ``snapshot()`` returning a :class:`MetricSnapshot`,
``merge(family, snapshots)``, ``EdgeTransfers(transport).record(src, dst, nbytes, tensors,
seconds)`` with ``publish()`` and ``latest``, and :class:`Envelope` with ``encode()`` /
``encode_frame()`` / ``decode()``. The bytes are those of the Rust ``pipetel-recorders`` codec,
so a worker written this way feeds a Rust or Python :class:`SnapshotHub`; :func:`write_frame`
and :func:`read_frames` are the two ends of a stream.

Thread-safety is mstar's: recorders are per-thread (using one from another thread raises
:class:`pipetel.ThreadError`); families, snapshots and envelopes are immutable.
"""

from . import recorders as _recorders
from .recorders import *  # noqa: F401,F403 (every name is the recorders' own)

__all__ = list(_recorders.__all__)
