use super::*;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn from(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
    let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Config::from_lookup(|k| map.get(k).cloned())
}

/// Every bad environment value is refused with an error naming the variable and the value.
#[test]
fn bad_env_values_name_the_variable_and_the_value() {
    let cases: &[(&str, &str)] = &[
        (OTEL_SDK_DISABLED, "maybe"),
        (OTEL_RESOURCE_ATTRIBUTES, "team"),
        (OTEL_RESOURCE_ATTRIBUTES, "=x"),
        (OTEL_RESOURCE_ATTRIBUTES, "k=%zz"),
        (OTEL_TRACES_EXPORTER, "jaeger"),
        (OTEL_METRICS_EXPORTER, "prometheus,statsd"),
        (OTEL_LOGS_EXPORTER, "prometheus"),
        (OTEL_TRACES_EXPORTER, "none,otlp"),
        (OTEL_EXPORTER_OTLP_ENDPOINT, "not a url"),
        (OTEL_EXPORTER_OTLP_ENDPOINT, "ftp://collector:4317"),
        (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "localhost:4317"),
        (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, "http://"),
        (OTEL_EXPORTER_OTLP_PROTOCOL, "thrift"),
        (OTEL_EXPORTER_OTLP_LOGS_PROTOCOL, "http/json"),
        (OTEL_EXPORTER_OTLP_HEADERS, "authorization"),
        (OTEL_EXPORTER_OTLP_HEADERS, "bad header=1"),
        (OTEL_EXPORTER_OTLP_TRACES_HEADERS, "a=%4"),
        (OTEL_EXPORTER_OTLP_TIMEOUT, "10sec"),
        (OTEL_EXPORTER_OTLP_METRICS_TIMEOUT, "-5"),
        (OTEL_EXPORTER_OTLP_COMPRESSION, "brotli"),
        (OTEL_EXPORTER_OTLP_LOGS_COMPRESSION, "lz4"),
        (OTEL_EXPORTER_PROMETHEUS_HOST, "bad host!"),
        (OTEL_EXPORTER_PROMETHEUS_PORT, "70000"),
        (OTEL_EXPORTER_PROMETHEUS_PORT, "http"),
        (OTEL_METRIC_EXPORT_INTERVAL, "0"),
        (OTEL_METRIC_EXPORT_INTERVAL, "1.5 days"),
        (OTEL_TRACES_SAMPLER, "sometimes"),
        (PIPETEL_PROMETHEUS_PATH, "metrics"),
        (PIPETEL_PROMETHEUS_PATH, "/me trics"),
        (PIPETEL_CONSOLE_LOG, "loud"),
        (PIPETEL_PROMETHEUS_TLS_CERT, "/etc/cert.pem"),
        (PIPETEL_SHUTDOWN_TIMEOUT, "0"),
        (PIPETEL_CARDINALITY_LIMIT, "0"),
        (PIPETEL_CARDINALITY_LIMIT, "many"),
        (RUST_LOG, "info,[{"),
        (PIPETEL_NAMESPACE, "Zephyr"),
        (PIPETEL_NAMESPACE, "a..b"),
        (PIPETEL_SAMPLE_INTERVAL, "50"),
        (PIPETEL_SAMPLE_INTERVAL, "0.05s"),
        (PIPETEL_STAGE_RETENTION, "forever"),
        (PIPETEL_SPAN_METRICS, "perhaps"),
        (PIPETEL_SPAN_METRICS_FILTER, "info,hyper=loud"),
        (PIPETEL_SPAN_METRICS_TIME, "cpu"),
        (PIPETEL_STAGE_METRICS, "sure"),
        (PIPETEL_PROGRESS, "sometimes"),
        (PIPETEL_QUEUE_METRICS, "nope"),
        (PIPETEL_HTTP_METRICS, "2"),
        (PIPETEL_SERVICE_PREFIX, "Bad-Prefix"),
        (PIPETEL_HISTOGRAM_BUCKETS, "1,0.5"),
        (PIPETEL_HISTOGRAM_BUCKETS, "0.1,fast"),
        (PIPETEL_GPU, "sometimes"),
        (PIPETEL_GPU_POLL_INTERVAL, "fast"),
        (PIPETEL_GPU_PLATFORM, "intel"),
        (PIPETEL_GPU_PCIE_THROUGHPUT, "maybe"),
        (PIPETEL_GPU_PROCESS_MEMORY, "2"),
        (OTEL_PROPAGATORS, "b3"),
        (OTEL_PROPAGATORS, "tracecontext,jaeger"),
        (OTEL_PROPAGATORS, "w3c"),
        (OTEL_PROPAGATORS, "none,baggage"),
        (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, "deltas"),
        (OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, "exponential"),
        (OTEL_METRIC_EXPORT_TIMEOUT, "0"),
        (OTEL_METRIC_EXPORT_TIMEOUT, "soon"),
        (OTEL_ATTRIBUTE_COUNT_LIMIT, "-1"),
        (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, "many"),
        (OTEL_SPAN_EVENT_COUNT_LIMIT, "1.5"),
        (OTEL_SPAN_LINK_COUNT_LIMIT, "99999999999"),
        (OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT, "x"),
        (OTEL_LINK_ATTRIBUTE_COUNT_LIMIT, "-3"),
        (OTEL_BSP_SCHEDULE_DELAY, "0"),
        (OTEL_BSP_EXPORT_TIMEOUT, "later"),
        (OTEL_BSP_MAX_QUEUE_SIZE, "0"),
        (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "big"),
        (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "4096"),
        (OTEL_BLRP_SCHEDULE_DELAY, "-1"),
        (OTEL_BLRP_EXPORT_TIMEOUT, "0"),
        (OTEL_BLRP_MAX_QUEUE_SIZE, "lots"),
        (OTEL_BLRP_MAX_EXPORT_BATCH_SIZE, "0"),
        (PIPETEL_INSTANCE_ID, "{host}"),
        (PIPETEL_INSTANCE_ID, "id-{pid"),
        (PIPETEL_INSTANCE_ID, "id}"),
        (PIPETEL_INSTANCE_ID, "a\tb"),
        (PIPETEL_GPU_DEVICES, "gpu0"),
        (PIPETEL_TRACES_FILTER, "info,[{"),
        (PIPETEL_LOGS_FILTER, "debug,=x"),
        (PIPETEL_LOG_FORMAT, "xml"),
        (PIPETEL_PROCESS_METRICS, "maybe"),
    ];
    for (var, value) in cases {
        let err = from(&[(var, value)]).expect_err(&format!("{var}={value} must be refused"));
        let msg = err.to_string();
        assert!(msg.contains(var), "error for {var}={value} does not name the variable: {msg}");
        // Header values are credentials: the error quotes the names only (`name=<redacted>`).
        let shown =
            if var.ends_with("_HEADERS") { rule::Redaction::HeaderValues.text(value) } else { value.to_string() };
        assert!(msg.contains(&format!("{shown:?}")), "error for {var}={value} does not quote the value: {msg}");
    }
}

#[test]
fn sampler_argument_out_of_range_names_the_argument_variable() {
    let err = from(&[(OTEL_TRACES_SAMPLER, "traceidratio"), (OTEL_TRACES_SAMPLER_ARG, "1.5")]).expect_err("refused");
    let msg = err.to_string();
    assert!(msg.contains(OTEL_TRACES_SAMPLER_ARG) && msg.contains("\"1.5\""), "{msg}");
    let err = from(&[(OTEL_TRACES_SAMPLER, "parentbased_traceidratio"), (OTEL_TRACES_SAMPLER_ARG, "half")])
        .expect_err("refused");
    assert!(err.to_string().contains(OTEL_TRACES_SAMPLER_ARG), "{err}");
}

#[test]
fn good_env_values_are_read() {
    let c = from(&[
        (OTEL_SERVICE_NAME, "tokenize"),
        (OTEL_RESOURCE_ATTRIBUTES, "deployment.environment=prod,team=ml%20infra"),
        (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
        (OTEL_EXPORTER_OTLP_HEADERS, "authorization=Bearer%20abc,x-tenant=7"),
        (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "grpc"),
        (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "http://tempo:4317"),
        (OTEL_EXPORTER_OTLP_TIMEOUT, "2500"),
        (OTEL_EXPORTER_OTLP_METRICS_COMPRESSION, "gzip"),
        (OTEL_METRICS_EXPORTER, "prometheus, otlp"),
        (OTEL_EXPORTER_PROMETHEUS_HOST, "0.0.0.0"),
        (OTEL_EXPORTER_PROMETHEUS_PORT, "9999"),
        (OTEL_METRIC_EXPORT_INTERVAL, "1000"),
        (OTEL_TRACES_SAMPLER, "parentbased_traceidratio"),
        (OTEL_TRACES_SAMPLER_ARG, "0.25"),
        (OTEL_SDK_DISABLED, "false"),
    ])
    .expect("valid");
    assert_eq!(c.service_name(), "tokenize");
    assert_eq!(
        c.resource_attributes(),
        &[("deployment.environment".to_string(), "prod".to_string()), ("team".to_string(), "ml infra".to_string())]
    );
    assert_eq!(c.metrics_exporters(), vec![MetricExporter::Prometheus, MetricExporter::Otlp]);
    // An endpoint alone makes OTLP the default for the signals that name no exporter.
    assert_eq!(c.traces_exporters(), vec![TraceExporter::Otlp]);
    assert_eq!(c.logs_exporters(), vec![LogExporter::Otlp]);
    let traces = c.otlp_target(Signal::Traces).expect("traces");
    assert_eq!(traces.endpoint, "http://tempo:4317");
    assert_eq!(traces.protocol, OtlpProtocol::Grpc);
    assert_eq!(traces.timeout, Duration::from_millis(2500));
    let metrics = c.otlp_target(Signal::Metrics).expect("metrics");
    assert_eq!(metrics.endpoint, "http://collector:4318/v1/metrics");
    assert_eq!(metrics.protocol, OtlpProtocol::HttpProtobuf);
    assert_eq!(metrics.compression, OtlpCompression::Gzip);
    assert_eq!(metrics.headers[0], ("authorization".to_string(), "Bearer abc".to_string()));
    assert_eq!(c.prometheus_host(), "0.0.0.0");
    assert_eq!(c.prometheus_port(), 9999);
    assert_eq!(c.metric_export_interval(), Duration::from_secs(1));
    assert_eq!(c.sampler(), SamplerConfig::ParentBasedTraceIdRatio(0.25));
    assert!(!c.sdk_disabled());
}

#[test]
fn nothing_configured_means_the_local_pull_endpoint_only() {
    let c = from(&[]).expect("empty");
    assert_eq!(c.metrics_exporters(), vec![MetricExporter::Prometheus]);
    assert!(c.traces_exporters().is_empty());
    assert!(c.logs_exporters().is_empty());
    assert_eq!((c.prometheus_host(), c.prometheus_port(), c.prometheus_path()), ("localhost", 9464, "/metrics"));
    let grpc = Config::default().with_otlp_protocol(OtlpProtocol::Grpc);
    assert_eq!(grpc.otlp_target(Signal::Logs).expect("logs").endpoint, "http://localhost:4317");
    assert_eq!(c.otlp_target(Signal::Logs).expect("logs").endpoint, "http://localhost:4318/v1/logs");
    assert_eq!(c.sampler(), SamplerConfig::ParentBasedAlwaysOn);
}

fn write_file(text: &str) -> (PathBuf, String) {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("pipetel-config-{}-{n}.toml", std::process::id()));
    std::fs::write(&path, text).expect("write temp file");
    let s = path.display().to_string();
    (path, s)
}

/// Reads `text` as the configuration file, expecting it to be refused; the error's message.
fn file_error(text: &str) -> String {
    let (path, p) = write_file(text);
    let err = from(&[(PIPETEL_CONFIG, &p)]).expect_err(text).to_string();
    let _ = std::fs::remove_file(path);
    err
}

/// Reads `text` as the configuration file, expecting it to be accepted.
#[cfg_attr(not(feature = "gpu"), allow(dead_code))]
fn file_config(text: &str) -> Config {
    let (path, p) = write_file(text);
    let config = from(&[(PIPETEL_CONFIG, &p)]).expect(text);
    let _ = std::fs::remove_file(path);
    config
}

#[test]
fn code_beats_env_beats_file_beats_default() {
    let (path, p) = write_file(
        "service_name = \"from-file\"\n[prometheus]\nport = 1111\npath = \"/file\"\n[metrics]\nexport_interval_ms = 3000\n",
    );
    let c = from(&[(PIPETEL_CONFIG, &p), (OTEL_SERVICE_NAME, "from-env"), (OTEL_EXPORTER_PROMETHEUS_PORT, "2222")])
        .expect("valid")
        .with_service_name("from-code");
    assert_eq!(c.service_name(), "from-code");
    assert_eq!(c.prometheus_port(), 2222);
    assert_eq!(c.prometheus_path(), "/file");
    assert_eq!(c.metric_export_interval(), Duration::from_secs(3));
    assert_eq!(c.prometheus_host(), DEFAULT_PROMETHEUS_HOST);
    let _ = std::fs::remove_file(path);
}

/// Every bad file value is refused with an error naming the file, the key and the value.
#[test]
fn bad_file_values_name_the_key() {
    let cases: &[(&str, &str)] = &[
        ("colour = \"blue\"", "colour"),
        ("[prometheus]\nport = \"http\"", "port"),
        ("[prometheus]\nport = 70000", "port"),
        ("[prometheus]\npath = \"metrics\"", "prometheus.path"),
        ("[prometheus]\nhost = \"bad host\"", "prometheus.host"),
        ("[otlp]\nendpoint = \"collector\"", "otlp.endpoint"),
        ("[otlp]\nprotocol = \"udp\"", "otlp.protocol"),
        ("[otlp.traces]\ncompression = \"lz4\"", "otlp.traces.compression"),
        ("[otlp.logs]\nheaders = { \"bad key\" = \"1\" }", "otlp.logs.headers"),
        ("[otlp.metrics]\nretries = 3", "retries"),
        ("[exporters]\nmetrics = [\"statsd\"]", "exporters.metrics"),
        ("[exporters]\ntraces = \"otlp\"", "traces"),
        ("[traces]\nsampler = \"sometimes\"", "traces.sampler"),
        ("[traces]\nsampler = \"traceidratio\"\nsampler_arg = \"2\"", "traces.sampler_arg"),
        ("[metrics]\nexport_interval_ms = 0", "metrics.export_interval_ms"),
        ("[metrics]\ncardinality_limit = 0", "metrics.cardinality_limit"),
        ("[log]\nfilter = \"info,[{\"", "log.filter"),
        ("sdk_disabled = \"perhaps\"", "sdk_disabled"),
        ("shutdown_timeout_ms = 0", "shutdown_timeout_ms"),
        ("[pipeline]\nnamespace = \"Bad Name\"", "pipeline.namespace"),
        ("[pipeline]\nsample_interval_ms = 10", "pipeline.sample_interval_ms"),
        ("[pipeline]\nretention_ms = \"long\"", "retention_ms"),
        ("[pipeline]\nprogress = \"sometimes\"", "pipeline.progress"),
        ("[pipeline]\nprogress = 2", "pipeline.progress"),
        ("[gpu]\nenabled = \"sometimes\"", "gpu.enabled"),
        ("[metrics]\nhistogram_buckets = [1.0, 0.5]", "metrics.histogram_buckets"),
        ("[service]\nprefix = \"Bad Prefix\"", "service.prefix"),
        ("[service]\nqueue = true", "queue"),
        ("[span_metrics]\ntime = \"cpu\"", "span_metrics.time"),
        ("[span_metrics]\nfilter = \"hyper=loud\"", "span_metrics.filter"),
        ("[gpu]\npoll_interval_ms = 10", "gpu.poll_interval_ms"),
        ("[gpu]\nplatform = \"intel\"", "gpu.platform"),
        ("[gpu]\nnvml_library = \"\"", "gpu.nvml_library"),
        ("[gpu]\nfan = true", "fan"),
        ("this is not toml", "pipetel-config"),
    ];
    for (text, key) in cases {
        let (path, p) = write_file(text);
        let err = from(&[(PIPETEL_CONFIG, &p)]).expect_err(&format!("file {text:?} must be refused"));
        let msg = err.to_string();
        assert!(msg.contains(&p), "error for {text:?} does not name the file: {msg}");
        assert!(msg.contains(key), "error for {text:?} does not name `{key}`: {msg}");
        let _ = std::fs::remove_file(path);
    }
}

#[test]
fn unreadable_file_names_the_path() {
    let err = from(&[(PIPETEL_CONFIG, "/nonexistent/pipetel.toml")]).expect_err("refused");
    assert!(err.to_string().contains("/nonexistent/pipetel.toml"), "{err}");
}

#[test]
fn bad_values_set_in_code_name_the_setter() {
    let cases: Vec<(Config, &str)> = vec![
        (Config::default().with_otlp_endpoint("collector:4317"), "with_otlp_endpoint"),
        (Config::default().with_otlp_signal_endpoint(Signal::Traces, "::"), "with_otlp_signal_endpoint"),
        (Config::default().with_otlp_header("bad key", "v"), "with_otlp_header"),
        (Config::default().with_prometheus_path("metrics"), "with_prometheus_path"),
        (Config::default().with_prometheus_host("no such host!"), "with_prometheus_host"),
        (Config::default().with_metric_export_interval(Duration::ZERO), "with_metric_export_interval"),
        (Config::default().with_shutdown_timeout(Duration::ZERO), "with_shutdown_timeout"),
        (Config::default().with_cardinality_limit(0), "with_cardinality_limit"),
        (Config::default().with_sampler(SamplerConfig::TraceIdRatio(2.0)), "with_sampler"),
        (Config::default().with_log_filter("[{"), "with_log_filter"),
        (Config::default().with_namespace("Zephyr"), "with_namespace"),
        (Config::default().with_sample_interval(Duration::from_millis(1)), "with_sample_interval"),
    ];
    for (config, setter) in cases {
        let err = config.validate().expect_err(setter);
        assert!(err.to_string().contains(setter), "{err}");
    }
    Config::default().validate().expect("defaults are valid");
}

#[test]
fn full_file_is_read() {
    let (path, p) = write_file(
        r#"
service_name = "svc"
service_version = "1.2.3"
[resource]
"deployment.environment" = "staging"
[exporters]
traces = ["otlp", "console"]
metrics = ["prometheus"]
logs = ["none"]
[otlp]
endpoint = "http://collector:4317"
protocol = "grpc"
timeout_ms = 1500
headers = { authorization = "Bearer x" }
[otlp.logs]
protocol = "http/protobuf"
endpoint = "http://loki-gw:4318/v1/logs"
[traces]
sampler = "traceidratio"
sampler_arg = "0.5"
[log]
console = false
filter = "warn,pipetel=debug"
[pipeline]
namespace = "zephyr"
sample_interval_ms = 2000
retention_ms = 0
rows_file = "/tmp/rows.jsonl"
"#,
    );
    let c = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    assert_eq!(c.service_version(), Some("1.2.3"));
    assert_eq!(c.traces_exporters(), vec![TraceExporter::Otlp, TraceExporter::Console]);
    assert!(c.logs_exporters().is_empty());
    let t = c.otlp_target(Signal::Traces).expect("traces");
    assert_eq!(
        (t.endpoint.as_str(), t.protocol, t.timeout),
        ("http://collector:4317", OtlpProtocol::Grpc, Duration::from_millis(1500))
    );
    assert_eq!(t.headers, vec![("authorization".to_string(), "Bearer x".to_string())]);
    let l = c.otlp_target(Signal::Logs).expect("logs");
    assert_eq!((l.endpoint.as_str(), l.protocol), ("http://loki-gw:4318/v1/logs", OtlpProtocol::HttpProtobuf));
    assert_eq!(c.sampler(), SamplerConfig::TraceIdRatio(0.5));
    assert!(!c.console_log());
    assert_eq!(c.log_filter(), "warn,pipetel=debug");
    assert_eq!(
        (c.namespace(), c.sample_interval(), c.stage_retention()),
        ("zephyr", Duration::from_secs(2), Duration::ZERO)
    );
    assert_eq!(c.rows_file(), Some(Path::new("/tmp/rows.jsonl")));
    let _ = std::fs::remove_file(path);
}

#[test]
fn every_variable_is_listed_once() {
    let mut seen = std::collections::HashSet::new();
    for v in ENV_VARS {
        assert!(seen.insert(*v), "{v} listed twice");
    }
    assert!(ENV_VARS.contains(&OTEL_TRACES_SAMPLER_ARG));
}

#[cfg(feature = "gpu")]
#[test]
fn gpu_variables_are_the_gpu_crates() {
    assert_eq!(PIPETEL_GPU, pipetel_gpu::ENV_GPU_MODE);
    assert_eq!(PIPETEL_NVML_LIBRARY, pipetel_gpu::ENV_NVML_LIBRARY);
    assert_eq!(PIPETEL_ROCM_SMI_LIBRARY, pipetel_gpu::ENV_ROCM_SMI_LIBRARY);
    assert_eq!(PIPETEL_GPU_POLL_INTERVAL, pipetel_gpu::ENV_GPU_POLL_INTERVAL);
    assert_eq!(PIPETEL_GPU_PLATFORM, pipetel_gpu::ENV_GPU_PLATFORM);
    assert_eq!(PIPETEL_GPU_PCIE_THROUGHPUT, pipetel_gpu::ENV_GPU_PCIE_THROUGHPUT);
    assert_eq!(PIPETEL_GPU_PROCESS_MEMORY, pipetel_gpu::ENV_GPU_PROCESS_MEMORY);
    assert_eq!(PIPETEL_GPU_DEVICES, pipetel_gpu::ENV_GPU_DEVICES);
    let c = from(&[(PIPETEL_GPU_DEVICES, "all")]).expect("valid");
    assert_eq!(c.gpu().devices, pipetel_gpu::DeviceSelection::All);
    assert_eq!(from(&[]).expect("valid").gpu().devices, pipetel_gpu::DeviceSelection::Visible);
    let (path, p) =
        write_file("[gpu]\nenabled = \"off\"\npoll_interval_ms = 2000\nnvml_library = \"/opt/libnvidia-ml.so.1\"\n");
    let c = from(&[(PIPETEL_CONFIG, &p), (PIPETEL_GPU, "on")]).expect("valid");
    assert_eq!(c.gpu().mode, pipetel_gpu::GpuMode::On, "env beats file");
    assert_eq!(c.gpu().poll_interval, Duration::from_secs(2));
    assert_eq!(c.gpu().nvml_library.as_deref(), Some(Path::new("/opt/libnvidia-ml.so.1")));
    let _ = std::fs::remove_file(path);
}

#[test]
fn credentials_are_refused_without_echoing_them() {
    for (var, value) in [
        (PIPETEL_PROMETHEUS_BASIC_AUTH, "no-colon-secret"),
        (PIPETEL_PROMETHEUS_BASIC_AUTH, ":secret"),
        (PIPETEL_PROMETHEUS_BEARER_TOKEN, "has space"),
    ] {
        let err = from(&[(var, value)]).expect_err(value).to_string();
        assert!(err.contains(var) && err.contains("<redacted>") && !err.contains(value), "{err}");
    }
    let err = from(&[(PIPETEL_PROMETHEUS_TLS_KEY, "/k.pem")]).expect_err("key alone").to_string();
    assert!(err.contains(PIPETEL_PROMETHEUS_TLS_KEY) && err.contains(PIPETEL_PROMETHEUS_TLS_CERT), "{err}");
    let c = from(&[(PIPETEL_PROMETHEUS_BASIC_AUTH, "scraper:s3:cret"), (PIPETEL_PROMETHEUS_BEARER_TOKEN, "abc.def")])
        .expect("valid");
    assert_eq!(c.prometheus_basic_auth(), Some(("scraper", "s3:cret")));
    assert_eq!(c.prometheus_bearer_token(), Some("abc.def"));
}

#[test]
fn endpoint_userinfo_is_never_shown_in_errors_or_debug() {
    // Refused endpoints: the error names the variable and the host, never the credentials.
    for (var, value) in [
        (OTEL_EXPORTER_OTLP_ENDPOINT, "http://user:secret@collector:99999"),
        (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "ftp://user:secret@collector:4317"),
    ] {
        let err = from(&[(var, value)]).expect_err(value).to_string();
        assert!(err.contains(var) && err.contains("<redacted>@collector") && !err.contains("secret"), "{err}");
    }
    let err = from(&[
        (OTEL_EXPORTER_OTLP_ENDPOINT, "user:secret@collector:4318"),
        (OTEL_EXPORTER_OTLP_PROTOCOL, "http/protobuf"),
    ])
    .and_then(|c| c.resolve().map(drop))
    .expect_err("schemeless OTLP/HTTP")
    .to_string();
    assert!(err.contains("<redacted>@collector:4318") && !err.contains("secret"), "{err}");
    let (path, p) = write_file("[otlp]\nendpoint = \"ftp://user:secret@collector\"\n");
    let err = from(&[(PIPETEL_CONFIG, &p)]).expect_err("file").to_string();
    let _ = std::fs::remove_file(path);
    assert!(err.contains("otlp.endpoint") && !err.contains("secret"), "{err}");
    // Accepted endpoints keep their credentials for the exporter, and `Debug` hides them.
    let c = from(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://user:secret@collector:4318"), (OTEL_TRACES_EXPORTER, "otlp")])
        .expect("valid");
    assert!(!format!("{c:?}").contains("secret"), "{c:?}");
    let s = c.resolve().expect("resolves");
    let shown = format!("{s:?}");
    assert!(!shown.contains("secret") && shown.contains("<redacted>@collector:4318"), "{shown}");
    let target = c.otlp_target(Signal::Traces).expect("target");
    assert_eq!(target.endpoint, "http://user:secret@collector:4318/v1/traces");
    assert!(!format!("{target:?}").contains("secret"));
}

#[test]
fn service_switches_layer_like_every_setting() {
    let (path, p) = write_file("[service]\nprefix = \"telefuser\"\nqueue_metrics = false\n[metrics]\nhistogram_buckets = [0.1, 1.0]\n[pipeline]\nmetrics = false\n");
    let c = from(&[(PIPETEL_CONFIG, &p), (PIPETEL_QUEUE_METRICS, "true")]).expect("valid");
    assert_eq!(c.service_metrics().prefix, "telefuser");
    assert!(c.service_metrics().queue_metrics, "env beats file");
    assert_eq!(c.service_metrics().histogram_buckets, vec![0.1, 1.0]);
    assert!(!c.stage_metrics());
    let _ = std::fs::remove_file(path);
}

#[test]
fn bad_gpu_span_and_service_settings_set_in_code_name_their_setter() {
    #[cfg_attr(not(feature = "gpu"), allow(unused_mut))]
    let mut cases: Vec<(Config, &str)> = vec![
        (
            Config::default()
                .with_span_metrics(crate::span_metrics::SpanMetricsConfig::default().with_filter("x=loud")),
            "with_span_metrics",
        ),
        (
            Config::default().with_service_metrics({
                let mut service = crate::service::ServiceMetricsConfig::default();
                service.histogram_buckets = vec![2.0, 1.0];
                service
            }),
            "with_service_metrics",
        ),
    ];
    #[cfg(feature = "gpu")]
    cases.extend([
        (Config::default().with_gpu_poll_interval(Duration::from_millis(10)), "with_gpu"),
        (Config::default().with_nvml_library(""), "with_nvml_library"),
    ]);
    for (config, setter) in cases {
        let err = config.validate().expect_err(setter);
        assert!(err.to_string().contains(setter), "{err}");
    }
}

#[test]
fn every_variable_but_the_file_has_an_env_row() {
    let rows: Vec<&str> = TABLE.iter().flat_map(|e| e.env.iter().copied()).collect();
    for var in ENV_VARS {
        assert!(rows.contains(var), "{var} is listed but never read");
    }
    for row in &rows {
        assert!(ENV_VARS.contains(row), "{row} is read but not listed in ENV_VARS");
    }
}

/// One duration grammar on every path; a bare number keeps each setting's documented unit.
#[test]
fn durations_take_units_and_bare_numbers_keep_their_unit() {
    let c = from(&[
        (OTEL_EXPORTER_OTLP_TIMEOUT, "10s"),
        (OTEL_METRIC_EXPORT_INTERVAL, "1500"),
        (PIPETEL_SAMPLE_INTERVAL, "2s"),
        (PIPETEL_STAGE_RETENTION, "5m"),
        (PIPETEL_SHUTDOWN_TIMEOUT, "250ms"),
        (PIPETEL_GPU_POLL_INTERVAL, "2"),
    ])
    .expect("valid");
    assert_eq!(c.otlp_target(Signal::Logs).expect("logs").timeout, Duration::from_secs(10));
    assert_eq!(c.metric_export_interval(), Duration::from_millis(1500));
    assert_eq!(c.sample_interval(), Duration::from_secs(2));
    assert_eq!(c.stage_retention(), Duration::from_secs(300));
    assert_eq!(c.shutdown_timeout(), Duration::from_millis(250));
    #[cfg(feature = "gpu")]
    {
        assert_eq!(c.gpu().poll_interval, Duration::from_secs(2), "the GPU variable's bare unit is seconds");
        let c = from(&[(PIPETEL_GPU_POLL_INTERVAL, "1500ms")]).expect("valid");
        assert_eq!(c.gpu().poll_interval, Duration::from_millis(1500));
    }

    let (path, p) = write_file(
        "shutdown_timeout_ms = \"2s\"\n[pipeline]\nsample_interval_ms = 200\nretention_ms = \"1m\"\n[gpu]\npoll_interval_ms = 2500\n",
    );
    let c = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    assert_eq!(c.shutdown_timeout(), Duration::from_secs(2));
    assert_eq!(c.sample_interval(), Duration::from_millis(200));
    assert_eq!(c.stage_retention(), Duration::from_secs(60));
    #[cfg(feature = "gpu")]
    assert_eq!(c.gpu().poll_interval, Duration::from_millis(2500), "the file key's bare unit is milliseconds");
    let _ = std::fs::remove_file(path);
}

/// A value keeps its origin through resolution, so errors raised by `init` can name it.
#[test]
fn resolved_settings_remember_where_values_came_from() {
    let s = Config::default().resolve().expect("defaults");
    assert_eq!(s.subscriber.log_filter.origin, Origin::Default);
    assert_eq!(s.subscriber.log_filter.value, "info");
    assert!(s.pipeline.rows_file.is_none());

    let s = from(&[(RUST_LOG, "debug"), (PIPETEL_ROWS_FILE, "/tmp/rows.jsonl")]).expect("valid").resolve().expect("ok");
    assert_eq!(s.subscriber.log_filter.origin, Origin::Env(RUST_LOG.into()));
    assert_eq!(s.pipeline.rows_file.as_ref().map(|f| f.origin.clone()), Some(Origin::Env(PIPETEL_ROWS_FILE.into())));

    let (path, p) = write_file("[log]\nfilter = \"warn\"\n[span_metrics]\nfilter = \"info\"\n");
    let c = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    let s = c.resolve().expect("ok");
    assert_eq!(s.subscriber.log_filter.origin, Origin::File { path: path.clone(), key: "log.filter".into() });
    assert_eq!(s.span_metrics.origin, Origin::File { path: path.clone(), key: "span_metrics.filter".into() });

    let s = c
        .with_log_filter("trace")
        .with_rows_file("/tmp/r.jsonl")
        .with_span_metrics(crate::span_metrics::SpanMetricsConfig::default())
        .resolve()
        .expect("ok");
    assert_eq!(s.subscriber.log_filter.origin, Origin::Code("with_log_filter"));
    assert_eq!(s.pipeline.rows_file.map(|f| f.origin), Some(Origin::Code("with_rows_file")));
    assert_eq!(s.span_metrics.origin, Origin::Code("with_span_metrics"));
    let _ = std::fs::remove_file(path);
}

#[test]
fn settings_group_what_each_builder_needs() {
    let s = from(&[
        (OTEL_RESOURCE_ATTRIBUTES, "service.name=from-attrs,team=ml"),
        (OTEL_EXPORTER_OTLP_ENDPOINT, "http://collector:4318"),
        (OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, "grpc"),
        (OTEL_TRACES_SAMPLER, "traceidratio"),
        (OTEL_TRACES_SAMPLER_ARG, "0.5"),
        (OTEL_EXPORTER_PROMETHEUS_PORT, "0"),
        (PIPETEL_CARDINALITY_LIMIT, "10"),
    ])
    .expect("valid")
    .resolve()
    .expect("ok");
    assert_eq!(s.resource.service_name, "from-attrs", "service.name among the attributes beats the default");
    assert_eq!(s.resource.attributes, vec![("team".to_string(), "ml".to_string())]);
    assert_eq!(s.traces.exporters, vec![TraceExporter::Otlp]);
    assert_eq!(s.traces.otlp.protocol, OtlpProtocol::Grpc);
    assert_eq!(s.traces.sampler, SamplerConfig::TraceIdRatio(0.5));
    assert_eq!(s.metrics.otlp.endpoint, "http://collector:4318/v1/metrics");
    assert_eq!(s.logs.otlp.endpoint, "http://collector:4318/v1/logs");
    assert_eq!(s.metrics.prometheus.port, 0);
    assert_eq!(s.cardinality_limit, 10);
    let s = Config::default().with_service_name("code").resolve().expect("ok");
    assert_eq!(s.resource.service_name, "code");
}

#[test]
fn sampler_argument_layers_over_the_file_and_code_ratio_beats_it() {
    let (path, p) = write_file("[traces]\nsampler = \"parentbased_traceidratio\"\nsampler_arg = 0.2\n");
    let c = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    assert_eq!(c.sampler(), SamplerConfig::ParentBasedTraceIdRatio(0.2));
    let c = from(&[(PIPETEL_CONFIG, &p), (OTEL_TRACES_SAMPLER_ARG, "0.7")]).expect("valid");
    let _ = std::fs::remove_file(path);
    assert_eq!(c.sampler(), SamplerConfig::ParentBasedTraceIdRatio(0.7));
    let c = c.with_sampler(SamplerConfig::TraceIdRatio(0.1));
    assert_eq!(c.sampler(), SamplerConfig::TraceIdRatio(0.1));
    assert_eq!(c.with_sampler(SamplerConfig::AlwaysOn).sampler(), SamplerConfig::AlwaysOn);
}

/// `gpu.mode` is the mode key; the old `gpu.enabled` still works and leaves a deprecation note.
#[cfg(feature = "gpu")]
#[test]
fn gpu_mode_key_and_its_old_name() {
    let c = file_config("[gpu]\nmode = \"off\"\n");
    assert_eq!(c.gpu().mode, pipetel_gpu::GpuMode::Off);
    assert!(c.deprecations().is_empty());

    let c = file_config("[gpu]\nenabled = \"on\"\n");
    assert_eq!(c.gpu().mode, pipetel_gpu::GpuMode::On);
    assert_eq!(c.deprecations().len(), 1);
    assert!(c.deprecations()[0].contains("gpu.enabled") && c.deprecations()[0].contains("gpu.mode"));
    assert_eq!(c.resolve().expect("ok").deprecations, c.deprecations());

    let err = file_error("[gpu]\nenabled = \"on\"\nmode = \"off\"\n");
    assert!(err.contains("gpu.enabled") && err.contains("gpu.mode"), "{err}");

    let err = file_error("[gpu]\nmode = \"sometimes\"\n");
    assert!(err.contains("gpu.mode") && err.contains("\"sometimes\""), "{err}");
}

/// The prefix check is pure (no registry is built), and agrees with the registry's own rule.
#[test]
fn service_prefix_check_agrees_with_the_registry() {
    for name in ["service", "telefuser", "_x", "a1_b", "", "Bad", "1a", "a-b", "__reserved", "a b"] {
        let pure = syntax::service_prefix(&name.to_string()).is_ok();
        let registry = !name.is_empty() && crate::registry::Registry::new(name).is_ok();
        assert_eq!(pure, registry, "{name:?}");
    }
}

#[test]
fn unknown_file_keys_list_the_section() {
    let err = file_error("[pipeline]\nsample_every = 3\n");
    assert!(err.contains("pipeline.sample_every") && err.contains("sample_interval_ms"), "{err}");
    let err = file_error("otlp = 3\n");
    assert!(err.contains("otlp"), "{err}");
}

#[test]
fn file_tables_keep_their_values_exactly() {
    let (path, p) =
        write_file("[resource]\n\"team\" = \"ml, infra=1 %20\"\n[otlp.headers]\nauthorization = \" Bearer x \"\n");
    let c = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    assert_eq!(c.resource_attributes(), &[("team".to_string(), "ml, infra=1 %20".to_string())]);
    let t = c.otlp_target(Signal::Traces).expect("traces");
    assert_eq!(t.headers, vec![("authorization".to_string(), " Bearer x ".to_string())]);
    let _ = std::fs::remove_file(path);
}

#[test]
fn tls_certificate_and_key_may_come_from_different_places() {
    let (path, p) = write_file("[prometheus]\ntls_key = \"/k.pem\"\n");
    let err = from(&[(PIPETEL_CONFIG, &p)]).expect_err("key alone").to_string();
    assert!(err.contains("prometheus.tls_key") && err.contains("tls_cert"), "{err}");
    let c = Config::from_file(&path).expect_err("checked when read");
    assert!(c.to_string().contains("prometheus.tls_key"), "{c}");
    let _ = std::fs::remove_file(path);
    let (path, p) = write_file("[prometheus]\ntls_cert = \"/c.pem\"\n");
    let c = from(&[(PIPETEL_CONFIG, &p), (PIPETEL_PROMETHEUS_TLS_KEY, "/k.pem")]).expect_err("file alone is checked");
    assert!(c.to_string().contains("prometheus.tls_cert"), "{c}");
    let _ = std::fs::remove_file(path);
    let s = from(&[(PIPETEL_PROMETHEUS_TLS_CERT, "/c.pem"), (PIPETEL_PROMETHEUS_TLS_KEY, "/k.pem")])
        .expect("pair")
        .resolve()
        .expect("ok");
    let tls = s.metrics.prometheus.tls.expect("tls");
    assert_eq!(tls.value, (PathBuf::from("/c.pem"), PathBuf::from("/k.pem")));
    assert_eq!(tls.origin, Origin::Env(PIPETEL_PROMETHEUS_TLS_CERT.into()));
}

#[test]
fn debug_output_redacts_credentials() {
    let c = Config::default().with_prometheus_bearer_token("s3cret-token").with_prometheus_basic_auth("u", "pw-s3cret");
    let shown = format!("{c:?}");
    assert!(!shown.contains("s3cret"), "{shown}");
}

#[test]
fn service_metrics_from_lookup_reads_only_its_variables() {
    let env: HashMap<&str, &str> = [(PIPETEL_SERVICE_PREFIX, "telefuser"), (OTEL_SDK_DISABLED, "not read")].into();
    let c = ServiceMetricsConfig::from_lookup(|n| env.get(n).map(|v| v.to_string())).expect("valid");
    assert_eq!(c.prefix, "telefuser");
}

/// The configuration reference's table (`docs/src/configuration.md`) names only keys the file
/// reader knows, and every key has a row.
#[test]
fn reference_file_keys_are_the_real_ones() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/configuration.md"))
        .expect("docs/src/configuration.md");
    let known: Vec<&str> = TABLE.iter().flat_map(|e| e.keys.iter().copied()).collect();
    let mut named = std::collections::HashSet::new();
    for line in readme.lines().filter(|l| ENV_VARS.iter().any(|v| l.starts_with(&format!("| `{v}` |")))) {
        let column = line.split('|').nth(2).expect("file key column");
        // The first code span is the key (`[resource]` names a whole table); "was ..." notes follow.
        let Some(key) = column.split('`').nth(1) else { continue };
        let key = key.trim_start_matches('[').trim_end_matches(']');
        assert!(known.contains(&key), "the reference names file key `{key}`, which the file reader does not know");
        named.insert(key);
    }
    for key in known {
        assert!(named.contains(key), "file key `{key}` has no row in the reference's table");
    }
}

/// A PEM file for the TLS settings' tests, written once per name.
fn pem_file(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("pipetel-config-{}-{name}.pem", std::process::id()));
    std::fs::write(&path, text).expect("write temp PEM file");
    path
}

const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n";
const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n";

/// A missing, unreadable or wrong-kind TLS file is an error naming the variable (or key, or
/// setter) and the path, when the configuration is read.
#[test]
fn otlp_tls_files_are_checked_when_read() {
    let missing = "/nonexistent/pipetel/ca.pem";
    for var in [OTEL_EXPORTER_OTLP_CERTIFICATE, OTEL_EXPORTER_OTLP_LOGS_CERTIFICATE, OTEL_EXPORTER_OTLP_CLIENT_KEY] {
        let msg = from(&[(var, missing)]).expect_err(var).to_string();
        assert!(msg.contains(var) && msg.contains(missing) && msg.contains("cannot read the file"), "{msg}");
    }
    let key = pem_file("only-key", KEY_PEM);
    let msg = from(&[(OTEL_EXPORTER_OTLP_CERTIFICATE, key.to_str().expect("utf-8"))]).expect_err("a key").to_string();
    assert!(msg.contains("no PEM `CERTIFICATE` block"), "{msg}");
    let (path, p) = write_file(&format!("[otlp.traces]\ncertificate = \"{missing}\"\n"));
    let msg = from(&[(PIPETEL_CONFIG, &p)]).expect_err("file key").to_string();
    assert!(msg.contains("otlp.traces.certificate") && msg.contains(missing), "{msg}");
    let _ = std::fs::remove_file(path);
    let msg = Config::default().with_otlp_certificate(missing).resolve().expect_err("setter").to_string();
    assert!(msg.contains("with_otlp_certificate") && msg.contains(missing), "{msg}");
    let _ = std::fs::remove_file(key);
}

#[test]
fn otlp_tls_resolves_per_signal_and_needs_certificate_and_key_together() {
    let (ca, ca_traces, cert, key) = (
        pem_file("ca", CERT_PEM),
        pem_file("ca-traces", CERT_PEM),
        pem_file("cert", CERT_PEM),
        pem_file("key", KEY_PEM),
    );
    let s = |p: &PathBuf| p.to_str().expect("utf-8").to_string();
    // The same files, with the client key given for metrics only or for every signal.
    let with_key = |key_var: &str| {
        from(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "https://collector:4318"),
            (OTEL_EXPORTER_OTLP_CERTIFICATE, &s(&ca)),
            (OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE, &s(&ca_traces)),
            (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, &s(&cert)),
            (key_var, &s(&key)),
        ])
    };
    // The metrics signal has both halves; traces and logs only the certificate.
    let msg = with_key(OTEL_EXPORTER_OTLP_METRICS_CLIENT_KEY).expect_err("traces has a certificate without a key");
    let msg = msg.to_string();
    assert!(msg.contains(OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE) && msg.contains("needs its key"), "{msg}");
    let c = with_key(OTEL_EXPORTER_OTLP_CLIENT_KEY).expect("valid");
    let traces = c.otlp_target(Signal::Traces).expect("traces").tls;
    let ca_of = |tls: &OtlpTls| tls.certificate.as_ref().map(|c| (c.value.clone(), c.origin.clone()));
    assert_eq!(ca_of(&traces), Some((ca_traces.clone(), Origin::Env(OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE.into()))));
    let logs = c.otlp_target(Signal::Logs).expect("logs").tls;
    assert_eq!(ca_of(&logs), Some((ca.clone(), Origin::Env(OTEL_EXPORTER_OTLP_CERTIFICATE.into()))));
    let (c_cert, c_key) = logs.client.expect("mTLS");
    assert_eq!((c_cert.value, c_key.value), (cert.clone(), key.clone()));
    let code = Config::default()
        .with_otlp_signal_client_certificate(Signal::Metrics, &cert)
        .with_otlp_signal_client_key(Signal::Metrics, &key)
        .with_otlp_signal_certificate(Signal::Metrics, &ca);
    let metrics = code.otlp_target(Signal::Metrics).expect("metrics").tls;
    assert_eq!(metrics.certificate.map(|c| c.origin), Some(Origin::Code("with_otlp_signal_certificate")));
    assert!(code.otlp_target(Signal::Traces).expect("traces").tls.client.is_none());
    for p in [ca, ca_traces, cert, key] {
        let _ = std::fs::remove_file(p);
    }
}

/// A schemeless `host:port` is a gRPC endpoint whose scheme `INSECURE` picks (TLS by default);
/// an explicit scheme wins; OTLP/HTTP needs its scheme.
#[test]
fn insecure_picks_the_scheme_of_a_schemeless_grpc_endpoint() {
    let grpc = |vars: &[(&str, &str)]| {
        let mut vars = vars.to_vec();
        vars.push((OTEL_EXPORTER_OTLP_PROTOCOL, "grpc"));
        from(&vars).expect("valid").otlp_target(Signal::Traces).expect("traces").endpoint
    };
    assert_eq!(grpc(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4317")]), "https://collector:4317");
    assert_eq!(
        grpc(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4317"), (OTEL_EXPORTER_OTLP_INSECURE, "true")]),
        "http://collector:4317"
    );
    assert_eq!(
        grpc(&[
            (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "collector:4317"),
            (OTEL_EXPORTER_OTLP_INSECURE, "true"),
            (OTEL_EXPORTER_OTLP_TRACES_INSECURE, "false")
        ]),
        "https://collector:4317"
    );
    assert_eq!(
        grpc(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "https://collector:4317"), (OTEL_EXPORTER_OTLP_INSECURE, "true")]),
        "https://collector:4317"
    );
    let msg = from(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "collector:4318")]).expect_err("http needs a scheme").to_string();
    assert!(msg.contains(OTEL_EXPORTER_OTLP_ENDPOINT) && msg.contains("needs its scheme"), "{msg}");
    let c =
        Config::default().with_otlp_protocol(OtlpProtocol::Grpc).with_otlp_endpoint("c:4317").with_otlp_insecure(true);
    assert_eq!(c.otlp_target(Signal::Logs).expect("logs").endpoint, "http://c:4317");
}

/// The settings of the OTel SDK configuration spec that pipetel reads itself.
#[test]
fn spec_settings_are_read() {
    let c = from(&[
        (OTEL_PROPAGATORS, "Baggage, tracecontext"),
        (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, "DELTA"),
        (OTEL_METRICS_EXPORTER, "otlp"),
        (OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, "Base2_Exponential_Bucket_Histogram"),
        (OTEL_METRIC_EXPORT_TIMEOUT, "2500"),
        (OTEL_EXPORTER_OTLP_TIMEOUT, "10s"),
        (OTEL_BSP_EXPORT_TIMEOUT, "1s"),
        (OTEL_ATTRIBUTE_COUNT_LIMIT, "16"),
        (OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT, "32"),
        (OTEL_SPAN_EVENT_COUNT_LIMIT, "0"),
        (OTEL_SPAN_LINK_COUNT_LIMIT, "5"),
        (OTEL_LINK_ATTRIBUTE_COUNT_LIMIT, "3"),
        (OTEL_BSP_MAX_QUEUE_SIZE, "100"),
        (OTEL_BSP_MAX_EXPORT_BATCH_SIZE, "10"),
        (OTEL_BSP_SCHEDULE_DELAY, "250"),
        (OTEL_BLRP_MAX_QUEUE_SIZE, "4096"),
        (OTEL_BLRP_MAX_EXPORT_BATCH_SIZE, "4096"),
    ])
    .expect("valid");
    let s = c.resolve().expect("resolves");
    assert_eq!(s.propagators, vec![Propagator::Baggage, Propagator::TraceContext]);
    assert_eq!(s.metrics.temporality, MetricTemporality::Delta);
    assert_eq!(s.metrics.histogram_aggregation, HistogramAggregation::Base2Exponential);
    assert_eq!(s.metrics.otlp.timeout, Duration::from_millis(2500), "bounded by OTEL_METRIC_EXPORT_TIMEOUT");
    assert_eq!(s.traces.otlp.timeout, Duration::from_secs(1), "bounded by OTEL_BSP_EXPORT_TIMEOUT");
    assert_eq!(s.logs.otlp.timeout, Duration::from_secs(10), "no bound set for logs");
    let l = s.traces.limits;
    assert_eq!(
        (l.attributes_per_span, l.events_per_span, l.links_per_span, l.attributes_per_event, l.attributes_per_link),
        (32, 0, 5, 16, 3)
    );
    assert_eq!(s.traces.batch.max_queue_size, 100);
    assert_eq!(s.traces.batch.max_export_batch_size, 10);
    assert_eq!(s.traces.batch.schedule_delay, Duration::from_millis(250));
    assert_eq!(s.logs.batch.max_export_batch_size, 4096);
    // Nothing set: the spec's defaults.
    let d = from(&[]).expect("empty").resolve().expect("resolves");
    assert_eq!(d.propagators, vec![Propagator::TraceContext, Propagator::Baggage]);
    assert_eq!(d.metrics.temporality, MetricTemporality::Cumulative);
    assert_eq!(d.metrics.histogram_aggregation, HistogramAggregation::ExplicitBucket);
    assert_eq!(d.traces.limits.attributes_per_span, 128);
    let spec = |delay| BatchSettings {
        schedule_delay: Duration::from_millis(delay),
        max_queue_size: 2048,
        max_export_batch_size: 512,
    };
    assert_eq!((d.traces.batch, d.logs.batch), (spec(5000), spec(1000)), "the spec's batch defaults");
    assert!(from(&[(OTEL_PROPAGATORS, "none")]).expect("none").propagators().is_empty());
    assert_eq!(
        from(&[(OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, "LowMemory")]).expect("valid").metric_temporality(),
        MetricTemporality::LowMemory
    );
}

#[test]
fn spec_settings_from_the_file_and_code_follow_the_resolution_order() {
    let (path, p) = write_file(
        "propagators = [\"baggage\"]\ninstance_id = \"file-{pid}\"\n[metrics]\ntemporality_preference = \"delta\"\n\
         export_timeout_ms = 4000\n[limits]\nspan_event_count = 7\n[batch.logs]\nmax_queue_size = 64\n",
    );
    let file_only = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    assert_eq!(file_only.propagators(), vec![Propagator::Baggage]);
    assert_eq!(file_only.metric_temporality(), MetricTemporality::Delta);
    assert_eq!(file_only.metric_export_timeout(), Duration::from_secs(4));
    let s = file_only.resolve().expect("resolves");
    assert_eq!(s.traces.limits.events_per_span, 7);
    assert_eq!(s.logs.batch.max_queue_size, 64);
    assert_eq!(s.resource.instance_id, Some(format!("file-{}", std::process::id())));
    let env_over_file = from(&[
        (PIPETEL_CONFIG, &p),
        (OTEL_PROPAGATORS, "tracecontext"),
        (OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE, "cumulative"),
        (PIPETEL_INSTANCE_ID, "env-id"),
    ])
    .expect("valid");
    assert_eq!(env_over_file.propagators(), vec![Propagator::TraceContext]);
    assert_eq!(env_over_file.metric_temporality(), MetricTemporality::Cumulative);
    assert_eq!(env_over_file.instance_id(), "env-id");
    let code = env_over_file
        .with_propagators([])
        .with_metric_temporality(MetricTemporality::LowMemory)
        .with_instance_id("code-id");
    assert!(code.propagators().is_empty());
    assert_eq!(code.metric_temporality(), MetricTemporality::LowMemory);
    assert_eq!(code.resolve().expect("resolves").resource.instance_id.as_deref(), Some("code-id"));
    let _ = std::fs::remove_file(path);
    assert!(file_error("[batch.traces]\nmax_queue_size = 0\n").contains("batch.traces.max_queue_size"));
    assert!(file_error("[metrics]\ntemporality_preference = \"both\"\n").contains("metrics.temporality_preference"));
    assert!(file_error("instance_id = \"{nope}\"\n").contains("instance_id"));
}

#[test]
fn exponential_histograms_are_refused_with_the_pull_endpoint() {
    let err = from(&[(OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, "base2_exponential_bucket_histogram")])
        .expect_err("the default exporter is the pull endpoint")
        .to_string();
    assert!(
        err.contains(OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION) && err.contains("prometheus"),
        "{err}"
    );
    let err = Config::default()
        .with_default_histogram_aggregation(HistogramAggregation::Base2Exponential)
        .resolve()
        .expect_err("refused in code too")
        .to_string();
    assert!(err.contains("with_default_histogram_aggregation"), "{err}");
    let ok = Config::default()
        .with_metrics_exporters([MetricExporter::Otlp])
        .with_default_histogram_aggregation(HistogramAggregation::Base2Exponential);
    assert!(ok.resolve().is_ok());
}

#[test]
fn instance_id_recipes_and_literals() {
    let host = gethostname::gethostname().to_string_lossy().into_owned();
    let pid = std::process::id();
    let id = |v: &str, extra: &[(&str, &str)]| {
        let mut vars = vec![(PIPETEL_INSTANCE_ID, v)];
        vars.extend_from_slice(extra);
        from(&vars).expect(v).resolve().expect("resolves").resource.instance_id
    };
    assert_eq!(id("random", &[]), None);
    assert_eq!(id("hostname", &[]), Some(host.clone()));
    assert_eq!(id("hostname-pid", &[]), Some(format!("{host}-{pid}")));
    assert_eq!(id("pid", &[]), Some(pid.to_string()));
    assert_eq!(id("pod", &[]), Some(host.clone()), "outside Kubernetes `pod` is the host name");
    let k8s = [(KUBERNETES_SERVICE_HOST, "10.0.0.1"), (K8S_POD_NAME, "tokenize-7d9f")];
    assert_eq!(id("pod-pid", &k8s), Some(format!("tokenize-7d9f-{pid}")));
    assert_eq!(id("ingest-{hostname}", &[]), Some(format!("ingest-{host}")));
    assert_eq!(id("fixed id 1", &[]), Some("fixed id 1".to_string()));
}

#[test]
fn kubernetes_attributes_only_inside_a_cluster() {
    let downward = [
        (K8S_POD_NAME, "tokenize-7d9f"),
        (K8S_POD_UID, "0b5a-11"),
        (K8S_NAMESPACE_NAME, "ml"),
        (K8S_NODE_NAME, "node-3"),
        (K8S_CONTAINER_NAME, "worker"),
    ];
    let outside = from(&downward).expect("valid").resolve().expect("resolves");
    assert!(outside.resource.kubernetes.is_empty(), "{:?}", outside.resource.kubernetes);
    let mut inside = downward.to_vec();
    inside.push((KUBERNETES_SERVICE_HOST, "10.96.0.1"));
    let s = from(&inside).expect("valid").resolve().expect("resolves");
    let got: Vec<(&str, &str)> = s.resource.kubernetes.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    assert_eq!(
        got,
        [
            ("k8s.pod.name", "tokenize-7d9f"),
            ("k8s.pod.uid", "0b5a-11"),
            ("k8s.namespace.name", "ml"),
            ("k8s.node.name", "node-3"),
            ("k8s.container.name", "worker"),
        ]
    );
}

/// `PIPETEL_PROGRESS`, `pipeline.progress` and the builder give the same modes; off by default.
#[test]
fn progress_modes_from_env_file_and_code() {
    assert_eq!(from(&[]).expect("valid").progress(), ProgressMode::Off);
    for (text, mode) in [
        ("1", ProgressMode::Auto),
        ("true", ProgressMode::Auto),
        ("auto", ProgressMode::Auto),
        ("ALWAYS", ProgressMode::Always),
        ("false", ProgressMode::Off),
        ("0", ProgressMode::Off),
    ] {
        let c = from(&[(PIPETEL_PROGRESS, text)]).expect(text);
        assert_eq!(c.progress(), mode, "PIPETEL_PROGRESS={text}");
        assert_eq!(c.resolve().expect("resolves").pipeline.progress, mode, "PIPETEL_PROGRESS={text}");
    }
    assert_eq!(file_config("[pipeline]\nprogress = true").progress(), ProgressMode::Auto);
    assert_eq!(file_config("[pipeline]\nprogress = false").progress(), ProgressMode::Off);
    assert_eq!(file_config("[pipeline]\nprogress = \"always\"").progress(), ProgressMode::Always);
    assert_eq!(Config::default().with_progress(true).progress(), ProgressMode::Auto);
    assert_eq!(Config::default().with_progress(false).progress(), ProgressMode::Off);
    assert_eq!(Config::default().with_progress_mode(ProgressMode::Always).progress(), ProgressMode::Always);
}

/// A setting given by its file key in code beats the environment and the file, in either
/// spelling; a table or list takes the TOML type the file's key takes.
#[test]
fn settings_by_file_key_beat_env_and_file() {
    use toml::Value;
    let (path, p) = write_file("[prometheus]\nport = 1111\npath = \"/file\"\n[pipeline]\nnamespace = \"file\"\n");
    let c = from(&[(PIPETEL_CONFIG, &p), (OTEL_EXPORTER_PROMETHEUS_PORT, "2222"), (PIPETEL_NAMESPACE, "env")])
        .expect("valid")
        .with_setting("prometheus_port", Value::Integer(3333))
        .and_then(|c| c.with_setting("pipeline.namespace", "zephyr".into()))
        .and_then(|c| c.with_setting("exporters_metrics", Value::Array(vec!["prometheus".into(), "otlp".into()])))
        .and_then(|c| {
            let mut resource = toml::Table::new();
            resource.insert("team".into(), "data".into());
            c.with_setting("resource", Value::Table(resource))
        })
        .expect("valid settings");
    assert_eq!(c.prometheus_port(), 3333);
    assert_eq!(c.prometheus_path(), "/file");
    assert_eq!(c.namespace(), "zephyr");
    assert_eq!(c.metrics_exporters(), vec![MetricExporter::Prometheus, MetricExporter::Otlp]);
    assert!(c.resource_attributes().contains(&("team".to_string(), "data".to_string())));
    c.validate().expect("valid");
    let _ = std::fs::remove_file(path);
}

/// An unknown key, a value of the wrong type and a value the rule refuses are errors naming the
/// key as given.
#[test]
fn bad_settings_by_file_key_name_the_key() {
    use toml::Value;
    assert!(file::underscored_keys_are_unique());
    let unknown = Config::default().with_setting("prometheus_prot", Value::Integer(1)).expect_err("unknown");
    assert!(matches!(unknown, ConfigError::UnknownSetting { .. }), "{unknown:?}");
    assert!(
        unknown.to_string().contains("`prometheus_prot`") && unknown.to_string().contains("prometheus"),
        "{unknown}"
    );
    let cases: &[(&str, Value)] = &[
        ("prometheus_port", Value::String("9464".into())),
        ("prometheus_port", Value::Integer(70000)),
        ("exporters_metrics", Value::String("prometheus".into())),
        ("exporters_metrics", Value::Array(vec!["carrier-pigeon".into()])),
        ("pipeline_namespace", Value::String("Zephyr".into())),
        ("log.console", Value::Integer(1)),
        ("traces_sampler_arg", Value::Float(2.0)),
    ];
    for (key, value) in cases {
        let err =
            Config::default().with_setting(key, value.clone()).and_then(|c| c.validate().map(|()| c)).expect_err(key);
        assert!(err.to_string().contains(&format!("setting `{key}`")), "{key}: {err}");
    }
}

/// The configuration reference (`docs/src/configuration.md`) is written from the settings table;
/// `PIPETEL_BLESS=1` rewrites it.
// The reference documents the GPU settings, whose defaults are the GPU crate's values.
#[cfg(feature = "gpu")]
#[test]
fn reference_is_current() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let docs_path = format!("{root}/docs/src/configuration.md");
    let fresh_docs = reference::document();
    if std::env::var("PIPETEL_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(format!("{root}/docs/src")).expect("docs/src");
        std::fs::write(&docs_path, &fresh_docs).expect("write docs/src/configuration.md");
        return;
    }
    let how = "the settings table (crates/pipetel/src/config/table.rs) changed; rewrite the reference with \
               `PIPETEL_BLESS=1 cargo test -p pipetel --all-features --lib config::tests::reference`";
    let docs = std::fs::read_to_string(&docs_path).unwrap_or_default();
    assert!(docs == fresh_docs, "docs/src/configuration.md is stale: {how}");
}

/// Setting a variable to the default its reference row states changes nothing: the words and the
/// code agree.
#[test]
fn documented_defaults_are_the_defaults() {
    let normalize = |text: String| {
        let mut out = String::new();
        for (i, part) in text.split("origin: ").enumerate() {
            if i > 0 {
                out.push_str("origin: _");
                let rest = part.trim_start_matches(|c: char| c.is_alphanumeric());
                let rest = if rest.starts_with('(') { &rest[rest.find(')').map_or(0, |p| p + 1)..] } else { rest };
                out.push_str(rest);
            } else {
                out.push_str(part);
            }
        }
        out
    };
    let defaults = normalize(format!("{:?}", from(&[]).expect("defaults").resolve().expect("resolves")));
    let mut checked = 0;
    for entry in TABLE {
        let Some(var) = entry.env.first() else { continue };
        let words = (entry.default)();
        let Some(value) = words.strip_prefix('`').and_then(|d| d.strip_suffix('`')) else { continue };
        if value.contains('`') || value.contains('<') {
            continue;
        }
        let config = from(&[(var, value)]).unwrap_or_else(|e| panic!("{var}={value}, its documented default: {e}"));
        let resolved = normalize(format!("{:?}", config.resolve().expect("resolves")));
        assert_eq!(resolved, defaults, "{var}={value} (its documented default) changes the settings");
        checked += 1;
    }
    assert!(checked > 40, "only {checked} defaults checked");
}

/// Every default that has a value is written (in the reference) as text its setting's rule reads
/// back as that value, and the rule accepts it; the reference's words are those the table's values
/// give.
#[test]
fn every_default_reads_back_as_its_value() {
    let failures = Defaults::mismatches();
    assert!(failures.is_empty(), "defaults that do not read back:\n{}", failures.join("\n"));
    let reference = reference::table();
    for (entry, words) in TABLE.iter().map(|e| (e, (e.default)())) {
        let Some(var) = entry.env.first().or(entry.keys.first()) else { continue };
        assert!(reference.contains(&format!("`{var}`")), "{var} has no row");
        if cfg!(feature = "gpu") {
            assert!(reference.contains(&format!(" | {words} | ")), "{var}: the reference lacks its default {words}");
        }
    }
    assert_eq!(Defaults::otlp_timeout.describe::<Duration>(), "`10000`");
    assert_eq!(Defaults::rows_max_bytes.describe::<u64>(), "`64MiB`");
    assert_eq!(
        Defaults::metrics_exporters.describe::<Vec<MetricExporter>>(),
        "`prometheus` (`otlp` when an OTLP endpoint is set)"
    );
    assert_eq!(
        Defaults::traces_exporters.describe::<Vec<TraceExporter>>(),
        "`none` (`otlp` when an OTLP endpoint is set)"
    );
    assert_eq!(Defaults::sampler_arg.describe::<f64>(), "`1.0`");
}

/// The groups the instrumentation also builds without pipetel's configuration (the core's and
/// the GPU crate's own defaults, for a program that never calls `init`) agree with the table's
/// defaults, which `Config` reads.
#[test]
fn group_defaults_agree_with_the_table() {
    let c = Config::default();
    assert_eq!(c.service_metrics(), ServiceMetricsConfig::default());
    assert_eq!(c.span_metrics(), SpanMetricsConfig::default());
    #[cfg(feature = "gpu")]
    assert_eq!(c.gpu(), pipetel_gpu::GpuConfig::default());
    assert_eq!(c.rows_max_bytes(), pipetel_rows::Rotation::default().max_bytes);
    assert_eq!(c.cardinality_limit(), DEFAULT_CARDINALITY_LIMIT);
}

/// The per-signal filters and the console's format: each read from the environment, the file
/// and code in the usual order, a directive that does not parse an error naming where it came from.
#[test]
fn filters_and_log_format_resolve_like_every_setting() {
    let c = from(&[]).expect("defaults");
    assert_eq!((c.traces_filter(), c.logs_filter(), c.log_format()), ("info", "info", LogFormat::Compact));
    let (path, p) = write_file("[traces]\nfilter = \"warn\"\n[logs]\nfilter = \"error\"\n[log]\nformat = \"pretty\"\n");
    let c = from(&[(PIPETEL_CONFIG, &p), (PIPETEL_TRACES_FILTER, "info,my_app=debug"), (PIPETEL_LOG_FORMAT, "JSON")])
        .expect("valid");
    assert_eq!(c.traces_filter(), "info,my_app=debug", "env beats file");
    assert_eq!(c.logs_filter(), "error");
    assert_eq!(c.log_format(), LogFormat::Json);
    let s = c.clone().with_logs_filter("debug").resolve().expect("resolves");
    assert_eq!(s.traces.filter.value, "info,my_app=debug");
    assert_eq!(s.traces.filter.origin, Origin::Env(PIPETEL_TRACES_FILTER.into()));
    assert_eq!(s.logs.filter.value, "debug");
    assert_eq!(s.logs.filter.origin, Origin::Code("with_logs_filter"));
    assert_eq!(s.subscriber.format, LogFormat::Json);
    let _ = std::fs::remove_file(path);

    let err = Config::default().with_traces_filter("info,[{").validate().expect_err("bad directive");
    assert!(err.to_string().contains("with_traces_filter") && err.to_string().contains("info,[{"), "{err}");
    let err = file_error("[logs]\nfilter = \"=x\"\n");
    assert!(err.contains("logs.filter") && err.contains("\"=x\""), "{err}");
    let c = Config::default()
        .with_setting("traces_filter", "warn".into())
        .and_then(|c| c.with_setting("log_format", "compact".into()))
        .expect("valid");
    assert_eq!((c.traces_filter(), c.log_format()), ("warn", LogFormat::Compact));
}

/// The process-metrics switch: on by default; file, environment and code in the usual order.
#[test]
fn process_metrics_switch_resolves_like_every_setting() {
    assert!(from(&[]).expect("defaults").resolve().expect("resolves").metrics.process_metrics);
    let (path, p) = write_file("[process]\nmetrics = false\n");
    let c = from(&[(PIPETEL_CONFIG, &p)]).expect("valid");
    assert!(!c.process_metrics());
    assert!(from(&[(PIPETEL_CONFIG, &p), (PIPETEL_PROCESS_METRICS, "true")]).expect("valid").process_metrics());
    assert!(c.with_process_metrics(true).resolve().expect("resolves").metrics.process_metrics, "code beats file");
    let _ = std::fs::remove_file(path);
    let c = Config::default().with_setting("process_metrics", false.into()).expect("valid");
    assert!(!c.process_metrics());
}

/// Header values never appear in an error, whichever path they came by; the names do.
#[test]
fn otlp_header_values_are_redacted_in_errors() {
    let secret = "s3cret-token";
    let env_cases: &[(&str, String)] = &[
        (OTEL_EXPORTER_OTLP_HEADERS, format!("authorization=Bearer%20{secret},bad header=1")),
        (OTEL_EXPORTER_OTLP_HEADERS, format!("authorization=Bearer%20{secret},x-tenant=%zz")),
        (OTEL_EXPORTER_OTLP_TRACES_HEADERS, format!("Bearer{secret}")),
        (OTEL_EXPORTER_OTLP_LOGS_HEADERS, format!("authorization=Bearer%20{secret}%07")),
        (OTEL_EXPORTER_OTLP_METRICS_HEADERS, format!("authorization=%ZZ{secret}")),
    ];
    for (var, value) in env_cases {
        let err = from(&[(var, value)]).expect_err(value).to_string();
        assert!(err.contains(var) && !err.contains(secret), "{err}");
    }
    let err = from(&[(OTEL_EXPORTER_OTLP_HEADERS, &format!("authorization=Bearer%20{secret}%07"))])
        .expect_err("control character")
        .to_string();
    assert!(err.contains("authorization") && err.contains("<redacted>"), "the header's name stays: {err}");

    let err = Config::default().with_otlp_header("authorization", format!("Bearer {secret}\n")).validate();
    let err = err.expect_err("control character").to_string();
    assert!(err.contains("with_otlp_header") && err.contains("authorization") && !err.contains(secret), "{err}");

    for text in [
        format!("[otlp.headers]\nauthorization = [\"{secret}\"]\n"),
        format!("[otlp.traces]\nheaders = \"authorization={secret}\"\n"),
        format!("[otlp.headers]\nauthorization = \"Bearer {secret}\\u0007\"\n"),
        format!("[otlp.headers]\nauthorization = \"Bearer {secret}\n"),
    ] {
        let err = file_error(&text);
        assert!(err.contains("headers") || err.contains("line"), "{err}");
        assert!(!err.contains(secret), "{err}");
    }
    let err = file_error(&format!("[otlp.headers]\nauthorization = \"Bearer {secret}\n"));
    assert!(err.contains("line 2, column"), "the syntax error says where: {err}");
    let err = Config::default()
        .with_setting("otlp_headers", toml::Value::String(format!("authorization={secret}")))
        .expect_err("not a table")
        .to_string();
    assert!(err.contains("otlp_headers") && !err.contains(secret), "{err}");
}

/// `Debug` of the configuration, its resolved settings and an OTLP target shows header names and
/// the Prometheus user, never a header value, the token or the password.
#[test]
fn debug_output_redacts_header_values_and_credentials() {
    let secret = "s3cret-token";
    let c = from(&[
        (OTEL_EXPORTER_OTLP_HEADERS, &format!("authorization=Bearer%20{secret}")),
        (OTEL_EXPORTER_OTLP_LOGS_HEADERS, &format!("x-api-key={secret}")),
    ])
    .expect("valid")
    .with_otlp_header("x-tenant", secret)
    .with_prometheus_bearer_token(secret)
    .with_prometheus_basic_auth("scraper", secret);
    let settings = c.resolve().expect("resolves");
    for shown in [
        format!("{c:?}"),
        format!("{settings:?}"),
        format!("{:?}", c.otlp_target(Signal::Logs).expect("logs")),
        format!("{:?}", settings.metrics.prometheus),
    ] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(format!("{settings:?}").contains("authorization") && format!("{settings:?}").contains("x-api-key"));
    assert!(format!("{:?}", settings.metrics.prometheus).contains("scraper"));
    // The values themselves reach the exporter.
    let logs = c.otlp_target(Signal::Logs).expect("logs");
    assert_eq!(logs.headers, vec![("x-api-key".to_string(), secret.to_string())]);
}

/// The example file of `docs/src/configuration-guide.md`, "a file with every section", is a
/// configuration pipetel accepts.
#[test]
fn documented_example_file_is_valid() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/src/configuration-guide.md"))
        .expect("docs/src/configuration-guide.md");
    let after = readme.split("A file with every section:").nth(1).expect("the example's heading");
    let text = after.split("```toml\n").nth(1).and_then(|t| t.split("```").next()).expect("the example");
    Config::from_toml_str(text, Path::new("configuration-guide.md"))
        .unwrap_or_else(|e| panic!("the configuration guide's example: {e}"));
}

#[test]
fn the_histogram_buckets_file_key_takes_a_set_name_or_an_array() {
    // The file key takes the name too, or an array.
    let path = std::path::Path::new("pipetel.toml");
    let from_file = |text: &str| Config::from_toml_str(text, path).map(|c| c.service_metrics());
    let c = from_file("[metrics]\nhistogram_buckets = \"telefuser\"\n").expect("a named set");
    assert_eq!(c.histogram_buckets, pipetel_core::buckets::TELEFUSER_BUCKETS);
    let c = from_file("[metrics]\nhistogram_buckets = [\"seconds\"]\n").expect("a named set");
    assert_eq!(c.histogram_buckets, pipetel_core::buckets::SECONDS_BUCKETS);
    for text in ["[metrics]\nhistogram_buckets = \"fast\"\n", "[metrics]\nhistogram_buckets = 5\n"] {
        let msg = from_file(text).expect_err("refused").to_string();
        assert!(msg.contains("metrics.histogram_buckets"), "{msg}");
    }
}
