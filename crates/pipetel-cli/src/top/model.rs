//! What the rows say about the running stages, kept up to date one row at a time (a frame never
//! re-reads the store), and turned into a [`Frame`] at any moment. A stage whose stage row came
//! keeps only that fact: its shards are dropped, so memory follows the running stages.

use std::collections::HashMap;
use std::time::Duration;

use pipetel_rows::answers::Distribution;
use pipetel_rows::fields as f;

use super::frame::{Frame, LostLine, ShardLine, StageLine, SLOWEST};
use crate::lost::{Gaps, LostRule, ShardFate};
use crate::read::Row;

/// `PIPETEL_SKEW_MIN`'s default: rows of a running stage do not carry the pipeline's own.
const SKEW_MIN: Duration = Duration::from_secs(10);

/// A shard's latest row's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Status {
    #[default]
    Start,
    Running,
    Straggler,
    Stalled,
    Resumed,
    End,
    Failed,
}

impl Status {
    fn of(s: &str) -> Option<Status> {
        Some(match s {
            "start" => Status::Start,
            "running" => Status::Running,
            "straggler" => Status::Straggler,
            "stalled" => Status::Stalled,
            "resumed" => Status::Resumed,
            "end" => Status::End,
            "failed" => Status::Failed,
            _ => return None,
        })
    }

    fn as_str(self) -> &'static str {
        match self {
            Status::Start => "start",
            Status::Running => "running",
            Status::Straggler => "straggler",
            Status::Stalled => "stalled",
            Status::Resumed => "resumed",
            Status::End => "end",
            Status::Failed => "failed",
        }
    }
}

/// One shard's last attempt.
#[derive(Debug, Clone, Default)]
struct Shard {
    first_ms: u64,
    last_ms: u64,
    status: Status,
    items: u64,
    rate: Option<f64>,
    /// Seconds from its start to its end, from the end row (else the rows' span).
    elapsed: Option<f64>,
    host: Option<String>,
    pid: Option<u64>,
    phase: Option<String>,
    straggler: bool,
    /// Seconds unmoved, while a stalled row is not followed by resumed or an end.
    stalled: Option<f64>,
    gaps: Gaps,
}

/// One stage execution.
#[derive(Debug, Default)]
struct Stage {
    first_ms: u64,
    last_ms: u64,
    /// Its stage row came: it is over.
    ended: bool,
    total: u64,
    shards: HashMap<u64, Shard>,
}

/// The running stages as the rows so far tell.
#[derive(Debug, Default)]
pub(crate) struct Model {
    /// Stage name, then execution id (nested so a row finds its stage without allocating).
    stages: HashMap<String, HashMap<String, Stage>>,
    rows: u64,
}

impl Model {
    /// Rows taken so far.
    pub(crate) fn rows(&self) -> u64 {
        self.rows
    }

    /// Takes one row (in store order).
    pub(crate) fn add(&mut self, r: &Row) {
        self.rows += 1;
        let ms = r.timestamp_ms();
        let by_exec = match self.stages.get_mut(r.stage()) {
            Some(m) => m,
            None => self.stages.entry(r.stage().to_string()).or_default(),
        };
        let stage = match by_exec.get_mut(r.execution()) {
            Some(s) => s,
            None => {
                by_exec.entry(r.execution().to_string()).or_insert_with(|| Stage { first_ms: ms, ..Stage::default() })
            }
        };
        stage.first_ms = stage.first_ms.min(ms);
        stage.last_ms = stage.last_ms.max(ms);
        let Some(index) = r.shard() else {
            stage.ended = true;
            stage.shards = HashMap::new();
            return;
        };
        if stage.ended {
            return;
        }
        if let Some(total) = r.u64(f::TOTAL_SHARDS) {
            stage.total = stage.total.max(total);
        }
        let Some(status) = Status::of(r.status()) else { return };
        let shard = stage.shards.entry(index).or_insert_with(|| Shard { first_ms: ms, ..Shard::default() });
        if status == Status::Start {
            *shard = Shard { first_ms: ms, ..Shard::default() };
        }
        shard.last_ms = shard.last_ms.max(ms);
        shard.status = status;
        shard.gaps.add(status.as_str(), ms);
        shard.items = r.u64(f::ITEMS).unwrap_or(shard.items);
        // Straggler, stalled and resumed rows carry the figures of the shard's last sample.
        if !matches!(status, Status::Start | Status::End | Status::Failed) {
            shard.rate = r.f64(f::ITEM_RATE).or(shard.rate);
        }
        if let Some(h) = r.fields.get(f::HOST_NAME).and_then(|v| v.as_str()) {
            shard.host = Some(h.to_string());
        }
        shard.pid = r.u64(f::PROCESS_PID).or(shard.pid);
        if let Some(p) = r.fields.get(f::PHASE_NAME).and_then(|v| v.as_str()) {
            shard.phase = Some(p.to_string());
        }
        match status {
            Status::Straggler => shard.straggler = true,
            Status::Stalled => shard.stalled = Some(r.f64(f::STALLED_FOR).unwrap_or(0.0)),
            Status::Resumed => shard.stalled = None,
            Status::End | Status::Failed => {
                shard.straggler = false;
                shard.stalled = None;
                shard.elapsed = r.f64(f::ELAPSED);
            }
            Status::Start | Status::Running => {}
        }
    }

    /// The frame as of `rule.now_ms`.
    pub(crate) fn frame(&self, rule: &LostRule, source: String) -> Frame {
        let now = rule.now_ms;
        let mut frame = Frame { at_ms: now, source, ..Frame::default() };
        let mut running: Vec<ShardLine> = Vec::new();
        for (name, by_exec) in &self.stages {
            for (exec, stage) in by_exec.iter().filter(|(_, s)| !s.ended) {
                let mut line = StageLine { stage: name.clone(), execution: exec.clone(), ..StageLine::default() };
                let (mut finished, mut fates, mut rate) = (Vec::new(), Vec::new(), 0.0);
                for (i, s) in &stage.shards {
                    line.items += s.items;
                    let fate = match s.status {
                        Status::End => {
                            line.done += 1;
                            finished.push(s.elapsed.unwrap_or(s.last_ms.saturating_sub(s.first_ms) as f64 / 1000.0));
                            ShardFate::Ended
                        }
                        Status::Failed => {
                            line.failed += 1;
                            ShardFate::Ended
                        }
                        st if rule.lost(st.as_str(), s.last_ms, &s.gaps) => {
                            line.lost += 1;
                            frame.lost_shards.push(LostLine {
                                stage: name.clone(),
                                execution: exec.clone(),
                                shard: Some(*i),
                                last_ms: s.last_ms,
                            });
                            ShardFate::Lost
                        }
                        _ => {
                            line.running += 1;
                            rate += s.rate.unwrap_or(0.0);
                            let shard = shard_line(name, exec, *i, s, now);
                            line.stragglers += u64::from(s.straggler);
                            line.stalls += u64::from(s.stalled.is_some());
                            if s.straggler || s.stalled.is_some() {
                                frame.flagged.push(shard.clone());
                            }
                            running.push(shard);
                            ShardFate::Running
                        }
                    };
                    fates.push(fate);
                }
                if crate::lost::stage_lost(fates) {
                    frame.lost_stages.push(LostLine {
                        stage: name.clone(),
                        execution: exec.clone(),
                        shard: None,
                        last_ms: stage.last_ms,
                    });
                    continue;
                }
                let seen = stage.shards.len() as u64;
                line.total = stage.total.max(seen);
                line.pending = line.total - seen;
                line.rate = Some(rate);
                let elapsed = now.saturating_sub(stage.first_ms) as f64 / 1000.0;
                line.elapsed = Some(elapsed);
                let left = line.total.saturating_sub(line.done + line.failed);
                line.eta = (line.done > 0).then(|| elapsed * left as f64 / line.done as f64);
                let dist = Distribution::of(&finished);
                line.skew = dist.and_then(|d| d.skew());
                line.skewed = dist.is_some_and(|d| d.skewed(SKEW_MIN));
                frame.stages.push(line);
            }
        }
        frame.stages.sort_by(|a, b| (&a.stage, &a.execution).cmp(&(&b.stage, &b.execution)));
        let slowest = |a: &ShardLine, b: &ShardLine| {
            b.elapsed.unwrap_or(0.0).total_cmp(&a.elapsed.unwrap_or(0.0)).then(a.shard.cmp(&b.shard))
        };
        if running.len() > SLOWEST {
            running.select_nth_unstable_by(SLOWEST - 1, slowest);
            running.truncate(SLOWEST);
        }
        running.sort_by(slowest);
        frame.slowest = running;
        frame.flagged.sort_by(slowest);
        frame.lost_shards.sort_by_key(|l| std::cmp::Reverse(l.last_ms));
        frame.lost_stages.sort_by_key(|l| std::cmp::Reverse(l.last_ms));
        frame
    }
}

fn shard_line(stage: &str, exec: &str, index: u64, s: &Shard, now: u64) -> ShardLine {
    let mut state = Vec::new();
    if s.straggler {
        state.push("straggler".to_string());
    }
    if let Some(secs) = s.stalled {
        state.push(format!("stalled {secs:.0}s"));
    }
    ShardLine {
        stage: stage.to_string(),
        execution: exec.to_string(),
        shard: index,
        host: s.host.clone(),
        pid: s.pid,
        elapsed: Some(now.saturating_sub(s.first_ms) as f64 / 1000.0),
        rate: s.rate,
        phase: s.phase.clone(),
        state: if state.is_empty() { "running".into() } else { state.join(", ") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(shard: Option<u64>, status: &str, ms: u64, extra: &str) -> Row {
        let shard = shard.map_or(String::new(), |i| format!(",\"pipeline.shard.index\":{i}"));
        Row::parse(&format!(
            "{{\"event\":\"pipeline.worker\",\"timestamp_ms\":{ms},\"pipeline.stage.name\":\"s\",\
             \"pipeline.execution.id\":\"x\",\"pipeline.status\":\"{status}\"{shard}{extra}}}"
        ))
        .expect("row")
    }

    #[test]
    fn stages_shards_flags_and_lost_from_rows() {
        let mut m = Model::default();
        let rule = LostRule { now_ms: 100_000, default: Duration::from_secs(10) };
        for i in 0..4 {
            m.add(&row(Some(i), "start", 60_000, ""));
        }
        m.add(&row(Some(0), "end", 70_000, ",\"pipeline.elapsed_seconds\":10.0,\"pipeline.items\":5"));
        m.add(&row(Some(1), "running", 95_000, ",\"pipeline.item_rate\":2.5,\"pipeline.items\":7"));
        m.add(&row(
            Some(2),
            "stalled",
            96_000,
            ",\"pipeline.stalled_seconds\":31,\"pipeline.phase.name\":\"io\",\"host.name\":\"h\",\"process.pid\":42",
        ));
        // Shard 3: only its start row, 40 s ago: lost.
        let f = m.frame(&rule, "test".into());
        assert_eq!(f.stages.len(), 1);
        let s = &f.stages[0];
        assert_eq!((s.done, s.running, s.pending, s.total, s.lost, s.items), (1, 2, 0, 4, 1, 12));
        assert_eq!((s.stalls, s.stragglers), (1, 0));
        assert_eq!(s.eta, Some(40.0 * 3.0), "40 s for one shard of four, three left");
        assert_eq!(f.slowest.len(), 2);
        assert_eq!(f.flagged.len(), 1);
        let stalled = &f.flagged[0];
        assert_eq!((stalled.shard, stalled.state.as_str(), stalled.phase.as_deref()), (2, "stalled 31s", Some("io")));
        assert_eq!((stalled.host.as_deref(), stalled.pid), (Some("h"), Some(42)));
        assert_eq!(f.lost_shards.len(), 1);
        assert_eq!((f.lost_shards[0].shard, f.lost_shards[0].last_ms), (Some(3), 60_000));

        // Resumed clears the stall; the stage row ends the stage.
        m.add(&row(Some(2), "resumed", 97_000, ""));
        assert!(m.frame(&rule, String::new()).flagged.is_empty());
        m.add(&row(None, "succeeded", 98_000, ""));
        assert!(m.frame(&rule, String::new()).stages.is_empty());
    }

    #[test]
    fn a_stage_whose_running_shards_all_went_silent_is_lost() {
        let mut m = Model::default();
        m.add(&row(Some(0), "start", 0, ""));
        m.add(&row(Some(0), "end", 1_000, ""));
        m.add(&row(Some(1), "start", 0, ""));
        m.add(&row(Some(1), "running", 2_000, ""));
        m.add(&row(Some(1), "running", 4_000, ""));
        let at = |now_ms| m.frame(&LostRule { now_ms, default: Duration::from_secs(10) }, String::new());
        assert_eq!(at(10_000).stages.len(), 1, "2 s samples: 6 s of silence allowed");
        let f = at(10_001);
        assert!(f.stages.is_empty());
        assert_eq!(f.lost_stages.len(), 1);
        assert_eq!(f.lost_stages[0].last_ms, 4_000);
    }
}
