"""pipetel.prometheus_text(): the whole page the pull endpoint serves (registry, stage, span and
pipeline metrics), for an app's own /metrics route; the TeleFuser global registry's
get_prometheus_format() giving what TeleFuser's global registry held (its own metrics and the
stage metrics, not another registry's); Python spans in span.duration. Each program runs as a
subprocess: it calls init."""

import re
import subprocess
import sys

import peers

PROGRAM = r"""
import json, sys, urllib.request
import pipetel
from pipetel import telefuser

try:
    pipetel.prometheus_text()
except pipetel.InitError as e:
    print("before init:", e, flush=True)
before = telefuser.get_metrics_registry().get_prometheus_format()

guard = pipetel.init("page", prometheus_host="127.0.0.1", prometheus_port=0)
registry = telefuser.get_metrics_registry()
registry.counter("requests", "Requests served").inc(7)
registry.gauge("queue_depth", "Items waiting").set(3)
registry.histogram("wait_seconds", "Wait", buckets=[0.005, 1.0, 2.5]).observe(0.5)
app = telefuser.MetricRegistry("app")
app.counter("hits", "Hits of another registry").inc(2)

class Tokenize:
    name = "tokenize_tf"

    @telefuser.with_metrics
    def run(self):
        return 1

tok = Tokenize()
telefuser.enable_stage_metrics(tok)
tok.run()
with pipetel.stage("tokenize", shards=2) as stage:
    for i in range(2):
        with stage.shard(i) as shard:
            shard.record(10, 100)
for _ in range(3):
    with pipetel.span("load"):
        pass
try:
    with pipetel.span("load"):
        raise ValueError("bad row")
except ValueError:
    pass

def endpoint(accept=None):
    req = urllib.request.Request(f"http://{guard.prometheus_addr}/metrics")
    if accept:
        req.add_header("Accept", accept)
    with urllib.request.urlopen(req, timeout=5) as r:
        return r.read().decode()

pages = {
    "endpoint": endpoint(),
    "text": pipetel.prometheus_text(),
    "telefuser": registry.get_prometheus_format(),
    "app": app.get_prometheus_format(),
    "endpoint_om": endpoint("application/openmetrics-text; version=1.0.0"),
    "om": pipetel.prometheus_text(openmetrics=True),
    "before": before,
}
try:
    pipetel.prometheus_text(openmetrics="yes")
except TypeError as e:
    pages["bad_arg"] = str(e)
guard.shutdown()
json.dump(pages, sys.stdout)
"""

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: .*)?$")

# Families whose values move between two renders on their own (process CPU, memory, threads,
# open files, uptime-like gauges).
TIMING = ("process_",)


def series(text):
    """{series line without its value: value}, comments dropped."""
    return {f"{m.group(1)}{{{m.group(2) or ''}}}": m.group(3) for m in peers.exposition_samples(text, SAMPLE)}


def comments(text):
    return [l for l in text.splitlines() if l.startswith("#")]


def run():
    env = peers.clean_env()
    done = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    import json

    before, _, pages = done.stdout.partition("{")
    return before, json.loads("{" + pages)


def test_the_function_serves_the_pull_endpoints_page_and_telefuser_its_own():
    before, pages = run()
    assert "before init: prometheus_text: no page to render" in before, before
    endpoint, text = series(pages["endpoint"]), series(pages["text"])
    # The same series (within a family the SDK's order of series may differ between renders),
    # the same HELP/TYPE lines in the same order, the same values but for the process metrics,
    # which move by themselves between two renders.
    assert set(text) == set(endpoint), set(text) ^ set(endpoint)
    moved = {k for k in endpoint if text[k] != endpoint[k]}
    assert all(k.startswith(TIMING) for k in moved), sorted(moved)
    assert comments(pages["text"]) == comments(pages["endpoint"])
    # The whole page holds every registry.
    assert text['app_hits_total{otel_scope_name="pipetel"}'] == "2"
    # The global TeleFuser registry: its own metrics (bounds as prometheus_client writes them),
    # then the stage metrics; not another registry's, nor pipetel's own.
    tf = pages["telefuser"]
    names = {k.split("{")[0] for k in series(tf)}
    assert "app_hits_total" not in names and "app_hits_total" in pages["app"], tf
    assert not any(n.startswith(("span_", "pipeline_", "process_", "target_info")) for n in names), sorted(names)
    tf_series = series(tf)
    assert tf_series["telefuser_requests_total{}"] == "7" and tf_series["telefuser_queue_depth{}"] == "3", tf
    assert [k for k in tf_series if k.startswith("telefuser_wait_seconds_bucket")] == [
        'telefuser_wait_seconds_bucket{le="0.005"}',
        'telefuser_wait_seconds_bucket{le="1.0"}',
        'telefuser_wait_seconds_bucket{le="2.5"}',
        'telefuser_wait_seconds_bucket{le="+Inf"}',
    ], tf
    assert tf_series['function_calls_total{stage="tokenize_tf",otel_scope_name="pipetel"}'] == "1", tf
    assert 'function_duration_seconds_bucket{stage="tokenize_tf",otel_scope_name="pipetel",le="1.0"}' in tf_series, tf
    from prometheus_client.parser import text_string_to_metric_families

    assert {f.name for f in text_string_to_metric_families(tf)} >= {"telefuser_requests", "function_calls"}
    # What the page holds: the registry's metrics, stage metrics, Python spans in span.duration.
    assert text['telefuser_requests_total{otel_scope_name="pipetel"}'] == "7"
    assert text['telefuser_queue_depth{otel_scope_name="pipetel"}'] == "3"
    stage_items = [v for k, v in text.items() if k.startswith("pipeline_stage_items_total{") and "tokenize" in k]
    assert stage_items == ["20"], stage_items
    found = {k: v for k, v in text.items() if k.startswith("span_duration_seconds_count{") and 'span_name="load"' in k}
    assert [v for k, v in found.items() if 'status="ok"' in k] == ["3"], found
    assert [v for k, v in found.items() if 'status="error"' in k] == ["1"], found
    assert all('span_target="python"' in k for k in found), found
    # OpenMetrics: the same page as the endpoint serves it to a Prometheus asking for it.
    assert pages["om"].rstrip().endswith("# EOF")
    assert set(series(pages["om"])) == set(series(pages["endpoint_om"]))
    assert comments(pages["om"]) == comments(pages["endpoint_om"])
    # Before init the global registry renders itself alone; the argument is checked.
    assert "span_duration" not in pages["before"] and "target_info" not in pages["before"]
    assert pages["bad_arg"].startswith("openmetrics:"), pages["bad_arg"]
