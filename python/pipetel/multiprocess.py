"""One Prometheus endpoint for a server of several worker processes: gunicorn (sync or uvicorn
workers), ``uvicorn --workers N``, ``multiprocessing`` or ``torchrun`` workers.

Each worker calls :func:`init` instead of :func:`pipetel.init`, with a directory that all workers
of the server share (``directory=`` or ``PIPETEL_MULTIPROCESS_DIR``; private to the server's
user, see below), empty when the server starts::

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

The directory and the shared port trust no one else on the host (the rules of pipetel's rows
store):

- The directory is created 0700 (with its missing parents), and refused, by :func:`init` and at
  every scrape, with a :class:`PermissionError` naming it and the rule, when it is a symbolic
  link, belongs to another user, or is writable by group or other users: anyone who can write
  there could plant series on the merged page, or files that a scrape trips on.
- A worker's file is created 0600 under a random temporary name, exclusively and without
  following a symbolic link, then renamed into place (a planted link is replaced, never written
  through).
- A scrape opens each file without following links and without blocking (a FIFO is skipped), and
  skips what is not a regular file of this user or is larger than ``MAX_FILE_BYTES`` (64 MiB),
  logging each once. Metric and label names are checked, and label values and help are escaped
  on the merged page, so no file can add lines to it.

A worker's page is read back into snapshots, and the merged page written, by pipetel's Rust
exposition code (the pull endpoint's writer, its escaping and number rules), without the GIL;
this module keeps the directory (its rules and file I/O are in ``pipetel._mpdir``), which worker
is alive, and the shared port.
- The shared port closes a connection silent for ``SOCKET_TIMEOUT`` (5 s), and answers as the
  pull endpoint ``init`` configured would: its path, its bearer token or basic auth (a 401 with
  the challenge otherwise, compared in constant time) and its TLS certificate and key
  (``prometheus_bearer_token``, ``prometheus_tls_cert`` / ``prometheus_tls_key``, or their
  variables). A worker renders its own page in-process, so credentials never stop it.

Traces, rows and logs go out from each worker through its own exporters. With an OTLP metric
exporter each worker also pushes its own series, as its own resource (``service.instance.id``,
``process.pid``): sum them by the metric's labels in the backend.
"""

import atexit
import base64
import hmac
import http.server
import os
import socket
import ssl
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

# MAX_FILE_BYTES and open_directory stay names of this module (pipetel.multiprocess.MAX_FILE_BYTES).
from ._mpdir import MAX_FILE_BYTES, _read_file, _warn_once, _write_file, open_directory
from ._pipetel import Envelope, Guard, MetricSnapshot, _merged_page, _page_snapshots, _pull_endpoint_settings, _read_page
from ._pipetel import init as _init
from ._pipetel import prometheus_text

__all__ = ["init", "merged_page", "open_directory", "page_snapshots", "read_page", "serving", "write_snapshot"]

DIRECTORY_ENV = "PIPETEL_MULTIPROCESS_DIR"
_SUFFIX = ".envelope"
#: Seconds the shared port waits on a silent client before closing its connection.
SOCKET_TIMEOUT = 5.0

# ----- the page as recorder snapshots, and the merged page (the core's exposition code) -----


def read_page(text: str) -> List[Tuple[str, str, str, str, Dict[str, str], float]]:
    """The samples of a text exposition (0.0.4) as ``(sample name, family name, type, help,
    labels, value)``; label values and help unescaped (the strings they stand for). A
    :class:`ValueError` for a sample whose labels or value cannot be read. Read by the core's
    exposition code."""
    return _read_page(text)


def page_snapshots(text: str) -> List[MetricSnapshot]:
    """A page as recorder snapshots: one family per sample name (a counter for cumulative
    samples, a gauge otherwise), its labels the union of the sample's label names, an absent
    label written as the empty string; the unit field carries ``<type>:<family name>``. Summary
    quantiles and ``_created`` samples are left out, and so is a sample a recorder refuses (a
    name it cannot take, a negative or non-finite counter, a non-finite gauge). Made by the
    core's exposition code, without the GIL."""
    return _page_snapshots(text)


def _alive(source: str) -> bool:
    """Whether the worker of ``source`` (``<host>-<pid>-<start>``) runs: a process of this host
    whose pid still runs."""
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


def merged_page(directory: str) -> str:
    """The sum of every worker file in ``directory`` as a text exposition (0.0.4), with the
    merge rules of the module documentation. The directory must pass :func:`open_directory`'s
    rules; a file that is not a regular file of this user, or larger than
    :data:`MAX_FILE_BYTES`, is skipped (logged once), and so is one that is not an envelope (the
    next scrape reads it again). The files are merged and the page written by the core's
    exposition code (the pull endpoint's writer), without the GIL: names that are not metric or
    label names are skipped (logged once), and label values and help are escaped, so no file can
    add lines to the page."""
    dir_fd = open_directory(directory)
    try:
        entries: List[str] = []
        files: List[bytes] = []
        for entry in sorted(os.listdir(dir_fd)):
            if not entry.endswith(_SUFFIX) or entry.startswith("."):
                continue
            data = _read_file(dir_fd, directory, entry)
            if data is not None:
                entries.append(entry)
                files.append(data)
    finally:
        os.close(dir_fd)
    page, _undecodable, invalid = _merged_page(files, _alive)
    for i in invalid:
        path = os.path.join(directory, entries[i])
        _warn_once(f"names:{path}", f"{path}: a series with invalid names skipped")
    return page


# ----- a worker -----


class _Access:
    """How the shared port answers, as the pull endpoint :func:`pipetel.init` configured does:
    its path, the ``Authorization`` values it accepts (compared in constant time; a 401 with
    the challenge otherwise), and its TLS certificate and key."""

    def __init__(self, settings: Optional[Dict[str, Any]]) -> None:
        settings = settings or {}
        self.path: str = settings.get("path") or "/metrics"
        self.accepted: List[bytes] = []
        self.challenge: Optional[str] = None
        token = settings.get("bearer_token")
        if token:
            self.accepted.append(f"Bearer {token}".encode())
            self.challenge = 'Bearer realm="pipetel"'
        basic = settings.get("basic_auth")
        if basic:
            user, password = basic
            self.accepted.append(b"Basic " + base64.b64encode(f"{user}:{password}".encode()))
            self.challenge = 'Basic realm="pipetel"'
        self.tls: Optional[ssl.SSLContext] = None
        cert, key = settings.get("tls_cert"), settings.get("tls_key")
        if cert and key:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.minimum_version = ssl.TLSVersion.TLSv1_2
            context.load_cert_chain(cert, key)
            self.tls = context

    def allows(self, authorization: Optional[str]) -> bool:
        if not self.accepted:
            return True
        given = (authorization or "").encode("latin-1", errors="replace")
        ok = False
        for accepted in self.accepted:  # every value compared, without an early exit
            ok |= hmac.compare_digest(accepted, given)
        return ok


class _Worker:
    def __init__(self, guard: Guard, directory: str, dir_fd: int, host: str, port: int, interval: float):
        self.guard = guard
        self.directory = directory
        self.dir_fd = dir_fd
        self.host, self.port, self.interval = host, port, interval
        self.source = f"{socket.gethostname()}-{os.getpid()}-{time.time_ns()}"
        self.name = self.source + _SUFFIX
        self.sequence = 0
        self.lock = threading.Lock()
        self.server: Optional[http.server.ThreadingHTTPServer] = None
        self.stopped = threading.Event()
        self.access = _Access(_pull_endpoint_settings())

    def write(self) -> None:
        """Writes this worker's page as an envelope file (atomically replaced)."""
        if self.guard.prometheus_addr is None:
            return
        # Rendered in this process: the worker's own endpoint may ask for credentials or TLS.
        snapshots = page_snapshots(prometheus_text())
        with self.lock:
            self.sequence += 1
            data = Envelope(self.source, self.sequence, snapshots).encode()
            _write_file(self.dir_fd, self.name, data)

    def try_serve(self) -> None:
        if self.server is not None:
            return
        worker = self
        access = self.access

        class Handler(http.server.BaseHTTPRequestHandler):
            # A socket timeout: an idle or slow client is closed instead of holding its thread.
            timeout = SOCKET_TIMEOUT

            def _answer(self, head_only: bool) -> None:
                if self.path.split("?")[0] != access.path:
                    self.send_error(404)
                    return
                if not access.allows(self.headers.get("Authorization")):
                    self.send_response(401)
                    if access.challenge:
                        self.send_header("WWW-Authenticate", access.challenge)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
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
                if not head_only:
                    self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                self._answer(False)

            def do_HEAD(self) -> None:  # noqa: N802 - the http.server name
                self._answer(True)

            def log_message(self, *args: Any) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            # SO_REUSEADDR: a port whose last server left connections in TIME_WAIT can be taken
            # over at once; it never lets two sockets listen on one port (that is SO_REUSEPORT).
            allow_reuse_address = True

            def finish_request(self, request: Any, client_address: Any) -> None:
                # On the connection's own thread, so a slow TLS handshake holds only that thread.
                request.settimeout(SOCKET_TIMEOUT)
                if access.tls is not None:
                    request = access.tls.wrap_socket(request, server_side=True)
                    try:
                        Handler(request, client_address, self)
                    finally:
                        request.close()
                    return
                Handler(request, client_address, self)

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # a client that timed out, hung up or failed its handshake: nothing to say

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
    dir_fd = open_directory(directory, create=True)
    port = int(settings.pop("prometheus_port", os.environ.get("OTEL_EXPORTER_PROMETHEUS_PORT", 9464)))
    host = str(settings.pop("prometheus_host", os.environ.get("OTEL_EXPORTER_PROMETHEUS_HOST", "localhost")))
    try:
        guard = _init(service_name, config_file=config_file, prometheus_port=0, prometheus_host="127.0.0.1", **settings)
    except BaseException:
        os.close(dir_fd)
        raise
    if guard.prometheus_addr is None:
        os.close(dir_fd)
        return guard  # no pull endpoint configured (push exporters only): nothing to merge
    worker = _Worker(guard, directory, dir_fd, host, port, float(interval))
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

