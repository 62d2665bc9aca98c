"""Remote stages: shards run in ``multiprocessing`` ``spawn`` workers through ``stage.remote()``
count exactly in the owner's stage row and stage metrics, their worker rows and spans go out
from the workers, and the trace continues from the owner's stage span."""

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

import peers
import pipetel
from pipetel.remote import RemoteStage

HERE = Path(__file__).resolve().parent
SHARDS = 5


def test_spawn_workers_count_exactly_in_the_owners_row_and_continue_its_trace(collector):
    env = peers.clean_env({**collector.env("grpc"), "OTEL_TRACES_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp"})
    done = subprocess.run(
        [sys.executable, str(HERE / "remote_stage_owner.py"), str(SHARDS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    row, seen = out["row"], out["seen"]
    items = sum(100 * (i + 1) for i in range(SHARDS))
    nbytes = sum(1000 * (i + 1) for i in range(SHARDS))
    # The owner's row: every remote shard, exactly.
    assert (row["items"], row["bytes"]) == (items, nbytes), row
    assert (row["shards_succeeded"], row["shards_failed"], row["total_shards"]) == (SHARDS - 1, 1, SHARDS), row
    assert row["counters"]["docs"] == sum(range(SHARDS)), row
    # ... and its stage metrics on its own pull endpoint.
    page = out["page"]
    assert peers.sample_value(page, "pipeline_stage_items_total", pipeline_stage_name="spawned") == items
    assert peers.sample_value(page, "pipeline_stage_bytes_total", pipeline_stage_name="spawned") == nbytes
    # The shards ran in other processes.
    worker_pids = {s["pid"] for s in seen}
    assert out["pid"] not in worker_pids and len(worker_pids) >= 1
    # The trace continues: each shard's span and the spans inside it are in the stage's trace.
    _, trace_id, stage_span, _ = out["traceparent"].split("-")
    assert all(s["traceparent"].split("-")[1] == trace_id for s in seen), seen
    assert all(s["inner"].split("-")[1] == trace_id for s in seen), seen

    def arrived(r: peers.Received) -> bool:
        ends = [x for x in r.events("pipeline.worker") if x.attributes.get("pipeline.status") in ("end", "failed")]
        shards = [s for s in r.spans if s.trace_id == trace_id and s.name.startswith("shard ")]
        stage = [s for s in r.spans if s.span_id == stage_span]
        return len(ends) >= SHARDS and len(shards) >= SHARDS and len(stage) == 1

    got = collector.wait_for(arrived, timeout=30)
    ends = [x for x in got.events("pipeline.worker") if x.attributes.get("pipeline.status") in ("end", "failed")]
    # Worker rows come from the worker processes, with the shard's own figures.
    by_index = {x.attributes["pipeline.shard.index"]: x for x in ends}
    assert sorted(by_index) == list(range(SHARDS))
    for i, x in by_index.items():
        assert x.attributes["pipeline.items"] == 100 * (i + 1), x
        assert x.resource["process.pid"] in worker_pids, x.resource
        assert x.trace_id == trace_id
    assert by_index[SHARDS - 1].attributes["pipeline.status"] == "failed"
    shard_spans = [s for s in got.spans if s.trace_id == trace_id and s.name.startswith("shard ")]
    assert all(s.parent_span_id == stage_span for s in shard_spans), shard_spans
    inner = [s for s in got.spans if s.trace_id == trace_id and s.name == "in remote shard"]
    assert len(inner) == SHARDS and {s.parent_span_id for s in inner} <= {s.span_id for s in shard_spans}


def test_spawn_workers_count_exactly_with_no_exporter_but_the_pull_endpoint():
    done = subprocess.run(
        [sys.executable, str(HERE / "remote_stage_owner.py"), str(SHARDS)],
        env=peers.clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    row = out["row"]
    assert (row["items"], row["bytes"], row["shards_failed"]) == (1500, 15000, 1), row
    assert peers.sample_value(out["page"], "pipeline_stage_items_total", pipeline_stage_name="spawned") == 1500
    # No trace exporter: no trace context anywhere, and nothing fails for it.
    assert out["traceparent"] is None and all(s["traceparent"] is None for s in out["seen"])


def test_a_handle_pickles_and_refuses_bad_arguments():
    with pipetel.stage("local", shards=1) as stage:
        handle = stage.remote()
        again = pickle.loads(pickle.dumps(handle))
        assert isinstance(again, RemoteStage)
        assert (again.name, again.execution_id, again.address, again.token) == (
            handle.name,
            handle.execution_id,
            handle.address,
            handle.token,
        )
        # In the owning process a handle's shard is a local shard of the stage itself.
        with again.shard(0) as shard:
            shard.record(7, 70)
        with pytest.raises(ValueError, match="report_interval"):
            stage.remote(report_interval=0)
        with pytest.raises(ValueError, match="report"):
            stage._ingest_remote(b"not an envelope")
        row = stage.finish()
    assert (row["items"], row["bytes"], row["shards_succeeded"]) == (7, 70, 1)
    # The listener stops with the stage: a new handle cannot be made any more.
    with pytest.raises(RuntimeError, match="already ended"):
        stage.remote()
