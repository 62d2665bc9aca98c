"""Byte compatibility with the Rust codec, through vectors shared with
crates/pipetel-recorders/tests/shared_vectors.rs."""

import os

import pipetel


def recorded() -> pipetel.Envelope:
    # Keep in step with `recorded()` in shared_vectors.rs.
    items = pipetel.Family.counter("worker.items", "Items processed", "{item}", ["stage"])
    depth = pipetel.Family.gauge("worker.queue.depth", "Queue depth", "{task}")
    latency = pipetel.Family.histogram(
        "worker.task.duration", "Task duration", "s", ["stage"], [0.01, 0.1, 1.0]
    )
    counter = pipetel.recorders.Counter(items)
    counter.inc(["tokenize"], 128.0)
    counter.inc(["detokenize"])
    counter.inc(["tokenize"], amount=0.5)
    gauge = pipetel.recorders.Gauge(depth)
    gauge.set([], 3.5)
    histogram = pipetel.recorders.Histogram(latency)
    for v in (0.042, 0.5, 2.0, 0.005):
        histogram.observe(["tokenize"], v)
    edges = pipetel.EdgeTransfers("nccl")
    edges.record("gpu0", "gpu1", 4096, 2, 0.25)
    edges.record("gpu0", "gpu1", 1024, 1, 0.125)
    edges.record("gpu1", "gpu0", 10, 1, 0.0)
    snapshots = [counter.snapshot(), gauge.snapshot(), histogram.snapshot(), *edges.snapshot()]
    return pipetel.Envelope("worker-7", 42, snapshots)


def python_worker_frames() -> bytes:
    """A worker that sends two cumulative envelopes as frames, as over a pipe."""
    items = pipetel.Family.counter("worker.items", "Items processed", "{item}", ["stage"])
    counter = pipetel.recorders.Counter(items)
    counter.inc(["tokenize"], 100)
    counter.inc(["detokenize"])
    out = pipetel.Envelope("py-worker", 1, [counter.snapshot()]).encode_frame()
    counter.inc(["tokenize"], 200)
    counter.inc(["detokenize"])
    out += pipetel.Envelope("py-worker", 2, [counter.snapshot()]).encode_frame()
    return out


def test_python_recording_encodes_to_the_rust_vector(vectors):
    committed = (vectors / "envelope_v1.hex").read_text().strip()
    assert recorded().encode().hex() == committed


def test_rust_vector_decodes_to_the_recorded_totals(vectors):
    envelope = pipetel.Envelope.decode(bytes.fromhex((vectors / "envelope_v1.hex").read_text()))
    assert envelope == recorded()
    assert (envelope.source, envelope.sequence) == ("worker-7", 42)
    names = [s.name for s in envelope.snapshots]
    assert names[:3] == ["worker.items", "worker.queue.depth", "worker.task.duration"]
    items, depth, latency = envelope.snapshots[:3]
    assert items.label_values == [["detokenize"], ["tokenize"]]
    assert items.values == [1.0, 128.5]
    assert depth.values == [3.5]
    assert latency.bucket_counts == [[1, 2, 3, 4]]
    assert latency.sums == [0.042 + 0.5 + 2.0 + 0.005]
    edge_bytes = envelope.snapshots[3]
    assert edge_bytes.name == "pipeline.transfer.bytes"
    assert edge_bytes.label_values == [["gpu0", "gpu1", "nccl"], ["gpu1", "gpu0", "nccl"]]
    assert edge_bytes.values == [5120.0, 10.0]


def test_python_worker_frames_match_the_vector_rust_reads(vectors):
    path = vectors / "python_frames.hex"
    frames = python_worker_frames()
    if os.environ.get("PIPETEL_UPDATE_VECTORS"):
        path.write_text(frames.hex() + "\n")
    assert frames.hex() == path.read_text().strip()
