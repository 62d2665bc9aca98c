"""The rows of a whole fleet, from the store the gateways write them to (VictoriaLogs).

``pipetel rows --url URL`` in Python: the same filters, over every worker's rows in the fleet's
rows store (``otel-collector/gateway-stores.yaml`` writes them to VictoriaLogs), read through
its HTTP API (``/select/logsql/query``, LogsQL)::

    import pipetel.rows
    rows = pipetel.rows.query("http://victoria-logs:9428", execution="run-4242", stage="tokenize")
    failed = pipetel.rows.query(url, status="failed", frame=False)   # a list of dicts

Each stored record comes back as the row its writer kept in its local store (the JSON line of
``PIPETEL_ROWS_FILE``): the keys ``event``, ``timestamp_ms``, ``trace_id`` and ``span_id``
(when the row has them) and every ``pipeline.*`` field, with the types the local row has
(VictoriaLogs keeps every value as text; the row fields' types are known, and a user counter is
a float when any of its values in the answer has a decimal point, so a float counter that only
ever held whole numbers comes back as an int). Rows come oldest first.

The answer is a ``pandas.DataFrame`` (one row per row, a column per key) when pandas is
installed, a list of dicts otherwise; ``frame=True`` / ``frame=False`` asks for one of them.

The reading is the one of ``pipetel rows --url`` (the fleet reader of the Rust crate
``pipetel-rows``, through the extension): the same query, the same rows with the same values,
the same limits and errors. The answer is read line by line under a read timeout (``timeout``,
the longest wait to connect and for each further part of the answer), a cap of 1 MiB on one
line and a cap on the whole answer (``max_bytes``, 256 MiB by default). It needs no
:func:`pipetel.init`, and runs without holding the GIL.
"""

from __future__ import annotations

from typing import Any, Optional

from ._pipetel import _RowsQueryError as RowsQueryError
from ._pipetel import _ROW_FIELDS, _rows_logsql, _rows_query

__all__ = ["query", "logsql", "RowsQueryError"]


def logsql(
    *,
    stage: Optional[str] = None,
    execution: Optional[str] = None,
    shard: Optional[int] = None,
    status: Optional[str] = None,
    namespace: Optional[str] = None,
    service: Optional[str] = None,
) -> str:
    """The LogsQL query :func:`query` sends for these filters (what ``pipetel rows --url``
    sends): stored rows only (records with a ``pipeline.namespace``), oldest first."""
    if shard is not None and (isinstance(shard, bool) or not isinstance(shard, int) or shard < 0):
        raise ValueError(f"shard must be a non-negative int, not {shard!r}")
    for field, value in (
        (_ROW_FIELDS["stage"], stage),
        (_ROW_FIELDS["execution"], execution),
        (_ROW_FIELDS["status"], status),
        (_ROW_FIELDS["namespace"], namespace),
        ("service.name", service),
    ):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{field} filter must be a str, not {type(value).__name__}")
    return _rows_logsql(
        namespace=namespace, stage=stage, execution=execution, shard=shard, status=status, service=service
    )


def query(
    url: str,
    *,
    stage: Optional[str] = None,
    execution: Optional[str] = None,
    shard: Optional[int] = None,
    status: Optional[str] = None,
    namespace: Optional[str] = None,
    service: Optional[str] = None,
    start: Optional[str] = None,
    end: Optional[str] = None,
    frame: Optional[bool] = None,
    timeout: float = 30.0,
    max_bytes: Optional[int] = None,
) -> Any:
    """The rows in the VictoriaLogs at ``url`` (its base URL, e.g. ``http://victoria-logs:9428``)
    that match every filter given, oldest first.

    Filters, as ``pipetel rows``: ``stage``, ``execution`` (execution id), ``shard`` (index),
    ``status``, ``namespace`` (the rows' namespace, e.g. ``"pipeline"`` or ``"zephyr"``, with
    its sub-namespaces), ``service`` (``service.name``). ``start`` and ``end`` bound the rows'
    times (anything VictoriaLogs takes: RFC 3339, ``"5m"`` ago, ...); by default all rows.

    ``timeout`` is the read timeout in seconds (``--timeout`` of ``pipetel rows``): the longest
    wait to connect and for each further part of the answer. ``max_bytes`` caps the whole
    answer (``--max-bytes``; default 256 MiB); one line of it is capped at 1 MiB.

    Returns a ``pandas.DataFrame`` when pandas is installed (``frame=None``) or ``frame=True``,
    else a list of dicts. Raises :class:`RowsQueryError` when the store cannot be reached, stays
    silent for the read timeout, answers with an error or with more than a cap allows (the
    message names the URL, its user information redacted, and the limit), ``ValueError``/
    ``TypeError`` for a bad argument (an ``https://`` URL included: this build reads plain
    http), and ``ImportError`` for ``frame=True`` without pandas.
    """
    if not isinstance(url, str):
        raise ValueError(f"url must be the store's http:// base URL, e.g. http://victoria-logs:9428, not {url!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds, not {type(timeout).__name__}")
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0):
        raise ValueError(f"max_bytes must be a number of bytes above 0, not {max_bytes!r}")
    for name, bound in (("start", start), ("end", end)):
        if bound is not None and not isinstance(bound, str):
            raise TypeError(f"{name} must be a str, not {type(bound).__name__}")
    pandas = None
    if frame is None or frame:
        try:
            import pandas  # type: ignore[import-untyped, import-not-found, no-redef]
        except ImportError:
            if frame:
                raise
    q = logsql(stage=stage, execution=execution, shard=shard, status=status, namespace=namespace, service=service)
    dicts = _rows_query(url, q, start=start, end=end, timeout=float(timeout), max_bytes=max_bytes)
    if pandas is not None:
        return pandas.DataFrame(dicts)
    return dicts
