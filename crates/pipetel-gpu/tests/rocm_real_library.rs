//! The ROCm SMI library installed on this machine (Debian's `librocm-smi64-1` in CI, which
//! `scripts/test` installs), found by its usual names. Without an AMD GPU, `auto` logs one
//! info line saying why and `on` returns the error; with one, telemetry runs. Its own test
//! binary: the capturing subscriber is process-global, because the line is written on the
//! poller thread.
#![cfg(feature = "amd")]

mod common;

use std::path::Path;
use std::time::Duration;

use pipetel_gpu::{GpuConfig, GpuError, GpuMode, GpuPlatform, GpuState, DEFAULT_ROCM_SMI_LIBRARIES};

/// Where Debian and Ubuntu install the library.
const DEBIAN_LIBRARY: &str = "/usr/lib/librocm_smi64.so.1";

#[test]
fn installed_rocm_smi_without_a_device_is_off_in_auto_and_an_error_in_on() -> common::TestResult {
    let capture = common::capture_logs()?;
    let amd = GpuConfig::default().with_platform(GpuPlatform::Amd);
    let on = pipetel_gpu::start(&amd.clone().with_mode(GpuMode::On));
    let auto = pipetel_gpu::start(&amd.with_mode(GpuMode::Auto))?;
    let auto_state = auto.wait_started(Duration::from_secs(30));
    auto.shutdown();
    let text = capture.text()?;
    let lines: Vec<&str> = text.lines().filter(|l| !l.contains("GPU answers")).collect();

    match on {
        // A machine with an AMD GPU: the real library runs.
        Ok(gpu) => {
            assert!(matches!(gpu.state(), GpuState::Running { platform: "amd", devices } if devices > 0));
            assert!(matches!(auto_state, GpuState::Running { platform: "amd", .. }), "{auto_state:?}");
            assert!(text.contains("GPU metrics on (ROCm SMI)"), "{text}");
        }
        Err(err) => {
            match &err {
                // The library loads and says why it cannot start (no amdgpu, no /sys/class/drm).
                GpuError::InitFailed { library, reason } => {
                    assert!(library.contains("librocm_smi64"), "{err}");
                    assert!(reason.contains("status"), "the library's status must be named: {err}");
                }
                GpuError::NoDevice { library } => assert!(library.contains("librocm_smi64"), "{err}"),
                GpuError::LibraryNotLoaded { library, .. } => {
                    // Only acceptable where no ROCm SMI is installed at all.
                    assert!(!Path::new(DEBIAN_LIBRARY).exists(), "{DEBIAN_LIBRARY} exists but did not load: {err}");
                    for name in DEFAULT_ROCM_SMI_LIBRARIES {
                        assert!(library.contains(name), "{err}");
                    }
                }
                other => panic!("unexpected error {other:?}"),
            }
            assert_eq!(auto_state, GpuState::Off(err.clone()));
            assert_eq!(lines.len(), 1, "{text}");
            assert!(lines[0].contains("INFO"), "{text}");
            assert!(lines[0].contains(&format!("GPU metrics off: {err}")), "{text}");
        }
    }
    Ok(())
}
