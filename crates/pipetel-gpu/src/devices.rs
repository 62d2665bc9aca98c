//! Which GPUs a process reports: [`DeviceSelection`] and the visible-device variables.
//!
//! A process should report the GPUs it can use, not every GPU of the host: otherwise two
//! processes on one host report the same GPU twice, and a GPU-idle alert fires for a GPU the
//! process never touched. The rules, first match wins:
//!
//! 1. `PIPETEL_GPU_DEVICES` ([`ENV_GPU_DEVICES`]), pipetel's own: `all`, `none`, or a comma
//!    list of indices, UUIDs (`GPU-…`, a unique prefix is enough) and MIG ids (`MIG-…`).
//! 2. `CUDA_VISIBLE_DEVICES` ([`ENV_CUDA_VISIBLE_DEVICES`]), as CUDA reads it: a comma list of
//!    indices, UUIDs and MIG ids; empty means no GPU; an entry that names no device (such as
//!    `-1`) hides it and every entry after it.
//! 3. `NVIDIA_VISIBLE_DEVICES` ([`ENV_NVIDIA_VISIBLE_DEVICES`]), as the NVIDIA container
//!    runtime reads it: `all`; `none`, `void` or empty mean no GPU; else indices and UUIDs.
//!    Inside a container the runtime has already hidden the other GPUs and NVML numbers the
//!    rest from 0, so when NVML sees no more devices than the list names, all are kept.
//! 4. None set: every device.
//!
//! A MIG id selects the GPU it is a slice of (its whole-GPU series are reported) and, when
//! given as `MIG-<uuid>`, limits the GPU's MIG instance series to the instances named; a GPU
//! also named by index or UUID reports all its instances. The standalone
//! exporter reports every device unless told otherwise ([`DeviceSelection::All`]).

use std::fmt;

use crate::error::ConfigError;

/// Environment variable: pipetel's explicit device list; wins over the other two.
pub const ENV_GPU_DEVICES: &str = "PIPETEL_GPU_DEVICES";
/// Environment variable: CUDA's visible devices.
pub const ENV_CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
/// Environment variable: the NVIDIA container runtime's visible devices.
pub const ENV_NVIDIA_VISIBLE_DEVICES: &str = "NVIDIA_VISIBLE_DEVICES";

/// Which devices GPU telemetry reports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DeviceSelection {
    /// The devices this process can use, from `CUDA_VISIBLE_DEVICES`, else
    /// `NVIDIA_VISIBLE_DEVICES`, read when telemetry starts; every device when neither is set.
    #[default]
    Visible,
    /// Every device of the host (the standalone exporter's default).
    All,
    /// The devices a [`DeviceFilter`] names.
    Only(DeviceFilter),
}

/// `PIPETEL_GPU_DEVICES`' grammar: `all`, `visible` (the default rules), `none`, or a list.
impl std::str::FromStr for DeviceSelection {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("all") {
            return Ok(Self::All);
        }
        if t.eq_ignore_ascii_case("visible") || t.eq_ignore_ascii_case("auto") {
            return Ok(Self::Visible);
        }
        if t.is_empty() {
            return Err("expected all, none, visible or a comma list of GPU indices and UUIDs".into());
        }
        DeviceFilter::parse(ENV_GPU_DEVICES, s).map(Self::Only).map_err(|e| match e {
            ConfigError::InvalidDevice { reason, .. } => reason,
            other => other.to_string(),
        })
    }
}

impl DeviceSelection {
    /// The filter to apply, reading the visible-device variables through `get` for
    /// [`DeviceSelection::Visible`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidDevice`] naming the variable when its value does not parse.
    pub fn resolve(&self, get: impl Fn(&str) -> Option<String>) -> Result<DeviceFilter, ConfigError> {
        match self {
            Self::All => Ok(DeviceFilter { origin: Origin::Code, value: "all".into(), list: List::All }),
            Self::Only(filter) => Ok(filter.clone()),
            Self::Visible => {
                for variable in [ENV_CUDA_VISIBLE_DEVICES, ENV_NVIDIA_VISIBLE_DEVICES] {
                    if let Some(value) = get(variable) {
                        return DeviceFilter::parse(variable, &value);
                    }
                }
                Ok(DeviceFilter { origin: Origin::Unset, value: String::new(), list: List::All })
            }
        }
    }
}

/// Where a filter came from, for the log line and for the variable's own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// None of the variables is set.
    Unset,
    /// Set in code ([`DeviceSelection::All`]).
    Code,
    /// `PIPETEL_GPU_DEVICES`: every entry must name a device.
    Pipetel,
    /// `CUDA_VISIBLE_DEVICES`: an entry naming no device ends the list.
    Cuda,
    /// `NVIDIA_VISIBLE_DEVICES`: already applied by the runtime inside a container.
    Container,
}

/// One entry of a device list.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// A device index; negative indices name no device (`CUDA_VISIBLE_DEVICES=-1`).
    Index(i64),
    /// A GPU UUID or a unique prefix of one (`GPU-…`).
    Uuid(String),
    /// A MIG device id: `MIG-<uuid>` or the older `MIG-GPU-<uuid>/<gi>/<ci>`.
    Mig(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum List {
    All,
    Entries(Vec<Entry>),
}

/// A parsed device list and the variable it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceFilter {
    origin: Origin,
    value: String,
    list: List,
}

/// What a source knows of a device, for matching.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    /// The driver's index.
    pub(crate) index: u32,
    /// The device's UUID (`GPU-…`).
    pub(crate) uuid: &'a str,
    /// UUIDs of its MIG devices (`MIG-…`), when MIG is on.
    pub(crate) mig: &'a [String],
}

/// Why a filter kept no device, or named one that is not there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unmatched {
    /// `VARIABLE="value"`.
    pub(crate) setting: String,
    /// The entry that names no device.
    pub(crate) entry: String,
}

impl DeviceFilter {
    /// Parses `value` by the rules of `variable` ([`ENV_GPU_DEVICES`],
    /// [`ENV_CUDA_VISIBLE_DEVICES`] or [`ENV_NVIDIA_VISIBLE_DEVICES`]; any other name reads
    /// like `PIPETEL_GPU_DEVICES`).
    ///
    /// # Errors
    ///
    /// [`ConfigError::InvalidDevice`] naming the variable, its value and the entry that is
    /// neither an index nor a `GPU-` / `MIG-` id (nor a keyword the variable allows).
    pub fn parse(variable: &'static str, value: &str) -> Result<Self, ConfigError> {
        let origin = match variable {
            ENV_CUDA_VISIBLE_DEVICES => Origin::Cuda,
            ENV_NVIDIA_VISIBLE_DEVICES => Origin::Container,
            _ => Origin::Pipetel,
        };
        let invalid = |reason: String| ConfigError::InvalidDevice { variable, value: value.to_owned(), reason };
        let trimmed = value.trim();
        let keyword = |k: &str| trimmed.eq_ignore_ascii_case(k);
        let none = Self { origin, value: value.to_owned(), list: List::Entries(Vec::new()) };
        match origin {
            // CUDA: set but empty hides every GPU.
            Origin::Cuda if trimmed.is_empty() => return Ok(none),
            Origin::Container if trimmed.is_empty() || keyword("none") || keyword("void") => return Ok(none),
            Origin::Pipetel if keyword("none") || keyword("void") => return Ok(none),
            Origin::Container | Origin::Pipetel if keyword("all") => {
                return Ok(Self { origin, value: value.to_owned(), list: List::All })
            }
            _ => {}
        }
        let mut entries = Vec::new();
        for raw in trimmed.split(',') {
            let entry = raw.trim();
            if entry.is_empty() {
                return Err(invalid("an empty entry in the list".into()));
            }
            let upper = entry.to_ascii_uppercase();
            if let Ok(index) = entry.parse::<i64>() {
                if index < 0 && origin != Origin::Cuda {
                    return Err(invalid(format!("{entry:?} is not a device index")));
                }
                entries.push(Entry::Index(index));
            } else if upper.starts_with("GPU-") && entry.len() > 4 {
                entries.push(Entry::Uuid(entry.to_owned()));
            } else if upper.starts_with("MIG-") && entry.len() > 4 {
                entries.push(Entry::Mig(entry.to_owned()));
            } else {
                return Err(invalid(format!("{entry:?} is neither a device index nor a GPU-… UUID nor a MIG-… id")));
            }
        }
        Ok(Self { origin, value: value.to_owned(), list: List::Entries(entries) })
    }

    /// Whether the filter keeps every device.
    pub fn is_all(&self) -> bool {
        self.list == List::All
    }

    /// The MIG devices of `device` (`MIG-<uuid>`, as NVML spells them) this filter names,
    /// when it names the device only through them; empty when every MIG instance of the
    /// device is reported (the device is named by index or UUID, or not through MIG ids).
    pub(crate) fn named_mig(&self, device: &Candidate<'_>) -> Vec<String> {
        let List::Entries(entries) = &self.list else {
            return Vec::new();
        };
        if self.origin == Origin::Container {
            return Vec::new();
        }
        let mut named = Vec::new();
        for entry in entries {
            match entry {
                Entry::Index(i) if i64::from(device.index) == *i => return Vec::new(),
                Entry::Uuid(prefix) if starts_with_ignore_case(device.uuid, prefix) => return Vec::new(),
                Entry::Mig(id) => named.extend(device.mig.iter().filter(|m| m.eq_ignore_ascii_case(id)).cloned()),
                _ => {}
            }
        }
        named
    }

    /// Why these devices: `CUDA_VISIBLE_DEVICES="1"`, for the log line.
    pub fn reason(&self) -> String {
        match self.origin {
            Origin::Unset => {
                format!("{ENV_GPU_DEVICES}, {ENV_CUDA_VISIBLE_DEVICES} and {ENV_NVIDIA_VISIBLE_DEVICES} are not set")
            }
            Origin::Code => "every device was asked for".into(),
            _ => self.setting(),
        }
    }

    fn setting(&self) -> String {
        let variable = match self.origin {
            Origin::Cuda => ENV_CUDA_VISIBLE_DEVICES,
            Origin::Container => ENV_NVIDIA_VISIBLE_DEVICES,
            _ => ENV_GPU_DEVICES,
        };
        format!("{variable}={:?}", self.value)
    }

    /// The indices of `devices` to keep, in index order. `PIPETEL_GPU_DEVICES` entries must
    /// each name a device (else [`Unmatched`]); a `CUDA_VISIBLE_DEVICES` entry naming none
    /// ends the list, as CUDA does.
    pub(crate) fn select(&self, devices: &[Candidate<'_>]) -> Result<Vec<u32>, Unmatched> {
        let List::Entries(entries) = &self.list else {
            return Ok(devices.iter().map(|d| d.index).collect());
        };
        if self.origin == Origin::Container && !entries.is_empty() && devices.len() <= entries.len() {
            // The runtime already hid the others (see the module docs).
            return Ok(devices.iter().map(|d| d.index).collect());
        }
        let mut kept = Vec::new();
        for entry in entries {
            let found = match entry {
                Entry::Index(i) => devices.iter().find(|d| i64::from(d.index) == *i),
                Entry::Uuid(prefix) => {
                    let mut matching = devices.iter().filter(|d| starts_with_ignore_case(d.uuid, prefix));
                    match (matching.next(), matching.next()) {
                        (Some(d), None) => Some(d),
                        // An ambiguous prefix names no one device.
                        _ => None,
                    }
                }
                Entry::Mig(id) => devices.iter().find(|d| mig_parent_matches(id, d)),
            };
            match found {
                Some(d) => {
                    if !kept.contains(&d.index) {
                        kept.push(d.index);
                    }
                }
                None if self.origin == Origin::Cuda => break,
                None => return Err(Unmatched { setting: self.setting(), entry: entry.to_string() }),
            }
        }
        kept.sort_unstable();
        Ok(kept)
    }
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Index(i) => write!(f, "{i}"),
            Self::Uuid(s) | Self::Mig(s) => f.write_str(s),
        }
    }
}

fn starts_with_ignore_case(text: &str, prefix: &str) -> bool {
    text.len() >= prefix.len() && text.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Whether MIG id `id` is a slice of `device`: `MIG-GPU-<uuid>/…` carries the parent's UUID;
/// `MIG-<uuid>` is one of the device's MIG devices.
fn mig_parent_matches(id: &str, device: &Candidate<'_>) -> bool {
    let rest = &id[4..];
    if rest.len() > 4 && rest[..4].eq_ignore_ascii_case("GPU-") {
        let parent = rest.split('/').next().unwrap_or(rest);
        return parent.eq_ignore_ascii_case(device.uuid);
    }
    device.mig.iter().any(|m| m.eq_ignore_ascii_case(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const UUIDS: [&str; 3] = ["GPU-aaaa-0000", "GPU-bbbb-1111", "GPU-bbbc-2222"];

    fn keep(filter: &DeviceFilter) -> Result<Vec<u32>, Unmatched> {
        let mig = [vec![], vec!["MIG-1111-x".to_owned(), "MIG-1111-y".to_owned()], vec![]];
        let devices: Vec<Candidate<'_>> =
            (0..3).map(|i| Candidate { index: i as u32, uuid: UUIDS[i], mig: &mig[i] }).collect();
        filter.select(&devices)
    }

    fn parse(variable: &'static str, value: &str) -> DeviceFilter {
        DeviceFilter::parse(variable, value).unwrap_or_else(|e| panic!("{variable}={value:?}: {e}"))
    }

    #[test]
    fn indices_uuids_prefixes_and_mig_ids_select_devices() {
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "2, 0")), Ok(vec![0, 2]));
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "gpu-BBBB-1111")), Ok(vec![1]));
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "GPU-aa")), Ok(vec![0]), "a unique prefix");
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "MIG-GPU-bbbc-2222/1/0")), Ok(vec![2]));
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "MIG-1111-y,MIG-1111-x")), Ok(vec![1]));
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "all")), Ok(vec![0, 1, 2]));
        assert_eq!(keep(&parse(ENV_GPU_DEVICES, "none")), Ok(vec![]));
    }

    #[test]
    fn mig_ids_limit_the_instances_reported_unless_the_gpu_is_named_whole() {
        let mig = vec!["MIG-1111-x".to_owned(), "MIG-1111-y".to_owned()];
        let gpu = Candidate { index: 1, uuid: UUIDS[1], mig: &mig };
        assert_eq!(parse(ENV_CUDA_VISIBLE_DEVICES, "mig-1111-y").named_mig(&gpu), vec!["MIG-1111-y"]);
        assert_eq!(parse(ENV_GPU_DEVICES, "MIG-1111-y,MIG-1111-x").named_mig(&gpu).len(), 2);
        assert!(parse(ENV_GPU_DEVICES, "MIG-1111-y,1").named_mig(&gpu).is_empty(), "named whole by index");
        assert!(parse(ENV_GPU_DEVICES, "GPU-bbbb,MIG-1111-y").named_mig(&gpu).is_empty(), "named whole by UUID");
        assert!(parse(ENV_GPU_DEVICES, "all").named_mig(&gpu).is_empty());
        assert!(parse(ENV_GPU_DEVICES, "MIG-GPU-bbbb-1111/1/0").named_mig(&gpu).is_empty(), "the older form: all");
    }

    #[test]
    fn pipetel_entries_must_name_a_device_and_cuda_stops_at_the_first_that_does_not() {
        // An ambiguous prefix (GPU-bbb) names no one device.
        for value in ["0,7", "GPU-bbb", "GPU-zzzz", "MIG-nope"] {
            let err = keep(&parse(ENV_GPU_DEVICES, value)).expect_err(value);
            assert!(err.setting.starts_with("PIPETEL_GPU_DEVICES="), "{err:?}");
        }
        assert_eq!(keep(&parse(ENV_CUDA_VISIBLE_DEVICES, "1,7,0")), Ok(vec![1]));
        assert_eq!(keep(&parse(ENV_CUDA_VISIBLE_DEVICES, "-1")), Ok(vec![]));
        assert_eq!(keep(&parse(ENV_CUDA_VISIBLE_DEVICES, "")), Ok(vec![]));
        assert_eq!(keep(&parse(ENV_CUDA_VISIBLE_DEVICES, "GPU-bbbc,0")), Ok(vec![0, 2]));
    }

    #[test]
    fn container_runtime_keywords_and_already_filtered_containers() {
        for none in ["none", "void", "", " VOID "] {
            assert_eq!(keep(&parse(ENV_NVIDIA_VISIBLE_DEVICES, none)), Ok(vec![]), "{none:?}");
        }
        assert_eq!(keep(&parse(ENV_NVIDIA_VISIBLE_DEVICES, "all")), Ok(vec![0, 1, 2]));
        // On the host (3 devices seen, 1 named): only device 2.
        assert_eq!(keep(&parse(ENV_NVIDIA_VISIBLE_DEVICES, "2")), Ok(vec![2]));
        // In a container NVML sees only the listed devices, numbered from 0.
        let one = [Candidate { index: 0, uuid: UUIDS[2], mig: &[] }];
        assert_eq!(parse(ENV_NVIDIA_VISIBLE_DEVICES, "2").select(&one), Ok(vec![0]));
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable() {
        for (variable, value) in [
            (ENV_GPU_DEVICES, "first"),
            (ENV_GPU_DEVICES, "0,,1"),
            (ENV_GPU_DEVICES, "-1"),
            (ENV_CUDA_VISIBLE_DEVICES, "NoDevFiles"),
            (ENV_NVIDIA_VISIBLE_DEVICES, "GPU-"),
        ] {
            let err = DeviceFilter::parse(variable, value).expect_err(value).to_string();
            assert!(err.contains(&format!("{variable}={value:?}")), "{err}");
        }
        assert!("".parse::<DeviceSelection>().is_err());
        assert_eq!("ALL".parse::<DeviceSelection>(), Ok(DeviceSelection::All));
        assert_eq!("visible".parse::<DeviceSelection>(), Ok(DeviceSelection::Visible));
    }

    #[test]
    fn cuda_wins_over_the_container_variable_and_unset_keeps_all() -> Result<(), ConfigError> {
        let env = |pairs: &[(&str, &str)]| {
            let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
            move |k: &str| map.get(k).cloned()
        };
        let both = env(&[(ENV_CUDA_VISIBLE_DEVICES, "1"), (ENV_NVIDIA_VISIBLE_DEVICES, "0,2")]);
        let filter = DeviceSelection::Visible.resolve(both)?;
        assert_eq!(keep(&filter), Ok(vec![1]));
        assert_eq!(filter.reason(), "CUDA_VISIBLE_DEVICES=\"1\"");
        let filter = DeviceSelection::Visible.resolve(env(&[(ENV_NVIDIA_VISIBLE_DEVICES, "0,2")]))?;
        assert_eq!(keep(&filter), Ok(vec![0, 2]));
        let filter = DeviceSelection::Visible.resolve(env(&[]))?;
        assert!(filter.is_all() && filter.reason().contains("not set"), "{}", filter.reason());
        // Explicit choices ignore the variables.
        let all = DeviceSelection::All.resolve(env(&[(ENV_CUDA_VISIBLE_DEVICES, "")]))?;
        assert_eq!(keep(&all), Ok(vec![0, 1, 2]));
        let bad = DeviceSelection::Visible.resolve(env(&[(ENV_CUDA_VISIBLE_DEVICES, "x")]));
        assert!(bad.is_err_and(|e| e.to_string().contains("CUDA_VISIBLE_DEVICES")));
        Ok(())
    }
}
