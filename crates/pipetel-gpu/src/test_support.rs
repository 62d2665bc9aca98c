//! Fake NVML and ROCm SMI libraries for tests on machines without a GPU (feature
//! `test-support`).
//!
//! [`FakeNvml::new`] compiles `tests/fake_nvml/fake_nvml.c` (embedded in this crate) with the
//! system C compiler (`$CC`, default `cc`) once per process, and copies the result into a
//! fresh directory as `libnvidia-ml.so.1`. Each copy is its own instance when loaded, with
//! its own state file, so tests can run in parallel in one process. Point the code under
//! test at [`FakeLibrary::library_path`] (e.g. `PIPETEL_NVML_LIBRARY` for a child process)
//! and describe the devices with [`FakeLibrary::write_state`]; the format is documented at
//! the top of the C file.
//!
//! [`FakeRocmSmi`] does the same for ROCm SMI with `tests/fake_rocm_smi/fake_rocm_smi.c`,
//! installed as `librocm_smi64.so.1` (point `PIPETEL_ROCM_SMI_LIBRARY` or
//! `GpuConfig::rocm_smi_library` at it); it is compiled whatever the features, as the
//! ROCm code it drives may be built elsewhere.
//!
//! Both C files share their state-file reading, call log and configured errors through
//! `tests/fake_common/fake_state.h`. By hand:
//! `cc -shared -fPIC -O2 -I crates/pipetel-gpu/tests/fake_common -o libnvidia-ml.so.1 crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c -ldl`,
//! then put a `fake_nvml.txt` beside the library.

use std::io;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use crate::config::{GpuConfig, GpuPlatform};
use crate::devices::DeviceSelection;
use crate::names;

/// The C header both fake libraries include: state file, call log, configured errors.
pub const FAKE_STATE_HEADER: &str = include_str!("../tests/fake_common/fake_state.h");

/// The C source of the fake library.
pub const FAKE_NVML_SOURCE: &str = include_str!("../tests/fake_nvml/fake_nvml.c");

/// The fake library's MIG, process-utilisation and GPM part, included by its source.
pub const FAKE_NVML_ACTIVITY_HEADER: &str = include_str!("../tests/fake_nvml/fake_nvml_activity.h");

/// File name the fake library is installed as (the name NVML is loaded by).
pub const FAKE_LIBRARY_NAME: &str = "libnvidia-ml.so.1";

/// State file the fake library reads, in its own directory.
pub const STATE_FILE_NAME: &str = "fake_nvml.txt";

/// Call log the fake library appends to when the state has `log_calls=1`.
pub const CALLS_FILE_NAME: &str = "fake_nvml.calls";

/// The C source of the fake ROCm SMI library.
pub const FAKE_ROCM_SMI_SOURCE: &str = include_str!("../tests/fake_rocm_smi/fake_rocm_smi.c");

/// File name the fake ROCm SMI library is installed as (the Debian package's name).
pub const FAKE_ROCM_SMI_LIBRARY_NAME: &str = "librocm_smi64.so.1";

/// State file the fake ROCm SMI library reads, in its own directory.
pub const ROCM_SMI_STATE_FILE_NAME: &str = "fake_rocm_smi.txt";

/// Call log the fake ROCm SMI library appends to when the state has `log_calls=1`.
pub const ROCM_SMI_CALLS_FILE_NAME: &str = "fake_rocm_smi.calls";

/// Which vendor library a [`FakeLibrary`] fakes: its C source and the names it goes by.
pub trait FakeKind {
    /// What the library is, for error messages (`NVML`).
    const WHAT: &'static str;
    /// The C source.
    const SOURCE: &'static str;
    /// The C source's file name.
    const SOURCE_FILE: &'static str;
    /// File name the library is installed as.
    const LIBRARY_NAME: &'static str;
    /// State file the library reads, in its own directory.
    const STATE_FILE: &'static str;
    /// Call log the library appends to when the state has `log_calls=1`.
    const CALLS_FILE: &'static str;
    /// The platform whose source loads the library.
    const PLATFORM: GpuPlatform;
    /// The `hw.vendor` (and `GpuState::Running` platform) its devices report.
    const VENDOR: &'static str;

    /// `config` with this platform's library set to `library`.
    fn with_library(config: GpuConfig, library: PathBuf) -> GpuConfig;

    /// The library compiled once per process; copies are made from it.
    fn compiled() -> io::Result<&'static Path>;
}

/// The fake NVIDIA Management Library ([`FakeNvml`]).
#[derive(Debug)]
pub enum Nvml {}

/// The fake ROCm SMI library ([`FakeRocmSmi`]).
#[derive(Debug)]
pub enum RocmSmi {}

/// Implements [`FakeKind`] for a marker type from its file names and its platform.
macro_rules! fake_kind {
    ($kind:ty, $what:literal, $source:ident, $source_file:literal, $library:ident, $state:ident, $calls:ident, $platform:ident, $vendor:ident, $with_library:ident) => {
        impl FakeKind for $kind {
            const WHAT: &'static str = $what;
            const SOURCE: &'static str = $source;
            const SOURCE_FILE: &'static str = $source_file;
            const LIBRARY_NAME: &'static str = $library;
            const STATE_FILE: &'static str = $state;
            const CALLS_FILE: &'static str = $calls;
            const PLATFORM: GpuPlatform = GpuPlatform::$platform;
            const VENDOR: &'static str = names::$vendor;

            fn with_library(config: GpuConfig, library: PathBuf) -> GpuConfig {
                config.$with_library(library)
            }

            fn compiled() -> io::Result<&'static Path> {
                // One per kind: a static in a generic function would be shared by all kinds.
                static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
                compiled_once::<Self>(&BUILT, &[])
            }
        }
    };
}

fake_kind!(
    Nvml,
    "NVML",
    FAKE_NVML_SOURCE,
    "fake_nvml.c",
    FAKE_LIBRARY_NAME,
    STATE_FILE_NAME,
    CALLS_FILE_NAME,
    Nvidia,
    VENDOR_NVIDIA,
    with_nvml_library
);
fake_kind!(
    RocmSmi,
    "ROCm SMI",
    FAKE_ROCM_SMI_SOURCE,
    "fake_rocm_smi.c",
    FAKE_ROCM_SMI_LIBRARY_NAME,
    ROCM_SMI_STATE_FILE_NAME,
    ROCM_SMI_CALLS_FILE_NAME,
    Amd,
    VENDOR_AMD,
    with_rocm_smi_library
);

/// One independent fake NVML driver in its own temporary directory (removed on drop).
pub type FakeNvml = FakeLibrary<Nvml>;

/// One independent fake ROCm SMI library in its own temporary directory (removed on drop).
pub type FakeRocmSmi = FakeLibrary<RocmSmi>;

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique_dir(prefix: &str) -> io::Result<PathBuf> {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!(
        "{prefix}-{}-{}-{nanos}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Compiles the fake library to `output` with `$CC` (default `cc`).
///
/// # Errors
///
/// When the source cannot be written or the compiler fails (its stderr is in the error).
pub fn compile_fake_nvml(output: &Path) -> io::Result<()> {
    compile::<Nvml>(output, &[])
}

/// Compiles the fake ROCm SMI library to `output` with `$CC` (default `cc`).
///
/// # Errors
///
/// When the source cannot be written or the compiler fails (its stderr is in the error).
pub fn compile_fake_rocm_smi(output: &Path) -> io::Result<()> {
    compile::<RocmSmi>(output, &[])
}

/// The C define that builds the fake NVML without any GPM symbol (a driver older than GPM).
pub const NO_GPM_DEFINE: &str = "-DFAKE_NVML_NO_GPM";

fn compile<K: FakeKind>(output: &Path, defines: &[&str]) -> io::Result<()> {
    let dir = unique_dir("pipetel-fake-gpu-src")?;
    let source = dir.join(K::SOURCE_FILE);
    std::fs::write(&source, K::SOURCE)?;
    // Beside the source, where its `#include "fake_state.h"` finds it.
    std::fs::write(dir.join("fake_state.h"), FAKE_STATE_HEADER)?;
    std::fs::write(dir.join("fake_nvml_activity.h"), FAKE_NVML_ACTIVITY_HEADER)?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2"])
        .args(defines)
        .arg("-o")
        .arg(output)
        .arg(&source)
        .arg("-ldl")
        .output()?;
    // Best effort: a leftover temporary source file is harmless.
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cc} failed to build the fake {} library: {}",
            K::WHAT,
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

fn compiled_once<K: FakeKind>(
    built: &'static OnceLock<Result<PathBuf, String>>,
    defines: &[&str],
) -> io::Result<&'static Path> {
    let built = built.get_or_init(|| {
        let dir = unique_dir("pipetel-fake-gpu-build").map_err(|e| e.to_string())?;
        let lib = dir.join(K::LIBRARY_NAME);
        compile::<K>(&lib, defines).map_err(|e| e.to_string())?;
        Ok(lib)
    });
    match built {
        Ok(p) => Ok(p.as_path()),
        Err(e) => Err(io::Error::other(e.clone())),
    }
}

/// One independent fake vendor library in its own temporary directory (removed on drop):
/// [`FakeNvml`] or [`FakeRocmSmi`].
#[derive(Debug)]
pub struct FakeLibrary<K: FakeKind> {
    dir: PathBuf,
    kind: PhantomData<K>,
}

impl<K: FakeKind> FakeLibrary<K> {
    /// A fresh copy of the fake library with an empty state (no devices).
    ///
    /// # Errors
    ///
    /// When compiling or copying the library fails.
    pub fn new() -> io::Result<Self> {
        Self::copy_of(K::compiled()?)
    }

    fn copy_of(compiled: &Path) -> io::Result<Self> {
        let dir = unique_dir("pipetel-fake-gpu-lib")?;
        std::fs::copy(compiled, dir.join(K::LIBRARY_NAME))?;
        Ok(Self { dir, kind: PhantomData })
    }

    /// The directory holding the library and its state.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path to load as the vendor library.
    pub fn library_path(&self) -> PathBuf {
        self.dir.join(K::LIBRARY_NAME)
    }

    /// The default configuration with this fake's platform and its library path, reporting
    /// every device: the test's own `CUDA_VISIBLE_DEVICES` (set on GPU machines) must not
    /// change what a fake reports. Tests of the device filter set [`GpuConfig::devices`].
    pub fn gpu_config(&self) -> GpuConfig {
        K::with_library(
            GpuConfig::default().with_platform(K::PLATFORM).with_devices(DeviceSelection::All),
            self.library_path(),
        )
    }

    /// Replaces the state atomically (write, then rename), so a poll never sees half of it.
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write_state(&self, state: &str) -> io::Result<()> {
        let tmp = self.dir.join(format!("{}.tmp", K::STATE_FILE));
        std::fs::write(&tmp, state)?;
        std::fs::rename(&tmp, self.dir.join(K::STATE_FILE))
    }

    /// How many times `function` was called for `device` (`-1`: calls without a device)
    /// since the state enabled `log_calls=1`.
    pub fn call_count(&self, device: i32, function: &str) -> usize {
        let wanted = format!("{device} {function}");
        std::fs::read_to_string(self.dir.join(K::CALLS_FILE))
            .map(|log| log.lines().filter(|l| *l == wanted).count())
            .unwrap_or(0)
    }
}

impl FakeLibrary<Nvml> {
    /// A fresh copy of the fake NVML built without any GPM symbol ([`NO_GPM_DEFINE`]): a
    /// driver older than GPM, where `nvml-wrapper` fails each GPM call with
    /// `FailedToLoadSymbol`.
    ///
    /// # Errors
    ///
    /// When compiling or copying the library fails.
    pub fn without_gpm() -> io::Result<Self> {
        static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
        Self::copy_of(compiled_once::<Nvml>(&BUILT, &[NO_GPM_DEFINE])?)
    }
}

impl<K: FakeKind> Drop for FakeLibrary<K> {
    fn drop(&mut self) {
        // The library may still be mapped; unlinking it is fine on Unix.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
