"""Real peers for the Python end-to-end tests: an OpenTelemetry Collector and Prometheus.

The Python counterpart of the Rust end-to-end harness (``tests/support/``): each peer is the
real binary, started on free loopback ports with a temporary folder of its own, waited on until
it is ready, and stopped (terminate, then kill) when the test ends. ``conftest.py`` turns them
into the fixtures ``collector`` and ``prometheus`` and adds ``run_example``.

Binaries:

* ``PIPETEL_OTELCOL_BIN``: the collector ``scripts/build-collector`` builds (``otelcol-pipetel``;
  any contrib build with the ``otlp`` receiver, the ``file`` exporter and the ``health_check``
  extension works);
* ``PIPETEL_PROMETHEUS_BIN``: Prometheus (default: ``prometheus`` on ``PATH``).

A missing binary follows the one rule of the Rust harness (``tests/support/peers.rs``): with
``PIPETEL_REQUIRE_PEERS=1`` (``scripts/test`` sets it) the test fails saying which variable to
set; otherwise it is skipped, and the end of the run lists every test skipped for a missing peer
and how to get the peer.

What a peer received is decoded from its own output: the collector writes every OTLP request it
gets as a JSON line (its ``file`` exporter), read back here as :class:`MetricPoint`,
:class:`LogRecord` and :class:`Span`; Prometheus is asked through its HTTP API.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, TypeVar

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "python" / "examples"

T = TypeVar("T")


class PeerMissing(Exception):
    """A peer binary is not available (the fixtures skip, or fail under PIPETEL_REQUIRE_PEERS=1)."""


def peers_required() -> bool:
    """Whether a missing peer is a failure (``PIPETEL_REQUIRE_PEERS=1``) rather than a skip."""
    return os.environ.get("PIPETEL_REQUIRE_PEERS", "") not in ("", "0", "false", "no")


def clean_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """This process's environment without its ``OTEL_*`` and ``PIPETEL_*`` variables, with
    ``extra`` laid over it: a child configured by what the test gives it alone."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "PIPETEL_"))}
    env.update(extra or {})
    return env


# What each peer is and how to get it, as ``tests/support/peers.rs`` says it.
_PEERS: Dict[str, "tuple[str, str]"] = {
    "PIPETEL_OTELCOL_BIN": (
        "the OpenTelemetry Collector (otelcol-pipetel)",
        "build it and set PIPETEL_OTELCOL_BIN: `export PIPETEL_OTELCOL_BIN=$(scripts/build-collector | tail -1)` "
        "(needs Go)",
    ),
    "PIPETEL_VICTORIA_LOGS_BIN": (
        "VictoriaLogs (the fleet's rows store)",
        "build it and set PIPETEL_VICTORIA_LOGS_BIN: `scripts/build-backends victoria-logs` prints its path (needs Go)",
    ),
    "PIPETEL_PROMETHEUS_BIN": (
        "Prometheus",
        "install Prometheus (`apt-get install prometheus`) or set PIPETEL_PROMETHEUS_BIN to a `prometheus` binary",
    ),
}


def peer_binary(var: str, default: Optional[str]) -> str:
    """The binary named by ``var``, else ``default`` on ``PATH``; raises :class:`PeerMissing`
    saying what is missing, why, and how to get it (with the variable to set)."""
    value = os.environ.get(var)
    if value:
        if Path(value).is_file() and os.access(value, os.X_OK):
            return value
        why = f"{var}={value} is not an executable file"
    else:
        found = shutil.which(default) if default is not None else None
        if found:
            return found
        why = f"{var} is not set" + (f" and `{default}` is not on PATH" if default is not None else "")
    what, how = _PEERS.get(var, (default or var, f"set {var}"))
    raise PeerMissing(f"{what} is missing ({why}); {how}")


_handed_out: set = set()
_ports_lock = threading.Lock()


def free_port() -> int:
    """A loopback TCP port that was free a moment ago and never handed out before by this process."""
    with _ports_lock:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            if port not in _handed_out:
                _handed_out.add(port)
                return port


def http(method: str, url: str, body: Optional[bytes] = None, timeout: float = 5.0) -> "tuple[int, str]":
    """One HTTP request; returns ``(status, body)``. Connection errors raise ``OSError``."""
    req = urllib.request.Request(url, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, resp.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def wait_until(what: str, check: Callable[[], Optional[T]], timeout: float, describe: Callable[[], str] = lambda: "") -> T:
    """Polls ``check`` every 200 ms until it returns something other than ``None``/``False``.

    Raises ``AssertionError`` naming ``what`` (and ``describe()``) after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            extra = describe()
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}" + (f"\n{extra}" if extra else ""))
        time.sleep(0.2)


def stop_process(popen: "subprocess.Popen[Any]", grace: float) -> None:
    """SIGTERM (a graceful exit, which flushes), then SIGKILL after ``grace`` seconds; waits for
    the process either way."""
    if popen.poll() is None:
        popen.send_signal(signal.SIGTERM)
        try:
            popen.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(timeout=grace)


class PeerProcess:
    """A child process whose stdout and stderr go to a log file; stopped by :meth:`stop`."""

    def __init__(self, name: str, argv: Sequence[str], workdir: Path, env: Optional[Mapping[str, str]] = None):
        self.name = name
        self.argv = list(argv)
        self.log_path = workdir / f"{name}.log"
        self._log = open(self.log_path, "wb")
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        self.popen = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full_env, cwd=workdir
        )

    def output(self, last_lines: Optional[int] = None) -> str:
        """What the process printed so far (its last ``last_lines`` lines when given)."""
        try:
            text = self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""
        if last_lines is not None:
            text = "\n".join(text.splitlines()[-last_lines:])
        return text

    def exited(self) -> Optional[int]:
        """The exit code once the process has exited, ``None`` while it runs."""
        return self.popen.poll()

    def wait_ready(self, what: str, state: str, url: str, describe: Callable[[], str]) -> None:
        """Waits (30 s at most) until ``url`` answers 200. If the process exits first or the
        time runs out, stops it and raises ``AssertionError`` saying ``what`` was not ``state``."""

        def ready() -> bool:
            code = self.exited()
            if code is not None:
                raise AssertionError(f"{what} exited ({code}) before it was {state}:\n{self.output()}")
            try:
                return http("GET", url, timeout=1.0)[0] == 200
            except OSError:
                return False

        try:
            wait_until(f"{what} to be {state}", ready, 30.0, describe)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 5 s; waits for the process either way."""
        stop_process(self.popen, 5.0)
        self._log.close()


# --- OTLP JSON, as the collector's file exporter writes it -------------------------------------


def _any_value(v: Mapping[str, Any]) -> Any:
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_any_value(x) for x in v["arrayValue"].get("values", [])]
    if "kvlistValue" in v:
        return attributes(v["kvlistValue"].get("values", []))
    if "bytesValue" in v:
        return v["bytesValue"]
    return None


def attributes(kvs: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
    """An OTLP ``[{key, value}]`` list as a plain dict (``intValue`` as int, ...)."""
    return {kv["key"]: _any_value(kv.get("value", {})) for kv in kvs or []}


@dataclass
class MetricPoint:
    """One data point of one metric, with its resource and scope."""

    name: str
    kind: str  # "sum", "gauge", "histogram", "exponentialHistogram" or "summary"
    unit: str
    description: str
    resource: Dict[str, Any]
    scope: str
    attributes: Dict[str, Any]
    time_unix_nano: int
    value: Optional[float] = None  # sums and gauges
    count: Optional[int] = None  # histograms and summaries
    sum: Optional[float] = None
    bucket_counts: List[int] = field(default_factory=list)  # histograms: per bucket, not cumulative
    bounds: List[float] = field(default_factory=list)
    is_monotonic: Optional[bool] = None
    temporality: Optional[str] = None


@dataclass
class LogRecord:
    """One log record, with its resource and scope."""

    resource: Dict[str, Any]
    scope: str
    event_name: str
    body: Any
    attributes: Dict[str, Any]
    severity_text: str
    severity_number: int
    time_unix_nano: int
    trace_id: str
    span_id: str


@dataclass
class Span:
    """One span, with its resource and scope."""

    resource: Dict[str, Any]
    scope: str
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    kind: int
    status_code: int
    attributes: Dict[str, Any]


def _lines(path: Path) -> Iterable[Dict[str, Any]]:
    try:
        text = path.read_text("utf-8", "replace")
    except OSError:
        return
    for line in text.splitlines():
        try:
            yield json.loads(line)
        except ValueError:
            continue  # a line still being written


def _number(p: Mapping[str, Any]) -> Optional[float]:
    if "asDouble" in p:
        return float(p["asDouble"])
    if "asInt" in p:
        return float(int(p["asInt"]))
    return None


def _records(
    path: Path, resources: str, scopes: str, records: str
) -> Iterable["tuple[Dict[str, Any], str, Mapping[str, Any]]"]:
    """``(resource attributes, scope name, record)`` for every record of a file of OTLP JSON
    requests, its three levels named by the signal (``resourceLogs``, ``scopeLogs``,
    ``logRecords`` for logs)."""
    for req in _lines(path):
        for r in req.get(resources, []):
            resource = attributes(r.get("resource", {}).get("attributes", []))
            for s in r.get(scopes, []):
                scope = s.get("scope", {}).get("name", "")
                for record in s.get(records, []):
                    yield resource, scope, record


def metric_points(path: Path) -> List[MetricPoint]:
    """Every metric data point in a file of OTLP JSON metric requests."""
    out: List[MetricPoint] = []
    for resource, scope, m in _records(path, "resourceMetrics", "scopeMetrics", "metrics"):
        for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
            if kind in m:
                break
        else:
            continue
        data = m[kind]
        for p in data.get("dataPoints", []):
            point = MetricPoint(
                name=m.get("name", ""),
                kind=kind,
                unit=m.get("unit", ""),
                description=m.get("description", ""),
                resource=resource,
                scope=scope,
                attributes=attributes(p.get("attributes", [])),
                time_unix_nano=int(p.get("timeUnixNano", 0)),
                is_monotonic=data.get("isMonotonic") if kind == "sum" else None,
                temporality=data.get("aggregationTemporality"),
            )
            if kind in ("sum", "gauge"):
                point.value = _number(p)
            else:
                point.count = int(p.get("count", 0))
                point.sum = float(p["sum"]) if "sum" in p else None
                point.bucket_counts = [int(c) for c in p.get("bucketCounts", [])]
                point.bounds = [float(b) for b in p.get("explicitBounds", [])]
            out.append(point)
    return out


def _shared(resource: Dict[str, Any], scope: str, record: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields a :class:`LogRecord` and a :class:`Span` share."""
    return {
        "resource": resource,
        "scope": scope,
        "trace_id": record.get("traceId", ""),
        "span_id": record.get("spanId", ""),
        "attributes": attributes(record.get("attributes", [])),
    }


def log_records(path: Path) -> List[LogRecord]:
    """Every log record in a file of OTLP JSON log requests."""
    return [
        LogRecord(
            **_shared(resource, scope, r),
            event_name=r.get("eventName", ""),
            body=_any_value(r.get("body", {})),
            severity_text=r.get("severityText", ""),
            severity_number=int(r.get("severityNumber", 0)),
            time_unix_nano=int(r.get("timeUnixNano", 0)),
        )
        for resource, scope, r in _records(path, "resourceLogs", "scopeLogs", "logRecords")
    ]


def spans(path: Path) -> List[Span]:
    """Every span in a file of OTLP JSON trace requests."""
    return [
        Span(
            **_shared(resource, scope, s),
            name=s.get("name", ""),
            parent_span_id=s.get("parentSpanId", ""),
            kind=int(s.get("kind", 0)),
            status_code=int(s.get("status", {}).get("code", 0)),
        )
        for resource, scope, s in _records(path, "resourceSpans", "scopeSpans", "spans")
    ]


@dataclass
class Received:
    """Everything a :class:`Collector` received so far, decoded."""

    metrics: List[MetricPoint]
    logs: List[LogRecord]
    spans: List[Span]

    def points(self, name: str, **attrs: Any) -> List[MetricPoint]:
        """The data points of metric ``name`` whose attributes include ``attrs``."""
        return [p for p in self.metrics if p.name == name and all(p.attributes.get(k) == v for k, v in attrs.items())]

    def latest(self, name: str, **attrs: Any) -> Optional[MetricPoint]:
        """The newest data point of ``name`` with ``attrs`` (cumulative sums: the current total)."""
        points = self.points(name, **attrs)
        return max(points, key=lambda p: p.time_unix_nano) if points else None

    def events(self, event_name: str) -> List[LogRecord]:
        """The log records with this event name."""
        return [r for r in self.logs if r.event_name == event_name]


_COLLECTOR_CONFIG = """\
# Written by python/tests/peers.py: OTLP in, every request out as a JSON line.
extensions:
  health_check:
    endpoint: 127.0.0.1:{health}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{grpc}
      http:
        endpoint: 127.0.0.1:{http}
exporters:
  file/metrics:
    path: {dir}/metrics.jsonl
    flush_interval: 100ms
  file/logs:
    path: {dir}/logs.jsonl
    flush_interval: 100ms
  file/traces:
    path: {dir}/traces.jsonl
    flush_interval: 100ms
service:
  extensions: [health_check]
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [file/metrics]
    logs:
      receivers: [otlp]
      exporters: [file/logs]
    traces:
      receivers: [otlp]
      exporters: [file/traces]
  telemetry:
    metrics:
      level: none
"""


class Collector:
    """A real OpenTelemetry Collector with an OTLP gRPC + HTTP receiver and file exporters."""

    def __init__(self, binary: str, workdir: Path):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.grpc_port, self.http_port, self.health_port = free_port(), free_port(), free_port()
        self.config_path = self.dir / "otelcol.yaml"
        self.config_path.write_text(
            _COLLECTOR_CONFIG.format(health=self.health_port, grpc=self.grpc_port, http=self.http_port, dir=self.dir)
        )
        self.process = PeerProcess("otelcol", [binary, "--config", str(self.config_path)], self.dir)
        health = f"http://127.0.0.1:{self.health_port}/"
        self.process.wait_ready("the collector", "healthy", health, self._describe)

    def _describe(self) -> str:
        return f"collector output (last 40 lines):\n{self.process.output(40)}"

    @property
    def otlp_grpc_endpoint(self) -> str:
        """``http://127.0.0.1:<port>`` of the OTLP gRPC receiver."""
        return f"http://127.0.0.1:{self.grpc_port}"

    @property
    def otlp_http_endpoint(self) -> str:
        """``http://127.0.0.1:<port>`` of the OTLP HTTP receiver (``/v1/metrics`` etc. appended by clients)."""
        return f"http://127.0.0.1:{self.http_port}"

    def env(self, protocol: str = "grpc") -> Dict[str, str]:
        """``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``_PROTOCOL`` for a program to push here
        (``protocol``: ``grpc`` or ``http/protobuf``)."""
        endpoint = self.otlp_grpc_endpoint if protocol == "grpc" else self.otlp_http_endpoint
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": protocol}

    def received(self) -> Received:
        """Everything received so far."""
        return Received(
            metrics=metric_points(self.dir / "metrics.jsonl"),
            logs=log_records(self.dir / "logs.jsonl"),
            spans=spans(self.dir / "traces.jsonl"),
        )

    def wait_for(self, predicate: Callable[[Received], Any], timeout: float = 30.0) -> Received:
        """Waits until ``predicate(received)`` is truthy; returns what was received then.

        Raises ``AssertionError`` after ``timeout`` seconds with a summary of what did arrive and
        the collector's output.
        """

        def check() -> Optional[Received]:
            r = self.received()
            return r if predicate(r) else None

        def describe() -> str:
            r = self.received()
            names = sorted({p.name for p in r.metrics})
            events = sorted({x.event_name for x in r.logs})
            return (
                f"received {len(r.metrics)} metric points ({names}), {len(r.logs)} log records (events {events}), "
                f"{len(r.spans)} spans\n{self._describe()}"
            )

        return wait_until("the collector to receive what the test expects", check, timeout, describe)

    def output(self) -> str:
        """Everything the collector printed."""
        return self.process.output()

    def stop(self) -> None:
        """Stops the collector."""
        self.process.stop()


# --- the Prometheus text format, as a pull endpoint serves it ------------------------------------


def exposition_samples(text: str, sample: "re.Pattern[str]") -> Iterator["re.Match[str]"]:
    """The match of ``sample`` (groups: name, labels, value) on each sample line of exposition
    ``text``; comments and blank lines are skipped, and a line it does not match fails the test."""
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = sample.match(line)
        assert m, f"not an exposition line: {line!r}"
        yield m


def sample_value(page: str, name: str, **labels: Any) -> float:
    """The value of the first sample of ``name`` on an exposition ``page`` with (at least) these
    labels; fails the test, showing the page, when there is none."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    for line in page.splitlines():
        if line.startswith(name + "{") and all(w in line for w in want):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} {labels} in the page:\n{page}")


class Sample(NamedTuple):
    """One series of a PromQL instant vector."""

    labels: Dict[str, str]
    value: float


class Prometheus:
    """A real Prometheus with its own storage, scraping every second; targets added by :meth:`scrape`."""

    def __init__(self, binary: str, workdir: Path):
        self.dir = workdir
        (self.dir / "data").mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_path = self.dir / "prometheus.yml"
        self._jobs: Dict[str, List[str]] = {}
        self._paths: Dict[str, str] = {}
        self._write_config()
        self.process = PeerProcess(
            "prometheus",
            [
                binary,
                f"--config.file={self.config_path}",
                f"--storage.tsdb.path={self.dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--web.enable-lifecycle",
                "--log.level=warn",
            ],
            self.dir,
        )
        self.process.wait_ready("Prometheus", "ready", f"{self.url}/-/ready", self._describe)

    def _write_config(self) -> None:
        lines = [
            "global:",
            "  scrape_interval: 1s",
            "  scrape_timeout: 1s",
            "  evaluation_interval: 1s",
            "scrape_configs:" + ("" if self._jobs else " []"),
        ]
        for job, targets in self._jobs.items():
            lines += [
                f"  - job_name: {json.dumps(job)}",
                f"    metrics_path: {json.dumps(self._paths[job])}",
                "    static_configs:",
                f"      - targets: {json.dumps(targets)}",
            ]
        self.config_path.write_text("\n".join(lines) + "\n")

    def _describe(self) -> str:
        try:
            targets = json.dumps(self.targets())
        except (OSError, ValueError) as e:
            targets = f"(targets unavailable: {e})"
        return f"targets: {targets}\nprometheus output (last 40 lines):\n{self.process.output(40)}"

    def scrape(self, target: str, path: str = "/metrics", job: str = "pipetel") -> None:
        """Scrapes ``target`` (``host:port``) at ``path`` every second under ``job`` (default ``pipetel``).

        Rewrites the config, reloads Prometheus and returns once the target is active (its first
        scrape may still fail while the program is starting: see :meth:`wait_until_up`).
        """
        self._jobs.setdefault(job, [])
        if target not in self._jobs[job]:
            self._jobs[job].append(target)
        self._paths[job] = path
        self._write_config()
        status, body = http("POST", f"{self.url}/-/reload")
        if status != 200:
            raise AssertionError(f"Prometheus refused the reload ({status}): {body}\n{self._describe()}")

        def active() -> bool:
            t = self.targets()
            return any(
                a.get("scrapePool") == job and a.get("labels", {}).get("instance") == target
                for a in t.get("activeTargets", [])
            )

        wait_until(f"Prometheus to pick up the target {target}", active, 15.0, self._describe)

    def targets(self) -> Dict[str, Any]:
        """``/api/v1/targets``' ``data``."""
        status, body = http("GET", f"{self.url}/api/v1/targets")
        return json.loads(body).get("data", {})

    def wait_until_up(self, timeout: float = 20.0) -> List[Dict[str, Any]]:
        """Waits until every active target was scraped with ``health == "up"``; returns the targets."""

        def up() -> Optional[List[Dict[str, Any]]]:
            active = self.targets().get("activeTargets", [])
            return active if active and all(a.get("health") == "up" for a in active) else None

        return wait_until("every target up", up, timeout, self._describe)

    def query_raw(self, promql: str) -> List[Dict[str, Any]]:
        """An instant query's raw ``result`` list; raises ``AssertionError`` with Prometheus' error."""
        url = f"{self.url}/api/v1/query?query={urllib.parse.quote(promql, safe='')}"
        status, body = http("GET", url)
        try:
            v = json.loads(body)
        except ValueError:
            raise AssertionError(f"query {promql!r}: HTTP {status}: {body}") from None
        if status != 200 or v.get("status") != "success":
            raise AssertionError(f"query {promql!r} failed (HTTP {status}): {v.get('error', body)}")
        return v["data"]["result"]

    def query(self, promql: str) -> List[Sample]:
        """Runs an instant query; returns the result vector as :class:`Sample` ``(labels, value)``."""
        out = []
        for s in self.query_raw(promql):
            value = s.get("value", [0, "NaN"])[1]
            out.append(Sample(dict(s.get("metric", {})), float(value)))
        return out

    def wait_for_series(self, promql: str, timeout: float = 30.0) -> List[Sample]:
        """Waits until ``promql`` returns at least one series; returns the result vector."""

        def check() -> Optional[List[Sample]]:
            try:
                r = self.query(promql)
            except (OSError, AssertionError):
                return None
            return r or None

        return wait_until(f"a series for {promql!r}", check, timeout, self._describe)

    def wait_for_value(self, promql: str, value: float, timeout: float = 30.0) -> List[Sample]:
        """Waits until ``promql`` returns series that all equal ``value``; returns them."""
        last: List[Any] = []

        def check() -> Optional[List[Sample]]:
            try:
                r = self.query(promql)
            except (OSError, AssertionError):
                return None
            last[:] = r
            return r if r and all(s.value == value for s in r) else None

        return wait_until(f"{promql!r} == {value}", check, timeout, lambda: f"last result: {last}\n{self._describe()}")

    def output(self) -> str:
        """Everything Prometheus printed."""
        return self.process.output()

    def stop(self) -> None:
        """Stops Prometheus."""
        self.process.stop()


class VictoriaLogs:
    """A real VictoriaLogs (single node, storage in ``workdir``): the fleet's rows store."""

    def __init__(self, binary: str, workdir: Path):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        argv = [binary, f"-httpListenAddr=127.0.0.1:{port}", f"-storageDataPath={self.dir / 'data'}", "-loggerLevel=WARN"]
        self.process = PeerProcess("victoria-logs", argv, self.dir)
        self.process.wait_ready("VictoriaLogs", "ready", f"{self.url}/health", lambda: self.process.output(40))

    def stop(self) -> None:
        """Stops VictoriaLogs."""
        self.process.stop()


class StoresGateway:
    """A real collector running ``otel-collector/gateway-stores.yaml`` as shipped, its rows going
    to ``logs_url`` (VictoriaLogs); metrics and traces go to ports nothing listens on (they wait
    in the gateway's queues), its queues on disk in ``workdir``."""

    def __init__(self, binary: str, workdir: Path, logs_url: str):
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.grpc_port, health = free_port(), free_port()
        env = {
            "OTELCOL_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{self.grpc_port}",
            "OTELCOL_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{free_port()}",
            "OTELCOL_HEALTH_CHECK_ENDPOINT": f"127.0.0.1:{health}",
            # Its own metrics listen on port 8888 of a loopback address of its own.
            "OTELCOL_TELEMETRY_HOST": f"127.0.{os.getpid() % 250 + 1}.{self.grpc_port % 250 + 2}",
            "OTELCOL_FILE_STORAGE_DIR": str(self.dir / "queues"),
            "OTELCOL_VICTORIA_LOGS_URL": logs_url,
            "OTELCOL_VICTORIA_METRICS_URL": f"http://127.0.0.1:{free_port()}",
            "OTELCOL_JAEGER_ENDPOINT": f"127.0.0.1:{free_port()}",
            "HOSTNAME": "gateway-1",
        }
        config = REPO / "otel-collector" / "gateway-stores.yaml"
        argv = [binary, "--config", str(config)]
        self.process = PeerProcess("gateway-stores", argv, self.dir, env)
        self.process.wait_ready("the gateway", "healthy", f"http://127.0.0.1:{health}/", lambda: self.process.output(40))

    def env(self) -> Dict[str, str]:
        """``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``_PROTOCOL`` for a program to push here (gRPC)."""
        return {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{self.grpc_port}", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}

    def stop(self) -> None:
        """Stops the gateway."""
        self.process.stop()


def start_victoria_logs(workdir: Optional[Path] = None) -> VictoriaLogs:
    """Starts VictoriaLogs (``PIPETEL_VICTORIA_LOGS_BIN``); raises :class:`PeerMissing` without it."""
    binary = peer_binary("PIPETEL_VICTORIA_LOGS_BIN", None)
    return VictoriaLogs(binary, workdir or Path(tempfile.mkdtemp(prefix="pipetel-vl-")))


def start_collector(workdir: Optional[Path] = None) -> Collector:
    """Starts a collector (binary from ``PIPETEL_OTELCOL_BIN``); raises :class:`PeerMissing` without one."""
    binary = peer_binary("PIPETEL_OTELCOL_BIN", None)
    return Collector(binary, workdir or Path(tempfile.mkdtemp(prefix="pipetel-otelcol-")))


def start_prometheus(workdir: Optional[Path] = None) -> Prometheus:
    """Starts Prometheus (``PIPETEL_PROMETHEUS_BIN`` or ``prometheus`` on ``PATH``)."""
    binary = peer_binary("PIPETEL_PROMETHEUS_BIN", "prometheus")
    return Prometheus(binary, workdir or Path(tempfile.mkdtemp(prefix="pipetel-prom-")))


def both_ways_env(collector: Collector, prometheus: Prometheus) -> Dict[str, str]:
    """The variables of a program whose metrics go both ways: pulled by ``prometheus`` (from a
    free loopback port, which it now scrapes) and pushed to ``collector`` over OTLP gRPC every
    0.5 s."""
    port = free_port()
    prometheus.scrape(f"127.0.0.1:{port}")
    return {
        **collector.env("grpc"),
        "OTEL_METRICS_EXPORTER": "prometheus,otlp",
        "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
        "OTEL_EXPORTER_PROMETHEUS_PORT": str(port),
        "OTEL_METRIC_EXPORT_INTERVAL": "500",
    }


def example_path(path: "str | os.PathLike[str]") -> Path:
    """An example's path: absolute as given, else relative to ``python/examples/``."""
    p = Path(path)
    if p.is_absolute():
        return p
    if not p.suffix:
        p = p.with_suffix(".py")
    return EXAMPLES / p


def run_example(
    path: "str | os.PathLike[str]",
    env: Optional[Mapping[str, str]] = None,
    *,
    args: Sequence[str] = (),
    timeout: float = 120.0,
    check: bool = True,
) -> "subprocess.CompletedProcess[str]":
    """Runs a Python program (``python/examples/<path>``) with ``sys.executable`` and returns it.

    ``env`` is laid over this process's environment. With ``check`` (the default) a non-zero
    exit raises ``AssertionError`` showing the program's output; stdout and stderr are captured
    as text either way.
    """
    script = example_path(path)
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    try:
        done = subprocess.run(
            [sys.executable, str(script), *args],
            env=full_env,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise AssertionError(f"{script.name} did not finish within {timeout:g} s\nstdout:\n{out}\nstderr:\n{err}") from None
    if check and done.returncode != 0:
        raise AssertionError(
            f"{script.name} exited with {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
        )
    return done


def spawn_example(
    path: "str | os.PathLike[str]", env: Optional[Mapping[str, str]] = None, *, args: Sequence[str] = ()
) -> "subprocess.Popen[str]":
    """Starts ``python/examples/<path>`` with ``sys.executable`` and returns it running, with
    text pipes on stdin, stdout and stderr: for a program that keeps exporting while the test
    asks the peers (close its stdin or terminate it when done; :func:`read_until` reads its
    output up to a marker line)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    return subprocess.Popen(
        [sys.executable, str(example_path(path)), *args],
        env=full_env,
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_until(proc: "subprocess.Popen[str]", marker: str, timeout: float = 60.0) -> List[str]:
    """The stdout lines of ``proc`` up to the line ``marker`` (excluded).

    Raises ``AssertionError`` with the program's output if it exits first or ``timeout`` passes.
    """
    lines: List[str] = []
    found = threading.Event()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.rstrip("\n") == marker:
                found.set()
                return
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + timeout
    while not found.is_set() and reader.is_alive() and time.monotonic() < deadline:
        found.wait(0.1)
    if not found.is_set():
        proc.kill()
        proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        out = "\n".join(lines)
        raise AssertionError(
            f"the program did not print {marker!r} (exit {proc.returncode}, {timeout:g} s at most)\n"
            f"stdout:\n{out}\nstderr:\n{err}"
        )
    return lines
