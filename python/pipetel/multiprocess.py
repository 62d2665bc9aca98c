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
import logging
import os
import re
import secrets
import socket
import ssl
import stat
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from ._pipetel import Counter, Envelope, Family, Gauge, Guard, _pull_endpoint_settings, prometheus_text
from ._pipetel import init as _init

__all__ = ["init", "merged_page", "open_directory", "page_snapshots", "read_page", "serving", "write_snapshot"]

DIRECTORY_ENV = "PIPETEL_MULTIPROCESS_DIR"
_SUFFIX = ".envelope"
#: A worker file larger than this is not read (skipped, and logged once): no worker's page is
#: anywhere near it, and a scrape must not read a planted giant.
MAX_FILE_BYTES = 64 << 20
#: Seconds the shared port waits on a silent client before closing its connection.
SOCKET_TIMEOUT = 5.0
_log = logging.getLogger("pipetel.multiprocess")
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_KINDS = ("counter", "gauge", "histogram", "summary", "untyped")
_UNESCAPE = re.compile(r"\\(.)")
_warned: Set[str] = set()
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
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def _unescape(value: str) -> str:
    """A label value or help text of the text format as the string it stands for."""
    if "\\" not in value:
        return value
    return _UNESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _escape_label(value: str) -> str:
    """A label value as the text format writes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(value: str) -> str:
    """Help text as the text format writes it: backslash and newline escaped."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def read_page(text: str) -> List[Tuple[str, str, str, str, Dict[str, str], float]]:
    """The samples of a text exposition (0.0.4) as ``(sample name, family name, type, help,
    labels, value)``; label values and help unescaped (the strings they stand for)."""
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
            helps[parts[2]] = _unescape(parts[3]) if len(parts) > 3 else ""
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
        fam = make(sample, help_.replace("\t", " ").replace("\n", " "), f"{kind}:{family}", names)
        recorder = Counter(fam) if cumulative else Gauge(fam)
        for labels, value in points:
            values = [labels.get(n, "") for n in names]
            if isinstance(recorder, Counter):
                recorder.inc(values, max(value, 0.0))
            else:
                recorder.set(values, value)
        snapshots.append(recorder.snapshot())
    return snapshots


# ----- the directory -----


def _refuse(directory: str, why: str) -> PermissionError:
    return PermissionError(f"{directory}: {why}")


def open_directory(directory: str, create: bool = False) -> int:
    """The multiprocess directory, checked and opened (a descriptor the caller closes): created
    0700 (with its missing parents) when ``create``; refused when it is a symbolic link, belongs
    to another user, or is writable by group or other users (any of them could plant or replace
    files the merged page is made of), with a :class:`PermissionError` naming the directory and
    the rule. The rules of pipetel's rows store."""
    if create:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    if os.path.islink(directory):
        raise _refuse(directory, "the multiprocess directory is a symbolic link; refusing it (name the directory itself)")
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(directory, flags)
    except OSError as e:
        raise OSError(e.errno, f"{directory}: cannot open the multiprocess directory: {e.strerror}") from e
    try:
        st = os.fstat(fd)
        me = os.geteuid()
        if st.st_uid != me:
            raise _refuse(
                directory,
                f"the multiprocess directory belongs to uid {st.st_uid}, not to this user (uid {me}); refusing it",
            )
        if st.st_mode & 0o022:
            raise _refuse(
                directory,
                f"the multiprocess directory is writable by group or other users (mode {stat.S_IMODE(st.st_mode):o});"
                " refusing it (chmod go-w, or pick a private directory)",
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        _log.warning("%s", message)


def _read_file(dir_fd: int, directory: str, name: str) -> Optional[bytes]:
    """The bytes of a worker file, or ``None`` (logged once) when it is not a regular file of
    this user, is larger than :data:`MAX_FILE_BYTES`, or vanished. Never follows a link and never
    blocks on a FIFO."""
    path = os.path.join(directory, name)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # replaced between the listing and the open
    except OSError as e:
        _warn_once(f"open:{path}", f"{path}: not read ({e.strerror}; a worker file is never a symbolic link)")
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            _warn_once(f"type:{path}", f"{path}: not read (not a regular file)")
            return None
        if st.st_uid != os.geteuid():
            _warn_once(f"uid:{path}", f"{path}: not read (belongs to uid {st.st_uid}, not to this user)")
            return None
        if st.st_size > MAX_FILE_BYTES:
            _warn_once(f"size:{path}", f"{path}: not read ({st.st_size} bytes, more than {MAX_FILE_BYTES})")
            return None
        chunks = []
        left = MAX_FILE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        if left <= 0:  # grew past the cap while read
            _warn_once(f"size:{path}", f"{path}: not read (more than {MAX_FILE_BYTES} bytes)")
            return None
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _write_file(dir_fd: int, name: str, data: bytes) -> None:
    """Writes ``data`` to the entry ``name`` atomically: a new 0600 file with a random name,
    created exclusively without following links, then renamed over ``name``."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, flags, 0o600, dir_fd=dir_fd)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    except BaseException:
        os.close(fd)
        os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.close(fd)
    try:
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        os.unlink(tmp, dir_fd=dir_fd)
        raise


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
    try:
        bound = float(labels.get("le", "+Inf"))
    except ValueError:  # not a number: after the numbers
        bound = float("inf")
    return (tuple((k, v) for k, v in item[0] if k != "le"), bound)


def merged_page(directory: str) -> str:
    """The sum of every worker file in ``directory`` as a text exposition (0.0.4), with the
    merge rules of the module documentation. The directory must pass :func:`open_directory`'s
    rules; a file that is not a regular file of this user, or larger than
    :data:`MAX_FILE_BYTES`, is skipped (logged once); names that are not metric or label names
    are skipped, and label values and help are escaped, so no file can add lines to the page."""
    dir_fd = open_directory(directory)
    try:
        entries = sorted(os.listdir(dir_fd))
        # family -> (type, help); sample -> labels -> value
        families: Dict[str, Tuple[str, str]] = {}
        samples: Dict[str, Dict[str, Dict[Tuple[Tuple[str, str], ...], float]]] = {}
        for entry in entries:
            if not entry.endswith(_SUFFIX) or entry.startswith("."):
                continue
            data = _read_file(dir_fd, directory, entry)
            if data is None:
                continue
            try:
                envelope = Envelope.decode(data)
            except Exception:  # not ours, or cut short: the next scrape reads it again
                continue
            alive = _alive(envelope.source)
            for snap in envelope.snapshots:
                fam = snap.family
                kind, _, family = fam.unit.partition(":")
                names = list(fam.label_names)
                if (
                    kind not in _KINDS
                    or not _NAME.match(family)
                    or not _NAME.match(snap.name)
                    or not all(_LABEL_NAME.match(n) for n in names)
                ):
                    _warn_once(f"names:{entry}", f"{os.path.join(directory, entry)}: a series with invalid names skipped")
                    continue
                cumulative = fam.kind == "counter"
                if not cumulative and not alive:
                    continue
                families.setdefault(family, (kind, fam.help))
                into = samples.setdefault(family, {}).setdefault(snap.name, {})
                for values, value in zip(snap.label_values, snap.values):
                    key = tuple((n, v) for n, v in zip(names, values) if v != "")
                    into[key] = into.get(key, 0.0) + value
    finally:
        os.close(dir_fd)
    lines: List[str] = []
    for family in sorted(families):
        kind, help_ = families[family]
        if help_:
            lines.append(f"# HELP {family} {_escape_help(help_)}")
        lines.append(f"# TYPE {family} {kind}")
        for sample in sorted(samples[family], key=lambda s: (s.endswith("_count"), s.endswith("_sum"), s)):
            for key, value in sorted(samples[family][sample].items(), key=_sort_key):
                block = ",".join(f'{k}="{_escape_label(v)}"' for k, v in key)
                lines.append(f"{sample}{{{block}}} {_number(value)}" if block else f"{sample} {_number(value)}")
    return "\n".join(lines) + "\n"


def _number(value: float) -> str:
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "+Inf"
    if value == float("-inf"):
        return "-Inf"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


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

