//! The one text grammar of durations every pipetel setting accepts (`PIPETEL_*`, `OTEL_*`, the
//! configuration file and the GPU exporter alike).
//!
//! A duration is a non-negative decimal number followed by a unit — `ms`, `s`, `m` or `h` —
//! or a bare number in the setting's own unit ([`BareUnit`]): milliseconds for the OTel
//! variables (as the OTel specification defines them) and pipetel's `*_MS`-style settings,
//! seconds where a setting documents seconds. White space around the number and the unit is
//! ignored. `1500ms`, `1.5s`, `2m`, `0.5h` and (with milliseconds as the bare unit) `1500` all
//! mean the same kind of thing on every path.

use std::fmt;
use std::time::Duration;

/// The unit of a bare number (one without a suffix).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BareUnit {
    /// A bare number counts milliseconds (the OTel specification's unit for its variables).
    Millis,
    /// A bare number counts seconds.
    Seconds,
}

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationError {
    bare: BareUnit,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bare = match self.bare {
            BareUnit::Millis => "milliseconds",
            BareUnit::Seconds => "seconds",
        };
        write!(f, "expected a duration such as 500ms, 5s, 2m or 1h, or a bare number of {bare}")
    }
}

impl std::error::Error for DurationError {}

/// Parses `text` as a duration; a bare number is read in `bare` units.
///
/// # Errors
/// [`DurationError`] when the text is empty, negative, not a number, not finite, has an unknown
/// unit or overflows a [`Duration`].
pub fn parse(text: &str, bare: BareUnit) -> Result<Duration, DurationError> {
    let err = DurationError { bare };
    let s = text.trim();
    let (number, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else if let Some(n) = s.strip_suffix('h') {
        (n, 3600.0)
    } else {
        match bare {
            BareUnit::Millis => (s, 1e-3),
            BareUnit::Seconds => (s, 1.0),
        }
    };
    let number = number.trim();
    // `f64::from_str` also takes `inf`, `nan` and signs: only plain decimals are durations.
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(err);
    }
    // Whole milliseconds stay exact (no float rounding) for the common bare-integer case.
    if scale == 1e-3 {
        if let Ok(ms) = number.parse::<u64>() {
            return Ok(Duration::from_millis(ms));
        }
    }
    let value: f64 = number.parse().map_err(|_| err.clone())?;
    Duration::try_from_secs_f64(value * scale).map_err(|_| err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_numbers() {
        assert_eq!(parse("1500ms", BareUnit::Seconds), Ok(Duration::from_millis(1500)));
        assert_eq!(parse(" 1.5 s ", BareUnit::Millis), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2m", BareUnit::Millis), Ok(Duration::from_secs(120)));
        assert_eq!(parse("0.5h", BareUnit::Millis), Ok(Duration::from_secs(1800)));
        assert_eq!(parse("1500", BareUnit::Millis), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("2", BareUnit::Seconds), Ok(Duration::from_secs(2)));
        assert_eq!(parse("0", BareUnit::Millis), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_what_is_not_a_plain_non_negative_decimal() {
        for bad in ["", "ms", "-5s", "+5s", "5 days", "inf", "nan", "1e3", "5x", "1.2.3s", "99999999999999999999h"] {
            let err = parse(bad, BareUnit::Millis).expect_err(bad);
            assert!(err.to_string().contains("bare number of milliseconds"), "{bad}: {err}");
        }
    }
}
