//! GPU telemetry for pipetel: NVML read on one background thread, exposed as OpenTelemetry
//! observable instruments named after the hardware semantic conventions.
//!
//! # Overview
//!
//! - A [`GpuSource`] reads all devices of one vendor library at once into a [`GpuSample`].
//!   [`NvmlSource`] does it for NVIDIA through `nvml-wrapper`, which loads
//!   `libnvidia-ml.so.1` at run time: building needs no driver. `AmdSource` (feature
//!   `amd`) does it for AMD through ROCm SMI, `librocm_smi64` opened at run time the same
//!   way: building needs no ROCm. Both report under the same metric names.
//! - A [`GpuPoller`] owns the source on its own thread (opening NVML can take seconds or
//!   hang, so never on the caller's thread), polls every interval (default 5 s, minimum 1 s)
//!   and swaps the latest sample in whole, so the values of one poll stay together.
//! - [`register_metrics`] registers observable instruments whose callbacks only read that
//!   cached sample: a scrape never waits on the driver.
//! - [`start`] ties it together from a [`GpuConfig`] and returns a [`GpuTelemetry`] handle.
//!
//! Both sources follow one polling policy: a field a device cannot report (`NotSupported`,
//! `NoPermission`, a symbol the driver lacks) yields no series, never a zero, and is not asked
//! again; any other error skips the field for one poll (warned once per field). A lost device reports
//! `hw.status{hw.state="failed"} 1` and nothing else. MIG-enabled devices report no
//! utilisation, but each MIG instance's memory and GPM activity. On Hopper and later NVML's GPM
//! gives SM, tensor, FP pipe and DRAM activity and NVLink / PCIe rates, computed by the driver
//! from this poll's sample and the previous one's (so from the second poll on); older GPUs give
//! no such series and one info line says why. Each process with a context on a GPU (this one,
//! and opted in its descendants) reports its utilisation and memory by `process.pid`;
//! [`GpuSample::readings`] reduces a poll to what attributing GPU use to a stage needs. Metric
//! and attribute names are listed in [`names`].
//!
//! # Quick start
//!
//! ```
//! use opentelemetry::metrics::MeterProvider as _;
//! use opentelemetry_sdk::metrics::SdkMeterProvider;
//! use pipetel_gpu::{GpuConfig, GpuMode};
//!
//! # fn main() -> Result<(), pipetel_gpu::GpuError> {
//! let provider = SdkMeterProvider::builder().build();
//! // Auto: on a machine without a GPU this logs one info line and carries on.
//! let gpu = pipetel_gpu::start(&GpuConfig::default().with_mode(GpuMode::Auto))?;
//! gpu.register_metrics(&provider.meter("pipetel-gpu"));
//! // ... the program runs; exporters collect hw.gpu.* from the cached sample ...
//! gpu.shutdown();
//! # Ok(())
//! # }
//! ```
//!
//! # Features
//!
//! | feature | default | what |
//! | --- | --- | --- |
//! | `amd` | no | AMD GPUs through ROCm SMI, loaded at run time (no ROCm needed to build) |
//! | `test-support` | no | `test_support`: builds fake `libnvidia-ml` / `librocm_smi64` libraries for tests without a GPU |
//!
//! Without `amd`, `platform = amd` is an error saying which feature to enable, and `auto`
//! means NVML only.
//!
//! # Environment
//!
//! Read by [`GpuConfig::from_env`]; values set in code win.
//!
//! | variable | values | default |
//! | --- | --- | --- |
//! | `PIPETEL_GPU` ([`ENV_GPU_MODE`]) | `auto`, `on`, `off` | `auto` |
//! | `PIPETEL_GPU_POLL_INTERVAL` ([`ENV_GPU_POLL_INTERVAL`]) | `5s`, `1500ms`, `2m`, `2` (bare: seconds); at least 1 s | `5s` |
//! | `PIPETEL_GPU_PLATFORM` ([`ENV_GPU_PLATFORM`]) | `auto`, `nvidia`, `amd` | `auto` |
//! | `PIPETEL_NVML_LIBRARY` ([`ENV_NVML_LIBRARY`]) | file name or path of NVML | `libnvidia-ml.so.1` |
//! | `PIPETEL_ROCM_SMI_LIBRARY` ([`ENV_ROCM_SMI_LIBRARY`]) | file name or path of ROCm SMI (`amd`) | `librocm_smi64.so.7`, `.6`, `.5`, `.1`, … |
//! | `PIPETEL_GPU_PCIE_THROUGHPUT` ([`ENV_GPU_PCIE_THROUGHPUT`]) | `true`, `false` | `false` |
//! | `PIPETEL_GPU_PROCESS_MEMORY` ([`ENV_GPU_PROCESS_MEMORY`]) | `true`, `false` | `false` |
//! | `PIPETEL_GPU_DEVICES` ([`ENV_GPU_DEVICES`]) | `all`, `none`, `visible`, or indices / `GPU-…` UUIDs / `MIG-…` ids, comma-separated | `visible` |
//!
//! `visible` reports the GPUs this process can use: `CUDA_VISIBLE_DEVICES`, else
//! `NVIDIA_VISIBLE_DEVICES`, read when telemetry starts ([`devices`] has the rules).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]
// The ROCm SMI bindings (`source::rocm::ffi`) are the only place allowed `unsafe`.
#![deny(unsafe_code)]

mod config;
pub mod devices;
mod error;
mod metrics;
pub mod names;
mod poller;
mod process;
mod reading;
mod source;
mod telemetry;
#[cfg(feature = "test-support")]
#[cfg_attr(docsrs, doc(cfg(feature = "test-support")))]
pub mod test_support;

pub use config::{
    GpuConfig, GpuMode, GpuPlatform, DEFAULT_INIT_TIMEOUT, DEFAULT_POLL_INTERVAL, ENV_GPU_MODE,
    ENV_GPU_PCIE_THROUGHPUT, ENV_GPU_PLATFORM, ENV_GPU_POLL_INTERVAL, ENV_GPU_PROCESS_MEMORY, ENV_NVML_LIBRARY,
    ENV_ROCM_SMI_LIBRARY, MIN_POLL_INTERVAL,
};
pub use devices::{
    DeviceFilter, DeviceSelection, ENV_CUDA_VISIBLE_DEVICES, ENV_GPU_DEVICES, ENV_NVIDIA_VISIBLE_DEVICES,
};
pub use error::{ConfigError, GpuError};
pub use metrics::{families, reference_table, register_metrics};
pub use poller::{GpuPoller, GpuState, SampleReader};
pub use reading::DeviceReading;
pub use source::nvml::{NvmlOptions, NvmlSource, DEFAULT_NVML_LIBRARY};
#[cfg(feature = "amd")]
#[cfg_attr(docsrs, doc(cfg(feature = "amd")))]
pub use source::rocm::{AmdSource, DEFAULT_ROCM_SMI_LIBRARIES};
pub use source::{
    Clocks, DeviceInfo, DeviceSample, DeviceStatus, GpmMetrics, GpuSample, GpuSource, MigInstanceSample, ProcessSample,
    RemappedRows, RetiredPages,
};
pub use telemetry::{start, GpuTelemetry};
