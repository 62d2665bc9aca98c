//! A real Prometheus server on a free loopback port, and `promtool`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::http::{http, urlencode};
use super::peers::Peer;
use super::ports::free_port;
use super::process::{wait_for, Process};

/// One series of a PromQL result: its labels and its value.
pub type Series = (BTreeMap<String, String>, f64);

/// A real Prometheus server with its own temporary storage, scraping every second.
pub struct Prometheus {
    /// Base URL, e.g. `http://127.0.0.1:41234`.
    pub url: String,
    process: Process,
    dir: PathBuf,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (`host:port` strings) under the job `pipetel`, with
    /// `metrics_path` as the scrape path. Waits until it is ready.
    pub fn start(targets: &[String], metrics_path: &str) -> Self {
        let targets = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        Self::start_with(
            &format!("  - job_name: pipetel\n    metrics_path: '{metrics_path}'\n    static_configs:\n      - targets: [{targets}]\n"),
            &[],
        )
    }

    /// Starts Prometheus scraping `/metrics` of `127.0.0.1:port`, waits until the target is up,
    /// and asserts the scrape had no error (the real parser accepted the exposition).
    pub fn scraping_cleanly(port: u16) -> Self {
        Self::start(&[format!("127.0.0.1:{port}")], "/metrics").up_cleanly()
    }

    /// [`Self::scraping_cleanly`] with exemplar storage on ([`Self::start_with_exemplars`]).
    pub fn scraping_exemplars_cleanly(port: u16) -> Self {
        Self::start_with_exemplars(&[format!("127.0.0.1:{port}")], "/metrics").up_cleanly()
    }

    /// Waits until the target is up and asserts its scrape had no error.
    fn up_cleanly(self) -> Self {
        let targets = self.wait_until_up(Duration::from_secs(30));
        assert_eq!(targets[0]["lastError"], "", "the scrape failed: {targets:?}");
        self
    }

    /// Starts Prometheus scraping each `(job, host:port)` on `/metrics` and evaluating `rule_files`
    /// every second. Waits until it is ready.
    pub fn start_jobs(jobs: &[(&str, String)], rule_files: &[PathBuf]) -> Self {
        let scrape: String = jobs
            .iter()
            .map(|(job, target)| format!("  - job_name: '{job}'\n    static_configs:\n      - targets: ['{target}']\n"))
            .collect();
        Self::start_with(&scrape, rule_files)
    }

    /// Starts Prometheus with `scrape_configs` (the YAML list under `scrape_configs:`, indented by
    /// two spaces, as in `prometheus.yml`) and no rules. Waits until it is ready.
    pub fn start_scraping(scrape_configs: &str) -> Self {
        Self::start_with(scrape_configs, &[])
    }

    /// Starts Prometheus with nothing to scrape and its remote-write receiver on
    /// (`--web.enable-remote-write-receiver`), the way `otel-collector/gateway.yaml` expects it:
    /// push to [`Self::remote_write_url`]. Waits until it is ready.
    pub fn receiving_remote_write() -> Self {
        Self::start_with_flags("", &[], &["--web.enable-remote-write-receiver"])
    }

    /// [`Self::start`] with exemplar storage on (`--enable-feature=exemplar-storage`): exemplars
    /// in an OpenMetrics scrape are kept and answered by [`Self::query_exemplars`].
    pub fn start_with_exemplars(targets: &[String], metrics_path: &str) -> Self {
        let targets = targets.iter().map(|t| format!("'{t}'")).collect::<Vec<_>>().join(", ");
        Self::start_with_flags(
            &format!("  - job_name: pipetel\n    metrics_path: '{metrics_path}'\n    static_configs:\n      - targets: [{targets}]\n"),
            &[],
            &["--enable-feature=exemplar-storage"],
        )
    }

    /// `/api/v1/query_exemplars` for `promql` over the last ten minutes: the whole JSON answer.
    pub fn query_exemplars(&self, promql: &str) -> serde_json::Value {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        self.api(&format!(
            "/api/v1/query_exemplars?query={}&start={}&end={}",
            super::http::urlencode(promql),
            now.saturating_sub(600),
            now + 60
        ))
    }

    /// The answer of [`Self::query_exemplars`] for `promql` once it holds a series (30 s at most).
    pub fn wait_for_exemplars(&self, promql: &str) -> serde_json::Value {
        wait_for("Prometheus to return exemplars", Duration::from_secs(30), || {
            let answer = self.query_exemplars(promql);
            answer["data"].as_array().is_some_and(|series| !series.is_empty()).then_some(answer)
        })
    }

    /// Starts Prometheus with `scrape_configs` (as [`Self::start_scraping`]) evaluating
    /// `rule_files` every second. Waits until it is ready.
    pub fn start_scraping_with_rules(scrape_configs: &str, rule_files: &[PathBuf]) -> Self {
        Self::start_with(scrape_configs, rule_files)
    }

    /// [`Self::receiving_remote_write`], evaluating `rule_files` every second.
    pub fn receiving_remote_write_with_rules(rule_files: &[PathBuf]) -> Self {
        Self::start_with_flags("", rule_files, &["--web.enable-remote-write-receiver"])
    }

    /// Every series (its labels, `__name__` included) with a sample in the last `minutes`
    /// minutes that matches `selector` (`/api/v1/series`): series that went stale since count too.
    pub fn series(&self, selector: &str, minutes: u64) -> Vec<BTreeMap<String, String>> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let url = format!(
            "{}/api/v1/series?match[]={}&start={}&end={}",
            self.url,
            urlencode(selector),
            now.saturating_sub(minutes * 60),
            now + 1
        );
        let (_, body) = http("GET", &url).expect("prometheus series API");
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("series: {e}: {body}"));
        v["data"]
            .as_array()
            .map(|all| {
                all.iter()
                    .filter_map(|s| s.as_object())
                    .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The URL of the remote-write receiver (on only with [`Self::receiving_remote_write`]).
    pub fn remote_write_url(&self) -> String {
        format!("{}/api/v1/write", self.url)
    }

    fn start_with(scrape_configs: &str, rule_files: &[PathBuf]) -> Self {
        Self::start_with_flags(scrape_configs, rule_files, &[])
    }

    fn start_with_flags(scrape_configs: &str, rule_files: &[PathBuf], flags: &[&str]) -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("pipetel-prom-{}-{port}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).expect("prometheus temp dir");
        let rules: String = rule_files.iter().map(|r| format!("  - '{}'\n", r.display())).collect();
        let rules = if rules.is_empty() { String::new() } else { format!("rule_files:\n{rules}") };
        let scrape_configs =
            if scrape_configs.trim().is_empty() { " []\n".to_string() } else { format!("\n{scrape_configs}") };
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n{rules}scrape_configs:{scrape_configs}"
        );
        std::fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let mut cmd = Command::new(Peer::Prometheus.binary());
        cmd.arg(format!("--config.file={}", dir.join("prometheus.yml").display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .args(flags);
        let process = Process::spawn("prometheus", cmd);
        let url = format!("http://127.0.0.1:{port}");
        let ready = format!("{url}/-/ready");
        wait_for("prometheus to be ready", Duration::from_secs(30), || match http("GET", &ready) {
            Ok((200, _)) => Some(()),
            _ => None,
        });
        Self { url, process, dir }
    }

    /// Any GET API path (`/api/v1/rules`, ...), as JSON.
    pub fn api(&self, path: &str) -> serde_json::Value {
        let (_, body) = http("GET", &format!("{}{path}", self.url)).expect("prometheus API");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
    }

    /// An instant query's raw result series, or the error Prometheus gives (a parse error).
    pub fn query_raw(&self, promql: &str) -> Result<Vec<serde_json::Value>, String> {
        let (status, body) = http("GET", &format!("{}/api/v1/query?query={}", self.url, urlencode(promql)))?;
        let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if status != 200 || v["status"] != "success" {
            return Err(format!("HTTP {status}: {}", v["error"].as_str().unwrap_or(&body)));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    /// Waits until `promql` returns a series; false (printing Prometheus's output) after `timeout`.
    pub fn wait_for_series(&self, promql: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.query_raw(promql).is_ok_and(|r| !r.is_empty()) {
            if Instant::now() > deadline {
                eprintln!("prometheus output:\n{}", self.process.output());
                return false;
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        true
    }

    /// The scrape targets as `/api/v1/targets` reports them.
    pub fn targets(&self) -> serde_json::Value {
        self.api("/api/v1/targets")
    }

    /// Waits until every active target has been scraped with `health == "up"`; returns the targets.
    pub fn wait_until_up(&self, timeout: Duration) -> Vec<serde_json::Value> {
        wait_for("every target up", timeout, || {
            let t = self.targets();
            let active = t["data"]["activeTargets"].as_array()?.clone();
            (!active.is_empty() && active.iter().all(|a| a["health"] == "up")).then_some(active)
        })
    }

    /// Runs an instant PromQL query; returns `(labels, value)` per series.
    pub fn query(&self, promql: &str) -> Result<Vec<Series>, String> {
        promql_query(&self.url, promql)
    }

    /// Waits until `promql` returns at least one series whose value satisfies `accept`.
    pub fn wait_for_value(&self, promql: &str, timeout: Duration, accept: impl Fn(f64) -> bool) -> Vec<Series> {
        let mut last = Vec::new();
        let deadline = Instant::now() + timeout;
        loop {
            if let Ok(r) = self.query(promql) {
                if !r.is_empty() && r.iter().all(|(_, v)| accept(*v)) {
                    return r;
                }
                last = r;
            }
            assert!(Instant::now() < deadline, "{promql} never reached the expected value within {timeout:?}; last result {last:?}; prometheus output:\n{}", self.process.output());
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Waits, query by query, until each `(promql, value)` returns series that all equal `value`.
    pub fn wait_for_values<Q: AsRef<str>>(&self, expected: impl IntoIterator<Item = (Q, f64)>, timeout: Duration) {
        for (promql, value) in expected {
            self.wait_for_value(promql.as_ref(), timeout, |v| v == value);
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        self.process.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The `promtool` binary: `PIPETEL_PROMTOOL_BIN`, or `promtool` on `PATH` ([`Peer::Promtool`]).
pub fn promtool_binary() -> PathBuf {
    Peer::Promtool.binary()
}

/// Runs `promtool` with `args` in `dir`; returns whether it succeeded and its output.
pub fn promtool(args: &[&str], dir: &Path) -> (bool, String) {
    let bin = promtool_binary();
    let out = Command::new(&bin)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {bin:?} (set PIPETEL_PROMTOOL_BIN): {e}"));
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// Runs `promtool check metrics` on an exposition; returns its output on failure.
pub fn promtool_check_metrics(exposition: &str) -> Result<(), String> {
    let mut child = Command::new(promtool_binary())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start promtool: {e}"))?;
    child.stdin.take().expect("stdin").write_all(exposition.as_bytes()).map_err(|e| e.to_string())?;
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    }
}

/// An instant PromQL query against the HTTP API at `base_url` (Prometheus or any server that
/// speaks its API, VictoriaMetrics too); returns `(labels, value)` per series.
pub fn promql_query(base_url: &str, promql: &str) -> Result<Vec<Series>, String> {
    let url = format!("{base_url}/api/v1/query?query={}", urlencode(promql));
    let (status, body) = http("GET", &url)?;
    let v: serde_json::Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if status != 200 || v["status"] != "success" {
        return Err(format!("query {promql:?} failed ({status}): {body}"));
    }
    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
    Ok(result
        .iter()
        .map(|s| {
            let labels = s["metric"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string())).collect())
                .unwrap_or_default();
            let value = s["value"][1].as_str().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
            (labels, value)
        })
        .collect())
}
