import pathlib
from typing import Callable, Iterator, List, TypeVar

import pytest

import peers

REPO = pathlib.Path(__file__).resolve().parents[2]
VECTORS = REPO / "crates" / "pipetel-recorders" / "tests" / "vectors"

T = TypeVar("T")


@pytest.fixture
def vectors() -> pathlib.Path:
    return VECTORS


# Tests skipped for a missing peer, listed again at the end of the run so the skip is not missed.
_SKIPPED_FOR_PEERS: List[str] = []


def _missing(request: pytest.FixtureRequest, e: peers.PeerMissing) -> None:
    """The one rule (as in ``tests/support/peers.rs``): fails the test for a missing peer under
    PIPETEL_REQUIRE_PEERS=1, skips it loudly otherwise."""
    if peers.peers_required():
        pytest.fail(f"PIPETEL_REQUIRE_PEERS=1 and {e}", pytrace=False)
    _SKIPPED_FOR_PEERS.append(f"{request.node.nodeid}: {e}")
    pytest.skip(f"{e} (PIPETEL_REQUIRE_PEERS=1 makes a missing peer a failure)")


def _peer(
    request: pytest.FixtureRequest, name: str, start: Callable[[pathlib.Path], T], workdir: pathlib.Path
) -> Iterator[T]:
    """Starts a peer for one test, remembers it on the test item so a failing test's report
    shows its output, and stops it after the test."""
    try:
        peer = start(workdir)
    except peers.PeerMissing as e:
        _missing(request, e)
    attached: List = getattr(request.node, "_pipetel_peers", [])
    attached.append((name, peer))
    request.node._pipetel_peers = attached
    try:
        yield peer
    finally:
        peer.stop()


@pytest.fixture
def collector(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[peers.Collector]:
    """A running real OpenTelemetry Collector (OTLP gRPC + HTTP in, decoded JSON out)."""
    yield from _peer(request, "collector", peers.start_collector, tmp_path / "otelcol")


@pytest.fixture
def prometheus(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[peers.Prometheus]:
    """A running real Prometheus scraping every second; add targets with ``.scrape(host_port)``."""
    yield from _peer(request, "prometheus", peers.start_prometheus, tmp_path / "prometheus")


@pytest.fixture
def victoria_logs(request: pytest.FixtureRequest, tmp_path: pathlib.Path) -> Iterator[peers.VictoriaLogs]:
    """A running real VictoriaLogs (the fleet's rows store); its base URL is ``.url``."""
    yield from _peer(request, "victoria-logs", peers.start_victoria_logs, tmp_path / "victoria-logs")


@pytest.fixture
def stores_gateway(
    request: pytest.FixtureRequest, tmp_path: pathlib.Path, victoria_logs: peers.VictoriaLogs
) -> Iterator[peers.StoresGateway]:
    """A real collector running ``gateway-stores.yaml``, its rows going to ``victoria_logs``."""

    def start(workdir: pathlib.Path) -> peers.StoresGateway:
        return peers.StoresGateway(peers.peer_binary("PIPETEL_OTELCOL_BIN", None), workdir, victoria_logs.url)

    yield from _peer(request, "gateway-stores", start, tmp_path / "gateway")


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


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Lists, past pytest's short skip summary, every test skipped for a missing peer and how to get it."""
    if _SKIPPED_FOR_PEERS:
        terminalreporter.section("SKIPPED for a missing peer", sep="!", red=True, bold=True)
        for line in _SKIPPED_FOR_PEERS:
            terminalreporter.line(line)
        terminalreporter.line("PIPETEL_REQUIRE_PEERS=1 makes a missing peer a failure.")
