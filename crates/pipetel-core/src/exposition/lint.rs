//! The linter for text collectors' output: which lines are valid text exposition (format
//! 0.0.4) that can join a scrape without breaking it, rewritten as OpenMetrics when the scrape
//! is in that format.

use std::collections::{HashMap, HashSet};

use super::text::{write_f64, Format};

/// Checks the output of a text collector line by line and appends the lines that are valid
/// text exposition (format 0.0.4) to `out`. `taken` holds family names already in the output:
/// a `# TYPE` for one of them, or a second `# TYPE` for a name, is refused with that family's
/// samples, since Prometheus rejects the whole scrape for either. Returns the first refused
/// line and why, for the caller's one warning. In [`Format::OpenMetrics`] the accepted lines
/// are rewritten as that format wants them ([`to_openmetrics`]).
pub(crate) fn append_checked(
    text: &str,
    taken: &mut HashSet<String>,
    out: &mut String,
    format: Format,
) -> Option<(String, String)> {
    match format {
        Format::Text => check_into(text, taken, out),
        Format::OpenMetrics => {
            let mut checked = String::new();
            let first_bad = check_into(text, taken, &mut checked);
            to_openmetrics(&checked, out);
            first_bad
        }
    }
}

/// The text format's lines that passed [`check_into`], as OpenMetrics: a counter typed
/// `x_total` becomes family `x` (typed `unknown` when its name lacks `_total`), `untyped`
/// becomes `unknown`, `"` is escaped in `# HELP`, a sample is re-spaced with `+Inf` spelled out
/// and its millisecond timestamp written in seconds.
fn to_openmetrics(checked: &str, out: &mut String) {
    let mut types: HashMap<&str, &str> = HashMap::new();
    for line in checked.lines() {
        if let Some((name, kind)) = line.strip_prefix("# TYPE ").and_then(|r| r.split_once(' ')) {
            types.insert(name, kind);
        }
    }
    let renamed = |name: &str| -> (String, &'static str) {
        match types.get(name).copied() {
            Some("counter") => match name.strip_suffix("_total") {
                Some(base) if !base.is_empty() => (base.to_string(), "counter"),
                _ => (name.to_string(), "unknown"),
            },
            Some("gauge") => (name.to_string(), "gauge"),
            Some("histogram") => (name.to_string(), "histogram"),
            Some("summary") => (name.to_string(), "summary"),
            _ => (name.to_string(), "unknown"),
        }
    };
    for line in checked.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.push_str("# HELP ");
            out.push_str(&renamed(name).0);
            out.push(' ');
            let mut chars = help.chars();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => {
                        out.push('\\');
                        out.push(chars.next().unwrap_or('\\'));
                    }
                    '"' => out.push_str("\\\""),
                    c => out.push(c),
                }
            }
            out.push('\n');
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let name = rest.split_once(' ').map_or(rest, |(n, _)| n);
            let (name, kind) = renamed(name);
            out.push_str("# TYPE ");
            out.push_str(&name);
            out.push(' ');
            out.push_str(kind);
            out.push('\n');
        } else {
            write_sample_openmetrics(line, out);
        }
    }
}

/// Rewrites one checked sample line (see [`to_openmetrics`]).
fn write_sample_openmetrics(line: &str, out: &mut String) {
    let Some(end) = line.find(['{', ' ', '\t']) else { return };
    let mut pairs = Vec::new();
    let mut rest = &line[end..];
    if let Some(after) = rest.strip_prefix('{') {
        match labels(after, &mut pairs) {
            Ok(r) => rest = r,
            Err(_) => return,
        }
    }
    let mut fields = rest.split_ascii_whitespace();
    let Some(value) = fields.next() else { return };
    out.push_str(&line[..end]);
    if !pairs.is_empty() {
        out.push('{');
        for (i, (k, v)) in pairs.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            out.push_str(v);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(if value == "Inf" { "+Inf" } else { value });
    if let Some(ms) = fields.next().and_then(|t| t.parse::<i64>().ok()) {
        out.push(' ');
        write_f64(ms as f64 / 1000.0, out);
    }
    out.push('\n');
}

fn check_into(text: &str, taken: &mut HashSet<String>, out: &mut String) -> Option<(String, String)> {
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

pub(super) fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

pub(super) fn is_label_name(name: &str) -> bool {
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
        rest = labels(after, &mut Vec::new())?;
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

/// Checks `k="v",...}` and returns what follows the closing brace; `pairs` gets each label's
/// name and (still escaped) value.
pub(super) fn labels<'a>(mut s: &'a str, pairs: &mut Vec<(&'a str, &'a str)>) -> Result<&'a str, &'static str> {
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
        pairs.push((key, &s[..close]));
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
        let first = append_checked(text, &mut taken, &mut out, Format::Text);
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
        let first = append_checked(
            "# TYPE app_requests_total counter\napp_requests_total 1\nok_one 2\n",
            &mut taken,
            &mut out,
            Format::Text,
        );
        assert_eq!(out, "ok_one 2\n");
        assert!(first.is_some());
    }

    #[test]
    fn histogram_suffixes_belong_to_their_family() {
        let mut taken = HashSet::new();
        let mut out = String::new();
        let text = "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n";
        assert!(append_checked(text, &mut taken, &mut out, Format::Text).is_none());
        assert_eq!(out, text);
        // A later collector cannot reopen the family.
        let mut out2 = String::new();
        assert!(append_checked("h_count 5\n", &mut taken, &mut out2, Format::Text).is_some());
        assert!(out2.is_empty());
    }

    #[test]
    fn openmetrics_gets_its_own_spelling_of_the_same_samples() {
        let text = "# HELP legacy_jobs_total Jobs \"seen\" \\ here\n# TYPE legacy_jobs_total counter\n\
                    legacy_jobs_total{queue=\"a\",} 3 1700000000123\n# TYPE plain counter\nplain 1\n\
                    # TYPE odd untyped\nodd Inf\nbare  2\n";
        let mut out = String::new();
        assert!(append_checked(text, &mut HashSet::new(), &mut out, Format::OpenMetrics).is_none());
        assert_eq!(
            out,
            "# HELP legacy_jobs Jobs \\\"seen\\\" \\ here\n# TYPE legacy_jobs counter\n\
             legacy_jobs_total{queue=\"a\"} 3 1700000000.123\n# TYPE plain unknown\nplain 1\n\
             # TYPE odd unknown\nodd +Inf\nbare 2\n"
        );
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
}
