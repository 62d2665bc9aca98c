//! Real Prometheus scrapes a pull endpoint serving a million series (a registry counter with
//! three labels, as a program serving the endpoint alone has it): the target is up, every sample
//! of the page is ingested (`scrape_samples_scraped` equals the samples a plain GET counts, at
//! least a million), PromQL finds a series by its labels with its value, and the scrape's
//! duration is reported.
//!
//! The serving process is this test binary run again as a child (`init` is once per process):
//! the ignored test [`million_series_server`] serves while `PIPETEL_E2E_MILLION_PORT` is set.
//! Prometheus gets a 60 s scrape interval and timeout for this job (the child is a debug build,
//! and the first scrape creates a million head series), no body or sample limit.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{free_port, turn_if_peers, Peer, Process, Prometheus};

const SERIES: usize = 1_000_000;
const PORT_VAR: &str = "PIPETEL_E2E_MILLION_PORT";

#[test]
fn prometheus_scrapes_a_million_series_endpoint() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus]) else { return };
    let port = free_port();
    let mut cmd = Command::new(std::env::current_exe().expect("this test binary"));
    cmd.args([
        "--ignored",
        "--exact",
        "prometheus_scrapes_a_million_series::million_series_server",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(PORT_VAR, port.to_string());
    let mut server = Process::spawn("million-series", cmd);
    server.wait_for_output(&format!("serving {SERIES} series"), Duration::from_secs(180));

    // What the endpoint serves, counted from a plain GET: every sample line.
    // (Read line by line: the page is some 90 MB.)
    let url = format!("http://127.0.0.1:{port}/metrics");
    let response = ureq::get(&url).call().expect("GET /metrics");
    assert_eq!(response.status(), 200);
    assert_eq!(response.header("transfer-encoding"), Some("chunked"), "the page is streamed");
    let (mut samples, mut items) = (0usize, 0usize);
    for line in std::io::BufRead::lines(std::io::BufReader::new(response.into_reader())) {
        let line = line.expect("a line of the page");
        if !line.is_empty() && !line.starts_with('#') {
            samples += 1;
            items += usize::from(line.starts_with("million_items_total{"));
        }
    }
    assert_eq!(items, SERIES, "the page holds every series");

    let prometheus = Prometheus::start_scraping(&format!(
        "  - job_name: million\n    scrape_interval: 60s\n    scrape_timeout: 60s\n    body_size_limit: 0\n    sample_limit: 0\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n"
    ));
    let started = Instant::now();
    let targets = prometheus.wait_until_up(Duration::from_secs(120));
    assert_eq!(targets[0]["lastError"], "", "the real parser refused the exposition: {targets:?}");
    let up = prometheus.wait_for_value("up{job=\"million\"}", Duration::from_secs(30), |v| v == 1.0);
    assert_eq!(up.len(), 1);
    let scraped =
        prometheus.wait_for_value("scrape_samples_scraped{job=\"million\"}", Duration::from_secs(30), |v| v > 0.0);
    assert_eq!(scraped[0].1, samples as f64, "Prometheus ingested every sample of the page");
    let duration =
        prometheus.wait_for_value("scrape_duration_seconds{job=\"million\"}", Duration::from_secs(30), |v| v > 0.0);
    eprintln!(
        "million-series scrape: up=1, scrape_samples_scraped={}, scrape_duration_seconds={:.3} (first scrape {:.1} s after start)",
        scraped[0].1,
        duration[0].1,
        started.elapsed().as_secs_f64()
    );
    // The last series, queried by its labels, holds its value.
    let one = prometheus.wait_for_value(
        "million_items_total{stage=\"stage-999\",shard=\"99\",worker=\"9\"}",
        Duration::from_secs(60),
        |v| v == SERIES as f64,
    );
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!(one[0].0.get("otel_scope_name").map(String::as_str), Some("pipetel"), "{one:?}");
    server.kill();
}

/// The serving half, run by [`prometheus_scrapes_a_million_series_endpoint`] in a child
/// process: a registry counter with a million series (series `i` holds `i + 1`), served on the
/// port in `PIPETEL_E2E_MILLION_PORT` until the parent kills it (at most five minutes).
#[test]
#[ignore = "the serving child of prometheus_scrapes_a_million_series_endpoint"]
fn million_series_server() {
    let port: u16 = std::env::var(PORT_VAR).expect("PIPETEL_E2E_MILLION_PORT").parse().expect("a port");
    let config = pipetel::Config::default()
        .with_service_name("million")
        .with_prometheus_host("127.0.0.1")
        .with_prometheus_port(port)
        .with_console_log(false)
        .with_cardinality_limit(2_000_000)
        .with_traces_exporters([])
        .with_logs_exporters([]);
    let _telemetry = pipetel::init(config).expect("init");
    let registry = pipetel::Registry::new("million").expect("registry");
    let items = registry.counter_vec("items", "Items", &["stage", "shard", "worker"]).expect("counter");
    for i in 0..SERIES {
        let (stage, shard, worker) =
            (format!("stage-{}", i / 1_000), (i % 1_000 / 10).to_string(), (i % 10).to_string());
        let series = items.with([("stage", stage), ("shard", shard), ("worker", worker)]).expect("series");
        series.inc_by((i + 1) as f64);
    }
    println!("serving {SERIES} series");
    std::thread::sleep(Duration::from_secs(300));
}
