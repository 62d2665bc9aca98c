//! OTLP over TLS against the real OpenTelemetry Collector, gRPC and HTTP, with a CA and
//! certificates this test makes: delivery with the right CA (the spans, metrics and log records
//! arrive in the collector's `file` exporter), mTLS with and without a client certificate, and a
//! wrong CA, an expired certificate, a certificate for another host and a wrong bearer token,
//! each reported by `force_flush` and `shutdown` with the endpoint and the cause, within a bound,
//! without a panic. Every case is one `init`, so each runs in a child process of this binary,
//! configured through the environment as a user would.
//!
//! Needs `PIPETEL_OTELCOL_BIN` (set by `scripts/test`); without it the test is skipped loudly, or
//! fails under `PIPETEL_REQUIRE_PEERS=1`.
#![cfg(feature = "otlp")]

mod support;

use std::time::Duration;

use support::{
    collector, count_lines, free_port, make_pki, peers_available, print_flush_and_shutdown, run_child, scratch,
    ChildRun, Peer,
};

const CHILD: &str = "PIPETEL_TEST_TLS_CASE";
const TOKEN: &str = "s3cret-collector-token";

/// Set up from the environment, record one stage (a span, rows as log records, stage metrics)
/// named after the case, flush, shut down, print both outcomes. Does nothing unless run as a
/// child.
#[test]
#[ignore = "a scenario its test runs in a child process (support::child::run_child)"]
fn child_exports_one_stage() {
    let Ok(case) = std::env::var(CHILD) else { return };
    let config = pipetel::Config::from_env().expect("the configuration the parent set");
    let telemetry = pipetel::init(config).expect("init does not need the collector");
    let stage = pipetel::stage(format!("stage-{case}")).shards(1).start();
    let shard = stage.shard(0).start();
    shard.record(3, 30);
    shard.finish();
    stage.finish();
    print_flush_and_shutdown(telemetry);
}

#[derive(Clone, Copy, Debug)]
enum Expect {
    /// Every signal arrives; flush and shutdown are clean.
    Delivered,
    /// Nothing arrives; flush reports every signal with the endpoint and one of these causes.
    Refused(&'static [&'static str]),
}

struct Case {
    name: &'static str,
    grpc: bool,
    /// The receiver (`good`, `mtls`, `expired`, `wrong_host`).
    receiver: &'static str,
    /// The CA file the client trusts; empty: none configured (the system roots).
    ca: &'static str,
    client_certificate: bool,
    token: &'static str,
    expect: Expect,
}

/// The table below, one `(name, grpc, receiver, ca, client_certificate, token, expect)` per case.
macro_rules! cases {
    ($(($name:expr, $grpc:expr, $receiver:expr, $ca:expr, $cert:expr, $token:expr, $expect:expr)),* $(,)?) => {
        &[$(Case { name: $name, grpc: $grpc, receiver: $receiver, ca: $ca, client_certificate: $cert, token: $token, expect: $expect }),*]
    };
}

const UNKNOWN_ISSUER: &[&str] = &["invalid peer certificate: UnknownIssuer"];
const EXPIRED: &[&str] = &["invalid peer certificate: certificate expired"];
const WRONG_HOST: &[&str] = &["invalid peer certificate: certificate not valid for name \"127.0.0.1\""];
/// With TLS 1.3 the server refuses a missing client certificate after the client's handshake is
/// done: HTTP reads the server's alert; gRPC (h2 over tonic) writes at once and, depending on
/// which happens first, reads the alert or finds the connection closed.
const NO_CLIENT_CERT_HTTP: &[&str] = &["received fatal alert: CertificateRequired"];
const NO_CLIENT_CERT_GRPC: &[&str] = &[
    "received fatal alert: CertificateRequired",
    "stream closed because of a broken pipe",
    "Connection reset by peer",
];
const UNAUTHENTICATED: &[&str] = &["Unauthenticated"];
const UNAUTHORIZED: &[&str] = &["status code: 401"];

const CASES: &[Case] = cases![
    ("grpc-good", true, "good", "ca.pem", false, TOKEN, Expect::Delivered),
    ("http-good", false, "good", "ca.pem", false, TOKEN, Expect::Delivered),
    ("grpc-mtls", true, "mtls", "ca.pem", true, TOKEN, Expect::Delivered),
    ("http-mtls", false, "mtls", "ca.pem", true, TOKEN, Expect::Delivered),
    ("grpc-mtls-no-client-cert", true, "mtls", "ca.pem", false, TOKEN, Expect::Refused(NO_CLIENT_CERT_GRPC)),
    ("http-mtls-no-client-cert", false, "mtls", "ca.pem", false, TOKEN, Expect::Refused(NO_CLIENT_CERT_HTTP)),
    // No CA configured: the system's roots, which do not hold the test CA.
    ("grpc-system-roots", true, "good", "", false, TOKEN, Expect::Refused(UNKNOWN_ISSUER)),
    ("http-system-roots", false, "good", "", false, TOKEN, Expect::Refused(UNKNOWN_ISSUER)),
    ("grpc-wrong-ca", true, "good", "other_ca.pem", false, TOKEN, Expect::Refused(UNKNOWN_ISSUER)),
    ("http-wrong-ca", false, "good", "other_ca.pem", false, TOKEN, Expect::Refused(UNKNOWN_ISSUER)),
    ("grpc-expired", true, "expired", "ca.pem", false, TOKEN, Expect::Refused(EXPIRED)),
    ("http-expired", false, "expired", "ca.pem", false, TOKEN, Expect::Refused(EXPIRED)),
    ("grpc-wrong-host", true, "wrong_host", "ca.pem", false, TOKEN, Expect::Refused(WRONG_HOST)),
    ("http-wrong-host", false, "wrong_host", "ca.pem", false, TOKEN, Expect::Refused(WRONG_HOST)),
    ("grpc-wrong-token", true, "good", "ca.pem", false, "not-the-token", Expect::Refused(UNAUTHENTICATED)),
    ("http-wrong-token", false, "good", "ca.pem", false, "not-the-token", Expect::Refused(UNAUTHORIZED)),
];

/// The export timeout each child runs with; a refused case must finish well within a few of them.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(3);

#[test]
fn otlp_over_tls_reaches_the_real_collector_or_reports_why() {
    if !peers_available(&[Peer::Otelcol]) {
        return;
    }
    let dir = scratch("otlp-tls");
    make_pki(&dir);
    let mut env = vec![
        ("PIPETEL_TEST_PKI".to_string(), dir.display().to_string()),
        ("PIPETEL_TEST_TOKEN".to_string(), TOKEN.to_string()),
    ];
    let mut ports = std::collections::HashMap::new();
    for receiver in ["good", "mtls", "expired", "wrong_host"] {
        for transport in ["grpc", "http"] {
            let port = free_port();
            ports.insert((receiver, transport), port);
            let var = format!("PIPETEL_TEST_{}_{}_PORT", receiver.to_ascii_uppercase(), transport.to_ascii_uppercase());
            env.push((var, port.to_string()));
        }
    }
    let collector = collector("tls.yaml", &dir, &env);

    let runs: Vec<(&Case, String, ChildRun)> = std::thread::scope(|s| {
        let handles: Vec<_> = CASES
            .iter()
            .map(|case| {
                let port = ports[&(case.receiver, if case.grpc { "grpc" } else { "http" })];
                let endpoint = format!("https://127.0.0.1:{port}");
                let pki = |name: &str| dir.join(name).display().to_string();
                let mut vars = vec![
                    (CHILD.to_string(), case.name.to_string()),
                    ("OTEL_SERVICE_NAME".into(), format!("tls-{}", case.name)),
                    ("OTEL_EXPORTER_OTLP_ENDPOINT".into(), endpoint.clone()),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), (if case.grpc { "grpc" } else { "http/protobuf" }).into()),
                    ("OTEL_EXPORTER_OTLP_HEADERS".into(), format!("authorization=Bearer {}", case.token)),
                    ("OTEL_EXPORTER_OTLP_TIMEOUT".into(), EXPORT_TIMEOUT.as_millis().to_string()),
                    ("PIPETEL_SHUTDOWN_TIMEOUT".into(), "15s".into()),
                    ("PIPETEL_CONSOLE_LOG".into(), "false".into()),
                    ("PIPETEL_GPU".into(), "off".into()),
                ];
                if !case.ca.is_empty() {
                    vars.push(("OTEL_EXPORTER_OTLP_CERTIFICATE".into(), pki(case.ca)));
                }
                if case.client_certificate {
                    vars.push(("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE".into(), pki("client.pem")));
                    vars.push(("OTEL_EXPORTER_OTLP_CLIENT_KEY".into(), pki("client.key")));
                }
                s.spawn(move || (case, endpoint, run_child("child_exports_one_stage", &vars, Duration::from_secs(60))))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a case thread")).collect()
    });

    let mut failures = Vec::new();
    for (case, endpoint, run) in &runs {
        let flush = run.value("FLUSH").unwrap_or("<none>");
        let shutdown = run.value("SHUTDOWN").unwrap_or("<none>");
        println!("{}: {:?}\n  force_flush: {flush}\n  shutdown: {shutdown}", case.name, run.elapsed);
        if !run.success {
            failures.push(format!("{}: the child failed\n{}\n{}", case.name, run.stdout, run.stderr));
            continue;
        }
        let stage = format!("stage-{}", case.name);
        match case.expect {
            Expect::Delivered => {
                if flush != "ok" || shutdown != "ok" {
                    failures.push(format!("{}: expected clean flush and shutdown", case.name));
                }
                let arrived = collector.wait_for_exported(Duration::from_secs(10), |text| {
                    ["resourceSpans", "resourceMetrics", "resourceLogs"]
                        .iter()
                        .all(|signal| count_lines(text, signal, &stage) > 0)
                });
                if let Err(text) = arrived {
                    failures.push(format!("{}: not every signal arrived in the file exporter:\n{text}", case.name));
                }
            }
            Expect::Refused(causes) => {
                let lines: Vec<&str> = flush.split(" | ").collect();
                for signal in ["traces", "metrics", "logs"] {
                    let line = lines.iter().find(|l| l.starts_with(&format!("{signal}: ")));
                    let ok =
                        line.is_some_and(|l| l.contains(endpoint.as_str()) && causes.iter().any(|c| l.contains(c)));
                    if !ok {
                        failures.push(format!("{}: {signal} not reported with {endpoint} and {causes:?}", case.name));
                    }
                }
                // A refused export fails fast or within its timeout (with retries), never hangs.
                let flush_ms: u64 = run.value("FLUSH_MS").and_then(|v| v.parse().ok()).unwrap_or(u64::MAX);
                if flush_ms > 4 * EXPORT_TIMEOUT.as_millis() as u64 {
                    failures.push(format!("{}: force_flush took {flush_ms} ms", case.name));
                }
                if count_lines(&collector.exported(), "resourceSpans", &stage) > 0 {
                    failures.push(format!("{}: spans arrived although the connection was refused", case.name));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}\ncollector log:\n{}", failures.join("\n"), collector.output());
    let _ = std::fs::remove_dir_all(&dir);
}
