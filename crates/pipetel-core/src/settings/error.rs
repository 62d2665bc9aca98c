//! What went wrong with a setting, and where its value came from.

use std::fmt;
use std::path::PathBuf;

/// Where a setting's value came from: the default, a `Config::with_*` call, an environment
/// variable or a key of the configuration file. Errors name it, so a bad value can be found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Origin {
    /// Nothing set it: the documented default.
    #[default]
    Default,
    /// A value set in code through the named `Config::with_*` method.
    Code(&'static str),
    /// An environment variable.
    Env(String),
    /// A key of the configuration file.
    File {
        /// The file.
        path: PathBuf,
        /// The dotted key, e.g. `otlp.traces.endpoint`.
        key: String,
    },
    /// A setting given in code by its file key (`Config::with_setting`),
    /// e.g. a keyword argument of the Python package's `init`.
    Setting(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => f.write_str("the default"),
            Origin::Code(setter) => write!(f, "Config::{setter}"),
            Origin::Env(name) => write!(f, "environment variable {name}"),
            Origin::File { path, key } => write!(f, "key `{key}` in {}", path.display()),
            Origin::Setting(key) => write!(f, "setting `{key}`"),
        }
    }
}

/// A configuration error: always names the variable, key or setter and the offending value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A value could not be parsed or is out of range.
    #[error("invalid value {value:?} for {origin}: {reason}")]
    InvalidValue {
        /// Where the value came from.
        origin: Origin,
        /// The value as given (`<redacted>` for credentials, and for the userinfo of a URL).
        value: String,
        /// Why it was refused.
        reason: String,
    },
    /// The configuration file could not be read.
    #[error("cannot read configuration file {}: {source}", path.display())]
    FileRead {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is not valid TOML or has an unknown key.
    #[error("malformed configuration file {}: {message}", path.display())]
    FileSyntax {
        /// The file.
        path: PathBuf,
        /// The parser's message, naming the key (and the position when the TOML is malformed).
        message: String,
    },
    /// `Config::with_setting` was given a key the configuration
    /// file does not have.
    #[error("unknown setting `{key}`: expected a configuration file key, dotted or with each `.` written `_` (`prometheus_port`); its sections and keys: {expected}")]
    UnknownSetting {
        /// The key as given.
        key: String,
        /// The file's top-level keys and sections.
        expected: String,
    },
}

/// A resolved value with where it came from, for errors raised when it is used (a file that
/// cannot be opened, say).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub origin: Origin,
}

impl<T> Sourced<T> {
    /// `value`, which came from `origin`.
    pub fn new(value: T, origin: Origin) -> Self {
        Sourced { value, origin }
    }

    /// An error about this value, naming its origin.
    pub fn invalid(&self, value: impl Into<String>, reason: impl Into<String>) -> ConfigError {
        ConfigError::invalid(self.origin.clone(), value, reason)
    }
}

impl ConfigError {
    /// A refused value: `value` from `origin`, refused for `reason`. The value and the reason
    /// lose the userinfo of any URL they quote (a credential).
    pub fn invalid(origin: Origin, value: impl Into<String>, reason: impl Into<String>) -> Self {
        let (value, reason) = (value.into(), reason.into());
        let value = super::redact::redact_urls_in(&value).into_owned();
        let reason = super::redact::redact_urls_in(&reason).into_owned();
        ConfigError::InvalidValue { origin, value, reason }
    }
}
