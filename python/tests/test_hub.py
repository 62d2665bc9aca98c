"""A Python SnapshotHub fed by Python worker processes (python/tests/hub_worker.py) over their
stdout pipes: exact merged totals across several workers, one of them killed and restarted with
its sequence starting again, and clear errors for bad input."""

import io
import pathlib
import subprocess
import sys

import pytest

import pipetel
from pipetel import mstar

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import hub_worker  # noqa: E402

WORKER = pathlib.Path(__file__).parent / "hub_worker.py"


def spawn(source: str, index: int, steps: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(WORKER), "--source", source, "--index", str(index), "--steps", str(steps)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def by_family(snapshots):
    return {s.name: s for s in snapshots}


def test_python_workers_feed_a_python_hub_with_exact_totals_across_a_restart():
    hub = pipetel.SnapshotHub(stale_after=600)
    runs = [(0, 12), (1, 5), (2, 12), (1, 12)]  # worker 1 ran 5 steps, died, ran again from 1
    reports = []
    # Workers 0 and 2 and the first run of worker 1 side by side, each pipe on a Rust thread.
    procs = [spawn(f"w{i}", i, steps) for i, steps in runs[:3]]
    readers = [hub.spawn_reader(p.stdout) for p in procs]
    for p, r in zip(procs, readers):
        reports.append(r.join())
        assert p.wait(timeout=30) == 0, p.stderr.read().decode()
        p.stdout.close()
        p.stderr.close()
    # The restarted worker 1 on a new pipe, read on this thread (GIL released).
    again = spawn("w1", 1, 12)
    reports.append(hub.read_stream(again.stdout))
    assert again.wait(timeout=30) == 0
    again.stdout.close()
    again.stderr.close()

    assert [(r.received, r.accepted, r.refused, r.error) for r in reports] == [
        (12, 12, 0, None),
        (5, 5, 0, None),
        (12, 12, 0, None),
        (12, 12, 0, None),
    ]
    assert [r.restarts for r in reports] == [0, 0, 0, 1]
    assert [(s.source, s.sequence, s.restarts, s.stale) for s in hub.sources()] == [
        ("w0", 12, 0, False),
        ("w1", 12, 1, False),
        ("w2", 12, 0, False),
    ]

    want = hub_worker.expected(runs)
    got = by_family(hub.snapshot())
    items = got["pipeline.stage.items"]
    assert items.get(["tokenize"]) == want["tokenize"] == 10 * 12 + 20 * 17 + 30 * 12
    assert items.get(["embed"]) == want["embed"] == 3 * 41
    latency = got["task.duration"]
    assert latency.bucket_counts == [[sum(1 for _, s in runs for i in range(1, s + 1) if 0.25 * (i % 5) <= b) for b in (0.1, 0.5, 1.0)] + [want["latency_count"]]]
    assert latency.sums == [pytest.approx(want["latency_sum"], abs=0)]
    transfer_bytes = got["pipeline.transfer.bytes"]
    assert sum(transfer_bytes.values) == want["bytes"]
    assert transfer_bytes.get(["gpu1", "gpu9", "nccl"]) == 1000 * (15 + 78)
    assert sum(got["pipeline.transfer.count"].values) == want["transfers"] == 41
    # Gauges: the latest value of each live source (not carried across a restart).
    queue = got["worker.queue.depth"]
    assert sorted(zip(queue.label_values, queue.values)) == [(["w0"], 12.0), (["w1"], 12.0), (["w2"], 12.0)]


def test_frames_from_the_shared_vectors_and_from_python_read_alike(vectors):
    data = bytes.fromhex((vectors / "python_frames.hex").read_text().strip())
    hub = pipetel.SnapshotHub()
    report = hub.read_stream(data)
    assert report.error is None and report.refused == 0 and report.received >= 1
    envelopes = list(mstar.read_frames(io.BytesIO(data)))
    assert len(envelopes) == report.received
    again = pipetel.SnapshotHub()
    for e in envelopes:
        again.ingest(e)
    assert [s.values for s in again.snapshot()] == [s.values for s in hub.snapshot()]


def test_ingest_outcomes_and_errors_name_the_culprit():
    hub = pipetel.SnapshotHub()
    c = mstar.Counter(hub_worker.ITEMS)
    c.inc(["tokenize"], 5)
    first = mstar.Envelope("w", 1, [c.snapshot()])
    assert hub.ingest_bytes(first.encode()) == "accepted"
    assert hub.ingest(first) == "duplicate"
    c.inc(["tokenize"])
    assert hub.ingest(mstar.Envelope("w", 3, [c.snapshot()])) == "accepted"
    assert hub.ingest(mstar.Envelope("w", 2, [c.snapshot()])) == "superseded"
    fresh = mstar.Counter(hub_worker.ITEMS)
    fresh.inc(["tokenize"], 1)
    assert hub.ingest(mstar.Envelope("w", 1, [fresh.snapshot()]), new_stream=True) == "restarted"
    assert hub.snapshot()[0].get(["tokenize"]) == 7.0

    with pytest.raises(pipetel.DecodeError):
        hub.ingest_bytes(b"\x00garbage")
    clash = mstar.Counter(mstar.Family.counter("pipeline.stage.items", "Items", "By", ["pipeline.stage.name"]))
    clash.inc(["x"])
    with pytest.raises(pipetel.HubError, match="pipeline.stage.items"):
        hub.ingest(mstar.Envelope("other", 1, [clash.snapshot()]))
    assert issubclass(pipetel.HubError, pipetel.PipetelError)

    with pytest.raises(ValueError, match="stale_after"):
        pipetel.SnapshotHub(stale_after=float("nan"))
    with pytest.raises(ValueError, match="histograms"):
        pipetel.SnapshotHub(histograms="native")
    with pytest.raises(TypeError, match="stream must be"):
        hub.read_stream("not a stream")
    with pytest.raises(ValueError, match="file descriptor -1"):
        hub.read_stream(-1)
    small = pipetel.SnapshotHub(max_sources=1)
    small.ingest(first)
    with pytest.raises(pipetel.HubError, match="refused"):
        small.ingest(mstar.Envelope("second", 1, [c.snapshot()]))


def test_a_broken_stream_ends_the_reader_with_the_error():
    c = mstar.Counter(hub_worker.ITEMS)
    c.inc(["tokenize"], 2)
    frame = mstar.Envelope("w", 1, [c.snapshot()]).encode_frame()
    report = pipetel.SnapshotHub().read_stream(frame + frame[:7])
    assert (report.received, report.accepted) == (1, 1)
    assert report.error == "stream ended inside a frame: 3 of 94 bytes of the payload"
    with pytest.raises(pipetel.DecodeError, match="stream ended inside a frame: 3 of 94 bytes of the payload"):
        list(mstar.read_frames(io.BytesIO(frame + frame[:7])))
