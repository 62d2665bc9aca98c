//! The process families (the OTel process semantic conventions; two renamed, see below).

use super::family::{Family, Instrument::*};

/// CPU seconds by `cpu.mode`.
pub const CPU_TIME: Family = Family::new(
    "process.cpu.time",
    Counter,
    "s",
    "Total CPU seconds broken down by different CPU modes.",
    &["cpu.mode"],
);
/// CPU utilization since the last reading, by `cpu.mode`.
pub const CPU_UTILIZATION: Family = Family::new(
    "process.cpu.utilization",
    Gauge,
    "1",
    "Difference in process.cpu.time since the last measurement, divided by the elapsed time and number of CPUs available to the process.",
    &["cpu.mode"],
);
/// Resident memory.
pub const MEMORY_USAGE: Family =
    Family::new("process.memory.usage", UpDownCounter, "By", "The amount of physical memory in use.", &[]);
/// Committed virtual memory.
pub const MEMORY_VIRTUAL: Family =
    Family::new("process.memory.virtual", UpDownCounter, "By", "The amount of committed virtual memory.", &[]);
/// Threads (the conventions' `process.thread.count`: a gauge ending in `_count` fails the
/// Prometheus linter).
pub const THREADS: Family = Family::new("process.threads", UpDownCounter, "{thread}", "Process threads count.", &[]);
/// Open file descriptors (the conventions' `process.open_file_descriptor.count`, renamed
/// likewise).
pub const OPEN_FILE_DESCRIPTORS: Family = Family::new(
    "process.open_file_descriptors",
    UpDownCounter,
    "{file_descriptor}",
    "Number of file descriptors in use by the process.",
    &[],
);
/// Context switches by `process.context_switch.type`.
pub const CONTEXT_SWITCHES: Family = Family::new(
    "process.context_switches",
    Counter,
    "{context_switch}",
    "Number of times the process has been context switched.",
    &["process.context_switch.type"],
);

/// Every family of the table, in the reference's order.
pub const ALL: &[Family] =
    &[CPU_TIME, CPU_UTILIZATION, MEMORY_USAGE, MEMORY_VIRTUAL, THREADS, OPEN_FILE_DESCRIPTORS, CONTEXT_SWITCHES];
