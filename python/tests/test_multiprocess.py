"""Multi-worker servers through pipetel.multiprocess, with real servers and real HTTP scrapes:
gunicorn (sync and uvicorn workers, with workers restarted by ``--max-requests``),
``uvicorn --workers 2`` (a worker stopped and replaced), and ``multiprocessing`` workers. One
scrape of the shared port sees every worker's series, each counted once, no worker's start
fails on the port, and no counter of the merged view ever goes back across restarts."""

import http.client
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from prometheus_client.parser import text_string_to_metric_families

import peers

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


def scrape(port: int) -> str:
    """One scrape of the shared port; retried while the serving worker hands over to another
    (the port is free for up to one write interval then: a scraper sees one failed scrape)."""
    for attempt in range(50):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                return r.read().decode()
        except OSError:
            if attempt == 49:
                raise
            time.sleep(0.1)
    raise AssertionError("unreachable")


def values(page: str) -> Dict[str, float]:
    """Sample name + labels (without otel_scope_*) -> value, read by prometheus_client's parser."""
    out = {}
    for family in text_string_to_metric_families(page):
        for s in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()) if not k.startswith("otel_scope"))
            out[f"{s.name}{{{labels}}}"] = s.value
    return out


def get(port: int, path: str) -> int:
    """One request; the worker's pid. A connection that a recycled worker closes unserved (it
    had accepted it while shutting down: no response, nothing counted, as a graceful shutdown
    finishes every request it started) is sent again, as a client or load balancer would."""
    for attempt in range(5):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
                return int(r.read().decode())
        except (ConnectionResetError, http.client.RemoteDisconnected):
            if attempt == 4:
                raise
        except urllib.error.URLError as e:
            if attempt == 4 or not isinstance(e.reason, ConnectionResetError):
                raise
        time.sleep(0.05)
    raise AssertionError("unreachable")


class Server:
    def __init__(self, argv: List[str], env: Dict[str, str], tmp: Path):
        self.log = open(tmp / "server.log", "w+")
        self.proc = subprocess.Popen(argv, cwd=HERE, env=env, stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-6000:]

    def stop(self) -> None:
        peers.stop_process(self.proc, 30.0)
        self.log.close()


def server_env(tmp: Path, metrics_port: int, **extra: str) -> Dict[str, str]:
    return peers.clean_env(
        {
            "PIPETEL_MULTIPROCESS_DIR": str(tmp / "metrics"),
            "OTEL_EXPORTER_PROMETHEUS_PORT": str(metrics_port),
            "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
            "PYTHONPATH": str(HERE),
            **extra,
        }
    )


def wait_for(what: str, check, server: Server, timeout: float = 30.0):
    return peers.wait_until(what, check, timeout, server.output)


def wait_until_serving(server: Server, app_port: int, metrics_port: int) -> None:
    """Waits until the app answers (one request to /hello) and the shared port serves."""

    def up() -> Optional[bool]:
        try:
            get(app_port, "/hello")
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10):
                return True
        except OSError:
            return None

    wait_for("the server and the shared metrics port", up, server)


def serve_and_check(server: Server, app_port: int, metrics_port: int, requests: int, restarts: bool) -> Dict[str, float]:
    """Sends ``requests`` requests (every third to /other), scraping between them: every scrape
    parses, no counter goes back, and the last scrape has the exact totals."""

    wait_until_serving(server, app_port, metrics_port)
    sent = {"/hello": 1, "/other": 0}
    pids = set()
    last: Dict[str, float] = {}
    i = 0
    # With ``restarts``, go on (at most 300 requests) until a recycled worker was seen: how many
    # requests the first recycling takes depends on how the server spreads them.
    while i < requests - 1 or (restarts and len(pids) <= 2 and i < 300):
        i += 1
        path = "/other" if i % 3 == 0 else "/hello"
        pids.add(get(app_port, path))
        sent[path] += 1
        if i % 5 == 0:
            now = values(scrape(metrics_port))
            for key, value in last.items():
                if key.startswith(("app_requests_total", "app_latency_seconds_count")):
                    assert now.get(key, 0) >= value, f"{key} went back from {value} to {now.get(key)}"
            last = now

    def exact() -> Optional[Dict[str, float]]:
        v = values(scrape(metrics_port))
        hello = v.get("app_requests_total{route=/hello}")
        other = v.get("app_requests_total{route=/other}")
        return v if (hello, other) == (sent["/hello"], sent["/other"]) else None

    v = wait_for(f"app_requests_total == {sent}", exact, server)
    total = sent["/hello"] + sent["/other"]
    assert v["app_latency_seconds_count{}"] == total
    assert v["app_latency_seconds_sum{}"] == 0.25 * total
    assert v["app_latency_seconds_bucket{le=0.5}"] == total and v["app_latency_seconds_bucket{le=0.1}"] == 0
    if restarts:
        assert len(pids) > 2, f"no worker was restarted: {pids}\n{server.output()}"
    # Gauges: live workers only (2), whatever the number of workers that ever ran.
    wait_for("app_workers_up == 2", lambda: values(scrape(metrics_port)).get("app_workers_up{}") == 2 or None, server)
    return v


@pytest.mark.parametrize("worker_class", ["sync", "uvicorn.workers.UvicornWorker"])
def test_gunicorn_workers_restarted_by_max_requests_are_scraped_whole(tmp_path, worker_class):
    app_port, metrics_port = peers.free_port(), peers.free_port()
    app = "mp_app:wsgi" if worker_class == "sync" else "mp_app:asgi"
    argv = [str(BIN / "gunicorn"), "-c", "mp_gunicorn_conf.py", "-w", "2", "-k", worker_class]
    argv += ["-b", f"127.0.0.1:{app_port}", "--max-requests", "10", app]
    server = Server(argv, server_env(tmp_path, metrics_port), tmp_path)
    try:
        serve_and_check(server, app_port, metrics_port, requests=60, restarts=True)
        files = list((tmp_path / "metrics").glob("*.envelope"))
        assert len(files) > 2, files
    finally:
        server.stop()
    assert "Address already in use" not in server_output_after(tmp_path)


def server_output_after(tmp: Path) -> str:
    return (tmp / "server.log").read_text()


def test_uvicorn_workers_survive_a_replaced_worker(tmp_path):
    app_port, metrics_port = peers.free_port(), peers.free_port()
    argv = [str(BIN / "uvicorn"), "--workers", "2", "--host", "127.0.0.1", "--port", str(app_port), "mp_app:asgi"]
    server = Server(argv, server_env(tmp_path, metrics_port, MP_APP_INIT="1"), tmp_path)
    try:
        before = serve_and_check(server, app_port, metrics_port, requests=30, restarts=False)
        # Stop one worker (SIGTERM: it exits cleanly) and let uvicorn start another.
        files = {p.name for p in (tmp_path / "metrics").glob("*.envelope")}
        victim = int(sorted(files)[0].split("-")[-2])
        os.kill(victim, signal.SIGTERM)
        wait_for(
            "a replacement worker",
            lambda: len(list((tmp_path / "metrics").glob("*.envelope"))) > len(files) or None,
            server,
        )
        v = values(scrape(metrics_port))
        assert v["app_requests_total{route=/hello}"] >= before["app_requests_total{route=/hello}"]
        total = 30
        for _ in range(15):
            get(app_port, "/hello")
            total += 1

        def exact():
            v = values(scrape(metrics_port))
            return v if v.get("app_latency_seconds_count{}") == total else None

        v = wait_for(f"{total} requests after the replacement", exact, server)
        assert v["app_requests_total{route=/hello}"] + v["app_requests_total{route=/other}"] == total
        wait_for("app_workers_up == 2", lambda: values(scrape(metrics_port)).get("app_workers_up{}") == 2 or None, server)
    finally:
        server.stop()
    assert "Address already in use" not in server_output_after(tmp_path)


WORKERS = """
import multiprocessing, os, sys, time
import pipetel.multiprocess
from pipetel.telefuser import get_metrics_registry

def work(rank, steps, ready, go):
    pipetel.multiprocess.init("mp-train", interval=0.2)
    steps_done = get_metrics_registry("train").counter("steps", "Steps", labels={"rank": str(rank % 2)})
    for _ in range(steps):
        steps_done.inc()
    ready.put(rank)
    go.wait(120)

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    ready, go = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=work, args=(rank, 10 * (rank + 1), ready, go), daemon=True) for rank in range(3)]
    for p in procs:
        p.start()
    print("ready", sorted(ready.get(timeout=60) for _ in procs), flush=True)
    sys.stdin.readline()
    go.set()
    for p in procs:
        p.join()
    print("exit codes", [p.exitcode for p in procs], flush=True)
"""


def test_multiprocessing_workers_share_one_endpoint(tmp_path):
    metrics_port = peers.free_port()
    script = tmp_path / "train.py"
    script.write_text(WORKERS)
    env = server_env(tmp_path, metrics_port)
    proc = subprocess.Popen(
        [sys.executable, str(script)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        ready = proc.stdout.readline()
        assert ready.strip() == "ready [0, 1, 2]", ready

        def exact():
            v = values(scrape(metrics_port))
            return v if (v.get("train_steps_total{rank=0}"), v.get("train_steps_total{rank=1}")) == (40, 20) else None

        peers.wait_until("train_steps_total by rank", exact, 30)
        proc.stdin.write("\n")
        proc.stdin.flush()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            # Let the workers go (they wait for the parent's signal), then make sure all ended.
            try:
                proc.communicate("\n", timeout=30)
            except (subprocess.TimeoutExpired, OSError, ValueError):
                pass
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "exit codes [0, 0, 0]" in out, err
    assert "Address already in use" not in err
    # After every worker exited, their files still hold the totals.
    from pipetel.multiprocess import merged_page

    v = values(merged_page(str(tmp_path / "metrics")))
    assert (v["train_steps_total{rank=0}"], v["train_steps_total{rank=1}"]) == (40, 20)


def test_a_dead_workers_counters_stay_and_its_gauges_go(tmp_path):
    from pipetel import Envelope
    from pipetel.multiprocess import merged_page, page_snapshots

    page = """# HELP jobs_total Jobs
# TYPE jobs_total counter
jobs_total{queue="a"} 5
# TYPE busy gauge
busy 1
# TYPE latency_seconds histogram
latency_seconds_bucket{le="0.5"} 2
latency_seconds_bucket{le="+Inf"} 3
latency_seconds_sum 2.5
latency_seconds_count 3
# TYPE rpc summary
rpc{quantile="0.5"} 0.2
rpc_sum 4
rpc_count 8
"""
    host = __import__("socket").gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    sources = {f"{host}-{os.getpid()}-1": "live", f"{host}-{int(dead.stdout)}-1": "dead", f"otherhost-{os.getpid()}-1": "other"}
    for source in sources:
        (tmp_path / f"{source}.envelope").write_bytes(Envelope(source, 1, page_snapshots(page)).encode())
    v = values(merged_page(str(tmp_path)))
    # Counters, histograms and summary sums: every worker, dead or on another host.
    assert v["jobs_total{queue=a}"] == 15
    assert (v["latency_seconds_bucket{le=0.5}"], v["latency_seconds_bucket{le=+Inf}"]) == (6, 9)
    assert (v["latency_seconds_sum{}"], v["latency_seconds_count{}"]) == (7.5, 9)
    assert (v["rpc_sum{}"], v["rpc_count{}"]) == (12, 24)
    # Gauges: live workers of this host only; quantiles cannot be summed and are left out.
    assert v["busy{}"] == 1
    assert not any(k.startswith("rpc{") for k in v)


def test_prometheus_scrapes_gunicorn_workers_as_one_target_without_resets(tmp_path, prometheus):
    app_port, metrics_port = peers.free_port(), peers.free_port()
    argv = [str(BIN / "gunicorn"), "-c", "mp_gunicorn_conf.py", "-w", "2", "-b", f"127.0.0.1:{app_port}"]
    argv += ["--max-requests", "10", "mp_app:wsgi"]
    server = Server(argv, server_env(tmp_path, metrics_port), tmp_path)
    try:
        wait_until_serving(server, app_port, metrics_port)
        prometheus.scrape(f"127.0.0.1:{metrics_port}")
        prometheus.wait_until_up()
        total = 1
        for _ in range(3):  # requests across several scrapes and worker restarts
            for _ in range(20):
                get(app_port, "/hello")
                total += 1
            time.sleep(1.5)
        prometheus.wait_for_value('app_requests_total{route="/hello"}', total, timeout=30)
        # One target, every worker in it, no counter reset ever seen across the restarts.
        assert prometheus.query('resets(app_requests_total{route="/hello"}[5m])')[0].value == 0
        assert prometheus.query('count(app_workers_up)')[0].value == 1
        assert len(list((tmp_path / "metrics").glob("*.envelope"))) > 2
        page = tmp_path / "page.txt"
        page.write_text(scrape(metrics_port))
        promtool = os.environ.get("PIPETEL_PROMTOOL_BIN") or "promtool"
        if shutil.which(promtool):
            lint = subprocess.run([promtool, "check", "metrics"], input=page.read_text(), capture_output=True, text=True)
            assert lint.returncode == 0, lint.stdout + lint.stderr
    finally:
        server.stop()
