//! Every query of every dashboard panel, every template variable and every alert expression,
//! evaluated by real Prometheus against data from running examples: the pipeline example
//! (stages, shards, functions, spans) on the fake NVML library (GPU gauges: GPM activity, an
//! H100 in MIG mode with two instances, and the example's own process listed on GPU 0 for the
//! per-process gauges and the GPU use attributed to its stages), and the inference service
//! example (service metrics). Prometheus loads `otel-collector/rules/pipetel-alerts.yml`
//! itself. Each panel query must parse and return at least one series with a finite value, with
//! the template variables set to values Prometheus reports (and to "All"); a renamed metric or
//! label then breaks this test, not a user's dashboard. One assignment of the variables is
//! sought under which every panel of a dashboard has data; a panel whose data only some values
//! have (the MIG panels: GPUs in MIG mode, which have no device utilisation) must then have data
//! under an assignment of real values of its own.
//!
//! The same checks run on both routes ([`Route`]): Prometheus scraping the examples' pull
//! endpoints, Prometheus scraping the shipped `config.yaml` collector's `prometheus` exporter, and
//! Prometheus receiving the shipped `gateway.yaml`'s remote write. The dashboards must work on
//! all three unchanged.
//!
//! The fleet's metrics store answers the same dashboards: the examples push to a gateway running
//! `gateway-stores.yaml`, which remote-writes to VictoriaMetrics, and every dashboard query runs
//! there through the same checks (VictoriaMetrics evaluates no rules: the rule checks stay with
//! Prometheus).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::gpu::GpuProcessListing;
use crate::support::http::{http, urlencode};
use crate::support::stores::Stores;
use crate::support::{
    example_path, example_pushing, turn_if_peers, wait_for, workspace_root, Otelcol, Peer, Process, Route, RouteStack,
    FAKE_GPUS,
};
use pipetel_gpu::test_support::FakeNvml;
use serde_json::Value;

/// The service example (default metric prefix `service`).
const SERVICE_EXAMPLE: &str = "inference_service";
/// Values for Grafana's built-in interval variables.
const BUILTINS: [(&str, &str); 3] = [("$__rate_interval", "1m"), ("$__interval", "15s"), ("$__range", "5m")];
/// Seconds the examples keep serving after their run: longer than this test takes.
const LINGER_SECONDS: &str = "80";

// ---------------------------------------------------------------------------------------------
// Prometheus with the project's alert rules loaded.

/// Series whose value is a finite number (a panel of only NaN shows nothing).
fn finite(series: &[Value]) -> usize {
    series
        .iter()
        .filter(|s| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok()).is_some_and(f64::is_finite))
        .count()
}

// ---------------------------------------------------------------------------------------------
// Dashboards: variables, targets, substitution.

struct Variable {
    name: String,
    /// `label_values(selector, label)` for query variables.
    query: Option<(String, String)>,
    /// The value of a textbox / constant variable.
    fixed: Option<String>,
    include_all: bool,
}

struct Target {
    panel: String,
    ref_id: String,
    expr: String,
}

fn load_dashboard(path: &Path) -> (Vec<Variable>, Vec<Target>) {
    let d: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("dashboard JSON");
    let mut vars = Vec::new();
    for v in d["templating"]["list"].as_array().expect("templating.list") {
        let name = v["name"].as_str().expect("variable name").to_string();
        match v["type"].as_str() {
            Some("datasource") => {}
            Some("query") => {
                let q = v["query"]["query"].as_str().or(v["query"].as_str()).expect("variable query");
                let inner = q
                    .strip_prefix("label_values(")
                    .and_then(|r| r.strip_suffix(')'))
                    .unwrap_or_else(|| panic!("{}: variable {name} is not label_values(...): {q}", path.display()));
                let (selector, label) = inner.rsplit_once(',').expect("label_values(selector, label)");
                vars.push(Variable {
                    name,
                    query: Some((selector.trim().to_string(), label.trim().to_string())),
                    fixed: None,
                    include_all: v["includeAll"].as_bool().unwrap_or(false),
                });
            }
            Some("textbox") | Some("constant") | Some("custom") => {
                let value = v["current"]["value"].as_str().or(v["query"].as_str()).expect("value").to_string();
                vars.push(Variable { name, query: None, fixed: Some(value), include_all: false });
            }
            other => panic!("{}: variable {name} of unexpected type {other:?}", path.display()),
        }
    }
    let mut targets = Vec::new();
    let mut stack: Vec<&Value> = d["panels"].as_array().expect("panels").iter().collect();
    while let Some(p) = stack.pop() {
        if let Some(nested) = p["panels"].as_array() {
            stack.extend(nested);
        }
        for t in p["targets"].as_array().into_iter().flatten() {
            targets.push(Target {
                panel: p["title"].as_str().unwrap_or_default().to_string(),
                ref_id: t["refId"].as_str().unwrap_or_default().to_string(),
                expr: t["expr"].as_str().expect("target expr").to_string(),
            });
        }
    }
    (vars, targets)
}

/// Escapes a value as Grafana does for a multi-value variable inside a PromQL regex matcher.
fn regex_escape(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push_str("\\\\");
        }
        out.push(c);
    }
    out
}

/// Replaces `$name` / `${name}` (longest names first) and Grafana's interval variables.
fn substitute(expr: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = expr.to_string();
    for (k, v) in BUILTINS {
        out = out.replace(k, v);
    }
    let mut names: Vec<&String> = values.keys().collect();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    for name in names {
        out = out.replace(&format!("${{{name}}}"), &values[name]);
        let pattern = format!("${name}");
        let mut result = String::new();
        let mut rest = out.as_str();
        while let Some(i) = rest.find(&pattern) {
            let after = rest[i + pattern.len()..].chars().next();
            result.push_str(&rest[..i]);
            if after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                result.push_str(&pattern);
            } else {
                result.push_str(&values[name]);
            }
            rest = &rest[i + pattern.len()..];
        }
        result.push_str(rest);
        out = result;
    }
    out
}

/// An instant query against the PromQL API at `store` (Prometheus or VictoriaMetrics): the raw
/// result series, or the error it gives.
fn query_raw(store: &str, promql: &str) -> Result<Vec<Value>, String> {
    let (status, body) = http("GET", &format!("{store}/api/v1/query?query={}", urlencode(promql)))?;
    let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
    if status != 200 || v["status"] != "success" {
        return Err(format!("HTTP {status}: {}", v["error"].as_str().unwrap_or(&body)));
    }
    Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
}

/// Evaluates every target; returns the failures ("panel / refId: why").
fn evaluate(store: &str, targets: &[Target], values: &BTreeMap<String, String>) -> Vec<String> {
    let mut failures = Vec::new();
    for t in targets {
        let q = substitute(&t.expr, values);
        assert!(!q.contains('$'), "unsubstituted variable in {q}");
        match query_raw(store, &q) {
            Err(e) => failures.push(format!("{} / {}: {q}: {e}", t.panel, t.ref_id)),
            Ok(r) if r.is_empty() => failures.push(format!("{} / {}: no series: {q}", t.panel, t.ref_id)),
            Ok(r) if finite(&r) == 0 => {
                failures.push(format!("{} / {}: no finite value: {q} -> {r:?}", t.panel, t.ref_id))
            }
            Ok(_) => {}
        }
    }
    failures
}

/// Values of a `label_values(selector, label)` variable under the earlier variables' values.
fn label_values(store: &str, selector: &str, label: &str, values: &BTreeMap<String, String>) -> Vec<String> {
    let q = format!("group by ({label}) ({})", substitute(selector, values));
    let r = query_raw(store, &q).unwrap_or_else(|e| panic!("variable query {q}: {e}"));
    let mut out: Vec<String> = r.iter().filter_map(|s| s["metric"][label].as_str().map(str::to_string)).collect();
    out.sort();
    out
}

/// Depth-first over the variables' real values: the first assignment under which every target
/// returns data, or the one with the fewest failures.
fn search(
    store: &str,
    vars: &[Variable],
    targets: &[Target],
    values: &mut BTreeMap<String, String>,
    best: &mut Option<(BTreeMap<String, String>, Vec<String>, bool)>,
) -> bool {
    let Some((var, rest)) = vars.split_first() else {
        let failures = evaluate(store, targets, values);
        let ok = failures.is_empty();
        let better = match best.as_ref() {
            None => true,
            Some((_, f, leaf)) => !leaf || failures.len() < f.len(),
        };
        if better {
            *best = Some((values.clone(), failures, true));
        }
        return ok;
    };
    let candidates = match (&var.query, &var.fixed) {
        (Some((selector, label)), _) => {
            let found = label_values(store, selector, label, values);
            if found.is_empty() {
                if best.is_none() {
                    let why = format!("variable {} has no value: label_values({selector}, {label})", var.name);
                    *best = Some((values.clone(), vec![why], false));
                }
                return false;
            }
            found.into_iter().take(4).map(|v| regex_escape(&v)).collect()
        }
        (None, Some(v)) => vec![v.clone()],
        (None, None) => unreachable!("a variable is a query or a fixed value"),
    };
    for c in candidates {
        values.insert(var.name.clone(), c);
        if search(store, rest, targets, values, best) {
            return true;
        }
    }
    values.remove(&var.name);
    false
}

// ---------------------------------------------------------------------------------------------
// Alert expressions: the metric selectors in them.

/// The vector selectors of a PromQL expression (`name{...}` or `{...}`), without ranges or
/// offsets: enough of PromQL's grammar for the rules file.
fn selectors(expr: &str) -> Vec<String> {
    const KEYWORDS: [&str; 22] = [
        "and",
        "or",
        "unless",
        "offset",
        "bool",
        "inf",
        "nan",
        "atan2",
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    ];
    const LABEL_LISTS: [&str; 6] = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    let chars: Vec<char> = expr.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let take_braces = |i: &mut usize| -> String {
        let start = *i;
        let mut in_str = false;
        while *i < chars.len() {
            let c = chars[*i];
            if c == '"' && (*i == 0 || chars[*i - 1] != '\\') {
                in_str = !in_str;
            }
            *i += 1;
            if c == '}' && !in_str {
                break;
            }
        }
        chars[start..*i].iter().collect()
    };
    while i < chars.len() {
        let c = chars[i];
        if c == '"' || c == '\'' || c == '`' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '[' {
            while i < chars.len() && chars[i] != ']' {
                i += 1;
            }
            i += 1;
        } else if c == '{' {
            out.push(take_braces(&mut i));
        } else if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == '_' || c == ':' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_' || chars[i] == ':') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            let mut j = i;
            while j < chars.len() && chars[j].is_whitespace() {
                j += 1;
            }
            let next = chars.get(j).copied();
            if LABEL_LISTS.contains(&word.as_str()) {
                if next == Some('(') {
                    while j < chars.len() && chars[j] != ')' {
                        j += 1;
                    }
                    i = j + 1;
                }
            } else if next == Some('(') || KEYWORDS.contains(&word.as_str()) {
                // A function or aggregation, or an operator keyword.
            } else if next == Some('{') {
                i = j;
                let matchers = take_braces(&mut i);
                out.push(format!("{word}{matchers}"));
            } else {
                out.push(word);
            }
        } else {
            i += 1;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------

#[test]
fn every_panel_variable_and_alert_query_returns_real_series() {
    every_query_returns_real_series(Route::Pull);
}

#[test]
fn every_query_returns_real_series_through_the_collectors_prometheus_exporter() {
    every_query_returns_real_series(Route::CollectorExporter);
}

#[test]
fn every_query_returns_real_series_through_the_gateways_remote_write() {
    every_query_returns_real_series(Route::GatewayRemoteWrite);
}

fn every_query_returns_real_series(route: Route) {
    let Some(_turn) = turn_if_peers(module_path!(), route.peers()) else { return };
    let started = Instant::now();
    let root = workspace_root();
    let fake = Arc::new(FakeNvml::new().expect("build the fake NVML library"));
    fake.write_state(FAKE_GPUS).expect("fake NVML state");

    // Build the examples first, then start Prometheus, so it sees the whole run.
    example_path("pipeline");
    example_path(SERVICE_EXAMPLE);
    let rules = [workspace_root().join("otel-collector/rules/pipetel-alerts.yml")];
    let stack = RouteStack::start(route, &["pipeline-example", "inference-service"], &rules);
    let prom = &stack.prometheus;
    // Scrapes start a few seconds after Prometheus is ready: wait for the first attempt at
    // every target (down until the examples listen), so none of the run is missed.
    if route != Route::GatewayRemoteWrite {
        wait_for("the first scrape of every target", Duration::from_secs(30), || {
            let t = prom.api("/api/v1/targets");
            let active = t["data"]["activeTargets"].as_array()?.clone();
            (!active.is_empty() && active.iter().all(|a| a["health"] != "unknown")).then_some(())
        });
    }

    let (service, pipeline, listing) = run_service_and_pipeline(
        stack.example(SERVICE_EXAMPLE, "inference-service"),
        stack.example("pipeline", "pipeline-example"),
        &fake,
    );
    // Everything the run produced has been scraped, and the recording rule and the alert it
    // should raise.
    let rule = "pipetel:worker_memory_limit_bytes{job=\"pipeline-example\"}";
    for q in RUN_PRODUCED.iter().chain([&rule]) {
        if !prom.wait_for_series(q, Duration::from_secs(40)) {
            panic!(
                "{}: {q} returned nothing within 40 s; targets: {}\npipeline output:\n{}\nservice output:\n{}\n\
                 collector:\n{}",
                route.name(),
                prom.api("/api/v1/targets"),
                pipeline.output(),
                service.output(),
                stack.collector_output()
            );
        }
    }
    // XID errors mid-run, as the GPU dashboard's XID panel shows them: the fake driver reports
    // the events at the poller's next read. 79 (fallen off the bus) raises PipetelGpuXidCritical,
    // 13 (a program's fault) PipetelGpuXidError.
    listing.set_state(&FAKE_GPUS.replace("0.xids=", "0.xids=79,13"));
    for (code, alert) in [("79", "PipetelGpuXidCritical"), ("13", "PipetelGpuXidError")] {
        let xid = format!("hw_gpu_xid_errors_total{{job=\"pipeline-example\", hw_gpu_xid=\"{code}\"}}");
        assert!(
            prom.wait_for_series(&xid, Duration::from_secs(40)),
            "{}: {xid} returned nothing within 40 s",
            route.name()
        );
        let firing = format!(
            "ALERTS{{alertname=\"{alert}\", alertstate=\"firing\", hw_gpu_xid=\"{code}\", hw_gpu_index=\"0\"}}"
        );
        assert!(prom.wait_for_series(&firing, Duration::from_secs(20)), "{}: {firing} returned nothing", route.name());
    }
    std::thread::sleep(Duration::from_secs(2));

    // Prometheus loaded every rule of the file and evaluates them without error.
    let rules_file: serde_norway::Value = serde_norway::from_str(
        &std::fs::read_to_string(root.join("otel-collector/rules/pipetel-alerts.yml")).expect("rules"),
    )
    .expect("rules YAML");
    let mut rules = Vec::new();
    for g in rules_file["groups"].as_sequence().expect("groups") {
        for r in g["rules"].as_sequence().expect("rules") {
            let name = r["alert"].as_str().or(r["record"].as_str()).expect("rule name").to_string();
            rules.push((name, r["expr"].as_str().expect("expr").to_string()));
        }
    }
    let loaded = prom.api("/api/v1/rules");
    let loaded: Vec<Value> = loaded["data"]["groups"]
        .as_array()
        .expect("rule groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect();
    assert_eq!(loaded.len(), rules.len(), "Prometheus loaded {} rules, the file has {}", loaded.len(), rules.len());
    for r in &loaded {
        assert_eq!(r["health"], "ok", "rule {} evaluates with an error: {}", r["name"], r["lastError"]);
    }

    let mut checked = 0usize;
    let mut failures = Vec::new();

    // Alert and recording rule expressions: each parses, and each metric selector in it
    // returns series from the examples (a renamed metric breaks here).
    for (name, expr) in &rules {
        checked += 1;
        if let Err(e) = prom.query_raw(expr) {
            failures.push(format!("rule {name}: {e}"));
        }
        let sels = selectors(expr);
        assert!(!sels.is_empty(), "rule {name}: no selector found in {expr}");
        for s in sels {
            checked += 1;
            match prom.query_raw(&s) {
                Ok(r) if !r.is_empty() => {}
                Ok(_) => failures.push(format!("rule {name}: selector {s} returns no series")),
                Err(e) => failures.push(format!("rule {name}: selector {s}: {e}")),
            }
        }
    }
    // The example's failing stage raises PipetelStageFailed in this Prometheus.
    let fired = prom
        .query_raw("ALERTS{alertname=\"PipetelStageFailed\", alertstate=\"firing\", job=\"pipeline-example\"}")
        .expect("ALERTS");
    let stages: BTreeSet<&str> = fired.iter().filter_map(|s| s["metric"]["pipeline_stage_name"].as_str()).collect();
    assert_eq!(stages, BTreeSet::from(["tokenize"]), "firing PipetelStageFailed: {fired:?}");
    // The service example fails 10 % of its tasks: the failure-ratio alert holds on real data
    // (pending: it needs 5 minutes to fire).
    let pending = prom
        .query_raw(
            "ALERTS{alertname=\"PipetelTaskFailureRatioHigh\", alertstate=\"pending\", job=\"inference-service\"}",
        )
        .expect("ALERTS");
    assert_eq!(pending.len(), 1, "PipetelTaskFailureRatioHigh pending for the service: {pending:?}");
    // Nothing else fires: the XID alerts only for the codes injected above.
    let others = prom.query_raw("ALERTS{alertname!=\"PipetelStageFailed\", alertstate=\"firing\"}").expect("ALERTS");
    let unexpected: Vec<_> = others
        .iter()
        .filter(|a| {
            let m = &a["metric"];
            !matches!(
                (m["alertname"].as_str(), m["hw_gpu_xid"].as_str()),
                (Some("PipetelGpuXidCritical"), Some("79")) | (Some("PipetelGpuXidError"), Some("13"))
            )
        })
        .collect();
    assert!(unexpected.is_empty(), "unexpected alerts firing: {unexpected:?}");

    // Every panel query of every dashboard, with real variable values and with "All".
    let (dashboard_failures, dashboard_checked, per_dashboard) = every_dashboard_query(&prom.url);
    failures.extend(dashboard_failures);
    checked += dashboard_checked;
    assert!(
        failures.is_empty(),
        "{}: {} of the queries fail:\n{}\n\npipeline output:\n{}",
        route.name(),
        failures.len(),
        failures.join("\n"),
        pipeline.output()
    );
    eprintln!("{}: checked {checked} queries in {:?}:\n{}", route.name(), started.elapsed(), per_dashboard.join("\n"));
}

#[test]
fn every_dashboard_query_returns_real_series_on_victoria_metrics() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Otelcol]) else { return };
    let Some(stores) = Stores::start(module_path!()) else { return };
    let started = Instant::now();
    let fake = Arc::new(FakeNvml::new().expect("build the fake NVML library"));
    fake.write_state(FAKE_GPUS).expect("fake NVML state");
    example_path("pipeline");
    example_path(SERVICE_EXAMPLE);
    let mut gateway = Otelcol::shipped("gateway-stores", "gateway-stores.yaml");
    for (key, value) in stores.gateway_env() {
        gateway = gateway.env(key, value);
    }
    let gateway = gateway.start();
    let pushing = |name: &str| {
        let mut cmd = example_pushing(name, &gateway.endpoint("grpc"), "grpc");
        cmd.env("OTEL_METRIC_EXPORT_INTERVAL", "1000");
        cmd
    };
    let (service, pipeline, listing) = run_service_and_pipeline(pushing(SERVICE_EXAMPLE), pushing("pipeline"), &fake);

    let vm = &stores.metrics;
    for q in RUN_PRODUCED {
        let found = wait_for_data(&vm.url, q, Duration::from_secs(40));
        assert!(
            found,
            "VictoriaMetrics: {q} returned nothing within 40 s\npipeline output:\n{}\nservice output:\n{}\n\
             gateway:\n{}",
            pipeline.output(),
            service.output(),
            gateway.notable_output()
        );
    }
    // XID errors mid-run, for the GPU dashboard's XID panel (as on Prometheus above).
    listing.set_state(&FAKE_GPUS.replace("0.xids=", "0.xids=79,13"));
    for code in ["79", "13"] {
        let xid = format!("hw_gpu_xid_errors_total{{job=\"pipeline-example\", hw_gpu_xid=\"{code}\"}}");
        assert!(wait_for_data(&vm.url, &xid, Duration::from_secs(40)), "VictoriaMetrics: {xid} returned nothing");
    }
    std::thread::sleep(Duration::from_secs(2));

    let (failures, checked, per_dashboard) = every_dashboard_query(&vm.url);
    assert!(
        failures.is_empty(),
        "VictoriaMetrics: {} of the queries fail:\n{}\n\npipeline output:\n{}",
        failures.len(),
        failures.join("\n"),
        pipeline.output()
    );
    eprintln!("VictoriaMetrics: checked {checked} queries in {:?}:\n{}", started.elapsed(), per_dashboard.join("\n"));
}

/// Runs the inference service (tasks completed, failed and cancelled, queue gauges) and the
/// pipeline example on the three fake GPUs of `fake` from their commands, the pipeline's process
/// listed on GPU 0 (memory and utilisation: its stages get GPU use attributed) for as long as
/// the returned listing lives; returns once the pipeline is done. 8 s of service: through a collector the first sample of a series reaches
/// Prometheus only after the collector's batch timeout (5 s), and rate() sees only the
/// increases after it. The pipeline keeps every shard's worker series
/// (`PIPETEL_SHARD_METRICS=all`): by default only running shards have them, and the queries run
/// after the pipeline finished; the stage-level families (shard durations, skew, stragglers,
/// stalls, phases) are there either way.
fn run_service_and_pipeline(
    mut service: Command,
    mut pipeline: Command,
    fake: &Arc<FakeNvml>,
) -> (Process, Process, GpuProcessListing) {
    service.args(["--seconds", "8", "--linger-seconds", LINGER_SECONDS]);
    let service = Process::spawn(SERVICE_EXAMPLE, service);
    pipeline
        .env("PIPETEL_SAMPLE_INTERVAL", "500")
        .env("PIPETEL_SHARD_METRICS", "all")
        .env("PIPETEL_GPU", "on")
        .env("PIPETEL_NVML_LIBRARY", fake.library_path())
        .env("PIPETEL_GPU_POLL_INTERVAL", "1s")
        .args(["--seconds", "2", "--linger-seconds", LINGER_SECONDS]);
    let mut pipeline = Process::spawn("pipeline", pipeline);
    let listing = GpuProcessListing::start(Arc::clone(fake), FAKE_GPUS, pipeline.id());
    pipeline.wait_for_output("done: stages=3", Duration::from_secs(60));
    (service, pipeline, listing)
}

/// What [`run_service_and_pipeline`] produces, once stored: three finished runs, GPU gauges (GPM
/// activity of the GPUs and of the two MIG instances, the pipeline's process on GPU 0), GPU use
/// attributed to each stage, span metrics, the service's tasks.
const RUN_PRODUCED: [&str; 9] = [
    "count(pipeline_stage_runs_total{job=\"pipeline-example\"}) == 3",
    "count(hw_status{job=\"pipeline-example\", hw_state=\"ok\"}) == 3",
    "count(hw_gpu_sm_activity_ratio{job=\"pipeline-example\", hw_gpu_mig_id!=\"\"}) == 2",
    "pipetel_gpu_process_utilization_ratio{job=\"pipeline-example\", hw_gpu_task=\"general\"}",
    "count(pipeline_stage_gpu_idle_seconds_total{job=\"pipeline-example\"}) == 3",
    "count(pipeline_stage_gpu_sm_active_ratio{job=\"pipeline-example\"}) == 3",
    "span_duration_seconds_count{job=\"pipeline-example\", span_name=\"pipeline.stage\", status=\"error\"}",
    "rate(service_tasks_completed_total{job=\"inference-service\"}[1m]) > 0",
    "rate(function_calls_total{job=\"pipeline-example\"}[1m]) > 0",
];

/// Waits until `promql` returns a series at `store`; false after `timeout`.
fn wait_for_data(store: &str, promql: &str, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while !query_raw(store, promql).is_ok_and(|r| !r.is_empty()) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    true
}

/// Every panel query of every dashboard against the PromQL API at `store`, with real variable
/// values and with "All": the failures, the number of queries checked, a line per dashboard.
fn every_dashboard_query(store: &str) -> (Vec<String>, usize, Vec<String>) {
    let root = workspace_root();
    let dashboards = ["pipeline-stages", "workers-shards", "gpus", "service", "functions-spans"];
    let (mut failures, mut checked, mut per_dashboard) = (Vec::new(), 0, Vec::new());
    for name in dashboards {
        let path = root.join(format!("dashboards/{name}.json"));
        let (vars, targets) = load_dashboard(&path);
        assert!(!targets.is_empty(), "{name}: no targets");
        let mut best = None;
        let ok = search(store, &vars, &targets, &mut BTreeMap::new(), &mut best);
        let (values, errs, complete) = best.expect("one assignment evaluated");
        let mut own_values = Vec::new();
        if !ok {
            // The panels without data under that assignment: each must have data under real
            // values of its own (a MIG panel on a GPU in MIG mode, device utilisation on another).
            let failing: Vec<&Target> = targets
                .iter()
                .filter(|t| !complete || !evaluate(store, std::slice::from_ref(*t), &values).is_empty())
                .collect();
            if failing.is_empty() {
                failures.extend(errs.iter().map(|e| format!("{name} with {values:?}: {e}")));
            }
            for t in failing {
                let mut own = None;
                let found = search(store, &vars, std::slice::from_ref(t), &mut BTreeMap::new(), &mut own);
                let (v, errs, _) = own.expect("one assignment evaluated");
                if found {
                    own_values.push(format!("{} / {} with {v:?}", t.panel, t.ref_id));
                } else {
                    failures.extend(errs.iter().map(|e| format!("{name} with {v:?}: {e}")));
                }
            }
        }
        let all: BTreeMap<String, String> = vars
            .iter()
            .map(|v| (v.name.clone(), if v.include_all { ".*".to_string() } else { values[&v.name].clone() }))
            .collect();
        failures.extend(evaluate(store, &targets, &all).into_iter().map(|e| format!("{name} with All: {e}")));
        checked += 2 * targets.len() + vars.len();
        per_dashboard.push(format!("{name}: {} queries, {} variables, values {values:?}", targets.len(), vars.len()));
        per_dashboard.extend(own_values.iter().map(|o| format!("  {name}: {o}")));
    }
    (failures, checked, per_dashboard)
}

#[test]
fn the_selector_scanner_finds_metric_selectors_only() {
    let found = selectors(
        "max by (job, instance) (rate(foo_total{a=\"b}\",c=~\"x|y\"}[5m] offset 10m)) > on (job) group_left () \
         0.9 * rec:rule_bytes and {__name__=~\"service_.*\"} or sum without (le) (bar) * 1e9",
    );
    assert_eq!(
        found,
        vec![
            "foo_total{a=\"b}\",c=~\"x|y\"}".to_string(),
            "rec:rule_bytes".to_string(),
            "{__name__=~\"service_.*\"}".to_string(),
            "bar".to_string()
        ]
    );
}

#[test]
fn variables_substitute_like_grafana() {
    let values = BTreeMap::from([
        ("job".to_string(), regex_escape("pipeline.example")),
        ("job_name".to_string(), "x".to_string()),
        ("prefix".to_string(), "service".to_string()),
    ]);
    assert_eq!(
        substitute("rate(${prefix}_tasks_total{job=~\"$job\", n=\"$job_name\"}[$__rate_interval])", &values),
        "rate(service_tasks_total{job=~\"pipeline\\\\.example\", n=\"x\"}[1m])"
    );
}
