import pathlib
from typing import Callable, Iterator, List

import pytest

import peers

REPO = pathlib.Path(__file__).resolve().parents[2]
VECTORS = REPO / "crates" / "pipetel-recorders" / "tests" / "vectors"


@pytest.fixture
def vectors() -> pathlib.Path:
    return VECTORS


def _missing(e: peers.PeerMissing) -> None:
    """Skips the test for a missing peer, or fails it under PIPETEL_REQUIRE_PEERS=1."""
    if peers.peers_required():
        pytest.fail(f"PIPETEL_REQUIRE_PEERS=1 but {e}", pytrace=False)
    pytest.skip(str(e))


def _attach(request: pytest.FixtureRequest, name: str, peer: object) -> None:
    """Remembers a peer on the test item so a failing test's report shows its output."""
    attached: List = getattr(request.node, "_pipetel_peers", [])
    attached.append((name, peer))
    request.node._pipetel_peers = attached


@pytest.fixture
def collector(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[peers.Collector]:
    """A running real OpenTelemetry Collector (OTLP gRPC + HTTP in, decoded JSON out)."""
    try:
        c = peers.start_collector(tmp_path / "otelcol")
    except peers.PeerMissing as e:
        _missing(e)
    _attach(request, "collector", c)
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def prometheus(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[peers.Prometheus]:
    """A running real Prometheus scraping every second; add targets with ``.scrape(host_port)``."""
    try:
        p = peers.start_prometheus(tmp_path / "prometheus")
    except peers.PeerMissing as e:
        _missing(e)
    _attach(request, "prometheus", p)
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture
def run_example() -> Callable[..., object]:
    """``run_example(path, env=None, *, args=(), timeout=120, check=True)``: runs
    ``python/examples/<path>`` with ``sys.executable`` and returns the completed process."""
    return peers.run_example


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failing test's report carries the output of the peers it ran against."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and report.when in ("setup", "call"):
        for name, peer in getattr(item, "_pipetel_peers", []):
            report.sections.append((f"{name} output (last 60 lines)", peer.process.output(60)))
