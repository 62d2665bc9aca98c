//! The real OpenTelemetry Collector for the in-process tests: started from a config under
//! `tests/otelcol/` with ports and paths passed through its environment, waited for through its
//! health check, stopped on drop; a CA and certificates made with rcgen; and the child processes
//! each `init` runs in (one `init` per process).
//!
//! The collector binary comes from `PIPETEL_OTELCOL_BIN` (`scripts/test` builds it and sets
//! it). Without it the tests say so loudly and pass, so `cargo test` on a machine without Go
//! stays green.
#![allow(dead_code)]

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The collector binary, or `None` after a loud line saying the tests were skipped.
pub(crate) fn collector_bin(test: &str) -> Option<PathBuf> {
    match std::env::var_os("PIPETEL_OTELCOL_BIN").filter(|p| !p.is_empty()) {
        Some(path) => Some(PathBuf::from(path)),
        // Where the peers must be there (CI, `scripts/test`), a missing collector is a failure.
        None if std::env::var_os("CI").is_some() || std::env::var_os("PIPETEL_REQUIRE_PEERS").is_some() => {
            panic!("{test}: PIPETEL_OTELCOL_BIN is not set; `scripts/build-collector` builds the collector")
        }
        None => {
            eprintln!(
                "\n!!! {test}: SKIPPED, PIPETEL_OTELCOL_BIN is not set. These tests need the real \
                 OpenTelemetry Collector: `scripts/build-collector` builds it and prints its path; \
                 `scripts/test` sets the variable. !!!\n"
            );
            None
        }
    }
}

/// A free loopback port (bound, read, released).
pub(crate) fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local address").port()
}

/// A scratch directory for one test run.
pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("pipetel-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// A running collector; killed on drop.
pub(crate) struct Collector {
    child: Child,
    log: PathBuf,
    /// The file its `file` exporter writes.
    pub(crate) received: PathBuf,
}

impl Collector {
    /// Starts `bin` with `tests/otelcol/<config>`, the environment `env` (plus
    /// `PIPETEL_TEST_HEALTH_PORT` and `PIPETEL_TEST_RECEIVED`, set here), and waits until its
    /// health check answers.
    pub(crate) fn start(bin: &Path, config: &str, dir: &Path, env: &[(String, String)]) -> Collector {
        let config = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otelcol").join(config);
        let health = free_port();
        let received = dir.join("received.jsonl");
        let log = dir.join("collector.log");
        let log_file = std::fs::File::create(&log).expect("create the collector log");
        let mut command = Command::new(bin);
        command
            .arg(format!("--config=file:{}", config.display()))
            .env("PIPETEL_TEST_HEALTH_PORT", health.to_string())
            .env("PIPETEL_TEST_RECEIVED", &received)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().expect("log handle"))
            .stderr(log_file);
        for (k, v) in env {
            command.env(k, v);
        }
        let child = command.spawn().expect("start the collector");
        let mut collector = Collector { child, log, received };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = collector.child.try_wait() {
                panic!("the collector exited ({status}):\n{}", collector.log_text());
            }
            if http_get(&format!("127.0.0.1:{health}"), "/").is_some_and(|r| r.starts_with("HTTP/1.1 200")) {
                return collector;
            }
            assert!(Instant::now() < deadline, "the collector did not become healthy:\n{}", collector.log_text());
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// What the collector logged so far.
    pub(crate) fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The lines its `file` exporter wrote so far (one JSON document per line).
    pub(crate) fn received(&self) -> String {
        std::fs::read_to_string(&self.received).unwrap_or_default()
    }

    /// Waits until `found` holds for what was received, or `within` passes; the last text read.
    pub(crate) fn wait_for(&self, within: Duration, found: impl Fn(&str) -> bool) -> Result<String, String> {
        let deadline = Instant::now() + within;
        loop {
            let text = self.received();
            if found(&text) {
                return Ok(text);
            }
            if Instant::now() > deadline {
                return Err(text);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A bare HTTP/1.1 GET: the whole response, or `None` when nothing answers.
pub(crate) fn http_get(addr: &str, path: &str) -> Option<String> {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    Some(response)
}

/// The lines of `text` (the file exporter's output) that hold `signal` (`resourceSpans`,
/// `resourceMetrics`, `resourceLogs`) and `needle`.
pub(crate) fn count_lines(text: &str, signal: &str, needle: &str) -> usize {
    text.lines().filter(|l| l.contains(&format!("\"{signal}\"")) && l.contains(needle)).count()
}

/// What a child process printed and how it ended.
pub(crate) struct ChildRun {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) success: bool,
    pub(crate) elapsed: Duration,
}

impl ChildRun {
    /// The value the child printed as `KEY=...` (the rest of that line; the test harness may
    /// have printed the test's name before it on the same line).
    pub(crate) fn value(&self, key: &str) -> Option<&str> {
        let marker = format!("{key}=");
        self.stdout.lines().find_map(|l| l.find(&marker).map(|at| &l[at + marker.len()..]))
    }
}

/// Runs the test `test` of this same binary in a child process with `env`, killed after
/// `limit` (a hang fails the test, it does not stall it).
pub(crate) fn run_child(test: &str, env: &[(String, String)], limit: Duration) -> ChildRun {
    let mut command = Command::new(std::env::current_exe().expect("the test binary"));
    command
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for var in pipetel::config::ENV_VARS {
        command.env_remove(var);
    }
    for (k, v) in env {
        command.env(k, v);
    }
    let started = Instant::now();
    let mut child = command.spawn().expect("run the child");
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let run = ChildRun {
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        success: status.is_some_and(|s| s.success()),
        elapsed,
    };
    assert!(status.is_some(), "{test} hung: killed after {limit:?}\n{}\n{}", run.stdout, run.stderr);
    run
}

/// The test CA and the server and client certificates the TLS tests use, as PEM files in `dir`:
/// `ca.pem`, `other_ca.pem` (a CA that signed nothing here), `good.pem`/`.key` (127.0.0.1 and
/// localhost), `expired.pem`/`.key`, `wrong_host.pem`/`.key` (only `wrong.example`),
/// `client.pem`/`.key` (a client certificate signed by the CA).
pub(crate) fn make_pki(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};
    let write = |name: &str, text: String| std::fs::write(dir.join(name), text).expect("write a PEM file");
    let ca = |cn: &str| {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        params.distinguished_name.push(DnType::CommonName, cn);
        let cert = params.self_signed(&key).expect("self-signed CA");
        (cert.pem(), Issuer::new(params, key))
    };
    let (ca_pem, issuer) = ca("pipetel test CA");
    write("ca.pem", ca_pem);
    write("other_ca.pem", ca("pipetel other CA").0);
    let leaf = |name: &str, hosts: &[&str], ip: bool, expired: bool| {
        let key = KeyPair::generate().expect("leaf key");
        let mut params =
            CertificateParams::new(hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>()).expect("params");
        if ip {
            params.subject_alt_names.push(SanType::IpAddress(std::net::IpAddr::from([127, 0, 0, 1])));
        }
        params.distinguished_name.push(DnType::CommonName, name);
        if expired {
            params.not_before = rcgen::date_time_ymd(2020, 1, 1);
            params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        }
        let cert = params.signed_by(&key, &issuer).expect("signed by the CA");
        write(&format!("{name}.pem"), cert.pem());
        write(&format!("{name}.key"), key.serialize_pem());
    };
    leaf("good", &["localhost"], true, false);
    leaf("expired", &["localhost"], true, true);
    leaf("wrong_host", &["wrong.example"], false, false);
    leaf("client", &["pipetel-test-client"], false, false);
}

/// Flushes and shuts `telemetry` down, printing `FLUSH_MS=`, `FLUSH=` and `SHUTDOWN=` lines
/// (each outcome as `ok` or its report lines joined by ` | `) for the parent to read.
pub(crate) fn print_flush_and_shutdown(telemetry: pipetel::Telemetry) {
    let started = Instant::now();
    let flush = telemetry.force_flush();
    println!("FLUSH_MS={}", started.elapsed().as_millis());
    println!("FLUSH={}", outcome(flush));
    println!("SHUTDOWN={}", outcome(telemetry.shutdown()));
}

fn outcome(result: Result<(), pipetel::ShutdownError>) -> String {
    match result {
        Ok(()) => "ok".into(),
        Err(pipetel::ShutdownError::Providers(lines)) => lines.join(" | "),
        Err(other) => format!("other error: {other}"),
    }
}
