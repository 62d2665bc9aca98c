//! The pull endpoint over HTTPS (rustls) with a certificate from files: a real TLS client (curl)
//! verifies it and scrapes; plain HTTP to the TLS port gets nothing; a bad certificate path is
//! an `init` error naming it.
#![cfg(feature = "tls")]

use std::path::PathBuf;
use std::process::Command;

fn make_cert(dir: &std::path::Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
        ])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(status.status.success(), "{}", String::from_utf8_lossy(&status.stderr));
    (cert, key)
}

#[test]
fn https_scrape_with_a_verified_certificate() {
    let dir = std::env::temp_dir().join(format!("pipetel-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let (cert, key) = make_cert(&dir);

    let bad = pipetel::Config::default().with_prometheus_port(0).with_prometheus_tls(dir.join("missing.pem"), &key);
    let err = pipetel::init(bad).expect_err("missing certificate");
    assert!(err.to_string().contains("missing.pem"), "{err}");

    let telemetry = pipetel::init(
        pipetel::Config::default()
            .with_prometheus_host("127.0.0.1")
            .with_prometheus_port(0)
            .with_prometheus_tls(&cert, &key)
            .with_prometheus_bearer_token("tls-token")
            .with_console_log(false),
    )
    .expect("init");
    pipetel::meter().u64_counter("tls.items").build().add(5, &[]);
    let port = telemetry.prometheus_addr().expect("addr").port();

    let out = Command::new("curl")
        .args(["-sS", "--max-time", "10", "--cacert"])
        .arg(&cert)
        .args(["-H", "Authorization: Bearer tls-token", &format!("https://localhost:{port}/metrics")])
        .output()
        .expect("curl");
    let body = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && body.contains("tls_items_total{otel_scope_name=\"pipetel\"} 5"),
        "{body}{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let plain = Command::new("curl")
        .args(["-sS", "--max-time", "10", &format!("http://127.0.0.1:{port}/metrics")])
        .output()
        .expect("curl");
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("tls_items_total"), "plain HTTP must not be served");
    let _ = std::fs::remove_dir_all(dir);
}
