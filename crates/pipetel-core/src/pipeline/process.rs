//! Readings from the operating system: CPU time of a thread and resident memory of the process.
//! Linux reads `/proc` through the `procfs` crate; elsewhere both are absent.

use std::time::Duration;

/// One reading of the process and of a thread.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Reading {
    /// CPU time of the thread since it was created.
    pub(crate) thread_cpu: Option<Duration>,
    /// Resident memory of the process.
    pub(crate) rss_bytes: Option<u64>,
}

/// Reads thread CPU and process memory.
pub(crate) struct ProcessSampler {
    #[cfg(target_os = "linux")]
    me: Option<procfs::process::Process>,
}

impl ProcessSampler {
    pub(crate) fn new() -> Self {
        #[cfg(target_os = "linux")]
        {
            Self { me: procfs::process::Process::myself().ok() }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Self {}
        }
    }

    #[cfg_attr(not(target_os = "linux"), allow(unused_variables))]
    pub(crate) fn read(&mut self, tid: Option<i32>) -> Reading {
        #[cfg(target_os = "linux")]
        {
            let Some(me) = &self.me else { return Reading::default() };
            let ticks = procfs::ticks_per_second().max(1);
            let thread_cpu = tid.and_then(|tid| me.task_from_tid(tid).ok()).and_then(|t| t.stat().ok()).map(|st| {
                let total = st.utime.saturating_add(st.stime);
                Duration::from_nanos(total.saturating_mul(1_000_000_000) / ticks)
            });
            let rss_bytes = me.statm().ok().map(|m| m.resident.saturating_mul(procfs::page_size()));
            Reading { thread_cpu, rss_bytes }
        }
        #[cfg(not(target_os = "linux"))]
        {
            Reading::default()
        }
    }
}

/// The OS id of the calling thread (see [`crate::sync::current_tid`]).
pub(crate) use crate::sync::current_tid;

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn reads_this_threads_cpu_and_the_process_memory() {
        let mut p = ProcessSampler::new();
        let tid = current_tid();
        let before = p.read(tid);
        // Busy until the reading shows 100 ms of CPU (bounded by 20 s of wall time): on a loaded
        // machine the thread gets its CPU later, not less of it.
        let t = Instant::now();
        let mut x = 0u64;
        let mut after = p.read(tid);
        let used = |after: &Reading| after.thread_cpu.expect("cpu").saturating_sub(before.thread_cpu.expect("cpu"));
        while used(&after) < Duration::from_millis(100) && t.elapsed() < Duration::from_secs(20) {
            for _ in 0..100_000 {
                x = x.wrapping_mul(31).wrapping_add(7);
            }
            std::hint::black_box(x);
            after = p.read(tid);
        }
        let wall = t.elapsed();
        assert!(used(&after) >= Duration::from_millis(100), "a busy loop of {wall:?} used {:?} of CPU", used(&after));
        // Thread CPU, not the process's or the wall clock: never more than the wall time.
        assert!(used(&after) <= wall + Duration::from_millis(50), "{:?} of CPU in {wall:?}", used(&after));
        assert!(after.rss_bytes.expect("rss") > 1024 * 1024);
    }
}
