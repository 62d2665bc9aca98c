//! The owner's limits on what one source may hold, and reports built to make ingesting slow.
//! The times of the 1 MiB reports are printed (not asserted); docs/src/reliability.md records
//! them with `cargo test --release -p pipetel --lib pipeline::remote::tests -- --nocapture`.

use std::time::Instant;

use pipetel_recorders::{Envelope, Gauge};

use super::*;

const STAGE: &str = "s";
const EXEC: &str = "e";

/// A report from `source` of shards `indexes`, each with `items` items and counters
/// `key0..key{keys}` of 1 each.
fn report_of(source: &str, sequence: u64, indexes: impl Iterator<Item = u32>, items: u64, keys: usize) -> Envelope {
    let figures = Gauge::new(shard_family()).expect("family");
    let counters = Gauge::new(counter_family()).expect("family");
    for index in indexes {
        let i = index.to_string();
        for (field, value) in [("items", items as f64), ("bytes", 0.0), ("state", 1.0), ("attempts", 1.0)] {
            figures.set(&[STAGE, EXEC, &i, field], value).expect("set");
        }
        for k in 0..keys {
            counters.set(&[STAGE, EXEC, &i, &format!("key{k}"), "int"], 1.0).expect("set");
        }
    }
    Envelope::new(source, sequence, vec![figures.snapshot(), counters.snapshot()])
}

fn decode_and_ingest(bytes: &[u8], into: &mut RemoteShards) -> Result<RemoteIngested, RemoteReportError> {
    ingest_bytes(STAGE, EXEC, bytes, into)
}

fn timed<T>(what: &str, bytes: &[u8], f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    eprintln!("{what}: {} bytes in {:.3} ms", bytes.len(), started.elapsed().as_secs_f64() * 1e3);
    out
}

fn items(into: &RemoteShards) -> u64 {
    into.shards.values().map(|s| s.items).sum()
}

#[test]
fn the_shard_cap_counts_what_a_source_holds_over_all_its_reports() {
    let n = MAX_SHARDS_PER_SOURCE as u32;
    let mut into = RemoteShards::default();
    let first = report_of("w", 1, 0..n, 2, 0);
    assert_eq!(ingest(STAGE, EXEC, &first, &mut into), Ok(RemoteIngested::Accepted));
    for (sequence, range) in [(2, n..2 * n), (3, 2 * n..3 * n)] {
        let disjoint = report_of("w", sequence, range, 2, 0);
        let err = ingest(STAGE, EXEC, &disjoint, &mut into).expect_err("past the cap");
        assert_eq!(err, RemoteReportError::Limit { from: "w".into(), why: "more than 65536 shards from one source" });
        assert!(err.to_string().contains("\"w\""), "{err}");
    }
    assert_eq!(into.shards.len(), MAX_SHARDS_PER_SOURCE);
    assert_eq!(items(&into), 2 * u64::from(n));
    // A later report of the same shards replaces them: the source still holds 65,536.
    let again = report_of("w", 4, 0..n, 3, 0);
    assert_eq!(ingest(STAGE, EXEC, &again, &mut into), Ok(RemoteIngested::Accepted));
    assert_eq!(items(&into), 3 * u64::from(n));
    // Another source has its own allowance.
    let other = report_of("x", 1, 0..1, 5, 0);
    assert_eq!(ingest(STAGE, EXEC, &other, &mut into), Ok(RemoteIngested::Accepted));
    assert_eq!(items(&into), 3 * u64::from(n) + 5);
}

#[test]
fn the_counter_series_cap_counts_what_a_source_holds_over_all_its_reports() {
    let shards = (MAX_COUNTER_SERIES_PER_SOURCE / MAX_COUNTER_KEYS_PER_SHARD) as u32;
    let mut into = RemoteShards::default();
    let full = report_of("w", 1, 0..shards, 1, MAX_COUNTER_KEYS_PER_SHARD);
    assert_eq!(ingest(STAGE, EXEC, &full, &mut into), Ok(RemoteIngested::Accepted));
    let one_more = report_of("w", 2, shards..shards + 1, 1, 1);
    let err = ingest(STAGE, EXEC, &one_more, &mut into).expect_err("past the cap");
    assert_eq!(
        err,
        RemoteReportError::Limit { from: "w".into(), why: "more than 262144 counter series from one source" }
    );
    let held: usize = into.shards.values().map(|s| s.counters.len()).sum();
    assert_eq!((into.shards.len(), held), (shards as usize, MAX_COUNTER_SERIES_PER_SOURCE));
}

#[test]
fn a_report_of_more_counter_series_than_allowed_is_refused_before_they_are_read() {
    // One key per shard over more shards than the counter cap: the snapshot's length decides.
    let n = MAX_COUNTER_SERIES_PER_SOURCE as u32 + 1;
    let wide = report_of("w", 1, 0..1, 1, 0);
    let counters = Gauge::new(counter_family()).expect("family");
    for i in 0..n {
        counters.set(&[STAGE, EXEC, &i.to_string(), "k", "int"], 1.0).expect("set");
    }
    let wide = Envelope::new("w", 1, vec![wide.snapshots[0].clone(), counters.snapshot()]);
    let mut into = RemoteShards::default();
    let err = ingest(STAGE, EXEC, &wide, &mut into).expect_err("too many");
    assert_eq!(
        err,
        RemoteReportError::Limit { from: "w".into(), why: "more than 262144 counter series from one source" }
    );
    assert!(into.shards.is_empty() && into.sequences.is_empty());
}

#[test]
fn a_mebibyte_of_counter_keys_for_one_shard_is_refused_naming_the_shard() {
    // Before the cap, summing each key scanned all earlier keys of the shard.
    let keys = (1 << 20) / 24;
    let bytes = report_of("w", 1, 0..1, 1, keys).encode();
    assert!(bytes.len() >= 1 << 20, "{} bytes", bytes.len());
    let mut into = RemoteShards::default();
    let err = timed(&format!("1 MiB report, one shard of {keys} counter keys"), &bytes, || {
        decode_and_ingest(&bytes, &mut into)
    })
    .expect_err("too many keys");
    match &err {
        RemoteReportError::Series { from, labels, why, .. } => {
            assert_eq!((from.as_str(), labels[2].as_str()), ("w", "0"));
            assert_eq!(*why, "more than 1024 counter keys for one shard");
        }
        other => panic!("unexpected {other}"),
    }
    assert!(into.shards.is_empty());
}

#[test]
fn a_mebibyte_of_counter_keys_over_many_shards_is_summed_exactly() {
    let (shards, keys) = (42u32, 1000usize);
    let bytes = report_of("w", 1, 0..shards, 7, keys).encode();
    assert!(bytes.len() >= 1 << 20, "{} bytes", bytes.len());
    let mut into = RemoteShards::default();
    let outcome = timed(&format!("1 MiB report, {shards} shards of {keys} counter keys"), &bytes, || {
        decode_and_ingest(&bytes, &mut into)
    });
    assert_eq!(outcome, Ok(RemoteIngested::Accepted));
    assert_eq!(items(&into), 7 * u64::from(shards));
    let mut totals = crate::pipeline::keys::CounterSums::default();
    for s in into.shards.values() {
        for (k, v) in s.counters.iter() {
            totals.add(k, *v);
        }
    }
    assert_eq!(totals.len(), keys);
    assert!(totals.iter().all(|(_, v)| *v == CounterValue::Int(i64::from(shards))));
}
