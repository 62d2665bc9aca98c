"""mstar's example (python/examples/mstar_recorders.py, the worker part adapted only in its import
line) runs as a subprocess: its workers' totals, merged by a SnapshotHub in the init'ed server
process, reach real Prometheus (scraping the pull endpoint) and the real collector (OTLP push)
exactly."""

import pytest

import peers
import pipetel

WORKERS, STEPS = 3, 12


def prometheus_selector(line: str) -> "tuple[str, float]":
    """``expected mstar.requests{model="llama",status="ok"} 12`` -> (PromQL selector, value)."""
    series, value = line[len("expected ") :].rsplit(" ", 1)
    family, labels = series.split("{", 1)
    names = {
        "mstar.requests": "mstar_requests_total",
        "mstar.tokens": "mstar_tokens_total",
        "mstar.request.duration.count": "mstar_request_duration_seconds_count",
        "mstar.request.duration.sum": "mstar_request_duration_seconds_sum",
        "pipeline.transfer.bytes": "pipeline_transfer_bytes_total",
    }
    pairs = [p.split("=", 1) for p in labels.rstrip("}").split(",") if p]
    selector = ",".join([f"{k.replace('.', '_')}={v}" for k, v in pairs] + ['job="pipetel"'])
    return f"{names[family]}{{{selector}}}", float(value)


def test_mstar_example_reaches_prometheus_and_the_collector_exactly(collector, prometheus):
    if not hasattr(pipetel, "init"):
        pytest.skip("pipetel.init is not bound in this build (the server part of the example needs it)")
    env = peers.both_ways_env(collector, prometheus)
    proc = peers.spawn_example(
        "mstar_recorders", env, args=["--workers", str(WORKERS), "--steps", str(STEPS), "--linger-seconds", "90"]
    )
    try:
        lines = peers.read_until(proc, "ready", timeout=60)
        expected = [prometheus_selector(l) for l in lines if l.startswith("expected ")]
        assert len(expected) == 2 + 1 + 2 + WORKERS, lines  # requests (ok, error), tokens, duration count + sum, one edge per worker
        # The example's own arithmetic, anchored: 12 ok and 3 error requests per worker.
        assert ('mstar_requests_total{model="llama",status="ok",job="pipetel"}', 36.0) in expected
        assert ('mstar_requests_total{model="llama",status="error",job="pipetel"}', 9.0) in expected
        assert ('mstar_tokens_total{model="llama",job="pipetel"}', 16.0 * (1 + 2 + 3) * STEPS) in expected

        for selector, value in expected:
            prometheus.wait_for_value(selector, value, timeout=20)
        (target,) = prometheus.wait_until_up()
        assert target["lastError"] == ""

        def arrived(r: peers.Received) -> bool:
            ok = r.latest("mstar.requests", model="llama", status="ok")
            count = r.latest("mstar_request_duration_seconds_count", model="llama")
            return bool(ok and ok.value == 36.0 and count and count.value == WORKERS * STEPS)

        got = collector.wait_for(arrived, timeout=30)
        ok = got.latest("mstar.requests", model="llama", status="ok")
        assert ok.kind == "sum" and ok.is_monotonic and ok.unit == "{request}"
        assert ok.resource["service.name"] == "mstar-recorders"
        assert got.latest("mstar.requests", model="llama", status="error").value == 9.0
        assert got.latest("mstar.tokens", model="llama").value == 16.0 * 6 * STEPS
        for rank in range(WORKERS):
            point = got.latest("pipeline.transfer.bytes", **{"pipeline.transfer.src": f"rank{rank}"})
            assert point is not None and point.value == 4096 * STEPS * (STEPS + 1) / 2
    finally:
        if proc.stdin:
            proc.stdin.close()
        try:
            proc.wait(timeout=20)
        except Exception:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
