//! GPU gauges end to end without a GPU: the real NVML code path loads a fake `libnvidia-ml`
//! (compiled by the test), the quickstart example exports the gauges, real Prometheus scrapes
//! them with the expected names, labels and values, and sees them change when the "driver" does.

use std::process::Command;
use std::time::Duration;

use crate::support::gpu::fake_gpu_service;
use crate::support::workspace::built_binary;
use crate::support::{
    docs_text, example_command, free_port, http, promtool_check_metrics, scrape_checked, turn, turn_if_peers, wait_for,
    Peer, Process, Prometheus, FAKE_GPUS,
};
use pipetel_gpu::test_support::FakeNvml;

#[test]
fn prometheus_sees_gpu_gauges_from_the_nvml_path() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus, Peer::Promtool]) else { return };
    let fake = FakeNvml::new().expect("build the fake NVML library");
    fake.write_state(FAKE_GPUS).expect("state");
    // The inference service: GPU gauges beside its task and queue metrics.
    let (_service, port) = fake_gpu_service(&fake, &[("PIPETEL_GPU_PCIE_THROUGHPUT", "true")]);
    let prometheus = Prometheus::scraping_cleanly(port);

    let general = prometheus.wait_for_value(
        "hw_gpu_utilization_ratio{hw_gpu_task=\"general\",hw_name=\"Fake H200\"}",
        Duration::from_secs(20),
        |v| (v - 0.42).abs() < 1e-9,
    );
    prometheus.wait_for_value("sum(service_tasks_created_total)", Duration::from_secs(20), |v| v > 0.0);
    let labels = &general[0].0;
    assert_eq!(labels.get("hw_id").map(String::as_str), Some("GPU-00000000-1111-2222-3333-444444444444"), "{labels:?}");
    assert_eq!(labels.get("hw_vendor").map(String::as_str), Some("nvidia"), "{labels:?}");
    assert_eq!(labels.get("hw_model").map(String::as_str), Some("Fake H200"), "{labels:?}");
    assert_eq!(labels.get("hw_driver_version").map(String::as_str), Some("550.54.15"), "{labels:?}");
    prometheus.wait_for_value(
        "hw_gpu_utilization_ratio{hw_gpu_task=\"encoder\",hw_name=\"Fake H200\"}",
        Duration::from_secs(10),
        |v| (v - 0.05).abs() < 1e-9,
    );
    prometheus.wait_for_values(
        [
            ("hw_gpu_memory_usage_bytes{hw_name=\"Fake H200\"}", 71885766656.0),
            ("hw_gpu_memory_limit_bytes{hw_name=\"Fake L4\"}", 24000000000.0),
            ("hw_power_watts{hw_name=\"Fake H200\"}", 350.0),
            ("hw_temperature_celsius{hw_name=\"Fake L4\"}", 70.0),
        ],
        Duration::from_secs(10),
    );
    prometheus.wait_for_value("hw_gpu_memory_utilization_ratio{hw_name=\"Fake L4\"}", Duration::from_secs(10), |v| {
        (v - 0.25).abs() < 1e-9
    });
    // The L4 reports no encoder, power or ECC: those series do not exist (never a fake 0).
    assert!(prometheus.query("hw_power_watts{hw_name=\"Fake L4\"}").expect("query").is_empty());
    assert!(prometheus
        .query("hw_gpu_utilization_ratio{hw_gpu_task=\"encoder\",hw_name=\"Fake L4\"}")
        .expect("query")
        .is_empty());

    // The driver's values change; the next polls and scrapes follow.
    fake.write_state(&FAKE_GPUS.replace("0.util.gpu=42", "0.util.gpu=77").replace("0.temp=61", "0.temp=66"))
        .expect("state");
    prometheus.wait_for_value(
        "hw_gpu_utilization_ratio{hw_gpu_task=\"general\",hw_name=\"Fake H200\"}",
        Duration::from_secs(20),
        |v| (v - 0.77).abs() < 1e-9,
    );
    prometheus.wait_for_value("hw_temperature_celsius{hw_name=\"Fake H200\"}", Duration::from_secs(10), |v| v == 66.0);

    // An XID injected mid-run is counted by its code.
    fake.write_state(&FAKE_GPUS.replace("0.xids=", "0.xids=79")).expect("state");
    prometheus.wait_for_value(
        "hw_gpu_xid_errors_total{hw_gpu_xid=\"79\",hw_name=\"Fake H200\"}",
        Duration::from_secs(20),
        |v| v == 1.0,
    );
    prometheus.wait_for_values(
        [
            ("hw_gpu_power_limit_watts{hw_name=\"Fake H200\"}", 700.0),
            ("hw_gpu_clock_throttle{hw_gpu_clock_throttle_reason=\"sw_power_cap\",hw_name=\"Fake H200\"}", 1.0),
            ("hw_gpu_clock_throttle{hw_gpu_clock_throttle_reason=\"gpu_idle\",hw_name=\"Fake H200\"}", 0.0),
            ("hw_gpu_memory_bandwidth_utilization_ratio{hw_name=\"Fake L4\"}", 0.01),
            ("hw_fan_speed_ratio{hw_parent=\"GPU-00000000-1111-2222-3333-444444444444\",hw_type=\"fan\"}", 0.3),
            ("pipetel_gpu_info{hw_gpu_cuda_driver_version=\"12.4\",hw_name=\"Fake L4\"}", 1.0),
        ],
        Duration::from_secs(10),
    );

    let body = scrape_checked(&format!("127.0.0.1:{port}"));

    // Every name the GPU table of the docs (docs/src/gpu.md) promises is exported (process
    // memory needs a GPU process of this example, which the fake driver cannot know in advance).
    let readme = docs_text();
    let rows: Vec<&str> = readme.lines().filter(|l| l.starts_with("| `hw.")).collect();
    assert!(rows.len() >= 12, "GPU table rows: {rows:?}");
    for row in rows {
        let prom = row.split('|').nth(3).expect("column").trim().trim_matches('`');
        assert!(body.contains(&format!("# TYPE {prom} ")), "the docs name {prom}, not exported:\n{body}");
    }
}

#[test]
fn a_missing_library_turns_gpu_metrics_off_or_fails_init_when_required() {
    let _turn = turn(module_path!());
    let dir = std::env::temp_dir().join("pipetel-no-such-nvml");
    let missing = dir.join("libnvidia-ml.so.1");
    // auto: the program runs, one info line says why.
    let mut cmd = example_command("quickstart");
    cmd.env("OTEL_EXPORTER_PROMETHEUS_PORT", free_port().to_string()).env("PIPETEL_NVML_LIBRARY", &missing);
    cmd.args(["--batches", "2", "--interval-ms", "10", "--linger-seconds", "1"]);
    let mut example = Process::spawn("quickstart", cmd);
    let (code, out) = example.wait(Duration::from_secs(60));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("done: batches=2"), "{out}");
    let gpu_lines: Vec<&str> = out.lines().filter(|l| l.to_ascii_lowercase().contains("gpu")).collect();
    assert_eq!(gpu_lines.len(), 1, "one line says why GPU metrics are off: {out}");
    // on: init fails with an error naming the library.
    let mut cmd = example_command("quickstart");
    cmd.env("OTEL_EXPORTER_PROMETHEUS_PORT", free_port().to_string())
        .env("PIPETEL_GPU", "on")
        .env("PIPETEL_NVML_LIBRARY", &missing);
    let mut example = Process::spawn("quickstart", cmd);
    let (code, out) = example.wait(Duration::from_secs(60));
    assert_ne!(code, Some(0), "{out}");
    assert!(out.contains("GPU telemetry is required") && out.contains("pipetel-no-such-nvml"), "{out}");
}

#[test]
fn the_standalone_exporter_serves_the_gpu_gauges() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Promtool]) else { return };
    let fake = FakeNvml::new().expect("build the fake NVML library");
    fake.write_state(FAKE_GPUS).expect("state");
    let exe = built_binary("pipetel-gpu-exporter", &["-p", "pipetel-gpu-exporter"]);
    let port = free_port();
    let mut cmd = Command::new(exe);
    cmd.args(["--listen", &format!("127.0.0.1:{port}"), "--interval", "1s", "--nvml-library"]).arg(fake.library_path());
    let mut exporter = Process::spawn("pipetel-gpu-exporter", cmd);
    exporter.wait_for_output("serving GPU metrics at", Duration::from_secs(30));
    let body = wait_for("GPU gauges on the exporter", Duration::from_secs(15), || {
        let (_, body) = http("GET", &format!("http://127.0.0.1:{port}/metrics")).ok()?;
        body.contains("hw_gpu_utilization_ratio{").then_some(body)
    });
    assert!(body.contains("hw_name=\"Fake L4\""), "{body}");
    assert!(body.contains("service_name=\"pipetel-gpu-exporter\""), "{body}");
    promtool_check_metrics(&body).expect("promtool check metrics");
}
