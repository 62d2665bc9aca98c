//! The configuration reference, written from the settings table: `docs/src/configuration.md`
//! whole. A test compares it with what is checked in and rewrites it with `PIPETEL_BLESS=1`.

use super::declare::FileType;
use super::table::TABLE;

const SIGNALS: [&str; 4] = ["traces", "metrics", "logs", "profiles"];

/// The reference's table: a row per variable (and per file key that has none), in the table's
/// order.
pub(crate) fn table() -> String {
    let mut out = String::from("| variable | file key | default | meaning |\n|---|---|---|---|\n");
    for entry in TABLE {
        let meaning = one_line(entry.meaning);
        let rows = entry.env.len().max(entry.keys.len());
        for scope in 0..rows {
            let variable = entry.env.get(scope).map_or_else(|| "—".to_string(), |v| format!("`{v}`"));
            let mut key = match entry.keys.get(scope) {
                Some(k) if entry.kind == FileType::Table => format!("`{k}` table"),
                Some(k) => format!("`{k}`"),
                None => "—".to_string(),
            };
            if let Some(old) = entry.old_key {
                key.push_str(&format!(" (was `{old}`)"));
            }
            let (default, meaning) = match (scope, entry.env.first()) {
                (0, _) | (_, None) => ((entry.default)(), meaning.clone()),
                (s, Some(generic)) => {
                    let signal = SIGNALS.get(s - 1).copied().unwrap_or("one signal");
                    (format!("`{generic}`"), format!("as `{generic}`, for {signal} only"))
                }
            };
            out.push_str(&format!("| {variable} | {key} | {default} | {meaning} |\n"));
        }
    }
    out
}

/// A doc comment's lines as one table cell.
fn one_line(meaning: &str) -> String {
    meaning.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ").replace('|', "\\|")
}

/// `docs/src/configuration.md`.
pub(crate) fn document() -> String {
    format!("{INTRO}\n{}\n{OUTRO}", table(),)
}

const INTRO: &str = "\
<!-- Generated from crates/pipetel/src/config/table.rs by `PIPETEL_BLESS=1 cargo test -p pipetel --lib config::tests::reference`; edit the table, not this file. -->

# Configuration reference

pipetel reads its settings from code (`Config::with_*`), the environment (`Config::from_env`) and
an optional TOML file (`PIPETEL_CONFIG=path`). Every setting resolves in one order, highest first:

1. a value set in code (`Config::with_*`, or `Config::with_setting(\"file.key\", value)`),
2. the environment,
3. the file,
4. the default.

An OTLP setting has a value for every signal and one per signal (`OTEL_EXPORTER_OTLP_TRACES_*`,
`[otlp.traces]`, `Config::with_otlp_signal_*`): a signal's own value, wherever it was given,
beats the generic one.

Every value is read by one rule whatever its path: the file's value is checked exactly as the
variable's, and a value set in code by the same check when the configuration is resolved. A bad
value is an error naming the variable, file key or setter and the value; an unknown file key is
an error too. Request header values, the Prometheus bearer token and the basic-auth password are
never shown: errors and `Debug` output write `<redacted>`.

Durations share one grammar: a number with a unit (`500ms`, `1.5s`, `2m`, `1h`) or a bare number
in the setting's own unit: milliseconds for the `OTEL_*` variables, the `PIPETEL_*` durations and
the `*_ms` file keys, seconds for `PIPETEL_GPU_POLL_INTERVAL`. A file key of a section is written
dotted here (`prometheus.port` is `port` in `[prometheus]`); `Config::with_setting` and the Python
package's `init` take it dotted or with each `.` written `_` (`prometheus_port`).
";

const OUTRO: &str = "\
The GPU settings need the `gpu` feature: without it the variables are not read and the file's
`[gpu]` keys are accepted and ignored, so one file serves every build.
";
