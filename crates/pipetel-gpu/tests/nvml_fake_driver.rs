//! The real NVML code path (nvml-wrapper, poller, instruments, OTel SDK) against a fake
//! `libnvidia-ml` built from `tests/fake_nvml/fake_nvml.c`, asserting on what the SDK's
//! in-memory exporter collected.

mod common;

use std::time::{Duration, Instant};

use common::{
    assert_close, assert_identity, assert_only_memory_and_temperature, assert_units_and_kinds, assert_values, collect,
    find, in_memory, off_in_auto_and_error_in_on, value, TestResult, WAIT,
};
use opentelemetry::metrics::MeterProvider as _;
use pipetel_gpu::test_support::{FakeNvml, Nvml};
use pipetel_gpu::{names, GpuConfig, GpuError, GpuMode, GpuPlatform, GpuState};

type Harness = common::Harness<Nvml>;

const FULL_DEVICE: &str = "\
0.uuid=GPU-11111111-2222-3333-4444-555555555555
0.name=NVIDIA H100 80GB HBM3
0.util.gpu=42
0.util.mem=10
0.enc=5
0.dec=7
0.mem.total=85899345920
0.mem.used=21474836480
0.power=312500
0.energy=123456789
0.temp=61
0.ecc.corrected=3
0.ecc.uncorrected=0
0.clock.graphics=1755
0.clock.sm=1755
0.clock.mem=2619
0.clock.video=1530
0.fans=2
0.fan.0=30
0.fan.1=45
";

#[test]
fn values_follow_semantic_conventions_and_change_between_polls() -> TestResult {
    let h = Harness::start(&format!("count=1\n{FULL_DEVICE}"), |c| c)?;
    let points = h.collect()?;
    assert_identity(&points, "GPU-11111111-2222-3333-4444-555555555555", "NVIDIA H100 80GB HBM3", "nvidia");
    assert_units_and_kinds(&points);

    // Values, converted from NVML's units.
    assert_values(
        &points,
        0,
        &[
            (names::GPU_UTILIZATION, &[(names::GPU_TASK, "general")], 0.42),
            (names::GPU_UTILIZATION, &[(names::GPU_TASK, "encoder")], 0.05),
            (names::GPU_UTILIZATION, &[(names::GPU_TASK, "decoder")], 0.07),
            (names::GPU_MEMORY_USAGE, &[], 21_474_836_480.0),
            (names::GPU_MEMORY_LIMIT, &[], 85_899_345_920.0),
            (names::GPU_MEMORY_UTILIZATION, &[], 0.25),
            (names::POWER, &[], 312.5),
            (names::ENERGY, &[], 123_456.789),
            (names::TEMPERATURE, &[], 61.0),
            (names::ERRORS, &[(names::ERROR_TYPE, "corrected")], 3.0),
            (names::ERRORS, &[(names::ERROR_TYPE, "uncorrected")], 0.0),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "graphics")], 1.755e9),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "sm")], 1.755e9),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "memory")], 2.619e9),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "video")], 1.53e9),
            (names::FAN_SPEED_RATIO, &[(names::GPU_FAN_INDEX, "0")], 0.30),
            (names::FAN_SPEED_RATIO, &[(names::GPU_FAN_INDEX, "1")], 0.45),
            (names::STATUS, &[(names::HW_STATE, "ok")], 1.0),
            (names::STATUS, &[(names::HW_STATE, "failed")], 0.0),
        ],
    )?;
    // Opt-in series stay away unless asked for.
    assert!(find(&points, names::GPU_PCIE_THROUGHPUT, 0, &[]).is_empty());
    assert!(find(&points, names::GPU_PROCESS_MEMORY_USAGE, 0, &[]).is_empty());

    // A second poll with new values: every series moves together.
    let next = FULL_DEVICE
        .replace("util.gpu=42", "util.gpu=97")
        .replace("mem.used=21474836480", "mem.used=42949672960")
        .replace("power=312500", "power=650250")
        .replace("energy=123456789", "energy=223456789")
        .replace("temp=61", "temp=79");
    let points = h.poll(&format!("count=1\n{next}"))?;
    assert_values(
        &points,
        0,
        &[
            (names::GPU_UTILIZATION, &[(names::GPU_TASK, "general")], 0.97),
            (names::GPU_MEMORY_USAGE, &[], 42_949_672_960.0),
            (names::GPU_MEMORY_UTILIZATION, &[], 0.5),
            (names::POWER, &[], 650.25),
            (names::ENERGY, &[], 223_456.789),
            (names::TEMPERATURE, &[], 79.0),
        ],
    )?;
    Ok(())
}

#[test]
fn unsupported_fields_yield_no_series_and_are_not_asked_again() -> TestResult {
    // Only memory and temperature exist; the rest answers NOT_SUPPORTED.
    let state = "count=1\nlog_calls=1\n0.uuid=GPU-a\n0.name=Small\n0.mem.total=1000\n0.mem.used=250\n0.temp=40\n";
    let h = Harness::start(state, |c| c)?;
    h.update(state)?;
    h.update(state)?;
    assert_only_memory_and_temperature(&h.collect()?)?;
    // Three polls, but each unsupported query was made once; supported ones every poll.
    assert_eq!(h.fake.call_count(0, "nvmlDeviceGetPowerUsage"), 1);
    assert_eq!(h.fake.call_count(0, "nvmlDeviceGetUtilizationRates"), 1);
    assert_eq!(h.fake.call_count(0, "nvmlDeviceGetTemperature"), 3);

    // A field that worked and then reports NO_PERMISSION (4) vanishes for good.
    let denied = format!("{state}0.err.nvmlDeviceGetTemperature=4\n");
    h.update(&denied)?;
    let points = h.poll(state)?;
    assert!(find(&points, names::TEMPERATURE, 0, &[]).is_empty(), "{points:#?}");
    assert_eq!(h.fake.call_count(0, "nvmlDeviceGetTemperature"), 4);
    Ok(())
}

#[test]
fn transient_errors_skip_one_poll_and_are_retried() -> TestResult {
    let state = "count=1\nlog_calls=1\n0.uuid=GPU-t\n0.name=T\n0.power=100000\n";
    let h = Harness::start(state, |c| c)?;
    // NVML_ERROR_UNKNOWN.
    let broken = format!("{state}0.err.nvmlDeviceGetPowerUsage=999\n");
    h.assert_transient_power_error_skips_one_poll(state, &broken, "nvmlDeviceGetPowerUsage")
}

#[test]
fn two_devices_with_different_capabilities() -> TestResult {
    let state = "count=2
0.uuid=GPU-big
0.name=Big
0.util.gpu=80
0.util.mem=1
0.mem.total=2000
0.mem.used=500
0.power=250000
0.ecc.corrected=1
0.ecc.uncorrected=2
1.uuid=GPU-small
1.name=Small
1.mem.total=1000
1.mem.used=100
1.temp=35
";
    let h = Harness::start(state, |c| c)?;
    let points = h.collect()?;
    assert_close(value(&points, names::GPU_UTILIZATION, 0, &[(names::HW_ID, "GPU-big")])?, 0.8);
    assert!(find(&points, names::GPU_UTILIZATION, 1, &[]).is_empty());
    assert_close(value(&points, names::POWER, 0, &[])?, 250.0);
    assert!(find(&points, names::POWER, 1, &[]).is_empty());
    assert_close(value(&points, names::ERRORS, 0, &[(names::ERROR_TYPE, "uncorrected")])?, 2.0);
    assert!(find(&points, names::ERRORS, 1, &[]).is_empty());
    assert!(find(&points, names::TEMPERATURE, 0, &[]).is_empty());
    assert_close(value(&points, names::TEMPERATURE, 1, &[(names::HW_NAME, "Small")])?, 35.0);
    assert_close(value(&points, names::GPU_MEMORY_USAGE, 1, &[(names::HW_ID, "GPU-small")])?, 100.0);
    assert_eq!(h.gpu.latest().map(|s| s.devices.len()), Some(2));
    Ok(())
}

#[test]
fn lost_gpu_reports_failed_status_and_nothing_else() -> TestResult {
    // NVML_ERROR_GPU_IS_LOST (15) in the middle of a poll; then back on the bus.
    Harness::assert_lost_then_back(FULL_DEVICE, "0.err.nvmlDeviceGetTemperature=15", 61.0)
}

#[test]
fn mig_enabled_device_reports_no_utilization() -> TestResult {
    let state = format!("count=1\n{FULL_DEVICE}0.mig=1\n");
    let h = Harness::start(&state, |c| c)?;
    let points = h.collect()?;
    assert!(find(&points, names::GPU_UTILIZATION, 0, &[]).is_empty(), "{points:#?}");
    assert_close(value(&points, names::GPU_MEMORY_USAGE, 0, &[])?, 21_474_836_480.0);
    Ok(())
}

#[test]
fn opt_in_pcie_throughput_and_process_memory() -> TestResult {
    let me = std::process::id();
    // Our pid in both lists (counted once), a stranger's pid ignored.
    let state = format!(
        "count=1\n0.uuid=GPU-p\n0.name=P\n0.pcie.tx=1000\n0.pcie.rx=2\n0.procs={me}:4096,1:999999\n0.gprocs={me}:4096\n"
    );
    let h = Harness::start(&state, |c| c.with_pcie_throughput(true).with_process_memory(true))?;
    let points = h.collect()?;
    assert_close(
        value(&points, names::GPU_PCIE_THROUGHPUT, 0, &[(names::NETWORK_IO_DIRECTION, "transmit")])?,
        1_024_000.0,
    );
    assert_close(value(&points, names::GPU_PCIE_THROUGHPUT, 0, &[(names::NETWORK_IO_DIRECTION, "receive")])?, 2048.0);
    assert_close(value(&points, names::GPU_PROCESS_MEMORY_USAGE, 0, &[])?, 4096.0);
    let unit = find(&points, names::GPU_PCIE_THROUGHPUT, 0, &[]).first().map(|p| p.unit.clone());
    assert_eq!(unit.as_deref(), Some("By/s"));
    Ok(())
}

#[test]
fn shutdown_stops_reporting_and_closes_nvml() -> TestResult {
    let state = format!("count=1\nlog_calls=1\n{FULL_DEVICE}");
    Harness::start(&state, |c| c)?.shutdown("nvmlShutdown")?;
    Ok(())
}

/// The errors of `auto` and `on` against a fake NVML in `state`, on `platform = nvidia`
/// (with the `amd` feature, `auto` would go on to ROCm SMI).
fn failing_fake(state: &str) -> Result<(GpuError, GpuError), Box<dyn std::error::Error>> {
    let fake = FakeNvml::new()?;
    fake.write_state(state)?;
    off_in_auto_and_error_in_on(&fake.gpu_config())
}

#[test]
fn driver_not_loaded_turns_gpu_off_in_auto_and_fails_in_on() -> TestResult {
    // NVML_ERROR_DRIVER_NOT_LOADED.
    let (auto, on) = failing_fake("count=1\nerr.nvmlInit_v2=9\n")?;
    match auto {
        GpuError::InitFailed { reason, .. } => assert!(reason.to_lowercase().contains("driver"), "{reason}"),
        other => panic!("expected an init error, got {other:?}"),
    }
    assert!(matches!(on, GpuError::InitFailed { .. }), "{on:?}");
    Ok(())
}

#[test]
fn bad_library_path_turns_gpu_off_in_auto_and_fails_in_on() -> TestResult {
    let missing = std::env::temp_dir().join("pipetel-no-such-dir/libnvidia-ml.so.1");
    let base = GpuConfig::default().with_platform(GpuPlatform::Nvidia).with_nvml_library(&missing);
    let gpu = pipetel_gpu::start(&base.clone().with_mode(GpuMode::Auto))?;
    assert!(matches!(gpu.wait_started(WAIT), GpuState::Off(GpuError::LibraryNotLoaded { .. })));
    // Off: the instruments exist but report nothing, and a refresh does not happen.
    assert!(!gpu.refresh(Duration::from_millis(50)));
    let (exporter, provider) = in_memory();
    gpu.register_metrics(&provider.meter("t"));
    assert!(collect(&exporter, &provider)?.is_empty());

    match off_in_auto_and_error_in_on(&base)?.1 {
        GpuError::LibraryNotLoaded { library, .. } => assert_eq!(library, missing.display().to_string()),
        other => panic!("expected LibraryNotLoaded, got {other:?}"),
    }
    Ok(())
}

#[test]
fn no_device_turns_gpu_off() -> TestResult {
    let (auto, on) = failing_fake("count=0\n")?;
    assert!(matches!(auto, GpuError::NoDevice { .. }), "{auto:?}");
    assert!(matches!(on, GpuError::NoDevice { .. }), "{on:?}");
    Ok(())
}

#[test]
fn slow_driver_init_never_blocks_the_caller_in_auto() -> TestResult {
    let fake = FakeNvml::new()?;
    fake.write_state(&format!("count=1\ndelay_ms.nvmlInit_v2=1500\n{FULL_DEVICE}"))?;
    let base = GpuConfig::default().with_nvml_library(fake.library_path());

    let t0 = Instant::now();
    let gpu = pipetel_gpu::start(&base.clone().with_mode(GpuMode::Auto))?;
    assert!(t0.elapsed() < Duration::from_millis(1000), "start blocked for {:?}", t0.elapsed());
    assert_eq!(gpu.state(), GpuState::Starting);
    assert!(matches!(gpu.wait_started(WAIT), GpuState::Running { devices: 1, platform: "nvidia" }));

    // `On` waits, but only as long as it is told to.
    let err = pipetel_gpu::start(&base.with_mode(GpuMode::On).with_init_timeout(Duration::from_millis(200)))
        .expect_err("init takes longer than the timeout");
    assert_eq!(err, GpuError::InitTimeout(Duration::from_millis(200)));
    Ok(())
}

#[test]
fn off_loads_nothing_and_amd_without_its_feature_is_a_clear_error() -> TestResult {
    let off = GpuConfig::default().with_mode(GpuMode::Off).with_nvml_library("/nonexistent/libnvidia-ml.so.1");
    let gpu = pipetel_gpu::start(&off)?;
    assert_eq!(gpu.state(), GpuState::Disabled);
    assert!(gpu.latest().is_none());

    // With the feature, `platform = amd` opens ROCm SMI: tests/rocm_fake_library.rs.
    #[cfg(not(feature = "amd"))]
    {
        let err =
            pipetel_gpu::start(&GpuConfig::default().with_platform(GpuPlatform::Amd)).expect_err("amd is not built");
        assert!(err.to_string().contains("not built with amd support"), "{err}");
        assert!(err.to_string().contains("`amd` feature"), "{err}");
    }

    let err = pipetel_gpu::start(&GpuConfig::default().with_poll_interval(Duration::from_millis(100)))
        .expect_err("interval too short");
    assert!(err.to_string().contains("gpu.poll_interval"), "{err}");
    Ok(())
}
