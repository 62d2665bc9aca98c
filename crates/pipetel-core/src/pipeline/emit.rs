//! The explicit form: rows computed elsewhere, for callers that aggregate themselves. They go
//! out exactly as the handles' rows do, and the metrics of their stage and shard take their
//! values.

use std::borrow::Cow;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::keys::{warn_refused_once, CounterKey, CounterValue};
use super::row::{Namespaces, StageStat, StageStatus, WorkerStat, WorkerStatus};
use super::runtime::{emit_stage_row, emit_worker_row, namespaces, retention};
use super::table::{new_shard, stage_meta, table, StageInner, StageTable, FAILED, RUNNING, SUCCEEDED};

/// Emits a stage row computed elsewhere (for callers that aggregate shards themselves, e.g. a
/// coordinator whose shards ran on other machines): the same log record and JSON line a
/// [`Stage`](super::Stage) handle emits, plus the stage's duration and run metrics.
///
/// Counters take the keys [`CounterKey::new`] accepts (`zephyr/item_count`) and
/// [`CounterValue`]s, ints or floats. A counter with a refused key or a NaN / infinite value is
/// left out of the row, with a warning naming it (once per key).
pub fn emit_stage_stat(stat: &StageStat) {
    let stat = valid_counters(stat, |s| &s.counters, |s, c| s.counters = c);
    record_explicit_stage(table(), namespaces(), retention(), &stat);
    emit_stage_row(&stat, Vec::new(), None);
}

/// Emits a worker row computed elsewhere: the same log record and JSON line a
/// [`Shard`](super::Shard) handle emits; the worker metrics of that shard take their values.
///
/// Counters are checked as [`emit_stage_stat`] checks them.
pub fn emit_worker_stat(stat: &WorkerStat) {
    let stat = valid_counters(stat, |s| &s.counters, |s, c| s.counters = c);
    record_explicit_worker(table(), namespaces(), retention(), &stat);
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

// ----- the explicit rows in the stage table -----

/// The stage entry of (`name`, `execution_id`), added when there is none.
fn find_or_add(
    table: &StageTable,
    ns: Namespaces,
    retention: Duration,
    name: &str,
    execution_id: &str,
    total_shards: u32,
) -> Arc<StageInner> {
    {
        let stages = table.stages();
        if let Some(s) = stages.iter().find(|s| s.meta.name == name && s.meta.execution_id == execution_id) {
            return s.clone();
        }
    }
    let stage = Arc::new(StageInner::new(stage_meta(ns, name, execution_id), total_shards, Vec::new()));
    table.add(stage.clone(), retention);
    stage
}

/// Makes the stage of an explicitly reported row show that row's totals and status.
pub(crate) fn record_explicit_stage(table: &StageTable, ns: Namespaces, retention: Duration, stat: &StageStat) {
    let stage = find_or_add(table, ns, retention, &stat.stage_name, &stat.execution_id, stat.total_shards);
    {
        let mut f = crate::sync::lock(&stage.fixed);
        *f = Some(stat.clone());
    }
    let state = match stat.status {
        StageStatus::Running => RUNNING,
        StageStatus::Succeeded => SUCCEEDED,
        StageStatus::Failed => FAILED,
    };
    // One error per execution, as the handle path counts it: only the report that turns
    // the execution failed counts, not a repeated one nor the handle's own row re-emitted.
    if stage.state.swap(state, Ordering::AcqRel) != FAILED && state == FAILED {
        stage.stage_errors.fetch_add(1, Ordering::Relaxed);
    }
    if state != RUNNING {
        {
            let mut at = crate::sync::lock(&stage.finished_at);
            at.get_or_insert_with(Instant::now);
        }
    }
}

/// Makes the shard of an explicitly reported row show that row's values and status.
pub(crate) fn record_explicit_worker(table: &StageTable, ns: Namespaces, retention: Duration, stat: &WorkerStat) {
    let stage = find_or_add(table, ns, retention, &stat.stage_name, &stat.execution_id, 0);
    let shard = {
        let mut shards = crate::sync::lock(&stage.shards);
        match shards.iter().find(|s| s.index == stat.shard_index) {
            Some(s) => s.clone(),
            None => {
                let s = Arc::new(new_shard(&stage, stat.shard_index, None, false));
                shards.push(s.clone());
                s
            }
        }
    };
    shard.cells.items.store(stat.items, Ordering::Relaxed);
    shard.cells.bytes.store(stat.bytes, Ordering::Relaxed);
    {
        let mut extra = crate::sync::lock(&shard.extra_counters);
        *extra =
            stat.counters.iter().filter_map(|(k, v)| Some((CounterKey::new(k).ok()?, v.checked(k).ok()?))).collect();
    }
    {
        let mut s = crate::sync::lock(&shard.sample);
        s.set_from_row(stat);
    }
    let state = match stat.status {
        WorkerStatus::Start
        | WorkerStatus::Running
        | WorkerStatus::Straggler
        | WorkerStatus::Stalled
        | WorkerStatus::Resumed => RUNNING,
        WorkerStatus::End => SUCCEEDED,
        WorkerStatus::Failed => FAILED,
    };
    shard.state.store(state, Ordering::Release);
}
