"""The multiprocess directory under the rows store's rules, against a hostile neighbour on the
same host: the directory is created 0700 and refused when it is a symbolic link, another user's
or writable by group or others; worker files are 0600, written without following links; a
scrape never blocks on a FIFO, never follows a planted link and never reads a giant; planted
label values and help cannot add lines to the merged page. The shared port closes idle
connections and answers as the pull endpoint does: bearer token (401 without it) and TLS."""

import os
import socket
import ssl
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

import peers
import pipetel.multiprocess as mp
from pipetel.recorders import Counter, Envelope, Family

HERE = Path(__file__).resolve().parent


# ----- the directory -----


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o757])
def test_a_directory_others_can_write_is_refused(tmp_path, mode):
    d = tmp_path / "shared"
    d.mkdir()
    d.chmod(mode)
    with pytest.raises(PermissionError, match=r"writable by group or other users.*refusing") as e:
        mp.merged_page(str(d))
    assert str(d) in str(e.value)


def test_a_symbolic_link_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(PermissionError, match=r"symbolic link") as e:
        mp.merged_page(str(link))
    assert str(link) in str(e.value)


def test_another_users_directory_is_refused(tmp_path):
    if os.geteuid() == 0:
        d = tmp_path / "theirs"
        d.mkdir(mode=0o755)
        os.chown(d, 65534, 65534)
        path = str(d)
    else:
        path = "/"  # root's
    with pytest.raises(PermissionError, match=r"belongs to uid \d+, not to this user") as e:
        mp.merged_page(path)
    assert path in str(e.value)


# ----- what a scrape reads -----


def planted(directory: Path, name: str, value: str, help_: str = "Planted") -> None:
    fam = Family.counter("planted_total", help_, "counter:planted_total", ["path"])
    c = Counter(fam)
    c.inc([value], 3)
    data = Envelope(f"otherhost-1-{name}", 1, [c.snapshot()]).encode()
    (directory / f"{name}.envelope").write_bytes(data)


MERGE = r"""
import sys, time
import pipetel.multiprocess as mp
start = time.monotonic()
page = mp.merged_page(sys.argv[1])
print(f"{time.monotonic() - start:.3f}")
sys.stdout.write(page)
"""


def merge_in_a_child(directory: Path) -> tuple:
    done = subprocess.run(
        [sys.executable, "-c", MERGE, str(directory)], env=peers.clean_env(), capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seconds, _, page = done.stdout.partition("\n")
    return float(seconds), page, done.stderr


def test_fifos_links_and_giants_are_skipped(tmp_path):
    d = tmp_path / "metrics"
    d.mkdir(mode=0o700)
    planted(d, "good", "/ok")
    os.mkfifo(d / "fifo.envelope")
    secret = tmp_path / "secret"
    secret.write_bytes((d / "good.envelope").read_bytes())
    (d / "link.envelope").symlink_to(secret)
    with open(d / "giant.envelope", "wb") as f:
        f.truncate(getattr(mp, "MAX_FILE_BYTES", 64 << 20) + 1)  # sparse: costs no disk
    seconds, page, log = merge_in_a_child(d)
    assert seconds < 5, seconds
    values = {(s.name, s.labels.get("path")): s.value for f in text_string_to_metric_families(page) for s in f.samples}
    # The good file once; the link to a copy of it is not followed (it would count twice).
    assert values == {("planted_total", "/ok"): 3.0}, page
    for name in ("fifo.envelope", "link.envelope", "giant.envelope"):
        assert name in log, log


def test_planted_label_values_and_help_cannot_add_lines(tmp_path):
    d = tmp_path / "metrics"
    d.mkdir(mode=0o700)
    hostile = 'x"} 1\nevil_injected_total 1\n# TYPE evil gauge\nevil{a="\\'
    # Help cannot hold a newline (a family refuses control characters); a backslash it can.
    planted(d, "hostile", hostile, help_="a \\n b \\")
    page = mp.merged_page(str(d))
    families = list(text_string_to_metric_families(page))
    assert [f.name for f in families] == ["planted"], page
    assert [(s.name, s.labels["path"], s.value) for s in families[0].samples] == [("planted_total", hostile, 3.0)]
    assert families[0].documentation == "a \\n b \\"
    assert all(line.startswith(("# ", "planted_total")) for line in page.splitlines()), page


def test_a_workers_escaped_labels_come_back_as_they_were():
    # The directory is made here, not under pytest's tmp_path (whose parents may be shared).
    page = (
        "# HELP req_total Requests \\\\ served\n# TYPE req_total counter\n"
        'req_total{path="a\\"b\\\\c\\nd"} 2\n'
    )
    out = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"mp-roundtrip-{os.getpid()}-{time.time_ns()}")
    os.mkdir(out, 0o700)
    try:
        data = Envelope(f"{socket.gethostname()}-{os.getpid()}-1", 1, mp.page_snapshots(page)).encode()
        Path(out, "w.envelope").write_bytes(data)
        merged = mp.merged_page(out)
    finally:
        for name in os.listdir(out):
            os.unlink(os.path.join(out, name))
        os.rmdir(out)
    assert merged == page, merged


# ----- a worker and the shared port -----

WORKER = r"""
import sys
import pipetel.multiprocess as mp
from pipetel.telefuser import get_metrics_registry
settings = {}
for arg in sys.argv[3:]:
    k, _, v = arg.partition("=")
    settings[k] = v
mp.init("mp-sec", directory=sys.argv[1], prometheus_port=int(sys.argv[2]), prometheus_host="127.0.0.1",
        interval=0.2, **settings)
get_metrics_registry("app").counter("jobs", "Jobs").inc(4)
mp.write_snapshot()
print("ready", flush=True)
sys.stdin.read()
"""


class Worker:
    def __init__(self, tmp: Path, port: int, *settings: str):
        self.directory = tmp / "metrics"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(self.directory), str(port), *settings],
            env=peers.clean_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        line = self.proc.stdout.readline() if self.proc.stdout else ""
        if line.strip() != "ready":
            self.stop()
            raise AssertionError(f"the worker did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")

    def stop(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def scrape(url: str, token=None, context=None):
    """(status, body, headers) of one scrape, retried while the worker starts serving."""
    req = urllib.request.Request(url)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    for attempt in range(100):
        try:
            with urllib.request.urlopen(req, timeout=10, context=context) as r:
                return r.status, r.read().decode(), r.headers
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers
        except (ConnectionRefusedError, urllib.error.URLError) as e:
            reason = getattr(e, "reason", e)
            if attempt == 99 or not isinstance(reason, ConnectionRefusedError):
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def test_a_worker_creates_a_private_directory_and_writes_private_files(tmp_path):
    port = peers.free_port()
    w = Worker(tmp_path, port)
    try:
        assert stat.S_IMODE(w.directory.stat().st_mode) == 0o700
        files = list(w.directory.iterdir())
        assert files and all(f.name.endswith(".envelope") for f in files), files
        assert all(stat.S_IMODE(f.lstat().st_mode) == 0o600 for f in files), [oct(f.lstat().st_mode) for f in files]
    finally:
        w.stop()


def test_the_shared_port_asks_for_the_bearer_token_and_closes_idle_connections(tmp_path):
    port = peers.free_port()
    w = Worker(tmp_path, port, "prometheus_bearer_token=s3cret-pull")
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        status, _, headers = scrape(url)
        assert status == 401 and headers["WWW-Authenticate"] == 'Bearer realm="pipetel"'
        assert scrape(url, token="wrong")[0] == 401
        status, body, _ = scrape(url, token="s3cret-pull")
        assert status == 200, body
        assert 'app_jobs_total{otel_scope_name="pipetel"} 4' in body, body
        # An idle connection is closed by the port within its socket timeout.
        idle = socket.create_connection(("127.0.0.1", port), timeout=5)
        idle.settimeout(mp.SOCKET_TIMEOUT + 5)
        started = time.monotonic()
        assert idle.recv(1) == b""
        assert time.monotonic() - started < mp.SOCKET_TIMEOUT + 3
        idle.close()
    finally:
        w.stop()


def test_the_shared_port_serves_tls_when_the_endpoint_does(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True, timeout=60,
    )
    if made.returncode != 0:
        pytest.skip(f"openssl cannot make a certificate here: {made.stderr.decode()[-500:]}")
    port = peers.free_port()
    w = Worker(tmp_path, port, f"prometheus_tls_cert={cert}", f"prometheus_tls_key={key}")
    try:
        context = ssl.create_default_context(cafile=str(cert))
        status, body, _ = scrape(f"https://127.0.0.1:{port}/metrics", context=context)
        assert status == 200 and "app_jobs_total" in body, body
        # Plain HTTP is not answered with a page.
        with pytest.raises((urllib.error.URLError, ConnectionError, http_client_errors())):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    finally:
        w.stop()


def http_client_errors():
    import http.client

    return http.client.HTTPException
