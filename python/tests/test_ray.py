"""pipetel.ray on a real Ray cluster of two nodes simulated on this machine: a stage whose shards
run as Ray tasks on both nodes and a stage over Ray Data ``map_batches`` count exactly in the
driver's rows and metrics, worker rows come from the Ray workers of every node, and one trace
spans the driver and the tasks."""

import importlib.util
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import peers

HERE = Path(__file__).resolve().parent


@pytest.fixture
def ray_installed(request):
    if importlib.util.find_spec("ray") is None:
        e = peers.PeerMissing("Ray is not installed (scripts/test-python pins ray[data]==2.60.0)")
        if peers.peers_required():
            pytest.fail(f"PIPETEL_REQUIRE_PEERS=1 and {e}", pytrace=False)
        pytest.skip(str(e))


def test_ray_tasks_on_two_nodes_and_ray_data_count_exactly_in_one_trace(ray_installed, collector, tmp_path):
    env = peers.clean_env(collector.env("grpc"))
    # Ray's socket paths must stay under 108 bytes: a short directory of its own.
    ray_tmp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    env.update({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_LOGS_EXPORTER": "otlp", "RAY_TMPDIR": ray_tmp})
    env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_DISABLE_DOCKER_CPU_WARNING": "1"})
    try:
        done = subprocess.run(
            [sys.executable, str(HERE / "ray_driver.py")], env=env, capture_output=True, text=True, timeout=300
        )
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    seen, row = out["seen"], out["tasks_row"]
    shards = len(seen)
    # Stage row exact, from tasks on both nodes.
    assert len(out["nodes"]) == 2 and {s["node"] for s in seen} == set(out["nodes"]), seen
    assert (row["items"], row["bytes"]) == (sum(10 * (i + 1) for i in range(shards)), sum(100 * (i + 1) for i in range(shards)))
    assert (row["shards_succeeded"], row["shards_failed"]) == (shards, 0), row
    assert peers.sample_value(out["page"], "pipeline_stage_items_total", pipeline_stage_name="ray-tasks") == row["items"]
    # Ray Data: every row once, the batches' bytes (int64 ids: 8 bytes a row).
    data = out["data_row"]
    assert out["data_sum"] == 2 * sum(range(1000))
    assert (data["items"], data["bytes"], data["shards_succeeded"]) == (1000, 8000, 4), data
    assert peers.sample_value(out["page"], "pipeline_stage_bytes_total", pipeline_stage_name="ray-data") == 8000
    # One trace across the driver and the tasks.
    _, trace_id, stage_span, _ = out["tasks_traceparent"].split("-")
    assert all(s["traceparent"].split("-")[1] == trace_id and s["inner"].split("-")[1] == trace_id for s in seen)
    task_pids = {s["pid"] for s in seen}
    assert out["pid"] not in task_pids

    def ends(r: peers.Received, stage: str):
        return [
            x
            for x in r.events("pipeline.worker")
            if x.attributes.get("pipeline.status") == "end" and x.attributes.get("pipeline.stage.name") == stage
        ]

    def arrived(r: peers.Received) -> bool:
        shard_spans = [s for s in r.spans if s.trace_id == trace_id and s.parent_span_id == stage_span]
        return len(ends(r, "ray-tasks")) == shards and len(ends(r, "ray-data")) == 4 and len(shard_spans) == shards

    got = collector.wait_for(arrived, timeout=60)
    rows = ends(got, "ray-tasks")
    # Worker rows from the Ray worker processes of both nodes.
    assert {x.resource["process.pid"] for x in rows} == task_pids
    assert all(x.resource["service.name"] == "ray-driver" and x.trace_id == trace_id for x in rows)
    assert sorted(x.attributes["pipeline.items"] for x in rows) == [10 * (i + 1) for i in range(shards)]
    assert sum(x.attributes["pipeline.items"] for x in ends(got, "ray-data")) == 1000
    inner = [s for s in got.spans if s.trace_id == trace_id and s.name == "in ray task"]
    assert len(inner) == shards
