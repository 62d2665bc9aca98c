"""A worker process that feeds a snapshot hub: it records with pipetel's mstar recorders and
writes one framed envelope per step on its stdout (nothing else goes there).

    python hub_worker.py --source w0 --index 0 --steps 12 [--interval-ms 0]

Used by python/tests/test_hub.py (a Python hub) and tests/e2e/python_workers_feed_a_rust_hub.rs
(a Rust hub). What it records per step ``i`` (1..steps) is a pure function of ``--index`` and
``i`` (see :func:`expected`), so a reader can compute the exact totals of any set of runs.
"""

import argparse
import sys
import time

from pipetel.mstar import Counter, EdgeTransfers, Envelope, Family, Gauge, Histogram, write_frame

ITEMS = Family.counter("pipeline.stage.items", "Items processed", "{item}", ["pipeline.stage.name"])
QUEUE = Family.gauge("worker.queue.depth", "Requests waiting", "{request}", ["worker"])
LATENCY = Family.histogram("task.duration", "Task duration", "s", [], [0.1, 0.5, 1.0])


def step_values(index: int, i: int) -> dict:
    """What worker ``index`` records at step ``i``."""
    return {
        "tokenize": 10.0 * (index + 1),
        "embed": 3.0,
        "queue": float(i),
        "latency": 0.25 * (i % 5),  # 0, .25, .5, .75, 1.0: every bucket, +Inf never
        "bytes": 1000 * i,
        "tensors": 2,
        "seconds": 0.5,
    }


def expected(runs: "list[tuple[int, int]]") -> dict:
    """Exact merged totals of ``runs`` = [(index, steps), ...] (each run a fresh process)."""
    out = {"tokenize": 0.0, "embed": 0.0, "latency_count": 0, "latency_sum": 0.0, "bytes": 0, "transfers": 0}
    for index, steps in runs:
        for i in range(1, steps + 1):
            v = step_values(index, i)
            out["tokenize"] += v["tokenize"]
            out["embed"] += v["embed"]
            out["latency_count"] += 1
            out["latency_sum"] += v["latency"]
            out["bytes"] += v["bytes"]
            out["transfers"] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--index", type=int, required=True)
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--interval-ms", type=int, default=0)
    args = ap.parse_args()

    items, queue, latency = Counter(ITEMS), Gauge(QUEUE), Histogram(LATENCY)
    edges = EdgeTransfers("nccl")
    out = sys.stdout.buffer
    for i in range(1, args.steps + 1):
        v = step_values(args.index, i)
        items.inc(["tokenize"], v["tokenize"])
        items.inc(["embed"], amount=v["embed"])
        queue.set([args.source], v["queue"])
        latency.observe([], v["latency"])
        edges.record(f"gpu{args.index}", "gpu9", v["bytes"], v["tensors"], v["seconds"])
        edges.publish()
        generation, edge_snapshots = edges.latest
        assert generation == i
        snapshots = [items.snapshot(), queue.snapshot(), latency.snapshot(), *edge_snapshots]
        write_frame(out, Envelope(args.source, i, snapshots))
        if args.interval_ms:
            time.sleep(args.interval_ms / 1000)
    print(f"{args.source}: {args.steps} steps sent", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
