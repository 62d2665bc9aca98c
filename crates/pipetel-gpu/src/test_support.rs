//! Fake NVML and ROCm SMI libraries for tests on machines without a GPU (feature
//! `test-support`).
//!
//! [`FakeNvml::new`] compiles `tests/fake_nvml/fake_nvml.c` (embedded in this crate) with the
//! system C compiler (`$CC`, default `cc`) once per process, and copies the result into a
//! fresh directory as `libnvidia-ml.so.1`. Each copy is its own instance when loaded, with
//! its own state file, so tests can run in parallel in one process. Point the code under
//! test at [`FakeNvml::library_path`] (e.g. `PIPETEL_NVML_LIBRARY` for a child process) and
//! describe the devices with [`FakeNvml::write_state`]; the format is documented at the top
//! of the C file.
//!
//! [`FakeRocmSmi`] does the same for ROCm SMI with `tests/fake_rocm_smi/fake_rocm_smi.c`,
//! installed as `librocm_smi64.so.1` (point `PIPETEL_ROCM_SMI_LIBRARY` or
//! `GpuConfig::rocm_library_path` at it); it is compiled whatever the features, as the
//! ROCm code it drives may be built elsewhere.
//!
//! By hand: `cc -shared -fPIC -O2 -o libnvidia-ml.so.1 crates/pipetel-gpu/tests/fake_nvml/fake_nvml.c -ldl`,
//! then put a `fake_nvml.txt` beside the library.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// The C source of the fake library.
pub const FAKE_NVML_SOURCE: &str = include_str!("../tests/fake_nvml/fake_nvml.c");

/// File name the fake library is installed as (the name NVML is loaded by).
pub const FAKE_LIBRARY_NAME: &str = "libnvidia-ml.so.1";

/// State file the fake library reads, in its own directory.
pub const STATE_FILE_NAME: &str = "fake_nvml.txt";

/// Call log the fake library appends to when the state has `log_calls=1`.
pub const CALLS_FILE_NAME: &str = "fake_nvml.calls";

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

/// The C source of the fake ROCm SMI library.
pub const FAKE_ROCM_SMI_SOURCE: &str = include_str!("../tests/fake_rocm_smi/fake_rocm_smi.c");

/// File name the fake ROCm SMI library is installed as (the Debian package's name).
pub const FAKE_ROCM_SMI_LIBRARY_NAME: &str = "librocm_smi64.so.1";

/// State file the fake ROCm SMI library reads, in its own directory.
pub const ROCM_SMI_STATE_FILE_NAME: &str = "fake_rocm_smi.txt";

/// Call log the fake ROCm SMI library appends to when the state has `log_calls=1`.
pub const ROCM_SMI_CALLS_FILE_NAME: &str = "fake_rocm_smi.calls";

/// Compiles the fake library to `output` with `$CC` (default `cc`).
///
/// # Errors
///
/// When the source cannot be written or the compiler fails (its stderr is in the error).
pub fn compile_fake_nvml(output: &Path) -> io::Result<()> {
    compile(FAKE_NVML_SOURCE, "fake_nvml.c", "NVML", output)
}

/// Compiles the fake ROCm SMI library to `output` with `$CC` (default `cc`).
///
/// # Errors
///
/// When the source cannot be written or the compiler fails (its stderr is in the error).
pub fn compile_fake_rocm_smi(output: &Path) -> io::Result<()> {
    compile(FAKE_ROCM_SMI_SOURCE, "fake_rocm_smi.c", "ROCm SMI", output)
}

fn compile(text: &str, file_name: &str, what: &str, output: &Path) -> io::Result<()> {
    let dir = unique_dir("pipetel-fake-gpu-src")?;
    let source = dir.join(file_name);
    std::fs::write(&source, text)?;
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let out =
        Command::new(&cc).args(["-shared", "-fPIC", "-O2", "-o"]).arg(output).arg(&source).arg("-ldl").output()?;
    // Best effort: a leftover temporary source file is harmless.
    let _ = std::fs::remove_dir_all(&dir);
    if out.status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!(
            "{cc} failed to build the fake {what} library: {}",
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}

/// The library compiled once per process; copies are made from it.
fn compiled() -> io::Result<&'static Path> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    compiled_once(&BUILT, FAKE_LIBRARY_NAME, compile_fake_nvml)
}

/// The fake ROCm SMI library compiled once per process.
fn compiled_rocm_smi() -> io::Result<&'static Path> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    compiled_once(&BUILT, FAKE_ROCM_SMI_LIBRARY_NAME, compile_fake_rocm_smi)
}

fn compiled_once(
    built: &'static OnceLock<Result<PathBuf, String>>,
    name: &str,
    compile: fn(&Path) -> io::Result<()>,
) -> io::Result<&'static Path> {
    let built = built.get_or_init(|| {
        let dir = unique_dir("pipetel-fake-gpu-build").map_err(|e| e.to_string())?;
        let lib = dir.join(name);
        compile(&lib).map_err(|e| e.to_string())?;
        Ok(lib)
    });
    match built {
        Ok(p) => Ok(p.as_path()),
        Err(e) => Err(io::Error::other(e.clone())),
    }
}

/// One independent fake NVML driver in its own temporary directory (removed on drop).
#[derive(Debug)]
pub struct FakeNvml {
    dir: PathBuf,
}

impl FakeNvml {
    /// A fresh copy of the fake library with an empty state (no devices).
    ///
    /// # Errors
    ///
    /// When compiling or copying the library fails.
    pub fn new() -> io::Result<Self> {
        let dir = unique_dir("pipetel-fake-nvml")?;
        std::fs::copy(compiled()?, dir.join(FAKE_LIBRARY_NAME))?;
        Ok(Self { dir })
    }

    /// The directory holding the library and its state.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path to load as NVML.
    pub fn library_path(&self) -> PathBuf {
        self.dir.join(FAKE_LIBRARY_NAME)
    }

    /// Replaces the state atomically (write, then rename), so a poll never sees half of it.
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write_state(&self, state: &str) -> io::Result<()> {
        let tmp = self.dir.join(format!("{STATE_FILE_NAME}.tmp"));
        std::fs::write(&tmp, state)?;
        std::fs::rename(&tmp, self.dir.join(STATE_FILE_NAME))
    }

    /// How many times `function` was called for `device` (`-1`: calls without a device)
    /// since the state enabled `log_calls=1`.
    pub fn call_count(&self, device: i32, function: &str) -> usize {
        let wanted = format!("{device} {function}");
        std::fs::read_to_string(self.dir.join(CALLS_FILE_NAME))
            .map(|log| log.lines().filter(|l| *l == wanted).count())
            .unwrap_or(0)
    }
}

impl Drop for FakeNvml {
    fn drop(&mut self) {
        // The library may still be mapped; unlinking it is fine on Unix.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One independent fake ROCm SMI library in its own temporary directory (removed on drop).
#[derive(Debug)]
pub struct FakeRocmSmi {
    dir: PathBuf,
}

impl FakeRocmSmi {
    /// A fresh copy of the fake library with an empty state (no devices).
    ///
    /// # Errors
    ///
    /// When compiling or copying the library fails.
    pub fn new() -> io::Result<Self> {
        let dir = unique_dir("pipetel-fake-rocm-smi")?;
        std::fs::copy(compiled_rocm_smi()?, dir.join(FAKE_ROCM_SMI_LIBRARY_NAME))?;
        Ok(Self { dir })
    }

    /// The directory holding the library and its state.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path to load as ROCm SMI.
    pub fn library_path(&self) -> PathBuf {
        self.dir.join(FAKE_ROCM_SMI_LIBRARY_NAME)
    }

    /// Replaces the state atomically (write, then rename), so a poll never sees half of it.
    ///
    /// # Errors
    ///
    /// When the file cannot be written.
    pub fn write_state(&self, state: &str) -> io::Result<()> {
        let tmp = self.dir.join(format!("{ROCM_SMI_STATE_FILE_NAME}.tmp"));
        std::fs::write(&tmp, state)?;
        std::fs::rename(&tmp, self.dir.join(ROCM_SMI_STATE_FILE_NAME))
    }

    /// How many times `function` was called for `device` (`-1`: calls without a device)
    /// since the state enabled `log_calls=1`.
    pub fn call_count(&self, device: i32, function: &str) -> usize {
        let wanted = format!("{device} {function}");
        std::fs::read_to_string(self.dir.join(ROCM_SMI_CALLS_FILE_NAME))
            .map(|log| log.lines().filter(|l| *l == wanted).count())
            .unwrap_or(0)
    }
}

impl Drop for FakeRocmSmi {
    fn drop(&mut self) {
        // The library may still be mapped; unlinking it is fine on Unix.
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
