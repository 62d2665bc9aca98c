"""Python spans through pipetel's Rust tracer, across threads, asyncio tasks and processes.

The parent process makes a root span, a child in a thread (explicit ``parent=``), children in
asyncio tasks (inherited through contextvars), a stage whose shard is under the root, and starts
a child process that continues the trace from ``pipetel.traceparent()`` (``parent=``). Both
processes export with the usual variables (``OTEL_EXPORTER_OTLP_ENDPOINT``...).

    python python/examples/spans_across_processes.py
"""

import asyncio
import os
import subprocess
import sys
import threading

import pipetel


def child(traceparent):
    with pipetel.init("spans-child"):
        with pipetel.span("child process", parent=traceparent, pid=os.getpid()):
            with pipetel.span("child work"):
                pass


@pipetel.traced(attributes={"kind": "async"})
async def fetch(i):
    await asyncio.sleep(0.01)
    return i


async def gather():
    return await asyncio.gather(*(asyncio.create_task(fetch(i)) for i in range(3)))


def main():
    with pipetel.init("spans-parent"):
        with pipetel.span("root", job="example") as root:
            worker = threading.Thread(target=lambda: pipetel.span("in thread", parent=root).end())
            worker.start()
            worker.join()
            asyncio.run(gather())
            with pipetel.stage("tokenize", shards=1) as stage:
                with stage.shard(0) as shard:
                    shard.record(10, 100)
                    with pipetel.span("in shard"):
                        pass
            print("root", root.traceparent, flush=True)
            subprocess.run([sys.executable, __file__, "--child", pipetel.traceparent()], check=True)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
