"""The cost of a Python span and of the ASGI middleware, side by side with the OpenTelemetry
Python SDK. A benchmark, not a test: it prints a markdown table.

    scripts/bench-python                                  # builds the release wheel, runs this
    python python/benches/bench_web.py [--number 20000] [--repeat 7]

Rows, all in this one process, medians of ``repeat`` runs of ``number`` executions:

* ``with pipetel.span("load", **3 attributes)``, with traces exported over OTLP/HTTP (to a
  sink process that answers every export with 200), against the OTel SDK's
  ``tracer.start_as_current_span`` with the same attributes, on a ``TracerProvider`` with a
  ``BatchSpanProcessor`` whose exporter drops the spans (cheaper than a real export, so the
  SDK's figure is its best case). Target: pipetel at least 10x faster.
* an ASGI request through ``pipetel.asgi.Middleware`` against the same request through
  ``opentelemetry-instrumentation-asgi``'s ``OpenTelemetryMiddleware`` (its span with the SDK
  tracer above, its metrics on an SDK ``MeterProvider``) with the request metrics a
  prometheus_client app keeps (``http_request_duration_seconds`` histogram by method, route and
  status, ``http_requests_in_progress`` gauge), each app called directly in-process (no
  server). The figure is the time added to the bare app's request. Target: pipetel's added
  time at most 0.2x the other's.
"""

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from typing import Any, Dict, Iterator

SINK = r"""
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

ATTRS = {"table": "tokens", "rows": 3, "stage": "tokenize"}
HEADERS = [
    (b"host", b"127.0.0.1:8000"),
    (b"user-agent", b"bench/1.0"),
    (b"accept", b"*/*"),
    (b"traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
]


def scope() -> Dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/items/7",
        "raw_path": b"/items/7",
        "query_string": b"",
        "root_path": "",
        "headers": list(HEADERS),
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


class _Route:
    path = "/items/{item_id}"


async def bare_app(scope, receive, send):
    scope["route"] = _Route  # as Starlette's router leaves it
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def receive():
    return {"type": "http.request", "body": b"", "more_body": False}


async def send(message):
    pass


def asgi_per_request(app, number: int, repeat: int) -> float:
    """Median nanoseconds per request of ``app`` called directly in an event loop."""

    async def run(n):
        for _ in range(n):
            await app(scope(), receive, send)

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(run(200))
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            loop.run_until_complete(run(number))
            runs.append(time.perf_counter() - t0)
    finally:
        loop.close()
    return statistics.median(runs) / number * 1e9


def prometheus_client_middleware(app):
    """The request metrics a prometheus_client app keeps, as an ASGI middleware."""
    import prometheus_client

    registry = prometheus_client.CollectorRegistry()
    duration = prometheus_client.Histogram(
        "http_request_duration_seconds", "Request duration", ["method", "route", "status"], registry=registry
    )
    in_progress = prometheus_client.Gauge("http_requests_in_progress", "In progress", ["method"], registry=registry)

    async def middleware(scope, receive, send):
        method = scope["method"]
        status = [500]

        async def send_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        gauge = in_progress.labels(method)
        gauge.inc()
        start = time.perf_counter()
        try:
            await app(scope, receive, send_status)
        finally:
            route = getattr(scope.get("route"), "path", "")
            duration.labels(method, route, str(status[0])).observe(time.perf_counter() - start)
            gauge.dec()

    return middleware


def otel_sdk():
    """An OTel SDK tracer provider (BatchSpanProcessor, exporter dropping the spans) and meter
    provider."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Drop(SpanExporter):
        def export(self, spans):
            return SpanExportResult.SUCCESS

    tp = TracerProvider()
    tp.add_span_processor(BatchSpanProcessor(Drop()))
    mp = MeterProvider(metric_readers=[InMemoryMetricReader()])
    return tp, mp


@contextlib.contextmanager
def sink() -> Iterator[int]:
    """Runs the OTLP sink (a process answering every export with 200) while the block runs;
    gives its port."""
    proc = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield int(proc.stdout.readline())
    finally:
        proc.terminate()
        proc.wait()


def main() -> int:
    ap = argparse.ArgumentParser(description="Python spans and the ASGI middleware against the OTel SDK")
    ap.add_argument("--number", type=int, default=20_000, help="executions per run")
    ap.add_argument("--repeat", type=int, default=7, help="runs per row (the median is reported)")
    args = ap.parse_args()

    with sink() as port:
        for k in [k for k in os.environ if k.startswith(("OTEL_", "PIPETEL_"))]:
            del os.environ[k]
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
        os.environ["OTEL_EXPORTER_OTLP_PROTOCOL"] = "http/protobuf"
        import pipetel
        import pipetel.asgi

        guard = pipetel.init(
            "bench-web",
            exporters_traces=["otlp"],
            exporters_metrics=["prometheus"],
            exporters_logs=["none"],
            prometheus_host="127.0.0.1",
            prometheus_port=0,
        )
        tp, mp = otel_sdk()
        tracer = tp.get_tracer("bench")

        ns: Dict[str, float] = {}

        def timed(stmt: str, names: Dict[str, Any]) -> float:
            exec(stmt, dict(names))
            runs = timeit.Timer(stmt, globals=names).repeat(repeat=args.repeat, number=args.number)
            return statistics.median(runs) / args.number * 1e9

        span_stmt = "with span('load', **attrs):\n    pass"
        ns["pipetel"] = timed(span_stmt, {"span": pipetel.span, "attrs": ATTRS})
        otel_stmt = "with tracer.start_as_current_span('load', attributes=attrs):\n    pass"
        ns["otel"] = timed(otel_stmt, {"tracer": tracer, "attrs": ATTRS})

        from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware

        bare = asgi_per_request(bare_app, args.number, args.repeat)
        ours = asgi_per_request(pipetel.asgi.Middleware(bare_app), args.number, args.repeat)
        theirs_app = prometheus_client_middleware(OpenTelemetryMiddleware(bare_app, tracer_provider=tp, meter_provider=mp))
        theirs = asgi_per_request(theirs_app, args.number, args.repeat)
        # The traces really went out: the sink answered the exports (nothing failed).
        guard.flush()

        print(f"\npipetel {pipetel.__version__}, CPython {platform.python_version()}, {platform.machine()}; "
              f"median of {args.repeat} runs x {args.number}\n")
        print("| row | ns | target | measured |")
        print("| --- | ---: | --- | ---: |")
        span_ratio = ns["otel"] / ns["pipetel"]
        print(f"| `with pipetel.span('load', 3 attrs)` (traces exported over OTLP) | {ns['pipetel']:.0f} | "
              f">= 10x faster than the OTel SDK | {span_ratio:.1f}x |")
        print(f"| OTel SDK `start_as_current_span('load', 3 attrs)`, BatchSpanProcessor | {ns['otel']:.0f} | | |")
        added_ours, added_theirs = ours - bare, theirs - bare
        print(f"| bare ASGI app, one request, called directly | {bare:.0f} | | |")
        print(f"| `pipetel.asgi.Middleware`: time added per request | {added_ours:.0f} | "
              f"<= 0.2x the OTel ASGI + prometheus_client figure | {added_ours / added_theirs:.2f}x |")
        print(f"| `OpenTelemetryMiddleware` + prometheus_client metrics: time added per request | {added_theirs:.0f} | | |")
        missed = []
        if span_ratio < 10:
            missed.append(f"span: {span_ratio:.1f}x faster, target 10x")
        if added_ours > 0.2 * added_theirs:
            missed.append(f"ASGI middleware: {added_ours / added_theirs:.2f}x, target 0.2x")
        if missed:
            print("\nmissing a target: " + "; ".join(missed))
        guard.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
