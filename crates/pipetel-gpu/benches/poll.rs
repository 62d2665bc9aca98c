//! Cost of one NVML poll, per device, against the fake driver (`tests/fake_nvml`), and of
//! the read a metric callback makes. With `PIPETEL_BENCH_REAL_NVML=1` (as `scripts/gpu-check`
//! sets it) the same bench polls the real driver instead.
//!
//! Run: `cargo bench -p pipetel-gpu --bench poll`.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pipetel_gpu::test_support::FakeNvml;
use pipetel_gpu::{GpuPoller, GpuSource, NvmlOptions, NvmlSource};

/// State for `n` fully featured devices, GPM (Hopper) and this process's use included.
fn state(n: u32) -> String {
    let me = std::process::id();
    let mut s = format!("count={n}\n");
    for i in 0..n {
        s.push_str(&format!(
            "{i}.uuid=GPU-{i:08}\n{i}.name=Fake\n{i}.util.gpu=50\n{i}.util.mem=5\n{i}.enc=1\n{i}.dec=2\n\
             {i}.mem.total=85899345920\n{i}.mem.used=1073741824\n{i}.power=300000\n{i}.energy=1000000\n\
             {i}.temp=60\n{i}.ecc.corrected=0\n{i}.ecc.uncorrected=0\n{i}.clock.graphics=1700\n\
             {i}.clock.sm=1700\n{i}.clock.mem=2600\n{i}.clock.video=1500\n{i}.fans=1\n{i}.fan.0=40\n\
             {i}.pcie.tx=100\n{i}.pcie.rx=100\n{i}.procs={me}:1024,1:1024\n\
             {i}.putil={me}:1000:50:20:0:0\n{i}.gpm=1\n{i}.gpm.rate.sm=0.75\n{i}.gpm.rate.occupancy=0.3\n\
             {i}.gpm.rate.tensor=0.5\n{i}.gpm.rate.hmma=0.5\n{i}.gpm.rate.dram=0.25\n{i}.gpm.rate.fp32=0.1\n\
             {i}.gpm.rate.pcie.tx=10\n{i}.gpm.rate.nvlink.tx=200\n"
        ));
    }
    s
}

fn real() -> bool {
    std::env::var("PIPETEL_BENCH_REAL_NVML").as_deref() == Ok("1")
}

/// The library to poll: the real driver (`PIPETEL_NVML_LIBRARY` or the default name) when
/// `PIPETEL_BENCH_REAL_NVML=1`, else a fake.
fn library(devices: u32) -> Option<(Option<FakeNvml>, Option<std::path::PathBuf>)> {
    if real() {
        let path = std::env::var_os(pipetel_gpu::ENV_NVML_LIBRARY).map(std::path::PathBuf::from);
        return Some((None, path));
    }
    let fake = FakeNvml::new().ok()?;
    fake.write_state(&state(devices)).ok()?;
    let path = fake.library_path();
    Some((Some(fake), Some(path)))
}

fn poll(c: &mut Criterion) {
    let mut group = c.benchmark_group("poll");
    for (label, options) in [("default", NvmlOptions::default()), ("process_memory", NvmlOptions::new(false, true))] {
        // The real driver has the devices it has: one run. The fake: 1 and 8 devices.
        let counts: &[u32] = if real() { &[0] } else { &[1, 8] };
        for &devices in counts {
            let Some((_fake, path)) = library(devices) else {
                eprintln!("cannot build the fake NVML library; skipping");
                return;
            };
            let mut source = match NvmlSource::open(path.as_deref(), options) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("cannot open NVML: {e}; skipping");
                    return;
                }
            };
            let n = source.devices().count() as u64;
            group.throughput(Throughput::Elements(n));
            group.bench_with_input(BenchmarkId::new(label, n), &n, |b, _| {
                b.iter(|| source.sample());
            });
        }
    }
    group.finish();
}

fn read_cached(c: &mut Criterion) {
    let Some((_fake, path)) = library(8) else {
        return;
    };
    let Ok(poller) =
        GpuPoller::spawn(Duration::from_secs(60), move || NvmlSource::open(path.as_deref(), NvmlOptions::default()))
    else {
        return;
    };
    if !matches!(poller.wait_started(Duration::from_secs(10)), pipetel_gpu::GpuState::Running { .. }) {
        eprintln!("NVML did not open; skipping read_cached_sample");
        return;
    }
    let reader = poller.reader();
    c.bench_function("read_cached_sample", |b| b.iter(|| reader.latest()));
}

criterion_group!(benches, poll, read_cached);
criterion_main!(benches);
