//! The rules of the settings the instrumentation applies itself (service metrics, span
//! metrics): each a lexer (text to value) or a check, shared with the full configuration of
//! the `pipetel` crate so a value means the same wherever it is read.

/// The named bucket sets [`bucket_bounds`] accepts: `seconds` (pipetel's default) and
/// `telefuser` (TeleFuser's default).
pub const NAMED_BUCKETS: &[(&str, &[f64])] =
    &[("seconds", crate::buckets::SECONDS_BUCKETS), ("telefuser", crate::buckets::TELEFUSER_BUCKETS)];

/// `true`, `1`, `yes`, `on` or their opposites, in any case.
pub fn boolean(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err("expected `true` or `false`".into()),
    }
}

/// The non-empty, trimmed entries of a comma list.
pub fn split_list(v: &str) -> impl Iterator<Item = &str> {
    v.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Span names, comma-separated; blanks around names and empty entries are dropped.
pub fn names(v: &str) -> Result<Vec<String>, String> {
    Ok(split_list(v).map(str::to_string).collect())
}

/// A named bucket set (case-insensitive) or comma-separated numbers.
pub fn bucket_bounds(v: &str) -> Result<Vec<f64>, String> {
    let name = v.trim().to_ascii_lowercase();
    if let Some((_, bounds)) = NAMED_BUCKETS.iter().find(|(n, _)| *n == name) {
        return Ok(bounds.to_vec());
    }
    if name.starts_with(|c: char| c.is_ascii_alphabetic()) && !name.contains(',') && name.parse::<f64>().is_err() {
        let names: Vec<&str> = NAMED_BUCKETS.iter().map(|(n, _)| *n).collect();
        return Err(format!("expected comma-separated numbers or one of: {}", names.join(", ")));
    }
    numbers(v)
}

/// Comma-separated numbers.
pub fn numbers(v: &str) -> Result<Vec<f64>, String> {
    v.split(',').map(|s| s.trim().parse::<f64>().map_err(|_| format!("{:?} is not a number", s.trim()))).collect()
}

/// A metric-name prefix, as the registry accepts one: snake_case, not reserved, not empty.
// A check takes `&T` of its setting's type (`fn(&String)`, `fn(&Vec<f64>)`).
#[allow(clippy::ptr_arg)]
pub fn service_prefix(v: &String) -> Result<(), String> {
    let v = v.trim();
    let mut chars = v.chars();
    match chars.next() {
        None => return Err("the prefix is empty".into()),
        Some(c) if !(c.is_ascii_lowercase() || c == '_') => {
            return Err("expected a snake_case prefix: it starts with a-z or _".into())
        }
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return Err("expected a snake_case prefix: a-z, 0-9 and _ only".into());
    }
    if v.starts_with("__") {
        return Err("prefixes starting with __ are reserved".into());
    }
    Ok(())
}

/// Finite, strictly increasing bucket bounds.
#[allow(clippy::ptr_arg)]
pub fn buckets(bounds: &Vec<f64>) -> Result<(), String> {
    if bounds.iter().any(|b| !b.is_finite()) {
        return Err("bounds must be finite (+Inf is implied)".into());
    }
    if bounds.windows(2).any(|w| w[0] >= w[1]) {
        return Err("bounds must be strictly increasing".into());
    }
    Ok(())
}

/// The span-metrics filter as the layer uses it (empty means every span).
pub fn span_targets(directive: &str) -> Result<tracing_subscriber::filter::Targets, String> {
    use tracing_subscriber::filter::Targets;
    let directive = directive.trim();
    if directive.is_empty() {
        return Ok(Targets::new().with_default(tracing::level_filters::LevelFilter::TRACE));
    }
    directive.parse::<Targets>().map_err(|e| e.to_string())
}

/// Comma-separated, finite, strictly increasing bucket bounds, or the name of a set:
/// `seconds` ([`crate::buckets::SECONDS_BUCKETS`]) or `telefuser` ([`crate::buckets::TELEFUSER_BUCKETS`]).
///
/// # Errors
/// The reason, for the caller to pair with the variable or key it came from.
pub fn parse_buckets(v: &str) -> Result<Vec<f64>, String> {
    let bounds = bucket_bounds(v)?;
    buckets(&bounds)?;
    Ok(bounds)
}
