use std::collections::BTreeMap;
use std::io::Cursor;
use std::time::{Duration, Instant};

use opentelemetry::metrics::MeterProvider as _;
use pipetel_recorders::{
    channel, Counter, Envelope, Family, FrameError, FrameWriter, Gauge, Histogram, MetricSnapshot,
};

use super::view::clamp;
use super::*;
use crate::test_exporter::TestExporter;

/// A hub on its own meter provider whose exports the test reads back.
struct Harness {
    hub: SnapshotHub,
    otel: TestExporter,
}

/// name → [(sorted attributes, value)], for one collection.
type Exported = BTreeMap<String, Vec<(Vec<(String, String)>, f64)>>;

impl Harness {
    fn new(config: HubConfig) -> Harness {
        let otel = TestExporter::new();
        let hub = SnapshotHub::with_meter(config, otel.provider.meter("hub-test"));
        Harness { hub, otel }
    }

    /// Collects now and returns what the exporter received, with each metric's unit and
    /// description under `<name>#unit` / `<name>#help`.
    fn collect(&self) -> Exported {
        let mut out = Exported::new();
        for p in self.otel.collect() {
            out.insert(format!("{}#unit", p.name), vec![(vec![("unit".into(), p.unit)], 0.0)]);
            out.insert(format!("{}#help", p.name), vec![(vec![("help".into(), p.description)], 0.0)]);
            out.entry(p.name).or_default().push((p.attrs, p.value));
        }
        for points in out.values_mut() {
            points.sort_by(|a, b| a.0.cmp(&b.0));
        }
        out
    }

    /// The exported total of the series the [`items`] envelopes carry.
    fn exported_items(&self) -> Option<f64> {
        value(&self.collect(), "pipeline.stage.items", &[("stage", "tokenize")])
    }
}

fn value(exported: &Exported, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let mut want: Vec<(String, String)> = labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    want.sort();
    exported.get(name)?.iter().find(|(a, _)| *a == want).map(|(_, v)| *v)
}

fn items_family() -> Family {
    Family::counter("pipeline.stage.items", "Items processed", "{item}", &["stage"]).expect("family")
}

/// An envelope with one counter series `stage=tokenize` at `total`.
fn items(source: &str, sequence: u64, total: f64) -> Envelope {
    let c = Counter::new(items_family()).expect("counter");
    c.add(&["tokenize"], total).expect("add");
    Envelope::new(source, sequence, vec![c.snapshot()])
}

/// A hub (default configuration) that has accepted the [`items`] envelopes `(source,
/// sequence, total)`, in order.
fn fed(envelopes: &[(&str, u64, f64)]) -> Harness {
    let h = Harness::new(HubConfig::default());
    for &(source, sequence, total) in envelopes {
        assert_eq!(h.hub.ingest(items(source, sequence, total)), Ok(Ingested::Accepted), "{source} {sequence}");
    }
    h
}

/// Envelope `(source, sequence, total)` of [`items`], what ingesting it must answer, and the
/// exported total after it.
type Step<'a> = ((&'a str, u64, f64), Ingested, f64);

impl Harness {
    /// Ingests each step's envelope in order, asserting its answer and the exported total.
    fn assert_steps(&self, steps: &[Step<'_>]) {
        for &((source, sequence, total), answer, exported) in steps {
            assert_eq!(self.hub.ingest(items(source, sequence, total)), Ok(answer), "{source} {sequence}");
            assert_eq!(self.exported_items(), Some(exported), "after {source} {sequence}");
        }
    }
}

/// A hub (default configuration) on the global meter, for tests that read only the hub.
fn unexported_hub() -> SnapshotHub {
    SnapshotHub::with_meter(HubConfig::default(), opentelemetry::global::meter("noop"))
}

fn hub_value(hub: &SnapshotHub, family: &str) -> Option<f64> {
    hub.snapshot().iter().find(|s| s.name() == family).and_then(|s| s.series().next().map(|s| s.value))
}

#[test]
fn sums_sources_and_exports_under_the_family_name_unit_and_description() {
    let h = Harness::new(HubConfig::default());
    assert_eq!(h.hub.ingest(items("a", 1, 10.0)), Ok(Ingested::Accepted));
    assert_eq!(h.hub.ingest(items("b", 1, 5.0)), Ok(Ingested::Accepted));
    let out = h.collect();
    assert_eq!(value(&out, "pipeline.stage.items", &[("stage", "tokenize")]), Some(15.0));
    assert_eq!(value(&out, "pipeline.stage.items#unit", &[("unit", "{item}")]), Some(0.0));
    assert_eq!(value(&out, "pipeline.stage.items#help", &[("help", "Items processed")]), Some(0.0));
    // Exports follow later envelopes.
    h.hub.ingest(items("a", 2, 12.0)).expect("ingest");
    assert_eq!(h.exported_items(), Some(17.0));
}

#[test]
fn a_late_envelope_is_ignored() {
    let h = fed(&[("a", 2, 20.0)]);
    h.assert_steps(&[(("a", 1, 10.0), Ingested::Superseded, 20.0)]);
    assert_eq!(h.hub.sources()[0].sequence, 2);
}

#[test]
fn a_repeated_envelope_is_counted_once() {
    let h = fed(&[("a", 1, 10.0)]);
    assert_eq!(h.hub.ingest(items("a", 1, 10.0)), Ok(Ingested::Duplicate));
    assert_eq!(h.hub.ingest_bytes(&items("a", 1, 10.0).encode()), Ok(Ingested::Duplicate));
    assert_eq!(h.exported_items(), Some(10.0));
}

#[test]
fn a_lost_envelope_is_superseded_by_the_next() {
    let h = fed(&[("a", 1, 10.0)]);
    // Sequence 2 (total 20) never arrives.
    h.assert_steps(&[(("a", 3, 30.0), Ingested::Accepted, 30.0)]);
}

#[test]
fn a_restart_with_a_higher_sequence_carries_the_previous_total() {
    let h = fed(&[("a", 5, 50.0), ("b", 1, 7.0)]);
    h.assert_steps(&[(("a", 6, 3.0), Ingested::Restarted, 60.0), (("a", 7, 10.0), Ingested::Accepted, 67.0)]);
    // A second restart stacks on the first.
    assert_eq!(h.hub.ingest(items("a", 8, 1.0)), Ok(Ingested::Restarted));
    assert_eq!(hub_value(&h.hub, "pipeline.stage.items"), Some(68.0));
    let a = &h.hub.sources()[0];
    assert_eq!((a.source.as_str(), a.restarts, a.sequence), ("a", 2, 8));
}

#[test]
fn a_restart_whose_sequence_starts_again_is_recognised_on_a_new_stream() {
    let h = fed(&[("a", 10, 100.0)]);
    // Without the new-stream hint a lower sequence is a late message.
    assert_eq!(h.hub.ingest(items("a", 1, 2.0)), Ok(Ingested::Superseded));
    assert_eq!(hub_value(&h.hub, "pipeline.stage.items"), Some(100.0));
    assert_eq!(h.hub.ingest_on_new_stream(items("a", 1, 2.0)), Ok(Ingested::Restarted));
    assert_eq!(h.exported_items(), Some(102.0));
    assert_eq!(h.hub.ingest(items("a", 2, 4.0)), Ok(Ingested::Accepted));
    assert_eq!(hub_value(&h.hub, "pipeline.stage.items"), Some(104.0));
}

#[test]
fn a_new_stream_without_regression_is_not_a_restart() {
    let hub = unexported_hub();
    hub.ingest(items("a", 10, 100.0)).expect("ingest");
    assert_eq!(hub.ingest_on_new_stream(items("a", 9, 100.0)), Ok(Ingested::Superseded));
    assert_eq!(hub.ingest_on_new_stream(items("a", 10, 100.0)), Ok(Ingested::Duplicate));
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(100.0));
}

#[test]
fn an_undetected_restart_is_recognised_once_its_sequence_passes_the_old_one() {
    let hub = unexported_hub();
    for seq in 1..=5 {
        hub.ingest(items("a", seq, seq as f64 * 10.0)).expect("ingest");
    }
    // Restarted without a new-stream hint: held back (never lost) while its sequence is lower.
    for seq in 1..=4 {
        assert_eq!(hub.ingest(items("a", seq, seq as f64)), Ok(Ingested::Superseded), "seq {seq}");
        assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(50.0));
    }
    // Its sequence meets the old one (a repeat), then passes it: a restart.
    for (seq, answer) in [(5, Ingested::Duplicate), (6, Ingested::Restarted)] {
        assert_eq!(hub.ingest(items("a", seq, seq as f64)), Ok(answer), "seq {seq}");
    }
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(56.0));
}

#[test]
fn the_reader_treats_each_stream_as_new() {
    let hub = unexported_hub();
    let stream = |envelopes: &[Envelope]| {
        let mut w = FrameWriter::new(Vec::new());
        for e in envelopes {
            w.send(e).expect("send");
        }
        Cursor::new(w.into_inner())
    };
    // First run: 1, 2, (3 lost), 5, 4 (late), 5 (repeat).
    let first =
        stream(&[items("a", 1, 1.0), items("a", 2, 2.0), items("a", 5, 5.0), items("a", 4, 4.0), items("a", 5, 5.0)]);
    let report = hub.read_stream(first);
    assert_eq!((report.received, report.accepted, report.ignored, report.restarts), (5, 3, 2, 0));
    assert!(report.error.is_none());
    // The process restarts: a new stream, sequence from 1 again.
    let second = stream(&[items("a", 1, 1.0), items("a", 2, 2.0), items("a", 3, 3.0)]);
    let report = hub.spawn_reader(second).expect("thread").join().expect("reader thread");
    assert_eq!((report.received, report.accepted, report.restarts), (3, 3, 1));
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(8.0));
}

#[test]
fn a_broken_stream_ends_the_reader_with_its_error() {
    let hub = unexported_hub();
    let mut w = FrameWriter::new(Vec::new());
    w.send(&items("a", 1, 1.0)).expect("send");
    w.write_frame(b"not an envelope").expect("frame");
    w.send(&items("a", 2, 2.0)).expect("send");
    let mut bytes = w.into_inner();
    bytes.extend_from_slice(&[200, 0, 0, 0, 1, 2]); // a frame cut short
    let report = hub.read_stream(Cursor::new(bytes));
    assert_eq!((report.received, report.accepted, report.refused), (3, 2, 1));
    assert!(matches!(report.error, Some(FrameError::Truncated { .. })), "{:?}", report.error);
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(2.0));
}

#[test]
fn a_stale_source_leaves_gauges_but_keeps_its_counters() {
    let h = Harness::new(HubConfig::default().with_stale_after(Duration::from_secs(1)));
    let family = Family::gauge("pipeline.worker.memory.usage", "Memory in use", "By", &[]).expect("family");
    let envelope = |source: &str, sequence: u64, memory: f64, total: f64| {
        let g = Gauge::new(family.clone()).expect("gauge");
        g.set(&[], memory).expect("set");
        let mut e = items(source, sequence, total);
        e.snapshots.push(g.snapshot());
        e
    };
    let long_ago = Instant::now().checked_sub(Duration::from_secs(5)).expect("an instant 5 s ago");
    h.hub.ingest_at(envelope("old", 1, 100.0, 10.0), false, long_ago).expect("ingest");
    h.hub.ingest(envelope("live", 1, 1.0, 1.0)).expect("ingest");
    let out = h.collect();
    assert_eq!(value(&out, "pipeline.worker.memory.usage", &[]), Some(1.0));
    assert_eq!(value(&out, "pipeline.stage.items", &[("stage", "tokenize")]), Some(11.0));
    let status: Vec<(String, bool)> = h.hub.sources().into_iter().map(|s| (s.source, s.stale)).collect();
    assert_eq!(status, vec![("live".to_owned(), false), ("old".to_owned(), true)]);
    // Back from silence: counted again.
    h.hub.ingest(envelope("old", 2, 100.0, 12.0)).expect("ingest");
    let out = h.collect();
    assert_eq!(value(&out, "pipeline.worker.memory.usage", &[]), Some(101.0));
    assert_eq!(value(&out, "pipeline.stage.items", &[("stage", "tokenize")]), Some(13.0));
}

#[test]
fn histograms_export_exact_buckets_count_and_sum() {
    let h = Harness::new(HubConfig::default());
    let family = Family::histogram("task.duration", "Task duration", "s", &["stage"], &[0.1, 1.0]).expect("family");
    for (source, values) in [("a", &[0.0625, 0.5][..]), ("b", &[2.0, 0.25, 0.03125][..])] {
        let hist = Histogram::new(family.clone()).expect("histogram");
        for v in values {
            hist.observe(&["embed"], *v).expect("observe");
        }
        h.hub.ingest(Envelope::new(source, 1, vec![hist.snapshot()])).expect("ingest");
    }
    let out = h.collect();
    // Named as the pull endpoint renders them, so a collector's translation keeps the names.
    let bucket = |le: &str| value(&out, "task_duration_seconds_bucket", &[("stage", "embed"), ("le", le)]);
    assert_eq!((bucket("0.1"), bucket("1"), bucket("+Inf")), (Some(2.0), Some(4.0), Some(5.0)));
    assert_eq!(value(&out, "task_duration_seconds_count", &[("stage", "embed")]), Some(5.0));
    assert_eq!(value(&out, "task_duration_seconds_sum", &[("stage", "embed")]), Some(2.84375));
    assert_eq!(value(&out, "task_duration_seconds_sum#unit", &[("unit", "s")]), Some(0.0));
    assert_eq!(value(&out, "task_duration_seconds_bucket#unit", &[("unit", "{observation}")]), Some(0.0));
    // The merged histogram is there for a direct encoder too.
    let merged = h.hub.snapshot();
    assert_eq!(merged[0].get(&["embed"]).map(|s| s.bucket_counts.to_vec()), Some(vec![2, 4, 5]));
}

#[test]
fn snapshot_only_histograms_register_no_instruments() {
    let h = Harness::new(HubConfig::default().with_histograms(HistogramExport::SnapshotOnly));
    let family = Family::histogram("task.duration", "Task duration", "s", &[], &[1.0]).expect("family");
    let hist = Histogram::new(family).expect("histogram");
    hist.observe(&[], 0.5).expect("observe");
    h.hub.ingest(Envelope::new("a", 1, vec![hist.snapshot()])).expect("ingest");
    h.hub.ingest(items("a", 2, 1.0)).expect("ingest");
    let out = h.collect();
    assert!(!out.keys().any(|k| k.starts_with("task.duration")), "{out:?}");
    assert_eq!(value(&out, "pipeline.stage.items", &[("stage", "tokenize")]), Some(1.0));
    assert_eq!(
        h.hub.snapshot().iter().map(|s| s.name().to_owned()).collect::<Vec<_>>(),
        ["pipeline.stage.items", "task.duration"]
    );
}

#[test]
fn a_family_missing_from_a_newer_envelope_keeps_its_last_snapshot() {
    let hub = unexported_hub();
    let bytes = Family::counter("bytes", "", "By", &[]).expect("family");
    let c = Counter::new(bytes).expect("counter");
    c.add(&[], 4096.0).expect("add");
    let mut first = items("a", 1, 1.0);
    first.snapshots.push(c.snapshot());
    hub.ingest(first).expect("ingest");
    assert_eq!(hub.ingest(items("a", 2, 2.0)), Ok(Ingested::Accepted));
    assert_eq!(hub_value(&hub, "bytes"), Some(4096.0));
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(2.0));
}

#[test]
fn bad_bytes_are_errors_not_panics() {
    let hub = unexported_hub();
    assert!(matches!(hub.ingest_bytes(b""), Err(HubError::Decode(_))));
    assert!(matches!(hub.ingest_bytes(b"garbage garbage garbage"), Err(HubError::Decode(_))));
    let good = items("a", 1, 1.0).encode();
    for cut in 0..good.len() {
        assert!(matches!(hub.ingest_bytes(&good[..cut]), Err(HubError::Decode(_))), "cut at {cut}");
    }
    // Flipping bytes must never panic; whatever decodes is validated.
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0xff;
        let _ = hub.ingest_bytes(&bad);
    }
    assert!(hub.sources().len() <= 2);
}

#[test]
fn a_family_that_clashes_with_a_known_one_is_refused_by_name() {
    let hub = unexported_hub();
    hub.ingest(items("a", 1, 1.0)).expect("ingest");
    // Same name, other kind.
    let gauge = Gauge::new(Family::gauge("pipeline.stage.items", "", "{item}", &["stage"]).expect("f")).expect("g");
    gauge.set(&["x"], 1.0).expect("set");
    let err = hub.ingest_bytes(&Envelope::new("b", 1, vec![gauge.snapshot()]).encode()).expect_err("refused");
    assert!(matches!(&err, HubError::FamilyConflict { family, .. } if family == "pipeline.stage.items"), "{err}");
    assert!(err.to_string().contains("pipeline.stage.items") && err.to_string().contains("gauge"), "{err}");
    // Same name and kind, other labels.
    let other = Counter::new(Family::counter("pipeline.stage.items", "", "{item}", &["shard"]).expect("f")).expect("c");
    other.inc(&["1"]).expect("inc");
    let err = hub.ingest(Envelope::new("b", 1, vec![other.snapshot()])).expect_err("refused");
    assert!(err.to_string().contains("shard"), "{err}");
    // A refused envelope changes nothing: source b is unknown, totals unchanged.
    assert_eq!(hub.sources().len(), 1);
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(1.0));
    // The same family twice in one envelope.
    let mut twice = items("a", 2, 2.0);
    twice.snapshots.push(twice.snapshots[0].clone());
    assert!(
        matches!(hub.ingest(twice), Err(HubError::DuplicateFamily { family, .. }) if family == "pipeline.stage.items")
    );
}

#[test]
fn limits_bound_sources_and_families() {
    let hub = SnapshotHub::with_meter(
        HubConfig::default().with_max_sources(2).with_max_families(1),
        opentelemetry::global::meter("noop"),
    );
    hub.ingest(items("a", 1, 1.0)).expect("ingest");
    hub.ingest(items("b", 1, 1.0)).expect("ingest");
    assert!(matches!(hub.ingest(items("c", 1, 1.0)), Err(HubError::TooManySources { limit: 2, .. })));
    assert_eq!(hub.ingest(items("a", 2, 2.0)), Ok(Ingested::Accepted));
    let c = Counter::new(Family::counter("other", "", "", &[]).expect("f")).expect("c");
    assert!(matches!(
        hub.ingest(Envelope::new("a", 3, vec![c.snapshot()])),
        Err(HubError::TooManyFamilies { family, limit: 1, .. }) if family == "other"
    ));
}

#[test]
fn the_channel_pump_ingests_what_is_queued() {
    let hub = unexported_hub();
    let (tx, rx) = channel(8);
    for (seq, total) in [(1, 1.0), (3, 3.0), (2, 2.0), (3, 3.0)] {
        tx.send(items("t", seq, total)).expect("send");
    }
    let report = hub.pump(&rx);
    assert_eq!((report.received, report.accepted, report.ignored), (4, 2, 2));
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(3.0));
    let pump = hub.spawn_pump(rx).expect("thread");
    tx.send(items("t", 4, 4.0)).expect("send");
    drop(tx);
    let report = pump.join().expect("pump thread");
    assert_eq!((report.received, report.accepted), (1, 1));
    assert_eq!(hub_value(&hub, "pipeline.stage.items"), Some(4.0));
}

#[test]
fn exported_counters_never_fall_by_float_rounding() {
    let family = Family::counter("seconds", "", "s", &[]).expect("family");
    let snap = |v: f64| MetricSnapshot::from_columns(family.clone(), vec![], vec![v], vec![], vec![]).expect("snap");
    let previous = snap(0.1 + 0.2);
    assert_eq!(clamp(snap(0.3), &previous).values(), &[0.1 + 0.2]);
    assert_eq!(clamp(snap(0.5), &previous).values(), &[0.5]);
}

#[test]
fn a_dropped_hub_leaves_callbacks_that_observe_nothing() {
    let h = fed(&[("a", 1, 1.0)]);
    let Harness { hub, otel } = h;
    drop(hub);
    let h = Harness { hub: SnapshotHub::with_meter(HubConfig::default(), otel.provider.meter("other")), otel };
    let out = h.collect();
    assert!(out.get("pipeline.stage.items").is_none_or(|points| points.is_empty()), "{out:?}");
}
