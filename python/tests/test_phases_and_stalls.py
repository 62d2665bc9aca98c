"""Phases and stalls of Python shards: ``shard.phase(...)`` (a context manager and a decorator),
``stage.answers()``, and the ``stalled`` / ``resumed`` rows the sampler writes for a shard that
stops recording, with the Python stack of the thread it is stuck in.

``init`` is once per process, so each scenario runs in a child process that writes its rows to a
rows file the test reads back."""

import json
import pathlib
import subprocess
import sys
import textwrap
import time
from typing import Any, Dict, List, Tuple

import pytest

import pipetel
import peers

PHASE = "pipeline.phase.{}.seconds"
UNPHASED = "pipeline.unphased.seconds"
ELAPSED = "pipeline.elapsed_seconds"


def run(tmp_path: pathlib.Path, body: str, **settings: Any) -> Tuple[List[Dict[str, Any]], str]:
    """Runs ``body`` inside ``with pipetel.init(...)`` in a child process (``stuck_in_here`` and
    ``time`` defined) with its rows going to a file; returns the rows and the child's stdout."""
    rows_file = tmp_path / "rows.jsonl"
    settings = dict(pipeline_rows_file=str(rows_file), **settings)
    program = textwrap.dedent(
        """
        import json, time
        import pipetel

        def stuck_in_here(seconds):
            time.sleep(seconds)

        with pipetel.init("phases-test", **{settings!r}):
        {body}
        """
    ).format(settings=settings, body=textwrap.indent(textwrap.dedent(body), "    "))
    env = peers.clean_env({"OTEL_METRICS_EXPORTER": "none"})
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    return rows, done.stdout


def worker_rows(rows: List[Dict[str, Any]], shard: int, status: str) -> List[Dict[str, Any]]:
    return [r for r in rows if r.get("pipeline.shard.index") == shard and r.get("pipeline.status") == status]


def one(rows: List[Dict[str, Any]], shard: int, status: str) -> Dict[str, Any]:
    found = worker_rows(rows, shard, status)
    assert len(found) == 1, (status, found)
    return found[0]


def phase_total(row: Dict[str, Any]) -> float:
    return sum(v for k, v in row.items() if k.startswith("pipeline.phase.") and k.endswith(".seconds")) + row[UNPHASED]


def timestamp(row: Dict[str, Any]) -> float:
    """A row's time as seconds since the epoch."""
    return row["timestamp_ms"] / 1000


def test_a_phase_block_and_a_decorated_function_split_the_shard_wall_time(tmp_path):
    rows, out = run(
        tmp_path,
        """
        with pipetel.stage("load", shards=2) as stage:
            with stage.shard(0) as shard:
                with shard.phase("wait.input"):
                    assert shard.current_phase == "wait.input"
                    time.sleep(2)
                assert shard.current_phase is None
                time.sleep(0.1)
            with stage.shard(1) as shard:
                @shard.phase("decode")
                def decode(x):
                    time.sleep(0.1)
                    return x + 1
                assert [decode(i) for i in range(3)] == [1, 2, 3]
            print(json.dumps(stage.answers()))
        """,
    )
    waited = one(rows, 0, "end")
    assert waited[PHASE.format("wait.input")] == pytest.approx(2.0, rel=0.01)
    assert phase_total(waited) == pytest.approx(waited[ELAPSED], rel=0.01)
    assert waited[UNPHASED] >= 0.1
    decoded = one(rows, 1, "end")
    assert 0.3 <= decoded[PHASE.format("decode")] < 0.4
    assert phase_total(decoded) == pytest.approx(decoded[ELAPSED], rel=0.01)
    answers = json.loads(out)
    assert answers["phases"]["wait.input"] == pytest.approx(2.0, rel=0.01)
    assert answers["phases"]["decode"] == pytest.approx(decoded[PHASE.format("decode")], rel=0.01)
    assert answers["shard_elapsed"]["max"] == pytest.approx(waited[ELAPSED], rel=0.01)
    assert set(answers) >= {"skew", "skewed", "stragglers", "stalls", "unphased_seconds", "off_cpu_seconds"}
    assert answers["stalls"] == 0


def test_a_stalled_shard_gets_a_stalled_row_with_its_python_stack_then_a_resumed_row(tmp_path):
    rows, out = run(
        tmp_path,
        """
        with pipetel.stage("stall", shards=1) as stage:
            with stage.shard(0) as shard:
                shard.record(1)
                print(time.time())
                stuck_in_here(3)
                shard.record(1)
                time.sleep(0.6)
            print(json.dumps(stage.answers()))
        """,
        pipeline_stall_timeout_ms=1000,
        pipeline_sample_interval_ms=200,
    )
    last_record = float(out.splitlines()[0])
    stalled = one(rows, 0, "stalled")
    # Stalled one timeout after the first sample that saw the shard move, which comes within one
    # interval of its last record; a sample interval of latitude for the sampler's own timing.
    assert 1.0 <= timestamp(stalled) - last_record <= 1.0 + 2 * 0.2
    assert "stuck_in_here" in stalled["pipeline.stack"], stalled["pipeline.stack"]
    assert stalled["pipeline.stalled_seconds"] >= 1.0
    resumed = one(rows, 0, "resumed")
    assert timestamp(resumed) > timestamp(stalled)
    assert resumed["pipeline.stalled_seconds"] >= 2.5
    assert one(rows, 0, "end")["pipeline.items"] == 2
    assert json.loads(out.splitlines()[1])["stalls"] == 1


def test_stall_action_fail_ends_the_stalled_shard_failed(tmp_path):
    rows, _ = run(
        tmp_path,
        """
        with pipetel.stage("stall", shards=1) as stage:
            with stage.shard(0) as shard:
                shard.record(1)
                stuck_in_here(2.5)
        """,
        pipeline_stall_timeout_ms=1000,
        pipeline_sample_interval_ms=200,
        pipeline_stall_action="fail",
    )
    failed = one(rows, 0, "failed")
    assert failed["pipeline.failure.reason"] == "stalled for 1 s"
    assert worker_rows(rows, 0, "end") == []
    assert timestamp(failed) == pytest.approx(timestamp(one(rows, 0, "stalled")), abs=0.5)


def test_a_thread_holding_the_gil_costs_the_stalled_row_its_stack_not_the_sampler_its_time(tmp_path):
    # ctypes.PyDLL calls keep the GIL: libc's sleep() under it holds the GIL for 4 s.
    rows, out = run(
        tmp_path,
        """
        import ctypes
        libc = ctypes.PyDLL(None)
        with pipetel.stage("stall", shards=1) as stage:
            with stage.shard(0) as shard:
                shard.record(1)
                print(time.time())
                libc.sleep(4)
                print(time.time())
        """,
        pipeline_stall_timeout_ms=1000,
        pipeline_sample_interval_ms=200,
    )
    last_record, released = (float(line) for line in out.splitlines()[:2])
    stalled = one(rows, 0, "stalled")
    # The stack reader gives up after 1 s: the row comes without a stack, long before the GIL
    # is free again, and the sampler goes on sampling meanwhile.
    assert "pipeline.stack" not in stalled
    assert timestamp(stalled) - last_record <= 1.0 + 2 * 0.2 + 1.0 + 0.2
    assert timestamp(stalled) < released - 1.0
    later = [r for r in worker_rows(rows, 0, "running") if timestamp(stalled) < timestamp(r) < released]
    assert len(later) >= 3, later


def test_phase_names_are_checked_and_a_phase_object_nests():
    stage = pipetel.stage("names", shards=1)
    shard = stage.shard(0)
    for bad in ["", "a b", "unphased", "x" * 65]:
        with pytest.raises(ValueError, match="invalid phase name"):
            shard.phase(bad)
    with pytest.raises(TypeError, match="name: expected a str"):
        shard.phase(7)
    # One object per name (nothing allocated per block), entered any number of times.
    phase = shard.phase("io")
    assert shard.phase("".join(["i", "o"])) is phase and phase.name == "io"
    with phase:
        assert shard.current_phase == "io"
        with shard.phase("decode"):
            assert shard.current_phase == "decode"
            with phase:
                assert shard.current_phase == "io"
            assert shard.current_phase == "decode"
        assert shard.current_phase == "io"
    assert shard.current_phase is None
    with pytest.raises(TypeError, match="cannot decorate"):

        @shard.phase("io")
        def numbers():
            yield 1

    shard.finish()
    # A phase of an ended shard counts nothing and raises nothing.
    with shard.phase("io"):
        assert shard.current_phase is None
    stage.finish()


def test_phase_objects_nested_deeper_than_their_packed_stack_unwind_in_order():
    stage = pipetel.stage("deep", shards=1)
    shard = stage.shard(0)
    io, decode = shard.phase("io"), shard.phase("decode")

    def nest(depth, outer):
        if depth == 0:
            return
        phase = io if depth % 2 else decode
        with phase:
            assert shard.current_phase == phase.name
            nest(depth - 1, phase.name)
            assert shard.current_phase == phase.name
        assert shard.current_phase == outer

    # Each object entered 20 times inside itself: past the 15 previous phases packed in place.
    nest(40, None)
    # An exit with no block open changes nothing.
    io.__exit__(None, None, None)
    assert shard.current_phase is None
    with pytest.raises(ZeroDivisionError):
        with decode:
            1 / 0
    assert shard.current_phase is None
    shard.finish()
    before = stage.answers()["phases"]
    assert set(before) == {"io", "decode"}, before
    # After the end: a known name, a new name and a decorated function count nothing.
    with io, shard.phase("late"):
        time.sleep(0.02)

    @shard.phase("later")
    def late():
        time.sleep(0.02)

    late()
    assert stage.answers()["phases"] == before
    stage.finish()
