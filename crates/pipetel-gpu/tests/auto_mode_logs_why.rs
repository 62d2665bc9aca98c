//! In `auto` mode a machine without a usable GPU gets exactly one info line saying why.
//! Its own test binary: the capturing subscriber is process-global, because the line is
//! written on the poller thread.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use pipetel_gpu::test_support::FakeNvml;
use pipetel_gpu::{GpuConfig, GpuMode, GpuState};

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl Write for Capture {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn auto_mode_logs_one_info_line_saying_why() -> Result<(), Box<dyn std::error::Error>> {
    let capture = Capture::default();
    let writer = capture.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .try_init()
        .map_err(|e| e.to_string())?;

    let fake = FakeNvml::new()?;
    fake.write_state("count=1\nerr.nvmlInit_v2=9\n")?;
    let gpu =
        pipetel_gpu::start(&GpuConfig::default().with_mode(GpuMode::Auto).with_library_path(fake.library_path()))?;
    assert!(matches!(gpu.wait_started(Duration::from_secs(10)), GpuState::Off(_)));
    gpu.shutdown();

    let text = String::from_utf8(capture.0.lock().unwrap_or_else(PoisonError::into_inner).clone())?;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("INFO"), "{text}");
    assert!(lines[0].contains("GPU metrics off"), "{text}");
    assert!(lines[0].contains("failed to initialise"), "{text}");
    Ok(())
}
