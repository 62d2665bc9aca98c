//! The fake GPU driver state the end-to-end tests share. The fake NVML library itself, and the
//! state file it reads, come from `pipetel_gpu::test_support::FakeNvml`.

/// An H200 reporting every field (power limit 700 W, throttled by the software power cap, 2
/// remapped rows, 1 retired page, XID events registered: append codes to `0.xids=` to inject
/// one) and an almost idle L4 reporting fewer (no encoder, power, ECC, clocks or XID events),
/// in the format documented at the top of
/// `crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c`.
pub const FAKE_GPUS: &str = include_str!("fake_gpus.txt");
