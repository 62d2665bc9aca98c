"""Stopping on SIGTERM without losing telemetry: the Python side of docs/src/getting-started.md,
"Stopping on SIGTERM".

Orchestrators stop programs with SIGTERM (Kubernetes, systemd, ``docker stop``, Slurm), and
Python's default action for it ends the interpreter at once: no ``finally`` block, no ``with``
exit and no ``atexit`` handler runs, so pipetel's guard never flushes and the spans, stage and
worker rows and metric points still buffered are lost. The pattern: the signal handler only
sets a flag, the work loop checks it between batches, the ``with`` blocks end as they normally
do (the shard and the stage write their rows), and leaving ``with pipetel.init(...)`` flushes
and shuts down within the shutdown timeout (``PIPETEL_SHUTDOWN_TIMEOUT``, 5 s by default; keep
it under the orchestrator's grace period, 30 s in Kubernetes).

    python python/examples/graceful_shutdown.py --interval-ms 200
    kill -TERM <pid>      # or Ctrl-C

``--batches N`` stops by itself after N batches (default 0: run until a signal).
"""

import argparse
import signal
import threading
import time

import pipetel

ITEMS_PER_BATCH = 64
BYTES_PER_BATCH = 4096


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval-ms", type=int, default=500, help="pause between batches")
    parser.add_argument("--batches", type=int, default=0, help="stop after this many (0: at a signal)")
    args = parser.parse_args()

    # Before anything else: from now on SIGTERM and SIGINT only set the flag. A waiting
    # `stop.wait(...)` returns at once when the handler sets it.
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    with pipetel.init("graceful-shutdown-py"):
        print(f"running; stop with SIGTERM or Ctrl-C", flush=True)
        batch = 0
        with pipetel.stage("work", shards=1) as stage:
            with stage.shard(0) as shard:
                while not stop.is_set() and (args.batches == 0 or batch < args.batches):
                    batch += 1
                    with pipetel.span("batch", batch=batch):
                        time.sleep(0.002)  # the work
                        shard.record(ITEMS_PER_BATCH, BYTES_PER_BATCH)
                    print(f"batch {batch} done", flush=True)
                    stop.wait(args.interval_ms / 1000)
        # The shard and the stage have ended: their rows are recorded.
        reason = "signal received" if stop.is_set() else "done"
        print(f"{reason} after batch {batch}: {batch * ITEMS_PER_BATCH} items; flushing", flush=True)
        started = time.monotonic()
    # Leaving `with pipetel.init(...)` shut pipetel down: everything buffered was exported.
    print(f"flushed in {time.monotonic() - started:.3f} s", flush=True)


if __name__ == "__main__":
    main()
