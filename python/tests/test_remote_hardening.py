"""A remote stage's owner against connections that are not its workers': a flood of idle
connections does not switch it off (a real worker's report lands, the row is exact, threads stay
bounded and none is left when the stage ends); a connection that does not answer the challenge
is closed at the deadline; the token never crosses the wire and a replayed or forged report is
refused; a pickled handle carries no credentials."""

import hashlib
import hmac
import json
import pickle
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import peers
import pipetel
import pipetel._remote_wire as wire
import pipetel.remote as remote
from pipetel import Stage

HERE = Path(__file__).resolve().parent
FLOOD = 2000


@pytest.mark.parametrize("when", ["after", "during"])
def test_two_thousand_idle_connections_do_not_stop_a_real_workers_report(when):
    # "after": the worker reports once all 2,000 are open; "during": once half are.
    done = subprocess.run(
        [sys.executable, str(HERE / "remote_flood_owner.py"), str(FLOOD), when],
        env=peers.clean_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # The flood was there: (nearly) every connection was made, more than the owner's 1,024
    # descriptors could have held.
    assert out["held"] + out["failed"] == FLOOD and out["held"] > 1100, out
    # The worker's report landed: the owner's row is exact.
    row = out["row"]
    assert (row["items"], row["bytes"]) == (1234, 56789), row
    assert (row["shards_succeeded"], row["shards_failed"], row["total_shards"]) == (1, 0, 1), row
    assert "cannot send a report" not in done.stderr, done.stderr[-4000:]
    # Unauthenticated connections cost no thread, and none is left behind.
    assert out["most_threads"] <= 16, out
    assert out["left"] == [], out
    assert out["report_seconds"] < remote.HELLO_TIMEOUT + 5, out


def _challenge(sock: socket.socket) -> bytes:
    got = b""
    while len(got) < len(wire._MAGIC) + wire._NONCE:
        chunk = sock.recv(64)
        assert chunk, "the owner closed the connection before its challenge"
        got += chunk
    assert got.startswith(wire._MAGIC)
    return got[len(wire._MAGIC) :]


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def test_a_connection_that_does_not_answer_is_closed_at_the_deadline(monkeypatch):
    monkeypatch.setattr(remote, "HELLO_TIMEOUT", 0.5)
    with pipetel.stage("deadline", shards=1) as stage:
        handle = stage.remote()
        idle = socket.create_connection(handle.address, timeout=5)
        _challenge(idle)
        started = time.monotonic()
        assert _closed_within(idle, 5.0)
        assert time.monotonic() - started < 3.0
        # The old hello (the token itself, in clear) is not an answer.
        old = socket.create_connection(handle.address, timeout=5)
        _challenge(old)
        old.sendall(wire._MAGIC + handle.token.encode()[: wire._MAC])
        assert _closed_within(old, 5.0)
        idle.close()
        old.close()
        stage.finish()


def _report(handle, items: int) -> bytes:
    view = Stage._remote_view(handle.name, handle.execution_id, handle.traceparent)
    shard = view.shard(0)
    shard.record(items, 10 * items)
    shard.finish()
    return view._remote_report("test-source")


def _frame(token: str, nonce: bytes, sequence: int, body: bytes) -> bytes:
    mac = hmac.new(
        token.encode(), b"pipetel-remote-report\0" + nonce + struct.pack(">Q", sequence) + body, hashlib.sha256
    ).digest()
    return struct.pack(">I", len(body)) + mac + body


def test_reports_are_authenticated_and_a_replay_is_refused():
    stage = pipetel.stage("hmac", shards=1)
    handle = stage.remote()
    body = _report(handle, 5)
    conn = socket.create_connection(handle.address, timeout=5)
    nonce = _challenge(conn)
    answer = hmac.new(handle.token.encode(), b"pipetel-remote-hello\0" + nonce, hashlib.sha256).digest()
    conn.sendall(wire._MAGIC + answer)
    conn.sendall(_frame(handle.token, nonce, 1, body))
    assert conn.recv(1) == bytes([wire._OK])
    # The same frame again (a replay) is refused: the connection is closed, nothing counted.
    conn.sendall(_frame(handle.token, nonce, 1, body))
    assert _closed_within(conn, 5.0)
    conn.close()
    # A frame made with a wrong key, on a fresh authenticated connection: refused as well.
    conn = socket.create_connection(handle.address, timeout=5)
    nonce = _challenge(conn)
    conn.sendall(wire._MAGIC + hmac.new(handle.token.encode(), b"pipetel-remote-hello\0" + nonce, hashlib.sha256).digest())
    conn.sendall(_frame("0" * 32, nonce, 1, _report(handle, 7)))
    assert _closed_within(conn, 5.0)
    conn.close()
    row = stage.finish()
    assert (row["items"], row["bytes"]) == (5, 50), row


HANDLE_PROGRAM = r"""
import pickle, sys
import pipetel
pipetel.init(
    "creds",
    prometheus_port=0,
    prometheus_host="127.0.0.1",
    prometheus_bearer_token="pull-s3cret-token",
    otlp_endpoint="http://alice:otlp-pa55word@127.0.0.1:4318",
    otlp_headers={"authorization": "Bearer otlp-s3cret-header"},
    exporters_metrics=["prometheus"],
)
with pipetel.stage("creds", shards=1) as stage:
    handle = stage.remote()
    data = pickle.dumps(handle)
    sys.stdout.buffer.write(data)
    stage.finish()
"""


def test_a_pickled_handle_carries_no_credentials():
    done = subprocess.run(
        [sys.executable, "-c", HANDLE_PROGRAM], env=peers.clean_env(), capture_output=True, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    data = done.stdout
    for secret in (b"pull-s3cret-token", b"otlp-pa55word", b"otlp-s3cret-header", b"alice"):
        assert secret not in data, secret
    handle = pickle.loads(data)
    assert handle.settings["service_name"] == "creds"
    assert handle.settings["otlp_endpoint"] == "http://127.0.0.1:4318"
    assert handle.settings["exporters_metrics"] == ["prometheus"]
    assert not any("bearer" in k or "headers" in k for k in handle.settings), handle.settings
    assert handle.token not in repr(handle)


@pytest.mark.parametrize(
    "settings, kept",
    [
        ({"prometheus_tls_key": "/k", "prometheus_tls_cert": "/c", "prometheus_port": 1}, {"prometheus_port": 1}),
        ({"otlp_traces_headers": {"a": "b"}, "otlp_client_key": "/k", "service_name": "s"}, {"service_name": "s"}),
        ({"prometheus_basic_auth": ["u", "p"], "otlp_endpoint": "https://h:4317"}, {"otlp_endpoint": "https://h:4317"}),
    ],
)
def test_settings_a_handle_leaves_out(settings, kept):
    assert wire._worker_settings_of(settings) == kept
