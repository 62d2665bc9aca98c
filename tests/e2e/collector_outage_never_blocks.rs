//! A collector that is down at start, or goes down during the run: the program finishes
//! normally and shutdown returns within its timeout, reporting what was not delivered and where
//! it was going.

use std::time::Duration;

use crate::support::{example_pushing, turn, turn_if_peers, Collector, Peer, Process, RefusingPort};

fn shutdown_millis(out: &str) -> f64 {
    let line =
        out.lines().find(|l| l.starts_with("shutdown took ")).unwrap_or_else(|| panic!("no shutdown line:\n{out}"));
    let d = line.trim_start_matches("shutdown took ").split(':').next().expect("duration");
    let (num, unit) = d.split_at(d.find(|c: char| c.is_alphabetic() || c == 'µ').expect("unit"));
    let n: f64 = num.parse().expect("number");
    match unit {
        "s" => n * 1000.0,
        "ms" => n,
        "µs" => n / 1000.0,
        "ns" => n / 1e6,
        other => panic!("unit {other}"),
    }
}

fn run(endpoint: &str, protocol: &str, batches: &str) -> Process {
    let mut cmd = example_pushing("quickstart", endpoint, protocol);
    cmd.env("OTEL_EXPORTER_OTLP_TIMEOUT", "500")
        .env("OTEL_METRIC_EXPORT_INTERVAL", "200")
        .env("PIPETEL_SHUTDOWN_TIMEOUT", "2000")
        .args(["--batches", batches, "--interval-ms", "100"]);
    Process::spawn("quickstart", cmd)
}

/// Waits for the run to end: exit code 0 after printing `done`, and shutdown within its 2 s
/// timeout (with slack). Returns the shutdown report line.
fn finished(example: &mut Process, protocol: &str, done: &str) -> String {
    let (code, out) = example.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{protocol}: {out}");
    assert!(out.contains(done), "{out}");
    let ms = shutdown_millis(&out);
    assert!(ms <= 2500.0, "{protocol}: shutdown took {ms} ms, over its 2 s timeout: {out}");
    out.lines().find(|l| l.starts_with("shutdown took ")).expect("line").to_string()
}

#[test]
fn collector_down_at_start_does_not_fail_or_hang() {
    let _turn = turn(module_path!());
    for protocol in ["grpc", "http/protobuf"] {
        // Held bound but not listening: connections are refused, and no other peer can take it.
        let down = RefusingPort::new();
        let endpoint = format!("http://127.0.0.1:{}", down.port());
        let line = finished(&mut run(&endpoint, protocol, "5"), protocol, "done: batches=5");
        assert!(line.contains("Err("), "{protocol}: shutdown must report that the collector was unreachable: {line}");
        // Every lost span and log record is counted, and each report names where it was going.
        let port = format!("127.0.0.1:{}", down.port());
        for signal in ["traces: ", "logs: "] {
            let report = line.split(signal).nth(1).unwrap_or_else(|| panic!("{protocol}: no {signal}report: {line}"));
            let lost: u64 = report.split(' ').next().and_then(|n| n.parse().ok()).unwrap_or(0);
            assert!(lost > 0, "{protocol}: {signal}must count what was lost: {line}");
            assert!(report.contains("not delivered to") && report.contains(&port), "{protocol}: {line}");
        }
        assert!(line.contains("metrics: the last export to") && line.contains("did not arrive"), "{protocol}: {line}");
    }
}

#[test]
fn collector_going_down_mid_run_does_not_block_the_program() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Rotel]) else { return };
    for protocol in ["grpc", "http/protobuf"] {
        let mut collector = Collector::start();
        let mut example = run(&collector.endpoint(protocol), protocol, "20");
        collector.wait_for_output("Name: quickstart.items", Duration::from_secs(20));
        collector.stop();
        assert!(!example.output().contains("done: "), "{protocol}: the run ended before the collector went down");
        let line = finished(&mut example, protocol, "done: batches=20 items=2000");
        // The metrics that went on being recorded after the collector went away are reported.
        assert!(line.contains("metrics: the last export to") && line.contains("did not arrive"), "{protocol}: {line}");
    }
}
