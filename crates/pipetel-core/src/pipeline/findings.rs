//! The answers read from the stage table: a stage's distribution, skew, phases and counts; the
//! fields they add to stage and end rows; and the sampler's judgement of each running shard
//! (straggler, stalled, resumed), whose rows the runtime emits.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use opentelemetry::Value;
use pipetel_rows::fields as f;

use super::answers::{straggling, Distribution, StageAnswers, StallChange, Straggling};
use super::gpu::GpuTally;
use super::row::{Extra, WorkerStat, WorkerStatus};
use super::table::{ShardInner, StageInner, SUCCEEDED};
use crate::settings::AnswerSettings;

/// The last attempt of each shard index, in start order.
fn last_attempts(shards: &[Arc<ShardInner>]) -> Vec<&Arc<ShardInner>> {
    let mut last: Vec<&Arc<ShardInner>> = Vec::with_capacity(shards.len());
    let mut at: std::collections::HashMap<u32, usize> = std::collections::HashMap::with_capacity(shards.len());
    for s in shards {
        match at.get(&s.index) {
            Some(i) => last[*i] = s,
            None => {
                at.insert(s.index, last.len());
                last.push(s);
            }
        }
    }
    last
}

/// Elapsed seconds and life rates of the stage's finished shards: last attempts that
/// succeeded, run by a handle in this process or reported by another one.
fn finished(stage: &StageInner, shards: &[Arc<ShardInner>]) -> (Vec<f64>, Vec<f64>) {
    let rate = |items: u64, elapsed: f64| if elapsed > 0.0 { items as f64 / elapsed } else { 0.0 };
    let mut out: (Vec<f64>, Vec<f64>) = last_attempts(shards)
        .into_iter()
        .filter(|s| s.sampled && s.state.load(Ordering::Acquire) == SUCCEEDED)
        .map(|s| {
            let elapsed = s.elapsed();
            (elapsed, rate(s.items(), elapsed))
        })
        .unzip();
    let remote = crate::sync::lock(&stage.remote);
    for r in remote.shards.values().filter(|r| r.state == SUCCEEDED) {
        if let Some(elapsed) = r.elapsed {
            out.0.push(elapsed);
            out.1.push(rate(r.items, elapsed));
        }
    }
    out
}

/// A stage's answers as of now.
pub(crate) fn stage_answers(stage: &StageInner, skew_min: Duration) -> StageAnswers {
    let shards = stage.shards();
    let (elapsed, rates) = finished(stage, &shards);
    let shard_elapsed = Distribution::of(&elapsed);
    let mut phases: Vec<(String, f64)> = Vec::new();
    let (mut unphased, mut off_cpu, mut cpu_known) = (0.0, 0.0, false);
    let mut gpu = GpuTally::default();
    for s in shards.iter().filter(|s| s.sampled) {
        gpu.merge(&crate::sync::lock(&s.gpu));
        let (rest, named) = s.phases.seconds();
        unphased += rest;
        for (name, secs) in named {
            match phases.iter_mut().find(|(n, _)| *n == name) {
                Some(slot) => slot.1 += secs,
                None => phases.push((name, secs)),
            }
        }
        if let Some(off) = shard_off_cpu(s) {
            off_cpu += off;
            cpu_known = true;
        }
    }
    StageAnswers {
        skew: shard_elapsed.and_then(|d| d.skew()),
        skewed: shard_elapsed.is_some_and(|d| d.skewed(skew_min)),
        shard_elapsed,
        shard_item_rate: Distribution::of(&rates),
        stragglers: stage.stragglers.load(Ordering::Relaxed),
        stalls: stage.stalls.load(Ordering::Relaxed),
        phases,
        unphased_seconds: unphased,
        off_cpu_seconds: cpu_known.then_some(off_cpu),
        gpu: (!gpu.is_empty()).then_some(gpu),
    }
}

/// Wall − CPU time of a shard's thread, when its CPU time was measured.
fn shard_off_cpu(s: &ShardInner) -> Option<f64> {
    let t = s.last_sample()?;
    t.cpu_percent_avg.map(|_| (s.elapsed() - t.cpu_time.as_secs_f64()).max(0.0))
}

/// The fields a stage row adds for its answers.
pub(crate) fn stage_extra(a: &StageAnswers) -> Extra {
    let mut out: Extra = Vec::new();
    for (prefix, dist) in [(f::SHARD_ELAPSED_PREFIX, a.shard_elapsed), (f::SHARD_ITEM_RATE_PREFIX, a.shard_item_rate)] {
        if let Some(d) = dist {
            for (q, v) in f::QUANTILES.iter().zip(d.points()) {
                out.push((format!("{prefix}{q}"), v.into()));
            }
        }
    }
    if let Some(skew) = a.skew {
        out.push((f::SKEW.into(), skew.into()));
    }
    out.push((f::SKEWED.into(), a.skewed.into()));
    out.push((f::STRAGGLERS.into(), to_i64(a.stragglers).into()));
    out.push((f::STALLS.into(), to_i64(a.stalls).into()));
    phase_fields(&mut out, a.unphased_seconds, &a.phases, a.off_cpu_seconds);
    if let Some(g) = &a.gpu {
        gpu_fields(&mut out, g);
    }
    out
}

fn gpu_fields(out: &mut Extra, g: &GpuTally) {
    out.push((f::GPU_SECONDS.into(), g.seconds.into()));
    out.push((f::GPU_HELD.into(), g.held.into()));
    out.push((f::GPU_IDLE.into(), g.idle.into()));
    if let Some(sm) = g.sm_active() {
        out.push((f::GPU_SM_ACTIVE.into(), sm.into()));
    }
    if let Some(t) = g.tensor_active() {
        out.push((f::GPU_TENSOR_ACTIVE.into(), t.into()));
    }
    out.push((f::GPU_MEMORY_PEAK.into(), to_i64(g.peak_memory).into()));
    out.push((f::GPU_ENERGY.into(), g.energy_joules.into()));
}

fn phase_fields(out: &mut Extra, unphased: f64, phases: &[(String, f64)], off_cpu: Option<f64>) {
    for (name, secs) in phases {
        out.push((format!("{}{name}{}", f::PHASE_PREFIX, f::PHASE_SUFFIX), (*secs).into()));
    }
    out.push((f::UNPHASED.into(), unphased.into()));
    if let Some(off) = off_cpu {
        out.push((f::OFF_CPU.into(), off.into()));
    }
}

/// The fields an end row adds: the shard's wall time, its phases and its time off CPU.
pub(crate) fn end_extra(s: &ShardInner, row: &WorkerStat) -> Extra {
    let elapsed = s.elapsed();
    let mut out: Extra = vec![(f::ELAPSED.into(), elapsed.into())];
    let (unphased, phases) = s.phases.seconds();
    let cpu_measured = row.cpu_percent_avg.is_some();
    let off_cpu = cpu_measured.then(|| (elapsed - row.cpu_time.as_secs_f64()).max(0.0));
    phase_fields(&mut out, unphased, &phases, off_cpu);
    let gpu = *crate::sync::lock(&s.gpu);
    if !gpu.is_empty() {
        gpu_fields(&mut out, &gpu);
    }
    out
}

/// Shares this process's GPU use since the previous sample among its running shards.
pub(crate) fn attribute_gpu(stages: &[Arc<StageInner>], now: Instant) {
    let Some((used, dt)) = super::gpu::read(now) else { return };
    let running: Vec<Arc<ShardInner>> =
        stages.iter().flat_map(|s| s.shards()).filter(|s| s.sampled && s.is_running()).collect();
    if running.is_empty() {
        return;
    }
    let share = 1.0 / running.len() as f64;
    for s in running {
        crate::sync::lock(&s.gpu).add(&used, dt, share);
    }
}

/// What the sampler found about one running shard.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Finding {
    Straggler(Straggling),
    Stall(StallChange),
}

/// Judges the running shards of `stage` at `now`: each one's stall state, and whether it became
/// a straggler. Counts what it finds on the stage.
pub(crate) fn judge(stage: &StageInner, now: Instant, rules: &AnswerSettings) -> Vec<(Arc<ShardInner>, Finding)> {
    let shards = stage.shards();
    let (finished, _) = finished(stage, &shards);
    let running: Vec<&Arc<ShardInner>> =
        last_attempts(&shards).into_iter().filter(|s| s.sampled && s.is_running()).collect();
    let rates: Vec<(u32, f64)> = running
        .iter()
        .map(|s| {
            let e = s.elapsed();
            (s.index, if e > 0.0 { s.items() as f64 / e } else { 0.0 })
        })
        .collect();
    let mut found = Vec::new();
    for s in running {
        let mut watch = crate::sync::lock(&s.watch);
        if let Some(change) = watch.observe(now, s.items(), s.bytes(), rules.stall_timeout) {
            if matches!(change, StallChange::Stalled(_)) {
                stage.stalls.fetch_add(1, Ordering::Relaxed);
            }
            found.push((s.clone(), Finding::Stall(change)));
        }
        if watch.straggler {
            continue;
        }
        let mut peers: Vec<f64> = rates.iter().filter(|(i, _)| *i != s.index).map(|(_, r)| *r).collect();
        if let Some(why) = straggling(s.elapsed(), s.items(), &finished, &mut peers, rules.skew_min) {
            watch.straggler = true;
            stage.stragglers.fetch_add(1, Ordering::Relaxed);
            found.push((s.clone(), Finding::Straggler(why)));
        }
    }
    found
}

/// A straggler, stalled or resumed row: the figures of the shard's last sample, not a new one
/// (the sample row of this tick already took it).
pub(crate) fn finding_row(s: &ShardInner, status: WorkerStatus) -> WorkerStat {
    let t = s.last_sample().unwrap_or_default();
    WorkerStat {
        shard_index: s.index,
        stage_name: s.stage.name.clone(),
        execution_id: s.stage.execution_id.clone(),
        status,
        timestamp: std::time::SystemTime::now(),
        items: s.items(),
        bytes: s.bytes(),
        item_rate: t.item_rate,
        byte_rate: t.byte_rate,
        cpu_time: t.cpu_time,
        cpu_percent: t.cpu_percent,
        cpu_percent_avg: t.cpu_percent_avg,
        memory_current: t.memory_current,
        memory_avg: t.memory_avg,
        memory_peak: t.memory_peak,
        counters: s.counters_snapshot(),
        reason: None,
    }
}

/// The fields a straggler, stalled or resumed row adds.
pub(crate) fn finding_extra(s: &ShardInner, finding: Finding, stack: Option<String>) -> Extra {
    let mut out: Extra = vec![
        (f::ELAPSED.into(), s.elapsed().into()),
        (f::HOST_NAME.into(), super::answers::host_name().to_string().into()),
        (f::PROCESS_PID.into(), i64::from(std::process::id()).into()),
    ];
    if let Some(name) = &s.thread_name {
        out.push((f::THREAD_NAME.into(), name.clone().into()));
    }
    if let Some(phase) = s.phases.current() {
        out.push((f::PHASE_NAME.into(), phase.to_string().into()));
    }
    match finding {
        Finding::Straggler(why) => {
            out.push((f::STRAGGLER_RULE.into(), Value::from(why.rule)));
            out.push((f::PEERS_MEDIAN.into(), why.peers.into()));
        }
        Finding::Stall(StallChange::Stalled(d) | StallChange::Resumed(d)) => {
            out.push((f::STALLED_FOR.into(), d.as_secs_f64().into()));
        }
    }
    if let Some(stack) = stack {
        out.push((f::STACK.into(), stack.into()));
    }
    out
}

fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::pipeline::row::Namespaces;
    use crate::pipeline::table::{new_shard, stage_meta, StageInner};

    /// A stage whose shards started `ago` seconds back; those with `Some(elapsed)` finished
    /// after that long.
    fn stage(shards: &[(f64, Option<f64>, u64)]) -> StageInner {
        let stage = StageInner::new(stage_meta(Namespaces::DEFAULT, "judged", "e"), 0, Vec::new());
        for (i, (ago, ended, items)) in shards.iter().enumerate() {
            let mut s = new_shard(&stage, i as u32, None, true);
            s.started = Instant::now() - Duration::from_secs_f64(*ago);
            s.cells.items.store(*items, Ordering::Relaxed);
            if let Some(e) = ended {
                s.ended_nanos.store((e * 1e9) as u64, Ordering::Relaxed);
                s.state.store(SUCCEEDED, Ordering::Release);
            }
            crate::sync::lock(&stage.shards).push(Arc::new(s));
        }
        stage
    }

    fn rules() -> AnswerSettings {
        AnswerSettings { skew_min: Duration::from_secs(1), ..AnswerSettings::default() }
    }

    #[test]
    fn a_straggler_is_named_once_against_the_finished_shards() {
        // Three finished in 10 s; one running for 16 s (over 1.5 × 10 and 1 s beyond), one for 12 s.
        let s = stage(&[
            (30.0, Some(10.0), 5),
            (30.0, Some(10.0), 5),
            (30.0, Some(10.0), 5),
            (16.0, None, 1),
            (12.0, None, 1),
        ]);
        let found = judge(&s, Instant::now(), &rules());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].0.index, 3);
        assert!(matches!(found[0].1, Finding::Straggler(Straggling { rule: "elapsed", peers }) if peers == 10.0));
        assert!(judge(&s, Instant::now(), &rules()).is_empty(), "named once");
        let a = stage_answers(&s, Duration::from_secs(1));
        assert_eq!((a.stragglers, a.shard_elapsed.map(|d| d.max)), (1, Some(10.0)));
        assert_eq!(a.skew, Some(1.0));
        assert!(!a.skewed);
    }

    #[test]
    fn shards_reported_by_other_processes_join_the_distribution() {
        let s = stage(&[(5.0, Some(4.0), 40)]);
        {
            let mut remote = crate::sync::lock(&s.remote);
            for (i, elapsed) in [(1u32, 6.0), (2, 8.0)] {
                let shard = crate::pipeline::table::RemoteShard {
                    items: 80,
                    state: SUCCEEDED,
                    attempts: 1,
                    elapsed: Some(elapsed),
                    ..Default::default()
                };
                remote.shards.insert(("host-b-7".to_string(), i), shard);
            }
        }
        let a = stage_answers(&s, Duration::from_secs(1));
        let d = a.shard_elapsed.expect("three finished shards");
        assert_eq!((d.p0, d.p50, d.max), (4.0, 6.0, 8.0));
        assert_eq!(a.shard_item_rate.map(|r| (r.p0, r.max)), Some((10.0, 80.0 / 6.0)));
    }

    #[test]
    fn uniform_shards_within_twenty_percent_are_never_stragglers() {
        // 100 stages of 8 shards whose durations are drawn within ±20 % of 10 s, judged at every
        // second of their run as the sampler would.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..100 {
            let durations: Vec<f64> = (0..8).map(|_| 10.0 * (0.8 + 0.4 * next())).collect();
            for t in 1..=12 {
                let t = f64::from(t);
                let shards: Vec<(f64, Option<f64>, u64)> =
                    durations.iter().map(|d| (t, (*d <= t).then_some(*d), (100.0 * t.min(*d) / d) as u64)).collect();
                let found = judge(&stage(&shards), Instant::now(), &rules());
                assert!(found.is_empty(), "{durations:?} at {t} s: {found:?}");
            }
        }
    }
}
