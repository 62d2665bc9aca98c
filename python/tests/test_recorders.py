"""The mstar-style recorders: observable totals, merge, edges, envelopes, and errors."""

import math
import threading

import pytest

import pipetel


@pytest.fixture
def items():
    return pipetel.Family.counter("pipeline.stage.items", "Items", "{item}", ["stage"])


def test_counter_accumulates_per_label_set(items):
    c = pipetel.recorders.Counter(items)
    c.inc(["a"])
    c.inc(["a"], 2.5)
    c.inc(["b"], amount=4)
    snap = c.snapshot()
    assert snap.name == "pipeline.stage.items"
    assert snap.label_values == [["a"], ["b"]]
    assert snap.values == [3.5, 4.0]
    assert snap.get(["a"]) == 3.5
    assert snap.get(["zzz"]) is None
    assert len(snap) == 2
    assert c.series_count == 2
    assert snap.family == items


def test_gauge_set_and_add():
    g = pipetel.recorders.Gauge(pipetel.Family.gauge("queue.depth", labels=["q"]))
    g.set(["x"], 5)
    g.add(["x"], -2)
    assert g.snapshot().values == [3.0]


def test_histogram_buckets_are_cumulative_with_inf_last():
    h = pipetel.recorders.Histogram(pipetel.Family.histogram("lat", unit="s", buckets=[0.1, 1.0]))
    for v in (0.05, 0.5, 5.0):
        h.observe([], v)
    snap = h.snapshot()
    assert snap.bucket_counts == [[1, 2, 3]]
    assert snap.sums == [5.55]
    assert snap.values == []
    assert snap.get([]) == 3.0


def test_merge_sums_sources(items):
    a, b = pipetel.recorders.Counter(items), pipetel.recorders.Counter(items)
    a.inc(["x"], 1)
    b.inc(["x"], 2)
    b.inc(["y"], 5)
    total = pipetel.merge(items, [a.snapshot(), b.snapshot()])
    assert total.label_values == [["x"], ["y"]]
    assert total.values == [3.0, 5.0]


def test_merge_of_another_family_is_refused(items):
    other = pipetel.Family.counter("other", labels=["stage"])
    c = pipetel.recorders.Counter(other)
    c.inc(["x"])
    with pytest.raises(pipetel.MergeError):
        pipetel.merge(items, [c.snapshot()])


def test_edge_transfers_totals_and_publish():
    e = pipetel.EdgeTransfers("nccl")
    assert e.latest is None
    e.record("gpu0", "gpu1", 100, 2, 0.5)
    e.record("gpu0", "gpu1", 50, 1, 0.25)
    nbytes, transfers, tensors, seconds = e.snapshot()
    assert nbytes.values == [150.0]
    assert transfers.values == [2.0]
    assert tensors.values == [3.0]
    assert seconds.values == [0.75]
    assert nbytes.label_values == [["gpu0", "gpu1", "nccl"]]
    assert e.publish() == 1
    generation, snaps = e.latest
    assert generation == 1 and snaps[0].values == [150.0]


def test_envelope_round_trip(items):
    c = pipetel.recorders.Counter(items)
    c.inc(["a"], 7)
    env = pipetel.Envelope("w", 3, [c.snapshot()])
    back = pipetel.Envelope.decode(env.encode())
    assert back == env
    assert back.snapshots[0].values == [7.0]
    frame = env.encode_frame()
    assert int.from_bytes(frame[:4], "little") == len(frame) - 4
    assert frame[4:] == env.encode()


def test_snapshot_from_columns_is_validated(items):
    snap = pipetel.MetricSnapshot(items, [["a"], ["b"]], [1.0, 2.0])
    assert snap.values == [1.0, 2.0]
    with pytest.raises(pipetel.SnapshotError):
        pipetel.MetricSnapshot(items, [["b"], ["a"]], [1.0, 2.0])


@pytest.mark.parametrize(
    "call, exc, text",
    [
        (lambda c: c.inc(["a"], -1), pipetel.RecordError, "invalid value -1"),
        (lambda c: c.inc(["a"], math.nan), pipetel.RecordError, "invalid value NaN"),
        (lambda c: c.inc(["a", "b"]), pipetel.RecordError, "takes 1 label values, got 2"),
        (lambda c: c.inc("a"), TypeError, "str"),
        (lambda c: c.inc(["a"], "1"), TypeError, ""),
        (lambda c: c.inc(["a"], colour=1), TypeError, "colour"),
    ],
)
def test_bad_records_raise_clear_errors(items, call, exc, text):
    c = pipetel.recorders.Counter(items)
    with pytest.raises(exc) as info:
        call(c)
    assert text in str(info.value)
    assert c.snapshot().values == []


def test_bad_families_name_the_culprit():
    with pytest.raises(pipetel.FamilyError) as info:
        pipetel.Family.histogram("h", buckets=[1.0, 0.5])
    assert '"h"' in str(info.value)
    with pytest.raises(pipetel.FamilyError):
        pipetel.Family.counter("c", labels=["x", "x"])
    with pytest.raises(ValueError, match="kind"):
        pipetel.Family("c", "summary")


def test_error_hierarchy():
    for name in ("FamilyError", "RecordError", "SnapshotError", "MergeError", "DecodeError", "InternalError", "ThreadError"):
        assert issubclass(getattr(pipetel, name), pipetel.PipetelError)
    assert issubclass(pipetel.PipetelError, Exception)


def test_garbage_bytes_raise_decode_error():
    with pytest.raises(pipetel.DecodeError):
        pipetel.Envelope.decode(b"not an envelope")


def test_recorders_are_per_thread(items):
    c = pipetel.recorders.Counter(items)
    errors = []

    def other_thread():
        try:
            c.inc(["a"])
        except pipetel.ThreadError as e:
            errors.append(e)

    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert len(errors) == 1
    assert "Counter" in str(errors[0]) and "one recorder per thread" in str(errors[0])
    assert c.snapshot().values == []
    del c  # dropping on any thread is fine
