//! This process and its descendants, for per-process GPU memory.
//!
//! NVML reports process ids as the host sees them; inside a container with its own pid
//! namespace they do not match ours and the per-process memory reads as 0.

use std::collections::{HashMap, HashSet};

/// The pid of this process and of every process descending from it.
pub(crate) fn self_and_descendants() -> HashSet<u32> {
    let me = std::process::id();
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            // A process may exit between listing and reading: skip it.
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some(ppid) = parent_pid(&stat) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut found = HashSet::from([me]);
    let mut queue = vec![me];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).map(Vec::as_slice).unwrap_or_default() {
            if found.insert(child) {
                queue.push(child);
            }
        }
    }
    found
}

/// The parent pid from `/proc/<pid>/stat`: the field after the state, which follows the
/// command name in parentheses (the name itself may contain spaces and parentheses).
fn parent_pid(stat: &str) -> Option<u32> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let _state = fields.next()?;
    fields.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parent_pid_survives_odd_command_names() {
        assert_eq!(parent_pid("42 (a) b) c) S 7 42 42 0"), Some(7));
        assert_eq!(parent_pid("1 (init) S 0 1 1"), Some(0));
        assert_eq!(parent_pid("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn descendants_include_self_and_a_spawned_child() -> std::io::Result<()> {
        let mut child = std::process::Command::new("sleep").arg("5").spawn()?;
        let set = self_and_descendants();
        let child_pid = child.id();
        child.kill()?;
        child.wait()?;
        assert!(set.contains(&std::process::id()));
        assert!(set.contains(&child_pid), "{set:?} lacks {child_pid}");
        Ok(())
    }
}
