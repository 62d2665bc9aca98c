//! Errors `init` raises name where the offending value came from: a setter, a variable or a file
//! key, never a variable the user did not set. A failed `init` leaves nothing installed, so one
//! process tries several. Its own binary: `init` is once per process.

use pipetel::span_metrics::SpanMetricsConfig;
use pipetel::Config;

fn init_error(config: Config) -> String {
    let config = config.with_prometheus_port(0).with_console_log(false);
    match pipetel::init(config) {
        Ok(_) => panic!("init must fail"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn init_errors_name_the_setter_variable_or_key() {
    let err = init_error(Config::default().with_log_filter("info,[{"));
    assert!(err.contains("Config::with_log_filter") && !err.contains("RUST_LOG"), "{err}");

    let err = init_error(Config::default().with_span_metrics(SpanMetricsConfig::default().with_filter("x=loud")));
    assert!(err.contains("Config::with_span_metrics") && !err.contains("PIPETEL_SPAN_METRICS_FILTER"), "{err}");

    let missing = std::env::temp_dir().join("pipetel-no-such-dir").join("rows.jsonl");
    let err = init_error(Config::default().with_rows_file(&missing));
    assert!(err.contains("Config::with_rows_file") && !err.contains("PIPETEL_ROWS_FILE"), "{err}");
    assert!(err.contains("cannot open for appending"), "{err}");

    let shown = missing.display().to_string();
    let from_env = Config::from_lookup(|name| (name == "PIPETEL_ROWS_FILE").then(|| shown.clone())).expect("valid");
    let err = init_error(from_env);
    assert!(err.contains("environment variable PIPETEL_ROWS_FILE"), "{err}");

    let file = std::env::temp_dir().join(format!("pipetel-origin-{}.toml", std::process::id()));
    std::fs::write(&file, format!("[pipeline]\nrows_file = {:?}\n", shown)).expect("write");
    let err = init_error(Config::from_file(&file).expect("valid"));
    assert!(err.contains("key `pipeline.rows_file`"), "{err}");
    let _ = std::fs::remove_file(&file);

    #[cfg(feature = "tls")]
    {
        let err = init_error(Config::default().with_prometheus_tls("/no/such/cert.pem", "/no/such/key.pem"));
        assert!(err.contains("Config::with_prometheus_tls") && !err.contains("PIPETEL_PROMETHEUS_TLS_CERT"), "{err}");
    }
}

/// Deprecated file keys are read before any subscriber exists; `init` logs them once it has one.
/// Checked in a child process, whose stderr (the console log) the parent reads.
#[test]
fn deprecated_file_keys_are_logged_once_the_subscriber_exists() {
    const CHILD: &str = "PIPETEL_TEST_DEPRECATION_CHILD";
    if let Ok(path) = std::env::var(CHILD) {
        let config = Config::from_file(path).expect("valid").with_prometheus_port(0).with_console_log(true);
        let telemetry = pipetel::init(config).expect("init");
        drop(telemetry);
        return;
    }
    let file = std::env::temp_dir().join(format!("pipetel-deprecated-{}.toml", std::process::id()));
    std::fs::write(&file, "[gpu]\nenabled = \"off\"\n").expect("write");
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "deprecated_file_keys_are_logged_once_the_subscriber_exists", "--nocapture"])
        .env(CHILD, &file)
        .env_remove("RUST_LOG")
        .output()
        .expect("run the child");
    let _ = std::fs::remove_file(&file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed: {stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("WARN") && l.contains("gpu.enabled")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].contains("gpu.mode"), "{stderr}");
}
