//! The value types of the settings, each read from its text with [`FromStr`].

use std::str::FromStr;

/// Why a text is not a value of a setting's type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ParseValueError {
    reason: String,
}

impl ParseValueError {
    /// An error saying `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        ParseValueError { reason: reason.into() }
    }
}

/// Declares a value type named by words (`Copy`, `Eq`, `Debug`, non-exhaustive), with its
/// `FromStr`: the text, trimmed and in any case, is one of a variant's names (`Variant = "name" |
/// "alias"`); any other text is the error after `else` (a message, or an error type and how it
/// is made from the text). Its `Display` writes the variant's first name.
#[doc(hidden)]
#[macro_export]
macro_rules! __named_values {
    (
        $(#[$meta:meta])*
        pub enum $ty:ident { $($(#[$vmeta:meta])* $variant:ident = $($name:literal)|+,)+ }
        else $expected:literal
    ) => {
        $crate::__named_values! {
            $(#[$meta])*
            pub enum $ty { $($(#[$vmeta])* $variant = $($name)|+,)+ }
            else (ParseValueError) |text| ParseValueError::new($expected)
        }
    };
    (
        $(#[$meta:meta])*
        pub enum $ty:ident { $($(#[$vmeta:meta])* $variant:ident = $($name:literal)|+,)+ }
        else ($err:ty) |$text:ident| $error:expr
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[non_exhaustive]
        pub enum $ty { $($(#[$vmeta])* $variant,)+ }

        impl FromStr for $ty {
            type Err = $err;

            /// One of the variants' names, in any case.
            fn from_str($text: &str) -> Result<Self, Self::Err> {
                match $text.trim().to_ascii_lowercase().as_str() {
                    $($($name)|+ => Ok(Self::$variant),)+
                    _ => Err($error),
                }
            }
        }

        impl ::std::fmt::Display for $ty {
            /// The variant's first name: the text [`FromStr`] reads back as it.
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(match self {
                    $(Self::$variant => $crate::__named_values!(@first $($name)|+),)+
                })
            }
        }
    };
    (@first $first:literal $(| $rest:literal)*) => {
        $first
    };
}
pub use crate::__named_values as named_values;

named_values! {
    /// Which measurements may carry an exemplar (`OTEL_METRICS_EXEMPLAR_FILTER`).
    #[derive(Default)]
    pub enum ExemplarFilter {
        /// Every measurement of a histogram that keeps exemplars; those made inside a span carry its
        /// trace and span ids, sampled or not.
        AlwaysOn = "always_on",
        /// None: no exemplar is kept.
        AlwaysOff = "always_off",
        /// Measurements made inside a sampled span (the default).
        #[default]
        TraceBased = "trace_based",
    }
    else "expected `always_on`, `always_off` or `trace_based`"
}

named_values! {
    /// The live progress display on stderr (`PIPETEL_PROGRESS`): a line per running stage, and each
    /// stage's summary line when it ends.
    #[derive(Default)]
    pub enum ProgressMode {
        /// No display (the default).
        #[default]
        Off = "false" | "0" | "no" | "off",
        /// On when stderr is a terminal, off otherwise (`true`, `1`, `yes`, `on`, `auto`).
        Auto = "true" | "1" | "yes" | "on" | "auto",
        /// On even when stderr is not a terminal (`always`): for terminals the check misses, and tests.
        Always = "always",
    }
    else "expected `true`, `false` or `always`"
}

named_values! {
    /// The sampling profiler (`PIPETEL_PROFILE`).
    #[derive(Default)]
    pub enum ProfileMode {
        /// No profiler (the default): nothing is sampled and shards register nothing.
        #[default]
        Off = "off",
        /// CPU samples at `PIPETEL_PROFILE_HZ`, labelled with stage, shard, phase and span.
        Cpu = "cpu",
    }
    else "expected `off` or `cpu`"
}

named_values! {
    /// What a stalled shard gets (`PIPETEL_STALL_ACTION`).
    #[derive(Default)]
    pub enum StallAction {
        /// A `stalled` worker row, a span event and a count; the shard runs on (the default).
        #[default]
        Report = "report",
        /// As `report`, then the shard ends as failed with reason `stalled for <N> s`.
        Fail = "fail",
    }
    else "expected `report` or `fail`"
}

named_values! {
    /// Which shards have their own series on the worker families (`PIPETEL_SHARD_METRICS`).
    #[derive(Default)]
    pub enum ShardMetrics {
        /// Running shards only, at most 32 per stage (the longest running): finished shards are
        /// in the stage's distribution families and rows (the default).
        #[default]
        Running = "running",
        /// Every shard until its stage's retention ends (the cardinality limit still applies).
        All = "all",
        /// None: the stage families, the distribution and the rows carry the shards.
        Off = "off" | "false" | "none",
    }
    else "expected `running`, `all` or `off`"
}
