//! The process families (the OTel process semantic conventions; two renamed, see below).

use super::family::families;

families! {
    /// CPU seconds by `cpu.mode`.
    CPU_TIME = "process.cpu.time", Counter, "s", &["cpu.mode"], "Total CPU seconds broken down by different CPU modes.";
    /// CPU utilization since the last reading, by `cpu.mode`.
    CPU_UTILIZATION = "process.cpu.utilization", Gauge, "1", &["cpu.mode"],
        "Difference in process.cpu.time since the last measurement, divided by the elapsed time and number of CPUs available to the process.";
    /// Resident memory.
    MEMORY_USAGE = "process.memory.usage", UpDownCounter, "By", &[], "The amount of physical memory in use.";
    /// Committed virtual memory.
    MEMORY_VIRTUAL = "process.memory.virtual", UpDownCounter, "By", &[], "The amount of committed virtual memory.";
    /// Threads (the conventions' `process.thread.count`: a gauge ending in `_count` fails the
    /// Prometheus linter).
    THREADS = "process.threads", UpDownCounter, "{thread}", &[], "Process threads count.";
    /// Open file descriptors (the conventions' `process.open_file_descriptor.count`, renamed
    /// likewise).
    OPEN_FILE_DESCRIPTORS = "process.open_file_descriptors", UpDownCounter, "{file_descriptor}", &[],
        "Number of file descriptors in use by the process.";
    /// Context switches by `process.context_switch.type`.
    CONTEXT_SWITCHES = "process.context_switches", Counter, "{context_switch}", &["process.context_switch.type"],
        "Number of times the process has been context switched.";
}
