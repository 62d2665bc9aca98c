//! `scripts/fleet --smoke`: two nodes (an agent each), each with an owner process of three stages
//! whose shards run in the two workers of the other node (the remote-shard API, reports through
//! files), two gateways running `gateway-stores.yaml` behind the agents' loadbalancing exporters,
//! and the three stores. The script itself checks what it prints (rows, data points and spans
//! sent vs stored, stage totals in VictoriaMetrics and in the rows store against the owners'
//! totals and their remote workers' sums) and exits non-zero on any loss; asserted here: it
//! succeeded, every line of figures is there with nothing lost, and none of the agents' sends to
//! the gateways ran out of time (counted in the agents' logs: with the loadbalancing exporter's
//! own 5 s default deadline, a send waiting on the gateway's remote write was cut and sent again
//! 90–100 times per run). The script runs as from a clean clone: without the `*_BIN` variables
//! of the examples, so it builds them itself (`cargo build -p pipetel-examples`).
//!
//! And the agents' send timeout alone, deterministic: an agent and a `gateway-stores.yaml`
//! gateway whose remote write takes 8 s (a stand-in for a loaded VictoriaMetrics).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::support::otelcol::otelcol_binary;
use crate::support::stores::store_binaries;
use crate::support::{free_port, turn, workspace_root, Otelcol, PipelineRun};

#[test]
fn a_smoke_fleet_loses_nothing() {
    let _turn = turn(module_path!());
    let Some(stores) = store_binaries(module_path!()) else { return };
    let out = Command::new(workspace_root().join("scripts/fleet"))
        .arg("--smoke")
        .env("PIPETEL_OTELCOL_BIN", otelcol_binary())
        .env("PIPETEL_VICTORIA_METRICS_BIN", &stores.victoria_metrics)
        .env("PIPETEL_VICTORIA_LOGS_BIN", &stores.victoria_logs)
        .env("PIPETEL_JAEGER_BIN", &stores.jaeger)
        // The examples as a clean clone gets them: the script builds them itself.
        .env_remove("PIPETEL_PIPELINE_BIN")
        .env_remove("PIPETEL_REMOTE_SHARDS_BIN")
        .output()
        .expect("run scripts/fleet");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "scripts/fleet --smoke failed:\n{text}");
    assert!(
        text.contains("fleet: building the examples: build --quiet --message-format=json -p pipetel-examples"),
        "the script built the examples itself:\n{text}"
    );
    for kind in ["rows:", "points:", "spans:"] {
        let line = text.lines().find(|l| l.starts_with(kind)).unwrap_or_else(|| panic!("no {kind} line:\n{text}"));
        assert!(line.contains(", lost 0"), "{line}\n{text}");
        let sent: u64 =
            line.split("sent ").nth(1).and_then(|r| r.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
        assert!(sent > 0, "nothing sent: {line}");
    }
    let totals = text.lines().find(|l| l.starts_with("totals:")).unwrap_or_else(|| panic!("no totals line:\n{text}"));
    // Two owners of three stages each.
    assert!(totals.contains("6 of 6 stage totals equal"), "{totals}");
    let timeouts =
        text.lines().find(|l| l.starts_with("timeouts:")).unwrap_or_else(|| panic!("no timeouts line:\n{text}"));
    assert!(timeouts.contains("timed out 0 times"), "{timeouts}\n{text}");
    for line in ["rate:", "delay:", "cpu:"] {
        assert!(text.lines().any(|l| l.starts_with(line)), "no {line} line:\n{text}");
    }
}

/// A stand-in for VictoriaMetrics' remote-write endpoint that answers each write (HTTP/1.1,
/// kept alive) with 204 after `delay`, as a store under load does; returns its URL and the
/// number of writes it answered.
fn slow_remote_write(delay: Duration) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let answered = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&answered);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let count = Arc::clone(&count);
            thread::spawn(move || answer_slowly(stream, delay, &count));
        }
    });
    (url, answered)
}

fn answer_slowly(mut stream: TcpStream, delay: Duration, answered: &AtomicUsize) {
    let Ok(read) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read);
    let mut line = String::new();
    loop {
        // The request line, the headers (only the body's length matters), the body.
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut length = 0;
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        thread::sleep(delay);
        if stream.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n").is_err() {
            return;
        }
        answered.fetch_add(1, Ordering::SeqCst);
    }
}

/// A gateway running `gateway-stores.yaml` answers an agent's metrics once its remote write was
/// answered (no queue there). With that write taking 8 s, the agent (`agent.yaml` as shipped)
/// waits for it: no send of the agent ends in a deadline exceeded (its loadbalancing exporter's
/// own `timeout`, 5 s by default, cut every such send, which was then sent again), and the
/// gateway wrote every point the agent took in.
#[test]
fn an_agent_waits_for_its_gateways_slow_remote_write() {
    let _turn = turn(module_path!());
    let delay = Duration::from_secs(8);
    let (url, answered) = slow_remote_write(delay);
    let nowhere = || format!("127.0.0.1:{}", free_port());
    let gateway = Otelcol::shipped("gateway-stores", "gateway-stores.yaml")
        .env("OTELCOL_VICTORIA_METRICS_URL", url)
        .env("OTELCOL_VICTORIA_LOGS_URL", format!("http://{}", nowhere()))
        .env("OTELCOL_JAEGER_ENDPOINT", nowhere())
        .start();
    let agent = Otelcol::shipped("agent", "agent.yaml")
        .env("OTELCOL_GATEWAY_HOSTNAME", gateway.host.clone())
        .env("OTELCOL_GATEWAY_PORT", gateway.grpc_port.to_string())
        .env("NODE_NAME", "node-1")
        .start();
    let _run = PipelineRun::pushing(&agent.endpoint("grpc"), "grpc", &["--seconds", "1", "--shards", "4"]);

    let metric = |text: &str, name: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    let (accepted, written) = loop {
        let accepted = metric(&agent.own_metrics().unwrap_or_default(), "otelcol_receiver_accepted_metric_points");
        let written = metric(&gateway.own_metrics().unwrap_or_default(), "otelcol_exporter_sent_metric_points");
        let timed_out = agent.output().lines().any(|l| l.contains("DeadlineExceeded"));
        if timed_out || (accepted > 0.0 && written >= accepted) || Instant::now() > deadline {
            break (accepted, written);
        }
        thread::sleep(Duration::from_millis(500));
    };
    let timeouts: Vec<String> = agent
        .output()
        .lines()
        .filter(|l| l.contains("DeadlineExceeded"))
        .map(|l| l.chars().take(400).collect())
        .collect();
    assert!(timeouts.is_empty(), "the agent's sends ran out of time:\n{}", timeouts.join("\n"));
    assert!(accepted > 0.0, "the agent took in no points:\n{}", agent.notable_output());
    assert!(
        written >= accepted,
        "the gateway wrote {written} of the {accepted} points the agent took in ({} writes answered):\n{}",
        answered.load(Ordering::SeqCst),
        gateway.notable_output()
    );
    assert!(answered.load(Ordering::SeqCst) > 0, "no write reached the stand-in");
}
