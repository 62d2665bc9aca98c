"""pipetel.asgi.Middleware and pipetel.wsgi.Middleware under real servers with real clients: a
FastAPI app under uvicorn (httpx) and a Flask app under gunicorn (requests), both apps in
python/tests/webapps/. What is asserted is what a real collector received (spans, metrics, log
records) and what the pull endpoint and the app's own /metrics route serve."""

import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import requests

import peers

WEBAPPS = Path(__file__).resolve().parent / "webapps"
SERVER = 2  # OTLP SpanKind.SPAN_KIND_SERVER
INTERNAL = 1
ERROR = 2  # OTLP Status.STATUS_CODE_ERROR

PARENT_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{PARENT_TRACE}-{PARENT_SPAN}-01"

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)(?: \S+)?$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """Exposition text -> {(name, frozenset of label pairs): value}."""
    samples = peers.exposition_samples(text, SAMPLE)
    return {(m.group(1), frozenset(LABEL.findall(m.group(2) or ""))): float(m.group(3)) for m in samples}


def value(samples, name, **labels):
    """The one sample of ``name`` whose labels include ``labels`` (None when there is none)."""
    want = set(labels.items())
    found = [v for (n, ls), v in samples.items() if n == name and want <= set(ls)]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


def base_env(collector):
    env = peers.clean_env()
    env.update(
        collector.env("grpc"),
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_LOGS_EXPORTER="otlp",
        OTEL_METRIC_EXPORT_INTERVAL="300",
        OTEL_BSP_SCHEDULE_DELAY="100",
        PYTHONPATH=str(WEBAPPS),
    )
    return env


class Server:
    """A real server process; stopped (SIGTERM: a graceful exit that flushes) at the end."""

    def __init__(self, argv, env, url, log: Path):
        self.log = log
        self._out = open(log, "wb")
        self.proc = subprocess.Popen(argv, env=env, stdout=self._out, stderr=subprocess.STDOUT, cwd=WEBAPPS)
        self.url = url

        def up():
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited ({self.proc.returncode}):\n{self.output()}")
            try:
                return requests.get(f"{url}/items/0", timeout=1).status_code == 200
            except requests.RequestException:
                return False

        try:
            peers.wait_until("the server to answer", up, 60.0, self.output)
        except BaseException:
            self.stop()
            raise

    def output(self):
        return self.log.read_text("utf-8", "replace")

    def stop(self):
        peers.stop_process(self.proc, 15.0)
        self._out.close()


def check_spans_and_logs(collector, service, route, logger):
    """The three GET requests on ``route`` carried TRACEPARENT: each server span continues that
    trace; the handler's ``lookup`` span and log record sit under the server span."""
    mine = lambda s: s.resource.get("service.name") == service
    got = collector.wait_for(
        lambda r: sum(1 for s in r.spans if mine(s) and s.trace_id == PARENT_TRACE) >= 6
        and sum(1 for x in r.logs if x.attributes.get("logger.name") == logger and x.trace_id == PARENT_TRACE) >= 3
        and any(mine(s) and s.attributes.get("http.route") == "/boom" for s in r.spans),
        timeout=30,
    )
    servers = [s for s in got.spans if mine(s) and s.kind == SERVER and s.attributes.get("http.route") == route]
    traced = [s for s in servers if s.trace_id == PARENT_TRACE]
    assert len(traced) == 3, servers
    for s in traced:
        assert s.parent_span_id == PARENT_SPAN, s
        assert s.name == f"GET {route}", s
        assert s.attributes["http.request.method"] == "GET"
        assert s.attributes["http.response.status_code"] == 200
        assert s.attributes["url.scheme"] == "http"
        assert s.attributes["url.path"].startswith("/items/")
        assert s.status_code != ERROR
        lookups = [c for c in got.spans if c.name == "lookup" and c.parent_span_id == s.span_id]
        assert len(lookups) == 1 and lookups[0].trace_id == PARENT_TRACE and lookups[0].kind == INTERNAL, lookups
        logs = [x for x in got.logs if x.attributes.get("logger.name") == logger and x.span_id == s.span_id]
        assert len(logs) == 1 and logs[0].trace_id == PARENT_TRACE, logs
        assert logs[0].body == f"reading item {s.attributes['url.path'].rsplit('/', 1)[1]}"
    boom = [s for s in got.spans if mine(s) and s.kind == SERVER and s.attributes.get("http.route") == "/boom"]
    assert boom and all(s.status_code == ERROR and s.attributes["http.response.status_code"] == 500 for s in boom), boom
    assert boom[0].parent_span_id == "", "a request without traceparent starts a trace"
    return got


def check_metrics(collector, service, route, post_sizes, unmatched_status=404):
    """What the collector received of the HTTP server metrics (its newest cumulative points);
    ``post_sizes``: the POST's request and response body sizes."""
    post_size, post_response_size = post_sizes
    mine = lambda p: p.resource.get("service.name") == service
    name = "http.server.request.duration"

    def complete(r):
        # Every request of drive() exported (cumulative points: the newest holds them all).
        count = lambda **a: max((p.count for p in r.points(name, **a) if mine(p)), default=0)
        return (
            count(**{"http.route": route}) >= 4
            and count(**{"http.route": "/items"}) >= 1
            and count(**{"http.route": "/boom"}) >= 1
            and count(**{"http.response.status_code": unmatched_status}) >= 2
            and getattr(r.latest("http.server.active_requests", **{"http.request.method": "GET"}), "value", None) == 0
        )

    got = collector.wait_for(complete, timeout=30)
    latest = lambda n, **a: max((p for p in got.points(n, **a) if mine(p)), key=lambda p: p.time_unix_nano, default=None)
    ok = latest(name, **{"http.route": route, "http.request.method": "GET", "http.response.status_code": 200})
    assert ok is not None and ok.count >= 4, ok  # 3 traced + at least one readiness probe
    assert ok.unit == "s" and ok.kind == "histogram"
    assert ok.scope == "opentelemetry-instrumentation-tower", ok.scope
    assert ok.bounds == [0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0]
    assert ok.attributes["url.scheme"] == "http" and ok.attributes["network.protocol.name"] == "http"
    assert ok.attributes["network.protocol.version"] in ("1.1", "1.0"), ok.attributes
    post = latest(name, **{"http.route": "/items", "http.request.method": "POST", "http.response.status_code": 200})
    assert post is not None and post.count == 1, post
    req_size = latest("http.server.request.body.size", **{"http.route": "/items", "http.request.method": "POST"})
    assert req_size is not None and req_size.count == 1 and req_size.sum == post_size and req_size.unit == "By", req_size
    resp_size = latest("http.server.response.body.size", **{"http.route": "/items", "http.request.method": "POST"})
    assert resp_size is not None and resp_size.count == 1 and resp_size.sum == post_response_size, resp_size
    boom = latest(name, **{"http.route": "/boom", "http.response.status_code": 500})
    assert boom is not None and boom.count == 1, boom
    # The unmatched path has no route: one series for every such path, whatever was asked.
    unmatched = [p for p in got.points(name, **{"http.response.status_code": unmatched_status}) if mine(p)]
    assert unmatched and all("http.route" not in p.attributes for p in unmatched), unmatched
    assert max(p.count for p in unmatched) == 2
    active = latest("http.server.active_requests", **{"http.request.method": "GET"})
    assert active is not None and active.value == 0 and active.unit == "{request}", active
    assert set(active.attributes) == {"http.request.method", "url.scheme"}
    return got


def drive(client_get, client_post, base):
    """The requests both tests make: three traced GETs on the item route, a POST with a body,
    one failing request and two paths no route matches."""
    for item in (1, 2, 3):
        r = client_get(f"{base}/items/{item}", headers={"traceparent": TRACEPARENT})
        assert r.status_code == 200 and r.json()["trace_id"] == PARENT_TRACE, r.text
    body = b"x" * 1234
    r = client_post(f"{base}/items", content=body) if client_post is httpx.post else client_post(f"{base}/items", data=body)
    assert r.status_code == 200 and r.json() == {"created": 1234}, r.text
    sizes = (len(body), len(r.content))
    assert client_get(f"{base}/boom").status_code == 500
    assert client_get(f"{base}/no/such/{time.time_ns()}").status_code == 404
    assert client_get(f"{base}/scan/{time.time_ns()}").status_code == 404
    return sizes


def test_fastapi_under_uvicorn_spans_metrics_and_the_apps_own_metrics_route(collector, tmp_path):
    port, pull = peers.free_port(), peers.free_port()
    env = base_env(collector)
    env.update(
        OTEL_METRICS_EXPORTER="otlp,prometheus",
        OTEL_EXPORTER_PROMETHEUS_HOST="127.0.0.1",
        OTEL_EXPORTER_PROMETHEUS_PORT=str(pull),
    )
    argv = [sys.executable, "-m", "uvicorn", "fastapi_app:app", "--host", "127.0.0.1", "--port", str(port)]
    server = Server(argv, env, f"http://127.0.0.1:{port}", tmp_path / "uvicorn.log")
    try:
        post_sizes = drive(httpx.get, httpx.post, server.url)
        check_spans_and_logs(collector, "web-fastapi", "/items/{item_id}", "web.fastapi")
        check_metrics(collector, "web-fastapi", "/items/{item_id}", post_sizes)

        # The pull endpoint and the app's own /metrics route serve one page; TeleFuser's route
        # the global registry's own metrics, as in TeleFuser.
        endpoint = parse(httpx.get(f"http://127.0.0.1:{pull}/metrics").text)
        own = parse(httpx.get(f"{server.url}/metrics").text)
        telefuser = parse(httpx.get(f"{server.url}/tf-metrics").text)
        key = ("http_server_request_duration_seconds_count", None)
        for page in (endpoint, own):
            got = value(page, key[0], http_route="/items/{item_id}", http_request_method="GET")
            assert got is not None and got >= 4, got
            assert value(page, "span_duration_seconds_count", span_name="lookup", span_target="python", status="ok") >= 3
        assert set(own) - set(endpoint) <= {
            k for k in own if k[0].startswith("http_server_") and ("http_route", "/metrics") in k[1]
        }, "the app's page has series the pull endpoint lacks"
        assert set(endpoint) - set(own) == set(), "the pull endpoint has series the app's page lacks"
        assert (value(telefuser, "telefuser_items_read_total") or 0) >= 4, telefuser
        assert not any(k[0].startswith(("http_server_", "span_", "target_info")) for k in telefuser), telefuser
        om = httpx.get(f"{server.url}/metrics", params={"om": "true"}).text
        assert om.rstrip().endswith("# EOF"), om[-200:]
    finally:
        server.stop()
    assert "Traceback" not in server.output() or "RuntimeError: boom" in server.output(), server.output()


def test_flask_under_gunicorn_spans_and_metrics_at_the_collector(collector, tmp_path):
    port = peers.free_port()
    env = base_env(collector)
    env.update(OTEL_METRICS_EXPORTER="otlp")
    argv = [
        sys.executable, "-m", "gunicorn", "--workers", "1", "--bind", f"127.0.0.1:{port}",
        "--graceful-timeout", "10", "flask_app:app",
    ]  # fmt: skip
    server = Server(argv, env, f"http://127.0.0.1:{port}", tmp_path / "gunicorn.log")
    try:
        post_sizes = drive(requests.get, requests.post, server.url)
        r = requests.get(f"{server.url}/stream")
        assert r.status_code == 200 and len(r.content) == 500
        check_spans_and_logs(collector, "web-flask", "/items/<int:item_id>", "web.flask")
        got = check_metrics(collector, "web-flask", "/items/<int:item_id>", post_sizes)
        streamed = [
            p for p in got.points("http.server.response.body.size", **{"http.route": "/stream"})
            if p.resource.get("service.name") == "web-flask"
        ]  # fmt: skip
        assert streamed and max(p.sum for p in streamed) == 500, streamed
    finally:
        server.stop()


DJANGO = r"""
import sys, threading, urllib.error, urllib.request
from wsgiref.simple_server import WSGIRequestHandler, make_server

import django
from django.conf import settings

settings.configure(
    DEBUG=False, ROOT_URLCONF="__main__", ALLOWED_HOSTS=["*"], SECRET_KEY="test",
    MIDDLEWARE=["pipetel.wsgi.DjangoRoute"],
)
django.setup()
from django.core.wsgi import get_wsgi_application
from django.http import JsonResponse
from django.urls import path

import pipetel
import pipetel.wsgi

def item(request, item_id):
    return JsonResponse({"item": item_id})

urlpatterns = [path("items/<int:item_id>", item)]

class Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass

guard = pipetel.init("web-django", prometheus_host="127.0.0.1", prometheus_port=0)
server = make_server("127.0.0.1", 0, pipetel.wsgi.Middleware(get_wsgi_application()), handler_class=Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_port}"
for i in (1, 2, 3):
    assert urllib.request.urlopen(f"{base}/items/{i}").read() == b'{"item": %d}' % i
try:
    urllib.request.urlopen(f"{base}/nothing/here")
except urllib.error.HTTPError as e:
    assert e.code == 404
# The server ends a request when it closes the response, which may come after the client has it.
import time
deadline = time.monotonic() + 10
while 'http_response_status_code="404"' not in pipetel.prometheus_text() and time.monotonic() < deadline:
    time.sleep(0.05)
print(pipetel.prometheus_text())
server.shutdown()
guard.shutdown()
"""


def test_django_route_reaches_the_wsgi_middleware():
    env = peers.clean_env()
    done = subprocess.run([sys.executable, "-c", DJANGO], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    page = parse(done.stdout)
    name = "http_server_request_duration_seconds_count"
    assert value(page, name, http_route="/items/<int:item_id>", http_request_method="GET", http_response_status_code="200") == 3
    unmatched = [(ls, v) for (n, ls), v in page.items() if n == name and ("http_response_status_code", "404") in ls]
    assert len(unmatched) == 1 and unmatched[0][1] == 1, unmatched
    assert not any(k == "http_route" for k, _ in unmatched[0][0]), unmatched
