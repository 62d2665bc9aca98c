//! The OpenTelemetry Collector configurations (`otel-collector/config.yaml`, `agent.yaml`,
//! `gateway.yaml`) name only components of the contrib distribution, their pipelines use only
//! components they define (and every defined one is used), processors run in the recommended
//! order, every exporter batches, queues and retries by itself (no batch processor), the rows'
//! queues are on disk, and their OTLP receivers listen on the ports pipetel exports to by
//! default. The compose file and `prometheus.yml` agree with them.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::workspace_root;
use serde_norway::Value;

/// Component type names of the contrib distribution (`otelcol-contrib`) these files may use.
const RECEIVERS: &[&str] = &["otlp", "prometheus", "hostmetrics", "filelog", "k8s_cluster", "kubeletstats"];
const PROCESSORS: &[&str] = &[
    "memory_limiter",
    "batch",
    "resource",
    "attributes",
    "resourcedetection",
    "k8sattributes",
    "filter",
    "transform",
    "tail_sampling",
    "probabilistic_sampler",
    "cumulativetodelta",
    "deltatocumulative",
];
const EXPORTERS: &[&str] =
    &["otlp", "otlphttp", "prometheus", "prometheusremotewrite", "loki", "debug", "loadbalancing", "file"];
const EXTENSIONS: &[&str] = &["health_check", "pprof", "zpages", "basicauth", "bearertokenauth", "file_storage"];
const CONNECTORS: &[&str] = &["spanmetrics", "forward", "routing", "count"];
/// Routing keys the loadbalancing exporter accepts.
const ROUTING_KEYS: &[&str] = &["traceID", "service", "resource", "metric", "streamID"];

fn load(name: &str) -> Value {
    let path = workspace_root().join("otel-collector").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn keys(v: &Value) -> Vec<String> {
    v.as_mapping().map(|m| m.keys().filter_map(|k| k.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// Asserts that the metrics, traces and logs pipelines of `config` each export to the one
/// exporter `expected` names, in that order.
fn assert_exporters(config: &Value, expected: [&str; 3]) {
    let pipelines = &config["service"]["pipelines"];
    for (signal, exporter) in ["metrics", "traces", "logs"].into_iter().zip(expected) {
        assert_eq!(names(&pipelines[signal]["exporters"]), [exporter], "the {signal} pipeline's exporters");
    }
}

fn names(v: &Value) -> Vec<String> {
    v.as_sequence().map(|s| s.iter().filter_map(|x| x.as_str().map(str::to_string)).collect()).unwrap_or_default()
}

/// `type/name` → `type`.
fn kind(id: &str) -> &str {
    id.split('/').next().unwrap_or(id)
}

/// `text` with every `${env:NAME:-default}` replaced by its default (by nothing without one): the
/// value the collector uses when the variable is unset.
fn with_defaults(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(j) = after.find('}') else { return format!("{out}{}", &rest[i..]) };
        out.push_str(after[..j].split_once(":-").map(|(_, default)| default).unwrap_or_default());
        rest = &after[j + 1..];
    }
    out + rest
}

/// The port of an endpoint such as `0.0.0.0:4317`, `tempo:4317`, `http://localhost:4318` or
/// `${env:OTELCOL_GATEWAY_PORT:-4317}` (the default counts).
fn port(endpoint: &str) -> u16 {
    let endpoint = with_defaults(endpoint);
    let tail = endpoint.rsplit(':').next().unwrap_or_default();
    let digits: String = tail.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no port in {endpoint:?}"))
}

/// Checks how `exporter` of `c` delivers: exporters built on the collector's exporter helper
/// (`otlp`, `otlphttp`, `loadbalancing`) batch in their `sending_queue` and retry; a
/// `loadbalancing` exporter's per-gateway `otlp` exporters keep no queue and do not retry (the
/// outer queue keeps a request until a gateway took it, and its retry routes it again);
/// `prometheusremotewrite` retries, queued in its `remote_write_queue` (in memory) or written
/// through (no queue: the request is answered once the store took it). For the rows (`rows`:
/// an exporter of a logs pipeline) the queue is on disk: `storage` names a `file_storage`
/// extension the service runs.
fn check_delivery(file: &str, c: &Value, exporter: &str, rows: bool) {
    let e = &c["exporters"][exporter];
    let what = format!("{file}: exporter {exporter}");
    let retry = &e["retry_on_failure"];
    match kind(exporter) {
        "otlp" | "otlphttp" | "loadbalancing" => {
            assert_eq!(retry["enabled"].as_bool(), Some(true), "{what}: retry_on_failure");
            let queue = &e["sending_queue"];
            assert_eq!(queue["enabled"].as_bool(), Some(true), "{what}: sending_queue");
            assert_eq!(queue["sizer"].as_str(), Some("items"), "{what}: queue sized in spans, points, records");
            let batch = &queue["batch"];
            let (min, max) = (batch["min_size"].as_u64(), batch["max_size"].as_u64());
            assert!(batch["flush_timeout"].is_string() && min.is_some() && max >= min, "{what}: batch {batch:?}");
            assert!(queue["queue_size"].as_u64() >= min, "{what}: the queue holds a whole batch");
            if kind(exporter) == "loadbalancing" {
                let inner = &e["protocol"]["otlp"];
                assert_eq!(inner["sending_queue"]["enabled"].as_bool(), Some(false), "{what}: per-gateway queue");
                assert_eq!(inner["retry_on_failure"]["enabled"].as_bool(), Some(false), "{what}: per-gateway retry");
            }
            if rows {
                let storage =
                    queue["storage"].as_str().unwrap_or_else(|| panic!("{what}: the rows' queue is not on disk"));
                assert_eq!(kind(storage), "file_storage", "{what}");
                assert!(c["extensions"][storage]["directory"].is_string(), "{what}: {storage} has a directory");
                assert!(names(&c["service"]["extensions"]).contains(&storage.to_string()), "{what}: {storage} runs");
                // Retried until the backend is back: the queue's size bounds it, not a clock.
                assert_eq!(retry["max_elapsed_time"].as_str(), Some("0s"), "{what}: rows retried without a limit");
            }
        }
        "prometheusremotewrite" => {
            assert!(!rows, "{what}: metrics only");
            assert_eq!(retry["enabled"].as_bool(), Some(true), "{what}: retry_on_failure");
            assert!(e["remote_write_queue"]["enabled"].is_bool(), "{what}: remote_write_queue on or off, said");
        }
        "prometheus" | "debug" | "file" => assert!(!rows, "{what}: rows would not survive a restart"),
        other => panic!("{what}: how {other} delivers is not checked here"),
    }
}

/// Checks one configuration's structure; returns its components by section.
fn check_structure(file: &str) -> Value {
    let c = load(file);
    for (section, known) in [
        ("receivers", RECEIVERS),
        ("processors", PROCESSORS),
        ("exporters", EXPORTERS),
        ("extensions", EXTENSIONS),
        ("connectors", CONNECTORS),
    ] {
        for id in keys(&c[section]) {
            assert!(known.contains(&kind(&id)), "{file}: {section} {id}: {} is not a contrib component", kind(&id));
        }
    }
    let defined = |section: &str| -> BTreeSet<String> { keys(&c[section]).into_iter().collect() };
    let mut used: BTreeSet<(String, String)> = BTreeSet::new();
    for ext in names(&c["service"]["extensions"]) {
        assert!(defined("extensions").contains(&ext), "{file}: service uses undefined extension {ext}");
        used.insert(("extensions".into(), ext));
    }
    let pipelines = &c["service"]["pipelines"];
    assert!(!keys(pipelines).is_empty(), "{file}: no pipelines");
    let connectors = defined("connectors");
    for p in keys(pipelines) {
        assert!(
            ["traces", "metrics", "logs", "profiles"].contains(&kind(&p)),
            "{file}: pipeline {p} of unknown signal"
        );
        let pipe = &pipelines[p.as_str()];
        for (role, section) in [("receivers", "receivers"), ("processors", "processors"), ("exporters", "exporters")] {
            let list = names(&pipe[role]);
            if role != "processors" {
                assert!(!list.is_empty(), "{file}: pipeline {p} has no {role}");
            }
            for id in list {
                let ok = defined(section).contains(&id) || (role != "processors" && connectors.contains(&id));
                assert!(ok, "{file}: pipeline {p} uses undefined {role} {id}");
                let sec = if connectors.contains(&id) { "connectors" } else { section };
                used.insert((sec.to_string(), id));
            }
        }
        // memory_limiter first (it refuses data before the collector runs out of memory); no
        // batch processor: the exporters batch, and push back when they cannot keep up.
        let procs = names(&pipe["processors"]);
        assert_eq!(procs.first().map(|p| kind(p)), Some("memory_limiter"), "{file}: pipeline {p}: {procs:?}");
        assert!(procs.iter().all(|p| kind(p) != "batch"), "{file}: pipeline {p} batches in a processor: {procs:?}");
        for exporter in names(&pipe["exporters"]) {
            check_delivery(file, &c, &exporter, kind(&p) == "logs");
        }
    }
    for section in ["receivers", "processors", "exporters", "extensions", "connectors"] {
        for id in defined(section) {
            assert!(used.contains(&(section.to_string(), id.clone())), "{file}: {section} {id} is defined but unused");
        }
    }
    // pipetel's OTLP exporters reach the receiver on the default ports.
    let grpc = port(pipetel::config::DEFAULT_OTLP_GRPC_ENDPOINT);
    let http = port(pipetel::config::DEFAULT_OTLP_HTTP_ENDPOINT);
    assert_eq!((grpc, http), (4317, 4318));
    let otlp = &c["receivers"]["otlp"]["protocols"];
    assert_eq!(port(otlp["grpc"]["endpoint"].as_str().expect("grpc endpoint")), grpc, "{file}");
    assert_eq!(port(otlp["http"]["endpoint"].as_str().expect("http endpoint")), http, "{file}");
    c
}

#[test]
fn single_collector_config_exports_metrics_traces_and_logs() {
    let c = check_structure("config.yaml");
    assert_exporters(&c, ["prometheus", "otlp/tempo", "otlphttp/loki"]);
    assert!(c["exporters"]["otlphttp/loki"]["endpoint"].as_str().is_some_and(|e| e.ends_with("/otlp")));
    // The debug exporter is there, commented, for troubleshooting.
    let text = std::fs::read_to_string(workspace_root().join("otel-collector/config.yaml")).expect("config");
    assert!(text.contains("  # debug:\n  #   verbosity: detailed"), "commented debug exporter");

    // Prometheus scrapes the collector's prometheus exporter and its own metrics.
    let prom = load("prometheus.yml");
    let targets: Vec<String> = prom["scrape_configs"]
        .as_sequence()
        .expect("scrape_configs")
        .iter()
        .flat_map(|s| s["static_configs"].as_sequence().cloned().unwrap_or_default())
        .flat_map(|s| names(&s["targets"]))
        .collect();
    let exporter = port(c["exporters"]["prometheus"]["endpoint"].as_str().expect("prometheus endpoint"));
    let telemetry = c["service"]["telemetry"]["metrics"]["readers"][0]["pull"]["exporter"]["prometheus"]["port"]
        .as_u64()
        .expect("telemetry port");
    for p in [u64::from(exporter), telemetry] {
        assert!(
            targets.contains(&format!("otel-collector:{p}")),
            "prometheus.yml does not scrape port {p}: {targets:?}"
        );
    }
    assert!(targets.iter().any(|t| t.ends_with(":9464")), "prometheus.yml scrapes a pipetel pull endpoint");
}

#[test]
fn agents_load_balance_to_the_gateway_pool() {
    let agent = check_structure("agent.yaml");
    let gateway = check_structure("gateway.yaml");
    let gateway_grpc = port(gateway["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].as_str().expect("grpc"));
    let pipelines = &agent["service"]["pipelines"];
    for p in keys(pipelines) {
        let exporters = names(&pipelines[p.as_str()]["exporters"]);
        assert!(exporters.iter().all(|e| kind(e) == "loadbalancing"), "agent {p}: {exporters:?}");
    }
    for id in keys(&agent["exporters"]) {
        let e = &agent["exporters"][id.as_str()];
        let dns = &e["resolver"]["dns"];
        // The collector takes the DNS port as a string (`${env:OTELCOL_GATEWAY_PORT:-4317}`).
        let dns_port = dns["port"].as_str().map(port);
        assert_eq!(dns_port, Some(gateway_grpc), "{id}: resolves the gateways' OTLP gRPC port");
        assert!(dns["hostname"].is_string(), "{id}: DNS name of the gateway pool");
        if let Some(key) = e["routing_key"].as_str() {
            assert!(ROUTING_KEYS.contains(&key), "{id}: routing_key {key}");
        }
    }
    assert_eq!(agent["exporters"]["loadbalancing/traces"]["routing_key"], "traceID");
    assert_exporters(&gateway, ["prometheusremotewrite", "otlp/tempo", "otlphttp/loki"]);
    let readme = std::fs::read_to_string(workspace_root().join("otel-collector/README.md")).expect("README");
    assert!(readme.contains("loadbalancing") && readme.contains("traceID"), "the README explains the topology");
}

#[test]
fn the_stores_gateway_holds_nothing_only_in_memory() {
    let c = check_structure("gateway-stores.yaml");
    assert_exporters(&c, ["prometheusremotewrite/victoriametrics", "otlp/jaeger", "otlphttp/victorialogs"]);
    // Spans wait on disk like the rows (check_delivery checked the rows' queue), in a directory
    // of their own per gateway, and both are retried until delivered.
    for id in ["otlp/jaeger", "otlphttp/victorialogs"] {
        let e = &c["exporters"][id];
        assert_eq!(e["sending_queue"]["storage"].as_str(), Some("file_storage"), "{id}: queue on disk");
        assert_eq!(e["retry_on_failure"]["max_elapsed_time"].as_str(), Some("0s"), "{id}: retried until delivered");
    }
    let dir = c["extensions"]["file_storage"]["directory"].as_str().expect("file_storage directory");
    assert!(dir.contains("OTELCOL_FILE_STORAGE_DIR"), "the queue directory is set per gateway: {dir}");
    // Metrics are written through: no queue in memory answers the agent before VictoriaMetrics
    // took the points; retried until delivered (VictoriaMetrics keeps late samples).
    let rw = &c["exporters"]["prometheusremotewrite/victoriametrics"];
    assert_eq!(rw["remote_write_queue"]["enabled"].as_bool(), Some(false), "remote write without a memory queue");
    assert_eq!(rw["retry_on_failure"]["max_elapsed_time"].as_str(), Some("0s"));
    assert!(rw["endpoint"].as_str().is_some_and(|e| e.ends_with("/api/v1/write")));
    assert!(c["exporters"]["otlphttp/victorialogs"]["logs_endpoint"]
        .as_str()
        .is_some_and(|e| e.ends_with("/insert/opentelemetry/v1/logs")));
}

#[test]
fn compose_stack_mounts_existing_files_and_publishes_the_otlp_ports() {
    let dir = workspace_root().join("otel-collector");
    let compose = load("docker-compose.yaml");
    let services = keys(&compose["services"]);
    for s in ["otel-collector", "prometheus", "tempo", "loki", "grafana"] {
        assert!(services.contains(&s.to_string()), "compose lacks {s}: {services:?}");
    }
    for s in &services {
        for v in names(&compose["services"][s.as_str()]["volumes"]) {
            let src = v.split(':').next().unwrap_or_default();
            if src.starts_with('.') {
                assert!(Path::new(&dir).join(src).exists(), "{s} mounts {src}, which does not exist");
            }
        }
    }
    let ports = names(&compose["services"]["otel-collector"]["ports"]);
    for p in ["127.0.0.1:4317:4317", "127.0.0.1:4318:4318"] {
        assert!(ports.contains(&p.to_string()), "collector publishes {p}: {ports:?}");
    }
    // Prometheus accepts the gateway's remote write.
    let cmd = names(&compose["services"]["prometheus"]["command"]);
    assert!(cmd.contains(&"--web.enable-remote-write-receiver".to_string()), "{cmd:?}");
    // The collector sends traces where Tempo listens.
    let tempo = load("tempo.yaml");
    let tempo_grpc =
        port(tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"].as_str().expect("grpc"));
    let config = load("config.yaml");
    assert_eq!(port(config["exporters"]["otlp/tempo"]["endpoint"].as_str().expect("tempo endpoint")), tempo_grpc);
    // config.yaml takes profiles, which the collector does only with the profiles feature gate on.
    assert!(config["service"]["pipelines"]["profiles"].is_mapping(), "config.yaml has a profiles pipeline");
    let collector = names(&compose["services"]["otel-collector"]["command"]);
    assert!(collector.contains(&"--feature-gates=service.profilesSupport".to_string()), "{collector:?}");
}

/// The collector release `otel-collector/builder-config.yaml` builds (the version of
/// `go.opentelemetry.io/collector/service`, as `scripts/build-collector` reads it), without the `v`.
fn tested_release() -> String {
    let manifest = load("builder-config.yaml");
    let module = manifest["telemetry"]["gomod"].as_str().expect("telemetry.gomod in builder-config.yaml");
    let (path, version) = module.split_once(' ').expect("module and version");
    assert_eq!(path, "go.opentelemetry.io/collector/service", "{module}");
    version.trim_start_matches('v').to_string()
}

#[test]
fn compose_stack_runs_the_tested_collector_release_on_loopback_ports() {
    let compose = load("docker-compose.yaml");
    let services = &compose["services"];

    // The image is the contrib distribution of the release every test runs, and every other
    // collector module of the manifest is at that release too.
    let release = tested_release();
    assert_eq!(
        services["otel-collector"]["image"].as_str(),
        Some(format!("otel/opentelemetry-collector-contrib:{release}").as_str()),
        "compose runs another collector than the tests (builder-config.yaml: {release})"
    );
    let manifest =
        std::fs::read_to_string(workspace_root().join("otel-collector/builder-config.yaml")).expect("manifest");
    for line in manifest.lines().map(str::trim).filter(|l| l.starts_with("- gomod:") && !l.contains("confmap/provider"))
    {
        assert!(line.ends_with(&format!(" v{release}")), "builder-config.yaml mixes releases: {line}");
    }

    // Every published port is bound to loopback.
    for s in keys(services) {
        for p in names(&services[s.as_str()]["ports"]) {
            let parts: Vec<&str> = p.split(':').collect();
            assert!(parts.len() == 3 && parts[0] == "127.0.0.1", "{s} publishes {p} beyond loopback");
        }
    }

    // Prometheus keeps exemplars.
    let cmd = names(&services["prometheus"]["command"]);
    assert!(
        cmd.iter().any(|f| f
            .strip_prefix("--enable-feature=")
            .is_some_and(|v| v.split(',').any(|x| x == "exemplar-storage"))),
        "{cmd:?}"
    );

    // The rows' queue directory of config.yaml is a named volume, handed to the collector's user
    // (10001 in the contrib image) before the collector starts.
    let config = load("config.yaml");
    let dir =
        with_defaults(config["extensions"]["file_storage"]["directory"].as_str().expect("file_storage directory"));
    let volume = names(&services["otel-collector"]["volumes"])
        .into_iter()
        .find_map(|v| v.strip_suffix(&format!(":{dir}")).map(str::to_string))
        .unwrap_or_else(|| panic!("the collector mounts nothing at {dir}"));
    assert!(keys(&compose["volumes"]).contains(&volume), "{volume} is not a named volume");
    let init = keys(services)
        .into_iter()
        .find(|s| s != "otel-collector" && names(&services[s.as_str()]["volumes"]).contains(&format!("{volume}:{dir}")))
        .unwrap_or_else(|| panic!("no service prepares {volume}"));
    let chown = names(&services[init.as_str()]["command"]).join(" ");
    assert_eq!(chown, format!("chown -R 10001:10001 {dir}"), "{init}");
    assert_eq!(
        services["otel-collector"]["depends_on"][init.as_str()]["condition"].as_str(),
        Some("service_completed_successfully"),
        "the collector starts after {init}"
    );
}
