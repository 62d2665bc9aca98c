//! The pull endpoint under abuse: credentials required (401 without), gzip when asked, header
//! count and size limits, a slow client (slowloris) cut off by the header read timeout, and a
//! flood of idle connections that cannot starve a real scrape, and a scraper that stops reading
//! a large page without holding up the program.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

fn endpoint() -> SocketAddr {
    static T: OnceLock<pipetel::Telemetry> = OnceLock::new();
    T.get_or_init(|| {
        let t = pipetel::init(
            pipetel::Config::default()
                .with_prometheus_host("127.0.0.1")
                .with_prometheus_port(0)
                .with_prometheus_bearer_token("t0ken")
                .with_prometheus_basic_auth("scraper", "s3:cret")
                // Room for the large family of `a_stalled_scraper_never_blocks_new_series`.
                .with_cardinality_limit(300_000)
                .with_console_log(false),
        )
        .expect("init");
        pipetel::meter().u64_counter("defended.items").build().add(3, &[]);
        t
    })
    .prometheus_addr()
    .expect("endpoint")
}

/// Sends a raw request and reads the whole response (status line, headers, body bytes).
fn raw(addr: SocketAddr, request: &str) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    s.write_all(request.as_bytes()).expect("send");
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn get(addr: SocketAddr, headers: &str) -> String {
    String::from_utf8_lossy(&raw(
        addr,
        &format!("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n"),
    ))
    .into_owned()
}

#[test]
fn credentials_are_required_and_checked() {
    let addr = endpoint();
    let none = get(addr, "");
    assert!(none.starts_with("HTTP/1.1 401"), "{none}");
    assert!(none.to_ascii_lowercase().contains("www-authenticate: basic realm=\"pipetel\""), "{none}");
    assert!(!none.contains("defended_items"), "no data without credentials");
    assert!(get(addr, "Authorization: Bearer wrong\r\n").starts_with("HTTP/1.1 401"));
    assert!(get(addr, "Authorization: Basic c2NyYXBlcjp3cm9uZw==\r\n").starts_with("HTTP/1.1 401"));
    let bearer = get(addr, "Authorization: Bearer t0ken\r\n");
    assert!(bearer.starts_with("HTTP/1.1 200") && bearer.contains("defended_items_total"), "{bearer}");
    // scraper:s3:cret
    let basic = get(addr, "Authorization: Basic c2NyYXBlcjpzMzpjcmV0\r\n");
    assert!(basic.starts_with("HTTP/1.1 200") && basic.contains("defended_items_total"), "{basic}");
}

/// The payload of a chunked HTTP/1.1 body.
fn dechunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = body.windows(2).position(|w| w == b"\r\n").expect("chunk size line");
        let size = usize::from_str_radix(std::str::from_utf8(&body[..line_end]).expect("ascii size").trim(), 16)
            .expect("hex chunk size");
        body = &body[line_end + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[test]
fn gzip_when_the_client_accepts_it() {
    let addr = endpoint();
    let response = raw(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer t0ken\r\nAccept-Encoding: gzip\r\n\r\n");
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("headers end") + 4;
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    assert!(head.contains("content-encoding: gzip"), "{head}");
    // The page is streamed: chunked transfer encoding, the gzip stream across the chunks.
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let compressed = dechunk(&response[split..]);
    let mut body = String::new();
    flate2::read::GzDecoder::new(&compressed[..]).read_to_string(&mut body).expect("valid gzip");
    assert!(body.contains("defended_items_total{otel_scope_name=\"pipetel\"} 3"), "{body}");
    let refused = get(addr, "Authorization: Bearer t0ken\r\nAccept-Encoding: gzip;q=0\r\n");
    assert!(
        !refused.to_ascii_lowercase().contains("content-encoding: gzip") && refused.contains("defended_items_total"),
        "{refused}"
    );
}

#[test]
fn too_many_or_too_large_headers_are_refused() {
    let addr = endpoint();
    let many: String = (0..40).map(|i| format!("X-H{i}: v\r\n")).collect();
    let r = get(addr, &format!("Authorization: Bearer t0ken\r\n{many}"));
    assert!(r.starts_with("HTTP/1.1 431"), "40 headers: {r}");
    let big = format!("Authorization: Bearer t0ken\r\nX-Big: {}\r\n", "a".repeat(20_000));
    let r = String::from_utf8_lossy(&raw(addr, &format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{big}\r\n"))).into_owned();
    assert!(r.is_empty() || r.starts_with("HTTP/1.1 431"), "a 20 KB header: {r}");
    assert!(get(addr, "Authorization: Bearer t0ken\r\n").starts_with("HTTP/1.1 200"), "the endpoint still serves");
}

#[test]
fn a_slow_client_is_cut_off_and_idle_floods_do_not_starve_scrapes() {
    let addr = endpoint();
    // Slowloris: a request line, then nothing. The server must hang up after its header timeout.
    let mut slow = TcpStream::connect(addr).expect("connect");
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").expect("send");
    slow.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let t = Instant::now();
    let mut buf = [0u8; 512];
    let n = slow.read(&mut buf).unwrap_or(0);
    let reply = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(n == 0 || reply.starts_with("HTTP/1.1 408"), "slow client got {reply:?}");
    assert!(t.elapsed() < Duration::from_secs(25), "the slow client was held {:?}", t.elapsed());

    // 100 idle connections (more than the endpoint serves at once): a real scrape still gets through.
    let idle: Vec<TcpStream> = (0..100).filter_map(|_| TcpStream::connect(addr).ok()).collect();
    assert!(idle.len() >= 64, "opened {}", idle.len());
    let r = get(addr, "Authorization: Bearer t0ken\r\n");
    assert!(r.starts_with("HTTP/1.1 200") && r.contains("defended_items_total"), "{r}");
    drop(idle);
}

/// The page is streamed while the registry's families are read-locked: a scraper that asks for
/// a large page and stops reading must not leave the render waiting inside a family, where it
/// would block the program creating a new series of that family. The stalled scraper still gets
/// the whole page once it reads.
#[test]
fn a_stalled_scraper_never_blocks_new_series() {
    let addr = endpoint();
    let app = pipetel::Registry::new("stall").expect("registry");
    let rows = app.counter_vec("rows", "Rows", &["shard"]).expect("family");
    // About 10 MB of page: far more than the chunks in flight and the sockets' buffers hold.
    const SERIES: u32 = 250_000;
    for i in 0..SERIES {
        rows.with([("shard", i.to_string())]).expect("series").inc();
    }
    let mut stalled = TcpStream::connect(addr).expect("connect");
    stalled
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer t0ken\r\n\r\n")
        .expect("send");
    // Give the render time to fill every buffer between it and the stalled scraper.
    std::thread::sleep(Duration::from_secs(2));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        for i in SERIES..SERIES + 100 {
            rows.with([("shard", i.to_string())]).expect("series").inc();
        }
        let _ = done_tx.send(());
    });
    done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("new series could not be created while a scraper had stopped reading the page");
    writer.join().expect("writer");

    stalled.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut response = Vec::new();
    stalled.read_to_end(&mut response).expect("the stalled scraper reads the rest of the page");
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").expect("headers end") + 4;
    let body = String::from_utf8(dechunk(&response[split..])).expect("utf-8 page");
    let samples = body.lines().filter(|l| l.starts_with("stall_rows_total{")).count();
    assert!(samples >= SERIES as usize, "the page has {samples} of at least {SERIES} series");
    assert!(body.contains(&format!("stall_rows_total{{shard=\"{}\"", SERIES - 1)), "last series on the page");
    assert!(body.trim_end().ends_with("# EOF") || body.contains("defended_items_total"), "whole page");
}
