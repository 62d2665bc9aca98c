//! Entry points for the fuzz targets (`crates/pipetel/fuzz`) and their stable replay tests:
//! thin wrappers, taking text, over internals that parse what other programs hand in. Everything
//! reachable through the public API is fuzzed through it instead.

/// Entry points for fuzzing (feature `fuzzing`), which may change in any release.
pub mod fuzzing {
    use std::collections::HashSet;

    use crate::exposition::{append_checked, Format};

    /// Runs the exposition linter over `text`, a text collector's output, as one scrape in the
    /// text format (or OpenMetrics) would, with `taken` the family names already in the
    /// exposition. Returns the lines kept (rewritten for OpenMetrics) and the first refused line
    /// with its reason.
    pub fn lint_exposition(text: &str, taken: &[&str], openmetrics: bool) -> (String, Option<(String, String)>) {
        let mut taken: HashSet<String> = taken.iter().map(|name| (*name).to_string()).collect();
        let format = if openmetrics { Format::OpenMetrics } else { Format::Text };
        let mut out = String::new();
        let first_bad = append_checked(text, &mut taken, &mut out, format);
        (out, first_bad)
    }

    /// Ingests `bytes` twice into a fresh owner of stage `stage` / `execution_id`, as
    /// [`Stage::ingest_remote`](crate::pipeline::Stage::ingest_remote) does (decode, then fold
    /// into the stage's remote shards), without registering a stage: a fuzzing run makes
    /// millions, and a stage outlives its end by the retention. Returns both outcomes and the
    /// items the owner holds after them.
    pub fn ingest_remote_twice(
        stage: &str,
        execution_id: &str,
        bytes: &[u8],
    ) -> (
        Result<crate::pipeline::RemoteIngested, crate::pipeline::RemoteReportError>,
        Result<crate::pipeline::RemoteIngested, crate::pipeline::RemoteReportError>,
        u64,
    ) {
        let mut into = crate::pipeline::RemoteShards::default();
        let mut once = || crate::pipeline::ingest_remote_bytes(stage, execution_id, bytes, &mut into);
        let (first, again) = (once(), once());
        let items = into.shards.values().fold(0u64, |sum, s| sum.saturating_add(s.items));
        (first, again, items)
    }
}
