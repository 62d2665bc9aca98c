//! One frame of `pipetel top`: what it shows, built from rows ([`super::model`]) or from pull
//! endpoints ([`super::prom`]), and laid out as text. Names come from whoever wrote the rows or
//! serves the metrics: every one goes through [`crate::show::safe`].

use std::fmt::Write as _;

use crate::show::{iso, safe, table};

/// How many shards each shard section lists at most.
pub(crate) const SLOWEST: usize = 10;
/// How many flagged or lost shards, and lost stages, are listed at most.
pub(crate) const LISTED: usize = 20;

/// A running stage.
#[derive(Debug, Clone, Default)]
pub(crate) struct StageLine {
    pub(crate) stage: String,
    pub(crate) execution: String,
    pub(crate) done: u64,
    pub(crate) failed: u64,
    pub(crate) running: u64,
    pub(crate) pending: u64,
    pub(crate) total: u64,
    pub(crate) lost: u64,
    pub(crate) items: u64,
    pub(crate) rate: Option<f64>,
    pub(crate) elapsed: Option<f64>,
    pub(crate) eta: Option<f64>,
    pub(crate) skew: Option<f64>,
    pub(crate) skewed: bool,
    pub(crate) stragglers: u64,
    pub(crate) stalls: u64,
}

/// A running shard.
#[derive(Debug, Clone, Default)]
pub(crate) struct ShardLine {
    pub(crate) stage: String,
    pub(crate) execution: String,
    pub(crate) shard: u64,
    pub(crate) host: Option<String>,
    pub(crate) pid: Option<u64>,
    pub(crate) elapsed: Option<f64>,
    pub(crate) rate: Option<f64>,
    pub(crate) phase: Option<String>,
    /// `running`, `straggler`, `stalled 42s`, `straggler, stalled 42s`.
    pub(crate) state: String,
}

/// A lost shard (with its index) or stage, and the time of its last row.
#[derive(Debug, Clone, Default)]
pub(crate) struct LostLine {
    pub(crate) stage: String,
    pub(crate) execution: String,
    pub(crate) shard: Option<u64>,
    pub(crate) last_ms: u64,
}

/// Everything one frame shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct Frame {
    pub(crate) at_ms: u64,
    /// What was read: the store's path, the fleet's URL, the endpoints.
    pub(crate) source: String,
    pub(crate) stages: Vec<StageLine>,
    /// The slowest running shards, slowest first (at most [`SLOWEST`]).
    pub(crate) slowest: Vec<ShardLine>,
    /// Every straggler or stalled shard (the first [`LISTED`] shown).
    pub(crate) flagged: Vec<ShardLine>,
    pub(crate) lost_shards: Vec<LostLine>,
    pub(crate) lost_stages: Vec<LostLine>,
    /// Lines about the sources (an endpoint that does not answer).
    pub(crate) notes: Vec<String>,
}

fn secs(s: Option<f64>) -> String {
    match s {
        None => "-".into(),
        Some(s) if s >= 3600.0 => format!("{}h{:02}m", (s / 3600.0) as u64, (s % 3600.0 / 60.0) as u64),
        Some(s) if s >= 60.0 => format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64),
        Some(s) => format!("{s:.1}s"),
    }
}

fn rate(r: Option<f64>) -> String {
    r.map_or("-".into(), |r| format!("{r:.1}"))
}

fn shard_table(shards: &[ShardLine]) -> String {
    let mut lines = vec![[
        "  STAGE".to_string(),
        "EXECUTION".into(),
        "SHARD".into(),
        "HOST".into(),
        "PID".into(),
        "ELAPSED".into(),
        "ITEMS/S".into(),
        "PHASE".into(),
        "STATE".into(),
    ]];
    for s in shards {
        lines.push([
            format!("  {}", safe(&s.stage)),
            safe(&s.execution),
            s.shard.to_string(),
            s.host.as_deref().map_or("-".into(), safe),
            s.pid.map_or("-".into(), |p| p.to_string()),
            secs(s.elapsed),
            rate(s.rate),
            s.phase.as_deref().map_or("-".into(), safe),
            safe(&s.state),
        ]);
    }
    table(&lines)
}

fn lost_table(lost: &[LostLine]) -> String {
    let mut lines = vec![["  STAGE".to_string(), "EXECUTION".into(), "SHARD".into(), "LAST ROW".into()]];
    for l in lost.iter().take(LISTED) {
        lines.push([
            format!("  {}", safe(&l.stage)),
            safe(&l.execution),
            l.shard.map_or("-".into(), |s| s.to_string()),
            iso(l.last_ms),
        ]);
    }
    table(&lines)
}

fn more(out: &mut String, total: usize) {
    if total > LISTED {
        let _ = writeln!(out, "  ... and {} more", total - LISTED);
    }
}

impl Frame {
    /// The frame as text, without escape codes.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "pipetel top  {}  {}", iso(self.at_ms), safe(&self.source));
        for n in &self.notes {
            let _ = writeln!(out, "note: {}", safe(n));
        }
        let _ = writeln!(out, "\nRUNNING STAGES ({})", self.stages.len());
        let mut lines = vec![[
            "  STAGE".to_string(),
            "EXECUTION".into(),
            "SHARDS done/running/pending/total".into(),
            "ITEMS".into(),
            "ITEMS/S".into(),
            "ELAPSED".into(),
            "ETA".into(),
            "SKEW".into(),
            "FLAGS".into(),
        ]];
        for s in &self.stages {
            let mut flags = Vec::new();
            for (n, what) in [(s.stragglers, "straggler"), (s.stalls, "stalled"), (s.lost, "lost")] {
                if n > 0 {
                    flags.push(format!("{n} {what}"));
                }
            }
            if s.failed > 0 {
                flags.push(format!("{} failed", s.failed));
            }
            lines.push([
                format!("  {}", safe(&s.stage)),
                safe(&s.execution),
                format!("{}/{}/{}/{}", s.done, s.running, s.pending, s.total),
                s.items.to_string(),
                rate(s.rate),
                secs(s.elapsed),
                secs(s.eta),
                s.skew.map_or("-".into(), |k| format!("{k:.2}{}", if s.skewed { "!" } else { "" })),
                flags.join(", "),
            ]);
        }
        out.push_str(&table(&lines));
        let _ = writeln!(out, "\nSLOWEST RUNNING SHARDS");
        out.push_str(&shard_table(&self.slowest));
        if !self.flagged.is_empty() {
            let _ = writeln!(out, "\nSTRAGGLERS AND STALLS ({})", self.flagged.len());
            let shown = &self.flagged[..self.flagged.len().min(LISTED)];
            out.push_str(&shard_table(shown));
            more(&mut out, self.flagged.len());
        }
        if !self.lost_shards.is_empty() {
            let _ = writeln!(
                out,
                "\nLOST SHARDS ({}): running, silent for over 3 sample intervals",
                self.lost_shards.len()
            );
            out.push_str(&lost_table(&self.lost_shards));
            more(&mut out, self.lost_shards.len());
        }
        if !self.lost_stages.is_empty() {
            let _ =
                writeln!(out, "\nLOST STAGES ({}): no stage row, every shard ended or lost", self.lost_stages.len());
            out.push_str(&lost_table(&self.lost_stages));
            more(&mut out, self.lost_stages.len());
        }
        out
    }
}
