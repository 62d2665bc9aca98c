//! The Prometheus of the compose stack keeps exemplars: real Prometheus, started with every flag
//! of the `prometheus` service in `otel-collector/docker-compose.yaml` (its config file replaced
//! by one scraping the quickstart, its storage by a temporary folder), scrapes the quickstart's
//! pull endpoint with traces on and answers `/api/v1/query_exemplars` with trace ids on
//! `span_duration_seconds_bucket`. Prometheus only warns about a feature name it does not know,
//! so a stored exemplar is the proof the flag is right; the same flags without it store none.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::support::http::urlencode;
use crate::support::workspace::quickstart_five_batches;
use crate::support::{example_serving, free_port, http, turn_if_peers, wait_for, workspace_root, Peer, Process};

/// The `command` of the compose file's `prometheus` service.
fn compose_prometheus_flags() -> Vec<String> {
    let path = workspace_root().join("otel-collector/docker-compose.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let compose: serde_norway::Value =
        serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    compose["services"]["prometheus"]["command"]
        .as_sequence()
        .expect("the prometheus service's command")
        .iter()
        .map(|f| f.as_str().expect("a flag").to_string())
        .collect()
}

/// Real Prometheus run with `flags` (those naming the container's config file or storage
/// replaced), scraping `target` every second; killed on drop.
struct ComposePrometheus {
    url: String,
    dir: PathBuf,
    _process: Process,
}

impl ComposePrometheus {
    fn start(flags: &[String], target: &str) -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("pipetel-compose-prom-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus temp dir");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: pipetel\n    static_configs:\n      - targets: ['{target}']\n"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let mut cmd = Command::new(Peer::Prometheus.binary());
        cmd.args(flags.iter().filter(|f| !f.starts_with("--config.file=") && !f.starts_with("--storage.tsdb.path=")))
            .arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        let process = Process::spawn("prometheus", cmd);
        let url = format!("http://127.0.0.1:{port}");
        wait_for("prometheus to be ready", Duration::from_secs(30), || match http("GET", &format!("{url}/-/ready")) {
            Ok((200, _)) => Some(()),
            _ => None,
        });
        Self { url, dir, _process: process }
    }

    fn get(&self, path: &str) -> serde_json::Value {
        let (status, body) = http("GET", &format!("{}{path}", self.url)).expect("prometheus API");
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// The exemplars' `(trace_id, span_id)` on `span_duration_seconds_bucket` in the last ten minutes.
    fn exemplars(&self) -> Vec<(String, String)> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let query = urlencode("span_duration_seconds_bucket");
        let answer = self.get(&format!(
            "/api/v1/query_exemplars?query={query}&start={}&end={}",
            now.saturating_sub(600),
            now + 60
        ));
        answer["data"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|s| s["exemplars"].as_array().cloned().unwrap_or_default())
            .map(|e| {
                let label = |k: &str| e["labels"][k].as_str().unwrap_or_default().to_string();
                (label("trace_id"), label("span_id"))
            })
            .collect()
    }

    /// How many `span_duration_seconds_bucket` series hold a sample now.
    fn bucket_series(&self) -> usize {
        let answer = self.get(&format!("/api/v1/query?query={}", urlencode("span_duration_seconds_bucket")));
        answer["data"]["result"].as_array().map_or(0, Vec::len)
    }
}

impl Drop for ComposePrometheus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn the_compose_prometheus_stores_exemplars_that_name_traces() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus]) else { return };
    let flags = compose_prometheus_flags();
    let port = free_port();
    let mut cmd = example_serving("quickstart", port);
    quickstart_five_batches(cmd.env("OTEL_TRACES_EXPORTER", "console"));
    let mut example = Process::spawn("quickstart", cmd);
    example.wait_for_output("done: batches=5", Duration::from_secs(60));
    let target = format!("127.0.0.1:{port}");

    let prometheus = ComposePrometheus::start(&flags, &target);
    let exemplars = wait_for("the compose Prometheus to store exemplars", Duration::from_secs(30), || {
        let exemplars = prometheus.exemplars();
        (!exemplars.is_empty()).then_some(exemplars)
    });
    let output = example.output();
    for (trace_id, span_id) in &exemplars {
        assert!(trace_id.len() == 32 && span_id.len() == 16, "exemplar ids: {trace_id} / {span_id}");
        assert!(output.contains(trace_id.as_str()), "exemplar trace {trace_id} is none the example printed");
    }

    // The same flags without exemplar storage keep none, though the histogram is scraped.
    let without: Vec<String> = flags.iter().filter(|f| !f.contains("exemplar-storage")).cloned().collect();
    assert_eq!(without.len() + 1, flags.len(), "one flag turns exemplar storage on: {flags:?}");
    let plain = ComposePrometheus::start(&without, &target);
    wait_for("the plain Prometheus to store the histogram", Duration::from_secs(30), || {
        (plain.bucket_series() > 0).then_some(())
    });
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(plain.exemplars(), Vec::new(), "exemplars stored without the flag: the check above proves nothing");
    example.kill();
}
