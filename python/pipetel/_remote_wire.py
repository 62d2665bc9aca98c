"""What crosses between a remote stage's owner and its workers (:mod:`pipetel.remote`): the wire
protocol with its authentication, and the settings a handle carries.

The protocol, on one TCP connection:

- the owner sends ``_MAGIC`` and a random nonce of ``_NONCE`` bytes (its challenge);
- the worker answers ``_MAGIC`` and the HMAC-SHA256 of the nonce keyed by the stage's token
  (:func:`_hello_mac`): the token itself never crosses the network;
- then per report: a 4-byte big-endian length, the HMAC of the nonce, the report's sequence
  number on this connection (from 1) and its bytes (:func:`_frame_mac`), then the bytes; the
  owner replies ``_OK``, or ``_REFUSED`` with a 4-byte length and the reason (UTF-8).

A report read off the wire can thus be neither altered, nor replayed, nor sent again on another
connection.
"""

import hashlib
import hmac
import secrets
import selectors
import socket
import struct
from collections import OrderedDict
from typing import Any, Dict, Optional
from urllib.parse import urlsplit, urlunsplit

_MAGIC = b"PTRS2"
_NONCE = 32  # bytes of the owner's challenge
_MAC = 32  # bytes of an HMAC-SHA256
_MAX_REPORT = 64 << 20  # a report larger than this is refused (a garbled length, not a report)
_OK, _REFUSED = 0, 1
#: Keys of ``init`` settings a handle never carries (compared on their last part, ``.`` or
#: ``_`` separated): credentials, and the TLS files of the owner's own endpoint.
_SECRET_SUFFIXES = (
    "headers",
    "bearer_token",
    "basic_auth",
    "tls_cert",
    "tls_key",
    "client_key",
    "client_certificate",
)


# ----- the protocol -----


def _recv_exact(sock: socket.socket, n: int) -> Optional[bytes]:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _key(token: str) -> bytes:
    return token.encode()


def _hello_mac(token: str, nonce: bytes) -> bytes:
    return hmac.new(_key(token), b"pipetel-remote-hello\0" + nonce, hashlib.sha256).digest()


def _frame_mac(token: str, nonce: bytes, sequence: int, body: bytes) -> bytes:
    mac = hmac.new(_key(token), b"pipetel-remote-report\0" + nonce + struct.pack(">Q", sequence), hashlib.sha256)
    mac.update(body)
    return mac.digest()


def _answer_challenge(sock: socket.socket, token: str) -> bytes:
    """The worker's side of the handshake on a fresh connection: reads the owner's challenge,
    answers it, returns the nonce. ``ConnectionError`` when the peer sent no challenge."""
    challenge = _recv_exact(sock, len(_MAGIC) + _NONCE)
    if challenge is None or not challenge.startswith(_MAGIC):
        raise ConnectionError("the owner did not send its challenge (another program, or another version)")
    nonce = challenge[len(_MAGIC) :]
    sock.sendall(_MAGIC + _hello_mac(token, nonce))
    return nonce


def _send_report(sock: socket.socket, token: str, nonce: bytes, sequence: int, report: bytes) -> Optional[str]:
    """Sends one report and waits for the owner's reply: ``None`` when counted, the owner's
    reason when refused. ``ConnectionError`` when the owner closed the connection."""
    mac = _frame_mac(token, nonce, sequence, report)
    sock.sendall(struct.pack(">I", len(report)) + mac + report)
    status = _recv_exact(sock, 1)
    if status is None:
        raise ConnectionError("the owner closed the connection")
    if status[0] != _REFUSED:
        return None
    head = _recv_exact(sock, 4) or b"\0\0\0\0"
    return (_recv_exact(sock, struct.unpack(">I", head)[0]) or b"").decode(errors="replace")


class _Pending:
    """A connection that has been sent the challenge and has not answered it yet."""

    __slots__ = ("nonce", "deadline", "answer")

    def __init__(self, nonce: bytes, deadline: float) -> None:
        self.nonce = nonce
        self.deadline = deadline
        self.answer = b""


class _Challenges:
    """The owner's side of the handshake, for the connections that have not answered yet: each
    is sent its challenge, registered with ``selector`` and read without blocking (so it costs a
    descriptor and no thread), oldest first. Used by one thread (the accept loop) alone."""

    def __init__(self, selector: selectors.BaseSelector, token: str) -> None:
        self._selector = selector
        self._token = token
        self._pending: "OrderedDict[socket.socket, _Pending]" = OrderedDict()

    def __len__(self) -> int:
        return len(self._pending)

    def close(self, conn: socket.socket) -> None:
        self._pending.pop(conn, None)
        try:
            self._selector.unregister(conn)
        except (KeyError, ValueError):
            pass
        conn.close()

    def close_oldest(self) -> None:
        if self._pending:
            self.close(next(iter(self._pending)))

    def close_all(self) -> None:
        for conn in list(self._pending):
            self.close(conn)

    def expire(self, now: float) -> Optional[float]:
        """Closes the connections whose deadline passed; the next deadline (``None``: none)."""
        while self._pending:  # the oldest first: expired ones are at the front
            conn, pending = next(iter(self._pending.items()))
            if pending.deadline > now:
                return pending.deadline
            self.close(conn)
        return None

    def challenge(self, conn: socket.socket, deadline: float, most: int) -> None:
        """Sends a fresh connection its challenge, to be answered by ``deadline``; the oldest
        waiting connection is closed first when ``most`` already wait."""
        if len(self._pending) >= most:
            self.close_oldest()
        nonce = secrets.token_bytes(_NONCE)
        try:
            conn.setblocking(False)
            # A few dozen bytes into a fresh socket's buffer: sent at once or not at all.
            if conn.send(_MAGIC + nonce) != len(_MAGIC) + _NONCE:
                conn.close()
                return
            self._selector.register(conn, selectors.EVENT_READ)
        except (OSError, ValueError):
            conn.close()
            return
        self._pending[conn] = _Pending(nonce, deadline)

    def read(self, conn: socket.socket) -> Optional[bytes]:
        """Reads what ``conn`` answered so far; its nonce once it has proved it holds the token
        (then it is no longer registered, and is the caller's), ``None`` otherwise (a wrong
        answer or a closed connection is closed)."""
        pending = self._pending.get(conn)
        if pending is None:
            return None
        want = len(_MAGIC) + _MAC
        try:
            chunk = conn.recv(want - len(pending.answer))
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            chunk = b""
        if not chunk:
            self.close(conn)
            return None
        pending.answer += chunk
        if len(pending.answer) < want:
            return None
        self._pending.pop(conn, None)
        self._selector.unregister(conn)
        if not hmac.compare_digest(pending.answer, _MAGIC + _hello_mac(self._token, pending.nonce)):
            conn.close()
            return None
        return pending.nonce


class _Forged(Exception):
    """A report whose authentication code does not hold: forged, replayed or out of order."""


def _read_report(conn: socket.socket, token: str, nonce: bytes, sequence: int) -> Optional[bytes]:
    """The next report's bytes on an authenticated connection (its ``sequence``-th), or
    ``None`` when the connection ended (or announced a report over ``_MAX_REPORT``).
    :class:`_Forged` when its authentication code does not hold."""
    head = _recv_exact(conn, 4 + _MAC)
    if head is None:
        return None
    (n,) = struct.unpack(">I", head[:4])
    body = _recv_exact(conn, n) if n <= _MAX_REPORT else None
    if body is None:
        return None
    if not hmac.compare_digest(head[4:], _frame_mac(token, nonce, sequence, body)):
        raise _Forged()
    return body


def _reply(conn: socket.socket, refused: Optional[str]) -> None:
    """The owner's reply to a report: counted (``refused`` is ``None``), or refused and why."""
    if refused is None:
        conn.sendall(bytes([_OK]))
        return
    msg = refused.encode()[:4096]
    conn.sendall(bytes([_REFUSED]) + struct.pack(">I", len(msg)) + msg)


# ----- what a handle carries -----


def _without_userinfo(value: Any) -> Any:
    """A URL's ``user:password@`` removed (other values as they are)."""
    if not isinstance(value, str) or "://" not in value or "@" not in value:
        return value
    try:
        parts = urlsplit(value)
        if "@" not in parts.netloc:
            return value
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    except ValueError:
        return value


def _worker_settings_of(settings: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The owner's ``init`` arguments as a handle carries them: no credentials (request headers,
    the pull endpoint's bearer token, basic auth and TLS files, OTLP client keys), no
    ``user:password@`` in any URL. A worker takes credentials from its own environment."""
    if settings is None:
        return None
    out = {}
    for key, value in settings.items():
        norm = str(key).replace(".", "_").lower()
        if any(norm == s or norm.endswith("_" + s) for s in _SECRET_SUFFIXES):
            continue
        if isinstance(value, (list, tuple)):
            value = type(value)(_without_userinfo(v) for v in value)
        out[key] = _without_userinfo(value)
    return out
