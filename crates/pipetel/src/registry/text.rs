//! The text exposition of a registry's own families, and the checker for lines that text
//! collectors hand in.
//!
//! Written here rather than through the pull endpoint's encoder because `prometheus_text()` and
//! summaries must work without the `prometheus` feature, and because these values come straight
//! from the registry's atomics rather than from the SDK's collected data.

use std::collections::HashSet;
use std::fmt::Write as _;

pub(crate) use crate::export::format::{escape_help, escape_label_value, write_f64};

/// Writes `# HELP` and `# TYPE` for a family.
pub(crate) fn write_header(name: &str, help: &str, kind: &str, out: &mut String) {
    if !help.is_empty() {
        let _ = write!(out, "# HELP {name} ");
        escape_help(help, out);
        out.push('\n');
    }
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// Writes `name{k="v",...,extra} value\n`; `extra` is an already formatted label (e.g. `le`).
pub(crate) fn write_sample(
    name: &str,
    label_names: &[String],
    label_values: &[String],
    extra: Option<(&str, f64)>,
    value: f64,
    out: &mut String,
) {
    out.push_str(name);
    if !label_names.is_empty() || extra.is_some() {
        out.push('{');
        let mut first = true;
        if label_values.first().map(String::as_str) == Some(super::metric::OVERFLOW_MARK) {
            out.push_str("otel_metric_overflow=\"true\"");
            first = false;
        }
        let label_values = if first { label_values } else { &[] };
        for (k, v) in label_names.iter().zip(label_values) {
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(v, out);
            out.push('"');
        }
        if let Some((k, v)) = extra {
            if !first {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            write_f64(v, out);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    write_f64(value, out);
    out.push('\n');
}

/// `v` as the exposition writes it.
pub(crate) fn f64_text(v: f64) -> String {
    let mut s = String::new();
    write_f64(v, &mut s);
    s
}

/// Writes a series' labels without braces: in the declared order, or, with `scope`, sorted by
/// name and followed by `otel_scope_name="<scope>"` (as the pull endpoint's encoder writes an
/// OTel data point). The overflow series has the single label `otel_metric_overflow="true"`.
pub(crate) fn write_label_block(names: &[String], values: &[String], scope: Option<&str>, out: &mut String) {
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push(',');
        }
    };
    if values.first().map(String::as_str) == Some(super::metric::OVERFLOW_MARK) {
        sep(out);
        out.push_str("otel_metric_overflow=\"true\"");
    } else {
        let mut pairs: Vec<(&String, &String)> = names.iter().zip(values).collect();
        if scope.is_some() {
            pairs.sort_unstable_by(|a, b| a.0.cmp(b.0));
        }
        for (k, v) in pairs {
            sep(out);
            out.push_str(k);
            out.push_str("=\"");
            escape_label_value(v, out);
            out.push('"');
        }
    }
    if let Some(scope) = scope {
        sep(out);
        out.push_str("otel_scope_name=\"");
        escape_label_value(scope, out);
        out.push('"');
    }
}

/// Writes `name` + `suffix`, the label block `labels` (see [`write_label_block`]) and an `le`
/// label holding the already formatted `le`, then a space: the caller writes the value.
pub(crate) fn start_sample(name: &str, suffix: &str, labels: &str, le: Option<&str>, out: &mut String) {
    out.push_str(name);
    out.push_str(suffix);
    if !labels.is_empty() || le.is_some() {
        out.push('{');
        out.push_str(labels);
        if let Some(le) = le {
            if !labels.is_empty() {
                out.push(',');
            }
            out.push_str("le=\"");
            out.push_str(le);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
}

/// Checks the output of a text collector line by line and appends the lines that are valid
/// text exposition (format 0.0.4) to `out`. `taken` holds family names already in the output:
/// a `# TYPE` for one of them, or a second `# TYPE` for a name, is refused with that family's
/// samples, since Prometheus rejects the whole scrape for either. Returns the first refused
/// line and why, for the caller's one warning.
pub(crate) fn append_checked(text: &str, taken: &mut HashSet<String>, out: &mut String) -> Option<(String, String)> {
    let mut first_bad: Option<(String, String)> = None;
    let mut refused_families: HashSet<String> = HashSet::new();
    let mut typed_here: HashSet<String> = HashSet::new();
    let mut seen_samples: HashSet<String> = HashSet::new();
    let bad = |line: &str, why: &str, first_bad: &mut Option<(String, String)>| {
        if first_bad.is_none() {
            *first_bad = Some((line.chars().take(200).collect(), why.to_string()));
        }
    };
    for line in text.lines() {
        let trimmed = line.trim_end_matches('\r');
        if trimmed.trim().is_empty() {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix('#') {
            let mut parts = rest.trim_start().splitn(3, ' ');
            let keyword = parts.next().unwrap_or("");
            match keyword {
                "HELP" | "TYPE" => {
                    let name = parts.next().unwrap_or("");
                    let arg = parts.next().unwrap_or("");
                    if !is_metric_name(name) {
                        bad(trimmed, "invalid metric name", &mut first_bad);
                        continue;
                    }
                    if keyword == "TYPE" {
                        if !matches!(arg, "counter" | "gauge" | "histogram" | "summary" | "untyped") {
                            bad(trimmed, "unknown metric type", &mut first_bad);
                            refused_families.insert(name.to_string());
                            continue;
                        }
                        if taken.contains(name) || typed_here.contains(name) || seen_samples.contains(name) {
                            bad(trimmed, "a second TYPE line, or TYPE after samples, for this name", &mut first_bad);
                            refused_families.insert(name.to_string());
                            continue;
                        }
                        typed_here.insert(name.to_string());
                    } else if taken.contains(name) {
                        bad(trimmed, "the name is already in the exposition", &mut first_bad);
                        continue;
                    }
                    out.push_str(trimmed);
                    out.push('\n');
                }
                // Other comments are legal but add nothing; keep the output lean.
                _ => {}
            }
            continue;
        }
        match check_sample(trimmed) {
            Ok(name) => {
                let family = family_of(name, &typed_here, taken);
                if refused_families.contains(&family) || (taken.contains(&family) && !typed_here.contains(&family)) {
                    bad(trimmed, "the family was refused or is already in the exposition", &mut first_bad);
                    continue;
                }
                seen_samples.insert(family);
                out.push_str(trimmed);
                out.push('\n');
            }
            Err(why) => bad(trimmed, why, &mut first_bad),
        }
    }
    taken.extend(typed_here);
    taken.extend(seen_samples);
    first_bad
}

/// The family a sample belongs to: its name less a histogram or summary suffix when the family
/// was typed (here or by an earlier collector) under the shorter name.
fn family_of(name: &str, typed: &HashSet<String>, taken: &HashSet<String>) -> String {
    for suffix in ["_bucket", "_count", "_sum"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if typed.contains(base) || taken.contains(base) {
                return base.to_string();
            }
        }
    }
    name.to_string()
}

pub(crate) fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Checks one sample line; returns its metric name.
fn check_sample(line: &str) -> Result<&str, &'static str> {
    let end = line.find(['{', ' ', '\t']).ok_or("a sample needs a value")?;
    let name = &line[..end];
    if !is_metric_name(name) {
        return Err("invalid metric name");
    }
    let mut rest = &line[end..];
    if let Some(after) = rest.strip_prefix('{') {
        rest = check_labels(after)?;
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = fields.next().ok_or("a sample needs a value")?;
    if !is_value(value) {
        return Err("the value is not a number");
    }
    if let Some(ts) = fields.next() {
        if ts.parse::<i64>().is_err() {
            return Err("the timestamp is not an integer");
        }
    }
    if fields.next().is_some() {
        return Err("unexpected text after the value");
    }
    Ok(name)
}

fn is_value(v: &str) -> bool {
    matches!(v, "NaN" | "+Inf" | "-Inf" | "Inf")
        || (v.parse::<f64>().is_ok() && !v.eq_ignore_ascii_case("inf") && !v.to_ascii_lowercase().contains("nan"))
}

/// Checks `k="v",...}` and returns what follows the closing brace.
fn check_labels(mut s: &str) -> Result<&str, &'static str> {
    let mut names = HashSet::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok(after);
        }
        let eq = s.find('=').ok_or("a label needs `=`")?;
        let key = s[..eq].trim();
        if !is_label_name(key) {
            return Err("invalid label name");
        }
        if !names.insert(key) {
            return Err("a label name appears twice");
        }
        s = s[eq + 1..].trim_start();
        s = s.strip_prefix('"').ok_or("a label value must be quoted")?;
        let mut chars = s.char_indices();
        let close = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\' | '"' | 'n')) => {}
                    _ => return Err("invalid escape in a label value"),
                },
                Some((i, '"')) => break i,
                Some((_, '\n')) => return Err("a raw newline in a label value"),
                Some(_) => {}
                None => return Err("an unterminated label value"),
            }
        };
        s = s[close + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels must be separated by `,`");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_lines_pass_and_invalid_ones_are_dropped() {
        let text = "# HELP legacy_jobs Jobs seen\n# TYPE legacy_jobs gauge\nlegacy_jobs{queue=\"a\\\"b\\\\c\\nd\"} 3\nlegacy_jobs 4 1700000000000\n\
                    bad line\nlegacy_other{x=\"unterminated} 1\nlegacy_nan NaN\nlegacy_text{a=\"b\"} twelve\n# TYPE legacy_jobs counter\n";
        let mut out = String::new();
        let mut taken = HashSet::new();
        let first = append_checked(text, &mut taken, &mut out);
        assert_eq!(
            out,
            "# HELP legacy_jobs Jobs seen\n# TYPE legacy_jobs gauge\nlegacy_jobs{queue=\"a\\\"b\\\\c\\nd\"} 3\nlegacy_jobs 4 1700000000000\nlegacy_nan NaN\n"
        );
        assert_eq!(first.map(|(l, _)| l).as_deref(), Some("bad line"));
        assert!(taken.contains("legacy_jobs"));
    }

    #[test]
    fn names_already_exposed_are_refused() {
        let mut taken: HashSet<String> = ["app_requests_total".to_string()].into();
        let mut out = String::new();
        let first =
            append_checked("# TYPE app_requests_total counter\napp_requests_total 1\nok_one 2\n", &mut taken, &mut out);
        assert_eq!(out, "ok_one 2\n");
        assert!(first.is_some());
    }

    #[test]
    fn histogram_suffixes_belong_to_their_family() {
        let mut taken = HashSet::new();
        let mut out = String::new();
        let text = "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
        assert!(append_checked(text, &mut taken, &mut out).is_none());
        assert_eq!(out, text);
        // A later collector cannot reopen the family.
        let mut out2 = String::new();
        assert!(append_checked("h_count 5\n", &mut taken, &mut out2).is_some());
        assert!(out2.is_empty());
    }

    #[test]
    fn label_syntax_is_checked() {
        assert!(check_sample("a{b=\"c\",} 1").is_ok());
        assert!(check_sample("a{b=\"c\" d=\"e\"} 1").is_err());
        assert!(check_sample("a{b=\"c\",b=\"d\"} 1").is_err());
        assert!(check_sample("a{0b=\"c\"} 1").is_err());
        assert!(check_sample("a{b=\"\\x\"} 1").is_err());
        assert!(check_sample("a{b=c} 1").is_err());
        assert!(check_sample("a 1 2 3").is_err());
        assert!(check_sample("a 1 1.5").is_err());
        assert!(check_sample("a -Inf").is_ok());
        assert!(check_sample("a 1e3").is_ok());
        assert!(check_sample("a").is_err());
    }

    #[test]
    fn samples_are_written_escaped() {
        let mut out = String::new();
        write_sample("m", &["a".into()], &["x\"y\\z\nü".into()], Some(("le", 0.5)), f64::INFINITY, &mut out);
        assert_eq!(out, "m{a=\"x\\\"y\\\\z\\nü\",le=\"0.5\"} +Inf\n");
        let mut out = String::new();
        write_sample("m", &[], &[], None, 2.0, &mut out);
        assert_eq!(out, "m 2\n");
    }
}
