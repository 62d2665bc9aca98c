//! Entry points for the fuzz targets (`crates/pipetel/fuzz`) and their stable replay tests:
//! thin wrappers, taking text, over internals that parse what other programs hand in. Everything
//! reachable through the public API is fuzzed through it instead.

/// Not part of the API: entry points for fuzzing, which may change in any release.
#[doc(hidden)]
pub mod __fuzz {
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
}
