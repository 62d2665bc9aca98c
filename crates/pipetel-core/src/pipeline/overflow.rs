//! The worker series' cardinality overflow: the one rule of [`crate::limits`] applied to the
//! pipeline's observable instruments. An instrument observes at most `limit - 1` shard series;
//! past that, counters fold the rest into one series marked `otel.metric.overflow=true` holding
//! their sum (the SDK's own overflow series would keep only one of the observed values), gauges
//! drop them, and the first overflow of each metric is logged once.

use std::ops::Add;

use opentelemetry::KeyValue;

use crate::limits::{overflow_attributes, Folder};

/// What happens to a series past the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fold {
    /// Added into the overflow series (counters: nothing is lost from the total).
    Sum,
    /// Not observed (gauges: a sum of gauges means nothing).
    Drop,
}

/// What the one warning for all worker instruments is keyed by.
const WORKER_SERIES: &str = "pipeline.worker.* (worker series)";
/// What it advises: worker series are bounded by the stage's width, not by label hygiene.
const ADVICE: &str =
    "raise PIPETEL_CARDINALITY_LIMIT for wider stages, or rely on the worker rows, which always carry every shard";

/// One collection's series of one instrument, counted against the limit.
pub(crate) struct Series<M> {
    folder: Folder<'static, M>,
    fold: Fold,
}

impl<M: Add<Output = M>> Series<M> {
    /// One collection of a worker instrument; the first overflow of any worker instrument is
    /// warned about once per process, naming the worker series as a whole.
    pub(crate) fn new(limit: usize, fold: Fold) -> Self {
        Self::named(limit, fold, WORKER_SERIES, ADVICE)
    }

    /// One collection of the instrument `metric`, warned about once with `advice`.
    pub(crate) fn named(limit: usize, fold: Fold, metric: &'static str, advice: &'static str) -> Self {
        Self { folder: Folder::with_limit(metric, limit).advice(advice), fold }
    }

    /// Observes `value` under `attrs` (hands them to `obs`), or folds it once the room is used
    /// up.
    pub(crate) fn observe(&mut self, obs: &mut dyn FnMut(M, &[KeyValue]), value: M, attrs: &[KeyValue]) {
        if self.folder.admit() {
            obs(value, attrs);
        } else if self.fold == Fold::Sum {
            self.folder.fold(value, Add::add);
        }
    }

    /// Observes the overflow series, if anything folded (the limits module warns once).
    pub(crate) fn finish(self, obs: &mut dyn FnMut(M, &[KeyValue])) {
        if let Some(v) = self.folder.finish() {
            obs(v, &overflow_attributes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(limit: usize, fold: Fold, values: &[u64]) -> Vec<(u64, bool)> {
        let mut seen = Vec::new();
        let mut observe = |value: u64, attrs: &[KeyValue]| {
            let overflow = attrs.iter().any(|kv| kv.key.as_str() == "otel.metric.overflow");
            seen.push((value, overflow));
        };
        let mut series = Series::new(limit, fold);
        for v in values {
            series.observe(&mut observe, *v, &[]);
        }
        series.finish(&mut observe);
        seen
    }

    #[test]
    fn counters_past_the_limit_fold_their_sum_into_one_overflow_series() {
        // Limit 3: two series, then one overflow series holding the rest (nothing lost).
        assert_eq!(run(3, Fold::Sum, &[1, 2, 3, 4, 5]), [(1, false), (2, false), (12, true)]);
        assert_eq!(run(3, Fold::Sum, &[1, 2]), [(1, false), (2, false)]);
    }

    #[test]
    fn gauges_past_the_limit_are_dropped() {
        assert_eq!(run(3, Fold::Drop, &[1, 2, 3, 4, 5]), [(1, false), (2, false)]);
    }

    #[test]
    fn a_limit_below_two_still_keeps_one_series() {
        assert_eq!(run(0, Fold::Sum, &[1, 2, 3]), [(1, false), (5, true)]);
    }
}
