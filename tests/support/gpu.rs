//! The fake GPU driver state the end-to-end tests share, and the inference service running on
//! it. The fake NVML library itself, and the state file it reads, come from
//! `pipetel_gpu::test_support::FakeNvml`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pipetel_gpu::test_support::FakeNvml;

use super::ports::free_port;
use super::process::{wait_for, Process};
use super::workspace::example_serving;

/// An H200 reporting every field (power limit 700 W, throttled by the software power cap, 2
/// remapped rows, 1 retired page, XID events registered: append codes to `0.xids=` to inject
/// one; GPM at constant rates: SM activity 75 %, occupancy 50 %, tensor 25 %, FP, DRAM and NVLink;
/// no process on it until [`with_gpu_process`] lists one in `0.procs=` / `0.putil=`), an almost
/// idle L4 reporting fewer (no encoder, power, ECC, clocks, XID events or GPM) and an H100 in MIG
/// mode (no device utilisation; two MIG instances with memory and GPM of their own), in the
/// format documented at the top of `crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c`.
pub const FAKE_GPUS: &str = include_str!("fake_gpus.txt");

/// The inference service example whose GPUs are `fake`'s, serving on a free port (returned)
/// once its endpoint accepts connections; `env` adds variables.
pub fn fake_gpu_service(fake: &FakeNvml, env: &[(&str, &str)]) -> (Process, u16) {
    fake_gpu_service_lingering(fake, env, 60)
}

/// [`fake_gpu_service`], the service serving for `linger_seconds` after its work.
pub fn fake_gpu_service_lingering(fake: &FakeNvml, env: &[(&str, &str)], linger_seconds: u32) -> (Process, u16) {
    let port = free_port();
    let mut cmd = example_serving("inference_service", port);
    // Whatever GPUs the test machine gives this process, the fake's two are the service's.
    cmd.env_remove("CUDA_VISIBLE_DEVICES").env_remove("NVIDIA_VISIBLE_DEVICES").env_remove("PIPETEL_GPU_DEVICES");
    cmd.env("PIPETEL_GPU", "on")
        .env("PIPETEL_NVML_LIBRARY", fake.library_path())
        .env("PIPETEL_GPU_POLL_INTERVAL", "1s")
        .envs(env.iter().copied())
        .args(["--seconds", "2", "--linger-seconds", &linger_seconds.to_string()]);
    let process = Process::spawn("inference_service", cmd);
    wait_for("the service's endpoint", Duration::from_secs(30), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(|_| ())
    });
    (process, port)
}

/// GPU memory the process [`with_gpu_process`] lists holds on GPU 0: 1 GiB.
pub const LISTED_PROCESS_MEMORY: u64 = 1 << 30;

/// `state` (a form of [`FAKE_GPUS`]) with `pid` running on GPU 0: holding
/// [`LISTED_PROCESS_MEMORY`] and a fresh utilisation sample (40 % SM, 10 % memory controller)
/// stamped now, so the next poll reads it as new.
pub fn with_gpu_process(state: &str, pid: u32) -> String {
    let now_us = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros()).unwrap_or(0);
    let listed = state
        .replace("0.procs=\n", &format!("0.procs={pid}:{LISTED_PROCESS_MEMORY}\n"))
        .replace("0.putil=\n", &format!("0.putil={pid}:{now_us}:40:10:0:0\n"));
    assert_ne!(listed, state, "the fake GPU state has no empty 0.procs= / 0.putil= to fill");
    listed
}

/// Keeps a process listed on GPU 0 of a fake driver: writes [`with_gpu_process`] of the current
/// state every 250 ms (a driver gives a new utilisation sample each time the process runs
/// kernels) until dropped. [`GpuProcessListing::set_state`] changes the rest of the state (an
/// XID injected mid-run) without losing the process.
pub struct GpuProcessListing {
    state: Arc<Mutex<String>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    fake: Arc<FakeNvml>,
    pid: u32,
}

impl GpuProcessListing {
    /// Lists `pid` on GPU 0 of `fake` from now on, over `state`.
    pub fn start(fake: Arc<FakeNvml>, state: &str, pid: u32) -> Self {
        let shared = Arc::new(Mutex::new(state.to_string()));
        let stop = Arc::new(AtomicBool::new(false));
        fake.write_state(&with_gpu_process(state, pid)).expect("fake NVML state");
        let thread = {
            let (fake, shared, stop) = (Arc::clone(&fake), Arc::clone(&shared), Arc::clone(&stop));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    // Under the lock, so a write never undoes a newer `set_state`; a failed
                    // write leaves the previous state and the next round writes again.
                    if let Ok(state) = shared.lock() {
                        let _ = fake.write_state(&with_gpu_process(&state, pid));
                    }
                }
            })
        };
        Self { state: shared, stop, thread: Some(thread), fake, pid }
    }

    /// Replaces the state the process is listed over, at once.
    pub fn set_state(&self, state: &str) {
        let mut current = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *current = state.to_string();
        self.fake.write_state(&with_gpu_process(state, self.pid)).expect("fake NVML state");
    }
}

impl Drop for GpuProcessListing {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
