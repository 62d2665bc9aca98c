//! GPU use attributed to shards and stages. The crate that polls the GPUs installs a reader
//! ([`set_gpu_reader`]); at each sample the sampler thread reads what this process did on its
//! GPUs since the previous sample and shares it among the shards running in the process.
//!
//! # The rule
//! - A reading covers the interval since the previous one: the GPU-busy share of this process
//!   (its kernels' share of the time on its devices, summed over devices: 2.0 is two GPUs
//!   busy), the devices' SM and tensor activity where the GPU reports them (GPM, Hopper and
//!   later), the GPU memory this process holds, and the energy attributed to it (each device's
//!   energy counter's delta, shared by the processes on the device in proportion to their
//!   utilisation).
//! - The shards running in this process at that sample share the interval equally: each gets
//!   `1 / n` of the busy seconds and the energy, and the activity as a time-weighted mean. A
//!   process cannot tell which of its threads launched a kernel, so shards of one process that
//!   share a GPU share its use; one shard per process (the common layout of GPU stages) gets all
//!   of it.
//! - A shard held the GPUs while its process held GPU memory; it was idle on them for the part
//!   of that time when SM activity (or, without GPM, the busy share) stayed under 5 %
//!   (`pipeline.stage.gpu.idle`).
//!
//! No reader, or no GPU, gives no GPU fields and no GPU series (never zeros).

use std::sync::{Mutex, RwLock};
use std::time::Instant;

/// Activity under this share counts as idle.
pub const IDLE_BELOW: f64 = 0.05;

/// What this process did on its GPUs over one interval (see the [module](self)).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuUse {
    /// Share of the interval this process's kernels ran, summed over its devices.
    pub busy: f64,
    /// Mean SM activity of its devices (0–1), where the GPU reports it.
    pub sm_active: Option<f64>,
    /// Mean tensor-pipe activity of its devices (0–1), where the GPU reports it.
    pub tensor_active: Option<f64>,
    /// GPU memory this process holds now, bytes (over its devices).
    pub memory_bytes: u64,
    /// Energy attributed to this process over the interval, joules.
    pub energy_joules: f64,
}

/// Gives this process's GPU use since its previous call; `None` when there is no GPU.
pub type GpuReader = Box<dyn FnMut() -> Option<GpuUse> + Send>;

static READER: RwLock<Option<Mutex<GpuReader>>> = RwLock::new(None);
static LAST: Mutex<Option<Instant>> = Mutex::new(None);

/// Installs (or, with `None`, removes) the reader the sampler attributes GPU use with.
pub fn set_gpu_reader(reader: Option<GpuReader>) {
    *crate::sync::write(&READER) = reader.map(Mutex::new);
    *crate::sync::lock(&LAST) = None;
}

/// This process's GPU use since the previous read, and the seconds it covers.
pub(crate) fn read(now: Instant) -> Option<(GpuUse, f64)> {
    let readers = crate::sync::read(&READER);
    let reader = readers.as_ref()?;
    let used = (crate::sync::lock(reader))()?;
    let dt = {
        let mut last = crate::sync::lock(&LAST);
        let dt = last.map(|t| now.saturating_duration_since(t).as_secs_f64());
        *last = Some(now);
        dt
    }?;
    Some((used, dt))
}

/// What one shard (or, summed, one stage) used of the GPUs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GpuTally {
    /// GPU-busy seconds attributed to it.
    pub seconds: f64,
    /// Seconds it held GPUs (its process held GPU memory while it ran).
    pub held: f64,
    /// Of those, the seconds activity stayed under 5 %.
    pub idle: f64,
    /// Energy attributed to it, joules.
    pub energy_joules: f64,
    /// Peak GPU memory of its process while it ran, bytes.
    pub peak_memory: u64,
    sm: Weighted,
    tensor: Weighted,
}

/// A time-weighted mean under way.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
struct Weighted {
    sum: f64,
    time: f64,
}

impl Weighted {
    fn add(&mut self, value: Option<f64>, time: f64) {
        if let Some(v) = value {
            self.sum += v * time;
            self.time += time;
        }
    }

    fn mean(&self) -> Option<f64> {
        (self.time > 0.0).then(|| self.sum / self.time)
    }

    fn merge(&mut self, other: &Weighted) {
        self.sum += other.sum;
        self.time += other.time;
    }
}

impl GpuTally {
    /// Adds a `share` of a reading over `dt` seconds.
    pub(crate) fn add(&mut self, used: &GpuUse, dt: f64, share: f64) {
        let time = dt * share;
        self.seconds += used.busy * time;
        self.energy_joules += used.energy_joules * share;
        self.peak_memory = self.peak_memory.max(used.memory_bytes);
        self.sm.add(used.sm_active, time);
        self.tensor.add(used.tensor_active, time);
        if used.memory_bytes > 0 {
            self.held += time;
            if used.sm_active.unwrap_or(used.busy) < IDLE_BELOW {
                self.idle += time;
            }
        }
    }

    /// Folds another shard's tally in (a stage's sum).
    pub(crate) fn merge(&mut self, other: &GpuTally) {
        self.seconds += other.seconds;
        self.held += other.held;
        self.idle += other.idle;
        self.energy_joules += other.energy_joules;
        self.peak_memory = self.peak_memory.max(other.peak_memory);
        self.sm.merge(&other.sm);
        self.tensor.merge(&other.tensor);
    }

    /// Mean SM activity while it ran, where the GPUs report it.
    pub fn sm_active(&self) -> Option<f64> {
        self.sm.mean()
    }

    /// Mean tensor-pipe activity while it ran, where the GPUs report it.
    pub fn tensor_active(&self) -> Option<f64> {
        self.tensor.mean()
    }

    /// Whether any reading reached it (a shard that ran while a reader saw GPUs).
    pub fn is_empty(&self) -> bool {
        *self == GpuTally::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_busy_seconds_energy_and_activity_over_time() {
        let mut t = GpuTally::default();
        let busy = GpuUse {
            busy: 0.8,
            sm_active: Some(0.6),
            tensor_active: Some(0.3),
            memory_bytes: 1 << 30,
            energy_joules: 300.0,
        };
        // Two shards share a 2 s interval, then this one runs alone 1 s, idle.
        t.add(&busy, 2.0, 0.5);
        let idle = GpuUse {
            busy: 0.01,
            sm_active: Some(0.0),
            tensor_active: Some(0.0),
            memory_bytes: 1 << 29,
            energy_joules: 60.0,
        };
        t.add(&idle, 1.0, 1.0);
        assert!((t.seconds - (0.8 + 0.01)).abs() < 1e-12, "{t:?}");
        assert_eq!(t.energy_joules, 210.0);
        assert_eq!((t.held, t.idle, t.peak_memory), (2.0, 1.0, 1 << 30));
        assert_eq!(t.sm_active(), Some(0.3));
        assert_eq!(t.tensor_active(), Some(0.15));
        // Without GPM the busy share decides idleness; without memory held, nothing is held.
        let mut u = GpuTally::default();
        u.add(&GpuUse { busy: 0.02, memory_bytes: 1, ..GpuUse::default() }, 1.0, 1.0);
        u.add(&GpuUse { busy: 0.0, ..GpuUse::default() }, 1.0, 1.0);
        assert_eq!((u.held, u.idle, u.sm_active()), (1.0, 1.0, None));
        let mut stage = GpuTally::default();
        stage.merge(&t);
        stage.merge(&u);
        assert_eq!((stage.held, stage.idle), (3.0, 2.0));
        assert_eq!(stage.sm_active(), Some(0.3), "a shard without GPM readings does not weigh in");
    }
}
