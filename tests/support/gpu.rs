//! The fake GPU driver state the end-to-end tests share, and the inference service running on
//! it. The fake NVML library itself, and the state file it reads, come from
//! `pipetel_gpu::test_support::FakeNvml`.

use std::time::Duration;

use pipetel_gpu::test_support::FakeNvml;

use super::ports::free_port;
use super::process::{wait_for, Process};
use super::workspace::example_serving;

/// An H200 reporting every field (power limit 700 W, throttled by the software power cap, 2
/// remapped rows, 1 retired page, XID events registered: append codes to `0.xids=` to inject
/// one) and an almost idle L4 reporting fewer (no encoder, power, ECC, clocks or XID events),
/// in the format documented at the top of
/// `crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c`.
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
