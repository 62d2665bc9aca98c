//! The process metrics of the OpenTelemetry semantic conventions, as observable instruments on
//! pipetel's meter, so every reader (the pull endpoint, OTLP, the console) collects them:
//!
//! | instrument | kind | unit | attributes |
//! |---|---|---|---|
//! | `process.cpu.time` | counter | `s` | `cpu.mode` (`user`, `system`) |
//! | `process.cpu.utilization` | gauge | `1` | `cpu.mode` (`user`, `system`) |
//! | `process.memory.usage` | up-down counter | `By` | |
//! | `process.memory.virtual` | up-down counter | `By` | |
//! | `process.open_file_descriptors` | up-down counter | `{file_descriptor}` | |
//! | `process.threads` | up-down counter | `{thread}` | |
//! | `process.context_switches` | counter | `{context_switch}` | `process.context_switch.type` (`voluntary`, `involuntary`) |
//!
//! Read from `/proc/self` at each collection (Linux); elsewhere none is registered. A reading
//! that fails (a `/proc` without the file) leaves that instrument out of the collection rather
//! than reporting a made-up value. On by default; `PIPETEL_PROCESS_METRICS=false` turns them off.

use opentelemetry::metrics::Meter;

/// Registers the process metrics on `meter` (the SDK keeps the callbacks for the provider's
/// lifetime). Nothing outside Linux.
pub fn register(meter: &Meter) {
    #[cfg(target_os = "linux")]
    linux::register(meter);
    #[cfg(not(target_os = "linux"))]
    let _ = meter;
}

#[cfg(target_os = "linux")]
mod linux {
    use std::sync::Mutex;
    use std::time::Instant;

    use crate::families::process as fam;
    use crate::families::Family;
    use opentelemetry::metrics::Meter;
    use opentelemetry::KeyValue;
    use procfs::process::Process;

    const CPU_MODE: &str = "cpu.mode";
    const SWITCH_TYPE: &str = "process.context_switch.type";

    /// User and system CPU seconds of the whole process, and its resident and virtual memory
    /// in bytes and its thread count, from one read of `/proc/self/stat`.
    struct Stat {
        user: f64,
        system: f64,
        resident: i64,
        virtual_bytes: i64,
        threads: i64,
    }

    fn stat() -> Option<Stat> {
        let stat = Process::myself().ok()?.stat().ok()?;
        let ticks = procfs::ticks_per_second().max(1) as f64;
        let page = i64::try_from(procfs::page_size()).unwrap_or(4096);
        Some(Stat {
            user: stat.utime as f64 / ticks,
            system: stat.stime as f64 / ticks,
            resident: i64::try_from(stat.rss).unwrap_or(i64::MAX).saturating_mul(page),
            virtual_bytes: i64::try_from(stat.vsize).unwrap_or(i64::MAX),
            threads: stat.num_threads,
        })
    }

    /// One value of a [`Stat`].
    type StatValue = fn(&Stat) -> i64;

    /// The CPU seconds and wall time of the previous utilization reading; the first is taken
    /// at registration, so the first value covers the time since `init`.
    struct Previous {
        at: Instant,
        user: f64,
        system: f64,
    }

    pub(super) fn register(meter: &Meter) {
        let modes =
            |user, system| [(user, KeyValue::new(CPU_MODE, "user")), (system, KeyValue::new(CPU_MODE, "system"))];

        let _ = fam::CPU_TIME
            .describe(meter.f64_observable_counter(fam::CPU_TIME.name))
            .with_callback(move |o| {
                if let Some(s) = stat() {
                    for (value, mode) in modes(s.user, s.system) {
                        o.observe(value, &[mode]);
                    }
                }
            })
            .build();

        // Spread over the CPUs the process may run on, as the conventions define it.
        let cpus = std::thread::available_parallelism().map_or(1.0, |n| n.get() as f64);
        let previous = Mutex::new(stat().map(|s| Previous { at: Instant::now(), user: s.user, system: s.system }));
        let _ = fam::CPU_UTILIZATION
            .describe(meter.f64_observable_gauge(fam::CPU_UTILIZATION.name))
            .with_callback(move |o| {
                let Some(now) = stat() else { return };
                let at = Instant::now();
                let Ok(mut previous) = previous.lock() else { return };
                if let Some(p) = previous.as_ref() {
                    let elapsed = at.duration_since(p.at).as_secs_f64() * cpus;
                    if elapsed > 0.0 {
                        for (used, mode) in modes(now.user - p.user, now.system - p.system) {
                            o.observe((used.max(0.0) / elapsed).min(1.0), &[mode]);
                        }
                    }
                }
                *previous = Some(Previous { at, user: now.user, system: now.system });
            })
            .build();

        // The up-down counters read from the same `/proc/self/stat` line.
        let gauges: [(&Family, StatValue); 3] = [
            (&fam::MEMORY_USAGE, |s| s.resident),
            (&fam::MEMORY_VIRTUAL, |s| s.virtual_bytes),
            (&fam::THREADS, |s| s.threads),
        ];
        for (family, read) in gauges {
            let _ = family
                .describe(meter.i64_observable_up_down_counter(family.name))
                .with_callback(move |o| {
                    if let Some(s) = stat() {
                        o.observe(read(&s), &[]);
                    }
                })
                .build();
        }

        let _ = fam::OPEN_FILE_DESCRIPTORS
            .describe(meter.i64_observable_up_down_counter(fam::OPEN_FILE_DESCRIPTORS.name))
            .with_callback(|o| {
                if let Some(n) = Process::myself().ok().and_then(|p| p.fd_count().ok()) {
                    o.observe(i64::try_from(n).unwrap_or(i64::MAX), &[]);
                }
            })
            .build();

        let _ = fam::CONTEXT_SWITCHES
            .describe(meter.u64_observable_counter(fam::CONTEXT_SWITCHES.name))
            .with_callback(|o| {
                let Some(status) = Process::myself().ok().and_then(|p| p.status().ok()) else { return };
                let types =
                    [(status.voluntary_ctxt_switches, "voluntary"), (status.nonvoluntary_ctxt_switches, "involuntary")];
                for (count, kind) in types {
                    if let Some(count) = count {
                        o.observe(count, &[KeyValue::new(SWITCH_TYPE, kind)]);
                    }
                }
            })
            .build();
    }
}
