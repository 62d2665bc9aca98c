//! The pipeline example pushing OTLP to a real collector: stage spans with their shard spans as
//! children (shards run on other threads), end attributes and error status; log rows with event
//! names, fields (the stage row's shard outcome counts and a `/`-keyed float counter included) and trace ids; periodic samples
//! at the configured interval.

use std::time::Duration;

use crate::support::{blocks, example_pushing, turn_if_peers, Block, Collector, Peer, Process};

#[test]
fn spans_and_rows_of_every_stage_and_shard_arrive() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    let mut collector = Collector::start();
    let mut cmd = example_pushing("pipeline", &collector.endpoint("grpc"), "grpc");
    cmd.env("PIPETEL_SAMPLE_INTERVAL", "300").env("OTEL_METRIC_EXPORT_INTERVAL", "1000");
    cmd.args(["--seconds", "2", "--shards", "4"]);
    let mut example = Process::spawn("pipeline", cmd);
    let (code, out) = example.wait(Duration::from_secs(90));
    assert_eq!(code, Some(0), "{out}");
    collector.wait_for_output("EventName: pipeline.stage", Duration::from_secs(20));
    std::thread::sleep(Duration::from_secs(1));
    collector.stop();
    let received = collector.output();

    // Spans: each stage span has its 4 shard spans as children in the same trace.
    let spans = blocks(&received, "Span");
    for stage in ["download", "tokenize", "index"] {
        let s = spans
            .iter()
            .find(|b| b.get("Name") == Some(&format!("stage {stage}")))
            .unwrap_or_else(|| panic!("no span for stage {stage}"));
        let (trace, id) = (s.field("Trace ID"), s.field("ID"));
        assert_eq!(s.field("pipeline.shards.total"), "Int(4)");
        let children: Vec<&Block> = spans.iter().filter(|b| b.get("Parent ID") == Some(id)).collect();
        assert_eq!(children.len(), 4, "shards of {stage}");
        for c in &children {
            assert_eq!(c.field("Trace ID"), trace);
            assert!(c.field("Name").starts_with("shard "), "{c:?}");
            assert!(c.field("pipeline.items").starts_with("Int("), "end attributes on the shard span: {c:?}");
        }
        if stage == "tokenize" {
            assert_eq!(s.field("Status code"), "STATUS_CODE_ERROR");
            assert_eq!(s.field("Status message"), "1 shard(s) failed");
            let failed = children.iter().find(|c| c.get("pipeline.shard.index") == Some("Int(3)")).expect("shard 3");
            assert_eq!(failed.field("Status code"), "STATUS_CODE_ERROR");
            assert_eq!(failed.field("pipeline.status"), "Str(failed)");
            assert_eq!(failed.field("pipeline.items"), "Int(640)");
        } else {
            assert_eq!(s.field("Status code"), "STATUS_CODE_OK");
        }
    }

    // Rows: log records whose event name is the namespace, with the row's fields and trace ids.
    let logs = blocks(&received, "LogRecord");
    let stage_rows: Vec<&Block> = logs.iter().filter(|l| l.get("EventName") == Some("pipeline.stage")).collect();
    assert_eq!(stage_rows.len(), 3, "one stage row per stage");
    for r in &stage_rows {
        let name = r.field("pipeline.stage.name").trim_start_matches("Str(").trim_end_matches(')');
        let span = spans.iter().find(|b| b.get("Name") == Some(&format!("stage {name}"))).expect("stage span");
        assert_eq!(r.field("Trace ID"), span.field("Trace ID"), "row and span share the trace");
        assert_eq!(r.field("Span ID"), span.field("ID"));
        assert!(r.field("pipeline.execution.id").starts_with("Str(run-"));
        assert!(r.field("pipeline.elapsed_seconds").starts_with("Double("));
        // The stage row counts its shards by outcome (tokenize's shard 3 fails), no retries.
        let (succeeded, failed) = if name == "tokenize" { ("Int(3)", "Int(1)") } else { ("Int(4)", "Int(0)") };
        assert_eq!(r.field("pipeline.shards.succeeded"), succeeded, "{name}: {r:?}");
        assert_eq!(r.field("pipeline.shards.failed"), failed, "{name}: {r:?}");
        assert_eq!(r.field("pipeline.shards.retried"), "Int(0)", "{name}: {r:?}");
        // A `/` key with a float value (0.25 per finished shard) arrives summed, as a double.
        let share = r.field("pipeline.counter.zephyr/shard_share");
        let value: f64 = share
            .strip_prefix("Double(")
            .and_then(|v| v.strip_suffix(')'))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: a double counter, got {share}: {r:?}"));
        let finished = if name == "tokenize" { 3.0 } else { 4.0 };
        assert!((value - 0.25 * finished).abs() < 1e-9, "{name}: {value}: {r:?}");
    }
    let worker_rows: Vec<&Block> = logs.iter().filter(|l| l.get("EventName") == Some("pipeline.worker")).collect();
    let count = |status: &str| worker_rows.iter().filter(|r| r.get("pipeline.status") == Some(status)).count();
    assert_eq!(count("Str(start)"), 12, "a start row per shard");
    assert_eq!(count("Str(end)") + count("Str(failed)"), 12, "an end row per shard");
    assert_eq!(count("Str(failed)"), 1);
    // 2 s per stage at a 300 ms interval: about 6 samples per shard, 12 shards.
    let samples = count("Str(running)");
    assert!((12 * 4..=12 * 8).contains(&samples), "{samples} sample rows");
    for r in worker_rows.iter().filter(|r| r.get("pipeline.status") == Some("Str(running)")) {
        assert!(r.field("pipeline.item_rate").starts_with("Double("));
        assert!(r.field("pipeline.memory.peak_bytes").starts_with("Int("));
        assert!(!r.field("Trace ID").is_empty());
    }
}
