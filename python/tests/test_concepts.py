"""The package by concept: the registry's prometheus_client-style metrics (checked with
prometheus_client's own exposition parser), the explicit rows of pipetel.pipeline, and the
source-system modules as facades over the concept modules."""

import itertools
import json
import subprocess
import sys
import textwrap
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

import peers
import pipetel
from pipetel import mstar, pipeline, recorders, registry, telefuser, tracing, zephyr

_ids = itertools.count()


def fresh():
    """A registry with a namespace no other test uses (registries of one namespace are shared)."""
    return registry.MetricRegistry(f"concept{next(_ids)}")


def samples(reg):
    """{(sample name, sorted label pairs): value}, parsed by prometheus_client, and the types."""
    out, types = {}, {}
    for family in text_string_to_metric_families(reg.get_prometheus_format()):
        types[family.name] = family.type
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out, types


def test_top_level_metrics_are_the_registrys_declared_as_in_prometheus_client():
    assert pipetel.Counter is registry.Counter and pipetel.Gauge is registry.Gauge
    assert pipetel.Histogram is registry.Histogram and pipetel.Summary is registry.Summary
    reg = fresh()
    ns = reg.namespace
    requests = pipetel.Counter("requests_total", "Requests served", ["method", "code"], registry=reg)
    requests.labels("GET", 200).inc(2)
    requests.labels(method="POST", code="500").inc()
    assert requests.labels("GET", "200") is requests.labels(code="200", method="GET")
    depth = pipetel.Gauge("depth", "Queue depth", subsystem="queue", registry=reg)
    depth.set(7)
    depth.dec(2)
    latency = pipetel.Histogram("latency", "Latency", unit="seconds", buckets=[0.1, 1.0], registry=reg)
    latency.observe(0.05)
    latency.observe(0.5)
    sizes = pipetel.Summary("sizes", "Sizes", ["kind"], registry=reg)
    sizes.labels("a").observe(3.0)
    got, types = samples(reg)
    assert got[(f"{ns}_requests_total", (("code", "200"), ("method", "GET")))] == 2
    assert got[(f"{ns}_requests_total", (("code", "500"), ("method", "POST")))] == 1
    assert got[(f"{ns}_queue_depth", ())] == 5
    assert got[(f"{ns}_latency_seconds_bucket", (("le", "0.1"),))] == 1
    assert got[(f"{ns}_latency_seconds_bucket", (("le", "+Inf"),))] == 2
    assert got[(f"{ns}_latency_seconds_sum", ())] == pytest.approx(0.55)
    assert got[(f"{ns}_sizes_count", (("kind", "a"),))] == 1
    assert types[f"{ns}_requests"] == "counter" and types[f"{ns}_queue_depth"] == "gauge"
    assert types[f"{ns}_latency_seconds"] == "histogram" and types[f"{ns}_sizes"] == "summary"
    # The names as prometheus_client forms them (a counter's without _total).
    assert (requests.name, depth.name, latency.name) == ("requests", "queue_depth", "latency_seconds")
    assert requests.labelnames == ("method", "code") and requests.documentation == "Requests served"


def test_default_registry_is_the_one_without_a_namespace():
    c = pipetel.Counter("concept_default_events", "Events")
    c.inc(3)
    assert c.registry is registry.REGISTRY and registry.REGISTRY.namespace == ""
    got, _ = samples(registry.REGISTRY)
    assert got[("concept_default_events_total", ())] == 3


def test_timers_in_progress_and_exceptions():
    reg = fresh()
    h = pipetel.Histogram("work", "Work", buckets=[10.0], registry=reg)
    with h.time():
        time.sleep(0.01)

    @h.time()
    def job():
        return 5

    assert job() == 5
    g = pipetel.Gauge("busy", "Busy", registry=reg)
    with g.track_inprogress():
        assert samples(reg)[0][(f"{reg.namespace}_busy", ())] == 1
    c = pipetel.Counter("failures", "Failures", registry=reg)
    with pytest.raises(KeyError):
        with c.count_exceptions(KeyError):
            raise KeyError("x")
    with pytest.raises(ValueError):
        with c.count_exceptions(KeyError):
            raise ValueError("not counted")
    got, _ = samples(reg)
    ns = reg.namespace
    assert got[(f"{ns}_work_count", ())] == 2 and got[(f"{ns}_work_sum", ())] >= 0.01
    assert got[(f"{ns}_busy", ())] == 0
    assert got[(f"{ns}_failures_total", ())] == 1


def test_label_mistakes_and_the_old_meaning_of_counter_are_explained():
    reg = fresh()
    labelled = pipetel.Counter("c", "C", ["a"], registry=reg)
    plain = pipetel.Gauge("g", "G", registry=reg)
    for call, words in [
        (lambda: labelled.inc(), "labels"),
        (lambda: labelled.labels("x", "y"), "1 label names"),
        (lambda: labelled.labels("x", a="x"), "not both"),
        (lambda: labelled.labels(b="x"), "expected the label names"),
        (lambda: plain.labels("x"), "no label names"),
        (lambda: plain.labels(), "no label names"),
        (lambda: labelled.labels(), "got 0 values"),
    ]:
        with pytest.raises(ValueError, match=words):
            call()
    family = recorders.Family.counter("concept.items")
    with pytest.raises(TypeError, match="pipetel.recorders.Counter"):
        pipetel.Counter(family)
    with pytest.raises(TypeError, match="labelnames"):
        pipetel.Counter("c2", "C", "ab", registry=reg)
    with pytest.raises(pipetel.InvalidValueError):
        pipetel.Counter("c3", "C", registry=reg).inc(-1)
    # The recorders keep their meaning under pipetel.recorders.
    counter = recorders.Counter(family)
    counter.inc([], 2.0)
    assert counter.snapshot().get([]) == 2.0


def test_source_system_modules_are_facades_over_the_concept_modules():
    assert telefuser.Counter is registry.CounterSeries and telefuser.Summary is registry.SummarySeries
    assert telefuser.MetricRegistry is registry.MetricRegistry and telefuser.MetricLabel is registry.MetricLabel
    assert isinstance(telefuser.get_metrics_registry().counter("concept_facade"), registry.CounterSeries)
    for name in mstar.__all__:
        assert getattr(mstar, name) is getattr(recorders, name), name
    assert issubclass(zephyr.StatsWriter, pipeline.RowWriter)
    assert pipetel.stage is pipeline.stage and pipetel.Stage is pipeline.Stage and pipetel.Shard is pipeline.Shard
    for name in tracing.__all__:
        assert getattr(pipetel, name) is getattr(tracing, name), name
    # The native classes say which concept module they belong to.
    assert recorders.Counter.__module__ == "pipetel.recorders" and pipeline.Stage.__module__ == "pipetel.pipeline"
    assert registry.CounterSeries.__module__ == "pipetel.registry" and tracing.Span.__module__ == "pipetel.tracing"


def test_row_writer_writes_explicit_rows(tmp_path):
    rows_file = tmp_path / "rows.jsonl"
    program = textwrap.dedent(
        """
        from datetime import datetime
        import pipetel
        from pipetel.pipeline import RowWriter

        with pipetel.init("rows-test"):
            rows = RowWriter()
            rows.emit_worker_stat(shard_idx=3, stage_name="embed", execution_id="e9", status="END",
                ts=datetime(2026, 12, 1, 12, 0, 0), items=40, bytes_processed=400, item_rate=4.0,
                byte_rate=40.0, cpu_time_total=1.0, cpu_current_pct=10.0, cpu_avg_pct=9.0,
                mem_current_bytes=10, mem_avg_bytes=9, mem_peak_bytes=11)
            rows.emit_stage_stat(stage_counters={"docs": 40}, stage_name="embed", execution_id="e9",
                elapsed=2.5, total_shards=4, status="END")
        """
    )
    env = peers.clean_env()
    env.update(PIPETEL_ROWS_FILE=str(rows_file), OTEL_METRICS_EXPORTER="none")
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    worker = next(r for r in rows if r.get("pipeline.shard.index") == 3)
    assert worker["pipeline.stage.name"] == "embed" and worker["pipeline.items"] == 40
    stage = next(r for r in rows if r.get("pipeline.shards.total") == 4)
    assert stage["pipeline.execution.id"] == "e9" and stage["pipeline.elapsed_seconds"] == 2.5
    assert stage["pipeline.counter.docs"] == 40


def test_registry_metrics_reach_the_pull_endpoint_init_serves():
    program = textwrap.dedent(
        """
        import urllib.request
        import pipetel

        requests = pipetel.Counter("pull_requests", "Requests", ["method"])
        with pipetel.init("pull-test", prometheus_port=0, prometheus_host="127.0.0.1") as guard:
            requests.labels("GET").inc(4)
            pipetel.Gauge("pull_depth", "Depth").set(9)
            print(urllib.request.urlopen(f"http://{guard.prometheus_addr}/metrics", timeout=10).read().decode())
        """
    )
    env = peers.clean_env()
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = {}
    for family in text_string_to_metric_families(done.stdout):
        for s in family.samples:
            got[(s.name, s.labels.get("method"))] = s.value
    assert got[("pull_requests_total", "GET")] == 4
    assert got[("pull_depth", None)] == 9
