//! Periodic samples: rates since the previous sample, CPU time of the shard's thread since it
//! started, and the process's resident memory with running average and peak. Pure arithmetic
//! over [`Reading`]s; the readings themselves come from [`super::process`].

use std::time::{Duration, Instant};

use super::process::Reading;
use super::row::WorkerStat;

/// What one sample computed.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Taken {
    pub(crate) item_rate: f64,
    pub(crate) byte_rate: f64,
    pub(crate) cpu_time: Duration,
    pub(crate) cpu_percent: Option<f64>,
    pub(crate) cpu_percent_avg: Option<f64>,
    pub(crate) memory_current: u64,
    pub(crate) memory_avg: u64,
    pub(crate) memory_peak: u64,
}

/// Running state of one shard's samples.
#[derive(Debug, Clone, Default)]
pub(crate) struct SampleState {
    last_at: Option<Instant>,
    last_items: u64,
    last_bytes: u64,
    /// Thread CPU at the shard's start: the shard's CPU time is measured from there.
    cpu_at_start: Option<Duration>,
    last_cpu: Option<Duration>,
    mem_sum: u128,
    mem_count: u64,
    pub(crate) last: Taken,
    /// Wall-clock time of the last sample, seconds since the epoch (the heartbeat).
    pub(crate) heartbeat: f64,
}

impl SampleState {
    /// Folds a new reading in. `first` marks the start row: it sets the baselines.
    pub(crate) fn update(
        &mut self,
        now: Instant,
        started: Instant,
        items: u64,
        bytes: u64,
        r: Reading,
        first: bool,
    ) -> Taken {
        if first {
            self.cpu_at_start = r.thread_cpu;
        }
        let since = self
            .last_at
            .map(|t| now.saturating_duration_since(t))
            .unwrap_or_else(|| now.saturating_duration_since(started));
        let secs = since.as_secs_f64();
        let rate = |delta: u64| if secs > 0.0 { delta as f64 / secs } else { 0.0 };
        let item_rate = rate(items.saturating_sub(self.last_items));
        let byte_rate = rate(bytes.saturating_sub(self.last_bytes));
        let cpu_time = match (r.thread_cpu, self.cpu_at_start) {
            (Some(now_cpu), Some(start_cpu)) => now_cpu.saturating_sub(start_cpu),
            _ => self.last.cpu_time,
        };
        let cpu_percent = match (r.thread_cpu, self.last_cpu.or(self.cpu_at_start)) {
            (Some(now_cpu), Some(prev)) if secs > 0.0 && !first => {
                Some(100.0 * now_cpu.saturating_sub(prev).as_secs_f64() / secs)
            }
            _ => None,
        };
        let life = now.saturating_duration_since(started).as_secs_f64();
        let cpu_percent_avg = (r.thread_cpu.is_some() && self.cpu_at_start.is_some() && life > 0.0 && !first)
            .then(|| 100.0 * cpu_time.as_secs_f64() / life);
        if let Some(rss) = r.rss_bytes {
            self.mem_sum += u128::from(rss);
            self.mem_count += 1;
        }
        let memory_current = r.rss_bytes.unwrap_or(self.last.memory_current);
        let memory_avg = if self.mem_count > 0 {
            u64::try_from(self.mem_sum / u128::from(self.mem_count)).unwrap_or(u64::MAX)
        } else {
            0
        };
        let taken = Taken {
            item_rate,
            byte_rate,
            cpu_time,
            cpu_percent,
            cpu_percent_avg,
            memory_current,
            memory_avg,
            memory_peak: self.last.memory_peak.max(memory_current),
        };
        self.last_at = Some(now);
        self.last_items = items;
        self.last_bytes = bytes;
        if r.thread_cpu.is_some() {
            self.last_cpu = r.thread_cpu;
        }
        self.last = taken;
        self.heartbeat = unix_now();
        taken
    }

    /// Takes the values of an explicitly reported row.
    pub(crate) fn set_from_row(&mut self, w: &WorkerStat) {
        self.last = Taken {
            item_rate: w.item_rate,
            byte_rate: w.byte_rate,
            cpu_time: w.cpu_time,
            cpu_percent: w.cpu_percent,
            cpu_percent_avg: w.cpu_percent_avg,
            memory_current: w.memory_current,
            memory_avg: w.memory_avg,
            memory_peak: w.memory_peak,
        };
        self.heartbeat = w.timestamp.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
    }

    pub(crate) fn cpu_percent_avg(&self) -> Option<f64> {
        self.last.cpu_percent_avg
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(cpu_ms: u64, rss: u64) -> Reading {
        Reading { thread_cpu: Some(Duration::from_millis(cpu_ms)), rss_bytes: Some(rss) }
    }

    #[test]
    fn rates_cpu_and_memory_arithmetic() {
        let t0 = Instant::now();
        let mut s = SampleState::default();
        let start = s.update(t0, t0, 0, 0, reading(1000, 100), true);
        assert_eq!((start.item_rate, start.cpu_time, start.cpu_percent), (0.0, Duration::ZERO, None));
        // 2 s later: 200 items, 4000 bytes, 1 s of CPU since start, 300 bytes resident.
        let a = s.update(t0 + Duration::from_secs(2), t0, 200, 4000, reading(2000, 300), false);
        assert_eq!((a.item_rate, a.byte_rate), (100.0, 2000.0));
        assert_eq!(a.cpu_time, Duration::from_secs(1));
        assert_eq!(a.cpu_percent, Some(50.0));
        assert_eq!(a.cpu_percent_avg, Some(50.0));
        assert_eq!((a.memory_current, a.memory_avg, a.memory_peak), (300, 200, 300));
        // 2 s later: 100 more items, 2 s more CPU (100 %), memory down to 50.
        let b = s.update(t0 + Duration::from_secs(4), t0, 300, 4000, reading(4000, 50), false);
        assert_eq!((b.item_rate, b.byte_rate), (50.0, 0.0));
        assert_eq!(b.cpu_percent, Some(100.0));
        assert_eq!(b.cpu_percent_avg, Some(75.0));
        assert_eq!((b.memory_current, b.memory_avg, b.memory_peak), (50, 150, 300));
    }

    #[test]
    fn missing_readings_are_absent_not_zero() {
        let t0 = Instant::now();
        let mut s = SampleState::default();
        s.update(t0, t0, 0, 0, Reading::default(), true);
        let a = s.update(t0 + Duration::from_secs(1), t0, 10, 0, Reading::default(), false);
        assert_eq!((a.cpu_percent, a.cpu_percent_avg), (None, None));
        assert_eq!(a.item_rate, 10.0);
    }
}
