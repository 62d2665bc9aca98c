//! The fields DCGM users alert on, through the real NVML code path (nvml-wrapper, poller,
//! instruments, OTel SDK) against the fake `libnvidia-ml`: XID error events (one injected
//! mid-run), clock throttle reasons, remapped rows, retired pages, the power limit, memory
//! bandwidth utilisation, driver and CUDA versions, `hw.model`; each one's NotSupported path;
//! and the visible-device filter.

mod common;

use common::{assert_close, find, value, TestResult};
use pipetel_gpu::test_support::{FakeNvml, Nvml};
use pipetel_gpu::{
    names, DeviceFilter, DeviceSelection, GpuError, GpuMode, GpuState, ENV_CUDA_VISIBLE_DEVICES, ENV_GPU_DEVICES,
    ENV_NVIDIA_VISIBLE_DEVICES,
};

type Harness = common::Harness<Nvml>;

/// One device reporting every DCGM-style field. Throttle reasons: SW power cap (0x4) and HW
/// slowdown (0x8) active, of GPU idle, SW power cap, HW slowdown and SW thermal (0x1|0x4|0x8|0x20).
const DCGM_DEVICE: &str = "\
count=1
driver=550.54.15
cuda=12040
0.uuid=GPU-dcgm-0000
0.name=NVIDIA A100-SXM4-80GB
0.util.gpu=42
0.util.mem=17
0.power=250000
0.power.limit=400000
0.throttle=0xc
0.throttle.supported=0x2d
0.remap=3,1,1,0
0.retired.sbe=2
0.retired.dbe=1
0.retired.pending=1
0.xids=
";

#[test]
fn dcgm_fields_follow_the_driver() -> TestResult {
    let h = Harness::start(DCGM_DEVICE, |c| c)?;
    let points = h.collect()?;
    // Bandwidth utilisation (NVML utilization.memory) apart from capacity utilisation.
    assert_close(value(&points, names::GPU_MEMORY_BANDWIDTH_UTILIZATION, 0, &[])?, 0.17);
    assert_close(value(&points, names::GPU_POWER_LIMIT, 0, &[])?, 400.0);
    let throttle = |reason| value(&points, names::GPU_CLOCK_THROTTLE, 0, &[(names::GPU_CLOCK_THROTTLE_REASON, reason)]);
    assert_close(throttle("sw_power_cap")?, 1.0);
    assert_close(throttle("hw_slowdown")?, 1.0);
    assert_close(throttle("gpu_idle")?, 0.0);
    assert_close(throttle("sw_thermal_slowdown")?, 0.0);
    assert_eq!(find(&points, names::GPU_CLOCK_THROTTLE, 0, &[]).len(), 4, "only the supported reasons");
    let cause = |metric, cause| value(&points, metric, 0, &[(names::GPU_MEMORY_ERROR_CAUSE, cause)]);
    assert_close(cause(names::GPU_MEMORY_REMAPPED_ROWS, "correctable")?, 3.0);
    assert_close(cause(names::GPU_MEMORY_REMAPPED_ROWS, "uncorrectable")?, 1.0);
    assert_close(value(&points, names::GPU_MEMORY_ROW_REMAP_PENDING, 0, &[])?, 1.0);
    assert_close(value(&points, names::GPU_MEMORY_ROW_REMAP_FAILURE, 0, &[])?, 0.0);
    assert_close(cause(names::GPU_MEMORY_RETIRED_PAGES, "single_bit")?, 2.0);
    assert_close(cause(names::GPU_MEMORY_RETIRED_PAGES, "double_bit")?, 1.0);
    assert_close(value(&points, names::GPU_MEMORY_RETIRED_PAGES_PENDING, 0, &[])?, 1.0);
    // Versions: the driver's on every series, CUDA's on the info series.
    let info = find(&points, names::GPU_INFO, 0, &[(names::GPU_CUDA_DRIVER_VERSION, "12.4")]);
    assert_eq!(info.len(), 1, "{points:#?}");
    assert_close(info[0].value, 1.0);
    for p in &points {
        assert_eq!(p.attrs.get(names::HW_DRIVER_VERSION).map(String::as_str), Some("550.54.15"), "{p:?}");
        assert_eq!(p.attrs.get(names::HW_MODEL).map(String::as_str), Some("NVIDIA A100-SXM4-80GB"), "{p:?}");
    }
    let kinds = |name: &str| points.iter().find(|p| p.name == name).map(|p| (p.unit.as_str(), p.kind));
    assert_eq!(kinds(names::GPU_CLOCK_THROTTLE), Some(("1", "updown")));
    assert_eq!(kinds(names::GPU_MEMORY_REMAPPED_ROWS), Some(("{row}", "gauge")));
    assert_eq!(kinds(names::GPU_MEMORY_RETIRED_PAGES), Some(("{page}", "gauge")));
    assert_eq!(kinds(names::GPU_POWER_LIMIT), Some(("W", "gauge")));

    // The driver changes: throttling stops, a row remap fails.
    let points =
        h.poll(&DCGM_DEVICE.replace("0.throttle=0xc", "0.throttle=0x1").replace("0.remap=3,1,1,0", "0.remap=3,2,0,1"))?;
    let throttle = |reason| value(&points, names::GPU_CLOCK_THROTTLE, 0, &[(names::GPU_CLOCK_THROTTLE_REASON, reason)]);
    assert_close(throttle("gpu_idle")?, 1.0);
    assert_close(throttle("sw_power_cap")?, 0.0);
    assert_close(value(&points, names::GPU_MEMORY_ROW_REMAP_FAILURE, 0, &[])?, 1.0);
    Ok(())
}

#[test]
fn an_xid_injected_mid_run_increments_its_counter() -> TestResult {
    let state = format!("{DCGM_DEVICE}log_calls=1\n");
    // XIDs that happened before telemetry started are not counted.
    let h = Harness::start(&state.replace("0.xids=", "0.xids=48"), |c| c)?;
    assert!(find(&h.collect()?, names::GPU_XID_ERRORS, 0, &[]).is_empty(), "no XID since start");
    let points = h.poll(&state.replace("0.xids=", "0.xids=48,79"))?;
    assert_close(value(&points, names::GPU_XID_ERRORS, 0, &[(names::GPU_XID, "79")])?, 1.0);
    assert!(find(&points, names::GPU_XID_ERRORS, 0, &[(names::GPU_XID, "48")]).is_empty());
    let kind = points.iter().find(|p| p.name == names::GPU_XID_ERRORS).map(|p| (p.unit.as_str(), p.kind));
    assert_eq!(kind, Some(("{error}", "counter")));
    let points = h.poll(&state.replace("0.xids=", "0.xids=48,79,79,13"))?;
    assert_close(value(&points, names::GPU_XID_ERRORS, 0, &[(names::GPU_XID, "79")])?, 2.0);
    assert_close(value(&points, names::GPU_XID_ERRORS, 0, &[(names::GPU_XID, "13")])?, 1.0);
    // The queue is read without waiting: every wait asked for a zero timeout, and a poll
    // with nothing queued reads once.
    h.update(&state.replace("0.xids=", "0.xids=48,79,79,13"))?;
    assert_eq!(h.fake.call_count(-1, "nvmlEventSetWait_v2"), 4 + 3, "3 events + one empty read per poll");
    let fake = h.shutdown("nvmlShutdown")?;
    assert_eq!(fake.call_count(-1, "nvmlEventSetFree"), 1, "the event set is freed on shutdown");
    Ok(())
}

#[test]
fn fields_the_device_cannot_report_have_no_series_and_are_asked_once() -> TestResult {
    // No power limit, throttle, remap, retired-page or XID keys: NOT_SUPPORTED everywhere;
    // the CUDA version call fails too.
    let state = "count=1\nlog_calls=1\nerr.nvmlSystemGetCudaDriverVersion_v2=3\n0.uuid=GPU-x\n0.name=X\n0.temp=50\n";
    let h = Harness::start(state, |c| c)?;
    let points = h.poll(state)?;
    for absent in [
        names::GPU_POWER_LIMIT,
        names::GPU_CLOCK_THROTTLE,
        names::GPU_MEMORY_REMAPPED_ROWS,
        names::GPU_MEMORY_ROW_REMAP_PENDING,
        names::GPU_MEMORY_ROW_REMAP_FAILURE,
        names::GPU_MEMORY_RETIRED_PAGES,
        names::GPU_MEMORY_RETIRED_PAGES_PENDING,
        names::GPU_XID_ERRORS,
        names::GPU_MEMORY_BANDWIDTH_UTILIZATION,
    ] {
        assert!(find(&points, absent, 0, &[]).is_empty(), "{absent}: {points:#?}");
    }
    let info = find(&points, names::GPU_INFO, 0, &[]);
    assert_eq!(info.len(), 1);
    assert!(!info[0].attrs.contains_key(names::GPU_CUDA_DRIVER_VERSION), "{info:?}");
    assert_close(value(&points, names::TEMPERATURE, 0, &[])?, 50.0);
    for call in [
        "nvmlDeviceGetEnforcedPowerLimit",
        "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetRetiredPagesPendingStatus",
        "nvmlDeviceRegisterEvents",
    ] {
        assert_eq!(h.fake.call_count(0, call), 1, "{call} asked once over two polls");
    }
    // No device could register: no event set is kept, so none is read.
    assert_eq!(h.fake.call_count(-1, "nvmlEventSetWait_v2"), 0);

    // Throttle reasons without a supported set: every known reason is reported.
    let state = "count=1\n0.uuid=GPU-y\n0.name=Y\n0.throttle=0x4\n";
    let h = Harness::start(state, |c| c)?;
    let points = h.collect()?;
    assert_eq!(find(&points, names::GPU_CLOCK_THROTTLE, 0, &[]).len(), 9, "{points:#?}");
    assert_close(
        value(&points, names::GPU_CLOCK_THROTTLE, 0, &[(names::GPU_CLOCK_THROTTLE_REASON, "sw_power_cap")])?,
        1.0,
    );
    Ok(())
}

#[test]
fn one_device_refusing_xid_events_leaves_the_others_registered() -> TestResult {
    let state = "count=2\n0.uuid=GPU-a\n0.name=A\n0.xids=\n1.uuid=GPU-b\n1.name=B\n1.xids=\n\
                 1.err.nvmlDeviceRegisterEvents=3\n";
    let h = Harness::start(state, |c| c)?;
    let points = h.poll(&state.replace("0.xids=\n", "0.xids=31\n").replace("1.xids=\n", "1.xids=31\n"))?;
    assert_close(value(&points, names::GPU_XID_ERRORS, 0, &[(names::GPU_XID, "31")])?, 1.0);
    assert!(find(&points, names::GPU_XID_ERRORS, 1, &[]).is_empty(), "{points:#?}");
    Ok(())
}

const THREE_GPUS: &str = "\
count=3
0.uuid=GPU-0000aaaa
0.name=Zero
0.temp=40
1.uuid=GPU-1111bbbb
1.name=One
1.temp=41
1.mig=1
1.mig.uuids=MIG-1111-slice-a,MIG-1111-slice-b
2.uuid=GPU-2222cccc
2.name=Two
2.temp=42
";

fn filtered(variable: &'static str, value: &str) -> Result<DeviceSelection, Box<dyn std::error::Error>> {
    Ok(DeviceSelection::Only(DeviceFilter::parse(variable, value)?))
}

/// The `hw.gpu.index` values of the temperature series.
fn reported(h: &Harness) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let points = h.collect()?;
    let mut indices: Vec<String> = points
        .iter()
        .filter(|p| p.name == names::TEMPERATURE)
        .filter_map(|p| p.attrs.get(names::GPU_INDEX).cloned())
        .collect();
    indices.sort();
    Ok(indices)
}

#[test]
fn only_the_visible_devices_are_reported() -> TestResult {
    for (selection, expected) in [
        (filtered(ENV_CUDA_VISIBLE_DEVICES, "2,0")?, vec!["0", "2"]),
        (filtered(ENV_CUDA_VISIBLE_DEVICES, "GPU-2222,5,0")?, vec!["2"]),
        (filtered(ENV_NVIDIA_VISIBLE_DEVICES, "GPU-1111bbbb")?, vec!["1"]),
        (filtered(ENV_GPU_DEVICES, "MIG-1111-slice-b")?, vec!["1"]),
        (filtered(ENV_GPU_DEVICES, "MIG-GPU-0000aaaa/1/0,2")?, vec!["0", "2"]),
        (DeviceSelection::All, vec!["0", "1", "2"]),
    ] {
        let h = Harness::start(THREE_GPUS, |c| c.with_devices(selection.clone()))?;
        assert_eq!(reported(&h)?, expected, "{selection:?}");
        let devices = match h.gpu.state() {
            GpuState::Running { devices, .. } => devices,
            other => panic!("{other:?}"),
        };
        assert_eq!(devices, expected.len());
    }
    Ok(())
}

#[test]
fn a_filter_hiding_every_device_or_naming_an_unknown_one_is_an_error_in_on_mode() -> TestResult {
    let fake = FakeNvml::new()?;
    fake.write_state(THREE_GPUS)?;
    let start = |selection: DeviceSelection| {
        pipetel_gpu::start(&fake.gpu_config().with_mode(GpuMode::On).with_devices(selection)).err()
    };
    for (variable, value) in
        [(ENV_CUDA_VISIBLE_DEVICES, ""), (ENV_CUDA_VISIBLE_DEVICES, "-1"), (ENV_NVIDIA_VISIBLE_DEVICES, "void")]
    {
        match start(filtered(variable, value)?) {
            Some(GpuError::NoVisibleDevice { reason }) => {
                assert_eq!(reason, format!("{variable}={value:?}"));
            }
            other => panic!("{variable}={value:?}: {other:?}"),
        }
    }
    match start(filtered(ENV_GPU_DEVICES, "0,7")?) {
        Some(e @ GpuError::UnknownDevice { .. }) => {
            let text = e.to_string();
            assert!(text.contains("PIPETEL_GPU_DEVICES=\"0,7\"") && text.contains("\"7\""), "{text}");
        }
        other => panic!("{other:?}"),
    }
    Ok(())
}
