"""pipetel.telefuser: TeleFuser's metrics API on the Rust registry, stage contexts and service
metrics. Every check reads values back through the API or parses the exposition text."""

import asyncio
import itertools
import math
import pathlib
import re
import sys
import threading
import time

import pytest

import pipetel
from pipetel import telefuser as tf

_ids = itertools.count()


def fresh(prefix="t"):
    """A registry with a namespace no other test uses (registries share the OTel meter)."""
    return tf.MetricRegistry(f"{prefix}{next(_ids)}")


SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Exposition text -> {(sample name, frozenset of label pairs): value}; HELP/TYPE by name."""
    samples, types, helps = {}, {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if line.startswith("# HELP "):
            _, _, name, help_text = line.split(" ", 3)
            helps[name] = help_text
            continue
        if line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not an exposition line: {line!r}"
        labels = frozenset(LABEL.findall(m.group(2) or ""))
        key = (m.group(1), labels)
        assert key not in samples, f"duplicate sample {key}"
        samples[key] = float(m.group(3))
    return samples, types, helps


def only_mine(samples, prefix):
    return {k: v for k, v in samples.items() if k[0].startswith(prefix)}


# --- counters --------------------------------------------------------------------------------


def test_counter_counts_and_is_exposed_with_total():
    r = fresh()
    c = r.counter("requests", "Requests served")
    c.inc()
    c.inc(5)
    c.inc(0.5)
    assert c.value == 6.5
    assert c.name == f"{r.namespace}_requests_total"
    assert c.description == "Requests served"
    assert c.labels == ()
    samples, types, helps = parse(r.get_prometheus_format())
    assert samples[(c.name, frozenset())] == 6.5
    assert types[c.name] == "counter"
    assert helps[c.name] == "Requests served"


def test_counter_inc_is_the_native_method():
    # The hot path binds the Rust method directly: no Python wrapper in between.
    assert type(tf.Counter.inc).__name__ == "method_descriptor"
    c = fresh().counter("hot", "h")
    for _ in range(1000):
        c.inc()
    assert c.value == 1000


def test_same_name_returns_the_same_series_with_or_without_namespace_or_total():
    r = fresh()
    a = r.counter("jobs", "Jobs")
    b = r.counter(f"{r.namespace}_jobs", "Jobs")
    c = r.counter("jobs_total", "Jobs")
    a.inc()
    b.inc()
    c.inc()
    assert a.value == b.value == c.value == 3
    assert r.list_metrics() == [f"{r.namespace}_jobs_total"]


@pytest.mark.parametrize("amount", [-1, -0.5, math.nan, math.inf])
def test_counter_refuses_bad_increments(amount):
    c = fresh().counter("bad", "b")
    with pytest.raises(tf.InvalidValueError) as e:
        c.inc(amount)
    assert isinstance(e.value, ValueError)
    assert isinstance(e.value, pipetel.RecordError)
    assert isinstance(e.value, pipetel.PipetelError)
    assert c.name in str(e.value)
    assert c.value == 0


def test_counter_cannot_go_down_or_be_set():
    c = fresh().counter("up", "u")
    with pytest.raises(tf.UnsupportedOperationError, match="cannot be decremented") as e:
        c.dec()
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(RuntimeError, match="cannot be set"):
        c.set(3)


def test_wrong_types_and_unknown_keywords_raise_type_error():
    r = fresh()
    c = r.counter("typed", "t")
    with pytest.raises(TypeError):
        c.inc("one")
    with pytest.raises(TypeError, match="amont"):
        c.inc(amont=1)
    with pytest.raises(TypeError, match="bucket"):
        r.histogram("h", "h", bucket=[1.0])
    with pytest.raises(TypeError):
        r.counter(42, "name must be a str")


# --- labels ----------------------------------------------------------------------------------


def test_labels_as_dict_or_metric_labels_pick_one_series():
    r = fresh()
    get = r.counter("http_requests", "HTTP", labels={"method": "GET", "status": "200"})
    same = r.counter(
        "http_requests", "HTTP", labels=[tf.MetricLabel("status", "200"), tf.MetricLabel("method", "GET")]
    )
    post = r.counter("http_requests", "HTTP", labels={"method": "POST", "status": 500})
    get.inc()
    same.inc(2)
    post.inc()
    assert get.value == 3 and post.value == 1
    assert get.labels == (tf.MetricLabel("method", "GET"), tf.MetricLabel("status", "200"))
    assert post.labels[1].value == "500"
    samples = only_mine(parse(r.get_prometheus_format())[0], r.namespace)
    name = f"{r.namespace}_http_requests_total"
    assert samples == {
        (name, frozenset({("method", "GET"), ("status", "200")})): 3.0,
        (name, frozenset({("method", "POST"), ("status", "500")})): 1.0,
    }


def test_metric_label_behaves_like_telefusers():
    label = tf.MetricLabel("path", 'a"b')
    assert (label.name, label.value) == ("path", 'a"b')
    assert label.to_prometheus() == 'path="a\\"b"'
    assert label == tf.MetricLabel(name="path", value='a"b')
    assert len({label, tf.MetricLabel("path", 'a"b')}) == 1


def test_label_mistakes_name_the_culprit():
    r = fresh()
    r.counter("l", "l", labels={"method": "GET"})
    with pytest.raises(tf.MetricAlreadyRegisteredError, match="method"):
        r.counter("l", "l", labels={"verb": "GET"})
    with pytest.raises(TypeError, match='"method"'):
        r.counter("l2", "l", labels={"method": None})
    with pytest.raises(TypeError, match="label names must be str"):
        r.counter("l3", "l", labels={1: "x"})
    with pytest.raises(TypeError, match=r"labels\[1\]"):
        r.counter("l4", "l", labels=[tf.MetricLabel("a", "1"), ("b", "2")])
    with pytest.raises(TypeError, match="dict of str"):
        r.counter("l5", "l", labels="method=GET")
    with pytest.raises(tf.InvalidMetricError, match="bad-label") as e:
        r.counter("l6", "l", labels={"bad-label": "x"})
    assert isinstance(e.value, ValueError) and isinstance(e.value, pipetel.FamilyError)


def test_names_are_checked():
    r = fresh()
    with pytest.raises(tf.InvalidMetricError, match="requests-per-second"):
        r.counter("requests-per-second", "x")
    r.counter("taken", "x")
    with pytest.raises(tf.MetricAlreadyRegisteredError, match="taken") as e:
        r.gauge("taken", "x")
    assert isinstance(e.value, pipetel.FamilyError)
    with pytest.raises(tf.InvalidMetricError):
        tf.MetricRegistry("Not-Snake")


# --- gauges, histograms, summaries -----------------------------------------------------------


def test_bucket_bounds_are_written_as_prometheus_client_writes_them():
    import prometheus_client

    bounds = [1e-05, 0.005, 0.1, 1, 2.5, 10, 100000, 1000000, 2500000]
    r = fresh()
    h = r.histogram("bounds_seconds", "Bounds", buckets=bounds)
    theirs = prometheus_client.CollectorRegistry()
    prometheus_client.Histogram("bounds_seconds", "Bounds", buckets=bounds, registry=theirs)
    les = [line.split('le="')[1].split('"')[0] for line in r.get_prometheus_format().splitlines() if "_bucket{" in line]
    their_les = [
        line.split('le="')[1].split('"')[0]
        for line in prometheus_client.generate_latest(theirs).decode().splitlines()
        if "_bucket{" in line
    ]
    assert les == their_les == ["1e-05", "0.005", "0.1", "1.0", "2.5", "10.0", "100000.0", "1e+06", "2.5e+06", "+Inf"]
    assert h.buckets == [float(b) for b in bounds]


def test_gauge_goes_up_down_and_to_now():
    r = fresh()
    g = r.gauge("memory_used_bytes", "Memory")
    g.set(1024)
    g.inc()
    g.dec(25)
    assert g.value == 1000
    samples, types, _ = parse(r.get_prometheus_format())
    assert samples[(g.name, frozenset())] == 1000 and types[g.name] == "gauge"
    before = time.time()
    g.set_to_current_time()
    assert before - 1 <= g.value <= time.time() + 1
    g.set(math.inf)
    assert g.value == math.inf
    with pytest.raises(tf.InvalidValueError, match="memory_used_bytes"):
        g.set(math.nan)
    with pytest.raises(tf.InvalidValueError):
        g.inc(math.inf)
    g.reset()
    assert g.value == 0


def test_histogram_buckets_count_sum_average_and_exposition():
    r = fresh()
    h = r.histogram("file_size_bytes", "File size", buckets=[100, 1000, 10000, math.inf])
    assert h.buckets == [100.0, 1000.0, 10000.0]
    assert (h.count, h.sum, h.average) == (0, 0.0, 0.0)
    for v in (50, 500, 500, 5000, 50000):
        h.observe(v)
    assert (h.count, h.sum, h.average) == (5, 56050.0, 11210.0)
    assert h.bucket_counts == [(100.0, 1), (1000.0, 3), (10000.0, 4), (math.inf, 5)]
    samples, types, _ = parse(r.get_prometheus_format())
    assert types[h.name] == "histogram"
    buckets = {dict(k[1])["le"]: v for k, v in samples.items() if k[0] == f"{h.name}_bucket"}
    assert buckets == {"100.0": 1, "1000.0": 3, "10000.0": 4, "+Inf": 5}
    assert [v for k, v in samples.items() if k[0] == f"{h.name}_count"] == [5]
    assert [v for k, v in samples.items() if k[0] == f"{h.name}_sum"] == [56050]
    with pytest.raises(tf.InvalidValueError):
        h.observe(math.nan)
    with pytest.raises(tf.InvalidMetricError, match="buckets: .*finite"):
        r.histogram("nan_buckets", "x", buckets=[1.0, math.nan])
    with pytest.raises(tf.InvalidMetricError):
        r.histogram("dup_buckets", "x", buckets=[1.0, 1.0])
    with pytest.raises(tf.MetricAlreadyRegisteredError):
        r.histogram("file_size_bytes", "File size", buckets=[1, 2])
    h.reset()
    assert (h.count, h.sum) == (0, 0.0)


def test_summary_quantiles_within_the_sketch_error():
    r = fresh()
    s = r.summary("latency_seconds", "Latency", quantiles=[0.5, 0.9])
    assert s.quantiles == [0.5, 0.9]
    for v in range(1, 101):
        s.observe(v / 100)
    assert s.count == 100 and s.sum == pytest.approx(50.5)
    values = dict(s.quantile_values())
    # Rank floor(q*(n-1)) among 0.01..1.00, within the sketch's 1 % relative error.
    assert values[0.5] == pytest.approx(0.50, rel=0.011)
    assert values[0.9] == pytest.approx(0.90, rel=0.011)
    samples, types, _ = parse(r.get_prometheus_format())
    assert types[s.name] == "summary"
    exposed = {dict(k[1])["quantile"]: v for k, v in samples.items() if k[0] == s.name}
    assert set(exposed) == {"0.5", "0.9"}
    assert exposed["0.5"] == pytest.approx(0.5, rel=0.011)
    assert r.summary("default_q", "d").quantiles == tf.DEFAULT_QUANTILES
    with pytest.raises(tf.InvalidValueError):
        s.observe(math.inf)
    with pytest.raises(tf.InvalidMetricError):
        r.summary("bad_q", "x", quantiles=[1.5])
    with pytest.raises(tf.InvalidMetricError, match="max_age_seconds"):
        r.summary("bad_age", "x", max_age_seconds=-1)


# --- registries ------------------------------------------------------------------------------


def test_several_registries_are_independent():
    app, system = fresh("app"), fresh("system")
    app.counter("requests", "App requests").inc(2)
    system.gauge("cpu_usage", "CPU").set(0.5)
    app_samples = parse(app.get_prometheus_format())[0]
    system_samples = parse(system.get_prometheus_format())[0]
    assert app_samples == {(f"{app.namespace}_requests_total", frozenset()): 2}
    assert system_samples == {(f"{system.namespace}_cpu_usage", frozenset()): 0.5}


def test_global_registry_is_shared_and_resettable():
    tf.reset_global_registry()
    r = tf.get_metrics_registry()
    assert r is tf.get_metrics_registry("ignored_after_the_first_call")
    assert r.namespace == "telefuser"
    r.counter("tasks_done", "d").inc()
    assert "telefuser_tasks_done_total" in r.list_metrics()
    tf.reset_global_registry()
    fresh_one = tf.get_metrics_registry()
    assert fresh_one is not r and fresh_one.list_metrics() == []
    assert tf.MetricsRegistry is tf.MetricRegistry


def test_reset_all_and_clear():
    r = fresh()
    c = r.counter("c", "c")
    h = r.histogram("h_seconds", "h")
    c.inc(3)
    h.observe(1)
    r.reset_all()
    assert c.value == 0 and h.count == 0
    assert r.get_metric_name("c") == f"{r.namespace}_c_total"
    r.clear()
    assert r.list_metrics() == []
    assert parse(r.get_prometheus_format())[0] == {}
    with pytest.raises(tf.MetricNotFoundError) as e:
        r.get_metric_name("c")
    assert isinstance(e.value, KeyError)
    again = r.counter("c", "c")
    assert again.value == 0


# --- custom collectors -----------------------------------------------------------------------


def test_custom_collector_lines_join_the_exposition_and_can_be_removed():
    r = fresh()
    calls = []

    def collector():
        calls.append(threading.get_ident())
        return ["# HELP custom_metric My custom metric", "# TYPE custom_metric gauge", f"custom_metric {len(calls)}"]

    r.add_custom_collector(collector)
    samples, types, _ = parse(r.get_prometheus_format())
    assert samples[("custom_metric", frozenset())] == 1 and types["custom_metric"] == "gauge"
    assert parse(r.get_prometheus_format())[0][("custom_metric", frozenset())] == 2
    r.remove_custom_collector(collector)
    assert ("custom_metric", frozenset()) not in parse(r.get_prometheus_format())[0]
    with pytest.raises(TypeError, match="callable"):
        r.add_custom_collector("not a function")


def test_a_failing_collector_is_reported_not_fatal(monkeypatch):
    r = fresh()
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u))

    def broken():
        raise RuntimeError("sensor offline")

    def wrong_type():
        return [b"bytes are not lines"]

    r.add_custom_collector(broken)
    r.add_custom_collector(wrong_type)
    r.add_custom_collector(lambda: "fine_metric 7\n")
    r.counter("still_there", "s").inc()
    samples = parse(r.get_prometheus_format())[0]
    assert samples[("fine_metric", frozenset())] == 7
    assert samples[(f"{r.namespace}_still_there_total", frozenset())] == 1
    kinds = sorted((type(u.exc_value).__name__, str(u.exc_value)) for u in reported)
    assert kinds[0] == ("RuntimeError", "sensor offline")
    assert kinds[1][0] == "TypeError" and "line 0" in kinds[1][1]
    assert {u.object for u in reported} == {broken, wrong_type}


def test_collectors_called_back_from_other_threads_and_reentrantly():
    r = fresh()
    other = fresh()

    def reentrant():
        # Calls back into pipetel while a render is in progress: registering a metric and
        # rendering another registry must neither deadlock nor fail.
        r.counter("made_during_render", "m").inc()
        other.get_prometheus_format()
        return [f"threads_seen {threading.active_count()}"]

    r.add_custom_collector(reentrant)
    results, errors = [], []

    def render():
        try:
            for _ in range(20):
                results.append(r.get_prometheus_format())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=render) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "a render deadlocked"
    assert errors == []
    assert len(results) == 80
    assert all("threads_seen" in text for text in results)
    assert r.counter("made_during_render", "m").value >= 80


# --- stage metrics ---------------------------------------------------------------------------


class Stage:
    def __init__(self, name):
        self.name = name
        self.seen_active = []

    @tf.with_metrics
    def process(self, x):
        hook = getattr(self, "_metrics_hook", None)
        self.seen_active.append(hook.active.value if hook else None)
        if x < 0:
            raise ValueError("negative input")
        return x * 2

    @tf.with_metrics_async
    async def process_async(self, x, delay=0.01):
        hook = getattr(self, "_metrics_hook", None)
        self.seen_active.append(hook.active.value if hook else None)
        await asyncio.sleep(delay)
        if x < 0:
            raise ValueError("negative input")
        return x * 3


def stage(prefix="stage"):
    return Stage(f"{prefix}_{next(_ids)}")


def test_with_metrics_counts_executions_errors_and_in_flight():
    s = stage()
    assert s.process(2) == 4  # no hook yet: runs unmeasured
    ctx = tf.enable_stage_metrics(s)
    assert s._metrics_hook is ctx and ctx.stage_name == s.name
    assert s.process(2) == 4
    assert s.process(3) == 6
    with pytest.raises(ValueError, match="negative input"):
        s.process(-1)
    assert (ctx.total.value, ctx.errors.value, ctx.active.value) == (3, 1, 0)
    assert s.seen_active[1:] == [1, 1, 1]
    assert ctx.duration.count == 3
    assert ctx.duration.sum >= 0 and ctx.duration.average == pytest.approx(ctx.duration.sum / 3, abs=1e-9)  # whole nanoseconds
    assert s.name in tf.enabled_stages()
    tf.disable_stage_metrics(s)
    assert s._metrics_hook is None and not ctx.enabled
    s.process(1)
    assert ctx.total.value == 3
    assert s.name not in tf.enabled_stages()
    again = tf.enable_stage_metrics(s)
    s.process(1)
    assert again.total.value == 4  # counts on from where it stopped


def test_with_metrics_async_counts_concurrent_executions_and_exceptions():
    s = stage()
    ctx = tf.enable_stage_metrics(s)

    async def main():
        results = await asyncio.gather(s.process_async(1, 0.05), s.process_async(2, 0.05), s.process_async(-1, 0.0),
                                       return_exceptions=True)
        return results

    results = asyncio.run(main())
    assert results[:2] == [3, 6] and isinstance(results[2], ValueError)
    assert (ctx.total.value, ctx.errors.value, ctx.active.value) == (3, 1, 0)
    assert sorted(s.seen_active) == [1, 2, 3]  # all three in flight at once
    assert ctx.duration.count == 3 and ctx.duration.sum >= 0.1


def test_with_metrics_async_cancellation_ends_the_execution_as_failed():
    s = stage()
    ctx = tf.enable_stage_metrics(s)

    async def main():
        task = asyncio.ensure_future(s.process_async(1, 10))
        await asyncio.sleep(0.01)
        assert ctx.active.value == 1
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert (ctx.total.value, ctx.errors.value, ctx.active.value) == (1, 1, 0)


def test_record_execution_and_start_guard():
    s = stage()
    ctx = tf.enable_stage_metrics(s)
    ctx.record_execution(duration=0.5, success=True, input_size=1024, output_size=2048)
    ctx.record_execution(0.25, False)
    assert (ctx.total.value, ctx.errors.value, ctx.duration.count) == (2, 1, 2)
    assert ctx.duration.sum == pytest.approx(0.75)
    with ctx.start() as run:
        run.input_size(10)
        assert ctx.active.value == 1
    assert ctx.total.value == 3 and ctx.active.value == 0
    with pytest.raises(KeyError):
        with ctx.start():
            raise KeyError("boom")
    assert ctx.errors.value == 2
    run = ctx.start()
    run.succeed()
    with pytest.raises(RuntimeError, match="already ended"):
        run.fail()
    with pytest.raises(tf.InvalidValueError, match="duration"):
        ctx.record_execution(-1.0, True)
    with pytest.raises(tf.InvalidValueError, match="input_size"):
        ctx.record_execution(0.1, True, input_size=-5)
    with pytest.raises(tf.InvalidValueError):
        ctx.record_execution(math.nan, True)
    with pytest.raises(TypeError, match="sucess"):
        ctx.record_execution(0.1, sucess=True)


def test_stage_counts_moved_by_hand_as_telefusers_docs_show():
    ctx = tf.enable_stage_metrics(stage())
    ctx.duration.observe(0.5)
    ctx.total.inc()
    ctx.errors.inc()
    ctx.active.inc()
    assert (ctx.total.value, ctx.errors.value, ctx.active.value) == (1, 1, 1)
    assert (ctx.duration.count, ctx.duration.sum) == (1, 0.5)
    ctx.active.dec()
    ctx.total.inc(3)
    assert (ctx.total.value, ctx.active.value) == (4, 0)
    with pytest.raises(tf.InvalidValueError, match="amount"):
        ctx.total.inc(-1)
    with pytest.raises(tf.InvalidValueError, match="duration"):
        ctx.duration.observe(math.nan)


def test_stage_mistakes_are_reported():
    with pytest.raises(ValueError, match="'name' attribute"):
        tf.enable_stage_metrics(object())

    class Named:
        name = 3

    with pytest.raises(TypeError, match="must be a str"):
        tf.enable_stage_metrics(Named())
    with pytest.raises(TypeError, match="async def"):
        tf.with_metrics_async(lambda self: None)


def test_stage_metrics_manager():
    manager = tf.StageMetricsManager()
    a, b = stage("mgr"), stage("mgr")
    manager.enable_all_stages([a, b])
    assert manager.enabled_stages == {a.name, b.name}
    a.process(1)
    assert manager.get_stage_context(a.name).total.value == 1
    manager.disable_all_stages()
    assert manager.enabled_stages == set()
    assert a.name not in tf.enabled_stages()


# --- service metrics and configuration -------------------------------------------------------


def test_service_metrics_from_a_config():
    prefix = f"svc{next(_ids)}"
    service = tf.ServiceMetrics(config=tf.create_metrics_config(namespace=prefix))
    assert service.enabled and service.prefix == prefix
    service.record_task_created()
    service.record_task_created()
    service.record_task_completed(duration=1.5)
    service.record_task_failed()
    service.record_task_cancelled()
    service.record_queue_wait(0.02)
    service.update_queue_metrics(size=10, pending=5, processing=2)
    assert service.task_counts() == (2, 1, 1, 1)
    assert service.tasks_created.value == 2
    assert service.queue_pending.value == 5
    assert (service.task_duration.count, service.task_duration.sum) == (1, 1.5)
    assert service.task_duration.buckets == tf.DEFAULT_BUCKETS  # TeleFuser's buckets from the config
    samples, types, _ = parse(service.get_prometheus_format())
    assert samples[(f"{prefix}_tasks_created_total", frozenset())] == 2
    assert samples[(f"{prefix}_queue_size", frozenset())] == 10
    assert samples[(f"{prefix}_task_duration_seconds_bucket", frozenset({("le", "2.5")}))] == 1
    assert samples[(f"{prefix}_task_duration_seconds_bucket", frozenset({("le", "1.0")}))] == 0
    assert types[f"{prefix}_task_queue_wait_seconds"] == "histogram"
    with pytest.raises(tf.InvalidValueError, match="duration"):
        service.record_task_completed(-1)
    with pytest.raises(tf.InvalidValueError, match="pending"):
        service.update_queue_metrics(1, -1, 0)
    assert service.collect_gpu_metrics() == []  # no init, no poller
    assert service.gpu_available is False


def test_service_metrics_switched_off_record_nothing():
    service = tf.ServiceMetrics(config=tf.create_metrics_config(namespace=f"off{next(_ids)}", enable_queue_metrics=False))
    service.record_task_created()
    assert not service.enabled
    assert service.task_counts() == (0, 0, 0, 0)
    assert service.tasks_created is None
    assert service.get_prometheus_format() == ""


def test_global_service_metrics_follow_the_settings():
    tf.reset_service_metrics()
    service = tf.get_service_metrics()
    assert service is tf.get_service_metrics()
    before = service.task_counts()[0]
    service.record_task_created()
    assert service.task_counts()[0] == before + 1
    assert service.prefix == "service"  # pipetel's default without init
    assert isinstance(service, tf.ServiceMetrics)
    with pytest.raises(TypeError, match="MetricsConfig"):
        tf.ServiceMetrics(config=object())


def config_file_keys():
    # Every setting's file key is declared once, in the settings table (`key "..."`).
    source = (pathlib.Path(__file__).resolve().parents[2] / "crates/pipetel/src/config/table.rs").read_text()
    return {key.replace(".", "_") for key in re.findall(r'\bkey "([a-z_.]+)"', source)}


def test_metrics_config_maps_onto_init_settings():
    keys = config_file_keys()
    assert "service_prefix" in keys and "gpu_poll_interval_ms" in keys
    config = tf.create_metrics_config(
        enabled=False,
        enable_stage_metrics=False,
        enable_gpu_metrics=False,
        gpu_metrics_interval=1.5,
        histogram_buckets=[0.1, 1.0],
        namespace="inference",
        metrics_path="/prom",
        port=9999,
    )
    settings = config.to_settings()
    assert set(settings) <= keys, set(settings) - keys
    assert settings == {
        "exporters_metrics": ["none"],
        "pipeline_metrics": False,
        "gpu_mode": "off",
        "service_http_metrics": True,
        "service_queue_metrics": True,
        "gpu_poll_interval_ms": 1500,
        "metrics_histogram_buckets": [0.1, 1.0],
        "prometheus_path": "/prom",
        "service_prefix": "inference",
        "gpu_platform": "auto",
        "prometheus_port": 9999,
    }
    default = tf.MetricsConfig().to_settings()
    assert set(default) <= keys
    assert "exporters_metrics" not in default and default["gpu_mode"] == "auto"
    assert default["metrics_histogram_buckets"] == tf.DEFAULT_BUCKETS
    assert tf.default_metrics_config == tf.MetricsConfig()


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"gpu_metrics_interval": 0}, ValueError, "gpu_metrics_interval"),
        ({"gpu_metrics_interval": "5"}, TypeError, "gpu_metrics_interval"),
        ({"histogram_buckets": [0.1, math.nan]}, ValueError, "histogram_buckets"),
        ({"gpu_platform": "tpu"}, ValueError, "gpu_platform"),
        ({"enabled": "yes"}, TypeError, "enabled"),
        ({"port": 70000}, ValueError, "port"),
    ],
)
def test_metrics_config_refuses_bad_values(kwargs, error, match):
    with pytest.raises(error, match=match):
        tf.create_metrics_config(**kwargs)
    with pytest.raises(TypeError, match="unknown_option"):
        tf.create_metrics_config(unknown_option=1)
