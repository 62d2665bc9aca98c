//! The multiprocess directory's reader (`fuzz/multiprocess.rs`, a fuzz target) on stable: worker
//! files shaped as the Python package's `page_snapshots` writes them, and garbage, plus
//! deterministic mutations of each, judged by the same check a fuzzing run makes.

#[path = "../fuzz/multiprocess.rs"]
mod multiprocess;
#[path = "../../pipetel/fuzz/mutate.rs"]
mod mutate;

use std::path::{Path, PathBuf};

use pipetel_recorders::{codec, Counter, Envelope, Family, Gauge};

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/multiprocess_envelope")
}

/// Worker files as `page_snapshots` makes them: one family per sample name, the unit
/// `<type>:<family>`, absent labels empty; and refused ones.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let requests = Counter::new(
        Family::counter("http_requests_total", "Requests", "counter:http_requests", &["code", "method"])
            .expect("valid"),
    )
    .expect("counter");
    requests.inc(&["200", "GET"]).expect("inc");
    requests.add(&["500", ""], 3.0).expect("add");
    let inflight =
        Gauge::new(Family::gauge("inflight", "In flight", "gauge:inflight", &[]).expect("valid")).expect("gauge");
    inflight.set(&[], -1.5).expect("set");
    let bucket = Counter::new(
        Family::counter("latency_seconds_bucket", "", "histogram:latency_seconds", &["le"]).expect("valid"),
    )
    .expect("counter");
    for (le, n) in [("0.1", 2.0), ("1.0", 5.0), ("+Inf", 6.0)] {
        bucket.add(&[le], n).expect("add");
    }
    let source = "host-1234-1700000000000000000";
    let page = Envelope::new(source, 3, vec![requests.snapshot(), inflight.snapshot(), bucket.snapshot()]).encode();
    let empty = Envelope::new(source, 1, vec![]).encode();
    let mut hostile = b"PTRC\x01\x01w\x01\x01\x04wide\x00\x00\x01".to_vec();
    hostile.extend_from_slice(&[0xc8, 0x01]); // 200 label names announced, more than allowed
    hostile.extend(std::iter::repeat_n(b"\x01a".iter().copied(), 200).flatten());
    vec![
        ("valid-page.bin", page.clone()),
        ("valid-empty.bin", empty),
        ("garbage-cut.bin", page[..page.len() / 2].to_vec()),
        ("garbage-too-many-labels.bin", hostile),
    ]
}

#[test]
fn committed_seeds_are_current_and_judged() {
    let dir = corpus_dir();
    if std::env::var_os("PIPETEL_REGENERATE_CORPUS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, bytes) in seeds() {
            std::fs::write(dir.join(name), bytes).expect("write seed");
        }
    }
    for (name, bytes) in seeds() {
        let committed = std::fs::read(dir.join(name)).unwrap_or_default();
        assert_eq!(committed, bytes, "seed {name} is stale: PIPETEL_REGENERATE_CORPUS=1 rewrites it");
        assert_eq!(codec::decode(&bytes).is_ok(), name.starts_with("valid-"), "{name}");
        multiprocess::multiprocess_envelope(&bytes);
    }
}

#[test]
fn seeds_and_their_mutations_pass_the_check() {
    let mut rng = mutate::Rng(0x9e37_79b9_7f4a_7c15);
    let mut cases = 0;
    for (_, seed) in mutate::read_seeds(&corpus_dir()) {
        multiprocess::multiprocess_envelope(&seed);
        mutate::mutations(&seed, &mut rng, 300, 400, |input| {
            cases += 1;
            multiprocess::multiprocess_envelope(input);
        });
    }
    assert!(cases > 2000, "{cases} inputs");
}
