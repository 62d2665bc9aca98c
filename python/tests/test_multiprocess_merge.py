"""The multiprocess merge done by the core's exposition code (pipetel._pipetel._read_page,
_page_snapshots, _merged_page): the merged page reads, under prometheus_client's own parser, as
the workers' pages summed, whatever the label values hold; summary quantiles are left out."""

import os
import socket
import threading
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

import pipetel.multiprocess as mp
from pipetel import _pipetel
from pipetel.recorders import Counter, Envelope, Family

HOSTILE = [
    "back\\slash",
    'a "quoted" value',
    "two\nlines",
    'x"} 1\nevil_total 1\n# TYPE evil gauge\nevil{a="\\',
    "trailing backslash \\",
    "\\n is not a newline",
    "ünïcode ☃ }{,=",
    "",
]


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def worker_page() -> str:
    lines = ["# HELP jobs_total Jobs \\\\ done", "# TYPE jobs_total counter"]
    lines += [f'jobs_total{{path="{escape(v)}",queue="q"}} {i + 1}' for i, v in enumerate(HOSTILE)]
    lines += ["# TYPE busy gauge"] + [f'busy{{path="{escape(v)}"}} {i + 0.5}' for i, v in enumerate(HOSTILE)]
    return "\n".join(lines) + "\n"


def parsed(text: str) -> dict:
    """prometheus_client's reading of a page: (family, type, help) -> {(sample, labels): value}."""
    out: dict = {}
    for family in text_string_to_metric_families(text):
        samples = out.setdefault((family.name, family.type, family.documentation), {})
        for s in family.samples:
            samples[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if v != "")))] = s.value
    return out


def write_worker(directory: Path, source: str, page: str) -> None:
    (directory / f"{source}.envelope").write_bytes(Envelope(source, 1, mp.page_snapshots(page)).encode())


def private_dir(tmp_path: Path) -> Path:
    d = tmp_path / "metrics"
    d.mkdir(mode=0o700)
    return d


def live_source() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-1"


def test_hostile_label_values_read_back_as_prometheus_client_reads_them(tmp_path):
    page = worker_page()
    # The worker's page, read by the core, is what prometheus_client reads.
    ours = {(s, tuple(sorted((k, v) for k, v in labels.items() if v != ""))): value for s, _, _, _, labels, value in mp.read_page(page)}
    theirs = {k: v for samples in parsed(page).values() for k, v in samples.items()}
    assert ours == theirs
    # One live worker: the merged page is the worker's page, to prometheus_client's parser.
    d = private_dir(tmp_path)
    write_worker(d, live_source(), page)
    merged = mp.merged_page(str(d))
    assert parsed(merged) == parsed(page), merged
    values = {s.labels["path"] for f in text_string_to_metric_families(merged) for s in f.samples if "path" in s.labels}
    assert values == set(HOSTILE) - {""}
    # No hostile value added a line: every line is a comment or a sample of the two families.
    assert all(line.startswith(("# ", "jobs_total", "busy")) for line in merged.splitlines()), merged
    assert len(merged.splitlines()) == 3 + 2 * len(HOSTILE)


def test_two_workers_sum_under_prometheus_client_and_a_dead_ones_gauges_go(tmp_path):
    d = private_dir(tmp_path)
    page = worker_page()
    write_worker(d, live_source(), page)
    write_worker(d, "otherhost-1-1", page)  # another host: counted, its gauges not
    got = parsed(mp.merged_page(str(d)))
    want = parsed(page)
    for (name, kind, help_), samples in want.items():
        factor = 2 if kind == "counter" else 1
        assert got[(name, kind, help_)] == {k: v * factor for k, v in samples.items()}, name


def test_a_summary_is_merged_without_its_quantiles(tmp_path):
    page = (
        "# HELP rpc_seconds RPC latency\n# TYPE rpc_seconds summary\n"
        'rpc_seconds{method="get",quantile="0.5"} 0.2\nrpc_seconds{method="get",quantile="0.99"} 0.9\n'
        'rpc_seconds_sum{method="get"} 4.5\nrpc_seconds_count{method="get"} 8\nrpc_seconds_created{method="get"} 1.7e9\n'
    )
    d = private_dir(tmp_path)
    write_worker(d, live_source(), page)
    write_worker(d, "otherhost-1-1", page)
    merged = mp.merged_page(str(d))
    assert "quantile" not in merged and "_created" not in merged, merged
    families = list(text_string_to_metric_families(merged))
    assert [(f.name, f.type, f.documentation) for f in families] == [("rpc_seconds", "summary", "RPC latency")]
    assert [(s.name, s.labels, s.value) for s in families[0].samples] == [
        ("rpc_seconds_sum", {"method": "get"}, 9.0),
        ("rpc_seconds_count", {"method": "get"}, 16.0),
    ]


def test_files_that_are_not_envelopes_or_hold_foreign_names_are_skipped(tmp_path, caplog):
    d = private_dir(tmp_path)
    (d / "garbage.envelope").write_bytes(b"not an envelope at all")
    fam = Family.counter("dotted.name", "", "counter:dotted.name", [])
    c = Counter(fam)
    c.inc([], 1)
    (d / "foreign.envelope").write_bytes(Envelope("otherhost-1-2", 1, [c.snapshot()]).encode())
    write_worker(d, live_source(), "# TYPE ok_total counter\nok_total 2\n")
    with caplog.at_level("WARNING", logger="pipetel.multiprocess"):
        page = mp.merged_page(str(d))
    assert page == "# TYPE ok_total counter\nok_total 2\n"
    assert "foreign.envelope" in caplog.text and "garbage" not in caplog.text


def test_the_merge_asks_whether_each_source_lives_and_lets_other_threads_run():
    snaps = mp.page_snapshots("# TYPE g gauge\ng 1\n# TYPE c counter\nc 1\n")
    files = [Envelope(f"h-{i}-1", 1, snaps).encode() for i in range(3)]
    asked = []

    def live(source: str) -> bool:
        asked.append(source)
        return source != "h-1-1"

    page, undecodable, invalid = _pipetel._merged_page(files + [b"junk"], live)
    assert asked == ["h-0-1", "h-1-1", "h-2-1"]
    assert (undecodable, invalid) == ([3], [])
    assert page == "# TYPE c counter\nc 3\n# TYPE g gauge\ng 2\n"
    # A large merge runs without the GIL: a Python thread keeps counting meanwhile.
    big = "# TYPE n counter\n" + "".join(f'n{{i="{i}"}} 1\n' for i in range(100_000))
    blob = Envelope("h-0-1", 1, mp.page_snapshots(big)).encode()
    ticks = [0]
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0)

    t = threading.Thread(target=count)
    t.start()
    try:
        before = ticks[0]
        start = time.monotonic()
        page, _, _ = _pipetel._merged_page([blob] * 4, lambda s: True)
        elapsed = time.monotonic() - start
        during = ticks[0] - before
    finally:
        stop.set()
        t.join()
    assert page.count("\n") == 100_001
    assert elapsed < 0.05 or during > 0, (elapsed, during)
