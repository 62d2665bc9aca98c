//! A GPU without GPM (one that says so, and a driver without the GPM functions at all) reports
//! no GPM series, never zeros, and exactly one info line says why. Its own test binary: the
//! capturing subscriber is process-global, because the line is written on the poller thread.

mod common;

use common::{find, Harness, TestResult};
use pipetel_gpu::names;
use pipetel_gpu::test_support::{FakeNvml, Nvml};

/// GPM counters that would give values if GPM were read.
const STATE: &str = "count=1\nlog_calls=1\n0.uuid=GPU-old\n0.name=NVIDIA A100\n0.temp=50\n\
                     0.gpm.time=1\n0.gpm.sm=0\n0.gpm.tensor=0\n";

const GPM_FAMILIES: [&str; 6] = [
    names::GPU_SM_ACTIVITY,
    names::GPU_SM_OCCUPANCY,
    names::GPU_TENSOR_ACTIVITY,
    names::GPU_PIPE_ACTIVITY,
    names::GPU_DRAM_ACTIVITY,
    names::GPU_NVLINK_THROUGHPUT,
];

/// Polls `h` three times, GPM counters moving; asserts no GPM series and the lines logged
/// since `before` lines: one, about GPM, containing `why`.
fn no_series_and_one_line(h: &Harness<Nvml>, capture: &common::Capture, before: usize, why: &str) -> TestResult {
    h.update(&STATE.replace("0.gpm.time=1", "0.gpm.time=2").replace("0.gpm.sm=0", "0.gpm.sm=1"))?;
    let points = h.poll(&STATE.replace("0.gpm.time=1", "0.gpm.time=3").replace("0.gpm.sm=0", "0.gpm.sm=2"))?;
    for name in GPM_FAMILIES {
        assert!(find(&points, name, 0, &[]).is_empty(), "{name}: {points:#?}");
    }
    assert!(!find(&points, names::TEMPERATURE, 0, &[]).is_empty(), "the other gauges go on");
    assert_eq!(h.fake.call_count(0, "nvmlGpmSampleGet"), 0, "no sample is asked of a GPU without GPM");
    let text = capture.text()?;
    let lines: Vec<&str> = text.lines().skip(before).filter(|l| l.contains("GPM")).collect();
    assert_eq!(lines.len(), 1, "{text}");
    assert!(lines[0].contains("INFO") && lines[0].contains("off for GPU 0") && lines[0].contains(why), "{text}");
    assert!(!text.contains("WARN"), "{text}");
    Ok(())
}

#[test]
fn gpus_without_gpm_report_no_gpm_series_and_one_line_why() -> TestResult {
    let capture = common::capture_logs()?;
    // The device says GPM is not supported (an A100).
    let h = Harness::<Nvml>::start(&format!("{STATE}0.gpm=0\n"), |c| c)?;
    let before = 0;
    no_series_and_one_line(&h, &capture, before, "does not support GPM")?;
    h.gpu.shutdown();

    // A driver without the GPM symbols (nvml-wrapper: FailedToLoadSymbol).
    let before = capture.text()?.lines().count();
    let fake = FakeNvml::without_gpm()?;
    let h = Harness::<Nvml>::start_with(fake, &format!("{STATE}0.gpm=1\n"), |c| c)?;
    no_series_and_one_line(&h, &capture, before, "no GPM functions")?;
    Ok(())
}
