//! The naming rules metric names, prefixes and label names follow.

use super::error::RegistryError;
use super::kind::Kind;

/// Metric names and prefixes: snake_case, not reserved.
pub(crate) fn check_name(name: &str) -> Result<(), RegistryError> {
    let err = |reason| Err(RegistryError::InvalidName { name: name.to_string(), reason });
    let mut chars = name.chars();
    match chars.next() {
        None => return err("the name is empty"),
        Some(c) if !(c.is_ascii_lowercase() || c == '_') => return err("names start with a-z or _"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
        return err("names are snake_case: a-z, 0-9 and _ only");
    }
    if name.starts_with("__") {
        return err("names starting with __ are reserved");
    }
    Ok(())
}

/// Label names: Prometheus label names, not reserved by Prometheus, the exporter or the kind.
pub(crate) fn check_label_name(label: &str, kind: Kind) -> Result<(), &'static str> {
    let mut chars = label.chars();
    match chars.next() {
        None => return Err("the label name is empty"),
        Some(c) if !(c.is_ascii_alphabetic() || c == '_') => return Err("label names start with a letter or _"),
        _ => {}
    }
    if !chars.all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return Err("label names have letters, digits and _ only");
    }
    if label.starts_with("__") {
        return Err("label names starting with __ are reserved");
    }
    if label == "otel_scope_name" || label == "otel_scope_version" {
        return Err("the exporter sets this label");
    }
    if kind == Kind::Histogram && label == "le" {
        return Err("`le` is reserved on histograms");
    }
    if kind == Kind::Summary && label == "quantile" {
        return Err("`quantile` is reserved on summaries");
    }
    Ok(())
}

/// Label names of a metric: each valid, none twice.
pub(crate) fn check_label_names(metric: &str, labels: &[String], kind: Kind) -> Result<(), RegistryError> {
    let invalid = |label: &String, reason| RegistryError::InvalidLabelName {
        metric: metric.to_string(),
        label: label.clone(),
        reason,
    };
    for (i, label) in labels.iter().enumerate() {
        check_label_name(label, kind).map_err(|reason| invalid(label, reason))?;
        if labels[..i].contains(label) {
            return Err(invalid(label, "the label is declared twice"));
        }
    }
    Ok(())
}
