//! One info line at start says which GPUs are reported and why. Its own test binary: the
//! capturing subscriber is process-global, because the line is written on the poller thread.

mod common;

use std::time::Duration;

use pipetel_gpu::test_support::FakeNvml;
use pipetel_gpu::{DeviceFilter, DeviceSelection, GpuMode, GpuState, ENV_CUDA_VISIBLE_DEVICES};

#[test]
fn the_kept_devices_and_the_reason_are_logged_once() -> common::TestResult {
    let capture = common::capture_logs()?;
    let fake = FakeNvml::new()?;
    fake.write_state("count=3\n0.uuid=GPU-a\n1.uuid=GPU-b\n2.uuid=GPU-c\n")?;
    let devices = DeviceSelection::Only(DeviceFilter::parse(ENV_CUDA_VISIBLE_DEVICES, "2,GPU-a")?);
    let gpu = pipetel_gpu::start(&fake.gpu_config().with_mode(GpuMode::On).with_devices(devices))?;
    assert!(matches!(gpu.wait_started(Duration::from_secs(10)), GpuState::Running { devices: 2, .. }));
    assert!(gpu.refresh(Duration::from_secs(10)));
    gpu.shutdown();

    let text = capture.text()?;
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("GPU devices reported")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("INFO"), "{text}");
    assert!(lines[0].contains("2 of 3 (CUDA_VISIBLE_DEVICES=\"2,GPU-a\")"), "{text}");
    assert!(lines[0].contains("[0, 2]"), "{text}");
    Ok(())
}
