//! The text of the Python registries as TeleFuser programs read it.
//!
//! - Histogram bucket bounds written as prometheus_client writes them (`le="1.0"`, `le="0.005"`,
//!   `le="1e+06"`, `le="+Inf"`), on the text of `MetricRegistry` and the TeleFuser service
//!   metrics: TeleFuser programs' dashboards and recording rules were built on that client's
//!   output, and a `le` label is matched as a string. The Rust registry's own text, and the pull
//!   endpoint's page, keep the shortest form (`le="1"`).
//! - The stage metrics (`enable_stage_metrics`) out of the pull endpoint's page, for the global
//!   TeleFuser registry's text, which held them in TeleFuser.

/// The families the stage contexts record into (`pipetel::stage_metrics`), as the page names
/// them: `#[measure]`'s families, from their table.
fn stage_families() -> [String; 6] {
    use pipetel::families::function::{CALLS, DURATION, ERRORS, INPUT_SIZE, IN_FLIGHT, OUTPUT_SIZE};
    [CALLS, ERRORS, IN_FLIGHT, DURATION, INPUT_SIZE, OUTPUT_SIZE].map(|f| f.prometheus_name())
}

/// The series of stage contexts (those with the label `stage`) of the stage families in `page`,
/// with their `# HELP` / `# TYPE` lines, bounds as prometheus_client writes them.
pub(crate) fn stage_metrics_text(page: &str) -> String {
    let mut out = String::new();
    let families = stage_families();
    let mut family: Option<&str> = None;
    let mut comments = String::new();
    for line in page.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")) {
            let name = rest.split(' ').next().unwrap_or_default();
            if family != Some(name) {
                comments.clear();
                family = families.iter().find(|f| f.as_str() == name).map(String::as_str);
            }
            if family.is_some() {
                comments.push_str(line);
            }
            continue;
        }
        let Some(fam) = family else { continue };
        if line.starts_with('#') {
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        let ours = name == fam || [("_bucket"), ("_sum"), ("_count")].iter().any(|s| name.strip_suffix(s) == Some(fam));
        let block = line.find('{').and_then(|open| line.rfind('}').map(|close| &line[open..=close.max(open)]));
        let staged = block.is_some_and(|b| b.starts_with("{stage=\"") || b.contains(",stage=\""));
        if ours && staged {
            out.push_str(&comments);
            comments.clear();
            out.push_str(line);
        }
    }
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    prometheus_client_bounds(out)
}

/// `text` with the `le` value of every `*_bucket` sample written as prometheus_client does.
pub(crate) fn prometheus_client_bounds(text: String) -> String {
    if !text.contains("_bucket{") {
        return text;
    }
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    for line in text.split_inclusive('\n') {
        match rewrite(line) {
            Some(new) => out.push_str(&new),
            None => out.push_str(line),
        }
    }
    out
}

/// The line with its bound rewritten, or `None` when it has no `le` to rewrite. The exposition
/// writer puts `le` last, so it is the label that closes the block (`le="..."}`); inside a label
/// value a `"` is always escaped, so `,le="` or `{le="` can only start a label.
fn rewrite(line: &str) -> Option<String> {
    if line.starts_with('#') {
        return None;
    }
    let open = line.find('{')?;
    if !line[..open].ends_with("_bucket") {
        return None;
    }
    let close = line.rfind("\"}")?;
    let start = line[..close].rfind("le=\"")?;
    if start == 0 || !matches!(line.as_bytes()[start - 1], b'{' | b',') || start < open {
        return None;
    }
    let value = &line[start + 4..close];
    if value.contains(['"', '\\']) {
        return None;
    }
    let bound: f64 = value.parse().ok()?;
    let written = float_to_go_string(bound);
    if written == value {
        return None;
    }
    Some(format!("{}{written}{}", &line[..start + 4], &line[close..]))
}

/// prometheus_client's `floatToGoString`: Python's `repr` of the float, with Go's exponent form
/// for positive values of more than six integer digits.
fn float_to_go_string(d: f64) -> String {
    if d == f64::INFINITY {
        return "+Inf".to_string();
    }
    if d == f64::NEG_INFINITY {
        return "-Inf".to_string();
    }
    if d.is_nan() {
        return "NaN".to_string();
    }
    let s = python_repr(d);
    match s.find('.') {
        Some(dot) if d > 0.0 && dot > 6 => {
            let mantissa = format!("{}.{}{}", &s[..1], &s[1..dot], &s[dot + 1..]);
            let mantissa = mantissa.trim_end_matches(['0', '.']);
            format!("{mantissa}e+0{}", dot - 1)
        }
        _ => s,
    }
}

/// Python's `repr(float)`: the shortest digits that read back, fixed notation for decimal
/// exponents from -4 to 15 (with at least one digit after the point), else `d.ddde±XX`.
fn python_repr(d: f64) -> String {
    if d == 0.0 {
        return if d.is_sign_negative() { "-0.0".to_string() } else { "0.0".to_string() };
    }
    // `{:e}` gives the shortest round-trip digits: "1.2325e2", "5e-3", "-1e0".
    let sci = format!("{d:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = mantissa.strip_prefix('-').map_or(("", mantissa), |m| ("-", m));
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        if exp >= 0 {
            let int_len = usize::try_from(exp).unwrap_or(0) + 1;
            if digits.len() <= int_len {
                format!("{sign}{digits}{}.0", "0".repeat(int_len - digits.len()))
            } else {
                format!("{sign}{}.{}", &digits[..int_len], &digits[int_len..])
            }
        } else {
            let zeros = usize::try_from(-exp - 1).unwrap_or(0);
            format!("{sign}0.{}{digits}", "0".repeat(zeros))
        }
    } else {
        let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        let e_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{}{rest}e{e_sign}{:02}", &digits[..1], exp.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_read_as_python_and_prometheus_client_write_them() {
        for (value, repr) in [
            (1.0, "1.0"),
            (0.005, "0.005"),
            (0.1, "0.1"),
            (2.5, "2.5"),
            (10.0, "10.0"),
            (123.25, "123.25"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-7, "1.5e-07"),
            (1e16, "1e+16"),
            (123_456_789.0, "123456789.0"),
            (-2.0, "-2.0"),
            (0.0, "0.0"),
        ] {
            assert_eq!(python_repr(value), repr, "{value}");
        }
        assert_eq!(float_to_go_string(1_000_000.0), "1e+06");
        assert_eq!(float_to_go_string(2_500_000.0), "2.5e+06");
        assert_eq!(float_to_go_string(100_000.0), "100000.0");
        assert_eq!(float_to_go_string(f64::INFINITY), "+Inf");
    }

    #[test]
    fn stage_series_are_taken_out_of_the_page() {
        let page = "# HELP app_total a\n# TYPE app_total counter\napp_total 1\n\
                    # HELP function_calls_total Calls\n# TYPE function_calls_total counter\n\
                    function_calls_total{function=\"f\",module=\"m\"} 5\n\
                    function_calls_total{stage=\"tok\",otel_scope_name=\"pipetel\"} 2\n\
                    # TYPE function_duration_seconds histogram\n\
                    function_duration_seconds_bucket{function=\"f\",le=\"1\"} 1\n\
                    # TYPE function_in_flight gauge\nfunction_in_flight{x=\"a,stage=\\\"b\"} 1\n";
        assert_eq!(
            stage_metrics_text(page),
            "# HELP function_calls_total Calls\n# TYPE function_calls_total counter\n\
             function_calls_total{stage=\"tok\",otel_scope_name=\"pipetel\"} 2\n"
        );
        assert_eq!(stage_metrics_text("app_total 1"), "");
    }

    #[test]
    fn only_bucket_bounds_are_rewritten() {
        let text = "# HELP h_seconds a le=\"1\"\n# TYPE h_seconds histogram\n\
                    h_seconds_bucket{le=\"0.005\"} 0\nh_seconds_bucket{le=\"1\"} 1\n\
                    h_seconds_bucket{path=\"a,le=\\\"2\\\"\",le=\"10\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n\
                    h_seconds_sum 3\nh_seconds_count 2\nother{le=\"1\"} 1\n";
        assert_eq!(
            prometheus_client_bounds(text.to_string()),
            "# HELP h_seconds a le=\"1\"\n# TYPE h_seconds histogram\n\
             h_seconds_bucket{le=\"0.005\"} 0\nh_seconds_bucket{le=\"1.0\"} 1\n\
             h_seconds_bucket{path=\"a,le=\\\"2\\\"\",le=\"10.0\"} 1\nh_seconds_bucket{le=\"+Inf\"} 2\n\
             h_seconds_sum 3\nh_seconds_count 2\nother{le=\"1\"} 1\n"
        );
    }
}
