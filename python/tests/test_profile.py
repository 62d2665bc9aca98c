"""The CPU profiler in a Python process (``PIPETEL_PROFILE=cpu``): samples of Python shards carry
their Python stacks, labelled with stage, shard and phase like Rust's, with the native frames of
the binding below the Python frame that called it; the stage row names the hot function.

``init`` and the profiler are once per process, so the scenario runs in a child process that
writes its rows (and the profile store beside them) to a directory the test reads back."""

import json
import pathlib
import subprocess
import sys
import textwrap
from typing import Any, Callable, Dict, List

import peers

PROGRAM = textwrap.dedent(
    """
    import threading
    import pipetel

    def spin_in_python(n):
        x = 0
        for i in range(n):
            x = (x * 31 + i) % 1000003
        return x

    def other_python_work(n):
        x = 1
        for i in range(n):
            x = (x * 17 + i) % 999983
        return x

    def left_half(n):
        return spin_in_python(n)

    def right_half(n):
        return spin_in_python(n)

    def record_a_lot(shard, n):
        for _ in range(n):
            shard.record(1, 8)

    with pipetel.init("py-profile", pipeline_rows_file={rows!r}):
        hot = pipetel.stage("py_hot", execution_id="e1", shards=1)
        other = pipetel.stage("py_other", execution_id="e1", shards=1)
        def run_hot():
            with hot.shard(0) as shard:
                spin_in_python(5_000_000)
        def run_other():
            with other.shard(0) as shard:
                other_python_work(5_000_000)
        threads = [threading.Thread(target=run_hot), threading.Thread(target=run_other)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        hot.finish()
        other.finish()

        binding = pipetel.stage("py_binding", execution_id="e1", shards=1)
        with binding.shard(0) as shard:
            record_a_lot(shard, 300_000)
        binding.finish()

        halves = pipetel.stage("py_phases", execution_id="e1", shards=1)
        with halves.shard(2) as shard:
            for _ in range(3):
                with shard.phase("left"):
                    left_half(1_500_000)
                with shard.phase("right"):
                    right_half(1_500_000)
        halves.finish()
    """
)


def samples(lines: List[Dict[str, Any]], keep: Callable[[Dict[str, Any]], bool]) -> int:
    return sum(line["profile.samples"] for line in lines if keep(line))


def frames(line: Dict[str, Any]) -> List[str]:
    return line["profile.stack"].split(";")


def test_python_shards_are_profiled_with_their_stacks_stage_shard_and_phase(tmp_path: pathlib.Path) -> None:
    rows_file = tmp_path / "py-profile.jsonl"
    env = peers.clean_env({"OTEL_METRICS_EXPORTER": "none", "PIPETEL_PROFILE": "cpu", "PIPETEL_PROFILE_HZ": "250"})
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.format(rows=str(rows_file))],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    lines = [json.loads(line) for line in (tmp_path / "py-profile.stacks").read_text().splitlines()]

    def of(stage: str) -> Callable[[Dict[str, Any]], bool]:
        return lambda line: line.get("pipeline.stage.name") == stage

    # The hot stage's samples sit in its function, and none of the other stage's function.
    for stage, own, other in [("py_hot", "spin_in_python", "other_python_work"),
                              ("py_other", "other_python_work", "spin_in_python")]:
        total = samples(lines, of(stage))
        mine = samples(lines, lambda l: of(stage)(l) and any(f.startswith(own + " (") for f in frames(l)))
        assert total >= 50, (stage, total)
        assert mine * 10 >= total * 6, (stage, mine, total)
        assert samples(lines, lambda l: of(stage)(l) and any(f.startswith(other + " (") for f in frames(l))) == 0
        # The first samples of a thread may come before its Python stack was first read (one
        # period, plus the wait for the GIL: longer on a busy machine, 10 of 93 once in CI).
        assert samples(lines, lambda l: of(stage)(l) and l["profile.language"] == "python") * 4 >= total * 3

    # The binding on the stack: the Python frame that called it, then pipetel's native frames.
    # Most of the call's time is pyo3's argument handling inside the method's wrapper
    # (`PyShard::__pymethod_record__`), not the few nanoseconds of `PyShard::record` itself (2 of
    # 96 samples once): the wrapper is the frame every native sample of the call passes through.
    binding = samples(lines, of("py_binding"))
    mixed = samples(lines, lambda l: of("py_binding")(l) and any(f.startswith("record_a_lot (") for f in frames(l))
                    and any("PyShard::" in f for f in frames(l)))
    assert mixed * 3 >= binding, (mixed, binding, [l["profile.stack"] for l in lines if of("py_binding")(l)][:10])

    # Phases split the samples as they split the work: 50/50 within 10 %.
    left = samples(lines, lambda l: of("py_phases")(l) and l.get("pipeline.phase") == "left")
    right = samples(lines, lambda l: of("py_phases")(l) and l.get("pipeline.phase") == "right")
    assert left + right >= 100, (left, right)
    assert 0.4 <= left / (left + right) <= 0.6, (left, right)
    # A Python stack is read once a period, when the GIL lets the reader in: a sample right after
    # a switch may show the previous phase's function, never more than a few. The labels
    # themselves are read at the sample: the 50/50 split above holds whatever the stacks' age.
    # (3 of 98 on an idle machine; the reader waits for a CPU too on a busy one.)
    stale = samples(lines, lambda l: l.get("pipeline.phase") == "left" and any(f.startswith("right_half (") for f in frames(l)))
    assert stale * 4 <= left, (stale, left)
    assert all(l.get("pipeline.shard.index") == 2 for l in lines if of("py_phases")(l))

    # The stage row names the hot function with its share.
    stage_row = next(r for r in rows if r.get("event") == "pipeline.stage" and r["pipeline.stage.name"] == "py_other")
    assert stage_row["pipeline.profile.samples"] >= 50
    assert stage_row["pipeline.profile.top"].startswith("other_python_work ("), stage_row["pipeline.profile.top"]
