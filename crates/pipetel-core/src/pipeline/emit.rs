//! The explicit form: rows computed elsewhere, for callers that aggregate themselves. They go
//! out exactly as the handles' rows do, and the metrics of their stage and shard take their
//! values.

use std::borrow::Cow;

use super::keys::{warn_refused_once, CounterKey, CounterValue};
use super::row::{StageStat, WorkerStat};
use super::runtime::{emit_stage_row, emit_worker_row, namespaces, retention};
use super::table::table;

/// Emits a stage row computed elsewhere (for callers that aggregate shards themselves, e.g. a
/// coordinator whose shards ran on other machines): the same log record and JSON line a
/// [`Stage`](super::Stage) handle emits, plus the stage's duration and run metrics.
///
/// Counters take the keys [`CounterKey::new`] accepts (`zephyr/item_count`) and
/// [`CounterValue`]s, ints or floats. A counter with a refused key or a NaN / infinite value is
/// left out of the row, with a warning naming it (once per key).
pub fn emit_stage_stat(stat: &StageStat) {
    let stat = valid_counters(stat, |s| &s.counters, |s, c| s.counters = c);
    table().record_explicit_stage(namespaces(), retention(), &stat);
    emit_stage_row(&stat, Vec::new(), None);
}

/// Emits a worker row computed elsewhere: the same log record and JSON line a
/// [`Shard`](super::Shard) handle emits; the worker metrics of that shard take their values.
///
/// Counters are checked as [`emit_stage_stat`] checks them.
pub fn emit_worker_stat(stat: &WorkerStat) {
    let stat = valid_counters(stat, |s| &s.counters, |s, c| s.counters = c);
    table().record_explicit_worker(namespaces(), retention(), &stat);
    emit_worker_row(&stat, Vec::new(), None);
}

/// `stat` itself when all its counters are valid, else a copy without the refused ones (each
/// warned about once per key).
fn valid_counters<'a, T: Clone>(
    stat: &'a T,
    counters: fn(&T) -> &Vec<(String, CounterValue)>,
    set: fn(&mut T, Vec<(String, CounterValue)>),
) -> Cow<'a, T> {
    let refused = |(k, v): &(String, CounterValue)| -> Option<Box<dyn std::error::Error>> {
        if let Err(e) = CounterKey::new(k) {
            return Some(Box::new(e));
        }
        v.checked(k).err().map(|e| Box::new(e) as Box<dyn std::error::Error>)
    };
    if counters(stat).iter().all(|c| refused(c).is_none()) {
        return Cow::Borrowed(stat);
    }
    let kept = counters(stat)
        .iter()
        .filter(|c| match refused(c) {
            Some(e) => {
                warn_refused_once(&c.0, e.as_ref());
                false
            }
            None => true,
        })
        .cloned()
        .collect();
    let mut copy = stat.clone();
    set(&mut copy, kept);
    Cow::Owned(copy)
}
