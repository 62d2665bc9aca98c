//! OTLP settings: the generic scope and one per signal, resolved per signal in the documented
//! order (the signal's own value, then the generic one, then the default).

use std::time::Duration;

use super::error::ConfigError;
use super::parse::{Set, Slot};
use super::values::{OtlpCompression, OtlpProtocol, Signal};
use super::vars::{DEFAULT_OTLP_GRPC_ENDPOINT, DEFAULT_OTLP_HTTP_ENDPOINT, DEFAULT_OTLP_TIMEOUT};

/// OTLP settings of one scope (all signals, or one signal). Unset fields fall through.
#[derive(Debug, Clone, Default)]
pub(crate) struct OtlpScope {
    pub(crate) endpoint: Option<Set<String>>,
    pub(crate) protocol: Option<Set<OtlpProtocol>>,
    pub(crate) headers: Option<Set<Vec<(String, String)>>>,
    pub(crate) timeout: Option<Set<Duration>>,
    pub(crate) compression: Option<Set<OtlpCompression>>,
}

/// Fully resolved OTLP settings of one signal.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpTarget {
    /// The URL requests go to (for HTTP, including the signal's path).
    pub endpoint: String,
    /// The wire protocol.
    pub protocol: OtlpProtocol,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<(String, String)>,
    /// The export timeout.
    pub timeout: Duration,
    /// Request compression.
    pub compression: OtlpCompression,
}

/// Resolves `signal`'s target from its own scope over the generic one, checking every value
/// it uses (an error names where the value came from).
pub(crate) fn target(generic: &OtlpScope, own: &OtlpScope, signal: Signal) -> Result<OtlpTarget, ConfigError> {
    let protocol =
        own.protocol.checked()?.or(generic.protocol.checked()?).copied().unwrap_or(OtlpProtocol::HttpProtobuf);
    let endpoint = match (own.endpoint.checked()?, generic.endpoint.checked()?) {
        (Some(e), _) => e.trim().to_string(),
        (None, Some(base)) => match protocol {
            OtlpProtocol::Grpc => base.trim().to_string(),
            OtlpProtocol::HttpProtobuf => format!("{}{}", base.trim().trim_end_matches('/'), signal.path()),
        },
        (None, None) => match protocol {
            OtlpProtocol::Grpc => DEFAULT_OTLP_GRPC_ENDPOINT.to_string(),
            OtlpProtocol::HttpProtobuf => format!("{DEFAULT_OTLP_HTTP_ENDPOINT}{}", signal.path()),
        },
    };
    Ok(OtlpTarget {
        endpoint,
        protocol,
        headers: own.headers.checked()?.or(generic.headers.checked()?).cloned().unwrap_or_default(),
        timeout: own.timeout.checked()?.or(generic.timeout.checked()?).copied().unwrap_or(DEFAULT_OTLP_TIMEOUT),
        compression: own
            .compression
            .checked()?
            .or(generic.compression.checked()?)
            .copied()
            .unwrap_or(OtlpCompression::None),
    })
}
