//! Why a registration or a series lookup fails.

/// Why a metric could not be registered or a series could not be found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A metric name or registry prefix breaks the naming rules.
    #[error("invalid metric name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A label name breaks the naming rules.
    #[error("invalid label name {label:?} for metric {metric}: {reason}")]
    InvalidLabelName {
        /// The metric.
        metric: String,
        /// The label name as given.
        label: String,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// The name is taken by a metric of another kind, labels or options.
    #[error("metric {name} is already registered as {existing}")]
    Conflict {
        /// The name.
        name: String,
        /// What holds it.
        existing: String,
    },
    /// The label names given for a series differ from those the metric declares.
    #[error("labels {given:?} do not match the labels {expected:?} of metric {metric}")]
    LabelMismatch {
        /// The metric.
        metric: String,
        /// Its declared label names.
        expected: Vec<String>,
        /// The names given.
        given: Vec<String>,
    },
    /// Buckets, quantiles or the window are invalid, or do not apply to the kind.
    #[error("invalid option for metric {metric}: {reason}")]
    InvalidOption {
        /// The metric.
        metric: String,
        /// What is wrong.
        reason: String,
    },
}

/// [`RegistryError::InvalidOption`] for `metric`.
pub(crate) fn invalid_option(metric: &str, reason: &str) -> RegistryError {
    RegistryError::InvalidOption { metric: metric.to_string(), reason: reason.to_string() }
}
