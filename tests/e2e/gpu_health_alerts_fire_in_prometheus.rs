//! The GPU health alerts of `otel-collector/rules/pipetel-alerts.yml` match the series pipetel
//! really exports: real Prometheus, loading the rules, scrapes the inference service example
//! whose GPUs are the fake NVML library's. GPU 0 is held down by a hardware thermal slowdown
//! (and by its power cap, which is normal), has a row remapping pending and a failed one, and
//! reports XIDs 79 and 13 injected mid-run; GPU 1 reports none of that. Asserted on
//! `/api/v1/alerts`: `PipetelGpuXidCritical` fires for XID 79 and `PipetelGpuXidError` for 13,
//! `PipetelGpuRowRemapFailed` and `PipetelGpuRowRemapPending` fire, `PipetelGpuClockThrottled`
//! is pending (its `for: 5m` outlasts the test) for `hw_thermal_slowdown` only; none names
//! GPU 1. (The `promtool` unit tests check the timing: `alert_rules_pass_promtool`.)

use std::collections::BTreeSet;
use std::time::Duration;

use crate::support::gpu::fake_gpu_service_lingering;
use crate::support::{turn, wait_for, workspace_root, Prometheus, FAKE_GPUS};
use pipetel_gpu::test_support::FakeNvml;

/// The health alerts and the reason that must not raise one.
const HEALTH_ALERTS: [&str; 5] = [
    "PipetelGpuXidCritical",
    "PipetelGpuXidError",
    "PipetelGpuClockThrottled",
    "PipetelGpuRowRemapFailed",
    "PipetelGpuRowRemapPending",
];

/// The shared fake GPUs with GPU 0 unwell: throttled by the power cap (0x4) and a hardware
/// thermal slowdown (0x40, now also supported), 1 uncorrectable remapped row, a remap pending
/// and a failed one.
fn unwell_gpus(xids: &str) -> String {
    let state = FAKE_GPUS
        .replace("0.throttle=0x4\n", "0.throttle=0x44\n")
        .replace("0.throttle.supported=0x2d\n", "0.throttle.supported=0x6d\n")
        .replace("0.remap=2,0,0,0\n", "0.remap=2,1,1,1\n")
        .replace("0.xids=\n", &format!("0.xids={xids}\n"));
    assert_ne!(state, FAKE_GPUS, "the fake GPU state changed its format");
    state
}

/// `(alert name, state, labels)` of every GPU health alert Prometheus holds now.
fn health_alerts(prometheus: &Prometheus) -> Vec<(String, String, serde_json::Value)> {
    let answer = prometheus.api("/api/v1/alerts");
    answer["data"]["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| {
            let name = a["labels"]["alertname"].as_str()?;
            HEALTH_ALERTS
                .contains(&name)
                .then(|| (name.to_string(), a["state"].as_str().unwrap_or_default().to_string(), a["labels"].clone()))
        })
        .collect()
}

#[test]
fn gpu_health_alerts_fire_for_xids_throttling_and_row_remaps() {
    let _turn = turn(module_path!());
    let fake = FakeNvml::new().expect("build the fake NVML library");
    fake.write_state(&unwell_gpus("")).expect("state");
    let (_service, port) = fake_gpu_service_lingering(&fake, &[], 120);
    let scrape = format!("\n  - job_name: inference\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n");
    let rules = workspace_root().join("otel-collector/rules/pipetel-alerts.yml");
    let prometheus = Prometheus::start_scraping_with_rules(&scrape, &[rules]);
    prometheus
        .wait_for_value("hw_gpu_memory_row_remap_failure{hw_gpu_index=\"0\"}", Duration::from_secs(60), |v| v == 1.0);

    // XIDs happen mid-run: their series appear, which the XID alerts must catch.
    fake.write_state(&unwell_gpus("79,13")).expect("state");
    let expected: BTreeSet<(&str, &str, &str)> = [
        ("PipetelGpuXidCritical", "firing", "xid 79"),
        ("PipetelGpuXidError", "firing", "xid 13"),
        ("PipetelGpuRowRemapFailed", "firing", ""),
        ("PipetelGpuRowRemapPending", "firing", ""),
        ("PipetelGpuClockThrottled", "pending", "hw_thermal_slowdown"),
    ]
    .into_iter()
    .collect();
    let alerts = wait_for("every GPU health alert of GPU 0", Duration::from_secs(60), || {
        let alerts = health_alerts(&prometheus);
        let seen: BTreeSet<(&str, &str, &str)> = expected
            .iter()
            .copied()
            .filter(|(name, state, detail)| {
                alerts.iter().any(|(n, s, labels)| {
                    let detail_ok = match detail.strip_prefix("xid ") {
                        Some(xid) => labels["hw_gpu_xid"] == *xid,
                        None if detail.is_empty() => true,
                        None => labels["hw_gpu_clock_throttle_reason"] == *detail,
                    };
                    n == name && s == state && labels["hw_gpu_index"] == "0" && detail_ok
                })
            })
            .collect();
        (seen == expected).then_some(alerts)
    });
    println!("GPU health alerts: {alerts:#?}");
    for (name, state, labels) in &alerts {
        assert_eq!(labels["hw_gpu_index"], "0", "{name} ({state}) names a healthy GPU: {labels}");
        assert_eq!(labels["job"], "inference", "{labels}");
        assert_eq!(labels["hw_name"], "Fake H200", "{labels}");
        match name.as_str() {
            "PipetelGpuClockThrottled" => {
                assert_eq!(
                    labels["hw_gpu_clock_throttle_reason"], "hw_thermal_slowdown",
                    "the power cap is normal: {labels}"
                );
            }
            "PipetelGpuXidCritical" => assert_eq!(labels["hw_gpu_xid"], "79", "13 is a program's fault: {labels}"),
            "PipetelGpuXidError" => assert_eq!(labels["hw_gpu_xid"], "13", "79 is critical: {labels}"),
            _ => {}
        }
    }
    let severities: BTreeSet<(String, String)> =
        alerts.iter().map(|(n, _, l)| (n.clone(), l["severity"].as_str().unwrap_or_default().to_string())).collect();
    for (name, severity) in [
        ("PipetelGpuXidCritical", "critical"),
        ("PipetelGpuXidError", "warning"),
        ("PipetelGpuRowRemapFailed", "critical"),
        ("PipetelGpuRowRemapPending", "warning"),
        ("PipetelGpuClockThrottled", "warning"),
    ] {
        assert!(severities.contains(&(name.to_string(), severity.to_string())), "{name}: {severities:?}");
    }
}
