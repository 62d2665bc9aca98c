//! The pull endpoint route: the exporter, its GPUs those of the fake `libnvidia-ml` (read
//! through the real NVML code path), serves the GPM activity of the GPU and of its MIG
//! instance, the instance's memory and the exporter process's own GPU use on its page, with
//! the driver's values.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use pipetel_gpu::test_support::FakeNvml;

/// Kills the exporter when the test ends, passed or not.
struct Exporter(Child);

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// The page's body, or `None` while the endpoint is not up. HTTP/1.0: never chunked.
fn scrape(port: u16) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut page = String::new();
    stream.read_to_string(&mut page).ok()?;
    Some(page.split_once("\r\n\r\n")?.1.to_owned())
}

/// The value of the sample line of `name` whose labels include every pair of `labels` (a
/// pair with an empty value: the line has no such label).
fn sample(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix('{')?;
        let (inside, value) = rest.rsplit_once("} ")?;
        let found: BTreeMap<&str, &str> = inside
            .split("\",")
            .filter_map(|pair| pair.split_once("=\""))
            .map(|(k, v)| (k.trim_start_matches(','), v.trim_end_matches('"')))
            .collect();
        labels.iter().all(|(k, v)| found.get(k).copied().unwrap_or("") == *v).then(|| value.trim().parse().ok())?
    })
}

/// A sample line: the family's Prometheus name, labels, the value.
type Wanted<'a> = (&'a str, Vec<(&'a str, &'a str)>, f64);

const STATE: &str = "count=1\n0.uuid=GPU-page\n0.name=NVIDIA H100\n0.mem.total=85899345920\n0.mem.used=4294967296\n\
                     0.gpm=1\n0.gpm.rate.sm=0.75\n0.gpm.rate.tensor=0.5\n0.gpm.rate.hmma=0.5\n0.gpm.rate.nvlink.tx=200\n\
                     0.mig=1\n0.mig.uuids=MIG-page-a\n0.mig.0.mem.total=42949672960\n0.mig.0.mem.used=1073741824\n\
                     0.mig.0.gpm.rate.sm=0.25\n";

#[test]
fn the_page_serves_gpm_mig_and_process_series_with_the_drivers_values() -> Result<(), Box<dyn std::error::Error>> {
    let fake = FakeNvml::new()?;
    fake.write_state(STATE)?;
    let port = free_port()?;
    let child = Command::new(env!("CARGO_BIN_EXE_pipetel-gpu-exporter"))
        .args(["--listen", &format!("127.0.0.1:{port}"), "--interval", "1s"])
        .arg("--nvml-library")
        .arg(fake.library_path())
        .env_remove("PIPETEL_GPU_DEVICES")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let pid = child.id();
    let _exporter = Exporter(child);
    // The exporter is the process with a context on the GPU.
    fake.write_state(&format!("{STATE}0.procs={pid}:8192\n"))?;

    let pid = pid.to_string();
    let wanted: [Wanted<'_>; 7] = [
        ("hw_gpu_sm_activity_ratio", vec![("hw_gpu_mig_id", "")], 0.75),
        ("hw_gpu_sm_activity_ratio", vec![("hw_gpu_mig_id", "MIG-page-a")], 0.25),
        ("hw_gpu_tensor_activity_ratio", vec![("hw_gpu_tensor_pipe", "hmma")], 0.5),
        ("hw_gpu_nvlink_throughput_bytes_per_second", vec![("network_io_direction", "transmit")], 200.0 * 1_048_576.0),
        ("hw_gpu_memory_usage_bytes", vec![("hw_gpu_mig_id", "MIG-page-a")], 1_073_741_824.0),
        ("hw_gpu_memory_limit_bytes", vec![("hw_gpu_mig_id", "MIG-page-a")], 42_949_672_960.0),
        ("pipetel_gpu_process_memory_usage_bytes", vec![("process_pid", pid.as_str())], 8192.0),
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut page = String::new();
    loop {
        if let Some(p) = scrape(port) {
            page = p;
        }
        let missing: Vec<_> = wanted
            .iter()
            .filter(|(name, labels, want)| {
                let mut labels = labels.clone();
                labels.push(("hw_id", "GPU-page"));
                sample(&page, name, &labels).is_none_or(|got| (got - want).abs() > 1e-6 * want.abs().max(1.0))
            })
            .collect();
        if missing.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "missing or wrong {missing:?} on the page:\n{page}");
        std::thread::sleep(Duration::from_millis(200));
    }
    // The whole GPU's memory series carries no MIG id; no GPM family serves a zero for the
    // metrics the driver has no counter of.
    assert_eq!(sample(&page, "hw_gpu_memory_usage_bytes", &[("hw_gpu_mig_id", "")]), Some(4_294_967_296.0));
    assert_eq!(sample(&page, "hw_gpu_tensor_activity_ratio", &[("hw_gpu_tensor_pipe", "imma")]), None);
    assert_eq!(sample(&page, "hw_gpu_dram_activity_ratio", &[]), None);
    Ok(())
}
