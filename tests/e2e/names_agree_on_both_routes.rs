//! One name per metric, whichever way it reaches Prometheus. The pipeline example (stages,
//! shards, functions, spans, two fake GPUs with the opt-in PCIe gauge), the inference service
//! example (service and registry metrics, the HTTP server metrics, GPUs) and the multiprocess
//! example (the snapshot hub: counters, a gauge, a histogram) run at once on each route: pull
//! endpoint scraped by Prometheus, OTLP to `config.yaml` whose `prometheus` exporter Prometheus
//! scrapes, OTLP to `gateway.yaml` remote-writing to Prometheus. Asserted, from what each
//! Prometheus stored:
//! - every instrument pipetel creates has the Prometheus name of [`TABLE`] on every route;
//! - every route holds the same metric names, each name the same label names and jobs (the
//!   few documented exceptions in [`PULL_ONLY`] and [`LABEL_EXCEPTIONS`] aside);
//! - `job` is the program's `service.name` on every route, each program has one `instance`, and
//!   `target_info` has one series per `job`/`instance` with the same resource attributes
//!   (besides those that are `job` and `instance` through a collector).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::support::{example_path, turn_if_peers, wait_for, Peer, Process, Route, RouteStack, FAKE_GPUS};
use pipetel_gpu::test_support::FakeNvml;

/// The OTel kinds the translation tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Counter / observable counter (a monotonic sum): `_total`.
    Counter,
    /// Up-down counter (a non-monotonic sum): never `_ratio`.
    UpDown,
    /// Gauge / observable gauge: unit `1` adds `_ratio`.
    Gauge,
    /// Histogram: `_bucket`, `_sum`, `_count`.
    Histogram,
    /// Pushed as `<prom>_bucket{le}`, `_sum`, `_count` non-monotonic sums (the hub's
    /// histograms), rendered as a histogram on the pull endpoint.
    HubHistogram,
    /// Pushed as a `quantile` gauge and `_sum`, `_count` non-monotonic sums (the registry's
    /// summaries), rendered as a summary on the pull endpoint.
    Summary,
}

/// Every instrument pipetel creates that the examples exercise: (program's job, OTel name, kind,
/// unit, Prometheus name on every route). The translation table of `docs/src/exporters.md` is this table.
/// (`function.errors`, `function.output.size` and `pipetel.gpu.process.memory.usage` follow the
/// same rules but need an erring function, an `output_size` and a GPU process, which the
/// examples do not have; the crate's unit tests cover the rules for every kind and unit.)
const TABLE: &[(&str, &str, Kind, &str, &str)] = &[
    // Stage and worker metrics.
    ("pipeline-example", "pipeline.stage.items", Kind::Counter, "{item}", "pipeline_stage_items_total"),
    ("pipeline-example", "pipeline.stage.bytes", Kind::Counter, "By", "pipeline_stage_bytes_total"),
    ("pipeline-example", "pipeline.stage.duration", Kind::Histogram, "s", "pipeline_stage_duration_seconds"),
    ("pipeline-example", "pipeline.stage.active", Kind::UpDown, "{stage}", "pipeline_stage_active"),
    ("pipeline-example", "pipeline.stage.runs", Kind::Counter, "{run}", "pipeline_stage_runs_total"),
    ("pipeline-example", "pipeline.stage.shards", Kind::Gauge, "{shard}", "pipeline_stage_shards"),
    ("pipeline-example", "pipeline.stage.errors", Kind::Counter, "{error}", "pipeline_stage_errors_total"),
    ("pipeline-example", "pipeline.stage.cpu.utilization", Kind::Gauge, "1", "pipeline_stage_cpu_utilization_ratio"),
    ("pipeline-example", "pipeline.worker.items", Kind::Counter, "{item}", "pipeline_worker_items_total"),
    ("pipeline-example", "pipeline.worker.bytes", Kind::Counter, "By", "pipeline_worker_bytes_total"),
    ("pipeline-example", "pipeline.worker.cpu.time", Kind::Counter, "s", "pipeline_worker_cpu_time_seconds_total"),
    ("pipeline-example", "pipeline.worker.cpu.utilization", Kind::Gauge, "1", "pipeline_worker_cpu_utilization_ratio"),
    ("pipeline-example", "pipeline.worker.memory.usage", Kind::Gauge, "By", "pipeline_worker_memory_usage_bytes"),
    ("pipeline-example", "pipeline.worker.memory.average", Kind::Gauge, "By", "pipeline_worker_memory_average_bytes"),
    ("pipeline-example", "pipeline.worker.memory.peak", Kind::Gauge, "By", "pipeline_worker_memory_peak_bytes"),
    ("pipeline-example", "pipeline.worker.heartbeat", Kind::Gauge, "s", "pipeline_worker_heartbeat_seconds"),
    // Span metrics and #[pipetel::measure].
    ("pipeline-example", "span.duration", Kind::Histogram, "s", "span_duration_seconds"),
    ("pipeline-example", "function.calls", Kind::Counter, "{call}", "function_calls_total"),
    ("pipeline-example", "function.in_flight", Kind::UpDown, "{call}", "function_in_flight"),
    ("pipeline-example", "function.duration", Kind::Histogram, "s", "function_duration_seconds"),
    ("pipeline-example", "function.input.size", Kind::Histogram, "By", "function_input_size_bytes"),
    // GPU (hardware semantic conventions).
    ("pipeline-example", "hw.gpu.utilization", Kind::Gauge, "1", "hw_gpu_utilization_ratio"),
    ("pipeline-example", "hw.gpu.memory.usage", Kind::Gauge, "By", "hw_gpu_memory_usage_bytes"),
    ("pipeline-example", "hw.gpu.memory.limit", Kind::Gauge, "By", "hw_gpu_memory_limit_bytes"),
    ("pipeline-example", "hw.gpu.memory.utilization", Kind::Gauge, "1", "hw_gpu_memory_utilization_ratio"),
    ("pipeline-example", "hw.power", Kind::Gauge, "W", "hw_power_watts"),
    ("pipeline-example", "hw.energy", Kind::Counter, "J", "hw_energy_joules_total"),
    ("pipeline-example", "hw.temperature", Kind::Gauge, "Cel", "hw_temperature_celsius"),
    ("pipeline-example", "hw.errors", Kind::Counter, "{error}", "hw_errors_total"),
    ("pipeline-example", "hw.gpu.clock", Kind::Gauge, "Hz", "hw_gpu_clock_hertz"),
    ("pipeline-example", "hw.fan.speed_ratio", Kind::Gauge, "1", "hw_fan_speed_ratio"),
    ("pipeline-example", "hw.status", Kind::UpDown, "1", "hw_status"),
    ("pipeline-example", "hw.gpu.pcie.throughput", Kind::Gauge, "By/s", "hw_gpu_pcie_throughput_bytes_per_second"),
    // Service metrics (a registry with OTel names).
    ("inference-service", "service.tasks.created", Kind::Counter, "{task}", "service_tasks_created_total"),
    ("inference-service", "service.tasks.completed", Kind::Counter, "{task}", "service_tasks_completed_total"),
    ("inference-service", "service.tasks.failed", Kind::Counter, "{task}", "service_tasks_failed_total"),
    ("inference-service", "service.tasks.cancelled", Kind::Counter, "{task}", "service_tasks_cancelled_total"),
    ("inference-service", "service.task.duration", Kind::Histogram, "s", "service_task_duration_seconds"),
    ("inference-service", "service.task.queue.wait", Kind::Histogram, "s", "service_task_queue_wait_seconds"),
    ("inference-service", "service.queue.size", Kind::Gauge, "{task}", "service_queue_size"),
    ("inference-service", "service.queue.pending", Kind::Gauge, "{task}", "service_queue_pending"),
    ("inference-service", "service.queue.processing", Kind::Gauge, "{task}", "service_queue_processing"),
    // A registry's own metrics: the OTel name is the Prometheus name, no unit.
    ("inference-service", "inference_requests", Kind::Counter, "", "inference_requests_total"),
    ("inference-service", "inference_workers_busy", Kind::Gauge, "", "inference_workers_busy"),
    ("inference-service", "inference_tokens", Kind::Summary, "", "inference_tokens"),
    // HTTP server metrics (pipetel::http).
    ("inference-service", "http.server.request.duration", Kind::Histogram, "s", "http_server_request_duration_seconds"),
    ("inference-service", "http.server.active_requests", Kind::UpDown, "{request}", "http_server_active_requests"),
    (
        "inference-service",
        "http.server.request.body.size",
        Kind::Histogram,
        "By",
        "http_server_request_body_size_bytes",
    ),
    (
        "inference-service",
        "http.server.response.body.size",
        Kind::Histogram,
        "By",
        "http_server_response_body_size_bytes",
    ),
    // The snapshot hub: families from worker processes.
    ("multiprocess", "pipeline.stage.items", Kind::Counter, "{item}", "pipeline_stage_items_total"),
    ("multiprocess", "pipeline.transfer.bytes", Kind::Counter, "By", "pipeline_transfer_bytes_total"),
    ("multiprocess", "pipeline.transfer.count", Kind::Counter, "{transfer}", "pipeline_transfer_count_total"),
    ("multiprocess", "pipeline.transfer.duration", Kind::Counter, "s", "pipeline_transfer_duration_seconds_total"),
    ("multiprocess", "pipeline.worker.memory.usage", Kind::Gauge, "By", "pipeline_worker_memory_usage_bytes"),
    ("multiprocess", "task.duration", Kind::HubHistogram, "s", "task_duration_seconds"),
];

/// Names only the pull endpoint has: a registry's text collector hands in exposition lines,
/// which no OTel instrument carries.
const PULL_ONLY: &[&str] = &["legacy_model_cache_entries"];

/// Label names some routes have and the others not, by design: (metric, or a prefix ending in
/// `*`; label; the routes that have it).
/// - A registry summary is rendered by the registry itself on the pull endpoint, without the
///   scope label its pushed form carries.
/// - `target_info` is the resource on the pull endpoint, where `job`/`instance` come from the
///   scrape; through a collector `service.name` and `service.instance.id` are `job` and
///   `instance` instead.
/// - A scope's schema URL (the HTTP middleware's meter has one) is `otel_scope_schema_url` on
///   the pull endpoint and through the collector's `prometheus` exporter; `prometheusremotewrite`
///   writes no such label.
const LABEL_EXCEPTIONS: &[(&str, &str, &[Route])] = &[
    ("inference_tokens", "otel_scope_name", &[Route::CollectorExporter, Route::GatewayRemoteWrite]),
    ("inference_tokens_sum", "otel_scope_name", &[Route::CollectorExporter, Route::GatewayRemoteWrite]),
    ("inference_tokens_count", "otel_scope_name", &[Route::CollectorExporter, Route::GatewayRemoteWrite]),
    ("target_info", "service_name", &[Route::Pull]),
    ("target_info", "service_instance_id", &[Route::Pull]),
    ("http_server_*", "otel_scope_schema_url", &[Route::Pull, Route::CollectorExporter]),
];

/// Whether an exception's metric pattern covers `name`.
fn covers(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

const JOBS: [&str; 3] = ["pipeline-example", "inference-service", "multiprocess"];

/// The Prometheus series names an instrument gives.
fn series_names(kind: Kind, prom: &str) -> Vec<String> {
    match kind {
        Kind::Histogram | Kind::HubHistogram => {
            ["bucket", "sum", "count"].iter().map(|s| format!("{prom}_{s}")).collect()
        }
        Kind::Summary => vec![prom.to_string(), format!("{prom}_sum"), format!("{prom}_count")],
        Kind::Counter | Kind::UpDown | Kind::Gauge => vec![prom.to_string()],
    }
}

/// Metric name → (label names, jobs, instances per job) of everything the examples sent.
type Seen = BTreeMap<String, (BTreeSet<String>, BTreeMap<String, BTreeSet<String>>)>;

fn seen(stack: &RouteStack) -> Seen {
    let selector = format!("{{job=~\"{}\"}}", JOBS.join("|"));
    let mut out = Seen::new();
    for series in stack.prometheus.series(&selector, 10) {
        let name = series.get("__name__").cloned().unwrap_or_default();
        // Prometheus's own series about its scrapes.
        if name == "up" || name.starts_with("scrape_") {
            continue;
        }
        let entry = out.entry(name).or_default();
        entry.0.extend(series.keys().filter(|k| *k != "__name__").cloned());
        let job = series.get("job").cloned().unwrap_or_default();
        entry.1.entry(job).or_default().insert(series.get("instance").cloned().unwrap_or_default());
    }
    out
}

#[test]
fn every_instrument_has_one_prometheus_name_and_label_set_on_every_route() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Otelcol]) else { return };
    let fake = FakeNvml::new().expect("build the fake NVML library");
    fake.write_state(FAKE_GPUS).expect("fake NVML state");
    for example in ["pipeline", "inference_service", "multiprocess"] {
        example_path(example);
    }
    let stacks: Vec<RouteStack> = Route::ALL.iter().map(|r| RouteStack::start(*r, &JOBS, &[])).collect();

    let mut runs: Vec<(Route, Process, &str)> = Vec::new();
    for stack in &stacks {
        let gpu = |cmd: &mut std::process::Command| {
            cmd.env("PIPETEL_GPU", "on")
                .env("PIPETEL_NVML_LIBRARY", fake.library_path())
                .env("PIPETEL_GPU_POLL_INTERVAL", "1s")
                .env("PIPETEL_GPU_PCIE_THROUGHPUT", "true");
        };
        let mut cmd = stack.example("pipeline", "pipeline-example");
        gpu(&mut cmd);
        cmd.env("PIPETEL_SAMPLE_INTERVAL", "500").args(["--seconds", "2", "--linger-seconds", "90"]);
        runs.push((stack.route, Process::spawn("pipeline", cmd), "done: stages=3"));
        let mut cmd = stack.example("inference_service", "inference-service");
        gpu(&mut cmd);
        cmd.args(["--seconds", "2", "--http-port", "0", "--http-requests", "20", "--linger-seconds", "90"]);
        runs.push((stack.route, Process::spawn("inference_service", cmd), "done: created="));
        let mut cmd = stack.example("multiprocess", "multiprocess");
        cmd.args(["--workers", "2", "--steps", "12", "--interval-ms", "200", "--stale-after-ms", "120000"])
            .args(["--linger-seconds", "90"]);
        runs.push((stack.route, Process::spawn("multiprocess", cmd), "hub totals match expected"));
    }
    for (route, process, done) in &mut runs {
        let out = process.wait_for_output(done, Duration::from_secs(90));
        assert!(!out.contains("panicked"), "{}: {out}", route.name());
    }

    // Every name of the table arrives on every route (exports, scrapes and remote writes catch
    // up within seconds), then a few more seconds so the last label sets are in too.
    let expected: BTreeSet<(String, String)> = TABLE
        .iter()
        .flat_map(|(job, _, kind, _, prom)| series_names(*kind, prom).into_iter().map(|n| (job.to_string(), n)))
        .collect();
    for stack in &stacks {
        wait_for(&format!("every name of the table via the {}", stack.route.name()), Duration::from_secs(60), || {
            let seen = seen(stack);
            expected
                .iter()
                .all(|(job, name)| seen.get(name).is_some_and(|(_, jobs)| jobs.contains_key(job)))
                .then_some(())
        });
    }
    std::thread::sleep(Duration::from_secs(4));
    let views: Vec<(Route, Seen)> = stacks.iter().map(|s| (s.route, seen(s))).collect();

    let mut failures = Vec::new();
    let pull = &views[0].1;
    let names: BTreeSet<&String> = views.iter().flat_map(|(_, v)| v.keys()).collect();
    let mut exceptions_seen = vec![0usize; LABEL_EXCEPTIONS.len()];
    for name in names {
        let on: Vec<Route> = views.iter().filter(|(_, v)| v.contains_key(name)).map(|(r, _)| *r).collect();
        if PULL_ONLY.contains(&name.as_str()) {
            if on != [Route::Pull] {
                failures.push(format!("{name} (pull only by design) is on {on:?}"));
            }
            continue;
        }
        if on.len() != views.len() {
            failures.push(format!("{name} is on {on:?} only"));
            continue;
        }
        let labels: BTreeSet<&String> = views.iter().flat_map(|(_, v)| &v[name].0).collect();
        for label in labels {
            let with: Vec<Route> = views.iter().filter(|(_, v)| v[name].0.contains(label)).map(|(r, _)| *r).collect();
            let exception = LABEL_EXCEPTIONS.iter().position(|(n, l, _)| covers(n, name) && *l == label.as_str());
            match exception {
                Some(i) if with == LABEL_EXCEPTIONS[i].2 => exceptions_seen[i] += 1,
                Some(i) => failures.push(format!(
                    "{name}: label {label} on {with:?}, the documented exception says {:?}",
                    LABEL_EXCEPTIONS[i].2
                )),
                None if with.len() == views.len() => {}
                None => failures.push(format!("{name}: label {label} on {with:?} only")),
            }
        }
        let jobs: Vec<BTreeSet<&String>> = views.iter().map(|(_, v)| v[name].1.keys().collect()).collect();
        if jobs.iter().any(|j| *j != jobs[0]) {
            failures.push(format!("{name}: jobs differ between the routes: {jobs:?}"));
        }
    }
    // The exceptions are real: a fixed one must leave the list.
    for (i, n) in exceptions_seen.iter().enumerate() {
        if *n == 0 {
            failures.push(format!("the exception {:?} no longer holds", LABEL_EXCEPTIONS[i]));
        }
    }

    // job = service.name, one instance per program, one target_info per job and instance.
    for (route, view) in &views {
        for job in JOBS {
            let instances: BTreeSet<&String> = view.values().filter_map(|(_, jobs)| jobs.get(job)).flatten().collect();
            if instances.len() != 1 {
                failures.push(format!("{}: job {job} has instances {instances:?}, not one", route.name()));
            }
            let info = view.get("target_info").and_then(|(_, jobs)| jobs.get(job));
            if info.map(BTreeSet::len) != Some(1) || info.is_some_and(|i| !instances.iter().all(|x| i.contains(*x))) {
                failures.push(format!("{}: target_info of {job}: {info:?}, metrics under {instances:?}", route.name()));
            }
        }
    }
    let info_labels = |v: &Seen| v.get("target_info").map(|(l, _)| l.clone()).unwrap_or_default();
    for needed in ["host_name", "process_pid", "telemetry_sdk_name", "job", "instance"] {
        for (route, view) in &views {
            if !info_labels(view).contains(needed) {
                failures.push(format!("{}: target_info has no {needed}", route.name()));
            }
        }
    }

    assert!(
        failures.is_empty(),
        "{} differences between the routes:\n{}\n\ncollector:\n{}\ngateway:\n{}",
        failures.len(),
        failures.join("\n"),
        stacks[1].collector_output(),
        stacks[2].collector_output()
    );
    eprintln!("{} instruments, {} metric names, the same on the {} routes", TABLE.len(), pull.len(), views.len());
}
