//! OTel → Prometheus name translation, after the compatibility specification:
//! - names: characters outside `[a-zA-Z0-9_:]` become `_`, runs of `_` collapse, a leading digit
//!   gets a `_` prefix; the unit's Prometheus word (`s` → `seconds`, `By` → `bytes`, gauge `1` →
//!   `ratio`, ...) is appended unless the name already ends with it; `{annotations}` add
//!   nothing; monotonic sums get `_total`;
//! - label keys: sanitised the same way (keys that then start with `__`, reserved by
//!   Prometheus, get a `key` prefix).

use std::borrow::Cow;

/// The exposition name of an OTel instrument `name` with `unit`: sanitised, with the unit's
/// word unless it already ends with it, and `_total` for a `counter` (a monotonic sum).
/// `gauge_like` instruments (gauges, non-monotonic sums) turn unit `1` into `_ratio`.
pub(crate) fn prometheus_name(name: &str, unit: &str, gauge_like: bool, counter: bool) -> String {
    let mut out = sanitize(name);
    if let Some(word) = unit_word(unit, gauge_like) {
        if !out.ends_with(&format!("_{word}")) && out != word {
            out.push('_');
            out.push_str(&word);
        }
    }
    if counter && !out.ends_with("_total") {
        out.push_str("_total");
    }
    out
}

/// The Prometheus word a unit adds to a name, per the compatibility specification.
fn unit_word(unit: &str, gauge_like: bool) -> Option<String> {
    let unit = unit.trim();
    if unit.is_empty() || (unit.starts_with('{') && unit.ends_with('}')) {
        return None;
    }
    if unit == "1" {
        return gauge_like.then(|| "ratio".to_string());
    }
    let word = |u: &str| -> String {
        match u {
            "d" => "days",
            "h" => "hours",
            "min" => "minutes",
            "s" => "seconds",
            "ms" => "milliseconds",
            "us" => "microseconds",
            "ns" => "nanoseconds",
            "By" => "bytes",
            "KiBy" => "kibibytes",
            "MiBy" => "mebibytes",
            "GiBy" => "gibibytes",
            "TiBy" => "tibibytes",
            "KBy" => "kilobytes",
            "MBy" => "megabytes",
            "GBy" => "gigabytes",
            "TBy" => "terabytes",
            "m" => "meters",
            "V" => "volts",
            "A" => "amperes",
            "J" => "joules",
            "W" => "watts",
            "g" => "grams",
            "Cel" => "celsius",
            "Hz" => "hertz",
            "%" => "percent",
            other => return sanitize(other.trim_matches(|c| c == '{' || c == '}')),
        }
        .to_string()
    };
    let out = match unit.split_once('/') {
        Some((a, b)) => {
            let per = match b {
                "s" => "second".to_string(),
                "m" => "minute".to_string(),
                "h" => "hour".to_string(),
                "d" => "day".to_string(),
                other => word(other),
            };
            if a.starts_with('{') {
                format!("per_{per}")
            } else {
                format!("{}_per_{per}", word(a))
            }
        }
        None => word(unit),
    };
    (!out.is_empty()).then_some(out)
}

/// Replaces characters outside `[a-zA-Z0-9_:]` with `_`, collapses runs of `_`, and prefixes a
/// leading digit.
pub(crate) fn sanitize(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '_' || c == ':' { c } else { '_' };
        if c == '_' && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// An attribute key as a label name.
pub(crate) fn label_key(key: &str) -> String {
    let k = sanitize(key);
    // Keys starting with `__` are reserved by Prometheus.
    if k.starts_with("__") {
        format!("key{k}")
    } else {
        k
    }
}

/// [`label_key`], borrowed when the key needs no change (the usual case), so a scrape does not
/// allocate per data point.
pub(crate) fn label_key_cow(key: &str) -> Cow<'_, str> {
    let valid = !key.is_empty()
        && !key.starts_with(|c: char| c.is_ascii_digit())
        && !key.starts_with("__")
        && !key.contains("__")
        && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':');
    if valid {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(label_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_compatibility_rules() {
        assert_eq!(sanitize("pipeline.stage.items"), "pipeline_stage_items");
        assert_eq!(sanitize("http.server..duration"), "http_server_duration");
        assert_eq!(sanitize("9lives"), "_9lives");
        assert_eq!(unit_word("By", false).as_deref(), Some("bytes"));
        assert_eq!(unit_word("s", false).as_deref(), Some("seconds"));
        assert_eq!(unit_word("1", true).as_deref(), Some("ratio"));
        assert_eq!(unit_word("1", false), None);
        assert_eq!(unit_word("{item}", false), None);
        assert_eq!(unit_word("By/s", true).as_deref(), Some("bytes_per_second"));
        assert_eq!(unit_word("{request}/s", true).as_deref(), Some("per_second"));
        assert_eq!(unit_word("Cel", true).as_deref(), Some("celsius"));
        assert_eq!(prometheus_name("pipeline.stage.bytes", "By", false, true), "pipeline_stage_bytes_total");
        assert_eq!(prometheus_name("task.duration_seconds", "s", false, false), "task_duration_seconds");
        assert_eq!(prometheus_name("load", "1", true, false), "load_ratio");
        assert_eq!(label_key_cow("stage.name"), "stage_name");
        assert!(matches!(label_key_cow("ok_name"), Cow::Borrowed(_)));
    }
}
