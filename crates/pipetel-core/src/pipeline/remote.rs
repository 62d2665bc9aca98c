//! Distributed stages: shards run in other processes ([`Stage::remote`](super::Stage::remote))
//! report to the process that owns the stage, on the recorders' cross-process path.
//!
//! A remote view's [`Stage::remote_report`](super::Stage::remote_report) builds a
//! [`pipetel_recorders::Envelope`]: source = the reporting process's id, a sequence that grows
//! per report, and two gauge snapshots of **cumulative** per-shard state —
//! `pipetel.remote_stage.shard` (`items`, `bytes`, `state`, `attempts`, and `elapsed`: the
//! seconds of its last attempt, for the stage's shard distribution, per shard index) and
//! `pipetel.remote_stage.counter` (each user counter per shard, with its int/float kind). The
//! bytes travel however the user likes (the same pipes, sockets or files the snapshot hub
//! reads; [`pipetel_recorders::FrameWriter`] frames them). The owner's
//! [`Stage::ingest_remote`](super::Stage::ingest_remote) keeps, per (source, shard index), the
//! shard from the envelope with the highest sequence: cumulative values, so a lost, repeated or
//! reordered envelope never corrupts totals.

use std::collections::BTreeMap;

use pipetel_recorders::{Envelope, Family, Gauge, MetricSnapshot};

use super::keys::{CounterKey, CounterValue};
use super::table::{RemoteShard, RemoteShards, ShardInner, FAILED, RUNNING, SUCCEEDED};

/// Family of per-shard figures.
pub(crate) const SHARD_FAMILY: &str = "pipetel.remote_stage.shard";
/// Family of per-shard user counters.
pub(crate) const COUNTER_FAMILY: &str = "pipetel.remote_stage.counter";
const SHARD_LABELS: [&str; 4] = ["stage", "execution_id", "shard", "field"];
const COUNTER_LABELS: [&str; 5] = ["stage", "execution_id", "shard", "key", "kind"];
/// Most remote sources one stage keeps.
pub(crate) const MAX_SOURCES: usize = 4096;
/// Most shards one source may hold, over all its reports.
pub(crate) const MAX_SHARDS_PER_SOURCE: usize = 65_536;
/// Most distinct counter keys one shard may report.
pub(crate) const MAX_COUNTER_KEYS_PER_SHARD: usize = 1024;
/// Most counter series (shard, key, kind) one source may hold, over all its reports; a report
/// with more is refused before any of them is read.
pub(crate) const MAX_COUNTER_SERIES_PER_SOURCE: usize = 262_144;
/// Figures per shard in the shard family (items, bytes, state, attempts, elapsed).
const FIELDS: usize = 5;

/// What [`Stage::ingest_remote`](super::Stage::ingest_remote) did with a report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RemoteIngested {
    /// Newer than anything from its source: its shards replace theirs.
    Accepted,
    /// Not newer than the latest from its source (late or repeated): ignored.
    Superseded,
}

/// A remote report that is refused whole, naming what is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteReportError {
    /// The bytes are not an envelope.
    #[error("remote stage report does not decode: {0}")]
    Decode(String),
    /// A family that is not one of the remote-stage families, or one of them with other labels.
    #[error("remote stage report from {from:?} holds family {family:?}, not a remote-stage report family")]
    Family {
        /// The envelope's source.
        from: String,
        /// The unexpected family.
        family: String,
    },
    /// A series that belongs to another stage or execution.
    #[error("remote stage report from {from:?} is for stage {stage:?} execution {execution_id:?}, not this one")]
    OtherStage {
        /// The envelope's source.
        from: String,
        /// The stage it names.
        stage: String,
        /// The execution it names.
        execution_id: String,
    },
    /// A series whose labels or value are not valid.
    #[error("remote stage report from {from:?}: invalid series {labels:?} = {value}: {why}")]
    Series {
        /// The envelope's source.
        from: String,
        /// The series' labels.
        labels: Vec<String>,
        /// Its value.
        value: f64,
        /// What is wrong.
        why: &'static str,
    },
    /// Too many sources or shards.
    #[error("remote stage report from {from:?} refused: {why}")]
    Limit {
        /// The envelope's source.
        from: String,
        /// Which limit.
        why: &'static str,
    },
}

fn shard_family() -> Family {
    // Both names and labels are fixed and valid; the fallback is never taken.
    Family::gauge(SHARD_FAMILY, "Cumulative per-shard figures of a remote stage view", "", &SHARD_LABELS)
        .unwrap_or_else(|e| unreachable!("fixed family: {e}"))
}

fn counter_family() -> Family {
    Family::gauge(COUNTER_FAMILY, "Cumulative per-shard user counters of a remote stage view", "", &COUNTER_LABELS)
        .unwrap_or_else(|e| unreachable!("fixed family: {e}"))
}

/// The report of `shards` (a stage's attempts, in start order) as an envelope.
pub(crate) fn report(
    stage: &str,
    execution_id: &str,
    source: &str,
    sequence: u64,
    shards: &[std::sync::Arc<ShardInner>],
) -> Envelope {
    let mut per_index: BTreeMap<u32, RemoteShard> = BTreeMap::new();
    for s in shards {
        let r = per_index.entry(s.index).or_default();
        r.items = r.items.saturating_add(s.items());
        r.bytes = r.bytes.saturating_add(s.bytes());
        r.state = s.state.load(std::sync::atomic::Ordering::Acquire);
        r.attempts += 1;
        r.elapsed = Some(s.elapsed());
        for (k, v) in s.counters_snapshot() {
            r.counters.add(&k, v);
        }
    }
    let (figures, counters) = (Gauge::new(shard_family()), Gauge::new(counter_family()));
    let (Ok(figures), Ok(counters)) = (figures, counters) else { unreachable!("fixed families are valid") };
    for (index, r) in &per_index {
        let index = index.to_string();
        for (field, value) in [
            ("items", r.items as f64),
            ("bytes", r.bytes as f64),
            ("state", f64::from(r.state)),
            ("attempts", f64::from(r.attempts)),
            ("elapsed", r.elapsed.unwrap_or(0.0)),
        ] {
            let _ = figures.set(&[stage, execution_id, &index, field], value);
        }
        for (key, value) in r.counters.iter() {
            let kind = match value {
                CounterValue::Int(_) => "int",
                CounterValue::Float(_) => "float",
            };
            let _ = counters.set(&[stage, execution_id, &index, key, kind], value.as_f64());
        }
    }
    Envelope::new(source, sequence, vec![figures.snapshot(), counters.snapshot()])
}

/// Decodes `bytes` and folds the report into `into`: what
/// [`Stage::ingest_remote`](super::Stage::ingest_remote) does (it decodes before taking the
/// stage's lock).
#[cfg_attr(not(feature = "fuzzing"), allow(dead_code))]
pub(crate) fn ingest_bytes(
    stage: &str,
    execution_id: &str,
    bytes: &[u8],
    into: &mut RemoteShards,
) -> Result<RemoteIngested, RemoteReportError> {
    let envelope = Envelope::decode(bytes).map_err(|e| RemoteReportError::Decode(e.to_string()))?;
    ingest(stage, execution_id, &envelope, into)
}

/// Checks `envelope` against the stage and folds it into `into`.
pub(crate) fn ingest(
    stage: &str,
    execution_id: &str,
    envelope: &Envelope,
    into: &mut RemoteShards,
) -> Result<RemoteIngested, RemoteReportError> {
    let source = &envelope.source;
    if let Some(last) = into.sequences.get(source) {
        if envelope.sequence <= *last {
            return Ok(RemoteIngested::Superseded);
        }
    } else if into.sequences.len() >= MAX_SOURCES {
        return Err(RemoteReportError::Limit { from: source.clone(), why: "too many sources for one stage (4096)" });
    }
    let limit = |why| RemoteReportError::Limit { from: source.clone(), why };
    let (shard_family, counter_family) = (shard_family(), counter_family());
    // The families and their sizes first, before any series is read.
    let mut families = Vec::with_capacity(envelope.snapshots.len());
    for snap in &envelope.snapshots {
        let family = if snap.family().compatible_with(&shard_family) {
            if snap.len() > FIELDS * MAX_SHARDS_PER_SOURCE {
                return Err(limit("more than 65536 shards from one source"));
            }
            SHARD_FAMILY
        } else if snap.family().compatible_with(&counter_family) {
            if snap.len() > MAX_COUNTER_SERIES_PER_SOURCE {
                return Err(limit("more than 262144 counter series from one source"));
            }
            COUNTER_FAMILY
        } else {
            return Err(RemoteReportError::Family { from: source.clone(), family: snap.name().to_string() });
        };
        families.push((family, snap));
    }
    let mut shards: BTreeMap<u32, RemoteShard> = BTreeMap::new();
    for (family, snap) in families {
        read_series(stage, execution_id, source, family, snap, &mut shards)?;
    }
    // What the source would hold: its earlier shards this report does not replace, and these.
    let (mut held, mut held_counters) = (shards.len(), shards.values().map(|s| s.counters.len()).sum::<usize>());
    for ((_, index), shard) in into.shards.range((source.clone(), 0)..=(source.clone(), u32::MAX)) {
        if !shards.contains_key(index) {
            held += 1;
            held_counters += shard.counters.len();
        }
    }
    if held > MAX_SHARDS_PER_SOURCE {
        return Err(limit("more than 65536 shards from one source"));
    }
    if held_counters > MAX_COUNTER_SERIES_PER_SOURCE {
        return Err(limit("more than 262144 counter series from one source"));
    }
    into.sequences.insert(source.clone(), envelope.sequence);
    for (index, shard) in shards {
        into.shards.insert((source.clone(), index), shard);
    }
    Ok(RemoteIngested::Accepted)
}

fn read_series(
    stage: &str,
    execution_id: &str,
    source: &str,
    family: &str,
    snap: &MetricSnapshot,
    shards: &mut BTreeMap<u32, RemoteShard>,
) -> Result<(), RemoteReportError> {
    for s in snap.series() {
        let bad = |why| RemoteReportError::Series {
            from: source.to_string(),
            labels: s.labels.to_vec(),
            value: s.value,
            why,
        };
        let l = s.labels;
        if l[0] != stage || l[1] != execution_id {
            return Err(RemoteReportError::OtherStage {
                from: source.to_string(),
                stage: l[0].clone(),
                execution_id: l[1].clone(),
            });
        }
        let index: u32 = l[2].parse().map_err(|_| bad("the shard index is not a u32"))?;
        if !s.value.is_finite() || s.value < 0.0 && family == SHARD_FAMILY {
            return Err(bad("the value is not a finite, non-negative number"));
        }
        let shard = shards.entry(index).or_default();
        if family == SHARD_FAMILY {
            let whole = |v: f64| -> Result<u64, RemoteReportError> {
                if v.fract() == 0.0 && v <= u64::MAX as f64 {
                    Ok(v as u64)
                } else {
                    Err(bad("the value is not a whole number"))
                }
            };
            match l[3].as_str() {
                "items" => shard.items = whole(s.value)?,
                "bytes" => shard.bytes = whole(s.value)?,
                "state" => {
                    shard.state = match whole(s.value)? {
                        0 => RUNNING,
                        1 => SUCCEEDED,
                        2 => FAILED,
                        _ => return Err(bad("the state is not 0 (running), 1 (succeeded) or 2 (failed)")),
                    }
                }
                "attempts" => shard.attempts = u32::try_from(whole(s.value)?).unwrap_or(u32::MAX),
                "elapsed" => shard.elapsed = Some(s.value),
                _ => return Err(bad("unknown field")),
            }
        } else {
            if CounterKey::new(&l[3]).is_err() {
                return Err(bad("the counter key is not valid"));
            }
            let value = match l[4].as_str() {
                "int" if s.value.fract() == 0.0 => CounterValue::Int(s.value as i64),
                "float" => CounterValue::Float(s.value),
                _ => return Err(bad("the counter kind is not `int` (whole) or `float`")),
            };
            shard.counters.add(&l[3], value);
            if shard.counters.len() > MAX_COUNTER_KEYS_PER_SHARD {
                return Err(bad("more than 1024 counter keys for one shard"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "remote_tests.rs"]
mod tests;
