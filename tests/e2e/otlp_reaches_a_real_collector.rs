//! OTLP over gRPC and over HTTP/protobuf to a real collector: metric names, units, attributes
//! and values, the resource, parent/child spans (one child on another thread) and log records
//! arrive as recorded.

use std::time::Duration;

use crate::support::{blocks, example_pushing, turn_if_peers, Block, Collector, Peer, Process};

fn run_example_against(protocol: &str) -> (String, u32) {
    let mut collector = Collector::start();
    let mut cmd = example_pushing("quickstart", &collector.endpoint(protocol), protocol);
    cmd.env("OTEL_METRIC_EXPORT_INTERVAL", "300")
        .env("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=e2e")
        .env("PIPETEL_SERVICE_VERSION", "9.9.9")
        .args(["--batches", "3", "--interval-ms", "50"]);
    let mut example = Process::spawn("quickstart", cmd);
    let pid = example.id();
    let (code, out) = example.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("no Prometheus endpoint configured"),
        "an OTLP endpoint alone must replace the pull default: {out}"
    );
    assert!(out.contains("Ok(())"), "shutdown must succeed with a live collector: {out}");
    // The last export happens at shutdown; the collector prints it right away.
    collector.wait_for_output("Name: quickstart.items", Duration::from_secs(20));
    collector.wait_for_output("LogRecord #", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    collector.stop();
    (collector.output(), pid)
}

fn check(protocol: &str) {
    let (out, pid) = run_example_against(protocol);

    // Resource attributes, on every signal.
    for kind in ["ResourceMetrics", "ResourceSpans", "ResourceLog"] {
        let resources = blocks(&out, kind);
        assert!(!resources.is_empty(), "no {kind} received over {protocol}:\n{out}");
        let r = &resources[0];
        assert_eq!(r.field("service.name"), "Str(quickstart)");
        assert_eq!(r.field("service.version"), "Str(9.9.9)");
        assert_eq!(r.field("deployment.environment"), "Str(e2e)");
        assert!(r.field("service.instance.id").starts_with("Str("));
        assert!(r.field("host.name").starts_with("Str("));
        assert_eq!(r.field("process.pid"), format!("Int({pid})"));
    }

    // Metrics: cumulative, so the last data point of each counter holds the total.
    let metrics = blocks(&out, "Metric");
    let last = |name: &str| -> Block {
        metrics
            .iter()
            .rfind(|m| m.get("Name") == Some(name))
            .cloned()
            .unwrap_or_else(|| panic!("metric {name} not received over {protocol}:\n{out}"))
    };
    let items = last("quickstart.items");
    assert_eq!(items.field("Unit"), "{item}");
    assert_eq!(items.field("DataType"), "Sum");
    assert_eq!(items.field("IsMonotonic"), "true");
    assert_eq!(items.field("AggregationTemporality"), "AGGREGATION_TEMPORALITY_CUMULATIVE");
    assert_eq!(items.field("stage"), "Str(tokenize)");
    assert_eq!(items.field("Value"), "300");
    let bytes = last("quickstart.read");
    assert_eq!((bytes.field("Unit"), bytes.field("Value")), ("By", "12288"));
    let duration = last("quickstart.batch.duration");
    assert_eq!((duration.field("Unit"), duration.field("DataType"), duration.field("Count")), ("s", "Histogram", "3"));

    // Spans: three traces of run_batch -> {tokenize (same thread), index (worker thread)}.
    let spans = blocks(&out, "Span");
    let roots: Vec<&Block> = spans.iter().filter(|s| s.get("Name") == Some("run_batch")).collect();
    assert_eq!(roots.len(), 3, "one run_batch span per batch over {protocol}:\n{out}");
    for root in roots {
        assert_eq!(root.field("Parent ID"), "", "run_batch is a root span");
        let (trace, id) = (root.field("Trace ID"), root.field("ID"));
        let children: Vec<&Block> = spans.iter().filter(|s| s.get("Parent ID") == Some(id)).collect();
        let mut names: Vec<&str> = children.iter().map(|c| c.field("Name")).collect();
        names.sort();
        assert_eq!(names, ["index", "tokenize"], "children of run_batch {id}");
        for c in &children {
            assert_eq!(c.field("Trace ID"), trace);
        }
        let thread = |b: &Block| b.field("thread.id").to_string();
        let index = children.iter().find(|c| c.get("Name") == Some("index")).expect("index child");
        assert_ne!(thread(index), thread(root), "index runs on another thread and keeps its parent");
    }

    // Logs: the tracing events, with the span they happened in.
    let logs = blocks(&out, "LogRecord");
    let done: Vec<&Block> = logs.iter().filter(|l| l.get("Body") == Some("Str(batch done)")).collect();
    assert_eq!(done.len(), 3, "{logs:?}");
    for l in done {
        assert_eq!(l.field("SeverityText"), "INFO");
        assert_eq!(l.field("items"), "Int(100)");
        let trace = l.field("Trace ID");
        assert!(
            spans.iter().any(|s| s.get("Name") == Some("run_batch") && s.get("Trace ID") == Some(trace)),
            "log record trace id {trace} matches no run_batch span"
        );
    }
}

#[test]
fn otlp_grpc_delivers_metrics_traces_and_logs() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    check("grpc");
}

#[test]
fn otlp_http_protobuf_delivers_metrics_traces_and_logs() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    check("http/protobuf");
}
