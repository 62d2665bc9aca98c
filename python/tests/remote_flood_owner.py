"""The owner of a stage whose listener is flooded with idle connections that never
authenticate, while one real ``spawn`` worker runs a shard. Prints one JSON line: the stage
row, how long the worker's shard end (its report) took, the flood's counts, the most threads
the owner had during the flood, and the receiver threads left after the stage ended.

    python remote_flood_owner.py CONNECTIONS [during]

By default the worker starts once every connection of the flood is open; with ``during``, once
half of them are (the rest keep arriving while the worker reports). The owner runs with a soft limit of 1,024 descriptors (a common default), so a flood larger
than that exhausts descriptors unless the listener bounds what unauthenticated connections hold.
Used by python/tests/test_remote_hardening.py; the figure in docs/src/reliability.md comes
from it.
"""

import json
import multiprocessing
import resource
import subprocess
import sys
import threading
import time

import pipetel

ITEMS, BYTES = 1234, 56789

# Holds CONNECTIONS idle connections to HOST:PORT (sending nothing), says "ready" once every
# connect was tried, and keeps them until its stdin closes.
FLOOD = r"""
import resource, socket, sys
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = n + 64
if soft < want and (hard == resource.RLIM_INFINITY or hard >= want):
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
held, failed = [], 0
for i in range(n):
    if i == n // 2:
        print("half", flush=True)
    try:
        s = socket.create_connection((host, port), timeout=5)
        held.append(s)
    except OSError:
        failed += 1
print(f"ready {len(held)} {failed}", flush=True)
sys.stdin.read()
"""


def work(handle):
    with handle.shard(0) as shard:
        shard.record(ITEMS, BYTES)
        start = time.monotonic()
    return time.monotonic() - start  # the shard's end: its report sent and counted by the owner


def main() -> int:
    connections = int(sys.argv[1])
    during = len(sys.argv) > 2 and sys.argv[2] == "during"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    pipetel.init("flood-owner", prometheus_port=0, exporters_metrics=["prometheus"])
    stage = pipetel.stage("flooded", shards=1)
    handle = stage.remote(report_interval=60)
    host, port = handle.address
    most_threads = [threading.active_count()]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.01):
            most_threads[0] = max(most_threads[0], threading.active_count())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    flood = subprocess.Popen(
        [sys.executable, "-c", FLOOD, host, str(port), str(connections)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert flood.stdout is not None
        ready = flood.stdout.readline().split()  # "half" (or "ready" for no connections)
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            if ready == ["half"] and not during:
                ready = flood.stdout.readline().split()
            report_seconds = pool.apply(work, (handle,))
            if ready == ["half"]:
                ready = flood.stdout.readline().split()
            sampling.set()
            row = stage.finish()
            # The stage ended while the worker's connection and the flood's are still open.
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                left = [t.name for t in threading.enumerate() if t.name.startswith("pipetel-remote")]
                if not left:
                    break
                time.sleep(0.05)
    finally:
        if flood.stdin:
            flood.stdin.close()
        flood.wait(timeout=30)
    print(
        json.dumps(
            {
                "row": row,
                "report_seconds": report_seconds,
                "held": int(ready[1]) if len(ready) == 3 else -1,
                "failed": int(ready[2]) if len(ready) == 3 else -1,
                "most_threads": most_threads[0],
                "left": left,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
