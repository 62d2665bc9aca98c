//! The pipeline example on the fake GPU (the real `nvml-wrapper` loading the fake
//! `libnvidia-ml`): once the driver lists the example's process on the GPU, its shards' end rows
//! and its stage rows carry the GPU use attributed to them — busy seconds, the GPM SM and tensor
//! activity the driver reports, the process's GPU memory, and energy from the counter's delta.

mod support;

use std::time::{Duration, Instant};

use pipetel_gpu::test_support::FakeNvml;
use serde_json::Value;
use support::process::Process;
use support::workspace::example_command;

/// One H100-like GPU with GPM at constant rates, `pid` holding 1 GiB on it and using 40 % of
/// its SMs (all the GPU's 40 %), its energy counter at `energy` mJ.
fn state(pid: Option<u32>, energy: u64) -> String {
    let mut s = String::from(
        "count=1\n0.uuid=GPU-aaaaaaaa-1111-2222-3333-444444444444\n0.name=Fake H100\n0.util.gpu=40\n\
         0.mem.total=85899345920\n0.mem.used=2147483648\n0.mem.free=83751862272\n0.power=300000\n\
         0.gpm=1\n0.gpm.rate.sm=0.75\n0.gpm.rate.tensor=0.25\n",
    );
    s.push_str(&format!("0.energy={energy}\n"));
    if let Some(pid) = pid {
        // A fresh utilisation sample each time: 40 % SM, as the whole GPU's.
        let now_us =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
        s.push_str(&format!("0.procs={pid}:1073741824\n0.putil={pid}:{now_us}:40:10:0:0\n"));
    }
    s
}

#[test]
fn the_pipeline_examples_rows_carry_its_gpu_use() {
    let fake = FakeNvml::new().expect("the fake NVML library");
    fake.write_state(&state(None, 1_000_000)).expect("state");
    let rows_file = std::env::temp_dir().join(format!("pipetel-gpu-rows-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&rows_file);
    let mut cmd = example_command("pipeline");
    cmd.env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("NVIDIA_VISIBLE_DEVICES")
        .env_remove("PIPETEL_GPU_DEVICES")
        .env("PIPETEL_GPU", "on")
        .env("PIPETEL_NVML_LIBRARY", fake.library_path())
        .env("PIPETEL_GPU_POLL_INTERVAL", "1s")
        .env("PIPETEL_SAMPLE_INTERVAL", "500")
        .env("PIPETEL_PROMETHEUS_PORT", "0")
        .env("PIPETEL_ROWS_FILE", &rows_file)
        .args(["--seconds", "3", "--shards", "2"]);
    let mut example = Process::spawn("pipeline", cmd);
    // The driver lists the process once it runs; its energy counter climbs 50 J a second.
    let (pid, started) = (example.id(), Instant::now());
    let mut energy = 1_000_000u64;
    while started.elapsed() < Duration::from_secs(9) {
        fake.write_state(&state(Some(pid), energy)).expect("state");
        std::thread::sleep(Duration::from_millis(200));
        energy += 10_000;
    }
    let (code, output) = example.wait(Duration::from_secs(90));
    assert_eq!(code, Some(0), "{output}");
    let rows: Vec<Value> = std::fs::read_to_string(&rows_file)
        .expect("rows")
        .lines()
        .map(|l| serde_json::from_str(l).expect("row"))
        .collect();
    let _ = std::fs::remove_file(&rows_file);
    let stages: Vec<&Value> = rows.iter().filter(|r| r["event"] == "pipeline.stage").collect();
    assert_eq!(stages.len(), 3, "{output}");
    for stage in stages {
        let f = |k: &str| stage[k].as_f64().unwrap_or_else(|| panic!("{k} missing in {stage}"));
        // Busy 40 % of the time the process was listed (two shards share it, the stage sums).
        let (busy, held) = (f("pipeline.gpu.seconds"), f("pipeline.gpu.held_seconds"));
        assert!((busy - 0.4 * held).abs() < 0.05 * held, "busy {busy} of held {held}: {stage}");
        assert!((f("pipeline.gpu.sm_active") - 0.75).abs() < 0.01, "{stage}");
        assert!((f("pipeline.gpu.tensor_active") - 0.25).abs() < 0.01, "{stage}");
        assert_eq!(stage["pipeline.gpu.memory.peak_bytes"], 1_073_741_824u64, "{stage}");
        assert!(f("pipeline.gpu.energy_joules") > 0.0, "{stage}");
        assert!(f("pipeline.gpu.held_seconds") > 0.0 && f("pipeline.gpu.idle_seconds") == 0.0, "{stage}");
    }
    let end =
        rows.iter().find(|r| r["event"] == "pipeline.worker" && r["pipeline.status"] == "end").expect("an end row");
    assert!(end["pipeline.gpu.seconds"].as_f64().is_some_and(|s| s > 0.0), "{end}");
}
