//! `init()` until the pull endpoint serves, and `shutdown()` with a live OTLP collector (every
//! signal pushed over HTTP to a small receiver in the parent that answers 200). `init` runs once
//! per process, so the parent runs this binary `PIPETEL_BENCH_RUNS` times (default 15) as a child
//! and reports the medians. Not a criterion bench: it prints the medians and, with
//! `PIPETEL_BENCH_OUT` set, writes them as JSON there.
//!
//! `cargo bench -p pipetel --bench startup`

// A bench binary: `main` and its helpers need no docs.
#![allow(missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use pipetel::config::{LogExporter, MetricExporter, OtlpProtocol, TraceExporter};

const CHILD: &str = "PIPETEL_BENCH_STARTUP_COLLECTOR";

/// Answers every OTLP/HTTP request on one connection with an empty 200.
fn serve(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut stream = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // Request line and headers.
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                if k.eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let reply = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if stream.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

fn child(collector: &str) {
    let t0 = Instant::now();
    let config = pipetel::Config::default()
        .with_service_name("startup-bench")
        .with_console_log(false)
        .with_prometheus_host("127.0.0.1")
        .with_prometheus_port(0)
        .with_gpu_mode(pipetel::gpu::GpuMode::Off)
        .with_metrics_exporters([MetricExporter::Prometheus, MetricExporter::Otlp])
        .with_traces_exporters([TraceExporter::Otlp])
        .with_logs_exporters([LogExporter::Otlp])
        .with_otlp_protocol(OtlpProtocol::HttpProtobuf)
        .with_otlp_endpoint(collector);
    let telemetry = pipetel::init(config).expect("init");
    let addr = telemetry.prometheus_addr().expect("pull endpoint");
    // Serving: the first complete `200` answer to a scrape.
    loop {
        if let Ok(mut s) = TcpStream::connect(addr) {
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
            let mut head = [0u8; 12];
            if s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200") {
                break;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let serving = t0.elapsed();
    // Something to push: a metric, a span, a log record.
    pipetel::meter().u64_counter("bench.items").build().add(1, &[]);
    tracing::info_span!("bench").in_scope(|| tracing::info!("one record"));
    let t1 = Instant::now();
    telemetry.shutdown().expect("shutdown");
    let shutdown = t1.elapsed();
    println!("{} {}", serving.as_secs_f64() * 1e3, shutdown.as_secs_f64() * 1e3);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    if let Ok(collector) = std::env::var(CHILD) {
        child(&collector);
        return;
    }
    let listener = TcpListener::bind("127.0.0.1:0").expect("collector");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || serve(stream));
        }
    });
    let runs: usize = std::env::var("PIPETEL_BENCH_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(15);
    let me = std::env::current_exe().expect("own path");
    let (mut init, mut shutdown) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let out = Command::new(&me).env(CHILD, &url).env_remove("RUST_LOG").output().expect("child");
        assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
        let text = String::from_utf8_lossy(&out.stdout);
        let mut it = text.split_whitespace().map(|v| v.parse::<f64>().expect("number"));
        init.push(it.next().expect("init"));
        shutdown.push(it.next().expect("shutdown"));
    }
    let (i, s) = (median(init), median(shutdown));
    println!("startup init_to_serving: {i:.2} ms (median of {runs})");
    println!("startup shutdown_live_collector: {s:.2} ms (median of {runs})");
    if let Ok(dir) = std::env::var("PIPETEL_BENCH_OUT") {
        std::fs::create_dir_all(&dir).expect("output folder");
        let json = format!(
            "[{{\"name\":\"init_to_serving\",\"ms\":{i:.3}}},{{\"name\":\"shutdown_live_collector\",\"ms\":{s:.3}}}]"
        );
        std::fs::write(format!("{dir}/startup.json"), json).expect("write");
    }
}
