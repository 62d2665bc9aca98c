//! What `pipetel rows` prints: a line per row, a stage summary table, a per-shard timeline.
//! Names, statuses and reasons come from whoever wrote the rows: everything printed goes through
//! [`safe`], so control characters in them reach the terminal escaped.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::lost::{Gaps, LostRule, ShardFate, LOST_AFTER_INTERVALS};
use crate::read::Row;

/// `text` with its control characters escaped (`\x1b`): what every view prints of a store.
pub(crate) fn safe(text: &str) -> String {
    pipetel_rows::escape_controls(text).into_owned()
}

/// A timestamp in milliseconds since the epoch as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub(crate) fn iso(ms: u64) -> String {
    let (secs, millis) = (ms / 1000, ms % 1000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// One row as a line of text.
pub(crate) fn row_line(r: &Row) -> String {
    let mut s = format!("{}  {:<15} {} {}", iso(r.timestamp_ms()), r.event(), r.stage(), r.execution());
    if let Some(i) = r.shard() {
        let _ = write!(s, " shard={i}");
    }
    let _ = write!(
        s,
        " {} items={} bytes={}",
        r.status(),
        r.u64("pipeline.items").unwrap_or(0),
        r.u64("pipeline.bytes").unwrap_or(0)
    );
    if r.is_stage() {
        let _ =
            write!(s, " elapsed={:.3}s shards={}", r.f64("pipeline.elapsed_seconds").unwrap_or(0.0), shard_figures(r));
    } else if let Some(rate) = r.f64("pipeline.item_rate").filter(|_| r.status() == "running") {
        let _ = write!(s, " items/s={rate:.1}");
    }
    if let Some(reason) = r.fields.get("pipeline.failure.reason").and_then(|v| v.as_str()) {
        let _ = write!(s, " reason={reason:?}");
    }
    safe(&s)
}

/// `total`, plus the succeeded/failed/retried counts when the row carries them.
fn shard_figures(r: &Row) -> String {
    let mut s = r.u64("pipeline.shards.total").unwrap_or(0).to_string();
    for (key, label) in [
        ("pipeline.shards.succeeded", "ok"),
        ("pipeline.shards.failed", "failed"),
        ("pipeline.shards.retried", "retried"),
    ] {
        if let Some(n) = r.u64(key) {
            let _ = write!(s, ",{label}={n}");
        }
    }
    s
}

/// What the rows say about one shard (its last attempt's rows).
#[derive(Debug, Default, Clone)]
struct ShardView {
    first_ms: u64,
    last_ms: u64,
    status: String,
    items: u64,
    samples: usize,
    attempts: usize,
    gaps: Gaps,
}

/// What the rows say about one stage execution.
#[derive(Debug, Default)]
struct StageView<'a> {
    first_ms: u64,
    last_ms: u64,
    stage_row: Option<&'a Row>,
    shards: BTreeMap<u64, ShardView>,
}

/// Groups rows by (stage, execution) in order of first appearance.
fn stage_views(rows: &[Row]) -> Vec<((String, String), StageView<'_>)> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut views: BTreeMap<(String, String), StageView<'_>> = BTreeMap::new();
    for r in rows {
        let key = (r.stage().to_string(), r.execution().to_string());
        let view = views.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            StageView { first_ms: r.timestamp_ms(), ..StageView::default() }
        });
        view.first_ms = view.first_ms.min(r.timestamp_ms());
        view.last_ms = view.last_ms.max(r.timestamp_ms());
        match r.shard() {
            None => view.stage_row = Some(r),
            Some(i) => {
                let s = view.shards.entry(i).or_default();
                if r.status() == "start" {
                    let attempts = s.attempts + 1;
                    *s = ShardView { first_ms: r.timestamp_ms(), attempts, ..ShardView::default() };
                }
                if s.attempts == 0 {
                    // Rows of an attempt whose start row is in a rotated-away file.
                    s.attempts = 1;
                    s.first_ms = r.timestamp_ms();
                }
                s.last_ms = r.timestamp_ms();
                s.gaps.add(r.status(), r.timestamp_ms());
                s.status = r.status().to_string();
                s.items = r.u64("pipeline.items").unwrap_or(s.items);
                s.samples += usize::from(r.status() == "running");
            }
        }
    }
    order.into_iter().filter_map(|k| views.remove(&k).map(|v| (k, v))).collect()
}

fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The shards and stages the rows leave running whose writers stopped: each lost shard's and
/// stage's last row time. Judged on every row read (before `--status`, which would hide the
/// rows that end a shard).
#[derive(Debug, Default)]
pub(crate) struct Lost {
    shards: HashMap<(String, String, u64), u64>,
    stages: HashMap<(String, String), u64>,
}

impl Lost {
    /// The lost shards and stages of `rows` under `rule`.
    pub(crate) fn judge(rows: &[Row], rule: &LostRule) -> Lost {
        let mut lost = Lost::default();
        for ((stage, exec), v) in stage_views(rows) {
            let mut fates = Vec::with_capacity(v.shards.len());
            for (i, s) in &v.shards {
                let fate = if rule.lost(&s.status, s.last_ms, &s.gaps) {
                    lost.shards.insert((stage.clone(), exec.clone(), *i), s.last_ms);
                    ShardFate::Lost
                } else if crate::lost::is_running_status(&s.status) {
                    ShardFate::Running
                } else {
                    ShardFate::Ended
                };
                fates.push(fate);
            }
            if v.stage_row.is_none() && crate::lost::stage_lost(fates) {
                lost.stages.insert((stage, exec), v.last_ms);
            }
        }
        lost
    }

    fn shard(&self, stage: &str, exec: &str, shard: u64) -> Option<u64> {
        self.shards.get(&(stage.to_string(), exec.to_string(), shard)).copied()
    }

    fn stage(&self, stage: &str, exec: &str) -> Option<u64> {
        self.stages.get(&(stage.to_string(), exec.to_string())).copied()
    }

    fn shards_of(&self, stage: &str, exec: &str) -> usize {
        self.shards.keys().filter(|(s, e, _)| s == stage && e == exec).count()
    }
}

/// One line per row; the last row of a lost shard says so.
pub(crate) fn listing(rows: &[Row], lost: &Lost, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let mut marked = vec![false; rows.len()];
    if !lost.shards.is_empty() {
        let mut seen = std::collections::HashSet::new();
        for (n, r) in rows.iter().enumerate().rev() {
            if let Some(i) = r.shard() {
                if seen.insert((r.stage(), r.execution(), i)) {
                    marked[n] = lost.shard(r.stage(), r.execution(), i).is_some();
                }
            }
        }
    }
    for (r, lost) in rows.iter().zip(marked) {
        let line = row_line(r);
        if lost {
            writeln!(out, "{line}  LOST: no row since, over {LOST_AFTER_INTERVALS} sample intervals")?;
        } else {
            writeln!(out, "{line}")?;
        }
    }
    Ok(())
}

/// The stage summary table.
pub(crate) fn summary(rows: &[Row], lost: &Lost) -> String {
    let mut lines = vec![[
        "STAGE".to_string(),
        "EXECUTION".into(),
        "STATUS".into(),
        "SHARDS done/failed/total".into(),
        "ITEMS".into(),
        "BYTES".into(),
        "ELAPSED".into(),
        "ITEMS/S".into(),
        "NOTE".into(),
    ]];
    for ((stage, exec), v) in stage_views(rows) {
        let done = v.shards.values().filter(|s| s.status == "end").count() as u64;
        let failed = v.shards.values().filter(|s| s.status == "failed").count() as u64;
        let (status, items, bytes, elapsed, total, done, failed) = match v.stage_row {
            Some(r) => (
                r.status().to_string(),
                r.u64("pipeline.items").unwrap_or(0),
                r.u64("pipeline.bytes").unwrap_or(0),
                r.f64("pipeline.elapsed_seconds").unwrap_or(0.0),
                r.u64("pipeline.shards.total").unwrap_or(0),
                r.u64("pipeline.shards.succeeded").unwrap_or(done),
                r.u64("pipeline.shards.failed").unwrap_or(failed),
            ),
            None => (
                if lost.stage(&stage, &exec).is_some() { "lost" } else { "running" }.to_string(),
                v.shards.values().map(|s| s.items).sum(),
                0,
                v.last_ms.saturating_sub(v.first_ms) as f64 / 1000.0,
                0,
                done,
                failed,
            ),
        };
        let total = if total == 0 { v.shards.len() as u64 } else { total };
        let rate = if elapsed > 0.0 { items as f64 / elapsed } else { 0.0 };
        let bytes = if v.stage_row.is_some() { human_bytes(bytes) } else { "-".into() };
        let note = match (v.stage_row, lost.stage(&stage, &exec), lost.shards_of(&stage, &exec)) {
            (None, Some(last), _) => format!("last row {}", iso(last)),
            (None, None, n) if n > 0 => format!("{n} shards lost"),
            _ => String::new(),
        };
        lines.push([
            safe(&stage),
            safe(&exec),
            safe(&status),
            format!("{done}/{failed}/{total}"),
            items.to_string(),
            bytes,
            format!("{elapsed:.3}s"),
            format!("{rate:.1}"),
            note,
        ]);
    }
    table(&lines)
}

/// Lays rows of cells out in columns.
pub(crate) fn table<const N: usize>(lines: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for l in lines {
        for (w, c) in widths.iter_mut().zip(l) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for l in lines {
        let cells: Vec<String> = l.iter().zip(widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// Width of a timeline bar.
const BAR: usize = 40;

/// Per stage execution, one line per shard: a bar over the stage's span of time, its offsets,
/// status, items and samples.
pub(crate) fn timeline(rows: &[Row], lost: &Lost) -> String {
    let mut out = String::new();
    for ((stage, exec), v) in stage_views(rows) {
        let span_ms = v.last_ms.saturating_sub(v.first_ms).max(1);
        let running = if lost.stage(&stage, &exec).is_some() { "lost" } else { "running" };
        let status = v.stage_row.map_or(running, |r| r.status());
        let (shown_stage, shown_exec, status) = (safe(&stage), safe(&exec), safe(status));
        let _ = writeln!(
            out,
            "{shown_stage} {shown_exec} ({status}, {:.3}s from {})",
            span_ms as f64 / 1000.0,
            iso(v.first_ms)
        );
        let mut lines = Vec::new();
        for (i, s) in &v.shards {
            // A shard that starts at the very end of the span still gets one cell of bar. In
            // u128: a timestamp far from the others must not overflow the product.
            let cell = |ms: u64| {
                (u128::from(ms.saturating_sub(v.first_ms)) * BAR as u128 / u128::from(span_ms)).min(BAR as u128)
                    as usize
            };
            let from = cell(s.first_ms).min(BAR - 1);
            let to = cell(s.last_ms).clamp(from + 1, BAR);
            let bar: String = (0..BAR).map(|c| if c >= from && c < to { '=' } else { '.' }).collect();
            lines.push([
                format!("  shard {i}"),
                format!("|{bar}|"),
                format!("+{:.3}s", (s.first_ms - v.first_ms) as f64 / 1000.0),
                format!("+{:.3}s", (s.last_ms - v.first_ms) as f64 / 1000.0),
                if lost.shard(&stage, &exec, *i).is_some() { "lost".to_string() } else { safe(&s.status) },
                format!("{} items", s.items),
                format!("{} samples", s.samples),
                if s.attempts > 1 { format!("{} attempts", s.attempts) } else { String::new() },
            ]);
        }
        out.push_str(&table(&lines));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shard whose rows all fall at the last instant of its stage's span (a retry started as
    /// the stage ended) still draws one cell, at the end of the bar.
    #[test]
    fn timeline_of_a_shard_at_the_end_of_the_span() {
        let row = |shard: u32, status: &str, ms: u64| {
            Row::parse(&format!(
                r#"{{"event":"pipeline.worker","pipeline.namespace":"pipeline.worker","pipeline.stage.name":"s","pipeline.execution.id":"e","pipeline.shard.index":{shard},"pipeline.status":"{status}","pipeline.items":1,"timestamp_ms":{ms}}}"#
            ))
            .expect("row")
        };
        let rows = [row(0, "start", 1000), row(0, "end", 2000), row(1, "start", 2000), row(1, "end", 2000)];
        let text = timeline(&rows, &Lost::default());
        let bars: Vec<&str> = text.lines().skip(1).map(|l| l.split('|').nth(1).expect("bar")).collect();
        assert_eq!(bars.len(), 2, "{text}");
        assert_eq!(bars[0], "=".repeat(BAR), "{text}");
        assert_eq!(bars[1], format!("{}=", ".".repeat(BAR - 1)), "{text}");
    }

    #[test]
    fn iso_dates() {
        assert_eq!(iso(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso(1_735_689_599_999), "2024-12-31T23:59:59.999Z");
    }
}
