"""The owner of a stage whose shards run in ``multiprocessing`` ``spawn`` workers, through
``stage.remote()``. Prints one JSON line: the stage row, the stage's traceparent, what each
worker saw, and the owner's own pull page.

    python remote_stage_owner.py SHARDS

Used by python/tests/test_remote_stage.py. Shard ``i`` records ``items(i)`` items and
``nbytes(i)`` bytes and adds ``i`` to the ``docs`` counter; the last shard raises (a failed
shard).
"""

import json
import multiprocessing
import os
import sys
import urllib.request

import pipetel


def items(i: int) -> int:
    return 100 * (i + 1)


def nbytes(i: int) -> int:
    return 1000 * (i + 1)


def work(args):
    handle, i, shards = args
    failed = False
    try:
        with handle.shard(i) as shard:
            for _ in range(10):
                shard.record(items(i) // 10, nbytes(i) // 10)
            shard.add("docs", i)
            with pipetel.span("in remote shard", shard=i) as inner:
                inner_tp = inner.traceparent
            if i == shards - 1:
                raise RuntimeError("corrupt input")
    except RuntimeError:
        failed = True
    return {"pid": os.getpid(), "index": i, "traceparent": shard.traceparent, "inner": inner_tp, "failed": failed}


def main() -> int:
    shards = int(sys.argv[1])
    guard = pipetel.init("remote-owner", prometheus_port=0, exporters_metrics=["prometheus"])
    with pipetel.stage("spawned", shards=shards, counters=["docs"]) as stage:
        handle = stage.remote(report_interval=0.2)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(2) as pool:
            seen = pool.map(work, [(handle, i, shards) for i in range(shards)])
        stage_tp = stage.traceparent
        row = stage.finish()
    page = urllib.request.urlopen(f"http://{guard.prometheus_addr}/metrics", timeout=10).read().decode()
    print(json.dumps({"row": row, "traceparent": stage_tp, "pid": os.getpid(), "seen": seen, "page": page}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
