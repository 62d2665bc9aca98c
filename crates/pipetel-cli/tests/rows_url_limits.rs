//! `pipetel rows --url` against stores that misbehave, served on loopback by this test: one
//! that stalls after its headers (the read timeout ends the query), one whose answer is a line
//! without end or an answer without end (the caps end it, long before memory would run out),
//! one that answers an error whose body holds terminal escapes, and rows whose names hold them
//! (printed escaped, in every view, from the fleet's store and from a local one). And the rows
//! of a recorded answer, as the fleet reader types them: the file `pipetel.rows.query` is
//! checked against in Python too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The longest any served answer goes on: every server thread ends by then.
const SERVE_FOR: Duration = Duration::from_secs(20);

/// Reads one request (headers and its form body) from `s`.
fn read_request(s: &mut TcpStream) {
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut r = BufReader::new(s);
    let mut length = 0usize;
    let mut line = String::new();
    while r.read_line(&mut line).is_ok_and(|n| n > 0) {
        if line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        line.clear();
    }
    let mut body = vec![0; length];
    let _ = r.read_exact(&mut body);
}

/// Serves every connection for [`SERVE_FOR`] with `answer`, writing to the client after its
/// request; the base URL.
fn serve(answer: impl Fn(&mut TcpStream) + Send + Sync + 'static) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("address").port();
    let answer = std::sync::Arc::new(answer);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut s) = conn else { continue };
            let answer = answer.clone();
            std::thread::spawn(move || {
                read_request(&mut s);
                let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                answer(&mut s);
            });
        }
    });
    format!("http://127.0.0.1:{port}")
}

/// Writes `head` then `chunk` over and over (a connection-close body) until the client goes
/// away or [`SERVE_FOR`] passes.
fn endless(s: &mut TcpStream, head: &[u8], chunk: &[u8]) {
    let until = Instant::now() + SERVE_FOR;
    let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/stream+json\r\nConnection: close\r\n\r\n");
    let _ = s.write_all(head);
    while Instant::now() < until && s.write_all(chunk).is_ok() {}
}

fn ok_answer(body: String) -> impl Fn(&mut TcpStream) + Send + Sync + 'static {
    move |s: &mut TcpStream| {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/stream+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body.as_bytes());
    }
}

fn pipetel(args: &[&str]) -> (Output, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_pipetel"))
        .arg("rows")
        .args(args)
        .env_remove("PIPETEL_ROWS_FILE")
        .env_remove("OTEL_SERVICE_NAME")
        .output()
        .expect("run pipetel");
    (out, started.elapsed())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// No control character a terminal acts on (ESC, CSI, DEL...) in `s`; the line ends apart.
fn assert_no_controls(s: &str, what: &str) {
    let bad: Vec<char> = s.chars().filter(|c| *c != '\n' && pipetel_rows::is_control(*c)).collect();
    assert!(bad.is_empty(), "{what} prints control characters {bad:?}: {s:?}");
}

#[test]
fn a_store_that_stalls_after_its_headers_times_out() {
    let url = serve(|s| {
        let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/stream+json\r\nConnection: close\r\n\r\n");
        let _ = s.write_all(b"{\"_time\":\"2026-12-02T10:00:29Z\",");
        std::thread::sleep(SERVE_FOR);
    });
    let (out, took) = pipetel(&["--url", &url, "--timeout", "1"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(took < Duration::from_secs(8), "a 1 s read timeout took {took:?}");
    assert!(err.contains("timed out") && err.contains("1s (the read timeout)"), "{err}");
    assert!(err.contains(&format!("{url}/select/logsql/query")), "{err}");
}

#[test]
fn a_line_without_end_is_refused_at_the_line_cap() {
    let url = serve(|s| endless(s, b"{\"_msg\":\"", &[b'x'; 64 << 10]));
    let (out, took) = pipetel(&["--url", &url]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(&format!("{url}/select/logsql/query: line 1 of the answer is over the cap of 1048576 bytes")),
        "{err}"
    );
    // The server would go on for 20 s: the reader stopped at the cap, it did not wait for the end.
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn an_answer_without_end_is_refused_at_the_total_cap() {
    let line = b"{\"_time\":\"2026-12-02T10:00:29Z\",\"_msg\":\"not a row\"}\n";
    let url = serve(move |s| endless(s, b"", line));
    let (out, took) = pipetel(&["--url", &url, "--max-bytes", "200000"]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("the answer is over the cap of 200000 bytes on a whole answer"), "{err}");
    assert!(err.contains(&url), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn an_error_body_prints_escaped_and_the_password_does_not_print() {
    let url = serve(|s| {
        let body = "bad query \u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m";
        let head = format!("HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
        let _ = s.write_all(head.as_bytes());
        let _ = s.write_all(body.as_bytes());
    });
    let with_user = url.replace("http://", "http://reader:s3cret@");
    let (out, _) = pipetel(&["--url", &with_user]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert_no_controls(&err, "an error body");
    assert!(err.contains("HTTP 400: bad query \\x1b[2J\\x1b]0;owned\\x07\\u{9b}31m"), "{err}");
    assert!(!err.contains("s3cret") && err.contains("http://***@127.0.0.1:"), "{err}");
    // Unreachable: the message names the store, still without the password.
    let (out, _) = pipetel(&["--url", "http://reader:s3cret@127.0.0.1:9", "--timeout", "2"]);
    let err = text(&out.stderr);
    assert!(err.contains("http://***@127.0.0.1:9/select/logsql/query") && !err.contains("s3cret"), "{err}");
}

#[test]
fn a_redirect_is_not_followed() {
    let target = serve(ok_answer(String::new()));
    let location = format!("{}/elsewhere", target.replace("http://", "http://someone:s3cret@"));
    let url = serve(move |s| {
        let head = format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\n\r\n");
        let _ = s.write_all(head.as_bytes());
    });
    let (out, _) = pipetel(&["--url", &url]);
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let target = target.replace("http://", "http://***@");
    assert!(err.contains(&format!("HTTP 307: a redirect to {target}/elsewhere, not followed")), "{err}");
}

/// A row whose stage name, execution id and failure reason hold terminal escapes.
const HOSTILE: &str = "tok\u{1b}[2J\u{9b}1;1H\u{7f}enize";

fn assert_every_view_escapes(source: &[&str]) {
    for view in [&[][..], &["--summary"], &["--timeline"], &["--json"]] {
        let (out, _) = pipetel(&[source, view].concat());
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(out.status.success(), "{view:?}: {stderr}");
        assert_no_controls(&stdout, &format!("{source:?} {view:?}"));
        assert_no_controls(&stderr, &format!("{source:?} {view:?} (stderr)"));
        let want = if view == ["--json"] {
            "tok\\u001b[2J\\u009b1;1H\\u007fenize"
        } else {
            "tok\\x1b[2J\\u{9b}1;1H\\x7fenize"
        };
        assert!(stdout.contains(want), "{view:?}: {stdout}");
    }
}

#[test]
fn names_with_escapes_print_escaped_from_the_fleet_and_from_a_local_store() {
    let entry = serde_json::json!({
        "_time": "2026-12-02T10:00:29Z", "event_name": "pipeline.worker",
        "pipeline.namespace": "pipeline.worker", "pipeline.stage.name": HOSTILE,
        "pipeline.execution.id": HOSTILE, "pipeline.shard.index": "1", "pipeline.status": "failed",
        "pipeline.failure.reason": HOSTILE, "pipeline.items": "3",
    });
    let url = serve(ok_answer(format!("{entry}\n")));
    assert_every_view_escapes(&["--url", &url]);

    let row = serde_json::json!({
        "event": "pipeline.worker", "timestamp_ms": 1_796_205_629_000u64,
        "pipeline.namespace": "pipeline.worker", "pipeline.stage.name": HOSTILE,
        "pipeline.execution.id": HOSTILE, "pipeline.shard.index": 1, "pipeline.status": "failed",
        "pipeline.failure.reason": HOSTILE, "pipeline.items": 3,
    });
    let dir = std::env::temp_dir().join(format!("pipetel-rows-escapes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("rows\u{1b}[2J.jsonl");
    // A malformed line too: its note on stderr names the file, escaped.
    std::fs::write(&file, format!("{row}\nnot json\n")).expect("write the store");
    let file_arg = file.to_string_lossy().into_owned();
    assert_every_view_escapes(&[&file_arg]);
    let (out, _) = pipetel(&[&file_arg]);
    assert!(text(&out.stderr).contains("rows\\x1b[2J.jsonl: line 2: not valid JSON"), "{}", text(&out.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../pipetel-rows/tests/data").join(name)
}

/// A recorded answer (floats as VictoriaLogs gives them back, a counter that is a float in one
/// row and whole in another, an entry that is not a row, a blank line) gives the rows of
/// `fleet_rows.jsonl`: the file `python/tests/test_rows_reader.py` holds `pipetel.rows.query`
/// to, so both read the same rows with the same floats.
#[test]
fn a_recorded_answer_gives_the_recorded_rows() {
    let answer = std::fs::read_to_string(fixture("fleet_answer.jsonl")).expect("the recorded answer");
    let want = std::fs::read_to_string(fixture("fleet_rows.jsonl")).expect("the recorded rows");
    let url = serve(ok_answer(answer));
    let (out, _) = pipetel(&["--url", &url, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), want);
}
