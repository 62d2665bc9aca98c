//! Real Prometheus scrapes the inference service example: the service metrics under their agreed
//! names with the run's exact counts, summary quantiles within the sketch's stated error of the
//! exact quantiles of the observed values, label values with quotes, backslashes, newlines and
//! non-ASCII text unchanged through Prometheus and through the Python reference parser, and an
//! exposition `promtool check metrics` accepts.
#![cfg(feature = "e2e")]

use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use pipetel_e2e::{example_path, free_port, http, promtool_check_metrics, workspace_root, Process, Prometheus};

/// The model names the example uses (its `MODELS`).
const MODELS: [&str; 4] = ["llama \"8b\"", "C:\\models\\mistral", "two\nlines", "日本語モデル ✓"];
/// DDSketch's relative accuracy (`pipetel::registry::RELATIVE_ERROR`).
const RELATIVE_ERROR: f64 = pipetel::registry::RELATIVE_ERROR;

fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

/// Label values of `metric` samples, as the Python `prometheus_client` text parser reads them.
fn python_label_values(exposition: &str, metric: &str, label: &str) -> Vec<String> {
    let python = std::env::var_os("PIPETEL_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let script = format!(
        "import json, sys\nfrom prometheus_client.parser import text_string_to_metric_families\n\
         out = []\nfor fam in text_string_to_metric_families(sys.stdin.read()):\n    for s in fam.samples:\n        \
         if s.name == {metric:?} and {label:?} in s.labels:\n            out.append(s.labels[{label:?}])\n\
         print(json.dumps(out))\n"
    );
    let mut child = Command::new(&python)
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).expect("write exposition");
    let out = child.wait_with_output().expect("python output");
    assert!(out.status.success(), "the Python parser refused the exposition: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON list of label values")
}

#[test]
fn service_and_registry_metrics_reach_prometheus_exactly() {
    let port = free_port();
    let mut cmd = Command::new(example_path("inference_service"));
    cmd.env("OTEL_EXPORTER_PROMETHEUS_PORT", port.to_string())
        .env("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
        .args(["--seconds", "2", "--tasks", "200", "--linger-seconds", "60"]);
    let mut example = Process::spawn("inference_service", cmd);
    let out = example.wait_for_output("done: ", Duration::from_secs(60));
    let done = out.lines().find(|l| l.starts_with("done: ")).expect("done line");
    let (created, completed, failed, cancelled) =
        (field(done, "created"), field(done, "completed"), field(done, "failed"), field(done, "cancelled"));
    // The example's deterministic plan for 200 tasks.
    assert_eq!((created, completed, failed, cancelled), (200.0, 172.0, 20.0, 8.0), "{out}");
    let mut tokens: Vec<f64> = out
        .lines()
        .find_map(|l| l.strip_prefix("tokens observed: "))
        .expect("observed tokens")
        .split(',')
        .map(|v| v.parse().expect("a number"))
        .collect();
    tokens.sort_by(f64::total_cmp);
    assert_eq!(tokens.len() as f64, completed);

    let prometheus = Prometheus::start(&[format!("127.0.0.1:{port}")], "/metrics");
    let targets = prometheus.wait_until_up(Duration::from_secs(30));
    assert_eq!(targets[0]["lastError"], "", "{targets:?}");

    let t = Duration::from_secs(20);
    for (q, v) in [
        ("service_tasks_created_total", created),
        ("service_tasks_completed_total", completed),
        ("service_tasks_failed_total", failed),
        ("service_tasks_cancelled_total", cancelled),
        ("service_task_duration_seconds_count", completed + failed),
        ("service_task_queue_wait_seconds_count", created - cancelled),
        ("service_queue_size", 0.0),
        ("service_queue_pending", 0.0),
        ("service_queue_processing", 0.0),
        ("inference_tokens_count", completed),
        ("inference_tokens_sum", tokens.iter().sum()),
        ("sum(inference_requests_total)", created),
        ("inference_workers_busy{pool=\"default\"}", 0.0),
        ("legacy_model_cache_entries{cache=\"weights\"}", 4.0),
    ] {
        prometheus.wait_for_value(q, t, |x| x == v);
    }
    // Every task ran at least 2 ms.
    prometheus.wait_for_value("service_task_duration_seconds_sum", t, |x| x >= 0.002 * (completed + failed));
    prometheus.wait_for_value(
        "histogram_quantile(0.5, rate(service_task_duration_seconds_bucket[1m])) >= 0 or vector(1)",
        t,
        |x| x.is_finite(),
    );

    // Summary quantiles against the exact quantiles of the observed values.
    for q in [0.5, 0.9, 0.95, 0.99] {
        let exact = tokens[(q * (tokens.len() as f64 - 1.0)) as usize];
        let series = prometheus.wait_for_value(&format!("inference_tokens{{quantile=\"{q}\"}}"), t, |x| x.is_finite());
        let got = series[0].1;
        assert!((got - exact).abs() <= RELATIVE_ERROR * exact, "quantile {q}: {got} vs exact {exact}");
    }

    // Label values round-trip exactly through Prometheus.
    let series = prometheus.wait_for_value("inference_requests_total", t, |x| x == 50.0);
    let through_prometheus: BTreeSet<String> = series.iter().map(|(l, _)| l["model"].clone()).collect();
    let expected: BTreeSet<String> = MODELS.iter().map(|m| m.to_string()).collect();
    assert_eq!(through_prometheus, expected);

    let (status, body) = http("GET", &format!("http://127.0.0.1:{port}/metrics")).expect("scrape");
    assert_eq!(status, 200);
    // ... and through the Python reference parser.
    let through_python: BTreeSet<String> =
        python_label_values(&body, "inference_requests_total", "model").into_iter().collect();
    assert_eq!(through_python, expected);
    promtool_check_metrics(&body).expect("promtool check metrics");
    example.kill();
}
