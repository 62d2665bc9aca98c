"""The hot-path cost of pipetel's Python recording calls next to a bare PyO3 call, prometheus_client
and the OpenTelemetry Python SDK. A benchmark, not a test: it prints a markdown table.

    PIPETEL_PY_PROFILE=release scripts/bench-python        # builds the release wheel, runs this
    python python/benches/bench_record.py [--number 200000] [--repeat 7]

Every row is timed in this one process with the stdlib ``timeit``: ``repeat`` runs of ``number``
calls each, the median run divided by ``number`` (nanoseconds per call). Rows whose API is not
available in this build (or whose package is not installed) are listed as skipped with why.

Targets (for ``shard.record(items, nbytes)`` and a TeleFuser registry ``counter.inc()``; mstar's
``Counter.inc`` is shown against the same targets): at most 2x the bare PyO3 no-op of the same
arity, at least 3x faster than prometheus_client ``Counter.inc()``, at least 10x faster than the
OTel SDK ``Counter.add(1, attrs)`` with 3 attributes.
"""

import argparse
import platform
import statistics
import sys
import timeit
from typing import Callable, Dict, List, Optional, Tuple

import pipetel
from pipetel import _pipetel


Row = Tuple[str, Dict[str, object]]


def time_call(row: Row, number: int, repeat: int) -> float:
    """Median nanoseconds per execution of the statement ``row`` over ``repeat`` runs of
    ``number`` executions (timeit compiles the statement into its loop: no wrapper call)."""
    stmt, names = row
    timer = timeit.Timer(stmt, globals=names)
    runs = timer.repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number * 1e9


# --- the rows: name -> a setup returning (statement, its names) to time, or raising ------------


def bare_noop():
    return "f()", {"f": _pipetel._BenchNoOp().noop}


def bare_noop2():
    return "f(100, 4096)", {"f": _pipetel._BenchNoOp().noop2}


def mstar_counter_no_labels():
    c = pipetel.mstar.Counter(pipetel.mstar.Family.counter("bench.plain", "bench", "1", []))
    return "f()", {"f": c.inc}


def mstar_counter_labels():
    c = pipetel.mstar.Counter(pipetel.mstar.Family.counter("bench.items", "bench", "1", ["stage"]))
    return "f(labels)", {"f": c.inc, "labels": ["tokenize"]}


def shard_record():
    stage_fn = getattr(pipetel, "stage", None)
    if stage_fn is None:
        raise LookupError("pipetel.stage is not bound in this build")
    stage = stage_fn("bench", shards=1)
    stage.__enter__()
    shard = stage.shard(0).__enter__()
    return "f(100, 4096)", {"f": shard.record}


def telefuser_counter_inc():
    try:
        from pipetel.telefuser import get_metrics_registry
    except ImportError as e:
        raise LookupError(f"pipetel.telefuser is not available: {e}") from None
    counter = get_metrics_registry().counter("bench_requests_total", "bench")
    return "f()", {"f": counter.inc}


def prometheus_counter():
    import prometheus_client

    c = prometheus_client.Counter("bench_plain", "bench", registry=prometheus_client.CollectorRegistry())
    return "f()", {"f": c.inc}


def prometheus_counter_labels():
    import prometheus_client

    c = prometheus_client.Counter("bench_items", "bench", ["stage"], registry=prometheus_client.CollectorRegistry())
    return "c.labels('tokenize').inc()", {"c": c}


def otel_sdk_counter_3_attrs():
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    counter = provider.get_meter("bench").create_counter("bench.items")
    attrs = {"stage": "tokenize", "worker": "w0", "status": "ok"}
    return "f(1, attrs)", {"f": counter.add, "attrs": attrs}


ROWS: List[Tuple[str, Callable[[], Row]]] = [
    ("bare PyO3 no-op `noop()`", bare_noop),
    ("bare PyO3 no-op `noop2(a, b)`", bare_noop2),
    ("pipetel `shard.record(items, nbytes)`", shard_record),
    ("pipetel TeleFuser registry `counter.inc()`", telefuser_counter_inc),
    ("pipetel mstar `Counter.inc()` (no labels)", mstar_counter_no_labels),
    ("pipetel mstar `Counter.inc([label])`", mstar_counter_labels),
    ("prometheus_client `Counter.inc()`", prometheus_counter),
    ("prometheus_client `Counter.labels(x).inc()`", prometheus_counter_labels),
    ("OTel Python SDK `Counter.add(1, attrs)`, 3 attributes", otel_sdk_counter_3_attrs),
]

#: Subject row -> the bare no-op row of the same arity.
BASELINE = {
    "pipetel `shard.record(items, nbytes)`": "bare PyO3 no-op `noop2(a, b)`",
    "pipetel TeleFuser registry `counter.inc()`": "bare PyO3 no-op `noop()`",
    "pipetel mstar `Counter.inc()` (no labels)": "bare PyO3 no-op `noop()`",
    "pipetel mstar `Counter.inc([label])`": "bare PyO3 no-op `noop()`",
}
PROM = "prometheus_client `Counter.inc()`"
#: The rows the targets apply to (``shard.record`` and the registry ``counter.inc()``); the
#: mstar rows are shown against the same figures for reference: their labels are a Python list
#: converted per call, which a bare no-op does not pay.
TARGETED = {"pipetel `shard.record(items, nbytes)`", "pipetel TeleFuser registry `counter.inc()`"}
#: A labelled call is compared with prometheus_client's labelled call (the same work: find the
#: series, then add); every other subject with the plain ``Counter.inc()``.
PROM_FOR = {"pipetel mstar `Counter.inc([label])`": "prometheus_client `Counter.labels(x).inc()`"}
OTEL = "OTel Python SDK `Counter.add(1, attrs)`, 3 attributes"


def main() -> int:
    ap = argparse.ArgumentParser(description="pipetel's Python recording calls against the alternatives")
    ap.add_argument("--number", type=int, default=200_000, help="calls per run")
    ap.add_argument("--repeat", type=int, default=7, help="runs per row (the median is reported)")
    args = ap.parse_args()

    ns: Dict[str, float] = {}
    skipped: Dict[str, str] = {}
    for name, setup in ROWS:
        try:
            row = setup()
            exec(row[0], dict(row[1]))  # a first call outside the timing (and a check that it works)
        except Exception as e:  # noqa: BLE001 (a row that cannot run is reported, not fatal)
            skipped[name] = f"{type(e).__name__}: {e}"
            continue
        ns[name] = time_call(row, args.number, args.repeat)

    def ratio(a: Optional[float], b: Optional[float]) -> str:
        return f"{a / b:.2f}x" if a and b else "n/a"

    print(f"pipetel {pipetel.__version__}, CPython {platform.python_version()}, {platform.machine()}; "
          f"median of {args.repeat} runs x {args.number} calls\n")
    print("| call | ns/call | vs bare no-op (target <= 2x) | prometheus_client / this (target >= 3x) | OTel SDK 3 attrs / this (target >= 10x) |")
    print("| --- | ---: | ---: | ---: | ---: |")
    failed = []
    for name, _ in ROWS:
        if name not in ns:
            print(f"| {name} | skipped | | | |")
            continue
        t = ns[name]
        if name in BASELINE:
            base = ns.get(BASELINE[name])
            vs_bare = ratio(t, base)
            prom = PROM_FOR.get(name, PROM)
            vs_prom = ratio(ns.get(prom), t)
            vs_otel = ratio(ns.get(OTEL), t)
            ok = (base is None or t <= 2 * base) and (prom not in ns or ns[prom] >= 3 * t) and (OTEL not in ns or ns[OTEL] >= 10 * t)
            if not ok and name in TARGETED:
                failed.append(name)
            print(f"| {name} | {t:.1f} | {vs_bare} | {vs_prom} | {vs_otel} |")
        else:
            print(f"| {name} | {t:.1f} | | | |")
    for name, why in skipped.items():
        print(f"\nskipped: {name}: {why}")
    if failed:
        print("\nmissing a target: " + "; ".join(failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
