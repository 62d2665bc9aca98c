//! Byte vectors shared with the Python package's tests (`python/tests/test_vectors.py`): the
//! same recordings, made here in Rust and there through the Python bindings, must encode to the
//! committed bytes in `tests/vectors/`, and those bytes must decode to the same totals. A codec
//! change that alters the bytes fails here and in Python until the vector is regenerated with
//! `PIPETEL_UPDATE_VECTORS=1 cargo test -p pipetel-recorders --test shared_vectors`.

use std::path::PathBuf;

use pipetel_recorders::{Counter, EdgeTransfers, Envelope, Family, FrameReader, Gauge, Histogram};

fn vector_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("vectors").join(name)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    let text = text.trim();
    assert!(text.len() % 2 == 0, "odd hex length");
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit")).collect()
}

/// The recording both languages make (keep in step with `python/tests/test_vectors.py`).
fn recorded() -> Envelope {
    let items = Family::counter("worker.items", "Items processed", "{item}", &["stage"]).expect("family");
    let depth = Family::gauge("worker.queue.depth", "Queue depth", "{task}", &[]).expect("family");
    let latency =
        Family::histogram("worker.task.duration", "Task duration", "s", &["stage"], &[0.01, 0.1, 1.0]).expect("family");
    let counter = Counter::new(items).expect("counter");
    counter.add(&["tokenize"], 128.0).expect("add");
    counter.inc(&["detokenize"]).expect("inc");
    counter.add(&["tokenize"], 0.5).expect("add");
    let gauge = Gauge::new(depth).expect("gauge");
    gauge.set(&[], 3.5).expect("set");
    let histogram = Histogram::new(latency).expect("histogram");
    for v in [0.042, 0.5, 2.0, 0.005] {
        histogram.observe(&["tokenize"], v).expect("observe");
    }
    let mut edges = EdgeTransfers::new("nccl");
    let (gpu0, gpu1) = (edges.endpoint("gpu0"), edges.endpoint("gpu1"));
    edges.record(gpu0, gpu1, 4096, 2, 0.25);
    edges.record(gpu0, gpu1, 1024, 1, 0.125);
    edges.record(gpu1, gpu0, 10, 1, 0.0);
    let mut snapshots = vec![counter.snapshot(), gauge.snapshot(), histogram.snapshot()];
    snapshots.extend(edges.snapshot());
    Envelope::new("worker-7", 42, snapshots)
}

#[test]
fn rust_recording_encodes_to_the_committed_vector() {
    let bytes = recorded().encode();
    let path = vector_path("envelope_v1.hex");
    if std::env::var_os("PIPETEL_UPDATE_VECTORS").is_some() {
        std::fs::write(&path, hex(&bytes) + "\n").expect("write vector");
    }
    let committed = std::fs::read_to_string(&path).expect("read tests/vectors/envelope_v1.hex");
    assert_eq!(hex(&bytes), committed.trim(), "the encoding changed; see the module docs");
}

#[test]
fn committed_vectors_decode_to_the_recorded_totals() {
    // envelope_v1.hex is the Rust recording; python_frames.hex is what the Python test suite's
    // worker writes (two frames, sequence 1 then 2) through `Envelope.encode_frame`.
    let envelope =
        Envelope::decode(&unhex(&std::fs::read_to_string(vector_path("envelope_v1.hex")).expect("read vector")))
            .expect("decode");
    assert_eq!(envelope, recorded());
    let items = &envelope.snapshots[0];
    assert_eq!(items.get(&["tokenize"]).map(|s| s.value), Some(128.5));
    let hist = &envelope.snapshots[2];
    assert_eq!(hist.get(&["tokenize"]).map(|s| s.bucket_counts.to_vec()), Some(vec![1, 2, 3, 4]));

    let frames = unhex(&std::fs::read_to_string(vector_path("python_frames.hex")).expect("read vector"));
    let mut reader = FrameReader::new(frames.as_slice());
    let first = reader.recv().expect("frame 1").expect("some frame 1");
    let second = reader.recv().expect("frame 2").expect("some frame 2");
    assert!(reader.recv().expect("end").is_none());
    assert_eq!((first.source.as_str(), first.sequence), ("py-worker", 1));
    assert_eq!((second.source.as_str(), second.sequence), ("py-worker", 2));
    assert_eq!(second.snapshots[0].get(&["tokenize"]).map(|s| s.value), Some(300.0));
    assert_eq!(second.snapshots[0].get(&["detokenize"]).map(|s| s.value), Some(2.0));
    assert!(!second.snapshots[0].is_reset_from(&first.snapshots[0]));
}
