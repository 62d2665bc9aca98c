"""Arguments: every ``TypeError`` / ``ValueError`` pipetel raises names the argument in its message,
and Python refuses exactly what the Rust API refuses.

The message is read with ``str(error)``: what a log line or ``print(e)`` shows. (PyO3 names a
failed argument only in a PEP 678 note, which ``str()`` leaves out, Python < 3.11 never prints,
and ``pytest.raises(match=)`` does read: so these tests do not rely on ``match``.)
"""

import math
import re
import subprocess
import sys
import textwrap
import types
from datetime import datetime, timedelta, timezone

import pytest

import peers
import pipetel
from pipetel import telefuser as tf
from pipetel.zephyr import StatsWriter
from zephyr_rows import stage_stat, worker_stat

_ids = iter(range(1_000_000))


def registry():
    return tf.MetricRegistry(f"args{next(_ids)}")


def refused(exc, name, call):
    """Calls ``call``, which must raise ``exc`` whose message names the argument ``name``."""
    with pytest.raises(exc) as info:
        call()
    message = str(info.value)
    assert re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", message), f"{message!r} does not name {name!r}"
    return message


# --- the whole surface: a wrong type or a refused value names the argument --------------------


def telefuser_cases():
    r = registry()
    c, g = r.counter("c"), r.gauge("g")
    h, s = r.histogram("h", buckets=[1.0]), r.summary("s")
    ctx = tf.enable_stage_metrics(types.SimpleNamespace(name=f"args-stage-{next(_ids)}"))
    service = tf.ServiceMetrics()
    bad_config = dict(namespace="args_svc", enable_queue_metrics=True, enable_http_metrics=True, histogram_buckets=[1.0])
    return [
        (TypeError, "amount", lambda: c.inc(None)),
        (TypeError, "amount", lambda: c.inc("2")),
        (TypeError, "amount", lambda: g.inc(None)),
        (TypeError, "amount", lambda: g.dec("1")),
        (TypeError, "value", lambda: g.set(None)),
        (ValueError, "value", lambda: g.set(math.nan)),
        (TypeError, "value", lambda: h.observe(None)),
        (TypeError, "value", lambda: s.observe("1")),
        (ValueError, "value", lambda: s.observe(math.inf)),
        (ValueError, "amount", lambda: c.inc(-1)),
        (TypeError, "name", lambda: r.counter(5)),
        (TypeError, "description", lambda: r.counter("c", 5)),
        (ValueError, "name", lambda: r.counter("not a name")),
        (TypeError, "labels", lambda: r.counter("c", labels={"a": None})),
        (TypeError, "labels", lambda: r.counter("c", labels={1: "a"})),
        (TypeError, "labels", lambda: r.counter("c", labels="a=b")),
        (ValueError, "labels", lambda: r.counter("lc", labels={"__reserved": "x"})),
        (TypeError, "buckets", lambda: r.histogram("h2", buckets="1,2")),
        (ValueError, "buckets", lambda: r.histogram("h3", buckets=[2.0, 1.0])),
        (ValueError, "buckets", lambda: r.histogram("h4", buckets=[1.0, math.nan])),
        (ValueError, "quantiles", lambda: r.summary("s2", quantiles=[1.5])),
        (TypeError, "max_age_seconds", lambda: r.summary("s3", max_age_seconds="60")),
        (ValueError, "max_age_seconds", lambda: r.summary("s4", max_age_seconds=-1.0)),
        (TypeError, "namespace", lambda: tf.MetricRegistry(5)),
        (ValueError, "namespace", lambda: tf.MetricRegistry("not a namespace")),
        (TypeError, "name", lambda: tf.MetricLabel(5, "x")),
        (TypeError, "value", lambda: tf.MetricLabel("a", None)),
        (TypeError, "collector", lambda: r.add_custom_collector(5)),
        (TypeError, "duration", lambda: service.record_task_completed(None)),
        (ValueError, "duration", lambda: service.record_task_completed(-1.0)),
        (TypeError, "duration", lambda: service.record_task_failed("1")),
        (TypeError, "wait_time", lambda: service.record_queue_wait("1")),
        (ValueError, "size", lambda: service.update_queue_metrics(-1, 0, 0)),
        (ValueError, "pending", lambda: service.update_queue_metrics(0, 2**70, 0)),
        (TypeError, "processing", lambda: service.update_queue_metrics(0, 0, 1.5)),
        (ValueError, "stage_name", lambda: tf.StageMetricContext("")),
        (TypeError, "stage_name", lambda: tf.StageMetricContext(5)),
        (TypeError, "success", lambda: ctx.record_execution(0.1, success="yes")),
        (ValueError, "input_size", lambda: ctx.record_execution(0.1, input_size=-1)),
        (ValueError, "amount", lambda: ctx.total.inc(2**70)),
        (ValueError, "amount", lambda: ctx.active.dec(2**70)),
        (TypeError, "value", lambda: ctx.duration.observe(None)),
        (ValueError, "value", lambda: ctx.duration.observe(-1.0)),
        (ValueError, "nbytes", lambda: ctx.start().input_size(-1)),
        (TypeError, "config.namespace", lambda: tf.ServiceMetrics(None, types.SimpleNamespace(**{**bad_config, "namespace": 5}))),
        (TypeError, "config.histogram_buckets", lambda: tf.ServiceMetrics(None, types.SimpleNamespace(**{**bad_config, "histogram_buckets": "1"}))),
        (ValueError, "config.histogram_buckets", lambda: tf.ServiceMetrics(None, types.SimpleNamespace(**{**bad_config, "histogram_buckets": [1.0, 0.5]}))),
        (ValueError, "histogram_buckets", lambda: tf.MetricsConfig(histogram_buckets=[1.0, 0.5])),
        (TypeError, "histogram_buckets", lambda: tf.MetricsConfig(histogram_buckets=["1"])),
        (TypeError, "func", lambda: tf.with_metrics_async(lambda self: None)),
        (TypeError, "func", lambda: pipetel.traced(5)),
    ]


def span_and_stage_cases():
    span = pipetel.span("args")
    stage = pipetel.stage("args-stage", shards=1)
    shard = stage.shard(0)
    return [
        (TypeError, "name", lambda: pipetel.span(5)),
        (TypeError, "attributes", lambda: pipetel.span("s", attributes=[("k", 1)])),
        (TypeError, "attributes", lambda: pipetel.span("s", attributes={"k": object()})),
        (TypeError, "rows", lambda: pipetel.span("s", rows=object())),
        (TypeError, "parent", lambda: pipetel.span("s", parent=5)),
        (ValueError, "parent", lambda: pipetel.span("s", parent="00-nope")),
        (TypeError, "key", lambda: span.set_attribute(5, 1)),
        (TypeError, "value", lambda: span.set_attribute("k", object())),
        (TypeError, "name", lambda: span.add_event(5)),
        (TypeError, "reason", lambda: span.fail(5)),
        (TypeError, "service_name", lambda: pipetel.init(5)),
        (TypeError, "config_file", lambda: pipetel.init(config_file=5)),
        (TypeError, "name", lambda: pipetel.stage(5)),
        (ValueError, "shards", lambda: pipetel.stage("s", shards=-1)),
        (TypeError, "shards", lambda: pipetel.stage("s", shards="2")),
        (TypeError, "execution_id", lambda: pipetel.stage("s", execution_id=5)),
        (ValueError, "counters", lambda: pipetel.stage("s", counters=["bad key"])),
        (ValueError, "index", lambda: stage.shard(-1)),
        (TypeError, "strict", lambda: stage.finish(strict="yes")),
        (TypeError, "reason", lambda: stage.fail(5)),
        (ValueError, "items", lambda: shard.record(-1)),
        (ValueError, "items", lambda: shard.record(2**64)),
        (TypeError, "items", lambda: shard.record(None)),
        (ValueError, "nbytes", lambda: shard.record(1, -1)),
        (TypeError, "nbytes", lambda: shard.record(1, 2.5)),
        (ValueError, "key", lambda: shard.add("bad key", 1)),
        (TypeError, "key", lambda: shard.add(5, 1)),
        (TypeError, "value", lambda: shard.add("k", "1")),
        (ValueError, "value", lambda: shard.add("k", math.nan)),
        (TypeError, "reason", lambda: shard.fail(5)),
        (ValueError, "shard_idx", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(shard_idx=-1))),
        (TypeError, "stage_name", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(stage_name=5))),
        (ValueError, "items", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(items=2**64))),
        (ValueError, "items", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(items=10**400))),
        (ValueError, "mem_peak_bytes", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(mem_peak_bytes=1e30))),
        (ValueError, "item_rate", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(item_rate=10**400))),
        (ValueError, "total_shards", lambda: StatsWriter(None).emit_stage_stat(**stage_stat(total_shards=-1))),
        (TypeError, "execution_id", lambda: StatsWriter(None).emit_stage_stat(**stage_stat(execution_id=None))),
        (TypeError, "stage_counters", lambda: StatsWriter(None).emit_stage_stat(**stage_stat(stage_counters={1: 1}))),
    ]


def mstar_cases():
    family = pipetel.Family.counter("args_items", labels=["stage"])
    gauge = pipetel.recorders.Gauge(pipetel.Family.gauge("args_level"))
    hist = pipetel.recorders.Histogram(pipetel.Family.histogram("args_lat", buckets=[1.0]))
    counter = pipetel.recorders.Counter(family)
    snapshot = counter.snapshot()
    edges = pipetel.EdgeTransfers("nccl")
    hub = pipetel.SnapshotHub()
    return [
        (TypeError, "name", lambda: pipetel.Family(5, "counter")),
        (ValueError, "kind", lambda: pipetel.Family("f", "bogus")),
        (TypeError, "help", lambda: pipetel.Family.counter("f", help=5)),
        (TypeError, "labels", lambda: pipetel.Family.counter("f", labels="ab")),
        (TypeError, "buckets", lambda: pipetel.Family.histogram("f", buckets=["1"])),
        (TypeError, "family", lambda: pipetel.recorders.Counter(5)),
        (TypeError, "labels", lambda: counter.inc("tokenize")),
        (TypeError, "amount", lambda: counter.inc(["tokenize"], None)),
        (TypeError, "value", lambda: gauge.set([], None)),
        (TypeError, "delta", lambda: gauge.add([], "1")),
        (TypeError, "value", lambda: hist.observe([], None)),
        (TypeError, "labels", lambda: snapshot.get("tokenize")),
        (TypeError, "earlier", lambda: snapshot.is_reset_from(5)),
        (ValueError, "bucket_counts", lambda: pipetel.MetricSnapshot(family, [["a"]], bucket_counts=[[-1]])),
        (TypeError, "values", lambda: pipetel.MetricSnapshot(family, [["a"]], values=["1"])),
        (TypeError, "family", lambda: pipetel.merge(5, [])),
        (TypeError, "snapshots", lambda: pipetel.merge(family, [5])),
        (TypeError, "transport", lambda: pipetel.EdgeTransfers(5)),
        (TypeError, "src", lambda: edges.record(5, "b", 1)),
        (ValueError, "nbytes", lambda: edges.record("a", "b", -1)),
        (ValueError, "tensors", lambda: edges.record("a", "b", 1, tensors=-1)),
        (TypeError, "seconds", lambda: edges.record("a", "b", 1, seconds=None)),
        (ValueError, "sequence", lambda: pipetel.Envelope("w", -1, [])),
        (TypeError, "data", lambda: pipetel.Envelope.decode("text")),
        (ValueError, "max_sources", lambda: pipetel.SnapshotHub(max_sources=-1)),
        (ValueError, "stale_after", lambda: pipetel.SnapshotHub(stale_after=1e300)),
        (TypeError, "stale_after", lambda: pipetel.SnapshotHub(stale_after="60")),
        (TypeError, "histograms", lambda: pipetel.SnapshotHub(histograms=5)),
        (TypeError, "data", lambda: hub.ingest_bytes("text")),
        (TypeError, "envelope", lambda: hub.ingest(5)),
        (TypeError, "new_stream", lambda: hub.ingest(pipetel.Envelope("w", 1, []), new_stream="yes")),
        (ValueError, "stream", lambda: hub.read_stream(-1)),
    ]


@pytest.mark.parametrize("cases", [telefuser_cases, span_and_stage_cases, mstar_cases])
def test_every_refused_argument_is_named_in_the_message(cases):
    wrong = []
    for exc, name, call in cases():
        try:
            call()
        except Exception as e:  # noqa: BLE001 - every outcome is checked below
            named = re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", str(e))
            if type(e) is not exc and not isinstance(e, exc) or not named:
                wrong.append(f"{name}: expected {exc.__name__} naming it, got {type(e).__name__}: {e}")
        else:
            wrong.append(f"{name}: nothing raised")
    assert not wrong, "\n".join(wrong)


# --- refused exactly as Rust refuses ----------------------------------------------------------


def test_counter_inc_of_none_is_a_type_error_and_adds_nothing():
    c = registry().counter("requests")
    c.inc()
    c.inc(2)
    refused(TypeError, "amount", lambda: c.inc(None))
    assert c.value == 3.0


def test_unsorted_histogram_buckets_are_refused_not_sorted():
    r = registry()
    message = refused(tf.InvalidMetricError, "buckets", lambda: r.histogram("lat", buckets=[1.0, 0.1, 10.0]))
    assert "strictly increasing" in message
    assert not [n for n in r.list_metrics() if "lat" in n], "a refused histogram is not registered"
    refused(tf.InvalidMetricError, "buckets", lambda: r.histogram("dup", buckets=[0.1, 0.1]))
    # The implied +Inf bucket may still be named last, as prometheus_client code does.
    assert r.histogram("ok", buckets=[0.1, 1.0, math.inf]).buckets == [0.1, 1.0]
    refused(ValueError, "histogram_buckets", lambda: tf.create_metrics_config(histogram_buckets=[1.0, 0.1]))
    config = types.SimpleNamespace(
        namespace=f"args{next(_ids)}", enable_queue_metrics=True, enable_http_metrics=True, histogram_buckets=[5.0, 1.0]
    )
    refused(ValueError, "config.histogram_buckets", lambda: tf.ServiceMetrics(None, config))
    assert tf.MetricsConfig(histogram_buckets=[0.5, 2.0, math.inf]).to_settings()["metrics_histogram_buckets"] == [0.5, 2.0]


@pytest.mark.parametrize("seconds", [math.nan, math.inf, -0.5])
def test_a_transfer_duration_rust_would_not_count_is_refused(seconds):
    edges = pipetel.EdgeTransfers("nccl")
    edges.record("gpu0", "gpu1", nbytes=10, tensors=1, seconds=0.25)
    message = refused(pipetel.RecordError, "seconds", lambda: edges.record("gpu0", "gpu1", 10, 1, seconds))
    assert "pipeline.transfer.duration" in message
    by_name = {s.name: s for s in edges.snapshot()}
    assert by_name["pipeline.transfer.duration"].values == [0.25]
    assert by_name["pipeline.transfer.count"].values == [1.0], "a refused transfer is not counted"


def test_negative_shard_counts_and_indices_are_value_errors_naming_the_argument():
    for name, call in [
        ("shards", lambda: pipetel.stage("s", shards=-1)),
        ("shards", lambda: pipetel.stage("s", shards=2**32)),
        ("index", lambda: pipetel.stage("s", shards=1).shard(-1)),
        ("total_shards", lambda: StatsWriter(None).emit_stage_stat(**stage_stat(total_shards=-3))),
        ("shard_idx", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(shard_idx=-1))),
    ]:
        message = refused(ValueError, name, call)
        assert "out of range" in message and "0..=4294967295" in message


def test_zephyr_counts_beyond_64_bits_are_refused_not_saturated():
    for items in (2**64, 10**400, 1.9e19):
        refused(ValueError, "items", lambda: StatsWriter(None).emit_worker_stat(**worker_stat(items=items)))
    StatsWriter(None).emit_worker_stat(**worker_stat(items=2**64 - 1, bytes_processed=1e18))


def test_a_hub_window_too_long_for_a_duration_is_a_value_error_not_a_panic():
    message = refused(ValueError, "stale_after", lambda: pipetel.SnapshotHub(stale_after=1e300))
    assert "panicked" not in message


# --- worker rows' times: exact to the microsecond ---------------------------------------------

WORKER_TIMES = """
import sys
from datetime import datetime, timedelta, timezone
import pipetel
from pipetel.zephyr import StatsWriter

guard = pipetel.init("args-times", pipeline_namespace="zephyr", exporters_metrics=["none"])
times = [
    datetime(2026, 12, 1, 12, 0, 0, 123457),
    datetime(2026, 12, 1, 12, 0, 0, 999999, tzinfo=timezone(timedelta(hours=5, minutes=30))),
    datetime(2038, 1, 19, 3, 14, 8, 1, tzinfo=timezone(-timedelta(hours=7))),
    datetime(2500, 6, 30, 23, 59, 59, 999999),
]
for i, ts in enumerate(times):
    StatsWriter(None).emit_worker_stat(
        shard_idx=i, stage_name="times", execution_id="e", status="RUNNING", ts=ts, items=1,
        bytes_processed=1, item_rate=1.0, byte_rate=1.0, cpu_time_total=0.0, cpu_current_pct=0.0,
        cpu_avg_pct=0.0, mem_current_bytes=1, mem_avg_bytes=1, mem_peak_bytes=1,
    )
guard.shutdown()
"""


def unix_nanos(ts: datetime) -> int:
    """Nanoseconds since the epoch, in integers only (a naive time is UTC)."""
    aware = ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
    return (aware - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000


def test_worker_row_times_from_a_datetime_are_exact_to_the_microsecond(collector, tmp_path):
    script = tmp_path / "times.py"
    script.write_text(textwrap.dedent(WORKER_TIMES))
    env = peers.clean_env()
    env.update(collector.env("grpc"))
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    got = collector.wait_for(lambda r: len(r.events("zephyr.worker")) == 4, timeout=30)
    times = {r.attributes["pipeline.shard.index"]: r.time_unix_nano for r in got.events("zephyr.worker")}
    expected = [
        datetime(2026, 12, 1, 12, 0, 0, 123457),
        datetime(2026, 12, 1, 12, 0, 0, 999999, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2038, 1, 19, 3, 14, 8, 1, tzinfo=timezone(-timedelta(hours=7))),
        datetime(2500, 6, 30, 23, 59, 59, 999999),
    ]
    assert times == {i: unix_nanos(ts) for i, ts in enumerate(expected)}
