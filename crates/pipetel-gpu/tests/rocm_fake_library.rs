//! The real ROCm SMI code path (dlopen'd bindings, poller, instruments, OTel SDK) against a
//! fake `librocm_smi64` built from `tests/fake_rocm_smi/fake_rocm_smi.c`, asserting on what
//! the SDK's in-memory exporter collected. Also how `platform = auto` picks between NVML and
//! ROCm SMI.
#![cfg(feature = "amd")]

mod common;

use common::{
    assert_close, assert_identity, assert_only_memory_and_temperature, assert_units_and_kinds, assert_values, find,
    off_in_auto_and_error_in_on, value, TestResult, WAIT,
};
use pipetel_gpu::test_support::{FakeNvml, FakeRocmSmi, RocmSmi};
use pipetel_gpu::{names, GpuConfig, GpuError, GpuMode, GpuPlatform, GpuState};

type Harness = common::Harness<RocmSmi>;

/// An MI210-like device with everything ROCm 5 reports. ECC is enabled on UMC (1) and
/// GFX (4); the clock tables are lists of supported frequencies in Hz with the current index.
const FULL_DEVICE: &str = "\
0.unique_id=0x18f68e602b8a790f
0.pci_id=768
0.name=AMD Instinct MI210
0.busy=42
0.vram.total=68702699520
0.vram.used=17175674880
0.power.ave=312500000
0.energy.count=8000000
0.energy.resolution=15.5
0.temp.edge=61000
0.temp.junction=70000
0.ecc.enabled=5
0.ecc.1.corrected=3
0.ecc.1.uncorrected=1
0.ecc.4.corrected=2
0.ecc.4.uncorrected=0
0.clk.sys=500000000,1200000000,1700000000
0.clk.sys.current=2
0.clk.mem=400000000,1600000000
0.clk.mem.current=1
0.fan=51
";

#[test]
fn values_follow_semantic_conventions_and_change_between_polls() -> TestResult {
    let h = Harness::start(&format!("count=1\n{FULL_DEVICE}"), |c| c)?;
    let points = h.collect()?;
    assert_identity(&points, "0x18f68e602b8a790f", "AMD Instinct MI210", "amd");
    // The same names, units and kinds as NVML.
    assert_units_and_kinds(&points);

    // Values, converted from ROCm SMI's units.
    assert_values(
        &points,
        0,
        &[
            (names::GPU_UTILIZATION, &[(names::GPU_TASK, "general")], 0.42),
            (names::GPU_MEMORY_USAGE, &[], 17_175_674_880.0),
            (names::GPU_MEMORY_LIMIT, &[], 68_702_699_520.0),
            (names::GPU_MEMORY_UTILIZATION, &[], 0.25),
            (names::POWER, &[], 312.5),
            // 8e6 ticks of 15.5 µJ.
            (names::ENERGY, &[], 124.0),
            // The edge sensor, not the junction.
            (names::TEMPERATURE, &[], 61.0),
            // Summed over the enabled RAS blocks.
            (names::ERRORS, &[(names::ERROR_TYPE, "corrected")], 5.0),
            (names::ERRORS, &[(names::ERROR_TYPE, "uncorrected")], 1.0),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "graphics")], 1.7e9),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "memory")], 1.6e9),
        ],
    )?;
    // ROCm SMI has no SM, video, encoder or decoder readings: no series rather than zeros.
    assert!(find(&points, names::GPU_CLOCK, 0, &[(names::GPU_CLOCK_TYPE, "sm")]).is_empty());
    assert!(find(&points, names::GPU_CLOCK, 0, &[(names::GPU_CLOCK_TYPE, "video")]).is_empty());
    assert!(find(&points, names::GPU_UTILIZATION, 0, &[(names::GPU_TASK, "encoder")]).is_empty());
    assert_close(value(&points, names::FAN_SPEED_RATIO, 0, &[(names::GPU_FAN_INDEX, "0")])?, 0.2);
    assert_close(value(&points, names::STATUS, 0, &[(names::HW_STATE, "ok")])?, 1.0);
    assert_close(value(&points, names::STATUS, 0, &[(names::HW_STATE, "failed")])?, 0.0);

    // A second poll with new values: every series moves together.
    let next = FULL_DEVICE
        .replace("busy=42", "busy=97")
        .replace("vram.used=17175674880", "vram.used=34351349760")
        .replace("power.ave=312500000", "power.ave=550250000")
        .replace("energy.count=8000000", "energy.count=9000000")
        .replace("temp.edge=61000", "temp.edge=79500")
        .replace("0.ecc.1.corrected=3", "0.ecc.1.corrected=13")
        .replace("clk.sys.current=2", "clk.sys.current=0");
    let points = h.poll(&format!("count=1\n{next}"))?;
    assert_values(
        &points,
        0,
        &[
            (names::GPU_UTILIZATION, &[(names::GPU_TASK, "general")], 0.97),
            (names::GPU_MEMORY_UTILIZATION, &[], 0.5),
            (names::POWER, &[], 550.25),
            (names::ENERGY, &[], 139.5),
            (names::TEMPERATURE, &[], 79.5),
            (names::ERRORS, &[(names::ERROR_TYPE, "corrected")], 15.0),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "graphics")], 5e8),
        ],
    )?;
    Ok(())
}

#[test]
fn rocm6_layout_socket_power_junction_temperature_and_pci_id() -> TestResult {
    // An MI300-like device on ROCm 6: the new clock-table layout, no average power, no edge
    // sensor, no unique id (so the PCI address identifies it).
    let state = "count=1
layout=6
0.pci_id=768
0.name=AMD Instinct MI300X
0.power.socket=745000000
0.temp.junction=55000
0.clk.sys=132000000,2100000000
0.clk.sys.current=1
0.clk.mem=900000000,1300000000
0.clk.mem.current=1
";
    let h = Harness::start(state, |c| c)?;
    let points = h.collect()?;
    let ids: Vec<_> = points.iter().filter_map(|p| p.attrs.get(names::HW_ID)).collect();
    assert!(!ids.is_empty() && ids.iter().all(|id| *id == "0000:03:00.0"), "{ids:?}");
    assert_values(
        &points,
        0,
        &[
            (names::POWER, &[], 745.0),
            (names::TEMPERATURE, &[], 55.0),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "graphics")], 2.1e9),
            (names::GPU_CLOCK, &[(names::GPU_CLOCK_TYPE, "memory")], 1.3e9),
        ],
    )?;
    Ok(())
}

#[test]
fn unsupported_fields_yield_no_series_and_are_not_asked_again() -> TestResult {
    // Only memory and temperature exist; the rest answers NOT_SUPPORTED.
    let state =
        "count=1\nlog_calls=1\n0.unique_id=0x1\n0.name=Small\n0.vram.total=1000\n0.vram.used=250\n0.temp.edge=40000\n";
    let h = Harness::start(state, |c| c)?;
    h.update(state)?;
    h.update(state)?;
    assert_only_memory_and_temperature(&h.collect()?)?;
    // Three polls, but each unsupported query was made once; supported ones every poll.
    assert_eq!(h.fake.call_count(0, "rsmi_dev_busy_percent_get"), 1);
    assert_eq!(h.fake.call_count(0, "rsmi_dev_power_ave_get"), 1);
    assert_eq!(h.fake.call_count(0, "rsmi_dev_current_socket_power_get"), 1);
    assert_eq!(h.fake.call_count(0, "rsmi_dev_gpu_clk_freq_get"), 2);
    assert_eq!(h.fake.call_count(0, "rsmi_dev_memory_usage_get"), 3);
    // ECC is not enabled on any block: never asked.
    assert_eq!(h.fake.call_count(0, "rsmi_dev_ecc_count_get"), 0);

    // A field that worked and then reports RSMI_STATUS_PERMISSION (4) vanishes for good.
    h.update(&format!("{state}0.err.rsmi_dev_memory_usage_get=4\n"))?;
    let points = h.poll(state)?;
    assert!(find(&points, names::GPU_MEMORY_USAGE, 0, &[]).is_empty(), "{points:#?}");
    assert!(find(&points, names::GPU_MEMORY_UTILIZATION, 0, &[]).is_empty(), "{points:#?}");
    assert_close(value(&points, names::GPU_MEMORY_LIMIT, 0, &[])?, 1000.0);
    assert_eq!(h.fake.call_count(0, "rsmi_dev_memory_usage_get"), 4);
    Ok(())
}

#[test]
fn transient_errors_skip_one_poll_and_are_retried() -> TestResult {
    let state = "count=1\nlog_calls=1\n0.name=T\n0.power.ave=100000000\n";
    let h = Harness::start(state, |c| c)?;
    // RSMI_STATUS_BUSY (16).
    let broken = format!("{state}0.err.rsmi_dev_power_ave_get=16\n");
    h.assert_transient_power_error_skips_one_poll(state, &broken, "rsmi_dev_power_ave_get")?;
    // A transient error is not "unsupported": the socket-power fallback was never tried.
    assert_eq!(h.fake.call_count(0, "rsmi_dev_current_socket_power_get"), 0);
    Ok(())
}

#[test]
fn ecc_counts_never_go_backwards_on_a_partial_read() -> TestResult {
    let state = "count=1\nlog_calls=1\n0.name=E\n0.ecc.enabled=7\n0.ecc.1.corrected=4\n0.ecc.1.uncorrected=1\n0.ecc.4.corrected=6\n";
    // Block 2 (SDMA) is enabled but answers NOT_SUPPORTED: dropped after the first poll.
    let h = Harness::start(state, |c| c)?;
    let points = h.collect()?;
    assert_close(value(&points, names::ERRORS, 0, &[(names::ERROR_TYPE, "corrected")])?, 10.0);
    assert_close(value(&points, names::ERRORS, 0, &[(names::ERROR_TYPE, "uncorrected")])?, 1.0);
    // One block busy: no errors series this poll rather than a smaller sum.
    let points = h.poll(&format!("{state}0.err.rsmi_dev_ecc_count_get=16\n"))?;
    assert!(find(&points, names::ERRORS, 0, &[]).is_empty(), "{points:#?}");
    let points = h.poll(state)?;
    assert_close(value(&points, names::ERRORS, 0, &[(names::ERROR_TYPE, "corrected")])?, 10.0);
    // First poll: three blocks; after it two per poll, busy or not: the unsupported block
    // is not asked again.
    assert_eq!(h.fake.call_count(0, "rsmi_dev_ecc_count_get"), 3 + 2 + 2);
    Ok(())
}

#[test]
fn lost_gpu_reports_failed_status_and_nothing_else() -> TestResult {
    // RSMI_STATUS_INIT_ERROR in the middle of a poll: the library lost the device.
    Harness::assert_lost_then_back(FULL_DEVICE, "0.err.rsmi_dev_temp_metric_get=8", 61.0)
}

#[test]
fn two_devices_with_different_capabilities() -> TestResult {
    let state = "count=2
0.unique_id=0xaaaa
0.name=Big
0.busy=80
0.vram.total=2000
0.vram.used=500
1.unique_id=0xbbbb
1.name=Small
1.temp.edge=35000
1.fan=255
";
    let h = Harness::start(state, |c| c)?;
    let points = h.collect()?;
    assert_close(value(&points, names::GPU_UTILIZATION, 0, &[(names::HW_ID, "0xaaaa")])?, 0.8);
    assert!(find(&points, names::GPU_UTILIZATION, 1, &[]).is_empty());
    assert!(find(&points, names::TEMPERATURE, 0, &[]).is_empty());
    assert_close(value(&points, names::TEMPERATURE, 1, &[(names::HW_NAME, "Small")])?, 35.0);
    assert_close(value(&points, names::FAN_SPEED_RATIO, 1, &[(names::HW_PARENT, "0xbbbb")])?, 1.0);
    assert_eq!(h.gpu.latest().map(|s| s.devices.len()), Some(2));
    Ok(())
}

#[test]
fn shutdown_balances_init_and_stops_reporting() -> TestResult {
    let state = format!("count=1\nlog_calls=1\n{FULL_DEVICE}");
    let fake = Harness::start(&state, |c| c)?.shutdown("rsmi_shut_down")?;
    assert_eq!(fake.call_count(-1, "rsmi_init"), 1);
    Ok(())
}

#[test]
fn init_failure_no_device_and_bad_path_turn_gpu_off_in_auto_and_fail_in_on() -> TestResult {
    let fake = FakeRocmSmi::new()?;
    let amd = fake.gpu_config();

    // RSMI_STATUS_INIT_ERROR from rsmi_init: the library's own words reach the error.
    fake.write_state("count=1\nerr.rsmi_init=8\n")?;
    let (auto, on) = off_in_auto_and_error_in_on(&amd)?;
    match auto {
        GpuError::InitFailed { library, reason } => {
            assert_eq!(library, fake.library_path().display().to_string());
            assert!(reason.contains("RSMI_STATUS_INIT_ERROR") && reason.contains("status 8"), "{reason}");
        }
        other => panic!("expected an init error, got {other:?}"),
    }
    assert!(matches!(on, GpuError::InitFailed { .. }), "{on:?}");

    // No device: the successful init is balanced by a shut-down.
    fake.write_state("count=0\nlog_calls=1\n")?;
    let err = pipetel_gpu::start(&amd.clone().with_mode(GpuMode::On)).expect_err("on must fail");
    assert!(matches!(err, GpuError::NoDevice { .. }), "{err:?}");
    assert_eq!(fake.call_count(-1, "rsmi_init"), 1);
    assert_eq!(fake.call_count(-1, "rsmi_shut_down"), 1);

    let missing = std::env::temp_dir().join("pipetel-no-such-dir/librocm_smi64.so.1");
    let err =
        pipetel_gpu::start(&amd.with_rocm_smi_library(&missing).with_mode(GpuMode::On)).expect_err("on must fail");
    match err {
        GpuError::LibraryNotLoaded { library, .. } => assert_eq!(library, missing.display().to_string()),
        other => panic!("expected LibraryNotLoaded, got {other:?}"),
    }
    Ok(())
}

#[test]
fn a_library_that_is_not_rocm_smi_is_named_as_such() -> TestResult {
    // The fake NVML loads fine but exports no rsmi_* symbol.
    let nvml = FakeNvml::new()?;
    let config = GpuConfig::default()
        .with_mode(GpuMode::On)
        .with_platform(GpuPlatform::Amd)
        .with_rocm_smi_library(nvml.library_path());
    let err = pipetel_gpu::start(&config).expect_err("not ROCm SMI");
    assert!(err.to_string().contains("not a ROCm SMI library: symbol rsmi_init not found"), "{err}");
    Ok(())
}

#[test]
fn auto_platform_prefers_nvml_then_falls_back_to_rocm_smi() -> TestResult {
    let nvml = FakeNvml::new()?;
    let rocm = FakeRocmSmi::new()?;
    nvml.write_state("count=1\n0.uuid=GPU-n\n0.name=N\n")?;
    rocm.write_state("count=2\n0.name=A\n1.name=B\n")?;
    let auto = GpuConfig::default()
        .with_mode(GpuMode::On)
        .with_nvml_library(nvml.library_path())
        .with_rocm_smi_library(rocm.library_path());

    // Both work: NVML first.
    let gpu = pipetel_gpu::start(&auto)?;
    assert_eq!(gpu.state(), GpuState::Running { devices: 1, platform: "nvidia" });
    gpu.shutdown();

    // NVML loads but its driver is not loaded: ROCm SMI.
    nvml.write_state("count=1\nerr.nvmlInit_v2=9\n")?;
    let gpu = pipetel_gpu::start(&auto)?;
    assert_eq!(gpu.state(), GpuState::Running { devices: 2, platform: "amd" });
    assert!(gpu.refresh(WAIT));
    assert_eq!(gpu.latest().map(|s| s.devices.iter().map(|d| d.info.vendor).collect()), Some(vec!["amd", "amd"]));
    gpu.shutdown();

    // Both libraries load and both fail: one error naming both.
    rocm.write_state("count=1\nerr.rsmi_init=8\n")?;
    let err = pipetel_gpu::start(&auto).expect_err("no usable GPU");
    match &err {
        GpuError::NoPlatform { errors } => {
            assert!(matches!(errors.as_slice(), [GpuError::InitFailed { .. }, GpuError::InitFailed { .. }]), "{err:?}")
        }
        other => panic!("expected NoPlatform, got {other:?}"),
    }
    let text = err.to_string();
    assert!(text.starts_with("no usable GPU: "), "{text}");
    assert!(text.contains(&nvml.library_path().display().to_string()), "{text}");
    assert!(text.contains(&rocm.library_path().display().to_string()), "{text}");

    // ROCm SMI not installed: NVML's error alone, as in builds without `amd`.
    let missing = std::env::temp_dir().join("pipetel-no-such-dir/librocm_smi64.so.1");
    let err = pipetel_gpu::start(&auto.clone().with_rocm_smi_library(&missing)).expect_err("no usable GPU");
    assert!(
        matches!(err, GpuError::InitFailed { ref library, .. } if *library == nvml.library_path().display().to_string()),
        "{err:?}"
    );

    // `platform = nvidia` never opens ROCm SMI, even when NVML fails.
    rocm.write_state("count=1\nlog_calls=1\n0.name=A\n")?;
    let err = pipetel_gpu::start(&auto.with_platform(GpuPlatform::Nvidia)).expect_err("nvml fails");
    assert!(matches!(err, GpuError::InitFailed { .. }), "{err:?}");
    assert_eq!(rocm.call_count(-1, "rsmi_init"), 0);
    Ok(())
}
