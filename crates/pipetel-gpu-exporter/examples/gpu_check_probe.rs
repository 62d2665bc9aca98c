//! The pipetel side of `scripts/gpu-check`: runs a command (the GPU load) as shard 0 of a
//! pipetel stage with GPU telemetry on (1 s polls, the command's GPU use counted as this
//! process's descendant), writes every poll's readings as JSON lines, then measures the CPU
//! cost of one poll and prints a summary line.
//!
//! ```text
//! gpu_check_probe --out polls.jsonl [--polls 200] -- python3 load.py ...
//! ```
//! NVML is `PIPETEL_NVML_LIBRARY` if set, else `libnvidia-ml.so.1`. Built with
//! `cargo build --release -p pipetel-gpu-exporter --example gpu_check_probe`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pipetel::gpu::{GpuConfig, GpuMode, GpuSample, GpuSource, NvmlOptions, NvmlSource};

const USAGE: &str = "usage: gpu_check_probe --out FILE [--polls N] -- COMMAND [ARGS...]";

fn secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// `Some(x)` as a JSON number, `None` as `null`.
fn num<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

/// One JSON line per answering GPU of `sample`.
fn lines(sample: &GpuSample) -> String {
    let mut out = String::new();
    for d in &sample.devices {
        let g = d.gpm.unwrap_or_default();
        let mut procs = String::new();
        for (i, p) in d.processes.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            let _ = write!(
                procs,
                "{sep}{{\"pid\":{},\"memory_bytes\":{},\"sm\":{}}}",
                p.pid,
                num(p.memory_used_bytes),
                num(p.sm_utilization)
            );
        }
        let _ = writeln!(
            out,
            "{{\"t\":{:.3},\"index\":{},\"id\":\"{}\",\"utilization\":{},\"sm_active\":{},\"tensor_active\":{},\
             \"tensor_hmma_active\":{},\"dram_active\":{},\"memory_used_bytes\":{},\"energy_mj\":{},\"power_w\":{},\
             \"processes\":[{procs}]}}",
            secs(sample.taken_at),
            d.info.index,
            d.info.id,
            num(d.utilization),
            num(g.sm_active),
            num(g.tensor_active),
            num(g.tensor_hmma_active),
            num(g.dram_active),
            num(d.memory_used_bytes),
            num(d.energy_millijoules),
            num(d.power_watts),
        );
    }
    out
}

/// This process's CPU time (user + system) from `/proc/self/stat`, in clock ticks (1/100 s).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let mut f = stat[stat.rfind(')')? + 1..].split_whitespace();
    let utime: u64 = f.nth(11)?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(utime + stime)
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let split = args.iter().position(|a| a == "--").ok_or(USAGE)?;
    let (flags, command) = (&args[..split], &args[split + 1..]);
    let mut out: Option<PathBuf> = None;
    let mut polls = 200u32;
    let mut it = flags.iter();
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--out" => out = Some(value.into()),
            "--polls" => polls = value.parse().map_err(|_| format!("--polls {value:?}: not a count"))?,
            _ => return Err(format!("unknown flag {flag}\n{USAGE}").into()),
        }
    }
    let (out, program) = (out.ok_or(USAGE)?, command.first().ok_or(USAGE)?);

    let gpu = GpuConfig::from_env()?
        .with_mode(GpuMode::On)
        .with_poll_interval(Duration::from_secs(1))
        .with_process_memory(true);
    let library = gpu.nvml_library.clone();
    let config = pipetel::Config::from_env()?
        .with_service_name("gpu-check")
        .with_metrics_exporters([])
        .with_traces_exporters([])
        .with_logs_exporters([])
        .with_console_log(false)
        .with_rows(false)
        .with_gpu(gpu);
    let telemetry = pipetel::init(config)?;
    let mut file = std::fs::File::create(&out)?;

    let stage = pipetel::stage("gpu-check").start();
    let shard = stage.shard(0).start();
    let mut child = Command::new(program).args(&command[1..]).spawn()?;
    eprintln!("gpu_check_probe: load running as pid {}", child.id());
    let mut last = None;
    let status = loop {
        if let Some(sample) = pipetel::gpu_snapshot() {
            if last != Some(sample.taken_at) {
                last = Some(sample.taken_at);
                file.write_all(lines(&sample).as_bytes())?;
            }
        }
        if let Some(status) = child.try_wait()? {
            break status;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    shard.finish();
    // The GPU use attributed to the stage (the row carries the same: `pipeline.gpu.*`).
    let gpu = stage.answers().gpu;
    let stage_row = format!("{:?} gpu: {gpu:?}", stage.finish());
    drop(telemetry);

    // One poll of every device, as the poller makes it (GPM and this process's use included).
    let mut source = NvmlSource::open(library.as_deref(), NvmlOptions::default())?;
    let devices = source.devices().count().max(1);
    let (ticks0, t0) = (cpu_ticks(), Instant::now());
    for _ in 0..polls {
        source.sample()?;
    }
    let wall_ms = t0.elapsed().as_secs_f64() * 1e3 / f64::from(polls);
    let cpu_ms = match (ticks0, cpu_ticks()) {
        (Some(a), Some(b)) => Some((b - a) as f64 * 10.0 / f64::from(polls)),
        _ => None,
    };
    println!(
        "{{\"load_status\":{},\"devices\":{devices},\"polls\":{polls},\"poll_wall_ms\":{wall_ms:.4},\"poll_cpu_ms\":{},\
         \"stage_row\":{:?}}}",
        status.code().unwrap_or(-1),
        num(cpu_ms.map(|c| format!("{c:.4}"))),
        stage_row,
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_check_probe: {e}");
            ExitCode::FAILURE
        }
    }
}
