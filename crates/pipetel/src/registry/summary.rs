//! The sliding time window behind summaries: a ring of DDSketches.
//!
//! Each of `age_buckets` sketches covers `max_age / age_buckets` of time; an observation goes
//! into the newest one, and a quantile is read from the merge of those still inside the window,
//! so the window slides in steps of `max_age / age_buckets` and covers between
//! `max_age * (age_buckets - 1) / age_buckets` and `max_age` of the most recent past.
//!
//! # Error bound
//! DDSketch (`sketches-ddsketch`, relative accuracy `α = 0.01`): for a window holding `n`
//! observations, the value returned for quantile `q` is within `±1 %` (relative) of the exact
//! value of rank `⌊q·(n−1)⌋` in the sorted observations (the smallest value for `q = 0`, the
//! largest for `q = 1`), for values whose magnitude is above `1e-9` (smaller ones read as 0).
//! The sketch grows to at most 2048 bins per sign, which at `α = 0.01` spans more than 17
//! orders of magnitude before its lowest bins collapse.

use std::time::{Duration, Instant};

use sketches_ddsketch::{Config, DDSketch};

/// The relative accuracy of the summaries' quantiles (see the module docs).
pub const RELATIVE_ERROR: f64 = 0.01;

fn sketch() -> DDSketch {
    DDSketch::new(Config::new(RELATIVE_ERROR, 2048, 1.0e-9))
}

/// A ring of sketches sliding over time.
pub(crate) struct Window {
    ring: Vec<DDSketch>,
    head: usize,
    head_started: Instant,
    step: Duration,
}

impl Window {
    pub(crate) fn new(max_age: Duration, age_buckets: u32) -> Self {
        let n = age_buckets.max(1);
        Self { ring: (0..n).map(|_| sketch()).collect(), head: 0, head_started: Instant::now(), step: max_age / n }
    }

    /// Moves the head forward past every step that ended, clearing the sketches that leave the
    /// window.
    fn rotate(&mut self, now: Instant) {
        let mut elapsed = now.saturating_duration_since(self.head_started);
        if elapsed < self.step || self.step.is_zero() {
            return;
        }
        let len = self.ring.len();
        let mut steps = 0usize;
        while elapsed >= self.step && steps < len {
            self.head = (self.head + 1) % len;
            self.ring[self.head] = sketch();
            self.head_started += self.step;
            elapsed -= self.step;
            steps += 1;
        }
        if elapsed >= self.step {
            // Idle for longer than the whole window: everything was cleared; restart the clock.
            self.head_started = now;
        }
    }

    pub(crate) fn observe(&mut self, v: f64) {
        self.rotate(Instant::now());
        self.ring[self.head].add(v);
    }

    /// The window's quantiles, `None` where the window is empty.
    pub(crate) fn quantiles(&mut self, qs: &[f64]) -> Vec<Option<f64>> {
        self.rotate(Instant::now());
        let mut merged = sketch();
        for s in &self.ring {
            if s.count() > 0 {
                // Same configuration on both sides: merging cannot fail.
                let _ = merged.merge(s);
            }
        }
        qs.iter().map(|q| merged.quantile(*q).ok().flatten()).collect()
    }

    pub(crate) fn clear(&mut self) {
        for s in &mut self.ring {
            *s = sketch();
        }
        self.head_started = Instant::now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(sorted: &[f64], q: f64) -> f64 {
        sorted[(q * (sorted.len() as f64 - 1.0)) as usize]
    }

    #[test]
    fn quantiles_stay_within_the_stated_error() {
        let mut w = Window::new(Duration::from_secs(600), 5);
        let mut values: Vec<f64> = (0..5000u64).map(|i| ((i * 7919) % 5000) as f64 / 100.0 + 0.001).collect();
        for v in &values {
            w.observe(*v);
        }
        values.sort_by(f64::total_cmp);
        let qs = [0.0, 0.5, 0.9, 0.95, 0.99, 1.0];
        for (q, got) in qs.iter().zip(w.quantiles(&qs)) {
            let want = exact(&values, *q);
            let got = got.expect("non-empty window");
            assert!((got - want).abs() <= RELATIVE_ERROR * want.abs() + 1e-12, "q={q}: {got} vs exact {want}");
        }
    }

    #[test]
    fn old_observations_leave_the_window() {
        let mut w = Window::new(Duration::from_millis(200), 2);
        w.observe(100.0);
        assert!(w.quantiles(&[0.5])[0].is_some());
        std::thread::sleep(Duration::from_millis(450));
        assert_eq!(w.quantiles(&[0.5]), vec![None]);
        w.observe(3.0);
        let q = w.quantiles(&[0.5])[0].expect("one observation");
        assert!((q - 3.0).abs() <= 0.03);
    }

    #[test]
    fn negative_values_and_zero_are_kept() {
        let mut w = Window::new(Duration::from_secs(60), 1);
        for v in [-5.0, 0.0, 5.0] {
            w.observe(v);
        }
        let q = w.quantiles(&[0.0, 0.5, 1.0]);
        assert_eq!(q, vec![Some(-5.0), Some(0.0), Some(5.0)]);
        w.clear();
        assert_eq!(w.quantiles(&[0.5]), vec![None]);
    }
}
