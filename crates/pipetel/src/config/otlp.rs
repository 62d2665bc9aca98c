//! OTLP settings: the generic scope and one per signal, resolved per signal in the documented
//! order (the signal's own value, then the generic one, then the default).

use std::path::PathBuf;
use std::time::Duration;

use std::fmt;

use super::rule::{certificate_and_key, scope, PerSignal, Set, Show, Slot, REDACTED};
use super::syntax::schemeless;
use super::table::{Defaults, Slots, OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE, OTEL_EXPORTER_OTLP_CLIENT_KEY};
use super::values::{OtlpCompression, OtlpProtocol, Signal};
use pipetel_core::settings::{ConfigError, Sourced};

/// Fully resolved OTLP settings of one signal. Its `Debug` output shows the headers' names,
/// never their values, and the endpoint without its URL's userinfo.
#[derive(Clone, PartialEq)]
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

impl fmt::Debug for OtlpTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self.headers.iter().map(|(name, _)| (name.as_str(), REDACTED)).collect();
        f.debug_struct("OtlpTarget")
            .field("endpoint", &crate::redact::redact_url(&self.endpoint))
            .field("protocol", &self.protocol)
            .field("headers", &headers)
            .field("timeout", &self.timeout)
            .field("compression", &self.compression)
            .field("tls", &self.tls)
            .finish()
    }
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
fn pick<T: Show>(slot: &PerSignal<T>, signal: Signal) -> Result<Option<&Set<T>>, ConfigError> {
    let (own, generic) = (&slot[scope(signal)], &slot[0]);
    own.checked()?;
    generic.checked()?;
    Ok(own.as_ref().or(generic.as_ref()))
}

fn sourced<T: Clone>(set: &Set<T>) -> Sourced<T> {
    Sourced::new(set.value.clone(), set.origin.clone())
}

/// Resolves `signal`'s target from its own scope over the generic one, checking every value
/// it uses (an error names where the value came from).
pub(crate) fn target(s: &Slots, signal: Signal) -> Result<OtlpTarget, ConfigError> {
    let protocol = pick(&s.otlp_protocol, signal)?.map_or(const { Defaults::otlp_protocol.get() }, |s| s.value);
    let insecure = pick(&s.otlp_insecure, signal)?.map_or(const { Defaults::otlp_insecure.get() }, |s| s.value);
    pick(&s.otlp_endpoint, signal)?;
    let endpoint = match (&s.otlp_endpoint[scope(signal)], &s.otlp_endpoint[0]) {
        (Some(e), _) => with_scheme(e, protocol, insecure)?,
        (None, Some(base)) => match protocol {
            OtlpProtocol::Grpc => with_scheme(base, protocol, insecure)?,
            OtlpProtocol::HttpProtobuf => {
                format!("{}{}", with_scheme(base, protocol, insecure)?.trim_end_matches('/'), signal.path())
            }
        },
        (None, None) => match protocol {
            OtlpProtocol::Grpc => Defaults::otlp_endpoint.otherwise().to_string(),
            OtlpProtocol::HttpProtobuf => format!("{}{}", Defaults::otlp_endpoint.get(), signal.path()),
        },
    };
    Ok(OtlpTarget {
        endpoint,
        protocol,
        headers: pick(&s.otlp_headers, signal)?.map(|s| s.value.clone()).unwrap_or_default(),
        timeout: pick(&s.otlp_timeout, signal)?.map_or(const { Defaults::otlp_timeout.get() }, |s| s.value),
        compression: pick(&s.otlp_compression, signal)?.map_or(const { Defaults::otlp_compression.get() }, |s| s.value),
        tls: tls(s, signal)?,
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
            crate::redact::redact_url(text),
            "an OTLP/HTTP endpoint needs its scheme (http:// or https://); only gRPC takes host:port",
        )),
    }
}

/// The CA and the client identity; a client certificate without its key (or the reverse) is an
/// error naming the one that was given.
fn tls(s: &Slots, signal: Signal) -> Result<OtlpTls, ConfigError> {
    let certificate = pick(&s.otlp_certificate, signal)?.map(sourced);
    let client = certificate_and_key(
        pick(&s.otlp_client_certificate, signal)?,
        pick(&s.otlp_client_key, signal)?,
        format!("an mTLS client certificate needs its key too ({OTEL_EXPORTER_OTLP_CLIENT_KEY} or otlp.client_key, or the signal's own)"),
        format!("an mTLS client key needs its certificate too ({OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE} or otlp.client_certificate, or the signal's own)"),
    )?
    .map(|(certificate, key)| (sourced(certificate), sourced(key)));
    Ok(OtlpTls { certificate, client })
}
