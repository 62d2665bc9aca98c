//! Prints what the GPU poller reads, as a table, every interval for a while (`--help` lists the
//! flags).
//!
//! ```text
//! cargo run -p pipetel-gpu --example gpu_dump -- [--seconds 30] [--interval 1] \
//!     [--library /path/to/libnvidia-ml.so.1] [--rocm-library /path/to/librocm_smi64.so] \
//!     [--pcie] [--process-memory] [--csv]
//! ```
//!
//! `--csv` prints one line per device and poll
//! (`time,index,uuid,util,mem_used_mib,mem_total_mib,power_w,temp_c,sm_mhz,mem_mhz`) in the
//! shape `nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,
//! memory.total,power.draw,temperature.gpu,clocks.sm,clocks.mem --format=csv` prints, so the
//! two can be compared line by line. `PIPETEL_NVML_LIBRARY`, `PIPETEL_ROCM_SMI_LIBRARY` and
//! `PIPETEL_GPU_PLATFORM` are honoured like in pipetel; AMD GPUs need `--features amd`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use pipetel_gpu::{DeviceSample, DeviceStatus, GpuConfig, GpuMode};

struct Args {
    seconds: u64,
    config: GpuConfig,
    csv: bool,
}

fn parse_args() -> Result<Args, String> {
    use clap::{value_parser, Arg, ArgAction, Command};
    let flag = |name: &'static str, help: &'static str| Arg::new(name).long(name).action(ArgAction::SetTrue).help(help);
    let m = Command::new("gpu_dump")
        .about("Prints what the GPU poller reads, as a table (or CSV shaped like nvidia-smi's), every interval")
        .arg(
            Arg::new("seconds")
                .long("seconds")
                .value_name("N")
                .value_parser(value_parser!(u64))
                .default_value("10")
                .help("How long to poll"),
        )
        .arg(
            Arg::new("interval")
                .long("interval")
                .value_name("SECONDS")
                .value_parser(value_parser!(f64))
                .default_value("1")
                .help("Seconds between polls (a fraction is fine)"),
        )
        .arg(Arg::new("library").long("library").value_name("PATH").help("The NVML library to load"))
        .arg(Arg::new("rocm-library").long("rocm-library").value_name("PATH").help("The ROCm SMI library to load"))
        .arg(flag("pcie", "Also read PCIe throughput"))
        .arg(flag("process-memory", "Also read each process's GPU memory"))
        .arg(flag("csv", "One CSV line per device and poll, in nvidia-smi --query-gpu's shape"))
        .get_matches();
    let mut config = GpuConfig::from_env().map_err(|e| e.to_string())?.with_mode(GpuMode::On);
    let interval_s = m.get_one::<f64>("interval").copied().unwrap_or(1.0);
    let interval = Duration::try_from_secs_f64(interval_s).map_err(|e| format!("--interval: {e}"))?;
    config = config.with_poll_interval(interval);
    if let Some(path) = m.get_one::<String>("library") {
        config = config.with_nvml_library(path.clone());
    }
    if let Some(path) = m.get_one::<String>("rocm-library") {
        config = config.with_rocm_smi_library(path.clone());
    }
    if m.get_flag("pcie") {
        config = config.with_pcie_throughput(true);
    }
    if m.get_flag("process-memory") {
        config = config.with_process_memory(true);
    }
    Ok(Args { seconds: m.get_one("seconds").copied().unwrap_or(10), config, csv: m.get_flag("csv") })
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn mib(bytes: Option<u64>) -> Option<u64> {
    bytes.map(|b| b / (1024 * 1024))
}

fn mhz(hz: Option<u64>) -> Option<u64> {
    hz.map(|h| h / 1_000_000)
}

fn pct(ratio: Option<f64>) -> Option<String> {
    ratio.map(|r| format!("{:.0}", r * 100.0))
}

fn print_table(elapsed: Duration, devices: &[DeviceSample]) {
    println!("--- t={:.1}s", elapsed.as_secs_f64());
    println!(
        "{:>3} {:<42} {:<24} {:>6} {:>4} {:>4} {:>9} {:>9} {:>8} {:>12} {:>5} {:>6} {:>6} {:>6} {:>9} {:>9} {:>10}",
        "idx",
        "uuid",
        "name",
        "status",
        "util",
        "enc",
        "mem MiB",
        "tot MiB",
        "power W",
        "energy J",
        "temp",
        "gr MHz",
        "sm MHz",
        "memMHz",
        "fan %",
        "ecc c/u",
        "proc MiB"
    );
    for d in devices {
        let fans: Vec<String> = d.fan_speeds.iter().map(|(_, r)| format!("{:.0}", r * 100.0)).collect();
        let name: String = d.info.name.chars().take(24).collect();
        println!(
            "{:>3} {:<42} {:<24} {:>6} {:>4} {:>4} {:>9} {:>9} {:>8} {:>12} {:>5} {:>6} {:>6} {:>6} {:>9} {:>9} {:>10}",
            d.info.index,
            d.info.id,
            name,
            if d.status == DeviceStatus::Ok { "ok" } else { "FAILED" },
            opt(pct(d.utilization)),
            opt(pct(d.encoder_utilization)),
            opt(mib(d.memory_used_bytes)),
            opt(mib(d.memory_total_bytes)),
            opt(d.power_watts.map(|w| format!("{w:.1}"))),
            opt(d.energy_joules.map(|j| format!("{j:.0}"))),
            opt(d.temperature_celsius),
            opt(mhz(d.clocks.graphics_hz)),
            opt(mhz(d.clocks.sm_hz)),
            opt(mhz(d.clocks.memory_hz)),
            if fans.is_empty() { "-".to_owned() } else { fans.join("/") },
            format!("{}/{}", opt(d.ecc_corrected), opt(d.ecc_uncorrected)),
            opt(mib(d.process_memory_bytes)),
        );
        if d.pcie_tx_bytes_per_second.is_some() || d.pcie_rx_bytes_per_second.is_some() {
            println!("    pcie tx {} B/s rx {} B/s", opt(d.pcie_tx_bytes_per_second), opt(d.pcie_rx_bytes_per_second));
        }
    }
}

fn print_csv(devices: &[DeviceSample]) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
    for d in devices {
        println!(
            "{now:.1},{},{},{},{},{},{},{},{},{}",
            d.info.index,
            d.info.id,
            opt(pct(d.utilization)),
            opt(mib(d.memory_used_bytes)),
            opt(mib(d.memory_total_bytes)),
            opt(d.power_watts.map(|w| format!("{w:.2}"))),
            opt(d.temperature_celsius),
            opt(mhz(d.clocks.sm_hz)),
            opt(mhz(d.clocks.memory_hz)),
        );
    }
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("gpu_dump: {e}");
            return ExitCode::from(2);
        }
    };
    let interval = args.config.poll_interval;
    let gpu = match pipetel_gpu::start(&args.config) {
        Ok(g) => g,
        Err(e) => {
            eprintln!("gpu_dump: {e}");
            return ExitCode::FAILURE;
        }
    };
    if args.csv {
        println!("time,index,uuid,util,mem_used_mib,mem_total_mib,power_w,temp_c,sm_mhz,mem_mhz");
    }
    let started = Instant::now();
    let end = started + Duration::from_secs(args.seconds);
    loop {
        match gpu.latest() {
            Some(sample) if args.csv => print_csv(&sample.devices),
            Some(sample) => print_table(started.elapsed(), &sample.devices),
            None => eprintln!("gpu_dump: no sample yet"),
        }
        if Instant::now() + interval > end {
            break;
        }
        std::thread::sleep(interval);
    }
    gpu.shutdown();
    ExitCode::SUCCESS
}
