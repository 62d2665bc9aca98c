"""Stages whose shards run in other processes: a Ray task, a ``multiprocessing`` ``spawn``
worker, another machine.

In the process that owns the stage::

    with pipetel.stage("tokenize", shards=16) as stage:
        handle = stage.remote()                 # picklable: send it to the workers
        pool.map(work, [(handle, i) for i in range(16)])

and wherever a shard runs::

    def work(args):
        handle, i = args
        with handle.shard(i) as shard:          # starts pipetel here from the owner's settings
            shard.record(items, nbytes)

What happens:

- The owner's stage row and stage metrics count the remote shards exactly (items, bytes,
  counters, succeeded / failed / retried). Each process that runs shards sends the owner a
  cumulative report of its shards (the Rust ``Stage::remote_report`` envelope) over one TCP
  connection: every ``report_interval`` seconds while a shard runs, and once when a shard ends,
  waiting until the owner has counted it. So when a worker's ``with handle.shard(i)`` block has
  returned, the owner's row includes that shard; end the stage after the workers returned.
  Reports are cumulative and numbered: a lost or repeated one never corrupts totals.
- The worker rows (start, samples, end), worker metrics and shard spans go out from the process
  that ran the shard, through the exporters pipetel has there. A process where pipetel has not
  been started is started from the owner's :func:`pipetel.init` arguments (its ``service_name``,
  ``config_file`` and keyword settings; the variables are that process's own), with the
  handle's ``worker_settings`` on top (by default ``prometheus_port=0``, so workers on one host
  never contend for the owner's port). Such a process flushes after each shard: ``spawn`` pool
  workers and Ray workers may exit without running ``atexit``.
- The trace continues: the handle carries the stage span's W3C ``traceparent``, each remote
  shard's span is a child of the stage span, and spans started inside ``with handle.shard(i)``
  are children of the shard's span.

The owner listens on ``listen`` (default ``127.0.0.1``, an ephemeral port). For workers on
other machines, pass an address they can reach (``listen="0.0.0.0", advertise="10.0.0.5"``;
:mod:`pipetel.ray` uses the Ray node address). A connection must present the handle's random
token before its reports are read; a report for another stage or one that does not decode is
refused whole and the worker logs it. The listener stops when the stage ends.
"""

import logging
import os
import secrets
import socket
import struct
import threading
from typing import Any, Dict, Optional, Tuple

from ._pipetel import Shard, Stage, _init_settings, init, is_initialized

__all__ = ["RemoteShard", "RemoteStage"]

_log = logging.getLogger("pipetel.remote")
_MAGIC = b"PTRS1"
_MAX_REPORT = 64 << 20  # a report larger than this is refused (a garbled length, not a report)
_OK, _REFUSED = 0, 1


def _recv_exact(sock: socket.socket, n: int) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


# ----- the owner's side -----


class _Receiver:
    """Accepts workers' connections for one stage and counts their reports in it."""

    def __init__(self, stage: Stage, listen: str, port: int) -> None:
        self.stage = stage
        self.token = secrets.token_hex(16)
        family = socket.AF_INET6 if ":" in listen else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((listen, port))
        self.sock.listen(128)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.reports = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept, name="pipetel-remote-stage", daemon=True)
        self._thread.start()

    def _running(self) -> bool:
        # A stage that ended has no execution id any more.
        return self.stage.execution_id is not None

    def _accept(self) -> None:
        try:
            while self._running():
                try:
                    conn, _ = self.sock.accept()
                except socket.timeout:
                    continue
                except OSError:
                    return
                threading.Thread(target=self._serve, args=(conn,), name="pipetel-remote-report", daemon=True).start()
        finally:
            self.sock.close()
            with _OWNED_LOCK:
                for key, value in list(_OWNED.items()):
                    if value[1] is self:
                        del _OWNED[key]

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(None)
            hello = _recv_exact(conn, len(_MAGIC) + 32)
            if hello is None or not secrets.compare_digest(hello, _MAGIC + self.token.encode()):
                return
            while True:
                head = _recv_exact(conn, 4)
                if head is None:
                    return
                (n,) = struct.unpack(">I", head)
                body = _recv_exact(conn, n) if n <= _MAX_REPORT else None
                if body is None:
                    return
                try:
                    self.stage._ingest_remote(body)
                    self.reports += 1
                    reply = bytes([_OK])
                except Exception as e:  # refused whole (or the stage ended): tell the worker why
                    self.refused += 1
                    msg = str(e).encode()[:4096]
                    reply = bytes([_REFUSED]) + struct.pack(">I", len(msg)) + msg
                try:
                    conn.sendall(reply)
                except OSError:
                    return


# (execution id, stage name) -> (the stage, its receiver), in the owning process.
_OWNED: Dict[Tuple[str, str], Tuple[Stage, _Receiver]] = {}
_OWNED_LOCK = threading.Lock()


class RemoteStage:
    """A picklable handle on a stage for shards that run in other processes (made by
    ``stage.remote()``); see the module documentation. ``shard(i)`` starts shard ``i`` in the
    calling process and thread."""

    __slots__ = (
        "name",
        "execution_id",
        "traceparent",
        "address",
        "token",
        "settings",
        "worker_settings",
        "report_interval",
    )

    def __init__(
        self,
        name: str,
        execution_id: str,
        traceparent: str,
        address: Tuple[str, int],
        token: str,
        settings: Optional[Dict[str, Any]] = None,
        worker_settings: Optional[Dict[str, Any]] = None,
        report_interval: float = 5.0,
    ) -> None:
        self.name = name
        self.execution_id = execution_id
        self.traceparent = traceparent
        self.address = (str(address[0]), int(address[1]))
        self.token = token
        self.settings = dict(settings) if settings is not None else None
        self.worker_settings = dict(worker_settings or {})
        self.report_interval = float(report_interval)

    @classmethod
    def of(
        cls,
        stage: Stage,
        *,
        listen: str = "127.0.0.1",
        port: int = 0,
        advertise: Optional[str] = None,
        worker_settings: Optional[Dict[str, Any]] = None,
        report_interval: float = 5.0,
    ) -> "RemoteStage":
        """The handle of ``stage`` (what ``stage.remote(...)`` returns). ``listen`` and ``port``:
        where the owner takes reports (``port=0``: an ephemeral one); ``advertise``: the host
        workers connect to (default: ``listen``, or this host's name when ``listen`` is a
        wildcard); ``worker_settings``: :func:`pipetel.init` keywords applied over the owner's
        in a process the handle starts pipetel in (default ``{"prometheus_port": 0}``);
        ``report_interval``: seconds between a running shard's progress reports."""
        if not isinstance(stage, Stage):
            raise TypeError(f"stage: expected a pipetel.Stage, got {type(stage).__name__}")
        if not (isinstance(report_interval, (int, float)) and report_interval > 0):
            raise ValueError(f"report_interval: expected a positive number of seconds, got {report_interval!r}")
        execution_id = stage.execution_id
        if execution_id is None:
            raise RuntimeError(f"stage {stage.name!r} has already ended")
        key = (execution_id, stage.name)
        with _OWNED_LOCK:
            owned = _OWNED.get(key)
            if owned is None:
                try:
                    receiver = _Receiver(stage, listen, port)
                except OSError as e:
                    raise OSError(f"listen: cannot listen on {listen}:{port} for remote shards: {e}") from e
                _OWNED[key] = (stage, receiver)
            else:
                receiver = owned[1]
        if advertise is None:
            advertise = socket.gethostname() if listen in ("0.0.0.0", "::", "") else listen
        traceparent = stage.traceparent or f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-00"
        if worker_settings is None:
            worker_settings = {"prometheus_port": 0}
        return cls(
            stage.name,
            execution_id,
            traceparent,
            (advertise, receiver.port),
            receiver.token,
            _init_settings(),
            worker_settings,
            report_interval,
        )

    def __getstate__(self) -> Dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}

    def __setstate__(self, state: Dict[str, Any]) -> None:
        for k in self.__slots__:
            setattr(self, k, state[k])

    def __repr__(self) -> str:
        host, port = self.address
        return f"RemoteStage(name={self.name!r}, execution_id={self.execution_id!r}, address='{host}:{port}')"

    def shard(self, index: int) -> "RemoteShard":
        """Starts shard ``index`` on the calling thread (its start row goes out now); a context
        manager like :meth:`pipetel.Stage.shard`. In the owning process it is a local shard of
        the stage itself."""
        with _OWNED_LOCK:
            owned = _OWNED.get((self.execution_id, self.name))
        if owned is not None and owned[1].token == self.token:
            return RemoteShard(None, owned[0].shard(index))
        view = _view(self)
        return RemoteShard(view, view.stage.shard(index))


# ----- the side that runs shards -----


class _View:
    """This process's remote view of one stage and its connection to the owner."""

    def __init__(self, handle: RemoteStage) -> None:
        self.handle = handle
        self.stage = Stage._remote_view(handle.name, handle.execution_id, handle.traceparent)
        self.source = f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(4)}"
        self.lock = threading.Lock()
        self.sock: Optional[socket.socket] = None
        self.open_shards = 0
        self.warned = False
        self._wake = threading.Condition(self.lock)

    def _send_locked(self) -> bool:
        report = self.stage._remote_report(self.source)
        frame = struct.pack(">I", len(report)) + report
        for attempt in (0, 1):  # once more on a fresh connection when the old one broke
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(self.handle.address, timeout=30)
                    self.sock.sendall(_MAGIC + self.handle.token.encode())
                self.sock.sendall(frame)
                status = _recv_exact(self.sock, 1)
                if status is None:
                    raise ConnectionError("the owner closed the connection")
                if status[0] == _REFUSED:
                    head = _recv_exact(self.sock, 4) or b"\0\0\0\0"
                    why = (_recv_exact(self.sock, struct.unpack(">I", head)[0]) or b"").decode(errors="replace")
                    self._warn(f"the owner refused a report of stage {self.handle.name!r}: {why}")
                    return False
                return True
            except OSError as e:
                if self.sock is not None:
                    self.sock.close()
                    self.sock = None
                if attempt == 1:
                    host, port = self.handle.address
                    self._warn(f"cannot send a report of stage {self.handle.name!r} to {host}:{port}: {e}")
        return False

    def _warn(self, message: str) -> None:
        if not self.warned:
            self.warned = True
            _log.warning("%s (further failures of this stage are not logged)", message)

    def send(self) -> bool:
        with self.lock:
            return self._send_locked()

    def shard_started(self) -> None:
        with self.lock:
            self.open_shards += 1
            if self.open_shards == 1:
                threading.Thread(target=self._progress, name="pipetel-remote-progress", daemon=True).start()

    def shard_ended(self) -> None:
        with self.lock:
            self.open_shards -= 1
            self._wake.notify_all()
            self._send_locked()
        guard = _STARTED.get("guard")
        if guard is not None:
            try:
                guard.flush()
            except Exception as e:  # an unreachable collector must not fail the user's shard
                self._warn(f"flushing after a shard of stage {self.handle.name!r} failed: {e}")

    def _progress(self) -> None:
        with self.lock:
            while self.open_shards > 0:
                self._wake.wait(self.handle.report_interval)
                if self.open_shards > 0:
                    self._send_locked()


_VIEWS: Dict[Tuple[str, str, str], _View] = {}
_VIEWS_LOCK = threading.Lock()
# The guard of pipetel when a handle started it in this process.
_STARTED: Dict[str, Any] = {}


def _ensure_started(handle: RemoteStage) -> None:
    with _VIEWS_LOCK:
        if is_initialized():
            return
        kwargs = dict(handle.settings or {})
        service_name = kwargs.pop("service_name", None)
        config_file = kwargs.pop("config_file", None)
        kwargs.update(handle.worker_settings)
        if config_file is not None and not os.path.exists(config_file):
            config_file = None  # another machine: the owner's file is not here
        _STARTED["guard"] = init(service_name, config_file=config_file, **kwargs)


def _view(handle: RemoteStage) -> _View:
    _ensure_started(handle)
    key = (handle.execution_id, handle.name, handle.token)
    with _VIEWS_LOCK:
        view = _VIEWS.get(key)
        if view is None:
            view = _VIEWS[key] = _View(handle)
        return view


class RemoteShard:
    """A shard started from a :class:`RemoteStage` handle: ``record``, ``add``, ``finish``,
    ``fail``, ``index``, ``traceparent`` as on :class:`pipetel.Shard` (``record`` is the native
    method itself); a context manager that ends the shard on the way out (failed when an
    exception leaves the block) and then reports it to the owner."""

    __slots__ = ("_view", "_shard", "_reported", "record", "add")

    def __init__(self, view: Optional[_View], shard: Shard) -> None:
        self._view = view
        self._shard = shard
        self._reported = False
        self.record = shard.record
        self.add = shard.add
        if view is not None:
            view.shard_started()

    @property
    def index(self) -> int:
        return self._shard.index

    @property
    def traceparent(self) -> Optional[str]:
        return self._shard.traceparent

    def _ended(self) -> None:
        if self._view is not None and not self._reported:
            self._reported = True
            self._view.shard_ended()

    def finish(self) -> Dict[str, Any]:
        """Ends the shard as finished, reports it, and returns its end row."""
        try:
            return self._shard.finish()
        finally:
            self._ended()

    def fail(self, reason: str) -> Dict[str, Any]:
        """Ends the shard as failed with ``reason``, reports it, and returns its end row."""
        try:
            return self._shard.fail(reason)
        finally:
            self._ended()

    def __enter__(self) -> "RemoteShard":
        self._shard.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            return self._shard.__exit__(exc_type, exc, tb)
        finally:
            self._ended()

    def __repr__(self) -> str:
        return f"RemoteShard(index={self.index})"
