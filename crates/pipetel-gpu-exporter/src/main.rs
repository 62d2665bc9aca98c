//! `pipetel-gpu-exporter`: serves only the GPU gauges on its own port — a drop-in for a
//! node-level GPU exporter.
//!
//! ```text
//! pipetel-gpu-exporter --listen 0.0.0.0:9835 --interval 5s --nvml-library /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1
//! ```
//! The GPU is required: without a usable NVML library the exporter exits with the reason.
//!
//! Unlike a program using pipetel, the exporter reports every GPU of the node by default,
//! whatever `CUDA_VISIBLE_DEVICES` says. `--devices` (or `PIPETEL_GPU_DEVICES`; the flag wins)
//! narrows it: `all`, `visible` (the process's `CUDA_VISIBLE_DEVICES` /
//! `NVIDIA_VISIBLE_DEVICES`), or a comma list of indices, `GPU-…` UUIDs and `MIG-…` ids.

// Every public item is documented (also set for the workspace; here it travels with the source).
#![warn(missing_docs)]
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use pipetel::gpu::DeviceSelection;
use pipetel::recorders::duration::{self, BareUnit};

const USAGE: &str =
    "usage: pipetel-gpu-exporter [--listen HOST:PORT] [--interval DURATION] [--nvml-library PATH] [--path /metrics] [--devices LIST]
  --listen        address to serve on (default 127.0.0.1:9835)
  --interval      NVML poll interval: 5s, 1500ms, 2m or seconds (default 5s, at least 1s)
  --nvml-library  path of libnvidia-ml (default: the loader's search path)
  --path          the metrics path (default /metrics)
  --devices       GPUs to report: all (default), visible, or indices / GPU-… UUIDs / MIG-… ids,
                  comma-separated (default: PIPETEL_GPU_DEVICES, else all)";

struct Args {
    host: String,
    port: u16,
    interval: Duration,
    library: Option<String>,
    path: String,
    /// `None`: not given on the command line.
    devices: Option<DeviceSelection>,
}

fn parse_args(args: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut out = Args {
        host: "127.0.0.1".into(),
        port: 9835,
        interval: Duration::from_secs(5),
        library: None,
        path: "/metrics".into(),
        devices: None,
    };
    let mut it = args;
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            return Err(USAGE.into());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--listen" => {
                let (host, port) =
                    value.rsplit_once(':').ok_or_else(|| format!("--listen {value:?}: expected HOST:PORT"))?;
                out.host = host.trim_start_matches('[').trim_end_matches(']').to_string();
                out.port = port.parse().map_err(|_| format!("--listen {value:?}: {port:?} is not a port"))?;
            }
            "--interval" => {
                out.interval =
                    duration::parse(&value, BareUnit::Seconds).map_err(|e| format!("--interval {value:?}: {e}"))?
            }
            "--nvml-library" => out.library = Some(value),
            "--path" => out.path = value,
            "--devices" => {
                out.devices = Some(value.parse().map_err(|e| format!("--devices {value:?}: {e}"))?);
            }
            _ => return Err(format!("unknown flag {flag}\n{USAGE}")),
        }
    }
    Ok(out)
}

/// The devices to report: the flag, else `PIPETEL_GPU_DEVICES`, else every device.
fn devices(flag: Option<DeviceSelection>, env: Option<String>) -> Result<DeviceSelection, String> {
    if let Some(selection) = flag {
        return Ok(selection);
    }
    match env.filter(|v| !v.trim().is_empty()) {
        Some(v) => v.parse().map_err(|e| format!("{}={v:?} is not valid: {e}", pipetel::gpu::ENV_GPU_DEVICES)),
        None => Ok(DeviceSelection::All),
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args(std::env::args().skip(1))?;
    let selection = devices(args.devices.clone(), std::env::var(pipetel::gpu::ENV_GPU_DEVICES).ok())?;
    let mut gpu = pipetel::gpu::GpuConfig::default()
        .with_mode(pipetel::gpu::GpuMode::On)
        .with_poll_interval(args.interval)
        .with_devices(selection);
    if let Some(lib) = &args.library {
        gpu = gpu.with_nvml_library(lib);
    }
    let config = pipetel::Config::from_env()?
        .with_service_name("pipetel-gpu-exporter")
        .with_metrics_exporters([pipetel::config::MetricExporter::Prometheus])
        .with_traces_exporters([])
        .with_logs_exporters([])
        .with_prometheus_host(args.host)
        .with_prometheus_port(args.port)
        .with_prometheus_path(args.path.clone())
        .with_gpu(gpu);
    let telemetry = pipetel::init(config)?;
    if let Some(addr) = telemetry.prometheus_addr() {
        println!("serving GPU metrics at http://{addr}{}", args.path);
    }
    // Serve until killed; the endpoint and the poller run on their own threads.
    loop {
        std::thread::park();
    }
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(a: &[&str]) -> Result<Args, String> {
        parse_args(a.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags_parse_and_bad_ones_name_themselves() {
        let a = parse(&["--listen", "0.0.0.0:9900", "--interval", "1500ms", "--nvml-library", "/x/libnvidia-ml.so.1"])
            .expect("valid");
        assert_eq!((a.host.as_str(), a.port, a.interval), ("0.0.0.0", 9900, Duration::from_millis(1500)));
        assert_eq!(a.library.as_deref(), Some("/x/libnvidia-ml.so.1"));
        assert_eq!(parse(&["--interval", "2"]).expect("seconds").interval, Duration::from_secs(2));
        for (bad, culprit) in [
            (&["--listen", "nope"][..], "nope"),
            (&["--listen", "h:99999"][..], "99999"),
            (&["--interval", "soon"][..], "soon"),
            (&["--colour", "x"][..], "--colour"),
            (&["--listen"][..], "--listen"),
            (&["--devices", "gpu0"][..], "gpu0"),
        ] {
            let err = parse(bad).err().expect("refused");
            assert!(err.contains(culprit), "{err}");
        }
    }
}

#[cfg(test)]
mod device_tests {
    use super::*;

    #[test]
    fn every_device_by_default_and_the_flag_beats_the_variable() {
        assert_eq!(devices(None, None), Ok(DeviceSelection::All));
        assert_eq!(devices(None, Some(" ".into())), Ok(DeviceSelection::All));
        assert_eq!(devices(None, Some("visible".into())), Ok(DeviceSelection::Visible));
        assert_eq!(devices(Some(DeviceSelection::All), Some("0".into())), Ok(DeviceSelection::All));
        assert!(matches!(devices(None, Some("1,GPU-ab".into())), Ok(DeviceSelection::Only(_))));
        let err = devices(None, Some("first".into())).expect_err("not a device");
        assert!(err.contains("PIPETEL_GPU_DEVICES=\"first\""), "{err}");
        let flag = parse_args(["--devices", "0,2"].iter().map(|s| s.to_string())).expect("valid").devices;
        assert!(matches!(flag, Some(DeviceSelection::Only(_))), "{flag:?}");
    }
}
