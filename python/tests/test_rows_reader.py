"""``pipetel.rows.query`` against stores served on loopback by this test: the reader of
``pipetel rows --url`` (crates/pipetel-rows, through the extension), so the same recorded answer
gives the same rows with the same floats (the file ``crates/pipetel-cli/tests/rows_url_limits.rs``
holds the CLI to), and a store that stalls, sends a line or an answer without end, or answers
an error with terminal escapes in it ends the query with the CLI's error. And rows written into
a real VictoriaLogs (``PIPETEL_VICTORIA_LOGS_BIN``) come back with the floats they were written
with."""

import json
import pathlib
import socket
import threading
import time

import pytest

import pipetel.rows

DATA = pathlib.Path(__file__).resolve().parents[2] / "crates" / "pipetel-rows" / "tests" / "data"
SERVE_FOR = 20.0  # the longest any served answer goes on
OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: application/stream+json\r\nConnection: close\r\n\r\n"


def _read_request(conn):
    conn.settimeout(5)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk


@pytest.fixture
def serve():
    """``serve(answer)``: a loopback server answering every request with ``answer(conn)``; its
    base URL. Closed after the test."""
    listeners = []

    def start(answer):
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def handle(conn):
            with conn:
                try:
                    _read_request(conn)
                    conn.settimeout(5)
                    answer(conn)
                except OSError:
                    pass

        def accept():
            while True:
                try:
                    conn, _ = listener.accept()
                except OSError:
                    return
                threading.Thread(target=handle, args=(conn,), daemon=True).start()

        threading.Thread(target=accept, daemon=True).start()
        return f"http://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    for listener in listeners:
        listener.close()


def _endless(conn, head, chunk):
    until = time.monotonic() + SERVE_FOR
    conn.sendall(OK_HEAD + head)
    while time.monotonic() < until:
        conn.sendall(chunk)


def _answer(body, status="200 OK"):
    def answer(conn):
        conn.sendall(
            f"HTTP/1.1 {status}\r\nContent-Type: application/stream+json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n".encode() + body
        )

    return answer


def test_a_recorded_answer_gives_the_rows_the_cli_gives(serve):
    url = serve(_answer((DATA / "fleet_answer.jsonl").read_bytes()))
    want = [json.loads(line) for line in (DATA / "fleet_rows.jsonl").read_text().splitlines()]
    got = pipetel.rows.query(url, frame=False)
    assert got == want
    for g, w in zip(got, want):
        assert {k: type(v) for k, v in g.items()} == {k: type(v) for k, v in w.items()}, g
        # Floats bit for bit: 1.0000000000000004 stays (VictoriaLogs' parsing cannot have moved
        # 1 there), 0.3500000000000001 is the 0.35 VictoriaLogs moved.
        assert {k: repr(v) for k, v in g.items()} == {k: repr(v) for k, v in w.items()}, g
    assert got[1]["pipeline.cpu.percent"] == 1.0000000000000004
    assert got[1]["pipeline.cpu.time_seconds"] == 0.35
    assert list(got[0])[:4] == ["event", "timestamp_ms", "trace_id", "span_id"]


def test_a_store_that_stalls_after_its_headers_times_out(serve):
    def stall(conn):
        conn.sendall(OK_HEAD + b'{"_time":"2026-12-02T10:00:29Z",')
        time.sleep(SERVE_FOR)

    url = serve(stall)
    started = time.monotonic()
    with pytest.raises(pipetel.rows.RowsQueryError) as e:
        pipetel.rows.query(url, frame=False, timeout=1)
    assert time.monotonic() - started < 8
    assert f"{url}/select/logsql/query: timed out" in str(e.value)
    assert "1s (the read timeout)" in str(e.value)


def test_a_line_without_end_is_refused_at_the_line_cap(serve):
    url = serve(lambda conn: _endless(conn, b'{"_msg":"', b"x" * 65536))
    started = time.monotonic()
    with pytest.raises(pipetel.rows.RowsQueryError) as e:
        pipetel.rows.query(url, frame=False)
    assert time.monotonic() - started < 10
    assert str(e.value) == f"{url}/select/logsql/query: line 1 of the answer is over the cap of 1048576 bytes on one line"


def test_an_answer_without_end_is_refused_at_the_total_cap(serve):
    line = b'{"_time":"2026-12-02T10:00:29Z","_msg":"not a row"}\n'
    url = serve(lambda conn: _endless(conn, b"", line))
    with pytest.raises(pipetel.rows.RowsQueryError, match="over the cap of 200000 bytes on a whole answer"):
        pipetel.rows.query(url, frame=False, max_bytes=200_000)


def test_an_error_body_comes_escaped_and_the_password_redacted(serve):
    body = "bad query \x1b[2J\x1b]0;owned\x07\x9b31m".encode()
    url = serve(_answer(body, "400 Bad Request"))
    with pytest.raises(pipetel.rows.RowsQueryError) as e:
        pipetel.rows.query(url.replace("http://", "http://reader:s3cret@"), frame=False)
    port = url.rsplit(":", 1)[1]
    assert str(e.value) == (
        f"http://***@127.0.0.1:{port}/select/logsql/query: HTTP 400: bad query \\x1b[2J\\x1b]0;owned\\x07\\u{{9b}}31m"
    )


def test_bad_arguments_are_refused_before_any_request():
    with pytest.raises(ValueError, match="https is not supported"):
        pipetel.rows.query("https://127.0.0.1:9", frame=False)
    with pytest.raises(ValueError, match="http://victoria-logs:9428"):
        pipetel.rows.query("victoria-logs:9428", frame=False)
    for timeout in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="timeout must be a number of seconds above 0"):
            pipetel.rows.query("http://127.0.0.1:9", frame=False, timeout=timeout)
    with pytest.raises(ValueError, match="max_bytes"):
        pipetel.rows.query("http://127.0.0.1:9", frame=False, max_bytes=0)
    with pytest.raises(TypeError, match="start"):
        pipetel.rows.query("http://127.0.0.1:9", frame=False, start=5)  # type: ignore[arg-type]


#: Floats as a writer's rows hold them: VictoriaLogs stores a column of decimals as floats parsed
#: its own way (0.35 can come back as 0.3500000000000001); the reader gives back what was written.
WRITTEN_FLOATS = [0.35, 0.3, 25.985576186226307, 4650474.661029901, 1 / 3, 9082.958322324026, 1.0000000000000004,
                  53.333333333333336, 0.5, 12.0]


def test_rows_stored_in_a_real_victoria_logs_come_back_as_written(victoria_logs):
    """Entries written straight into a real VictoriaLogs (its JSON-lines ingestion, every value
    as text, as the gateways write rows) read back with the floats, integers and counters each
    row was written with."""
    import peers
    import urllib.request

    written = []
    lines = []
    for i, f in enumerate(WRITTEN_FLOATS):
        time_ms = 1_796_205_629_000 + i
        row = {
            "event": "pipeline.worker", "timestamp_ms": time_ms, "pipeline.namespace": "pipeline.worker",
            "pipeline.stage.name": "round-trip", "pipeline.execution.id": "rt-1", "pipeline.shard.index": i,
            "pipeline.status": "end", "pipeline.items": 7 * i, "pipeline.cpu.percent": f, "pipeline.item_rate": f * 3,
            "pipeline.counter.loss": f if i % 2 else float(i),  # a float counter, whole in some rows
        }
        written.append(row)
        entry = {k: str(v) if not isinstance(v, float) else repr(v) for k, v in row.items() if k.startswith("pipeline.")}
        seconds, ms = divmod(time_ms, 1000)
        entry.update(_msg="row", _time=time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{ms:03d}Z",
                     event_name="pipeline.worker")
        lines.append(json.dumps(entry))
    ingest = urllib.request.Request(
        victoria_logs.url + "/insert/jsonline?_stream_fields=event_name&_time_field=_time&_msg_field=_msg",
        data=("\n".join(lines) + "\n").encode(), method="POST",
        # A form's content type would be answered 200 and nothing stored.
        headers={"Content-Type": "application/stream+json"},
    )
    urllib.request.urlopen(ingest, timeout=10).close()

    def stored():
        urllib.request.urlopen(victoria_logs.url + "/internal/force_flush", timeout=10).close()
        rows = pipetel.rows.query(victoria_logs.url, execution="rt-1", frame=False)
        return rows if len(rows) >= len(written) else None

    got = peers.wait_until("every entry in VictoriaLogs", stored, 30.0, lambda: victoria_logs.process.output(40))
    assert got == written
    for g, w in zip(got, written):
        assert {k: (type(v), repr(v)) for k, v in g.items()} == {k: (type(v), repr(v)) for k, v in w.items()}, g
