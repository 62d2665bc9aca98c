//! The explicit form: rows computed elsewhere, for callers that aggregate themselves. They go
//! out exactly as the handles' rows do, and the metrics of their stage and shard take their
//! values.

use super::row::{StageStat, WorkerStat};
use super::runtime::{emit_stage_row, emit_worker_row, namespaces, retention};
use super::table::table;

/// Emits a stage row computed elsewhere (for callers that aggregate shards themselves, e.g. a
/// coordinator whose shards ran on other machines): the same log record and JSON line a
/// [`Stage`](super::Stage) handle emits, plus the stage's duration and run metrics.
pub fn emit_stage_stat(stat: &StageStat) {
    table().record_explicit_stage(namespaces(), retention(), stat);
    emit_stage_row(stat, None);
}

/// Emits a worker row computed elsewhere: the same log record and JSON line a
/// [`Shard`](super::Shard) handle emits; the worker metrics of that shard take their values.
pub fn emit_worker_stat(stat: &WorkerStat) {
    table().record_explicit_worker(namespaces(), retention(), stat);
    emit_worker_row(stat, None);
}
