//! The fake GPU driver state the end-to-end tests share. The fake NVML library itself, and the
//! state file it reads, come from `pipetel_gpu::test_support::FakeNvml`.

/// An H200 reporting every field and an almost idle L4 reporting fewer (no encoder, power, ECC
/// or clocks), in the format documented at the top of
/// `crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c`.
pub const FAKE_GPUS: &str = include_str!("fake_gpus.txt");
