//! In `auto` mode a machine without a usable GPU gets exactly one info line saying why.
//! Its own test binary: the capturing subscriber is process-global, because the line is
//! written on the poller thread.

mod common;

use std::time::Duration;

use pipetel_gpu::test_support::FakeNvml;
use pipetel_gpu::{GpuMode, GpuState};

#[test]
fn auto_mode_logs_one_info_line_saying_why() -> common::TestResult {
    let capture = common::capture_logs()?;
    let fake = FakeNvml::new()?;
    fake.write_state("count=1\nerr.nvmlInit_v2=9\n")?;
    let gpu =
        pipetel_gpu::start(&fake.gpu_config().with_platform(pipetel_gpu::GpuPlatform::Auto).with_mode(GpuMode::Auto))?;
    assert!(matches!(gpu.wait_started(Duration::from_secs(10)), GpuState::Off(_)));
    gpu.shutdown();

    let text = capture.text()?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("INFO"), "{text}");
    assert!(lines[0].contains("GPU metrics off"), "{text}");
    assert!(lines[0].contains("failed to initialise"), "{text}");
    Ok(())
}
