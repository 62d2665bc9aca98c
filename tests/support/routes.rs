//! The two routes from a pipetel program to Prometheus, side by side: the **pull** route
//! (Prometheus scrapes the program's endpoint, one job per service named after it, as
//! `otel-collector/prometheus.yml` advises) and the **collector** route in its two shipped forms,
//! the OpenTelemetry Collector running `otel-collector/config.yaml` whose `prometheus` exporter
//! Prometheus scrapes (the `otel-collector-exporter` job of `prometheus.yml`, `honor_labels`),
//! and `otel-collector/gateway.yaml` remote-writing to Prometheus. The programs push OTLP gRPC
//! with a metric export every second.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_norway::Value;

use super::otelcol::Otelcol;
use super::peers::Peer;
use super::ports::free_port;
use super::prometheus::Prometheus;
use super::workspace::{example_pushing, example_serving, workspace_root};

/// A way from a program to Prometheus.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Prometheus scrapes the program's pull endpoint.
    Pull,
    /// The program pushes to `config.yaml`; Prometheus scrapes the collector's `prometheus`
    /// exporter.
    CollectorExporter,
    /// The program pushes to `gateway.yaml`, which remote-writes to Prometheus.
    GatewayRemoteWrite,
}

impl Route {
    /// All three.
    pub const ALL: [Route; 3] = [Route::Pull, Route::CollectorExporter, Route::GatewayRemoteWrite];

    /// A short name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Route::Pull => "pull endpoint",
            Route::CollectorExporter => "collector (config.yaml, prometheus exporter)",
            Route::GatewayRemoteWrite => "gateway (gateway.yaml, remote write)",
        }
    }

    /// The real peers the route runs on.
    pub fn peers(self) -> &'static [Peer] {
        match self {
            Route::Pull => &[Peer::Prometheus],
            Route::CollectorExporter | Route::GatewayRemoteWrite => &[Peer::Prometheus, Peer::Otelcol],
        }
    }
}

/// The `otel-collector-exporter` job of the shipped `prometheus.yml`, scraping `target` every
/// second, as the YAML list item Prometheus's `scrape_configs:` takes.
pub fn exporter_job(target: &str) -> String {
    let path = workspace_root().join("otel-collector/prometheus.yml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let config: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut job = config["scrape_configs"]
        .as_sequence()
        .and_then(|jobs| jobs.iter().find(|j| j["job_name"] == "otel-collector-exporter"))
        .cloned()
        .expect("prometheus.yml has the job otel-collector-exporter");
    assert_eq!(job["honor_labels"], Value::Bool(true), "the exporter job must honor the collector's job/instance");
    let targets = serde_norway::from_str(&format!("[{{targets: ['{target}']}}]")).expect("static_configs");
    job["static_configs"] = targets;
    job["scrape_interval"] = Value::from("1s");
    let list = serde_norway::to_string(&Value::Sequence(vec![job])).expect("job as YAML");
    list.lines().map(|l| format!("  {l}\n")).collect()
}

/// One route, ready: its Prometheus (evaluating the given rule files), and for the pull route
/// a port per job, for the collector routes the collector.
pub struct RouteStack {
    /// Which route.
    pub route: Route,
    /// The collector of a collector route.
    collector: Option<Otelcol>,
    /// The Prometheus that sees what arrives by this route.
    pub prometheus: Prometheus,
    ports: BTreeMap<String, u16>,
}

impl RouteStack {
    /// Starts `route` for programs whose `service.name`s are `jobs`; Prometheus loads `rules`.
    pub fn start(route: Route, jobs: &[&str], rules: &[PathBuf]) -> Self {
        match route {
            Route::Pull => {
                let ports: BTreeMap<String, u16> = jobs.iter().map(|j| (j.to_string(), free_port())).collect();
                let targets: Vec<(&str, String)> =
                    ports.iter().map(|(j, p)| (j.as_str(), format!("127.0.0.1:{p}"))).collect();
                let prometheus = Prometheus::start_jobs(&targets, rules);
                Self { route, collector: None, prometheus, ports }
            }
            Route::CollectorExporter => {
                let collector = Otelcol::shipped("collector", "config.yaml").start();
                let scrape = exporter_job(collector.env("OTELCOL_PROMETHEUS_ENDPOINT"));
                let prometheus = Prometheus::start_scraping_with_rules(&scrape, rules);
                Self { route, collector: Some(collector), prometheus, ports: BTreeMap::new() }
            }
            Route::GatewayRemoteWrite => {
                let prometheus = Prometheus::receiving_remote_write_with_rules(rules);
                let collector = Otelcol::shipped("gateway", "gateway.yaml")
                    .env("OTELCOL_REMOTE_WRITE_URL", prometheus.remote_write_url())
                    .start();
                Self { route, collector: Some(collector), prometheus, ports: BTreeMap::new() }
            }
        }
    }

    /// A command running the example `name` (whose `service.name` is `job`) on this route: its
    /// pull endpoint on the job's port, or pushing OTLP gRPC to the collector every second.
    pub fn example(&self, name: &str, job: &str) -> Command {
        match &self.collector {
            None => {
                let port = *self.ports.get(job).unwrap_or_else(|| panic!("no pull target for the job {job}"));
                example_serving(name, port)
            }
            Some(collector) => {
                let mut cmd = example_pushing(name, &collector.endpoint("grpc"), "grpc");
                cmd.env("OTEL_METRIC_EXPORT_INTERVAL", "1000");
                cmd
            }
        }
    }

    /// What the collector logged that matters, for a failure message (empty on the pull route).
    pub fn collector_output(&self) -> String {
        self.collector.as_ref().map(Otelcol::notable_output).unwrap_or_default()
    }
}
