//! The text exposition format's escaping and number rules, shared by the pull endpoint's
//! encoder, the registry's own exposition and the hub's native histograms.

use std::fmt::Write as _;

/// Escapes a label value (`\`, `"`, newline), as the text format requires.
pub(crate) fn escape_label_value(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Escapes `# HELP` text (`\` and newline).
pub(crate) fn escape_help(v: &str, out: &mut String) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Writes a sample value the way Prometheus parses it.
pub(crate) fn write_f64(v: f64, out: &mut String) {
    if v.is_nan() {
        out.push_str("NaN");
    } else if v == f64::INFINITY {
        out.push_str("+Inf");
    } else if v == f64::NEG_INFINITY {
        out.push_str("-Inf");
    } else {
        let _ = write!(out, "{v}");
    }
}
