//! The live progress display on stderr (`PIPETEL_PROGRESS`): a line per running stage, redrawn
//! in place at most four times a second, and each stage's summary line when it ends — the same
//! line [`stage_table`] prints.
//!
//! The drawing runs on its own thread (`pipetel-progress`) and only reads: the stage table's
//! snapshots (items, bytes, shard states) for the live lines, and a queue of ended stage rows
//! that [`stage_ended`] fills when a stage row is emitted (a flag test and, when on, one push
//! under a lock). The pipeline never waits on the terminal. A stderr that cannot be written
//! (closed pipe) turns the display off with one warning.
//!
//! Displays that are not a terminal (a notebook's output) read the same frame as plain lines
//! through [`super::ProgressLines`]: [`stage_ended`] also keeps the last [`RECENT_LEN`] ended
//! stage rows in a ring, numbered, whether or not the terminal display runs (one clone per
//! stage end), and [`LiveLines`] gives the live lines with rates from its own readings.

use std::collections::VecDeque;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::row::{StageStat, StageStatus};
use super::table::{table, StageInner};
use crate::settings::ProgressMode;

/// Time between two redraws.
const REDRAW: Duration = Duration::from_millis(250);
/// Rates are measured over about this much of the recent past.
const RATE_WINDOW: Duration = Duration::from_secs(3);
/// Below this much history, the rate is the average since the stage started.
const MIN_RATE_SPAN: Duration = Duration::from_millis(500);
/// Line width when `COLUMNS` does not give one.
const DEFAULT_WIDTH: usize = 100;
/// Width of the stage-name column (longer names widen their line).
const NAME_WIDTH: usize = 12;

/// Erases the whole line the cursor is on.
const ERASE_LINE: &str = "\x1b[2K";
/// Moves the cursor one line up.
const UP: &str = "\x1b[1A";

/// Whether a display is running (stage rows are queued for it only then).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Stage rows emitted since the last redraw, for their summary lines.
static ENDED: Mutex<Vec<StageStat>> = Mutex::new(Vec::new());
/// Frames drawn with at least one live line (tests wait on it instead of on time).
static REDRAWS: AtomicU64 = AtomicU64::new(0);
/// How many recent ended stage rows the ring keeps for views that poll (about once a second).
pub(crate) const RECENT_LEN: usize = 64;
/// The ring of recent ended stage rows.
static RECENT: Mutex<Recent> = Mutex::new(Recent { next: 0, rows: VecDeque::new() });

/// The last [`RECENT_LEN`] ended stage rows; the row at `rows[i]` is number
/// `next - rows.len() + i` (numbers count every ended stage since the process started).
struct Recent {
    next: u64,
    rows: VecDeque<StageStat>,
}

// ----- the stage table -----

/// The header of the stage table: the columns of [`stage_table_line`].
pub fn stage_table_header() -> String {
    format!(
        "{:<w$} {:<10} {:>10} {:>12} {:>9} {:>7} {:>7} {:>8}  reason",
        "stage",
        "status",
        "items",
        "bytes",
        "elapsed",
        "shards",
        "failed",
        "cpu%",
        w = NAME_WIDTH
    )
}

/// One stage row as a line of the stage table: name, status, items, bytes, elapsed seconds,
/// total shards, failed shards, mean CPU % and the failure reason.
///
/// ```
/// let stage = pipetel_core::stage("tokenize").shards(1).start();
/// let shard = stage.shard(0).start();
/// shard.record(1200, 4096);
/// shard.finish();
/// let line = pipetel_core::pipeline::stage_table_line(&stage.finish());
/// assert!(line.starts_with("tokenize     succeeded        1200         4096"), "{line}");
/// ```
pub fn stage_table_line(r: &StageStat) -> String {
    format!(
        "{:<w$} {:<10} {:>10} {:>12} {:>8.2}s {:>7} {:>7} {:>8}  {}",
        r.stage_name,
        r.status.as_str(),
        r.items,
        r.bytes,
        r.elapsed.as_secs_f64(),
        r.total_shards,
        r.shards_failed,
        r.cpu_percent_avg.map(|c| format!("{c:.1}")).unwrap_or_else(|| "-".into()),
        r.reason.as_deref().unwrap_or(""),
        w = NAME_WIDTH
    )
    .trim_end()
    .to_string()
}

/// The stage table: its header and a line per row, each ending in a newline.
pub fn stage_table(rows: &[StageStat]) -> String {
    let mut out = stage_table_header();
    out.push('\n');
    for r in rows {
        out.push_str(&stage_table_line(r));
        out.push('\n');
    }
    out
}

/// Whether the live progress display is drawing on stderr now (`PIPETEL_PROGRESS`): a program
/// that prints its own stage table can skip it, since each ended stage's line is already shown.
pub fn progress_is_on() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Frames drawn with at least one live line since the process started.
#[cfg_attr(not(feature = "testing"), allow(dead_code))]
pub(crate) fn redraws() -> u64 {
    REDRAWS.load(Ordering::Relaxed)
}

/// Keeps an emitted stage row in the ring of recent rows, and queues it for its summary line
/// when the terminal display is on (nothing for a row still `running`).
pub(crate) fn stage_ended(stat: &StageStat) {
    if stat.status == StageStatus::Running {
        return;
    }
    {
        let mut recent = crate::sync::lock(&RECENT);
        if recent.rows.len() == RECENT_LEN {
            recent.rows.pop_front();
        }
        recent.rows.push_back(stat.clone());
        recent.next += 1;
    }
    if ACTIVE.load(Ordering::Relaxed) {
        crate::sync::lock(&ENDED).push(stat.clone());
    }
}

/// The number the next ended stage row will get.
pub(crate) fn next_ended() -> u64 {
    crate::sync::lock(&RECENT).next
}

/// The ended stage rows numbered `from` on that the ring still holds, the number after the last
/// of them, and how many rows from `from` on the ring no longer holds.
pub(crate) fn ended_since(from: u64) -> (Vec<StageStat>, u64, u64) {
    let recent = crate::sync::lock(&RECENT);
    let first = recent.next - recent.rows.len() as u64;
    let missed = first.saturating_sub(from);
    let skip = from.saturating_sub(first).min(recent.rows.len() as u64) as usize;
    (recent.rows.iter().skip(skip).cloned().collect(), recent.next, missed)
}

// ----- the live line -----

/// What one live line shows.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Live<'a> {
    pub(crate) name: &'a str,
    pub(crate) elapsed: Duration,
    pub(crate) item_rate: f64,
    pub(crate) byte_rate: f64,
    /// Declared shards; 0 when the stage declared none (no ETA then).
    pub(crate) total: u64,
    pub(crate) done: u64,
    pub(crate) failed: u64,
    pub(crate) running: u64,
}

/// The live line of a running stage, cut to `width` characters so it never wraps (a wrapped
/// line would break the redraw in place).
pub(crate) fn live_line(l: &Live<'_>, width: usize) -> String {
    let shards = if l.total > 0 {
        format!("shards {}/{} done, {} failed, {} running", l.done, l.total, l.failed, l.running)
    } else {
        format!("shards {} done, {} failed, {} running", l.done, l.failed, l.running)
    };
    let mut line = format!(
        "{:<w$} {:>7} items/s {:>11}  {shards}",
        l.name,
        si(l.item_rate),
        bytes_per_second(l.byte_rate),
        w = NAME_WIDTH
    );
    if l.total > 0 {
        let eta = eta(l.elapsed, l.total, l.done + l.failed).map_or_else(|| "--".to_string(), clock);
        line.push_str("  ETA ");
        line.push_str(&eta);
    }
    line.push_str("  ");
    line.push_str(&clock(l.elapsed));
    truncate(line, width)
}

/// Time left when `finished` of `total` shards took `elapsed`, at the same pace; `None` before
/// the first shard ends or without a total.
pub(crate) fn eta(elapsed: Duration, total: u64, finished: u64) -> Option<Duration> {
    if total == 0 || finished == 0 {
        return None;
    }
    let left = total.saturating_sub(finished);
    Some(elapsed.mul_f64(left as f64 / finished as f64))
}

/// A count per second with an SI suffix: `950`, `12.3k`, `4.5M`.
pub(crate) fn si(x: f64) -> String {
    if !x.is_finite() || x < 0.0 {
        return "-".into();
    }
    match x {
        x if x < 10.0 => format!("{x:.1}"),
        x if x < 1e3 => format!("{x:.0}"),
        x if x < 1e6 => format!("{:.1}k", x / 1e3),
        x if x < 1e9 => format!("{:.1}M", x / 1e6),
        x => format!("{:.1}G", x / 1e9),
    }
}

/// Bytes per second with a binary unit: `512 B/s`, `6.1 MiB/s`.
pub(crate) fn bytes_per_second(x: f64) -> String {
    if !x.is_finite() || x < 0.0 {
        return "- B/s".into();
    }
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if x < 1024.0 {
        return format!("{x:.0} B/s");
    }
    let mut v = x / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}/s", UNITS[unit])
}

/// A duration as a clock: `7s`, `3m05s`, `1h02m`.
pub(crate) fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m{:02}s", s / 60, s % 60),
        s => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

/// `line` cut to at most `width` characters.
fn truncate(mut line: String, width: usize) -> String {
    if let Some((at, _)) = line.char_indices().nth(width) {
        line.truncate(at);
    }
    line
}

/// The terminal's width from `COLUMNS`, else [`DEFAULT_WIDTH`]; one column is kept free so the
/// cursor never wraps at the end of a full line.
fn terminal_width() -> usize {
    let cols = std::env::var("COLUMNS").ok().and_then(|c| c.trim().parse::<usize>().ok()).filter(|c| *c >= 20);
    cols.unwrap_or(DEFAULT_WIDTH) - 1
}

// ----- frames -----

/// One frame: erases the `drawn` live lines of the previous frame, prints the summary lines of
/// the stages that `ended` (after the table's header, the first time), then the live lines,
/// the cursor left at the end of the last one (no newline, so the next frame can erase it).
pub(crate) fn frame(drawn: usize, header: &mut bool, ended: &[StageStat], live: &[String]) -> String {
    let mut out = String::new();
    if drawn > 0 {
        out.push('\r');
        out.push_str(ERASE_LINE);
        for _ in 1..drawn {
            out.push_str(UP);
            out.push_str(ERASE_LINE);
        }
    }
    for row in ended {
        if !*header {
            out.push_str(&stage_table_header());
            out.push('\n');
            *header = true;
        }
        out.push_str(&stage_table_line(row));
        out.push('\n');
    }
    out.push_str(&live.join("\n"));
    out
}

/// A running stage and its recent (time, items, bytes) readings.
struct Tracked {
    stage: Arc<StageInner>,
    readings: VecDeque<(Instant, u64, u64)>,
}

impl Tracked {
    /// Items and bytes per second over the last [`RATE_WINDOW`], or since the stage started
    /// while there is less than [`MIN_RATE_SPAN`] of history.
    fn rates(&mut self, now: Instant, items: u64, bytes: u64) -> (f64, f64) {
        self.readings.push_back((now, items, bytes));
        while self.readings.len() > 2 && self.readings.get(1).is_some_and(|r| now - r.0 >= RATE_WINDOW) {
            self.readings.pop_front();
        }
        let (t0, i0, b0) = self.readings.front().copied().unwrap_or((now, items, bytes));
        let span = now - t0;
        if span < MIN_RATE_SPAN {
            let secs = self.stage.started.elapsed().as_secs_f64();
            if secs <= 0.0 {
                return (0.0, 0.0);
            }
            return (items as f64 / secs, bytes as f64 / secs);
        }
        let secs = span.as_secs_f64();
        (items.saturating_sub(i0) as f64 / secs, bytes.saturating_sub(b0) as f64 / secs)
    }
}

/// The live lines of the running stages, each stage's rates from this view's own readings (two
/// views, the terminal's and a notebook's, do not disturb each other's rates).
pub(crate) struct LiveLines {
    width: usize,
    tracked: Vec<Tracked>,
}

impl LiveLines {
    /// Lines cut to `width` characters.
    pub(crate) fn new(width: usize) -> Self {
        LiveLines { width, tracked: Vec::new() }
    }

    /// The live lines of the stages running now.
    pub(crate) fn lines(&mut self) -> Vec<String> {
        let now = Instant::now();
        let running: Vec<Arc<StageInner>> = table().stages().into_iter().filter(|s| s.is_running()).collect();
        self.tracked.retain(|t| running.iter().any(|s| Arc::ptr_eq(s, &t.stage)));
        let mut lines = Vec::with_capacity(running.len());
        for stage in running {
            let i = match self.tracked.iter().position(|t| Arc::ptr_eq(&t.stage, &stage)) {
                Some(i) => i,
                None => {
                    self.tracked.push(Tracked { stage: stage.clone(), readings: VecDeque::new() });
                    self.tracked.len() - 1
                }
            };
            let (items, bytes) = stage.totals();
            let (item_rate, byte_rate) = self.tracked[i].rates(now, items, bytes);
            let [_pending, running, done, failed] = stage.shard_counts();
            let live = Live {
                name: &stage.meta.name,
                elapsed: stage.started.elapsed(),
                item_rate,
                byte_rate,
                total: u64::from(stage.total_shards),
                done,
                failed,
                running,
            };
            lines.push(live_line(&live, self.width));
        }
        lines
    }
}

/// The display's state between frames.
struct Display {
    drawn: usize,
    header: bool,
    live: LiveLines,
}

impl Display {
    fn new() -> Self {
        Display { drawn: 0, header: false, live: LiveLines::new(terminal_width()) }
    }

    /// Draws one frame; `last` erases the live lines instead of drawing them (the display ends).
    fn draw(&mut self, out: &mut impl Write, last: bool) -> std::io::Result<()> {
        let ended = std::mem::take(&mut *crate::sync::lock(&ENDED));
        let live = if last { Vec::new() } else { self.live.lines() };
        if self.drawn == 0 && ended.is_empty() && live.is_empty() {
            return Ok(());
        }
        let text = frame(self.drawn, &mut self.header, &ended, &live);
        self.drawn = live.len();
        out.write_all(text.as_bytes())?;
        out.flush()?;
        if !live.is_empty() {
            REDRAWS.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

// ----- the thread -----

/// Stops the display on drop: the last frame prints the summary lines still queued and erases
/// the live lines.
pub(crate) struct ProgressGuard {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for ProgressGuard {
    fn drop(&mut self) {
        let (lock, cvar) = &*self.stop;
        *crate::sync::lock(lock) = true;
        cvar.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        ACTIVE.store(false, Ordering::Relaxed);
        crate::sync::lock(&ENDED).clear();
    }
}

/// Starts the display when `mode` asks for it: [`ProgressMode::Auto`] only when stderr is a
/// terminal. `None` when it stays off (also when its thread cannot be spawned, with a warning).
pub(crate) fn start(mode: ProgressMode) -> Option<ProgressGuard> {
    let on = match mode {
        ProgressMode::Off => false,
        ProgressMode::Auto => std::io::stderr().is_terminal(),
        ProgressMode::Always => true,
    };
    if !on {
        return None;
    }
    crate::sync::lock(&ENDED).clear();
    ACTIVE.store(true, Ordering::Relaxed);
    let stop = Arc::new((Mutex::new(false), Condvar::new()));
    let stop2 = stop.clone();
    match std::thread::Builder::new().name("pipetel-progress".into()).spawn(move || run(&stop2)) {
        Ok(thread) => Some(ProgressGuard { stop, thread: Some(thread) }),
        Err(e) => {
            ACTIVE.store(false, Ordering::Relaxed);
            tracing::warn!(target: "pipetel", error = %e, "progress display not started: cannot spawn its thread");
            None
        }
    }
}

fn run(stop: &(Mutex<bool>, Condvar)) {
    let mut display = Display::new();
    let (lock, cvar) = stop;
    loop {
        let stopped = {
            let guard = crate::sync::lock(lock);
            let (stopped, _) = cvar
                .wait_timeout_while(guard, REDRAW, |stopped| !*stopped)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *stopped
        };
        if let Err(e) = display.draw(&mut std::io::stderr().lock(), stopped) {
            // Stderr is gone (closed pipe, full disk): stop drawing, once, quietly.
            ACTIVE.store(false, Ordering::Relaxed);
            crate::sync::lock(&ENDED).clear();
            tracing::warn!(target: "pipetel", error = %e, "progress display turned off: stderr cannot be written");
            return;
        }
        if stopped {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(total: u64, done: u64, failed: u64, running: u64) -> Live<'static> {
        Live {
            name: "tokenize",
            elapsed: Duration::from_secs(30),
            item_rate: 12_345.0,
            byte_rate: 6.5 * 1024.0 * 1024.0,
            total,
            done,
            failed,
            running,
        }
    }

    #[test]
    fn rates_have_units() {
        assert_eq!(si(0.25), "0.2");
        assert_eq!(si(7.0), "7.0");
        assert_eq!(si(950.0), "950");
        assert_eq!(si(12_345.0), "12.3k");
        assert_eq!(si(4_500_000.0), "4.5M");
        assert_eq!(si(2.5e9), "2.5G");
        assert_eq!(si(f64::NAN), "-");
        assert_eq!(bytes_per_second(512.0), "512 B/s");
        assert_eq!(bytes_per_second(2048.0), "2.0 KiB/s");
        assert_eq!(bytes_per_second(6.5 * 1024.0 * 1024.0), "6.5 MiB/s");
        assert_eq!(bytes_per_second(3.0 * 1024f64.powi(3)), "3.0 GiB/s");
        assert_eq!(bytes_per_second(-1.0), "- B/s");
    }

    #[test]
    fn clocks_and_eta() {
        assert_eq!(clock(Duration::from_secs(7)), "7s");
        assert_eq!(clock(Duration::from_secs(185)), "3m05s");
        assert_eq!(clock(Duration::from_secs(3720)), "1h02m");
        // 2 of 8 shards in 30 s: 6 more at the same pace take 90 s.
        assert_eq!(eta(Duration::from_secs(30), 8, 2), Some(Duration::from_secs(90)));
        assert_eq!(eta(Duration::from_secs(30), 8, 8), Some(Duration::ZERO));
        assert_eq!(eta(Duration::from_secs(30), 8, 0), None, "no shard ended yet");
        assert_eq!(eta(Duration::from_secs(30), 0, 3), None, "no total");
    }

    #[test]
    fn a_live_line_with_a_known_total() {
        let line = live_line(&live(8, 2, 1, 4), 200);
        assert_eq!(
            line,
            "tokenize       12.3k items/s   6.5 MiB/s  shards 2/8 done, 1 failed, 4 running  ETA 50s  30s"
        );
    }

    #[test]
    fn a_live_line_before_any_shard_ended_has_no_eta_yet() {
        let line = live_line(&live(8, 0, 0, 8), 200);
        assert!(line.contains("shards 0/8 done, 0 failed, 8 running  ETA --"), "{line}");
    }

    #[test]
    fn a_live_line_with_an_unknown_total_has_no_eta() {
        let line = live_line(&live(0, 3, 0, 2), 200);
        assert_eq!(line, "tokenize       12.3k items/s   6.5 MiB/s  shards 3 done, 0 failed, 2 running  30s");
        assert!(!line.contains("ETA"));
    }

    #[test]
    fn live_lines_are_cut_to_the_width() {
        let full = live_line(&live(8, 2, 1, 4), 200);
        let cut = live_line(&live(8, 2, 1, 4), 40);
        assert_eq!(cut.chars().count(), 40);
        assert!(full.starts_with(&cut));
        // Names in any script are cut on a character boundary.
        let wide = Live { name: "étape-très-longue-ünïcödé", ..live(8, 2, 1, 4) };
        assert_eq!(live_line(&wide, 10), "étape-très");
        // A long name widens its line rather than being cut before the width.
        assert!(live_line(&wide, 200).starts_with("étape-très-longue-ünïcödé "));
    }

    fn row(name: &str, status: StageStatus, reason: Option<&str>) -> StageStat {
        let meta = super::super::table::stage_meta(super::super::row::Namespaces::DEFAULT, name, "run-1");
        let base = StageInner::new(meta, 8, Vec::new()).aggregate(status, reason.map(str::to_string));
        StageStat {
            items: 1200,
            bytes: 65536,
            elapsed: Duration::from_millis(6250),
            shards_failed: u32::from(status == StageStatus::Failed),
            cpu_percent_avg: Some(97.25),
            ..base
        }
    }

    #[test]
    fn the_stage_table_lines_up_under_its_header() {
        let table = stage_table(&[
            row("download", StageStatus::Succeeded, None),
            row("tokenize", StageStatus::Failed, Some("1 of 8 shards failed")),
        ]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "stage        status          items        bytes   elapsed  shards  failed     cpu%  reason"
        );
        assert_eq!(lines[1], "download     succeeded        1200        65536     6.25s       8       0     97.2");
        assert_eq!(
            lines[2],
            "tokenize     failed           1200        65536     6.25s       8       1     97.2  1 of 8 shards failed"
        );
        // Every right-aligned column ends where its header's does.
        let heads = ["items", "bytes", "elapsed", "shards", "failed", "cpu%"];
        let values = ["1200", "65536", "6.25s", "8", "0", "97.2"];
        let mut from = "download     succeeded".len();
        for (head, value) in heads.iter().zip(values) {
            let head_end = lines[0].find(head).map(|i| i + head.len());
            let value_end = lines[1][from..].find(value).map(|i| from + i + value.len());
            assert_eq!(head_end, value_end, "column {head}");
            from = value_end.unwrap_or(from);
        }
        let no_cpu = StageStat { cpu_percent_avg: None, ..row("index", StageStatus::Succeeded, None) };
        assert!(stage_table_line(&no_cpu).ends_with(" -"));
    }

    #[test]
    fn frames_redraw_in_place_and_print_ended_stages_once() {
        let mut header = false;
        let first = frame(0, &mut header, &[], &["a 1".into(), "b 1".into()]);
        assert_eq!(first, "a 1\nb 1");
        let second = frame(2, &mut header, &[row("a", StageStatus::Succeeded, None)], &["b 2".into()]);
        let erase = format!("\r{ERASE_LINE}{UP}{ERASE_LINE}");
        assert!(second.starts_with(&erase), "{second:?}");
        let rest = &second[erase.len()..];
        let expected =
            format!("{}\n{}\nb 2", stage_table_header(), stage_table_line(&row("a", StageStatus::Succeeded, None)));
        assert_eq!(rest, expected);
        assert!(header);
        // The header comes once; the last frame erases the live line and leaves the summaries.
        let last = frame(1, &mut header, &[row("b", StageStatus::Failed, Some("x"))], &[]);
        assert_eq!(last, format!("\r{ERASE_LINE}{}\n", stage_table_line(&row("b", StageStatus::Failed, Some("x")))));
    }
}
