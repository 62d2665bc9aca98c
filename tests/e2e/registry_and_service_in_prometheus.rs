//! Real Prometheus scrapes the inference service example: the service metrics under their agreed
//! names with the run's exact counts, summary quantiles within the sketch's stated error of the
//! exact quantiles of the observed values, label values with quotes, backslashes, newlines and
//! non-ASCII text unchanged through Prometheus and through the Python reference parser, and an
//! exposition `promtool check metrics` accepts.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::{python_label_values, scrape_checked, serve_example, turn_if_peers, Peer, Prometheus};

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

#[test]
fn service_and_registry_metrics_reach_prometheus_exactly() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Promtool, Peer::Python]) else { return };
    let (mut example, port) = serve_example("inference_service", |cmd| {
        cmd.args(["--seconds", "2", "--tasks", "200", "--linger-seconds", "60"])
    });
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

    let prometheus = Prometheus::scraping_cleanly(port);

    let t = Duration::from_secs(20);
    prometheus.wait_for_values(
        [
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
        ],
        t,
    );
    // Every task ran at least 2 ms.
    prometheus.wait_for_value("service_task_duration_seconds_sum", t, |x| x >= 0.002 * (completed + failed));
    prometheus.wait_for_value(
        "histogram_quantile(0.5, rate(service_task_duration_seconds_bucket[1m])) >= 0 or vector(1)",
        t,
        |x| x.is_finite(),
    );

    // Summary quantiles against the exact quantiles of the observed values.
    for q in [0.5, 0.9, 0.95, 0.99] {
        // The nearest-rank order statistic (rank ⌈q·n⌉), the summary's definition.
        let exact = tokens[((q * tokens.len() as f64).ceil() as usize).clamp(1, tokens.len()) - 1];
        let series = prometheus.wait_for_value(&format!("inference_tokens{{quantile=\"{q}\"}}"), t, |x| x.is_finite());
        let got = series[0].1;
        assert!((got - exact).abs() <= RELATIVE_ERROR * exact, "quantile {q}: {got} vs exact {exact}");
    }

    // Label values round-trip exactly through Prometheus.
    let series = prometheus.wait_for_value("inference_requests_total", t, |x| x == 50.0);
    let through_prometheus: BTreeSet<String> = series.iter().map(|(l, _)| l["model"].clone()).collect();
    let expected: BTreeSet<String> = MODELS.iter().map(|m| m.to_string()).collect();
    assert_eq!(through_prometheus, expected);

    let body = scrape_checked(&format!("127.0.0.1:{port}"));
    // ... and through the Python reference parser.
    let through_python: BTreeSet<String> =
        python_label_values(&body, "inference_requests_total", "model").into_iter().collect();
    assert_eq!(through_python, expected);
    example.kill();
}
