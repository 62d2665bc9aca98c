"""pipetel.zephyr (Marin Zephyr's StatsWriter) and the stage/shard handles.

Validation and the handles' exact totals run in this process (no init: rows then go nowhere,
the returned rows still hold the totals); programs that export run as subprocesses.
"""

import json
import os
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone

import pytest

import peers
import pipetel
from pipetel import zephyr
from pipetel.zephyr import StatsWriter, ZephyrWorkerStatStatus
from zephyr_rows import stage_stat, worker_stat

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "examples", "zephyr_stats.py")


def test_status_enum_and_constants_are_zephyrs():
    assert [s.value for s in ZephyrWorkerStatStatus] == ["START", "RUNNING", "END", "FAILED"]
    assert str(ZephyrWorkerStatStatus.END) == "END" and ZephyrWorkerStatStatus.END == "END"
    assert zephyr.ZEPHYR_STAGE_STATS_NAMESPACE == "zephyr.stage"
    assert zephyr.ZEPHYR_WORKER_STATS_NAMESPACE == "zephyr.worker"
    assert zephyr.ZEPHYR_STAGE_ITEM_COUNT_KEY == "zephyr/item_count"
    assert zephyr.ZEPHYR_WORKER_MEM_PEAK_KEY == "zephyr/worker/mem_peak_bytes"


def test_valid_rows_are_accepted_with_the_exact_keywords():
    w = StatsWriter(None)
    w.emit_worker_stat(**worker_stat())
    w.emit_worker_stat(**worker_stat(status="END", items=10.0, ts=datetime.now(timezone.utc)))
    w.emit_stage_stat(**stage_stat(stage_counters={"zephyr/item_count": 10, "a/b.c-d_e": 0.25}))
    w.emit_stage_stat(**stage_stat(status=ZephyrWorkerStatStatus.FAILED, stage_counters={}))
    w.close()


@pytest.mark.parametrize(
    "over, exc, words",
    [
        (dict(items=float("nan")), ValueError, "items"),
        (dict(items=-1), ValueError, "items"),
        (dict(byte_rate=float("inf")), ValueError, "byte_rate"),
        (dict(cpu_avg_pct=-0.5), ValueError, "cpu_avg_pct"),
        (dict(mem_peak_bytes="big"), TypeError, "mem_peak_bytes"),
        (dict(mem_avg_bytes=True), TypeError, "mem_avg_bytes"),
        (dict(ts=1733050000.0), TypeError, "ts"),
        (dict(status="DONE"), ValueError, "status"),
        (dict(status=3), TypeError, "status"),
        (dict(shard_idx=-1), ValueError, "shard_idx"),
        (dict(cpu_time_total=None), TypeError, "cpu_time_total"),
    ],
)
def test_bad_worker_inputs_raise_naming_the_keyword(over, exc, words):
    with pytest.raises(exc, match=words):
        StatsWriter(None).emit_worker_stat(**worker_stat(**over))


@pytest.mark.parametrize(
    "over, exc, words",
    [
        (dict(stage_counters={"zephyr/item_count": float("nan")}), ValueError, "zephyr/item_count"),
        (dict(stage_counters={"zephyr/item_count": -3}), ValueError, "negative"),
        (dict(stage_counters={"zephyr//item_count": 1}), ValueError, "stage_counters"),
        (dict(stage_counters={"zephyr/item count": 1}), ValueError, "stage_counters"),
        (dict(stage_counters={1: 1}), TypeError, "stage_counters"),
        (dict(stage_counters={"k": "1"}), TypeError, "k"),
        (dict(stage_counters={"k": False}), TypeError, "bool"),
        (dict(stage_counters=[("k", 1)]), TypeError, "stage_counters"),
        (dict(elapsed=float("nan")), ValueError, "elapsed"),
        (dict(elapsed=-1.0), ValueError, "elapsed"),
        (dict(total_shards=-2), ValueError, "total_shards"),
        (dict(status="done"), ValueError, "status"),
    ],
)
def test_bad_stage_inputs_raise_naming_the_argument(over, exc, words):
    with pytest.raises(exc, match=words):
        StatsWriter(None).emit_stage_stat(**stage_stat(**over))


def test_unknown_and_missing_keywords_are_refused():
    with pytest.raises(TypeError, match="bytes"):
        StatsWriter(None).emit_worker_stat(**worker_stat(bytes=1))
    kw = worker_stat()
    del kw["mem_peak_bytes"]
    with pytest.raises(TypeError, match="mem_peak_bytes"):
        StatsWriter(None).emit_worker_stat(**kw)


# ----- the handle form -----


def test_stage_and_shards_across_threads_give_exact_totals():
    with pipetel.stage("tokenize", shards=4, execution_id="run-1") as stage:
        assert stage.execution_id == "run-1"

        def work(i):
            with stage.shard(i) as shard:
                for _ in range(1000):
                    shard.record(1, 3)
                shard.add("rows/skipped", 2)
                shard.add("zephyr/item_ratio", 0.5)

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        row = stage.finish()
    assert (row["items"], row["bytes"], row["total_shards"]) == (4000, 12000, 4)
    assert (row["shards_succeeded"], row["shards_failed"]) == (4, 0)
    assert row["status"] == "succeeded"
    assert row["counters"] == {"rows/skipped": 8, "zephyr/item_ratio": 2.0}


def test_an_exception_in_a_shard_fails_it_with_the_reason_and_goes_on():
    stage = pipetel.stage("parse", shards=2)
    with pytest.raises(ZeroDivisionError):
        with stage.shard(0) as shard:
            shard.record(5, 50)
            1 / 0
    with pytest.raises(RuntimeError, match="already ended"):
        shard.finish()
    with stage.shard(1) as ok:
        ok.record(1)
    row = stage.finish(strict=True)
    assert row["status"] == "failed" and row["shards_failed"] == 1
    assert row["reason"] == "1 of 2 shards failed"
    with pytest.raises(RuntimeError, match="already ended"):
        stage.shard(3)


def test_an_exception_in_a_stage_fails_it_with_the_exception_as_reason():
    captured = {}
    with pytest.raises(ValueError):
        with pipetel.stage("load") as stage:
            captured["stage"] = stage
            raise ValueError("no such table")
    with pytest.raises(RuntimeError, match="already ended"):
        captured["stage"].finish()


def test_shard_failure_row_names_the_exception():
    stage = pipetel.stage("embed", shards=1)
    shard = stage.shard(0)
    try:
        with shard:
            raise KeyError("token")
    except KeyError:
        pass
    stage2 = pipetel.stage("embed2", shards=1)
    row = stage2.shard(0).fail("gpu fell off")
    assert row["status"] == "failed" and row["reason"] == "gpu fell off"
    stage.finish()
    stage2.finish()


def test_record_and_add_refuse_bad_values_naming_the_argument():
    stage = pipetel.stage("check", shards=1)
    with stage.shard(0) as shard:
        with pytest.raises(ValueError, match="items"):
            shard.record(-1, 0)
        with pytest.raises(TypeError, match="nbytes"):
            shard.record(1, 2.5)
        with pytest.raises(ValueError, match="not a finite"):
            shard.add("k", float("nan"))
        with pytest.raises(ValueError, match="counter key"):
            shard.add("bad key", 1)
        with pytest.raises(TypeError, match="bool"):
            shard.add("k", True)
        shard.record(2, 4)
        assert shard.index == 0
    row = stage.finish()
    assert (row["items"], row["bytes"]) == (2, 4)


def test_spans_inside_a_shard_are_its_children_and_the_stage_is_a_childs_of_the_current_span():
    # Before init spans are no-ops; what is checked here is that the shard is the current span.
    stage = pipetel.stage("nest", shards=1)
    with stage:
        with stage.shard(0) as shard:
            assert pipetel.current_span() is not None
            assert pipetel.current_span().name == "shard 0 of nest"
        assert pipetel.current_span().name == "stage nest"
    assert pipetel.current_span() is None


# ----- rows with every field, through the rows file (a subprocess: it calls init) -----


def test_the_example_writes_zephyr_rows_with_every_field(tmp_path):
    rows_file = tmp_path / "rows.jsonl"
    env = peers.clean_env()
    env.update(PIPETEL_ROWS_FILE=str(rows_file), OTEL_METRICS_EXPORTER="none")
    done = subprocess.run([sys.executable, EXAMPLE], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    ns = lambda r: r.get("pipeline.namespace") or r.get("namespace")
    workers = [r for r in rows if ns(r) == "zephyr.worker"]
    stages = [r for r in rows if ns(r) == "zephyr.stage"]
    assert len(workers) == 4 and len(stages) == 1, rows
    end = next(r for r in workers if r["pipeline.status"] == "end" and r["pipeline.shard.index"] == 0)
    # A naive `ts` is UTC, as Zephyr writes it.
    assert abs(end["timestamp_ms"] / 1000 - time.time()) < 600
    assert end["pipeline.items"] == 1200 and end["pipeline.bytes"] == 4_800_000
    assert end["pipeline.item_rate"] == 300.0 and end["pipeline.cpu.time_seconds"] == 3.5
    assert end["pipeline.cpu.percent"] == 95.0 and end["pipeline.cpu.percent_avg"] == 87.5
    assert end["pipeline.memory.current_bytes"] == 120_000_000
    assert end["pipeline.memory.avg_bytes"] == 100_000_000 and end["pipeline.memory.peak_bytes"] == 130_000_000
    stage = stages[0]
    assert stage["pipeline.stage.name"] == "tokenize" and stage["pipeline.execution.id"] == "tokenize-2026-12-01"
    assert stage["pipeline.status"] == "succeeded" and stage["pipeline.items"] == 2000
    assert stage["pipeline.bytes"] == 8_000_000 and stage["pipeline.elapsed_seconds"] == 4.25
    assert stage["pipeline.shards.total"] == 2 and stage["pipeline.cpu.percent_avg"] == 87.5
    assert stage["pipeline.counter.zephyr/worker/mem_peak_bytes"] == 130_000_000


# ----- end to end: the example's rows reach the real collector, its metrics real Prometheus -----


def test_zephyr_example_reaches_the_collector_and_prometheus(collector, prometheus, tmp_path):
    env = {
        **peers.both_ways_env(collector, prometheus),
        "OTEL_SERVICE_NAME": "zephyr-coordinator",
        "PIPETEL_ROWS_FILE": str(tmp_path / "rows.jsonl"),
        # The shards' worker series after their end rows (by default only running shards have one).
        "PIPETEL_SHARD_METRICS": "all",
    }
    proc = peers.spawn_example("zephyr_stats", env, args=["--hold"])
    try:
        peers.read_until(proc, "emitted", timeout=60)
        sel = 'pipeline_stage_name="tokenize",job="pipetel"'
        prometheus.wait_for_value(f'pipeline_stage_items_total{{{sel},pipeline_namespace="zephyr.stage"}}', 2000, 30)
        prometheus.wait_for_value(f"pipeline_stage_bytes_total{{{sel}}}", 8_000_000, 20)
        prometheus.wait_for_value(f'pipeline_stage_runs_total{{{sel},pipeline_status="succeeded"}}', 1, 20)
        prometheus.wait_for_value(
            f'pipeline_stage_counters{{{sel},pipeline_counter_name="zephyr/worker/mem_peak_bytes"}}', 130_000_000, 20
        )
        worker = f'{sel},pipeline_namespace="zephyr.worker"'
        prometheus.wait_for_value(f'pipeline_worker_items_total{{{worker},pipeline_shard_index="0"}}', 1200, 20)
        prometheus.wait_for_value(f'pipeline_worker_bytes_total{{{worker},pipeline_shard_index="1"}}', 3_200_000, 20)
        prometheus.wait_for_value(f'pipeline_worker_cpu_time_seconds_total{{{worker},pipeline_shard_index="1"}}', 3.5, 20)
    finally:
        if proc.stdin:
            proc.stdin.close()
        proc.wait(timeout=60)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""

    def arrived(r: peers.Received) -> bool:
        return len(r.events("zephyr.worker")) == 4 and len(r.events("zephyr.stage")) == 1

    got = collector.wait_for(arrived, timeout=30)
    (stage,) = got.events("zephyr.stage")
    a = stage.attributes
    assert stage.resource["service.name"] == "zephyr-coordinator"
    assert (a["pipeline.namespace"], a["pipeline.stage.name"], a["pipeline.status"]) == ("zephyr.stage", "tokenize", "succeeded")
    assert a["pipeline.execution.id"] == "tokenize-2026-12-01"
    assert (a["pipeline.items"], a["pipeline.bytes"], a["pipeline.shards.total"]) == (2000, 8_000_000, 2)
    assert a["pipeline.elapsed_seconds"] == 4.25 and a["pipeline.cpu.percent_avg"] == 87.5
    for key, value in {
        "zephyr/item_count": 2000,
        "zephyr/bytes_processed": 8_000_000,
        "zephyr/worker/cpu_pct_average": 87.5,
        "zephyr/worker/cpu_time": 7.0,
        "zephyr/worker/mem_average_bytes": 100_000_000,
        "zephyr/worker/mem_peak_bytes": 130_000_000,
    }.items():
        assert a[f"pipeline.counter.{key}"] == value, key
    end = next(
        r.attributes
        for r in got.events("zephyr.worker")
        if r.attributes["pipeline.status"] == "end" and r.attributes["pipeline.shard.index"] == 1
    )
    assert end == {
        **end,
        "pipeline.namespace": "zephyr.worker",
        "pipeline.stage.name": "tokenize",
        "pipeline.execution.id": "tokenize-2026-12-01",
        "pipeline.items": 800,
        "pipeline.bytes": 3_200_000,
        "pipeline.item_rate": 200.0,
        "pipeline.byte_rate": 800_000.0,
        "pipeline.cpu.time_seconds": 3.5,
        "pipeline.cpu.percent": 95.0,
        "pipeline.cpu.percent_avg": 87.5,
        "pipeline.memory.current_bytes": 120_000_000,
        "pipeline.memory.avg_bytes": 100_000_000,
        "pipeline.memory.peak_bytes": 130_000_000,
    }
    starts = [r for r in got.events("zephyr.worker") if r.attributes["pipeline.status"] == "start"]
    assert sorted(r.attributes["pipeline.shard.index"] for r in starts) == [0, 1]
