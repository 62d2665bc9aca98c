//! The progress display's frame as plain lines, for a display that is not a terminal (a
//! notebook's output area, a status page): no escape codes, no cutting to a width; the caller
//! replaces what it showed with each new frame.

use std::collections::VecDeque;

use super::progress::{ended_since, next_ended, stage_table_header, stage_table_line, LiveLines};

/// At most this many summary lines of ended stages are kept; older ones are counted in one line.
const MAX_ENDED_LINES: usize = 200;

/// The live progress frame as plain lines, for a display that redraws in place by replacing its
/// whole text (a Jupyter display updated by its id) rather than with terminal escape codes.
///
/// Each [`ProgressLines::lines`] is one frame: the stage table's header, the summary line
/// ([`stage_table_line`]) of each stage that ended since this view was created, then a live line
/// per running stage (items/s and bytes/s over the last seconds, measured from this view's own
/// readings, shards done / failed / running of the declared total, ETA, elapsed). Nothing runs in
/// the background: a view reads the stage table when asked, so it works whether or not the
/// terminal display (`PIPETEL_PROGRESS`) is on. Ended stages reach it as their stage rows are
/// emitted (once pipetel is initialised), through a ring of the last 64 stage rows, so a view
/// read at least once per 64 stage ends misses none.
///
/// ```
/// use pipetel_core::pipeline::{stage_table_header, ProgressLines};
///
/// let mut view = ProgressLines::new();
/// assert!(view.lines().is_empty(), "nothing runs yet");
/// let stage = pipetel_core::stage("tokenize").shards(2).start();
/// let shard = stage.shard(0).start();
/// shard.record(500, 4096);
/// let frame = view.lines();
/// assert_eq!(frame[0], stage_table_header());
/// assert!(frame[1].starts_with("tokenize ") && frame[1].contains("shards 0/2 done, 0 failed, 1 running"), "{frame:?}");
/// ```
pub struct ProgressLines {
    live: LiveLines,
    /// The number of the next ended stage row to take from the ring.
    next: u64,
    /// Summary lines of the stages ended since the view was created (the last
    /// [`MAX_ENDED_LINES`]).
    ended: VecDeque<String>,
    /// Ended stages whose lines are no longer shown (past [`MAX_ENDED_LINES`], or gone from the
    /// ring before this view read them).
    hidden: u64,
}

impl ProgressLines {
    /// A view showing the stages that run now and those that end from now on.
    pub fn new() -> Self {
        ProgressLines { live: LiveLines::new(usize::MAX), next: next_ended(), ended: VecDeque::new(), hidden: 0 }
    }

    /// The frame now: the header, a line counting earlier ended stages no longer shown (if any),
    /// the summary lines of the stages ended since [`ProgressLines::new`], then the live lines
    /// of the running stages. Empty while no stage ended since and none runs.
    pub fn lines(&mut self) -> Vec<String> {
        let (rows, next, missed) = ended_since(self.next);
        self.next = next;
        self.hidden += missed;
        for row in &rows {
            if self.ended.len() == MAX_ENDED_LINES {
                self.ended.pop_front();
                self.hidden += 1;
            }
            self.ended.push_back(stage_table_line(row));
        }
        let live = self.live.lines();
        if self.ended.is_empty() && live.is_empty() && self.hidden == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(2 + self.ended.len() + live.len());
        out.push(stage_table_header());
        if self.hidden > 0 {
            out.push(format!("({} earlier stages not shown)", self.hidden));
        }
        out.extend(self.ended.iter().cloned());
        out.extend(live);
        out
    }
}

impl Default for ProgressLines {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ProgressLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressLines").field("ended", &self.ended.len()).field("hidden", &self.hidden).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::progress::{stage_ended, RECENT_LEN};

    /// Stages of other tests in this binary run and end concurrently: each test names its own
    /// stages and looks only at lines naming them.
    fn mine<'a>(lines: &'a [String], prefix: &str) -> Vec<&'a str> {
        lines.iter().map(String::as_str).filter(|l| l.starts_with(prefix)).collect()
    }

    #[test]
    fn a_running_stage_has_a_live_line_and_an_ended_one_its_summary_line() {
        let mut view = ProgressLines::new();
        let stage = crate::stage("plview-run").shards(4).start();
        let shard = stage.shard(0).start();
        shard.record(300, 3000);
        shard.finish();
        let lines = view.lines();
        assert_eq!(lines.first(), Some(&stage_table_header()));
        let live = mine(&lines, "plview-run ");
        assert_eq!(live.len(), 1, "{lines:?}");
        assert!(live[0].contains("items/s") && live[0].contains("shards 1/4 done, 0 failed, 0 running"), "{live:?}");
        assert!(live[0].contains("ETA "), "{live:?}");
        assert!(lines.iter().all(|l| !l.contains('\x1b')), "no escape codes: {lines:?}");
        let row = stage.finish();
        // Without `init` no row is emitted: hand it to the ring as the runtime would.
        stage_ended(&row);
        let lines = view.lines();
        assert_eq!(mine(&lines, "plview-run "), vec![stage_table_line(&row).as_str()], "the live line gave way");
        // The summary line stays in later frames.
        assert_eq!(mine(&view.lines(), "plview-run "), vec![stage_table_line(&row).as_str()]);
    }

    #[test]
    fn a_view_shows_only_stages_ended_after_it_was_created() {
        stage_ended(&crate::stage("plview-before").shards(1).start().finish());
        let mut view = ProgressLines::new();
        assert!(mine(&view.lines(), "plview-before").is_empty());
        let row = crate::stage("plview-after").shards(1).start().fail("broken input");
        stage_ended(&row);
        let lines = view.lines();
        let after = mine(&lines, "plview-after");
        assert_eq!(after, vec![stage_table_line(&row).as_str()]);
        assert!(after[0].contains("failed") && after[0].ends_with("broken input"), "{after:?}");
    }

    #[test]
    fn a_view_read_too_rarely_counts_the_stages_it_missed() {
        let mut view = ProgressLines::new();
        let n = RECENT_LEN + 5;
        for i in 0..n {
            stage_ended(&crate::stage(format!("plview-many-{i}")).shards(1).start().finish());
        }
        let lines = view.lines();
        // Other tests' stages may end meanwhile and count as missed too: at least 5 are hidden.
        let hidden = lines.iter().find_map(|l| {
            l.strip_prefix('(')
                .and_then(|l| l.strip_suffix(" earlier stages not shown)"))
                .and_then(|n| n.parse::<usize>().ok())
        });
        assert!(hidden.is_some_and(|h| h >= 5), "{lines:?}");
        let shown = mine(&lines, "plview-many-");
        assert!(!shown.is_empty() && shown.len() <= RECENT_LEN, "{shown:?}");
        assert!(shown.last().is_some_and(|l| l.starts_with(&format!("plview-many-{} ", n - 1))), "{shown:?}");
    }
}
