//! One `init` per process: a second call is an error, not a panic. The pull endpoint serves only
//! GET/HEAD on its path, and the render handle gives the same exposition.

use std::io::{Read, Write};
use std::net::TcpStream;

fn request(addr: std::net::SocketAddr, head: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to the endpoint");
    s.write_all(format!("{head}\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes()).expect("send");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read");
    out
}

#[test]
fn second_init_is_an_error_and_the_endpoint_follows_its_rules() {
    let config = pipetel::Config::default()
        .with_service_name("init-once")
        .with_prometheus_host("127.0.0.1")
        .with_prometheus_port(0)
        .with_prometheus_path("/custom/metrics")
        .with_console_log(false);
    let telemetry = pipetel::init(config.clone()).expect("first init");
    let again = pipetel::init(config);
    assert!(matches!(again, Err(pipetel::InitError::AlreadyInitialized)), "{again:?}");

    let counter = pipetel::meter().u64_counter("init.once.items").with_unit("{item}").build();
    counter.add(7, &[pipetel::opentelemetry::KeyValue::new("stage", "a \"quoted\" name")]);

    let addr = telemetry.prometheus_addr().expect("endpoint address");
    let get = request(addr, "GET /custom/metrics HTTP/1.1");
    assert!(get.starts_with("HTTP/1.1 200"), "{get}");
    assert!(get.contains("content-type: text/plain; version=0.0.4"), "{get}");
    assert!(get.contains(r#"init_once_items_total{stage="a \"quoted\" name",otel_scope_name="pipetel"} 7"#), "{get}");
    let head = request(addr, "HEAD /custom/metrics HTTP/1.1");
    assert!(head.starts_with("HTTP/1.1 200") && !head.contains("init_once_items_total"), "{head}");
    let post = request(addr, "POST /custom/metrics HTTP/1.1\r\nContent-Length: 0");
    assert!(post.starts_with("HTTP/1.1 405") && post.to_ascii_lowercase().contains("allow: get, head"), "{post}");
    let other = request(addr, "GET /metrics HTTP/1.1");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");

    let rendered = telemetry.prometheus_render().expect("render handle").render();
    assert!(rendered.contains("init_once_items_total{"), "{rendered}");
    assert!(rendered.contains("service_name=\"init-once\""), "{rendered}");

    telemetry.shutdown().expect("clean shutdown");
    assert!(TcpStream::connect(addr).is_err(), "the endpoint stops with the guard");
}
