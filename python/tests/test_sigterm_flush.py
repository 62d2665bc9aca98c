"""A Python program that turns SIGTERM into leaving its ``with`` blocks
(python/examples/graceful_shutdown.py, docs/src/getting-started.md, "Stopping on SIGTERM") exports everything it
recorded before it exits; one that keeps SIGTERM's default action loses what is still buffered.

Both push OTLP gRPC to the real collector with every periodic export 10 minutes away, so nothing
leaves a program before it shuts down, and each is sent SIGTERM once it printed that its work was
done. Asserted at the collector: for the example, a span of every batch it printed, the shard's
end row and the stage row with every item, and the stage's item counter at the printed total;
for the program without a handler, nothing at all.
"""

import os
import re
import signal
import subprocess
import sys

import pytest

import peers
import pipetel

NEVER_MS = "600000"

# Records a span and a finished stage, says so, then waits to be stopped: SIGTERM's default
# action ends it before the guard can flush.
UNHANDLED = """
import sys, time
import pipetel
guard = pipetel.init("sigterm-unhandled")
with pipetel.span("unflushed"):
    pass
with pipetel.stage("unflushed", shards=1) as stage:
    with stage.shard(0) as shard:
        shard.record(5, 50)
print("recorded", flush=True)
time.sleep(120)
"""


def quiet_env(collector: peers.Collector) -> "dict[str, str]":
    """Push to ``collector``, with no periodic export while the program runs."""
    return {
        **collector.env("grpc"),
        "OTEL_METRIC_EXPORT_INTERVAL": NEVER_MS,
        "OTEL_BSP_SCHEDULE_DELAY": NEVER_MS,
        "OTEL_BLRP_SCHEDULE_DELAY": NEVER_MS,
        "PIPETEL_SAMPLE_INTERVAL": NEVER_MS,
        "PYTHONUNBUFFERED": "1",
    }


def of_service(items, service):
    return [i for i in items if i.resource.get("service.name") == service]


@pytest.fixture(autouse=True)
def _needs_init():
    if not hasattr(pipetel, "init"):
        pytest.skip("pipetel.init is not bound in this build")


def test_a_program_that_handles_sigterm_flushes_everything_before_it_exits(collector):
    proc = peers.spawn_example("graceful_shutdown", quiet_env(collector), args=["--interval-ms", "100"])
    try:
        peers.read_until(proc, "batch 5 done", timeout=60)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, f"exit {proc.returncode}\n{out}\n{err}"
    found = re.search(r"^signal received after batch (\d+): (\d+) items; flushing$", out, re.M)
    assert found, out
    batches, items = int(found.group(1)), int(found.group(2))
    assert batches >= 5 and items == batches * 64, out
    assert "flushed in" in out, out

    def final_rows(r: peers.Received):
        rows = of_service(r.logs, "graceful-shutdown-py")
        return [
            x
            for x in rows
            if (x.event_name == "pipeline.worker" and x.attributes.get("pipeline.status") == "end")
            or (x.event_name == "pipeline.stage" and x.attributes.get("pipeline.status") == "succeeded")
        ]

    def items_counted(r: peers.Received):
        p = r.latest("pipeline.stage.items", **{"pipeline.stage.name": "work"})
        return p is not None and p.resource.get("service.name") == "graceful-shutdown-py" and p.value == items

    def arrived(r: peers.Received) -> bool:
        spans = [s for s in of_service(r.spans, "graceful-shutdown-py") if s.name == "batch"]
        return len(spans) == batches and len(final_rows(r)) == 2 and items_counted(r)

    received = collector.wait_for(arrived, timeout=30)
    spans = [s for s in of_service(received.spans, "graceful-shutdown-py") if s.name == "batch"]
    assert sorted(int(s.attributes["batch"]) for s in spans) == list(range(1, batches + 1))
    for row in final_rows(received):
        assert row.attributes["pipeline.items"] == items, row


def test_a_program_that_keeps_the_default_action_loses_what_it_buffered(collector):
    proc = subprocess.Popen(
        [sys.executable, "-c", UNHANDLED],
        env={**os.environ, **quiet_env(collector)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        peers.read_until(proc, "recorded", timeout=60)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == -signal.SIGTERM, proc.returncode
    # The collector works: a program that exits normally gets through while this one's data never
    # arrives.
    done = peers.run_example("graceful_shutdown", quiet_env(collector), args=["--batches", "1", "--interval-ms", "1"])
    assert "done after batch 1" in done.stdout, done.stdout
    received = collector.wait_for(lambda r: of_service(r.spans, "graceful-shutdown-py"), timeout=30)
    assert of_service(received.spans, "sigterm-unhandled") == []
    assert of_service(received.logs, "sigterm-unhandled") == []
    assert of_service(received.metrics, "sigterm-unhandled") == []
