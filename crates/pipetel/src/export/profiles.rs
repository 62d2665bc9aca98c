//! Profiles to the collector: the profiler's aggregated lines as one OTLP profiles request per
//! call, over HTTP/protobuf (`POST …/v1development/profiles`) or gRPC
//! (`opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export`), with the
//! settings every OTLP signal has (`OTEL_EXPORTER_OTLP_PROFILES_*` over the generic ones).
//!
//! The messages are opentelemetry-proto v1.10.0's `v1development` profiles, which the collector
//! release the tests run (v0.161.0: pdata v1.67.0, `go.opentelemetry.io/proto/slim/otlp/profiles/v1development`
//! v0.4.0) decodes field for field; it takes them with its `service.profilesSupport` feature gate on.
//!
//! Profiles go only where an endpoint for them was set ([`ProfilesExporter::from_config`]), one
//! attempt per call, bounded by the export timeout: a lost window is a gap in a flame graph, not a
//! wrong total, so nothing is queued or retried.

#[cfg(feature = "otlp")]
mod encode;

use crate::config::Settings;
use crate::error::InitError;
use pipetel_rows::profile::ProfileLine;

#[cfg(feature = "otlp")]
use transport::Transport;

/// Sends profile lines to the configured OTLP endpoint.
pub(crate) struct ProfilesExporter {
    /// The endpoint as configured, its URL's userinfo left out: what errors name.
    endpoint: String,
    #[cfg(feature = "otlp")]
    transport: Transport,
}

impl std::fmt::Debug for ProfilesExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfilesExporter").field("endpoint", &self.endpoint).finish_non_exhaustive()
    }
}

impl ProfilesExporter {
    /// The exporter of the configured profiles endpoint; `None` when no OTLP endpoint applies to
    /// profiles (neither `OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT` nor the generic one is set) or
    /// the SDK is disabled.
    ///
    /// # Errors
    /// A TLS file that cannot be read or a header that cannot be sent ([`InitError::Exporter`] or
    /// [`InitError::Config`], naming it), or a build without the `otlp` feature
    /// ([`InitError::FeatureDisabled`]).
    pub(crate) fn from_config(settings: &Settings) -> Option<Result<Self, InitError>> {
        if settings.sdk_disabled {
            return None;
        }
        let target = settings.profiles_otlp.as_ref()?;
        #[cfg(feature = "otlp")]
        {
            Some(Transport::new(target).map(|transport| ProfilesExporter {
                endpoint: crate::redact::redact_url(&target.endpoint).into_owned(),
                transport,
            }))
        }
        #[cfg(not(feature = "otlp"))]
        {
            let _ = target;
            Some(Err(InitError::FeatureDisabled { exporter: "otlp", feature: "otlp" }))
        }
    }

    /// Sends `lines` as one request for `resource` (nothing for no line). Blocking, bounded by
    /// the export timeout; meant for the profiler's own thread, and safe on an async runtime's
    /// (the request then goes from a thread of its own). Never panics.
    ///
    /// # Errors
    /// What went wrong, naming the endpoint: the connection, the collector's answer (its status
    /// and message), or profiles the collector says it rejected.
    pub(crate) fn export(&self, resource: &opentelemetry_sdk::Resource, lines: &[ProfileLine]) -> Result<(), String> {
        if lines.is_empty() {
            return Ok(());
        }
        #[cfg(feature = "otlp")]
        {
            let request = encode::request(resource, lines);
            if request.resource_profiles.iter().all(|r| r.scope_profiles.iter().all(|s| s.profiles.is_empty())) {
                return Ok(());
            }
            let sent = off_runtime(|| self.transport.send(request)).and_then(|r| r);
            sent.map_err(|cause| format!("profiles export to {} failed: {cause}", self.endpoint))
        }
        #[cfg(not(feature = "otlp"))]
        {
            let _ = resource;
            Err(format!("profiles export to {} failed: pipetel is built without its `otlp` feature", self.endpoint))
        }
    }
}

/// Sends `lines` once for `resource` to the profiles endpoint `config` names, as the profiler does
/// after each aggregation window.
///
/// # Errors
/// A configuration without an endpoint for profiles, or one that does not resolve; then what
/// went wrong, naming the endpoint: the connection, the collector's answer (its status and
/// message), or profiles the collector says it rejected.
#[cfg(feature = "testing")]
pub fn export_profiles(
    config: &crate::Config,
    resource: &opentelemetry_sdk::Resource,
    lines: &[ProfileLine],
) -> Result<(), String> {
    let settings = config.resolve().map_err(|e| e.to_string())?;
    match ProfilesExporter::from_config(&settings) {
        None => {
            Err("no OTLP endpoint applies to profiles (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT or the generic one)".into())
        }
        Some(Err(e)) => Err(e.to_string()),
        Some(Ok(exporter)) => exporter.export(resource, lines),
    }
}

/// Runs `send` here, or on a thread of its own when this thread drives an async runtime (where
/// blocking on a request would panic).
#[cfg(feature = "otlp")]
fn off_runtime<T: Send>(send: impl FnOnce() -> T + Send) -> Result<T, String> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Ok(send());
    }
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("pipetel-profiles-export".into())
            .spawn_scoped(scope, send)
            .map_err(|e| format!("cannot start the thread that sends: {e}"))?
            .join()
            .map_err(|_| "the request panicked".to_string())
    })
}

#[cfg(all(test, feature = "otlp"))]
mod tests {
    use super::*;
    use crate::config::{Config, MetricExporter, OtlpProtocol, TraceExporter};
    use crate::config::{
        OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL,
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, OTEL_SDK_DISABLED,
    };

    fn config(vars: &[(&str, &str)]) -> Config {
        Config::from_lookup(|name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())).expect("valid")
    }

    fn target(vars: &[(&str, &str)]) -> Option<crate::config::OtlpTarget> {
        config(vars).resolve().expect("resolves").profiles_otlp
    }

    #[test]
    fn profiles_go_only_where_an_endpoint_for_them_is_set() {
        assert_eq!(target(&[]), None, "no default endpoint for profiles");
        assert_eq!(target(&[(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, "http://c:4318/v1/traces")]), None);
        let generic = target(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318/")]).expect("generic");
        assert_eq!(generic.endpoint, "http://c:4318/v1development/profiles");
        let own = target(&[
            (OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318"),
            (OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, "http://p:4317"),
            (OTEL_EXPORTER_OTLP_PROFILES_PROTOCOL, "grpc"),
        ])
        .expect("own");
        assert_eq!((own.endpoint.as_str(), own.protocol), ("http://p:4317", OtlpProtocol::Grpc));
        let disabled = config(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318"), (OTEL_SDK_DISABLED, "true")]);
        assert!(ProfilesExporter::from_config(&disabled.resolve().expect("resolves")).is_none());
        let enabled = config(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318")]).resolve().expect("resolves");
        let exporter = ProfilesExporter::from_config(&enabled).expect("an endpoint").expect("built");
        assert_eq!(exporter.export(&opentelemetry_sdk::Resource::builder_empty().build(), &[]), Ok(()));
    }

    #[test]
    fn the_profiles_own_endpoint_leaves_the_other_signals_alone() {
        let c = config(&[(OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT, "http://p:4318/v1development/profiles")]);
        assert_eq!(c.metrics_exporters(), [MetricExporter::Prometheus]);
        assert_eq!(c.traces_exporters(), Vec::<TraceExporter>::new());
        let generic = config(&[(OTEL_EXPORTER_OTLP_ENDPOINT, "http://c:4318")]);
        assert_eq!(generic.metrics_exporters(), [MetricExporter::Otlp], "the generic one still turns OTLP on");
    }
}

/// The two wire protocols, each with what one request needs.
#[cfg(feature = "otlp")]
mod transport {
    use std::time::Duration;

    use opentelemetry_proto::tonic::collector::profiles::v1development::profiles_service_client::ProfilesServiceClient;
    use opentelemetry_proto::tonic::collector::profiles::v1development::{
        ExportProfilesPartialSuccess, ExportProfilesServiceRequest, ExportProfilesServiceResponse,
    };
    use prost::Message;
    use tonic::codec::CompressionEncoding;
    use tonic::metadata::MetadataMap;
    use tonic::transport::Channel;

    use crate::config::{OtlpCompression, OtlpProtocol, OtlpTarget, Signal};
    use crate::error::InitError;
    use crate::export::otlp::client::{blocking_client, chain, error, is_https, metadata, tonic_tls};

    pub(super) enum Transport {
        Http { client: reqwest::blocking::Client, url: String, headers: http::HeaderMap, compression: OtlpCompression },
        // Boxed: a channel and a runtime are much larger than the HTTP variant.
        Grpc(Box<Grpc>),
    }

    /// A lazily connected channel driven by a one-thread runtime of its own: the profiler's
    /// thread blocks on each request, and no other runtime has to exist.
    pub(super) struct Grpc {
        runtime: Option<tokio::runtime::Runtime>,
        client: ProfilesServiceClient<Channel>,
        metadata: MetadataMap,
        timeout: Duration,
    }

    impl Drop for Grpc {
        /// Dropping a runtime blocks, which panics on an async runtime's thread; this does not.
        fn drop(&mut self) {
            if let Some(runtime) = self.runtime.take() {
                runtime.shutdown_background();
            }
        }
    }

    impl Transport {
        pub(super) fn new(target: &OtlpTarget) -> Result<Self, InitError> {
            match target.protocol {
                OtlpProtocol::HttpProtobuf => {
                    let mut headers = metadata(Signal::Profiles, &target.headers)?.into_headers();
                    headers
                        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/x-protobuf"));
                    Ok(Transport::Http {
                        client: blocking_client(target, Signal::Profiles)?,
                        url: target.endpoint.clone(),
                        headers,
                        compression: target.compression,
                    })
                }
                OtlpProtocol::Grpc => Ok(Transport::Grpc(Box::new(Grpc::new(target)?))),
            }
        }

        /// One request; the error is the cause alone (the caller names the endpoint).
        pub(super) fn send(&self, request: ExportProfilesServiceRequest) -> Result<(), String> {
            match self {
                Transport::Http { client, url, headers, compression } => {
                    let body = compress(request.encode_to_vec(), *compression)?;
                    let mut headers = headers.clone();
                    if let Some(encoding) = content_encoding(*compression) {
                        headers.insert(http::header::CONTENT_ENCODING, http::HeaderValue::from_static(encoding));
                    }
                    let response = client.post(url).headers(headers).body(body).send().map_err(|e| chain(&e))?;
                    let status = response.status();
                    let bytes = response.bytes().map_err(|e| format!("reading the answer: {}", chain(&e)))?;
                    if !status.is_success() {
                        return Err(format!("the collector answered {status}{}", rpc_message(&bytes)));
                    }
                    // An empty body is a full success; one that does not decode says nothing more.
                    let answer = ExportProfilesServiceResponse::decode(bytes.as_ref()).unwrap_or_default();
                    partial(answer.partial_success)
                }
                Transport::Grpc(grpc) => grpc.send(request),
            }
        }
    }

    impl Grpc {
        fn new(target: &OtlpTarget) -> Result<Self, InitError> {
            let signal = Signal::Profiles;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .thread_name("pipetel-profiles")
                .build()
                .map_err(InitError::Runtime)?;
            let mut endpoint = tonic::transport::Endpoint::from_shared(target.endpoint.clone())
                .map_err(|e| error(signal, format!("{}: {e}", crate::redact::redact_url(&target.endpoint))))?
                .timeout(target.timeout)
                .connect_timeout(target.timeout);
            if is_https(target) {
                endpoint = endpoint.tls_config(tonic_tls(target, signal)?).map_err(|e| error(signal, chain(&e)))?;
            }
            // The channel's connection task runs on the runtime current while it is made.
            let channel = {
                let _entered = runtime.enter();
                endpoint.connect_lazy()
            };
            let mut client = ProfilesServiceClient::new(channel);
            match target.compression {
                OtlpCompression::None => {}
                OtlpCompression::Gzip => client = client.send_compressed(CompressionEncoding::Gzip),
                OtlpCompression::Zstd => client = client.send_compressed(CompressionEncoding::Zstd),
            }
            Ok(Grpc {
                runtime: Some(runtime),
                client,
                metadata: metadata(signal, &target.headers)?,
                timeout: target.timeout,
            })
        }

        fn send(&self, request: ExportProfilesServiceRequest) -> Result<(), String> {
            let Some(runtime) = &self.runtime else { return Err("the exporter is shut down".to_string()) };
            let mut request = tonic::Request::new(request);
            *request.metadata_mut() = self.metadata.clone();
            let mut client = self.client.clone();
            let answer = runtime.block_on(async { tokio::time::timeout(self.timeout, client.export(request)).await });
            match answer {
                Err(_) => Err(format!("no answer within {:?}", self.timeout)),
                Ok(Err(status)) => Err(format!("{:?}: {}", status.code(), grpc_cause(&status))),
                Ok(Ok(response)) => partial(response.into_inner().partial_success),
            }
        }
    }

    /// A status's message and, for a transport failure, its cause.
    fn grpc_cause(status: &tonic::Status) -> String {
        let message = status.message();
        match std::error::Error::source(status) {
            Some(source) if !message.contains(&source.to_string()) => format!("{message}: {}", chain(source)),
            _ => message.to_string(),
        }
    }

    /// A partial success that rejected profiles is a failure; a warning alone is not.
    fn partial(partial: Option<ExportProfilesPartialSuccess>) -> Result<(), String> {
        match partial {
            Some(p) if p.rejected_profiles > 0 => {
                Err(format!("the collector rejected {} profile(s): {}", p.rejected_profiles, p.error_message))
            }
            _ => Ok(()),
        }
    }

    fn content_encoding(compression: OtlpCompression) -> Option<&'static str> {
        match compression {
            OtlpCompression::None => None,
            OtlpCompression::Gzip => Some("gzip"),
            OtlpCompression::Zstd => Some("zstd"),
        }
    }

    fn compress(body: Vec<u8>, compression: OtlpCompression) -> Result<Vec<u8>, String> {
        use std::io::Write;
        match compression {
            OtlpCompression::None => Ok(body),
            OtlpCompression::Gzip => {
                let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                encoder.write_all(&body).and_then(|()| encoder.finish()).map_err(|e| format!("gzip: {e}"))
            }
            OtlpCompression::Zstd => zstd::bulk::compress(&body, 0).map_err(|e| format!("zstd: {e}")),
        }
    }

    /// The `google.rpc.Status` an OTLP/HTTP error answer carries.
    #[derive(Clone, PartialEq, prost::Message)]
    struct RpcStatus {
        #[prost(int32, tag = "1")]
        code: i32,
        #[prost(string, tag = "2")]
        message: String,
    }

    /// `: <message>` of an error answer's status (or its text), empty when it has none.
    fn rpc_message(body: &[u8]) -> String {
        let message = match RpcStatus::decode(body) {
            Ok(status) if !status.message.is_empty() => status.message,
            _ => String::from_utf8_lossy(body).trim().chars().take(300).collect(),
        };
        if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn error_answers_say_why() {
            let status = RpcStatus { code: 3, message: "bad profile".into() }.encode_to_vec();
            assert_eq!(rpc_message(&status), ": bad profile");
            assert_eq!(rpc_message(b""), "");
            assert_eq!(partial(None), Ok(()));
            let warned = ExportProfilesPartialSuccess { rejected_profiles: 0, error_message: "slow down".into() };
            assert_eq!(partial(Some(warned)), Ok(()));
            let rejected = ExportProfilesPartialSuccess { rejected_profiles: 2, error_message: "too old".into() };
            assert_eq!(partial(Some(rejected)), Err("the collector rejected 2 profile(s): too old".into()));
        }

        #[test]
        fn bodies_are_compressed_as_asked() {
            let body = vec![7_u8; 4096];
            assert_eq!(compress(body.clone(), OtlpCompression::None), Ok(body.clone()));
            let gz = compress(body.clone(), OtlpCompression::Gzip).expect("gzip");
            let mut back = Vec::new();
            std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz.as_slice()), &mut back).expect("gunzip");
            assert_eq!(back, body);
            let zs = compress(body.clone(), OtlpCompression::Zstd).expect("zstd");
            assert_eq!(zstd::bulk::decompress(&zs, body.len()).expect("unzstd"), body);
        }
    }
}
