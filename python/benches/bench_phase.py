"""The cost of a phase block in Python, ``with shard.phase("decode"): pass``, beside what any
``with`` block costs. A benchmark, not a test: it prints a markdown table.

    PIPETEL_PY_PROFILE=release PIPETEL_PY_BUILD_ONLY=1 scripts/test-python   # the release build
    .venv/bin/python python/benches/bench_phase.py [--number 200000] [--rounds 40]

Each row is a statement timed with the stdlib ``timeit`` (compiled into its loop: no wrapper
call), ``number`` executions per run; the rows take turns for ``rounds`` rounds and each row's
best run is reported (nanoseconds per execution): the machine is shared, and the best run is the
one least disturbed. Target: the phase block at most 300 ns on the machine of
docs/src/performance.md; the empty context manager written in Python and one clock read are the
figures to read it against.
"""

import argparse
import platform
import sys
import timeit

import pipetel


class Empty:
    """A context manager that does nothing, written in Python."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--number", type=int, default=200_000, help="executions per run")
    parser.add_argument("--rounds", type=int, default=40, help="runs per row, the rows taking turns")
    args = parser.parse_args()

    stage = pipetel.stage("bench-phase", shards=1)
    shard = stage.shard(0)
    phase = shard.phase("decode")

    @shard.phase("decode")
    def decorated():
        pass

    def plain():
        pass

    names = {"shard": shard, "phase": phase, "Empty": Empty, "decorated": decorated, "plain": plain}
    names["perf_counter_ns"] = __import__("time").perf_counter_ns
    rows = [
        ("phase block", "with shard.phase('decode'): pass"),
        ("phase block, object kept", "with phase: pass"),
        ("empty context manager in Python", "with Empty(): pass"),
        ("one clock read", "perf_counter_ns()"),
        ("decorated call", "decorated()"),
        ("plain call", "plain()"),
    ]
    runs = {stmt: [] for _, stmt in rows}
    for _ in range(args.rounds):
        for _, stmt in rows:
            runs[stmt].append(timeit.timeit(stmt, globals=names, number=args.number) / args.number * 1e9)
    shard.finish()
    stage.finish()

    print(f"Python {platform.python_version()} on {platform.machine()}, {args.rounds} rounds of "
          f"{args.number} executions, best run per row\n")
    print("| row | statement | best | median |")
    print("|---|---|---|---|")
    for what, stmt in rows:
        r = sorted(runs[stmt])
        print(f"| {what} | `{stmt}` | {r[0]:.0f} ns | {r[len(r) // 2]:.0f} ns |")
    best = min(runs["with shard.phase('decode'): pass"])
    print(f"\nphase block: {best:.0f} ns, target <= 300 ns: {'met' if best <= 300 else 'missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
