"""One Prometheus endpoint for a server of several worker processes: gunicorn (sync or uvicorn
workers), ``uvicorn --workers N``, ``multiprocessing`` or ``torchrun`` workers.

Each worker calls :func:`init` instead of :func:`pipetel.init`, with a directory that all workers
of the server share (``directory=`` or ``PIPETEL_MULTIPROCESS_DIR``), empty when the server
starts::

    # gunicorn.conf.py (sync or uvicorn workers)
    def post_worker_init(worker):
        import pipetel.multiprocess
        pipetel.multiprocess.init("api", directory="/run/api-metrics")

    # an app for `uvicorn --workers N`, or a multiprocessing / torchrun worker: at start-up
    pipetel.multiprocess.init("api", directory="/run/api-metrics")

How it works (the design, and why):

- Every worker starts pipetel as usual, but with its own pull endpoint on an ephemeral loopback
  port, so no two workers ever contend for a port. Every ``interval`` seconds (default 1), and
  once more when it exits normally, it writes its whole page as **cumulative** recorder
  snapshots — a :class:`pipetel.Envelope` (source ``<host>-<pid>-<start>``, a growing
  sequence) — to ``<directory>/<source>.envelope``, replacing the previous one atomically.
- One worker serves the shared port (``prometheus_port``, default 9464): the first that binds
  it. The others try again every ``interval``, so when that worker exits (a gunicorn
  ``max_requests`` restart, a crash) another takes over within ``interval``. A scrape of the
  shared port refreshes the serving worker's own file, reads every file in the directory and
  serves their sum: one page, every worker's series, each counted once.
- Files, not the serving process, hold the state: a restarted worker is a new source, and the
  file of the worker it replaced stays, so **no counter in the merged view ever goes back**,
  whichever worker serves. This is the rule of prometheus_client's multiprocess mode, with the
  recorders' envelope as the file format.

Why files and not a socket to one hub process: a server's workers come and go, any of them may
be the one that dies, and the merged counters must survive that; a directory survives every
worker, needs no process of its own (uvicorn's supervisor runs no user code) and is what
prometheus_client users already manage.

Merge rules (per series: the same name and the same labels):

- counters, histogram buckets / ``_sum`` / ``_count``, summary ``_sum`` / ``_count``: the sum
  over every file, live or dead workers alike (prometheus_client's counter rule);
- gauges: the sum over **live** workers (a process on this host whose pid still runs):
  prometheus_client's ``livesum``. A dead worker's gauges disappear at the next scrape;
- summary quantiles cannot be summed and are left out of the merged page.

What a dead worker leaves: its file, with its series as of its last write. After a normal exit
(gunicorn and uvicorn stop workers with a signal they handle, ``sys.exit``) that is everything it
recorded; after ``SIGKILL`` or a crash, what it recorded in its last ``interval`` is lost (a
``prometheus_client`` worker loses nothing there, as it writes to ``mmap`` on every call; here the
hot path stays an atomic add). Remove the directory's files when the whole server starts again,
as with prometheus_client; files of other hosts (a shared directory) count as dead for gauges.

Traces, rows and logs go out from each worker through its own exporters. With an OTLP metric
exporter each worker also pushes its own series, as its own resource (``service.instance.id``,
``process.pid``): sum them by the metric's labels in the backend.
"""

import atexit
import http.server
import os
import re
import socket
import threading
import time
import urllib.request
from typing import Any, Dict, List, Optional, Tuple

from ._pipetel import Counter, Envelope, Family, Gauge, Guard, init as _init

__all__ = ["init", "merged_page", "page_snapshots", "read_page", "serving", "write_snapshot"]

DIRECTORY_ENV = "PIPETEL_MULTIPROCESS_DIR"
_SUFFIX = ".envelope"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s+(\S+)(?:\s+\S+)?$")
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')

# ----- the page as recorder snapshots -----


def _parse_labels(block: Optional[str]) -> Dict[str, str]:
    if not block:
        return {}
    inner = block[1:-1]
    labels, pos = {}, 0
    while pos < len(inner):
        m = _LABEL.match(inner, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"cannot read the labels {block!r}")
        labels[m.group(1)] = m.group(2)  # kept escaped: written back as read
        pos = m.end()
    return labels


def read_page(text: str) -> List[Tuple[str, str, str, str, Dict[str, str], float]]:
    """The samples of a text exposition (0.0.4) as ``(sample name, family name, type, help,
    labels, value)``; label values and help stay escaped as in the text."""
    types: Dict[str, str] = {}
    helps: Dict[str, str] = {}
    out = []
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, declared = line.split(" ", 3)
            types[name] = declared.strip()
            continue
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            helps[parts[2]] = parts[3] if len(parts) > 3 else ""
            continue
        if not line.strip() or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if m is None:
            continue
        sample, block, value = m.groups()
        family, kind = sample, types.get(sample)
        if kind is None:
            for suffix in ("_total", "_bucket", "_sum", "_count", "_created"):
                if sample.endswith(suffix) and sample[: -len(suffix)] in types:
                    family = sample[: -len(suffix)]
                    kind = types[family]
                    break
        out.append((sample, family, kind or "untyped", helps.get(family, ""), _parse_labels(block), float(value)))
    return out


def _is_cumulative(sample: str, family: str, kind: str, labels: Dict[str, str]) -> Optional[bool]:
    """True: summed over every worker; False: a gauge (summed over live workers); None: left out."""
    if sample.endswith("_created"):
        return None
    if kind == "counter" or kind == "histogram":
        return True
    if kind == "summary":
        return None if "quantile" in labels else True
    return False


def page_snapshots(text: str) -> list:
    """A page as recorder snapshots: one family per sample name (a counter for cumulative
    samples, a gauge otherwise), its labels the union of the sample's label names, an absent
    label written as the empty string; the unit field carries ``<type>:<family name>``. Made
    with fresh recorders on the calling thread."""
    groups: Dict[str, Tuple[str, str, str, bool, List[Tuple[Dict[str, str], float]]]] = {}
    for sample, family, kind, help_, labels, value in read_page(text):
        cumulative = _is_cumulative(sample, family, kind, labels)
        if cumulative is None:
            continue
        g = groups.setdefault(sample, (family, kind, help_, cumulative, []))
        g[4].append((labels, value))
    snapshots = []
    for sample, (family, kind, help_, cumulative, points) in sorted(groups.items()):
        names = sorted({k for labels, _ in points for k in labels})
        make = Family.counter if cumulative else Family.gauge
        fam = make(sample, help_.replace("\t", " "), f"{kind}:{family}", names)
        recorder = Counter(fam) if cumulative else Gauge(fam)
        for labels, value in points:
            values = [labels.get(n, "") for n in names]
            if isinstance(recorder, Counter):
                recorder.inc(values, max(value, 0.0))
            else:
                recorder.set(values, value)
        snapshots.append(recorder.snapshot())
    return snapshots


# ----- the merged page -----


def _alive(source: str) -> bool:
    host, _, rest = source.rpartition("-")[0].rpartition("-")
    pid = rest
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def _sort_key(item: Tuple[Tuple[Tuple[str, str], ...], float]) -> tuple:
    labels = dict(item[0])
    le = labels.get("le")
    bound = float("inf") if le in ("+Inf", None) else float(le)
    return (tuple((k, v) for k, v in item[0] if k != "le"), bound)


def merged_page(directory: str) -> str:
    """The sum of every worker file in ``directory`` as a text exposition (0.0.4), with the
    merge rules of the module documentation."""
    # family -> (type, help); sample -> labels -> value
    families: Dict[str, Tuple[str, str]] = {}
    samples: Dict[str, Dict[str, Dict[Tuple[Tuple[str, str], ...], float]]] = {}
    for entry in sorted(os.listdir(directory)):
        if not entry.endswith(_SUFFIX):
            continue
        try:
            with open(os.path.join(directory, entry), "rb") as f:
                envelope = Envelope.decode(f.read())
        except Exception:  # a file being replaced or not ours: the next scrape reads it
            continue
        alive = _alive(envelope.source)
        for snap in envelope.snapshots:
            fam = snap.family
            kind, _, family = fam.unit.partition(":")
            cumulative = fam.kind == "counter"
            if not cumulative and not alive:
                continue
            families.setdefault(family, (kind, fam.help))
            into = samples.setdefault(family, {}).setdefault(snap.name, {})
            names = fam.label_names
            for values, value in zip(snap.label_values, snap.values):
                key = tuple((n, v) for n, v in zip(names, values) if v != "")
                into[key] = into.get(key, 0.0) + value
    lines: List[str] = []
    for family in sorted(families):
        kind, help_ = families[family]
        if help_:
            lines.append(f"# HELP {family} {help_}")
        lines.append(f"# TYPE {family} {kind}")
        for sample in sorted(samples[family], key=lambda s: (s.endswith("_count"), s.endswith("_sum"), s)):
            for key, value in sorted(samples[family][sample].items(), key=_sort_key):
                block = ",".join(f'{k}="{v}"' for k, v in key)
                lines.append(f"{sample}{{{block}}} {_number(value)}" if block else f"{sample} {_number(value)}")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    if value == float("-inf"):
        return "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


# ----- a worker -----


class _Worker:
    def __init__(self, guard: Guard, directory: str, host: str, port: int, interval: float):
        self.guard = guard
        self.directory = directory
        self.host, self.port, self.interval = host, port, interval
        self.source = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}"
        self.path = os.path.join(directory, self.source + _SUFFIX)
        self.sequence = 0
        self.lock = threading.Lock()
        self.server: Optional[http.server.ThreadingHTTPServer] = None
        self.stopped = threading.Event()

    def write(self) -> None:
        """Writes this worker's page as an envelope file (atomically replaced)."""
        addr = self.guard.prometheus_addr
        if addr is None:
            return
        with urllib.request.urlopen(f"http://{addr}/metrics", timeout=10) as r:
            text = r.read().decode()
        snapshots = page_snapshots(text)
        with self.lock:
            self.sequence += 1
            data = Envelope(self.source, self.sequence, snapshots).encode()
            tmp = f"{self.path}.{threading.get_ident()}.tmp"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, self.path)

    def try_serve(self) -> None:
        if self.server is not None:
            return
        worker = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                try:
                    worker.write()
                    body = merged_page(worker.directory).encode()
                except Exception as e:  # answer the scrape with the reason
                    self.send_error(500, explain=str(e))
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            # SO_REUSEADDR: a port whose last server left connections in TIME_WAIT can be taken
            # over at once; it never lets two sockets listen on one port (that is SO_REUSEPORT).
            allow_reuse_address = True

        try:
            self.server = Server((self.host, self.port), Handler)
        except OSError:
            return
        threading.Thread(target=self.server.serve_forever, name="pipetel-multiprocess-serve", daemon=True).start()

    def run(self) -> None:
        while not self.stopped.wait(self.interval):
            try:
                self.write()
            except Exception:
                pass
            self.try_serve()

    def stop(self) -> None:
        self.stopped.set()
        try:
            self.write()
        except Exception:
            pass
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


_WORKER: Dict[str, _Worker] = {}


def init(
    service_name: Optional[str] = None,
    *,
    directory: Optional[str] = None,
    interval: float = 1.0,
    config_file: Optional[str] = None,
    **settings: Any,
) -> Guard:
    """:func:`pipetel.init` for one worker of a multi-worker server (see the module
    documentation): ``directory`` (or ``PIPETEL_MULTIPROCESS_DIR``) is shared by all workers;
    the shared port and host are ``prometheus_port`` / ``prometheus_host`` (keywords, or
    ``OTEL_EXPORTER_PROMETHEUS_PORT`` / ``_HOST``; default ``localhost:9464``); ``interval``:
    seconds between a worker's writes and its attempts to serve. Returns the guard."""
    directory = directory or os.environ.get(DIRECTORY_ENV)
    if not directory:
        raise ValueError(f"directory: pass the directory all workers share, or set {DIRECTORY_ENV}")
    if not (isinstance(interval, (int, float)) and interval > 0):
        raise ValueError(f"interval: expected a positive number of seconds, got {interval!r}")
    os.makedirs(directory, exist_ok=True)
    port = int(settings.pop("prometheus_port", os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", 9464)))
    host = str(settings.pop("prometheus_host", os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "localhost")))
    guard = _init(service_name, config_file=config_file, prometheus_port=0, prometheus_host="127.0.0.1", **settings)
    if guard.prometheus_addr is None:
        return guard  # no pull endpoint configured (push exporters only): nothing to merge
    worker = _Worker(guard, directory, host, port, float(interval))
    _WORKER["worker"] = worker
    try:
        worker.write()
    except Exception:
        pass
    worker.try_serve()
    threading.Thread(target=worker.run, name="pipetel-multiprocess", daemon=True).start()
    # Before the guard's own exit handler (atexit runs last-registered first): the final file
    # is written while the endpoint still answers.
    atexit.register(worker.stop)
    return guard


def write_snapshot() -> None:
    """Writes this worker's file now (also done every ``interval`` and at exit): call it before
    a planned ``os._exit`` to lose nothing."""
    worker = _WORKER.get("worker")
    if worker is not None:
        worker.write()


def serving() -> bool:
    """Whether this worker serves the shared port now."""
    worker = _WORKER.get("worker")
    return worker is not None and worker.server is not None

