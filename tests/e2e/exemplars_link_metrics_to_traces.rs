//! Exemplars end to end: the quickstart example runs with its traces on (the console exporter
//! prints every span's trace and span ids), real Prometheus 2.42 with exemplar storage scrapes
//! its pull endpoint (asking for OpenMetrics, as it always does), and
//! `/api/v1/query_exemplars` returns, on `span_duration_seconds_bucket{span_name="tokenize"}`,
//! the trace and span ids of a `tokenize` span the example created. The OpenMetrics exposition
//! itself is read by the Python `prometheus_client` OpenMetrics parser, which must accept all
//! of it and find the same exemplars; a scraper that does not ask for OpenMetrics gets the text
//! format without exemplars.
//!
//! OTLP carries no exemplars: `opentelemetry_sdk` 0.33 keeps none (every data point's exemplar
//! list is empty and cannot be filled), which `export::prometheus::exemplar_tests` pins; so
//! there is nothing for the collector to show, and this module checks the pull endpoint only.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::python::python_binary;
use crate::support::workspace::quickstart_five_batches;
use crate::support::{serve_example, turn_if_peers, wait_for, Peer, Prometheus};

/// `(name, trace id, span id)` of every span the console trace exporter printed.
fn printed_spans(output: &str) -> BTreeSet<(String, String, String)> {
    let mut spans = BTreeSet::new();
    let mut name = None;
    let mut trace = None;
    for line in output.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Name") {
            let v = v.trim_start().trim_start_matches(':').trim();
            // The scope's name is quoted; the span's is not.
            if !v.starts_with('"') {
                name = Some(v.to_string());
            }
        } else if let Some(v) = line.strip_prefix("TraceId") {
            trace = Some(v.trim_start().trim_start_matches(':').trim().to_string());
        } else if let Some(v) = line.strip_prefix("SpanId") {
            if let (Some(n), Some(t)) = (name.take(), trace.take()) {
                spans.insert((n, t, v.trim_start().trim_start_matches(':').trim().to_string()));
            }
        }
    }
    spans
}

/// The exemplars on `span_duration_seconds_bucket` samples as the Python OpenMetrics parser reads
/// `exposition`: `(span_name, le, trace_id, span_id, value)`. Panics when it refuses the text.
fn python_openmetrics_exemplars(exposition: &str) -> Vec<(String, String, String, String, f64)> {
    let script = "import json, sys\n\
        from prometheus_client.openmetrics.parser import text_string_to_metric_families\n\
        out = []\n\
        for fam in text_string_to_metric_families(sys.stdin.read()):\n    \
            for s in fam.samples:\n        \
                if s.name == 'span_duration_seconds_bucket' and s.exemplar is not None:\n            \
                    e = s.exemplar\n            \
                    out.append([s.labels.get('span_name', ''), s.labels['le'], e.labels.get('trace_id', ''), e.labels.get('span_id', ''), e.value])\n\
        print(json.dumps(out))\n";
    let python = python_binary();
    let mut child = Command::new(&python)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} (set PIPETEL_PYTHON): {e}", python.display()));
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).expect("write exposition");
    let out = child.wait_with_output().expect("python output");
    assert!(
        out.status.success(),
        "the Python OpenMetrics parser refused the exposition: {}\n{exposition}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON list of exemplars")
}

/// GET `url` with `accept`: the content type and the body.
fn get(url: &str, accept: &str) -> (String, String) {
    let response = ureq::get(url).set("Accept", accept).timeout(Duration::from_secs(10)).call().expect("GET /metrics");
    let content_type = response.header("Content-Type").unwrap_or_default().to_string();
    (content_type, response.into_string().expect("body"))
}

#[test]
fn prometheus_stores_exemplars_that_name_the_examples_sampled_spans() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Python]) else { return };
    let (mut example, port) =
        serve_example("quickstart", |cmd| quickstart_five_batches(cmd.env("OTEL_TRACES_EXPORTER", "console")));
    example.wait_for_output("done: batches=5", Duration::from_secs(60));
    // The console exporter prints the spans in batches; wait for all five `tokenize` spans.
    let spans = wait_for("the console exporter to print every tokenize span", Duration::from_secs(30), || {
        let spans = printed_spans(&example.output());
        (spans.iter().filter(|(n, _, _)| n == "tokenize").count() >= 5).then_some(spans)
    });

    // The pull endpoint: OpenMetrics for a scraper that asks, with exemplars the Python parser reads.
    let url = format!("http://127.0.0.1:{port}/metrics");
    let (content_type, om) =
        get(&url, "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1");
    assert!(content_type.starts_with("application/openmetrics-text; version=1.0.0"), "{content_type}");
    assert!(om.ends_with("# EOF\n"), "{om}");
    let parsed = python_openmetrics_exemplars(&om);
    println!("exemplars the Python OpenMetrics parser read: {parsed:?}");
    let tokenize: Vec<_> = parsed.iter().filter(|(name, ..)| name == "tokenize").collect();
    assert!(!tokenize.is_empty(), "no exemplar on tokenize's buckets:\n{om}");
    for (_, _, trace_id, span_id, value) in &tokenize {
        assert!(
            spans.contains(&("tokenize".to_string(), trace_id.clone(), span_id.clone())),
            "the exemplar {trace_id}/{span_id} names no tokenize span the example printed: {spans:?}"
        );
        assert!(*value > 0.0 && *value < 1.0, "a tokenize span lasts about 2 ms: {value}");
    }
    let (content_type, text) = get(&url, "text/plain;version=0.0.4");
    assert!(content_type.starts_with("text/plain; version=0.0.4"), "{content_type}");
    assert!(text.contains("span_duration_seconds_bucket{") && !text.contains(" # {") && !text.contains("# EOF"));

    // Real Prometheus with exemplar storage.
    // A scrape error here: the OpenMetrics parser refused the exposition.
    let prometheus = Prometheus::scraping_exemplars_cleanly(port);
    let query = "span_duration_seconds_bucket{span_name=\"tokenize\"}";
    let answer = prometheus.wait_for_exemplars(query);
    println!(
        "GET /api/v1/query_exemplars?query={query}:\n{}",
        serde_json::to_string_pretty(&answer).unwrap_or_default()
    );
    assert_eq!(answer["status"], "success", "{answer}");
    let mut found = 0;
    for series in answer["data"].as_array().into_iter().flatten() {
        assert_eq!(series["seriesLabels"]["span_name"], "tokenize", "{series}");
        for e in series["exemplars"].as_array().into_iter().flatten() {
            let (trace_id, span_id) = (e["labels"]["trace_id"].as_str(), e["labels"]["span_id"].as_str());
            let (Some(trace_id), Some(span_id)) = (trace_id, span_id) else { panic!("exemplar without ids: {e}") };
            assert!(
                spans.contains(&("tokenize".to_string(), trace_id.to_string(), span_id.to_string())),
                "Prometheus' exemplar {trace_id}/{span_id} names no tokenize span the example printed"
            );
            found += 1;
        }
    }
    assert!(found > 0, "{answer}");
    example.kill();
}
