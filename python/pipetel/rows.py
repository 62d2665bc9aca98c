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
Pure Python (``urllib``): no extension call, usable without :func:`pipetel.init`.
"""

from __future__ import annotations

import calendar
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional, Set

from ._pipetel import _ROW_FLOAT_FIELDS, _ROW_TEXT_FIELDS

__all__ = ["query", "logsql", "RowsQueryError"]

# The standard row fields whose values are text, and those that are floats (the other numbers
# are integers): the store's own declaration.
_TEXT_FIELDS = frozenset(_ROW_TEXT_FIELDS)
_FLOAT_FIELDS = frozenset(_ROW_FLOAT_FIELDS)


class RowsQueryError(Exception):
    """The store could not be asked, or its answer is not what VictoriaLogs answers."""


def _quoted(s: str) -> str:
    # JSON string escapes are LogsQL's quoted-string escapes for everything a name holds.
    return json.dumps(s)


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
    q = ['"pipeline.namespace":*']
    if namespace is not None:
        q.append(f"(event_name:={_quoted(namespace)} or event_name:{_quoted(namespace + '.')}*)")
    if shard is not None and (isinstance(shard, bool) or not isinstance(shard, int) or shard < 0):
        raise ValueError(f"shard must be a non-negative int, not {shard!r}")
    for field, value in (
        ("pipeline.stage.name", stage),
        ("pipeline.execution.id", execution),
        ("pipeline.shard.index", None if shard is None else str(shard)),
        ("pipeline.status", status),
        ("service.name", service),
    ):
        if value is not None:
            if not isinstance(value, str):
                raise TypeError(f"{field} filter must be a str, not {type(value).__name__}")
            q.append(f"{_quoted(field)}:={_quoted(value)}")
    return " ".join(q) + " | sort by (_time)"


def _written_float(text: str) -> Optional[float]:
    """The float written as ``text``, or the shortest decimal within a few units in the last
    place of it: VictoriaLogs stores a column of decimals as floats parsed its own way, which
    can move a value by a unit in the last place (0.35 comes back as 0.3500000000000001)."""
    try:
        x = float(text)
    except ValueError:
        return None
    if x != x or x in (float("inf"), float("-inf")) or x == 0.0:
        return x
    for digits in range(1, 18):
        y = float(f"{x:.{digits - 1}e}")
        if abs(x - y) <= 4 * sys.float_info.epsilon * max(abs(x), abs(y)):
            return y
    return x


def _float_or_text(text: str) -> Any:
    v = _written_float(text)
    return text if v is None else v


def _field_value(key: str, text: str, float_counters: Set[str]) -> Any:
    if key in _TEXT_FIELDS:
        return text
    if key in _FLOAT_FIELDS:
        return _float_or_text(text)
    if key.startswith("pipeline.counter."):
        if text in ("true", "false"):
            return text == "true"
        if any(c in text for c in ".eE") or key in float_counters:
            return _float_or_text(text)
    try:
        return int(text)
    except ValueError:
        return _float_or_text(text)


def _time_ns(t: str) -> Optional[int]:
    """Nanoseconds since the epoch of an RFC 3339 UTC time such as 2026-12-02T10:00:29.2998Z."""
    if not t.endswith("Z") or "T" not in t:
        return None
    date_time, _, frac = t[:-1].partition(".")
    if len(frac) > 9 or (frac and not frac.isdigit()):
        return None
    try:
        seconds = calendar.timegm(
            (int(date_time[0:4]), int(date_time[5:7]), int(date_time[8:10]),
             int(date_time[11:13]), int(date_time[14:16]), int(date_time[17:19]), 0, 0, 0)
        )
    except ValueError:
        return None
    return seconds * 1_000_000_000 + int((frac or "0").ljust(9, "0"))


def _row_of(entry: Dict[str, Any], float_counters: Set[str]) -> Optional["tuple[int, Dict[str, Any]]"]:
    time_ns = _time_ns(str(entry.get("_time", "")))
    event = entry.get("event_name")
    if time_ns is None or not isinstance(event, str):
        return None
    row: Dict[str, Any] = {"event": event, "timestamp_ms": time_ns // 1_000_000}
    for key in ("trace_id", "span_id"):
        if entry.get(key):
            row[key] = entry[key]
    for key in sorted(k for k in entry if k.startswith("pipeline.")):
        if isinstance(entry[key], str):
            row[key] = _field_value(key, entry[key], float_counters)
    return time_ns, row


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
) -> Any:
    """The rows in the VictoriaLogs at ``url`` (its base URL, e.g. ``http://victoria-logs:9428``)
    that match every filter given, oldest first.

    Filters, as ``pipetel rows``: ``stage``, ``execution`` (execution id), ``shard`` (index),
    ``status``, ``namespace`` (the rows' namespace, e.g. ``"pipeline"`` or ``"zephyr"``, with
    its sub-namespaces), ``service`` (``service.name``). ``start`` and ``end`` bound the rows'
    times (anything VictoriaLogs takes: RFC 3339, ``"5m"`` ago, ...); by default all rows.

    Returns a ``pandas.DataFrame`` when pandas is installed (``frame=None``) or ``frame=True``,
    else a list of dicts. Raises :class:`RowsQueryError` when the store cannot be reached or
    answers with an error, ``ValueError``/``TypeError`` for a bad argument, and ``ImportError``
    for ``frame=True`` without pandas.
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url must be the store's http:// base URL, e.g. http://victoria-logs:9428, not {url!r}")
    pandas = None
    if frame is None or frame:
        try:
            import pandas  # type: ignore[import-untyped, import-not-found, no-redef]
        except ImportError:
            if frame:
                raise
    form = {"query": logsql(stage=stage, execution=execution, shard=shard, status=status,
                            namespace=namespace, service=service)}
    if start is not None:
        form["start"] = start
    if end is not None:
        form["end"] = end
    endpoint = url.rstrip("/") + "/select/logsql/query"
    req = urllib.request.Request(endpoint, data=urllib.parse.urlencode(form).encode(), method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        raise RowsQueryError(f"{endpoint}: HTTP {e.code}: {e.read().decode('utf-8', 'replace').strip()}") from None
    except (OSError, ValueError) as e:
        raise RowsQueryError(f"{endpoint}: {e}") from None
    entries: List[Dict[str, Any]] = []
    for n, line in enumerate(body.splitlines()):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            entry = None
        if not isinstance(entry, dict):
            raise RowsQueryError(f"{endpoint}: line {n + 1} of the answer is not a JSON object (is this VictoriaLogs?)")
        entries.append(entry)
    float_counters = {
        k for e in entries for k, v in e.items() if k.startswith("pipeline.counter.") and isinstance(v, str) and "." in v
    }
    rows = [r for r in (_row_of(e, float_counters) for e in entries) if r is not None]
    rows.sort(key=lambda r: r[0])
    dicts = [r for _, r in rows]
    if pandas is not None:
        return pandas.DataFrame(dicts)
    return dicts
