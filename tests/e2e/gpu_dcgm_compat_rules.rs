//! The DCGM compatibility rules (`otel-collector/rules/dcgm-compat.yml`): `promtool` checks
//! them and runs their unit tests, and real Prometheus, scraping a service whose GPUs are the
//! fake NVML library's, records DCGM-named series with dcgm-exporter's labels from them. The
//! same service, given `CUDA_VISIBLE_DEVICES`, reports only the GPU it may use.

use std::path::PathBuf;
use std::time::Duration;

use crate::support::gpu::fake_gpu_service;
use crate::support::prometheus::promtool;
use crate::support::{turn_if_peers, workspace_root, Peer, Prometheus, FAKE_GPUS};
use pipetel_gpu::test_support::FakeNvml;

fn rules_dir() -> PathBuf {
    workspace_root().join("otel-collector/rules")
}

#[test]
fn dcgm_rules_pass_promtool_check_and_their_unit_tests() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Promtool]) else { return };
    let (ok, out) = promtool(&["check", "rules", "dcgm-compat.yml"], &rules_dir());
    assert!(ok && out.contains("SUCCESS: 38 rules found"), "promtool check rules:\n{out}");
    let (ok, out) = promtool(&["test", "rules", "dcgm-compat.test.yml"], &rules_dir());
    assert!(ok && out.contains("SUCCESS"), "promtool test rules:\n{out}");
}

#[test]
fn prometheus_records_dcgm_named_series_from_the_fake_gpus() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus]) else { return };
    let fake = FakeNvml::new().expect("build the fake NVML library");
    fake.write_state(FAKE_GPUS).expect("state");
    let (_service, port) = fake_gpu_service(&fake, &[]);
    let scrape = format!("\n  - job_name: inference\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n");
    let prometheus = Prometheus::start_scraping_with_rules(&scrape, &[rules_dir().join("dcgm-compat.yml")]);

    // The H200: 42 % busy, 700 W limit, throttled by the power cap (bit 4), 2 remapped rows.
    let util =
        prometheus.wait_for_value("DCGM_FI_DEV_GPU_UTIL{modelName=\"Fake H200\"}", Duration::from_secs(60), |v| {
            (v - 42.0).abs() < 1e-9
        });
    let labels = &util[0].0;
    for (key, value) in [
        ("gpu", "0"),
        ("device", "nvidia0"),
        ("UUID", "GPU-00000000-1111-2222-3333-444444444444"),
        ("modelName", "Fake H200"),
        ("DCGM_FI_DRIVER_VERSION", "550.54.15"),
        ("Hostname", "127.0.0.1"),
    ] {
        assert_eq!(labels.get(key).map(String::as_str), Some(value), "{key}: {labels:?}");
    }
    prometheus.wait_for_values(
        [
            ("DCGM_FI_DEV_MEM_COPY_UTIL{gpu=\"0\"}", 10.0),
            ("DCGM_FI_DEV_FB_USED{gpu=\"1\"}", 6_000_000_000.0 / 1_048_576.0),
            ("DCGM_FI_DEV_GPU_TEMP{gpu=\"1\"}", 70.0),
            ("DCGM_FI_DEV_POWER_USAGE{gpu=\"0\"}", 350.0),
            ("DCGM_FI_DEV_POWER_MGMT_LIMIT{gpu=\"0\"}", 700.0),
            ("DCGM_FI_DEV_SM_CLOCK{gpu=\"0\"}", 1980.0),
            ("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\"}", 4.0),
            ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{gpu=\"0\"}", 2.0),
            ("DCGM_FI_DEV_RETIRED_SBE{gpu=\"0\"}", 1.0),
            ("DCGM_FI_DEV_FAN_SPEED{gpu=\"0\"}", 30.0),
        ],
        Duration::from_secs(30),
    );
    // The L4 reports no power: no DCGM power series for it either.
    assert!(prometheus.query("DCGM_FI_DEV_POWER_USAGE{gpu=\"1\"}").expect("query").is_empty());

    // An XID injected mid-run shows up under DCGM's name, with its code.
    assert!(prometheus.query("DCGM_FI_DEV_XID_ERRORS").expect("query").is_empty(), "no XID yet");
    fake.write_state(&FAKE_GPUS.replace("0.xids=", "0.xids=79")).expect("state");
    prometheus.wait_for_value("DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",xid=\"79\"}", Duration::from_secs(60), |v| v > 0.0);
}

#[test]
fn a_process_reports_only_the_gpu_cuda_lets_it_use() {
    let Some(_turn) = turn_if_peers(module_path!(), &[Peer::Prometheus]) else { return };
    let fake = FakeNvml::new().expect("build the fake NVML library");
    fake.write_state(FAKE_GPUS).expect("state");
    // GPU 1 by UUID prefix, as a scheduler would hand it out.
    let (_service, port) = fake_gpu_service(&fake, &[("CUDA_VISIBLE_DEVICES", "GPU-99999999")]);
    let prometheus = Prometheus::scraping_cleanly(port);
    prometheus.wait_for_value("hw_gpu_memory_limit_bytes{hw_name=\"Fake L4\"}", Duration::from_secs(30), |v| {
        v == 24_000_000_000.0
    });
    prometheus.wait_for_value("sum(service_tasks_created_total)", Duration::from_secs(20), |v| v > 0.0);
    let series = prometheus.query("count by (hw_gpu_index) (hw_gpu_memory_limit_bytes)").expect("query");
    assert_eq!(series.len(), 1, "only the visible GPU is reported: {series:?}");
    assert_eq!(series[0].0.get("hw_gpu_index").map(String::as_str), Some("1"), "{series:?}");
}
