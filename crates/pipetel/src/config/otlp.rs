//! OTLP settings: the generic scope and one per signal, resolved per signal in the documented
//! order (the signal's own value, then the generic one, then the default).

use std::path::PathBuf;
use std::time::Duration;

use super::error::ConfigError;
use super::parse::{schemeless, Set, Slot};
use super::settings::Sourced;
use super::values::{OtlpCompression, OtlpProtocol, Signal};
use super::vars::{
    DEFAULT_OTLP_GRPC_ENDPOINT, DEFAULT_OTLP_HTTP_ENDPOINT, DEFAULT_OTLP_TIMEOUT,
    OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, OTEL_EXPORTER_OTLP_CLIENT_KEY,
};

/// OTLP settings of one scope (all signals, or one signal). Unset fields fall through.
#[derive(Debug, Clone, Default)]
pub(crate) struct OtlpScope {
    pub(crate) endpoint: Option<Set<String>>,
    pub(crate) protocol: Option<Set<OtlpProtocol>>,
    pub(crate) headers: Option<Set<Vec<(String, String)>>>,
    pub(crate) timeout: Option<Set<Duration>>,
    pub(crate) compression: Option<Set<OtlpCompression>>,
    pub(crate) certificate: Option<Set<PathBuf>>,
    pub(crate) client_certificate: Option<Set<PathBuf>>,
    pub(crate) client_key: Option<Set<PathBuf>>,
    pub(crate) insecure: Option<Set<bool>>,
}

/// Fully resolved OTLP settings of one signal.
#[derive(Debug, Clone, PartialEq)]
pub struct OtlpTarget {
    /// The URL requests go to (for HTTP, including the signal's path; a schemeless gRPC
    /// endpoint has been given its scheme).
    pub endpoint: String,
    /// The wire protocol.
    pub protocol: OtlpProtocol,
    /// Extra request headers (gRPC metadata).
    pub headers: Vec<(String, String)>,
    /// The export timeout.
    pub timeout: Duration,
    /// Request compression.
    pub compression: OtlpCompression,
    /// How an `https://` endpoint is trusted and how this client proves itself.
    pub tls: OtlpTls,
}

/// TLS settings of one signal's OTLP exporter, used when its endpoint is `https://`. Each path
/// keeps where it was given, so a file that turns unreadable later is reported against it.
#[derive(Debug, Clone, PartialEq, Default)]
#[non_exhaustive]
pub struct OtlpTls {
    /// PEM CA certificates that verify the collector; they replace the system roots. `None`:
    /// the system roots.
    pub certificate: Option<Sourced<PathBuf>>,
    /// PEM client certificate (chain) and its private key, for mTLS; always both or neither.
    pub client: Option<(Sourced<PathBuf>, Sourced<PathBuf>)>,
}

/// The first set value of two scopes (the signal's own, then the generic one), both checked.
fn pick<'a, T: super::parse::Show>(
    own: &'a Option<Set<T>>,
    generic: &'a Option<Set<T>>,
) -> Result<Option<&'a Set<T>>, ConfigError> {
    own.checked()?;
    generic.checked()?;
    Ok(own.as_ref().or(generic.as_ref()))
}

fn sourced<T: Clone>(set: &Set<T>) -> Sourced<T> {
    Sourced { value: set.value.clone(), origin: set.origin.clone() }
}

/// Resolves `signal`'s target from its own scope over the generic one, checking every value
/// it uses (an error names where the value came from).
pub(crate) fn target(generic: &OtlpScope, own: &OtlpScope, signal: Signal) -> Result<OtlpTarget, ConfigError> {
    let protocol = pick(&own.protocol, &generic.protocol)?.map_or(OtlpProtocol::HttpProtobuf, |s| s.value);
    let insecure = pick(&own.insecure, &generic.insecure)?.is_some_and(|s| s.value);
    own.endpoint.checked()?;
    generic.endpoint.checked()?;
    let endpoint = match (&own.endpoint, &generic.endpoint) {
        (Some(e), _) => with_scheme(e, protocol, insecure)?,
        (None, Some(base)) => match protocol {
            OtlpProtocol::Grpc => with_scheme(base, protocol, insecure)?,
            OtlpProtocol::HttpProtobuf => {
                format!("{}{}", with_scheme(base, protocol, insecure)?.trim_end_matches('/'), signal.path())
            }
        },
        (None, None) => match protocol {
            OtlpProtocol::Grpc => DEFAULT_OTLP_GRPC_ENDPOINT.to_string(),
            OtlpProtocol::HttpProtobuf => format!("{DEFAULT_OTLP_HTTP_ENDPOINT}{}", signal.path()),
        },
    };
    Ok(OtlpTarget {
        endpoint,
        protocol,
        headers: pick(&own.headers, &generic.headers)?.map(|s| s.value.clone()).unwrap_or_default(),
        timeout: pick(&own.timeout, &generic.timeout)?.map_or(DEFAULT_OTLP_TIMEOUT, |s| s.value),
        compression: pick(&own.compression, &generic.compression)?.map_or(OtlpCompression::None, |s| s.value),
        tls: tls(generic, own)?,
    })
}

/// The endpoint as given, or a schemeless `host:port` (gRPC only, as the OTLP spec has it) made
/// `https://` unless the `INSECURE` switch asks for plain text.
fn with_scheme(endpoint: &Set<String>, protocol: OtlpProtocol, insecure: bool) -> Result<String, ConfigError> {
    let text = endpoint.value.trim();
    if !schemeless(text) {
        return Ok(text.to_string());
    }
    match protocol {
        OtlpProtocol::Grpc if insecure => Ok(format!("http://{text}")),
        OtlpProtocol::Grpc => Ok(format!("https://{text}")),
        OtlpProtocol::HttpProtobuf => Err(ConfigError::invalid(
            endpoint.origin.clone(),
            text,
            "an OTLP/HTTP endpoint needs its scheme (http:// or https://); only gRPC takes host:port",
        )),
    }
}

/// The CA and the client identity; a client certificate without its key (or the reverse) is an
/// error naming the one that was given.
fn tls(generic: &OtlpScope, own: &OtlpScope) -> Result<OtlpTls, ConfigError> {
    let certificate = pick(&own.certificate, &generic.certificate)?.map(sourced);
    let client = match (
        pick(&own.client_certificate, &generic.client_certificate)?,
        pick(&own.client_key, &generic.client_key)?,
    ) {
        (Some(cert), Some(key)) => Some((sourced(cert), sourced(key))),
        (Some(cert), None) => {
            let reason = format!("an mTLS client certificate needs its key too ({OTEL_EXPORTER_OTLP_CLIENT_KEY} or otlp.client_key, or the signal's own)");
            return Err(ConfigError::invalid(cert.origin.clone(), cert.value.display().to_string(), reason));
        }
        (None, Some(key)) => {
            let reason = format!("an mTLS client key needs its certificate too ({OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE} or otlp.client_certificate, or the signal's own)");
            return Err(ConfigError::invalid(key.origin.clone(), key.value.display().to_string(), reason));
        }
        (None, None) => None,
    };
    Ok(OtlpTls { certificate, client })
}
